"""The cell-aware cluster's options (:class:`LocalityConfig`) and pool quotas as cells (SIA 5.5).

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
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.scheduler.locality.topology import Topology

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


def binary_cells(gpus: int, max_cell: int) -> dict[int, int]:
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
        cells = binary_cells(int(q), max(gps, need) if need > gps else gps)
        if int(q) and max(cells) < need:
            raise ConfigError(
                f"pool {name!r}: its widest job needs a {need}-GPU cell but its quota of {q} GPUs "
                f"decomposes into cells {sorted(cells, reverse=True)}; raise its quota to {need}")
        quotas[name] = cells
    pad = topo.n_gpus - total
    if pad:
        quotas[PAD_POOL] = binary_cells(pad, topo.cell_gpus(topo.top_level))
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
