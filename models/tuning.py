"""Optuna search over XGBoost's hyperparameters for WillJobsArrive (one study per window).

The objective is measured on the validation period: the F-score at the
model's threshold (``objective="f1"``), or the recall at the largest
threshold whose precision is at least ``precision_floor``
(``objective="recall_at_precision"``). Each trial is logged as a nested
MLflow run when an MLflow run is active. Studies live in an SQLite file
(``storage``) under a fixed name, so an interrupted search resumes where it
stopped: only the trials still missing out of ``n_trials`` are run.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import optuna
import polars as pl
from sia.data.errors import ConfigError
from sia.models.will_arrive import (
    LABEL,
    XGBParams,
    binary_metrics,
    feature_matrix,
    fit_classifier,
    positive_proba,
)
from sklearn.metrics import precision_recall_curve

OBJECTIVES = ("f1", "recall_at_precision")


def recall_at_precision(y_true: np.ndarray, proba: np.ndarray, floor: float) -> float:
    """Return the best recall over thresholds whose precision is >= ``floor`` (0 if none)."""
    if np.sum(y_true) == 0:
        return 0.0
    precision, recall, _ = precision_recall_curve(y_true, proba)
    ok = precision >= floor
    return float(recall[ok].max()) if ok.any() else 0.0


def suggest_params(trial: optuna.Trial, base: XGBParams) -> XGBParams:
    """Return ``base`` with the searched hyperparameters drawn from ``trial``."""
    return replace(
        base,
        n_estimators=trial.suggest_int("n_estimators", 20, 300, log=True),
        max_depth=trial.suggest_int("max_depth", 2, 10),
        learning_rate=trial.suggest_float("learning_rate", 0.01, 0.5, log=True),
        min_child_weight=trial.suggest_float("min_child_weight", 0.5, 20.0, log=True),
        subsample=trial.suggest_float("subsample", 0.5, 1.0),
        colsample_bytree=trial.suggest_float("colsample_bytree", 0.5, 1.0),
        reg_lambda=trial.suggest_float("reg_lambda", 1e-3, 10.0, log=True),
    )


def tune_window(
    train: pl.DataFrame,
    val: pl.DataFrame,
    k_min: int,
    feature_columns: list[str],
    base: XGBParams,
    *,
    n_trials: int,
    storage: str,
    study_name: str,
    objective: str = "f1",
    precision_floor: float = 0.5,
    threshold: float = 0.5,
    log_trials: bool = True,
) -> tuple[XGBParams, optuna.Study]:
    """Run (or resume) the study for one window; return (best params, study).

    ``storage`` is an Optuna storage URL (``sqlite:///...``). Trials already
    complete in the stored study count towards ``n_trials``.
    """
    if objective not in OBJECTIVES:
        raise ConfigError(f"--tune-objective must be one of {OBJECTIVES}, not {objective!r}")
    if n_trials < 1:
        raise ConfigError(f"--tune must be >= 1 trials, not {n_trials}")
    x_tr = feature_matrix(train, feature_columns)
    y_tr = train[LABEL].to_numpy()
    x_va = feature_matrix(val, feature_columns)
    y_va = val[LABEL].to_numpy()
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=study_name, storage=storage, direction="maximize", load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=base.seed),
    )

    def run_trial(trial: optuna.Trial) -> float:
        params = suggest_params(trial, base)
        proba = positive_proba(fit_classifier(x_tr, y_tr, params), x_va)
        m = binary_metrics(y_va, proba >= threshold)
        value = m["f1"] if objective == "f1" else recall_at_precision(y_va, proba, precision_floor)
        if log_trials:
            import mlflow

            if mlflow.active_run() is not None:
                with mlflow.start_run(run_name=f"trial {trial.number} ({k_min}m)", nested=True):
                    mlflow.log_params({"k_min": k_min, **trial.params})
                    mlflow.log_metrics({"objective": value, **{f"val_{k}": float(v)
                                                               for k, v in m.items()}})
        return value

    done = sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    remaining = max(n_trials - done, 0)
    if remaining:
        study.optimize(run_trial, n_trials=remaining)
    return suggest_params(optuna.trial.FixedTrial(study.best_params), base), study
