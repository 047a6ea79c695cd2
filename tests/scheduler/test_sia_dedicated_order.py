"""SIA's ``dedicated_order``: which pool below its quota starts first on dedicated GPUs.

Hand case (fungible GPUs; pools A quota 2, B quota 1, C quota 1: 4 GPUs). The forecaster
never expects an arrival and knows the true duration bins (BlindForecaster):

- t=0: A starts a_long (10,000 s) and a0 (500 s): 2 of 2. C starts c0 (10,000 s) on its
  quota and c1 (1,000 s: bin <= 1 h) on B's idle GPU, a loan (B predicted to stay idle).
- t=1: a1 (A, 100 s) waits behind A's full quota; t=200: b0 (B, 100 s) arrives, its GPU
  lent (the missed arrival): it waits. No GPU is free.
- t=500: a0 ends, one GPU frees; A (1 of 2, head a1 since t=1) and B (0 of 1, head b0
  since t=200) are both below quota with a head waiting.
  - "allocation" (Figure 7): B's 0/1 < A's 1/2: b0 starts at 500, a1 when b0 ends, 600.
  - "oldest": a1 (arrived first) starts at 500, b0 at 600.
FCFS with home quotas starts b0 at 200 and a1 at 500: under "oldest" only B, whose GPU was
lent, is slowed; under "allocation" A's queue pays for B's missed arrival too.

"longest" (the most jobs pending first; ties as "allocation"): with one job waiting in each
pool it is "allocation" (b0 at 500). Add a2 (A, 100 s, at t=2): at 500 A has two waiting
against B's one, so a1 starts; at 600 a1 ends, one each: the tie goes to B (0/1 < 1/2),
b0 starts; at 700 b0 ends and a2 starts.
"""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.registry import make_policy

from .conftest import BlindForecaster
from .test_sia import slowed, small_traces, table

ROWS = [("a_long", "A", 0.0, 10_000.0, 1), ("a0", "A", 0.0, 500.0, 1),
        ("c0", "C", 0.0, 10_000.0, 1), ("c1", "C", 0.0, 1_000.0, 1),
        ("a1", "A", 1.0, 100.0, 1), ("b0", "B", 200.0, 100.0, 1)]
QUOTAS = {"A": 2, "B": 1, "C": 1}


def starts(policy) -> dict[str, tuple[float, bool]]:
    res = simulate(table(ROWS), make_pools(QUOTAS), policy, check_invariants=True)
    return {r["job_id"]: (r["start_time"], r["opportunistic"]) for r in res.iter_rows(named=True)}


def start_times(rows, order: str) -> dict[str, float]:
    """Each job's start with QUOTAS under ``order`` (the blind forecaster, no refresh)."""
    res = simulate(table(rows), make_pools(QUOTAS),
                   SiaPolicy(BlindForecaster(), refresh_s=0, dedicated_order=order),
                   check_invariants=True)
    return dict(zip(res["job_id"], res["start_time"], strict=True))


@pytest.mark.parametrize(("order", "a1", "b0"), [("allocation", 600.0, 500.0),
                                                ("oldest", 500.0, 600.0)])
def test_hand_case(order, a1, b0):
    got = starts(SiaPolicy(BlindForecaster(), refresh_s=0, dedicated_order=order))
    assert got["c1"] == (0.0, True)  # the loan of B's idle GPU
    assert got["a1"] == (a1, False)
    assert got["b0"] == (b0, False)


@pytest.mark.parametrize(("order", "expect"), [
    ("longest", {"a1": 500.0, "b0": 600.0, "a2": 700.0}),
    ("allocation", {"a1": 600.0, "b0": 500.0, "a2": 700.0})])
def test_longest_queue_first(order, expect):
    got = start_times([*ROWS, ("a2", "A", 2.0, 100.0, 1)], order)
    assert {j: got[j] for j in expect} == expect


def test_longest_with_one_job_each_is_figure_7():
    assert starts(SiaPolicy(BlindForecaster(), refresh_s=0, dedicated_order="longest"))[
        "b0"] == (500.0, False)


# A borrower with a queue (pools B quota 1, C quota 2): at 0, C starts c0 (500 s) and c1
# (10,000 s) on its quota and c2 (1,000 s) on B's idle GPU (a loan); c3, c4 (100 s) wait from
# t=1; b0 (B) arrives at 200, its GPU lent. At 500 c0 ends: C (1 of 2 dedicated, 2 allocated
# with its loan, two waiting) and B (0 of 1, one waiting) are owed. "allocation": B's 0/1 <
# C's 2/2 -> b0. "longest": C has more waiting -> c3. "oldest": c3 (t=1) before b0 -> c3.
# "repay": C holds a loan, B does not -> b0.
BORROWER = [("c0", "C", 0.0, 500.0, 1), ("c1", "C", 0.0, 10_000.0, 1),
            ("c2", "C", 0.0, 1_000.0, 1), ("c3", "C", 1.0, 100.0, 1),
            ("c4", "C", 1.0, 100.0, 1), ("b0", "B", 200.0, 100.0, 1)]


@pytest.mark.parametrize(("order", "first"), [("allocation", "b0"), ("longest", "c3"),
                                              ("oldest", "c3"), ("repay", "b0")])
