"""Migration (Tesserae 4.1): relabeling, migration planning, and the policy wrapper that restarts moved jobs.

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

Relabeling inside buddy cells (:func:`relabel_in_cells`): the free GPU
permutation of Algorithm 3 can split a gang across cells (a 4-GPU gang on
GPUs 4-7 may come out on 3, 4, 6, 7), which the buddy allocator cannot hold.
So for the cell-aware cluster the allowed renamings are those that keep every
cell aligned: region cells of one level permuted (Algorithm 2's Hungarian
step) and, inside a pair, mirroring the buddy tree at any node (an exact
dynamic programme replaces Algorithm 3's Hungarian step). Same costs.

Migration planning (:func:`plan_migration`, used by
:class:`~sia.scheduler.locality.cell_cluster.CellCluster` with ``migrate``): the fewest
moves of movable jobs that free a cell for a new gang, by exact search over
move sets (bounded by a count, not a clock), else a repack relabeled with
:func:`relabel_in_cells`.

The cell-aware cluster's own migration steps are :class:`CellMigrations`;
:class:`MigratingPolicy` turns each move into a stop and a restart.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import TYPE_CHECKING

import numpy as np
from sia.scheduler.core.cluster import PlacementError
from sia.scheduler.core.simulator import Preempt, policy_name
from sia.scheduler.core.view import Start
from sia.scheduler.locality.buddy import Allocation
from sia.scheduler.locality.topology import Topology

if TYPE_CHECKING:  # pragma: no cover
    from sia.scheduler.locality.cell_cluster import CellCluster

Cell = tuple[int, int]  # (level, index), as in sia.scheduler.locality.topology


#: weight of a job that must not move (non-preemptible, a reservation): any map moving it costs more
#: than moving every other job, so the optimum (never worse than the identity) keeps it in place
_FIXED_WEIGHT = 1.0e6


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
    from scipy.optimize import linear_sum_assignment  # lazy: fungible replays never migrate

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
    from scipy.optimize import linear_sum_assignment

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


@dataclass
class CellRelabeling:
    """Migration-minimising relabeling restricted to maps that keep buddy cells aligned.

    ``cell_map``: new-plan region cell -> physical region cell (same level).
    ``cost``: Tesserae's cost of the relabeled plan (0.5 per job moved out plus
    0.5 per job moved in; jobs present in one plan only are free), so the
    number of moved jobs. ``relabeled``: every job of the new plan -> its cell
    after relabeling. ``migrated``: jobs of both plans whose cell differs.
    """

    cell_map: dict[Cell, Cell]
    cost: float
    relabeled: dict[str, Cell]
    migrated: list[str]


def _region_of(cell: Cell, region: Mapping[Cell, int]) -> Cell:
    lv, i = cell
    top = max(level for level, _ in region) if region else lv
    for up in range(lv, top + 1):
        anc = (up, i >> (up - lv))
        if anc in region:
            return anc
    raise ValueError(f"cell {cell} lies outside the region cells")


def relabel_in_cells(
    old: Mapping[str, Cell], new: Mapping[str, Cell], region: Sequence[Cell],
    fixed: frozenset[str] | set[str] = frozenset(),
) -> CellRelabeling:
    """Rename the new plan's cells so that as few jobs as possible move (Tesserae Algorithms 2, 3 on cells).

    ``old`` / ``new`` map job -> the buddy cell (level, index) it holds;
    ``region`` lists disjoint cells holding every job of both plans. The maps
    allowed are those that keep gangs in aligned cells: region cells of one
    level are permuted among themselves (Algorithm 2: Hungarian method over
    the pair costs) and inside a pair the buddy tree is mirrored at any node
    (Algorithm 3, with the free GPU permutation replaced by child swaps, the
    maps that keep every cell aligned; an exact dynamic programme over the
    tree). Jobs of both plans cost 0.5 out plus 0.5 in when moved, jobs in
    ``fixed`` far more (so they stay: the identity is always allowed), jobs
    in one plan only nothing (line 2 of Algorithm 2). Returns the optimum.
    """
    reg = {c: k for k, c in enumerate(sorted(set(region)))}
    both = set(old) & set(new)
    costs = _PairCosts(old, new, both, reg, fixed)
    for c in new.values():
        _region_of(c, reg)  # every new cell must lie in the region
    cell_map: dict[Cell, Cell] = {}
    total = 0.0
    by_level: dict[int, list[int]] = defaultdict(list)
    for lv, i in reg:
        by_level[lv].append(i)
    for lv in sorted(by_level):  # Algorithm 2: a Hungarian match per level of region cells
        cells = sorted(by_level[lv])
        matrix = np.array([[costs.cost(lv, a, b) for b in cells] for a in cells])
        from scipy.optimize import linear_sum_assignment

        rows, cols = linear_sum_assignment(matrix)
        total += float(matrix[rows, cols].sum())
        for r, c in zip(rows, cols, strict=True):
            cell_map[(lv, cells[c])] = (lv, cells[r])
    relabeled = {x: costs.image(c, cell_map) for x, c in new.items()}
    migrated = sorted(x for x in both if relabeled[x] != old[x])
    return CellRelabeling(cell_map, total, relabeled, migrated)


class _PairCosts:
    """Algorithm 3 on cells: the least cost of mapping old cell ``(lv, a)`` onto new cell
    ``(lv, b)`` by mirroring the buddy tree at any node (memoized, with the swap chosen)."""

    def __init__(self, old: Mapping[str, Cell], new: Mapping[str, Cell], both: set[str],
                 reg: Mapping[Cell, int], fixed: frozenset[str] | set[str]):
        self.reg = reg
        self.weight = {x: (_FIXED_WEIGHT if x in fixed else 1.0) for x in both}
        self.old_at = {old[x]: x for x in both}
        self.new_at = {new[x]: x for x in both}
        self.old_under, self.new_under = self._under(old, both), self._under(new, both)
        self.memo: dict[tuple[int, int, int], tuple[float, int]] = {}

    def _under(self, plan: Mapping[str, Cell], both: set[str]) -> dict[Cell, set[str]]:
        """Return the jobs of ``both`` under each cell of ``plan`` up to their region cell."""
        out: dict[Cell, set[str]] = defaultdict(set)
        for x in both:
            lv, i = plan[x]
            top = _region_of((lv, i), self.reg)[0]
            for up in range(lv, top + 1):
                out[(up, i >> (up - lv))].add(x)
        return out

    def cost(self, lv: int, a: int, b: int) -> float:
        """Return the cost of mapping old cell (lv, a) onto new cell (lv, b)."""
        key = (lv, a, b)
        hit = self.memo.get(key)
        if hit is not None:
            return hit[0]
        weight = self.weight
        ja, jb = self.old_under.get((lv, a), _EMPTY), self.new_under.get((lv, b), _EMPTY)
        if not (ja & jb):  # nothing shared: every job below moves out / in
            c = 0.5 * (sum(weight[x] for x in ja) + sum(weight[x] for x in jb))
            self.memo[key] = (c, 0)
            return c
        xo, xn = self.old_at.get((lv, a)), self.new_at.get((lv, b))
        c = 0.0
        if xo is not None and xo != xn:
            c += 0.5 * weight[xo]
        if xn is not None and xn != xo:
            c += 0.5 * weight[xn]
        swap = 0
        if lv > 0:
            straight = self.cost(lv - 1, 2 * a, 2 * b) + self.cost(lv - 1, 2 * a + 1, 2 * b + 1)
            cross = self.cost(lv - 1, 2 * a, 2 * b + 1) + self.cost(lv - 1, 2 * a + 1, 2 * b)
            swap = int(cross < straight)
            c += cross if swap else straight
        self.memo[key] = (c, swap)
        return c

    def image(self, cell: Cell, cell_map: Mapping[Cell, Cell]) -> Cell:
        """Return where new ``cell`` goes: its region cell's match, then the chosen swaps down."""
        lv, i = cell
        top_lv, b = _region_of(cell, self.reg)
        a = cell_map[(top_lv, b)][1]
        level = top_lv
        while level > lv:
            swap = self.memo.get((level, a, b), (0.0, 0))[1]
            level -= 1
            b = i >> (level - lv)
            a = 2 * a + ((b & 1) ^ swap)
        return (lv, a)


