"""The risk budget's calls from the policy: resolve skipped before its first outcome
(scheduler/policies/sia/risk.py ``next_due``), jobs classified into lists (``classify_rows``):
the same answers and state as before."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import make_pools, validate
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.policies.sia.risk import CERTAIN, NEVER, RiskBudget

from tests.scheduler.conftest import UnderForecaster
from tests.scheduler.test_sia_risk import W, _drive_two, budget_at, budget_states, fake_trace


def test_next_due_is_the_first_outcome_time_hand_values():
    rb = RiskBudget(W, 0.1)
    rb.reset(fake_trace([0, 0], [100.0, 1000.0], [2]))
    assert rb.next_due == math.inf  # nothing started
    rb.classify(np.array([0, 1]), np.full((2, 2), 0.9), None)
    rb.started(50.0, [1])  # known at 50 + min(1000, 300) = 350 and 50 + 1000
    assert rb.next_due == 350.0
    rb.started(60.0, [0])  # known at 60 + 100 (both windows)
    assert rb.next_due == 160.0
    rb.resolve(159.0)
    assert rb.next_due == 160.0 and rb.stats["outcomes"] == 0
    rb.resolve(160.0)
    assert rb.next_due == 350.0 and rb.stats["outcomes"] == 2
    rb.resolve(2000.0)
    assert rb.next_due == math.inf and rb.stats["outcomes"] == 4


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=budget_states(), data=st.data(), r=st.sampled_from([0.01, 0.1, 1.0]))
def test_skipped_resolves_agree_with_resolving_at_every_step(state, data, r):
    # on a random history, a budget that skips resolve() before next_due answers what a twin
    # that resolves at every step answers, and its state (counters, bounds) stays the same;
    # next_due is the first pending outcome's time
    P, pools, d, q, unused = state
    lazy, eager = (RiskBudget(W, r, cold_n=1.0, memory=20.0) for _ in range(2))
    for rb in (lazy, eager):
        rb.reset(fake_trace(pools, d, [3] * P))
    steps = data.draw(st.lists(st.integers(0, 40), min_size=1, max_size=10))
    now, nxt = 0.0, 0
    for step in steps:
        now += 30.0 * step
        cands = data.draw(st.lists(st.integers(0, P - 1), unique=True, min_size=1))
        use = data.draw(st.lists(st.integers(0, 3), min_size=P, max_size=P))
        if now >= lazy.next_due:
            lazy.resolve(now)
        eager.resolve(now)
        assert lazy.allowed(now, use, cands) == eager.allowed(now, use, cands)
        batch = list(range(nxt, min(len(q), nxt + 5)))
        nxt += len(batch)
        for rb in (lazy, eager):
            if batch:
                rb.classify(np.asarray(batch), np.asarray([[1.0 - q[j]] * 2 for j in batch]),
                            None)
                rb.started(now, batch)
        # (the starts since the last resolve wait in a queue: each one's first event is at its
        # start plus the shortest of its run and the shortest window)
        queued = [t + min(e, min(W)) for t, e in zip(lazy._pq[0][:lazy._n_pend].tolist(),
                                                     lazy._pq[2][:lazy._n_pend].tolist(),
                                                     strict=True)]
        assert lazy.next_due == min(lazy._ev[0][:lazy._n_ev].tolist() + queued,
                                    default=math.inf)
        assert lazy.summary() == eager.summary()
    assert lazy.bounds(now).tolist() == eager.bounds(now).tolist()


class EagerCalls(RiskBudget):
    """The budget as the policy called it before: resolve at every decision."""

    @property
    def next_due(self) -> float:
        return -math.inf

    @next_due.setter
    def next_due(self, value: float) -> None:
        pass


class TableForecaster(UnderForecaster):
    """Never expects an arrival; each job's P(duration <= w) from a seeded table."""

    name = "table"

    def __init__(self, seed: int):
        self.cdf = np.random.default_rng(seed).choice([0.5, 0.9, 0.99, 0.9995, 1.0], size=(64, 2))

    def duration_cdf(self, view, job_indices, windows_s):
        return self.cdf[np.asarray(job_indices) % 64][:, :len(windows_s)]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n_pools=st.integers(2, 3), seed=st.integers(0, 10_000), risk=st.sampled_from([0.1, 1.0]),
       jobs=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 80),
                               st.sampled_from([30.0, 200.0, 299.0, 301.0, 2000.0, 4000.0]),
                               st.integers(1, 3)), min_size=1, max_size=40))
