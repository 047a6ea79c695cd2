"""Slowdown attribution (sia.scheduler.core.attribution): hand cases, one cause each, and
properties on random replays."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import SiaError
from sia.data.schema import make_pools, validate
from sia.scheduler.core.attribution import (
    CAUSES,
    JobTimes,
    Loans,
    attribute,
    loans_from_record,
)
from sia.scheduler.core.forecast import PerfectForecaster
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.registry import make_policy


def table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus) tuples, via the contract."""
    raw = pl.DataFrame(
        rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"], orient="row")
    return validate(raw)[0]


def explain(rows, quotas, policy) -> tuple[dict[str, tuple], dict[str, float]]:
    """Replay ``policy`` and FCFS; return ({slowed job: (cause, delayed_by, depth, parent,
    missed pool)}, {job: slowdown in s})."""
    jobs, pools = table(rows), make_pools(quotas)
    res = simulate(jobs, pools, policy, check_invariants=True)
    base = simulate(jobs, pools, make_policy("fcfs"))
    a, ids, names, _ = attribution_of(res, base, pools, policy.served.loans())
    late = dict(zip(res["job_id"], (res["end_time"] - base["end_time"]).to_list(), strict=True))
    out = {}
    for i in np.flatnonzero(a.slowed).tolist():
        out[ids[i]] = (CAUSES[a.cause[i]], ids[a.delayed_by[i]] if a.delayed_by[i] >= 0 else None,
                       int(a.depth[i]), ids[a.parent[i]] if a.parent[i] >= 0 else None,
                       names[a.missed_pool[i]] if a.missed_pool[i] >= 0 else None)
    return out, late


def attribution_of(res: pl.DataFrame, base: pl.DataFrame, pools: pl.DataFrame, record):
    """(Attribution, job ids, pool names, JobTimes) of a replay against its baseline."""
    order = res.select(pl.arg_sort_by(["submit_time", "job_id"])).to_series().to_numpy()
    r, b = res[order], base[order]
    assert r["job_id"].to_list() == b["job_id"].to_list()
    names = sorted(pools["pool"].to_list())
    quota = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    jt = JobTimes(pool=np.array([names.index(p) for p in r["pool"]]),
                  submit=r["submit_time"].to_numpy(), duration=r["duration"].to_numpy(),
                  num_gpus=r["num_gpus"].to_numpy(), start=r["start_time"].to_numpy(),
                  end=r["end_time"].to_numpy(), opportunistic=r["opportunistic"].to_numpy(),
                  start_base=b["start_time"].to_numpy(), end_base=b["end_time"].to_numpy())
    ids = r["job_id"].to_list()
    loans = loans_from_record(record, ids, names)
    return attribute(jt, np.array([quota[p] for p in names]), loans), ids, names, jt


class _Forecaster:
    """Arrivals, load and duration bins as told; ``None`` = perfect."""

    name = "told"
    perfect_information = True  # it reads durations when told to be perfect

    def __init__(self, arrive=None, load=None, bins=None):
        self._perfect = PerfectForecaster()
        self.arrive, self.load, self.bins = arrive, load, bins

    def will_jobs_arrive(self, view, windows_s):
        if self.arrive is None:
            return self._perfect.will_jobs_arrive(view, windows_s)
        return np.full((view.trace.n_pools, len(windows_s)), self.arrive, dtype=bool)

    def new_load_estimate(self, view, windows_s):
        if self.load is None:
            return self._perfect.new_load_estimate(view, windows_s)
        return np.full((view.trace.n_pools, len(windows_s)), float(self.load))

    def duration_bins(self, view, job_indices):
        if self.bins is None:
            return self._perfect.duration_bins(view, job_indices)
        return np.full(len(job_indices), self.bins, dtype=np.int64)


FIVE_MIN = (300.0,)

# ----------------------------------------------------------------------------- hand cases
#
# Pools A and B, one window of 5 minutes. B's b0 fills B's quota at 0 and b1 waits: SIA lends
# it A's idle GPU(s) at 0, against the forecast made then. A's job(s) then arrive and wait
# for the loan, while under FCFS they start at once.


def test_duration_a_loan_that_overran_its_window():
    # Arrivals perfect (A: nothing in (0, 300]); every job predicted <= 5 min, but b1 runs
    # 1000 s. a0 arrives at 500 > 300, the end of b1's window: b1 held A's GPU past the window
    # it was lent in. FCFS starts a0 at 500; SIA at 1000, when b1 ends: 500 s late.
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 1000.0, 1),
            ("a0", "A", 500.0, 100.0, 1)]
    pol = SiaPolicy(_Forecaster(bins=0), windows_s=FIVE_MIN, risk=None)
    got, late = explain(rows, {"A": 1, "B": 1}, pol)
    assert got == {"a0": ("duration", "b1", 0, None, None)}
    assert late["a0"] == 500.0