_EMPTY: frozenset[str] = frozenset()


# ------------------------------------------------------------------- migration planning
@dataclass
class MigrationPlan:
    """Where jobs go so that a new gang fits: ``moves`` (moved job -> new cell), ``new_cell``.

    ``strategy``: ``"exact"`` (fewest moves, by search) or ``"repack"``
    (every movable job repacked, then relabeled; see :func:`plan_migration`).
    """

    moves: dict[str, Cell]
    new_cell: Cell
    strategy: str


def _region_levels(n_gpus: int, region: Sequence[Cell]) -> np.ndarray:
    out = np.full(n_gpus, -1, dtype=np.int64)
    for lv, i in region:
        out[i << lv : (i + 1) << lv] = lv
    return out


def _best_fit(avail: np.ndarray, region_level: np.ndarray, level: int) -> int | None:
    """Index of the level-``level`` cell to take from ``avail`` (bool per GPU), buddy best fit; None if none.

    Cells must be wholly available and inside one region cell; among them the
    one in the smallest wholly available enclosing block (inside its region
    cell), then the lowest index. Taking power-of-two gangs widest first this
    way packs whenever any packing exists.
    """
    size = 1 << level
    ok = avail.reshape(-1, size).all(axis=1) & (region_level[::size] >= level)
    cand = np.flatnonzero(ok)
    if not cand.size:
        return None
    block = np.full(cand.size, level)
    growing = np.ones(cand.size, dtype=bool)
    for up in range(level + 1, int(region_level.max()) + 1):
        par = cand >> (up - level)
        whole = avail.reshape(-1, 1 << up).all(axis=1)[par] & (region_level[par << up] >= up)
        growing &= whole
        block[growing] = up
    best = np.lexsort((cand, block))[0]
    return int(cand[best])


