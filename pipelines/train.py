"""The training stage: workload -> FCFS schedule -> Table 9 features -> predictors -> report -> MLflow.

:func:`train_predictors` is pure (no MLflow): it fits and evaluates
WillJobsArrive (with the baselines and, when asked, the ablation), NewLoadEstimate (the
sliding max, the calibrated estimate and the quantile model) and JobDuration on an explicit time
split and returns a :class:`TrainResult`. :func:`log_training` records a
result as one MLflow run of the ``sia-predictors`` experiment (or the one
asked for) and registers the models; :func:`run_training` does both for a
workload. Runs are named by trace, split and time, tagged (trace, split,
alias, package version, git commit), and their metrics grouped by prefix
(:func:`training_metrics`).
"""

from __future__ import annotations

import hashlib
import json
import re
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.data.windows import limit_certain
from sia.features.duration_history import point_in_time_history
from sia.features.table9 import FEATURE_COLUMNS as FEATURE_COLUMNS_ALL
from sia.features.table9 import FEATURE_GROUPS, TABLE9_GROUPS, build_features, window_features
from sia.models import job_duration, new_load, report, will_arrive
from sia.models.split import DAY_S, TimeSplit, choose_split, split_by_window, split_features
from sia.models.will_arrive import WindowResult, XGBParams
from sia.pipelines import inputs

if TYPE_CHECKING:
    from sia.pipelines.tracking import StoreSetup

DEFAULT_WINDOWS_MIN: tuple[int, ...] = (5, 60, 720)


@dataclass
class TrainConfig:
    """Everything a training run depends on (all recorded as MLflow params)."""

    train_days: float = 21.0
    val_days: float = 14.0
    warmup_days: float = 3.0
    start_day: float | None = None
    windows_min: tuple[int, ...] = DEFAULT_WINDOWS_MIN
    grid_s: float = 300.0
    #: WillJobsArrive's threshold: a rule of will_arrive.THRESHOLD_RULES ("half_f": half
    #: the best F on the training tail; "tail": the F-maximizing one there) or a probability
    threshold: float | str = "half_f"
    #: when set, the largest threshold reaching this recall on the training tail
    target_recall: float | None = None
    #: WillJobsArrive model selection: "auto" (xgboost, persistence, always-yes on the tail)
    will_arrive_select: str = "auto"
    #: WillJobsArrive's feature set: every feature (False), or the cumulative Table 9 set
    #: (+ rhythm) best on the training tail (True). Default False, chosen on Philly's training
    #: weeks only: walking forward inside them (days 30-44, retrain every 2 days on the last
    #: 14) every feature gave F .757 / .687 / .838 at 5 / 60 / 720 min against .754 / .676 /
    #: .839 for the selected set (same threshold rule), with a fifth of the fits
    select_features: bool = False
    #: WillJobsArrive's feature-set ablation (SIA Tables 10 / 20): four more fits per window for
    #: a report table only (the registered model does not use them), so off by default (on, it
    #: was about a quarter of ``sia train``'s whole command on Philly); ``--ablation`` turns it on
    ablation: bool = False
    load_windows: int = 3
    load_alpha: float = 0.1
    #: NewLoadEstimate registered: "sliding_max", "calibrated", "quantile" or "auto" (the least
    #: over-reservation within alpha + 0.02 exceedance on the last 20% of the training period,
    #: see new_load.choose_method). All three are reported either way.
    load_method: str = "calibrated"
    history_min_count: int = 3
    duration_fallback_bin: int = job_duration.N_BINS - 1
    #: JobDuration bins this quantile of the similar jobs' durations (0.5: the paper's median).
    duration_quantile: float = job_duration.DEFAULT_QUANTILE
    #: When set, the smallest quantile whose training under-prediction rate is <= this
    #: (``job_duration.calibrate_quantile``) replaces ``duration_quantile``.
    duration_target_under: float | None = None
    #: JobDuration: "history_cdf" (the rule's similar jobs' point-in-time distribution, with
    #: SIA's risk-aware lending at ``duration_lend_risk``), "history" (the paper's rule: the
    #: median's bin), "auto" (the learned model only where it beats the rule on held-out
    #: training days, see job_duration.select_job_duration) or "xgboost". Chosen on training
    #: data, by the product's promise (the most speedup that slows no job; README, "JobDuration
    #: defaults"): Philly, predictors fit on days 23-37, SIA replayed on days 26-33, 30-37 and
    #: 37-44 (inside the default training period; quotas from load, seed 0).
    duration_method: str = "history_cdf"
    #: history_cdf: SIA lends a job in window w when P(duration <= w) >= 1 - eps, with one eps
    #: per duration-bin edge (5 / 60 / 720 min). The last is small because an overrun of the
    #: last window is unbounded: a job of days lent "for 12 h" holds the spare GPUs for days,
    #: and nothing else is lent on them. On the three replays above, geometric mean of the
    #: geomean speedups, no job slowed in any: 22.8 at (0.3, 0.3, 0.3), the previous default;
    #: 28.6 at (0.3, 0.3, 0.05); 30.8 at (0.2, 0.2, 0.05); 32.7 at (0.2, 0.2, 0.05) with the
    #: recent shares below.
    duration_lend_risk: tuple[float, ...] = (0.2, 0.2, 0.05)
    #: history_cdf: weight of the shares over the similar jobs' last RECENT_JOBS finished ones
    #: (features.duration_features) against the shares over all of them (1 = recent only).
    duration_recent: float = 1.0
    #: JobDuration: the scheduler caps P(duration <= edge) by the share of the similar jobs'
    #: last 50 *started* ones known to fit (finished within it; those still running count
    #: once they have run past it): the finished jobs alone miss a run of long jobs in flight
    #: (models.started_history). Chosen on Philly's training days 23-44: 26% / 61% / 43% fewer
    #: GPU-hours of lent jobs overrunning 5 / 60 / 720 min for 4% / 3.5% / 1.2% fewer lent
    #: within them; on five training-week replays (predictors fit on days 23-37) no job slowed
    #: either way, jobs lent that ran past 12 h 140 -> 117, geometric-mean speedups 0.1-3.8%
    #: lower (README, JobDuration).
    duration_started_cap: bool = True
    #: JobDuration: when a learned model over the submission features (time-limit columns
    #: included) competes with ``duration_method``'s rule, chosen on the training tail by
    #: job_duration.select_job_duration (lends more, overruns no more often in any window):
    #: "limits" (only on a trace with time limits: a trace without them trains exactly as
    #: before, where the rule was measured and chosen, README "JobDuration defaults"),
    #: "always" or "never". Only with duration_method history_cdf or history. Measured on
    #: Graham (train days 3-24; the choice on its last 20%, days 19.8-24): the learned model
    #: lent more at 12 h there (58% against the rule's 29% at eps .05, no overrun) but ranked
    #: 5 / 60 min at AUC .53 / .55 against the rule's .85 / .77 (Brier .13 / .31 against
    #: .10 / .14), so the rule stayed.
    duration_learned: str = "limits"
    #: Threads that fit the models (0: one per CPU core; 1: one after the other). The models
    #: do not depend on it: each fit is deterministic on its own.
    threads: int = 0
    #: WillJobsArrive: at most this many rows per booster fit (None: every row); above it a
    #: fit keeps every arrival row and a weighted sample of the others (will_arrive.fit_sample).
    max_fit_rows: int | None = will_arrive.MAX_FIT_ROWS
    xgb: XGBParams = field(default_factory=XGBParams)
    #: WillJobsArrive's feature groups (sia.features.table9.FEATURE_GROUPS names)
    feature_groups: tuple[str, ...] = TABLE9_GROUPS
    #: WillJobsArrive also reads the jobs held in the pool's queue (the "held" group: known,
    #: not yet eligible; the trace's hold_time) when the trace records some (:meth:`groups`);
    #: a trace without holds trains exactly as before.
    held_features: bool = True

    @classmethod
    def paper(cls, **overrides: Any) -> TrainConfig:
        """Return the SIA paper's recipe (the product's defaults before they were measured).

        WillJobsArrive: the Table 9 features only, XGBoost's default
        hyperparameters (100 trees of depth 6, eta 0.3, unconstrained), classes reweighted
        negatives / positives, threshold 0.5, no model selection (always the
        classifier); NewLoadEstimate: the sliding max; JobDuration: the
        history median. For comparisons (``sia train --recipe paper``).
        """
        kw: dict[str, Any] = dict(
            threshold=0.5, will_arrive_select="xgboost", select_features=False,
            load_method="sliding_max",
            duration_method="history", duration_learned="never",
            feature_groups=("periodic", "recent_arrivals", "recent_completions",
                            "future_completions"), held_features=False,
            xgb=XGBParams(max_depth=6, learning_rate=0.3, class_weight="balanced",
                          monotone=False))
        kw.update(overrides)
        return cls(**kw)

    def groups(self, holds: bool = False) -> dict[str, list[str]]:
        """Return the WillJobsArrive feature groups in use, by name (ConfigError on an unknown
        one): ``feature_groups``, and "held" with ``held_features`` when the trace records held
        jobs (``holds``: :func:`records_holds`)."""
        unknown = [g for g in self.feature_groups if g not in FEATURE_GROUPS]
        if unknown or not self.feature_groups:
            raise ConfigError(f"feature groups must be some of {list(FEATURE_GROUPS)}, not "
                              f"{list(self.feature_groups)}")
        names = list(self.feature_groups)
        if holds and self.held_features and "held" not in names:
            names.append("held")
        return {g: FEATURE_GROUPS[g] for g in names}

    def to_params(self) -> dict[str, Any]:
        """Return the config as flat MLflow parameters."""
        d = {k: v for k, v in asdict(self).items()
             if k not in ("xgb", "feature_groups", "threads")}
        d["windows_min"] = ",".join(str(k) for k in self.windows_min)
        d["duration_lend_risk"] = ",".join(f"{e:g}" for e in self.duration_lend_risk)
        d["feature_set"] = ",".join(self.feature_groups)
        d.update(self.xgb.to_params())
        return d