def test_replay_with_fewer_budget_calls_is_identical(n_pools, seed, risk, jobs):
    rows = [(f"j{i:03d}", f"p{p % n_pools}", float(t * 60), dur, g)
            for i, (p, t, dur, g) in enumerate(jobs)]
    table = validate(pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration",
                                                "num_gpus"], orient="row"))[0]
    pools = make_pools({f"p{i}": 3 for i in range(n_pools)})
    out = []
    for eager in (False, True):
        pol = SiaPolicy(TableForecaster(seed), windows_s=W, risk=risk, risk_cold_n=1.0,
                        risk_memory=20.0, adaptation=False)
        if eager:
            pol.risk_budget.__class__ = EagerCalls
        out.append((simulate(table, pools, pol, check_invariants=True), pol.summary()))
    assert out[0][0].equals(out[1][0])
    assert out[0][1] == out[1][1]


@settings(max_examples=150, deadline=None)
@given(cdf=st.lists(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                       st.sampled_from([0.0, 0.999, 0.9995, 1.0])),
                             min_size=2, max_size=2), min_size=1, max_size=4),
       sure=st.one_of(st.none(), st.lists(st.integers(0, 2), min_size=4, max_size=4)),
       perfect=st.booleans())
def test_classify_rows_equals_classify_and_records_the_same(cdf, sure, perfect):
    jobs = list(range(len(cdf)))[::-1]  # any order of job indices
    s = None if sure is None else np.asarray(sure[:len(cdf)])
    budgets = [RiskBudget(W, 0.1, perfect_durations=perfect) for _ in range(2)]
    for rb in budgets:
        rb.reset(fake_trace([0] * 4, [100.0] * 4, [2]))
    arr = np.asarray(cdf, dtype=np.float64)
    rows = budgets[0].classify_rows(jobs, arr, s)
    bins = budgets[1].classify(np.asarray(jobs), arr, s)
    assert isinstance(rows, list) and rows == bins.tolist()
    assert [bytes(c) for c in budgets[0].job_bin] == [bytes(c) for c in budgets[1].job_bin]
    assert str(budgets[0]._q) == str(budgets[1]._q)  # NaN-aware
    # the policy's first lendable window per job (its call site): the array formula's
    K = len(W)
    got = [next((k for k, b in enumerate(r) if b < NEVER), K) for r in rows]
    ok = bins < NEVER
    assert got == np.where(ok.any(axis=1), np.argmax(ok, axis=1), K).tolist()


def test_a_grown_replay_reads_its_durations_from_the_list_and_a_live_one_from_the_array():
    # a replay's durations are read from a list of the array's values; jobs appended with known
    # durations extend it (the same outcomes as a budget given the whole trace at once), and
    # an appended unknown duration makes the budget live: it reads the array from then on
    def outcomes(rb, jobs):
        rb.classify(np.asarray(jobs), np.full((len(jobs), 2), 0.9), None)
        rb.started(0.0, jobs)
        rb.resolve(10_000.0)
        return dict(rb.stats)

    d = [100.0, 400.0, 5000.0]
    whole = RiskBudget(W, 0.1)
    whole.reset(fake_trace([0, 0, 0], d, [2]))
    grown = RiskBudget(W, 0.1)
    grown.reset(fake_trace([0], d[:1], [2]))
    grown.grow(fake_trace([0, 0, 0], d, [2]))
    assert grown._dur_list == d and not grown._live
    assert outcomes(grown, [0, 1, 2]) == outcomes(whole, [0, 1, 2])
    live = RiskBudget(W, 0.1)
    live.reset(fake_trace([0], d[:1], [2]))
    live.grow(fake_trace([0, 0], [100.0, math.inf], [2]))
    assert live._live and live._dur_list is None


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=budget_states(), data=st.data(), r=st.sampled_from([0.01, 0.1, 1.0]),
       cold=st.sampled_from([0.0, 3.0]))
