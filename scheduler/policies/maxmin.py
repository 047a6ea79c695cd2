"""MaxMin (DESIGN.md 6.2, SIA 4.1): idle GPUs shared max-min fairly among pools with pending jobs."""

from __future__ import annotations

from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.view import SimView, Start, TraceArrays


class MaxMinPolicy:
    """Instantaneous max-min fair sharing of idle GPUs among pools with pending jobs.

    Rule, at every decision:

    1. *Dedicated*: pools in increasing allocation / quota (ties by pool
       index), each starts its pending jobs in FCFS order while the head fits
       both its unused quota and the free GPUs (GPUs other pools borrowed are
       not taken back: no preemption, which is how MaxMin slows donors down).
    2. *Sharing*: while GPUs are free, pick the pool with the smallest
       current allocation / quota (allocation = dedicated + opportunistic
       GPUs, counting this call's starts; ties by pool index) among pools
       whose head job fits the free GPUs, and start that head. A start is
       dedicated if it fits the pool's unused quota, otherwise opportunistic
       (the whole job). Within a pool the order stays FCFS: a head that does
       not fit removes its pool from this round (no backfill past a blocked
       head), other pools still get the GPUs.

    Realistic: reads only arrived jobs' widths. On a cell-aware cluster every
    start also needs a buddy cell (dedicated or opportunistic; the view's
    ``can_place``); a job that gets none is treated as not fitting. The
    simulator's placer stage places the starts.
    """

    name = "maxmin"
    perfect_information = False
    uses_ticks = False
    needs = PolicyNeeds(locality=True)  # on cells, the simulator places its starts

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Remember widths and quotas."""
        self._gpus = trace.num_gpus.tolist()
        self._quota = trace.quota.tolist()
        self._P = trace.n_pools

    def grow(self, trace: TraceArrays, cluster: Cluster, n_old: int) -> bool:
        """Take the jobs appended to ``trace`` after index ``n_old`` (not yet arrived; the live
        service's growing arrays): their widths. Returns True (it can grow)."""
        self._gpus.extend(trace.num_gpus[n_old:].tolist())
        return True

    def set_quota(self, quota: list[int]) -> None:
        """Use ``quota`` (GPUs per pool) from the next decision on (global reservations)."""
        self._quota[:] = [int(q) for q in quota]

    def decide(self, view: SimView) -> list[Start]:
        """Return the dedicated FCFS starts, then the max-min fair opportunistic ones."""
        free = view.free_gpus
        if free <= 0:
            return []
        gpus, quota, can_place = self._gpus, self._quota, view.can_place
        starts: list[Start] = []
        heads: dict[int, int] = {}  # pool -> position of its next pending job
        alloc: dict[int, int] = {}
        ded: dict[int, int] = {}
        waiting = [p for p in range(self._P) if view.pending(p)]
        if len(waiting) > 1:
            waiting.sort(key=lambda p: (
                (view.used_dedicated_of(p) + view.used_opportunistic_of(p)) / quota[p], p))
        for p in waiting:
            plist = view.pending(p)
            d = view.used_dedicated_of(p)
            i = 0
            while i < len(plist):
                g = gpus[plist[i]]
                if g > free or d + g > quota[p] or not can_place(plist[i], False):
                    break
                starts.append(Start(plist[i], False))
                free -= g
                d += g
                i += 1
            if i < len(plist):
                heads[p] = i
                ded[p] = d
                alloc[p] = d + view.used_opportunistic_of(p)
        while free > 0 and heads:
            best = -1
            best_key = 0.0
            for p, i in heads.items():
                if gpus[view.pending(p)[i]] > free:
                    continue
                key = alloc[p] / quota[p]
                if best < 0 or key < best_key:
                    best, best_key = p, key
            if best < 0:
                break
            plist = view.pending(best)
            i = heads[best]
            j = plist[i]
            g = gpus[j]
            opp = ded[best] + g > quota[best]
            if not can_place(j, opp):
                del heads[best]
                continue
            if not opp:
                ded[best] += g
            starts.append(Start(j, opp))
            free -= g
            alloc[best] += g
            if i + 1 < len(plist):
                heads[best] = i + 1
            else:
                del heads[best]
        return starts

    def refused(self, jobs: list[int]) -> None:
        """Nothing to undo: each decision reads every pool's pending jobs from the view afresh."""
