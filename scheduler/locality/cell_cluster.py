"""The cell-aware cluster: locality (buddy cells), fallback placement and preemption for the simulator.

SIA 5.5 / DESIGN.md 6.3. With a topology, every start is placed in *one*
cell of the level its gang needs (1, 2, 4, 8 GPUs inside a server; 16, 32 in
a rack; a 3-GPU gang holds a 4-GPU cell).

How policies use it (the seam of :mod:`sia.scheduler.core.cluster`): a policy's
``reset(trace, cluster)`` sees a :class:`CellCluster` (``cluster.cell_aware``
is True). Before it returns a start, it asks
``cluster.try_place(job, pool, num_gpus, dedicated)``, which allocates the
cell in the :class:`~sia.scheduler.locality.buddy.BuddyAllocator` at once and returns
the GPU ids (or None: the gang fits by count but not by cells, or the
allocator refuses); the policy puts them in ``Start.placement``, and the
simulator's ``allocate`` then takes exactly the granted GPUs. A grant the
policy does not start is a bug that :meth:`CellCluster.check` reports.

* Dedicated jobs and reservations: ``allocate_dedicated`` / ``reserve`` of the
  buddy allocator, inside their pool's quota cells (HiveD's safety holds).
* Opportunistic jobs: ``allocate_opportunistic`` (outside every pool's bound
  cells and, with ``strict_buddies``, out of the buddies of those cells).
  When it refuses although no reservation is pending (fragmentation or the
  buddy rule), the configured fallback chain
  (:class:`~sia.scheduler.placement.protocol.PlacementChain` of min-cost flow,
  Hungarian, MILP, each with ``budget_s`` per call) places the job on the
  free unbound GPUs, with a cost for landing next to dedicated cells, and
  the buddy allocator takes the chosen cell (``allocate_at``). Dedicated
  jobs get no fallback: inside a pool's quota HiveD's buddy allocation is
  already fragmentation-free, and a dedicated cell outside the pool's quota
  cells would break the safety invariant. The chain is called per job (the
  policies decide one start at a time), so the MILP's plan-ahead sees a
  batch of one. The budget is enforced deterministically
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
  moved: :func:`~sia.scheduler.placement.hungarian.plan_migration` finds the
  fewest moves (non-preemptible jobs, reservations and guests stay), the
  buddy allocator moves them and takes the gang's cell in one step
  (:meth:`~sia.scheduler.locality.buddy.BuddyAllocator.relocate`), and
  :class:`MigratingPolicy` (installed by :func:`simulate_cells`) stops and
  restarts each moved job on its new cell in the same decision, so each move
  costs what a preemption costs. Counted as ``migrations`` in the summary.

Pool quotas in cells (:func:`derive_cell_quotas`)
    From a pool's GPU quota ``q``: ``q // C`` cells of ``C`` GPUs, where ``C``
    is a server (or, when the pool has gangs wider than a server, the
    smallest cell that holds its widest gang), plus the binary decomposition
    of the remainder (13 GPUs on 8-GPU servers: 8 + 4 + 1). The cells sum to
    ``q`` exactly. The cluster is the smallest whole number of racks that
    holds every quota (racks shrink to a power-of-two number of servers when
    the cluster is smaller than one rack); GPUs beyond the quotas are pinned
    by a padding pool and never used. Power-of-two cells always pack, so
    the assignment is satisfiable; :func:`~sia.scheduler.locality.topology.check_quotas`
    checks it again. A pool whose widest gang needs a cell larger than its
    largest quota cell (a 3-GPU job in a pool of 3 GPUs = 2 + 1) could never
    run that job: ConfigError naming the pool and job.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Any, get_origin, get_type_hints

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.scheduler.core.cluster import Cluster, PlacementError
from sia.scheduler.locality.buddy import Allocation, BuddyAllocator, CannotAllocate
from sia.scheduler.locality.topology import Topology, parse_topology
from sia.scheduler.placement.protocol import ClusterState, PlacementChain, PlacementRequest

PAD_POOL = "__padding__"

#: placement chain stage names -> what they are
SOLVERS = {
    "buddy": "HiveD buddy cells only",
    "mcf": "min-cost flow (Firmament)",
    "hungarian": "assignment (Tesserae)",
    "milp": "MILP with plan-ahead (TetriSched)",
}


@dataclass(frozen=True)
class LocalityConfig:
    """Options of the cell-aware cluster (times in seconds).

    ``chain``: placement stages, always starting with ``"buddy"``, then any of
    ``mcf``, ``hungarian``, ``milp``; ``budget_s``: time budget per solver
    call; ``strict_buddies``: keep opportunistic jobs out of the buddies of
    dedicated cells (SIA: True; HiveD*: False); ``spare_full_pools`` (with
    ``strict_buddies``): only out of the buddies of cells of pools that still
    have unbound quota (a pool whose quota is all bound cannot grow into its
    buddy; with one 8-GPU cell per pool the strict rule would forbid lending
    any whole server next to a busy pool); ``adopt_loans``: when no free cell
    can be bound to a pool, bind one that opportunistic jobs hold part of, if
    the request fits its free part (the loans stay as guests; see
    :mod:`sia.scheduler.locality.buddy`); ``pack``: place dedicated cells in the
    most occupied region of the pool's bound cells; ``debug``: check the buddy
    invariants after every operation; ``strict_reservations``: a reservation
    cell refused because the pool's bound cells are full although the pool
    still has that many GPUs of quota left (guests or in-pool fragmentation)
    counts as a reservation that cannot be met and blocks lending (SIA 5.5),
    instead of being dropped as over quota. Preemption: ``preemptible_fraction``
    of the jobs (drawn with ``seed``) are preemptible on top of the trace's
    ``preemptible`` column; ``preempt`` lets SIA stop them; each preemption
    costs ``lost_work_s`` of work and ``restart_delay_s`` at restart.
    ``migrate``: when a gang fits by count but no cell (in-pool or global
    fragmentation; see :meth:`CellCluster.try_place`), move running
    preemptible jobs (Tesserae's relabeling keeps the moves fewest); each move
    costs what a preemption costs; ``migrate_for``: which gangs may ask for it
    (``dedicated``: in-pool fragmentation, ``opportunistic``: outside bound cells).
    """

    gpus_per_server: int = 8
    servers_per_rack: int = 4
    chain: tuple[str, ...] = ("buddy",)
    budget_s: float = 0.5
    strict_buddies: bool = True
    spare_full_pools: bool = True
    adopt_loans: bool = True
    pack: bool = False
    strict_reservations: bool = False
    debug: bool = False
    preempt: bool = False
    preemptible_fraction: float = 0.0
    lost_work_s: float = 0.0
    restart_delay_s: float = 0.0
    seed: int = 0
    migrate: bool = False
    migrate_for: tuple[str, ...] = ("dedicated", "opportunistic")

    def __post_init__(self) -> None:
        if not self.chain or self.chain[0] != "buddy":
            raise ConfigError(f"placement chain must start with 'buddy', got {list(self.chain)}")
        for name in self.chain[1:]:
            if name not in SOLVERS or name == "buddy":
                raise ConfigError(
                    f"placement chain: unknown solver {name!r}; use buddy followed by any of "
                    "mcf, hungarian, milp (e.g. buddy,mcf)")
        if not self.budget_s > 0:
            raise ConfigError(f"placement budget must be > 0 seconds, got {self.budget_s}")
        if not 0.0 <= self.preemptible_fraction <= 1.0:
            raise ConfigError(
                f"preemptible_fraction must be in [0, 1], got {self.preemptible_fraction}")
        if self.lost_work_s < 0 or self.restart_delay_s < 0:
            raise ConfigError("preemption costs lost_work_s and restart_delay_s must be >= 0")
        if not isinstance(self.migrate_for, str):  # a list from YAML: keep the config hashable
            object.__setattr__(self, "migrate_for", tuple(self.migrate_for))
        if isinstance(self.migrate_for, str) or not set(self.migrate_for) <= {
                "dedicated", "opportunistic"}:
            raise ConfigError(f"migrate_for must be a list of dedicated / opportunistic, "
                              f"got {self.migrate_for!r}")

    @property
    def preemption_cost_s(self) -> float:
        """Seconds one preemption costs the victim (lost work + restart delay)."""
        return self.lost_work_s + self.restart_delay_s


def parse_placement(spec: str, *, option: str = "--placement") -> tuple[tuple[str, ...], float | None]:
    """Parse ``buddy``, ``buddy,mcf`` or ``buddy,hungarian,budget=0.2`` into (chain, budget_s or None)."""
    chain: list[str] = []
    budget = None
    for part in (spec or "").split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part.startswith("budget="):
            try:
                budget = float(part.split("=", 1)[1])
            except ValueError:
                raise ConfigError(f"{option}: {part!r} is not budget=<seconds>") from None
            continue
        if part not in SOLVERS:
            raise ConfigError(f"{option}: unknown stage {part!r}; known: {', '.join(SOLVERS)}")
        chain.append(part)
    if not chain:
        raise ConfigError(f"{option}: empty; expected e.g. buddy or buddy,mcf")
    if chain[0] != "buddy":
        chain.insert(0, "buddy")
    return tuple(chain), budget


#: LocalityConfig fields set by ``--topology`` / ``--placement`` (not by cells options)
SHAPE_FIELDS = ("gpus_per_server", "servers_per_rack", "chain", "budget_s")
_TRUE = ("true", "1", "yes")
_FALSE = ("false", "0", "no")


def cells_option_types() -> dict[str, type]:
    """Return {LocalityConfig field: bool, int, float or tuple} for the fields cells options may set."""
    hints = get_type_hints(LocalityConfig)
    out = {}
    for f in fields(LocalityConfig):
        if f.name not in SHAPE_FIELDS:
            t = hints[f.name]
            out[f.name] = tuple if get_origin(t) is tuple else t
    return out


def _cells_value(kind: type, value: Any) -> Any:
    """Return ``value`` (text from the CLI or a YAML value) as ``kind``; ValueError says what was expected."""
    text = value.strip() if isinstance(value, str) else None
    if kind is bool:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError("expected true/false/1/0/yes/no")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            out = value
        elif text is not None and re.fullmatch(r"[+-]?\d+", text):
            out = int(text)
        else:
            raise ValueError("expected an integer")
        if out < 0:
            raise ValueError("expected an integer >= 0")
        return out
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            out = float(value)
        else:
            try:
                out = float(text) if text is not None else math.nan
            except ValueError:
                out = math.nan
        if not math.isfinite(out):
            raise ValueError("expected a finite number")
        return out
    if kind is tuple:
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value)
        if text is not None:
            return tuple(p.strip() for p in text.split(",") if p.strip())
        raise ValueError("expected comma-separated names or a list of names")
    raise ValueError(f"unsupported option type {kind!r}")  # a new LocalityConfig field type


def parse_cells_options(options: Mapping[str, Any] | Sequence[str] | None, *,
                        option: str = "--cells-option") -> dict[str, Any]:
    """Return {LocalityConfig field: typed value} from ``KEY=VALUE`` texts or a mapping.

    The one parser of cells options: ``sia replay --cells-option KEY=VALUE``
    (repeatable: a sequence of texts) and evaluation configs'
    ``locality: {options: {...}}`` (a mapping of YAML values). Any field
    except :data:`SHAPE_FIELDS`; values by the field's type (bool:
    true/false/1/0/yes/no; int; float; tuple of names: comma-separated or a
    list). A mistake is a ConfigError naming ``option`` and the bad key or
    value (``--cells-option 'preempt=maybe': ...``, ``locality.options.seed: ...``).
    """
    if not options:
        return {}
    types = cells_option_types()
    if isinstance(options, Mapping):
        items = [(str(k), v, f"{option}.{k}") for k, v in options.items()]
    elif isinstance(options, str):
        raise ConfigError(f"{option}: expected a list of KEY=VALUE, got the text {options!r}")
    else:
        items = []
        for text in options:
            key, eq, value = str(text).partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"{option} {text!r}: expected KEY=VALUE, e.g. preempt=true")
            items.append((key.strip().lower(), value, f"{option} {text!r}"))
    out: dict[str, Any] = {}
    for key, value, where in items:
        if key in SHAPE_FIELDS:
            raise ConfigError(f"{where}: {key} is set by the topology / placement "
                              "(--topology gpus=8,rack=4, --placement buddy,mcf,budget=0.5)")
        if key not in types:
            raise ConfigError(f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(types))}")
        if key in out:
            raise ConfigError(f"{where}: {key} is given twice")
        try:
            out[key] = _cells_value(types[key], value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}, got {value!r}") from None
        try:  # LocalityConfig's own checks (ranges, names), one key at a time to name it
            replace(LocalityConfig(), **{key: out[key]})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return out


def options_from_cli(topology: str | None, placement: str | None,
                     options: Mapping[str, Any] | Sequence[str] | None = None,
                     *, option: str = "--cells-option") -> LocalityConfig | None:
    """Return the LocalityConfig for ``sia replay --topology ... --placement ... --cells-option ...`` (None: no locality).

    ``topology`` is ``gpus=8,rack=4`` (server and rack shape; ``servers=`` /
    ``racks=`` are accepted and checked but the cluster size follows the
    quotas); ``placement`` a chain such as ``buddy,mcf,budget=0.5``;
    ``options`` the other LocalityConfig fields as ``KEY=VALUE`` texts or a
    mapping (see :func:`parse_cells_options`, whose errors name ``option``).
    Any of the three turns cells on; what is not given keeps its default.
    """
    extra = parse_cells_options(options, option=option)
    if topology is None and placement is None and not extra:
        return None
    kw: dict = {}
    if topology is not None:
        spec = topology if ("servers=" in topology or "racks=" in topology) else topology + ",racks=1"
        topo = parse_topology(spec, option="--topology")
        kw.update(gpus_per_server=topo.gpus_per_server, servers_per_rack=topo.servers_per_rack)
    if placement is not None:
        chain, budget = parse_placement(placement)
        kw["chain"] = chain
        if budget is not None:
            kw["budget_s"] = budget
    return LocalityConfig(**kw, **extra)


def _binary_cells(gpus: int, max_cell: int) -> dict[int, int]:
    """Cells of power-of-two sizes <= ``max_cell`` summing to ``gpus``: as many max cells as fit, then bits."""
    cells: dict[int, int] = {}
    whole, rest = divmod(int(gpus), max_cell)
    if whole:
        cells[max_cell] = whole
    size = max_cell >> 1
    while rest:
        if rest >= size:
            cells[size] = cells.get(size, 0) + 1
            rest -= size
        size >>= 1
    return cells


def derive_cell_quotas(
    quota_gpus: Sequence[int], pool_names: Sequence[str], config: LocalityConfig,
    widest: Sequence[int] | None = None,
) -> tuple[Topology, dict[str, dict[int, int]], int]:
    """Return (topology, {pool: {cell_gpus: count}}, padding GPUs) for GPU quotas (see the module docstring).

    ``widest[p]`` is pool p's widest gang (GPUs), used to size its cells and to
    reject a quota that could never hold it.
    """
    gps, spr = config.gpus_per_server, config.servers_per_rack
    probe = Topology(racks=1, servers_per_rack=spr, gpus_per_server=gps)  # validates the shape
    total = int(sum(int(q) for q in quota_gpus))
    servers = max(1, math.ceil(total / gps))
    if servers < spr:
        spr = 1 << (servers - 1).bit_length()
    racks = math.ceil(servers / spr)
    topo = Topology(racks=racks, servers_per_rack=spr, gpus_per_server=gps)
    del probe
    quotas: dict[str, dict[int, int]] = {}
    for p, (name, q) in enumerate(zip(pool_names, quota_gpus, strict=True)):
        wide = int(widest[p]) if widest is not None else 1
        try:
            need = topo.cell_gpus(topo.level_for(max(wide, 1)))
        except ValueError as err:
            raise ConfigError(f"pool {name!r}: {err}") from None
        cells = _binary_cells(int(q), max(gps, need) if need > gps else gps)
        if int(q) and max(cells) < need:
            raise ConfigError(
                f"pool {name!r}: its widest job needs a {need}-GPU cell but its quota of {q} GPUs "
                f"decomposes into cells {sorted(cells, reverse=True)}; raise its quota to {need}")
        quotas[name] = cells
    pad = topo.n_gpus - total
    if pad:
        quotas[PAD_POOL] = _binary_cells(pad, topo.cell_gpus(topo.top_level))
    return topo, quotas, pad


def preemptible_mask(jobs: pl.DataFrame, order: np.ndarray, config: LocalityConfig) -> np.ndarray:
    """Bool array per job index: the trace's ``preemptible`` column OR a seeded ``preemptible_fraction``."""
    n = jobs.height
    mask = np.zeros(n, dtype=bool)
    if "preemptible" in jobs.columns:
        mask |= jobs["preemptible"].fill_null(False).to_numpy().astype(bool)
    if config.preemptible_fraction > 0:
        rng = np.random.default_rng(config.seed)
        mask |= rng.random(n) < config.preemptible_fraction
    return mask[order]


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


