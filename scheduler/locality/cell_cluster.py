"""The cell-aware cluster: locality (buddy cells), fallback placement and preemption for the simulator.

SIA 5.5 / DESIGN.md 6.3. With a topology, every start is placed in *one*
cell of the level its gang needs (1, 2, 4, 8 GPUs inside a server; 16, 32 in
a rack; a 3-GPU gang holds a 4-GPU cell).

How policies use it (the seam of :mod:`sia.scheduler.core.cluster`), two ways:

* *Placed by the simulator* (FCFS, MaxMin, HiveD*, SIA, SSF, gSSF, Themis*:
  a policy with ``refused(jobs)``): ``decide`` returns starts without a
  placement, and the simulator's placer stage places them as one batch
  (:meth:`CellCluster.place_batch`), reporting the refused ones back. A
  policy that must know whether a start gets a cell before its next choice
  asks the view's ``can_place(job, opportunistic)``, which holds the cell
  here through :meth:`CellCluster.try_place` (so later answers in the same
  decision see it); the placer stage gives the start that cell, and frees
  (:meth:`CellCluster.drop_grant`) a held cell the decision did not start.
* *Placing its own starts* (a policy without ``refused``; SIA still does so
  for a dedicated start its preemption makes room for, with the cell
  :meth:`CellCluster.preempt_for` grants, and reserves cells here itself):
  ``reset(trace, cluster)`` sees a
  :class:`CellCluster` (``cluster.cell_aware`` is True); before it returns a
  start, the policy asks ``cluster.try_place(job, pool, num_gpus,
  dedicated)``, which allocates the cell in the
  :class:`~sia.scheduler.locality.buddy.BuddyAllocator` at once and returns the
  GPU ids (or None: the gang fits by count but not by cells, or the allocator
  refuses), and puts them in ``Start.placement``.

Either way the simulator's ``allocate`` then takes exactly the granted GPUs;
a grant that is never started is a bug that :meth:`CellCluster.check` reports.

* Dedicated jobs and reservations: ``allocate_dedicated`` / ``reserve`` of the
  buddy allocator, inside their pool's quota cells (HiveD's safety holds).
* Opportunistic jobs: ``allocate_opportunistic`` (outside every pool's bound
  cells and, with ``strict_buddies``, out of the buddies of those cells).
  When it refuses although no reservation is pending (fragmentation or the
  buddy rule), the configured fallback chain
  (:class:`~sia.scheduler.placement.chain.PlacementChain` of min-cost flow,
  Hungarian, MILP, each with ``budget_s`` per call) places the job on the
  free unbound GPUs, with a cost for landing next to dedicated cells, and
  the buddy allocator takes the chosen cell (``allocate_at``). Dedicated
  jobs get no fallback: inside a pool's quota HiveD's buddy allocation is
  already fragmentation-free, and a dedicated cell outside the pool's quota
  cells would break the safety invariant. The placer stage gives the chain
  a decision's whole batch (:meth:`CellCluster.place_batch`: SSF, gSSF,
  Themis*); a start a policy asked ``can_place`` for (FCFS, MaxMin, HiveD*,
  SIA: their next choice depends on the answer) goes to it alone, so the MILP's plan-ahead sees a batch of one there. The budget is enforced deterministically
  (``enforce_budget="work"``): each answer's work estimate (graph arcs,
  matrix entries, CP-SAT deterministic time; see
  :data:`~sia.scheduler.placement.protocol.WORK_S_PER_UNIT`) must stay within
  ``budget_s``, and the solvers run with deterministic limits, so a replay
  never depends on machine speed or load.
* Reservations (SIA only): :meth:`CellCluster.reserve` reserves cells of a
  pool's quota; one that cannot be met stays pending in the allocator and
  every opportunistic request fails until :meth:`clear_reservations`.
* Preemption (:meth:`CellCluster.preempt_for`): to give a pool back its
  cells, running *preemptible* opportunistic jobs are released (most
  recently started first) until the dedicated job fits; victims that turn
  out not to be needed are put back in their cells. The policy returns a
  :class:`~sia.scheduler.core.simulator.Preempt` per victim, which charges
  ``lost_work_s`` and ``restart_delay_s``.
* Migration (``migrate``, off by default; Tesserae 4.1): when a gang fits by
  count in its domain (its pool's bound cells if dedicated, the global
  domain if opportunistic) but no cell is free there (fragmentation; buddy
  and fallback chain failed), running *preemptible* jobs of that domain are
  moved: :func:`~sia.scheduler.locality.migration.plan_migration` finds the
  fewest moves (non-preemptible jobs, reservations and guests stay), the
  buddy allocator moves them and takes the gang's cell in one step
  (:meth:`~sia.scheduler.locality.buddy.BuddyAllocator.relocate`), and
  :class:`MigratingPolicy` (installed by :func:`simulate_cells`) stops and
  restarts each moved job on its new cell in the same decision, so each move
  costs what a preemption costs. Counted as ``migrations`` in the summary.

Pool quotas in cells: :func:`~sia.scheduler.locality.config.derive_cell_quotas`.
Replays on cells: :mod:`sia.scheduler.locality.replay`; migration: :mod:`sia.scheduler.locality.migration`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.cluster import Cluster, PlacementError
from sia.scheduler.locality.buddy import Allocation, BuddyAllocator, CannotAllocate
from sia.scheduler.locality.config import (
    PAD_POOL,
    LocalityConfig,
    binary_cells,
    derive_cell_quotas,
)
from sia.scheduler.locality.migration import CellMigrations
from sia.scheduler.placement.chain import PlacementChain
from sia.scheduler.placement.protocol import ClusterState, PlacementRequest


def make_solver(name: str):
    """Return the fallback solver instance for a chain stage name."""
    if name == "mcf":
        from sia.scheduler.placement.mcf import MinCostFlowPlacer
        return MinCostFlowPlacer()
    if name == "hungarian":
        from sia.scheduler.placement.hungarian import HungarianPlacer
        return HungarianPlacer()
    if name == "milp":
        from sia.scheduler.placement.milp import MilpPlacer
        return MilpPlacer()
    raise ConfigError(f"no fallback solver {name!r}")


@dataclass
class PlacementStats:
    """Counters of one replay's placements (seconds for times)."""

    buddy: int = 0
    fallback: int = 0
    fallback_by: dict[str, int] = field(default_factory=dict)
    refused: int = 0
    frag_refused: int = 0
    blocked: int = 0  # reservations left pending (each blocks lending in its window)
    solver_calls: int = 0
    solver_s: list[float] = field(default_factory=list)
    preemptions: int = 0
    migrations: int = 0  # jobs moved (each move of a job counts once)
    migration_steps: int = 0  # gangs placed by moving others
    frag_samples: list[float] = field(default_factory=list)

    def summary(self) -> dict:
        """JSON-ready counters: placements by stage, refusals, solver time (s), mean fragmentation."""
        t = np.asarray(self.solver_s)
        return {
            "placed_buddy": self.buddy, "placed_fallback": self.fallback,
            "fallback_by": dict(self.fallback_by), "refused": self.refused,
            "frag_refused": self.frag_refused, "reservations_pending": self.blocked,
            "solver_calls": self.solver_calls, "solver_total_s": float(t.sum()),
            "solver_p99_s": float(np.quantile(t, 0.99)) if t.size else 0.0,
            "preemptions": self.preemptions,
            "migrations": self.migrations, "migration_steps": self.migration_steps,
            "fragmentation": float(np.mean(self.frag_samples)) if self.frag_samples else 0.0,
        }