def test_an_answer_is_kept_only_for_the_same_pools(state, data, r, cold):
    # allowed() answers a call whose state, cost and pools are the last call's with the last
    # answer; asked other pools at the same instant and cost, it answers what a twin with the
    # same history asked only those pools answers (the pools not asked: certainty only)
    P, pools, d, q, unused = state
    asked = data.draw(st.lists(st.lists(st.integers(0, P - 1), unique=True, min_size=1),
                               min_size=1, max_size=4))
    rb = budget_at(state, r, cold_n=cold)
    # (each list, then as many other pools: the same size, another answer)
    for cands in [x for c in asked for x in (c, [(p + 1) % P for p in c])]:
        got = rb.allowed(5000.0, unused, cands)
        want = budget_at(state, r, cold_n=cold).allowed(5000.0, unused, cands)
        assert got == want
        assert all(got[p] == [CERTAIN] * len(W) for p in range(P) if p not in cands)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=budget_states(), times=st.lists(st.integers(1, 3), min_size=1, max_size=12),
       r=st.sampled_from([0.01, 0.1, 1.0]), data=st.data())
def test_answers_given_without_the_compiled_call_are_its_answers(state, times, r, data):
    # allowed() answers from its last answer, without calling _allowed_call, when no pool asked
    # is due (none overran since, none last refreshed 300 s ago: steps of 150, 300 and 450 s
    # land on the edge) and the state's version, the cost and the pools are the last call's;
    # a twin that calls _allowed_call every time (the kernel's own memo) answers the same, with
    # some pools asked, or all, several times per step, and bounds() refreshing all between
    P = state[0]
    calls = data.draw(st.lists(st.tuples(
        st.lists(st.booleans(), min_size=P, max_size=P),  # the pools holding unused quota
        st.none() | st.lists(st.integers(0, P - 1), unique=True, min_size=1),  # pools asked
        st.booleans()), min_size=1, max_size=5))  # bounds() after the call

    def probe(i, rb, now, unused):
        got = []
        for mask, asked, then_bounds in calls:
            if i == 1:
                rb._memo_ix = None  # (the twin: the compiled call every time)
            held = [u if f else 0 for u, f in zip(unused, mask, strict=True)]
            got.append(rb.allowed(now, held, asked))
            if then_bounds:
                got.append(rb.bounds(now).tolist())
        return got

    _drive_two(state, times, r, probe)


def test_an_overrun_or_a_300_s_old_refresh_ends_the_kept_answer_hand_values():
    # one warm pool (cold_n 0), 5 jobs of q 0.02 that fit, known by 3600 s; no pool has unused
    # GPUs, so the cost stays 1 and only a refresh can change the answer: bins 1-3 lendable
    def warm(late: bool) -> RiskBudget:
        rb = RiskBudget(W, 0.1, cold_n=0.0)
        rb.reset(fake_trace([0] * 11, [30.0] * 10 + [4000.0], [3]))
        rb.classify(np.arange(5), np.full((5, 2), 0.98), None)
        rb.started(0.0, list(range(5)))
        if late:  # a job of q 0.02 started at 3500 s overruns 300 s at 3800 s
            rb.classify(np.array([10]), np.full((1, 2), 0.98), None)
            rb.started(3500.0, [10])
        rb.resolve(3600.0)
        assert rb.allowed(3600.0, [0]) == [[3, 3]]  # refreshed at 3600 s
        return rb

    # five more fits (q 0.05) known at 3680 s widen the pool to 4 bins at its next refresh,
    # 300 s after its last: not at 3899 s, at 3900 s
    rb = warm(False)
    rb.classify(np.arange(5, 10), np.full((5, 2), 0.95), None)
    rb.started(3650.0, list(range(5, 10)))
    rb.resolve(3700.0)
    assert [rb.allowed(t, [0]) for t in (3700.0, 3899.0, 3900.0)] == [[[3, 3]]] * 2 + [[[4, 4]]]
    # the overrun makes the pool due at once: 3800 s answers 2 bins
    rb = warm(True)
    assert rb.allowed(3799.0, [0]) == [[3, 3]]
    rb.resolve(3800.0)
    assert rb.allowed(3800.0, [0]) == [[2, 3]]


def _bounds_then_allowed(rb: RiskBudget, allowed) -> list:
    """bounds() of one pool at its default now (inf) marks every pool due and refreshes that
    one; then fits of pool 0 come in and allowed() asks both pools again."""
    u, asked = [0, 0], [0, 1]
    out = [allowed(0.0, u, asked)]
    rb.bounds(pools=[1])
    rb.started(0.0, list(range(20)))
    rb.resolve(100.0)
    return out + [allowed(100.0, u, asked)]