def test_arrival_a_forecast_that_said_no_arrival():
    # WillJobsArrive says no everywhere; durations perfect (b1 250 s fits 5 min). a0 arrives at
    # 100, inside b1's window (0, 300]: the forecast b1 was lent against missed A's arrival.
    # SIA starts a0 at 250 (b1 ends), FCFS at 100.
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 250.0, 1),
            ("a0", "A", 100.0, 100.0, 1)]
    pol = SiaPolicy(_Forecaster(arrive=False, load=0.0), windows_s=FIVE_MIN, risk=None)
    got, late = explain(rows, {"A": 1, "B": 1}, pol)
    assert got == {"a0": ("arrival", "b1", 0, None, "A")}
    assert late["a0"] == 150.0


def test_load_a_forecast_that_under_estimated_the_load():
    # WillJobsArrive says yes with 1 GPU everywhere. A (quota 2) reserves 1 of its 2 idle
    # GPUs; b1 is lent the other. a0 (2 GPUs) arrives at 100: 2 GPUs > the 1 reserved, inside
    # b1's window. SIA starts a0 at 250, FCFS at 100.
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 250.0, 1),
            ("a0", "A", 100.0, 100.0, 2)]
    pol = SiaPolicy(_Forecaster(arrive=True, load=1.0), windows_s=FIVE_MIN, risk=None)
    got, late = explain(rows, {"A": 2, "B": 1}, pol)
    assert got == {"a0": ("load", "b1", 0, None, "A")}
    assert late["a0"] == 150.0


def test_cascade_two_jobs_behind_a_delayed_head():
    # The arrival case with three 100 s jobs of A at 100 (A's quota: 1 GPU). FCFS runs them at
    # 100, 200, 300; SIA at 250, 350, 450 (each 150 s late). a0 is delayed by the loan b1; at
    # 200 (a1's FCFS start) a0 still waits: a1 is a cascade of a0 (depth 1); at 300 (a2's)
    # a0 runs and a1 waits: a2 is a cascade of a1 (depth 2). Both inherit b1 and 'arrival'.
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 250.0, 1),
            ("a0", "A", 100.0, 100.0, 1), ("a1", "A", 100.0, 100.0, 1),
            ("a2", "A", 100.0, 100.0, 1)]
    pol = SiaPolicy(_Forecaster(arrive=False, load=0.0), windows_s=FIVE_MIN, risk=None)
    got, late = explain(rows, {"A": 1, "B": 1}, pol)
    assert got == {"a0": ("arrival", "b1", 0, None, "A"),
                   "a1": ("arrival", "b1", 1, "a0", "A"),
                   "a2": ("arrival", "b1", 2, "a1", "A")}
    assert [late[j] for j in ("a0", "a1", "a2")] == [150.0, 150.0, 150.0]


def test_cascade_through_the_quota_a_late_job_holds():
    # a1 arrives at 260, after a0 started (250): nobody of A waits, but A's only GPU is held by
    # a0, which under FCFS had ended at 200. a1 is a cascade of a0 through A's quota.
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 250.0, 1),
            ("a0", "A", 100.0, 100.0, 1), ("a1", "A", 260.0, 100.0, 1)]
    pol = SiaPolicy(_Forecaster(arrive=False, load=0.0), windows_s=FIVE_MIN, risk=None)
    got, _ = explain(rows, {"A": 1, "B": 1}, pol)
    assert got == {"a0": ("arrival", "b1", 0, None, "A"),
                   "a1": ("arrival", "b1", 1, "a0", "A")}