def max_fit_rows_override(value: int | None, where: str) -> dict[str, int | None]:
    """Return the TrainConfig override of a user's ``max_fit_rows`` setting (``sia train
    --max-fit-rows``, ``predictors.max_fit_rows``): none when unset (the product's default),
    ``None`` (every row) for 0, else the cap; ConfigError naming ``where`` for a negative value
    or 1."""
    if value is None:
        return {}
    if value < 0 or value == 1:
        raise ConfigError(f"{where} must be 0 (every row) or at least 2, not {value}")
    return {"max_fit_rows": value or None}


@dataclass
class TrainResult:
    """What one training produced: the split, per-window results, the report tables, timings."""

    split: TimeSplit
    windows: list[WindowResult]
    loads: list[new_load.LoadResult]
    duration: dict[str, Any]
    tables: dict[str, pl.DataFrame]
    timings_s: dict[str, float]
    config: TrainConfig
    #: the JobDuration to register (learned, or the paper's rule)
    duration_model: Any = None

    def duration_config(self) -> dict[str, Any]:
        """Return the JobDuration rule as registered (``min_count``, ``fallback_bin``, ``quantile``)."""
        return {"min_count": self.config.history_min_count,
                "fallback_bin": self.config.duration_fallback_bin,
                "quantile": float(self.duration["quantile"])}


