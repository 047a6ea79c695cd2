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


class SSFPolicy:
    """Shortest service first per pool, no sharing (perfect information: true durations).

    Each pool visits its pending jobs in increasing service (duration x GPUs,
    ties by arrival) and starts every one that fits its unused quota; a job
    that does not fit is skipped, not waited for (greedy backfill). All starts
    are dedicated. On a cell-aware cluster the simulator's placer stage places
    the starts; a refused one goes back to its pool's queue (:meth:`refused`).
    """

    name = "ssf"
    perfect_information = True
    uses_ticks = False
    needs = PolicyNeeds(locality=True)  # on cells, the simulator places its starts

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Prepare per-pool queues sorted by service."""
        self._gpus = trace.num_gpus.tolist()
        self._service = trace.service().tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._queues: list[list[tuple[float, int]]] = [[] for _ in range(trace.n_pools)]
        self._seen = 0
        self._retry: set[int] = set()  # pools with a refused start, revisited next time

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
        pools = view.touched_pools
        if self._retry:
            pools, self._retry = pools | self._retry, set()
        for p in sorted(pools):
            queue = self._queues[p]
            free = self._quota[p] - view.used_dedicated_of(p)
            if not queue or free <= 0:
                continue
            chosen = _greedy(queue, gpus, free)
            if chosen:
                starts.extend(Start(j, False) for j in chosen)
                _remove(queue, chosen, self._service)
        return starts

    def refused(self, jobs: list[int]) -> None:
        """Put starts the placer refused (no cell) back in their pools' queues."""
        for j in jobs:
            p = self._pool[j]
            insort(self._queues[p], (self._service[j], j))
            self._retry.add(p)


class GlobalSSFPolicy:
    """Global shortest service first: all GPUs form one pool; quotas are ignored.

    Visits every pending job (all pools) in increasing service (duration x
    GPUs, ties by arrival) and starts each that fits the free GPUs; a job
    that does not fit is skipped (greedy backfill). A start is dedicated when
    it fits its pool's unused quota, otherwise opportunistic. Perfect
    information (true durations). On a cell-aware cluster the simulator's
    placer stage places the starts as one batch; a refused one goes back to the
    queue (:meth:`refused`).
    """

    name = "gssf"
    perfect_information = True
    uses_ticks = False
    needs = PolicyNeeds(locality=True)  # on cells, the simulator places its starts

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

    def refused(self, jobs: list[int]) -> None:
        """Put starts the placer refused (no cell) back in the queue."""
        for j in jobs:
            insort(self._queue, (self._service[j], j))


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


