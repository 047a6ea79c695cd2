"""SIA's ``rebin_pending``: pending jobs predicted again as their pools' jobs end."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from sia.data.errors import ConfigError
from sia.data.schema import make_pools
from sia.scheduler.core.forecast import PerfectForecaster, duration_bin_of
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.registry import make_policy

from .conftest import BlindForecaster, job_table, small_traces

LONG_BIN = int(duration_bin_of(np.array([1e9]))[0])  # fits no window


class LearnsFromItsPool(BlindForecaster):
    """No arrivals; a job looks like it never fits until a job of its pool has ended, then its
    true bin: what a look-alike history learns once the first of a burst is done."""

    name = "learns"
    perfect_information = False

    def duration_bins(self, view, job_indices):
        jobs = np.asarray(job_indices, dtype=np.int64)
        done = np.asarray(view.completed_counts())[view.trace.pool[jobs]] > 0
        true = PerfectForecaster().duration_bins(view, jobs)
        return np.where(done, true, LONG_BIN)


table = job_table


def run(rows, quotas, policy) -> tuple[dict[str, tuple[float, bool]], SiaPolicy]:
    res = simulate(table(rows), make_pools(quotas), policy, check_invariants=True)
    return {r["job_id"]: (r["start_time"], r["opportunistic"])
            for r in res.iter_rows(named=True)}, policy


# A (quota 2) is idle; B (quota 1) submits a burst of four 10 s jobs at 0, each predicted
# never to fit until one of B's jobs has ended
BURST = [(f"b{i}", "B", 0.0, 10.0, 1) for i in range(4)] + [("a0", "A", 5000.0, 10.0, 1)]


def test_without_rebinning_the_burst_runs_one_by_one_on_its_own_quota():
    got, pol = run(BURST, {"A": 2, "B": 1}, SiaPolicy(LearnsFromItsPool(), loan_ramp=None, risk=None))
    assert [got[f"b{i}"] for i in range(4)] == [(0.0, False), (10.0, False), (20.0, False),
                                                (30.0, False)]
    assert "rebinned" not in pol.stats


def test_rebinning_lends_the_rest_of_the_burst_once_the_first_has_ended():
    got, pol = run(BURST, {"A": 2, "B": 1},
                   SiaPolicy(LearnsFromItsPool(), loan_ramp=None, rebin_pending=True, risk=None))
    # at 10: b1 takes B's GPU (Figure 7 first), b2 and b3 are predicted again and lent A's two
    assert got["b0"] == (0.0, False) and got["b1"] == (10.0, False)
    assert got["b2"] == (10.0, True) and got["b3"] == (10.0, True)
    assert pol.stats["rebinned"] == 3  # b1, b2, b3 pending at the re-prediction


class LearnsAfterTwo(LearnsFromItsPool):
    """The same, but a job looks like its true bin only once two of its pool's jobs ended."""

    def duration_bins(self, view, job_indices):
        jobs = np.asarray(job_indices, dtype=np.int64)
        done = np.asarray(view.completed_counts())[view.trace.pool[jobs]] > 1
        true = PerfectForecaster().duration_bins(view, jobs)
        return np.where(done, true, LONG_BIN)


def test_a_pool_is_predicted_again_at_most_once_per_refresh():
    # the re-prediction at 10 (one job ended) still says "never"; at 20 two have ended, but B
    # was predicted again 10 s before: with refresh_s 300 the burst keeps running one by one,
    # with refresh_s 0 the rest is lent at 20
    slow, pol = run(BURST, {"A": 2, "B": 1}, SiaPolicy(LearnsAfterTwo(), loan_ramp=None,
                                                       rebin_pending=True, risk=None))
    assert [slow[f"b{i}"][0] for i in range(4)] == [0.0, 10.0, 20.0, 30.0]
    assert pol.stats["rebinned"] == 0
    fast, pol = run(BURST, {"A": 2, "B": 1}, SiaPolicy(LearnsAfterTwo(), loan_ramp=None,
                                                       rebin_pending=True, refresh_s=0.0, risk=None))
    assert fast["b2"] == (20.0, False) and fast["b3"] == (20.0, True)


def test_the_option_is_checked():
    with pytest.raises(ConfigError, match="rebin_pending"):
        SiaPolicy(BlindForecaster(), rebin_pending="yes", risk=None)
    with pytest.raises(ConfigError, match="rebin_pending.*risk"):
        SiaPolicy(PerfectForecaster(), rebin_pending=True, risk=0.1)


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces())
def test_with_perfect_predictions_rebinning_changes_nothing(trace):
    # true bins predicted again are the same bins: not one job moves, not one start changes
    rows, quotas = trace
    jobs, pools = table(rows), make_pools(quotas)
    off = simulate(jobs, pools, make_policy("sia-perfect"))
    pol = make_policy("sia-perfect", rebin_pending=True)
    on = simulate(jobs, pools, pol, check_invariants=True)
    assert on["start_time"].to_list() == off["start_time"].to_list()
    assert pol.stats.get("rebinned", 0) == 0


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces())
def test_rebinning_keeps_every_invariant_and_each_jobs_windows_only_grow(trace):
    rows, quotas = trace
    pol = SiaPolicy(LearnsFromItsPool(), loan_ramp=None, rebin_pending=True, risk=None)
    simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    for p, lists in enumerate(pol._elig):
        for k, lst in enumerate(lists):
            live = lst[pol._head[p][k]:]
            assert live == sorted(live)  # arrival order kept after the insertions
            assert all(pol._kmin_job[j] <= k for j in live)
