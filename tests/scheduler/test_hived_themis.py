"""HiveD* and Themis* (run to completion): hand schedules and invariants."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.themis import fairness_ratio, finish_time
from sia.scheduler.registry import make_policy


def table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus) tuples, via the contract."""
    raw = pl.DataFrame(
        rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"], orient="row"
    )
    return validate(raw)[0]


def run(rows, quotas, policy, **options) -> dict[str, tuple[float, bool]]:
    """{job_id: (start, opportunistic)} of a replay with invariants checked."""
    res = simulate(table(rows), make_pools(quotas), make_policy(policy, **options),
                   check_invariants=True)
    return {r["job_id"]: (r["start_time"], r["opportunistic"]) for r in res.iter_rows(named=True)}


# ----------------------------------------------------------------------------- HiveD*


def test_hived_lends_idle_quota_and_slows_the_donor():
    # A (quota 2) runs a0 on both its GPUs; a1 borrows one of B's idle GPUs at 0 (low
    # priority). b0 (2 GPUs) arrives at 10: B's quota is free but one GPU is lent and HiveD*
    # cannot preempt, so b0 waits for a1 to end at 50 (FCFS would start it at 10).
    rows = [("a0", "A", 0.0, 100.0, 2), ("a1", "A", 0.0, 50.0, 1), ("b0", "B", 10.0, 20.0, 2)]
    got = run(rows, {"A": 2, "B": 2}, "hived")
    assert got == {"a0": (0.0, False), "a1": (0.0, True), "b0": (50.0, False)}


def test_hived_low_priority_jobs_go_in_global_arrival_order_with_skipping():
    # A (quota 3) is full with a0, B (quota 1) with b0; C's single GPU idles. a1 (2 GPUs,
    # at 1) does not fit the one free GPU and is skipped; a2 (1 GPU, at 2) takes it
    # (Kubernetes-style: no waiting behind a1). b1 (at 3) finds no free GPU; when a2 ends
    # (12) a1 still does not fit and b1, the next in FIFO order, starts.
    rows = [("a0", "A", 0.0, 100.0, 3), ("a1", "A", 1.0, 10.0, 2), ("a2", "A", 2.0, 10.0, 1),
            ("b0", "B", 0.0, 100.0, 1), ("b1", "B", 3.0, 10.0, 1)]
    got = run(rows, {"A": 3, "B": 1, "C": 1}, "hived")
    assert got == {"a0": (0.0, False), "b0": (0.0, False), "a2": (2.0, True),
                   "b1": (12.0, True), "a1": (100.0, False)}  # a1 back on A's quota at 100


def test_hived_guaranteed_jobs_keep_fcfs_within_a_pool():
    # B is full (b0). a1 (2 GPUs) cannot run on A's quota while a0 holds 1 of its 2 GPUs, and
    # blocks a2 there (head-of-line); a2 still runs at once, as a low-priority job.
    rows = [("b0", "B", 0.0, 1000.0, 1), ("a0", "A", 0.0, 100.0, 1),
            ("a1", "A", 1.0, 10.0, 2), ("a2", "A", 2.0, 10.0, 1)]
    got = run(rows, {"A": 2, "B": 1}, "hived")
    assert got["a2"] == (2.0, True)
    assert got["a1"] == (100.0, False)


# ----------------------------------------------------------------------------- Themis*


def test_finish_time_and_rho():
    assert finish_time(100.0, 10.0, 4) == 25.0
    assert finish_time(100.0, 40.0, 4) == 40.0
    assert finish_time(5.0, 1.0, 0) == math.inf
    assert finish_time(0.0, 0.0, 0) == 0.0
    assert fairness_ratio(2297.0, 500.0, 3, 4) == pytest.approx((2297 / 3) / 574.25)
    assert fairness_ratio(0.0, 0.0, 0, 4) == 1.0