def train_predictors(schedule: pl.DataFrame, config: TrainConfig,
                     features: pl.DataFrame | None = None,
                     xgb_by_window: dict[int, XGBParams] | None = None,
                     held_after: pl.DataFrame | None = None) -> TrainResult:
    """Fit and evaluate the three predictors on ``schedule`` (a job table with start/end times).

    ``features`` defaults to :func:`build_features` of the schedule (with ``held_after``: the
    jobs held across the schedule's end, :func:`~sia.features.table9.held_across`);
    ``xgb_by_window`` overrides ``config.xgb`` per window (tuned values).
    Returns the per-window models and metrics on the validation period.
    """
    timings: dict[str, float] = {}
    clock = time.perf_counter()
    windows = tuple(sorted({int(k) for k in config.windows_min}))
    if not windows or min(windows) <= 0:
        raise ConfigError(f"--windows must be positive minutes, not {config.windows_min}")
    split = choose_split(schedule["submit_time"].to_numpy(), train_days=config.train_days,
                         val_days=config.val_days, warmup_days=config.warmup_days,
                         start_day=config.start_day)
    history = point_in_time_history(schedule, min_count=config.history_min_count)
    if features is None:  # built here one window at a time: only the split rows are held
        rows = {k: split_features(table, split) for k, table in window_features(
            schedule, grid_s=config.grid_s, windows_min=windows, expected_duration=history,
            held_after=held_after)}
    else:
        rows = split_by_window(features, split, windows)
    timings["features_s"] = time.perf_counter() - clock
    groups = config.groups(holds=records_holds(schedule))

    def arrive(k: int) -> WindowResult:
        tr, va = rows[k]
        return will_arrive.train_window(
            tr, va, k, groups, (xgb_by_window or {}).get(k, config.xgb),
            threshold=config.threshold,
            target_recall=config.target_recall, select=config.will_arrive_select,
            select_features=config.select_features, ablation=config.ablation,
            max_fit_rows=config.max_fit_rows)

    def load(k: int) -> new_load.LoadResult:
        tr, va = rows[k]
        return new_load.evaluate_window(schedule, tr, va, k, n_windows=config.load_windows,
                                        alpha=config.load_alpha, method=config.load_method,
                                        seed=config.xgb.seed)

    def duration() -> tuple[dict[str, Any], Any, dict[str, pl.DataFrame], float]:
        dur = evaluate_duration(schedule, history, split, config)
        start = time.perf_counter()
        model, tables = fit_job_duration(schedule, split, config, quantile=float(dur["quantile"]))
        return dur, model, tables, time.perf_counter() - start

    clock = time.perf_counter()
    # the longest fits start first (NewLoadEstimate's quantile boosters grow with the window:
    # most long windows see arrivals), so no long one is left for the end on its own;
    # JobDuration, mostly Python, overlaps the XGBoost fits (which release the GIL)
    n = len(windows)
    order = ([1 + n + i for i in reversed(range(n))] + [0]
             + [1 + i for i in reversed(range(n))])
    done = _run_tasks([duration] + [lambda k=k: arrive(k) for k in windows]
                      + [lambda k=k: load(k) for k in windows], config.threads, order=order)
    dur, dur_model, dur_tables, timings["duration_fit_s"] = done[0]
    results, loads = done[1:1 + len(windows)], done[1 + len(windows):]
    timings["fit_s"] = time.perf_counter() - clock
    dur["selected"] = dur_model.method
    risk = dur_model.lend_risk_
    dur["lend_risk"] = ("-" if risk is None else
                        "/".join(f"{e:g}" for e in job_duration.lend_risk_at_edges(risk)))
    tables = {
        "will_arrive": report.will_arrive_table(results),
        **({"ablation": report.ablation_table(results)} if config.ablation else {}),
        "new_load": report.new_load_table(loads),
        "new_load_holdout": report.new_load_table(loads, holdout=True),
        "job_duration": report.job_duration_table(dur),
        **dur_tables,
    }
    # (the groups used: the run logs "held" in its feature_set when the trace had holds)
    used = replace(config, feature_groups=tuple(groups))
    return TrainResult(split, results, loads, dur, tables, timings, used, dur_model)


def records_holds(table: pl.DataFrame) -> bool:
    """Return True when a job table (its ``hold_time``) or a feature table (its ``held_jobs``)
    holds some job: WillJobsArrive then also reads the held jobs (TrainConfig.held_features)."""
    for column in ("hold_time", "held_jobs"):
        if column in table.columns and table.height:
            most = table[column].cast(pl.Float64).fill_nan(0.0).max()
            return most is not None and float(most) > 0.0
    return False


def training_threads(threads: int) -> int:
    """Return how many threads fit the predictors: ``threads``, or with 0 one per CPU core."""
    import os

    if threads < 0:
        raise ConfigError(f"threads must be >= 0 (0: one per CPU core), not {threads}")
    return threads or max(1, os.cpu_count() or 1)


def _run_tasks(tasks: list[Callable[[], Any]], threads: int,
               order: list[int] | None = None) -> list[Any]:
    """Return each task's result, in task order, run on ``training_threads(threads)`` threads.

    ``order``: the task indices in the order to start them (default: task
    order; it must be a permutation). Every model fit is deterministic on its
    own (one XGBoost thread, a fixed seed), so the results do not depend on
    the number of threads, the start order or which finishes first; with one
    thread the tasks run here, in task order.
    """
    order = list(range(len(tasks))) if order is None else list(order)
    if sorted(order) != list(range(len(tasks))):
        raise ValueError(f"order must be a permutation of the {len(tasks)} task indices, "
                         f"not {order}")
    n = min(training_threads(threads), len(tasks))
    if n <= 1:
        return [task() for task in tasks]
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(max_workers=n, thread_name_prefix="sia-train") as pool:
        futures = {i: pool.submit(tasks[i]) for i in order}
        return [futures[i].result() for i in range(len(tasks))]


def evaluate_duration(schedule: pl.DataFrame, history: pl.DataFrame, split: TimeSplit,
                      config: TrainConfig) -> dict[str, Any]:
    """Return JobDuration's validation metrics for the configured (or calibrated) quantile.

    ``history`` is the median history of ``schedule``. With
    ``config.duration_target_under`` the quantile is calibrated on the
    training period (``target_under``, ``target_met``). Adds the training
    period's under-prediction rate (``train_under_rate``) and, for a quantile
    other than 0.5, the median's validation accuracy and under-prediction
    rate beside it (``median_accuracy``, ``median_under_rate``).
    """
    try:
        q = job_duration.check_quantile(config.duration_quantile, "duration_quantile")
        calib = None
        if config.duration_target_under is not None:
            calib = job_duration.calibrate_quantile(
                schedule, split.train_start, split.train_end, config.duration_target_under,
                min_count=config.history_min_count, fallback_bin=config.duration_fallback_bin)
            q = calib["quantile"]
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    hist = history if q == 0.5 else point_in_time_history(
        schedule, min_count=config.history_min_count, quantile=q)
    kw = {"fallback_bin": config.duration_fallback_bin, "quantile": q}
    dur = job_duration.evaluate_history(schedule, hist, split.train_end, split.val_end, **kw)
    dur["train_under_rate"] = job_duration.evaluate_history(
        schedule, hist, split.train_start, split.train_end, **kw)["under_rate"]
    if calib is not None:
        dur["target_under"] = calib["target_under"]
        dur["target_met"] = bool(calib["met"])
    if q != 0.5:
        med = job_duration.evaluate_history(schedule, history, split.train_end, split.val_end,
                                            fallback_bin=config.duration_fallback_bin)
        dur["median_accuracy"] = med["accuracy"]
        dur["median_under_rate"] = med["under_rate"]
    return dur


