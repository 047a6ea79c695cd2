"""JobDuration and the time limit: the hard bound (offline and as served), the tag and user
histories with limits, the learned model's selection, and a trace without limits unchanged."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.schema import TIME_LIMIT_GRACE_S
from sia.data.windows import DURATION_BIN_EDGES_S, duration_bin_of, limit_certain
from sia.features.duration_features import (
    DURATION_FEATURES,
    LIMIT_COLUMNS,
    feature_names,
    submission_features,
)
from sia.models.job_duration import (
    JobDuration,
    limit_bound,
    select_job_duration,
)

EDGES = np.asarray(DURATION_BIN_EDGES_S, dtype=np.float64)


def _jobs(n: int, seed: int, *, limits: bool = True, tags: bool = False) -> pl.DataFrame:
    """A zero-queue schedule: users whose jobs use a steady share of their limits."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, 6, size=n)
    limit = rng.choice([600.0, 3000.0, 7200.0, 40000.0, 200000.0], size=n)
    use = np.clip((user + 1) / 7.0 + rng.normal(0, 0.05, size=n), 0.01, 1.0)
    duration = np.maximum(1.0, use * limit)
    submit = np.sort(rng.uniform(0, 30 * 86400.0, size=n))
    frame = pl.DataFrame({
        "job_id": [f"j{i:04d}" for i in range(n)],
        "pool": rng.choice(["a", "b"], size=n).tolist(),
        "submit_time": submit, "duration": duration,
        "num_gpus": rng.choice([1, 2, 4], size=n).astype(np.int32),
        "tag": [f"t{u % 3}" if tags else None for u in user.tolist()],
        "user": [f"u{u}" for u in user.tolist()],
    }).with_columns(end_time=pl.col("submit_time") + pl.col("duration"))
    if limits:
        frame = frame.with_columns(time_limit=pl.Series(limit))
    return frame


@pytest.fixture(scope="module")
def data():
    s = _jobs(1500, 0)
    f = submission_features(s).join(s.select("job_id", "submit_time", "duration"), on="job_id")
    x = f.select(feature_names(True)).to_numpy()
    y = duration_bin_of(f["duration"].to_numpy())
    return x, y, f["submit_time"].to_numpy()


@pytest.fixture(scope="module")
def fitted(data):
    x, y, t = data
    return {m: JobDuration(m, limits=True, n_estimators=20, min_pool_history=0).fit(x, y, time=t)
            for m in ("xgboost", "history", "history_cdf")}


_FITS = [len(DURATION_FEATURES) + LIMIT_COLUMNS.index(c)
         for c in ("limit_fits_5m", "limit_fits_60m", "limit_fits_720m")]


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 1499), st.sampled_from([10.0, 200.0, 240.0, 241.0, 3000.0, 3540.0,
                                              40000.0, 43140.0, 43141.0, 1e6]),
       st.sampled_from(["xgboost", "history", "history_cdf"]))
def test_a_job_whose_limit_fits_a_window_is_never_predicted_not_to_fit(data, fitted, row, limit,
                                                                        method):
    """Whatever the method and the rest of the row, P(duration <= edge) = 1 at every edge its
    limit (plus the grace) fits, and its bin never exceeds the limit's."""
    x, _, _ = data
    r = x[row:row + 1].copy()
    r[0, _FITS] = (limit + TIME_LIMIT_GRACE_S <= EDGES).astype(float)
    r[0, len(DURATION_FEATURES)] = np.log(limit)
    model = fitted[method]
    cdf = model.predict_cdf(r)[0]
    fits = limit + TIME_LIMIT_GRACE_S <= EDGES
    assert np.all(cdf[fits] == 1.0)
    assert model.predict(r)[0] <= duration_bin_of(limit + TIME_LIMIT_GRACE_S)
    assert model.history_bins(r)[0] <= duration_bin_of(limit + TIME_LIMIT_GRACE_S)


