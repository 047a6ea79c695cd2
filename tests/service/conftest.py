"""Shared helpers of the service's tests."""

from __future__ import annotations

import numpy as np
import polars as pl
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.forecaster import LearnedForecaster
from sia.models.will_arrive import WillJobsArrive


def small_forecaster(duration_model=None) -> LearnedForecaster:
    """A learned forecaster fitted in a second on random rows (XGBoost WillJobsArrive for 5
    and 60 minutes, persistence for 12 hours; the paper's duration rule, or
    ``duration_model``)."""
    rng = np.random.default_rng(5)
    n = 400
    rows = pl.DataFrame({"t": np.arange(n) * 300.0,
                         **{c: rng.integers(0, 4, n).astype(np.float32) for c in FEATURE_COLUMNS}})
    y = (rows["arrivals_x10"].to_numpy() + rows["since_arrival_s"].to_numpy() % 3) > 3
    will = {5: WillJobsArrive(5, select="xgboost", n_estimators=8, max_depth=3).fit(rows, y),
            60: WillJobsArrive(60, select="xgboost", n_estimators=8, max_depth=3).fit(rows, y),
            720: WillJobsArrive(720, select="persistence").fit(rows, y)}
    return LearnedForecaster(will, load_windows=3, duration_model=duration_model,
                             duration_config={"min_count": 1, "fallback_bin": 1})