class CellCluster(Cluster):
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

    def _fallback(self, aid: str, pool: str, num_gpus: int) -> Allocation | None:
        if self.chain is None or not self.buddy.has_free_cell(self.topology.level_for(num_gpus)):
            return None  # no free unbound cell of that size at all: no solver can help
        state = ClusterState(self.topology, self.buddy.free_gpu_mask(),
                             self.buddy.bound_pool_map(), tuple(self.buddy.pools))
        res = self.chain.place([PlacementRequest(aid, num_gpus, pool, dedicated=False)], state)
        self.stats.solver_calls += 1
        self.stats.solver_s.append(res.elapsed_s)
        gpus = res.placements.get(aid)
        if gpus is None:
            return None
        level = self.topology.level_for(num_gpus)
        try:
            a = self.buddy.allocate_at(aid, pool, num_gpus, min(gpus) >> level)
        except CannotAllocate:
            return None
        by = res.stats.get("placed_by", {}).get(aid, "?")
        self.stats.fallback += 1
        self.stats.fallback_by[by] = self.stats.fallback_by.get(by, 0) + 1
        return a

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
        :func:`~sia.scheduler.placement.hungarian.plan_migration` picks the target
        and relabels it (Tesserae) so the fewest jobs move; the buddy allocator
        moves them and takes the gang's cell in one step. Each moved job is
        then stopped and restarted on its new cell by the policy wrapper
        (:class:`MigratingPolicy`), charged ``lost_work_s`` + ``restart_delay_s``.
        """
        from sia.scheduler.placement.hungarian import plan_migration

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
            for size, count in sorted(_binary_cells(total, biggest).items(), reverse=True):
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
        from sia.scheduler.core.simulator import policy_name

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
        from sia.scheduler.core.simulator import Preempt
        from sia.scheduler.core.view import Start

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


def cell_cluster_for(trace, config: LocalityConfig, preemptible: np.ndarray | None = None) -> CellCluster:
    """Return a CellCluster for a :class:`~sia.scheduler.core.view.TraceArrays` (widest gang per pool from it)."""
    widest = np.zeros(trace.n_pools, dtype=np.int64)
    if trace.n_jobs:
        np.maximum.at(widest, trace.pool, trace.num_gpus)
    return CellCluster(trace.quota, trace.pool_names, config, widest=widest.tolist(),
                       preemptible=preemptible)


def simulate_cells(jobs: pl.DataFrame, pools: pl.DataFrame, policy, config: LocalityConfig, *,
                   tick_s: float = 300.0, speedup: float = 1.0, check_invariants: bool = False,
                   progress: bool = False, record_placements: bool = False
                   ) -> tuple[pl.DataFrame, dict]:
    """Replay ``jobs`` under ``policy`` on a cell-aware cluster; return (result table, placement summary).

    The result table is :func:`sia.scheduler.core.simulator.simulate`'s (times in
    seconds; ``end_time`` includes preemption costs); the summary is
    :meth:`PlacementStats.summary` plus ``adoptions`` (bindings over loans),
    ``preempted_jobs`` (jobs stopped other than by a migration) and
    ``migrated_jobs`` (jobs moved at least once, with ``migrate``); with ``record_placements`` also ``placements``
    ({job_id: GPU ids of its latest start}), ``gpus_per_server`` and
    ``pad_gpus`` (GPU ids pinned by padding).
    """
    from sia.scheduler.core.simulator import build_trace, result_table, run_trace

    trace, order = build_trace(jobs, pools, speedup)
    cfg = replace(config, debug=config.debug or check_invariants)
    cluster = cell_cluster_for(trace, cfg, preemptible_mask(jobs, order, cfg))
    if cfg.migrate:
        policy = MigratingPolicy(policy)
    state = run_trace(trace, cluster, policy, tick_s=tick_s, check_invariants=check_invariants,
                      progress=progress)
    summary = cluster.stats.summary()
    summary["adoptions"] = cluster.buddy.adoptions
    moved = np.zeros(trace.n_jobs, dtype=np.int64)
    for j, k in cluster.migrated.items():
        moved[j] = k
    summary["preempted_jobs"] = int((state.n_preempted - moved > 0).sum())
    summary["migrated_jobs"] = int((moved > 0).sum())
    if record_placements:
        ids = jobs["job_id"].to_list()
        summary["placements"] = {ids[int(order[j])]: tuple(g.tolist())
                                 for j, g in cluster.last_gpus.items()}
        summary["gpus_per_server"] = cluster.topology.gpus_per_server
        summary["pad_gpus"] = np.flatnonzero(cluster.owner == -2).tolist()
    return result_table(trace, order, state, jobs), summary


def config_for_policy(config: LocalityConfig, policy: Any) -> LocalityConfig:
    """Return the LocalityConfig ``policy`` replays with on cells: ``config`` with the settings
    its needs require (:attr:`PolicyNeeds.locality_requires
    <sia.scheduler.core.needs.PolicyNeeds>`; HiveD* lets low-priority jobs use any free cell).

    ``policy`` is a registered name or a policy (class or instance). Raises a
    one-line ConfigError naming the policy when it does not support locality.
    """
    from sia.scheduler.core.needs import needs_of
    from sia.scheduler.core.simulator import policy_name
    from sia.scheduler.registry import check_policy, locality_error

    if isinstance(policy, str):
        needs = check_policy(policy, locality=config)
    else:
        needs = needs_of(policy)
        if not needs.locality:
            raise locality_error(policy_name(policy))
    return replace(config, **needs.locality_requires) if needs.locality_requires else config


def replay_maybe_cells(jobs: pl.DataFrame, pools: pl.DataFrame, policy,
                       locality: LocalityConfig | None, *, tick_s: float = 300.0,
                       speedup: float = 1.0, progress: bool = False,
                       check_invariants: bool = False) -> tuple[pl.DataFrame, dict | None]:
    """Replay on fungible GPUs (``locality`` None: :func:`~sia.scheduler.core.simulator.simulate`) or
    on cells with the config the policy replays with (:func:`config_for_policy`).

    Returns (the per-job result table (times in seconds), the cell cluster's placement
    counters, or None on fungible GPUs). For ``sia replay``'s ``--topology`` /
    ``--placement`` / ``--cells-option`` and evaluation configs (see :func:`options_from_cli`).
    """
    from sia.scheduler.core.simulator import simulate

    if locality is None:
        return simulate(jobs, pools, policy, tick_s=tick_s, speedup=speedup, progress=progress,
                        check_invariants=check_invariants), None
    cfg = config_for_policy(locality, policy)
    return simulate_cells(jobs, pools, policy, cfg, tick_s=tick_s, speedup=speedup,
                          progress=progress, check_invariants=check_invariants)


def simulate_maybe_cells(jobs: pl.DataFrame, pools: pl.DataFrame, policy, locality: LocalityConfig | None,
                         *, tick_s: float = 300.0, speedup: float = 1.0,
                         progress: bool = False, check_invariants: bool = False) -> pl.DataFrame:
    """The per-job result table of :func:`replay_maybe_cells` (times in seconds)."""
    return replay_maybe_cells(jobs, pools, policy, locality, tick_s=tick_s, speedup=speedup,
                              progress=progress, check_invariants=check_invariants)[0]
