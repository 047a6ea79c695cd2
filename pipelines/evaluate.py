"""The scheduler evaluation pipeline behind `sia evaluate` (DESIGN.md 7, SIA 6.1).

A sweep (:func:`run_sweep`) runs an :class:`~sia.pipelines.experiment.ExperimentConfig`:

1. read the trace (or generate the synthetic workload) and cut the replay window;
2. build the experiments (:func:`build_experiments`): per group (pools per
   experiment x quota scale) and index, pick pools at random (seeded), draw a
   target load per pool and set quotas from load (or keep the recorded
   quotas), scale them;
3. when a policy uses learned predictors, load them from the MLflow registry
   by alias, or train them on the period before the replay (`on_the_fly`);
4. replay FCFS (the baseline) and every policy of every experiment on the
   executor (in-process, local processes or Dask); each finished replay is
   written to ``DIR/exp-XXX/LABEL.parquet`` followed by a completion marker
   ``LABEL.done.json`` holding the replay's key, so an interrupted sweep
   resumes without redoing finished replays (:mod:`sia.pipelines.replay_store`);
5. when all replays of an experiment are in, score them against FCFS with
   :func:`sia.scheduler.metrics.compare`, draw the plots and log one MLflow
   run (nested under the sweep's parent run in the ``sia-evaluations``
   experiment);
6. write ``DIR/summary.csv`` / ``.md`` (one row per experiment and policy,
   then the aggregate over experiments) and the sweep's plots.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.data.units import DAY_S
from sia.pipelines import plots
from sia.pipelines.executors import ProgressBar
from sia.pipelines.experiment import ExperimentConfig, PolicySpec
from sia.pipelines.inputs import Workload, load_workload, replay_window
from sia.pipelines.replay_store import (
    atomic_write_text,
    read_marker,
    replay_files,
    replay_status,
    result_key,
)
from sia.pipelines.replay_store import save_replay as store_replay
from sia.scheduler.core.metrics import compare
from sia.scheduler.registry import policy_options

BASELINE = "fcfs"
JOB_COLUMNS = ("job_id", "pool", "submit_time", "duration", "num_gpus", "tag", "user",
               "preemptible")
#: Per-run metrics in the summary table, in order (speedups are ratios; slowdowns in minutes).
SUMMARY_METRICS = ("n_jobs", "mean_speedup", "geomean_speedup", "p5_speedup", "p95_speedup",
                   "pct_slowed", "total_slowdown_min", "max_slowdown_min")
EXTRA_METRICS = ("utilization", "utilization_baseline", "mean_queue_delay_s")


# --------------------------------------------------------------------------- experiments

@dataclass(frozen=True, eq=False)
class Experiment:
    """One experiment: the pools shared, their quotas, and where it sits in the sweep."""

    exp_id: str
    group: str
    pools_wanted: int | str  # the config's pools_per_experiment value (int or "all")
    quota_scale: float
    index: int  # within its group
    seed: int
    pools: pl.DataFrame  # pool, quota_gpus, target_load (null for recorded quotas)

    def to_dict(self) -> dict[str, Any]:
        """Return the experiment as JSON-ready data (pools, quotas and loads as lists)."""
        return {
            "exp_id": self.exp_id, "group": self.group, "pools_per_experiment": self.pools_wanted,
            "quota_scale": self.quota_scale, "index": self.index, "seed": self.seed,
            "pools": self.pools["pool"].to_list(),
            "quota_gpus": [int(q) for q in self.pools["quota_gpus"].to_list()],
            "target_load": [None if x is None else round(float(x), 6)
                            for x in self.pools["target_load"].to_list()],
        }


def group_name(pools_wanted: int | str, scale: float) -> str:
    """Return a group's name, e.g. ``pools-4_scale-1`` (used in file names and tables)."""
    return f"pools-{pools_wanted}_scale-{scale:g}"


def load_trace(cfg: ExperimentConfig) -> Workload:
    """Return the config's workload (trace read with its reader options, or synthetic)."""
    t = cfg.trace
    return load_workload(
        None if t.path is None else Path(t.path), synthetic=t.synthetic, fmt=t.format,
        mapping=t.map or None, pool_from=t.pool_from, time_unit=t.time_unit, clean=t.clean,
        quotas=None if t.quotas is None else Path(t.quotas), load_range=cfg.load_range,
        seed=cfg.seed if t.seed is None else t.seed, days=t.days,
    )


def _derive_seed(*parts: int) -> int:
    return int(np.random.SeedSequence(list(parts)).generate_state(1)[0])


