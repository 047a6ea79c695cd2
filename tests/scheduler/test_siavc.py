"""SIA_VC (SIA Figure 6): hand-checked decisions and Theorem 1 as a property."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.scheduler.oracle import solve_oracle
from sia.scheduler.policy_siavc import SiaVCPolicy
from sia.scheduler.registry import make_policy
from sia.scheduler.simulator import build_trace, simulate
from sia.scheduler.vst import fcfs_baseline_starts


def table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus) tuples, via the contract."""
    raw = pl.DataFrame(
        rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"], orient="row"
    )
    return validate(raw)[0]


def starts(result: pl.DataFrame) -> dict[str, float]:
    return dict(zip(result["job_id"], result["start_time"], strict=True))


def test_lends_idle_gpus_only_to_jobs_that_finish_before_the_owner_needs_them():
    """Pool a (2 GPUs) is idle until its job arrives at t=100; pool b (2 GPUs) is busy.

    b's queued jobs: a 1-GPU 50 s job (fits before 100: borrowed, runs 0-50)
    and a 2-GPU 500 s job (would collide with a's job at 100: not lent, waits
    for b's own GPUs at 1000). a's job starts on arrival.
    """
    jobs = table([
        ("b0", "b", 0.0, 1000.0, 2),
        ("b1", "b", 0.0, 50.0, 1),
        ("b2", "b", 0.0, 500.0, 2),
        ("a0", "a", 100.0, 300.0, 2),
    ])
    pools = make_pools({"a": 2, "b": 2})
    fcfs = starts(simulate(jobs, pools, make_policy("fcfs")))
    assert fcfs == {"b0": 0.0, "b1": 1000.0, "b2": 1050.0, "a0": 100.0}
    res = simulate(jobs, pools, make_policy("sia-vc"), check_invariants=True)
    got = starts(res)
    assert got["b1"] == 0.0 and got["a0"] == 100.0
    assert got["b2"] == 400.0  # on a's GPUs once a's job is done, well before its FCFS 1050
    opp = dict(zip(res["job_id"], res["opportunistic"], strict=True))
    assert opp["b1"] and opp["b2"] and not opp["a0"]


def test_a_job_is_not_started_early_if_that_pushes_its_own_pool_past_fcfs():
    """Pool p (2 GPUs): r holds 1 GPU until 10; w (2 GPUs) waits for it (F = 10);
    x (1 GPU, 100 s) queues behind w (F = 110). Pool q (2 GPUs) is idle.

    Starting x at 0 on q's spare GPUs is fine for w, as long as x is charged
    to q, not to p; either way w must start at 10 and nobody ends later.
    """
    jobs = table([
        ("r", "p", 0.0, 10.0, 1),
        ("w", "p", 0.0, 100.0, 2),
        ("x", "p", 0.0, 100.0, 1),
        ("y", "q", 5.0, 100.0, 1),
    ])
    pools = make_pools({"p": 2, "q": 2})
    fcfs = simulate(jobs, pools, make_policy("fcfs"))
    res = simulate(jobs, pools, make_policy("sia-vc"), check_invariants=True)
    got = starts(res)
    assert got["w"] <= 10.0 and got["y"] == 5.0
    assert got["x"] < 110.0
    assert (res["end_time"] <= fcfs["end_time"] + 1.0).all()


def _check_no_slowdown(jobs, pools):
    fcfs = simulate(jobs, pools, make_policy("fcfs"))
    pol = SiaVCPolicy()
    res = simulate(jobs, pools, pol, check_invariants=True)
    late = (res["end_time"] - fcfs["end_time"]).to_numpy()
    assert late.max(initial=0.0) <= 1.0, f"a job ends {late.max():.1f}s later than under FCFS"
    return fcfs, res


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 30), n_pools=st.integers(1, 4),
       burst=st.booleans())
