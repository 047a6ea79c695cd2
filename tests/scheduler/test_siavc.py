"""SIA_VC (SIA Figure 6): hand-checked decisions and Theorem 1 as a property, and SIA_VC on buddy
cells (refused starts undone)."""

from __future__ import annotations

import itertools
import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.simulator import build_trace, run_trace, simulate
from sia.scheduler.core.view import Start
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import simulate_cells
from sia.scheduler.policies.oracle import solve_oracle
from sia.scheduler.policies.siavc.policy import SiaVCPolicy
from sia.scheduler.policies.siavc.vst import (
    ResourcePlan,
    clock_reference,
    fcfs_baseline_starts,
    fcfs_clock,
    fcfs_clock_against,
    fcfs_pool_starts,
    first_short,
    guard_clock,
    resume_clock,
    resume_state,
    starts_with,
)
from sia.scheduler.registry import check_policy, make_policy, policies_with

_EPS = 1e-6


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
    from sia.scheduler.policies.oracle import OraclePolicy

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


# ----------------------------------------------------------------------------- reference


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 70), n_pools=st.integers(1, 4))
def test_optimized_equals_reference_on_random_tables(seed, n, n_pools):
    """The cached clocks, lazy VST merge, pruned MaxReservation and the lenders' fast-fail
    change no decision. Small quotas and arrivals on a 5-minute grid keep pools busy, so
    jobs borrow often and many guard checks fail (the paths the shortcuts take)."""
    _assert_equals_reference(*_busy_table(seed, n, n_pools))


def _busy_table(seed: int, n: int, n_pools: int) -> tuple[pl.DataFrame, pl.DataFrame]:
    """A random table (jobs, pools) whose small quotas and 5-minute arrival grid keep pools
    busy, so jobs borrow often and many guard checks fail."""
    rng = np.random.default_rng(seed)
    quota = [int(rng.choice([2, 4, 4, 6, 8])) for _ in range(n_pools)]
    pool = rng.integers(0, n_pools, n)
    times = np.sort(rng.integers(0, 40, n) * 300.0)
    rows = [(f"j{i}", f"p{pool[i]}", float(times[i]),
             float(rng.choice([rng.integers(1, 20) * 300.0, rng.uniform(60, 20_000)])),
             min(int(rng.choice([1, 1, 1, 2, 4])), quota[pool[i]])) for i in range(n)]
    return table(rows), make_pools({f"p{i}": q for i, q in enumerate(quota)})


def _assert_equals_reference(jobs: pl.DataFrame, pools: pl.DataFrame,
                             opt: SiaVCPolicy | None = None) -> SiaVCPolicy:
    """Replay ``jobs`` with the reference and the optimized policy (``opt``, default a new
    one); assert the same schedule and the same guard counts; return the optimized policy
    (for its stats)."""
    ref, opt = ReferenceSiaVC(), opt or SiaVCPolicy()
    ra, rb = simulate(jobs, pools, ref), simulate(jobs, pools, opt, check_invariants=True)
    assert ra.equals(rb)
    for key in ("early_starts", "checks_failed"):
        assert ref.stats[key] == opt.stats[key]
    return opt


def test_clocks_cut_after_a_guard_change_no_decision():
    """A guard's re-run that runs on to a late idle point is cached cut to what a refresh
    would hold (pending jobs, then future ones up to the first VST past the reach): on busy
    tables that happens, and the schedules and guard counts stay the reference's."""
    cut = 0
    for seed in range(12):
        cut += _assert_equals_reference(*_busy_table(seed, 60, 3)).stats["trimmed"]
    assert cut > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 70), n_pools=st.integers(1, 4),
       ahead=st.sampled_from([1.0, 300.0, 1800.0]))
def test_a_merge_cut_close_past_the_horizon_changes_no_decision(seed, n, n_pools, ahead):
    """The merged clocks hold only the entries before a bound ``merge_ahead`` past the
    horizon; the pass takes the pending jobs past it from the clocks. With the bound a
    second to half an hour ahead (6 h by default), most passes have such jobs and the
    bound moves often: the schedules and guard counts stay the reference's."""
    _assert_equals_reference(*_busy_table(seed, n, n_pools), SiaVCPolicy(merge_ahead=ahead))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 70), n_pools=st.integers(1, 4),
       resume=st.sampled_from([0.0, 0.2, 1.0, 3.0]))
def test_how_far_a_resumed_clock_runs_changes_no_decision(seed, n, n_pools, resume):
    """A clock resumed without a job that starts on lent GPUs runs to the horizon plus 0 to 3
    times D: a prefix of the same run, refreshed once the horizon passes its end; the
    schedules and guard counts stay the reference's."""
    _assert_equals_reference(*_busy_table(seed, n, n_pools), SiaVCPolicy(resume_ahead=resume))


def test_pending_jobs_past_the_merge_bound_are_met_and_the_bound_moves():
    """On busy tables with the bound 5 min past the horizon, passes do meet pending jobs past
    it and the bound is moved, and the decisions are the reference's."""
    tails = moves = 0
    for seed in range(12):
        st_ = _assert_equals_reference(*_busy_table(seed, 60, 3),
                                       SiaVCPolicy(merge_ahead=300.0)).stats
        tails, moves = tails + st_["tails"], moves + st_["merge_moves"]
    assert tails > 0 and moves > 0


class _CheckedReruns(SiaVCPolicy):
    """SiaVCPolicy that runs every guard's re-run also without the cached clock as its
    reference and checks that the two agree: on their common prefix (a re-run that met the
    cached clock takes its rest from it, which may be cut shorter), job for job, VST for
    VST and free GPUs for free GPUs, and on whether the last job is late."""

    reruns = 0

    def _rerun(self, q, *args, reference=True):
        got = super()._rerun(q, *args)
        want = super()._rerun(q, *args, reference=False)
        n = min(got[0].shape[0], want[0].shape[0])
        for a, b in zip(got, want, strict=True):
            assert a[:n].tolist() == b[:n].tolist()
        late = [x[1].size > 0 and x[1][-1] > self._deadline[x[0][-1]] for x in (got, want)]
        assert late[0] == late[1]
        type(self).reruns += 1
        return got


def test_a_guards_rerun_against_the_cached_clock_equals_a_plain_rerun():
    """Busy tables: every guard's re-run that stops where it meets the cached clock (and a
    job's own pool, its clock taken without the job) gives what a plain re-run gives."""
    _CheckedReruns.reruns = 0
    for seed in range(16):
        _assert_equals_reference(*_busy_table(seed, 60, 3), _CheckedReruns())
    assert _CheckedReruns.reruns > 100


class _CheckedShortReruns(SiaVCPolicy):
    """SiaVCPolicy handing each guard's re-run only ``check_ahead`` future jobs past its cached
    clock's at first, and checking every such re-run against one handed the pool's whole
    future: the same jobs, VSTs and free GPUs."""

    def _rerun(self, *args, **kw):
        got = super()._rerun(*args, **kw)
        ahead, self.check_ahead = self.check_ahead, 10**9
        try:
            want = super()._rerun(*args, **kw)
        finally:
            self.check_ahead = ahead
        for a, b in zip(got, want, strict=True):
            assert a.tolist() == b.tolist()
        return got


