"""The placement interface, its checker, the shared cost model and the solver chain.

Every placement solver (min-cost flow, Hungarian, MILP; see ``place_*.py``)
implements ``place(batch, state, budget_s) -> PlacementResult``: for a batch
of pending gangs and a snapshot of the cluster it returns, per job, either
the GPU ids it gets or a reason it could not be placed, or a whole-call
``failure`` (timeout, solver error) with no placements at all.

A gang of ``w`` GPUs must use ``w`` GPUs of *one* cell of level
``topology.level_for(w)`` and holds that whole cell (buddy semantics: a
3-GPU job holds a 4-GPU cell). :func:`validate_placement` checks exactly
that, plus: no GPU or cell used twice, only free GPUs, every job of the batch
accounted for once. :class:`PlacementChain` runs solvers in order, validates
each answer, and hands what one solver could not place (or everything, if it
failed or overran its budget) to the next.

The cost model (:class:`CostModel`) is shared so that the solvers optimise
the same objective, which :func:`placement_cost` evaluates for any answer:

* per GPU of a placed gang: ``frag_weight x free GPUs in the cell's domain``
  (the server for cells up to a server, the rack above), so gangs go where
  the free count fits best (best fit; Firmament's load-spreading in reverse);
* ``near_dedicated_penalty`` per GPU when an opportunistic gang lands in a
  domain holding any pool's dedicated cells (SIA 5.5);
* ``far_from_pool_penalty`` per GPU when a dedicated gang lands in a domain
  holding none of its own pool's dedicated cells (keep a pool's cells together);
* per GPU of an unplaced gang: :meth:`CostModel.unscheduled_unit_cost`, more
  than any placement costs, growing with the job's rank in the batch when
  ``priority_weight > 0`` (earlier jobs are costlier to leave out).

Costs are integers, in these units per GPU.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import numpy as np
from sia.scheduler.locality.topology import Topology


@dataclass(frozen=True)
class PlacementRequest:
    """One pending gang: ``num_gpus`` GPUs for ``job_id`` of ``pool``.

    ``dedicated`` says the job runs on its pool's quota (else opportunistic).
    ``duration_s`` is the (estimated) run time, used by the plan-ahead MILP.
    """

    job_id: str
    num_gpus: int
    pool: str | None = None
    dedicated: bool = False
    duration_s: float | None = None


@dataclass
class ClusterState:
    """A snapshot of the cluster for placement.

    ``free[g]`` is True when GPU g can be given to this batch. ``dedicated_pool[g]``
    is the index (into ``pools``) of the pool whose dedicated cell holds GPU g, or -1.
    ``busy_until[g]`` is when a busy GPU is expected back (seconds, absolute;
    ``inf`` if unknown); only the plan-ahead MILP reads it.
    """

    topology: Topology
    free: np.ndarray
    dedicated_pool: np.ndarray | None = None
    pools: tuple[str, ...] = ()
    now: float = 0.0
    busy_until: np.ndarray | None = None

    def __post_init__(self) -> None:
        n = self.topology.n_gpus
        self.free = np.asarray(self.free, dtype=bool)
        if self.free.shape != (n,):
            raise ValueError(f"ClusterState.free must have shape ({n},), got {self.free.shape}")
        if self.dedicated_pool is None:
            self.dedicated_pool = np.full(n, -1, dtype=np.int32)
        self.dedicated_pool = np.asarray(self.dedicated_pool, dtype=np.int32)
        if self.dedicated_pool.shape != (n,):
            raise ValueError(f"ClusterState.dedicated_pool must have shape ({n},)")
        if self.busy_until is not None:
            self.busy_until = np.asarray(self.busy_until, dtype=float)

    @classmethod
    def empty(cls, topology: Topology, **kwargs) -> ClusterState:
        """A state with every GPU free."""
        return cls(topology, np.ones(topology.n_gpus, dtype=bool), **kwargs)

    def pool_index(self, pool: str | None) -> int:
        """Index of ``pool`` in :attr:`pools`, -1 if absent or None."""
        if pool is None or pool not in self.pools:
            return -1
        return self.pools.index(pool)

    def with_used(self, gpu_lists: Sequence[Sequence[int]]) -> ClusterState:
        """A copy where the GPUs of the given gangs' *cells* are no longer free."""
        free = self.free.copy()
        for gpus in gpu_lists:
            if len(gpus):
                level = self.topology.level_for(len(gpus))
                first = (min(gpus) >> level) << level
                free[first : first + (1 << level)] = False
        return ClusterState(
            self.topology, free, self.dedicated_pool.copy(), self.pools, self.now,
            None if self.busy_until is None else self.busy_until.copy(),
        )

    def free_cells(self, level: int) -> np.ndarray:
        """Indices of the fully free aligned cells of ``level`` (sorted)."""
        blocks = self.free.reshape(-1, 1 << level).all(axis=1)
        return np.flatnonzero(blocks)