class CellCluster(CellMigrations, Cluster):
    """A tracked cluster whose starts are buddy cells (see the module docstring).

    ``quota``: GPU quotas per pool (pool index order); ``pool_names``;
    ``config``; ``widest``: each pool's widest gang; ``preemptible``: bool per
    job index. GPU ids are topology ids (server-major, as :class:`Cluster`).
    """

    cell_aware = True

    def __init__(self, quota: Sequence[int] | np.ndarray, pool_names: Sequence[str],
                 config: LocalityConfig, widest: Sequence[int] | None = None,
                 preemptible: np.ndarray | None = None):
        self.config = config
        self.pool_names = tuple(pool_names)
        self.topology, self.cell_quotas, self.pad_gpus = derive_cell_quotas(
            list(np.asarray(quota).tolist()), self.pool_names, config, widest)
        self.preemptible = preemptible
        extra = config.chain[1:]
        self.chain = (PlacementChain([make_solver(s) for s in extra], budget_s=config.budget_s,
                                     enforce_budget="work") if extra else None)
        super().__init__(quota, gpus_per_server=config.gpus_per_server, track_gpus=True)

    # ------------------------------------------------------------------ state
    def reset(self) -> None:
        """Free every cell; pin the padding GPUs; clear grants, reservations and counters."""
        topo = self.topology
        self.free = self.total_gpus
        self.owner = np.full(topo.n_gpus, -1, dtype=np.int64)
        self.held: dict[int, np.ndarray] = {}
        self.buddy = BuddyAllocator(topo, self.cell_quotas, debug=self.config.debug,
                                    strict_buddies=self.config.strict_buddies,
                                    spare_full_pools=self.config.spare_full_pools,
                                    adopt_loans=self.config.adopt_loans,
                                    pack=self.config.pack)
        for k, (size, count) in enumerate(self.cell_quotas.get(PAD_POOL, {}).items()):
            for c in range(count):
                a = self.buddy.allocate_dedicated(f"pad{k}.{c}", PAD_POOL, size)
                self.owner[list(a.gpus)] = -2
        self.grants: dict[int, Allocation] = {}
        self.allocs: dict[int, Allocation] = {}
        self.last_gpus: dict[int, np.ndarray] = {}  # job -> GPUs of its latest start
        self._released_early: set[int] = set()
        self._res: dict[int, list[str]] = {}
        self._res_seq = 0
        self._start_seq: dict[int, int] = {}
        self._seq = 0
        #: jobs moved in this decision whose Preempt/Start the simulator has not applied yet:
        #: job -> its start sequence number (kept across the move)
        self._moving: dict[int, int] = {}
        self.migrated: dict[int, int] = {}  # job -> times moved
        self.stats = PlacementStats()

    @property
    def n_gpus(self) -> int:
        """GPUs of the topology (quota GPUs plus padding)."""
        return self.topology.n_gpus

    def server_of(self, gpu):
        """Server index of GPU id(s) ``gpu``."""
        return np.asarray(gpu) // self.topology.gpus_per_server

    def _fragmentation(self) -> float:
        """Share of free GPUs not in a wholly free server (0: every free GPU is in an empty server)."""
        if self.free <= 0:
            return 0.0
        free = (self.owner == -1).reshape(-1, self.topology.gpus_per_server)
        whole = int(free.all(axis=1).sum()) * self.topology.gpus_per_server
        return 1.0 - whole / self.free

    # ------------------------------------------------------------------ placement
    def try_place(self, job: int, pool: int, num_gpus: int, dedicated: bool) -> tuple[int, ...] | None:
        """Allocate a cell for ``job`` now; return its GPU ids, or None if it cannot be placed.

        Dedicated: inside ``pool``'s quota cells. Opportunistic: buddy cells
        outside bound cells, then the fallback chain (fragmentation only; a
        pending reservation blocks it). With ``migrate``, then
        :meth:`_migrate` (running preemptible jobs make room).
        """
        if job in self.grants:
            raise PlacementError(f"job {job} already has a cell granted in this decision")
        name = self.pool_names[pool]
        aid = str(job)
        st = self.stats
        try:
            if dedicated:
                a = self.buddy.allocate_dedicated(aid, name, num_gpus)
            else:
                a = self.buddy.allocate_opportunistic(aid, name, num_gpus)
            st.buddy += 1
        except CannotAllocate:
            if not dedicated and self.buddy.pending_reservations:
                st.refused += 1
                return None
            if num_gpus <= self.free:
                st.frag_refused += 1
            a = None if dedicated else self._fallback(aid, name, num_gpus)
            if a is None and self.config.migrate and (
                    "dedicated" if dedicated else "opportunistic") in self.config.migrate_for:
                a = self._migrate(job, name, num_gpus, dedicated)
            if a is None:
                st.refused += 1
                return None
        self.grants[job] = a
        return a.gpus

    def drop_grant(self, job: int) -> None:
        """Free the cell granted to ``job`` in this decision, which the decision does not start
        (a cell the view's ``can_place`` held for a start the policy then left out)."""
        a = self.grants.pop(job, None)
        if a is None:
            raise PlacementError(f"job {job} has no cell granted in this decision")
        self.buddy.release(a.alloc_id)

    def _fallback(self, aid: str, pool: str, num_gpus: int) -> Allocation | None:
        """The fallback chain for one opportunistic gang buddy refused; its allocation, or None."""
        return self._fallback_batch([(aid, pool, num_gpus)]).get(aid)

    def _fallback_batch(self, gangs: Sequence[tuple[str, str, int]]) -> dict[str, Allocation]:
        """Place opportunistic gangs (allocation id, pool name, GPUs) that buddy refused with one
        call of the fallback chain (the whole batch); return the allocations it made by id."""
        level_for = self.topology.level_for
        # a gang with no free unbound cell of its size at all: no solver can help
        gangs = [x for x in gangs if self.buddy.has_free_cell(level_for(x[2]))]
        if self.chain is None or not gangs:
            return {}
        state = ClusterState(self.topology, self.buddy.free_gpu_mask(),
                             self.buddy.bound_pool_map(), tuple(self.buddy.pools))
        res = self.chain.place([PlacementRequest(aid, g, pool, dedicated=False)
                                for aid, pool, g in gangs], state)
        self.stats.solver_calls += 1
        self.stats.solver_s.append(res.elapsed_s)
        out: dict[str, Allocation] = {}
        for aid, pool, g in gangs:
            gpus = res.placements.get(aid)
            if gpus is None:
                continue
            try:
                out[aid] = self.buddy.allocate_at(aid, pool, g, min(gpus) >> level_for(g))
            except CannotAllocate:
                continue
            by = res.stats.get("placed_by", {}).get(aid, "?")
            self.stats.fallback += 1
            self.stats.fallback_by[by] = self.stats.fallback_by.get(by, 0) + 1
        return out

    def place_batch(self, starts: Sequence[tuple[int, int, int, bool]]) -> dict[int, tuple[int, ...]]:
        """The simulator's placer stage: cells for a decision's starts that came without one.

        ``starts``: (job, pool index, GPUs, dedicated) in the policy's order.
        Buddy cells first, one start at a time in that order (dedicated inside
        the pool's quota cells, HiveD's safety kept); then the opportunistic
        gangs buddy refused for fragmentation go to the fallback chain together,
        one call for the whole batch. Returns the granted GPU ids by job; a
        job left out is refused (no cell, or a pending reservation blocks it).
        """
        st = self.stats
        granted: dict[int, tuple[int, ...]] = {}
        rest: list[tuple[str, str, int]] = []
        for job, pool, g, dedicated in starts:
            if job in self.grants:
                raise PlacementError(f"job {job} already has a cell granted in this decision")
            name, aid = self.pool_names[pool], str(job)
            try:
                a = (self.buddy.allocate_dedicated(aid, name, g) if dedicated
                     else self.buddy.allocate_opportunistic(aid, name, g))
            except CannotAllocate:
                if not dedicated and self.buddy.pending_reservations:
                    st.refused += 1
                    continue
                if g <= self.free:
                    st.frag_refused += 1
                if dedicated:
                    st.refused += 1
                else:
                    rest.append((aid, name, g))
                continue
            st.buddy += 1
            self.grants[job] = a
            granted[job] = a.gpus
        placed = self._fallback_batch(rest)
        for aid, _, _ in rest:
            a = placed.get(aid)
            if a is None:
                st.refused += 1
                continue
            self.grants[int(aid)] = a
            granted[int(aid)] = a.gpus
        return granted

    # ------------------------------------------------------------------ reservations
    def reserve(self, pool: int, widths: Sequence[int]) -> bool:
        """Replace ``pool``'s reservations by cells of ``widths`` GPUs; False if one is left pending.

        Reservation cells stop at the pool's quota (over-quota requests are
        dropped; with ``strict_reservations`` only those beyond its GPU quota).
        A pending one blocks every opportunistic request until
        :meth:`clear_reservations`.
        """
        self.clear_reservations(pool)
        name = self.pool_names[pool]
        ids = self._res.setdefault(pool, [])
        for w in widths:
            rid = f"res{self._res_seq}"
            self._res_seq += 1
            ids.append(rid)
            try:
                self.buddy.reserve(rid, name, int(w),
                                   short_is_pending=self.config.strict_reservations)
            except CannotAllocate:
                ids.pop()
                if rid not in self.buddy.pending_reservations:  # over quota: dropped
                    continue
                ids.append(rid)  # pending
                self.stats.blocked += 1
                return False
        return True

    def reservation_widths(self, reserved_gpus: float, pending_widths: Sequence[int],
                           pool: int) -> list[int]:
        """Cells (GPU widths) reserving ``reserved_gpus``: pending jobs in order, the rest as large cells."""
        total = int(math.ceil(reserved_gpus - 1e-9))
        out: list[int] = []
        for w in pending_widths:
            if w > total:
                break
            out.append(int(w))
            total -= w
        if total > 0:
            cells = self.cell_quotas[self.pool_names[pool]]
            biggest = max(cells) if cells else 1
            for size, count in sorted(binary_cells(total, biggest).items(), reverse=True):
                out.extend([size] * count)
        return out

    def clear_reservations(self, pool: int | None = None) -> None:
        """Release the (met or pending) reservations of ``pool``, or of every pool."""
        pools = list(self._res) if pool is None else [pool]
        live = self.buddy.allocations
        for q in pools:
            for rid in self._res.pop(q, []):
                if rid in live:
                    self.buddy.release(rid)
                else:
                    self.buddy.cancel_reservation(rid)

    @property
    def blocked(self) -> bool:
        """True while a reservation is pending (opportunistic requests fail)."""
        return bool(self.buddy.pending_reservations)

    # ------------------------------------------------------------------ preemption
    def preemptible_running(self) -> list[int]:
        """Running opportunistic jobs that may be preempted, most recently started first."""
        if self.preemptible is None:
            return []
        jobs = [j for j, a in self.allocs.items()
                if a.kind == "opportunistic" and self.preemptible[j] and j not in self._released_early
                and j not in self._moving]
        jobs.sort(key=lambda j: -self._start_seq[j])
        return jobs

    def preempt_for(self, job: int, pool: int, num_gpus: int) -> tuple[list[int], tuple[int, ...]] | None:
        """Free preemptible opportunistic cells until ``job`` gets a dedicated cell of ``pool``.

        Returns (victims, GPU ids granted to ``job``) or None (nothing changes).
        The victims' cells are already released here; the caller must return a
        :class:`~sia.scheduler.core.simulator.Preempt` for each.
        """
        cands = self.preemptible_running()
        if not cands:
            return None
        name = self.pool_names[pool]
        freed: list[int] = []
        grant = None
        for v in cands:
            self.buddy.release(str(v))
            freed.append(v)
            try:
                grant = self.buddy.allocate_dedicated(str(job), name, num_gpus)
                break
            except CannotAllocate:
                continue
        victims: list[int] = []
        for v in freed:  # put back victims whose cells were not needed
            a = self.allocs[v]
            if grant is not None:
                try:
                    self.buddy.allocate_at(str(v), a.pool, a.num_gpus, a.index, guest=True)
                    continue
                except CannotAllocate:
                    victims.append(v)
            else:
                self.buddy.allocate_at(str(v), a.pool, a.num_gpus, a.index, guest=True)
        if grant is None:
            return None
        for v in victims:
            self._released_early.add(v)
        self.stats.preemptions += len(victims)
        self.grants[job] = grant
        return victims, grant.gpus

    # ------------------------------------------------------------------ simulator seam
    def can_place(self, num_gpus: int, placement: object = None) -> bool:
        """True when the GPUs are free by count (``allocate`` then checks the cell grant)."""
        return num_gpus <= self.free

    def choose_gpus(self, num_gpus: int) -> np.ndarray:
        """Not available: with locality, policies place through :meth:`try_place`."""
        raise PlacementError(
            "a cell-aware cluster needs each start's placement from try_place(); "
            "this policy does not support locality")

    def allocate(self, job: int, num_gpus: int, placement: object = None) -> None:
        """Give ``job`` the cell granted to it in this decision (PlacementError otherwise)."""
        grant = self.grants.pop(job, None)
        if grant is None:
            raise PlacementError(
                f"job {job} was started without a cell: with locality a policy must call "
                "try_place() and pass its GPUs as Start.placement")
        gpus = np.asarray(placement if placement is not None else (), dtype=np.int64).ravel()
        if tuple(gpus.tolist()) != grant.gpus or gpus.size != num_gpus:
            raise PlacementError(f"job {job}: placement {gpus.tolist()} is not its granted cell "
                                 f"{list(grant.gpus)}")
        busy = gpus[self.owner[gpus] != -1]
        if busy.size:
            raise PlacementError(f"job {job}: GPU {int(busy[0])} is already held")
        self.owner[gpus] = job
        self.held[job] = gpus
        self.last_gpus[job] = gpus
        self.allocs[job] = grant
        self.free -= num_gpus
        if job in self._moving:  # the restart of a move keeps the job's start order
            self._start_seq[job] = self._moving.pop(job)
            return
        self._seq += 1
        self._start_seq[job] = self._seq
        self.stats.frag_samples.append(self._fragmentation())

    def release(self, job: int, num_gpus: int) -> None:
        """Take back ``job``'s GPUs and its cell (unless a preemption already freed the cell)."""
        gpus = self.held.pop(job, None)
        if gpus is None or gpus.size != num_gpus:
            raise PlacementError(f"job {job} releases GPUs it does not hold")
        self.owner[gpus] = -1
        self.allocs.pop(job)
        self._start_seq.pop(job, None)
        if job in self._released_early:
            self._released_early.discard(job)
        elif job not in self._moving:  # a moved job's cell is already its new one
            self.buddy.release(str(job))
        self.free += num_gpus

    def check(self) -> None:
        """Assert: no GPU double-booked, each gang in one cell of its level, buddy invariants, no stray grant or move."""
        assert not self.grants, f"cells granted but never started: jobs {sorted(self.grants)[:5]}"
        assert not self._moving, f"jobs moved but never restarted: {sorted(self._moving)[:5]}"
        held = sum(g.size for g in self.held.values())
        assert int((self.owner >= 0).sum()) == held, "GPU owners disagree with held GPUs"
        assert self.free == self.total_gpus - held, f"free counter {self.free} is off"
        topo = self.topology
        for job, gpus in self.held.items():
            assert (self.owner[gpus] == job).all(), f"job {job}'s GPUs are double-booked"
            a = self.allocs[job]
            level = topo.level_for(gpus.size)
            cell = int(gpus.min()) >> level
            assert int(gpus.max()) >> level == cell, f"job {job} spans more than one cell"
            assert (a.level, a.index) == (level, cell), f"job {job} is not in its buddy cell"
        self.buddy.check_invariants()

    def __repr__(self) -> str:
        return f"CellCluster({self.topology.describe()}, free={self.free}, chain={self.config.chain})"


def cell_cluster_for(trace, config: LocalityConfig, preemptible: np.ndarray | None = None) -> CellCluster:
    """Return a CellCluster for a :class:`~sia.scheduler.core.view.TraceArrays` (widest gang per pool from it)."""
    widest = np.zeros(trace.n_pools, dtype=np.int64)
    if trace.n_jobs:
        np.maximum.at(widest, trace.pool, trace.num_gpus)
    return CellCluster(trace.quota, trace.pool_names, config, widest=widest.tolist(),
                       preemptible=preemptible)