def build_experiments(cfg: ExperimentConfig, jobs: pl.DataFrame, span_s: float,
                      recorded: pl.DataFrame) -> list[Experiment]:
    """Return the sweep's experiments (pools picked and quotas set as SIA 6.1 describes).

    ``jobs`` are the replay window's jobs, ``span_s`` the window's length (the
    period over which load is offered), ``recorded`` the trace's pools table.
    Per group (pools per experiment x quota scale) and index i, the pool draw
    and the target loads depend only on (seed, pools per experiment, i), so
    the quota-scale groups of Figure 18 share pools and loads. Quotas are
    ``max(round(quota x scale), widest job of the pool)``.
    """
    from sia.data.quotas import quotas_from_load

    counts = jobs.group_by("pool").len()
    eligible = sorted(counts.filter(pl.col("len") >= cfg.min_jobs_per_pool)["pool"].to_list())
    if not eligible:
        raise ConfigError(f"{cfg.source}: min_jobs_per_pool: no pool has {cfg.min_jobs_per_pool} "
                          "jobs in the replay window")
    widest = dict(jobs.group_by("pool").agg(pl.col("num_gpus").max()).iter_rows())
    out: list[Experiment] = []
    n = 0
    for wanted in cfg.pools_per_experiment:
        k = len(eligible) if wanted == "all" else int(wanted)
        if k > len(eligible):
            raise ConfigError(
                f"{cfg.source}: pools_per_experiment: {k} pools wanted but only {len(eligible)} "
                f"have at least min_jobs_per_pool={cfg.min_jobs_per_pool} jobs in the replay "
                f"window ({', '.join(eligible)})")
        for i in range(cfg.experiments):
            seed = _derive_seed(cfg.seed, 0 if wanted == "all" else k, i)
            rng = np.random.default_rng(seed)
            chosen = eligible if wanted == "all" else sorted(
                rng.choice(np.array(eligible, dtype=object), size=k, replace=False).tolist())
            exp_jobs = jobs.filter(pl.col("pool").is_in(chosen))
            if cfg.quotas == "from_load":
                base = quotas_from_load(exp_jobs, cfg.load_range, seed=_derive_seed(seed, 1),
                                        span_s=span_s)
            else:
                base = recorded.filter(pl.col("pool").is_in(chosen)).select("pool", "quota_gpus")
                missing = sorted(set(chosen) - set(base["pool"].to_list()))
                if missing:
                    raise ConfigError(f"{cfg.source}: quotas: recorded: pool {missing[0]!r} has "
                                      "no recorded quota")
                base = base.with_columns(pl.lit(None, dtype=pl.Float64).alias("target_load"))
            for scale in cfg.quota_scale:
                quota = [max(int(round(q * scale)), int(widest[p]), 1)
                         for p, q in zip(base["pool"], base["quota_gpus"], strict=True)]
                pools = base.with_columns(pl.Series("quota_gpus", quota, dtype=pl.Int32)).sort("pool")
                out.append(Experiment(f"exp-{n:03d}", group_name(wanted, scale), wanted, scale, i,
                                      seed, pools))
                n += 1
    # group-major order: all experiments of a group together
    order = {group_name(w, s): (a, b) for a, w in enumerate(cfg.pools_per_experiment)
             for b, s in enumerate(cfg.quota_scale)}
    return sorted(out, key=lambda e: (order[e.group], e.index))


# --------------------------------------------------------------------------- replays

@dataclass(frozen=True, eq=False)
class ReplayTask:
    """One replay: a policy on one experiment's jobs and pools (sent to a worker)."""

    exp_id: str
    label: str
    policy: str
    options: dict[str, Any]
    forecaster: dict[str, Any] | None
    jobs: pl.DataFrame
    pools: pl.DataFrame
    tick_s: float
    key: str
    locality: dict[str, Any] | None = None  # {topology, placement[, options]}; None: fungible GPUs

    @property
    def name(self) -> str:
        """Return ``exp-XXX/LABEL`` (how errors and progress name the replay)."""
        return f"{self.exp_id}/{self.label}"


def learned_forecaster(spec: dict[str, Any]) -> Any:
    """Return a fresh LearnedForecaster for ``spec`` (the registry's models are read once per process).

    ``spec`` holds ``tracking_uri``, ``alias``, ``windows_min``, ``load_method``
    and ``load_windows``.
    """
    from sia.models.forecaster import LearnedForecaster

    return LearnedForecaster.from_registry(
        tuple(spec["windows_min"]), spec["alias"], load_method=spec["load_method"],
        load_windows=int(spec["load_windows"]), tracking_uri=spec["tracking_uri"])


def run_replay(task: ReplayTask) -> pl.DataFrame:
    """Replay one task and return the simulator's per-job result table (runs on a worker)."""
    return _replay(task)[0]


