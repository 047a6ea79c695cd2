"""SIA's risk budget (scheduler/policies/sia/risk.py): calibration, cost, certainty, properties."""

from __future__ import annotations

import contextlib
import heapq
import math
from collections import deque
from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from scipy.special import betaincinv
from scipy.stats import beta
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.policies.sia.risk import (
    _PLACE,
    CERTAIN,
    NEVER,
    Q_EDGES,
    RecentUse,
    RiskBudget,
    _at,
    _layout,
    cell_within,
    largest_within,
    miss_cost,
    q_bins,
    quantile_within,
)
from sia.scheduler.registry import make_policy

from .conftest import UnderForecaster

W = (300.0, 3600.0)


def fake_trace(pools: list[int], durations: list[float], quota: list[int], gpus=None):
    """The TraceArrays fields RiskBudget reads: jobs of ``pools`` with ``durations``."""
    n = len(pools)
    return SimpleNamespace(
        n_pools=len(quota), n_jobs=n, duration=np.asarray(durations, dtype=np.float64),
        num_gpus=np.asarray(gpus if gpus is not None else [1] * n, dtype=np.int64),
        pool=np.asarray(pools, dtype=np.int64), quota=np.asarray(quota, dtype=np.int64),
        submit=np.zeros(n))


def feed(rb: RiskBudget, jobs: list[int], q: float, t: float) -> float:
    """Predict ``jobs`` with P(duration > w) = q in every window, start them at ``t``; return
    the time by which all their outcomes are known."""
    arr = np.asarray(jobs)
    rb.classify(arr, np.full((arr.size, len(rb.windows_s)), 1.0 - q), None)
    rb.started(t, jobs)
    return t + max(rb.windows_s)


# ----------------------------------------------------------------------------- bins


def test_q_bins_hand_values():
    q = np.array([0.0, 0.0005, 0.001, 0.02, 0.05, 0.2, 0.5, 0.999, 1.0, np.nan])
    assert q_bins(q).tolist() == [1, 1, 2, 3, 4, 5, 6, 6, NEVER, NEVER]
    assert NEVER == len(Q_EDGES) + 1


def test_limits_and_perfect_durations_are_certain():
    tr = fake_trace([0, 0, 0], [100.0, 100.0, 5000.0], [1])
    rb = RiskBudget(W, 0.0)
    rb.reset(tr)
    cdf = np.array([[0.9, 0.99], [0.5, 0.5], [0.0, 0.0]])
    bins = rb.classify(np.arange(3), cdf, np.array([0, 2, 1]))  # job 0's limit fits 300 s
    assert bins.tolist() == [[CERTAIN, CERTAIN], [6, 6], [NEVER, CERTAIN]]
    perfect = RiskBudget(W, 0.0, perfect_durations=True)
    perfect.reset(tr)
    assert perfect.classify(np.arange(3), np.array([[1.0, 1.0], [1.0, 1.0], [0.0, 0.0]]),
                            None).tolist() == [[CERTAIN] * 2, [CERTAIN] * 2, [NEVER] * 2]


# ----------------------------------------------------------------------------- calibration


def test_bound_is_the_beta_quantile_of_the_hierarchical_posterior():
    # pool 0: 40 jobs predicted q = 0.0005 (bin 1) in both windows, 2 ran 1000 s (overrun the
    # 300 s window, fit 3600 s); pool 1 has no outcome. No decay in 40 outcomes to speak of:
    # memory 1e9.
    d = [1000.0, 1000.0] + [100.0] * 38
    tr = fake_trace([0] * 40, d, [4, 4])
    rb = RiskBudget(W, 0.01, memory=1e9, prior_n=10.0, level=0.9)
    rb.reset(tr)
    done = feed(rb, list(range(40)), 0.0005, 0.0)
    rb.resolve(done)
    ub = rb.bounds()
    # global rate of bin 1 in 300 s: (2 overruns + 10 x mean q 0.0005) / (40 + 10)
    g = (2 + 10 * 0.0005) / 50
    want = beta.ppf(0.9, 2 + 10 * g, 38 + 10 * (1 - g))
    assert ub[0, 0, 0] == pytest.approx(want, rel=1e-6)
    # pool 1 (no outcome): the global rate's prior alone
    assert ub[1, 0, 0] == pytest.approx(beta.ppf(0.9, 10 * g, 10 * (1 - g)), rel=1e-6)
    # 3600 s: no overrun, the bound is small but not 0
    g1 = (0 + 10 * 0.0005) / 50
    assert ub[0, 1, 0] == pytest.approx(beta.ppf(0.9, 10 * g1, 40 + 10 * (1 - g1)), rel=1e-6)
    # bins never seen take their upper edge as prior; the bounds rise over the bins
    assert np.all(np.diff(ub, axis=2) >= 0)


def test_pool_with_two_outcomes_is_cold_then_follows_the_prior():
    tr = fake_trace([0, 0], [100.0, 100.0], [2])
    rb = RiskBudget(W, 0.5, cold_n=10)
    rb.reset(tr)
    rb.resolve(feed(rb, [0, 1], 0.0005, 0.0))
    assert rb.allowed(4000.0, [2]) == [[CERTAIN, CERTAIN]]  # 2 outcomes < cold_n: certainty only
    warm = RiskBudget(W, 0.5, cold_n=1.5)  # decayed counts: 0.99 + 1
    warm.reset(tr)
    warm.resolve(feed(warm, [0, 1], 0.0005, 0.0))
    # warm, two fits, no pool with unused quota (cost 1): every bin whose bound <= 0.5
    ub = warm.bounds()
    assert warm.allowed(4000.0, [0]) == [[int((ub[0, k] <= 0.5).sum()) for k in range(2)]]
    assert warm.allowed(4000.0, [0])[0][0] >= 3


def test_realized_overruns_tighten_a_pool_and_good_outcomes_widen_it_again():
    # One pool, jobs predicted q = 0.02 (bin 3). 60 fits, then a change: 10 overruns, then
    # fits again. Budget 0.1, idle cluster (cost 1).
    n_ok, n_bad, n_after = 60, 10, 300
    d = [100.0] * n_ok + [5000.0] * n_bad + [100.0] * n_after
    tr = fake_trace([0] * len(d), d, [2])
    rb = RiskBudget(W, 0.1, memory=100)
    rb.reset(tr)
    t = rb_time = 0.0
    rb_time = feed(rb, list(range(n_ok)), 0.02, t)
    rb.resolve(rb_time)
    before = rb.allowed(rb_time, [0])[0][0]
    assert before >= 3  # bin 3 is lendable in 300 s
    rb_time = feed(rb, list(range(n_ok, n_ok + n_bad)), 0.02, rb_time + 1)
    rb.resolve(rb_time)
    assert rb.allowed(rb_time, [0])[0][0] < 3  # the overruns tightened the pool
    rb_time = feed(rb, list(range(n_ok + n_bad, len(d))), 0.02, rb_time + 1)
    rb.resolve(rb_time)
    assert rb.allowed(rb_time, [0])[0][0] >= 3  # the decay forgot them after good outcomes


