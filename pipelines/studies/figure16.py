"""SIA Figure 16 (section 6.4): SIA and HiveD* with locality (buddy cells), and the placement chains.

Synthetic workloads (:func:`sia.data.synthetic.generate_workload`: 8-GPU pools,
widths 1/2/4/8) on 8-GPU servers; every gang must sit in one server (a cell of
1, 2, 4 or 8 GPUs). For each workload variant (fewer-queues = 2 pools, base
= 4, more-queues = 8) and seed, every policy replays on the cell-aware
cluster (:mod:`sia.scheduler.locality`) and is scored against FCFS on the
same cells (``FCFS-with-cells``). A policy that takes a forecaster (its
registry needs; ``sia-learned``: SIA with the learned predictors) gets the
learned predictors, trained per (variant, seed) on an independent synthetic
workload (see :func:`replay_spec`). Rows for SIA without locality (fungible
GPUs, scored against fungible FCFS) show what the cells cost. HiveD* runs
with ``strict_buddies=False`` (HiveD lets low-priority jobs use any free
cell); SIA keeps opportunistic jobs out of the buddies of dedicated cells.

The chain comparison replays ``chain_policy`` on the ``chain_variant`` with
each placement chain (buddy only; buddy then min-cost flow / Hungarian /
MILP), with the locality options overridden by ``chain_locality`` (by
default in experiments/locality/figure16.yaml: SIA 5.5's strict buddy rule, the only
case where the buddy allocator refuses a job a solver can place), and reports fragmentation (mean share of free GPUs outside wholly free
servers, sampled at each start), jobs placed by a fallback solver, refusals
of jobs that fit by count, mean JCT, speedups vs FCFS-with-cells and the
solver time.

With a ``preemption`` section, ``<policy>+preempt`` rows replay that policy
with partial preemption: a seeded ``preemptible_fraction`` of the jobs is
preemptible, each preemption costs ``lost_work_s`` and ``restart_delay_s``.
With ``migration: true`` as well, ``<policy>+preempt+migrate`` rows replay it
with the same preemption and migration (``LocalityConfig.migrate``: a gang
blocked by fragmentation moves running preemptible jobs, each move costing
what a preemption costs), scored against the same FCFS, and again (``... vs
fcfs+migrate``) against FCFS that migrates too (same preemptible jobs and
costs); ``migrations`` counts the jobs moved.

Allocator settings (``allocators``, default :data:`DEFAULT_ALLOCATORS`):
every locality policy (and its FCFS baseline) is replayed once per named
setting of the buddy allocator (LocalityConfig options over ``locality``;
by default ``adopt_loans`` on and off, which moves learned SIA and HiveD*
in opposite directions), so policies are compared at equal allocator.

Outputs (under ``out_dir``): ``figure16.csv`` / ``figure16.md`` (one row per
variant, policy and allocator: mean over seeds), ``figure16_by_allocator.md``
(speedup / % slowed, one column per allocator), ``figure16_runs.csv`` and
``chain_runs.csv`` (one row per scored replay), ``chains.csv`` / ``chains.md``
and ``figure16.png``. Every replay's per-job result is kept as
``replays/VARIANT/seed-S/GROUP/LABEL.parquet`` (GROUP ``cells-ALLOC``,
``fungible``, ``chain-A+B`` or ``chain-base``; LABEL the policy or ``fcfs``)
with a keyed completion marker (:mod:`sia.pipelines.engine`); a rerun
on the same directory reuses the finished ones (the key holds the workload,
length, tick, pool size, policy, its LocalityConfig and, for a policy
that takes a forecaster, its training workload) and redoes missing, truncated or
stale ones; the tables are always recomputed from these files.

:func:`run_causes` (``sia figure16 --causes``) instead classifies every
slowed job of every locality policy by what held up its start
(:data:`CAUSES`: root causes in the cells versus cascades behind an earlier
slowed job): ``causes.csv`` / ``causes.md`` (counts per variant, policy and
cause, summed over seeds) and ``causes_jobs.csv``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.data.units import DAY_S
from sia.pipelines.engine import (
    ReplayOutcome,
    ReplaySpec,
    SyntheticTrainedPredictors,
    SyntheticWorkload,
    execute,
    require_scored,
    score,
    stored_outcome,
)
from sia.pipelines.output import save_figure, write_csv, write_text
from sia.pipelines.studies.study_schema import load_study

#: The allocator settings Figure 16 compares by default: HiveD's buddy allocator with and
#: without binding a server that loans partly hold (LocalityConfig.adopt_loans).
DEFAULT_ALLOCATORS = {"adopt-loans": {"adopt_loans": True}, "no-adopt": {"adopt_loans": False}}


@dataclass(frozen=True)
class Figure16Config:
    """What `sia figure16` runs (times in seconds unless named otherwise)."""

    variants: tuple[str, ...] = ("fewer-queues", "base", "more-queues")
    seeds: tuple[int, ...] = (0, 1, 2)
    policies: tuple[str, ...] = ("sia-perfect", "hived")
    no_locality_policies: tuple[str, ...] = ("sia-perfect",)
    days: float = 6.0
    warmup_s: float = 2 * DAY_S
    tick_s: float = 300.0
    chains: tuple[tuple[str, ...], ...] = (
        ("buddy",), ("buddy", "mcf"), ("buddy", "hungarian"), ("buddy", "milp"))
    chain_policy: str = "sia-perfect"
    chain_variants: tuple[str, ...] = ("base",)
    budget_s: float = 0.5
    locality: dict = field(default_factory=dict)
    #: allocator settings, each replayed for every locality policy: name -> LocalityConfig
    #: options applied over ``locality`` (the chain comparison uses ``locality`` alone)
    allocators: dict = field(default_factory=lambda: {k: dict(v) for k, v in
                                                      DEFAULT_ALLOCATORS.items()})
    chain_locality: dict = field(default_factory=dict)
    #: partial preemption rows: {policy, preemptible_fraction, lost_work_s, restart_delay_s}
    preemption: dict = field(default_factory=dict)
    #: with ``preemption``: also rows "<policy>+preempt+migrate" (the same plus migration)
    migration: bool = False
    #: days of the independent workload (same variant, seed + learned_seed_offset) that the
    #: learned predictors of the policies that take a forecaster ("sia-learned") are trained on
    #: (its FCFS replay)
    learned_train_days: float = 40.0
    learned_seed_offset: int = 1000
    #: SiaPolicy options of the policies that take a forecaster ("sia-learned"; e.g.
    #: {adapt_durations: true}); part of their replay keys
    learned_options: dict = field(default_factory=dict)
    #: GPUs per pool of the synthetic workloads (8: each pool's quota is one 8-GPU server)
    pool_gpus: int = 8


def load_figure16_config(path: Path | str, overrides: list[str] | None = None) -> Figure16Config:
    """Read a Figure 16 YAML config (``overrides``: `--set KEY=VALUE` items); ConfigError naming
    the file and key on bad input (schema errors all at once)."""
    path = Path(path)
    return load_study(path, "figure16", lambda raw: parse_figure16_config(raw, path), overrides)


def parse_figure16_config(raw: dict[str, Any], path: Path | str = "<dict>") -> Figure16Config:
    """Return the validated :class:`Figure16Config` of a mapping (ConfigError naming ``path`` and the key)."""
    if not isinstance(raw, dict):
        raw_t = type(raw).__name__
        raise ConfigError(f"{path}: expected a mapping at the top level, got {raw_t}")
    known = set(Figure16Config.__dataclass_fields__)
    unknown = sorted(set(raw) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; known: {sorted(known)}")
    kw: dict[str, Any] = {}
    for key in ("variants", "policies", "no_locality_policies", "chain_variants"):
        if key in raw:
            kw[key] = tuple(str(v) for v in raw[key] or ())
    if "seeds" in raw:
        try:
            kw["seeds"] = tuple(int(s) for s in raw["seeds"])
        except (TypeError, ValueError):
            raise ConfigError(f"{path}: seeds must be a list of integers") from None
    for key in ("learned_seed_offset", "pool_gpus"):
        if key in raw:
            try:
                kw[key] = int(raw[key])
            except (TypeError, ValueError):
                raise ConfigError(f"{path}: {key} must be an integer, got {raw[key]!r}") from None
    if kw.get("pool_gpus", 8) < 1:
        raise ConfigError(f"{path}: pool_gpus must be >= 1, got {kw['pool_gpus']}")
    for key in ("days", "warmup_s", "tick_s", "budget_s", "learned_train_days"):
        if key in raw:
            try:
                kw[key] = float(raw[key])
            except (TypeError, ValueError):
                raise ConfigError(f"{path}: {key} must be a number, got {raw[key]!r}") from None
    if "chain_policy" in raw:
        kw["chain_policy"] = str(raw["chain_policy"])
    if "migration" in raw:
        if not isinstance(raw["migration"], bool):
            raise ConfigError(f"{path}: migration must be true or false, got {raw['migration']!r}")
        if raw["migration"] and not raw.get("preemption"):
            raise ConfigError(f"{path}: migration: true needs a preemption section (which jobs are "
                              "preemptible and what a move costs)")
        kw["migration"] = raw["migration"]
    if "chains" in raw:
        from sia.pipelines.engine.sched import parse_placement

        kw["chains"] = tuple(parse_placement(str(c), option=f"{path}: chains")[0]
                             for c in raw["chains"])
    for key in ("locality", "chain_locality", "preemption"):
        if key in raw:
            if not isinstance(raw[key], dict):
                raise ConfigError(f"{path}: {key} must be a mapping of LocalityConfig options")
            kw[key] = dict(raw[key])
    if "learned_options" in raw:
        kw["learned_options"] = _learned_options(raw["learned_options"], path)
    if "allocators" in raw:
        kw["allocators"] = _parse_allocators(raw["allocators"], path)
    cfg = Figure16Config(**kw)
    _check_policies(cfg, path)
    for alloc in cfg.allocators:  # validate the locality options now
        _locality(cfg, ("buddy",), "sia", alloc=alloc)
        if cfg.preemption:
            _locality(cfg, ("buddy",), "sia", mode="preempt", alloc=alloc)
    _locality(cfg, ("buddy",), "sia", mode="chain")
    return cfg


def _check_policies(cfg: Figure16Config, path: Path) -> None:
    """Raise ConfigError naming the file and key when a policy is unknown or, where it replays
    on cells, does not support locality (checked against the registry's declared needs)."""
    from sia.pipelines.engine.sched import check_policy

    on_cells = [("policies", p) for p in cfg.policies] + [("chain_policy", cfg.chain_policy)]
    if cfg.preemption:
        on_cells.append(("preemption.policy", str(cfg.preemption.get("policy", "sia-perfect"))))
    for key, name in on_cells:
        try:
            check_policy(name, locality=True)
        except ConfigError as err:
            raise ConfigError(f"{path}: {key}: {err}") from None
    for name in cfg.no_locality_policies:
        try:
            check_policy(name)
        except ConfigError as err:
            raise ConfigError(f"{path}: no_locality_policies: {err}") from None


def _learned_options(raw: Any, path: Path) -> dict:
    """Return the ``learned_options`` mapping, checked by building SIA with it."""
    from sia.pipelines.engine.sched import make_policy, option_type_problems

    if not isinstance(raw, dict):
        raise ConfigError(f"{path}: learned_options must be a mapping of SiaPolicy options, "
                          f"got {type(raw).__name__}")
    opts = dict(raw)
    if "name" in opts or "forecaster" in opts:
        raise ConfigError(f"{path}: learned_options cannot set 'name' or 'forecaster'")
    for key, problem in option_type_problems("sia-perfect", opts).items():
        raise ConfigError(f"{path}: learned_options.{key}: {problem}")
    try:
        make_policy("sia-perfect", **opts)  # SIA's options, on perfect predictions
    except ConfigError as err:
        raise ConfigError(f"{path}: learned_options: {err}") from None
    return opts


def _parse_allocators(raw: Any, path: Path) -> dict[str, dict]:
    """Return {name: LocalityConfig options} from the config's ``allocators`` mapping."""
    if not isinstance(raw, dict) or not raw:
        raise ConfigError(f"{path}: allocators must be a non-empty mapping of name -> locality "
                          "options, e.g. {{adopt-loans: {{adopt_loans: true}}}}")
    out: dict[str, dict] = {}
    for name, opts in raw.items():
        name = str(name)
        if not name or "/" in name or name.startswith(".") or name == "none":
            raise ConfigError(f"{path}: allocators: {name!r} is not a usable name "
                              "(non-empty, no '/', not 'none')")
        if not isinstance(opts, dict | type(None)):
            raise ConfigError(f"{path}: allocators: {name!r} must map to LocalityConfig options, "
                              f"got {opts!r}")
        out[name] = dict(opts or {})
    return out


def _locality(cfg: Figure16Config, chain: tuple[str, ...], policy: str, mode: str = "main",
              seed: int = 0, alloc: str | None = None):
    """The LocalityConfig of a replay: ``locality``, then the allocator's options, then the mode's."""
    from sia.pipelines.engine.sched import LocalityConfig, config_for_policy

    opts = dict(cfg.locality)
    if alloc is not None:
        opts.update(cfg.allocators[alloc])
    if mode == "chain":
        opts.update(cfg.chain_locality)
    if mode in ("preempt", "migrate"):
        opts.update({k: v for k, v in cfg.preemption.items() if k != "policy"})
        opts.update(preempt=True, seed=seed)
        if mode == "migrate":
            opts.update(migrate=True)
    opts.setdefault("budget_s", cfg.budget_s)
    try:
        return config_for_policy(LocalityConfig(chain=tuple(chain), **opts), policy)
    except TypeError as err:
        where = f" (allocator {alloc!r})" if alloc is not None else ""
        raise ConfigError(f"figure16 config: bad locality option{where}: {err}") from None


def _takes_forecaster(name: str) -> bool:
    """Return True when policy ``name`` declares it takes a forecaster (the learned predictors)."""
    from sia.pipelines.engine.sched import policy_needs

    return policy_needs(name).forecaster is not None


# ----------------------------------------------------------------------------- replays on disk
def replay_spec(cfg: Figure16Config, variant: str, seed: int, policy: str, group: str, label: str,
                locality: Any) -> ReplaySpec:
    """Return one replay to run and keep: ``policy`` on (``variant``, ``seed``), on cells
    (``locality``) or fungible GPUs (None).

    ``group`` is its folder under ``replays/VARIANT/seed-S/`` (``cells-ALLOC``,
    ``chain-A+B``, ``chain-base`` or ``fungible``) and ``label`` its file name
    there (the policy, ``+preempt`` for a preemption row). A policy that takes a
    forecaster gets ``learned_options`` and predictors trained on an independent
    workload (same variant, seed + ``learned_seed_offset``, ``learned_train_days``).
    """
    learned = _takes_forecaster(policy)
    predictors = (SyntheticTrainedPredictors(SyntheticWorkload(
        variant, seed + cfg.learned_seed_offset, cfg.learned_train_days, cfg.pool_gpus))
        if learned else None)
    return ReplaySpec(SyntheticWorkload(variant, seed, cfg.days, cfg.pool_gpus), policy,
                      options=dict(cfg.learned_options) if learned else {},
                      predictors=predictors, locality=locality, tick_s=cfg.tick_s,
                      where=("replays", variant, f"seed-{seed}", group, label),
                      title=f"{variant}/seed {seed}/{group}/{label}")


@dataclass(frozen=True)
class Scored:
    """One row of the tables: ``replay`` scored against ``baseline`` (FCFS on the same cells)."""

    replay: ReplaySpec
    baseline: ReplaySpec
    policy: str  # as shown ("sia-perfect+preempt" for a preemption row)
    allocator: str  # name from Figure16Config.allocators, "none" without locality
    chain: str  # "buddy", "buddy+mcf", ... or "none"


_PLACEMENT_FACTS = ("fragmentation", "placed_fallback", "frag_refused", "reservations_pending",
                    "solver_calls", "solver_total_s", "solver_p99_s", "preemptions", "adoptions",
                    "migrations")


def score_row(cfg: Figure16Config, row: Scored, outcome: ReplayOutcome,
              baseline: ReplayOutcome) -> dict[str, Any]:
    """Return the row of ``figure16_runs.csv`` / ``chain_runs.csv``: metrics vs FCFS and placement facts."""
    _, s = score(outcome, baseline, cfg.warmup_s)
    result = outcome.result
    meta = {**(outcome.placement or {}), "wall_s": outcome.wall_s}
    jct = (result["end_time"] - result["submit_time"]).mean()
    item = row.replay
    return {
        "variant": item.workload.variant, "seed": item.workload.seed, "policy": row.policy,
        "locality": item.locality is not None, "allocator": row.allocator, "chain": row.chain,
        "n_jobs": s["n_jobs"], "geomean_speedup": s["geomean_speedup"],
        "mean_speedup": s["mean_speedup"], "p95_speedup": s["p95_speedup"],
        "pct_slowed": s["pct_slowed"], "total_slowdown_min": s["total_slowdown_min"],
        "max_slowdown_min": s["max_slowdown_min"], "mean_jct_h": float(jct) / 3600.0,
        **{k: meta.get(k) for k in _PLACEMENT_FACTS},
        "replay_wall_s": meta.get("wall_s"),
    }


def plan(cfg: Figure16Config) -> tuple[list[Scored], list[Scored]]:
    """Return (rows of figure16.csv, rows of chains.csv), one per (variant, seed, ...) in table order.

    Main rows: per allocator of ``cfg.allocators``, each locality policy (and
    the preemption policy, with and without migration) on cells, scored against FCFS on the same cells and
    allocator; then the ``no_locality_policies`` on fungible GPUs against
    fungible FCFS. Chain rows: ``chain_policy`` with each chain under
    ``chain_locality``, against FCFS on cells under the same options.
    """
    main: list[Scored] = []
    for alloc in cfg.allocators:
        group = f"cells-{alloc}"
        for v in cfg.variants:
            for s in cfg.seeds:
                base = replay_spec(cfg, v, s, "fcfs", group, "fcfs",
                                   _locality(cfg, ("buddy",), "fcfs", alloc=alloc))
                for p in cfg.policies:
                    r = replay_spec(cfg, v, s, p, group, p,
                                    _locality(cfg, ("buddy",), p, alloc=alloc))
                    main.append(Scored(r, base, p, alloc, "buddy"))
                if cfg.preemption:
                    p = str(cfg.preemption.get("policy", "sia-perfect"))
                    r = replay_spec(cfg, v, s, p, group, p + "+preempt",
                                    _locality(cfg, ("buddy",), p, "preempt", s, alloc=alloc))
                    main.append(Scored(r, base, p + "+preempt", alloc, "buddy"))
                    if cfg.migration:
                        r = replay_spec(cfg, v, s, p, group, p + "+preempt+migrate",
                                        _locality(cfg, ("buddy",), p, "migrate", s, alloc=alloc))
                        main.append(Scored(r, base, p + "+preempt+migrate", alloc, "buddy"))
                        # the same replay against FCFS that may migrate too (same preemptible jobs)
                        mbase = replay_spec(cfg, v, s, "fcfs", group, "fcfs+migrate",
                                            _locality(cfg, ("buddy",), "fcfs", "migrate", s,
                                                      alloc=alloc))
                        main.append(Scored(r, mbase, p + "+preempt+migrate vs fcfs+migrate",
                                           alloc, "buddy"))
    for v in cfg.variants:
        for s in cfg.seeds:
            base = replay_spec(cfg, v, s, "fcfs", "fungible", "fcfs", None)
            main += [Scored(replay_spec(cfg, v, s, p, "fungible", p, None), base, p, "none",
                            "none") for p in cfg.no_locality_policies]
    chains: list[Scored] = []
    for v in cfg.chain_variants:
        for s in cfg.seeds:
            base = replay_spec(cfg, v, s, "fcfs", "chain-base", "fcfs",
                               _locality(cfg, ("buddy",), "fcfs", "chain"))
            for c in cfg.chains:
                name = "+".join(c)
                r = replay_spec(cfg, v, s, cfg.chain_policy, f"chain-{name}", cfg.chain_policy,
                                _locality(cfg, c, cfg.chain_policy, "chain", s))
                chains.append(Scored(r, base, cfg.chain_policy, "chain", name))
    return main, chains


def replays_of(rows: list[Scored]) -> list[ReplaySpec]:
    """Every distinct replay the rows need (each baseline once), the slow ones of policies that
    take a forecaster (trained first) first."""
    items = list({x.name: x for r in rows for x in (r.baseline, r.replay)}.values())
    items.sort(key=lambda r: r.predictors is None)
    return items


_MEAN_COLS = ("geomean_speedup", "mean_speedup", "p95_speedup", "pct_slowed",
              "total_slowdown_min", "max_slowdown_min", "mean_jct_h")


def summarize(runs: pl.DataFrame, by: list[str], extra: tuple[str, ...] = ()) -> pl.DataFrame:
    """Mean over seeds of each metric, grouped by ``by``, in first-seen order."""
    cols = [c for c in (*_MEAN_COLS, *extra) if c in runs.columns]
    return (runs.group_by(by, maintain_order=True)
            .agg(pl.len().alias("seeds"), pl.col("n_jobs").sum().alias("jobs"),
                 *[pl.col(c).cast(pl.Float64).mean().alias(c) for c in cols]))


def by_allocator(main: pl.DataFrame) -> pl.DataFrame:
    """Return one row per (variant, policy) of the locality rows, one column per allocator.

    Each cell is ``"G / P"``: geometric-mean speedup vs FCFS and % of jobs
    slowed (means over seeds), so policies compare at equal allocator.
    """
    loc = main.filter(pl.col("locality"))
    allocs = list(dict.fromkeys(loc["allocator"].to_list()))
    rows: dict[tuple[str, str], dict[str, str]] = {}
    for r in loc.iter_rows(named=True):
        cell = rows.setdefault((r["variant"], r["policy"]),
                               {"variant": r["variant"], "policy": r["policy"]})
        cell[r["allocator"]] = f"{r['geomean_speedup']:.2f} / {r['pct_slowed']:.1f}%"
    schema = {"variant": pl.String, "policy": pl.String, **dict.fromkeys(allocs, pl.String)}
    return pl.DataFrame(list(rows.values()), schema=schema)


def to_markdown(df: pl.DataFrame) -> str:
    """A GitHub Markdown table of ``df`` (floats to 3 significant places)."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}"
        return "" if v is None else str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines) + "\n"


@dataclass
class Figure16Run:
    """What :func:`run_figure16` produced: the tables and which replays ran, were reused or redone."""

    main: pl.DataFrame
    chains: pl.DataFrame
    ran: list[str] = field(default_factory=list)  # replays run now (Replay.name)
    reused: list[str] = field(default_factory=list)  # finished replays found on disk
    stale: list[str] = field(default_factory=list)  # on disk, made with other settings: redone
    wall_s: float = 0.0


def _config_dict(cfg: Figure16Config) -> dict[str, Any]:
    return json.loads(json.dumps(asdict(cfg)))


def read_runs(cfg: Figure16Config, rows: list[Scored], out_dir: Path) -> pl.DataFrame:
    """Score ``rows`` from the finished replays in ``out_dir``; ConfigError naming an unfinished one."""
    cache: dict[str, ReplayOutcome] = {}

    def load(item: ReplaySpec) -> ReplayOutcome:
        if item.name not in cache:
            cache[item.name] = stored_outcome(item, out_dir, command="sia figure16")
        return cache[item.name]

    return pl.DataFrame([score_row(cfg, r, load(r.replay), load(r.baseline)) for r in rows],
                        infer_schema_length=None)


def run_figure16(cfg: Figure16Config, out_dir: Path | str, *, workers: int | None = 2,
                 progress: bool = False, say: Callable[[str], None] | None = None,
                 reuse: bool = True) -> Figure16Run:
    """Run (or resume) Figure 16 and the chain comparison; write the tables and the PNG.

    Each replay's per-job result goes to ``out_dir/replays/VARIANT/seed-S/
    GROUP/LABEL.parquet`` with a completion marker
    (:mod:`sia.pipelines.engine`); replays finished there with the same
    key are reused, those made with other settings are redone (``say`` names
    the config keys that changed). The tables and figure are then recomputed
    from the files. The key does not see code changes: after changing a
    policy or the allocator, pass ``reuse=False`` (``--redo``).
    """
    from sia.pipelines.executors import make_executor

    clock = time.perf_counter()
    say = say or (lambda msg: None)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    main_rows, chain_rows = plan(cfg)
    executor = make_executor(workers)
    try:
        done = execute(replays_of(main_rows + chain_rows), out, executor, reuse=reuse,
                       progress=progress, label="figure16", config=_config_dict(cfg), say=say)
    finally:
        executor.close()
    run = Figure16Run(pl.DataFrame(), pl.DataFrame(), ran=done.ran, reused=done.reused,
                      stale=done.stale)
    runs = read_runs(cfg, main_rows, out)
    write_csv(runs, out / "figure16_runs.csv")
    main = summarize(runs, ["variant", "policy", "locality", "allocator"],
                     ("preemptions", "adoptions", "migrations"))
    write_csv(main, out / "figure16.csv")
    write_text(out / "figure16.md", to_markdown(main))
    write_text(out / "figure16_by_allocator.md", to_markdown(by_allocator(main)))
    if chain_rows:
        chain_runs = read_runs(cfg, chain_rows, out)
        write_csv(chain_runs, out / "chain_runs.csv")
        chains = summarize(chain_runs, ["variant", "policy", "chain"],
                           ("fragmentation", "placed_fallback", "frag_refused", "solver_calls",
                            "solver_total_s", "solver_p99_s", "replay_wall_s"))
    else:
        chains = pl.DataFrame()
    write_csv(chains, out / "chains.csv")
    write_text(out / "chains.md", to_markdown(chains) if chains.height else "no chains\n")
    plot_figure16(main, out / "figure16.png")
    run.main, run.chains = main, chains
    run.wall_s = time.perf_counter() - clock
    require_scored(int(runs["n_jobs"].sum()) if runs.height else 0, str(out_dir),
                   f"warmup_s {cfg.warmup_s:g}")
    return run


def plot_figure16(main: pl.DataFrame, path: Path) -> Path:
    """Draw Figure 16: per allocator, geometric-mean speedup and % of jobs slowed; return path.

    One row of two panels per allocator setting (the locality policies on
    those cells, plus the no-locality rows repeated as a reference), bars per
    policy within each workload variant.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(main["variant"].to_list()))
    loc = main.filter(pl.col("locality"))
    fungible = main.filter(~pl.col("locality"))
    allocs = list(dict.fromkeys(loc["allocator"].to_list())) or ["none"]
    fig, axes = plt.subplots(len(allocs), 2, figsize=(12, 3.6 * len(allocs)), squeeze=False,
                             sharey="col")
    colors = plt.get_cmap("tab10")
    for row, alloc in zip(axes, allocs, strict=True):
        sub = pl.concat([loc.filter(pl.col("allocator") == alloc), fungible], how="vertical")
        labels = list(dict.fromkeys(
            (p, bool(lc)) for p, lc in zip(sub["policy"].to_list(), sub["locality"].to_list(),
                                           strict=True)))
        width = 0.8 / max(1, len(labels))
        for k, (pol, lc) in enumerate(labels):
            part = sub.filter((pl.col("policy") == pol) & (pl.col("locality") == lc))
            vals = {r["variant"]: r for r in part.iter_rows(named=True)}
            xs = [i + k * width for i in range(len(variants))]
            name = pol if lc else f"{pol} (no locality)"
            for ax, key in zip(row, ("geomean_speedup", "pct_slowed"), strict=True):
                ax.bar(xs, [vals[v][key] if v in vals and vals[v][key] is not None else 0
                            for v in variants], width, label=name, color=colors(k % 10),
                       hatch=None if lc else "//", alpha=1.0 if lc else 0.55)
        for ax, title in zip(row, ("geometric-mean speedup vs FCFS", "% of jobs slowed"),
                             strict=True):
            ax.set_xticks([i + 0.4 - width / 2 for i in range(len(variants))], variants)
            ax.set_title(f"{title} (allocator: {alloc})", fontsize=10)
            ax.grid(axis="y", alpha=0.3)
        row[0].axhline(1.0, color="grey", lw=0.8)
    # one legend for every panel, below them, so that it hides no bar
    handles, names = axes[0][0].get_legend_handles_labels()
    ncol = 4
    fig.legend(handles, names, loc="lower center", ncol=ncol, fontsize=8, frameon=False)
    fig.suptitle("Figure 16: locality (8-GPU servers, gangs of 1/2/4/8 in one server), "
                 "per allocator setting")
    legend_in = 0.25 * -(-len(names) // ncol) + 0.1  # inches the legend's rows take
    fig.tight_layout(rect=(0, legend_in / fig.get_figheight(), 1, 1))
    save_figure(fig, path, dpi=110)
    plt.close(fig)
    return path


# ----------------------------------------------------------------------------- slowdown causes
#: Causes of a slowed job, in the order they are tested (see :func:`slowdown_causes`).
#: Root causes: the job's own start was held up by the cells; cascades: by an earlier slowed job.
CAUSES = {
    "lent-late": "cascade: ran opportunistically, lent after its FCFS start",
    "behind-earlier-job": "cascade: an earlier job of its pool was still waiting",
    "pool-quota-busy": "cascade: its pool's dedicated jobs already filled its quota",
    "gpus-held-by-loans": "root: fewer free GPUs than it needs; loans hold some",
    "gpus-short": "root: fewer free GPUs than it needs; no loans running",
    "guests-in-pool-server": "root: its pool's server has loans (guests) and no free cell of its size",
    "in-pool-fragmentation": "root: its pool's own jobs leave no free aligned cell of its size",
    "loans-in-unbound-servers": "root: only unbound servers that loans hold part of have a free "
                                "cell of its size (binding them needs adopt_loans)",
    "no-bindable-server": "root: no unbound server has a free cell of its size",
    "other": "root: a bindable cell existed at its FCFS start (ordering within the decision)",
}


def slowdown_causes(base: pl.DataFrame, res: pl.DataFrame, placements: dict, quota: dict,
                    gpus_per_server: int, *, warmup_s: float = 0.0,
                    pad_gpus: tuple[int, ...] | list[int] = ()) -> pl.DataFrame:
    """One row per slowed job of ``res`` against ``base`` (both on cells): why it was slowed.

    A job is slowed when it ends more than 1 s after its baseline end
    (jobs submitted in the first ``warmup_s`` seconds after the first submission
    are left out, as in :func:`sia.scheduler.core.metrics.compare`). The state of
    ``res`` is examined at the job's *baseline* start time ``t`` (when FCFS
    started it but ``res`` had not): running jobs are those with start <= t <
    end, and ``placements`` ({job_id: GPU ids}, from
    ``simulate_cells(..., record_placements=True)``) says where they sit. The
    first matching entry of :data:`CAUSES` is the cause. Columns: job_id,
    pool, num_gpus, slowdown_min, cause, root (bool).
    """
    from sia.pipelines.engine.sched import SLOWED_AFTER_S

    m = base.select("job_id", "pool", "submit_time", "num_gpus", "start_time", "end_time").join(
        res.select("job_id", pl.col("start_time").alias("start_s"), pl.col("end_time").alias("end_s"),
                   pl.col("opportunistic").alias("opp_s")), on="job_id")
    t0 = float(base["submit_time"].min()) + warmup_s if base.height else 0.0
    slowed = m.filter((pl.col("submit_time") >= t0)
                      & (pl.col("end_s") > pl.col("end_time") + SLOWED_AFTER_S)).sort("submit_time")
    cells = _CellsOf(res, placements, quota, gpus_per_server, pad_gpus)
    rows = []
    for r in slowed.iter_rows(named=True):
        cause = cells.cause(r)
        rows.append({"job_id": r["job_id"], "pool": r["pool"], "num_gpus": int(r["num_gpus"]),
                     "slowdown_min": (r["end_s"] - r["end_time"]) / 60.0, "cause": cause,
                     "root": CAUSES[cause].startswith("root")})
    schema = {"job_id": pl.String, "pool": pl.String, "num_gpus": pl.Int64,
              "slowdown_min": pl.Float64, "cause": pl.String, "root": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


class _CellsOf:
    """A replay on cells (``res`` and where its jobs sat), asked why a slowed job waited."""

    def __init__(self, res: pl.DataFrame, placements: dict, quota: dict, gpus_per_server: int,
                 pad_gpus: tuple[int, ...] | list[int]):
        self.placements, self.quota = placements, quota
        self.ids = res["job_id"].to_list()
        self.r_ids = res["job_id"].to_numpy()
        self.r_pool = res["pool"].to_numpy()
        self.r_sub = res["submit_time"].to_numpy()
        self.r_start = res["start_time"].to_numpy()
        self.r_end = res["end_time"].to_numpy()
        self.r_opp = res["opportunistic"].to_numpy()
        self.r_g = res["num_gpus"].to_numpy()
        self.gps = int(gpus_per_server)
        self.total_gpus = int(sum(quota.values()))
        self.n_servers = -(-(self.total_gpus + len(pad_gpus)) // self.gps)
        self.pad = np.zeros(self.n_servers * self.gps, dtype=bool)
        self.pad[list(pad_gpus)] = True

    def _occupancy(self, live: np.ndarray) -> tuple[np.ndarray, dict[int, set], set[int]]:
        """Return (busy GPUs, pools with dedicated jobs per server, servers with loans) of the
        ``live`` jobs (padding counts as busy)."""
        occ = self.pad.copy()
        ded_srv: dict[int, set] = {}
        opp_srv: set[int] = set()
        for k in live:
            gpus = np.asarray(self.placements[self.ids[k]])
            occ[gpus] = True
            for srv in set((gpus // self.gps).tolist()):
                if self.r_opp[k]:
                    opp_srv.add(srv)
                else:
                    ded_srv.setdefault(srv, set()).add(self.r_pool[k])
        return occ, ded_srv, opp_srv

    def cause(self, r: dict) -> str:
        """Return the first entry of :data:`CAUSES` that holds for slowed job ``r`` at its
        baseline start."""
        t, p, g = r["start_time"], r["pool"], int(r["num_gpus"])
        r_pool, r_sub, r_opp, r_g = self.r_pool, self.r_sub, self.r_opp, self.r_g
        live = np.flatnonzero((self.r_start <= t) & (t < self.r_end))
        mine = live[(r_pool[live] == p) & ~r_opp[live]]
        ded = int(r_g[mine].sum())
        free = self.total_gpus - int(r_g[live].sum())
        if r["opp_s"]:
            return "lent-late"
        if ((r_pool == p) & ((r_sub < r["submit_time"])
                             | ((r_sub == r["submit_time"]) & (self.r_ids < r["job_id"])))
                & (self.r_start > t)).any():  # arrival order: (submit_time, job_id), as build_trace
            return "behind-earlier-job"
        if ded + g > self.quota[p]:
            return "pool-quota-busy"
        if free < g:
            return "gpus-held-by-loans" if r_opp[live].any() else "gpus-short"
        return self._cell_cause(live, p, g, ded)

    def _cell_cause(self, live: np.ndarray, p: str, g: int, ded: int) -> str:
        """The root cause in the cells of a job that fits its quota and the free GPUs."""
        occ, ded_srv, opp_srv = self._occupancy(live)
        gps, n_servers = self.gps, self.n_servers
        cell = 1 << max(0, (g - 1).bit_length())
        by_srv = occ.reshape(n_servers, gps)
        # servers with a free aligned cell of the job's size (rack-level gangs: none counted)
        has_cell = (~by_srv.reshape(n_servers, -1, cell).any(axis=2)).any(axis=1) if cell <= gps \
            else np.zeros(n_servers, dtype=bool)
        if ded > 0:
            srvs = [s for s, pools in ded_srv.items() if p in pools]
            if any(has_cell[s] for s in srvs):
                return "other"
            if any(s in opp_srv for s in srvs):
                return "guests-in-pool-server"
            return "in-pool-fragmentation"
        unbound = [s for s in range(n_servers)
                   if s not in ded_srv and not self.pad[s * gps:(s + 1) * gps].any()]
        if any(has_cell[s] and s not in opp_srv for s in unbound):
            return "other"
        if any(has_cell[s] for s in unbound):
            return "loans-in-unbound-servers"
        return "no-bindable-server"


def cause_one(item: tuple) -> pl.DataFrame:
    """Replay (cfg, variant, seed, policy, allocator) and FCFS on cells; return :func:`slowdown_causes` with keys."""
    cfg, variant, seed, policy, alloc = item
    from sia.pipelines.engine.run import run_replay

    spec = replay_spec(cfg, variant, seed, policy, f"cells-{alloc}", policy,
                       _locality(cfg, ("buddy",), policy, alloc=alloc))
    base = run_replay(replace(spec, policy="fcfs", options={}, predictors=None,
                              locality=_locality(cfg, ("buddy",), "fcfs", alloc=alloc)))
    mine = run_replay(spec, record_placements=True)
    pools = spec.workload.frames()[1]
    quota = dict(zip(pools["pool"].to_list(), pools["quota_gpus"].to_list(), strict=True))
    summ = mine.placement
    out = slowdown_causes(base.result, mine.result, summ["placements"], quota,
                          summ["gpus_per_server"], warmup_s=cfg.warmup_s,
                          pad_gpus=summ["pad_gpus"])
    return out.with_columns(pl.lit(variant).alias("variant"), pl.lit(seed).alias("seed"),
                            pl.lit(alloc).alias("allocator"), pl.lit(policy).alias("policy"))


def run_causes(cfg: Figure16Config, out_dir: Path | str, *, workers: int | None = 2
               ) -> pl.DataFrame:
    """Slowdown causes of every locality policy and allocator of ``cfg``; write causes.*; return the counts.

    The counts table has one row per (variant, allocator, policy, cause) with
    the number of slowed jobs and their total slowdown (minutes), summed over
    seeds.
    """
    from sia.pipelines.executors import make_executor

    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items = [(cfg, v, s, p, a) for a in cfg.allocators for v in cfg.variants for s in cfg.seeds
             for p in cfg.policies]
    executor = make_executor(workers)
    try:
        parts = {item[1:]: part for item, part in executor.run(cause_one, items)}
    finally:
        executor.close()
    per_job = pl.concat([parts[item[1:]] for item in items])
    write_csv(per_job, out / "causes_jobs.csv")
    keys = ["variant", "allocator", "policy"]
    counts = (per_job.group_by([*keys, "cause", "root"], maintain_order=True)
              .agg(pl.len().alias("jobs"), pl.col("slowdown_min").sum().alias("slowdown_min"))
              .sort([*keys, "root", "jobs"], descending=[False, False, False, True, True]))
    write_csv(counts, out / "causes.csv")
    write_text(out / "causes.md", to_markdown(counts))
    return counts