@pytest.mark.parametrize("ahead", [0, 1, 3])
def test_a_guards_rerun_handed_few_future_jobs_runs_on_when_it_needs_more(ahead):
    """With 0 to 3 future jobs past the cached clock's, many re-runs use them all and are run
    again on the whole future: every re-run is what the whole future gives, and the
    decisions and guard counts are the reference's."""
    retries = 0
    for seed in range(10):
        pol = _CheckedShortReruns()
        pol.check_ahead = ahead
        retries += _assert_equals_reference(*_busy_table(seed, 60, 3), pol).stats["check_retries"]
    assert retries > 0


class _CheckedPending(SiaVCPolicy):
    """SiaVCPolicy checking that the pending jobs a guard reads off a cached clock (its first
    ones) are the simulator's pending jobs, the starting one among them."""

    checked = 0

    def _try_charge(self, j, v, now, pend, *args):
        self._pend_seen = pend
        return super()._try_charge(j, v, now, pend, *args)

    def _rerun(self, q, n_pend, without, *args, **kw):
        assert self._vc[q][0][:n_pend].tolist() == list(self._pend_seen[q])
        assert without < 0 or without in self._pend_seen[q]
        type(self).checked += 1
        return super()._rerun(q, n_pend, without, *args, **kw)


def test_guards_read_each_pools_pending_jobs_off_its_cached_clock():
    _CheckedPending.checked = 0
    for seed in range(16):
        _assert_equals_reference(*_busy_table(seed, 60, 3), _CheckedPending())
    jobs, pools = generate_workload("higher-load", 1, days=0.4)
    simulate(jobs, pools, _CheckedPending())
    assert _CheckedPending.checked > 100


class _Clocks(SiaVCPolicy):
    """SiaVCPolicy recording every pool's cached clock (jobs, VSTs, free GPUs) after each
    decision; with ``uncut``, its runs read the pools' whole futures."""

    def __init__(self, uncut: bool = False) -> None:
        super().__init__()
        self._uncut = uncut
        self.seen: list = []

    def _future_upto(self, p, k, until):
        return 1 << 62 if self._uncut else super()._future_upto(p, k, until)

    def decide(self, view):
        out = super().decide(view)
        self.seen.append([None if c is None else tuple(x.tolist() for x in c)
                          for c in self._vc])
        return out


def test_runs_read_the_future_only_up_to_the_job_that_stops_them():
    """A refresh or a resumed clock stops after its first job starting at or after the reach;
    read from the pool's future only up to the first job arriving at or after it, every
    cached clock is the same, decision by decision, as read from the whole future."""
    for seed in range(12):
        jobs, pools = _busy_table(seed, 60, 3)
        cut, whole = _Clocks(), _Clocks(uncut=True)
        assert simulate(jobs, pools, cut).equals(simulate(jobs, pools, whole))
        assert cut.seen == whole.seen


class _Wakeups(SiaVCPolicy):
    """SiaVCPolicy recording every wake-up it asks for, with the decision's instant."""

    def reset(self, trace, cluster) -> None:
        super().reset(trace, cluster)
        self.asked: list[tuple[float, float | None]] = []

    def decide(self, view):
        out = super().decide(view)
        self.asked.append((view.now, self._wakeup))
        return out


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 70), n_pools=st.integers(1, 4))
def test_wakeups_do_not_depend_on_the_merge_bound(seed, n, n_pools):
    """The wake-up (the first VST ahead of each pool, read off the merge, and off the clocks
    when the merge has none) is the same at every decision with the bound a second past the
    horizon as with everything merged."""
    jobs, pools = _busy_table(seed, n, n_pools)
    near, far = _Wakeups(merge_ahead=1.0), _Wakeups(merge_ahead=1e12)
    assert simulate(jobs, pools, near).equals(simulate(jobs, pools, far))
    assert near.asked == far.asked and far.stats["tails"] == 0


class _CheckedWakeups(SiaVCPolicy):
    """Checks every wake-up, and the one read off the clocks alone (as if there were no merge),
    against the plainest reading of the clocks: over every pool, the first VST after now
    whose job has arrived or arrives before the horizon."""

    def _first_vst_ahead(self, now, n_arr, horizon, P):
        got = super()._first_vst_ahead(now, n_arr, horizon, P)
        want = math.inf
        for p in range(P):
            jobs, vs, _ = self._vc[p]
            ahead = np.flatnonzero(vs > now)
            if ahead.size:
                j = int(jobs[ahead[0]])
                if j < n_arr or self._submit[j] < horizon:
                    want = min(want, float(vs[ahead[0]]))
        assert got == (want if want < math.inf else None)
        cat, self._cat = self._cat, None  # and off the clocks alone, as without a merge
        assert super()._first_vst_ahead(now, n_arr, horizon, P) == got
        self._cat = cat
        self.checked = getattr(self, "checked", 0) + 1
        return got


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 70), n_pools=st.integers(1, 4),
       ahead=st.sampled_from([1.0, 300.0, 1e12]))
def test_each_wakeup_is_the_first_vst_ahead_read_plainly_off_the_clocks(seed, n, n_pools, ahead):
    """Whether read off the merge or off the clocks (with their first and last VSTs skipping
    the search), the wake-up is the plain first VST ahead at every decision."""
    pol = _CheckedWakeups(merge_ahead=ahead)
    simulate(*_busy_table(seed, n, n_pools), pol)
    assert pol.checked >= 1


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000),
       variant=st.sampled_from(["base", "higher-load", "more-wide-jobs", "fewer-queues"]))
def test_optimized_equals_reference_on_synthetic_workloads(seed, variant):
    jobs, pools = generate_workload(variant, seed, days=0.4)
    assert simulate(jobs, pools, ReferenceSiaVC()).equals(simulate(jobs, pools, SiaVCPolicy()))