def test_outcomes_are_known_only_once_they_happened():
    # a job that runs 1000 s is an overrun of the 300 s window at start + 300, a fit of the
    # 3600 s window at start + 1000: nothing is counted before
    tr = fake_trace([0], [1000.0], [1])
    rb = RiskBudget(W, 0.1, memory=1e9)
    rb.reset(tr)
    feed(rb, [0], 0.5, 50.0)
    rb.resolve(349.0)
    assert rb.stats["outcomes"] == 0
    rb.resolve(350.0)
    assert (rb.stats["outcomes"], rb.stats["overruns"]) == (1, 1)
    rb.resolve(1049.0)
    assert rb.stats["outcomes"] == 1
    rb.resolve(1050.0)
    assert (rb.stats["outcomes"], rb.stats["overruns"]) == (2, 1)


# ----------------------------------------------------------------------------- cost


def test_cost_of_a_miss_follows_the_busiest_pool_with_unused_quota():
    # pool 0 (quota 2): a 1-GPU job ran the last 12 h of a day: load 0.25. Pool 1 (quota 1):
    # a 1-GPU job ran all day: load 1 -> cost capped at 100 while pool 1 has unused quota.
    day = 86400.0
    tr = fake_trace([0, 1], [day / 2, 2 * day], [2, 1])
    rb = RiskBudget(W, 0.1, load_days=1.0)
    rb.reset(tr)
    rb.started(day / 2, [0])
    rb.started(0.0, [1])
    assert rb.loads(day).tolist() == pytest.approx([0.25, 1.0])
    assert rb.cost(day + 300, [2, 0]) == pytest.approx(1 / 0.75)
    assert rb.cost(day + 300, [2, 1]) == pytest.approx(100.0)
    assert rb.cost(day + 300, [0, 0]) == 1.0


def test_the_expected_cost_weighs_the_pools_by_their_unused_gpus_by_hand():
    # the loads of the test above: 0.25 and 1.0 (pool 1's cost capped at 100). Busiest: 100 as
    # soon as pool 1 has unused quota. Expected: (2 x 1/0.75 + 1 x 100) / 3 = 34.22...
    day = 86400.0
    tr = fake_trace([0, 1], [day / 2, 2 * day], [2, 1])
    rb = RiskBudget(W, 0.1, load_days=1.0, cost_mode="expected")
    rb.reset(tr)
    rb.started(day / 2, [0])
    rb.started(0.0, [1])
    assert rb.cost(day + 300, [2, 1]) == pytest.approx((2 / 0.75 + 100.0) / 3)
    assert rb.cost(day + 300, [2, 0]) == pytest.approx(1 / 0.75)
    assert rb.cost(day + 300, [0, 0]) == 1.0


def test_the_reclaim_cost_weighs_the_pools_by_unused_gpus_times_load_by_hand():
    # the same loads 0.25 and 1.0 (costs 1/0.75 and 100), unused 2 and 1: weights 2 x 0.25 and
    # 1 x 1.0, so (0.5 / 0.75 + 100) / 1.5 = 67.11..., between the expectation (34.22) and the
    # busiest (100)
    day = 86400.0
    tr = fake_trace([0, 1, 2], [day / 2, 2 * day, 10.0], [2, 1, 4])
    rb = RiskBudget(W, 0.1, load_days=1.0, cost_mode="reclaim")
    rb.reset(tr)
    rb.started(day / 2, [0])
    rb.started(0.0, [1])
    assert rb.cost(day + 300, [2, 1, 0]) == pytest.approx((0.5 / 0.75 + 100.0) / 1.5)
    assert rb.cost(day + 300, [2, 0, 0]) == pytest.approx(1 / 0.75)
    # pool 2 never ran (load 0): it reclaims nothing, so it weighs nothing, however many GPUs
    assert rb.cost(day + 300, [2, 1, 4]) == pytest.approx((0.5 / 0.75 + 100.0) / 1.5)
    # only idle pools with unused quota: no one to delay but at the cost of one job
    assert rb.cost(day + 300, [0, 0, 4]) == 1.0
    assert rb.cost(day + 300, [0, 0, 0]) == 1.0


def test_a_memory_whose_weights_stay_finite_is_accepted():
    # the smallest memories accepted: (1 - 1/m)^-1999 finite from about m = 3.35 on
    for m in (3.4, 4.0, 1e9):
        RiskBudget(W, 0.1, cold_n=0.1, memory=m)


def test_live_next_due_comes_back_from_a_completion_queued_early():
    # live: resolve() before the first outcome queues a completion's fit (job 0 ended at 100 s)
    # and returns; a later start of a job without a prediction must set next_due from the
    # queued outcomes (100 s), as it does whenever no predicted job runs, not leave it at -inf
    tr = SimpleNamespace(n_pools=1, n_jobs=2, duration=np.array([math.nan, math.nan]),
                         num_gpus=np.array([1, 1]), pool=np.array([0, 0]), quota=np.array([2]),
                         submit=np.zeros(2))
    rb = RiskBudget((300.0,), 3.0)
    rb.reset(tr)
    rb.classify(np.array([0]), np.array([[0.9]]), None)  # job 0 predicted, job 1 not
    rb.started(0.0, [0])
    assert rb.next_due == -math.inf  # (a completion can come at any time)
    tr.duration[0] = 100.0  # the service learns that job 0 ended at 100 s
    rb.resolve(50.0)
    rb.started(60.0, [1])
    assert rb.next_due == 100.0
    rb.resolve(100.0)  # the fit taken; its deadline's event (300 s) stays, moot
    assert rb.summary()["outcomes"] == 1 and rb.next_due == 300.0


def test_bad_options_name_themselves():
    for kw, opt in (({"risk": -0.1}, "risk"), ({"risk": 101}, "risk"),
                    ({"risk": 0.1, "level": 1.0}, "risk_level"),
                    ({"risk": 0.1, "cost_cap": 0.5}, "risk_cost_cap"),
                    ({"risk": 0.1, "cold_n": 200, "memory": 100}, "risk_memory"),
                    # a decay <= 0, or weights decay^-t that overflow before the renormalisation
                    ({"risk": 0.1, "cold_n": 0.1, "memory": 0.5}, "risk_memory"),
                    ({"risk": 0.1, "cold_n": 0.1, "memory": 1.0}, "risk_memory"),
                    ({"risk": 0.1, "cold_n": 0.1, "memory": 3.0}, "risk_memory"),
                    ({"risk": 0.1, "cost_mode": "mean"}, "risk_cost")):
        risk = kw.pop("risk")
        with pytest.raises(ConfigError, match=opt):
            RiskBudget(W, risk, **kw)


# ----------------------------------------------------------------------------- properties


@st.composite
def budget_states(draw):
    P = draw(st.integers(1, 4))
    n = draw(st.integers(0, 60))
    pools = [draw(st.integers(0, P - 1)) for _ in range(n)]
    d = [draw(st.sampled_from([30.0, 299.0, 301.0, 3000.0, 4000.0])) for _ in range(n)]
    q = [draw(st.sampled_from([0.0, 0.0005, 0.005, 0.02, 0.05, 0.2, 0.6])) for _ in range(n)]
    unused = [draw(st.integers(0, 3)) for _ in range(P)]
    return P, pools, d, q, unused


def budget_at(state, r: float, **options) -> RiskBudget:
    """A budget at ``r`` fed ``state`` (:func:`budget_states`): every job classified with its q,
    started at 0 and resolved at 5,000 s."""
    P, pools, d, q, _ = state
    rb = RiskBudget(W, r, **options)
    rb.reset(fake_trace(pools, d, [3] * P))
    for j, qj in enumerate(q):
        rb.classify(np.array([j]), np.full((1, 2), 1.0 - qj), None)
    rb.started(0.0, list(range(len(q))))
    rb.resolve(5000.0)
    return rb