# Pools A (quota 2), B (quota 4), C (quota 1); 7 GPUs. At 0: a0 (1 GPU, 10000 s) and b0 (3
# GPUs, 100 s) start. At 0.5: c0 starts on C's quota, c1 (10000 s) beyond it: 1 GPU is free.
# At 1: a1 (1 GPU, 10 s) and b1..b4 (1 GPU, 500 s) bid for it.
#   A: work 9999 + 10, longest 9999, alloc 1: rho = T(1) / T(2) = 10009 / 9999 = 1.001
#   B: work 99 * 3 + 4 * 500 = 2297, longest 500, alloc 3: rho = (2297 / 3) / (2297 / 4) = 1.333
#   f = 0.8: the offer goes to ceil(0.2 * 2) = 1 bidder, B: b1 starts at 1 on B's quota.
#   (MaxMin would start a1: A's allocation / quota 1/2 is below B's 3/4.)
# At 100 b0 ends, 3 free: B's rho (alloc 1: 1901 / 500 = 3.8; then 1.9; then 1.27) stays above
# A's (1.001): b2, b3, b4 start at 100. a1 waits for b1 to end at 501.
THEMIS_ROWS = [
    ("a0", "A", 0.0, 10000.0, 1), ("b0", "B", 0.0, 100.0, 3),
    ("c0", "C", 0.5, 10000.0, 1), ("c1", "C", 0.5, 10000.0, 1),
    ("a1", "A", 1.0, 10.0, 1),
    ("b1", "B", 1.0, 500.0, 1), ("b2", "B", 1.0, 500.0, 1), ("b3", "B", 1.0, 500.0, 1),
    ("b4", "B", 1.0, 500.0, 1),
]


def test_themis_hand_schedule():
    got = run(THEMIS_ROWS, {"A": 2, "B": 4, "C": 1}, "themis")
    assert got == {
        "a0": (0.0, False), "b0": (0.0, False), "c0": (0.5, False), "c1": (0.5, True),
        "a1": (501.0, False), "b1": (1.0, False), "b2": (100.0, False), "b3": (100.0, False),
        "b4": (100.0, False),
    }
    mm = run(THEMIS_ROWS, {"A": 2, "B": 4, "C": 1}, "maxmin")
    assert mm["a1"] == (1.0, False)  # the fairness notions differ on this case


def test_themis_offer_to_all_bidders_picks_the_largest_rho_drop():
    # f = 0: every bidder is offered; A (rho 1.001 -> 1.0 after a1) and B (1.333 -> 1.0 after b1)
    # the drop is larger for B, so B still wins; the schedule is the same.
    got = run(THEMIS_ROWS, {"A": 2, "B": 4, "C": 1}, "themis", fairness_knob=0.0)
    assert got["b1"] == (1.0, False) and got["a1"] == (501.0, False)


def test_themis_rejects_bad_knob():
    with pytest.raises(ConfigError, match="fairness_knob"):
        make_policy("themis", fairness_knob=1.0)


# ----------------------------------------------------------------------------- invariants


def dedicated_out_of_order(res: pl.DataFrame) -> int:
    """Count dedicated starts preceded (in their pool's arrival order) by a job that started later."""
    bad = 0
    for _, grp in res.sort(["submit_time", "job_id"]).group_by("pool", maintain_order=True):
        start = grp["start_time"].to_numpy()
        before = np.maximum.accumulate(np.concatenate([[-np.inf], start[:-1]]))
        bad += int((~grp["opportunistic"].to_numpy() & (before > start)).sum())
    return bad


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), variant=st.sampled_from(["base", "higher-load",
                                                              "more-wide-jobs"]))
def test_hived_invariants_and_fcfs_guaranteed_jobs(seed, variant):
    jobs, pools = generate_workload(variant, seed, days=1.0)
    res = simulate(jobs, pools, make_policy("hived"), check_invariants=True)
    assert res["start_time"].is_not_null().all()
    assert dedicated_out_of_order(res) == 0


@settings(max_examples=8, deadline=None)
@given(seed=st.integers(0, 10_000), variant=st.sampled_from(["base", "higher-load",
                                                              "more-wide-jobs"]))
def test_themis_invariants_and_work_conservation(seed, variant):
    jobs, pools = generate_workload(variant, seed, days=1.0)
    res = simulate(jobs, pools, make_policy("themis"), check_invariants=True)
    assert res["start_time"].is_not_null().all()
    # work conserving: a job never waits while enough GPUs idle for it at its arrival... checked
    # at arrivals: if the cluster had enough free GPUs when the job arrived (under this very
    # schedule), some job must have started at that instant.
    total = int(pools["quota_gpus"].sum())
    starts, ends = res["start_time"].to_numpy(), res["end_time"].to_numpy()
    gpus = res["num_gpus"].to_numpy()
    for sub, g, st_ in zip(res["submit_time"].to_numpy(), gpus, starts, strict=True):
        if st_ > sub:
            busy = gpus[(starts <= sub) & (ends > sub)].sum()
            assert total - busy < g, "a job waited while enough GPUs were idle"
