"""The calibration's timeline (all pools' arrivals in one list, cumulative GPUs on the 5-minute
grid) answers exactly as the per-pool searches it replaced, and as the definitions."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.models.calibration import GRID_S, PoolCalibration, _grid_count

from .conftest import CalTrace, CalView, cal_trace


def _trace(events, names=("a", "b", "c")):
    return cal_trace(events, names)


# submissions on a 50 s lattice (many on the grid itself, several at the same time) and
# forecast times on a 25 s lattice: on and off the grid, some at a submission's exact time
_events = st.lists(st.tuples(st.integers(0, 400).map(lambda x: x * 50.0), st.integers(0, 2),
                             st.integers(1, 8)), min_size=0, max_size=80)
_steps = st.lists(st.tuples(st.integers(1, 60).map(lambda x: x * 25.0), st.integers(0, 3),
                            st.floats(0.0, 1.0)), min_size=1, max_size=60)


def _run(cal: PoolCalibration, trace: CalTrace, steps, start: float, lag_s: float):
    """Feed the calibration forecasts at the steps' times; arrivals reach it ``lag_s`` late
    when the step's flag says so (their grid rows were built before them). Return every
    answer, the rings and the report."""
    out = []
    now = start
    for dt, late, pr in steps:
        now += dt
        seen_to = now - lag_s if late < 2 else now
        n = int(np.searchsorted(trace.submit, seen_to, side="right"))
        view = CalView(trace, now, n)
        base = np.full((trace.n_pools, len(cal.windows_s)), 1.0)
        out.append(cal.load_bound(view, base).tolist())
        proba = np.full((trace.n_pools, len(cal.windows_s)), pr)
        proba[0] = 1.0 - pr
        out.append(cal.arrivals(view, proba).tolist())
    rings = [cal.recent(p, k) for p in range(trace.n_pools) for k in range(len(cal.windows_s))]
    return out, rings, cal.report(trace.pool_names)


@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # set before each use
@given(events=_events, steps=_steps, nw=st.integers(1, 3), memory=st.integers(2, 30),
       windows=st.sampled_from([(300.0,), (300.0, 3600.0), (600.0, 1500.0, 3600.0),
                                (450.0, 3600.0)]),  # the last: one window off the grid
       lag=st.sampled_from([0.0, 100.0, 700.0, 2500.0]), prior=st.booleans(),
       keep=st.sampled_from([0, 3, 40, 8192]))
def test_the_timeline_answers_as_the_per_pool_searches(monkeypatch, events, steps, nw, memory,
                                                       windows, lag, prior, keep):
    # prior: the first third of the events before the replay, primed; keep: grid rows kept
    # before the old ones are dropped
    import sia.models.calibration as calibration

    monkeypatch.setattr(calibration, "_KEEP_ROWS", keep)
    events = sorted(events)
    cut = len(events) // 3 if prior else 0
    start = events[cut][0] if cut < len(events) else 0.0
    trace = _trace(events[cut:])
    results = []
    for reference in (False, True):
        cal = PoolCalibration(windows, n_windows=nw, alpha=0.2, memory=memory, prior_days=1.0)
        if cut:
            cal.prime(np.array([e[0] for e in events[:cut]]), np.array([e[2] for e in events[:cut]]),
                      [trace.pool_names[e[1]] for e in events[:cut]])
        cal.reset(trace.pool_names, start)
        if reference:
            cal.per_pool_searches()
        else:
            assert cal._tl.sorted and any(cal._steps)  # the timeline answers (on the grid)
        results.append(_run(cal, trace, steps, start, lag))
    assert results[0] == results[1]


def _cum(events, p, x):
    return sum(g for s, q, g in events if q == p and s <= x)


@settings(max_examples=100, deadline=None)
@given(events=_events, steps=_steps, nw=st.integers(1, 3))
def test_the_load_scores_and_labels_follow_their_definitions(events, steps, nw):
    # every arrival reaches the calibration at its submission: the scores of the grid records
    # t with t + w <= the last forecast are realized(t, t + w] - max of the nw windows before,
    # over the records that saw an arrival; a forecast's label (one record per 5-minute slot):
    # something arrived in (t, t + w]
    windows = (300.0, 1500.0)
    trace = _trace(events)
    cal = PoolCalibration(windows, n_windows=nw, alpha=0.2, memory=10_000, prior_days=0.0)
    cal.reset(trace.pool_names, 0.0)
    now, times, slots = 0.0, [], set()
    for dt, _, _ in steps:
        now += dt
        view = CalView(trace, now, int(np.searchsorted(trace.submit, now, side="right")))
        cal.load_bound(view, np.zeros((3, 2)))
        cal.arrivals(view, np.full((3, 2), 0.5))
        if math.floor(now / GRID_S) not in slots:
            slots.add(math.floor(now / GRID_S))
            times.append(now)
    for k, w in enumerate(windows):
        grid = np.arange(0.0, now - w + 1e-9, GRID_S).tolist()
        for p in range(3):
            want = []
            for t in grid:
                c = [_cum(events, p, t + w * i) for i in range(-nw, 2)]
                if c[-1] > c[-2]:
                    want.append(c[-1] - c[-2] - max(c[i + 1] - c[i] for i in range(nw)))
            scores, probs = cal.recent(p, k)
            assert scores == want
            positives = [t for t in times if t + w <= now and _cum(events, p, t + w) > _cum(events, p, t)]
            assert probs == [0.5] * len(positives)


def test_arrivals_out_of_submission_order_fall_back_to_the_per_pool_searches():
    # pool a's jobs reach the calibration out of order (as a live service might record them):
    # the timeline gives up, the searches answer, the same as a reference that never used it
    sub = np.array([3000.0, 1000.0, 5000.0, 4000.0])
    trace = CalTrace(sub, np.array([2, 1, 3, 1], dtype=np.int32), np.array([0, 0, 1, 0]),
                   ("a", "b"))
    answers = []
    for reference in (False, True):
        cal = PoolCalibration((300.0, 3600.0), alpha=0.2, memory=20)
        cal.reset(trace.pool_names, 0.0)
        if reference:
            cal.per_pool_searches()
        got = []
        for i, now in enumerate(np.arange(300.0, 20000.0, 300.0)):
            view = CalView(trace, float(now), min(4, i // 4))
            got.append(cal.load_bound(view, np.zeros((2, 2))).tolist())
            got.append(cal.arrivals(view, np.full((2, 2), 0.7)).tolist())
        answers.append((got, cal.report(trace.pool_names)))
        assert not cal._tl.sorted
    assert answers[0] == answers[1]


@settings(max_examples=500, deadline=None)
@given(start=st.integers(-10**6, 10**8).map(lambda x: x * GRID_S),
       span=st.one_of(st.floats(-1e3, 1e6), st.integers(-5, 5000).map(lambda x: x * GRID_S)))
def test_the_grid_count_is_numpys(start, span):
    t_end = start + span
    want = np.arange(start, t_end + 1e-9, GRID_S).size
    assert max(_grid_count(start, t_end), 0) == want


def test_more_jobs_arrived_than_the_trace_holds_is_an_error_naming_both():
    # the arrivals are copied by a compiled call that reads the trace's columns unchecked:
    # a view claiming more arrivals than the trace has must stop, not read past the arrays
    trace = _trace([(0.0, 0, 1), (100.0, 1, 2)])
    cal = PoolCalibration((300.0,), alpha=0.2, memory=20)
    cal.reset(trace.pool_names, 0.0)
    with pytest.raises(ValueError, match=r"n_arrived \(3\) exceeds the trace's 2 jobs"):
        cal.load_bound(CalView(trace, 200.0, 3), np.ones((trace.n_pools, 1)))


def test_the_window_arrays_stay_views_of_the_arrays_the_compiled_loops_take(monkeypatch):
    # the windows' times, steps and resolved counts, and the flags' rings and heads, are views
    # of the one array each that the compiled loops read and write: after a long run (rows
    # and records dropped along the way) each must still be that memory, not a copy
    import sia.models.calibration as calibration

    monkeypatch.setattr(calibration, "_KEEP_ROWS", 3)
    trace = _trace([(50.0 * i, i % 3, 1 + i % 4) for i in range(2400)])
    cal = PoolCalibration((300.0, 3600.0), alpha=0.2, memory=5)
    cal.reset(trace.pool_names, 0.0)
    _run(cal, trace, [(300.0, 0, 0.3)] * 400, 0.0, 0.0)  # (400 records: more than the 256
    # the arrays first hold, so the resolved ones are dropped)
    assert cal.stats["arrival_records"] > 256 and cal.stats["load_scores"] > 0
    fl = cal._flags
    for view, part in ((cal._wins, cal._wn[0]), (cal._next_t, cal._wn[1]),
                       (cal._steps_np, cal._sd[0]), (cal._done, cal._sd[1]),
                       (fl.flags, fl.fm[:, 3:]), (fl.meta, fl.fm[:, :3])):
        assert (view.__array_interface__["data"][0] == part.__array_interface__["data"][0]
                and view.shape == part.shape and view.strides == part.strides)
