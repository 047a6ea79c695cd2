"""The risk budget's arrival side (policy.arrival_side): risk=0 is certainty of the owners'
arrivals too; ``risk_arrivals: calibrated`` bounds them per pool at miss rate risk / (1 + risk)."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools
from sia.data.synthetic import generate_workload
from sia.models.calibration import conformal_upper, recall_threshold
from sia.scheduler.core.forecast import PerfectForecaster
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.forecast_mix import MixedForecaster
from sia.scheduler.policies.sia.policy import SiaPolicy, arrival_side
from sia.scheduler.registry import make_policy

from .conftest import Calibratable, UnderForecaster, job_table

#: WillJobsArrive always 0, NewLoadEstimate 0: a forecaster that never expects owners; every
#: job predicted to fit the smallest window (bin 0)
NeverArrives = UnderForecaster


def never_with_perfect_durations() -> MixedForecaster:
    never = NeverArrives()
    return MixedForecaster(never, never, PerfectForecaster())


def n_slowed(jobs: pl.DataFrame, pools: pl.DataFrame, policy) -> tuple[int, int]:
    """(jobs ending later than under FCFS, loans) of a replay of ``policy``."""
    base = simulate(jobs, pools, make_policy("fcfs"))
    res = simulate(jobs, pools, policy, check_invariants=True)
    late = res.with_columns(fcfs_end=base["end_time"]).filter(
        pl.col("end_time") > pl.col("fcfs_end") + 1e-6)
    return late.height, int(res["opportunistic"].sum())


# ----------------------------------------------------------------------------- hand cases


def test_the_arrival_side_by_forecaster_budget_and_mode():
    never, perfect = NeverArrives(), PerfectForecaster()
    assert arrival_side(never, None, "predicted", "sia") == "as_is"  # no budget: SIA as before
    assert arrival_side(never, 0.0, "predicted", "sia") == "reserve"  # 0: certainty only
    assert arrival_side(never, 0.0, "calibrated", "sia") == "reserve"
    assert arrival_side(never, 0.1, "predicted", "sia") == "as_is"
    assert arrival_side(never, 0.1, "calibrated", "sia") == "reserve"  # no bound to be had
    assert arrival_side(Calibratable(), 0.1, "calibrated", "sia") == "calibrate"
    assert arrival_side(Calibratable(), 0.0, "calibrated", "sia") == "reserve"
    # perfect arrivals and load are certain at any budget, whatever the durations are
    assert arrival_side(perfect, 0.0, "calibrated", "sia") == "as_is"
    assert arrival_side(MixedForecaster(perfect, perfect, never), 0.0, "predicted", "sia") == "as_is"
    # one uncertain source is enough to be uncertain
    assert arrival_side(MixedForecaster(perfect, never, perfect), 0.0, "predicted", "sia") == "reserve"
    assert arrival_side(never_with_perfect_durations(), 0.0, "predicted", "sia") == "reserve"


def test_a_bad_mode_names_the_option():
    with pytest.raises(ConfigError, match="risk_arrivals must be one of predicted, calibrated"):
        SiaPolicy(NeverArrives(), risk=0.1, risk_arrivals="bounded")


def test_calibrated_mode_asks_for_both_sides_at_the_budgets_miss_rate():
    fc = Calibratable()
    pol = SiaPolicy(fc, risk=0.25, risk_arrivals="calibrated", calibration_alpha=0.3)
    assert pol._arrival_side == "calibrate"
    assert fc.asked and fc.asked[0]["parts"] == "both"
    assert fc.asked[0]["alpha"] == pytest.approx(0.2)  # 0.25 / 1.25, not calibration_alpha
    # the default mode is "calibrated"; the default budget (3, a veto) asks at 3 / 4
    fc3 = Calibratable()
    SiaPolicy(fc3, risk=1.0)
    assert fc3.asked[0]["alpha"] == pytest.approx(0.5)
    fc4 = Calibratable()
    SiaPolicy(fc4)
    assert fc4.asked[0]["alpha"] == pytest.approx(0.75) and fc4.asked[0]["floor"] is True
    # "predicted" leaves the forecaster alone; without a budget the mode is not read
    for kw in (dict(risk=0.25, risk_arrivals="predicted"),
               dict(risk=None, risk_arrivals="calibrated")):
        fc2 = Calibratable()
        SiaPolicy(fc2, **kw)
        assert fc2.asked == []


def test_risk_zero_keeps_an_owner_that_the_forecast_missed_from_waiting():
    # A (quota 1) is idle; B (quota 1) has two 1000-s jobs at t=0. A's job comes at t=10.
    # Predicting no arrival, SIA without a budget (or at risk 0.1, durations said to fit 5
    # minutes) lends A's GPU to B's second job; A's job then waits. At risk 0 nothing is
    # lent: A's arrivals are not certain.
    rows = [("b1", "B", 0.0, 1000.0, 1), ("b2", "B", 0.0, 1000.0, 1), ("a1", "A", 10.0, 100.0, 1)]
    jobs, pools = job_table(rows), make_pools({"A": 1, "B": 1})
    free = SiaPolicy(NeverArrives(), windows_s=(3600.0,), adaptation=False, loan_ramp=None,
                     lend_on_limit=False, risk=None)
    assert n_slowed(jobs, pools, free) == (1, 1)  # the case can fail: the loan slows a1
    pol = SiaPolicy(NeverArrives(), windows_s=(3600.0,), adaptation=False, loan_ramp=None,
                    risk=0.0)
    assert n_slowed(jobs, pools, pol) == (0, 0)
    assert pol.facts()["risk"]["arrival_side"] == "reserve"


# ----------------------------------------------------------------------------- properties


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000),
       variant=st.sampled_from(["base", "higher-load", "more-duration-skew"]))
def test_risk_zero_with_perfect_durations_and_learned_style_arrivals_slows_no_job(seed, variant):
    # the check with arrivals that miss (a forecaster that never expects anyone):
    # perfect durations are certain, the arrivals are not, so nothing is lent by Figure 8
    jobs, pools = generate_workload(variant, seed, days=1.0)
    pol = SiaPolicy(never_with_perfect_durations(), risk=0.0)
    late, loans = n_slowed(jobs, pools.select("pool", "quota_gpus"), pol)
    assert (late, loans) == (0, 0)


@settings(max_examples=200, deadline=None)
@given(scores=st.lists(st.floats(-50, 50, allow_nan=False), min_size=0, max_size=40),
       a1=st.floats(0.001, 0.999), a2=st.floats(0.001, 0.999))
def test_more_budget_never_raises_a_calibrated_reservation(scores, a1, a2):
    # alpha = risk / (1 + risk) grows with the budget; the load bound can only fall and the
    # arrival threshold only rise with alpha, so a larger budget never reserves more
    lo, hi = sorted((a1, a2))
    assert conformal_upper(scores, hi) <= conformal_upper(scores, lo)
    probs = [min(max(abs(s) / 50.0, 0.0), 1.0) for s in scores]
    assert recall_threshold(probs, hi) >= recall_threshold(probs, lo)
