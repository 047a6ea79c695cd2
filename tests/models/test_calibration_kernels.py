"""The calibration's fused compiled loops (one call per forecast and side) answer bit for bit
as the per-window and per-record Python they replaced, which the calibration keeps for the
cases the loops leave to it."""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from collections import deque

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.models.calibration import GRID_S, PoolCalibration
from sia.models.rings import FlagBank, RingBank, fold_record, resolve_rows

from .conftest import CalView, cal_trace

# submissions on a 50 s lattice (several at the same time, on the grid and off it); pool 2 of
# 4 never sees one; forecasts mostly a grid step or two apart, some off the grid (100 s) and
# some at the same instant twice (0 s)
_events = st.lists(st.tuples(st.integers(0, 240).map(lambda x: x * 50.0), st.integers(0, 3),
                             st.integers(1, 8)).filter(lambda e: e[1] != 2),
                   min_size=10, max_size=80)
_steps = st.lists(st.tuples(st.sampled_from([300.0, 300.0, 600.0, 0.0, 100.0, 1500.0]),
                            st.integers(0, 3), st.floats(0.0, 1.0)), min_size=20, max_size=80)
_windows = st.sampled_from([(300.0, 600.0), (300.0, 3600.0), (600.0, 1500.0, 3600.0),
                            (3600.0, 300.0)])


def _bits(a) -> bytes:
    a = np.asarray(a)
    return a.dtype.str.encode() + str(a.shape).encode() + a.tobytes()


def _replay(trace, windows, nw, memory, alpha, steps, lag, strided):
    """Feed the forecasts; return every answer (as bytes), the rings, thresholds, precision,
    recall and the report. ``strided``: ``proba`` as a strided view (the numpy answer)."""
    cal = PoolCalibration(windows, n_windows=nw, alpha=alpha, memory=memory, prior_days=0.0)
    cal.reset(trace.pool_names, 0.0)
    P, K, out, now = trace.n_pools, len(windows), [], 0.0
    for dt, late, pr in steps:
        now += dt
        seen = int(np.searchsorted(trace.submit, now - lag if late < 2 else now, side="right"))
        view = CalView(trace, now, seen)
        proba = np.linspace(0.0, 1.0, P * K).reshape(P, K) * pr
        proba[1] = 1.0 - pr
        if strided:
            wide = np.zeros((P, 2 * K))
            wide[:, ::2] = proba
            proba = wide[:, ::2]
            assert not proba.flags.c_contiguous
        out.append(_bits(cal.arrivals(view, proba)))
        out.append(_bits(cal.load_bound(view, np.full((P, K), 2.0))))
    rings = [cal.recent(p, k) for p in range(P) for k in range(K)]
    return (out, rings, _bits(cal.thresholds()), _bits(cal.precision()), _bits(cal.recall()),
            cal.report(trace.pool_names))


_names = ("a", "b", "c", "d")


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # set before each use
@given(events=_events, steps=_steps, nw=st.integers(1, 3), memory=st.integers(2, 12),
       alpha=st.sampled_from([0.1, 0.3, 0.75]), windows=_windows,
       lag=st.sampled_from([0.0, 400.0, 2500.0]), keep=st.sampled_from([0, 5, 8192]))
def test_the_fused_load_loop_scores_as_the_window_loop(monkeypatch, events, steps, nw, memory,
                                                        alpha, windows, lag, keep):
    # score_windows against the per-window loop it replaced (_score_from, every window): the
    # same answers, rings and report, with late arrivals (rows rebuilt), rows dropped (keep),
    # cold rings (small memory) and a pool that never sees an arrival
    import sia.models.calibration as calibration

    monkeypatch.setattr(calibration, "_KEEP_ROWS", keep)
    trace = cal_trace(events, _names)
    fused = _replay(trace, windows, nw, memory, alpha, steps, lag, False)
    with monkeypatch.context() as m:  # undone before the next example
        m.setattr(calibration, "score_windows", lambda *a: (0, 0))  # all windows in Python
        assert _replay(trace, windows, nw, memory, alpha, steps, lag, False) == fused


