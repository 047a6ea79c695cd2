"""The oracle MILP (SIA Figure 19) and the virtual-clock helpers it shares with SIA_VC."""

from __future__ import annotations

import itertools

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import make_pools, validate
from sia.scheduler.core.simulator import build_trace, simulate
from sia.scheduler.policies.oracle import (
    OraclePolicy,
    candidate_starts,
    check_plan,
    job_step_s,
    solve_oracle,
)
from sia.scheduler.policies.siavc.vst import ResourcePlan, fcfs_baseline_starts, fcfs_pool_starts
from sia.scheduler.registry import make_policy


def table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus) tuples, via the contract."""
    raw = pl.DataFrame(
        rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"], orient="row"
    )
    return validate(raw)[0]


# ---------------------------------------------------------------- virtual clock


def test_fcfs_pool_starts_hand_checked_with_head_of_line_blocking():
    # capacity 2: a (1 GPU, 0-10), b (2 GPUs) waits for a, c (1 GPU) waits behind b
    starts = fcfs_pool_starts([0, 1, 2], [10, 5, 3], [1, 2, 1], 2)
    assert starts == [0, 10, 15]
    # a GPU held until 4 by an earlier job delays the first job; now=3 bounds everything
    assert fcfs_pool_starts([0, 0], [5, 5], [2, 1], 2, now=3.0, busy=[(4.0, 1)]) == [4.0, 9.0]
    # horizon stops before the first job arriving at or after it
    assert fcfs_pool_starts([0, 5, 9], [1, 1, 1], [1, 1, 1], 1, horizon=9) == [0, 5]
    # stop_when_idle stops after the first job that finds the pool empty
    assert fcfs_pool_starts([0, 5, 9], [1, 1, 1], [1, 1, 1], 1, busy=[(3.0, 1)],
                            stop_when_idle=True) == [3.0, 5]
    assert fcfs_pool_starts([0], [1], [3], 2) == [float("inf")]


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 25))
def test_fcfs_baseline_matches_the_simulators_fcfs(seed, n):
    rng = np.random.default_rng(seed)
    rows = [(f"j{i}", f"p{rng.integers(0, 3)}", float(rng.integers(0, 50)),
             float(rng.integers(1, 30)), int(rng.choice([1, 2, 4]))) for i in range(n)]
    jobs = table(rows)
    pools = make_pools({"p0": 4, "p1": 4, "p2": 5})
    res = simulate(jobs, pools, make_policy("fcfs"))
    trace, order = build_trace(jobs, pools)
    mine = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool, trace.quota)
    assert np.array_equal(mine, res["start_time"].to_numpy()[order])


def test_resource_plan_hand_checked():
    plan = ResourcePlan()
    assert plan.max_reservation(0, 10) == 0
    plan.reserve(2, 5.0, 10.0)  # [5, 15)
    plan.reserve(1, 10.0, 10.0)  # [10, 20)
    assert plan.max_reservation(0, 5) == 0  # [0, 5) ends where the first starts
    assert plan.max_reservation(0, 5.5) == 2
    assert plan.max_reservation(12, 1) == 3
    assert plan.max_reservation(15, 100) == 1
    assert plan.max_reservation(20, 1) == 0
    plan.reserve(4, 30.0, float("inf"))
    assert plan.max_reservation(1000, 1) == 4 and plan.level_at(25) == 0
    plan.clear()
    assert plan.max_reservation(0, 1e9) == 0


@settings(max_examples=60, deadline=None)
@given(ops=st.lists(st.tuples(st.integers(1, 4), st.integers(0, 40), st.integers(1, 20)),
                    max_size=12),
       busy=st.lists(st.tuples(st.integers(1, 30), st.integers(1, 3)), max_size=4),
       q=st.tuples(st.integers(0, 60), st.integers(1, 30)))
def test_resource_plan_matches_a_dense_array(ops, busy, q):
    plan = ResourcePlan()
    dense = np.zeros(200, dtype=np.int64)
    plan.add_busy(np.array([e for e, _ in busy], float), np.array([g for _, g in busy]), 0.0)
    for e, g in busy:
        dense[0:e] += g
    for g, t, d in ops:
        plan.reserve(g, float(t), float(d))
        dense[t:t + d] += g
    t, d = q
    assert plan.max_reservation(float(t), float(d)) == dense[t:t + d].max()


# ---------------------------------------------------------------- the MILP


def test_candidates_stay_within_submit_and_cutoff():
    c = candidate_starts(7.0, 95.0, 10.0)
    assert c[0] == 7.0 and c[-1] == 95.0 and list(c[1:-1]) == [10, 20, 30, 40, 50, 60, 70, 80, 90]
    assert list(candidate_starts(7.0, 7.0, 10.0)) == [7.0]
    steps = job_step_s(np.array([60.0, 1200.0, 2400.0, 60_000.0]), 300.0, 4.0)
    assert list(steps) == [300.0, 300.0, 600.0, 9600.0]


def _hand_instance():
    # pools 0 and 1 with 2 GPUs each; (submit, duration, gpus, pool)
    jobs = [(0, 100, 2, 0), (0, 10, 2, 0), (0, 50, 1, 1), (20, 10, 2, 1)]
    s, d, g, p = (np.array(c, dtype=float) for c in zip(*jobs, strict=True))
    return s, d, g.astype(int), p.astype(int), np.array([2, 2])


@pytest.mark.parametrize("solver", ["highs", "cp-sat", "scip"])
def test_hand_checked_instance(solver):
    """FCFS: A 0, B 100 (behind A), C 0, D 50 (C holds a GPU) -> delay 130.

    Optimum by hand: A and C have no choice (cut-off 0). B and D both want the
    two GPUs freed when C ends at 50; D may not start after 50 (its cut-off),
    so D starts at 50 and B at 60, when D ends: delay 60 + 30 = 90.
    """
    s, d, g, p, q = _hand_instance()
    cutoff = fcfs_baseline_starts(s, d, g, p, q)
    assert list(cutoff) == [0, 100, 0, 50]
    r = solve_oracle(s, d, g, p, q, cutoff, step_s=10.0, slots_per_duration=1.0, solver=solver)
    assert r.status == "optimal" and not r.fallback
    assert list(r.start_s) == [0, 60, 0, 50]
    assert r.objective_s == pytest.approx(90.0) and r.fcfs_delay_s == pytest.approx(130.0)
    assert r.gap == 0.0


def _brute_force(s, d, g, cutoff, capacity, steps):
    cands = [candidate_starts(s[j], cutoff[j], steps[j]) for j in range(len(s))]
    best = np.inf
    for combo in itertools.product(*cands):
        st_ = np.array(combo)
        if not check_plan(s, d, g, capacity, st_, cutoff):
            best = min(best, float((st_ - s).sum()))
    return best


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(2, 5))
def test_oracle_matches_brute_force_on_tiny_instances(seed, n):
    rng = np.random.default_rng(seed)
    s = np.sort(rng.integers(0, 6, n)).astype(float) * 10
    d = rng.integers(1, 8, n).astype(float) * 10
    g = rng.choice([1, 2], n)
    p = rng.integers(0, 2, n)
    q = np.array([2, 2])
    cutoff = fcfs_baseline_starts(s, d, g, p, q)
    steps = job_step_s(d, 10.0, 2.0)
    r = solve_oracle(s, d, g, p, q, cutoff, step_s=10.0, slots_per_duration=2.0)
    assert r.status == "optimal"
    assert check_plan(s, d, g, 4, r.start_s, cutoff) == []
    assert r.objective_s == pytest.approx(_brute_force(s, d, g, cutoff, 4, steps))
    assert r.objective_s <= r.fcfs_delay_s + 1e-9


def test_check_plan_reports_each_kind_of_violation():
    s, d, g, _, _ = _hand_instance()
    ok = np.array([0, 60, 0, 50.0])
    assert check_plan(s, d, g, 4, ok) == []
    assert any("capacity" in m for m in check_plan(s, d, g, 4, np.array([0, 0, 0, 50.0])))
    assert any("before they arrive" in m for m in check_plan(s, d, g, 4, np.array([0, 60, 0, 10.0])))
    cut = np.array([0, 100, 0, 50.0])
    assert any("cut-off" in m for m in check_plan(s, d, g, 4, np.array([0, 60, 0, 55.0]), cut))
    # a job ending exactly when another starts does not overlap it
    assert check_plan(np.zeros(2), np.array([10.0, 10]), np.array([4, 4]), 4, np.array([0, 10.0])) == []


def test_fairness_term_keeps_the_plan_feasible_and_both_solvers_agree():
    s, d, g, p, q = _hand_instance()
    cutoff = fcfs_baseline_starts(s, d, g, p, q)
    a = solve_oracle(s, d, g, p, q, cutoff, step_s=10.0, beta=0.5, solver="highs")
    b = solve_oracle(s, d, g, p, q, cutoff, step_s=10.0, beta=0.5, solver="cp-sat")
    for r in (a, b):
        assert r.status == "optimal" and check_plan(s, d, g, 4, r.start_s, cutoff) == []
    assert a.solver_objective == pytest.approx(b.solver_objective, rel=1e-3)
    assert a.solver_objective >= a.objective_s  # the fairness term only adds


def test_no_solution_in_time_falls_back_to_fcfs(monkeypatch):
    import sia.scheduler.policies.oracle as oracle

    monkeypatch.setattr(oracle, "_solve_mip",
                        lambda *a, **k: oracle._Solved(None, np.nan, np.nan, "none", False))
    s, d, g, p, q = _hand_instance()
    cutoff = fcfs_baseline_starts(s, d, g, p, q)
    r = solve_oracle(s, d, g, p, q, cutoff, step_s=10.0)
    assert r.fallback and r.status == "fallback-fcfs" and list(r.start_s) == list(cutoff)


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(1, 14), pools=st.integers(1, 3))
def test_oracle_policy_slows_nobody_and_replays_its_plan(seed, n, pools):
    rng = np.random.default_rng(seed)
    rows = [(f"j{i}", f"p{rng.integers(0, pools)}", float(rng.integers(0, 3600)),
             float(rng.integers(60, 5400)), int(rng.choice([1, 2, 4]))) for i in range(n)]
    jobs = table(rows)
    pq = make_pools({f"p{i}": int(rng.integers(4, 7)) for i in range(pools)})
    fcfs = simulate(jobs, pq, make_policy("fcfs"))
    pol = OraclePolicy(step_s=300.0, time_limit_s=20.0)
    res = simulate(jobs, pq, pol, check_invariants=True)
    assert (res["end_time"] <= fcfs["end_time"] + 1.0).all()
    trace, order = build_trace(jobs, pq)
    assert np.array_equal(res["start_time"].to_numpy()[order], pol.result.start_s)
    assert pol.result.objective_s <= pol.result.fcfs_delay_s + 1e-6
    queued = float((res["start_time"] - res["submit_time"]).sum())
    assert queued == pytest.approx(pol.result.objective_s)


def test_oracle_facts_report_its_solve_in_hours():
    rows = [("a", "p0", 0.0, 3600.0, 4), ("b", "p0", 0.0, 1800.0, 4), ("c", "p0", 60.0, 600.0, 2)]
    pol = OraclePolicy(step_s=300.0, time_limit_s=20.0)
    assert pol.facts() == {}  # before any replay
    res = simulate(table(rows), make_pools({"p0": 4}), pol)
    facts = pol.facts()
    assert set(facts) == {"oracle_status", "oracle_gap", "oracle_delay_h", "fcfs_delay_h",
                          "oracle_reproducible"}
    queued_h = float((res["start_time"] - res["submit_time"]).sum()) / 3600.0
    assert facts["oracle_delay_h"] == pytest.approx(queued_h)
    assert facts["fcfs_delay_h"] >= facts["oracle_delay_h"] - 1e-9
    assert facts["oracle_status"] in ("optimal", "feasible") and facts["oracle_reproducible"]