def test_theorem1_random_tables(seed, n, n_pools, burst):
    """Theorem 1: with perfect information SIA_VC slows no job relative to FCFS."""
    rng = np.random.default_rng(seed)
    times = rng.integers(0, 8, n) * 600 if burst else rng.uniform(0, 7200, n)
    rows = [(f"j{i}", f"p{rng.integers(0, n_pools)}", float(times[i]),
             float(rng.choice([rng.uniform(60, 900), rng.uniform(900, 20_000)])),
             int(rng.choice([1, 1, 2, 4, 8]))) for i in range(n)]
    pools = make_pools({f"p{i}": int(rng.choice([8, 8, 10, 16])) for i in range(n_pools)})
    _check_no_slowdown(table(rows), pools)


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000),
       variant=st.sampled_from(["base", "higher-load", "more-wide-jobs", "fewer-queues"]))
def test_theorem1_synthetic_workloads(seed, variant):
    jobs, pools = generate_workload(variant, seed, days=0.4)
    fcfs, res = _check_no_slowdown(jobs, pools)
    jct = lambda r: (r["end_time"] - r["submit_time"]).to_numpy()  # noqa: E731
    assert jct(res).mean() <= jct(fcfs).mean() + 1e-6


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 10))
def test_oracle_beats_siavc_and_fcfs_on_the_grid(seed, n):
    """On a minute grid (all events on it) SIA_VC's schedule is a candidate of the oracle,
    so the oracle's optimum is at most SIA_VC's total queueing delay, itself at most FCFS's."""
    rng = np.random.default_rng(seed)
    rows = [(f"j{i}", f"p{rng.integers(0, 2)}", float(rng.integers(0, 30) * 60),
             float(rng.integers(1, 40) * 60), int(rng.choice([1, 2, 4]))) for i in range(n)]
    jobs = table(rows)
    pools = make_pools({"p0": 4, "p1": 4})
    fcfs, res = _check_no_slowdown(jobs, pools)
    trace, order = build_trace(jobs, pools)
    cutoff = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                  trace.quota)
    # step 60 s everywhere (slots_per_duration large keeps every job on the 60 s grid)
    r = solve_oracle(trace.submit, trace.duration, trace.num_gpus, trace.pool, trace.quota,
                     cutoff, step_s=60.0, slots_per_duration=1e9, time_limit_s=30.0)
    assert r.status == "optimal"
    delay = lambda t: float((t["start_time"] - t["submit_time"]).sum())  # noqa: E731
    assert r.objective_s <= delay(res) + 1e-6 <= delay(fcfs) + 2e-6


def test_policy_is_deterministic_and_reports_its_work():
    jobs, pools = generate_workload("base", 3, days=0.3)
    a, b = SiaVCPolicy(), SiaVCPolicy()
    ra, rb = simulate(jobs, pools, a), simulate(jobs, pools, b)
    assert ra.equals(rb)
    assert a.stats["calls"] > 0 and a.stats == b.stats


@pytest.mark.parametrize("name", ["sia-vc", "oracle"])
def test_registered_under_its_name(name):
    assert make_policy(name).name == name


@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n=st.integers(2, 12))
def test_oracle_warm_started_from_siavc_is_never_worse_than_siavc(seed, n):
    """Off the grid too: SIA_VC's starts are oracle candidates and its starting solution."""
    from sia.scheduler.oracle import OraclePolicy

    rng = np.random.default_rng(seed)
    rows = [(f"j{i}", f"p{rng.integers(0, 2)}", float(rng.uniform(0, 3600)),
             float(rng.uniform(60, 4000)), int(rng.choice([1, 2, 4]))) for i in range(n)]
    jobs = table(rows)
    pools = make_pools({"p0": 4, "p1": 4})
    fcfs, vc = _check_no_slowdown(jobs, pools)
    pol = OraclePolicy(time_limit_s=20.0, solver="cp-sat", warm_start="sia-vc")
    res = simulate(jobs, pools, pol, check_invariants=True)
    assert pol.result.stats["warm_start"] == 1.0 and pol.result.status in ("optimal", "feasible")
    delay = lambda t: float((t["start_time"] - t["submit_time"]).sum())  # noqa: E731
    assert delay(res) <= delay(vc) + 1e-6
    assert (res["end_time"] <= fcfs["end_time"] + 1.0).all()
