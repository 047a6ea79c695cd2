"""The walk-forward stage: workload -> FCFS schedule -> features -> :func:`sia.models.backtest.walk_forward` -> report, MLflow."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import polars as pl
from sia.features.duration_history import point_in_time_history
from sia.features.table9 import build_features
from sia.models import report
from sia.models.backtest import walk_forward
from sia.models.split import DAY_S, choose_split
from sia.models.will_arrive import WillJobsArrive, XGBParams, select_window_model
from sia.pipelines import inputs
from sia.pipelines.train import TrainConfig, records_holds


def run_backtest(wl: inputs.Workload, *, windows_min: tuple[int, ...], every_days: float,
                 train_days: float, from_day: float | None, to_day: float | None,
                 out_dir: Path, params: XGBParams | None = None,
                 threshold: float | str | None = None, select_features: bool | None = None,
                 select: str | None = None, monotone: bool | None = None,
                 echo: Callable[[str], Any] = print) -> dict[str, pl.DataFrame]:
    """Run the walk-forward backtest of every window; return its tables (``folds``, ``overall``).

    Each fold's model is chosen as ``sia train`` chooses it, with its defaults, or with
    ``threshold`` (a rule of ``will_arrive.THRESHOLD_RULES`` or a probability),
    ``select_features``, ``select`` (the candidate: auto or one forced) and
    ``monotone`` (the trees' monotone constraints) when given.

    Tables are saved under ``out_dir`` (CSV + Markdown) and logged as one
    MLflow run of the predictors experiment (per-fold F as metric steps,
    overall P/R/F per predictor).
    """
    from sia.pipelines.tracking import ui_command

    clock = time.perf_counter()
    schedule = inputs.fcfs_schedule(wl.jobs, wl.pools)
    history = point_in_time_history(schedule)
    features = build_features(schedule, windows_min=windows_min, expected_duration=history)
    if from_day is None:
        from_day = choose_split(schedule["submit_time"].to_numpy()).train_end / DAY_S
    last = float(schedule["submit_time"].max())
    end_s = last if to_day is None else min(to_day * DAY_S, last)
    echo(f"backtest: {wl.source}: test days {from_day:.1f}-{end_s / DAY_S:.1f}, retrain every "
         f"{every_days:g} days on the last {train_days:g} ({time.perf_counter() - clock:.1f} s "
         "to build the features)")
    base = params or XGBParams()
    if monotone is not None:
        base = replace(base, monotone=monotone)
    config = TrainConfig()  # what `sia train` does by default, or as asked
    if threshold is not None:
        config = replace(config, threshold=threshold)
    if select_features is not None:
        config = replace(config, select_features=select_features)
    if select is not None:
        config = replace(config, will_arrive_select=select)
    groups = config.groups(holds=records_holds(schedule))

    def fit_for(k: int) -> Callable[[pl.DataFrame], WillJobsArrive]:
        # what `sia train` registers: its feature set(s), threshold rule and model selection,
        # every choice on the fold's own training tail
        return lambda rows: select_window_model(
            rows, k, groups, base, select_features=config.select_features,
            threshold=config.threshold, target_recall=config.target_recall,
            select=config.will_arrive_select)[0]

    def progress(row: dict[str, Any]) -> None:
        if row["method"] == "skipped":
            echo(f"  {row['window_min']} min fold {row['fold']}: skipped (no rows or one class)")
        else:
            echo(f"  {row['window_min']} min fold {row['fold']} (days {row['start_day']:.1f}-"
                 f"{row['end_day']:.1f}): {row['method']}, F {row['model_f1']:.3f} vs "
                 f"persistence {row['persistence_f1']:.3f}")

    folds, overall = [], []
    for k in windows_min:
        f, o = walk_forward(features.filter(pl.col("k_min") == k), window_min=k,
                            start_s=from_day * DAY_S, end_s=end_s, every_s=every_days * DAY_S,
                            train_span_s=train_days * DAY_S, fit_model=fit_for(k),
                            on_fold=progress)
        folds += f
        overall += o
    tables = {"backtest_folds": pl.DataFrame(folds), "backtest_overall": pl.DataFrame(overall)}
    out_dir.mkdir(parents=True, exist_ok=True)
    written = report.save_report(tables, out_dir)
    report.print_report({"backtest_overall": tables["backtest_overall"]})
    uri = _log_run(wl.source, every_days, train_days, from_day, end_s, windows_min, config, base,
                   folds, overall, written)
    echo(f"report: {out_dir}")
    echo(f"open the MLflow UI: {ui_command(uri)}")
    return tables


def _log_run(source: str, every_days: float, train_days: float, from_day: float, end_s: float,
             windows_min: tuple[int, ...], config: TrainConfig, base: XGBParams,
             folds: list[dict[str, Any]], overall: list[dict[str, Any]],
             written: list[Path]) -> str:
    """Log the backtest as one MLflow run of the predictors experiment; return the store's URI."""
    import mlflow
    from sia.pipelines.tracking import PREDICTOR_EXPERIMENT, setup_tracking

    uri = setup_tracking(experiment=PREDICTOR_EXPERIMENT)
    with mlflow.start_run(run_name=f"backtest {Path(source).name} every {every_days:g}d"):
        mlflow.set_tags({"kind": "walk-forward backtest", "trace": source})
        mlflow.log_params({"trace": source, "retrain_every_days": every_days,
                           "train_days": train_days, "from_day": round(from_day, 4),
                           "to_day": round(end_s / DAY_S, 4),
                           "windows_min": ",".join(map(str, windows_min)),
                           "threshold": config.threshold,
                           "select_features": config.select_features,
                           "will_arrive_select": config.will_arrive_select,
                           **base.to_params()})
        for row in overall:
            for m in ("precision", "recall", "f1"):
                mlflow.log_metric(f"overall_{row['window_min']}m/{row['predictor']}_{m}", row[m])
        for row in folds:
            if row["method"] != "skipped":
                for name in ("model", "persistence"):
                    mlflow.log_metric(f"fold_{row['window_min']}m/{name}_f1",
                                      row[f"{name}_f1"], step=int(row["fold"]))
        # the files written, not the folder: --out may hold the MLflow store itself (sia's
        # default store is ./out), which logging the folder would copy into itself forever
        for path in written:
            mlflow.log_artifact(str(path), artifact_path="report")
    return uri
