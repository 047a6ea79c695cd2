"""Determinism (issue 16 item 5): the same workload and seed give the same per-job table, for
every registered policy, and the oracle's solver stops on a work limit, not the wall clock."""

from __future__ import annotations

import numpy as np
import pytest
from sia.data.synthetic import generate_workload
from sia.scheduler.core.forecast import PerfectForecaster
from sia.scheduler.core.simulator import build_trace, simulate
from sia.scheduler.policies.oracle import solve_oracle
from sia.scheduler.policies.siavc.vst import fcfs_baseline_starts
from sia.scheduler.registry import POLICY_NAMES, make_policy, policy_needs, policy_options


def _replay(name: str, jobs, pools):
    """One replay of policy ``name`` built as a pipeline builds it (seed, forecaster)."""
    forecaster = PerfectForecaster() if policy_needs(name).forecaster is not None else None
    policy = make_policy(name, **policy_options(name, seed=11, forecaster=forecaster))
    return simulate(jobs, pools, policy)


@pytest.mark.parametrize("name", list(POLICY_NAMES))
def test_every_policy_replays_the_same_per_job_table_twice(name):
    jobs, pools = generate_workload("higher-load", 5, days=0.4)
    first, second = _replay(name, jobs, pools), _replay(name, jobs, pools)
    assert first.height == jobs.height
    assert first.equals(second), name


def _instance(days: float, seed: int = 0):
    jobs, pools = generate_workload("base", seed, days=days)
    t, _ = build_trace(jobs, pools)
    cutoff = fcfs_baseline_starts(t.submit, t.duration, t.num_gpus, t.pool, t.quota)
    return (t.submit, t.duration, t.num_gpus, t.pool, t.quota, cutoff)


@pytest.mark.parametrize("threads", [1, 2])
def test_oracle_stopped_by_its_work_limit_returns_the_same_plan(threads):
    """A work limit far too small to prove optimality stops CP-SAT at the same point every
    time, whatever the machine's load: the same plan, reported reproducible."""
    args = _instance(1.0)  # 130 jobs: far from proved after 1.5 s of work (presolve included)
    runs = [solve_oracle(*args, solver="cp-sat", work_limit=1.5, time_limit_s=300.0,
                         threads=threads, seed=4) for _ in range(2)]
    assert runs[0].status == "feasible"  # stopped by the limit, not by a proof
    assert all(r.reproducible for r in runs)
    assert np.array_equal(runs[0].start_s, runs[1].start_s)
    assert runs[0].objective_s == runs[1].objective_s


def test_oracle_stopped_by_the_wall_clock_says_it_is_not_reproducible():
    r = solve_oracle(*_instance(1.0), solver="cp-sat", work_limit=None, time_limit_s=0.3)
    assert r.reproducible == (r.status == "optimal")
    h = solve_oracle(*_instance(1.0), solver="highs", time_limit_s=0.3)
    assert h.reproducible == (h.status == "optimal")


def test_oracle_takes_any_experiment_seed():
    """A sweep's experiment seeds reach 2^32 (SeedSequence words); CP-SAT takes an int32 and
    raised a TypeError past 2^31 (issue 36). Seeds 2^31 apart solve the same."""
    args = _instance(0.1)
    big = solve_oracle(*args, solver="cp-sat", work_limit=0.2, time_limit_s=60.0,
                       seed=2**32 - 1)
    small = solve_oracle(*args, solver="cp-sat", work_limit=0.2, time_limit_s=60.0,
                         seed=2**31 - 1)
    assert np.array_equal(big.start_s, small.start_s)
