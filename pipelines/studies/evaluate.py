"""The scheduler evaluation pipeline behind `sia evaluate` (DESIGN.md 7, SIA 6.1).

A sweep (:func:`run_sweep`) runs an :class:`~sia.pipelines.studies.experiment.ExperimentConfig`:

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
   resumes without redoing finished replays (:mod:`sia.pipelines.engine`);
5. when all replays of an experiment are in, score them against FCFS with
   :func:`sia.scheduler.core.metrics.compare`, draw the plots and log one MLflow
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
from sia.pipelines.engine import (
    FrameWorkload,
    RegistryPredictors,
    ReplayOutcome,
    ReplaySpec,
    execute,
    require_scored,
    score,
    stored_outcome,
)
from sia.pipelines.engine.sched import options_from_cli
from sia.pipelines.engine.spec import RegionsSpec
from sia.pipelines.engine.store import (
    atomic_write_parquet,
    atomic_write_text,
    read_marker,
    replay_status,
    result_key,
)
from sia.pipelines.engine.tracking import (
    detail_name,
    log_policy_run,
    model_params,
    policy_metrics,
)
from sia.pipelines.inputs import (
    Workload,
    jobs_before,
    load_workload,
    replay_window,
    warmup_covers_all,
)
from sia.pipelines.output import atomic_path
from sia.pipelines.studies import slowdown_report
from sia.pipelines.studies.experiment import ExperimentConfig, PolicySpec, with_trace_regions

BASELINE = "fcfs"
JOB_COLUMNS = ("job_id", "pool", "submit_time", "duration", "num_gpus", "tag", "user",
               "preemptible", "time_limit", "state", "hold_time")
#: Per-run metrics in the summary table, in order (speedups are ratios; slowdowns in minutes).
SUMMARY_METRICS = ("n_jobs", "mean_speedup", "geomean_speedup", "p5_speedup", "p95_speedup",
                   "pct_slowed", "total_slowdown_min", "max_slowdown_min")
EXTRA_METRICS = ("utilization", "utilization_baseline", "mean_queue_delay_s",
                 "pct_slowed_nonpreemptible", "evictions", "wasted_gpu_hours")


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
        mapping=t.map or None, pool_from=t.pool_from, arrival=t.arrival,
        time_unit=t.time_unit, clean=t.clean,
        quotas=None if t.quotas is None else Path(t.quotas), load_range=cfg.load_range,
        seed=cfg.seed if t.seed is None else t.seed, days=t.days,
        ignore_columns=t.ignore_columns,
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

def sweep_experiments(cfg: ExperimentConfig, wl: Workload
                      ) -> tuple[pl.DataFrame, list[Experiment]]:
    """Return (the replay window's jobs, the sweep's experiments) of ``cfg`` on ``wl``."""
    jobs, span_s = replay_window(wl.jobs, cfg.replay_start_day, cfg.replay_end_day,
                                 where=f"{cfg.source}: replay")
    problem = warmup_covers_all(jobs, cfg.warmup_days, f"{cfg.source}: warmup_days")
    if problem:  # stop before any training or replay
        raise ConfigError(problem)
    jobs = jobs.select(c for c in JOB_COLUMNS if c in jobs.columns)
    return jobs, build_experiments(cfg, jobs, span_s, wl.pools)


def plan(cfg: ExperimentConfig, jobs: pl.DataFrame, experiments: list[Experiment],
         predictors: dict[str, RegistryPredictors] | None,
         prior: pl.DataFrame | None = None) -> list[ReplaySpec]:
    """Return every replay spec of the sweep, experiment by experiment, each FCFS baseline
    first (``jobs``, ``experiments``: :func:`sweep_experiments`; ``predictors``:
    :func:`prepare_predictors`; ``prior``: the trace's jobs before the replay window)."""
    return [s for exp in experiments
            for s in experiment_specs(cfg, exp, jobs, predictors, prior)]


def experiment_specs(cfg: ExperimentConfig, exp: Experiment, jobs: pl.DataFrame,
                     predictors: dict[str, RegistryPredictors] | None,
                     prior: pl.DataFrame | None = None) -> list[ReplaySpec]:
    """Return the experiment's replay specs: the FCFS baseline first, then every other policy.

    ``predictors`` maps a registry alias to its resolved predictors
    (:func:`prepare_predictors`). A spec's key hashes everything its result
    depends on (trace, window, pools and quotas, policy and options,
    predictors and their model versions, tick, and with cells the locality
    options that differ from their defaults). Stored as ``exp-XXX/LABEL``.
    """
    exp_jobs = jobs.filter(pl.col("pool").is_in(exp.pools["pool"].to_list()))
    pools = exp.pools.select("pool", "quota_gpus")
    if prior is not None:  # the history of this experiment's pools only
        prior = prior.filter(pl.col("pool").is_in(exp.pools["pool"].to_list()))
    workload = FrameWorkload(exp_jobs, pools, (
        cfg.trace.key(), cfg.replay_start_day, cfg.replay_end_day,
        {k: v for k, v in exp.to_dict().items() if k not in ("exp_id", "index", "group")}),
        prior)
    locality = (None if cfg.locality is None else
                options_from_cli(cfg.locality["topology"], cfg.locality["placement"],
                                 cfg.locality.get("options"), option="locality.options"))
    preemption = cfg.preemption_config()
    policies = [PolicySpec(BASELINE, BASELINE)] + [p for p in cfg.policies if p.label != BASELINE]
    specs = []
    for policy in policies:
        ref = None
        if policy.forecaster == "learned":
            ref = (predictors or {}).get(policy.alias or cfg.predictors.alias)
            if ref is None:
                raise ConfigError(f"{cfg.source}: policy {policy.label!r} needs learned predictors")
        regions = None
        if getattr(policy, "regions", None) is not None:
            regions = RegionsSpec(cfg.regions["file"], policy.regions,
                                  plan_time_s=cfg.regions["plan_time_s"])
        specs.append(ReplaySpec(workload, policy.name, dict(policy.options), predictors=ref,
                                seed=exp.seed, locality=locality, tick_s=cfg.tick_s,
                                where=(exp.exp_id, policy.label), regions=regions,
                                preemption=preemption))
    return specs


# --------------------------------------------------------------------------- scoring

def score_experiment(cfg: ExperimentConfig, exp: Experiment,
                     results: dict[str, ReplayOutcome]) -> tuple[pl.DataFrame, dict[str, dict]]:
    """Return (per-job metrics of every policy with a ``policy`` column, summary per policy).

    Each policy's outcome is scored against the FCFS one
    (:func:`sia.pipelines.engine.score`, warm-up from the config); on cells
    each summary gets ``cells``: the placement counters of the policy's
    replay and of the baseline's.
    """
    base = results[BASELINE]
    frames, summaries = [], {}
    for spec in cfg.policies:
        per_job, summary = score(results[spec.label], base, cfg.warmup_days * DAY_S,
                                 pools=exp.pools.select("pool", "quota_gpus"))
        per_job = slowdown_report.attach(per_job, summary, results[spec.label], base,
                                         exp.pools.select("pool", "quota_gpus"))
        if cfg.locality is not None:
            summary["cells"] = {"policy": results[spec.label].placement,
                                "baseline": base.placement}
        if results[spec.label].facts.get("served"):  # SIA's predictions as it used them
            summary["served"] = results[spec.label].facts["served"]
        if results[spec.label].facts.get("calibration"):  # SIA's per-pool calibration
            summary["calibration"] = results[spec.label].facts["calibration"]
        if results[spec.label].facts.get("risk"):  # SIA's risk budget: loans, outcomes, cost
            summary["risk"] = results[spec.label].facts["risk"]
        if getattr(spec, "regions", None) is not None:  # the region report (README, regions)
            from sia.pipelines.studies.regions_report import region_summary

            summary.update(region_summary(results[spec.label], cfg.regions["file"], exp.pools))
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


#: (section, metric) of a policy's ``served`` report -> column of ``served.csv``
SERVED_COLUMNS = {("will_arrive", "precision"): "arrive_precision",
                  ("will_arrive", "recall"): "arrive_recall",
                  ("will_arrive", "f1"): "arrive_f1",
                  ("will_arrive", "persistence_f1"): "persistence_f1",
                  ("will_arrive", "load_exceeded"): "load_exceeded",
                  ("job_duration", "auc"): "duration_auc",
                  ("job_duration", "lendable"): "lendable",
                  ("job_duration", "lendable_overrun"): "lendable_overrun",
                  ("job_duration", "lent"): "lent",
                  ("job_duration", "lent_overrun"): "lent_overrun"}


def served_rows(exp: Experiment, label: str, summary: dict) -> list[dict[str, Any]]:
    """Return the rows of ``served.csv`` for one policy: one per window, the predictions as the
    policy used them (:mod:`sia.scheduler.core.served`); none for a policy without them."""
    served = summary.get("served") or {}
    windows = list(dict.fromkeys([*(served.get("will_arrive") or {}),
                                  *(served.get("job_duration") or {})]))
    rows = []
    for w in windows:
        row: dict[str, Any] = {"exp_id": exp.exp_id, "group": exp.group, "policy": label,
                               "window": w}
        for (section, metric), col in SERVED_COLUMNS.items():
            row[col] = ((served.get(section) or {}).get(w) or {}).get(metric)
        rows.append(row)
    return rows


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
    _, summary = score(result, base, 0.0)
    return summary


def aggregate_rows(rows: pl.DataFrame, per_job: dict[str, pl.DataFrame]) -> pl.DataFrame:
    """Return the aggregate over experiments: one row per (group, policy).

    Metrics pool the counted jobs of all the group's experiments
    (:func:`pooled_summary`); ``experiments`` counts them and
    ``median_exp_mean_speedup`` / ``median_exp_total_slowdown_min`` are medians
    over experiments.
    """
    out = []
    # evictions and wasted GPU-hours, when some policy evicted (a sweep without preemption
    # keeps its table)
    preempt_cols = [m for m in ("evictions", "wasted_gpu_hours")
                    if m in rows.columns and bool((rows[m].fill_null(0) != 0).any())]
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
        for m in preempt_cols:  # preemption: summed over experiments
            row[m] = part[m].sum()
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
    #: the config as the sweep ran it (the trace's own regions resolved) and its replays, so a
    #: report after the sweep finds the stored outcomes without reading the trace again
    config: ExperimentConfig | None = None
    specs: list[ReplaySpec] = field(default_factory=list)


def training_days_text(train_start_day: float, train_days: float, val_days: float) -> str:
    """Return the split as the demo and the sweeps print it: ``training on days 23-44, validating
    on days 44-58`` (days since the trace start)."""
    val_start = train_start_day + train_days
    return (f"training on days {train_start_day:g}-{val_start:g}, validating on days "
            f"{val_start:g}-{val_start + val_days:g}")


def train_on_the_fly(cfg: ExperimentConfig, wl: Workload, out_dir: Path, say: Callable[[str], None]
                ) -> dict[str, Any]:
    """Train the predictors on the period before the replay (once per sweep; reused on resume)."""
    from sia.features.table9 import held_across
    from sia.models.registry import point_alias
    from sia.pipelines.tracking import tracking_uri
    from sia.pipelines.train import TrainConfig, max_fit_rows_override, run_training

    p = cfg.predictors
    start = float(cfg.replay_start_day)
    key = result_key(cfg.trace.key(), start, asdict(p), tracking_uri())
    marker = out_dir / "predictors.json"
    if marker.exists():
        saved = json.loads(marker.read_text())
        if saved.get("key") == key and point_alias(p.alias, saved.get("versions") or {}):
            # (the alias pointed back at this training's versions: another training may have
            # moved it since)
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
                     duration_target_under=p.duration_target_under,
                     **max_fit_rows_override(p.max_fit_rows, "predictors.max_fit_rows"))
    say(f"predictors: {training_days_text(first + p.warmup_days, p.train_days, p.val_days)}, "
        f"alias {p.alias}")
    outcome = run_training(jobs, wl.pools, tc, trace=wl.source, out_dir=out_dir / "predictors",
                           alias=p.alias, held_after=held_across(wl.jobs, start * DAY_S))
    saved = {"key": key, "run_id": outcome.run_id, "alias": p.alias,
             "tracking_uri": outcome.tracking_uri, "versions": outcome.versions}
    atomic_write_text(marker, json.dumps(saved, indent=2))
    return saved