def _replay(task: ReplayTask) -> tuple[pl.DataFrame, dict[str, Any] | None]:
    """Replay one task: (per-job result table, the cell cluster's placement counters
    (preemptions, migrations, fallbacks, ...; None on fungible GPUs))."""
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.registry import make_policy

    fc = None if task.forecaster is None else learned_forecaster(task.forecaster)
    policy = make_policy(task.policy, locality=task.locality,
                         **policy_options(task.policy, task.options, forecaster=fc))
    if task.locality is None:
        return simulate(task.jobs, task.pools, policy, tick_s=task.tick_s), None
    from sia.pipelines.locality_options import options_from_cli
    from sia.scheduler.locality.replay import replay_maybe_cells

    cells = options_from_cli(task.locality["topology"], task.locality["placement"],
                             task.locality.get("options"), option="locality.options")
    return replay_maybe_cells(task.jobs, task.pools, policy, cells, tick_s=task.tick_s)


def replay_paths(out_dir: Path, exp_id: str, label: str) -> tuple[Path, Path]:
    """Return (the replay's Parquet file, its completion marker)."""
    return replay_files(out_dir / exp_id, label)


def replay_done(out_dir: Path, exp_id: str, label: str, key: str) -> bool:
    """Return True when the replay's Parquet is complete and its marker holds ``key``."""
    return replay_status(*replay_paths(out_dir, exp_id, label), key) == "done"


def save_replay(out_dir: Path, task: ReplayTask, result: pl.DataFrame, wall_s: float | None,
                cells: dict[str, Any] | None = None) -> Path:
    """Write the replay's Parquet, then its completion marker (with the cell cluster's
    placement counters ``cells`` if any); return the Parquet path."""
    meta = {} if cells is None else {"cells": cells}
    return store_replay(*replay_paths(out_dir, task.exp_id, task.label), result, task.key,
                        policy=task.policy, wall_s=wall_s, **meta)


def replay_cells(out_dir: Path, exp_id: str, label: str) -> dict[str, Any] | None:
    """The placement counters stored with a finished cell replay, or None."""
    marker = read_marker(replay_paths(out_dir, exp_id, label)[1]) or {}
    return marker.get("cells")


def _timed_replay(task: ReplayTask) -> tuple[pl.DataFrame, float, dict[str, Any] | None]:
    t = time.perf_counter()
    result, cells = _replay(task)
    return result, time.perf_counter() - t, cells


def make_tasks(cfg: ExperimentConfig, exp: Experiment, jobs: pl.DataFrame,
               forecaster: dict[str, Any] | None) -> list[ReplayTask]:
    """Return the experiment's replay tasks: the FCFS baseline first, then every other policy.

    A task's key hashes everything its result depends on (trace, window,
    pools and quotas, policy and options, predictors, tick, and with cells
    the ``locality`` spec, whose ``options`` hold the LocalityConfig options
    that differ from their defaults).
    """
    exp_jobs = jobs.filter(pl.col("pool").is_in(exp.pools["pool"].to_list()))
    pools = exp.pools.select("pool", "quota_gpus")
    base = (asdict(cfg.trace), cfg.replay_start_day, cfg.replay_end_day, cfg.tick_s,
            {k: v for k, v in exp.to_dict().items() if k not in ("exp_id", "index", "group")})
    if cfg.locality is not None:  # fungible replays keep the keys they always had
        base = (*base, cfg.locality)
    specs = [PolicySpec(BASELINE, BASELINE)] + [p for p in cfg.policies if p.label != BASELINE]
    tasks = []
    for spec in specs:
        options = policy_options(spec.name, spec.options, seed=exp.seed)
        fc = forecaster if spec.forecaster == "learned" else None
        if spec.forecaster == "learned" and forecaster is None:
            raise ConfigError(f"{cfg.source}: policy {spec.label!r} needs learned predictors")
        if fc is not None and spec.alias is not None:
            fc = policy_forecaster(fc, spec.alias)
        fc_key = None if fc is None else {k: v for k, v in fc.items() if k != "tracking_uri"}
        key = result_key(base, spec.name, options, fc_key)
        tasks.append(ReplayTask(exp.exp_id, spec.label, spec.name, options, fc, exp_jobs, pools,
                                cfg.tick_s, key, cfg.locality))
    return tasks


# --------------------------------------------------------------------------- scoring

def score_experiment(cfg: ExperimentConfig, exp: Experiment, results: dict[str, pl.DataFrame]
                     ) -> tuple[pl.DataFrame, dict[str, dict]]:
    """Return (per-job metrics of every policy with a ``policy`` column, summary per policy).

    Each policy's replay is compared with the FCFS replay by
    :func:`sia.scheduler.metrics.compare` (warm-up from the config).
    """
    base = results[BASELINE]
    frames, summaries = [], {}
    for spec in cfg.policies:
        per_job, summary = compare(results[spec.label], base, warmup_s=cfg.warmup_days * DAY_S,
                                   pools=exp.pools.select("pool", "quota_gpus"))
        summaries[spec.label] = summary
        frames.append(per_job.with_columns(pl.lit(spec.label).alias("policy"),
                                           pl.lit(exp.exp_id).alias("exp_id")))
    return pl.concat(frames, how="diagonal_relaxed"), summaries


