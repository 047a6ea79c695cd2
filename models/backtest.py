"""Walk-forward evaluation of WillJobsArrive: retrain every D days on the last N days, as in production.

A single train / validate split says how one model did on one fortnight. A
cluster would instead retrain its predictors every few days on the most
recent weeks and use each model until the next retraining. :func:`walk_forward`
replays exactly that over a feature table (:func:`sia.features.table9.build_features`):

- fold i starts at ``s_i = start + i * every``; its model is fit on the rows
  whose label window lies in ``[s_i - train_span, s_i)`` (every choice, threshold
  and model selection included, made inside that span, see
  :class:`~sia.models.will_arrive.WillJobsArrive`), and it predicts the rows
  whose label window lies in ``[s_i, s_i + every)``;
- each fold reports precision / recall / F of the model and of the two
  baselines (persistence, always-yes) on its test rows, and which candidate
  the selection registered;
- the overall row pools every fold's test rows (each predicted by the model
  of its own fold).

Nothing a fold's model sees ends after its fold starts.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.models.will_arrive import (
    LABEL,
    WillJobsArrive,
    always_yes_prediction,
    binary_metrics,
    persistence_prediction,
)

PREDICTORS: tuple[str, ...] = ("model", "persistence", "always_yes")


def fold_starts(start_s: float, end_s: float, every_s: float) -> np.ndarray:
    """Return the fold start times (s): ``start_s + i * every_s`` while < ``end_s``."""
    if not every_s > 0:
        raise ConfigError(f"--retrain-every must be > 0 days, not {every_s / 86400.0:g}")
    if not end_s > start_s:
        raise ConfigError("walk-forward: nothing to test: the test period ends "
                          f"(day {end_s / 86400.0:.1f}) before it starts (day {start_s / 86400.0:.1f})")
    return start_s + every_s * np.arange(int(np.ceil((end_s - start_s) / every_s)))


def walk_forward(features: pl.DataFrame, *, window_min: int, start_s: float, end_s: float,
                 every_s: float, train_span_s: float,
                 fit_model: Callable[[pl.DataFrame], WillJobsArrive],
                 on_fold: Callable[[dict[str, Any]], None] | None = None,
                 ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Return (per-fold rows, overall rows) of the walk-forward backtest for one window.

    ``features`` holds the window's rows (``t`` in s, the feature columns,
    ``label_arrival``); ``fit_model(rows)`` returns a model fit on a fold's
    training rows (for the product's own procedure, feature-set selection
    included: :func:`sia.models.will_arrive.select_window_model`). A fold whose training span has only one class is skipped and
    reported with ``method="skipped"``. Per-fold rows carry ``fold``,
    ``start_day``, ``end_day``, ``method``, ``threshold`` and, per predictor,
    ``<predictor>_precision`` / ``_recall`` / ``_f1``; the overall rows one
    per predictor over every tested row. ``on_fold`` is called with each fold's row.
    """
    k_s = 60.0 * window_min
    t = features["t"].to_numpy()
    label_end = t + k_s
    folds: list[dict[str, Any]] = []
    pooled: dict[str, list[np.ndarray]] = {p: [] for p in PREDICTORS}
    truth: list[np.ndarray] = []
    for i, s in enumerate(fold_starts(start_s, end_s, every_s)):
        e = min(s + every_s, end_s)
        train = features.filter(pl.Series((t >= s - train_span_s) & (label_end <= s)))
        test = features.filter(pl.Series((t >= s) & (label_end <= e)))
        row: dict[str, Any] = {"window_min": window_min, "fold": i, "start_day": s / 86400.0,
                               "end_day": e / 86400.0, "train_rows": train.height,
                               "test_rows": test.height}
        y_train = train[LABEL].to_numpy() if train.height else np.empty(0)
        if test.height == 0 or np.unique(y_train).size < 2:
            row.update(method="skipped", threshold=float("nan"))
            folds.append(row)
            if on_fold:
                on_fold(row)
            continue
        est = fit_model(train)
        y = test[LABEL].to_numpy()
        preds = {"model": est.predict(test), "persistence": persistence_prediction(test),
                 "always_yes": always_yes_prediction(test)}
        row.update(method=est.method_, threshold=float(est.threshold_))
        for name, p in preds.items():
            m = binary_metrics(y, p)
            row.update({f"{name}_{k}": m[k] for k in ("precision", "recall", "f1")})
            pooled[name].append(np.asarray(p))
        truth.append(y)
        folds.append(row)
        if on_fold:
            on_fold(row)
    overall = []
    if truth:
        y_all = np.concatenate(truth)
        for name in PREDICTORS:
            m = binary_metrics(y_all, np.concatenate(pooled[name]))
            overall.append({"window_min": window_min, "predictor": name, **m})
    return folds, overall
