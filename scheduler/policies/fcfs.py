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