#: placement counters of cell replays shown in the summary table and logged to MLflow
CELLS_METRICS = ("preemptions", "migrations", "placed_fallback", "fragmentation")


def summary_row(exp: Experiment, label: str, summary: dict) -> dict[str, Any]:
    """Return one row of the summary table (experiment, group, policy, headline metrics, and
    on cells the policy's placement counters)."""
    row = {"exp_id": exp.exp_id, "group": exp.group, "pools": len(exp.pools),
           "quota_scale": exp.quota_scale, "policy": label}
    for m in SUMMARY_METRICS + EXTRA_METRICS:
        row[m] = summary.get(m)
    cells = (summary.get("cells") or {}).get("policy")
    if "cells" in summary:
        for m in CELLS_METRICS:
            row[m] = None if cells is None else cells.get(m)
    return row


def pooled_summary(per_job: pl.DataFrame) -> dict:
    """Return :func:`compare`'s summary over counted jobs pooled from several experiments.

    ``per_job`` holds per-job metrics (already cut at each experiment's
    warm-up) of one policy; job ids are made unique per experiment and the
    FCFS side is rebuilt from ``end_baseline``, so the same formulas apply.
    """
    if per_job.height == 0:
        return {m: None for m in SUMMARY_METRICS} | {"n_jobs": 0}
    jid = pl.concat_str([pl.col("exp_id"), pl.col("job_id")], separator="/").alias("job_id")
    result = per_job.select(jid, "pool", "submit_time", "duration", "num_gpus", "start_time",
                            "end_time")
    base = per_job.select(jid, "pool", "submit_time", "duration", "num_gpus",
                          (pl.col("end_baseline") - pl.col("duration")).alias("start_time"),
                          pl.col("end_baseline").alias("end_time"))
    _, summary = compare(result, base, warmup_s=0.0)
    return summary