class ReferenceSiaVC:
    """The first SIA_VC implementation (re-simulates every pool at every decision), kept verbatim
    as the slow reference the optimized :class:`SiaVCPolicy` must match decision for decision."""

    name = "sia-vc-reference"
    perfect_information = True
    uses_ticks = False

    def __init__(self) -> None:
        self._wakeup: float | None = None

    # ------------------------------------------------------------------ setup
    def reset(self, trace, cluster) -> None:
        """Compute each job's no-sharing FCFS start F(j) and clear the charges."""
        self._trace = trace
        self._submit = trace.submit.tolist()
        self._dur = trace.duration.tolist()
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()
        self._C = int(trace.quota.sum())
        self._F = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                       trace.quota).tolist()
        self._pool_jobs = [pj.tolist() for pj in trace.pool_jobs]
        #: per pool: charges (end time, GPUs) against its quota
        self._charges: list[list[tuple[float, int]]] = [[] for _ in range(trace.n_pools)]
        self._running_end: dict[int, float] = {}
        self._wakeup = None
        self.stats = {"calls": 0, "passes": 0, "early_starts": 0, "checks_failed": 0}

    # ------------------------------------------------------------------ helpers
    def _future_of(self, p: int, n_arrived: int) -> int:
        """Return the position in pool ``p``'s job list of its first job not arrived yet."""
        jobs = self._pool_jobs[p]
        lo, hi = 0, len(jobs)
        while lo < hi:  # bisect on job index (pool job lists are ascending)
            mid = (lo + hi) // 2
            if jobs[mid] < n_arrived:
                lo = mid + 1
            else:
                hi = mid
        return lo

    def _sim(self, p: int, pending: list[int], k_future: int, now: float, horizon: float,
             check: bool) -> tuple[list[int], list[float]]:
        """Run pool ``p``'s virtual clock; return (jobs, VSTs) of the prefix it simulated.

        ``check=False``: pending jobs and future jobs arriving before ``horizon``;
        ``check=True``: on until the first idle point at or after ``horizon``.
        """
        fut = self._pool_jobs[p]

        def seq():
            return itertools.chain(pending, itertools.islice(fut, k_future, None))

        vst = fcfs_pool_starts(
            map(self._submit.__getitem__, seq()), map(self._dur.__getitem__, seq()),
            map(self._gpus.__getitem__, seq()), self._quota[p],
            now=now, busy=[c for c in self._charges[p] if c[0] > now],
            horizon=math.inf if check else horizon, stop_when_idle=check, idle_after=horizon,
        )
        return list(itertools.islice(seq(), len(vst))), vst

    def _charged_free(self, q: int, now: float) -> int:
        return self._quota[q] - sum(g for e, g in self._charges[q] if e > now)

    # ------------------------------------------------------------------ decide
    def decide(self, view) -> list[Start]:
        """Return the jobs to start now (Figure 6), keeping every job within its FCFS start."""
        now = view.now
        self.stats["calls"] += 1
        P = view.n_pools
        for q in range(P):
            if self._charges[q]:
                self._charges[q] = [c for c in self._charges[q] if c[0] > now]
        pend = [list(view.pending(p)) for p in range(P)]
        n_arr = view.n_arrived
        if not any(pend):
            self._wakeup = None
            return []
        dur, gpus, quota = self._dur, self._gpus, self._quota
        horizon = now + max(dur[j] for pl in pend for j in pl)
        kfut = [self._future_of(p, n_arr) for p in range(P)]
        vsts: list[tuple[list[int], list[float]]] = [
            self._sim(p, pend[p], kfut[p], now, horizon, check=False) for p in range(P)
        ]
        run = view.running()
        ends = (run.start + self._trace.duration[run.job]).tolist()
        run_ends = list(zip(ends, run.num_gpus.tolist(), strict=True))
        free = view.free_gpus
        ded = view.used_dedicated.tolist()
        starts: list[Start] = []
        while True:
            self.stats["passes"] += 1
            order = sorted(
                (v, j) for p in range(P) for j, v in zip(*vsts[p], strict=True)
            )
            last_pending = max((i for i, (_, j) in enumerate(order) if j < n_arr), default=-1)
            plan = ResourcePlan()
            if run_ends:
                plan.add_busy(np.array([e for e, _ in run_ends]), np.array([g for _, g in run_ends]),
                              now)
            chosen = None
            for v, j in order[: last_pending + 1]:
                g, d = gpus[j], dur[j]
                if j < n_arr and g <= free and plan.max_reservation(now, d) + g <= self._C:
                    ok = self._try_charge(j, v, now, pend, kfut, horizon, vsts)
                    if ok:
                        chosen = j
                        break
                plan.reserve(g, v, d)
            if chosen is None:
                break
            j = chosen
            p, g = self._pool[j], gpus[j]
            pend[p].remove(j)
            free -= g
            run_ends.append((now + dur[j], g))
            if ded[p] + g <= quota[p]:
                ded[p] += g
                starts.append(Start(j, False))
            else:
                starts.append(Start(j, True))
            if not free:
                break
        ahead = [v for p in range(P) for v in vsts[p][1] if v > now]
        self._wakeup = min(ahead) if ahead else None
        return starts

    def _try_charge(self, j: int, v: float, now: float, pend: list[list[int]], kfut: list[int],
                    horizon: float, vsts: list) -> bool:
        """Charge job ``j`` (starting now) to quotas if no job's VST passes its F; update VSTs."""
        p, g, d = self._pool[j], self._gpus[j], self._dur[j]
        end = now + d
        own_free = self._charged_free(p, now)
        if v <= now + _EPS and own_free >= g:
            # on time, on its own quota: every virtual clock stays as it was
            self._charges[p].append((end, g))
            jobs, vs = vsts[p]
            i = jobs.index(j)
            vsts[p] = (jobs[:i] + jobs[i + 1:], vs[:i] + vs[i + 1:])
            return True
        self.stats["early_starts"] += 1
        P = len(self._quota)
        free_of = {q: self._charged_free(q, now) for q in range(P)}
        lenders = sorted((q for q in range(P) if q != p and free_of[q] > 0),
                         key=lambda q: (-free_of[q], q))
        for own_first in (True, False):
            shares: dict[int, int] = {}
            need = g
            seq = ([p] + lenders) if own_first else (lenders + [p])
            for q in seq:
                take = min(need, max(free_of[q], 0))
                if take > 0:
                    shares[q] = take
                    need -= take
                if need == 0:
                    break
            if need > 0:
                return False
            # Tentatively charge and re-run the affected virtual clocks.
            for q, s in shares.items():
                self._charges[q].append((end, s))
            pend_p = [k for k in pend[p] if k != j]
            affected = set(shares) | {p}
            new = {}
            ok = True
            for q in affected:
                jobs_q = pend_p if q == p else pend[q]
                jobs, vs = self._sim(q, jobs_q, kfut[q], now, horizon, check=True)
                F = self._F
                if any(x > F[k] + _EPS for k, x in zip(jobs, vs, strict=True)):
                    ok = False
                    break
                # keep only the lookahead part for ordering
                cut = len(jobs)
                while cut and jobs[cut - 1] >= 0 and self._submit[jobs[cut - 1]] >= horizon:
                    cut -= 1
                new[q] = (jobs[:cut], vs[:cut])
            if ok:
                for q, val in new.items():
                    vsts[q] = val
                return True
            for q, s in shares.items():
                self._charges[q].remove((end, s))
            self.stats["checks_failed"] += 1
        return False

    def next_wakeup(self, now: float) -> float | None:
        """Return the smallest virtual start time after ``now`` (s), or None."""
        w = self._wakeup
        return w if w is not None and w > now else None


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1000, 5000), cap=st.integers(1, 300))
def test_long_clock_runs_match_a_plain_fcfs(seed, n, cap):
    """A pool run over thousands of jobs: the starts and free GPUs of a plain heapq FCFS,
    with GPUs held at the start, wide pools (many jobs held at once) and narrow ones."""
    import heapq

    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0, n * 50.0, n))
    dur = rng.uniform(1, 20_000, n)
    gpus = np.minimum(rng.choice([1, 1, 2, 4, 8], n), cap)
    busy = [(float(e), int(g)) for e, g in zip(rng.uniform(0, 5_000, 3),
                                                 np.minimum([1, 2, 1], cap), strict=True)]
    rem: list[int] = []
    got = fcfs_pool_starts(submit, dur, gpus, cap, busy=busy, rem=rem)
    heap, held, t_prev, want, want_rem = sorted(busy), sum(g for _, g in busy), 0.0, [], []
    for s, d, g in zip(submit.tolist(), dur.tolist(), gpus.tolist(), strict=True):
        t = max(s, t_prev)
        while heap and heap[0][0] <= t:
            held -= heapq.heappop(heap)[1]
        while cap - held < g:
            e, gg = heapq.heappop(heap)
            held -= gg
            t = max(t, e)
            while heap and heap[0][0] <= t:
                held -= heapq.heappop(heap)[1]
        heapq.heappush(heap, (t + d, g))
        held += g
        want.append(t)
        want_rem.append(cap - held)
        t_prev = t
    assert got == want and rem == want_rem