def test_the_miss_of_another_pool_is_named():
    # Pools A (quota 1), B (1), C (1); forecasts of no arrival. At 0 b0 fills B, b1 is lent A's
    # GPU and b2 C's. At 100, c0 (C) and a0 (A) arrive; both wait for their loans (to 250):
    # each names its own pool's missed arrival.
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 250.0, 1),
            ("b2", "B", 0.0, 250.0, 1), ("a0", "A", 100.0, 100.0, 1),
            ("c0", "C", 100.0, 100.0, 1)]
    pol = SiaPolicy(_Forecaster(arrive=False, load=0.0), windows_s=FIVE_MIN, risk=None)
    got, _ = explain(rows, {"A": 1, "B": 1, "C": 1}, pol)
    assert set(got) == {"a0", "c0"}
    assert got["a0"][0] == got["c0"][0] == "arrival"
    assert got["a0"][4] == "A" and got["c0"][4] == "C"
    assert {got["a0"][1], got["c0"][1]} <= {"b1", "b2"}


def test_pools_the_adaptation_distrusted_are_recorded_with_the_loans():
    # A's arrivals every 400 s from 100 are never forecast (blind): once scored, SIA's online
    # adaptation distrusts A, which then reserves its whole unused quota; B's 100 s jobs keep
    # borrowing C's idle GPUs. The loans lent then record A as having reserved all it had.
    rows = ([(f"b{i:03d}", "B", 0.0, 100.0, 1) for i in range(60)]
            + [(f"a{i}", "A", 100.0 + 400.0 * i, 30.0, 1) for i in range(6)])
    pol = SiaPolicy(_Forecaster(arrive=False, load=0.0), windows_s=FIVE_MIN, lookback=12,
                    max_misses=1, risk=None)
    res = simulate(table(rows), make_pools({"A": 1, "B": 1, "C": 2}), pol,
                   check_invariants=True)
    rec = pol.served.loans()
    full = rec["reserved_all"]
    assert full and {rec["pools"][q] for _, q in full} == {"A"}
    assert all(rec["time"][i] > 100.0 for i, _ in full)  # only after A's first miss
    ids = res.sort(["submit_time", "job_id"])["job_id"].to_list()
    loans = loans_from_record(rec, ids, ["A", "B", "C"])
    assert loans.reserved_all[:, 0].sum() == len(full) and not loans.reserved_all[:, 1:].any()


# ----------------------------------------------------------------------------- arrays only


def _jobs(**kw) -> JobTimes:
    n = len(kw["pool"])
    base = dict(submit=np.zeros(n), duration=np.full(n, 100.0), num_gpus=np.ones(n, int),
                opportunistic=np.zeros(n, bool))
    base.update(kw)
    return JobTimes(**{k: np.asarray(v) for k, v in base.items()})


def test_preempted_placement_and_unexplained_are_named():
    # job 0: starts as under FCFS but was preempted (ran 300 s for 100 s of work): preempted.
    # job 1: pool 1 (quota 2), starts at 50 instead of 0, yet nothing held any GPU then: placement.
    jobs = _jobs(pool=[0, 1], start=[0.0, 50.0], end=[300.0, 150.0],
                 start_base=[0.0, 0.0], end_base=[100.0, 100.0])
    a = attribute(jobs, np.array([1, 2]), Loans.empty(2))
    assert a.cause_names() == ["preempted", "placement"]
    assert a.delayed_by.tolist() == [-1, -1] and a.depth.tolist() == [0, 0]
    # job 1 (pool 0, quota 1) waits for job 0, which ran at the same time under FCFS: the
    # records hold no reason (FCFS could not have started it either): unexplained
    jobs = _jobs(pool=[0, 0], submit=[0.0, 0.0], start=[0.0, 100.0], end=[100.0, 200.0],
                 start_base=[0.0, 0.0], end_base=[100.0, 100.0])
    a = attribute(jobs, np.array([1]), Loans.empty(1))
    assert a.cause_names() == [None, "unexplained"]