def prepare_predictors(cfg: ExperimentConfig, wl: Workload, out_dir: Path,
                       say: Callable[[str], None]) -> dict[str, RegistryPredictors] | None:
    """Return {registry alias: its resolved predictors} for the policies that use learned
    predictors (None when none does).

    ``train: on_the_fly`` trains and registers under the config's alias first;
    every alias is then checked to load now, with the exact model versions
    recorded (a clear error, before any replay).
    """
    if not cfg.needs_predictors():
        return None
    from sia.pipelines.engine.predictors import resolve_registry
    from sia.pipelines.tracking import PREDICTOR_EXPERIMENT, setup_tracking

    p = cfg.predictors
    uri = setup_tracking(experiment=PREDICTOR_EXPERIMENT)
    if p.train == "on_the_fly":
        train_on_the_fly(cfg, wl, out_dir, say)
    aliases = dict.fromkeys(x.alias or p.alias for x in cfg.policies if x.forecaster == "learned")
    resolved = {a: resolve_registry(a, p.windows_min, load_method=p.load_method,
                                    load_windows=p.load_windows, tracking_uri=uri,
                                    hint="; run `sia train` with that alias first",
                                    where=f"{cfg.source}: alias")
                for a in aliases}
    if p.train != "on_the_fly":
        from sia.models.registry import training_period
        from sia.pipelines.engine.predictors import in_sample_warning
        from sia.pipelines.tracking import deadline

        for a, ref in resolved.items():
            with deadline("reading the training run", uri):
                period = training_period(ref.versions[0][0], a)
            warning = in_sample_warning(
                period, wl.source, a, cfg.replay_start_day,
                f"set replay.start_day to {{day:g}} in {cfg.source} to replay after validation")
            if warning:
                say(f"warning: {warning}")
    return resolved


