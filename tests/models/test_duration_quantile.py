"""JobDuration with a quantile: the definition, the online and offline histories, calibration."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.windows import duration_bin_of
from sia.features.duration_history import point_in_time_history
from sia.models.job_duration import (
    OnlineDurationHistory,
    SortedHistory,
    calibrate_quantile,
    evaluate_history,
    predict_bins,
    sorted_quantile,
)

MIN = 60.0


def test_sorted_quantile_by_hand():
    v = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0, 70.0]
    assert sorted_quantile(v, 0.5) == 40.0
    assert sorted_quantile(v, 0.9) == 64.0  # h = 5.4: 60 + 10 * 0.4
    assert sorted_quantile(v, 0.0) == 10.0 and sorted_quantile(v, 1.0) == 70.0
    assert sorted_quantile([10.0, 20.0], 0.5) == 15.0  # the median's mean of the middle two
    assert sorted_quantile([7.0], 0.9) == 7.0
    assert math.isnan(sorted_quantile([], 0.9))


def test_known_history_gives_the_median_bin_and_the_q90_bin():
    # five finished jobs of 2, 3, 4, 30 and 100 minutes in one pool, no tags
    durs = np.array([2, 3, 4, 30, 100, 50]) * MIN  # the last one is the query
    trace = SimpleNamespace(n_pools=1, duration=durs, pool=np.zeros(6, dtype=np.int64),
                            num_gpus=np.ones(6, dtype=np.int64),
                            tag_code=np.full(6, -1, dtype=np.int64))
    view = SimpleNamespace(trace=trace)
    h = OnlineDurationHistory(min_count=3)
    h.start(trace)
    h.add(trace, np.arange(5))
    q = np.array([5])
    assert h.median_s(view, q)[0] == 4 * MIN
    assert h.quantile_s(view, q, 0.5)[0] == 4 * MIN
    assert h.quantile_s(view, q, 0.9)[0] == pytest.approx(72 * MIN)  # h = 3.6: 30 + 70 * 0.6
    assert predict_bins(h.quantile_s(view, q, 0.5)).tolist() == [0]  # (0, 5] min
    assert predict_bins(h.quantile_s(view, q, 0.9)).tolist() == [2]  # (60, 720] min
    # the offline history of the same schedule (all five end before the query starts)
    sched = pl.DataFrame({
        "job_id": [f"j{i}" for i in range(6)], "pool": ["p"] * 6, "num_gpus": [1] * 6,
        "tag": [None] * 6, "submit_time": [0.0] * 5 + [10_000.0], "duration": durs,
        "start_time": [0.0] * 5 + [10_000.0], "end_time": [*durs[:5], 10_000.0 + durs[5]]})
    hist = point_in_time_history(sched, quantile=0.9)
    last = hist.row(5, named=True)
    assert last["hist_median_s"] == 4 * MIN and last["hist_quantile_s"] == 72 * MIN
    # the query ran 50 min: the median predicts (0, 5] (under), the 0.9-quantile (60, 720] (over)
    m50 = evaluate_history(sched, hist, 5_000.0, 20_000.0)
    m90 = evaluate_history(sched, hist, 5_000.0, 20_000.0, quantile=0.9)
    assert (m50["under_rate"], m90["under_rate"], m90["over_rate"]) == (1.0, 0.0, 1.0)
    assert m90["quantile"] == 0.9
    with pytest.raises(ValueError, match="hist_quantile_s"):
        evaluate_history(sched, point_in_time_history(sched), 0.0, 1.0, quantile=0.9)
    with pytest.raises(ValueError, match="quantile"):
        evaluate_history(sched, hist, 0.0, 1.0, quantile=1.5)


durations = st.one_of(st.integers(1, 50).map(float),  # many ties
                      st.floats(0.5, 1e6, allow_nan=False, allow_infinity=False))
quantiles = st.one_of(st.sampled_from([0.0, 0.1, 0.5, 0.8, 0.9, 0.95, 1.0]),
                      st.floats(0.0, 1.0, allow_nan=False))


@settings(max_examples=150, deadline=None)
@given(values=st.lists(durations, min_size=1, max_size=80), q=quantiles)
def test_sorted_history_quantile_is_numpys_linear_quantile(values, q):
    h = SortedHistory()
    for v in values:
        h.add(v)
    got = h.quantile(q)
    a = np.asarray(values)
    # numpy computes the same interpolation with other rounding: equal to ~1 ulp, and
    # always between the two order statistics it interpolates
    assert got == pytest.approx(float(np.quantile(a, q, method="linear")), rel=1e-12, abs=0)
    assert np.quantile(a, q, method="lower") <= got <= np.quantile(a, q, method="higher")
    if q == 0.5:
        assert got == float(np.median(a))  # the paper's median, exactly


def test_quantiles_are_monotone_in_q():
    rng = np.random.default_rng(0)
    v = sorted(rng.lognormal(5, 2, 101).tolist())
    qs = np.linspace(0, 1, 41)
    vals = [sorted_quantile(v, float(q)) for q in qs]
    assert all(a <= b for a, b in zip(vals, vals[1:], strict=False))


@st.composite
def _schedules(draw):
    n = draw(st.integers(1, 25))
    rows = []
    for i in range(n):
        start = draw(st.integers(0, 60))
        rows.append((f"j{i}", draw(st.sampled_from(["p", "q"])), draw(st.sampled_from([1, 2])),
                     draw(st.sampled_from([None, "x", "y"])), float(start),
                     float(draw(st.integers(1, 40))) + draw(st.sampled_from([0.0, 0.25, 0.1]))))
    return rows, draw(st.integers(1, 3)), draw(quantiles)


@settings(max_examples=80, deadline=None)
@given(_schedules())
def test_offline_quantile_equals_the_online_history_bit_for_bit(case):
    rows, min_count, q = case
    ids, pools, gpus, tags, start, dur = (list(c) for c in zip(*rows, strict=True))
    sched = pl.DataFrame({"job_id": ids, "pool": pools, "num_gpus": gpus, "tag": tags,
                          "submit_time": [0.0] * len(ids), "duration": dur,
                          "start_time": start, "end_time": np.add(start, dur)},
                         schema_overrides={"tag": pl.String})
    offline = point_in_time_history(sched, min_count=min_count, quantile=q)
    pool_code = {p: i for i, p in enumerate(sorted(set(pools)))}
    tag_code = {t: i for i, t in enumerate(sorted({t for t in tags if t is not None}))}
    trace = SimpleNamespace(n_pools=len(pool_code), duration=np.array(dur),
                            pool=np.array([pool_code[p] for p in pools]), num_gpus=np.array(gpus),
                            tag_code=np.array([-1 if t is None else tag_code[t] for t in tags]))
    view = SimpleNamespace(trace=trace)
    end = np.add(start, dur)
    for j in range(len(ids)):
        h = OnlineDurationHistory(min_count)
        h.start(trace)
        h.add(trace, np.flatnonzero(end <= start[j]))
        want = h.quantile_s(view, np.array([j]), q)[0]
        got = offline["hist_quantile_s"][j]
        if math.isnan(want):
            assert got is None
        else:
            assert got == want, (j, got, want)
            assert offline["hist_median_s"][j] == h.median_s(view, np.array([j]))[0]


def _calibration_schedule():
    """One pool, one job a minute: 70% run 3 min, 30% run 100 min (the SIA A.1 shape)."""
    rng = np.random.default_rng(1)
    n = 400
    dur = np.where(rng.random(n) < 0.7, 3 * MIN, 100 * MIN)
    start = np.arange(n) * 10 * MIN
    return pl.DataFrame({"job_id": [f"j{i}" for i in range(n)], "pool": ["p"] * n,
                         "num_gpus": [1] * n, "tag": [None] * n, "submit_time": start,
                         "duration": dur, "start_time": start, "end_time": start + dur},
                        schema_overrides={"tag": pl.String})


def test_calibration_picks_the_smallest_quantile_meeting_the_target():
    sched = _calibration_schedule()
    lo, hi = 60 * 10 * MIN, float(sched["submit_time"].max()) + 1  # after 60 jobs of history
    rates = {}
    for q in (0.5, 0.6, 0.7, 0.75, 0.8, 0.9):
        hist = point_in_time_history(sched, quantile=q)
        rates[q] = evaluate_history(sched, hist, lo, hi, quantile=q)["under_rate"]
    # the median says "3 min" for everyone: every 100-min job is under-predicted
    period = sched.filter(pl.col("submit_time") >= lo)
    true_long = float(np.mean(duration_bin_of(period["duration"].to_numpy()) == 2))
    assert rates[0.5] == pytest.approx(true_long, abs=0.02)
    assert rates[0.9] == 0.0  # the 0.9-quantile of a 70/30 mix is the long mode
    assert all(rates[a] >= rates[b] for a, b in zip(list(rates), list(rates)[1:], strict=False))
    got = calibrate_quantile(sched, lo, hi, 0.01)
    assert got["met"] and got["under_rate"] <= 0.01
    smaller = [q for q in (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9) if q < got["quantile"]]
    for q in smaller:  # each smaller grid quantile misses the target
        hist = point_in_time_history(sched, quantile=q)
        assert evaluate_history(sched, hist, lo, hi, quantile=q)["under_rate"] > 0.01
    loose = calibrate_quantile(sched, lo, hi, 1.0)
    assert loose["quantile"] == 0.5 and loose["met"]
    with pytest.raises(ValueError, match="under-prediction"):
        calibrate_quantile(sched, lo, hi, -0.1)


def test_calibration_says_when_no_quantile_meets_the_target():
    sched = _calibration_schedule()
    # the first job has no history: the fallback bin 0 under-predicts it whatever the quantile
    got = calibrate_quantile(sched, 0.0, 1e9, 0.0, fallback_bin=0)
    assert got == {"quantile": 1.0, "under_rate": got["under_rate"], "met": False,
                   "target_under": 0.0} and got["under_rate"] > 0


def test_learned_forecaster_bins_the_registered_quantile_during_a_replay():
    from sia.data.synthetic import generate_workload
    from sia.models.forecaster import LearnedForecaster
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.registry import make_policy

    jobs, pools = generate_workload("base", 2, days=1.5)
    f50 = LearnedForecaster({}, duration_config={"min_count": 3, "fallback_bin": 3})
    f50b = LearnedForecaster({}, duration_config={"min_count": 3, "fallback_bin": 3,
                                                   "quantile": 0.5})
    f90 = LearnedForecaster({}, duration_config={"min_count": 3, "fallback_bin": 3,
                                                  "quantile": 0.9})
    seen = []

    class Probe:
        name = "probe"

        def __init__(self):
            self.inner = make_policy("fcfs")

        def reset(self, trace, cluster):
            self.inner.reset(trace, cluster)

        def decide(self, view):
            jobs_now = np.arange(int(view.n_arrived))
            seen.append((f50.duration_bins(view, jobs_now), f50b.duration_bins(view, jobs_now),
                         f90.duration_bins(view, jobs_now)))
            return self.inner.decide(view)

    simulate(jobs, pools, Probe())
    assert len(seen) > 50
    for b50, b50b, b90 in seen:
        np.testing.assert_array_equal(b50, b50b)  # no quantile in the config = the median
        assert (b90 >= b50).all()  # a higher quantile never predicts a shorter bin
    assert any((b90 > b50).any() for b50, _, b90 in seen)


def test_offline_history_quantile_column_and_errors():
    from sia.data.errors import TraceError

    sched = _calibration_schedule()
    assert "hist_quantile_s" not in point_in_time_history(sched).columns
    assert point_in_time_history(sched.head(0), quantile=0.9).columns == [
        "job_id", "hist_median_s", "hist_quantile_s", "hist_count", "hist_source"]
    h = point_in_time_history(sched, quantile=0.5)
    assert h["hist_quantile_s"].equals(h["hist_median_s"], null_equal=True)
    with pytest.raises(TraceError, match="quantile"):
        point_in_time_history(sched, quantile=1.1)