@settings(max_examples=100, deadline=None)
@given(state=budget_states(), r1=st.floats(0.0, 1.0), r2=st.floats(0.0, 1.0),
       cold=st.sampled_from([0.0, 3.0, 10.0]))
def test_more_budget_never_allows_fewer_loans(state, r1, r2, cold):
    unused = state[4]
    lo, hi = min(r1, r2), max(r1, r2)
    got = [np.asarray(budget_at(state, r, cold_n=cold).allowed(5000.0, unused)) for r in (lo, hi)]
    assert np.all(got[0] <= got[1])
    if lo == 0.0:
        assert np.all(got[0] == CERTAIN)


@settings(max_examples=100, deadline=None)
@given(state=budget_states(), r=st.floats(0.01, 10.0))
def test_the_expected_costs_are_never_above_the_busiest_and_lend_at_least_as_much(state, r):
    # a weighted mean of the pools' costs is at most their largest: the same state lends every
    # bin the busiest pool's cost lends. Weighing by load too ("reclaim") puts more weight on
    # the costlier pools (the cost grows with the load), so it is at least the expectation by
    # unused GPUs alone (Chebyshev's sum inequality; up to the rounding of the two sums)
    unused = state[4]
    got, costs = [], []
    for mode in ("busiest", "expected", "reclaim"):
        rb = budget_at(state, r, cold_n=0.0, cost_mode=mode)
        costs.append(rb.cost(5000.0, unused))
        got.append(np.asarray(rb.allowed(5000.0, unused)))
    busiest, expected, reclaim = costs
    assert expected <= busiest and reclaim <= busiest
    assert reclaim >= expected * (1.0 - 1e-12)
    assert np.all(got[0] <= got[1]) and np.all(got[0] <= got[2])


def table(rows: list[tuple]) -> pl.DataFrame:
    cols = ["job_id", "pool", "submit_time", "duration", "num_gpus", "time_limit"]
    return validate(pl.DataFrame(rows, schema=cols[:len(rows[0])], orient="row"))[0]


DURATIONS = [30.0, 299.0, 300.0, 301.0, 1800.0, 3600.0, 3601.0, 20000.0, 43200.0, 50000.0]


@st.composite
def small_traces(draw):
    n_pools = draw(st.integers(2, 3))
    quotas = {f"p{i}": draw(st.integers(1, 4)) for i in range(n_pools)}
    n = draw(st.integers(1, 20))
    rows = []
    for i in range(n):
        pool = f"p{draw(st.integers(0, n_pools - 1))}"
        rows.append((f"j{i:03d}", pool, float(draw(st.integers(0, 40)) * 150),
                     draw(st.sampled_from(DURATIONS)), draw(st.integers(1, quotas[pool]))))
    return rows, quotas


def slowed(jobs: pl.DataFrame, pools: pl.DataFrame, policy) -> pl.DataFrame:
    base = simulate(jobs, pools, make_policy("fcfs"))
    res = simulate(jobs, pools, policy, check_invariants=True)
    return res.with_columns(fcfs_end=base["end_time"]).filter(
        pl.col("end_time") > pl.col("fcfs_end") + 1e-6)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), refresh=st.sampled_from([0.0, 300.0]))
def test_risk_zero_with_perfect_predictions_slows_no_job_and_lends_as_before(trace, refresh):
    rows, quotas = trace
    jobs, pools = table(rows), make_pools(quotas)
    pol = make_policy("sia-perfect", refresh_s=refresh, risk=0.0)
    assert slowed(jobs, pools, pol).height == 0
    # perfect durations are certain: the budget lends exactly what the bin rule lends
    plain = simulate(jobs, pools, make_policy("sia-perfect", refresh_s=refresh))
    assert simulate(jobs, pools, pol).equals(plain)


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000),
       variant=st.sampled_from(["base", "higher-load", "more-duration-skew"]))
def test_risk_zero_with_perfect_durations_slows_no_job_synthetic(seed, variant):
    jobs, pools = generate_workload(variant, seed, days=1.0)
    pol = make_policy("sia-perfect", risk=0.0)
    assert slowed(jobs, pools.select("pool", "quota_gpus"), pol).height == 0


class ShortForecaster(UnderForecaster):
    """Never expects an arrival; says every job surely fits 5 minutes (P = 0.9999)."""

    name = "short"

    def duration_cdf(self, view, job_indices, windows_s):
        return np.full((len(job_indices), len(windows_s)), 0.9999)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), limits=st.lists(st.sampled_from([None, 100.0, 1000.0, 40000.0]),
                                             min_size=20, max_size=20),
       risk=st.sampled_from([0.0, 0.5, 1.0]))
def test_cold_pool_lends_only_on_certainty(trace, limits, risk):
    # every pool stays cold (cold_n 50 > its jobs): only jobs whose limit fits are lent, however
    # sure the forecaster is and however large the budget
    rows, quotas = trace
    rows = [r + (limits[i],) for i, r in enumerate(rows)]
    pol = SiaPolicy(ShortForecaster(), risk=risk, risk_cold_n=50.0, risk_memory=100.0,
                    adaptation=False, risk_arrivals="predicted")  # the duration side alone
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    assert pol.summary()["risk_lent_predicted"] == 0
    lent = res.filter(pl.col("opportunistic"))
    assert (lent["time_limit"].is_not_null()).all() if "time_limit" in lent.columns else True
    served = pol.facts()["served"]["job_duration"]
    assert sum(v.get("lent_predicted", 0) for v in served.values()) == 0


def test_warm_pool_lends_on_prediction_and_risk_zero_does_not():
    # B (quota 1) has 40 jobs of 100 s; A (quota 3) is idle. With the budget, B's first jobs
    # run on its quota (B is cold); once 10 outcomes are known and fit, B borrows A's GPUs.
    rows = [(f"b{i:02d}", "B", float(i), 100.0, 1) for i in range(40)]
    pools = make_pools({"A": 3, "B": 1})
    lent = {}
    for risk in (0.0, 0.1):
        pol = SiaPolicy(ShortForecaster(), windows_s=(300.0,), risk=risk, adaptation=False,
                        risk_arrivals="predicted")  # the duration side alone
        res = simulate(table(rows), pools, pol, check_invariants=True)
        lent[risk] = res.filter(pl.col("opportunistic"))
    assert lent[0.0].height == 0
    assert lent[0.1].height > 0
    assert lent[0.1]["start_time"].min() >= 10 * 100.0  # not before 10 outcomes were known


@pytest.mark.parametrize("renorm", [5, 2000])
def test_lazy_decay_equals_decaying_every_count_at_each_outcome(monkeypatch, renorm):
    import sia.scheduler.policies.sia.risk as risk_mod

    monkeypatch.setattr(risk_mod, "_RENORM", renorm)
    n_jobs = 23
    d = [1000.0 if i % 3 == 0 else 100.0 for i in range(n_jobs)]
    rb = RiskBudget((300.0,), 0.1, memory=10.0, cold_n=1.0)
    rb.reset(fake_trace([0] * n_jobs, d, [1]))
    lam = 1 - 1 / 10.0
    n = m = 0.0
    for i in range(n_jobs):
        feed(rb, [i], 0.0005, float(i * 1000))
        rb.resolve(float(i * 1000 + 999))
        n, m = n * lam + 1.0, m * lam + float(d[i] > 300.0)
    got_n, got_m = rb._decayed(np.array([0]))
    assert got_n[0, 0, 0] == pytest.approx(n) and got_m[0, 0, 0] == pytest.approx(m)


