"""Drive a service with a trace: play the cluster that runs what the service starts.

:func:`drive_trace` is `sia shadow`'s loop (and the tests'): it sends the trace's submissions
(``lookahead_s`` ahead of the clock: 0 is a live cluster, whose jobs the service grows into
its arrays one instant at a time; a replay's arrays hold every job), then moves the clock one instant at a time: the earliest of the next submission,
the next end of a job it runs, and the next instant the service announced (``next_time``:
its ticks and wake-ups). At each instant it reports the ends that fall on it and a ``clock``
event, and starts what the service decided, each running its trace duration, so its ends are
those of `sia replay`. ``send(events) -> answer`` is one ``POST /events`` (or the core itself
in-process: :func:`core_sender`).
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import polars as pl

Send = Callable[[list[dict[str, Any]]], dict[str, Any]]


@dataclass
class DriveResult:
    """The starts the service decided (job -> start time, s), which were lent, and counts."""

    starts: dict[str, float] = field(default_factory=dict)
    lent: set[str] = field(default_factory=set)
    requests: int = 0
    events: int = 0
    rebuilds: int | None = None
    grows: int | None = None


class Pacer:
    """Hold a driver to a time scale: ``scale`` seconds of the events' clock per wall-clock
    second (60: an hour of trace in a minute; 1: real time). :meth:`wait` before sending the
    events of an instant sleeps until that instant is due; a driver that falls behind (a slow
    answer) sends at once and does not sleep to catch up."""

    def __init__(self, scale: float, *, sleep: Callable[[float], None] = time.sleep,
                 now: Callable[[], float] = time.monotonic):
        if not scale > 0 or math.isinf(scale):
            raise ValueError(f"time scale must be a finite number > 0, not {scale}")
        self.scale, self._sleep, self._now = float(scale), sleep, now
        self._t0: float | None = None
        self._wall0 = 0.0

    def wait(self, t: float) -> None:
        """Sleep until event time ``t`` (s) is due (the first call sets the origin)."""
        if self._t0 is None:
            self._t0, self._wall0 = t, self._now()
            return
        delay = self._wall0 + (t - self._t0) / self.scale - self._now()
        if delay > 0:
            self._sleep(delay)


def submit_event(row: dict[str, Any]) -> dict[str, Any]:
    """The submit event of one canonical job row (optional contract fields when present)."""
    ev: dict[str, Any] = {"id": f"submit:{row['job_id']}", "type": "submit",
                          "time": float(row["submit_time"]), "job": str(row["job_id"]),
                          "pool": str(row["pool"]), "gpus": int(row["num_gpus"])}
    for key in ("tag", "user"):
        if row.get(key) is not None:
            ev[key] = str(row[key])
    if row.get("time_limit") is not None and math.isfinite(row["time_limit"]):
        ev["time_limit"] = float(row["time_limit"])
    if row.get("preemptible"):
        ev["preemptible"] = True
    return ev


def drive_trace(jobs: pl.DataFrame, send: Send, *, lookahead_s: float = math.inf,
                batch: int = 5000, on_step: Callable[[float], None] | None = None,
                pace: Pacer | None = None) -> DriveResult:
    """Drive the service with ``jobs`` (canonical job table) in drive mode; return its starts.

    ``lookahead_s``: how far past the clock submissions are sent (inf: all at once, as a
    replay's arrays hold them; 0: each at its own instant, as a live cluster would);
    ``batch``: most events per request; ``pace``: send each instant when it is due (None: as
    fast as the service answers).
    """
    jobs = jobs.sort(["submit_time", "job_id"], maintain_order=True)
    rows = jobs.to_dicts()
    duration = {str(r["job_id"]): float(r["duration"]) for r in rows}
    out = DriveResult()
    ends: list[tuple[float, str]] = []
    i, n, clock = 0, len(rows), -math.inf
    service_next: float | None = None

    def post(events: list[dict[str, Any]]) -> dict[str, Any]:
        answer: dict[str, Any] = {}
        for lo in range(0, max(len(events), 1), batch):
            answer = send(events[lo:lo + batch])
            out.requests += 1
        out.events += len(events)
        return answer

    while True:
        t_sub = float(rows[i]["submit_time"]) if i < n else math.inf
        t_end = ends[0][0] if ends else math.inf
        t_svc = service_next if service_next is not None else math.inf
        now = min(t_sub, t_end, t_svc)
        if now == math.inf:
            break
        events: list[dict[str, Any]] = []
        horizon = max(now, now + lookahead_s) if lookahead_s > 0 else now
        while i < n and float(rows[i]["submit_time"]) <= horizon:
            events.append(submit_event(rows[i]))
            i += 1
        while ends and ends[0][0] == now:
            _, job = heapq.heappop(ends)
            events.append({"id": f"finish:{job}", "type": "finish", "time": now, "job": job})
        events.append({"id": f"clock:{now!r}", "type": "clock", "time": now})
        if pace is not None:
            pace.wait(now)
        answer = post(events)
        clock = now
        for d in answer.get("decisions", []):
            job, t = str(d["job"]), float(d["time"])
            if t != clock:
                raise RuntimeError(f"the service started job {job!r} at {t}, not at the clock "
                                   f"{clock}: the driver skipped an instant")
            out.starts[job] = t
            if d.get("lent"):
                out.lent.add(job)
            heapq.heappush(ends, (t + duration[job], job))
        service_next = answer.get("next_time")
        if service_next is not None and service_next <= clock:
            raise RuntimeError(f"the service's next instant {service_next} is not after the "
                               f"clock {clock}")
        if on_step is not None:
            on_step(clock)
    out.rebuilds = answer.get("rebuilds") if n else 0
    out.grows = answer.get("grows") if n else 0
    return out


def core_sender(core: Any) -> Send:
    """A ``send`` that applies events to a :class:`~sia.service.core.ServiceCore` in-process
    (the same answer shape as ``POST /events``)."""
    from sia.service.api_models import answer_of, to_core_events

    def send(events: list[dict[str, Any]]) -> dict[str, Any]:
        evs = core.check(to_core_events(events))
        decided = core.apply(evs)
        return answer_of(core, decided, len(evs), len(events) - len(evs))

    return send


def first_difference(mine: dict[str, float], replay: dict[str, float]) -> str | None:
    """Return a line naming the first job (in replay start order) whose start differs, or None
    when every start is the same."""
    order = sorted(set(mine) | set(replay),
                   key=lambda j: (replay.get(j, math.inf), mine.get(j, math.inf), j))
    for job in order:
        a, b = mine.get(job), replay.get(job)
        if a != b:
            return f"job {job!r}: the service started it {_when(a)}, sia replay {_when(b)}"
    return None


def _when(t: float | None) -> str:
    return "never" if t is None else f"at {t:.3f} s"


def shadow_trace(jobs: pl.DataFrame, pools: pl.DataFrame, send: Send, *,
                 cluster_policy: str = "fcfs", batch: int = 5000,
                 pace: Pacer | None = None) -> DriveResult:
    """Feed a shadow-mode service the schedule the cluster's own scheduler would run.

    The cluster is ``cluster_policy`` (FCFS: the production baseline) replayed on ``jobs``;
    its submissions, starts and ends are sent in time order, each instant closed by a clock
    event, many instants per request (with ``pace``, one request per instant, each when it
    is due). Returns the service's simulated starts.
    """
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.registry import make_policy

    ran = simulate(jobs, pools, make_policy(cluster_policy))
    rows = jobs.join(ran.select("job_id", "start_time", "end_time"), on="job_id").to_dicts()
    timeline: list[tuple[float, int, dict[str, Any]]] = []
    for r in rows:
        job = str(r["job_id"])
        timeline.append((float(r["submit_time"]), 0, submit_event(r)))
        timeline.append((float(r["start_time"]), 1, {"id": f"start:{job}", "type": "start",
                                                      "time": float(r["start_time"]),
                                                      "job": job}))
        timeline.append((float(r["end_time"]), 2, {"id": f"finish:{job}", "type": "finish",
                                                   "time": float(r["end_time"]), "job": job}))
    timeline.sort(key=lambda x: (x[0], x[1], x[2]["id"]))
    out = DriveResult()
    events: list[dict[str, Any]] = []

    def flush() -> None:
        if events:
            answer = send(events)
            out.requests += 1
            out.events += len(events)
            for d in answer.get("decisions", []):
                out.starts[str(d["job"])] = float(d["time"])
                if d.get("lent"):
                    out.lent.add(str(d["job"]))
            events.clear()

    for k, (t, _, ev) in enumerate(timeline):
        events.append(ev)
        last = k + 1 == len(timeline) or timeline[k + 1][0] != t
        if last:
            events.append({"id": f"clock:{t!r}", "type": "clock", "time": t})
            if pace is not None:
                pace.wait(t)
                flush()
            elif len(events) >= batch:
                flush()
    flush()
    return out