@dataclass
class PlacementResult:
    """What one placement call returns.

    ``placements``: job id -> GPU ids. ``unplaced``: job id -> reason. If
    ``failure`` is set the call failed as a whole (timeout, solver error) and
    ``placements`` is empty. ``elapsed_s`` is wall time in seconds.
    """

    solver: str
    placements: dict[str, tuple[int, ...]] = field(default_factory=dict)
    unplaced: dict[str, str] = field(default_factory=dict)
    failure: str | None = None
    elapsed_s: float = 0.0
    objective: float | None = None
    stats: dict = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        """True if the call did not fail as a whole."""
        return self.failure is None

    @classmethod
    def failed(cls, solver: str, batch: Sequence[PlacementRequest], reason: str, **kw) -> PlacementResult:
        """A whole-call failure: every job of the batch unplaced with ``reason``."""
        return cls(solver, {}, {r.job_id: reason for r in batch}, failure=reason, **kw)

    def servers_of(self, job_id: str, topology: Topology) -> list[int]:
        """Sorted servers used by ``job_id``."""
        return sorted({topology.server_of_gpu(g) for g in self.placements[job_id]})


@runtime_checkable
class PlacementSolver(Protocol):
    """A placement solver: a name and ``place(batch, state, budget_s)``."""

    name: str

    def place(
        self, batch: Sequence[PlacementRequest], state: ClusterState, budget_s: float
    ) -> PlacementResult:
        """Place the batch on ``state`` within about ``budget_s`` seconds."""
        ...


class InvalidPlacement(ValueError):
    """A solver returned a placement that breaks the rules (a bug in that solver)."""


def validate_placement(
    result: PlacementResult, batch: Sequence[PlacementRequest], state: ClusterState
) -> None:
    """Raise InvalidPlacement naming the first broken rule; return None if the result is valid."""
    topo = state.topology
    by_id = {r.job_id: r for r in batch}
    if len(by_id) != len(batch):
        raise InvalidPlacement("batch has duplicate job ids")
    if result.failure is not None and result.placements:
        raise InvalidPlacement(f"{result.solver}: failed call must not place jobs")
    both = set(result.placements) & set(result.unplaced)
    if both:
        raise InvalidPlacement(f"{result.solver}: job {sorted(both)[0]!r} both placed and unplaced")
    missing = set(by_id) - set(result.placements) - set(result.unplaced)
    if missing:
        raise InvalidPlacement(f"{result.solver}: job {sorted(missing)[0]!r} neither placed nor unplaced")
    extra = (set(result.placements) | set(result.unplaced)) - set(by_id)
    if extra:
        raise InvalidPlacement(f"{result.solver}: job {sorted(extra)[0]!r} is not in the batch")
    used = np.zeros(topo.n_gpus, dtype=bool)
    for job_id, gpus in result.placements.items():
        req = by_id[job_id]
        arr = np.asarray(gpus, dtype=np.int64)
        if arr.size != req.num_gpus:
            raise InvalidPlacement(f"{result.solver}: job {job_id!r} got {arr.size} GPUs, wants {req.num_gpus}")
        if arr.size == 0 or arr.min() < 0 or arr.max() >= topo.n_gpus:
            raise InvalidPlacement(f"{result.solver}: job {job_id!r} has a GPU id out of range")
        if np.unique(arr).size != arr.size:
            raise InvalidPlacement(f"{result.solver}: job {job_id!r} lists a GPU twice")
        level = topo.level_for(req.num_gpus)
        cell = int(arr.min()) >> level
        if int(arr.max()) >> level != cell:
            raise InvalidPlacement(
                f"{result.solver}: job {job_id!r} spans more than one {1 << level}-GPU cell"
            )
        lo, hi = cell << level, (cell + 1) << level
        if used[lo:hi].any():
            raise InvalidPlacement(f"{result.solver}: job {job_id!r} shares its cell or a GPU with another job")
        if not state.free[lo:hi].all():
            raise InvalidPlacement(f"{result.solver}: job {job_id!r} uses a cell that is not free")
        used[lo:hi] = True


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


# ---------------------------------------------------------------------------- chain
@dataclass
class Attempt:
    """One solver's turn in a chain: what it placed, how long it took, why it stopped."""

    solver: str
    placed: list[str]
    elapsed_s: float
    failure: str | None = None
    timed_out: bool = False


