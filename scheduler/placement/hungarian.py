"""Tesserae-style placement as bipartite matching (``scipy.optimize.linear_sum_assignment``).

Placement: pending gangs against free cells. Cells of one level are
disjoint, so one assignment problem per level is exact for that level:
levels are solved from the widest gangs down, each on the cells the wider
gangs left free. Rows are the level's jobs; columns are the fully free
aligned cells of that level plus one "unscheduled" column per job. The cost
of job j in cell c is ``w_j x unit cost`` of the shared
:class:`~sia.scheduler.placement.costs.CostModel`; an unscheduled column costs
``w_j x U_j``. For a batch of one width this is the exact optimum of the same
objective the min-cost flow solver minimises.

Relabeling and migration planning (Tesserae 4.1) live in
:mod:`sia.scheduler.locality.migration`.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from scipy.optimize import linear_sum_assignment
from sia.scheduler.placement.costs import CostModel, cell_unit_costs
from sia.scheduler.placement.protocol import (
    WORK_S_PER_UNIT,
    ClusterState,
    PlacementRequest,
    PlacementResult,
)


class HungarianPlacer:
    """Assignment of pending gangs to free cells, one level at a time (widest first)."""

    name = "hungarian"

    def __init__(self, cost: CostModel | None = None) -> None:
        self.cost = cost or CostModel()

    def place(
        self, batch: Sequence[PlacementRequest], state: ClusterState, budget_s: float
    ) -> PlacementResult:
        """Place ``batch``; stats give the matrix shape and solve time per level."""
        t0 = time.perf_counter()
        topo = state.topology
        placements: dict[str, tuple[int, ...]] = {}
        unplaced: dict[str, str] = {}
        by_level: dict[int, list[int]] = defaultdict(list)
        for rank, r in enumerate(batch):
            try:
                by_level[topo.level_for(r.num_gpus)].append(rank)
            except ValueError as err:
                unplaced[r.job_id] = str(err)
        free = state.free.copy()
        stats: dict = {"levels": {}, "work_s": 0.0}
        total = 0
        for level in sorted(by_level, reverse=True):
            ranks = by_level[level]
            # costs are computed on the state the batch was given (as placement_cost does)
            cells = np.flatnonzero(free.reshape(-1, 1 << level).all(axis=1))
            n, m = len(ranks), cells.size
            matrix = np.empty((n, m + n), dtype=np.int64)
            for row, rank in enumerate(ranks):
                req = batch[rank]
                unsched = req.num_gpus * self.cost.unscheduled_unit_cost(topo, rank, len(batch))
                if m:
                    matrix[row, :m] = req.num_gpus * cell_unit_costs(state, self.cost, level, cells, req)
                matrix[row, m:] = unsched
            ts = time.perf_counter()
            rows, cols = linear_sum_assignment(matrix)
            stats["levels"][level] = {"shape": (n, m + n), "solve_s": time.perf_counter() - ts}
            stats["work_s"] += matrix.size * WORK_S_PER_UNIT["hungarian_entry"]
            total += int(matrix[rows, cols].sum())
            for row, col in zip(rows, cols, strict=True):
                req = batch[ranks[row]]
                if col < m:
                    first = int(cells[col]) << level
                    free[first : first + (1 << level)] = False
                    placements[req.job_id] = tuple(range(first, first + req.num_gpus))
                else:
                    unplaced[req.job_id] = (
                        f"no free {1 << level}-GPU cell left for it in the assignment"
                        if m < n else "leaving it out was cheaper"
                    )
        return PlacementResult(
            self.name, placements, unplaced, elapsed_s=time.perf_counter() - t0,
            objective=total, stats=stats,
        )