# ----------------------------------------------------------------------------- lazy bounds


def test_q_bins_puts_nan_and_infinities_where_clipping_them_would():
    q = np.array([np.nan, np.inf, -np.inf, -0.0, 1.0 + 1e-12])
    assert q_bins(q).tolist() == [NEVER, NEVER, 1, 1, NEVER]


def eager_bounds(rb: RiskBudget, pools: list[int]) -> np.ndarray:
    """The bounds [pools, K, B] computed at once from the counts (numpy), as the bookkeeping did
    before its quantiles were computed on first read."""
    n, m = rb._decayed(np.asarray(pools))
    g = rb._g[None]
    a = m + rb.prior_n * g
    b = np.maximum(n - m, 0.0) + rb.prior_n * (1.0 - g)
    return np.maximum.accumulate(betaincinv(a, np.maximum(b, 1e-9), rb.level), axis=2)


@settings(max_examples=60, deadline=None)
@given(state=budget_states(), r=st.sampled_from([0.001, 0.01, 0.1, 1.0, 5.0]),
       memory=st.sampled_from([10.0, 100.0]))
def test_lazy_bounds_equal_the_eager_bounds_bit_for_bit(state, r, memory):
    # the quantiles a lazy allowed() reads come from the counts kept at the refresh: the same
    # floats as the vectorised computation of every bin at that moment
    P, unused = state[0], state[4]
    rb = budget_at(state, r, cold_n=0.0, memory=memory)
    got = rb.allowed(5000.0, unused)  # refreshes every pool, reads only the bins it needs
    want = eager_bounds(rb, list(range(P)))
    c = rb.cost(5000.0, unused)
    assert got == (want * c <= r).sum(axis=2).tolist()
    assert np.array_equal(rb.bounds(5000.0), want)  # no refresh: the same snapshot, all bins


def test_a_refresh_keeps_the_counts_of_its_time_until_the_next():
    # two fits resolved after a refresh (no overrun: not dirty, < 300 s later) do not change
    # the bounds read later from that refresh; a second budget stopped at the refresh agrees
    d = [100.0] * 30
    runs, later = [], None
    for extra in (True, False):
        rb = RiskBudget(W, 0.1, cold_n=0.0, memory=50.0)
        rb.reset(fake_trace([0] * 30, d, [2]))
        rb.resolve(feed(rb, list(range(28)), 0.0005, 0.0))  # bin 1: its bound is not masked
        rb.allowed(4000.0, [0])  # the refresh; reads the first bins only
        if extra:
            feed(rb, [28, 29], 0.0005, 4000.0)
            rb.resolve(4200.0)
            assert rb.stats["outcomes"] == 2 * 28 + 4  # both jobs ended (100 s): both windows
            later = eager_bounds(rb, [0])  # what today's counts would give
        runs.append(rb.bounds(4250.0, [0]))
    assert np.array_equal(runs[0], runs[1])
    assert not np.array_equal(runs[0], later)


@contextlib.contextmanager
def _half_resolved(state, split: float, renorm: int):
    """Yield (budget, q, cut, unused): a budget (``_RENORM`` set to ``renorm`` meanwhile) whose
    first ``cut`` jobs of ``state`` started at 0 and were resolved at 5000 s, then ``allowed``
    at 5000 s (every pool refreshed, the prior updated)."""
    import sia.scheduler.policies.sia.risk as risk_mod

    P, pools, d, q, unused = state
    cut = int(split * len(q))
    old = risk_mod._RENORM
    risk_mod._RENORM = renorm
    try:
        rb = RiskBudget(W, 0.1, cold_n=0.0, memory=10.0)
        rb.reset(fake_trace(pools, d, [3] * P))
        for j, qj in enumerate(q):
            rb.classify(np.array([j]), np.full((1, 2), 1.0 - qj), None)
        rb.started(0.0, list(range(cut)))
        rb.resolve(5000.0)
        rb.allowed(5000.0, unused)
        yield rb, q, cut, unused
    finally:
        risk_mod._RENORM = old


@settings(max_examples=60, deadline=None)
@given(state=budget_states(), renorm=st.sampled_from([3, 2000]), split=st.floats(0.0, 1.0))
def test_a_snapshot_keeps_the_counts_of_its_refresh_while_they_change(state, renorm, split):
    # a refresh's snapshot is a copy of the live counts (taken by the next scan); outcomes
    # resolved after it (renormalisation included) leave it as it was, while the live counts
    # do move
    with _half_resolved(state, split, renorm) as (rb, q, cut, unused):
        taken = [x.copy() for x in (rb._snap_nm, rb._snap_f, rb._snap_ab, rb._snap_ver)]
        live = rb._nm.copy()
        rb.started(5000.0, list(range(cut, len(q))))
        rb.resolve(10_000.0)  # no refresh in between: no allowed() call
    assert all(np.array_equal(a, b) for a, b in zip(
        (rb._snap_nm, rb._snap_f, rb._snap_ab, rb._snap_ver), taken, strict=True))
    assert (not np.array_equal(rb._nm, live)) == (cut < len(q))  # every later job is scored


@settings(max_examples=60, deadline=None)
@given(runs=st.lists(st.tuples(st.integers(0, 3), st.floats(0.0, 86400.0),
                               st.floats(1.0, 2 * 86400.0), st.integers(1, 4)), max_size=12),
       unused=st.lists(st.integers(0, 2), min_size=4, max_size=4))
def test_cost_reads_the_busiest_pool_with_unused_quota_whatever_the_order(runs, unused):
    # the pools kept by load (busiest first) give the largest load among those with unused
    # quota, ties and all-idle included
    day = 86400.0
    tr = fake_trace([r[0] for r in runs], [r[2] for r in runs], [2, 1, 3, 1],
                    [r[3] for r in runs])
    rb = RiskBudget(W, 0.1, load_days=1.0)
    rb.reset(tr)
    for j, r in enumerate(runs):
        rb.started(r[1], [j])
    load = rb.loads(day).tolist()
    rho = max([load[p] for p, u in enumerate(unused) if u > 0], default=0.0)
    assert rb.cost(day + 1.0, unused) == 1.0 / max(1.0 - rho, 1.0 / 100.0)


# ----------------------------------------------------------------------------- incremental state


def used_from_scratch(starts: list[tuple[float, int, float, float]], n_pools: int, now: float,
                      lo: float) -> np.ndarray:
    """Each pool's GPU-seconds in [lo, now], summed job by job as loads() did before it was kept
    incrementally (a running job counts up to now)."""
    if not starts:
        return np.zeros(n_pools)
    t, p, g, d = (np.asarray(x) for x in zip(*starts, strict=True))
    end = np.minimum(t + d, now)
    ran = np.clip(end - np.maximum(t, lo), 0.0, None) * g
    return np.bincount(p.astype(np.int64), weights=ran, minlength=n_pools)