def trace_mismatches(cfg: ExperimentConfig, predictors: dict[str, RegistryPredictors] | None,
                     source: str) -> dict[str, str]:
    """Return per learned policy label the line that says its predictors learned from another
    trace than ``source`` (:func:`sia.pipelines.engine.predictors.trace_mismatch`); {} when
    every alias learned from this trace or none says."""
    if not predictors:
        return {}
    from sia.pipelines.engine.predictors import learned_from, trace_mismatch

    by_alias = {a: trace_mismatch(learned_from(ref), source, a) for a, ref in predictors.items()}
    out = {}
    for p in cfg.policies:
        if p.forecaster == "learned":
            line = by_alias.get(p.alias or cfg.predictors.alias)
            if line:
                out[p.label] = line
    return out


def predictors_record(predictors: dict[str, RegistryPredictors] | None,
                      out_dir: Path) -> dict[str, Any] | None:
    """Return what the sweep used as JSON: per alias the model versions, and the on-the-fly
    training run (``trained_run``) when there was one."""
    if predictors is None:
        return None
    trained = read_marker(out_dir / "predictors.json") or {}
    first = next(iter(predictors.values()))
    return {"tracking_uri": first.tracking_uri, "alias": first.alias,
            "trained_run": trained.get("run_id"),
            "versions": {a: dict(r.versions) for a, r in predictors.items()}}


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
    cfg = with_trace_regions(cfg, wl.jobs, wl.source)
    jobs, experiments = sweep_experiments(cfg, wl)
    say(f"{wl.source}: {jobs.height} jobs in the replay window, {len(experiments)} experiment(s) "
        f"x {len({BASELINE, *(p.label for p in cfg.policies)})} replays")
    predictors = prepare_predictors(cfg, wl, out_dir, say)
    mismatch = trace_mismatches(cfg, predictors, wl.source)
    for line in dict.fromkeys(mismatch.values()):
        say(f"warning: {line}")
    specs = plan(cfg, jobs, experiments, predictors, jobs_before(wl.jobs, cfg.replay_start_day))
    _write_experiments(out_dir, experiments)
    specs_by_exp, missing = _by_experiment(specs, out_dir)

    tracker = _Tracker(cfg, out_dir, say, predictors, mismatch) if log_mlflow else None
    result = SweepResult(out_dir, pl.DataFrame(), pl.DataFrame(), experiments,
                         predictors=predictors_record(predictors, out_dir), config=cfg,
                         specs=specs)
    exp_by_id = {e.exp_id: e for e in experiments}
    got = _Scored()

    def finish(exp_id: str) -> None:
        _finish_experiment(cfg, exp_by_id[exp_id], specs_by_exp[exp_id], out_dir, got,
                           tracker, result, make_plots, mismatch)

    try:
        if tracker is not None:
            result.parent_run_id = tracker.start()
            result.tracking_uri = tracker.uri
        for exp_id, n in missing.items():
            if n == 0:
                finish(exp_id)

        def done(spec: ReplaySpec) -> None:
            exp_id = spec.where[0]
            missing[exp_id] -= 1
            if missing[exp_id] == 0:
                finish(exp_id)

        ran = execute(specs, out_dir, executor, progress=progress, label="replays", on_done=done)
        result.ran, result.reused = ran.ran, ran.reused
        files = _sweep_tables(cfg, result, got.rows, got.per_job_by_group, make_plots,
                              got.served)
        if tracker is not None:
            tracker.finish(result.aggregate, files)
    finally:
        if tracker is not None:
            tracker.close()
    result.wall_s = time.perf_counter() - clock
    require_scored(int(result.aggregate["n_jobs"].fill_null(0).sum()) if result.aggregate.height
                   else 0, cfg.source, f"warmup_days {cfg.warmup_days:g}")
    return result


