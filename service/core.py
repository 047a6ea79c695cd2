"""The steppable scheduling core behind `sia serve` (DESIGN.md 6.7).

The service runs the replay's own event loop (:class:`sia.scheduler.core.simulator._EventLoop`,
resumed with :meth:`advance` up to the event-time clock) on the replay's own policy objects,
so a day fed in as events and the same day replayed by `sia replay` make the same decisions by
construction. What differs is where events come from:

* arrivals are the ``submit`` events received so far (the trace arrays hold every job the
  service has heard of, the future ones included, exactly as a replay's arrays do: a realistic
  policy reads only jobs that have arrived);
* completions are ``finish`` events: in ``drive`` mode the caller runs the starts the service
  decides and reports their ends; in ``shadow`` mode the cluster runs its own schedule and the
  service keeps a simulated one beside it, each simulated job running as long as the real one
  did (its end is known when the real job finishes: a simulated job whose simulated end has
  passed by then ends at that moment, see :class:`_LiveLoop`);
* the clock moves only on ``clock`` events (a watermark: every event at or before its time
  has been sent), so an instant is decided once, with everything that happens at it.

When jobs arrive that the arrays do not hold, the core *grows* them in place: it appends the
new jobs to the trace arrays (:meth:`~sia.scheduler.core.view.TraceArrays.grow`, buffers that
double when full), to the loop's and the cluster's per-job state
(:meth:`~sia.scheduler.core.simulator._EventLoop.grow`) and to the policy's (its ``grow``
hook: FCFS, MaxMin, SIA with its forecaster), and the loop goes on from where it stood, as a
loop built on the grown arrays would: none of the new jobs has arrived (they are submitted
after the clock), so nothing decided so far could have read them. Growing needs the new jobs to
come after every job the arrays hold in ``(submit, job_id)`` order and a policy (and
forecaster) with a ``grow`` hook that accepts them; otherwise the core *rebuilds*: new arrays
with every job it knows, and the event log re-run from the start on a fresh policy, whose
decisions must be the ones already made (checked: :class:`NonDeterminism` otherwise). Restart
recovery is one such re-run from the durable log (:mod:`sia.service.store`).

Times are seconds on the events' clock (for a replayed trace, the trace's own seconds; for a
live cluster, e.g. Unix time). Durations of unfinished jobs are unknown (NaN in the arrays).
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass, replace
from typing import Any, Literal, NamedTuple

import numpy as np
import polars as pl
from sia.data.errors import SiaError
from sia.data.growth import extend
from sia.data.schema import JOB_SCHEMA, POOL_SCHEMA
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.simulator import (
    Preempt,
    PreemptionConfig,
    _EventLoop,
    build_trace,
)
from sia.scheduler.core.view import Policy

Mode = Literal["drive", "shadow"]
MODES: tuple[str, ...] = ("drive", "shadow")


class EventError(SiaError):
    """An event the service refuses (unknown job or pool, out of order, conflicting id ...).

    ``status`` is the HTTP status the API answers with (409 for conflicts with what the
    service already holds, 422 for events that can never be valid); the message names the
    event (its index in the request and its id).
    """

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.status = status


class NonDeterminism(SiaError):
    """A re-run of the event log decided differently from the first run (a bug: policies must
    be deterministic functions of the events)."""


@dataclass(frozen=True)
class Event:
    """One event as the core applies it (validated fields; times in seconds).

    ``kind``: submit, start, finish, quota or clock. ``job`` for submit/start/finish,
    ``pool`` for submit/quota, ``gpus`` for submit (gang size) and quota (the pool's GPUs).
    """

    id: str
    kind: str
    time: float
    job: str | None = None
    pool: str | None = None
    gpus: int | None = None
    tag: str | None = None
    user: str | None = None
    time_limit: float | None = None
    preemptible: bool = False

    def content(self) -> tuple:
        """The fields that make two events with the same id the same event (a retry)."""
        return (self.kind, self.time, self.job, self.pool, self.gpus, self.tag, self.user,
                self.time_limit, self.preemptible)


class Decision(NamedTuple):
    """One start the service decided: at ``time`` (s), ``job`` of ``pool`` on ``gpus`` GPUs,
    ``lent`` when it runs beyond its pool's quota (on GPUs other pools do not use), ``window``
    the reservation window (s) a loan's predicted duration had to fit (None when unknown)."""

    time: float
    job: str
    pool: str
    gpus: int
    lent: bool
    window: float | None = None


@dataclass
class _Job:
    submit: float
    pool: str
    gpus: int
    tag: str | None = None
    user: str | None = None
    time_limit: float | None = None
    preemptible: bool = False
    finish: float | None = None  # the finish event's time
    real_start: float | None = None  # shadow: the cluster's own start
    start_event: float | None = None  # drive: the caller's acknowledgement, if any


class _LiveLoop(_EventLoop):
    """The replay's event loop whose completions come from finish events.

    Unknown durations run for ever (``left`` = inf) until a finish event gives the end:
    in drive mode its time; in shadow mode the simulated start plus the real run time, but
    never before the finish was reported (the latest instant the service could learn it).
    Every start is recorded in ``starts`` (time, job index, lent).
    """

    __slots__ = ("ends", "starts", "shadow", "reveal")

    def __init__(self, *args: Any, ends: dict[int, tuple[float, float | None]], shadow: bool):
        super().__init__(*args)
        self.left = [math.inf] * self.n
        #: job index -> (finish event time, real run time in shadow mode)
        self.ends = ends
        self.starts: list[tuple[float, int, bool]] = []
        self.shadow = shadow
        #: (end, job, run time): run times the arrays show once the job has completed
        self.reveal: list[tuple[float, int, float]] = []

    def grow(self) -> int:
        """The replay loop's grow, the new jobs' durations unknown (run for ever until their
        finish events)."""
        n_old = super().grow()
        self.left[n_old:] = [math.inf] * (self.n - n_old)
        return n_old

    def _complete(self, now: float) -> int:
        reveal, duration = self.reveal, self.trace.duration
        while reveal and reveal[0][0] <= now:
            _, j, run_s = heapq.heappop(reveal)
            duration[j] = run_s
        return super()._complete(now)

    def _apply(self, items: list, now: float) -> None:
        super()._apply(items, now)
        for it in items:
            if type(it) is Preempt:
                continue
            j = int(it[0])
            self.starts.append((now, j, bool(it[1])))
            if j in self.ends:
                self.learn_end(j)

    def learn_end(self, j: int) -> None:
        """Schedule running job ``j``'s completion from its finish event; its run time shows
        in the arrays from its completion on (realistic policies read no earlier)."""
        reported, run_s = self.ends[j]
        start = self.seg_start[j]
        end = reported if run_s is None else max(start + run_s, reported)
        self.end_at[j] = end
        heapq.heappush(self.heap, (end, j))
        heapq.heappush(self.reveal, (end, j, reported - start if run_s is None else run_s))

    def running(self, j: int) -> bool:
        """True when job index ``j`` is running in this loop."""
        return self.status[j] == 2


class ServiceCore:
    """The live scheduler: events in, decisions out, on the replay's loop and policy.

    ``pools``: the pools table (pool, quota_gpus); ``make_policy()``: a fresh policy (with
    its forecaster primed with the history the service starts from), called at every
    rebuild; ``tick_s``: the replay's tick (s); ``mode``: drive or shadow.
    """

    def __init__(self, pools: pl.DataFrame, make_policy: Callable[[], Policy], *,
                 tick_s: float = 300.0, mode: Mode = "drive", gpus_per_server: int = 8):
        if mode not in MODES:
            raise SiaError(f"--mode must be one of {', '.join(MODES)}, not {mode!r}")
        self.quota: dict[str, int] = {str(p): int(q) for p, q in
                                      zip(pools["pool"], pools["quota_gpus"], strict=True)}
        self.make_policy = make_policy
        self.tick_s = float(tick_s)
        self.mode: Mode = mode
        self.gpus_per_server = gpus_per_server
        self._pools = pools
        self.jobs: dict[str, _Job] = {}
        self.ids: dict[str, tuple] = {}  # event id -> content
        self.clock = -math.inf
        self.decisions: list[Decision] = []
        self.rebuilds = 0  # full rebuilds (a re-run of the event log)
        self.grows = 0  # arrivals of new jobs taken in place
        self._new: list[str] = []  # jobs submitted since the arrays were built or grown
        self.policy: Any = None
        self._loop: _LiveLoop | None = None
        self._index: dict[str, int] = {}
        self._job_ids: np.ndarray = np.empty(0, dtype=object)
        self._pool_names: tuple[str, ...] = ()
        self._loans_seen = 0
        self._unbuilt = math.inf  # earliest submission of a job the arrays do not hold
        self.last_forecast: dict[str, Any] | None = None
        #: quota events after the first job or clock: (time, pool, GPUs), in time order; the
        #: loop applies them as its clock passes them (:meth:`_advance_loop`)
        self.quota_changes: list[tuple[float, str, int]] = []
        self._quota_now = dict(self.quota)  # the quotas after every change received
        self._applied_changes = 0  # changes the current loop has applied
        self._began = False  # a job or a clock was received: quotas change in time from now
        self._settable: bool | None = None  # the policy takes quota changes (set_quota)

    def fresh(self) -> ServiceCore:
        """A new core with this one's setup and none of its events (to replay a log into)."""
        return ServiceCore(self._pools, self.make_policy, tick_s=self.tick_s, mode=self.mode,
                           gpus_per_server=self.gpus_per_server)

    # ------------------------------------------------------------------ events
    def check(self, events: Iterable[Event]) -> list[Event]:
        """Return the events of a batch that are new (retries of known ids dropped); raise
        EventError naming the first bad one, changing nothing."""
        fresh: list[Event] = []
        seen_jobs: dict[str, Event] = {}
        batch_ids: dict[str, tuple] = {}
        batch_started: dict[str, float] = {}
        batch_finished: set[str] = set()
        clock = self.clock
        total = sum(self.quota.values())
        quota_now = dict(self._quota_now)  # with this batch's changes so far
        for i, ev in enumerate(events):
            name = f"event {i} (id {ev.id!r})"
            known = self.ids.get(ev.id, batch_ids.get(ev.id))
            if known is not None:
                if known != ev.content():
                    raise EventError(f"{name}: id already used by a different event")
                continue
            if ev.time <= clock and not (ev.kind == "clock" and ev.time == clock):
                raise EventError(f"{name}: time {ev.time:g} is not after the service's clock "
                                 f"{clock:g} (events must arrive before their instant is decided)")
            job = None if ev.job is None else (self.jobs.get(ev.job) or seen_jobs.get(ev.job))
            if ev.kind == "submit":
                if job is not None:
                    raise EventError(f"{name}: job {ev.job!r} was already submitted")
                if ev.pool not in self.quota:
                    raise EventError(f"{name}: unknown pool {ev.pool!r} (the service knows "
                                     f"{len(self.quota)} pools; add it with a quota event first)",
                                     422)
                if ev.gpus > total:
                    raise EventError(f"{name}: job {ev.job!r} needs {ev.gpus} GPUs but the "
                                     f"cluster has {total}", 422)
                seen_jobs[ev.job] = ev
            elif ev.kind in ("start", "finish"):
                if job is None:
                    raise EventError(f"{name}: unknown job {ev.job!r} (no submit event for it)")
                submit = job.submit if isinstance(job, _Job) else job.time
                if ev.time < submit or (ev.kind == "finish" and ev.time <= submit):
                    raise EventError(f"{name}: {ev.kind} of job {ev.job!r} at {ev.time:g} is "
                                     f"before its submission at {submit:g}")
                shadow_ok = self.mode == "shadow" and (ev.kind == "start"
                                                       or ev.job in batch_started)
                if not isinstance(job, _Job) and not shadow_ok:
                    raise EventError(f"{name}: job {ev.job!r} is submitted in the same request; "
                                     f"send its {ev.kind} after its instant is decided")
                if self.mode == "shadow" and ev.kind == "start" and ev.job in batch_started:
                    raise EventError(f"{name}: job {ev.job!r} was already reported started")
                if ev.kind == "start":
                    batch_started[ev.job] = ev.time
                elif ev.time <= batch_started.get(ev.job, -math.inf) or (
                        isinstance(job, _Job) and job.real_start is not None
                        and ev.time <= job.real_start):
                    raise EventError(f"{name}: finish of job {ev.job!r} at {ev.time:g} is not "
                                     "after its start")
                elif ev.job in batch_finished:
                    raise EventError(f"{name}: job {ev.job!r} was already reported finished")
                else:
                    batch_finished.add(ev.job)
                if isinstance(job, _Job):
                    self._check_run_event(name, ev, job, ev.job in batch_started)
            elif ev.kind == "quota":
                if self._began or seen_jobs or clock > -math.inf:
                    self._check_quota_change(name, ev, quota_now)
            elif ev.kind == "clock":
                clock = max(clock, ev.time)
            batch_ids[ev.id] = ev.content()
            fresh.append(ev)
        return fresh

    def _check_quota_change(self, name: str, ev: Event, quota_now: dict[str, int]) -> None:
        """A quota event after the first job or clock: a known pool, in time order, the
        cluster's size (fixed at its first job) not exceeded; ``quota_now`` takes it."""
        if ev.pool not in quota_now:
            raise EventError(f"{name}: unknown pool {ev.pool!r} (pools are added only before "
                             "the first job or clock)", 422)
        if self.quota_changes and ev.time < self.quota_changes[-1][0]:
            raise EventError(f"{name}: quota change at {ev.time:g} is before the last one "
                             f"received ({self.quota_changes[-1][0]:g}); send them in time order")
        if self._settable is None:
            self._settable = callable(getattr(self.policy or self.make_policy(), "set_quota",
                                              None))
        if not self._settable:
            raise EventError(f"{name}: this policy does not take quota changes while it runs; "
                             "restart the service with a new pool file", 422)
        cluster = sum(self.quota.values())
        after = sum(quota_now.values()) - quota_now[ev.pool] + int(ev.gpus)
        if after > cluster:
            raise EventError(f"{name}: quota {ev.gpus} for pool {ev.pool!r} makes the quotas "
                             f"sum to {after} GPUs, over the cluster's {cluster} (its size is "
                             "fixed at the first job: lower another pool's quota first)", 422)
        quota_now[ev.pool] = int(ev.gpus)

    def _check_run_event(self, name: str, ev: Event, job: _Job, started_now: bool) -> None:
        if ev.kind == "start":
            if job.real_start is not None or job.start_event is not None:
                raise EventError(f"{name}: job {ev.job!r} was already reported started")
            if self.mode == "drive" and self._started_at(ev.job) is None:
                raise EventError(f"{name}: job {ev.job!r} was not started by the service "
                                 "(drive mode: start only what GET /decisions returns)")
            return
        if job.finish is not None:
            raise EventError(f"{name}: job {ev.job!r} was already reported finished")
        if self.mode == "drive":
            if self._started_at(ev.job) is None:
                raise EventError(f"{name}: job {ev.job!r} is not running (drive mode: the "
                                 "service has not started it)")
        elif job.real_start is None and not started_now:
            raise EventError(f"{name}: job {ev.job!r} has no start event (shadow mode: report "
                             "the cluster's start before its finish)")

    def _started_at(self, job: str) -> float | None:
        loop = self._loop
        j = self._index.get(job)
        if loop is None or j is None or loop.status[j] < 2:
            return None
        return float(loop.state.start_time[j])

    def apply(self, events: Iterable[Event]) -> list[Decision]:
        """Apply checked events (:meth:`check`) in order; return the decisions they led to."""
        first = len(self.decisions)
        for ev in events:
            self.ids[ev.id] = ev.content()
            if ev.kind == "submit":
                self._began = True
                self.jobs[ev.job] = _Job(ev.time, ev.pool, int(ev.gpus), ev.tag, ev.user,
                                         ev.time_limit, bool(ev.preemptible))
                self._unbuilt = min(self._unbuilt, ev.time)
                self._new.append(ev.job)
            elif ev.kind == "quota":
                self._quota_now[ev.pool] = int(ev.gpus)
                if self._began:
                    self.quota_changes.append((ev.time, ev.pool, int(ev.gpus)))
                else:
                    self.quota[ev.pool] = int(ev.gpus)
            elif ev.kind == "start":
                job = self.jobs[ev.job]
                if self.mode == "shadow":
                    job.real_start = ev.time
                else:
                    job.start_event = ev.time
            elif ev.kind == "finish":
                self._finish(ev.job, ev.time)
            elif ev.kind == "clock":
                self._began = True
                self.advance(ev.time)
        return self.decisions[first:]

    def _finish(self, job_id: str, t: float) -> None:
        job = self.jobs[job_id]
        job.finish = t
        loop, j = self._loop, self._index.get(job_id)
        if loop is None or j is None:
            return
        loop.ends[j] = self._end_of(job)
        if loop.running(j):
            loop.learn_end(j)

    def _end_of(self, job: _Job) -> tuple[float, float | None]:
        if self.mode == "shadow":
            return job.finish, job.finish - job.real_start
        return job.finish, None

    # ------------------------------------------------------------------ the clock
    def advance(self, t: float) -> None:
        """Decide every instant up to ``t`` (s): first grow the arrays with every job submitted
        since (all of them, the ones due after ``t`` too, as a replay's arrays hold the future),
        or rebuild them when they cannot grow and jobs due by ``t`` are not in them."""
        if t < self.clock:
            return
        if not self._grow() and self._unbuilt <= t:
            self._rebuild()
        if self._loop is not None:
            self._advance_loop(t)
            self._collect()
        self.clock = t

    def _advance_loop(self, t: float) -> None:
        """Advance the loop to ``t``, applying each quota change as the loop reaches its time:
        the instants before it decide with the old quota; the change's time is an instant
        (a wake-up) that decides with the new one (running jobs keep their GPUs)."""
        loop, changes = self._loop, self.quota_changes
        while self._applied_changes < len(changes) and changes[self._applied_changes][0] <= t:
            when, pool, gpus = changes[self._applied_changes]
            loop.advance(math.nextafter(when, -math.inf))
            p = loop.trace.pool_names.index(pool)
            loop.trace.quota[p] = gpus  # the view's and (same array) the cluster's quotas
            loop.quota[p] = gpus
            self.policy.set_quota(loop.trace.quota.tolist())
            loop.state.touched.add(p)
            # an instant at the change (as a wake-up): its pool is decided again right then
            loop.next_wakeup_at = min(loop.next_wakeup_at, when)
            self._applied_changes += 1
        loop.advance(t)

    def restore(self, events: Iterable[Event]) -> None:
        """Recover from the durable log: apply its events (checked when they were accepted)
        with the clock held back, then re-run once up to the last clock."""
        last = -math.inf
        for ev in events:
            if ev.kind == "clock":
                last = max(last, ev.time)
                self.ids[ev.id] = ev.content()
                self._began = True
            else:
                self.apply([ev])
        if last > -math.inf:
            if self.jobs:
                self._rebuild(check=False, until=last)
            self.clock = last

    def _grow(self) -> bool:
        """Append the jobs submitted since the arrays were built or grown to the trace, the
        loop, the cluster and the policy, without re-running anything; False (nothing changed)
        when they cannot be appended: no arrays yet, a new job that sorts before one the arrays
        hold, seeded preemptible draws (they depend on the number of jobs), or a policy that
        cannot grow."""
        loop, policy = self._loop, self.policy
        grow = getattr(policy, "grow", None)
        if loop is None or not self._new or not callable(grow):
            return False
        trace, cluster = loop.trace, loop.cluster
        new = sorted(self._new, key=lambda i: (self.jobs[i].submit, i))
        first = self.jobs[new[0]]
        if trace.n_jobs and (first.submit, new[0]) <= (float(trace.submit[-1]),
                                                        str(trace.job_ids[-1])):
            return False
        preemption = getattr(cluster, "preemption", None)
        if preemption is not None and preemption.preemptible_fraction > 0:
            return False
        js = [self.jobs[i] for i in new]
        pools = {name: p for p, name in enumerate(trace.pool_names)}
        if not getattr(policy, "growable", True):
            return False
        n_old = trace.grow(new, [j.submit for j in js], np.full(len(js), np.nan),
                           [j.gpus for j in js], [pools[j.pool] for j in js],
                           [j.tag for j in js], [j.user for j in js],
                           [j.time_limit for j in js])
        loop.grow()
        cluster.preemptible = extend(cluster.preemptible,
                                     np.array([j.preemptible for j in js], dtype=bool))
        if not grow(trace, cluster, n_old):
            self._rebuild(check=True)
            return True
        self._job_ids = trace.job_ids
        for i, job_id in enumerate(new, start=n_old):
            self._index[job_id] = i
            if self.jobs[job_id].finish is not None:
                loop.ends[i] = self._end_of(self.jobs[job_id])
        self._new, self._unbuilt = [], math.inf
        self.grows += 1
        return True

    def _rebuild(self, check: bool = True, until: float | None = None) -> None:
        """Rebuild the arrays with every known job and re-run the log up to the clock (or
        ``until``); with ``check``, the re-run must decide what the first run did."""
        old = self.decisions if check else None
        if until is not None:
            self.clock = until
        ids = list(self.jobs)
        jobs = self._job_frame(ids)
        pools = pl.DataFrame({"pool": list(self.quota), "quota_gpus": list(self.quota.values())},
                             schema=POOL_SCHEMA)
        trace, order = build_trace(jobs, pools)
        # durations are unknown until finished; quotas change with quota events (writable)
        trace = replace(trace, duration=np.full(trace.n_jobs, np.nan), quota=trace.quota.copy())
        cluster = Cluster(trace.quota, gpus_per_server=self.gpus_per_server)
        preemption = PreemptionConfig()
        cluster.preemptible = preemption.mask(jobs, order)
        cluster.preemption = preemption
        self.policy = self.make_policy()
        self._job_ids = trace.job_ids
        self._pool_names = trace.pool_names
        self._index = {str(j): i for i, j in enumerate(trace.job_ids)}
        ends = {self._index[job_id]: self._end_of(job) for job_id, job in self.jobs.items()
                if job.finish is not None}
        loop = _LiveLoop(trace, cluster, self.policy, self.tick_s, False, ends=ends,
                         shadow=self.mode == "shadow")
        self._loop = loop
        self.decisions, self._loans_seen = [], 0
        self._unbuilt, self._new = math.inf, []
        self._applied_changes = 0
        self.rebuilds += 1
        if self.clock > -math.inf:
            self._advance_loop(self.clock)
            self._collect()
        if old is not None and self.decisions != old:
            diff = next((i for i, (a, b) in enumerate(zip(self.decisions, old, strict=False))
                         if a != b), min(len(old), len(self.decisions)))
            raise NonDeterminism(f"the re-run of the event log decided differently at decision "
                                 f"{diff} ({old[diff:diff + 1]} before, "
                                 f"{self.decisions[diff:diff + 1]} now)")

    def _job_frame(self, ids: list[str]) -> pl.DataFrame:
        js = [self.jobs[i] for i in ids]
        frame = pl.DataFrame({
            "job_id": ids,
            "pool": [j.pool for j in js],
            "submit_time": [j.submit for j in js],
            "duration": [1.0] * len(js),  # unknown: the arrays get NaN
            "num_gpus": [j.gpus for j in js],
            "tag": [j.tag for j in js],
            "user": [j.user for j in js],
            "preemptible": [j.preemptible for j in js],
            "time_limit": [j.time_limit for j in js],
        }, schema={**JOB_SCHEMA, "time_limit": pl.Float64()})
        return frame

    def _collect(self) -> None:
        """Turn the loop's new starts into decisions (with each loan's window)."""
        loop = self._loop
        starts = loop.starts
        served = getattr(self.policy, "served", None)
        loans: dict[int, float] = {}
        if served is not None and hasattr(served, "_lent_job"):
            new_jobs = served._lent_job[self._loans_seen:]
            new_k = served._lent_k[self._loans_seen:]
            self._loans_seen = len(served._lent_job)
            ws = served.windows_s
            loans = {j: ws[k] for j, k in zip(new_jobs, new_k, strict=True) if 0 <= k < len(ws)}
        trace = loop.trace
        for t, j, lent in starts[len(self.decisions):]:
            self.decisions.append(Decision(float(t), str(trace.job_ids[j]),
                                           trace.pool_names[trace.pool[j]],
                                           int(trace.num_gpus[j]), lent,
                                           loans.get(j) if lent else None))
        if served is not None and getattr(served, "_times", None):
            self.last_forecast = {"time": served._times[-1], "arrive": served._arrive[-1],
                                  "load": served._load[-1]}

    # ------------------------------------------------------------------ reading
    def next_time(self) -> float | None:
        """The next instant the service knows of (an arrival, a completion, a tick or a
        wake-up), in seconds; None when there is none."""
        loop = self._loop
        t = math.inf
        if loop is not None:
            heap = loop.heap
            t = min(loop.next_tick_at, loop.next_wakeup_at, heap[0][0] if heap else math.inf)
            if loop.next_arrival < loop.n:
                t = min(t, loop.submit[loop.next_arrival])
        t = min(t, self._unbuilt)
        return None if t == math.inf else float(t)

    def state(self) -> dict[str, Any]:
        """Pending and running jobs and GPU use per pool (the service's schedule, now)."""
        loop = self._loop
        out: dict[str, Any] = {"clock": None if self.clock == -math.inf else self.clock,
                               "jobs": len(self.jobs), "decisions": len(self.decisions),
                               "pools": {}}
        if loop is None:
            return out
        s = loop.state
        for p, name in enumerate(loop.trace.pool_names):
            out["pools"][name] = {"quota": int(loop.trace.quota[p]),
                                  "pending": len(s.pending[p]),
                                  "used_dedicated": int(s.used_ded[p]),
                                  "used_lent": int(s.used_opp[p])}
        out["running"] = len(s.running)
        return out

    def pending_gpus(self) -> dict[str, int]:
        """GPUs of each pool's pending jobs."""
        loop = self._loop
        if loop is None:
            return {}
        g = loop.trace.num_gpus
        return {name: int(sum(int(g[j]) for j in loop.state.pending[p]))
                for p, name in enumerate(loop.trace.pool_names)}


def starts_table(decisions: list[Decision]) -> pl.DataFrame:
    """The decisions as a table (job_id, pool, start_time, num_gpus, lent, window_s)."""
    return pl.DataFrame({"job_id": [d.job for d in decisions],
                         "pool": [d.pool for d in decisions],
                         "start_time": [d.time for d in decisions],
                         "num_gpus": [d.gpus for d in decisions],
                         "lent": [d.lent for d in decisions],
                         "window_s": [d.window for d in decisions]},
                        schema={"job_id": pl.String, "pool": pl.String,
                                "start_time": pl.Float64, "num_gpus": pl.Int64,
                                "lent": pl.Boolean, "window_s": pl.Float64})
