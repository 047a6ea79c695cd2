"""The incremental structures behind the learned forecaster equal their brute-force definitions."""

from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.features.incremental import SegmentedEvents as _SegmentedEvents
from sia.features.incremental import count_between as _count_between
from sia.models.job_duration import OnlineDurationHistory, SortedHistory


def test_sorted_history_by_hand():
    h = SortedHistory()
    assert math.isnan(h.median())
    for d in (30.0, 10.0, 20.0):
        h.add(d)
    assert h.median() == 20.0
    h.add(40.0)
    assert h.median() == 25.0  # (20 + 30) / 2
    h.add(5.0)
    assert h.values == [5.0, 10.0, 20.0, 30.0, 40.0] and h.median() == 20.0


def _reference_medians(done, trace, jobs, min_count):
    """The original definition: np.median over plain lists, same fallback chain."""
    by_tag, by_pg, by_pool = {}, {}, {}
    for j in done:
        d, p, g, tag = (float(trace.duration[j]), int(trace.pool[j]), int(trace.num_gpus[j]),
                        int(trace.tag_code[j]))
        if tag >= 0:
            by_tag.setdefault(tag, []).append(d)
        by_pg.setdefault((p, g), []).append(d)
        by_pool.setdefault(p, []).append(d)
    out = np.full(len(jobs), np.nan)
    for i, j in enumerate(jobs):
        tag, p = int(trace.tag_code[j]), int(trace.pool[j])
        for hist in (by_tag.get(tag) if tag >= 0 else None, by_pg.get((p, int(trace.num_gpus[j])))):
            if hist is not None and len(hist) >= min_count:
                out[i] = float(np.median(hist))
                break
        else:
            if by_pool.get(p):
                out[i] = float(np.median(by_pool[p]))
    return out


durations = st.one_of(st.integers(1, 50).map(float),  # many ties
                      st.floats(0.5, 1e6, allow_nan=False, allow_infinity=False))


@settings(max_examples=80, deadline=None)
@given(data=st.data(), n=st.integers(1, 60), min_count=st.integers(1, 4))
def test_online_history_equals_np_median_definition(data, n, min_count):
    trace = SimpleNamespace(
        n_pools=3,
        duration=np.array(data.draw(st.lists(durations, min_size=n, max_size=n))),
        pool=np.array(data.draw(st.lists(st.integers(0, 2), min_size=n, max_size=n))),
        num_gpus=np.array(data.draw(st.lists(st.sampled_from([1, 2, 8]), min_size=n, max_size=n))),
        tag_code=np.array(data.draw(st.lists(st.integers(-1, 3), min_size=n, max_size=n))),
    )
    view = SimpleNamespace(trace=trace)
    order = data.draw(st.permutations(range(n)))
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=6)))
    h = OnlineDurationHistory(min_count)
    h.start(trace)
    done: list[int] = []
    for lo, hi in zip([0, *cuts], [*cuts, n], strict=True):
        batch = np.array(order[lo:hi], dtype=np.int64)
        h.add(trace, batch)
        done.extend(batch.tolist())
        queries = np.arange(n)
        got = h.median_s(view, queries)
        want = _reference_medians(done, trace, queries, min_count)
        np.testing.assert_array_equal(got, want)  # exact, NaN where no history


def _brute_counts(events_by_pool, lo, hi, open_lo):
    out = np.zeros((len(events_by_pool), lo.size), dtype=np.int64)
    for p, ev in enumerate(events_by_pool):
        ev = np.asarray(ev)
        for i in range(lo.size):
            above = ev > lo[i] if open_lo[i] else ev >= lo[i]
            out[p, i] = int((above & (ev <= hi[i])).sum())
    return out


times = st.integers(0, 40).map(float)


