"""Table 9 features on small hand-made schedules, counted by hand, window edges included."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sia.data.errors import ConfigError, TraceError
from sia.features.table9 import (
    EXTRA_COLUMNS,
    FEATURE_COLUMNS,
    FEATURE_GROUPS,
    KEY_COLUMNS,
    LABEL_COLUMNS,
    OUTPUT_SCHEMA,
    TABLE9_GROUPS,
    TIME_COLUMNS,
    build_features,
    held_across,
    make_grid,
    window_features,
)

H = 3600.0
D = 86400.0


def test_contract_names_and_order():
    assert list(FEATURE_GROUPS) == ["periodic", "recent_arrivals", "recent_completions",
                                    "future_completions", "rhythm", "held"]
    assert TABLE9_GROUPS == tuple(list(FEATURE_GROUPS)[:-1])  # held: only with recorded holds
    assert FEATURE_COLUMNS == [c for g in FEATURE_GROUPS.values() for c in g]
    assert len(FEATURE_COLUMNS) == 22 and len(set(FEATURE_COLUMNS)) == 22
    assert FEATURE_COLUMNS[-2:] == ["held_jobs", "held_gpus"]
    assert KEY_COLUMNS == ["pool", "t", "k_min"]
    assert LABEL_COLUMNS == ["label_arrival", "label_load_gpus"]
    assert not set(EXTRA_COLUMNS) & set(FEATURE_COLUMNS)


def test_output_schema_and_sort(make_schedule):
    s = make_schedule([
        {"pool": "b", "submit": 0, "start": 0, "end": 100},
        {"pool": "a", "submit": 400, "start": 400, "end": 900},
    ])
    tab = build_features(s, end_s=1200)
    assert dict(tab.schema) == OUTPUT_SCHEMA
    assert tab.height == 3 * 2 * 5  # windows x pools x grid points 0..1200
    assert tab.equals(tab.sort(["k_min", "pool", "t"], maintain_order=True))
    assert tab["t"].unique().sort().to_list() == [0.0, 300.0, 600.0, 900.0, 1200.0]


def test_periodic_edges_open_left_closed_right(make_schedule, pick_row):
    # t = 1 h, k = 5 min, p = 1 h, x = 1: window (0, 300].
    s = make_schedule([{"submit": v, "start": v, "end": v + 1} for v in (0, 300, 301)])
    tab = build_features(s, windows_min=(5,), start_s=0, end_s=2 * H)
    r = pick_row(tab, "p", H, 5)
    assert r["periodic_1h_x1"] == 1  # only the job at 300: 0 is excluded, 301 is past k
    assert r["periodic_1h_x2"] == 0  # (-3600, -3300]
    # t = 1 h + 5 min: window (300, 600]: 300 excluded, 301 included.
    assert pick_row(tab, "p", H + 300, 5)["periodic_1h_x1"] == 1
    # x = 2 at t = 2 h: (0, 300] again.
    assert pick_row(tab, "p", 2 * H, 5)["periodic_1h_x2"] == 1


def test_periodic_daily(make_schedule, pick_row):
    s = make_schedule([{"submit": v, "start": v, "end": v + 10} for v in (100, 200, D + 150)])
    tab = build_features(s, windows_min=(5,), start_s=0, end_s=2 * D + 300)
    r = pick_row(tab, "p", 2 * D, 5)
    assert r["periodic_1d_x1"] == 1  # (1 d, 1 d + 300] holds D + 150
    assert r["periodic_1d_x2"] == 2  # (0, 300] holds 100 and 200
    assert r["periodic_1d_x3"] == 0  # (-1 d, -1 d + 300]


def test_periodic_window_cut_at_t_when_k_exceeds_period(make_schedule, pick_row):
    # k = 720 min > p = 1 h: (t - 1 h, t - 1 h + 12 h] would reach 11 h past t; it stops at t.
    subs = (3600, 5000, 7200, 7201, 9000)
    s = make_schedule([{"submit": v, "start": v, "end": v + 10} for v in subs])
    tab = build_features(s, windows_min=(720,), start_s=0, end_s=3 * H)
    r = pick_row(tab, "p", 2 * H, 720)
    assert r["periodic_1h_x1"] == 2  # (3600, 7200]: 5000 and 7200 (at t); 7201 and 9000 are future
    assert r["periodic_1h_x2"] == 3  # (0, 7200]
    assert r["periodic_1h_x3"] == 3  # (-3600, 7200]
    assert r["periodic_1d_x1"] == 0  # (-86400 + ..., cut at t]: (-79200, -36000] is empty
    # The label is where the future shows: (7200, 7200 + 12 h] holds 7201 and 9000.
    assert r["label_arrival"] == 1


def test_recent_arrivals_closed_both_ends(make_schedule, pick_row):
    subs = (599, 600, 3299, 3300, 3600, 3601)
    s = make_schedule([{"submit": v, "start": v, "end": v + 1} for v in subs])
    tab = build_features(s, windows_min=(5,), start_s=0, end_s=2 * H)
    r = pick_row(tab, "p", H, 5)
    assert r["arrivals_x1"] == 2  # [3300, 3600]
    assert r["arrivals_x10"] == 4  # [600, 3600]: 600, 3299, 3300, 3600
    assert r["arrivals_x100"] == 5  # [-26400, 3600]
    # 60 min window at t = 1 h: [0, 3600] holds everything submitted so far.
    tab60 = build_features(s, windows_min=(60,), start_s=0, end_s=2 * H)
    assert pick_row(tab60, "p", H, 60)["arrivals_x1"] == 5


def test_recent_completions_closed_both_ends(make_schedule, pick_row):
    ends = (599, 600, 3299, 3300, 3600, 3601)
    s = make_schedule([{"submit": 0, "start": 0, "end": v} for v in ends])
    tab = build_features(s, windows_min=(5,), start_s=0, end_s=2 * H)
    r = pick_row(tab, "p", H, 5)
    assert r["completions_x1"] == 2  # [3300, 3600]
    assert r["completions_x10"] == 4  # [600, 3600]
    assert r["completions_x100"] == 5
    assert r["arrivals_x1"] == 0 and r["arrivals_x100"] == 6


def test_labels_open_left_closed_right(make_schedule, pick_row):
    rows = [{"submit": v, "start": v, "end": v + 5, "gpus": g}
            for v, g in ((3600, 1), (3900, 2), (3901, 4), (7000, 8))]
    s = make_schedule(rows)
    tab = build_features(s, windows_min=(5, 60), start_s=0, end_s=2 * H)
    r5 = pick_row(tab, "p", H, 5)
    assert r5["label_arrival"] == 1 and r5["label_load_gpus"] == 2.0  # (3600, 3900]
    r60 = pick_row(tab, "p", H, 60)
    assert r60["label_arrival"] == 1 and r60["label_load_gpus"] == 2.0 + 4.0 + 8.0
    r = pick_row(tab, "p", 3900, 5)  # (3900, 4200]: 3901
    assert r["label_load_gpus"] == 4.0
    r = pick_row(tab, "p", 4200, 5)  # (4200, 4500]: nothing
    assert r["label_arrival"] == 0 and r["label_load_gpus"] == 0.0
    assert tab["label_arrival"].dtype == pl.Int8


def test_future_completions_use_expected_not_true_end(make_schedule, pick_row):
    t, k = 3600.0, 300.0
    rows = [
        {"id": "exact", "submit": 0, "start": 3000, "end": 99999},      # exp end t + k: within
        {"id": "after", "submit": 0, "start": 3000, "end": 3700},       # exp end t + k + 1: after
        {"id": "overdue", "submit": 0, "start": 100, "end": 50000},     # exp end < t: within
        {"id": "unknown", "submit": 0, "start": 200, "end": 3601},      # no history: after
        {"id": "starts_at_t", "submit": 0, "start": t, "end": t + 10},  # running: within
        {"id": "ends_at_t", "submit": 0, "start": 0, "end": t},         # finished, not running
        {"id": "later", "submit": 0, "start": t + 1, "end": t + 2},     # pending at t
    ]
    s = make_schedule(rows)
    exp = pl.DataFrame({
        "job_id": ["exact", "after", "overdue", "unknown", "starts_at_t", "ends_at_t", "later"],
        "hist_median_s": [t + k - 3000, t + k + 1 - 3000, 1000.0, None, 5.0, 1.0, 1.0],
    })
    tab = build_features(s, windows_min=(5,), start_s=0, end_s=2 * H, expected_duration=exp)
    r = pick_row(tab, "p", t, 5)
    assert r["future_completions_within_k"] == 3  # exact, overdue, starts_at_t
    assert r["future_completions_after_k"] == 2  # after, unknown
    assert r["running_jobs"] == 5
    assert r["pending_jobs"] == 1
    assert r["completions_x1"] == 1  # ends_at_t


def test_future_completions_default_history(make_schedule, pick_row):
    # Two 1000 s jobs finish, then a job starts at 2000 with expected end 3000 (true end 9000).
    rows = [
        {"submit": 0, "start": 0, "end": 1000},
        {"submit": 0, "start": 500, "end": 1500},
        {"submit": 1800, "start": 2000, "end": 9000},
    ]
    tab = build_features(make_schedule(rows), windows_min=(5, 60), start_s=0, end_s=3 * H)
    r = pick_row(tab, "p", 2700, 5)  # expected end 3000 in [2700, 3000]
    assert (r["future_completions_within_k"], r["future_completions_after_k"]) == (1, 0)
    r = pick_row(tab, "p", 2400, 5)  # 3000 > 2700: after
    assert (r["future_completions_within_k"], r["future_completions_after_k"]) == (0, 1)
    r = pick_row(tab, "p", 2400, 60)
    assert (r["future_completions_within_k"], r["future_completions_after_k"]) == (1, 0)


def test_counts_are_consistent_with_bruteforce(make_schedule):
    rng = np.random.default_rng(7)
    n = 60
    submit = np.sort(rng.integers(0, 3 * D, n)).astype(float)
    start = submit + rng.integers(0, 2 * H, n)
    end = start + rng.integers(1, 6 * H, n)
    pools = rng.choice(["a", "b", "c"], n)
    s = make_schedule([{"pool": p, "submit": a, "start": b, "end": c}
                       for p, a, b, c in zip(pools, submit, start, end, strict=True)])
    tab = build_features(s, grid_s=1800.0, end_s=3 * D)
    for r in tab.sample(200, seed=1).iter_rows(named=True):
        t, k = r["t"], 60.0 * r["k_min"]
        m = pools == r["pool"]
        sub, fin = submit[m], end[m]
        assert r["arrivals_x10"] == np.sum((sub >= t - 10 * k) & (sub <= t))
        assert r["completions_x100"] == np.sum((fin >= t - 100 * k) & (fin <= t))
        lo = t - 2 * D
        assert r["periodic_1d_x2"] == np.sum((sub > lo) & (sub <= min(lo + k, t)))
        assert r["label_arrival"] == int(np.any((sub > t) & (sub <= t + k)))
        run = (start[m] <= t) & (end[m] > t)
        assert r["running_jobs"] == run.sum()
        assert r["future_completions_within_k"] + r["future_completions_after_k"] == run.sum()


def test_empty_pool_late_pool_single_job_long_job(make_schedule, pick_row):
    rows = [
        {"pool": "late", "submit": 2 * D, "start": 2 * D, "end": 2 * D + 60},
        {"pool": "long", "submit": 0, "start": 0, "end": 100 * D},  # runs past the trace
    ]
    tab = build_features(make_schedule(rows), pools=["empty", "late", "long"])
    assert set(tab["pool"].unique()) == {"empty", "late", "long"}
    counts = [c for c in FEATURE_COLUMNS if c not in TIME_COLUMNS]
    empty = tab.filter(pl.col("pool") == "empty")
    assert empty.select([*counts, *LABEL_COLUMNS, *EXTRA_COLUMNS]).sum().row(0) == (0,) * 22
    assert empty["since_arrival_s"].is_nan().all() and empty["since_completion_s"].is_nan().all()
    before = tab.filter((pl.col("pool") == "late") & (pl.col("t") < 2 * D - 720 * 60))
    assert before.select([*counts, *LABEL_COLUMNS]).sum().row(0) == (0,) * 20
    r = pick_row(tab, "late", 2 * D, 5)
    assert r["arrivals_x1"] == 1 and r["running_jobs"] == 1
    long = tab.filter(pl.col("pool") == "long")
    assert (long["running_jobs"] == 1).all() and (long["completions_x100"] == 0).all()
    assert (long["future_completions_after_k"] == 1).all()  # no history: unknown end


def test_single_job_and_empty_schedule(make_schedule):
    one = build_features(make_schedule([{"submit": 10, "start": 10, "end": 20}]))
    assert one.height == 3 and one["t"].to_list() == [0.0] * 3
    assert one["label_arrival"].to_list() == [1, 1, 1]  # (0, k] holds the job at 10
    empty = make_schedule([])
    assert build_features(empty).height == 0
    tab = build_features(empty, pools=["x"], start_s=0, end_s=600)
    counts = [c for c in FEATURE_COLUMNS if c not in TIME_COLUMNS]
    assert tab.height == 9 and tab.select(counts).sum().row(0) == (0,) * 18


def test_rhythm_features_by_hand(make_schedule, pick_row):
    """since_* count from the last event at or before t (closed at t); clock from t; 1 h / 1 day counts."""
    rows = [
        {"submit": 100, "start": 100, "end": 700},
        {"submit": 2 * H, "start": 2 * H, "end": 2 * H + 300},
        {"submit": 2 * H + 600, "start": 2 * H + 600, "end": 3 * H},
        {"submit": D + 2 * H, "start": D + 2 * H, "end": D + 3 * H},
    ]
    tab = build_features(make_schedule(rows), start_s=0, end_s=D + 3 * H)
    r = pick_row(tab, "p", 0.0, 60)
    assert np.isnan(r["since_arrival_s"]) and np.isnan(r["since_completion_s"])
    assert r["hour_of_day"] == 0.0 and r["day_of_week"] == 0.0
    r = pick_row(tab, "p", 2 * H + 600, 5)  # a submission exactly at t counts
    assert r["since_arrival_s"] == 0.0 and r["since_completion_s"] == 300.0
    assert r["arrivals_1h"] == 2 and r["arrivals_1d"] == 3
    assert r["hour_of_day"] == pytest.approx(2 + 600 / H, rel=1e-6)
    r = pick_row(tab, "p", D + 3 * H, 720)  # a day later: one job in the last day, 1 h ago
    assert r["since_arrival_s"] == H and r["since_completion_s"] == 0.0
    assert r["arrivals_1h"] == 1 and r["arrivals_1d"] == 1  # [t - 1 day, t] starts at D + 3 H
    assert r["day_of_week"] == 1.0 and r["hour_of_day"] == 3.0
    # the rhythm counts do not depend on k
    assert pick_row(tab, "p", D + 3 * H, 5)["arrivals_1d"] == 1


def test_bad_input_is_named(make_schedule):
    s = make_schedule([{"submit": 10, "start": 10, "end": 20}])
    with pytest.raises(TraceError, match="start_time"):
        build_features(s.drop("start_time"))
    with pytest.raises(TraceError, match="before they are submitted"):
        build_features(s.with_columns(pl.lit(0.0).alias("start_time")))
    with pytest.raises(ConfigError, match="windows_min"):
        build_features(s, windows_min=(0,))
    with pytest.raises(ConfigError, match="grid_s"):
        build_features(s, grid_s=0)
    with pytest.raises(ConfigError, match="unlisted pool"):
        build_features(s, pools=["q"])


def test_make_grid_floors_start_and_keeps_end(make_schedule):
    s = make_schedule([{"submit": 450, "start": 450, "end": 500},
                       {"submit": 1200, "start": 1200, "end": 1300}])
    assert make_grid(s, 300.0).tolist() == [300.0, 600.0, 900.0, 1200.0]
    assert make_grid(s, 300.0, start_s=0, end_s=1199).tolist() == [0.0, 300.0, 600.0, 900.0]


def test_the_grid_size_is_known_before_the_grid_and_refused_past_the_limit():
    from sia.data.errors import ConfigError
    from sia.features.table9 import check_feature_rows, grid_count, make_grid

    for times, grid_s in (([0.0, 1000.0], 300.0), ([5.0, 5.0], 60.0), ([301.0, 1200.0], 300.0)):
        sched = pl.DataFrame({"submit_time": times})
        assert grid_count(np.array(times), grid_s) == make_grid(sched, grid_s).size
    assert grid_count(np.array([0.0, 1e300]), 1e-6) > 10**300  # counted, never allocated
    assert check_feature_rows(2, 10, 3, 300.0) == 60
    with pytest.raises(ConfigError, match=r"--grid-s 1e-06: the feature table would have 6e\+12 "
                                          r"rows \(2 pools x 1e\+12 times .*more than --max-rows "
                                          r"20,000,000"):
        check_feature_rows(2, 10**12, 3, 1e-6)
    with pytest.raises(ConfigError, match=r"--max-rows 50"):
        check_feature_rows(2, 10, 3, 300.0, max_rows=50)


def test_window_features_yield_the_tables_rows_window_by_window(make_schedule):
    rng = np.random.default_rng(3)
    n = 40
    submit = np.sort(rng.integers(0, 2 * D, n)).astype(float)
    end = submit + rng.integers(1, 8 * H, n)
    s = make_schedule([{"pool": p, "submit": a, "start": a, "end": b}
                       for p, a, b in zip(rng.choice(["a", "b"], n), submit, end, strict=True)])
    whole = build_features(s, grid_s=900.0, windows_min=(60, 5, 720))
    parts = list(window_features(s, grid_s=900.0, windows_min=(60, 5, 720)))
    assert [k for k, _ in parts] == [5, 60, 720]
    for k, table in parts:
        assert table.equals(whole.filter(pl.col("k_min") == k))
    assert pl.concat([t for _, t in parts]).equals(whole)
    with pytest.raises(ConfigError, match="more than the limit"):  # checked before any window
        window_features(s, grid_s=900.0, max_rows=10)


def test_build_features_refuses_a_table_past_its_limit(make_schedule):
    s = make_schedule([{"pool": "a", "submit": 0, "start": 0, "end": 600}])
    # end_s 1200 on a 300 s grid: 5 times x 1 pool x 3 windows = 15 rows
    assert build_features(s, end_s=1200, max_rows=15).height == 15
    with pytest.raises(ConfigError, match=r"15 rows .*more than the limit of 14 rows; use a "
                                          r"coarser --grid-s"):
        build_features(s, end_s=1200, max_rows=14)


def test_held_jobs_count_from_their_submission_until_they_arrive(make_schedule, pick_row):
    # pool a: job 0 submitted at 100, held until it became eligible at 1000 (hold 900 s), 2 GPUs;
    # job 1 at 400, held 500 s -> arrives 900, 4 GPUs; job 2 at 700, not held. Pool b: one job
    # held from 250 to 650. At t: held = submitted by t (submit - hold <= t) and t < submit.
    s = make_schedule([
        {"pool": "a", "submit": 1000, "start": 1000, "end": 2000, "gpus": 2},
        {"pool": "a", "submit": 900, "start": 900, "end": 1500, "gpus": 4},
        {"pool": "a", "submit": 700, "start": 700, "end": 800},
        {"pool": "b", "submit": 650, "start": 650, "end": 700},
    ]).with_columns(pl.Series("hold_time", [900.0, 500.0, 0.0, 400.0]))
    tab = build_features(s, start_s=0.0, end_s=1200.0)
    want = {  # t -> {pool: (held_jobs, held_gpus)}, by hand
        0.0: {"a": (0, 0), "b": (0, 0)},
        300.0: {"a": (1, 2), "b": (1, 1)},     # job 0 known at 100; b's at 250
        600.0: {"a": (2, 6), "b": (1, 1)},     # job 1 known at 400
        900.0: {"a": (1, 2), "b": (0, 0)},     # job 1 arrived at 900 (t < submit fails)
        1200.0: {"a": (0, 0), "b": (0, 0)},
    }
    for t, pools in want.items():
        for pool, (n, g) in pools.items():
            for k in (5, 60, 720):  # the same for every window
                row = pick_row(tab, pool, t, k)
                assert (row["held_jobs"], row["held_gpus"]) == (n, g), (t, pool, k)
    # without the column (or with it empty) nobody is held
    plain = build_features(s.drop("hold_time"), start_s=0.0, end_s=1200.0)
    assert plain["held_jobs"].sum() == 0 and plain["held_gpus"].sum() == 0
    nulls = build_features(s.with_columns(pl.lit(None, dtype=pl.Float64).alias("hold_time")),
                           start_s=0.0, end_s=1200.0)
    assert nulls.drop("held_jobs", "held_gpus").equals(tab.drop("held_jobs", "held_gpus"))
    assert nulls["held_jobs"].sum() == 0


def test_a_job_held_across_a_cut_still_counts_before_it(make_schedule, pick_row):
    """A table cut at 1,000 s by arrival loses job x (known at 400, arriving at 1,500, 2 GPUs);
    held_across finds it and the held columns count it from 400 on, as the whole table does."""
    whole = make_schedule([
        {"pool": "a", "submit": 100, "start": 100, "end": 200},
        {"pool": "a", "submit": 1500, "start": 1500, "end": 1600, "gpus": 2, "id": "x"},
        {"pool": "b", "submit": 1200, "start": 1200, "end": 1300, "id": "y"},  # not held
    ]).with_columns(pl.Series("hold_time", [0.0, 1100.0, 0.0]))
    cut = whole.filter(pl.col("submit_time") < 1000.0)
    across = held_across(whole, 1000.0)
    assert across.select("pool", "submit_time", "hold_time", "num_gpus").rows() == [
        ("a", 1500.0, 1100.0, 2)]
    assert held_across(whole, 300.0) is None  # x is not yet known at 300
    assert held_across(whole.drop("hold_time"), 1000.0) is None
    kw = dict(start_s=0.0, end_s=900.0, pools=["a", "b"])
    full = build_features(whole, **kw)
    lost = build_features(cut, **kw)
    kept = build_features(cut, held_after=across, **kw)
    for t, want in ((300.0, 0), (600.0, 1), (900.0, 1)):
        assert pick_row(kept, "a", t, 5)["held_jobs"] == want
        assert pick_row(kept, "a", t, 5)["held_gpus"] == 2 * want
        assert pick_row(lost, "a", t, 5)["held_jobs"] == 0  # the cut loses it
    held = ["held_jobs", "held_gpus"]
    assert kept.select(held).equals(full.select(held))
    assert kept.drop(held).equals(lost.drop(held))  # nothing but the held columns changes