@st.composite
def use_histories(draw, whole: bool):
    """Chronological starts (time, pool, GPUs, duration) with queries (now, period) between."""
    P = draw(st.integers(1, 4))
    t, events = 0.0, []
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.integers(0, 5000)) if whole else draw(st.floats(0.0, 5000.0))
        if draw(st.booleans()):
            d = draw(st.integers(1, 20000)) if whole else draw(st.floats(0.5, 20000.0))
            events.append(("start", t, draw(st.integers(0, P - 1)),
                           float(draw(st.integers(1, 8))), float(d)))
        else:
            events.append(("query", t, draw(st.sampled_from([600.0, 3600.0, 86400.0]))))
    return P, events


def _use_answers(P, events):
    """Feed ``events`` to a RecentUse; yield (its answer, the job-by-job sum) at each query."""
    use, starts, last_lo = RecentUse(P), [], -np.inf
    for ev in events:
        if ev[0] == "start":
            _, t, p, g, d = ev
            use.start(t, p, g, t + d)
            starts.append((t, p, g, d))
        else:
            _, now, period = ev
            lo = max(now - period, last_lo)  # the period's start never goes back
            last_lo = lo
            yield use.used(now, lo), used_from_scratch(starts, P, now, lo)


@settings(max_examples=150, deadline=None)
@given(hist=use_histories(whole=True))
def test_recent_use_equals_the_job_by_job_sum_exactly_on_whole_seconds(hist):
    # whole-second times and GPU counts: every sum is an integer, so the incremental sweeps give
    # the same floats as the job-by-job sum (the identity check of the Philly replay needs it)
    for got, want in _use_answers(*hist):
        assert got == want.tolist()


@settings(max_examples=150, deadline=None)
@given(hist=use_histories(whole=False))
def test_recent_use_equals_the_job_by_job_sum_up_to_rounding(hist):
    for got, want in _use_answers(*hist):
        assert got == pytest.approx(want.tolist(), rel=1e-9, abs=1e-6)


class _PythonSweeps:
    """The Python sweeps the compiled RecentUse replaced (sessions 29-32), as the reference of
    its floats: starts sorted as tuples, ends from heapq, a start before an end at a tie."""

    def __init__(self, P):
        self.starts, self.ends, self.passed = [], [], deque()
        self.front = ([0.0] * P, [0.0] * P, [0.0] * P)
        self.back = ([0.0] * P, [0.0] * P, [0.0] * P)

    def start(self, t, pool, gpus, end):
        self.starts.append((t, pool, gpus))
        heapq.heappush(self.ends, (end, pool, -gpus))

    def used(self, now, lo):
        a, s, last = self.front
        self.starts.sort()
        i = 0
        while True:
            st, ends = self.starts, self.ends
            if i < len(st) and st[i][0] <= now and not (ends and ends[0][0] < st[i][0]):
                e = st[i]
                i += 1
            elif ends and ends[0][0] <= now:
                e = heapq.heappop(ends)
            else:
                break
            t, p, g = e
            a[p] += s[p] * (t - last[p])
            s[p] += g
            last[p] = t
            self.passed.append(e)
        del self.starts[:i]
        ab, sb, lastb = self.back
        while self.passed and self.passed[0][0] <= lo:
            t, p, g = self.passed.popleft()
            ab[p] += sb[p] * (t - lastb[p])
            sb[p] += g
            lastb[p] = t
        return [(x + y * (now - z)) - (xb + yb * (lo - zb))
                for x, y, z, xb, yb, zb in zip(a, s, last, ab, sb, lastb, strict=True)]


@st.composite
def tied_use_histories(draw):
    """Starts and queries on a coarse clock (many ties: starts, ends and queries at the same
    time) with fractional GPUs (the order of the sums shows in their rounding)."""
    P = draw(st.integers(1, 3))
    t, events = 0.0, []
    for _ in range(draw(st.integers(0, 40))):
        t += draw(st.sampled_from([0.0, 0.0, 10.0, 0.1, 25.0]))
        if draw(st.integers(0, 2)):
            events.append(("start", t, draw(st.integers(0, P - 1)),
                           draw(st.sampled_from([0.1, 0.2, 0.3, 1.7, 3.0])),
                           draw(st.sampled_from([10.0, 0.1, 20.0, 35.0, 1e-3]))))
        else:
            events.append(("query", t, draw(st.sampled_from([10.0, 35.0, 600.0]))))
    return P, events


@settings(max_examples=300, deadline=None)
@given(hist=st.one_of(tied_use_histories(), use_histories(whole=False),
                      use_histories(whole=True)),
       quota=st.floats(0.5, 64.0), span=st.floats(1.0, 1e6))
def test_recent_use_gives_the_python_sweeps_floats_exactly(hist, quota, span):
    # any times and GPU counts (rounding included): the compiled sweeps take the events in the
    # same order with the same operations, so the same floats, and per_quota divides them
    P, events = hist
    use, ref, per, last_lo = RecentUse(P), _PythonSweeps(P), RecentUse(P), -np.inf
    for ev in events:
        if ev[0] == "start":
            _, t, p, g, d = ev
            for u in (use, ref, per):
                u.start(t, p, g, t + d)
        else:
            _, now, period = ev
            lo = max(now - period, last_lo)
            last_lo = lo
            want = ref.used(now, lo)
            assert use.used(now, lo) == want
            assert per.per_quota(now, lo, [quota] * P, span) == [u / (quota * span) for u in want]


def test_recent_use_hand_values_and_clock():
    use = RecentUse(2)
    use.start(0.0, 0, 2.0, 100.0)  # 2 GPUs over [0, 100]
    use.start(50.0, 1, 1.0, 1000.0)  # 1 GPU from 50, still running at 200
    assert use.used(200.0, 20.0) == [160.0, 150.0]
    assert use.used(300.0, 90.0) == [20.0, 210.0]  # [90, 100] x 2 GPUs; [90, 300] x 1
    with pytest.raises(ValueError, match="precedes"):
        use.start(250.0, 0, 1.0, 400.0)


@settings(max_examples=200, deadline=None)
@given(cdf=st.lists(st.lists(st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                                       st.sampled_from([0.0, 1.0, -0.0, 0.999, 0.99, 0.97])),
                             min_size=2, max_size=2), min_size=1, max_size=4),
       sure=st.one_of(st.none(), st.lists(st.integers(0, 2), min_size=4, max_size=4)),
       perfect=st.booleans())
def test_classify_gives_the_bins_and_q_of_the_array_formula(cdf, sure, perfect):
    # classify works job by job in Python floats; the array formula it replaced is the spec
    n = len(cdf)
    rb = RiskBudget(W, 0.1, perfect_durations=perfect)
    rb.reset(fake_trace([0] * n, [100.0] * n, [1]))
    s = None if sure is None else np.asarray(sure[:n])
    got = rb.classify(np.arange(n), np.asarray(cdf), s)
    q = 1.0 - np.clip(np.asarray(cdf, dtype=np.float64), 0.0, 1.0)
    want = np.where(q <= 0.0, CERTAIN, NEVER) if perfect else q_bins(q)
    if s is not None:
        want = np.where(np.arange(2)[None, :] >= s[:, None], CERTAIN, want)
    assert got.tolist() == want.tolist() and got.dtype == np.int64
    assert [[rb.job_bin[k][j] for k in range(2)] for j in range(n)] == want.tolist()
    np.testing.assert_array_equal(np.asarray(rb._q).T, q)  # NaN where q is NaN


