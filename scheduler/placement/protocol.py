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

from collections.abc import Sequence
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


#: Seconds per unit of deterministic work, for ``enforce_budget="work"``: min-cost flow per
#: arc of its graphs and per job of the batch, Hungarian per cost-matrix entry. Fitted once
#: to the median time of whole ``place`` calls on bench_placement.py's instances (32-1,000
#: servers, 100-10,000 jobs; 2-core dev machine under load: mcf 13 us/arc + 18 us/job,
#: Hungarian 0.3 us/entry) and fixed here, so that a budget in seconds becomes a
#: deterministic work limit (an estimate, right within a factor of about 2). The MILP
#: reports CP-SAT's own deterministic time (model building is not charged).
WORK_S_PER_UNIT = {"mcf_arc": 1e-5, "mcf_job": 1.5e-5, "hungarian_entry": 3e-7}


