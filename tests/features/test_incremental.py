"""The incremental Table 9 builder, fed tick by tick as the forecaster feeds it, equals the batch table."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.features.incremental import IncrementalTable9
from sia.features.table9 import FEATURE_COLUMNS, build_features, expected_ends

from .conftest import schedule

POOLS = ["a", "b", "c"]
WINDOWS = (5, 60, 720)
END = 2 * 86400.0


@st.composite
def _rows(draw, max_jobs=25):
    """Random schedules over two days; times are whole seconds or on a 300 s lattice (ties
    with the grid and with each other), in any pool."""
    n = draw(st.integers(0, max_jobs))
    step = draw(st.sampled_from([1.0, 300.0]))
    rows = []
    for i in range(n):
        submit = step * draw(st.integers(0, int(END / step)))
        start = submit + step * draw(st.integers(0, 12))
        end = start + step * draw(st.integers(1, 300))
        rows.append({"id": f"j{i}", "pool": draw(st.sampled_from(POOLS)), "submit": submit,
                     "start": start, "end": end, "tag": draw(st.sampled_from([None, "x"]))})
    return rows


def _incremental(sched: pl.DataFrame, grid: np.ndarray) -> dict[int, np.ndarray]:
    """Feed the builder as a replay would: every submission first (windows are cut at t), each
    completion once it happened, the running jobs' expected ends at each tick; return, per
    window, the features of every tick stacked in the batch table's (pool, t) order."""
    pool = sched["pool"].replace_strict(POOLS, list(range(len(POOLS))),
                                        return_dtype=pl.Int64).to_numpy()
    start, end = sched["start_time"].to_numpy(), sched["end_time"].to_numpy()
    exp_end = expected_ends(sched) if sched.height else end
    builder = IncrementalTable9(len(POOLS), -1.0, 10 * END,
                                np.bincount(pool, minlength=len(POOLS)))
    builder.add_arrivals(pool, sched["submit_time"].to_numpy())
    by_end = np.argsort(end, kind="stable")
    done = 0
    per_tick = []
    for t in grid:
        while done < by_end.size and end[by_end[done]] <= t:
            j = by_end[done]
            builder.add_completions(int(pool[j]), end[j:j + 1])
            done += 1
        run = (start <= t) & (t < end)
        per_tick.append(builder.features(float(t), WINDOWS, pool[run], exp_end[run]))
    return {k: np.stack([tick[k] for tick in per_tick], axis=1).reshape(-1, len(FEATURE_COLUMNS))
            for k in WINDOWS}


@settings(max_examples=40, deadline=None)
@given(_rows(), st.sampled_from([300.0, 1800.0]))
def test_incremental_equals_batch_at_every_tick(rows, grid_s):
    sched = schedule(rows)
    batch = build_features(sched, grid_s=grid_s, start_s=0.0, end_s=END, windows_min=WINDOWS,
                           pools=POOLS)
    grid = batch.filter(pl.col("k_min") == WINDOWS[0])["t"].unique().sort().to_numpy()
    got = _incremental(sched, grid)
    for k in WINDOWS:
        want = batch.filter(pl.col("k_min") == k).select(FEATURE_COLUMNS).to_numpy()
        np.testing.assert_array_equal(got[k], want.astype(np.float32), err_msg=f"k={k}")


def test_a_completion_counts_once_it_is_added():
    builder = IncrementalTable9(2, 0.0, 1e6, np.array([0, 2]))
    builder.add_arrivals(np.array([1, 1, 0]), np.array([100.0, 400.0, 50.0]))
    none = np.empty(0, dtype=np.int64)
    col = FEATURE_COLUMNS.index("completions_x1")
    arr = FEATURE_COLUMNS.index("arrivals_x1")
    before = builder.features(600.0, (5,), none, np.empty(0))[5]
    builder.add_completions(1, np.array([500.0]))
    after = builder.features(600.0, (5,), none, np.empty(0))[5]
    assert before[1, col] == 0 and after[1, col] == 1 and after[0, col] == 0
    # arrivals in [t - 5 min, t]: pool 1's at 400 s, not the one at 100 s; pool 0's at 50 s neither
    assert after[1, arr] == 1 and after[0, arr] == 0
    # since the last completion: 100 s for pool 1, unknown (NaN) for pool 0
    since = FEATURE_COLUMNS.index("since_completion_s")
    assert after[1, since] == 100.0 and np.isnan(after[0, since])


@settings(max_examples=200, deadline=None)
@given(st.lists(st.integers(0, 40), max_size=60), st.lists(st.integers(-5, 45), max_size=60),
       st.sampled_from(["left", "right"]))
def test_galloping_search_is_numpys_searchsorted(keys, needles, side):
    """Ascending needles (ties with the keys and each other included): the galloping search
    answers what np.searchsorted answers."""
    from sia.features.incremental import search_sorted_needles

    k = np.sort(np.asarray(keys, dtype=np.float64))
    v = np.sort(np.asarray(needles, dtype=np.float64))
    np.testing.assert_array_equal(search_sorted_needles(k, v, side),
                                  np.searchsorted(k, v, side=side))
