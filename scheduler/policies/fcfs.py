"""FCFS (DESIGN.md 6.2): per pool, no sharing, strict arrival order."""

from __future__ import annotations

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
    get a buddy cell of its pool's quota (the view's ``can_place``), else it
    blocks its pool; the simulator's placer stage places the starts.
    """

    name = "fcfs"
    perfect_information = False
    uses_ticks = False
    needs = PolicyNeeds(locality=True)  # on cells, the simulator places its starts

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Remember the widths, pools and quotas of ``trace``."""
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._retry: set[int] = set()  # pools with a refused start, revisited next time

    def grow(self, trace: TraceArrays, cluster: Cluster, n_old: int) -> bool:
        """Take the jobs appended to ``trace`` after index ``n_old`` (not yet arrived; the live
        service's growing arrays): their widths and pools. Returns True (it can grow)."""
        self._gpus.extend(trace.num_gpus[n_old:].tolist())
        self._pool.extend(trace.pool[n_old:].tolist())
        return True

    def set_quota(self, quota: list[int]) -> None:
        """Use ``quota`` (GPUs per pool) from the next decision on (global reservations)."""
        self._quota[:] = [int(q) for q in quota]

    def decide(self, view: SimView) -> list[Start]:
        """Return the heads of the touched pools that fit their pool's unused quota, in order."""
        starts: list[Start] = []
        gpus, can_place = self._gpus, view.can_place
        pools = view.touched_pools
        if self._retry:
            pools, self._retry = pools | self._retry, set()
        for p in sorted(pools):
            plist = view.pending(p)
            if not plist:
                continue
            free = self._quota[p] - view.used_dedicated_of(p)
            for j in plist:
                g = gpus[j]
                if g > free or not can_place(j, False):
                    break
                free -= g
                starts.append(Start(j, False))
        return starts

    def refused(self, jobs: list[int]) -> None:
        """Revisit the pools of starts the placer refused at the next decision (their heads
        still wait, in arrival order: nothing else to undo)."""
        self._retry.update(self._pool[j] for j in jobs)