@dataclass
class _Scored:
    """What :func:`run_sweep` collects from each finished experiment for the sweep's tables."""

    rows: list[dict] = field(default_factory=list)
    served: list[dict] = field(default_factory=list)
    per_job_by_group: dict[str, list[pl.DataFrame]] = field(default_factory=dict)


def _finish_experiment(cfg: ExperimentConfig, exp: Any, specs: list[ReplaySpec], out_dir: Path,
                       got: _Scored, tracker: Any, result: SweepResult,
                       make_plots: bool, mismatch: dict[str, str]) -> None:
    """Score one experiment whose replays are all done: write its per-job table, summary and
    plots, add its rows to ``got`` and log its MLflow run (when ``tracker``); ``mismatch``:
    per policy label, the line saying its predictors learned another trace."""
    results = {s.where[-1]: stored_outcome(s, out_dir, command="sia evaluate") for s in specs}
    per_job, summaries = score_experiment(cfg, exp, results)
    for label, line in mismatch.items():  # in summary.json beside the policy's metrics
        if label in summaries:
            summaries[label]["trace_mismatch"] = line
    exp_dir = out_dir / exp.exp_id
    atomic_write_parquet(per_job, exp_dir / "per_job.parquet")
    atomic_write_text(exp_dir / "summary.json", json.dumps(summaries, indent=2))
    files = (_experiment_plots(exp, per_job, summaries, exp_dir / "plots")
             if make_plots else [])
    got.rows.extend(summary_row(exp, label, s) for label, s in summaries.items())
    got.served.extend(r for label, s in summaries.items() for r in served_rows(exp, label, s))
    got.per_job_by_group.setdefault(exp.group, []).append(per_job)
    if tracker is not None:
        run_key = result_key([s.key for s in specs])
        result.run_ids[exp.exp_id] = tracker.log_experiment(exp, summaries, run_key, files,
                                                            exp_dir / "per_job.parquet")