def _clock_back(rb: RiskBudget, allowed) -> list:
    """The clock goes back: bounds() at 300 s and 400 s mark pool 0 due between allowed()
    calls at 100 s."""
    u = [0, 0]
    rb.bounds(0.0)
    rb.bounds(300.0, [1])
    out = [allowed(100.0, u, [0])]
    rb.started(100.0, list(range(20)))
    rb.resolve(130.0)
    rb.bounds(400.0, [1])
    return out + [allowed(100.0, u, [0]), rb._due.tolist(), rb._bt.tolist()]


def _skipped_then_back(rb: RiskBudget, allowed) -> list:
    """A call skipped at 350 s, when pool 1 (not asked, last refreshed at 0) is 300 s old,
    then one at 200 s that asks pool 1, whose fits came in at 130 s: pool 1 is due (the
    skipped call would have marked it), refreshed, and lends more."""
    u = [0, 0]
    rb.bounds(0.0, [1])
    out = [allowed(100.0, u, [0])]
    rb.started(100.0, list(range(20)))
    rb.resolve(130.0)
    out.append(allowed(350.0, u, [0]))
    return out + [allowed(200.0, u, [1]), rb._due.tolist(), rb._bt.tolist()]


def test_answers_without_the_compiled_call_hold_after_bounds_and_a_clock_going_back():
    # allowed() skips the compiled call only where that call would give its last answer: a
    # refresh by bounds() (here at now = inf, which marks every pool due) makes it call again,
    # and the pools a skipped call would have marked due are marked by the next call, even an
    # earlier one. The reference: a twin that makes the compiled call every time (review of
    # session 37: both sequences differed before these rules)
    def make(p: int = 0) -> RiskBudget:
        rb = RiskBudget(W, 0.3, cold_n=0.0)
        rb.reset(fake_trace([p] * 20 + [1 - p], [30.0] * 21, [3, 3]))  # 20 fits of pool p
        rb.classify(np.arange(20), np.full((20, 2), 0.8), None)
        return rb

    def always(rb):
        def call(now, u, pools):
            rb._memo_ix = None  # (the compiled call every time)
            return rb.allowed(now, u, pools)
        return call

    c = CERTAIN
    by_hand = {  # (the fits widen the pool refreshed after them: 4 bins, then 5)
        _bounds_then_allowed: [[[4, 4], [4, 4]], [[5, 5], [4, 4]]],
        _clock_back: [[[4, 4], [c, c]], [[5, 5], [c, c]], [False, False], [100.0, 300.0]],
        _skipped_then_back: [[[4, 4], [c, c]], [[4, 4], [c, c]], [[c, c], [5, 5]],
                             [False, False], [100.0, 200.0]]}
    for drive, p in ((_bounds_then_allowed, 0), (_clock_back, 0), (_skipped_then_back, 1)):
        a, b = make(p), make(p)
        got, want = drive(a, a.allowed), drive(b, always(b))
        assert got == want == by_hand[drive], drive.__name__
        assert a._ver.tolist() == b._ver.tolist()


def test_an_allowed_call_that_raises_leaves_the_prior_due_hand_values():
    # a bad pools argument raises before the compiled call: the prior's update (due at 800 s,
    # after two overruns) must not be marked done, so later answers are a twin's that never
    # saw the bad call
    def fed() -> RiskBudget:
        rb = RiskBudget((300.0,), 1.0, cold_n=0.0)
        rb.reset(fake_trace([0] * 8, [100.0] * 4 + [1000.0] * 2 + [100.0] * 2, [2]))
        for jobs, t in (([0, 1, 2, 3], 0.0), ([4, 5, 6, 7], 400.0)):
            if t:
                rb.resolve(t)
                rb.allowed(t, [1])  # the prior's first update, at 400 s
            rb.classify(np.asarray(jobs), np.full((len(jobs), 1), 0.995), None)
            rb.started(t, jobs)
        rb.resolve(800.0)  # two overruns since
        return rb

    bad, twin = fed(), fed()
    with pytest.raises(ValueError):
        bad.allowed(800.0, [1], pools=["x"])
    assert bad._g.tolist() == twin._g.tolist()
    assert bad.bounds(900.0).tolist() == twin.bounds(900.0).tolist()
    assert bad.allowed(900.0, [1]) == twin.allowed(900.0, [1])