def test_fcfs_pool_starts_early_stops():
    """Pool of 2 GPUs, four 1-GPU jobs of 10 s at t=0: starts 0, 0, 10, 10."""
    s, d, g = [0.0] * 4, [10.0] * 4, [1] * 4
    assert fcfs_pool_starts(s, d, g, 2) == [0.0, 0.0, 10.0, 10.0]
    # until: stop after the first start at or after 5 s, but never within the first `keep` jobs
    assert fcfs_pool_starts(s, d, g, 2, until=5.0) == [0.0, 0.0, 10.0]
    assert fcfs_pool_starts(s, d, g, 2, until=0.0, keep=2) == [0.0, 0.0, 10.0]
    # deadline: stop after the first job later than its deadline
    assert fcfs_pool_starts(s, d, g, 2, deadline=[0.0, 0.0, 9.0, 10.0]) == [0.0, 0.0, 10.0]
    assert fcfs_pool_starts(s, d, g, 2, deadline=[0.0, 0.0, 10.0, 10.0]) == [0.0, 0.0, 10.0, 10.0]
    # a job wider than the pool: inf, and the deadline stop fires on it
    assert fcfs_pool_starts(s[:2], d[:2], [3, 1], 2, deadline=[1e9, 1e9]) == [math.inf]


def test_fcfs_pool_starts_reports_free_gpus_after_each_start():
    """2 GPUs, one busy until 5: a 1-GPU job at 0 leaves 0 free; a 2-GPU job waits to 10."""
    rem: list[int] = []
    got = fcfs_pool_starts([0.0, 0.0, 0.0], [10.0, 10.0, 1.0], [1, 2, 3], 2,
                           busy=[(5.0, 1)], rem=rem)
    assert got == [0.0, 10.0, math.inf] and rem == [0, 0, -1]


# ----------------------------------------------------------------------------- on buddy cells
# SIA_VC on cells: the simulator's placer stage places its starts, and a start it refuses (no
# cell fits: fragmentation) is undone in the policy (``SiaVCPolicy.refused``).


def fragmented_pool() -> pl.DataFrame:
    """One pool of 8 GPUs (one server), as in test_placer_stage: at t=10 six GPUs are free but
    no aligned 4-GPU cell, so h (4 GPUs, VST 10) fits by count, not by cells, until p ends at
    50; k (1 GPU, arrived at 6) fits both."""
    return table([("p", "a", 0.0, 50.0, 1), ("q", "a", 0.0, 10.0, 1), ("r", "a", 0.0, 10.0, 2),
                  ("s", "a", 0.0, 100.0, 1), ("h", "a", 5.0, 20.0, 4), ("k", "a", 6.0, 20.0, 1)])


class RefuseFirstOnce(Cluster):
    """A tracked fungible cluster whose placer stage refuses each batch's first start the first
    time that job is asked for."""

    def __init__(self, quota):
        super().__init__(quota, track_gpus=True)
        self.refused_once: set[int] = set()

    def place_batch(self, starts):
        out = {job: None for job, _, _, _ in starts}  # None: the cluster picks the GPUs
        if starts[0][0] not in self.refused_once:
            self.refused_once.add(starts[0][0])
            del out[starts[0][0]]
        return out


class ReferenceOnCells(ReferenceSiaVC):
    """The slow reference (every clock re-run at every decision) with the plainest possible
    ``refused``: take back the refused jobs' charges and re-run every clock for the wake-up.
    Its only state across decisions is the charges (and the wake-up), so this is obviously
    "as if the start had not happened"."""

    def reset(self, trace, cluster) -> None:
        super().reset(trace, cluster)
        self._charged: dict[int, list[tuple[int, tuple[float, int]]]] = {}
        self._last: tuple | None = None

    def _try_charge(self, j, v, now, pend, kfut, horizon, vsts) -> bool:
        before = [len(c) for c in self._charges]
        ok = super()._try_charge(j, v, now, pend, kfut, horizon, vsts)
        if ok:  # a success only appends charges
            self._charged[j] = [(q, c) for q, cs in enumerate(self._charges)
                                for c in cs[before[q]:]]
        return ok

    def decide(self, view):
        self._charged = {}
        out = super().decide(view)
        self._last = (view, {s.job for s in out})
        return out

    def refused(self, jobs) -> None:
        view, started = self._last
        for j in jobs:
            for q, c in self._charged.pop(j):
                self._charges[q].remove(c)
            started.discard(j)
        now, P = view.now, view.n_pools
        pend = [[j for j in view.pending(p) if j not in started] for p in range(P)]
        if not any(pend):
            self._wakeup = None
            return
        horizon = now + max(self._dur[j] for pl_ in pend for j in pl_)
        ahead = [v for p in range(P)
                 for v in self._sim(p, pend[p], self._future_of(p, view.n_arrived), now,
                                    horizon, check=False)[1] if v > now]
        self._wakeup = min(ahead) if ahead else None


class CheckedRunning(SiaVCPolicy):
    """Checks at every decision that the running jobs the policy keeps from its own starts
    (ends, GPUs) are the simulator's running jobs, ends taken as start + duration, but those
    over by now (which a pass counts nowhere); and, before and after it, that each pool's
    charges as arrays (kept until they change) are its charges' list."""

    def _check_charge_arrays(self) -> None:
        for p, charges in enumerate(self._charges):
            ends, gpus = self._charge_arrays(p)
            assert list(zip(ends.tolist(), gpus.tolist(), strict=True)) == charges

    def refused(self, jobs) -> None:
        super().refused(jobs)
        self._check_charge_arrays()

    def decide(self, view):
        self._check_charge_arrays()
        out = self._decide_checked(view)
        self._check_charge_arrays()
        return out

    def _decide_checked(self, view):
        run = view.running()
        now = view.now
        want = sorted(zip((run.start + self._trace.duration[run.job]).tolist(),
                          run.num_gpus.tolist(), strict=True))
        ends, gpus = self._running(now)
        assert sorted(zip(ends.tolist(), gpus.tolist(), strict=True)) == [
            x for x in want if x[0] > now]
        self.checked_running = getattr(self, "checked_running", 0) + 1
        return super().decide(view)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 70), n_pools=st.integers(1, 4))
def test_the_running_jobs_kept_by_the_policy_are_the_simulators(seed, n, n_pools):
    """On busy random tables: at every decision, the same running jobs as the view's; and the
    decisions stay the reference's."""
    pol = _assert_equals_reference(*_busy_table(seed, n, n_pools), CheckedRunning())
    assert pol.checked_running == pol.stats["calls"]


