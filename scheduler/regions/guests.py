"""A region as the global scan sees it: the GPUs (and, on cells, the cells) it lends to guests.

:class:`GuestSlots` (fungible GPUs) and :class:`CellGuestSlots` (buddy cells)
implement :class:`~sia.scheduler.regions.global_scan.RegionScheduler` for
:class:`~sia.scheduler.regions.global_policy.GlobalRegionPolicy`; the rule
that sets ``lendable`` (SIA's reservations, or ``idle``) is the policy's
(see its module doc).

On cells a guest follows the rule SIA's own loans follow in that region
(:meth:`SparePass._lend_in_window
<sia.scheduler.policies.sia.spare.SparePass._lend_in_window>` with
``_reserve_cells``): in the guest's lending window every home pool's
reservation is made as *cells* of its quota (its pending jobs' widths in
arrival order, the rest as its largest cells,
:meth:`~sia.scheduler.locality.cell_cluster.CellCluster.reservation_widths`);
a reservation that cannot be met refuses the guest (SIA lends nothing in
that window then), and otherwise the guest needs an opportunistic cell
(:meth:`~sia.scheduler.locality.cell_cluster.CellCluster.try_place`: outside
every pool's bound cells, not in the buddy of a dedicated cell with
``strict_buddies``, then the fallback chain); the reservations are cleared
again at once. ``try_plan`` finds the cell and gives everything back
(counters included), so it leaves the region as it was; ``commit`` takes
the same cell again (the allocator is deterministic) and starts the guest
on it, under the cluster key ``-1 - job``.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sia.scheduler.locality.cell_cluster import CellCluster, PlacementStats
from sia.scheduler.regions.global_scan import JobRequest, Plan
from sia.scheduler.regions.model import RegionsError

_EPS = 1e-9


class GuestSlots:
    """A region as the global scan sees it: GPUs it lends to guests, per lending window."""

    hardware = frozenset({"gpu"})

    def __init__(self, name: str, total: int, free: int, lendable: list[float]):
        self.name, self.total_gpus, self.free = name, total, free
        self.lendable = lendable  # per window: GPUs guests may take (non-increasing in k)

    def free_gpus(self) -> int:
        """GPUs free in the region now (after this pass's guests)."""
        return self.free

    def try_plan(self, request: JobRequest) -> Plan | None:
        """A plan if the guest fits the GPUs lent in its window (never changes the region)."""
        k = request.window
        if k >= len(self.lendable) or request.gpus > self.lendable[k] + 1e-9:
            return None
        return Plan(self.name, request.job_id, request.gpus, 1)

    def commit(self, plan: Plan) -> None:
        """Count the planned guest's GPUs as taken in every window."""
        self.free -= plan.gpus
        self.lendable = [x - plan.gpus for x in self.lendable]


class CellGuestSlots(GuestSlots):
    """:class:`GuestSlots` on a region's cell cluster: a guest also needs a cell (module doc).

    ``cells``: the region's cluster; ``reserved``: per window, each pool's
    reservation in GPUs (None: no reservations, e.g. ``idle`` guests);
    ``widths``: each pool's pending jobs' widths in arrival order.
    """

    def __init__(self, name: str, total: int, free: int, lendable: list[float],
                 cells: CellCluster, reserved: np.ndarray | None, widths: dict[int, list[int]]):
        super().__init__(name, total, free, lendable)
        self.cells, self.reserved, self.widths = cells, reserved, widths
        self._pool_index = {n: i for i, n in enumerate(cells.pool_names)}

    def try_plan(self, request: JobRequest) -> Plan | None:
        """A plan with the guest's cell (``detail``: its GPU ids) if it fits the GPUs lent in its
        window and gets a cell under that window's reservations; the region is left as it was."""
        if super().try_plan(request) is None:
            return None
        gpus = self._cell(request, quiet=True)
        if gpus is None:
            return None
        servers = len(set((np.asarray(gpus) // self.cells.topology.gpus_per_server).tolist()))
        return Plan(self.name, request.job_id, request.gpus, servers, detail=(request.window, request.pool))

    def commit(self, plan: Plan) -> None:
        """Start the guest on its cell in the region's cluster (key ``-1 - job``)."""
        window, pool = plan.detail
        request = JobRequest(plan.job_id, pool, plan.gpus, window=window)
        gpus = self._cell(request, quiet=False)
        if gpus is None:
            raise RegionsError(f"region {self.name!r}: guest job {plan.job_id} lost the cell "
                               "its plan found (the cell allocator is not deterministic)")
        self.cells.allocate(-1 - int(plan.job_id), plan.gpus, gpus)
        super().commit(plan)

    def _cell(self, request: JobRequest, *, quiet: bool) -> tuple[int, ...] | None:
        """The guest's cell under its window's reservations (None: refused). ``quiet``: give the
        cell back and leave the counters as they were (a plan, not a start)."""
        cells, key = self.cells, -1 - int(request.job_id)
        try:
            cells.topology.level_for(request.gpus)
        except ValueError:  # wider than the region's largest cell
            return None
        saved: Any = (cells.stats, cells.buddy.adoptions) if quiet else None
        if quiet:
            cells.stats = PlacementStats()
        try:
            if not self._reserve(request.window):
                return None
            gpus = cells.try_place(key, self._pool_index[request.pool], request.gpus, False)
            if gpus is not None and quiet:
                cells.drop_grant(key)
            return gpus
        finally:
            cells.clear_reservations()
            if quiet:
                cells.stats, cells.buddy.adoptions = saved

    def _reserve(self, window: int) -> bool:
        """Reserve window ``window``'s GPUs of every home pool as cells; False if one is pending."""
        if self.reserved is None:
            return True
        cells = self.cells
        for p, res in enumerate(self.reserved[window].tolist()):
            if res <= _EPS:
                continue
            widths = cells.reservation_widths(res, self.widths.get(p, []), p)
            if not cells.reserve(p, widths):
                return False
        return True