def _pack(avail: np.ndarray, region_level: np.ndarray, jobs: Sequence[tuple[str, int]]
          ) -> dict[str, Cell] | None:
    """Place ``(job, level)`` pairs widest first by best fit into ``avail`` (updated); None if one fails."""
    out: dict[str, Cell] = {}
    for job, level in sorted(jobs, key=lambda t: (-t[1], t[0])):
        idx = _best_fit(avail, region_level, level)
        if idx is None:
            return None
        avail[idx << level : (idx + 1) << level] = False
        out[job] = (level, idx)
    return out


def plan_migration(
    topology: Topology, region: Sequence[Cell], fixed: Sequence[Cell],
    movable: Mapping[str, Cell], level: int, new_job: str = "__new__", max_checks: int = 2000,
) -> MigrationPlan | None:
    """Return the moves of ``movable`` jobs that make room for a gang of ``level`` in ``region``, or None.

    ``region``: disjoint cells the gang and the moves stay in; ``fixed``: cells
    held by what must not move (non-preemptible jobs, reservations); ``movable``:
    job -> its cell. None when even moving every movable job leaves no room.

    *exact*: sets of jobs to move are tried by increasing size: the occupants of
    a candidate cell for the gang (cells without fixed GPUs, fewest occupants
    first) plus any others, each set checked by packing it widest first by
    buddy best fit into the room it leaves (exact for power-of-two cells), so
    the first that fits moves the fewest jobs. After ``max_checks`` sets
    (a deterministic bound, not a clock), *repack*: every movable job and the
    gang packed widest first around the fixed cells, then relabeled with
    :func:`relabel_in_cells` (Tesserae; fixed cells stay) so that the fewest of
    them move. Deterministic: ties by cell index and job id.
    """
    n = topology.n_gpus
    region = sorted(set(region))
    region_level = _region_levels(n, region)
    pinned = region_level < 0
    for lv, i in fixed:
        pinned[i << lv : (i + 1) << lv] = True
    owner = np.full(n, -1, dtype=np.int64)
    names = sorted(movable)
    for k, x in enumerate(names):
        lv, i = movable[x]
        owner[i << lv : (i + 1) << lv] = k
    free = ~pinned & (owner < 0)
    if int((~pinned).sum()) - sum(1 << c[0] for c in movable.values()) < (1 << level):
        return None  # not enough GPUs even if everything moved
    size = 1 << level
    ok = ~pinned.reshape(-1, size).any(axis=1) & (region_level[::size] >= level)
    cells = np.flatnonzero(ok)
    occ = []
    for c in cells:
        o = np.unique(owner[c << level : (c + 1) << level])
        occ.append(tuple(int(x) for x in o[o >= 0]))
    order = sorted(range(cells.size), key=lambda k: (len(occ[k]), int(cells[k])))
    checks = 0
    for total in range(len(names) + 1):
        for k in order:
            forced = occ[k]
            if len(forced) > total:
                break  # order is by occupants: no later cell fits this total
            c = int(cells[k])
            rest = [x for x in range(len(names)) if x not in forced]
            for extra in combinations(rest, total - len(forced)):
                checks += 1
                if checks > max_checks:
                    return _plan_by_repack(topology, region, fixed, movable, level, new_job, pinned,
                                           region_level)
                moved = (*forced, *extra)
                avail = free.copy()
                for x in moved:
                    lv, i = movable[names[x]]
                    avail[i << lv : (i + 1) << lv] = True
                avail[c << level : (c + 1) << level] = False
                placed = _pack(avail, region_level, [(names[x], movable[names[x]][0]) for x in moved])
                if placed is not None:
                    return MigrationPlan(placed, (level, c), "exact")
    return None