@settings(max_examples=100, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # set before each use
@given(events=_events, steps=_steps, nw=st.integers(1, 3), memory=st.integers(2, 12),
       alpha=st.sampled_from([0.1, 0.3, 0.75]), windows=_windows,
       lag=st.sampled_from([0.0, 400.0, 2500.0]), keep=st.sampled_from([0, 5, 8192]))
def test_the_fused_arrival_loop_resolves_as_the_record_loop(monkeypatch, events, steps, nw,
                                                             memory, alpha, windows, lag, keep):
    # resolve_rows (labels, thresholds, precision and recall flags, the answer and the record)
    # against the per-record Python it replaced (_resolve_one -> _label, then the numpy
    # answer): the same answers bit for bit, rings, thresholds, shares and report
    import sia.models.calibration as calibration

    monkeypatch.setattr(calibration, "_KEEP_ROWS", keep)
    trace = cal_trace(events, _names)
    fused = _replay(trace, windows, nw, memory, alpha, steps, lag, False)

    def one_by_one(now, wn, sd, grid, *rest):  # no record labelled in the loop
        return resolve_rows(now, wn, sd, False, *rest)

    with monkeypatch.context() as m:  # undone before the next example
        m.setattr(calibration, "resolve_rows", one_by_one)
        assert _replay(trace, windows, nw, memory, alpha, steps, lag, True) == fused


def _old_fold(pending, hit, yes_ring):
    """The deques' fold the flag rings replaced (per pool: hit[p], yes_ring[p])."""
    yes = np.array([y for y, _ in pending], dtype=bool)
    label = np.array([lab for _, lab in pending], dtype=bool)
    for p in range(len(hit)):
        y, lab = yes[:, p], label[:, p]
        hit[p].extend(y[lab].tolist())
        yes_ring[p].extend(lab[y].tolist())
    pending.clear()


@settings(max_examples=200, deadline=None)
@given(records=st.lists(st.tuples(st.lists(st.booleans(), min_size=3, max_size=3),
                                  st.lists(st.booleans(), min_size=3, max_size=3)), max_size=60),
       memory=st.integers(1, 9), fold_every=st.integers(1, 12))
def test_the_flag_rings_hold_what_the_deques_held(records, memory, fold_every):
    # record by record into the flag rings, in batches into deques of at most `memory`: the
    # same flags, oldest first, and the same shares (sum / len) at every batch
    P, K, k = 3, 2, 1
    bank = FlagBank(2 * P * K, memory)
    hit = [deque(maxlen=memory) for _ in range(P)]
    yes_ring = [deque(maxlen=memory) for _ in range(P)]
    pending = []
    for i, (y, lab) in enumerate(records):
        fold_record(np.array(y), np.array(lab), k, K, bank.fm)
        pending.append((np.array(y), np.array(lab)))
        if (i + 1) % fold_every == 0 or i == len(records) - 1:
            _old_fold(pending, hit, yes_ring)
            for p in range(P):
                for ring, r in ((hit[p], p * K + k), (yes_ring[p], P * K + p * K + k)):
                    assert bank.values(r) == [int(v) for v in ring]
                    n, ones = bank.meta[r, 1], bank.meta[r, 2]
                    assert n == len(ring) and ones == sum(ring)
                    if ring:
                        assert ones / n == sum(ring) / len(ring)
    for r in range(2 * P * K):  # the other window's rings stay empty
        if r % K != k:
            assert bank.meta[r].tolist() == [0, 0, 0]


def _cum(events, p, x):
    return sum(g for s, q, g in events if q == p and s <= x)


def test_hundreds_of_open_records_keep_their_order_as_the_arrays_grow_and_shift():
    # a day-long window keeps ~290 records open (the arrays double at 256, then drop the
    # resolved ones at 512): every record is resolved once, in order; precision and recall are the shares of
    # the definitions over the last `memory` records of each pool and window
    rng = np.random.default_rng(7)
    windows, memory, P = (300.0, 86400.0), 50, 3
    events = sorted((float(rng.integers(0, 3000) * 60.0), int(rng.integers(0, 2)), 1)
                    for _ in range(400))  # pool 2: none
    trace = cal_trace(events, ("a", "b", "c"))
    cal = PoolCalibration(windows, alpha=0.2, memory=memory, prior_days=0.0)
    cal.reset(trace.pool_names, 0.0)
    made = []
    for now in np.arange(GRID_S, 190_000.0, GRID_S).tolist():
        view = CalView(trace, now)
        proba = rng.random((P, 2))
        cal.load_bound(view, np.zeros((P, 2)))
        made.append((now, cal.arrivals(view, proba), proba))
    assert cal._rec_t.size == 512 and cal._n_rec < 512  # grew, then shifted
    end = made[-1][0]
    for k, w in enumerate(windows):
        for p in range(P):
            done = [(t, yes[p, k], _cum(events, p, t + w) > _cum(events, p, t))
                    for t, yes, _ in made if t + w <= end]
            hit = [y for _, y, lab in done if lab][-memory:]
            said = [lab for _, y, lab in done if y][-memory:]
            want_rec = sum(hit) / len(hit) if hit else math.nan
            want_prec = sum(said) / len(said) if said else math.nan
            assert _bits(cal.recall()[p, k]) == _bits(np.float64(want_rec))
            assert _bits(cal.precision()[p, k]) == _bits(np.float64(want_prec))
            probs = [pr[p, k] for (t, _, pr), (_, _, lab) in zip(
                [m for m in made if m[0] + w <= end], done, strict=True) if lab]
            assert cal.recent(p, k)[1] == probs[-memory:]
    assert cal.stats["arrival_resolved"] == sum(t + w <= end for t, _, _ in made
                                                for w in windows)


def _old_push(ring: deque, srt: list, v: float) -> None:
    """The push the one-move ring replaced: drop the oldest value from the sorted list (at
    bisect_left; the last one when not found, as its move left did), then insort the new one."""
    if len(ring) == ring.maxlen:
        del srt[min(bisect_left(srt, ring[0]), len(srt) - 1)]
    ring.append(v)
    insort(srt, v)


_floats = st.one_of(st.sampled_from([0.0, -0.0, 1.0, -1.0, math.inf, -math.inf, math.nan]),
                    st.floats(-3.0, 3.0).map(lambda x: round(x, 1)))


@settings(max_examples=1000, deadline=None)
@given(values=st.lists(_floats, max_size=80), size=st.integers(1, 9))
def test_a_push_keeps_the_sorted_floats_of_the_two_step_push_bit_for_bit(values, size):
    # repeats, signed zeros, infinities and NaN (whose comparisons are all false): the same
    # comparisons on the same floats, the same sorted copy, bit for bit
    bank = RingBank(2, size)
    ring, srt = deque(maxlen=size), []
    for v in values:
        bank.push(1, v)
        _old_push(ring, srt, v)
        assert _bits(bank.sorted(1)) == _bits(np.array(srt, dtype=np.float64))
        assert _bits(np.array(bank.values(1))) == _bits(np.array(list(ring), dtype=np.float64))
    assert bank.count(0) == 0