def fit_job_duration(schedule: pl.DataFrame, split: TimeSplit, config: TrainConfig, *,
                     quantile: float = job_duration.DEFAULT_QUANTILE,
                     ) -> tuple[Any, dict[str, pl.DataFrame]]:
    """Return (the JobDuration to register, its report tables), chosen on the training period.

    Features are those known at submission
    (:func:`sia.features.duration_features.submission_features`) over the
    *zero-queue* schedule (each job ends at submit + duration): the history a
    sharing scheduler sees, whose queues are short, rather than FCFS's, whose
    long queues make the history days stale (on Philly the rule's validation
    accuracy is 0.61 with FCFS's history, 0.78 with this one). Tables:
    ``job_duration_selection`` (training hold-out: lendable share and overrun
    per window for the rule and the learned model at each eps) and
    ``job_duration_lending`` (validation: the same for the registered model,
    the rule and perfect durations); for ``history_cdf``, ``job_duration_levels``
    (training rows: the look-alike chains with and without the tag and user levels, by
    :func:`~sia.models.job_duration.choose_history_levels`).
    """
    from sia.data.windows import duration_bin_of
    from sia.features.duration_features import feature_names

    _check_duration_options(config)
    zq, tr, va, limits = _duration_periods(schedule, split)
    params = {"history_min_count": config.history_min_count,
              "fallback_bin": config.duration_fallback_bin,
              "history_quantile": quantile}
    if limits:
        params["limits"] = True
    columns = feature_names(limits)
    x_tr = tr.select(columns).to_numpy()
    y_tr = duration_bin_of(tr["duration"].to_numpy())
    t_tr = tr["submit_time"].to_numpy()
    model, sel, levels = _fit_duration_method(config, x_tr, y_tr, t_tr, params, quantile)
    model, sel, learned = _compete_with_learned(config, model, sel, x_tr, y_tr, t_tr, params)
    x_va = va.select(columns).to_numpy()
    y_va = duration_bin_of(va["duration"].to_numpy())
    rows, served = [], None
    if va.height:
        served = _served_cdf(model, x_va, zq, split)
        candidates = _lending_candidates(config, model, learned, served, (x_tr, y_tr),
                                         (va, x_va, y_va), zq, split, limits=limits)
        for name, cdf, e in candidates:
            m = job_duration.duration_metrics(y_va, np.sum(cdf < 0.5, axis=1))
            for r in job_duration.lending_table(cdf, y_va, e):
                rows.append({"predictor": name, **r, "accuracy": m["accuracy"],
                             "under_rate": m["under_rate"]})
    tables = {"job_duration_lending": pl.DataFrame(rows) if rows else pl.DataFrame(),
              "job_duration_reliability": pl.DataFrame(
                  job_duration.reliability_table(served, y_va) if va.height else [])}
    if sel:
        tables["job_duration_selection"] = pl.DataFrame(sel)
    if config.duration_method == "history_cdf":
        tables["job_duration_levels"] = pl.DataFrame(levels)
    return model, tables


def _check_duration_options(config: TrainConfig) -> None:
    """Raise ConfigError naming the option when ``duration_method`` or ``duration_learned``
    is not one of its values."""
    if config.duration_method not in ("auto", "xgboost", "history", "history_cdf"):
        raise ConfigError(f"--duration-method must be auto, xgboost, history or history_cdf, "
                          f"not {config.duration_method!r}")
    if config.duration_learned not in ("limits", "always", "never"):
        raise ConfigError(f"--duration-learned must be limits, always or never, not "
                          f"{config.duration_learned!r}")


def _duration_periods(schedule: pl.DataFrame, split: TimeSplit
                      ) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame, bool]:
    """Return (the zero-queue schedule, its training jobs' submission features, its validation
    jobs', whether the trace has time limits); the features carry the submit time, duration
    and, with limits, the time limit."""
    from sia.features.duration_features import has_limits, submission_features

    zq = schedule.with_columns(end_time=pl.col("submit_time") + pl.col("duration"))
    # the time-limit columns only when the trace has limits: without them nothing changes
    limits = has_limits(zq)
    feats = submission_features(zq, limits=limits).join(
        zq.select("job_id", "submit_time", "duration",
                  *(["time_limit"] if limits else [])), on="job_id")
    tr = feats.filter(pl.col("submit_time").is_between(split.train_start, split.train_end,
                                                       closed="left"))
    va = feats.filter(pl.col("submit_time").is_between(split.train_end, split.val_end,
                                                       closed="left"))
    return zq, tr, va, limits