def test_no_limit_no_bound(fitted, data):
    """A row without a limit (NaN limit columns) is predicted as the model says: the bound
    changes only rows whose limit fits."""
    x, _, _ = data
    r = x[:50].copy()
    r[:, len(DURATION_FEATURES):] = np.nan
    model = fitted["history_cdf"]
    plain = JobDuration("history_cdf", n_estimators=20).fit(
        x[:, :len(DURATION_FEATURES)], data[1])
    np.testing.assert_array_equal(model.predict_cdf(r), plain.predict_cdf(r[:, :len(
        DURATION_FEATURES)]))


def test_limit_certain_and_bound_by_hand():
    certain = limit_certain([240.0, 241.0, np.nan, 3000.0], [300.0, 3600.0], grace_s=60.0)
    np.testing.assert_array_equal(certain, [[True, True], [False, True], [False, False],
                                            [False, True]])
    cdf = np.array([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6], [0.0, 0.0]])
    np.testing.assert_array_equal(limit_bound(cdf, certain),
                                  [[1.0, 1.0], [0.3, 1.0], [0.5, 0.6], [0.0, 1.0]])
    assert cdf[0, 0] == 0.1  # a copy


class _View:
    """What LearnedForecaster reads of a replay at its start: nothing finished, all arrived."""

    def __init__(self, trace):
        self.trace, self.now = trace, float(trace.submit[-1])
        self.n_arrived, self.n_running = trace.n_jobs, 0

    def running(self):
        from types import SimpleNamespace

        e = np.zeros(0, dtype=np.int64)
        return SimpleNamespace(job=e, pool=e, start=np.zeros(0))

    def n_completed(self, p):
        return 0

    def completions(self, p):
        return np.zeros(0)

    def completed_jobs(self, p):
        return np.zeros(0, dtype=np.int64)


@settings(max_examples=25, deadline=None)
@given(st.lists(st.sampled_from([None, 100.0, 240.0, 3000.0, 3541.0, 43140.0, 1e6]),
                min_size=1, max_size=12),
       st.sampled_from([1.0, 2.0]), st.sampled_from([None, False, True]))
def test_served_cdf_is_one_where_the_trace_limit_fits(limits, speedup, learned):
    """LearnedForecaster.duration_cdf and duration_bins, with the rule or a learned JobDuration,
    honour view.trace.time_limit (already divided by the speed-up; so is the grace)."""
    from sia.models.forecaster import LearnedForecaster
    from sia.scheduler.core.view import TraceArrays

    n = len(limits)
    lim = np.array([np.nan if v is None else v / speedup for v in limits])
    trace = TraceArrays.build(np.array([f"j{i}" for i in range(n)], dtype=object),
                              np.arange(n, dtype=float), np.full(n, 1e5), np.ones(n),
                              np.zeros(n), np.full(n, None, dtype=object), ("p",),
                              np.array([4]), speedup=speedup, time_limit=lim.tolist())
    model = None  # the rule; else a JobDuration without (False) or with (True) limit features
    if learned is not None:
        model = JobDuration("history_cdf", fallback_bin=3, limits=learned).fit(
            np.zeros((1, len(feature_names(learned)))), np.array([3]))
    f = LearnedForecaster({}, duration_config={"fallback_bin": 3}, duration_model=model)
    windows = (60.0, 300.0, 1800.0, 3600.0, 43200.0, 1e7)
    view = _View(trace)
    cdf = f.duration_cdf(view, np.arange(n), windows)
    ends = lim + TIME_LIMIT_GRACE_S / speedup
    want = ends[:, None] <= np.asarray(windows)[None, :]
    assert np.all(cdf[want] == 1.0)
    assert np.all(cdf[~want] == 0.0)  # nothing else is known here: no history, fallback bin 3
    bins = f.duration_bins(view, np.arange(n))
    has = ~np.isnan(ends)
    assert np.all(bins[has] <= duration_bin_of(ends[has]))
    assert np.all(bins[~has] == 3)