def _by_experiment(specs: list[ReplaySpec], out_dir: Path
                   ) -> tuple[dict[str, list[ReplaySpec]], dict[str, int]]:
    """Return the replays of each experiment and how many of them are not done in ``out_dir``."""
    specs_by_exp: dict[str, list[ReplaySpec]] = {}
    for spec in specs:
        specs_by_exp.setdefault(spec.where[0], []).append(spec)
    missing = {e: sum(1 for s in ss if replay_status(*s.files(out_dir), s.key) != "done")
               for e, ss in specs_by_exp.items()}
    return specs_by_exp, missing


def _write_experiments(out_dir: Path, experiments: list[Experiment]) -> None:
    """Write each experiment's folder and ``experiment.json``."""
    for exp in experiments:
        (out_dir / exp.exp_id).mkdir(exist_ok=True)
        atomic_write_text(out_dir / exp.exp_id / "experiment.json",
                           json.dumps(exp.to_dict(), indent=2))


def _sweep_tables(cfg: ExperimentConfig, result: SweepResult, rows: list[dict],
                  per_job_by_group: dict[str, list[pl.DataFrame]], make_plots: bool,
                  served: list[dict] | None = None) -> list[Path]:
    """Put the summary (experiments and policies in config order) and the aggregate into
    ``result``, write them, the predictions as served (``served.csv``, SIA policies) and the
    sweep's plots; return the files written."""
    order = {e.exp_id: i for i, e in enumerate(result.experiments)}
    pol_order = {p.label: i for i, p in enumerate(cfg.policies)}
    ranked = (pl.col("exp_id").replace_strict(order, return_dtype=pl.Int64),
              pl.col("policy").replace_strict(pol_order, return_dtype=pl.Int64))
    summary = pl.DataFrame(rows).sort(*ranked)
    # experiments finish in any order (and a resumed sweep in another): pooled in config
    # order, so the aggregate's float sums are the same bytes however the sweep ran
    per_job_all = {g: pl.concat(sorted(f, key=lambda d: order.get(_first_exp(d), -1)),
                                how="diagonal_relaxed")
                   for g, f in sorted(per_job_by_group.items())}
    aggregate = aggregate_rows(summary, per_job_all)
    result.summary, result.aggregate = summary, aggregate
    served_df = (pl.DataFrame(served, infer_schema_length=None).sort(*ranked, maintain_order=True)
                 if served else None)
    files = write_summary(result.out_dir, cfg, summary, aggregate, served_df)
    files += slowdown_report.write_sweep(result.out_dir, per_job_all)  # why jobs were slowed
    if make_plots:
        files += _sweep_plots(cfg, summary, per_job_all, result.out_dir / "plots")
        files += frontier_plots(cfg, aggregate, result.out_dir / "plots")
    return files


def _first_exp(per_job: pl.DataFrame) -> str | None:
    """Return the experiment of one experiment's per-job table (None when it has no rows)."""
    return per_job["exp_id"][0] if per_job.height and "exp_id" in per_job.columns else None


