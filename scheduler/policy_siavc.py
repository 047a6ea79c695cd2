"""SIA_VC (SIA 5.1, Figure 6): virtual start times and a logical resource-time plan.

A **perfect-information (oracle) policy**: it reads every job's true
duration and the arrival times and widths of jobs that have not arrived yet
(``TraceArrays``), as the paper's stepping stone does. It is the reference for
Theorem 1, not a deployable scheduler.

At each decision instant ``now``:

1. *Virtual clock.* For each pool alone (no sharing), a forward FCFS
   simulation (:func:`sia.scheduler.vst.fcfs_pool_starts`) from the pool's
   current state gives every pending and future job of the pool a virtual
   start time (VST).
2. *Plan.* The logical resource-time plan is filled with the running jobs;
   then pending and future jobs are visited in increasing VST (ties by
   arrival): a job that cannot start now (not arrived, wider than the free
   GPUs, or ``MaxReservation(now, d) + width`` above the cluster's GPUs) gets
   ``Reserve(width, VST, d)``; the first one that can start is started
   (dedicated if its pool's dedicated use allows, else opportunistic), the
   reservations are cleared and the pass restarts (Figure 6's do-while).
3. The policy asks to be woken at the smallest VST still ahead, so a job is
   visited at its VST even when nothing else happens then.

Which running jobs count against a pool in its virtual clock ("charges").
Every running job is charged, for its whole run, to the quota it occupies:
a job that starts within its pool's free charged capacity is charged to its
own pool; the GPUs it takes beyond that are charged to the pools that lend
them (those with free charged capacity now). A pool's own jobs running on
GPUs lent by others do *not* count against it; jobs it lent GPUs to do. So
at every instant each pool's charges plus its virtual jobs fit its quota, and
the sum over pools fits the cluster: the virtual schedule of all pools
together is always physically feasible. That alone does not make the VSTs
monotone: re-running a pool's virtual clock after one of its jobs started
out of order, or after it lent GPUs, can push its other jobs later. So a job
that would start *before* its VST is only started if, re-running the
virtual clocks of every pool it charges (its own and the lenders), no
not-yet-started job of those pools gets a VST after its no-sharing FCFS
start F(j) (computed once in ``reset``; the check runs until the pool's
virtual clock next finds the pool empty, after which the pool's future no
longer depends on the change). Invariants: every unstarted job has VST <= F
and VST >= now, and the virtual schedule is feasible, so every job whose VST
is now can start now (the reservations of earlier-VST jobs are part of the
feasible virtual schedule) and does. Hence every job starts by F(j): no job
ends later than under FCFS (Theorem 1). A job started exactly at its VST on
its own pool's charges leaves every virtual clock unchanged and needs no check.

Lookahead: with the longest pending job lasting D, reservations only matter
on ``[now, now + D)``, so future jobs are simulated only if they arrive
before ``now + D`` (a later arrival has a VST after every window that can
block a pending job); the no-slowdown check simulates until the next idle
point instead. Both are exact, not approximations.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from sia.scheduler.cluster import Cluster
from sia.scheduler.view import SimView, Start, TraceArrays
from sia.scheduler.vst import ResourcePlan, fcfs_baseline_starts, fcfs_pool_starts

_EPS = 1e-6  # seconds


class SiaVCPolicy:
    """SIA_VC with perfect per-job information (an oracle policy; see the module docstring)."""

    name = "sia-vc"
    perfect_information = True
    uses_ticks = False

    def __init__(self) -> None:
        self._wakeup: float | None = None

    # ------------------------------------------------------------------ setup
    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Compute each job's no-sharing FCFS start F(j) and clear the charges."""
        self._trace = trace
        self._submit = trace.submit.tolist()
        self._dur = trace.duration.tolist()
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._C = int(trace.quota.sum())
        self._F = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                       trace.quota).tolist()
        self._pool_jobs = [pj.tolist() for pj in trace.pool_jobs]
        #: per pool: charges (end time, GPUs) against its quota
        self._charges: list[list[tuple[float, int]]] = [[] for _ in range(trace.n_pools)]
        self._running_end: dict[int, float] = {}
        self._wakeup = None
        self.stats = {"calls": 0, "passes": 0, "early_starts": 0, "checks_failed": 0}

    # ------------------------------------------------------------------ helpers
    def _future_of(self, p: int, n_arrived: int) -> int:
        """Return the position in pool ``p``'s job list of its first job not arrived yet."""
        jobs = self._pool_jobs[p]
        lo, hi = 0, len(jobs)
        while lo < hi:  # bisect on job index (pool job lists are ascending)
            mid = (lo + hi) // 2
            if jobs[mid] < n_arrived:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _sim(self, p: int, pending: list[int], k_future: int, now: float, horizon: float,
             check: bool) -> tuple[list[int], list[float]]:
        """Run pool ``p``'s virtual clock; return (jobs, VSTs) of the prefix it simulated.

        ``check=False``: pending jobs and future jobs arriving before ``horizon``;
        ``check=True``: on until the first idle point at or after ``horizon``.
        """
        fut = self._pool_jobs[p]

        def seq():
            return itertools.chain(pending, itertools.islice(fut, k_future, None))

        vst = fcfs_pool_starts(
            map(self._submit.__getitem__, seq()), map(self._dur.__getitem__, seq()),
            map(self._gpus.__getitem__, seq()), self._quota[p],
            now=now, busy=[c for c in self._charges[p] if c[0] > now],
            horizon=math.inf if check else horizon, stop_when_idle=check, idle_after=horizon,
        )
        return list(itertools.islice(seq(), len(vst))), vst

    def _charged_free(self, q: int, now: float) -> int:
        return self._quota[q] - sum(g for e, g in self._charges[q] if e > now)

    # ------------------------------------------------------------------ decide
    def decide(self, view: SimView) -> list[Start]:
        """Return the jobs to start now (Figure 6), keeping every job within its FCFS start."""
        now = view.now
        self.stats["calls"] += 1
        P = view.n_pools
        for q in range(P):
            if self._charges[q]:
                self._charges[q] = [c for c in self._charges[q] if c[0] > now]
        pend = [list(view.pending(p)) for p in range(P)]
        n_arr = view.n_arrived
        if not any(pend):
            self._wakeup = None
            return []
        dur, gpus, quota = self._dur, self._gpus, self._quota
        horizon = now + max(dur[j] for pl in pend for j in pl)
        kfut = [self._future_of(p, n_arr) for p in range(P)]
        vsts: list[tuple[list[int], list[float]]] = [
            self._sim(p, pend[p], kfut[p], now, horizon, check=False) for p in range(P)
        ]
        run = view.running()
        ends = (run.start + self._trace.duration[run.job]).tolist()
        run_ends = list(zip(ends, run.num_gpus.tolist(), strict=True))
        free = view.free_gpus
        ded = view.used_dedicated.tolist()
        starts: list[Start] = []
        while True:
            self.stats["passes"] += 1
            order = sorted(
                (v, j) for p in range(P) for j, v in zip(*vsts[p], strict=True)
            )
            last_pending = max((i for i, (_, j) in enumerate(order) if j < n_arr), default=-1)
            plan = ResourcePlan()
            if run_ends:
                plan.add_busy(np.array([e for e, _ in run_ends]), np.array([g for _, g in run_ends]),
                              now)
            chosen = None
            for v, j in order[: last_pending + 1]:
                g, d = gpus[j], dur[j]
                if j < n_arr and g <= free and plan.max_reservation(now, d) + g <= self._C:
                    ok = self._try_charge(j, v, now, pend, kfut, horizon, vsts)
                    if ok:
                        chosen = j
                        break
                plan.reserve(g, v, d)
            if chosen is None:
                break
            j = chosen
            p, g = self._pool[j], gpus[j]
            pend[p].remove(j)
            free -= g
            run_ends.append((now + dur[j], g))
            if ded[p] + g <= quota[p]:
                ded[p] += g
                starts.append(Start(j, False))
            else:
                starts.append(Start(j, True))
            if not free:
                break
        ahead = [v for p in range(P) for v in vsts[p][1] if v > now]
        self._wakeup = min(ahead) if ahead else None
        return starts

    def _try_charge(self, j: int, v: float, now: float, pend: list[list[int]], kfut: list[int],
                    horizon: float, vsts: list) -> bool:
        """Charge job ``j`` (starting now) to quotas if no job's VST passes its F; update VSTs."""
        p, g, d = self._pool[j], self._gpus[j], self._dur[j]
        end = now + d
        own_free = self._charged_free(p, now)
        if v <= now + _EPS and own_free >= g:
            # on time, on its own quota: every virtual clock stays as it was
            self._charges[p].append((end, g))
            jobs, vs = vsts[p]
            i = jobs.index(j)
            vsts[p] = (jobs[:i] + jobs[i + 1:], vs[:i] + vs[i + 1:])
            return True
        self.stats["early_starts"] += 1
        P = len(self._quota)
        free_of = {q: self._charged_free(q, now) for q in range(P)}
        lenders = sorted((q for q in range(P) if q != p and free_of[q] > 0),
                         key=lambda q: (-free_of[q], q))
        for own_first in (True, False):
            shares: dict[int, int] = {}
            need = g
            seq = ([p] + lenders) if own_first else (lenders + [p])
            for q in seq:
                take = min(need, max(free_of[q], 0))
                if take > 0:
                    shares[q] = take
                    need -= take
                if need == 0:
                    break
            if need > 0:
                return False
            # Tentatively charge and re-run the affected virtual clocks.
            for q, s in shares.items():
                self._charges[q].append((end, s))
            pend_p = [k for k in pend[p] if k != j]
            affected = set(shares) | {p}
            new = {}
            ok = True
            for q in affected:
                jobs_q = pend_p if q == p else pend[q]
                jobs, vs = self._sim(q, jobs_q, kfut[q], now, horizon, check=True)
                F = self._F
                if any(x > F[k] + _EPS for k, x in zip(jobs, vs, strict=True)):
                    ok = False
                    break
                # keep only the lookahead part for ordering
                cut = len(jobs)
                while cut and jobs[cut - 1] >= 0 and self._submit[jobs[cut - 1]] >= horizon:
                    cut -= 1
                new[q] = (jobs[:cut], vs[:cut])
            if ok:
                for q, val in new.items():
                    vsts[q] = val
                return True
            for q, s in shares.items():
                self._charges[q].remove((end, s))
            self.stats["checks_failed"] += 1
        return False

    def next_wakeup(self, now: float) -> float | None:
        """Return the smallest virtual start time after ``now`` (s), or None."""
        w = self._wakeup
        return w if w is not None and w > now else None