def test_the_last_loan_lent_is_named_and_overruns_counted():
    # Pool 0 (quota 2) waits at 100 for 2 GPUs held by loans 0 (lent at 0 in a 60 s window:
    # past it) and 1 (lent at 50 in a 300 s window, against a forecast of 0 GPUs for pool 0).
    # The last loan lent (1) is named; pool 0's arrivals after its start (job 2 at 100: 2
    # GPUs) exceed the 0 reserved: arrival; one loan held was past its window.
    jobs = _jobs(pool=[1, 1, 0], submit=[0.0, 0.0, 100.0], num_gpus=[1, 1, 2],
                 duration=[400.0, 250.0, 100.0],
                 start=[0.0, 50.0, 400.0], end=[400.0, 300.0, 500.0],
                 opportunistic=[True, True, False],
                 start_base=[400.0, 400.0, 100.0], end_base=[800.0, 650.0, 200.0])
    loans = Loans(job=np.array([0, 1]), time=np.array([0.0, 50.0]),
                  forecast_time=np.array([0.0, 50.0]), window_s=np.array([60.0, 300.0]),
                  will_arrive=np.zeros((2, 2), bool), total_new_load=np.zeros((2, 2)))
    a = attribute(jobs, np.array([2, 1]), loans)
    assert a.cause_names() == [None, None, "arrival"]
    assert (a.delayed_by[2], a.missed_pool[2], a.overrun_held[2]) == (1, 0, 1)
    # said yes, 1 GPU: the load was under-estimated
    told = Loans(job=loans.job, time=loans.time, forecast_time=loans.forecast_time,
                 window_s=loans.window_s, will_arrive=np.ones((2, 2), bool),
                 total_new_load=np.ones((2, 2)))
    assert attribute(jobs, np.array([2, 1]), told).cause_names()[2] == "load"
    # 2 GPUs were reserved: that forecast missed nothing; the loan is still named
    enough = Loans(job=loans.job, time=loans.time, forecast_time=loans.forecast_time,
                   window_s=loans.window_s, will_arrive=np.ones((2, 2), bool),
                   total_new_load=np.full((2, 2), 2.0))
    a = attribute(jobs, np.array([2, 1]), enough)
    assert a.cause_names()[2] == "unexplained" and a.delayed_by[2] == 1
    # pool 0 distrusted (it reserved all its unused quota for loan 1): its arrivals missed
    # nothing, and pool 1 got none after 50: no forecast to blame
    full = Loans(job=loans.job, time=loans.time, forecast_time=loans.forecast_time,
                 window_s=loans.window_s, will_arrive=loans.will_arrive,
                 total_new_load=loans.total_new_load,
                 reserved_all=np.array([[False, False], [True, False]]))
    a = attribute(jobs, np.array([2, 1]), full)
    assert a.cause_names()[2] == "unexplained" and a.missed_pool[2] == -1
    # with loan 1 past its own window at 100 too, its duration is the miss
    past = Loans(job=loans.job, time=loans.time, forecast_time=loans.forecast_time,
                 window_s=np.array([60.0, 30.0]), will_arrive=loans.will_arrive,
                 total_new_load=loans.total_new_load)
    a = attribute(jobs, np.array([2, 1]), past)
    assert a.cause_names()[2] == "duration" and a.delayed_by[2] == 1 and a.overrun_held[2] == 2


def test_bad_arrays_are_reported():
    jobs = _jobs(pool=[0, 0], submit=[10.0, 0.0], start=[10.0, 0.0], end=[110.0, 100.0],
                 start_base=[10.0, 0.0], end_base=[110.0, 100.0])
    with pytest.raises(SiaError, match="arrival order"):
        attribute(jobs, np.array([2]), Loans.empty(1))
    jobs = _jobs(pool=[0, 3], start=[0.0, 0.0], end=[100.0, 100.0], start_base=[0.0, 0.0],
                 end_base=[100.0, 100.0])
    with pytest.raises(SiaError, match="pool indices"):
        attribute(jobs, np.array([2]), Loans.empty(1))
    with pytest.raises(SiaError, match="loans.will_arrive"):
        attribute(_jobs(pool=[0], start=[0.0], end=[100.0], start_base=[0.0], end_base=[100.0]),
                  np.array([1]), Loans(np.array([0]), np.zeros(1), np.zeros(1), np.ones(1),
                                       np.zeros((1, 3), bool), np.zeros((1, 1))))
    record = {"job": ["x"], "time": [0.0], "window_s": [300.0], "forecast": [0], "pools": ["A"],
              "forecast_time": [0.0], "will_arrive": [[0]], "total_new_load": [[0.0]]}
    with pytest.raises(SiaError, match="'x'"):
        loans_from_record(record, ["a", "b"], ["A"])
    with pytest.raises(SiaError, match="'Z'"):
        loans_from_record({**record, "job": ["a"], "pools": ["Z"]}, ["a"], ["A"])