@settings(max_examples=80, deadline=None)
@given(data=st.data())
def test_segmented_events_count_like_brute_force(data):
    P = data.draw(st.integers(1, 4))
    caps = data.draw(st.lists(st.integers(0, 8), min_size=P, max_size=P))
    ev = _SegmentedEvents(-1.0, 100.0, np.array(caps))
    added: list[list[float]] = [[] for _ in range(P)]
    for _ in range(data.draw(st.integers(0, 6))):
        p = data.draw(st.integers(0, P - 1))
        room = caps[p] - len(added[p])
        batch = data.draw(st.lists(times, max_size=room))  # any order, ties included
        ev.add_pool(p, np.array(batch))
        added[p].extend(batch)
        assert np.all(np.diff(ev.keys) >= 0)
    m = data.draw(st.integers(1, 6))
    lo = np.array(data.draw(st.lists(times, min_size=m, max_size=m))) - 0.5 * data.draw(
        st.integers(0, 1))
    hi = lo + np.array(data.draw(st.lists(st.integers(0, 20), min_size=m, max_size=m)))
    open_lo = np.array(data.draw(st.lists(st.booleans(), min_size=m, max_size=m)))
    got = _count_between(ev, np.arange(P), lo, hi, open_lo)
    np.testing.assert_array_equal(got, _brute_counts(added, lo, hi, open_lo))


def test_segmented_events_refuse_more_than_capacity():
    ev = _SegmentedEvents(0.0, 100.0, np.array([1, 2]))
    ev.add_pool(1, np.array([3.0, 4.0]))
    try:
        ev.add_pool(1, np.array([5.0]))
    except ValueError as exc:
        assert "pool 1" in str(exc)
    else:
        raise AssertionError("expected a ValueError")


def _view(trace, n_arrived):
    """A view at the replay's start: ``n_arrived`` jobs arrived, none completed."""
    empty = np.zeros(0, dtype=np.int64)
    return SimpleNamespace(trace=trace, n_arrived=n_arrived, now=float(trace.submit[n_arrived - 1]),
                           n_completed=lambda p: 0, completions=lambda p: np.zeros(0),
                           completed_jobs=lambda p: empty)


def test_prior_jobs_start_the_history_by_hand():
    """A primed forecaster's history holds the prior jobs finished by the replay's first job."""
    import polars as pl
    from sia.features.duration_features import DURATION_FEATURES
    from sia.models.job_duration import OnlineSubmissionFeatures, prior_completions
    from sia.scheduler.core.view import TraceArrays

    trace = TraceArrays.build(np.array(["j0", "j1"], dtype=object), np.array([0.0, 10.0]),
                              np.array([50.0, 60.0]), np.array([1, 2]), np.array([0, 1]),
                              np.array(["x", None], dtype=object), ("a", "b"), np.array([4, 4]),
                              speedup=2.0)
    prior = pl.DataFrame({"pool": ["a", "a", "c", "b"], "num_gpus": [1, 1, 1, 1],
                          "submit_time": [-1000.0, -50.0, -900.0, -5000.0],
                          "duration": [200.0, 100.0, 10.0, 4000.0], "tag": ["x", "x", "x", None]})
    # the job still running at the start (ends at 50) and the unknown pool c are left out;
    # end-time order; durations in replay seconds (speed-up 2); the tag keyed as the trace's
    assert prior_completions(prior, trace) == [(-1, 1, 1, 2000.0), (0, 0, 1, 100.0)]
    feats = OnlineSubmissionFeatures(prior)
    feats.update(_view(trace, 2))
    rows = feats.rows(np.array([0, 1]))
    col = {c: i for i, c in enumerate(DURATION_FEATURES)}
    assert rows[0, col["tag_count"]] == 1 and rows[0, col["tag_median_s"]] == 100.0
    assert rows[0, col["pool_count"]] == 1 and rows[0, col["pool_gpus_count"]] == 1
    assert rows[1, col["pool_count"]] == 1 and rows[1, col["pool_median_s"]] == 2000.0
    assert rows[1, col["pool_gpus_count"]] == 0  # job 1 asks 2 GPUs; the prior job had 1
    cold = OnlineSubmissionFeatures()
    cold.update(_view(trace, 2))
    assert cold.rows(np.array([0]))[0, col["pool_count"]] == 0
    hist = OnlineDurationHistory(1, prior)
    hist.start(trace)
    np.testing.assert_array_equal(hist.median_s(_view(trace, 2), np.array([0, 1])), [100.0, 2000.0])
    assert prior_completions(None, trace) == []