#: Seconds per unit of deterministic work, for ``enforce_budget="work"``: min-cost flow per
#: arc of its graphs and per job of the batch, Hungarian per cost-matrix entry. Fitted once
#: to the median time of whole ``place`` calls on bench_placement.py's instances (32-1,000
#: servers, 100-10,000 jobs; 2-core dev machine under load: mcf 13 us/arc + 18 us/job,
#: Hungarian 0.3 us/entry) and fixed here, so that a budget in seconds becomes a
#: deterministic work limit (an estimate, right within a factor of about 2). The MILP
#: reports CP-SAT's own deterministic time (model building is not charged).
WORK_S_PER_UNIT = {"mcf_arc": 1e-5, "mcf_job": 1.5e-5, "hungarian_entry": 3e-7}


class PlacementChain:
    """Try solvers in order; each gets ``budget_s`` per call and the jobs the previous ones left.

    An answer that fails :func:`validate_placement`, fails as a whole, or
    is over budget counts as that solver's failure, and its jobs fall through
    to the next solver. ``enforce_budget``: True checks the wall-clock time
    of each call (``clock`` returns seconds, injectable for tests); False
    checks nothing; ``"work"`` checks each answer's deterministic work
    estimate ``stats["work_s"]`` (seconds; see :data:`WORK_S_PER_UNIT`) and
    switches solvers with a ``deterministic`` attribute to deterministic
    limits (CP-SAT's ``max_deterministic_time``, no wall-clock round cut-off),
    so a replay's placements never depend on machine speed or load.
    """

    name = "chain"

    def __init__(
        self,
        solvers: Sequence[PlacementSolver],
        budget_s: float = 1.0,
        *,
        enforce_budget: bool | str = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not solvers:
            raise ValueError("a placement chain needs at least one solver")
        if enforce_budget not in (True, False, "work"):
            raise ValueError(f"enforce_budget must be True, False or 'work', not {enforce_budget!r}")
        self.solvers = list(solvers)
        if enforce_budget == "work":
            for solver in self.solvers:
                if hasattr(solver, "deterministic"):
                    solver.deterministic = True
        self.budget_s = budget_s
        self.enforce_budget = enforce_budget
        self.clock = clock

    def place(
        self, batch: Sequence[PlacementRequest], state: ClusterState, budget_s: float | None = None
    ) -> PlacementResult:
        """Place the batch; ``stats['attempts']`` lists each solver's :class:`Attempt`,
        ``stats['placed_by']`` maps job id -> solver name."""
        budget = self.budget_s if budget_s is None else budget_s
        start = self.clock()
        remaining = list(batch)
        placements: dict[str, tuple[int, ...]] = {}
        reasons: dict[str, list[str]] = {r.job_id: [] for r in batch}
        attempts: list[Attempt] = []
        placed_by: dict[str, str] = {}
        current = state
        for solver in self.solvers:
            if not remaining:
                break
            t0 = self.clock()
            try:
                res = solver.place(remaining, current, budget)
            except Exception as err:  # a solver crash is that solver's failure
                res = PlacementResult.failed(solver.name, remaining, f"error: {err!r}")
            elapsed = self.clock() - t0
            failure = res.failure
            timed_out = False
            if failure is None and self.enforce_budget == "work":
                work = res.stats.get("work_s")
                if work is None:
                    failure = "reports no deterministic work (stats['work_s'])"
                elif work > budget:
                    failure, timed_out = f"over work budget ({work:.3f} s > {budget:.3f} s)", True
            elif failure is None and self.enforce_budget and elapsed > budget:
                failure, timed_out = f"over budget ({elapsed:.3f} s > {budget:.3f} s)", True
            if failure is None:
                try:
                    validate_placement(res, remaining, current)
                except InvalidPlacement as err:
                    failure = f"invalid placement: {err}"
            if failure is not None:
                attempts.append(Attempt(solver.name, [], elapsed, failure, timed_out))
                for r in remaining:
                    reasons[r.job_id].append(f"{solver.name}: {failure}")
                continue
            attempts.append(Attempt(solver.name, sorted(res.placements), elapsed))
            for job_id, gpus in res.placements.items():
                placements[job_id] = tuple(gpus)
                placed_by[job_id] = solver.name
            for job_id, why in res.unplaced.items():
                reasons[job_id].append(f"{solver.name}: {why}")
            current = current.with_used(list(res.placements.values()))
            remaining = [r for r in remaining if r.job_id not in res.placements]
        unplaced = {r.job_id: "; ".join(reasons[r.job_id]) or "not tried" for r in remaining}
        all_failed = all(a.failure is not None for a in attempts) and bool(attempts)
        return PlacementResult(
            self.name,
            placements,
            unplaced,
            failure="every solver failed" if all_failed else None,
            elapsed_s=self.clock() - start,
            stats={"attempts": attempts, "placed_by": placed_by},
        )