def write_summary(out_dir: Path, cfg: ExperimentConfig, summary: pl.DataFrame,
                  aggregate: pl.DataFrame, served: pl.DataFrame | None = None) -> list[Path]:
    """Write ``summary.csv`` (per experiment and policy), ``aggregate.csv``, ``summary.md`` and,
    when a policy reported them, ``served.csv`` (its predictions as it used them, per window)."""
    for frame, name in ((summary, "summary.csv"), (aggregate, "aggregate.csv")):
        with atomic_path(out_dir / name) as tmp:
            frame.write_csv(tmp)
    md = [f"# {cfg.name}: speedup over FCFS and slowdowns", "",
          f"Config: `{cfg.source}`; warm-up {cfg.warmup_days:g} days; slowdowns in minutes.", "",
          "## Aggregate over experiments (jobs pooled)", "", markdown_table(aggregate), "",
          "## Per experiment", "", markdown_table(summary), ""]
    files = [out_dir / "summary.csv", out_dir / "aggregate.csv", out_dir / "summary.md"]
    if served is not None and served.height:
        with atomic_path(out_dir / "served.csv") as tmp:
            served.write_csv(tmp)
        files.append(out_dir / "served.csv")
        md += ["## Predictions as served (SIA policies)", "",
               "Per window: WillJobsArrive at the ticks SIA forecast (P / R / F, persistence's F "
               "on the same records, share of arrivals above the reserved load); JobDuration over "
               "the jobs SIA considered (ROC AUC of P(duration <= w), share lendable and their "
               "overrun rate, loans and their overrun rate).", "", markdown_table(served), ""]
    choice = choose_budget(summary, aggregate) if "policy" in aggregate.columns else {}
    if choice:
        md += ["## Risk budget by the training-week rule", "",
               f"The largest budget whose jobs slowed are <= {CHOICE_MAX_PCT_SLOWED:g}% pooled "
               f"and <= {CHOICE_MAX_EXP_PCT_SLOWED:g}% in every experiment (meaningful on "
               "training weeks only):", ""]
        md += [f"- {base}: " + ("no budget meets the rule" if c["risk"] is None else
                                f"risk {c['risk']:g} (slowed {c['pct_slowed']:.3g}%, worst "
                                f"experiment {c['max_exp_pct_slowed']:.3g}%, mean speedup "
                                f"{c['mean_speedup']:.4g}, geomean {c['geomean_speedup']:.4g})")
               for base, c in choice.items()]
        md.append("")
    atomic_write_text(out_dir / "summary.md", "\n".join(md))
    return files


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




def frontier_plots(cfg: ExperimentConfig, aggregate: pl.DataFrame, folder: Path) -> list[Path]:
    """Draw ``<group>_frontier.png`` per group when the sweep has a risk-budget sweep (labels
    ``<label>+risk<r>``, :func:`~sia.pipelines.studies.experiment.risk_label`): each swept policy is a
    curve over its budgets, every other policy but FCFS a point; return the files."""
    from sia.pipelines.studies.experiment import risk_of_label

    if aggregate.height == 0 or not any(risk_of_label(p.label) for p in cfg.policies):
        return []
    files = []
    metrics = ("mean_speedup", "geomean_speedup", "pct_slowed", "total_slowdown_min")
    for (group,), part in aggregate.group_by(["group"], maintain_order=True):
        curves: dict[str, list] = {}
        points: dict[str, dict] = {}
        for row in part.iter_rows(named=True):
            label = row["policy"]
            if label == BASELINE:
                continue
            m = {k: row.get(k) for k in metrics}
            swept = risk_of_label(label)
            if swept is None:
                points[label] = m
            else:
                curves.setdefault(swept[0], []).append((swept[1], m))
        n_exps = int(part["experiments"].max() or 0)
        files.append(plots.frontier(
            curves, points, folder / f"{group}_frontier.png",
            f"{cfg.name} {group} ({n_exps} experiment{'s' * (n_exps != 1)}, jobs pooled): "
            "speedup vs slowdown over SIA's risk budget\n(up and left is better; the numbers "
            "on the curves are the budgets)"))
    return files


#: The rule that chooses the default risk budget on training weeks (issue 32): the largest
#: budget whose jobs slowed, pooled over the experiments, are at most this share (%) ...
CHOICE_MAX_PCT_SLOWED = 0.5
#: ... and at most this share (%) in every experiment.
CHOICE_MAX_EXP_PCT_SLOWED = 2.0


def choose_budget(summary: pl.DataFrame, aggregate: pl.DataFrame,
                  max_pct: float = CHOICE_MAX_PCT_SLOWED,
                  max_exp_pct: float = CHOICE_MAX_EXP_PCT_SLOWED) -> dict[str, dict[str, Any]]:
    """Return, per swept policy (labels ``<base>+risk<r>``), the largest budget whose pooled
    share of slowed jobs is <= ``max_pct`` % in every group and whose worst experiment is <=
    ``max_exp_pct`` %: ``{base: {"risk": r or None, "pct_slowed": ..., "max_exp_pct_slowed":
    ..., "mean_speedup": ..., "geomean_speedup": ...}}`` (the budget's pooled figures; None
    when no budget meets the rule). Meant for a sweep of training weeks."""
    from sia.pipelines.studies.experiment import risk_of_label

    rows: dict[str, list[tuple[float, dict[str, Any]]]] = {}
    for label in aggregate["policy"].unique(maintain_order=True).to_list():
        swept = risk_of_label(label)
        if swept is None:
            continue
        agg = aggregate.filter(pl.col("policy") == label)
        exp_max = summary.filter(pl.col("policy") == label)["pct_slowed"].max()
        rows.setdefault(swept[0], []).append((swept[1], {
            "pct_slowed": agg["pct_slowed"].max(), "max_exp_pct_slowed": exp_max,
            "mean_speedup": agg["mean_speedup"].min(),
            "geomean_speedup": agg["geomean_speedup"].min()}))
    out: dict[str, dict[str, Any]] = {}
    for base, budgets in rows.items():
        ok = [(r, m) for r, m in sorted(budgets, key=lambda t: t[0])
              if m["pct_slowed"] is not None and m["pct_slowed"] <= max_pct
              and m["max_exp_pct_slowed"] is not None and m["max_exp_pct_slowed"] <= max_exp_pct]
        out[base] = {"risk": ok[-1][0], **ok[-1][1]} if ok else {"risk": None}
    return out


