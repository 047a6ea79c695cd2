"""A sketch of a Slurm poller for `sia serve` in shadow mode: `squeue` / `sacct` text to events.

Every poll (say each 30 s) runs

    squeue -h -t PENDING,RUNNING -o '%i|%P|%u|%j|%V|%S|%T|%l|%D|%b|%r'
    sacct -X -n -P -S <an hour ago> -o JobIDRaw,End,State

and hands both outputs to :meth:`SlurmPoller.poll`, which returns the events to POST: a
``submit`` for each job seen the first time (its partition is its pool, or what ``pool_of``
makes of partition and user), a ``start`` when a job is first seen running (the cluster's own
start, for shadow mode), a ``finish`` when sacct shows its end, then a ``clock`` at the poll
time: every event up to it has been sent. Event times are Slurm's own, read as UTC (or
shifted by ``utc_offset_s``), and kept after the last clock sent (an event seen late is
moved to just after it: the service has decided that instant already). Event ids are
``KIND:JOBID``, so a poll that is retried or repeated sends nothing twice.

A job pending for a reason that keeps Slurm from running it at all (``%r``: a dependency, a
begin time, a hold: :data:`HELD_REASONS`) has not arrived yet, as in the replay of a sacct
export, where a job arrives when it became eligible: its ``submit`` is sent at the first poll
that sees it eligible, at that poll's time. (Output without ``%r`` is read as before.)

GPUs: ``%b`` is the job's GRES per node (``gpu:4``, ``gres/gpu:a100:2``), times ``%D``
nodes. Jobs without GPUs are not scheduled by SIA and are skipped.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

#: The squeue format the poller reads (fields separated by '|').
SQUEUE_FORMAT = "%i|%P|%u|%j|%V|%S|%T|%l|%D|%b|%r"
SQUEUE_FIELDS = ("job", "partition", "user", "name", "submit", "start", "state", "limit",
                 "nodes", "gres", "reason")
#: The pending reasons (squeue's ``%r``) of a job Slurm may not run yet: not arrived.
HELD_REASONS = ("Dependency", "BeginTime", "JobHeldUser", "JobHeldAdmin",
                "DependencyNeverSatisfied")
#: Slurm's states of a job that has ended.
ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "NODE_FAIL", "OUT_OF_MEMORY",
         "PREEMPTED", "BOOT_FAIL", "DEADLINE")
_GPU = re.compile(r"(?:gres/)?gpu(?::[A-Za-z0-9_.-]+)?[:=](\d+)")
_LIMIT = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)$")


def slurm_time(text: str, utc_offset_s: float = 0.0) -> float | None:
    """Seconds since the Unix epoch of a Slurm timestamp (``2026-11-28T17:00:00``), read as
    UTC minus ``utc_offset_s``; None for ``N/A``, ``Unknown`` or ``None``."""
    text = text.strip()
    if not text or text.upper() in ("N/A", "UNKNOWN", "NONE"):
        return None
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp() - utc_offset_s


def limit_seconds(text: str) -> float | None:
    """Seconds of a Slurm time limit (``D-HH:MM:SS``, ``HH:MM:SS``, ``MM:SS``); None for
    ``UNLIMITED``, ``INVALID`` or anything else."""
    m = _LIMIT.match(text.strip())
    if not m:
        return None
    d, h, mi, s = (int(x) if x else 0 for x in m.groups())
    if m.group(2) is None:  # MM:SS
        h, mi, s = 0, int(m.group(3)), int(m.group(4))
    return float(((d * 24 + h) * 60 + mi) * 60 + s)


def gpus_of(gres: str, nodes: str) -> int:
    """GPUs of a job: the sum of its per-node GPU GRES times its node count."""
    per_node = sum(int(n) for n in _GPU.findall(gres))
    try:
        return per_node * max(1, int(nodes))
    except ValueError:
        return per_node


class SlurmPoller:
    """Turns successive `squeue` / `sacct` outputs into service events (see the module doc)."""

    def __init__(self, pool_of: Callable[[str, str], str] | None = None,
                 utc_offset_s: float = 0.0):
        self.pool_of = pool_of or (lambda partition, user: partition)
        self.utc_offset_s = utc_offset_s
        self.submitted: set[str] = set()
        self.held: set[str] = set()  # seen pending for a HELD_REASONS reason, not submitted
        self.started: set[str] = set()
        self.finished: set[str] = set()
        self.clock = float("-inf")

    def _at(self, t: float | None, now: float) -> float:
        t = now if t is None else min(t, now)
        return max(t, self.clock + 1e-3) if self.clock > float("-inf") else t

    def poll(self, squeue: str, sacct: str, now: float) -> list[dict[str, Any]]:
        """The events of one poll at ``now`` (s since the epoch), the clock event last."""
        events: list[dict[str, Any]] = []
        for line in squeue.splitlines():
            if not line.strip():
                continue
            row = dict(zip(SQUEUE_FIELDS, line.split("|"), strict=False))
            job, gpus = row["job"].strip(), gpus_of(row.get("gres", ""), row.get("nodes", "1"))
            if not job or gpus < 1:
                continue
            if (row["state"].strip() == "PENDING"
                    and row.get("reason", "").strip() in HELD_REASONS):
                if job not in self.submitted:
                    self.held.add(job)
                continue
            if job not in self.submitted:
                at = slurm_time(row["submit"], self.utc_offset_s)
                if job in self.held:  # it became eligible since the last poll: arrives now,
                    began = (slurm_time(row["start"], self.utc_offset_s)  # or when it started
                             if row["state"].strip() == "RUNNING" else None)
                    at = now if began is None else min(now, began)
                self.held.discard(job)
                ev = {"id": f"submit:{job}", "type": "submit", "job": job,
                      "time": self._at(at, now),
                      "pool": self.pool_of(row["partition"].strip(), row["user"].strip()),
                      "gpus": gpus, "user": row["user"].strip() or None,
                      "tag": row["name"].strip() or None}
                limit = limit_seconds(row.get("limit", ""))
                if limit:
                    ev["time_limit"] = limit
                events.append({k: v for k, v in ev.items() if v is not None})
                self.submitted.add(job)
            if row["state"].strip() == "RUNNING" and job not in self.started:
                events.append({"id": f"start:{job}", "type": "start", "job": job,
                               "time": self._at(slurm_time(row["start"], self.utc_offset_s),
                                                now)})
                self.started.add(job)
        for line in sacct.splitlines():
            parts = line.strip().split("|")
            if len(parts) < 3:
                continue
            job, end, state = parts[0], parts[1], parts[2].split()[0] if parts[2] else ""
            if job in self.started and job not in self.finished and state in ENDED:
                t = slurm_time(end, self.utc_offset_s)
                if t is not None:
                    events.append({"id": f"finish:{job}", "type": "finish", "job": job,
                                   "time": self._at(t, now)})
                    self.finished.add(job)
        events.sort(key=lambda e: (e["time"], ("submit", "start", "finish").index(e["type"])))
        events.append({"id": f"clock:{now!r}", "type": "clock", "time": max(now, self.clock)})
        self.clock = max(now, self.clock)
        return events
