"""Baseline policies (DESIGN.md 6.2, SIA 4.1): FCFS, SSF, gSSF and MaxMin.

All four are deterministic, event-driven (their decision cannot change
without an arrival or a completion, so they set ``uses_ticks = False``) and
break every tie by arrival order (job index). "Service" is duration x GPUs
(GPU-seconds); SSF and gSSF read true durations (perfect information, as in
the paper); FCFS and MaxMin read only arrived jobs' pools and widths.
"""

from __future__ import annotations

from bisect import bisect_left, insort

from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.view import SimView, Start, TraceArrays


class FCFSPolicy:
    """First-come-first-served per pool, no sharing (the production baseline).

    Each pool starts its pending jobs in strict arrival order on its own quota
    while the head fits ``quota - dedicated use``; a head that does not fit
    blocks every later job of its pool (head-of-line blocking, no backfill).
    All starts are dedicated. Realistic: reads only arrived jobs' widths.
    On a cell-aware cluster (:mod:`sia.scheduler.locality.cell_cluster`) a head must also
    get a buddy cell of its pool's quota, else it blocks its pool.
    """

    name = "fcfs"
    perfect_information = False
    uses_ticks = False
    needs = PolicyNeeds(locality=True)

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Remember the widths and quotas of ``trace`` (and the cell placer, with locality)."""
        self._gpus = trace.num_gpus.tolist()
        self._quota = trace.quota.tolist()
        self._place = cluster.try_place if getattr(cluster, "cell_aware", False) else None

    def decide(self, view: SimView) -> list[Start]:
        """Return the heads of the touched pools that fit their pool's unused quota, in order."""
        starts: list[Start] = []
        gpus = self._gpus
        for p in sorted(view.touched_pools):
            plist = view.pending(p)
            if not plist:
                continue
            free = self._quota[p] - view.used_dedicated_of(p)
            for j in plist:
                g = gpus[j]
                if g > free:
                    break
                cell = None
                if self._place is not None:
                    cell = self._place(j, p, g, True)
                    if cell is None:
                        break
                free -= g
                starts.append(Start(j, False, cell))
        return starts


class SSFPolicy:
    """Shortest service first per pool, no sharing (perfect information: true durations).

    Each pool visits its pending jobs in increasing service (duration x GPUs,
    ties by arrival) and starts every one that fits its unused quota; a job
    that does not fit is skipped, not waited for (greedy backfill). All starts
    are dedicated.
    """

    name = "ssf"
    perfect_information = True
    uses_ticks = False
    needs = PolicyNeeds()  # places no cells: fungible GPUs only

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Prepare per-pool queues sorted by service."""
        self._gpus = trace.num_gpus.tolist()
        self._service = trace.service().tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._queues: list[list[tuple[float, int]]] = [[] for _ in range(trace.n_pools)]
        self._seen = 0

    def _admit(self, view: SimView) -> None:
        """Insert jobs that arrived since the last call into their pool's sorted queue."""
        for j in range(self._seen, view.n_arrived):
            insort(self._queues[self._pool[j]], (self._service[j], j))
        self._seen = view.n_arrived

    def decide(self, view: SimView) -> list[Start]:
        """Return, for each touched pool, the shortest-service jobs that fit its unused quota."""
        self._admit(view)
        starts: list[Start] = []
        gpus = self._gpus
        for p in sorted(view.touched_pools):
            queue = self._queues[p]
            free = self._quota[p] - view.used_dedicated_of(p)
            if not queue or free <= 0:
                continue
            chosen = _greedy(queue, gpus, free)
            if chosen:
                starts.extend(Start(j, False) for j in chosen)
                _remove(queue, chosen, self._service)
        return starts


class GlobalSSFPolicy:
    """Global shortest service first: all GPUs form one pool; quotas are ignored.

    Visits every pending job (all pools) in increasing service (duration x
    GPUs, ties by arrival) and starts each that fits the free GPUs; a job
    that does not fit is skipped (greedy backfill). A start is dedicated when
    it fits its pool's unused quota, otherwise opportunistic. Perfect
    information (true durations).
    """

    name = "gssf"
    perfect_information = True
    uses_ticks = False
    needs = PolicyNeeds()  # places no cells: fungible GPUs only

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Prepare one queue sorted by service."""
        self._gpus = trace.num_gpus.tolist()
        self._service = trace.service().tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._queue: list[tuple[float, int]] = []
        self._seen = 0

    def decide(self, view: SimView) -> list[Start]:
        """Return the shortest-service pending jobs that fit the free GPUs."""
        for j in range(self._seen, view.n_arrived):
            insort(self._queue, (self._service[j], j))
        self._seen = view.n_arrived
        free = view.free_gpus
        if not self._queue or free <= 0:
            return []
        chosen = _greedy(self._queue, self._gpus, free)
        if not chosen:
            return []
        ded = [view.used_dedicated_of(p) for p in range(view.n_pools)]
        starts = []
        for j in chosen:
            p, g = self._pool[j], self._gpus[j]
            if ded[p] + g <= self._quota[p]:
                ded[p] += g
                starts.append(Start(j, False))
            else:
                starts.append(Start(j, True))
        _remove(self._queue, chosen, self._service)
        return starts


def _remove(queue: list[tuple[float, int]], jobs: list[int], service: list[float]) -> None:
    """Delete ``jobs`` from the sorted ``queue`` of (service, job) in place."""
    for j in jobs:
        del queue[bisect_left(queue, (service[j], j))]


def _greedy(queue: list[tuple[float, int]], gpus: list[int], free: int) -> list[int]:
    """Return the jobs of ``queue`` (in its order) started greedily into ``free`` GPUs."""
    chosen = []
    for _, j in queue:
        g = gpus[j]
        if g <= free:
            chosen.append(j)
            free -= g
            if free == 0:
                break
    return chosen


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
    start also needs a buddy cell (dedicated or opportunistic); a job that
    gets none is treated as not fitting.
    """

    name = "maxmin"
    perfect_information = False
    uses_ticks = False
    needs = PolicyNeeds(locality=True)

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Remember widths and quotas (and the cell placer, with locality)."""
        self._gpus = trace.num_gpus.tolist()
        self._quota = trace.quota.tolist()
        self._P = trace.n_pools
        self._place = cluster.try_place if getattr(cluster, "cell_aware", False) else None

    def decide(self, view: SimView) -> list[Start]:
        """Return the dedicated FCFS starts, then the max-min fair opportunistic ones."""
        free = view.free_gpus
        if free <= 0:
            return []
        gpus, quota = self._gpus, self._quota
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
                if g > free or d + g > quota[p]:
                    break
                cell = None
                if self._place is not None:
                    cell = self._place(plist[i], p, g, True)
                    if cell is None:
                        break
                starts.append(Start(plist[i], False, cell))
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
            cell = None
            if self._place is not None:
                cell = self._place(j, best, g, not opp)
                if cell is None:
                    del heads[best]
                    continue
            if not opp:
                ded[best] += g
            starts.append(Start(j, opp, cell))
            free -= g
            alloc[best] += g
            if i + 1 < len(plist):
                heads[best] = i + 1
            else:
                del heads[best]
        return starts