#: config parameters repeated on every policy run (the rest sit on the sweep's run)
POLICY_RUN_CONFIG_PARAMS = ("name", "seed", "warmup_days", "tick_s", "quotas", "trace.path",
                            "trace.synthetic", "replay.start_day", "replay.end_day")


#: hex digits of the config's hash in run names
HASH_CHARS = 8
#: keys of the config's params that are not settings (names, the policy list, the trace's
#: location: its own tags and params say those)
_NOT_SETTINGS = ("name", "description", "policies", "trace.path", "trace.synthetic")


def changed_settings(cfg: ExperimentConfig) -> dict[str, str]:
    """Return the config's settings that differ from an evaluate config's defaults, as flat
    MLflow params (``{"load_range": "[0.5, 0.9]", "grid.experiments": "3"}`` ...; values cut to
    500 characters): what tells two sweeps of one config apart on every run."""
    from sia.pipelines.studies.experiment import parse_config

    base = parse_config({"trace": {"synthetic": "base"}, "policies": ["fcfs"]}).to_params()
    return {k: str(v)[:500] for k, v in cfg.to_params().items()
            if k not in _NOT_SETTINGS and base.get(k) != v}


class _Tracker:
    """The sweep's MLflow runs (resumable): a parent run for the sweep; under it one run per
    experiment (its plots and per-job table) holding one run per policy, and one run per
    (group, policy) for the aggregate. Policy runs carry ``policy`` as a parameter and the
    metrics of :func:`sia.pipelines.engine.tracking.policy_metrics` (no policy in the names)."""

    def __init__(self, cfg: ExperimentConfig, out_dir: Path, say: Callable[[str], None],
                 predictors: dict[str, RegistryPredictors] | None = None,
                 mismatch: dict[str, str] | None = None):
        self.cfg, self.out_dir, self.say = cfg, out_dir, say
        #: per policy label: the line saying its predictors learned from another trace
        self.mismatch = dict(mismatch or {})
        #: the settings that differ from the defaults (tags of every run)
        self.settings = changed_settings(cfg)
        self.uri: str | None = None
        self._parent = None
        default = cfg.predictors.alias
        #: per policy label: the registered model versions it used (learned policies only)
        self.versions = {p.label: dict(predictors[p.alias or default].versions)
                         for p in cfg.policies if p.forecaster == "learned" and predictors}
        self.names = {p.label: p.name for p in cfg.policies}

    def _run_name(self, *parts: str) -> str:
        """Return a child run's name: the config's name and the short hash of the resolved
        config first (two sweeps of one config with other settings differ there), then
        ``parts``."""
        return " ".join((self.cfg.name, self.cfg.digest()[:HASH_CHARS], *parts))

    def _child_tags(self, **tags: str) -> dict[str, str]:
        """Return the tags of a child run: ``tags``, the config's name and hash, the settings
        that differ from the config's defaults (``sia.set.<key>``; :func:`changed_settings`)
        and, for a policy whose predictors learned from another trace, that line."""
        out = {"sia.config": self.cfg.name, "sia.config_digest": self.cfg.digest(),
               **{f"sia.set.{k}": v for k, v in self.settings.items()}, **tags}
        line = self.mismatch.get(tags.get("sia.policy", ""))
        if line:
            out["sia.trace_mismatch"] = line
        return out

    def _shared_params(self) -> dict[str, str]:
        """The config's parameters a policy run repeats (the sweep's run holds them all)."""
        return {k: v for k, v in self.cfg.to_params().items() if k in POLICY_RUN_CONFIG_PARAMS}

    def _policy_params(self, label: str) -> dict[str, str]:
        return {"policy": label, "policy.name": self.names.get(label, label),
                **model_params(self.versions.get(label))}

    def start(self) -> str:
        """:meth:`_start_body` with a total deadline against a server
        (:func:`sia.pipelines.tracking.deadline`)."""
        from sia.pipelines.tracking import deadline

        with deadline("logging the sweep's runs", self.uri):
            return self._start_body()

    def _start_body(self) -> str:
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
            # the UI's run table shows about 25 characters: the start time first tells two
            # sweeps of one config apart; the config's digest says whether they differ
            stamp = time.strftime("%m-%d %H:%M:%S")
            tags = self._child_tags(**{"sia.kind": "sweep"})
            if self.mismatch:
                tags["sia.trace_mismatch"] = next(iter(self.mismatch.values()))
            run = mlflow.start_run(
                run_name=f"{self.cfg.name} {self.cfg.digest()[:HASH_CHARS]} sweep {stamp}",
                tags=tags)
            mlflow.log_params(self.cfg.to_params())
            used = {k: v for versions in self.versions.values() for k, v in versions.items()}
            mlflow.log_params(model_params(used))  # the model versions used (default alias)
            mlflow.log_dict(self.cfg.to_dict(), "config.json")
            mlflow.log_dict(self.versions, "model_versions.json")
            atomic_write_text(marker, json.dumps({"parent_run_id": run.info.run_id,
                                                   "tracking_uri": self.uri,
                                                   "digest": self.cfg.digest()}, indent=2))
        self._parent = run
        return run.info.run_id

    def log_experiment(self, exp: Experiment, summaries: dict[str, dict], run_key: str,
                       files: list[Path], per_job: Path) -> str:
        """Log experiment ``exp``'s run (its files) and its policies' runs, unless the same
        replays were logged before; return the run's id. Against a server, the experiment's
        logging and each policy run have a total deadline
        (:func:`sia.pipelines.tracking.deadline`)."""
        import mlflow
        from sia.pipelines.tracking import deadline

        marker = self.out_dir / exp.exp_id / "mlflow.json"
        if marker.exists():
            saved = json.loads(marker.read_text())
            if saved.get("key") == run_key and saved.get("tracking_uri") == self.uri:
                return saved["run_id"]
        d = exp.to_dict()
        exp_params = {"exp.id": exp.exp_id, "exp.group": exp.group, "exp.seed": str(exp.seed),
                      "exp.pools": ",".join(d["pools"]),
                      "exp.quota_gpus": ",".join(str(q) for q in d["quota_gpus"]),
                      "exp.target_load": ",".join("-" if x is None else f"{x:.3f}"
                                                  for x in d["target_load"])}
        params = {**self.cfg.to_params(), **exp_params}
        with deadline(f"logging {exp.exp_id}'s runs", self.uri, uploads=True), \
                mlflow.start_run(run_name=self._run_name(exp.exp_id), nested=True,
                                 tags=self._child_tags(**{"sia.kind": "experiment",
                                                          "sia.group": exp.group})) as run:
            mlflow.log_params({k: v[:500] for k, v in params.items()})
            mlflow.log_dict(summaries, "summary.json")
            mlflow.log_dict(d, "experiment.json")
            for f in files:
                mlflow.log_artifact(str(f), artifact_path="plots")
            mlflow.log_artifact(str(per_job), artifact_path="results")
            for label, s in summaries.items():
                cells = s.get("cells") or {}
                log_policy_run(self._run_name(exp.exp_id, label),
                               {**self._shared_params(), **exp_params,
                                **self._policy_params(label)},
                               policy_metrics(s, cells.get("policy"), cells.get("baseline")),
                               self._child_tags(**{"sia.kind": "policy", "sia.group": exp.group,
                                                   "sia.exp": exp.exp_id, "sia.policy": label}))
            run_id = run.info.run_id
        atomic_write_text(marker, json.dumps({"run_id": run_id, "key": run_key,
                                               "tracking_uri": self.uri}))
        return run_id

    def finish(self, aggregate: pl.DataFrame, files: list[Path]) -> None:
        """Log one run per (group, policy) of the aggregate, and the sweep's files on the
        sweep's run (each under a deadline against a server)."""
        import mlflow
        from sia.pipelines.tracking import deadline

        params = self._shared_params()
        for row in aggregate.iter_rows(named=True):
            metrics = policy_metrics(row)
            for m in ("capture_mean", "capture_geomean"):
                if row.get(m) is not None and math.isfinite(float(row[m])):
                    metrics[detail_name("capture/" + m.removeprefix("capture_"))] = float(row[m])
            log_policy_run(self._run_name(row["group"], row["policy"], "(all experiments)"),
                           {**params, **self._policy_params(row["policy"]),
                            "exp.group": row["group"], "experiments": str(row["experiments"])},
                           dict(sorted(metrics.items())),
                           self._child_tags(**{"sia.kind": "aggregate", "sia.group": row["group"],
                                               "sia.policy": row["policy"]}))
        with deadline("uploading the sweep's files", self.uri, uploads=True):
            for f in files:
                mlflow.log_artifact(str(f),
                                    artifact_path="plots" if f.suffix == ".png" else "summary")

    def close(self) -> None:
        """:meth:`_close_body` with a total deadline against a server
        (:func:`sia.pipelines.tracking.deadline`)."""
        from sia.pipelines.tracking import deadline

        with deadline("logging the sweep's runs", self.uri):
            return self._close_body()

    def _close_body(self) -> None:
        import mlflow

        if self._parent is not None:
            mlflow.end_run()
            self._parent = None
