"""The shared placement cost model (:class:`CostModel`), its per-cell terms and gang packing into aligned cells."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from sia.scheduler.locality.topology import Topology
from sia.scheduler.placement.protocol import ClusterState, PlacementRequest


# ---------------------------------------------------------------------------- costs
@dataclass(frozen=True)
class CostModel:
    """Integer placement costs per GPU (see the module docstring)."""

    frag_weight: int = 1
    near_dedicated_penalty: int = 64
    far_from_pool_penalty: int = 64
    priority_weight: int = 0

    def max_unit_cost(self, topology: Topology) -> int:
        """The largest per-GPU cost any placement can have."""
        rack_gpus = topology.cell_gpus(topology.top_level)
        return self.frag_weight * rack_gpus + self.near_dedicated_penalty + self.far_from_pool_penalty

    def unscheduled_unit_cost(self, topology: Topology, rank: int, batch_size: int) -> int:
        """Per-GPU cost of leaving the job of batch position ``rank`` unplaced."""
        return self.max_unit_cost(topology) + 1 + self.priority_weight * (batch_size - rank)


def domain_level(topology: Topology, level: int) -> int:
    """Level of the cost domain of a cell: its server, or its rack for cells above a server."""
    return topology.server_level if level <= topology.server_level else topology.top_level


def domain_tables(state: ClusterState, level: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Per cost domain for cells of ``level``: free GPUs, any-dedicated flag, per-pool flags [dom, pools].

    Also returns the domain level. Pools are those of ``state.pools`` (at least one column).
    """
    dlev = domain_level(state.topology, level)
    size = 1 << dlev
    free = state.free.reshape(-1, size).sum(axis=1)
    ded = state.dedicated_pool.reshape(-1, size)
    any_ded = (ded >= 0).any(axis=1)
    n_pools = max(1, len(state.pools))
    has_pool = np.zeros((ded.shape[0], n_pools), dtype=bool)
    rows, cols = np.nonzero(ded >= 0)
    has_pool[rows, ded[rows, cols]] = True
    return free, any_ded, has_pool, dlev


def cell_unit_costs(
    state: ClusterState, cost: CostModel, level: int, cells: np.ndarray, req: PlacementRequest
) -> np.ndarray:
    """Per-GPU cost (int64) of placing ``req`` in each cell of ``level`` listed in ``cells``."""
    free, any_ded, has_pool, dlev = domain_tables(state, level)
    dom = np.asarray(cells, dtype=np.int64) >> (dlev - level)
    return class_unit_costs(state, cost, req, free[dom], any_ded[dom], has_pool[dom])


def class_unit_costs(
    state: ClusterState, cost: CostModel, req: PlacementRequest, free, any_ded, has_pool
) -> np.ndarray:
    """Per-GPU cost from domain features (vectorized over domains)."""
    out = cost.frag_weight * np.asarray(free, dtype=np.int64)
    if req.dedicated:
        p = state.pool_index(req.pool)
        mine = has_pool[:, p] if p >= 0 else np.zeros(len(out), dtype=bool)
        out = out + cost.far_from_pool_penalty * (~mine)
    else:
        out = out + cost.near_dedicated_penalty * np.asarray(any_ded, dtype=np.int64)
    return out


def placement_cost(
    placements: dict[str, Sequence[int]],
    batch: Sequence[PlacementRequest],
    state: ClusterState,
    cost: CostModel,
) -> int:
    """Total cost of an answer under ``cost``: placed gangs' costs plus unplaced jobs' costs."""
    topo = state.topology
    total = 0
    for rank, req in enumerate(batch):
        gpus = placements.get(req.job_id)
        if gpus is None:
            total += req.num_gpus * cost.unscheduled_unit_cost(topo, rank, len(batch))
            continue
        level = topo.level_for(req.num_gpus)
        cell = min(gpus) >> level
        unit = cell_unit_costs(state, cost, level, np.array([cell]), req)[0]
        total += req.num_gpus * int(unit)
    return total


def pack_gangs(
    state_free: np.ndarray,
    topology: Topology,
    gangs: Sequence[tuple[str, int]],
    domain_cells: np.ndarray | None = None,
    gpu_range: tuple[int, int] | None = None,
) -> tuple[dict[str, tuple[int, ...]], list[str]]:
    """Pack gangs (job id, width) into aligned free cells, largest first, best fit.

    ``state_free`` (bool [n_gpus]) is updated in place. If ``domain_cells`` is
    given (a bool mask over servers), only cells on those servers are used; if
    ``gpu_range`` (lo, hi) is given (aligned to a server or larger cell that
    holds every gang), only GPUs in it are looked at, which keeps packing one
    server cheap on a large cluster. Returns (placements, job ids that did not
    fit). For power-of-two cells, largest-first packing fits everything
    whenever the per-level cell counts allow it.
    """
    if gpu_range is not None:
        lo, hi = gpu_range
        if hi - lo <= 64:
            return _pack_bits(state_free, topology, gangs, lo, hi)
        local, failed = pack_gangs(state_free[lo:hi], topology, gangs)
        return {j: tuple(g + lo for g in gpus) for j, gpus in local.items()}, failed
    placed: dict[str, tuple[int, ...]] = {}
    failed: list[str] = []
    gps = topology.gpus_per_server
    order = sorted(range(len(gangs)), key=lambda k: (-gangs[k][1], k))
    for k in order:
        job_id, width = gangs[k]
        level = topology.level_for(width)
        size = 1 << level
        blocks = state_free.reshape(-1, size).all(axis=1)
        if domain_cells is not None:
            if size <= gps:
                blocks &= np.repeat(domain_cells, gps // size)
            else:
                blocks &= domain_cells.reshape(-1, size // gps).all(axis=1)
        cands = np.flatnonzero(blocks)
        if cands.size == 0:
            failed.append(job_id)
            continue
        # best fit: the candidate whose parent cell has the fewest free GPUs
        if level < topology.top_level and state_free.size >= size * 2:
            psize = size * 2
            parent_free = state_free.reshape(-1, psize).sum(axis=1)[cands >> 1]
            cell = int(cands[np.argmin(parent_free)])
        else:
            cell = int(cands[0])
        first = cell << level
        state_free[first : first + size] = False
        placed[job_id] = tuple(range(first, first + width))
    return placed, failed


def _pack_bits(state_free, topology, gangs, lo, hi):
    """pack_gangs on a small aligned GPU range (<= 64 GPUs) using an integer bit mask."""
    n = hi - lo
    bits = 0
    for k in np.flatnonzero(state_free[lo:hi]).tolist():
        bits |= 1 << k
    placed: dict[str, tuple[int, ...]] = {}
    failed: list[str] = []
    for k in sorted(range(len(gangs)), key=lambda k: (-gangs[k][1], k)):
        job_id, width = gangs[k]
        size = 1 << topology.level_for(width)
        full = (1 << size) - 1
        best = None
        for start in range(0, n - size + 1, size):
            if (bits >> start) & full == full:
                if 2 * size <= n:
                    pstart = (start // (2 * size)) * 2 * size
                    parent_free = ((bits >> pstart) & ((1 << (2 * size)) - 1)).bit_count()
                else:
                    parent_free = 0
                if best is None or parent_free < best[0]:
                    best = (parent_free, start)
        if best is None:
            failed.append(job_id)
            continue
        start = best[1]
        bits &= ~(full << start)
        state_free[lo + start : lo + start + size] = False
        placed[job_id] = tuple(range(lo + start, lo + start + width))
    return placed, failed
