"""NewLoadEstimate (sliding max, calibration, metrics) and JobDuration bins on hand cases."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.models.job_duration import duration_metrics, predict_bins
from sia.models.new_load import NewLoadEstimate, load_metrics, sliding_max_for_rows
from sia.scheduler.core.forecast import sliding_max_load


def _jobs(rows):
    return pl.DataFrame(rows, schema={"pool": pl.String, "submit_time": pl.Float64,
                                      "num_gpus": pl.Int32}, orient="row")


def test_sliding_max_by_hand():
    # k = 60 s, N = 3 windows before t = 180: (120,180], (60,120], (0,60]
    jobs = _jobs([("a", 10.0, 4), ("a", 60.0, 1), ("a", 61.0, 2), ("a", 120.0, 2),
                  ("a", 170.0, 1), ("a", 180.0, 2), ("a", 181.0, 99), ("b", 100.0, 8)])
    rows = pl.DataFrame({"pool": ["a", "b", "c", "a"], "t": [180.0, 180.0, 180.0, 0.0]})
    # pool a: (0,60] = 4 + 1 = 5, (60,120] = 2 + 2 = 4, (120,180] = 1 + 2 = 3 -> 5; 181 is future
    assert sliding_max_for_rows(jobs, rows, 60.0, 3).tolist() == [5.0, 8.0, 0.0, 0.0]
    assert sliding_max_for_rows(jobs, rows, 60.0, 1).tolist() == [3.0, 0.0, 0.0, 0.0]
    live = sliding_max_load(jobs["submit_time"].to_numpy()[:6], jobs["num_gpus"].to_numpy()[:6],
                            np.zeros(6, dtype=np.int64), 1, 180.0, 60.0, 3)
    assert live.tolist() == [5.0]


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2000), st.integers(1, 8)),
                min_size=1, max_size=40),
       st.integers(0, 2500), st.sampled_from([60.0, 300.0]), st.integers(1, 4))
def test_training_and_live_sliding_max_agree(events, now, window, n):
    events = sorted(events, key=lambda e: e[1])
    pool = np.array([e[0] for e in events], dtype=np.int64)
    submit = np.array([e[1] for e in events], dtype=np.float64)
    gpus = np.array([e[2] for e in events], dtype=np.int64)
    jobs = pl.DataFrame({"pool": [str(p) for p in pool], "submit_time": submit, "num_gpus": gpus})
    rows = pl.DataFrame({"pool": ["0", "1", "2"], "t": [float(now)] * 3})
    batch = sliding_max_for_rows(jobs, rows, window, n)
    live = sliding_max_load(submit, gpus, pool, 3, float(now), window, n)
    np.testing.assert_array_equal(batch, live)
    # brute force
    for p in range(3):
        sums = [gpus[(pool == p) & (submit > now - (j + 1) * window) & (submit <= now - j * window)].sum()
                for j in range(n)]
        assert live[p] == max(sums)


def test_calibration_reaches_its_target_on_the_data_it_saw():
    rng = np.random.default_rng(0)
    s = rng.integers(0, 5, 2000).astype(float)
    actual = np.where(rng.random(2000) < 0.5, 0.0, s * rng.uniform(0.5, 3, 2000) + (s == 0) * 3)
    cal = NewLoadEstimate("calibrated", alpha=0.2).fit(pl.DataFrame({"sliding_max": s}), actual)
    m = load_metrics(cal.estimate(s), actual)
    assert m["exceedance_rate"] <= 0.2 + 1e-9
    assert cal.estimate(np.array([0.0, 2.0])).tolist() == [cal.empty_, 2 * cal.scale_]


def test_load_metrics_by_hand():
    est = np.array([4.0, 4.0, 4.0, 9.0])
    act = np.array([0.0, 2.0, 6.0, 9.0])  # the window without arrivals does not count
    m = load_metrics(est, act)
    assert m["windows_with_arrivals"] == 3
    assert m["exceedance_rate"] == pytest.approx(1 / 3)
    assert m["mean_over_reservation_gpus"] == pytest.approx(2 / 3)
    assert m["mean_shortfall_gpus"] == pytest.approx(2 / 3)


def test_duration_bins_and_under_prediction_by_hand():
    # medians 60 s (bin 0), 300 s (bin 0: right-closed), 301 s (bin 1), none (fallback 3)
    med = np.array([60.0, 300.0, 301.0, np.nan, 50000.0])
    assert predict_bins(med).tolist() == [0, 0, 1, 3, 3]
    assert predict_bins(med, fallback_bin=0).tolist() == [0, 0, 1, 0, 3]
    true = np.array([0, 1, 1, 2, 2])
    pred = np.array([0, 0, 1, 3, 1])
    m = duration_metrics(true, pred)
    assert m["accuracy"] == pytest.approx(2 / 5)
    assert m["under_rate"] == pytest.approx(2 / 5)
    assert m["over_rate"] == pytest.approx(1 / 5)
    assert m["confusion"][1] == [1, 1, 0, 0]
    assert m["confusion"][2] == [0, 1, 0, 1]


def test_lending_table_by_hand():
    from sia.models.job_duration import lending_table

    # four jobs, true bins 0, 1, 2, 3; P(d <= 5 / 60 / 720 min) per job
    cdf = np.array([[0.9, 0.95, 1.0], [0.7, 0.9, 0.99], [0.1, 0.6, 0.97], [0.0, 0.1, 0.5]])
    rows = {r["window_min"]: r for r in lending_table(cdf, np.array([0, 1, 2, 3]), 0.2)}
    # 5 min: only job 0 has P >= .8, and it fits; the P ranks the one fitting job first
    assert rows[5]["lendable"] == 0.25 and rows[5]["overrun"] == 0.0 and rows[5]["auc"] == 1.0
    # 1 h: jobs 0 and 1 lendable and fit; 720: jobs 0-2 lendable (P >= .8), all fit
    assert rows[60]["lendable"] == 0.5 and rows[60]["overrun"] == 0.0
    assert rows[720]["lendable"] == 0.75 and rows[720]["overrun"] == 0.0
    # a P that ranks a long job above a short one lowers the AUC; a loan past w overruns
    bad = cdf.copy()
    bad[3, 0] = 0.95
    rows = {r["window_min"]: r for r in lending_table(bad, np.array([0, 1, 2, 3]), 0.2)}
    assert rows[5]["auc"] == pytest.approx(2 / 3) and rows[5]["overrun"] == 0.5
    # every job fits 720 min: no AUC
    rows = lending_table(cdf, np.array([0, 0, 1, 2]), 0.2)
    assert np.isnan(rows[2]["auc"])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 5), st.integers(0, 3000), st.integers(1, 8)),
                min_size=0, max_size=60),
       st.lists(st.tuples(st.integers(0, 7), st.integers(0, 3500)), min_size=0, max_size=40),
       st.sampled_from([60.0, 300.0]), st.integers(1, 3))
def test_sliding_max_for_rows_of_many_pools_in_any_order(events, queries, window, n):
    """Rows of several pools in any order (pools 6 and 7 never submit): each row's sliding max is
    the brute-force one, so grouping the rows by pool once changes no answer."""
    jobs = pl.DataFrame({"pool": [f"p{e[0]}" for e in events],
                         "submit_time": [float(e[1]) for e in events],
                         "num_gpus": [e[2] for e in events]},
                        schema={"pool": pl.String, "submit_time": pl.Float64, "num_gpus": pl.Int32})
    rows = pl.DataFrame({"pool": [f"p{q[0]}" for q in queries], "t": [float(q[1]) for q in queries]},
                        schema={"pool": pl.String, "t": pl.Float64})
    got = sliding_max_for_rows(jobs, rows, window, n)
    for (p, t), value in zip(queries, got, strict=True):
        sums = [sum(g for q, s, g in events
                    if q == p and t - (j + 1) * window < s <= t - j * window) for j in range(n)]
        assert value == max(sums)