def forget_reuse(rb: RiskBudget) -> None:
    """Make ``rb`` compute the prior and every pool's row anew from its snapshot as it is, by a
    scan of every warm window and without a certificate, from now on (the reference the kept
    rows and certificates are checked against). (The snapshots stay: a pool without one was
    never refreshed and its bounds are 1.0.)"""
    rb._prior_seen[:] = -1
    rb._row_ver[:] = -1
    rb._certify = False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=budget_states(), times=st.lists(st.integers(1, 40), min_size=1, max_size=8),
       r=st.sampled_from([0.01, 0.1, 1.0]))
def test_kept_quantiles_and_scans_equal_recomputing_them(state, times, r):
    # a refresh keeps a window's quantiles (and allowed a pool's scan) only when nothing they
    # depend on moved: over a random history, the answers and bounds equal those of a budget
    # that recomputes everything at each refresh
    def probe(i, rb, now, unused):
        if i == 1:
            forget_reuse(rb)
        return rb.allowed(now, unused), rb.bounds(now).tolist()

    _drive_two(state, times, r, probe)


def _drive_two(state, times, r, probe):
    """Replay a random history into two budgets; at each step each answers ``probe(i, rb,
    now, unused)`` after taking in the outcomes due, then takes the step's batch of jobs;
    the two answers must be equal at every step."""
    P, pools, d, q, unused = state
    rbs = [RiskBudget(W, r, cold_n=1.0, memory=20.0) for _ in range(2)]
    for rb in rbs:
        rb.reset(fake_trace(pools, d, [3] * P))
    now, nxt = 0.0, 0
    for step in times:
        now += 150.0 * step
        batch = list(range(nxt, min(len(q), nxt + 5)))
        nxt += len(batch)
        outs = []
        for i, rb in enumerate(rbs):
            rb.resolve(now)
            outs.append(probe(i, rb, now, unused))
            if batch:
                rb.classify(np.asarray(batch), np.asarray([[1.0 - q[j]] * 2 for j in batch]),
                            None)
                rb.started(now, batch)
        assert outs[0] == outs[1]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(state=budget_states(), times=st.lists(st.integers(1, 40), min_size=1, max_size=10),
       r=st.sampled_from([0.01, 0.03, 0.1, 0.3, 1.0, 3.0]),
       masks=st.lists(st.lists(st.booleans(), min_size=4, max_size=4), min_size=1, max_size=4))
def test_kept_window_scans_equal_scanning_anew(state, times, r, masks):
    # allowed() alone, several calls per step with different pools holding unused quota (so
    # different costs, and back), over a history whose outcomes move the prior and the pools'
    # counts: a window keeps its last scan only while its quantiles and the cost are the same,
    # and a pool its last row only while that row's certificate holds, so the answers equal a
    # budget's that forgets both before every call (bounds() is not called: it forgets the
    # kept scans)
    def probe(i, rb, now, unused):
        got = []
        for mask in masks:
            if i == 1:
                forget_reuse(rb)
            held = [u if f else 0 for u, f in zip(unused, mask[:len(unused)], strict=True)]
            got.append(rb.allowed(now, held))
        return got

    _drive_two(state, times, r, probe)


def test_live_durations_learned_later_are_read_from_the_trace():
    # the live service's durations are inf until a job ends, then written into the trace: the
    # loads then sum job by job from the array as it is now (no incremental end times)
    day = 86400.0
    tr = fake_trace([0], [np.inf], [2])
    rb = RiskBudget(W, 0.1, load_days=1.0)
    rb.reset(tr)
    rb.started(0.0, [0])
    assert rb.loads(day).tolist() == [0.5]  # running all day: up to now
    tr.duration[0] = day / 2  # learned at its end
    assert rb.loads(day + 300.0).tolist() == [pytest.approx((day / 2 - 300.0) / (2 * day))]


# ----------------------------------------------------------------------------- cdf comparisons


@settings(max_examples=300, deadline=None)
@given(x=st.floats(0.0, 1.0), c=st.floats(1.0, 1000.0), risk=st.floats(1e-6, 100.0))
def test_largest_within_is_the_threshold_of_the_rounded_product(x, c, risk):
    t = largest_within(risk, c)
    assert t * c <= risk and math.nextafter(t, math.inf) * c > risk
    assert (x * c <= risk) == (x <= t)


def test_quantile_within_hand_checked_betas():
    # Beta(1, 9): cdf 1 - (1 - x)^9, 0.9 quantile 1 - 0.1^(1/9) = 0.2257363...;
    # Beta(2, 1): cdf x^2, 0.9 quantile sqrt(0.9) = 0.9486833...
    q19, q21 = 1.0 - 0.1 ** (1.0 / 9.0), math.sqrt(0.9)
    assert 0.22573 < q19 < 0.22574 and 0.94868 < q21 < 0.94869
    a, b = np.array([1.0, 2.0]), np.array([9.0, 1.0])
    assert quantile_within(a, b, 0.9, 0.2258).tolist() == [1, 0]
    assert quantile_within(a, b, 0.9, 0.2257).tolist() == [0, 0]
    assert quantile_within(a, b, 0.9, 0.9487).tolist() == [1, 1]
    assert quantile_within(a, b, 0.9, 0.9486).tolist() == [1, 0]
    assert quantile_within(a, b, 0.9, 1.0).tolist() == [1, 1]  # every quantile is <= 1
    # at the quantile itself (within the bracket) the cdf does not decide: the exact one does
    assert quantile_within(a[:1], b[:1], 0.9, q19).tolist() == [-1]
    assert quantile_within(a[1:], b[1:], 0.9, q21).tolist() == [-1]
    assert quantile_within(np.array([np.nan]), np.array([1.0]), 0.9, 0.5).tolist() == [-1]


@settings(max_examples=400, deadline=None)
@given(a=st.one_of(st.floats(0.0, 300.0), st.just(math.nan)), b=st.floats(1e-9, 300.0),
       level=st.floats(0.5, 0.999), t=st.floats(0.0, 1.2), near=st.booleans(),
       s=st.floats(-1e-5, 1e-5))
def test_cell_within_is_quantile_within_for_one_cell(a, b, level, t, near, s):
    # the scan's one-cell test (scipy's scalar betainc) answers as the ufunc's array version,
    # near the quantile too
    if near and a == a and a > 0:
        t = min(float(betaincinv(a, b, level)) * (1.0 + s), 1.2)
    want = int(quantile_within(np.array([a]), np.array([b]), level, t)[0])
    assert cell_within(a, b, level, t) == want


@settings(max_examples=400, deadline=None)
@given(a=st.floats(1e-4, 300.0), b=st.floats(1e-9, 300.0), level=st.floats(0.5, 0.999),
       t=st.floats(1e-6, 1.2), near=st.booleans(), s=st.floats(-1e-5, 1e-5))
def test_quantile_within_agrees_with_the_exact_quantile(a, b, level, t, near, s):
    # where the cdf decides, it decides as comparing betaincinv's quantile would; near the
    # quantile (t at a relative distance |s| <= 1e-5, down to 0) as well as anywhere
    q = float(betaincinv(a, b, level))
    if near:
        t = q * (1.0 + s)
    got = int(quantile_within(np.array([a]), np.array([b]), level, t)[0])
    assert got in (-1, int(q <= t))