def test_a_borrower_yields_under_repay(order, first):
    res = simulate(table(BORROWER), make_pools({"B": 1, "C": 2}),
                   SiaPolicy(BlindForecaster(), refresh_s=0, dedicated_order=order),
                   check_invariants=True)
    got = {r["job_id"]: (r["start_time"], r["opportunistic"]) for r in res.iter_rows(named=True)}
    assert got["c2"] == (0.0, True)
    assert [j for j in ("b0", "c3") if got[j][0] == 500.0] == [first]


# The newest debt first ("fresh"): ROWS with b1 (B, 100 s) at t=201. FCFS with home quotas
# starts b0 at 200, b1 at 300, a1 at 500. At 500 a0 ends: A (1 of 2, head a1 fitting its
# quota only since 500) and B (0 of 1, owed since 200, two waiting) share the freed GPU.
# "repay": B's queue is longer -> b0 at 500; at 600 one waits in each, the tie as Figure 7
# (B's 0/1 < A's 1/2) -> b1 at 600, a1 at 700: all three late. "fresh": A's debt is newer ->
# a1 at 500 (on time), then b0 at 600 and b1 at 700: only B, whose GPU was lent, is late.
@pytest.mark.parametrize(("order", "expect"), [
    ("fresh", {"a1": 500.0, "b0": 600.0, "b1": 700.0}),
    ("repay", {"a1": 700.0, "b0": 500.0, "b1": 600.0})])
def test_the_newest_debt_first(order, expect):
    got = start_times([*ROWS, ("b1", "B", 201.0, 100.0, 1)], order)
    assert got["c1"] == 0.0
    assert {j: got[j] for j in expect} == expect


# A debt that a start ends (quotas A, B, C of 1 GPU): at 0 C starts c0 (10,000 s) and lends
# c1 (1,000 s) one idle GPU; at 10 a0, a1, b0, b1 (100 s each) arrive with one GPU free. Both
# heads are owed since 10 and tie; a0 starts (pool order), and A's next head a1 no longer
# fits its quota: A owes nothing. At 110 a0 ends and a1 fits again: A's debt is new (110),
# B's is from 10, so "fresh" starts a1 at 110 (its FCFS start), then b0 at 210, b1 at 310.
# (Kept from the first pass, A's debt would read 10, tie with B's, and the longer queue,
# B's, would take the GPU: a1 at 210, as under "repay".) No decision falls between 10 and
# 110 (no arrival, no end, no tick), so only the pass itself can end A's debt.
STALE = [("c0", "C", 0.0, 10_000.0, 1), ("c1", "C", 0.0, 1_000.0, 1),
         ("a0", "A", 10.0, 100.0, 1), ("a1", "A", 10.0, 100.0, 1),
         ("b0", "B", 10.0, 100.0, 1), ("b1", "B", 10.0, 100.0, 1)]


@pytest.mark.parametrize(("order", "expect"), [
    ("fresh", {"a0": 10.0, "a1": 110.0, "b0": 210.0, "b1": 310.0}),
    ("repay", {"a0": 10.0, "a1": 210.0, "b0": 110.0, "b1": 310.0})])
def test_a_start_that_fills_the_quota_ends_the_debt(order, expect):
    res = simulate(table(STALE), make_pools({"A": 1, "B": 1, "C": 1}),
                   SiaPolicy(BlindForecaster(), refresh_s=0, dedicated_order=order),
                   check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert got["c1"] == 0.0
    assert {j: got[j] for j in expect} == expect


def test_fresh_yields_to_a_lender_as_repay_does():
    res = simulate(table(BORROWER), make_pools({"B": 1, "C": 2}),
                   SiaPolicy(BlindForecaster(), refresh_s=0, dedicated_order="fresh"),
                   check_invariants=True)
    assert dict(zip(res["job_id"], res["start_time"], strict=True))["b0"] == 500.0


def test_hand_case_fcfs_reference():
    got = starts(make_policy("fcfs"))
    assert got["a1"][0] == 500.0 and got["b0"][0] == 200.0


def test_default_is_repay():
    assert SiaPolicy(BlindForecaster()).dedicated_order == "repay"
    res = simulate(table(BORROWER), make_pools({"B": 1, "C": 2}),
                   SiaPolicy(BlindForecaster(), refresh_s=0), check_invariants=True)
    assert dict(zip(res["job_id"], res["start_time"], strict=True))["b0"] == 500.0


def test_bad_order_names_the_option():
    with pytest.raises(ConfigError, match="dedicated_order must be one of 'allocation', "
                                          "'oldest', 'longest', 'repay', 'fresh', not 'newest'"):
        SiaPolicy(BlindForecaster(), dedicated_order="newest")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), refresh=st.sampled_from([0.0, 300.0]))
def test_perfect_predictions_slow_no_job_in_either_order(trace, refresh):
    rows, quotas = trace
    for order in ("allocation", "oldest", "longest", "repay", "fresh"):
        pol = make_policy("sia-perfect", refresh_s=refresh, dedicated_order=order)
        assert slowed(table(rows), make_pools(quotas), pol).height == 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), order=st.sampled_from(["oldest", "longest", "repay", "fresh"]))
def test_each_order_keeps_each_pools_dedicated_starts_in_arrival_order(trace, order):
    rows, quotas = trace
    pol = SiaPolicy(BlindForecaster(), refresh_s=0, dedicated_order=order)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    for _, grp in res.filter(~pl.col("opportunistic")).sort("submit_time", "job_id").group_by(
            "pool", maintain_order=True):
        s = grp["start_time"].to_list()
        assert s == sorted(s)