def _plan_by_repack(topology, region, fixed, movable, level, new_job, pinned, region_level
                    ) -> MigrationPlan | None:
    """Repack everything movable and the gang, then relabel so the fewest jobs move (see plan_migration)."""
    placed = _pack(~pinned, region_level, [*((x, c[0]) for x, c in movable.items()), (new_job, level)])
    if placed is None:
        return None
    fixed_jobs = {f"__fixed{k}": c for k, c in enumerate(sorted(set(fixed)))}
    rel = relabel_in_cells({**dict(movable), **fixed_jobs}, {**placed, **fixed_jobs}, region,
                           fixed=set(fixed_jobs))
    if any(rel.relabeled[f] != c for f, c in fixed_jobs.items()):
        raise AssertionError("relabeling moved a fixed cell")  # the identity keeps them: never
    moves = {x: rel.relabeled[x] for x in rel.migrated if x in movable}
    return MigrationPlan(moves, rel.relabeled[new_job], "repack")


class MigratingPolicy:
    """Wraps a policy on a :class:`CellCluster` with ``migrate``: restarts the jobs its placements moved.

    After each decision of the wrapped policy it returns, before the policy's
    own items, a :class:`~sia.scheduler.core.simulator.Preempt` (costs ``lost_work_s``,
    ``restart_delay_s``) for every job the cluster moved in that decision, the
    policy's own preemptions, then a :class:`~sia.scheduler.core.view.Start` of each
    moved job on its new GPUs (same dedicated / opportunistic kind), then the
    policy's starts. A move is thus a preemption and an immediate restart: the
    simulator keeps the job's first start time and charges the costs to its end.
    Everything else (``name``, ``next_wakeup``, ``uses_ticks``, stats) is the
    wrapped policy's.
    """

    def __init__(self, policy) -> None:
        self.policy = policy
        self.name = policy_name(policy)
        self._cluster: CellCluster | None = None
        self._run_start: dict[int, float] = {}  # job -> start of its current run (s)

    def __getattr__(self, attr):
        if attr == "policy":  # not yet set (copy / unpickling)
            raise AttributeError(attr)
        return getattr(self.policy, attr)

    def reset(self, trace, cluster) -> None:
        """Reset the wrapped policy on ``cluster`` (a CellCluster)."""
        self._cluster = cluster
        self._run_start = {}
        self.policy.reset(trace, cluster)

    def decide(self, view) -> list:
        """The wrapped policy's decision with the moved jobs' stops and restarts (see the class docstring)."""
        items = self.policy.decide(view)
        now = view.now
        for s in items:
            if type(s) is not Preempt:
                self._run_start[int(s[0])] = now
        moves = self._cluster.take_moves() if self._cluster is not None else []
        if not moves:
            return items
        cfg = self._cluster.config
        # a move that costs nothing (no delay, no work done or none lost) changes no time:
        # the cluster moves it alone (a stop and restart would leave the run's end unchanged)
        free = [m for m, _, _ in moves if cfg.restart_delay_s <= 0
                and (cfg.lost_work_s <= 0 or now <= self._run_start.get(m, now))]
        if free:
            self._cluster.settle_moves(free)
            moves = [mv for mv in moves if mv[0] not in set(free)]
            if not moves:
                return items
        for m, _, _ in moves:
            self._run_start[m] = now
        stops = [Preempt(m, cfg.lost_work_s, cfg.restart_delay_s) for m, _, _ in moves]
        own_stops = [s for s in items if type(s) is Preempt]
        restarts = [Start(m, opp, gpus) for m, opp, gpus in moves]
        own_starts = [s for s in items if type(s) is not Preempt]
        return [*stops, *own_stops, *restarts, *own_starts]