@settings(max_examples=80, deadline=None)
@given(state=budget_states(), pick=st.integers(0, 10_000), below=st.booleans())
def test_allowed_at_a_budget_equal_to_a_bound_times_the_cost(state, pick, below):
    # the budget set to exactly a bound x the cost (or the float below): the cdf cannot decide
    # that bin, the exact quantile does, and allowed() counts the bins as the bounds say
    unused = state[4]
    ref = budget_at(state, 0.1, cold_n=0.0)
    ref.allowed(5000.0, unused)
    want, c = ref.bounds(5000.0), ref.cost(5000.0, unused)
    edge = float(want.flat[pick % want.size]) * c
    edge = math.nextafter(edge, 0.0) if below else edge
    if not 0.0 < edge <= 100.0:
        return
    rb = budget_at(state, edge, cold_n=0.0)
    assert rb.allowed(5000.0, unused) == (want * c <= edge).sum(axis=2).tolist()


# ----------------------------------------------------------------------------- fifth cut


@settings(max_examples=200, deadline=None)
@given(x=st.one_of(st.floats(0.5, 1.0), st.floats(-20.0, 0.99).filter(bool),
                 st.sampled_from([0.99, 0.999])),
       i=st.integers(0, 1999))
def test_the_weights_table_holds_the_power_bit_for_bit(x, i):
    from sia.scheduler.policies.sia.risk import _NegPowers

    try:
        want = x ** -i
    except OverflowError:  # (memory <= 2: the weights overflow before the renormalisation)
        with pytest.raises(OverflowError):
            _NegPowers(x).table()[i]
        return
    assert _NegPowers(x).table()[i] == want


def test_a_zero_base_keeps_raising_as_the_power_does():
    from sia.scheduler.policies.sia.risk import _NegPowers

    table = _NegPowers(0.0).table()
    assert table[0] == 1.0
    with pytest.raises(ZeroDivisionError):
        table[3]


# ----------------------------------------------------------------------------- due pools, lazy prior


@settings(max_examples=200, deadline=None)
@given(P=st.integers(1, 6), calls=st.lists(
    st.tuples(st.one_of(st.integers(0, 400), st.none()), st.lists(st.integers(0, 5), max_size=6),
              st.lists(st.integers(0, 5), max_size=3)), max_size=40))
def test_due_pools_are_the_overrun_or_300_s_old_ones(P, calls):
    # the due flags and the last refresh times (compiled) refresh, at each call, exactly the
    # asked pools that the rescan rule picks: an overrun since their last refresh, or 300 s
    # old; also when a refresh at +inf (bounds()' default) comes before later ones (step None)
    rb = RiskBudget(W, 0.1)
    rb.reset(fake_trace([0], [100.0], [1] * P))
    bt, dirty, clock = [-math.inf] * P, set(), 0.0
    for step, asked, overran in calls:
        if step is not None:
            clock += float(step)
        now = math.inf if step is None else clock
        for p in overran:  # as resolve marks a pool that overran
            if p < P:
                rb._due[p] = True
                dirty.add(p)
        pools = sorted({p for p in asked if p < P})
        # a pool 300 s old at a call is due from then on, asked or not (after a call at +inf,
        # until it is refreshed)
        dirty.update(p for p in range(P) if now - bt[p] >= 300.0)
        want = [p for p in pools if p in dirty]
        for p in want:
            bt[p] = now
            dirty.discard(p)
        rb._refresh(now, pools)
        assert rb._bt.tolist() == bt


def test_a_pool_is_due_once_its_last_refresh_is_300_s_old_hand_values():
    # 300 s old is due (not 299 s); a pool due but not asked stays due until it is asked
    rb = RiskBudget(W, 0.1)
    rb.reset(fake_trace([0], [100.0], [1, 1]))
    rb._refresh(0.0, [0, 1])
    assert rb._bt.tolist() == [0.0, 0.0]
    rb._refresh(299.0, [0, 1])
    assert rb._bt.tolist() == [0.0, 0.0]
    rb._refresh(300.0, [0])
    assert rb._bt.tolist() == [300.0, 0.0] and rb._due.tolist() == [False, True]
    rb._refresh(301.0, [1])
    assert rb._bt.tolist() == [300.0, 301.0] and not rb._due.any()


def eager_prior(rb: RiskBudget) -> np.ndarray:
    """The prior's rates [K, B] computed at once from today's global counts (numpy arrays)."""
    f = (rb._glam ** np.asarray(rb._gt, dtype=np.float64))[:, None]
    gn, gm, gs = (f * np.asarray(x)[:, 1:NEVER] for x in (rb._gn, rb._gm, rb._gs))
    qbar = np.where(gn > 0, gs / np.maximum(gn, 1e-12), np.asarray(Q_EDGES)[None])
    return np.maximum((gm + rb.prior_n * qbar) / (gn + rb.prior_n), 1e-4)


@settings(max_examples=60, deadline=None)
@given(state=budget_states(), split=st.floats(0.0, 1.0), renorm=st.sampled_from([3, 2000]))
def test_the_prior_is_the_one_of_its_update(state, split, renorm):
    # the prior's rates (compiled, at its update): the same floats as numpy's over every window
    # and bin at the update, however many outcomes were taken in after it
    with _half_resolved(state, split, renorm) as (rb, q, cut, unused):
        want = eager_prior(rb)  # allowed() made the prior's update
        prior = rb._prior
        rb.started(5000.0, list(range(cut, len(q))))
        rb.resolve(10_000.0)  # later outcomes: no update (no allowed() call)
        assert np.array_equal(np.asarray([prior.row(k)[0] for k in range(2)]), want)
        assert rb._prior_ab[0] == [[rb.prior_n * x for x in r] for r in want.tolist()]
        rb.allowed(10_000.0, unused)  # the next update takes the counts of its time
        assert np.array_equal(rb._g, eager_prior(rb))


@settings(max_examples=300, deadline=None)
@given(loads=st.lists(st.one_of(st.sampled_from([0.0, 0.5, 0.99, 1.0, 2.0, math.inf]),
                                st.floats(0.0, 3.0)), min_size=1, max_size=20),
       cap=st.sampled_from([100.0, 1.0, 3.0, math.inf]))
def test_the_compiled_costs_and_order_are_numpys_and_pythons(loads, cap):
    # _take_loads' one compiled pass: miss_cost's floats (an infinite cap: inf at a load of 1,
    # as numpy's division gives it, no error), and the pools by load as Python's stable
    # sorted(..., reverse=True) gives them (equal loads in pool order: ties drawn often)
    from sia.scheduler.policies.sia.risk import _costs_by_load  # (private: the kernel)
    load = np.asarray(loads, dtype=np.float64)
    cost, order = np.empty(load.size), np.empty(load.size, np.int64)
    _costs_by_load(load, 1.0 / cap, cost, order)
    with np.errstate(divide="ignore"):
        assert cost.tolist() == miss_cost(load, 1.0 / cap).tolist()
    assert order.tolist() == sorted(range(load.size), key=loads.__getitem__, reverse=True)


# ----------------------------------------------------------------------------- the compiled kernels