def _fit_duration_method(config: TrainConfig, x_tr: np.ndarray, y_tr: np.ndarray,
                         t_tr: np.ndarray, params: dict[str, Any], quantile: float
                         ) -> tuple[Any, list[dict], list[dict] | None]:
    """Return (the model ``config.duration_method`` fits on the training rows, its selection
    rows, the look-alike levels' rows for ``history_cdf`` else None)."""
    recent = {"history_recent": float(config.duration_recent)}
    cap = {"started_cap": bool(config.duration_started_cap)}
    method = config.duration_method
    if method == "auto":
        model, sel = job_duration.select_job_duration(x_tr, y_tr, t_tr, **params, **cap)
        return model, sel, None
    if method == "xgboost":
        # forced: SIA lends by the learned median bin (lend_risk "auto" finds no eps)
        return job_duration.JobDuration("xgboost", **params, **cap).fit(
            x_tr, y_tr, time=t_tr), [], None
    if method == "history_cdf":
        chain, levels = job_duration.choose_history_levels(x_tr, y_tr, **params, **recent)
        model = job_duration.JobDuration("history_cdf", **params, **recent, **cap,
                                         **chain).fit(x_tr, y_tr)
        model.lend_risk_ = job_duration.lend_risk_at_edges(config.duration_lend_risk).tolist()
        return model, [], levels
    model = job_duration.JobDuration.rule(
        min_count=config.history_min_count, fallback_bin=config.duration_fallback_bin,
        quantile=quantile)
    if params.get("limits"):  # the same rule, bounded by the limits
        model = job_duration.JobDuration("history", **params).fit(x_tr, y_tr)
    return model, [], None


def _compete_with_learned(config: TrainConfig, model: Any, sel: list[dict], x_tr: np.ndarray,
                          y_tr: np.ndarray, t_tr: np.ndarray, params: dict[str, Any]
                          ) -> tuple[Any, list[dict], Any]:
    """Return (the model to register, its selection rows, the learned model or None).

    For the history methods, when ``duration_learned`` asks (``always``, or ``limits`` on a
    trace with limits), the learned model over the submission features competes with the
    history model on the training tail; when not chosen it is fitted all the same, at the
    baseline's eps, to be reported."""
    cap = {"started_cap": bool(config.duration_started_cap)}
    if config.duration_method not in ("history_cdf", "history") or not (
            config.duration_learned == "always" or (config.duration_learned == "limits"
                                                    and params.get("limits"))):
        return model, sel, None
    baseline = model
    model, sel = job_duration.select_job_duration(x_tr, y_tr, t_tr, baseline=baseline,
                                                  **params, **cap)
    learned = model
    if model is baseline:  # not chosen: reported all the same, at the baseline's eps
        learned = job_duration.JobDuration("xgboost", **params, **cap).fit(
            x_tr, y_tr, time=t_tr)
        learned.lend_risk_ = (baseline.lend_risk_ if baseline.lend_risk_ is not None
                              else 0.5)
    return model, sel, learned


def _lending_candidates(config: TrainConfig, model: Any, learned: Any, served: np.ndarray,
                        train: tuple[np.ndarray, np.ndarray],
                        val: tuple[pl.DataFrame, np.ndarray, np.ndarray],
                        zq: pl.DataFrame, split: TimeSplit, *, limits: bool
                        ) -> list[tuple[str, np.ndarray, Any]]:
    """Return the validation lending table's predictors as (name, P(duration <= window) per
    job, eps): the registered model as served, the learned one, the history rule, the
    pool-and-width rule (at 0.5 and the registered eps), the limit alone and perfect
    durations."""
    from sia.features.duration_features import DURATION_FEATURES

    x_tr, y_tr = train
    va, x_va, y_va = val
    base = x_va[:, :len(DURATION_FEATURES)]  # what the baselines read: no limits
    rule = job_duration.JobDuration.rule(min_count=config.history_min_count,
                                         fallback_bin=config.duration_fallback_bin)
    perfect = (y_va[:, None] <= np.arange(job_duration.N_BINS - 1)[None, :]).astype(float)
    eps = model.lend_risk_ if model.lend_risk_ is not None else 0.5
    # the pool-and-width baseline: the rule at the pool + GPU-count level (no tag, no user),
    # as the share of those look-alikes that fit each window (all their history): at eps
    # 0.5 it lends what their median lends (the paper's rule), at the registered eps
    # it lends as cautiously as the registered model
    pool_width = job_duration.JobDuration(
        "history_cdf", history_tag=False, history_user=False, history_recent=0.0,
        history_min_count=config.history_min_count,
        fallback_bin=config.duration_fallback_bin).fit(
            x_tr[:, :len(DURATION_FEATURES)], y_tr).predict_cdf(base)
    candidates = [("registered", served, eps)]
    if learned is not None:
        candidates.append(("learned+limits", _served_cdf(learned, x_va, zq, split),
                           learned.lend_risk_))
    candidates += [("history rule", rule.predict_cdf(base), 0.5),
                   ("pool+width", pool_width, 0.5),
                   ("pool+width@eps", pool_width, eps)]
    if limits:  # lendable iff the limit guarantees the window
        limit_s = va["time_limit"].cast(pl.Float64).fill_null(np.nan).to_numpy()
        candidates.append(("limit only", limit_certain(
            limit_s, job_duration.DURATION_BIN_EDGES_S).astype(float), 0.5))
    candidates.append(("perfect", perfect, 0.5))
    return candidates


def _served_cdf(model: Any, x_va: np.ndarray, zq: pl.DataFrame, split: TimeSplit) -> np.ndarray:
    """Return the validation jobs' P(duration <= 5 / 60 / 720 min) as the scheduler gets them
    from ``model``: capped by the started look-alikes' shares when the model says so
    (:mod:`sia.models.started_history`), each read at the job's submission in the zero-queue
    schedule the model was trained on, with the jobs before validation as its history."""
    from sia.data.windows import DURATION_BIN_EDGES_S
    from sia.models.started_history import cap_cdf, zero_queue_shares

    cdf = model.predict_cdf(x_va)
    if not getattr(model, "started_cap", False):
        return cdf
    fits = getattr(model, "limit_fits_", None)
    certain = None if fits is None else x_va[:, fits] == 1.0
    zq = zq.sort("submit_time", "job_id")
    before = zq.filter(pl.col("submit_time") < split.train_end)
    va = zq.filter(pl.col("submit_time").is_between(split.train_end, split.val_end,
                                                    closed="left"))
    cdf = cap_cdf(cdf, zero_queue_shares(va, before, DURATION_BIN_EDGES_S,
                                         use_tag=bool(getattr(model, "history_tag", True))))
    # the cap reads look-alikes: it never undoes what a job's own limit guarantees
    return cdf if certain is None else job_duration.limit_bound(cdf, certain)