class CellMigrations:
    """The cell-aware cluster's migration steps (mixed into
    :class:`~sia.scheduler.locality.cell_cluster.CellCluster`, whose state they use):
    make room for a gang by moving running preemptible jobs, and hand the moves
    to :class:`MigratingPolicy`."""

    # ------------------------------------------------------------------ migration
    def _migrate(self, job: int, pool: str, num_gpus: int, dedicated: bool) -> Allocation | None:
        """Move running preemptible jobs so that ``job`` gets a cell; its allocation, or None.

        Only for fragmentation: the domain the gang must sit in (``pool``'s
        bound cells for a dedicated gang; the global domain, outside every bound
        cell, for an opportunistic one) has ``num_gpus`` free GPUs but no free
        cell of the gang's level. Movable: running preemptible jobs of that
        domain of the same kind (the pool's dedicated jobs; opportunistic jobs
        outside bound cells); everything else there (non-preemptible jobs,
        reservations, guests, cells granted in this decision) stays.
        :func:`~sia.scheduler.locality.migration.plan_migration` picks the target
        and relabels it (Tesserae) so the fewest jobs move; the buddy allocator
        moves them and takes the gang's cell in one step. Each moved job is
        then stopped and restarted on its new cell by the policy wrapper
        (:class:`MigratingPolicy`), charged ``lost_work_s`` + ``restart_delay_s``.
        """
        buddy, topo = self.buddy, self.topology
        level = topo.level_for(num_gpus)
        domain = pool if dedicated else None
        if dedicated:
            if buddy.free_gpu_mask(pool).sum() < num_gpus:
                return None
            if any(buddy.free_cells(lv, pool) for lv in range(level, topo.top_level + 1)):
                return None  # a free cell exists: the refusal was not fragmentation
        else:
            if buddy.pending_reservations or buddy.has_free_cell(level):
                return None  # blocked, or a cell exists that a rule forbids: not fragmentation
            if buddy.free_gpu_mask().sum() < num_gpus:
                return None
        if self.preemptible is None:
            return None
        kind = "dedicated" if dedicated else "opportunistic"
        region = buddy.domain_cells(domain)
        movable: dict[str, tuple[int, int]] = {}
        fixed: list[tuple[int, int]] = []
        for aid, a in buddy.allocations.items():
            if buddy.domain_pool(a.level, a.index) != domain:
                continue
            j = int(aid) if aid.isdigit() else -1
            if (j >= 0 and a.kind == kind and (not dedicated or a.pool == pool)
                    and j in self.allocs and j not in self._released_early
                    and bool(self.preemptible[j])):
                movable[aid] = (a.level, a.index)
            else:
                fixed.append((a.level, a.index))
        if not movable:
            return None
        plan = plan_migration(topo, region, fixed, movable, level, new_job=str(job))
        if plan is None:
            return None
        lv, index = plan.new_cell
        grant = buddy.relocate({aid: c[1] for aid, c in plan.moves.items()},
                               new=(str(job), pool, kind, num_gpus, index))
        for aid in plan.moves:
            m = int(aid)
            if m not in self._moving:
                self._moving[m] = self._start_seq[m]
            self.grants[m] = buddy.allocation(aid)
            self.migrated[m] = self.migrated.get(m, 0) + 1
        self.stats.migrations += len(plan.moves)
        self.stats.migration_steps += 1
        return grant

    def take_moves(self) -> list[tuple[int, bool, tuple[int, ...]]]:
        """Jobs moved in this decision, as (job, opportunistic, new GPU ids); the caller restarts them.

        Each must be stopped (:class:`~sia.scheduler.core.simulator.Preempt`, before
        any start) and started again on exactly these GPUs in the same decision.
        """
        return [(m, self.grants[m].kind == "opportunistic", self.grants[m].gpus)
                for m in self._moving if m in self.grants]

    def settle_moves(self, jobs: Sequence[int]) -> None:
        """Move ``jobs`` (moved in this decision) to their new GPUs here, without a stop and restart.

        For moves that cost nothing (no restart delay, no work lost): the
        simulator need not know, since it tracks no GPU ids. Swaps are fine: all
        old GPUs are freed before the new ones are taken.
        """
        grants = {m: self.grants.pop(m) for m in jobs}
        for m in jobs:
            self.owner[self.held[m]] = -1
        for m, grant in grants.items():
            gpus = np.asarray(grant.gpus, dtype=np.int64)
            if (self.owner[gpus] != -1).any():
                raise PlacementError(f"job {m}: its new GPUs {grant.gpus} are held")
            self.owner[gpus] = m
            self.held[m] = gpus
            self.last_gpus[m] = gpus
            self.allocs[m] = grant
            self._moving.pop(m)