def python_prior_rates(f, gnk, gmk, gsk, n0):
    """The Python prior the compiled one replaced (session 35), kept as the reference: each
    bin's rate over all pools from a window's decayed counts, Python floats and ``max``."""
    out = []
    for b in range(1, NEVER):
        gn = f * gnk[b]
        qbar = f * gsk[b] / max(gn, 1e-12) if gn > 0 else Q_EDGES[b - 1]
        out.append(max((f * gmk[b] + n0 * qbar) / (gn + n0), 1e-4))
    return out


@settings(max_examples=300, deadline=None)
@given(counts=st.lists(st.tuples(st.floats(0.0, 1e3), st.floats(0.0, 1e3), st.floats(0.0, 1e3)),
                       min_size=NEVER + 1, max_size=NEVER + 1),
       zeros=st.lists(st.booleans(), min_size=NEVER + 1, max_size=NEVER + 1),
       f=st.one_of(st.floats(1e-3, 1.0), st.just(1.0)), n0=st.sampled_from([10.0, 0.5, 100.0]),
       moved=st.booleans())
def test_the_compiled_prior_gives_the_python_floats_exactly(counts, zeros, f, n0, moved):
    # bins without outcomes (their upper edge as the mean q), tiny counts (the 1e-12 floor of
    # the division), rates below G_FLOOR; a window not moved keeps what it had
    from sia.scheduler.policies.sia.risk import _EDGES, _prior_params
    g3 = np.zeros((3, 2, NEVER + 1))
    for b, ((n, m, q), z) in enumerate(zip(counts, zeros, strict=True)):
        g3[:, 1, b] = (0.0, 0.0, 0.0) if z else (n, min(m, n), q * 1e-9 if b % 2 else q)
    out = np.full((3, 2, NEVER - 1), 7.0)
    _prior_params(np.array([False, moved]), np.array([0.5, f]), g3, n0, _EDGES, out)
    assert np.all(out[:, 0] == 7.0)  # (window 0 did not move)
    if not moved:
        assert np.all(out == 7.0)
        return
    g = python_prior_rates(f, *(g3[x, 1].tolist() for x in range(3)), n0)
    assert out[0, 1].tolist() == g
    assert out[1, 1].tolist() == [n0 * x for x in g]
    assert out[2, 1].tolist() == [n0 * (1.0 - x) for x in g]


def python_row(n, m, f, pa, pb, t, c, risk, level):
    """A window's row as the Python scan made it (session 34): per bin, :func:`cell_within` on
    the posterior (the scan's arithmetic), and where it cannot decide, the exact quantile
    (scipy's ufunc) times ``c`` within ``risk``."""
    i = 0
    while i < NEVER - 1:
        nd, md = f * n[i + 1], f * m[i + 1]
        a, b = md + pa[i], max(max(nd - md, 0.0) + pb[i], 1e-9)
        d = cell_within(a, b, level, t)
        if d < 0:
            d = float(betaincinv(a, b, level)) * c <= risk
        if not d:
            break
        i += 1
    return i


@settings(max_examples=500, deadline=None)
@given(n=st.lists(st.integers(0, 40), min_size=NEVER + 1, max_size=NEVER + 1),
       over=st.lists(st.integers(0, 45), min_size=NEVER + 1, max_size=NEVER + 1),
       f=st.floats(0.2, 1.0), g=st.lists(st.floats(1e-4, 0.6), min_size=NEVER - 1,
                                           max_size=NEVER - 1),
       c=st.floats(1.0, 100.0), risk=st.sampled_from([0.001, 0.1, 3.0, 100.0]),
       level=st.sampled_from([0.9, 0.5, 0.99]), tiny=st.booleans())
def test_the_compiled_scan_gives_the_python_rows(n, over, f, g, c, risk, level, tiny):
    # thresholds of every kind: >= 1 (everything passes), tiny (the exact quantile decides:
    # below _TINY_T) and between (the cdf, the exact quantile at its bracket); bins with more
    # overruns than outcomes (the clamp at 0)
    from sia.scheduler.policies.sia.risk import _scan_window
    n, m = np.asarray(n, dtype=np.float64), np.asarray(over, dtype=np.float64)
    if tiny:
        risk = 1e-14
    t = largest_within(risk, c)
    sab = np.zeros((3, 2, NEVER - 1))
    sab[0, 1] = g
    sab[1, 1] = [10.0 * x for x in g]
    sab[2, 1] = [10.0 * (1.0 - x) for x in g]
    got = _scan_window(n, m, f, sab, 1, t, c, risk, level)
    assert got == python_row(n.tolist(), m.tolist(), f, sab[1, 1].tolist(), sab[2, 1].tolist(),
                             t, c, risk, level)


@settings(max_examples=300, deadline=None)
@given(events=st.lists(st.tuples(st.sampled_from([0.0, 1.0, 2.5, math.inf]) | st.floats(0, 10),
                                 st.integers(0, 5), st.integers(0, 2)), max_size=60),
       cut=st.integers(0, 60))
def test_the_event_heap_pops_in_heapqs_order(events, cut):
    # pushes, then pops interleaved with more pushes: the events come out as Python's heapq of
    # (time, job, window) tuples gives them (ties in time broken by job then window; identical
    # events are indistinguishable)
    import heapq

    from sia.scheduler.policies.sia.recent_use import heap_pop as _ev_pop
    from sia.scheduler.policies.sia.recent_use import heap_push as _ev_push
    et, ej, ek = np.empty(64), np.empty(64, np.int64), np.empty(64, np.int64)
    n, ref, got, want = 0, [], [], []
    for i, (t, j, k) in enumerate(events):
        n = _ev_push(et, ej, ek, n, t, j, k)
        heapq.heappush(ref, (t, j, k))
        if i >= cut and n:  # from the cut on, one pop per push
            got.append((float(et[0]), int(ej[0]), int(ek[0])))
            n = _ev_pop(et, ej, ek, n)
            want.append(heapq.heappop(ref))
    while n:
        got.append((float(et[0]), int(ej[0]), int(ek[0])))
        n = _ev_pop(et, ej, ek, n)
        want.append(heapq.heappop(ref))
    assert got == want and not ref


@settings(max_examples=20, deadline=None)
@given(P=st.integers(1, 5), K=st.integers(1, 4), R=st.integers(1, 7))
def test_the_kernels_views_of_the_state_are_the_named_arrays(P, K, R):
    # the compiled kernels take each array of the state from its buffer by its place (_at,
    # _PLACE); the Python side names the same arrays (_layout): each array, marked through
    # the kernels' view, is the named array, whole, and the marks cover the buffers exactly
    from sia.scheduler.policies.sia import risk as risk_mod
    old = risk_mod._RENORM
    risk_mod._RENORM = R
    try:
        rb = RiskBudget(tuple(300.0 * (k + 1) for k in range(K)), 0.1)
        st_ = rb._alloc_state(P, K)
    finally:
        risk_mod._RENORM = old
    for row, (part, buf) in enumerate(zip(_layout(P, K, R), (rb._fb, rb._ib, rb._bb),
                                          strict=True)):
        for x, (name, _) in enumerate(part):
            _at(buf, rb._lay, row, _PLACE[name])[:] = (x % 2 == 0) if row == 2 else x + 1
        for x, (name, shape) in enumerate(part):
            want = (x % 2 == 0) if row == 2 else x + 1
            assert st_[name].shape == shape and np.all(st_[name] == want), name
        assert sum(int(np.prod(shape)) for _, shape in part) == buf.size