def aggregate_rows(rows: pl.DataFrame, per_job: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Return the aggregate over experiments: one row per (group, policy).

    Metrics pool the counted jobs of all the group's experiments
    (:func:`pooled_summary`); ``experiments`` counts them and
    ``median_exp_mean_speedup`` / ``median_exp_total_slowdown_min`` are medians
    over experiments.
    """
    out = []
    for (group, policy), part in rows.group_by(["group", "policy"], maintain_order=True):
        jobs = per_job[group].filter(pl.col("policy") == policy)
        pooled = pooled_summary(jobs)
        row = {"group": group, "policy": policy, "experiments": part.height}
        row.update({m: pooled.get(m) for m in SUMMARY_METRICS})
        row["median_exp_mean_speedup"] = part["mean_speedup"].median()
        row["median_exp_total_slowdown_min"] = part["total_slowdown_min"].median()
        for m in CELLS_METRICS:  # cells: counters summed over experiments, fragmentation mean
            if m in part.columns:
                row[m] = part[m].mean() if m == "fragmentation" else part[m].sum()
        out.append(row)
    return with_capture(pl.DataFrame(out))


#: The reference of *capture*: SIA with perfect coarse predictions.
CAPTURE_REFERENCE = "sia-perfect"


def with_capture(aggregate: pl.DataFrame) -> pl.DataFrame:
    """Return ``aggregate`` with ``capture_mean`` / ``capture_geomean``: each policy's speedup over
    sia-perfect's in the same group (DESIGN.md 6.5: what the predictors are worth); null
    without a sia-perfect row."""
    if aggregate.height == 0 or "policy" not in aggregate.columns:
        return aggregate
    ref = (aggregate.filter(pl.col("policy") == CAPTURE_REFERENCE)
           .select("group", pl.col("mean_speedup").alias("_ref_mean"),
                   pl.col("geomean_speedup").alias("_ref_geo")))
    return (aggregate.join(ref, on="group", how="left", maintain_order="left")
            .with_columns(capture_mean=pl.col("mean_speedup") / pl.col("_ref_mean"),
                          capture_geomean=pl.col("geomean_speedup") / pl.col("_ref_geo"))
            .drop("_ref_mean", "_ref_geo"))


def _fmt(v: Any) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}" if abs(v) < 1e5 else f"{v:.0f}"
    return str(v)


def markdown_table(df: pl.DataFrame) -> str:
    """Return ``df`` as a GitHub Markdown table (numbers to 4 significant digits)."""
    lines = ["| " + " | ".join(df.columns) + " |", "|" + "---|" * df.width]
    lines += ["| " + " | ".join(_fmt(v) for v in row) + " |" for row in df.iter_rows()]
    return "\n".join(lines)


def per_pool_table(summaries: dict[str, dict], pools: list[str]) -> pl.DataFrame:
    """Return SIA Table 12: per policy, the geometric mean speedup in each pool and overall."""
    rows = []
    for label, s in summaries.items():
        row = {"policy": label}
        for p in pools:
            row[p] = (s["per_pool"].get(p) or {}).get("geomean_speedup")
        row["All"] = s.get("geomean_speedup")
        rows.append(row)
    schema = {"policy": pl.String} | {p: pl.Float64 for p in pools} | {"All": pl.Float64}
    return pl.DataFrame(rows, schema=schema)


# --------------------------------------------------------------------------- MLflow

def _metric_key(*parts: str) -> str:
    import re

    return re.sub(r"[^\w.\-/ ]", "_", ".".join(parts))


def _numeric(summary: dict) -> dict[str, float]:
    out = {}
    for m in SUMMARY_METRICS + EXTRA_METRICS:
        v = summary.get(m)
        if v is not None and math.isfinite(float(v)):
            out[m] = float(v)
    cells = (summary.get("cells") or {}).get("policy") or {}
    for m in CELLS_METRICS:
        v = cells.get(m)
        if v is not None and math.isfinite(float(v)):
            out["cells." + m] = float(v)
    return out


# --------------------------------------------------------------------------- the sweep

@dataclass
class SweepResult:
    """What a sweep produced: the tables, where they went, what ran and what was reused."""

    out_dir: Path
    summary: pl.DataFrame
    aggregate: pl.DataFrame
    experiments: list[Experiment]
    ran: list[str] = field(default_factory=list)  # replays run now ("exp-XXX/label")
    reused: list[str] = field(default_factory=list)  # replays found finished on disk
    parent_run_id: str | None = None
    run_ids: dict[str, str] = field(default_factory=dict)
    tracking_uri: str | None = None
    predictors: dict[str, Any] | None = None
    wall_s: float = 0.0


def train_on_the_fly(cfg: ExperimentConfig, wl: Workload, out_dir: Path, say: Callable[[str], None]
                ) -> dict[str, Any]:
    """Train the predictors on the period before the replay (once per sweep; reused on resume)."""
    from sia.pipelines.tracking import tracking_uri
    from sia.pipelines.train import TrainConfig, run_training

    p = cfg.predictors
    start = float(cfg.replay_start_day)
    key = result_key(asdict(cfg.trace), start, asdict(p), tracking_uri())
    marker = out_dir / "predictors.json"
    if marker.exists():
        saved = json.loads(marker.read_text())
        if saved.get("key") == key:
            say(f"predictors: reusing the on-the-fly training of run {saved['run_id']} "
                f"(alias {p.alias})")
            return saved
    first = start - p.train_days - p.val_days - p.warmup_days
    jobs = wl.jobs.filter(pl.col("submit_time") < start * DAY_S)
    if jobs.height == 0:
        raise ConfigError(f"{cfg.source}: predictors: no job before replay.start_day={start:g} "
                          "to train on")
    tc = TrainConfig(train_days=p.train_days, val_days=p.val_days, warmup_days=p.warmup_days,
                     start_day=first, windows_min=tuple(p.windows_min), load_windows=p.load_windows,
                     duration_quantile=p.duration_quantile,
                     duration_target_under=p.duration_target_under)
    say(f"predictors: training on days {first + p.warmup_days:g}..{start:g} "
        f"({p.train_days:g} train + {p.val_days:g} validation), alias {p.alias}")
    outcome = run_training(jobs, wl.pools, tc, trace=wl.source, out_dir=out_dir / "predictors",
                           alias=p.alias)
    saved = {"key": key, "run_id": outcome.run_id, "alias": p.alias,
             "tracking_uri": outcome.tracking_uri, "versions": outcome.versions}
    atomic_write_text(marker, json.dumps(saved, indent=2))
    return saved


def prepare_predictors(cfg: ExperimentConfig, wl: Workload, out_dir: Path,
                       say: Callable[[str], None]) -> dict[str, Any] | None:
    """Return the learned-forecaster spec for the workers (None when no policy needs one).

    ``train: on_the_fly`` trains and registers under the config's alias first;
    ``registry`` checks now that the alias loads (a clear error, before any replay).
    """
    if not cfg.needs_predictors():
        return None
    from sia.pipelines.tracking import PREDICTOR_EXPERIMENT, setup_tracking

    p = cfg.predictors
    uri = setup_tracking(experiment=PREDICTOR_EXPERIMENT)
    trained = train_on_the_fly(cfg, wl, out_dir, say) if p.train == "on_the_fly" else None
    spec = {"tracking_uri": uri, "alias": p.alias, "windows_min": list(p.windows_min),
            "load_method": p.load_method, "load_windows": p.load_windows,
            "trained_run": None if trained is None else trained["run_id"],
            "versions": None if trained is None else trained.get("versions")}
    learned_forecaster(spec)  # fail now (RegistryError names the model and alias)
    for policy in cfg.policies:
        if policy.alias is not None:
            learned_forecaster(policy_forecaster(spec, policy.alias))
    return spec


def policy_forecaster(spec: dict[str, Any], alias: str) -> dict[str, Any]:
    """Return the learned-forecaster ``spec`` for a policy that names its own registry ``alias``."""
    import mlflow
    from sia.models.registry import JOB_DURATION_NAME, version_of, will_arrive_name

    mlflow.set_tracking_uri(spec["tracking_uri"])
    mlflow.set_registry_uri(spec["tracking_uri"])
    names = [will_arrive_name(int(k)) for k in spec["windows_min"]] + [JOB_DURATION_NAME]
    # the versions are part of the replay's key: retraining the alias redoes its replays
    versions = {n: str(version_of(n, alias).version) for n in names}
    return {**spec, "alias": alias, "trained_run": None, "versions": versions}


def run_sweep(cfg: ExperimentConfig, out_dir: Path, executor: Any = None, *,
              progress: bool = True, log_mlflow: bool = True, make_plots: bool = True,
              say: Callable[[str], None] | None = None) -> SweepResult:
    """Run (or resume) the sweep of ``cfg`` into ``out_dir``; return the :class:`SweepResult`.

    ``executor`` runs the replays (default: in-process). Finished replays on
    disk with a matching key are reused; experiments whose MLflow run was
    already logged with the same replays are not logged again. ``make_plots``
    false skips the PNG files (tables and runs are still written).
    """
    from sia.pipelines.executors import InlineExecutor

    clock = time.perf_counter()
    say = say or (lambda msg: None)
    executor = executor or InlineExecutor()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_text(out_dir / "config.json", json.dumps(cfg.to_dict(), indent=2))

    wl = load_trace(cfg)
    jobs, span_s = replay_window(wl.jobs, cfg.replay_start_day, cfg.replay_end_day,
                                 where=f"{cfg.source}: replay")
    jobs = jobs.select(c for c in JOB_COLUMNS if c in jobs.columns)
    experiments = build_experiments(cfg, jobs, span_s, wl.pools)
    say(f"{wl.source}: {jobs.height} jobs in the replay window, {len(experiments)} experiment(s) "
        f"x {len({BASELINE, *(p.label for p in cfg.policies)})} replays")
    forecaster = prepare_predictors(cfg, wl, out_dir, say)

    tasks_by_exp: dict[str, list[ReplayTask]] = {}
    for exp in experiments:
        (out_dir / exp.exp_id).mkdir(exist_ok=True)
        atomic_write_text(out_dir / exp.exp_id / "experiment.json",
                           json.dumps(exp.to_dict(), indent=2))
        tasks_by_exp[exp.exp_id] = make_tasks(cfg, exp, jobs, forecaster)
    todo = [t for ts in tasks_by_exp.values() for t in ts
            if not replay_done(out_dir, t.exp_id, t.label, t.key)]
    todo_names = {t.name for t in todo}
    reused = [t.name for ts in tasks_by_exp.values() for t in ts if t.name not in todo_names]
    missing = {e: sum(1 for t in todo if t.exp_id == e) for e in tasks_by_exp}

    tracker = _Tracker(cfg, out_dir, say) if log_mlflow else None
    result = SweepResult(out_dir, pl.DataFrame(), pl.DataFrame(), experiments, reused=reused,
                         predictors=forecaster)
    exp_by_id = {e.exp_id: e for e in experiments}
    rows: list[dict] = []
    per_job_by_group: dict[str, list[pl.DataFrame]] = {}

    def finish(exp_id: str) -> None:
        exp = exp_by_id[exp_id]
        results = {t.label: pl.read_parquet(replay_paths(out_dir, exp_id, t.label)[0])
                   for t in tasks_by_exp[exp_id]}
        per_job, summaries = score_experiment(cfg, exp, results)
        if cfg.locality is not None:  # the placement counters of each cell replay
            base = replay_cells(out_dir, exp_id, BASELINE)
            for label, summary in summaries.items():
                summary["cells"] = {"policy": replay_cells(out_dir, exp_id, label),
                                    "baseline": base}
        exp_dir = out_dir / exp_id
        per_job.write_parquet(exp_dir / "per_job.parquet")
        atomic_write_text(exp_dir / "summary.json", json.dumps(summaries, indent=2))
        files = (_experiment_plots(exp, per_job, summaries, exp_dir / "plots")
                 if make_plots else [])
        rows.extend(summary_row(exp, label, s) for label, s in summaries.items())
        per_job_by_group.setdefault(exp.group, []).append(per_job)
        if tracker is not None:
            run_key = result_key([t.key for t in tasks_by_exp[exp_id]])
            result.run_ids[exp_id] = tracker.log_experiment(exp, summaries, run_key, files,
                                                            exp_dir / "per_job.parquet")

    try:
        if tracker is not None:
            result.parent_run_id = tracker.start()
            result.tracking_uri = tracker.uri
        with ProgressBar(progress, len(todo), f"on {executor.description}") as advance:
            for exp_id, n in missing.items():
                if n == 0:
                    finish(exp_id)
            for task, (frame, wall, cells) in executor.run(_timed_replay, todo):
                save_replay(out_dir, task, frame, wall, cells)
                result.ran.append(task.name)
                advance(task.name, wall)
                missing[task.exp_id] -= 1
                if missing[task.exp_id] == 0:
                    finish(task.exp_id)
        order = {e.exp_id: i for i, e in enumerate(experiments)}
        pol_order = {p.label: i for i, p in enumerate(cfg.policies)}
        summary = pl.DataFrame(rows).sort(
            pl.col("exp_id").replace_strict(order, return_dtype=pl.Int64),
            pl.col("policy").replace_strict(pol_order, return_dtype=pl.Int64))
        per_job_all = {g: pl.concat(f, how="diagonal_relaxed") for g, f in per_job_by_group.items()}
        aggregate = aggregate_rows(summary, per_job_all)
        result.summary, result.aggregate = summary, aggregate
        files = write_summary(out_dir, cfg, summary, aggregate)
        if make_plots:
            files += _sweep_plots(cfg, summary, per_job_all, out_dir / "plots")
        if tracker is not None:
            tracker.finish(aggregate, files)
    finally:
        if tracker is not None:
            tracker.close()
    result.wall_s = time.perf_counter() - clock
    return result


def write_summary(out_dir: Path, cfg: ExperimentConfig, summary: pl.DataFrame,
                  aggregate: pl.DataFrame) -> list[Path]:
    """Write ``summary.csv`` (per experiment and policy), ``aggregate.csv`` and ``summary.md``."""
    summary.write_csv(out_dir / "summary.csv")
    aggregate.write_csv(out_dir / "aggregate.csv")
    md = [f"# {cfg.name}: speedup over FCFS and slowdowns", "",
          f"Config: `{cfg.source}`; warm-up {cfg.warmup_days:g} days; slowdowns in minutes.", "",
          "## Aggregate over experiments (jobs pooled)", "", markdown_table(aggregate), "",
          "## Per experiment", "", markdown_table(summary), ""]
    (out_dir / "summary.md").write_text("\n".join(md))
    return [out_dir / "summary.csv", out_dir / "aggregate.csv", out_dir / "summary.md"]


def _slowed_pct(per_job: pl.DataFrame, labels: list[str]) -> dict[str, float]:
    """Return {policy: % of its jobs slowed} by the metrics' ``slowed`` flag."""
    out = {}
    for k in labels:
        flags = per_job.filter(pl.col("policy") == k)["slowed"]
        if flags.len():
            out[k] = 100.0 * float(flags.cast(pl.Float64).mean())
    return out


def _experiment_plots(exp: Experiment, per_job: pl.DataFrame, summaries: dict[str, dict],
                      folder: Path) -> list[Path]:
    labels = [label for label in summaries if label != BASELINE]
    sp = {k: per_job.filter(pl.col("policy") == k)["speedup"].to_numpy() for k in labels}
    # every job's slowdown (0 when not slowed), so the plot can say how many were slowed
    slow = {k: per_job.filter(pl.col("policy") == k)["slowdown_min"].fill_null(0.0)
            .to_numpy() for k in labels}
    pools = exp.pools["pool"].to_list()
    return [
        plots.speedup_cdf(sp, folder / "speedup_cdf.png", f"{exp.exp_id} ({exp.group})",
                          _slowed_pct(per_job, labels)),
        plots.box_plot(slow, folder / "slowdown_box.png", f"{exp.exp_id}: slowed jobs",
                       "slowdown (minutes)", count="{k} of {n}\njobs slowed"),
        plots.table_png(per_pool_table(summaries, pools), folder / "per_pool_table.png",
                        f"{exp.exp_id}: geometric mean speedup per pool (SIA Table 12)"),
    ]


def _sweep_plots(cfg: ExperimentConfig, summary: pl.DataFrame,
                 per_job: dict[str, pl.DataFrame], folder: Path) -> list[Path]:
    files = []
    labels = [p.label for p in cfg.policies if p.label != BASELINE]
    for group, jobs in per_job.items():
        sp = {k: jobs.filter(pl.col("policy") == k)["speedup"].to_numpy() for k in labels}
        part = summary.filter((pl.col("group") == group) & (pl.col("policy") != BASELINE))
        files.append(plots.speedup_cdf(sp, folder / f"{group}_speedup_cdf.png",
                                       f"{cfg.name} {group}: all experiments' jobs",
                                       _slowed_pct(jobs, labels)))
        n_exps = part["exp_id"].n_unique() if part.height else 0
        if n_exps > 1:  # CDFs across experiments: one experiment would be one step per policy
            files.append(plots.metric_cdfs(
                part, [("mean_speedup", "mean speedup", "log"),
                       ("p95_speedup", "p95 speedup", "log"),
                       ("pct_slowed", "% jobs slowed", "linear"),
                       ("total_slowdown_min", "total slowdown (min)", "symlog")],
                folder / f"{group}_experiment_cdfs.png",
                f"{cfg.name} {group}: {n_exps} experiments (SIA Figure 13)"))
        files.append(plots.box_plot(
            {k: part.filter(pl.col("policy") == k)["total_slowdown_min"].to_numpy()
             for k in labels},
            folder / f"{group}_total_slowdown_box.png",
            f"{cfg.name} {group}: total slowdown per experiment", "total slowdown (minutes)",
            empty="no experiment\nwith a slowdown", count="{k} of {n}\nexps > 0"))
    return files




class _Tracker:
    """The sweep's MLflow runs: a parent run, one nested run per experiment (resumable)."""

    def __init__(self, cfg: ExperimentConfig, out_dir: Path, say: Callable[[str], None]):
        self.cfg, self.out_dir, self.say = cfg, out_dir, say
        self.uri: str | None = None
        self._parent = None

    def start(self) -> str:
        import mlflow
        from sia.pipelines.tracking import EVALUATION_EXPERIMENT, setup_tracking

        self.uri = setup_tracking(experiment=EVALUATION_EXPERIMENT)
        marker = self.out_dir / "sweep.json"
        saved = json.loads(marker.read_text()) if marker.exists() else {}
        run = None
        if saved.get("tracking_uri") == self.uri and saved.get("digest") == self.cfg.digest():
            try:
                run = mlflow.start_run(run_id=saved["parent_run_id"])
            except Exception:  # noqa: BLE001 - deleted run or another store: start afresh
                run = None
        if run is None:
            run = mlflow.start_run(run_name=f"sweep {self.cfg.name}",
                                   tags={"sia.kind": "sweep", "sia.config": self.cfg.name})
            mlflow.log_params(self.cfg.to_params())
            mlflow.log_dict(self.cfg.to_dict(), "config.json")
            atomic_write_text(marker, json.dumps({"parent_run_id": run.info.run_id,
                                                   "tracking_uri": self.uri,
                                                   "digest": self.cfg.digest()}, indent=2))
        self._parent = run
        return run.info.run_id

    def log_experiment(self, exp: Experiment, summaries: dict[str, dict], run_key: str,
                       files: list[Path], per_job: Path) -> str:
        import mlflow

        marker = self.out_dir / exp.exp_id / "mlflow.json"
        if marker.exists():
            saved = json.loads(marker.read_text())
            if saved.get("key") == run_key and saved.get("tracking_uri") == self.uri:
                return saved["run_id"]
        params = dict(self.cfg.to_params())
        d = exp.to_dict()
        params.update({"exp.id": exp.exp_id, "exp.group": exp.group, "exp.seed": str(exp.seed),
                       "exp.pools": ",".join(d["pools"]),
                       "exp.quota_gpus": ",".join(str(q) for q in d["quota_gpus"]),
                       "exp.target_load": ",".join("-" if x is None else f"{x:.3f}"
                                                   for x in d["target_load"])})
        with mlflow.start_run(run_name=f"{self.cfg.name} {exp.exp_id}", nested=True,
                              tags={"sia.kind": "experiment", "sia.config": self.cfg.name,
                                    "sia.group": exp.group}) as run:
            mlflow.log_params({k: v[:500] for k, v in params.items()})
            metrics = {}
            for label, s in summaries.items():
                for m, v in _numeric(s).items():
                    metrics[_metric_key(label, m)] = v
            mlflow.log_metrics(metrics)
            mlflow.log_dict(summaries, "summary.json")
            mlflow.log_dict(d, "experiment.json")
            for f in files:
                mlflow.log_artifact(str(f), artifact_path="plots")
            mlflow.log_artifact(str(per_job), artifact_path="results")
            run_id = run.info.run_id
        atomic_write_text(marker, json.dumps({"run_id": run_id, "key": run_key,
                                               "tracking_uri": self.uri}))
        return run_id

    def finish(self, aggregate: pl.DataFrame, files: list[Path]) -> None:
        import mlflow

        single = aggregate["group"].n_unique() == 1 if aggregate.height else True
        metrics = {}
        for row in aggregate.iter_rows(named=True):
            prefix = (row["policy"],) if single else (row["group"], row["policy"])
            for m in SUMMARY_METRICS:
                v = row.get(m)
                if v is not None and math.isfinite(float(v)):
                    metrics[_metric_key(*prefix, m)] = float(v)
        mlflow.log_metrics(metrics)
        for f in files:
            mlflow.log_artifact(str(f), artifact_path="plots" if f.suffix == ".png" else "summary")

    def close(self) -> None:
        import mlflow

        if self._parent is not None:
            mlflow.end_run()
            self._parent = None
