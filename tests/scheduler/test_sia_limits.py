"""SIA lends on certainty first: a job whose time limit fits a window needs no prediction."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import TIME_LIMIT_GRACE_S, make_pools, validate
from sia.scheduler.core.forecast import PerfectForecaster
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.forecast_mix import MixedForecaster
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.registry import make_policy


class _LongBins(PerfectForecaster):
    """Perfect arrivals and load; every job predicted to run longer than every window (bin 3),
    with P(duration <= w) = 0: without a guarantee SIA lends nothing."""

    perfect_information = False

    def duration_bins(self, view, job_indices):
        return np.full(len(job_indices), 3, dtype=np.int64)

    def duration_cdf(self, view, job_indices, windows_s):
        return np.zeros((len(job_indices), len(windows_s)))


def table(rows, limits=None) -> pl.DataFrame:
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    if limits is not None:
        raw = raw.with_columns(pl.Series("time_limit", limits, dtype=pl.Float64))
    return validate(raw)[0]


# B (quota 1) is busy with b0 for 1000 s; b1 (100 s) waits. A's GPU is idle and nothing
# arrives in A until 5000 s. b1's limit is 200 s (+ 60 s grace = 260 s <= 5 min).
ROWS = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 100.0, 1), ("a0", "A", 5000.0, 10.0, 1)]


@pytest.mark.parametrize("lend_risk", [None, 0.1])
def test_a_limit_that_fits_a_window_lends_whatever_the_prediction(lend_risk):
    pools = make_pools({"A": 1, "B": 1})
    pol = SiaPolicy(_LongBins(), refresh_s=0, lend_risk=lend_risk, risk=None)
    res = simulate(table(ROWS, [None, 200.0, None]), pools, pol, check_invariants=True)
    b1 = res.filter(pl.col("job_id") == "b1").row(0, named=True)
    assert (b1["start_time"], b1["opportunistic"]) == (0.0, True)
    dur = pol.facts()["served"]["job_duration"]["5m"]
    assert (dur["lent_guaranteed"], dur["lent_predicted"]) == (1, 0)
    assert dur["lent_guaranteed_overruns"] == 0
    # the same job without the limit (or with the option off) waits for its own pool
    for jobs, opts in ((table(ROWS), {}), (table(ROWS, [None, 200.0, None]),
                                          {"lend_on_limit": False})):
        pol = SiaPolicy(_LongBins(), refresh_s=0, lend_risk=lend_risk, **opts, risk=None)
        res = simulate(jobs, pools, pol, check_invariants=True)
        assert res.filter(pl.col("job_id") == "b1")["start_time"][0] == 1000.0
        assert "lent_guaranteed" not in pol.facts()["served"]["job_duration"].get("5m", {})


def test_the_grace_counts_against_the_window():
    # a limit of exactly 5 min is not a 5-min guarantee (Slurm lets a job run past it):
    # b1 is lent only in the 1 h window, where A's arrival at 5000 s is outside the window
    pools = make_pools({"A": 1, "B": 1})
    limit = 300.0
    assert limit + TIME_LIMIT_GRACE_S > 300.0
    pol = SiaPolicy(_LongBins(), refresh_s=0, risk=None)
    simulate(table(ROWS, [None, limit, None]), pools, pol, check_invariants=True)
    served = pol.facts()["served"]["job_duration"]
    assert served["5m"]["lent_guaranteed"] == 0 and served["60m"]["lent_guaranteed"] == 1


def test_a_job_that_ran_past_its_limit_is_an_overrun_of_a_guaranteed_loan():
    # b1's limit says 200 s but it ran 2000 s (a trace where Slurm did not end it): the loan
    # made on the guarantee overruns its window, and the report says so
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 2000.0, 1),
            ("a0", "A", 5000.0, 10.0, 1)]
    pol = SiaPolicy(_LongBins(), refresh_s=0, risk=None)
    jobs = table(rows, [None, 200.0, None])
    simulate(jobs, make_pools({"A": 1, "B": 1}), pol, check_invariants=True)
    dur = pol.facts()["served"]["job_duration"]["5m"]
    assert (dur["lent_guaranteed"], dur["lent_guaranteed_overruns"]) == (1, 1)


def test_perfect_durations_ignore_the_limit():
    # sia-perfect knows b1 runs 2000 s: its limit of 200 s is no reason to lend it in 5 min
    # at 0 (A's job arrives at 600); it is lent in the 1 h window once a0 has run (at 610)
    rows = [("b0", "B", 0.0, 1000.0, 1), ("b1", "B", 0.0, 2000.0, 1),
            ("a0", "A", 600.0, 10.0, 1)]
    pools = make_pools({"A": 1, "B": 1})
    jobs = table(rows, [None, 200.0, None])
    for pol in (make_policy("sia-perfect", refresh_s=0),
                SiaPolicy(MixedForecaster(_LongBins(), _LongBins(), PerfectForecaster()),
                          refresh_s=0, risk=None)):
        res = simulate(jobs, pools, pol, check_invariants=True)
        assert res.filter(pl.col("job_id") == "b1")["start_time"][0] == 610.0


DURATIONS = [30.0, 200.0, 299.0, 1800.0, 3500.0, 20000.0, 50000.0]


@st.composite
def limited_traces(draw):
    n_pools = draw(st.integers(2, 3))
    quotas = {f"p{i}": draw(st.integers(1, 4)) for i in range(n_pools)}
    rows, limits = [], []
    for i in range(draw(st.integers(1, 20))):
        pool = f"p{draw(st.integers(0, n_pools - 1))}"
        d = draw(st.sampled_from(DURATIONS))
        rows.append((f"j{i:03d}", pool, float(draw(st.integers(0, 40)) * 150), d,
                     draw(st.integers(1, quotas[pool]))))
        # a limit the job respects (Slurm ends it there), or none
        limits.append(draw(st.one_of(st.none(), st.sampled_from(
            [x for x in (240.0, 3000.0, 40000.0, 1e6) if x + TIME_LIMIT_GRACE_S >= d]))))
    return rows, limits, quotas


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=limited_traces(), refresh=st.sampled_from([0.0, 300.0]))
def test_guaranteed_loans_with_perfect_arrivals_slow_no_job(trace, refresh):
    # perfect arrivals and load, durations known only through limits that hold: lending on the
    # guarantee alone keeps SIA's promise (a guaranteed job fits its window like a perfect bin)
    rows, limits, quotas = trace
    jobs, pools = table(rows, limits), make_pools(quotas)
    base = simulate(jobs, pools, make_policy("fcfs"))
    res = simulate(jobs, pools, SiaPolicy(_LongBins(), refresh_s=refresh, risk=None), check_invariants=True)
    assert (res["end_time"] <= base["end_time"] + 1e-6).all()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=limited_traces(), policy=st.sampled_from(["sia-perfect", "sia-random", "fcfs",
                                                       "maxmin"]))
def test_a_time_limit_column_of_nulls_changes_nothing(trace, policy):
    rows, _, quotas = trace
    pools = make_pools(quotas)
    plain = simulate(table(rows), pools, make_policy(policy))
    nulls = simulate(table(rows, [None] * len(rows)), pools, make_policy(policy))
    assert plain.equals(nulls)
