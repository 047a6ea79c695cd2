"""SIA Figure 16 (section 6.4): SIA and HiveD* with locality (buddy cells), and the placement chains.

Synthetic workloads (:func:`sia.data.synthetic.generate_workload`: 8-GPU pools,
widths 1/2/4/8) on 8-GPU servers; every gang must sit in one server (a cell of
1, 2, 4 or 8 GPUs). For each workload variant (fewer-queues = 2 pools, base
= 4, more-queues = 8) and seed, every policy replays on the cell-aware
cluster (:mod:`sia.scheduler.locality`) and is scored against FCFS on the
same cells (``FCFS-with-cells``). ``sia-learned`` is SIA with the learned
predictors, trained per (variant, seed) on an independent synthetic workload
(see :func:`learned_sia`). Rows for SIA without locality (fungible
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

Outputs (under ``out_dir``): ``figure16.csv`` / ``figure16.md`` (one row per
variant and policy: mean over seeds), ``figure16_runs.csv`` (one row per
replay), ``chains.csv`` / ``chains.md`` and ``figure16.png``.

:func:`run_causes` (``sia figure16 --causes``) instead classifies every
slowed job of every locality policy by what held up its start
(:data:`CAUSES`: root causes in the cells versus cascades behind an earlier
slowed job): ``causes.csv`` / ``causes.md`` (counts per variant, policy and
cause, summed over seeds) and ``causes_jobs.csv``.
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.pipelines.experiment import read_yaml

DAY_S = 86_400.0


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
    chain_locality: dict = field(default_factory=dict)
    #: partial preemption rows: {policy, preemptible_fraction, lost_work_s, restart_delay_s}
    preemption: dict = field(default_factory=dict)
    #: days of the independent workload (same variant, seed + learned_seed_offset) that the
    #: learned predictors of policy "sia-learned" are trained on (its FCFS replay)
    learned_train_days: float = 40.0
    learned_seed_offset: int = 1000
    #: GPUs per pool of the synthetic workloads (8: each pool's quota is one 8-GPU server)
    pool_gpus: int = 8


def load_figure16_config(path: Path | str) -> Figure16Config:
    """Read a Figure 16 YAML config; ConfigError naming the file and key on bad input."""
    path = Path(path)
    raw = read_yaml(path) or {}
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
    if "chains" in raw:
        from sia.scheduler.locality import parse_placement

        kw["chains"] = tuple(parse_placement(str(c), option=f"{path}: chains")[0]
                             for c in raw["chains"])
    for key in ("locality", "chain_locality", "preemption"):
        if key in raw:
            if not isinstance(raw[key], dict):
                raise ConfigError(f"{path}: {key} must be a mapping of LocalityConfig options")
            kw[key] = dict(raw[key])
    cfg = Figure16Config(**kw)
    _locality(cfg, ("buddy",), "sia")  # validate the locality options now
    _locality(cfg, ("buddy",), "sia", mode="chain")
    if cfg.preemption:
        _locality(cfg, ("buddy",), "sia", mode="preempt")
    return cfg


def _locality(cfg: Figure16Config, chain: tuple[str, ...], policy: str, mode: str = "main",
              seed: int = 0):
    from sia.scheduler.locality import LocalityConfig, config_for_policy

    opts = dict(cfg.locality)
    if mode == "chain":
        opts.update(cfg.chain_locality)
    if mode == "preempt":
        opts.update({k: v for k, v in cfg.preemption.items() if k != "policy"})
        opts.update(preempt=True, seed=seed)
    opts.setdefault("budget_s", cfg.budget_s)
    try:
        return config_for_policy(LocalityConfig(chain=tuple(chain), **opts), policy)
    except TypeError as err:
        raise ConfigError(f"figure16 config: bad locality option: {err}") from None


def learned_sia(cfg: Figure16Config, variant: str, seed: int):
    """SIA with learned predictors trained on an independent workload of ``variant``.

    The workload is ``generate_workload(variant, seed + learned_seed_offset,
    days=learned_train_days)``; the three predictors are trained on its FCFS
    replay with the default TrainConfig (single-threaded XGBoost, as the
    registry loads them).
    """
    from sia.data.synthetic import generate_workload
    from sia.models.forecaster import LearnedForecaster
    from sia.models.registry import LoadedWillArrive
    from sia.pipelines.inputs import fcfs_schedule
    from sia.pipelines.train import TrainConfig, train_predictors
    from sia.scheduler.policy_sia import SiaPolicy

    jobs, pools = generate_workload(variant, seed=seed + cfg.learned_seed_offset,
                                    days=cfg.learned_train_days, pool_gpus=cfg.pool_gpus)
    tc = TrainConfig(ablation=False)
    res = train_predictors(fcfs_schedule(jobs, pools.select("pool", "quota_gpus")), tc)
    for r in res.windows:
        r.model.set_params(n_jobs=1)
        r.model.get_booster().set_param({"nthread": 1})
    models = {r.k_min: LoadedWillArrive(r.k_min, r.model, r.threshold, r.feature_columns,
                                        "figure16") for r in res.windows}
    fc = LearnedForecaster(models, load_windows=tc.load_windows,
                           duration_config={"fallback_bin": tc.duration_fallback_bin,
                                            "min_count": tc.history_min_count})
    return SiaPolicy(fc, name="sia-learned")


def _policy(cfg: Figure16Config, name: str, variant: str, seed: int):
    from sia.scheduler.registry import make_policy

    return learned_sia(cfg, variant, seed) if name == "sia-learned" else make_policy(name)


def run_one(item: tuple) -> dict[str, Any]:
    """Replay one (variant, seed, policy, chain or None) and its FCFS baseline; return a result row."""
    cfg, variant, seed, policy, chain, mode = item
    from sia.data.synthetic import generate_workload
    from sia.scheduler.locality import simulate_cells
    from sia.scheduler.metrics import compare
    from sia.scheduler.registry import make_policy
    from sia.scheduler.simulator import simulate

    jobs, pools = generate_workload(variant, seed=seed, days=cfg.days, pool_gpus=cfg.pool_gpus)
    pools = pools.select("pool", "quota_gpus")
    t0 = time.perf_counter()
    if chain is None:
        base = simulate(jobs, pools, make_policy("fcfs"), tick_s=cfg.tick_s)
        res = simulate(jobs, pools, _policy(cfg, policy, variant, seed), tick_s=cfg.tick_s)
        placement: dict = {}
    else:
        base_mode = "chain" if mode == "chain" else "main"
        base, _ = simulate_cells(jobs, pools, make_policy("fcfs"),
                                 _locality(cfg, ("buddy",), "fcfs", base_mode), tick_s=cfg.tick_s)
        res, placement = simulate_cells(jobs, pools, _policy(cfg, policy, variant, seed),
                                        _locality(cfg, chain, policy, mode, seed), tick_s=cfg.tick_s)
    wall = time.perf_counter() - t0
    _, s = compare(res, base, warmup_s=cfg.warmup_s)
    jct = (res["end_time"] - res["submit_time"]).mean()
    return {
        "variant": variant, "seed": seed,
        "policy": policy + ("+preempt" if mode == "preempt" else ""),
        "locality": chain is not None, "chain": "+".join(chain) if chain else "none",
        "n_jobs": s["n_jobs"], "geomean_speedup": s["geomean_speedup"],
        "mean_speedup": s["mean_speedup"], "p95_speedup": s["p95_speedup"],
        "pct_slowed": s["pct_slowed"], "total_slowdown_min": s["total_slowdown_min"],
        "max_slowdown_min": s["max_slowdown_min"], "mean_jct_h": float(jct) / 3600.0,
        "fragmentation": placement.get("fragmentation"),
        "placed_fallback": placement.get("placed_fallback"),
        "frag_refused": placement.get("frag_refused"),
        "reservations_pending": placement.get("reservations_pending"),
        "solver_calls": placement.get("solver_calls"),
        "solver_total_s": placement.get("solver_total_s"),
        "solver_p99_s": placement.get("solver_p99_s"),
        "preemptions": placement.get("preemptions"),
        "replay_wall_s": wall,
    }


def plan(cfg: Figure16Config) -> tuple[list[tuple], list[tuple]]:
    """Return (main items, chain-comparison items) to replay."""
    main = [(cfg, v, s, p, ("buddy",), "main") for v in cfg.variants for s in cfg.seeds
            for p in cfg.policies]
    if cfg.preemption:
        pol = str(cfg.preemption.get("policy", "sia-perfect"))
        main += [(cfg, v, s, pol, ("buddy",), "preempt") for v in cfg.variants for s in cfg.seeds]
    main += [(cfg, v, s, p, None, "main") for v in cfg.variants for s in cfg.seeds
             for p in cfg.no_locality_policies]
    chains = [(cfg, v, s, cfg.chain_policy, c, "chain") for v in cfg.chain_variants
              for s in cfg.seeds for c in cfg.chains]
    return main, chains


def _run(items: list[tuple], workers: int) -> list[dict]:
    if workers <= 1:
        return [run_one(i) for i in items]
    with ProcessPoolExecutor(max_workers=workers) as ex:
        return list(ex.map(run_one, items))


_MEAN_COLS = ("geomean_speedup", "mean_speedup", "p95_speedup", "pct_slowed",
              "total_slowdown_min", "max_slowdown_min", "mean_jct_h")


def summarize(runs: pl.DataFrame, by: list[str], extra: tuple[str, ...] = ()) -> pl.DataFrame:
    """Mean over seeds of each metric, grouped by ``by``, in first-seen order."""
    cols = [c for c in (*_MEAN_COLS, *extra) if c in runs.columns]
    return (runs.group_by(by, maintain_order=True)
            .agg(pl.len().alias("seeds"), pl.col("n_jobs").sum().alias("jobs"),
                 *[pl.col(c).cast(pl.Float64).mean().alias(c) for c in cols]))


def to_markdown(df: pl.DataFrame) -> str:
    """A GitHub Markdown table of ``df`` (floats to 3 significant places)."""
    def fmt(v):
        if isinstance(v, float):
            return f"{v:.3g}"
        return "" if v is None else str(v)
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * len(df.columns)]
    lines += ["| " + " | ".join(fmt(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines) + "\n"


def run_figure16(cfg: Figure16Config, out_dir: Path | str, *, workers: int = 2
                 ) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Run Figure 16 and the chain comparison; write the tables and the PNG; return (main, chains)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    main_items, chain_items = plan(cfg)
    rows = _run(main_items + chain_items, workers)
    runs = pl.DataFrame(rows[: len(main_items)], infer_schema_length=None)
    chain_runs = pl.DataFrame(rows[len(main_items):], infer_schema_length=None)
    runs.write_csv(out / "figure16_runs.csv")
    main = summarize(runs, ["variant", "policy", "locality"], ("preemptions",))
    main.write_csv(out / "figure16.csv")
    (out / "figure16.md").write_text(to_markdown(main))
    chains = summarize(chain_runs, ["variant", "policy", "chain"],
                       ("fragmentation", "placed_fallback", "frag_refused", "solver_calls",
                        "solver_total_s", "solver_p99_s", "replay_wall_s"))
    chains.write_csv(out / "chains.csv")
    (out / "chains.md").write_text(to_markdown(chains))
    plot_figure16(main, out / "figure16.png")
    return main, chains


def plot_figure16(main: pl.DataFrame, path: Path) -> Path:
    """Two panels per variant: geometric-mean speedup and % of jobs slowed, per policy; return path."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    variants = list(dict.fromkeys(main["variant"].to_list()))
    labels = list(dict.fromkeys(
        f"{p}{'' if loc else ' (no locality)'}" for p, loc in
        zip(main["policy"].to_list(), main["locality"].to_list(), strict=True)))
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    width = 0.8 / max(1, len(labels))
    for k, label in enumerate(labels):
        pol, loc = (label.replace(" (no locality)", ""), not label.endswith("(no locality)"))
        sub = main.filter((pl.col("policy") == pol) & (pl.col("locality") == loc))
        vals = {r["variant"]: r for r in sub.iter_rows(named=True)}
        xs = [i + k * width for i in range(len(variants))]
        for ax, key in zip(axes, ("geomean_speedup", "pct_slowed"), strict=True):
            ax.bar(xs, [vals[v][key] if v in vals and vals[v][key] is not None else 0
                        for v in variants], width, label=label)
    for ax, title in zip(axes, ("geometric-mean speedup vs FCFS", "% of jobs slowed"),
                         strict=True):
        ax.set_xticks([i + 0.4 - width / 2 for i in range(len(variants))], variants)
        ax.set_title(title)
    axes[0].axhline(1.0, color="grey", lw=0.8)
    axes[0].legend(fontsize=8)
    fig.suptitle("Figure 16: locality (8-GPU servers, gangs of 1/2/4/8 in one server)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
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
    are left out, as in :func:`sia.scheduler.metrics.compare`). The state of
    ``res`` is examined at the job's *baseline* start time ``t`` (when FCFS
    started it but ``res`` had not): running jobs are those with start <= t <
    end, and ``placements`` ({job_id: GPU ids}, from
    ``simulate_cells(..., record_placements=True)``) says where they sit. The
    first matching entry of :data:`CAUSES` is the cause. Columns: job_id,
    pool, num_gpus, slowdown_min, cause, root (bool).
    """
    from sia.scheduler.metrics import SLOWED_AFTER_S

    m = base.select("job_id", "pool", "submit_time", "num_gpus", "start_time", "end_time").join(
        res.select("job_id", pl.col("start_time").alias("start_s"), pl.col("end_time").alias("end_s"),
                   pl.col("opportunistic").alias("opp_s")), on="job_id")
    t0 = float(base["submit_time"].min()) + warmup_s if base.height else 0.0
    slowed = m.filter((pl.col("submit_time") >= t0)
                      & (pl.col("end_s") > pl.col("end_time") + SLOWED_AFTER_S)).sort("submit_time")
    ids = res["job_id"].to_list()
    r_ids = res["job_id"].to_numpy()
    r_pool = res["pool"].to_numpy()
    r_sub = res["submit_time"].to_numpy()
    r_start = res["start_time"].to_numpy()
    r_end = res["end_time"].to_numpy()
    r_opp = res["opportunistic"].to_numpy()
    r_g = res["num_gpus"].to_numpy()
    gps = int(gpus_per_server)
    total_gpus = int(sum(quota.values()))
    n_servers = -(-(total_gpus + len(pad_gpus)) // gps)
    pad = np.zeros(n_servers * gps, dtype=bool)
    pad[list(pad_gpus)] = True
    rows = []
    for r in slowed.iter_rows(named=True):
        t, p, g = r["start_time"], r["pool"], int(r["num_gpus"])
        live = np.flatnonzero((r_start <= t) & (t < r_end))
        occ = pad.copy()
        ded_srv: dict[int, set] = {}
        opp_srv: set[int] = set()
        for k in live:
            gpus = np.asarray(placements[ids[k]])
            occ[gpus] = True
            for srv in set((gpus // gps).tolist()):
                if r_opp[k]:
                    opp_srv.add(srv)
                else:
                    ded_srv.setdefault(srv, set()).add(r_pool[k])
        cell = 1 << max(0, (g - 1).bit_length())
        by_srv = occ.reshape(n_servers, gps)
        # servers with a free aligned cell of the job's size (rack-level gangs: none counted)
        has_cell = (~by_srv.reshape(n_servers, -1, cell).any(axis=2)).any(axis=1) if cell <= gps \
            else np.zeros(n_servers, dtype=bool)

        def aligned_free(srv: int, has_cell=has_cell) -> bool:
            return bool(has_cell[srv])

        mine = live[(r_pool[live] == p) & ~r_opp[live]]
        ded = int(r_g[mine].sum())
        free = total_gpus - int(r_g[live].sum())
        if r["opp_s"]:
            cause = "lent-late"
        elif ((r_pool == p) & ((r_sub < r["submit_time"]) | ((r_sub == r["submit_time"]) & (r_ids < r["job_id"])))
              & (r_start > t)).any():  # arrival order: (submit_time, job_id), as build_trace
            cause = "behind-earlier-job"
        elif ded + g > quota[p]:
            cause = "pool-quota-busy"
        elif free < g:
            cause = "gpus-held-by-loans" if r_opp[live].any() else "gpus-short"
        elif ded > 0:
            srvs = [s for s, pools in ded_srv.items() if p in pools]
            if any(aligned_free(s) for s in srvs):
                cause = "other"
            elif any(s in opp_srv for s in srvs):
                cause = "guests-in-pool-server"
            else:
                cause = "in-pool-fragmentation"
        else:
            unbound = [s for s in range(n_servers)
                       if s not in ded_srv and not pad[s * gps:(s + 1) * gps].any()]
            if any(aligned_free(s) and s not in opp_srv for s in unbound):
                cause = "other"
            elif any(aligned_free(s) for s in unbound):
                cause = "loans-in-unbound-servers"
            else:
                cause = "no-bindable-server"
        rows.append({"job_id": r["job_id"], "pool": p, "num_gpus": g,
                     "slowdown_min": (r["end_s"] - r["end_time"]) / 60.0, "cause": cause,
                     "root": CAUSES[cause].startswith("root")})
    schema = {"job_id": pl.String, "pool": pl.String, "num_gpus": pl.Int64,
              "slowdown_min": pl.Float64, "cause": pl.String, "root": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


def cause_one(item: tuple) -> pl.DataFrame:
    """Replay (cfg, variant, seed, policy) and FCFS on cells; return :func:`slowdown_causes` with keys."""
    cfg, variant, seed, policy = item
    from sia.data.synthetic import generate_workload
    from sia.scheduler.locality import simulate_cells
    from sia.scheduler.registry import make_policy

    jobs, pools = generate_workload(variant, seed=seed, days=cfg.days, pool_gpus=cfg.pool_gpus)
    pools = pools.select("pool", "quota_gpus")
    base, _ = simulate_cells(jobs, pools, make_policy("fcfs"), _locality(cfg, ("buddy",), "fcfs"),
                             tick_s=cfg.tick_s)
    res, summ = simulate_cells(jobs, pools, _policy(cfg, policy, variant, seed),
                               _locality(cfg, ("buddy",), policy), tick_s=cfg.tick_s,
                               record_placements=True)
    quota = dict(zip(pools["pool"].to_list(), pools["quota_gpus"].to_list(), strict=True))
    out = slowdown_causes(base, res, summ["placements"], quota, summ["gpus_per_server"],
                          warmup_s=cfg.warmup_s, pad_gpus=summ["pad_gpus"])
    return out.with_columns(pl.lit(variant).alias("variant"), pl.lit(seed).alias("seed"),
                            pl.lit(policy).alias("policy"))


def run_causes(cfg: Figure16Config, out_dir: Path | str, *, workers: int = 2) -> pl.DataFrame:
    """Slowdown causes of every locality policy of ``cfg``; write causes.csv / causes.md; return the counts.

    The counts table has one row per (variant, policy, cause) with the number of
    slowed jobs and their total slowdown (minutes), summed over seeds.
    """
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    items = [(cfg, v, s, p) for v in cfg.variants for s in cfg.seeds for p in cfg.policies]
    if workers <= 1:
        parts = [cause_one(i) for i in items]
    else:
        with ProcessPoolExecutor(max_workers=workers) as ex:
            parts = list(ex.map(cause_one, items))
    per_job = pl.concat(parts)
    per_job.write_csv(out / "causes_jobs.csv")
    counts = (per_job.group_by(["variant", "policy", "cause", "root"], maintain_order=True)
              .agg(pl.len().alias("jobs"), pl.col("slowdown_min").sum().alias("slowdown_min"))
              .sort(["variant", "policy", "root", "jobs"], descending=[False, False, True, True]))
    counts.write_csv(out / "causes.csv")
    (out / "causes.md").write_text(to_markdown(counts))
    return counts