def test_users_reach_the_online_features_from_the_trace_and_the_prior_jobs():
    """A trace with a user column: the replay's trace carries user codes, the prior jobs' users
    are keyed like them, and the online features count each user's finished jobs (the same
    user statistics the offline features give a job at its submission)."""
    import polars as pl
    from sia.features.duration_features import DURATION_FEATURES
    from sia.models.job_duration import OnlineSubmissionFeatures, prior_completions
    from sia.scheduler.core.view import TraceArrays

    trace = TraceArrays.build(np.array(["j0", "j1"], dtype=object), np.array([0.0, 10.0]),
                              np.array([50.0, 60.0]), np.array([1, 1]), np.array([0, 0]),
                              np.array([None, None], dtype=object), ("a",), np.array([4]),
                              user=np.array(["ann", ""], dtype=object))
    assert trace.user_code.tolist() == [0, -1] and trace.user.tolist() == ["ann", None]
    prior = pl.DataFrame({"pool": ["a", "a", "a", "c"], "num_gpus": [1, 1, 1, 1],
                          "submit_time": [-1000.0, -900.0, -800.0, -700.0],
                          "duration": [100.0, 200.0, 300.0, 10.0],
                          "tag": [None, None, None, None], "user": ["ann", "bob", "ann", "ann"]})
    # pool c is not in the replay; bob never appears in it and keeps his name
    assert prior_completions(prior, trace, with_user=True) == [
        (-1, 0, 0, 1, 100.0), (-1, "bob", 0, 1, 200.0), (-1, 0, 0, 1, 300.0)]
    assert prior_completions(prior, trace) == [(-1, 0, 1, 100.0), (-1, 0, 1, 200.0),
                                               (-1, 0, 1, 300.0)]
    feats = OnlineSubmissionFeatures(prior)
    feats.update(_view(trace, 2))
    rows = feats.rows(np.array([0, 1]))
    col = {c: i for i, c in enumerate(DURATION_FEATURES)}
    assert rows[0, col["user_count"]] == 2 and rows[0, col["user_median_s"]] == 200.0
    assert np.isnan(rows[1, col["user_median_s"]])  # no user
    assert rows[0, col["pool_count"]] == 3
    # a trace without users has none, and the prior's users are not read
    bare = TraceArrays.build(np.array(["j0"], dtype=object), np.array([0.0]), np.array([5.0]),
                             np.array([1]), np.array([0]), np.array([None], dtype=object),
                             ("a",), np.array([4]))
    assert bare.user_code is None
    assert prior_completions(prior, bare, with_user=True)[0][1] is None


def test_a_replays_trace_carries_the_jobs_users():
    """build_trace keeps the job table's user column (in arrival order) for the forecaster."""
    import polars as pl
    from sia.data.synthetic import generate_workload
    from sia.scheduler.core.simulator import build_trace

    jobs, pools = generate_workload("base", 0, days=0.5)
    users = [f"u{i % 3}" if i % 4 else None for i in range(jobs.height)]
    jobs = jobs.with_columns(user=pl.Series(users, dtype=pl.String))
    trace, order = build_trace(jobs, pools)
    assert trace.user.tolist() == [users[i] for i in order]
    assert ((trace.user_code >= 0) == np.array([users[i] is not None for i in order])).all()
    # no user given (the contract's column all null): no codes at all
    no_users = jobs.with_columns(user=pl.lit(None, dtype=pl.String))
    assert (build_trace(no_users, pools)[0].user_code == -1).all()