def test_tag_history_with_its_fallback_to_pool_and_width():
    """On a trace with job names, history_cdf (limits or not) reads the same tag's finished jobs
    (at least history_min_count of them), else the same pool and width's."""
    s = _jobs(400, 3, tags=True)
    f = submission_features(s)
    x = f.select(feature_names(True)).to_numpy()
    y = duration_bin_of(s.sort("submit_time", "job_id")["duration"].to_numpy())
    model = JobDuration("history_cdf", limits=True, history_min_count=3).fit(x, y)
    cdf = model.predict_cdf(x)
    col = {c: i for i, c in enumerate(feature_names(True))}
    tag_ok = x[:, col["tag_count"]] >= 3
    fits = x[:, [col["limit_fits_5m"], col["limit_fits_60m"], col["limit_fits_720m"]]] == 1.0
    tag_shares = x[:, [col["tag_le5m"], col["tag_le60m"], col["tag_le720m"]]]
    pg_shares = x[:, [col["pool_gpus_le5m"], col["pool_gpus_le60m"], col["pool_gpus_le720m"]]]
    pg_ok = ~tag_ok & (x[:, col["pool_gpus_count"]] >= 3)
    assert tag_ok.sum() > 300 and pg_ok.sum() >= 1
    want_tag = np.maximum.accumulate(np.where(fits, 1.0, tag_shares), axis=1)
    np.testing.assert_array_equal(cdf[tag_ok], np.maximum.accumulate(
        np.where(fits[tag_ok], 1.0, tag_shares[tag_ok]), axis=1))
    assert want_tag.shape == cdf.shape
    np.testing.assert_array_equal(cdf[pg_ok], np.maximum.accumulate(
        np.where(fits[pg_ok], 1.0, pg_shares[pg_ok]), axis=1))


def test_selection_against_a_baseline_never_lends_riskier(data):
    """Against the history_cdf baseline, the learned model is registered only if on the training
    tail it lends more in total and overruns no more often in any window."""
    x, y, t = data
    base = JobDuration("history_cdf", limits=True, history_recent=1.0).fit(x, y)
    base.lend_risk_ = [0.2, 0.2, 0.05]
    model, table = select_job_duration(x, y, t, baseline=base, limits=True, n_estimators=20)
    rows = {r["window_min"]: r for r in table if r["candidate"] == "history_cdf (baseline)"}
    assert sorted(rows) == [5, 60, 720]
    if model is base:
        return
    assert model.method == "xgboost" and model.limits
    assert model.lend_risk_ == [0.2, 0.2, 0.05]  # the baseline's promise, per window
    chosen = [r for r in table if r["candidate"] == "learned"]
    assert len(chosen) == 3
    for r in chosen:
        base_row = rows[r["window_min"]]
        assert r["eps"] == base_row["eps"]
        assert r["lendable"] == 0.0 or not r["overrun"] > base_row["overrun"]
        assert r["brier"] <= base_row["brier"]
    assert sum(r["lendable"] for r in chosen) > sum(r["lendable"] for r in rows.values())


def test_selection_keeps_the_baseline_when_the_learned_model_cannot_learn():
    """Labels unrelated to the features: the learned model never lends more at no more risk
    than the baseline, which stays registered as given."""
    s = _jobs(1200, 5)
    f = submission_features(s).join(s.select("job_id", "submit_time"), on="job_id")
    x = f.select(feature_names(True)).to_numpy()
    y = np.random.default_rng(1).integers(0, 4, size=x.shape[0])
    x[:, _FITS] = 0.0  # no limit guarantees anything here
    base = JobDuration("history_cdf", limits=True).fit(x, y)
    base.lend_risk_ = [0.2, 0.2, 0.05]
    model, _ = select_job_duration(x, y, f["submit_time"].to_numpy(), baseline=base,
                                   limits=True, n_estimators=20)
    assert model is base