class CheckedRefusals(CheckedRunning):
    """Checks after every ``refused`` that each pool's cached clock equals a plain re-run of it
    from the policy's state (charges and pending jobs, with the refused ones pending again),
    and that the charges held are exactly those of the jobs still running or starting (and,
    at every decision, the running jobs: see ``CheckedRunning``)."""

    def reset(self, trace, cluster) -> None:
        super().reset(trace, cluster)
        self.refusals: list[tuple[float, list[int]]] = []

    def refused(self, jobs) -> None:
        super().refused(jobs)
        now, n_arr, _, reach, pend = self._ctx
        self.refusals.append((now, sorted(jobs)))
        for j in jobs:
            assert j in pend[self._pool[j]] and j not in self._charged
        for p in range(len(pend)):
            k = int(np.searchsorted(self._pool_jobs_np[p], n_arr))
            jobs_p, vs, rem = self._sim(p, pend[p], k, now, until=reach)
            cj, cv, cr = self._vc[p]
            n = min(cj.shape[0], jobs_p.shape[0])  # a cut clock is a prefix of the same run
            assert n >= len(pend[p])
            assert np.array_equal(cj[:n], jobs_p[:n]) and np.array_equal(cv[:n], vs[:n])
            assert np.array_equal(cr[:n], rem[:n])
            assert self._held[p] == sum(g for e, g in self._charges[p] if e > now)


def _replay_cells(jobs: pl.DataFrame, pools: pl.DataFrame, policy, **kw):
    return simulate_cells(jobs, pools, policy, LocalityConfig(**kw), check_invariants=True)


def test_a_start_without_a_cell_is_undone_and_the_job_starts_later():
    """The fragmented pool of the placer tests: h (4 GPUs) has its VST at 10, when six GPUs
    are free but no aligned 4-GPU cell. SIA_VC starts it, the placer refuses it, the policy
    undoes the start (h is pending again, its clock re-run) and h starts when p's end frees
    the cell at 50. k (1 GPU) fits by count and cells and runs early; every job finishes."""
    pol = CheckedRefusals()
    res, summary = simulate_cells(fragmented_pool(), make_pools({"a": 8}), pol,
                                  LocalityConfig(), check_invariants=True,
                                  record_placements=True)
    start = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert start == {"p": 0.0, "q": 0.0, "r": 0.0, "s": 0.0, "h": 50.0, "k": 6.0}
    assert res["end_time"].is_not_nan().all()
    assert pol.refusals and pol.refusals[0] == (10.0, [4])
    assert all(jobs == [4] and 10.0 <= t < 50.0 for t, jobs in pol.refusals)
    assert summary["placements"]["h"] == (0, 1, 2, 3) and summary["frag_refused"] >= 1
    # the same decisions as the plain reference, whose refused() is obviously exact
    ref, _ = simulate_cells(fragmented_pool(), make_pools({"a": 8}), ReferenceOnCells(),
                            LocalityConfig(), check_invariants=True)
    assert res.equals(ref)
    # on fungible GPUs h starts at its VST (Theorem 1 holds there)
    fungible = simulate(fragmented_pool(), make_pools({"a": 8}), SiaVCPolicy())
    assert dict(zip(fungible["job_id"], fungible["start_time"], strict=True))["h"] == 10.0


def test_a_refused_start_that_lent_gpus_gives_the_loan_back():
    """A refused start charged to lenders: every charge goes, the lender's clock is re-run, and
    the rest of the replay is the reference's (which re-runs everything at every decision)."""
    jobs = table([("a0", "A", 0.0, 100.0, 2), ("a1", "A", 1.0, 30.0, 4), ("b0", "B", 0.0, 500.0, 1)])
    trace, _ = build_trace(jobs, make_pools({"A": 4, "B": 4}))
    for policy in (CheckedRefusals(), ReferenceOnCells()):
        cluster = RefuseFirstOnce(trace.quota)  # refuses each batch's first start once
        state = run_trace(trace, cluster, policy, check_invariants=True)
        assert not np.isnan(state.start_time).any()
        if isinstance(policy, CheckedRefusals):
            got = state.start_time.copy()
            assert policy.refusals
            assert policy.stats["early_starts"] >= 1  # a1 borrowed B's idle GPUs
        else:
            assert np.array_equal(got, state.start_time)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 40), n_pools=st.integers(1, 3),
       chain=st.sampled_from([("buddy",), ("buddy", "mcf")]))
def test_siavc_on_cells_equals_the_plain_reference(seed, n, n_pools, chain):
    """Small busy workloads on cells (gangs of 1, 2 and 4 GPUs in 2..8-GPU quotas meet
    fragmentation): the replay completes, every job runs once, no GPU is double-booked (the
    simulator's and the cells' invariant checks), every refusal leaves the caches equal to
    a plain re-run, the decisions are the reference's, and a replay nothing was refused in
    is the fungible one."""
    jobs, pools = _busy_table(seed, n, n_pools)
    pol = CheckedRefusals()
    res, summary = _replay_cells(jobs, pools, pol, chain=chain)
    assert res["start_time"].is_not_nan().all() and res["end_time"].is_not_nan().all()
    assert summary["placed_buddy"] + summary["placed_fallback"] >= jobs.height
    ref, _ = _replay_cells(jobs, pools, ReferenceOnCells(), chain=chain)
    assert res.equals(ref)
    if not pol.refusals:
        assert res.equals(simulate(jobs, pools, SiaVCPolicy()))


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 100_000), n=st.integers(1, 40), n_pools=st.integers(1, 3),
       strict=st.booleans())
