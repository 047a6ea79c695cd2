"""Tesserae-style placement as bipartite matching (``scipy.optimize.linear_sum_assignment``).

Placement: pending gangs against free cells. Cells of one level are
disjoint, so one assignment problem per level is exact for that level:
levels are solved from the widest gangs down, each on the cells the wider
gangs left free. Rows are the level's jobs; columns are the fully free
aligned cells of that level plus one "unscheduled" column per job. The cost
of job j in cell c is ``w_j x unit cost`` of the shared
:class:`~sia.scheduler.placement.CostModel`; an unscheduled column costs
``w_j x U_j``. For a batch of one width this is the exact optimum of the same
objective the min-cost flow solver minimises.

Relabeling (Tesserae 4.1, Algorithms 2 and 3): between two decisions, given
the old and the new placement of (preemptible) jobs, rename the new plan's
servers and then its GPUs so that as few jobs as possible move:

* Algorithm 3 (one old server a, one new server b): cost of mapping new GPU j
  onto old GPU i is ``0.5 x sum over jobs on exactly one of them of 1/g``
  (``g`` = the job's GPU count, so a job's move costs 0.5 out and 0.5 in in
  total); the Hungarian method picks the GPU mapping, whose cost is the
  pair's cost.
* Algorithm 2: jobs not present in both plans are dropped; the Hungarian
  method over the server-pair cost matrix picks the server mapping. The total
  is the migration cost (0 for a pure renaming).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.optimize import linear_sum_assignment
from sia.scheduler.placement import (
    WORK_S_PER_UNIT,
    ClusterState,
    CostModel,
    PlacementRequest,
    PlacementResult,
    cell_unit_costs,
)
from sia.scheduler.topology import Topology


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


# ------------------------------------------------------------------------- relabeling
@dataclass
class Relabeling:
    """The outcome of migration-minimising relabeling.

    ``server_map``: new-plan server -> physical (old-plan) server.
    ``gpu_map``: new-plan GPU id -> physical GPU id. ``cost``: Tesserae's
    migration cost (0.5 per job moved out plus 0.5 per job moved in).
    ``relabeled``: the new plan in physical GPU ids. ``migrated``: jobs of
    both plans whose GPUs differ after relabeling.
    """

    server_map: dict[int, int]
    gpu_map: dict[int, int]
    cost: float
    relabeled: dict[str, tuple[int, ...]]
    migrated: list[str]


def _gpu_jobs(plan: Mapping[str, Sequence[int]], keep: set[str], n_gpus: int) -> list[set[str]]:
    out: list[set[str]] = [set() for _ in range(n_gpus)]
    for job, gpus in plan.items():
        if job in keep:
            for g in gpus:
                out[g].add(job)
    return out


def _node_pair(
    old_sets: list[set[str]], new_sets: list[set[str]], weight: Mapping[str, float]
) -> tuple[float, np.ndarray]:
    """Algorithm 3: migration cost of mapping a new server onto an old one, and the GPU mapping.

    Returns (cost, perm) where new local GPU j goes to old local GPU perm[j].
    """
    k = len(old_sets)
    cost = np.empty((k, k))
    for i in range(k):
        for j in range(k):
            diff = old_sets[i] ^ new_sets[j]
            cost[i, j] = 0.5 * sum(weight[x] for x in diff)
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(k, dtype=np.int64)
    perm[cols] = rows
    return float(cost[rows, cols].sum()), perm


def relabel_min_migration(
    old: Mapping[str, Sequence[int]], new: Mapping[str, Sequence[int]], topology: Topology
) -> Relabeling:
    """Rename the new plan's servers, then GPUs, to minimise migrations (Tesserae Algorithms 2, 3).

    ``old`` and ``new`` map job id -> GPU ids (a GPU may hold several jobs when
    packing). Jobs present in only one plan are dropped for the cost (line 2 of
    Algorithm 2) but still relabeled.
    """
    gps = topology.gpus_per_server
    n_servers = topology.n_servers
    both = set(old) & set(new)
    weight = {job: 1.0 / len(new[job]) for job in both}
    old_sets = _gpu_jobs(old, both, topology.n_gpus)
    new_sets = _gpu_jobs(new, both, topology.n_gpus)
    old_w = np.array([sum(weight[x] for x in s) for s in old_sets]).reshape(n_servers, gps).sum(axis=1)
    new_w = np.array([sum(weight[x] for x in s) for s in new_sets]).reshape(n_servers, gps).sum(axis=1)
    # servers sharing no job: any GPU mapping costs every job out and in
    node_cost = 0.5 * (old_w[:, None] + new_w[None, :])
    old_jobs_srv = [set().union(*old_sets[a * gps : (a + 1) * gps]) for a in range(n_servers)]
    new_jobs_srv = [set().union(*new_sets[b * gps : (b + 1) * gps]) for b in range(n_servers)]
    perms: dict[tuple[int, int], np.ndarray] = {}
    for a in range(n_servers):
        if not old_jobs_srv[a]:
            continue
        for b in range(n_servers):
            if old_jobs_srv[a] & new_jobs_srv[b]:
                c, perm = _node_pair(
                    old_sets[a * gps : (a + 1) * gps], new_sets[b * gps : (b + 1) * gps], weight
                )
                node_cost[a, b] = c
                perms[(a, b)] = perm
    rows, cols = linear_sum_assignment(node_cost)
    total = float(node_cost[rows, cols].sum())
    server_map = {int(b): int(a) for a, b in zip(rows, cols, strict=True)}
    gpu_map: dict[int, int] = {}
    for b, a in server_map.items():
        perm = perms.get((a, b))
        if perm is None:
            perm = np.arange(gps)
        for j in range(gps):
            gpu_map[b * gps + j] = a * gps + int(perm[j])
    relabeled = {job: tuple(sorted(gpu_map[g] for g in gpus)) for job, gpus in new.items()}
    migrated = sorted(j for j in both if set(relabeled[j]) != set(old[j]))
    return Relabeling(server_map, gpu_map, total, relabeled, migrated)