def test_loans_record_maps_jobs_pools_and_forecasts():
    record = {"job": ["b", "a"], "time": [5.0, 9.0], "window_s": [300.0, 3600.0],
              "forecast": [0, 1], "pools": ["B", "A"], "forecast_time": [0.0, 8.0],
              "will_arrive": [[1, 0], [0, 1]], "total_new_load": [[2.0, 0.0], [0.0, 3.0]]}
    loans = loans_from_record(record, ["a", "b"], ["A", "B"])
    assert loans.job.tolist() == [1, 0]
    assert loans.forecast_time.tolist() == [0.0, 8.0]
    # columns in the replay's pool order (A, B)
    assert loans.will_arrive.tolist() == [[False, True], [True, False]]
    assert loans.total_new_load.tolist() == [[0.0, 2.0], [3.0, 0.0]]
    assert loans_from_record(None, ["a"], ["A"]).job.size == 0


# ----------------------------------------------------------------------------- properties

DURATIONS = [30.0, 299.0, 300.0, 301.0, 1800.0, 3600.0, 3601.0, 20000.0, 43200.0, 50000.0]


@st.composite
def small_traces(draw):
    n_pools = draw(st.integers(2, 3))
    quotas = {f"p{i}": draw(st.integers(1, 4)) for i in range(n_pools)}
    n = draw(st.integers(1, 24))
    rows = []
    for i in range(n):
        pool = f"p{draw(st.integers(0, n_pools - 1))}"
        rows.append((f"j{i:03d}", pool, float(draw(st.integers(0, 40)) * 150),
                     draw(st.sampled_from(DURATIONS)), draw(st.integers(1, quotas[pool]))))
    return rows, quotas


def _replay(rows, quotas, policy):
    jobs, pools = table(rows), make_pools(quotas)
    res = simulate(jobs, pools, policy, check_invariants=True)
    base = simulate(jobs, pools, make_policy("fcfs"))
    return res, base, pools


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), seed=st.integers(0, 1000), refresh=st.sampled_from([0.0, 300.0]),
       adaptation=st.booleans())
def test_every_slowed_job_gets_exactly_one_cause(trace, seed, refresh, adaptation):
    rows, quotas = trace
    pol = make_policy("sia-random-both", seed=seed, refresh_s=refresh, adaptation=adaptation)
    res, base, pools = _replay(rows, quotas, pol)
    a, ids, _, jt = attribution_of(res, base, pools, pol.served.loans())
    slowed = jt.end > jt.end_base + 1.0
    assert np.array_equal(a.slowed, slowed)
    assert np.array_equal(a.cause >= 0, slowed)  # one cause per slowed job, none elsewhere
    loan_jobs = set(loans_from_record(pol.served.loans(), ids, sorted(quotas)).job.tolist())
    for i in np.flatnonzero(slowed).tolist():
        cause = CAUSES[a.cause[i]]
        # fungible GPUs without preemption: the counts always find the broken promise
        assert cause in ("duration", "arrival", "load"), (cause, ids[i])
        assert a.delayed_by[i] in loan_jobs and jt.opportunistic[a.delayed_by[i]]
        assert (a.missed_pool[i] >= 0) == (cause != "duration")
        q = a.parent[i]
        if a.depth[i] == 0:
            assert q == -1
        else:  # a cascade waits behind an earlier, late job of its own pool, one level up
            assert 0 <= q < i and jt.pool[q] == jt.pool[i]
            assert jt.start[q] > jt.start_base[q]
            if a.slowed[q]:
                assert a.depth[q] == a.depth[i] - 1 and a.delayed_by[q] == a.delayed_by[i]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), refresh=st.sampled_from([0.0, 300.0]))
def test_perfect_predictions_have_nothing_to_explain(trace, refresh):
    rows, quotas = trace
    pol = make_policy("sia-perfect", refresh_s=refresh)
    res, base, pools = _replay(rows, quotas, pol)
    a, *_ = attribution_of(res, base, pools, pol.served.loans())
    assert not a.slowed.any() and (a.cause == -1).all() and (a.delayed_by == -1).all()