def test_on_cells_large_enough_siavc_runs_as_on_fungible_gpus(seed, n, n_pools, strict):
    """Each pool's quota (whole servers) at least twice all its jobs' GPUs: no cell is ever
    short, the placer refuses nothing and SIA_VC's schedule on cells is its fungible one.
    (Cells refuse starts for more than fragmentation: a dedicated start needs a free cell
    among its pool's bound cells, which loans to other pools may hold, and with
    ``strict_buddies`` a loan may not sit next to a pool's cells.)"""
    jobs, pools = _busy_table(seed, n, n_pools)
    need = jobs.group_by("pool").agg(pl.col("num_gpus").sum())
    need = dict(zip(need["pool"], need["num_gpus"], strict=True))
    pools = make_pools({p: 8 * max(1, -(-2 * need.get(p, 1) // 8)) for p in pools["pool"]})
    pol = CheckedRefusals()
    res, summary = _replay_cells(jobs, pools, pol, strict_buddies=strict)
    assert not pol.refusals and summary["refused"] == 0
    assert res.equals(simulate(jobs, pools, SiaVCPolicy()))


def test_the_registry_accepts_siavc_on_cells():
    assert "sia-vc" in policies_with(locality=True)
    assert check_policy("sia-vc", locality=LocalityConfig()).locality
    pol = make_policy("sia-vc", locality=LocalityConfig())
    assert isinstance(pol, SiaVCPolicy)


@pytest.mark.parametrize("chain", [("buddy",), ("buddy", "mcf")])
def test_siavc_replays_a_synthetic_day_on_cells_without_spinning(chain):
    """A refused start is retried only at later decisions (arrivals, completions, VSTs ahead):
    the replay ends, with a number of decisions of the order of the events."""
    jobs, pools = generate_workload("more-wide-jobs", seed=5, days=1.0, num_pools=3)
    pools = pools.select("pool", "quota_gpus")
    pol = CheckedRefusals()
    res, summary = _replay_cells(jobs, pools, pol, chain=chain)
    assert res["start_time"].is_not_nan().all()
    assert summary["frag_refused"] > 0 and pol.refusals
    times = [t for t, _ in pol.refusals]
    assert times == sorted(times) and len(set(times)) == len(times)  # one refusal per instant
    assert pol.stats["calls"] <= 4 * jobs.height
    assert math.isfinite(float(res["end_time"].max()))


def test_a_clock_as_a_reference_without_a_job_by_hand():
    """Clock jobs 3, 5, 8 at 10, 20, 30 s (free 2, 1, 0): without job 5 (position 1) the
    reference is jobs 3, 8 with previous starts NaN and 20 (job 8 keeps job 5's); an order
    starting 3, 8 matches, one starting 3, 5 or shorter than the reference does not."""
    jobs, vs, free = np.array([3, 5, 8]), np.array([10.0, 20.0, 30.0]), np.array([2, 1, 0])
    same, prev, rj, rv, rr = clock_reference(np.array([3, 8, 9]), jobs, vs, free, 1)
    assert same and rj.tolist() == [3, 8] and rv.tolist() == [10.0, 30.0] and rr.tolist() == [2, 0]
    assert np.isnan(prev[0]) and prev[1] == 20.0
    assert not clock_reference(np.array([3, 5, 8]), jobs, vs, free, 1)[0]
    assert not clock_reference(np.array([3]), jobs, vs, free, 1)[0]
    assert starts_with(np.array([3, 5, 8, 9]), jobs) and not starts_with(np.array([3, 5]), jobs)
    assert not starts_with(np.array([3, 6, 8]), jobs) and starts_with(jobs, jobs[:0])
    same, prev, rj, _, _ = clock_reference(np.array([3, 5, 8]), jobs, vs, free, -1)
    assert same and rj.tolist() == [3, 5, 8] and prev[1:].tolist() == [10.0, 20.0]


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 12), data=st.data())
def test_a_clock_as_a_reference_equals_its_slices_joined(n, data):
    """clock_reference equals the plain construction: the clock without position ``skip`` (by
    np.delete), each entry's previous start in the whole clock (the one after the skipped
    entry keeps the skipped one's), and whether the order starts with those jobs."""
    jobs = np.array(sorted(data.draw(st.sets(st.integers(0, 40), min_size=n, max_size=n))),
                    dtype=np.int64)
    vs = np.sort(np.array(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)),
                          dtype=np.float64))
    free = np.array(data.draw(st.lists(st.integers(-1, 4), min_size=n, max_size=n)),
                    dtype=np.int64)
    skip = data.draw(st.integers(-1, n - 1))
    keep = np.ones(n, dtype=bool)
    if skip >= 0:
        keep[skip] = False
    want_prev = np.concatenate(([np.nan], vs[:-1]))[keep] if n else np.empty(0)
    if skip >= 0 and skip + 1 < n:  # the entry after the skipped one keeps its start
        want_prev[skip] = vs[skip]
    order = np.array(data.draw(st.sampled_from([jobs[keep].tolist(),
                                                jobs[keep].tolist() + [99],
                                                jobs[keep].tolist()[:-1],
                                                jobs.tolist()])), dtype=np.int64)
    same, prev, rj, rv, rr = clock_reference(order, jobs, vs, free, skip)
    assert rj.tolist() == jobs[keep].tolist() and rv.tolist() == vs[keep].tolist()
    assert rr.tolist() == free[keep].tolist()
    np.testing.assert_array_equal(prev, want_prev)
    m = int(keep.sum())
    assert same == (m <= order.shape[0] and order[:m].tolist() == jobs[keep].tolist())
    assert starts_with(order, jobs[keep]) == same  # (a lender's reference checks just this)


def test_the_first_start_short_of_a_loan_by_hand():
    """Jobs 0, 1, 2 start at 0, 5, 10 s (durations 20, 3, 1 s; 2, 1, 4 GPUs; deadlines 1, 9,
    11 s), leaving 3, 2, 0 GPUs free: a loan of 3 is first short at job 1 (position 1), none
    late by then, and of the jobs before it job 0 (running to 20 s) still holds its 2 GPUs
    at job 1's deadline; a loan of 1 is short at job 2, and job 1 ended by 11 s; a loan of
    0 never is; a deadline passed before the short job is seen."""
    jobs, vs, free = np.array([0, 1, 2]), np.array([0.0, 5.0, 10.0]), np.array([3, 2, 0])
    dur, gpus = np.array([20.0, 3.0, 1.0]), np.array([2, 1, 4])
    deadline = np.array([1.0, 9.0, 11.0])
    assert first_short(jobs, vs, free, 3, dur, gpus, deadline) == (1, False, 2)
    assert first_short(jobs, vs, free, 1, dur, gpus, deadline) == (2, False, 2)
    assert first_short(jobs, vs, free, 0, dur, gpus, deadline)[0] == -1
    assert first_short(jobs, vs, free, 1, dur, gpus, np.array([1.0, 4.0, 11.0]))[1]


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 10), s=st.integers(0, 5), data=st.data())
def test_the_first_start_short_of_a_loan_equals_the_plain_reading(n, s, data):
    """first_short equals the numpy reading it replaced: the first position left fewer than
    ``s`` free, whether a job up to it is past its deadline, and the GPUs of the earlier
    jobs still running at its job's deadline."""
    ints = st.lists(st.integers(0, 6), min_size=n, max_size=n)
    jobs = np.arange(n, dtype=np.int64)
    vs = np.sort(np.array(data.draw(ints), dtype=np.float64))
    free = np.array(data.draw(ints), dtype=np.int64)
    dur = np.array(data.draw(ints), dtype=np.float64)
    gpus = np.array(data.draw(ints), dtype=np.int64)
    deadline = np.array(data.draw(ints), dtype=np.float64)
    k, late, held = first_short(jobs, vs, free, s, dur, gpus, deadline)
    short = np.flatnonzero(free < s)
    if not short.size:
        assert k == -1
        return
    want = int(short[0])
    tau = deadline[jobs[want]]
    head = jobs[: want + 1]
    assert k == want
    assert late == bool((vs[: want + 1] > deadline[head]).any())
    assert held == int(gpus[head[:want]][vs[:want] + dur[head[:want]] > tau].sum())


def test_the_state_a_clock_resumes_from_by_hand():
    """Jobs 0, 1, 2 start at 0, 5, 10 s (durations 20, 3, 1 s; 2, 1, 4 GPUs) with one charge
    of 3 GPUs to 7 s: resumed at job 2 (after the start at 5 s), job 0 (to 20 s), job 1 (to
    8 s) and the charge (to 7 s) are held; resumed at job 0, only the charge; with job 1
    past its deadline (4 s) the resume stops there."""
    jobs, vs = np.array([0, 1, 2]), np.array([0.0, 5.0, 10.0])
    dur, gpus = np.array([20.0, 3.0, 1.0]), np.array([2, 1, 4])
    ce, cg = np.array([7.0]), np.array([3])
    late, be, bg = resume_state(jobs, vs, 2, ce, cg, dur, gpus, np.full(3, 99.0))
    assert late == -1 and be.tolist() == [7.0, 20.0, 8.0] and bg.tolist() == [3, 2, 1]
    late, be, bg = resume_state(jobs, vs, 0, ce, cg, dur, gpus, np.full(3, 99.0))
    assert late == -1 and be.tolist() == [7.0] and bg.tolist() == [3]
    assert resume_state(jobs, vs, 2, ce, cg, dur, gpus, np.array([9.0, 4.0, 9.0]))[0] == 1


