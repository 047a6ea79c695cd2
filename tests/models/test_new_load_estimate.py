"""NewLoadEstimate as an estimator: hand cases per method, the quantile model's target, artifacts, serving."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import pandas as pd
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.features.table9 import FEATURE_COLUMNS
from sia.models import serving
from sia.models.new_load import METHODS, NewLoadEstimate, choose_method, load_metrics

# 10 hand-picked windows: sliding max s and the load y that arrived next
S10 = np.array([1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 0.0, 0.0, 0.0, 0.0])
Y10 = np.array([1.0, 2.0, 2.0, 6.0, 4.0, 12.0, 3.0, 5.0, 0.0, 0.0])


def _frame(s):
    return pl.DataFrame({"sliding_max": np.asarray(s, dtype=np.float64)})


def test_sliding_max_method_is_the_input_column():
    est = NewLoadEstimate("sliding_max").fit(_frame(S10), Y10)
    np.testing.assert_array_equal(est.predict(_frame(S10)), S10)
    assert (est.scale_, est.empty_, est.booster_, est.n_fit_rows_) == (1.0, 0.0, None, 8)


def test_calibrated_scale_and_empty_by_hand():
    # rows with arrivals: 8 (the last two have y = 0 and are left out)
    # s > 0: y / s = 1, 2, 1, 3, 1, 3 -> sorted 1 1 1 2 3 3; s = 0: y = 3, 5
    est = NewLoadEstimate("calibrated", alpha=0.5).fit(_frame(S10), Y10)
    # "higher" quantile 0.5 of 6 ratios: position 2.5 -> the 4th smallest = 2; of (3, 5): 5
    assert (est.scale_, est.empty_) == (2.0, 5.0)
    np.testing.assert_array_equal(est.predict(_frame([0.0, 1.0, 3.0])), [5.0, 2.0, 6.0])
    est = NewLoadEstimate("calibrated", alpha=0.2).fit(_frame(S10), Y10)
    assert (est.scale_, est.empty_) == (3.0, 5.0)  # position 0.8 x 5 = 4: the 5th smallest
    # never exceeded on these 8 windows (the largest ratio, 3, is the scale)
    assert load_metrics(est.predict(_frame(S10)), Y10)["exceedance_rate"] == 0.0


def _learnable(n: int, seed: int) -> tuple[pd.DataFrame, np.ndarray]:
    """Load ~ exponential with mean 1 + sliding_max + arrivals_x1; 30% of windows empty."""
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.integers(0, 10, (n, len(FEATURE_COLUMNS))).astype(float),
                     columns=FEATURE_COLUMNS)
    X.insert(0, "sliding_max", rng.integers(0, 9, n).astype(float))
    mean = 1.0 + X["sliding_max"].to_numpy() + X["arrivals_x1"].to_numpy()
    y = np.where(rng.random(n) < 0.3, 0.0, rng.exponential(mean))
    return X, y


def test_quantile_model_meets_its_target_on_fresh_data():
    X, y = _learnable(4000, 0)
    Xv, yv = _learnable(20000, 1)
    est = NewLoadEstimate("quantile", alpha=0.1, n_estimators=100).fit(X, y)
    m = load_metrics(est.predict(Xv), yv)
    # the true 0.9 quantile of Exp(mean) is 2.30 x mean: exceedance 0.1 on fresh data
    assert abs(m["exceedance_rate"] - 0.1) < 0.03, m
    # it learned the mean: tighter than the calibrated sliding max on the same rows
    cal = NewLoadEstimate("calibrated", alpha=0.1).fit(X, y)
    assert m["mean_over_reservation_gpus"] < load_metrics(cal.predict(Xv), yv)[
        "mean_over_reservation_gpus"]
    assert np.isfinite(est.holdout_exceedance_) and np.isfinite(est.holdout_exceedance_raw_)


def test_quantile_conformal_offset_fixes_a_miscalibrated_booster():
    # deep trees on 1500 rows overfit: the booster's 0.9 quantile is exceeded ~26% of the
    # time on fresh data; the offset, chosen on the later quarter, restores about 10%
    X, y = _learnable(1500, 2)
    Xv, yv = _learnable(20000, 3)
    kw = {"alpha": 0.1, "max_depth": 8, "n_estimators": 50, "learning_rate": 0.3}
    raw = NewLoadEstimate("quantile", conformal=False, **kw).fit(X, y)
    fixed = NewLoadEstimate("quantile", **kw).fit(X, y)
    assert raw.offset_ == 0.0 and fixed.offset_ > 0.0
    assert fixed.holdout_exceedance_raw_ > 0.2  # seen on training rows, which is how it is fixed
    assert load_metrics(raw.predict(Xv), yv)["exceedance_rate"] > 0.2
    assert abs(load_metrics(fixed.predict(Xv), yv)["exceedance_rate"] - 0.1) < 0.04


@pytest.mark.parametrize("as_polars", [False, True])
def test_quantile_predict_from_a_frame_is_the_float64_estimate(as_polars):
    # predict hands the booster a float32 matrix (half the memory of float64 on a big
    # validation table); XGBoost compares in float32, so it must give estimate()'s float64
    # answer exactly, here with features that float32 cannot hold exactly (0.1, 1/3, ...)
    X, y = _learnable(3000, 4)
    rng = np.random.default_rng(5)
    X[FEATURE_COLUMNS] = X[FEATURE_COLUMNS] + rng.random((len(X), len(FEATURE_COLUMNS)))
    X["sliding_max"] = X["sliding_max"] + rng.random(len(X)) / 3.0
    est = NewLoadEstimate("quantile", alpha=0.1, n_estimators=60, max_depth=6).fit(X, y)
    Xv, _ = _learnable(5000, 6)
    Xv[FEATURE_COLUMNS] = Xv[FEATURE_COLUMNS] + rng.random((len(Xv), len(FEATURE_COLUMNS)))
    want = est.estimate(Xv["sliding_max"].to_numpy(), Xv[FEATURE_COLUMNS].to_numpy())
    got = est.predict(pl.from_pandas(Xv) if as_polars else Xv)
    assert got.dtype == np.float64 and np.unique(got).size > 100  # a real booster's answers
    np.testing.assert_array_equal(got, want)


def test_boundary_errors_say_what_to_fix():
    X, y = _learnable(200, 0)
    with pytest.raises(ValueError, match="arrivals_x1"):
        NewLoadEstimate("quantile").fit(X.drop(columns=["arrivals_x1"]), y)
    with pytest.raises(ValueError, match="sliding_max"):
        NewLoadEstimate().fit(X.drop(columns=["sliding_max"]), y)
    with pytest.raises(ValueError, match=r"one load per row of X \(200\)"):
        NewLoadEstimate().fit(X, y[:-1])
    with pytest.raises(ValueError, match="NaN"):
        NewLoadEstimate().fit(X, np.where(y > 5, np.nan, y))
    with pytest.raises(ValueError, match="negative"):
        NewLoadEstimate().fit(X, -y)
    for alpha in (0.0, 1.0, 1.5, float("nan")):
        with pytest.raises(ValueError, match=r"alpha .* must be in \(0, 1\)"):
            NewLoadEstimate(alpha=alpha).fit(X, y)
    with pytest.raises(ValueError, match="method must be one of"):
        NewLoadEstimate("magic").fit(X, y)
    with pytest.raises(ValueError, match="polars or pandas frame"):
        NewLoadEstimate().fit(X.to_numpy(), y)
    est = NewLoadEstimate("quantile", n_estimators=2).fit(X, y)
    with pytest.raises(ValueError, match="Table 9"):
        est.estimate(np.zeros(3))


def test_no_arrivals_at_all_falls_back_to_the_sliding_max():
    X, _ = _learnable(50, 0)
    for m in METHODS:
        est = NewLoadEstimate(m).fit(X, np.zeros(50))
        assert est.n_fit_rows_ == 0
        np.testing.assert_array_equal(est.predict(X), X["sliding_max"].to_numpy())


def test_choose_method_by_hand():
    def m(exceed, over):
        return {"exceedance_rate": exceed, "mean_over_reservation_gpus": over}

    # quantile is within 0.1 + 0.02 and reserves least
    assert choose_method({"sliding_max": m(0.4, 1.0), "calibrated": m(0.1, 9.0),
                          "quantile": m(0.11, 7.0)}, 0.1) == "quantile"
    # quantile misses the target: the calibrated one
    assert choose_method({"sliding_max": m(0.4, 1.0), "calibrated": m(0.1, 9.0),
                          "quantile": m(0.13, 7.0)}, 0.1) == "calibrated"
    # none meets it: the one exceeded least
    assert choose_method({"sliding_max": m(0.4, 1.0), "calibrated": m(0.3, 9.0),
                          "quantile": m(0.25, 7.0)}, 0.1) == "quantile"


def _roundtrip(est: NewLoadEstimate) -> NewLoadEstimate:
    """Return ``est`` stored as JSON + UBJ files and rebuilt (what the registry does)."""
    with tempfile.TemporaryDirectory() as tmp:
        params, boosters = est.to_artifacts()
        return serving.build(serving.write_artifacts(Path(tmp), params, boosters))


@settings(max_examples=25, deadline=None)
@given(st.sampled_from(METHODS), st.integers(0, 10_000), st.integers(5, 80),
       st.floats(0.02, 0.5))
def test_estimates_are_never_negative_and_survive_the_artifacts(method, seed, n, alpha):
    rng = np.random.default_rng(seed)
    X = pd.DataFrame(rng.integers(0, 6, (n, len(FEATURE_COLUMNS))).astype(float),
                     columns=FEATURE_COLUMNS)
    X.insert(0, "sliding_max", rng.integers(0, 6, n).astype(float))
    # loads below the sliding max pull a quantile model (and its offset) below 0
    y = np.where(rng.random(n) < 0.5, 0.0, rng.exponential(2.0, n))
    est = NewLoadEstimate(method, alpha=alpha, n_estimators=4, min_calibration_rows=3,
                          seed=seed).fit(X, y)
    Xv = X.sample(frac=1.0, random_state=seed).reset_index(drop=True)
    Xv["sliding_max"] = rng.integers(0, 20, n).astype(float)
    pred = est.predict(Xv)
    assert pred.dtype == np.float64 and pred.shape == (n,) and np.all(pred >= 0)
    back = NewLoadEstimate.from_artifacts(*est.to_artifacts())
    np.testing.assert_array_equal(back.predict(Xv), pred)
    stored = _roundtrip(est)
    assert stored.get_params() == est.get_params()
    np.testing.assert_array_equal(stored.predict(Xv), pred)
    np.testing.assert_array_equal(stored.serve(Xv), pred)


def test_registered_estimate_serves_through_mlflow_pyfunc(mlflow_uri):
    import mlflow
    from sia.models import registry

    mlflow.set_registry_uri(mlflow_uri)
    X, y = _learnable(600, 4)
    quantile = NewLoadEstimate("quantile", window_min=60, n_estimators=20).fit(X, y)
    calibrated = NewLoadEstimate("calibrated", window_min=5).fit(X, y)
    with mlflow.start_run():
        registry.log_new_load(quantile, alias="q")
        registry.log_new_load(calibrated, alias="c")
    Xv, _ = _learnable(300, 5)
    served = mlflow.pyfunc.load_model("models:/sia-new-load-estimate-60m@q").predict(Xv)
    np.testing.assert_array_equal(np.asarray(served), quantile.predict(Xv))
    loaded = registry.load_new_load(60, "q")
    assert loaded.method == "quantile" and loaded.get_params() == quantile.get_params()
    np.testing.assert_array_equal(loaded.predict(Xv), quantile.predict(Xv))
    rows = Xv[["sliding_max"]]
    served = mlflow.pyfunc.load_model("models:/sia-new-load-estimate-5m@c").predict(rows)
    np.testing.assert_array_equal(np.asarray(served), calibrated.predict(rows))
    # stored as data: JSON + UBJ, no pickle
    from mlflow.artifacts import download_artifacts

    root = Path(download_artifacts(artifact_uri="models:/sia-new-load-estimate-60m@q"))
    files = {p.name for p in root.rglob("*") if p.is_file()}
    assert {"params.json", "booster_main.ubj"} <= files
    assert not any(f.endswith((".pkl", ".pickle", ".cloudpickle")) for f in files)


def test_forecaster_serves_the_quantile_estimate_from_the_features_at_now(probe_policy):
    from sia.data.synthetic import generate_workload
    from sia.data.windows import sliding_max_load
    from sia.models.forecaster import LearnedForecaster
    from sia.models.registry import RegistryError
    from sia.models.will_arrive import WillJobsArrive
    from sia.scheduler.core.simulator import simulate

    ks = (5, 60)
    windows = tuple(60.0 * k for k in ks)
    X, y = _learnable(800, 6)
    loads = {k: NewLoadEstimate("quantile", window_min=k, n_windows=2, n_estimators=10,
                                seed=k).fit(X, y) for k in ks}
    will = {k: WillJobsArrive.from_booster(k, None, 0.5, list(FEATURE_COLUMNS)) for k in ks}
    with pytest.raises(RegistryError, match="is method 'quantile', not 'calibrated'"):
        LearnedForecaster(will, loads=loads, load_method="calibrated")
    f = LearnedForecaster(will, loads=loads, load_method="quantile", load_windows=7)
    jobs, pools = generate_workload("base", 3, days=1.0)

    def ask(view):
        tr, n = view.trace, int(view.n_arrived)
        smax = {k: sliding_max_load(tr.submit[:n], tr.num_gpus[:n], tr.pool[:n], tr.n_pools,
                                    float(view.now), 60.0 * k, 2) for k in ks}  # n_windows=2
        return f.features(view, ks), smax, f.new_load_estimate(view, windows)

    probe = probe_policy(ask)
    simulate(jobs, pools, probe)
    assert len(probe.records) > 20
    for feats, smax, got in probe.records[::5]:
        for i, k in enumerate(ks):
            frame = pd.DataFrame(feats[k].astype(np.float64), columns=FEATURE_COLUMNS)
            frame.insert(0, "sliding_max", smax[k])
            np.testing.assert_allclose(got[:, i], loads[k].predict(frame), rtol=1e-6)
    assert all((r[2] >= 0).all() for r in probe.records)


def test_choose_method_without_a_hold_out_keeps_the_calibrated_default():
    empty = load_metrics(np.zeros(0), np.zeros(0))
    assert choose_method({m: empty for m in METHODS}, 0.1) == "calibrated"
