"""Learned predictors as data: a forecaster rebuilt from its JSON parameters and XGBoost
boosters answers exactly as the original (what a worker without the MLflow store builds)."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import polars as pl
import pytest
from sia.data.synthetic import generate_workload
from sia.features.duration_features import DURATION_FEATURES
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.forecaster import LearnedForecaster
from sia.models.job_duration import JobDuration
from sia.models.new_load import NewLoadEstimate
from sia.models.registry import RegistryError
from sia.models.will_arrive import WillJobsArrive
from sia.scheduler.core.simulator import simulate


# ----------------------------------------------------------------------------- as bytes
def _hand_fitted() -> LearnedForecaster:
    """A forecaster of every kind of model: XGBoost and persistence WillJobsArrive, quantile
    NewLoadEstimate, learned JobDuration with a lending eps (no MLflow)."""
    rng = np.random.default_rng(5)
    n = 600
    rows = pl.DataFrame({"t": np.arange(n) * 300.0,
                         **{c: rng.integers(0, 4, n).astype(np.float32) for c in FEATURE_COLUMNS}})
    y = (rows["arrivals_x10"].to_numpy() + rows["since_arrival_s"].to_numpy() % 3) > 3
    will = {5: WillJobsArrive(5, select="xgboost", n_estimators=15, max_depth=4).fit(rows, y),
            60: WillJobsArrive(60, select="xgboost", n_estimators=9,
                               features=FEATURE_COLUMNS[6:]).fit(rows, y),
            720: WillJobsArrive(720, select="persistence").fit(rows, y)}
    X = pd.DataFrame(rng.integers(0, 10, (n, len(FEATURE_COLUMNS))).astype(float),
                     columns=FEATURE_COLUMNS)
    X.insert(0, "sliding_max", rng.integers(0, 9, n).astype(float))
    load_y = rng.exponential(1.0 + X["sliding_max"].to_numpy())
    loads = {k: NewLoadEstimate("quantile", window_min=k, n_windows=2, n_estimators=10,
                                seed=k).fit(X, load_y) for k in will}
    d = np.full((n, len(DURATION_FEATURES)), np.nan)
    med = rng.choice([100.0, 1000.0, 10000.0, 100000.0], size=n)
    d[:, DURATION_FEATURES.index("pool_count")] = 50.0
    d[:, DURATION_FEATURES.index("pool_median_s")] = med
    duration = JobDuration(n_estimators=10).fit(pd.DataFrame(d, columns=DURATION_FEATURES),
                                                np.searchsorted([300.0, 3600.0, 43200.0], med),
                                                time=np.arange(n, dtype=float))
    duration.lend_risk_ = 0.1
    return LearnedForecaster(will, loads=loads, load_method="quantile", load_windows=2,
                             duration_config={"min_count": 2, "fallback_bin": 2, "quantile": 0.7},
                             duration_model=duration)


def test_forecaster_rebuilt_from_its_bytes_answers_exactly_as_the_original(probe_policy):
    original = _hand_fitted()
    document, boosters = original.to_bytes()
    # data, not pickled code: a JSON document and XGBoost's UBJ bytes
    doc = json.loads(document)
    assert doc["load_method"] == "quantile" and doc["duration_config"]["quantile"] == 0.7
    assert sorted(boosters) == ["job_duration", "new_load/5", "new_load/60", "new_load/720",
                                "will_arrive/5", "will_arrive/60"]
    assert all(isinstance(b, bytes) and b[:1] == b"{" for bs in boosters.values()
               for b in bs.values())
    rebuilt = LearnedForecaster.from_bytes(document, boosters)
    cached = LearnedForecaster.from_bytes(document, boosters, cache_key=("test", id(boosters)))
    again = LearnedForecaster.from_bytes(document, {}, cache_key=("test", id(boosters)))
    assert again.will_arrive[5].booster_ is cached.will_arrive[5].booster_  # decoded once
    windows = (300.0, 3600.0, 43200.0)
    assert rebuilt.lend_risk_at(windows) == again.lend_risk_at(windows) == \
        original.lend_risk_at(windows)
    fcs = (original, rebuilt)
    calls = iter(range(10**6))

    def ask(view):  # every third decision: the answers are what is compared, not their count
        if next(calls) % 3:
            return None
        jobs = np.arange(int(view.n_arrived))
        return [(f.arrival_proba(view, windows), f.will_jobs_arrive(view, windows),
                 f.new_load_estimate(view, windows), f.duration_bins(view, jobs)) for f in fcs]

    jobs, pools = generate_workload("base", 3, days=0.5)
    probe = probe_policy(ask)
    simulate(jobs, pools, probe)
    records = [r for r in probe.records if r is not None]
    assert len(records) > 20
    for want, got in records:
        for a, b in zip(want, got, strict=True):
            np.testing.assert_array_equal(a, b)
    # the answers vary: the boosters, not a constant, decide them
    assert len({r[0][0].tobytes() for r in records}) > 5


def test_unreadable_bytes_are_a_one_line_registry_error():
    document, boosters = _hand_fitted().to_bytes()
    bad = {**boosters, "will_arrive/5": {"main": b"not a booster"}}
    with pytest.raises(RegistryError, match=r"^the shipped predictors cannot be read \(") as info:
        LearnedForecaster.from_bytes(document, bad)
    assert "\n" not in str(info.value)