@settings(max_examples=300, deadline=None)
@given(n=st.integers(0, 10), data=st.data())
def test_the_state_a_clock_resumes_from_equals_the_plain_reading(n, data):
    """resume_state equals the numpy reading it replaced: the first late job before the
    resume point, else the charges ending after the last start before it and the earlier
    jobs still running then, in that order."""
    ints = st.lists(st.integers(0, 8), min_size=n, max_size=n)
    jobs = np.arange(n, dtype=np.int64)
    vs = np.sort(np.array(data.draw(ints), dtype=np.float64))
    dur = np.array(data.draw(ints), dtype=np.float64)
    gpus = np.array(data.draw(ints), dtype=np.int64)
    deadline = np.array(data.draw(ints), dtype=np.float64) + 4.0
    k = data.draw(st.integers(0, 3))
    ce = np.array(data.draw(st.lists(st.integers(0, 12), min_size=k, max_size=k)), dtype=float)
    cg = np.arange(1, k + 1, dtype=np.int64)
    i = data.draw(st.integers(0, n))
    late, be, bg = resume_state(jobs, vs, i, ce, cg, dur, gpus, deadline)
    lates = np.flatnonzero(vs[:i] > deadline[jobs[:i]])
    if lates.size:
        assert late == int(lates[0])
        return
    t0 = vs[i - 1] if i else -np.inf
    ends = vs[:i] + dur[jobs[:i]]
    assert late == -1
    assert be.tolist() == ce[ce > t0].tolist() + ends[ends > t0].tolist()
    assert bg.tolist() == cg[ce > t0].tolist() + gpus[jobs[:i]][ends > t0].tolist()


def _plain_resume(cj, cv, cr, i, ce, cg, pj, psub, k_future, until, sub, dur, gpus, deadline,
                  cap, now, n_pend):
    """The resumed clock built step by step as the policy did before resume_clock: the state
    (resume_state), the order cut and joined, the clock against the cached one, the joins."""
    late, be, bg = resume_state(cj, cv, i, ce, cg, dur, gpus, deadline)
    if late >= 0:
        return cj[: late + 1], cv[: late + 1], cr[: late + 1]
    t0 = float(cv[i - 1]) if i else now
    tail = max(k_future, int(pj.searchsorted(cj[-1], side="right")))
    stop = tail + int(psub[tail:].searchsorted(until, side="left")) + 1
    order = np.concatenate((cj[i + 1:], pj[tail:stop]))
    m = min(order.shape[0], cj.shape[0] - i - 1)
    vst, rem, met = fcfs_clock_against(
        order, sub, dur, gpus, cap, ref_prev=cv[i:i + m], ref_vst=cv[i + 1:i + 1 + m],
        changed_until=float(cv[i] + dur[cj[i]]), now=t0, busy_end=be, busy_gpus=bg,
        until=until, keep=n_pend - i - 1, deadline=deadline)
    if met >= 0:
        k = i + 1 + met
        return (np.concatenate((cj[:i], order[:met], cj[k:])),
                np.concatenate((cv[:i], vst, cv[k:])), np.concatenate((cr[:i], rem, cr[k:])))
    return (np.concatenate((cj[:i], order[: vst.shape[0]])), np.concatenate((cv[:i], vst)),
            np.concatenate((cr[:i], rem)))


def _resume_case(sub, dur, gpus, cap, n_c, n_pend, ce, cg, now, deadline):
    """A one-pool trace's cached clock over its first ``n_c`` jobs (the first ``n_pend``
    pending) run from ``now`` with charges (``ce``, ``cg``): (jobs, VSTs, free GPUs)."""
    cj = np.arange(n_c, dtype=np.int64)
    cv, cr = fcfs_clock(cj, sub, dur, gpus, cap, now=now, busy_end=ce, busy_gpus=cg,
                        keep=n_pend, deadline=None)
    return cj[: cv.shape[0]], cv, cr


def test_a_clock_resumed_without_a_job_by_hand():
    """Pool of 2 GPUs, jobs 0-3 (1, 2, 1, 1 GPUs; 10, 10, 5, 5 s; all at 0 s): cached VSTs 0,
    10, 20, 20. Without job 1 (at 10 s), jobs 2 and 3 start at 0 s (2 from the state after
    job 0's start at 0 s) and the rest is re-run: 2 at 0, 3 at 5."""
    sub = np.zeros(4)
    dur = np.array([10.0, 10.0, 5.0, 5.0])
    gpus = np.array([1, 2, 1, 1], dtype=np.int64)
    cj, cv, cr = _resume_case(sub, dur, gpus, 2, 4, 4, np.empty(0), np.empty(0, np.int64), 0.0,
                              None)
    assert cv.tolist() == [0.0, 10.0, 20.0, 20.0]
    dl = np.full(4, 99.0)
    j, v, r = resume_clock(cj, cv, cr, 1, np.empty(0), np.empty(0, np.int64), cj, sub, 4,
                           np.inf, sub, dur, gpus, dl, 2, 0.0, 4)
    assert j.tolist() == [0, 2, 3] and v.tolist() == [0.0, 0.0, 5.0] and r.tolist() == [1, 0, 0]
    late = np.array([99.0, 99.0, 99.0, 1.0])  # job 3 late: the resume stops there
    j, v, _ = resume_clock(cj, cv, cr, 1, np.empty(0), np.empty(0, np.int64), cj, sub, 4,
                           np.inf, sub, dur, gpus, late, 2, 0.0, 4)
    assert j.tolist() == [0, 2, 3] and v[-1] > late[3]


def _draw_clock_case(n, data):
    """Draw a pool of ``n`` jobs and its cached clock for the resume / guard re-run properties:
    (cap, the integer-list strategy, submits, durations, GPUs, pending count, charge ends and
    GPUs, now, and the cached clock's jobs, VSTs and retries from :func:`_resume_case`)."""
    cap = data.draw(st.integers(1, 4))
    ints = st.lists(st.integers(0, 6), min_size=n, max_size=n)
    sub = np.sort(np.array(data.draw(ints), dtype=np.float64))
    dur = np.array(data.draw(ints), dtype=np.float64) + data.draw(st.sampled_from([0.0, 0.5]))
    gpus = np.array(data.draw(st.lists(st.integers(0, cap), min_size=n, max_size=n)),
                    dtype=np.int64)
    n_c = data.draw(st.integers(1, n))
    n_pend = data.draw(st.integers(0, n_c))
    k = data.draw(st.integers(0, 2))
    ce = np.array(data.draw(st.lists(st.integers(1, 9), min_size=k, max_size=k)), dtype=float)
    cg = np.array(data.draw(st.lists(st.integers(0, cap), min_size=k, max_size=k)),
                  dtype=np.int64)
    now = float(data.draw(st.integers(0, 3)))
    cj, cv, cr = _resume_case(sub, dur, gpus, cap, n_c, n_pend, ce, cg, now, None)
    return cap, ints, sub, dur, gpus, n_pend, ce, cg, now, cj, cv, cr