def test_a_trace_without_limits_trains_and_predicts_exactly_as_before(philly_path):
    """On Philly (no limits) fit_job_duration registers the same model with the same
    predictions whether the trace has no time_limit column or an empty one, whatever
    --duration-learned says by default; nothing reads limit columns."""
    from sia.models.split import choose_split
    from sia.pipelines import inputs
    from sia.pipelines.train import TrainConfig, fit_job_duration

    w = inputs.load_workload(trace=philly_path, clean=True, days=30)
    schedule = inputs.fcfs_schedule(w.jobs, w.pools)
    config = TrainConfig(train_days=14, val_days=7, warmup_days=3, threads=1)
    split = choose_split(schedule["submit_time"].to_numpy(), train_days=14, val_days=7,
                         warmup_days=3)
    before, t_before = fit_job_duration(schedule, split, config)
    empty = schedule.with_columns(time_limit=pl.lit(None, dtype=pl.Float64))
    after, t_after = fit_job_duration(empty, split, config)
    never, _ = fit_job_duration(schedule, split, TrainConfig(
        train_days=14, val_days=7, warmup_days=3, threads=1, duration_learned="never"))
    assert before.get_params() == after.get_params() == never.get_params()
    assert not after.limits and list(after.feature_names_in_) == DURATION_FEATURES
    zq = schedule.with_columns(end_time=pl.col("submit_time") + pl.col("duration"))
    x = submission_features(zq).select(DURATION_FEATURES).to_numpy()
    np.testing.assert_array_equal(before.predict_cdf(x), after.predict_cdf(x))
    np.testing.assert_array_equal(before.predict_cdf(x), never.predict_cdf(x))
    assert t_before["job_duration_lending"].equals(t_after["job_duration_lending"])
    assert "limit only" not in t_after["job_duration_lending"]["predictor"].to_list()


def test_train_reports_lending_per_window_for_every_predictor():
    """fit_job_duration on a trace with limits: the learned model competes with the rule on the
    training tail, and the validation table holds, per window, the registered model, the learned
    one, the pool-and-width rule, the limit alone and perfect durations."""
    from sia.models.split import choose_split
    from sia.pipelines.train import TrainConfig, fit_job_duration

    s = _jobs(1500, 7)
    split = choose_split(s["submit_time"].to_numpy(), train_days=18, val_days=8,
                         warmup_days=1, start_day=0.0)
    model, tables = fit_job_duration(s, split, TrainConfig(threads=1))
    assert model.limits
    lending = tables["job_duration_lending"]
    got = set(zip(lending["predictor"].to_list(), lending["window_min"].to_list(), strict=True))
    for who in ("registered", "learned+limits", "pool+width", "limit only", "perfect"):
        assert {(who, w) for w in (5, 60, 720)} <= got
    limit_only = lending.filter(pl.col("predictor") == "limit only")
    assert limit_only["overrun"].fill_nan(0.0).max() == 0.0  # a guarantee never overruns here
    assert "job_duration_selection" in tables


def test_a_model_with_limits_registers_and_loads_as_it_serves(data, fitted, mlflow_uri):
    """The registry stores the limits flag and the feature names: the loaded model predicts
    exactly what was fitted (the bound included), through the registry and through pyfunc."""
    import mlflow
    from sia.models import registry

    mlflow.set_registry_uri(mlflow_uri)
    mlflow.set_experiment("limits-test")
    x, _, _ = data
    est = JobDuration("history_cdf", limits=True, history_use=True, history_recent=1.0).fit(
        x, data[1])
    est.lend_risk_ = [0.2, 0.2, 0.05]
    with mlflow.start_run():
        registry.log_job_duration({}, alias="lim", model=est)
    loaded = registry.load_job_duration_model("lim")
    assert loaded.limits and loaded.history_use and loaded.lend_risk_ == [0.2, 0.2, 0.05]
    np.testing.assert_array_equal(loaded.predict_cdf(x), est.predict_cdf(x))
    frame = pl.DataFrame(x, schema=feature_names(True), orient="row").to_pandas()
    served = mlflow.pyfunc.load_model("models:/sia-job-duration@lim").predict(frame)
    np.testing.assert_array_equal(np.asarray(served), est.predict_cdf(x))


def test_history_use_needs_the_limit_columns():
    with pytest.raises(ValueError, match="history_use"):
        JobDuration("history_cdf", history_use=True).fit(
            np.zeros((2, len(DURATION_FEATURES))), np.array([0, 1]))