def pr_curve_png(results: list[WindowResult], path: Path) -> Path:
    """Draw the validation precision-recall curve of each window's model to ``path`` (PNG):
    :func:`pr_curve_figure`."""
    import matplotlib.pyplot as plt
    from sia.pipelines.output import save_figure

    fig = pr_curve_figure(results)
    save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def pr_curve_figure(results: list[WindowResult]) -> Any:
    """Return the matplotlib figure of the validation precision-recall curve of each window.

    Each window has one colour: its curve, its operating point (a filled circle at the chosen
    threshold) and persistence's point (an x), the points named in the legend with their
    precision and recall.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from sklearn.metrics import precision_recall_curve

    fig, ax = plt.subplots(figsize=(9.6, 4.8))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    drawn = 0
    for i, r in enumerate(results):
        if r.val_true is None or r.val_true.sum() == 0:
            continue
        colour = colours[i % len(colours)]
        p, rc, _ = precision_recall_curve(r.val_true, r.val_proba)
        method = getattr(r.model, "method_", "xgboost")
        # "either" scores persistence's yes rows 1: its curve is the registered predictor's
        ax.plot(rc, p, color=colour,
                label=f"{r.k_min} min" + ("" if method == "xgboost" else f" ({method})"))
        mp, mr = r.metrics["precision"], r.metrics["recall"]
        ax.scatter([mr], [mp], marker="o", color=colour, edgecolors="black", zorder=3,
                   label=f"{r.k_min} min operating point (P {mp:.2f}, R {mr:.2f})")
        per = r.baselines["persistence"]
        ax.scatter([per["recall"]], [per["precision"]], marker="x", color=colour, s=60,
                   linewidths=2, zorder=3,
                   label=f"{r.k_min} min persistence (P {per['precision']:.2f}, "
                         f"R {per['recall']:.2f})")
        drawn += 1
    ax.set_xlabel("recall")
    ax.set_ylabel("precision")
    ax.set_xlim(0, 1.02)
    ax.set_ylim(0, 1.02)
    ax.set_title("WillJobsArrive on validation\n(o = operating point, x = persistence)")
    if drawn:  # beside the axes: inside, it hid the points near (0, 0)
        ax.legend(fontsize="small", loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    return fig


@dataclass
class LoggedRun:
    """The MLflow run a training was logged to and the registered versions."""

    run_id: str
    versions: dict[str, str]


def log_training(result: TrainResult, *, trace: str, alias: str | None = "champion",
                 extra_params: dict[str, Any] | None = None, register: bool = True,
                 nested: bool = False) -> LoggedRun:
    """Log ``result`` as one MLflow run (params, metrics per window, tables, plots, models).

    The tracking store must already be set (see :mod:`sia.pipelines.tracking`).
    With ``register`` every model is registered and ``alias`` points at it.
    """
    import mlflow

    with mlflow.start_run(run_name=run_name(trace, result.split), nested=nested,
                          tags=run_tags(trace, result.split, alias)) as run:
        versions = log_into_active_run(result, trace=trace, alias=alias,
                                       extra_params=extra_params, register=register)
        return LoggedRun(run.info.run_id, versions)


def _short_trace(trace: str) -> str:
    return trace if ":" in trace and not Path(trace).exists() else Path(trace).name


def split_text(split: TimeSplit) -> str:
    """Return the split as days since the trace start, e.g. ``train 23-44 d, validate 44-58 d``."""
    a, b, c = (x / DAY_S for x in (split.train_start, split.train_end, split.val_end))
    return f"train {a:g}-{b:g} d, validate {b:g}-{c:g} d"


def run_name(trace: str, split: TimeSplit, tuned: bool = False) -> str:
    """Return a run name that tells trainings apart: split (days), trace and UTC time.

    The split comes first: MLflow's runs table cuts names after about 25
    characters, and trainings of one trace differ by their split.
    """
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S")
    a, b, c = (x / DAY_S for x in (split.train_start, split.train_end, split.val_end))
    return (f"{'tune+' if tuned else ''}train {a:g}-{b:g} val {b:g}-{c:g} d | "
            f"{_short_trace(trace)} | {when}")


def run_tags(trace: str, split: TimeSplit, alias: str | None) -> dict[str, str]:
    """Return the tags of a training run: trace (as given, and ``trace_id``: resolved, see
    :func:`sia.data.paths.trace_identity`), split, alias, package version, git commit."""
    from sia.data.paths import trace_identity
    from sia.pipelines.tracking import git_commit, package_version

    tags = {"trace": trace, "trace_id": trace_identity(trace), "split": split_text(split),
            "alias": alias or "(none)", "sia_version": package_version()}
    commit = git_commit()
    if commit:
        tags["git_commit"] = commit
        tags["mlflow.source.git.commit"] = commit.removesuffix("-dirty")
    return tags


def split_params(split: TimeSplit) -> dict[str, float | str]:
    """Return the split as MLflow parameters in days since the trace start."""
    return {"split_train_start_day": round(split.train_start / DAY_S, 4),
            "split_train_end_day": round(split.train_end / DAY_S, 4),
            "split_val_end_day": round(split.val_end / DAY_S, 4),
            "split_active_start_day": round(split.active_start / DAY_S, 4),
            "split_train_days": round(split.train_days, 4),
            "split_val_days": round(split.val_days, 4),
            "split_how": split.how}


def training_metrics(result: TrainResult) -> dict[str, float]:
    """Return the run's metrics, named so MLflow's UI groups them by their prefix.

    ``will_arrive/<k>m/<metric>`` (and ``/threshold``), its baselines under their own
    prefix ``will_arrive_baseline/<name>/<k>m/<metric>`` (sorted after the model's),
    ``new_load/<k>m/[holdout/]<estimate>/<metric>``,
    ``job_duration/<metric>``, ``job_duration/lending/<predictor>/<k>m/<metric>`` (the validation
    lending table: lendable share, overrun rate, AUC, eps) and ``time/<stage>_s``. Non-finite
    values are left out.
    """
    metrics: dict[str, float] = {}
    for r in result.windows:
        for name, value in r.metrics.items():
            metrics[f"will_arrive/{r.k_min}m/{name}"] = float(value)
        metrics[f"will_arrive/{r.k_min}m/threshold"] = float(r.threshold)
        for base, m in r.baselines.items():
            for name in ("precision", "recall", "f1"):
                metrics[f"will_arrive_baseline/{base}/{r.k_min}m/{name}"] = float(m[name])
    for lr in result.loads:
        for part, table in (("", lr.validation), ("holdout/", lr.holdout)):
            for est, m in table.items():
                for name, value in m.items():
                    metrics[f"new_load/{lr.k_min}m/{part}{est}/{name}"] = float(value)
    for name, value in result.duration.items():
        if isinstance(value, int | float):
            metrics[f"job_duration/{name}"] = float(value)
    lending = result.tables.get("job_duration_lending")
    if lending is not None and lending.height:
        for r in lending.iter_rows(named=True):
            who = re.sub(r"\W", "_", str(r["predictor"]).replace("@", "_at_"))
            for name in ("lendable", "overrun", "auc", "eps"):
                metrics[f"job_duration/lending/{who}/{r['window_min']}m/{name}"] = float(r[name])
    metrics.update({f"time/{k}": v for k, v in result.timings_s.items()})
    return {k: v for k, v in metrics.items() if np.isfinite(v)}


def log_into_active_run(result: TrainResult, *, trace: str, alias: str | None = "champion",
                        extra_params: dict[str, Any] | None = None,
                        register: bool = True) -> dict[str, str]:
    """Log ``result`` into the active MLflow run; return the registered versions by name.

    One call per kind: the parameters, the metrics, the report and plots (one
    folder), the models (one folder, :func:`sia.models.registry.log_predictors`).
    """
    import mlflow
    from sia.models import registry

    params = {"trace": trace, **result.config.to_params(), **split_params(result.split)}
    params.update({f"new_load_{lr.k_min}m_registered_method": lr.method for lr in result.loads})
    params.update(extra_params or {})
    mlflow.log_params({k: ("" if v is None else v) for k, v in params.items()})
    mlflow.log_metrics(training_metrics(result))
    with tempfile.TemporaryDirectory() as tmp:
        tmpdir = Path(tmp)
        report.save_report(result.tables, tmpdir / "report")
        imp = {str(r.k_min): will_arrive.feature_importance(r) for r in result.windows}
        (tmpdir / "feature_importance.json").write_text(json.dumps(imp, indent=2))
        pr_curve_png(result.windows, tmpdir / "precision_recall.png")
        (tmpdir / "confusion_matrix.json").write_text(json.dumps(result.duration["confusion"]))
        (tmpdir / "split.json").write_text(json.dumps(result.split.to_params(), indent=2))
        mlflow.log_artifacts(str(tmpdir))
    if not register:
        return {}
    import pandas as pd

    example = pd.DataFrame(np.zeros((2, len(FEATURE_COLUMNS_ALL)), dtype=np.float32),
                           columns=FEATURE_COLUMNS_ALL)
    items = [registry.will_arrive_registration(r.model, example) for r in result.windows]
    items += [registry.new_load_registration(lr.estimator) for lr in result.loads]
    items.append(registry.job_duration_registration(result.duration_config(),
                                                    result.duration_model))
    from sia.pipelines.engine.predictors import trace_tags

    for item in items:  # every version says which trace it learned from (issue 36)
        item.tags = {**item.tags, **trace_tags(trace)}
    versions = registry.log_predictors(items, alias)
    mlflow.set_tag("mlflow.note.content",
                   f"Predictors trained on {trace} ({split_text(result.split)}); registered "
                   + (f"under alias {alias!r}: " if alias else "without an alias: ")
                   + ", ".join(f"{n} v{v}" for n, v in versions.items()))
    return versions


@dataclass
class TrainingOutcome:
    """What :func:`run_training` produced: the result, the MLflow run, where the report went."""

    result: TrainResult
    run_id: str
    versions: dict[str, str]
    report_dir: Path
    tracking_uri: str
    best_params: dict[int, dict[str, Any]] = field(default_factory=dict)


def run_training(jobs: pl.DataFrame, pools: pl.DataFrame, config: TrainConfig, *, trace: str,
                 out_dir: Path, tune: int = 0, tune_objective: str = "f1",
                 precision_floor: float = 0.5, alias: str | None = "champion",
                 study_prefix: str | None = None, experiment: str | None = None,
                 store: StoreSetup | None = None,
                 progress: Callable[[str], None] | None = None,
                 held_after: pl.DataFrame | None = None) -> TrainingOutcome:
    """Replay FCFS, build features, (optionally tune,) train, report and log one MLflow run.

    The report (CSV + Markdown) is written to ``out_dir``; with ``tune`` > 0
    every window gets an Optuna study of ``tune`` trials (stored in
    ``out_dir/optuna.db``, resumable; the study's name carries a hash of the
    split, features, windows, seed and objective, so a changed set-up starts
    a new study), whose trials are nested runs, and the best hyperparameters
    are the ones trained, logged (``tune/<k>m/<param>`` on the run) and
    registered. The MLflow store is opened in the background (``store``, or
    one made here for ``experiment``: :func:`sia.pipelines.tracking.experiment_name`)
    while the trace is replayed and the models fit. ``progress`` gets a line
    per stage. ``held_after``: the jobs cut off ``jobs`` that were held across its end (their
    queue knew them before it), counted in the held features (:func:`train_predictors`).
    """
    import mlflow
    from sia.pipelines.tracking import StoreSetup, experiment_name

    say = progress or (lambda _msg: None)
    store = store or StoreSetup(experiment=experiment_name(experiment))
    clock = time.perf_counter()
    say(f"replaying FCFS on {jobs.height:,} jobs in {pools.height} pools")
    schedule = inputs.fcfs_schedule(jobs, pools)
    replay_s = time.perf_counter() - clock
    windows = tuple(sorted({int(k) for k in config.windows_min}))
    out_dir.mkdir(parents=True, exist_ok=True)
    split = choose_split(schedule["submit_time"].to_numpy(), train_days=config.train_days,
                         val_days=config.val_days, warmup_days=config.warmup_days,
                         start_day=config.start_day)
    say(f"building features (windows {', '.join(f'{k} min' for k in windows)})")
    best: dict[int, XGBParams] = {}
    result = features = None
    if tune:  # the trials read the training rows; the last fit reuses the same table
        clock = time.perf_counter()
        features = build_features(
            schedule, grid_s=config.grid_s, windows_min=windows,
            expected_duration=point_in_time_history(schedule, min_count=config.history_min_count),
            held_after=held_after)
        features_s = time.perf_counter() - clock
    else:  # fit while the store opens; the run starts once there is something to log
        say(f"fitting the predictors ({split_text(split)})")
        result = train_predictors(schedule, config, held_after=held_after)  # features held once
        features_s = result.timings_s["features_s"]
    say("opening the MLflow store")
    uri = store.uri()
    step, limit = _deadlines(uri, tune)
    with limit:
        with step("starting the training run"):
            run = mlflow.start_run(run_name=run_name(trace, split, tuned=bool(tune)),
                                   tags=run_tags(trace, split, alias))
        status = "FAILED"
        try:
            if tune:
                best = _tune(features, split, config, windows, trace=trace, tune=tune,
                             objective=tune_objective, precision_floor=precision_floor,
                             out_dir=out_dir, study_prefix=study_prefix, say=say,
                             step=step, holds=records_holds(schedule))
                say(f"fitting the predictors with the tuned parameters ({split_text(split)})")
                result = train_predictors(schedule, config, features=features,
                                          xgb_by_window=best)
            result.timings_s["replay_s"] = replay_s
            result.timings_s["features_s"] = features_s
            say("logging the run and registering the models")
            with step("logging the training run", uploads=True):
                versions = _log_training_files(result, trace, alias, out_dir)
            run_id = run.info.run_id
            status = "FINISHED"
        finally:
            with step("closing the training run"):
                mlflow.end_run(status)
    return TrainingOutcome(result, run_id, versions, out_dir, uri,
                           {k: asdict(p) for k, p in best.items()})


def _deadlines(uri: str, tune: int) -> tuple[Callable[..., Any], Any]:
    """Return (step, whole): a server gets a total deadline for every MLflow step of a
    training, ``whole`` for the whole run without tuning; with it, ``step(what)`` for each step
    apart (Optuna's trials, in a local store, may take as long as they need)."""
    from contextlib import nullcontext

    from sia.pipelines.tracking import deadline

    def step(what: str, uploads: bool = False):
        return deadline(what, uri, uploads=uploads) if tune else nullcontext()

    whole = nullcontext() if tune else deadline("logging the training run", uri, uploads=True)
    return step, whole


def _log_training_files(result, trace: str, alias: str | None, out_dir: Path) -> dict:
    """Log ``result`` into the active run and register its models; write the report and the
    plots beside it (the reliability plot logged too); return the registered versions."""
    import mlflow

    versions = log_into_active_run(result, trace=trace, alias=alias)
    report.save_report(result.tables, out_dir)
    pr_curve_png(result.windows, out_dir / "precision_recall.png")  # beside the report
    reliability = result.tables.get("job_duration_reliability")
    if reliability is not None and reliability.height:
        from sia.pipelines.plots import reliability_png

        mlflow.log_artifact(str(reliability_png(
            reliability, out_dir / "job_duration_reliability.png")))
    return versions


def study_digest(split: TimeSplit, features: list[str], windows: tuple[int, ...], seed: int,
                 objective: str, precision_floor: float) -> str:
    """Return a short hash of what makes Optuna trials comparable (part of the study name)."""
    key = {"split": split.to_params(), "features": features, "windows": list(windows),
           "seed": seed, "objective": objective,
           "precision_floor": precision_floor if objective == "recall_at_precision" else None}
    return hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:10]


def _tune(features: pl.DataFrame, split: TimeSplit, config: TrainConfig,
          windows: tuple[int, ...], *, trace: str, tune: int, objective: str,
          precision_floor: float, out_dir: Path, study_prefix: str | None,
          say: Callable[[str], None], step: Callable[[str], Any] | None = None,
          holds: bool = False) -> dict[int, XGBParams]:
    """Run (or resume) one Optuna study per window in the active run; return the best params
    (``holds``: the schedule records held jobs, so the studies read the held group too).

    The best trial's parameters and objective are logged on the run
    (``tune/<k>m/<param>``, metric ``tune/<k>m/best_objective``), under ``step`` (the MLflow
    step's deadline; the trials themselves use a local Optuna store).
    """
    from contextlib import nullcontext

    import mlflow
    from sia.models.tuning import tune_window

    rows = split_by_window(features, split, windows)
    storage = f"sqlite:///{(out_dir / 'optuna.db').resolve()}"
    # the columns train_predictors fits on the same schedule (holds: records_holds of it)
    columns = [c for cols in config.groups(holds=holds).values() for c in cols]
    digest = study_digest(split, columns, windows, config.xgb.seed, objective, precision_floor)
    prefix = study_prefix or f"sia-{Path(trace).name}-{objective}"
    best: dict[int, XGBParams] = {}
    params: dict[str, Any] = {"tune_trials": tune, "tune_objective": objective,
                              "tune_storage": storage, "tune_study_hash": digest}
    metrics: dict[str, float] = {}
    for k in windows:
        best[k], study = tune_window(
            rows[k][0], k, columns, config.xgb, n_trials=tune,
            storage=storage, study_name=f"{prefix}-{k}m-{digest}", objective=objective,
            precision_floor=precision_floor, progress=say, max_fit_rows=config.max_fit_rows)
        params.update({f"tune/{k}m/{name}": v for name, v in study.best_params.items()})
        metrics[f"tune/{k}m/best_objective"] = float(study.best_value)
        metrics[f"tune/{k}m/best_trial"] = float(study.best_trial.number)
    with (step or (lambda what: nullcontext()))("logging the tuning results"):
        mlflow.log_params(params)
        mlflow.log_metrics(metrics)
    return best