@settings(max_examples=400, deadline=None)
@given(n=st.integers(1, 14), data=st.data())
def test_a_clock_resumed_without_a_job_equals_the_plain_construction(n, data):
    """resume_clock equals the steps it replaced (state, cut, join, clock against the cached
    one, joins): jobs, VSTs and free GPUs, with charges, late jobs, a cut past ``until``,
    future jobs past the cached clock, and runs that meet the cached clock."""
    cap, ints, sub, dur, gpus, n_pend, ce, cg, now, cj, cv, cr = _draw_clock_case(n, data)
    if not cj.size or not np.isfinite(cv).all():
        return
    i = data.draw(st.integers(0, cj.shape[0] - 1))
    deadline = np.array(data.draw(ints), dtype=np.float64) + data.draw(
        st.sampled_from([0.0, 5.0, 100.0]))
    until = float(data.draw(st.sampled_from([np.inf, 2.0, 6.0, 12.0])))
    pj = np.arange(n, dtype=np.int64)
    k_future = data.draw(st.integers(n_pend, n))
    args = (cj, cv, cr, i, ce, cg, pj, sub, k_future, until, sub, dur, gpus, deadline, cap, now,
            n_pend)
    for a, b in zip(resume_clock(*args), _plain_resume(*args), strict=True):
        assert a.tolist() == b.tolist()


def _plain_guard(cj, cv, cr, n_pend, without, use_ref, pj, k_future, ahead, ce, cg, extra_end,
                 extra_gpus, sub, dur, gpus, deadline, cap, now, idle_after, changed_until):
    """A guard's re-run built step by step as the policy did before guard_clock: the pending
    jobs but ``without`` cut from the cached clock, the future handed, the reference (the
    clock, or the clock without ``without``, each entry with the start before it in the
    cached clock), the clock against it, run again on the whole future if it used all it was
    handed, and the joins; the charges held (those ending after ``now``, then the extra one
    if it does) listed as the policy did."""
    held = [(e, g) for e, g in zip(ce.tolist(), cg.tolist(), strict=True) if e > now]
    held += [(extra_end, extra_gpus)] if extra_end > now else []
    be = np.array([e for e, _ in held], dtype=np.float64)
    bg = np.array([g for _, g in held], dtype=np.int64)
    if without >= 0:
        w = int(cj[:n_pend].searchsorted(without))
        pending = np.concatenate((cj[:w], cj[w + 1:n_pend]))
    else:
        pending = cj[:n_pend]
    n_fut = pj.shape[0] - k_future
    stop = k_future + max(cj.shape[0] - pending.shape[0] - (without >= 0), 0) + ahead
    retries = 0
    while True:
        order = np.concatenate((pending, pj[k_future:stop]))
        prev = np.r_[np.nan, cv[:-1]]
        ref = None
        if use_ref and without < 0:
            if order[: cj.shape[0]].tolist() == cj.tolist():
                ref = (prev, cv, changed_until, cj, cv, cr)
        elif use_ref:
            i = int(cj.searchsorted(without))
            if i < cj.shape[0] and cj[i] == without:
                rj = np.delete(cj, i)
                if order[: rj.shape[0]].tolist() == rj.tolist():
                    ref = (np.delete(prev, i), np.delete(cv, i),
                           max(changed_until, float(cv[i] + dur[without])), rj, np.delete(cv, i),
                           np.delete(cr, i))
        vst, rem, met = fcfs_clock_against(
            order, sub, dur, gpus, cap, ref_prev=None if ref is None else ref[0],
            ref_vst=None if ref is None else ref[1],
            changed_until=-math.inf if ref is None else ref[2], now=now, busy_end=be,
            busy_gpus=bg, stop_when_idle=True, idle_after=idle_after, keep=pending.shape[0],
            deadline=deadline)
        if not (met < 0 and vst.shape[0] == order.shape[0] and stop is not None
                and stop - k_future < n_fut):
            break
        retries += 1
        stop = None
    if met < 0:
        return order[: vst.shape[0]], vst, rem, retries
    return (np.concatenate((order[:met], ref[3][met:])), np.concatenate((vst, ref[4][met:])),
            np.concatenate((rem, ref[5][met:])), retries)


def test_a_guards_rerun_by_hand():
    """Pool of 2 GPUs, jobs 0-3 (1 GPU each; 10, 10, 5, 5 s; all at 0 s), cached VSTs 0, 0,
    10, 10, all pending. Job 3 starts now (0 s) on 1 GPU charged to the pool to 5 s: without
    it, job 0 starts at 0, job 1 at 5 (after the charge), job 2 at 10 (no future job: no
    retry). Job 1's deadline 4 s: the re-run stops there, late."""
    sub = np.zeros(4)
    dur = np.array([10.0, 10.0, 5.0, 5.0])
    gpus = np.ones(4, dtype=np.int64)
    cj, cv, cr = _resume_case(sub, dur, gpus, 2, 4, 4, np.empty(0), np.empty(0, np.int64), 0.0,
                              None)
    assert cv.tolist() == [0.0, 0.0, 10.0, 10.0]
    dl = np.full(4, 99.0)
    args = (cj, cv, cr, 4, 3, True, cj, 4, 256, np.array([5.0]), np.array([1]), -np.inf, 0,
            sub, dur, gpus)
    j, v, r, retries = guard_clock(*args, dl, 2, 0.0, np.inf, 5.0)
    assert j.tolist() == [0, 1, 2] and v.tolist() == [0.0, 5.0, 10.0] and retries == 0
    j, v, _, _ = guard_clock(*args, np.array([99.0, 4.0, 99.0, 99.0]), 2, 0.0, np.inf, 5.0)
    assert j.tolist() == [0, 1] and v.tolist() == [0.0, 5.0]


@settings(max_examples=500, deadline=None)
@given(n=st.integers(1, 14), data=st.data())
def test_a_guards_rerun_equals_the_plain_construction(n, data):
    """guard_clock equals the steps it replaced (see _plain_guard): jobs, VSTs, free GPUs and
    retries, for a lender's re-run and the own pool's (without the starting job), with and
    without the reference, few or many future jobs handed, late jobs and idle stops."""
    cap, ints, sub, dur, gpus, n_pend, ce, cg, now, cj, cv, cr = _draw_clock_case(n, data)
    if cj.shape[0] < n_pend or not np.isfinite(cv).all():
        return
    without = -1
    if n_pend and data.draw(st.booleans()):
        without = int(cj[data.draw(st.integers(0, n_pend - 1))])
    end = now + data.draw(st.integers(0, 8))  # the tentative charge (none: -inf)
    extra = (float(end), data.draw(st.integers(1, cap))) if data.draw(st.booleans()) else (
        -np.inf, 0)
    ce, cg = np.r_[ce, now - 1.0], np.r_[cg, 1]  # (a charge over by now: not held)
    deadline = np.array(data.draw(ints), dtype=np.float64) + data.draw(
        st.sampled_from([0.0, 5.0, 100.0]))
    idle_after = float(data.draw(st.sampled_from([-np.inf, 3.0, np.inf])))
    args = (cj, cv, cr, n_pend, without, data.draw(st.booleans()), np.arange(n, dtype=np.int64),
            n_pend, data.draw(st.sampled_from([0, 1, 3, 256])), ce, cg.astype(np.int64), *extra,
            sub, dur, gpus, deadline, cap, now, idle_after, float(end))
    got, want = guard_clock(*args), _plain_guard(*args)
    for a, b in zip(got[:3], want[:3], strict=True):
        assert a.tolist() == b.tolist()
    assert got[3] == want[3]
