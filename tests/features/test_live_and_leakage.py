"""Live features equal the batch table; no feature at t depends on anything after t."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.features.live import LiveState, PoolState, features_at, lookback_s
from sia.features.table9 import (
    COUNT_COLUMNS,
    EXTRA_COLUMNS,
    FEATURE_COLUMNS,
    HELD_COLUMNS,
    TIME_COLUMNS,
    build_features,
)

GRID = 600.0
END = 2 * 86400.0  # two days: long enough for the daily periodic features
WINDOWS = (5, 60, 720)


@st.composite
def _jobs(draw, max_jobs=30):
    """Random schedules on a 2-day span; times on a 100 s lattice so ties with the grid occur."""
    n = draw(st.integers(0, max_jobs))
    rows = []
    for i in range(n):
        submit = 100.0 * draw(st.integers(0, int(END / 100)))
        start = submit + 100.0 * draw(st.integers(0, 40))
        end = start + 100.0 * draw(st.integers(1, 200))
        rows.append({"id": f"j{i}", "pool": draw(st.sampled_from(["a", "b", "c"])),
                     "submit": submit, "start": start, "end": end,
                     "gpus": draw(st.sampled_from([1, 2, 4])),
                     "tag": draw(st.sampled_from([None, "x", "y"]))})
    return rows


def _batch(sched: pl.DataFrame) -> pl.DataFrame:
    return build_features(sched, grid_s=GRID, start_s=0.0, end_s=END, windows_min=WINDOWS,
                          pools=["a", "b", "c"])


COLS = ["pool", "t", "k_min", *FEATURE_COLUMNS, *EXTRA_COLUMNS]


@settings(max_examples=40, deadline=None)
@given(_jobs(), st.lists(st.integers(0, int(END / GRID)), min_size=1, max_size=4))
def test_live_equals_batch(make_schedule, rows, grid_idx):
    sched = make_schedule(rows)
    batch = _batch(sched)
    for i in grid_idx:
        t = i * GRID
        state = LiveState.from_schedule(sched, t)
        live = features_at(state, t, WINDOWS, pools=["a", "b", "c"])
        want = batch.filter(pl.col("t") == t).select(COLS)
        assert live.select(COLS).equals(want), (t, live, want)


@settings(max_examples=40, deadline=None)
@given(_jobs(), st.integers(0, int(END / GRID)), st.data())
def test_no_leakage(make_schedule, rows, i, data):
    """Change every job submitted after t, and the true end of every job running at t: features at t stay."""
    t = i * GRID
    changed = []
    for r in rows:
        r2 = dict(r)
        if r["submit"] > t:
            r2["submit"] = t + 100.0 * data.draw(st.integers(1, 300))
            r2["start"] = r2["submit"] + 100.0 * data.draw(st.integers(0, 10))
            r2["end"] = r2["start"] + 100.0 * data.draw(st.integers(1, 100))
            r2["gpus"] = data.draw(st.sampled_from([1, 8]))
            r2["pool"] = data.draw(st.sampled_from(["a", "b", "c"]))
            r2["tag"] = data.draw(st.sampled_from([None, "x", "z"]))
        elif r["start"] <= t < r["end"]:
            r2["end"] = t + 100.0 * data.draw(st.integers(1, 500))
        changed.append(r2)
    # ... and add some jobs in the future.
    for j in range(data.draw(st.integers(0, 3))):
        s = t + 100.0 * data.draw(st.integers(1, 300))
        changed.append({"id": f"new{j}", "pool": "a", "submit": s, "start": s, "end": s + 100.0})
    a = _batch(make_schedule(rows)).filter(pl.col("t") == t).select(COLS)
    b = _batch(make_schedule(changed)).filter(pl.col("t") == t).select(COLS)
    assert a.equals(b)


def test_features_at_missing_pool_and_empty_state():
    state = LiveState(t=1000.0, pools={"a": PoolState()})
    out = features_at(state, 1000.0, (5,), pools=["a", "zz"])
    assert out["pool"].to_list() == ["a", "zz"]
    counts = [c for c in FEATURE_COLUMNS if c not in TIME_COLUMNS]
    assert out.select(counts).sum().row(0) == (0,) * len(counts)
    # no arrival or completion yet: unknown; the clock features are t's own
    assert out.select("since_arrival_s", "since_completion_s").null_count().row(0) == (0, 0)
    assert out["since_arrival_s"].is_nan().all() and out["since_completion_s"].is_nan().all()
    assert out["hour_of_day"].to_list() == [float(np.float32(1000.0 / 3600.0))] * 2
    assert out["day_of_week"].to_list() == [0.0, 0.0]
    assert set(COUNT_COLUMNS) | set(TIME_COLUMNS) | set(HELD_COLUMNS) | {
        "future_completions_within_k", "future_completions_after_k"} == set(FEATURE_COLUMNS)
    assert features_at(LiveState(t=0.0), 0.0, (5,)).height == 0


def test_lookback_covers_every_window():
    assert lookback_s((5, 60, 720)) == 100 * 720 * 60.0
    assert lookback_s((5,)) == 3 * 86400.0


@settings(max_examples=40, deadline=None)
@given(_jobs(), st.lists(st.integers(0, 40), min_size=30, max_size=30), st.integers(0, int(END / GRID)),
       st.data())
def test_held_jobs_live_equal_batch_and_read_nothing_after_t(make_schedule, rows, holds, i, data):
    """With holds (hold_time: known from submit - hold), the live state's held columns are the
    batch table's; and moving a held job's arrival anywhere after t (known when it was) or
    changing any job known after t leaves the features at t as they were."""
    t = i * GRID

    def held(rs, hs):
        return make_schedule(rs).with_columns(pl.Series("hold_time", hs, dtype=pl.Float64))

    hs = [100.0 * h for h in holds[:len(rows)]]
    sched = held(rows, hs)
    want = _batch(sched).filter(pl.col("t") == t).select(COLS)
    live = features_at(LiveState.from_schedule(sched, t), t, WINDOWS, pools=["a", "b", "c"])
    assert live.select(COLS).equals(want), (t, live, want)
    moved, moved_h = [], []
    for r, h in zip(rows, hs, strict=True):
        r2, h2 = dict(r), h
        if r["submit"] - h > t:  # not known yet: anything may change
            r2["submit"] = t + 100.0 * data.draw(st.integers(1, 300))
            h2 = 100.0 * data.draw(st.integers(0, 20))
            r2["submit"] += h2  # (known after t still)
        elif r["submit"] > t:  # known, held: it arrives at some time after t
            known = r["submit"] - h
            r2["submit"] = t + 100.0 * data.draw(st.integers(1, 300))
            h2 = r2["submit"] - known
        if r2["submit"] != r["submit"]:
            r2["start"] = r2["submit"] + 100.0 * data.draw(st.integers(0, 10))
            r2["end"] = r2["start"] + 100.0 * data.draw(st.integers(1, 100))
        moved.append(r2)
        moved_h.append(h2)
    got = _batch(held(moved, moved_h)).filter(pl.col("t") == t).select(COLS)
    assert got.equals(want), (t, got, want)
