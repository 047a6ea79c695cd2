"""Optuna search over XGBoost's hyperparameters for WillJobsArrive (one study per window).

The objective is measured on the *training* rows only, never on the
validation period that is reported: each trial fits the classifier on the
first part of the training span and scores it on its tail (the last
``tail_fraction``, as :class:`~sia.models.will_arrive.WillJobsArrive` does),
by the best F-score over thresholds (``objective="f1"``: the estimator then
picks its threshold on that tail too), or the recall at the largest
threshold whose precision is at least ``precision_floor``
(``objective="recall_at_precision"``). Each trial is logged as a nested
MLflow run when an MLflow run is active. Studies live in an SQLite file
(``storage``) under a fixed name, so an interrupted search resumes where it
stopped: only the trials still missing out of ``n_trials`` are run.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

import numpy as np
import optuna
import polars as pl
from sia.data.errors import ConfigError
from sia.models.will_arrive import (
    LABEL,
    XGBParams,
    best_f1_threshold,
    binary_metrics,
    estimator_for,
    feature_matrix,
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
    k_min: int,
    feature_columns: list[str],
    base: XGBParams,
    *,
    n_trials: int,
    storage: str,
    study_name: str,
    objective: str = "f1",
    precision_floor: float = 0.5,
    tail_fraction: float = 0.2,
    log_trials: bool = True,
    progress: Callable[[str], None] | None = None,
    max_fit_rows: int | None = None,
) -> tuple[XGBParams, optuna.Study]:
    """Run (or resume) the study for one window on training rows; return (best params, study).

    ``train`` holds the window's training rows (``t`` in s, the features,
    ``label_arrival``). ``storage`` is an Optuna storage URL
    (``sqlite:///...``). Trials already complete in the stored study count
    towards ``n_trials``; a study of the same name made on other rows is
    refused (its trials would not be comparable). With ``progress``, it gets
    the line "window K min: resumed N trials, running M" and the trials show
    Optuna's progress bar (on stderr). ``max_fit_rows`` caps each trial's fit rows.
    """
    if objective not in OBJECTIVES:
        raise ConfigError(f"--tune-objective must be one of {OBJECTIVES}, not {objective!r}")
    if n_trials < 1:
        raise ConfigError(f"--tune must be >= 1 trials, not {n_trials}")
    if train.height == 0:
        raise ConfigError(f"window {k_min} min: no training rows to tune on")
    t = train["t"].to_numpy()
    tail = t >= t.max() - tail_fraction * (t.max() - t.min())
    x = feature_matrix(train, feature_columns)
    y = train[LABEL].to_numpy().astype(np.int8)
    x_fit, y_fit, x_tail, y_tail = x[~tail], y[~tail], x[tail], y[tail]
    if np.unique(y_fit).size < 2 or y_tail.sum() == 0:
        raise ConfigError(f"window {k_min} min: the training rows before / in the tail lack "
                          "arrivals or quiet windows; lengthen --train-days")
    fingerprint = f"{train.height}:{float(t.min()):.0f}-{float(t.max()):.0f}:{len(feature_columns)}"
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(
        study_name=study_name, storage=storage, direction="maximize", load_if_exists=True,
        sampler=optuna.samplers.TPESampler(seed=base.seed),
    )
    made_on = study.user_attrs.get("training_rows")
    if made_on is None:
        study.set_user_attr("training_rows", fingerprint)
    elif made_on != fingerprint:
        raise ConfigError(f"Optuna study {study_name!r} in {storage} was made on other training "
                          f"rows ({made_on}, now {fingerprint}): its trials are not comparable; "
                          "delete the study or give another name")

    def run_trial(trial: optuna.Trial) -> float:
        params = suggest_params(trial, base)
        est = estimator_for(k_min, params, features=list(feature_columns), select="xgboost",
                            max_fit_rows=max_fit_rows)
        proba = est._train(x_fit, y_fit).inplace_predict(x_tail)
        m = binary_metrics(y_tail, proba >= best_f1_threshold(y_tail, proba))
        value = (m["f1"] if objective == "f1"
                 else recall_at_precision(y_tail, proba, precision_floor))
        if log_trials:
            import mlflow

            if mlflow.active_run() is not None:
                with mlflow.start_run(run_name=f"trial {trial.number} ({k_min}m)", nested=True):
                    mlflow.log_params({"k_min": k_min, **trial.params})
                    mlflow.log_metrics({"objective": value, **{f"tail_{k}": float(v)
                                                               for k, v in m.items()}})
        return value

    done = sum(t.state == optuna.trial.TrialState.COMPLETE for t in study.trials)
    remaining = max(n_trials - done, 0)
    if progress is not None:
        progress(f"window {k_min} min: study {study_name}: resumed {done} trials, "
                 f"running {remaining}")
    if remaining:
        study.optimize(run_trial, n_trials=remaining, show_progress_bar=progress is not None)
    return suggest_params(optuna.trial.FixedTrial(study.best_params), base), study
