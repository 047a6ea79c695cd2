"""The event loop: hand-checked timing, validation of starts, ticks, wake-ups, invariants."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError, TraceError
from sia.data.schema import make_pools, validate
from sia.scheduler.core.cluster import Cluster, PlacementError
from sia.scheduler.core.simulator import PolicyError, build_trace, simulate
from sia.scheduler.core.view import Reason, Start
from sia.scheduler.registry import POLICY_NAMES, make_policy


def table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus) tuples, via the contract."""
    raw = pl.DataFrame(
        rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"], orient="row"
    )
    return validate(raw)[0]


def by_id(result: pl.DataFrame) -> dict[str, dict]:
    """Result rows keyed by job id."""
    return {r["job_id"]: r for r in result.iter_rows(named=True)}


class Recorder:
    """A FCFS that records every call (time, reason, history the view shows)."""

    name = "recorder"

    def __init__(self, uses_ticks: bool = True, wake_at: float | None = None):
        self.uses_ticks = uses_ticks
        self.wake_at = wake_at
        self.calls: list[tuple[float, Reason, int, int]] = []
        self.history: list[tuple[float, list, list]] = []

    def reset(self, trace, cluster):
        self.fcfs = make_policy("fcfs")
        self.fcfs.reset(trace, cluster)
        self.calls.clear()

    def decide(self, view):
        self.calls.append((view.now, view.reason, view.free_gpus, view.n_arrived))
        self.history.append(
            (view.now, view.arrivals(0)[0].tolist(), view.completions(0).tolist())
        )
        return self.fcfs.decide(view)

    def next_wakeup(self, now):
        if self.wake_at is not None and now < self.wake_at:
            return self.wake_at
        return None


def test_result_rows_follow_input_order_and_times_are_exact():
    jobs = table([("b", "p", 5.0, 10.0, 1), ("a", "p", 0.0, 3.0, 2)])
    shuffled = jobs.reverse()
    pools = make_pools({"p": 2})
    res = simulate(shuffled, pools, make_policy("fcfs"), check_invariants=True)
    assert res["job_id"].to_list() == shuffled["job_id"].to_list()
    rows = by_id(res)
    assert (rows["a"]["start_time"], rows["a"]["end_time"]) == (0.0, 3.0)
    assert (rows["b"]["start_time"], rows["b"]["end_time"]) == (5.0, 15.0)
    assert res.columns[:8] == ["job_id", "pool", "submit_time", "duration", "num_gpus",
                               "start_time", "end_time", "opportunistic"]


def test_speedup_divides_durations_not_submit_times():
    jobs = table([("a", "p", 0.0, 100.0, 1), ("b", "p", 1.0, 50.0, 1)])
    res = by_id(simulate(jobs, make_pools({"p": 1}), make_policy("fcfs"), speedup=10.0))
    assert res["a"]["duration"] == 10.0 and res["a"]["end_time"] == 10.0
    assert res["b"]["submit_time"] == 1.0
    assert (res["b"]["start_time"], res["b"]["end_time"]) == (10.0, 15.0)


def test_completion_frees_gpus_for_an_arrival_at_the_same_instant():
    jobs = table([("a", "p", 0.0, 5.0, 2), ("b", "p", 5.0, 1.0, 2)])
    res = by_id(simulate(jobs, make_pools({"p": 2}), make_policy("fcfs"), check_invariants=True))
    assert res["b"]["start_time"] == 5.0


def test_job_wider_than_cluster_is_an_upfront_error():
    jobs = table([("big", "p", 0.0, 5.0, 9)])
    with pytest.raises(TraceError, match="'big' needs 9 GPUs but the whole cluster has 8"):
        simulate(jobs, make_pools({"p": 4, "q": 4}), make_policy("fcfs"))


def test_pool_without_quota_is_an_error():
    jobs = table([("a", "nowhere", 0.0, 5.0, 1)])
    with pytest.raises(TraceError, match="no quota for pool"):
        simulate(jobs, make_pools({"p": 4}), make_policy("fcfs"))


def test_bad_speedup_and_tick_are_config_errors():
    jobs = table([("a", "p", 0.0, 5.0, 1)])
    with pytest.raises(ConfigError, match="speedup"):
        simulate(jobs, make_pools({"p": 1}), make_policy("fcfs"), speedup=0.0)
    with pytest.raises(ConfigError, match="tick_s"):
        simulate(jobs, make_pools({"p": 1}), make_policy("fcfs"), tick_s=-1.0)


class Scripted:
    """Starts exactly what a script says at the first call at or after each time."""

    name = "scripted"
    uses_ticks = False

    def __init__(self, script):
        self.script = list(script)

    def reset(self, trace, cluster):
        self.todo = list(self.script)

    def decide(self, view):
        out = []
        while self.todo and self.todo[0][0] <= view.now:
            out.extend(self.todo.pop(0)[1])
        return out


@pytest.mark.parametrize(
    ("script", "message"),
    [
        ([(0.0, [Start(1, False)])], r"policy scripted at t=0.000s started job 'b' \(index 1\) which is not yet arrived"),
        ([(0.0, [Start(0), Start(0)])], "which is already running"),
        ([(0.0, [Start(7)])], "not a job index"),
        ([(0.0, [Start(0, False)]), (1.0, [Start(1, False)])],
         r"started job 'b' \(index 1\) \(2 GPUs\) as dedicated but pool 'p' already uses 2 of its quota 3"),
        ([(0.0, [Start(0, True)]), (1.0, [Start(1, True), Start(2, True)])],
         r"started job 'c' \(index 2\) needing 3 GPUs but only 2 are free"),
    ],
)
def test_invalid_starts_are_reported_with_policy_time_and_job(script, message):
    jobs = table([("a", "p", 0.0, 10.0, 2), ("b", "p", 1.0, 10.0, 2), ("c", "q", 1.0, 10.0, 3)])
    pools = make_pools({"p": 3, "q": 3})
    with pytest.raises(PolicyError, match=message):
        simulate(jobs, pools, Scripted(script))


def test_a_policy_that_never_starts_anything_is_a_stall_error():
    jobs = table([("a", "p", 0.0, 10.0, 1)])
    with pytest.raises(PolicyError, match="stalled.*'a'"):
        simulate(jobs, make_pools({"p": 1}), Scripted([]))


def test_ticks_fall_on_the_grid_only_while_jobs_pend_and_idle_stretches_are_skipped():
    # a runs [0, 1000); b pends from 10 to 1000; then nothing until c at 100000.
    jobs = table([("a", "p", 0.0, 1000.0, 1), ("b", "p", 10.0, 5.0, 1),
                  ("c", "p", 100_000.0, 5.0, 1)])
    rec = Recorder(uses_ticks=True)
    simulate(jobs, make_pools({"p": 1}), rec, tick_s=300.0, check_invariants=True)
    ticks = [t for t, r, _, _ in rec.calls if r & Reason.TICK]
    assert ticks == [300.0, 600.0, 900.0]
    times = [t for t, _, _, _ in rec.calls]
    assert times == [0.0, 10.0, 300.0, 600.0, 900.0, 1000.0, 1005.0, 100_000.0, 100_005.0]
    assert rec.calls[1][1] == Reason.ARRIVAL
    assert rec.calls[5][1] == Reason.COMPLETION


def test_policies_without_ticks_get_no_ticks():
    jobs = table([("a", "p", 0.0, 1000.0, 1), ("b", "p", 10.0, 5.0, 1)])
    rec = Recorder(uses_ticks=False)
    simulate(jobs, make_pools({"p": 1}), rec, tick_s=300.0)
    assert [t for t, _, _, _ in rec.calls] == [0.0, 10.0, 1000.0, 1005.0]


def test_wakeup_is_delivered_and_flagged():
    jobs = table([("a", "p", 0.0, 10.0, 1)])
    rec = Recorder(uses_ticks=False, wake_at=3.5)
    simulate(jobs, make_pools({"p": 1}), rec)
    assert (3.5, Reason.WAKEUP) in [(t, r) for t, r, _, _ in rec.calls]


def test_view_history_shows_arrivals_and_completions_so_far():
    jobs = table([("a", "p", 0.0, 4.0, 1), ("b", "p", 1.0, 4.0, 1), ("c", "p", 2.0, 1.0, 1)])
    rec = Recorder(uses_ticks=False)
    simulate(jobs, make_pools({"p": 1}), rec)
    hist = {t: (arr, comp) for t, arr, comp in rec.history}
    assert hist[1.0] == ([0.0, 1.0], [])
    assert hist[4.0] == ([0.0, 1.0, 2.0], [4.0])
    assert hist[8.0] == ([0.0, 1.0, 2.0], [4.0, 8.0])


def test_view_reports_usage_pending_and_running():
    seen = {}

    class Probe:
        name = "probe"
        uses_ticks = False

        def reset(self, trace, cluster):
            self.inner = make_policy("maxmin")
            self.inner.reset(trace, cluster)

        def decide(self, view):
            if view.now == 2.0:
                run = view.running()
                seen.update(
                    free=view.free_gpus, ded=view.used_dedicated.tolist(),
                    opp=view.used_opportunistic.tolist(), pend=[list(view.pending(p)) for p in range(2)],
                    run=run.job.tolist(), runopp=run.opportunistic.tolist(),
                    start=run.start.tolist(), pgpus=view.pending_gpus().tolist(),
                    allpend=view.pending_all().tolist(),
                )
            return self.inner.decide(view)

    # pool p (2 GPUs): a runs dedicated; b (2 GPUs) borrows q's GPUs at 1; c waits.
    jobs = table([("a", "p", 0.0, 10.0, 2), ("b", "p", 1.0, 10.0, 2), ("c", "p", 2.0, 10.0, 1)])
    simulate(jobs, make_pools({"p": 2, "q": 2}), Probe(), check_invariants=True)
    assert seen == dict(free=0, ded=[2, 0], opp=[2, 0], pend=[[2], []], run=[0, 1],
                        runopp=[False, True], start=[0.0, 1.0], pgpus=[1, 0], allpend=[2])


def test_build_trace_orders_jobs_by_submit_then_id_and_indexes_pools_by_name():
    jobs = table([("z", "b", 0.0, 1.0, 1), ("y", "a", 0.0, 2.0, 1), ("x", "b", 3.0, 4.0, 2)])
    trace, order = build_trace(jobs.reverse(), make_pools({"b": 2, "a": 1}), speedup=2.0)
    assert trace.job_ids.tolist() == ["y", "z", "x"]
    assert trace.pool_names == ("a", "b")
    assert trace.pool.tolist() == [0, 1, 1]
    assert trace.duration.tolist() == [1.0, 0.5, 2.0]
    assert [tuple(a.tolist()) for a in trace.pool_jobs] == [(0,), (1, 2)]
    assert jobs.reverse()["job_id"].gather(order).to_list() == ["y", "z", "x"]


def test_cluster_refuses_double_booking_and_checks_consistency():
    c = Cluster([4, 4], gpus_per_server=4, track_gpus=True)
    c.allocate(0, 3)
    assert c.owner[:4].tolist() == [0, 0, 0, -1] or c.owner[4:].tolist() == [0, 0, 0, -1]
    held = int(c.held[0][0])
    with pytest.raises(PlacementError, match=f"GPU {held} is already held by job 0"):
        c.allocate(1, 1, placement=[held])
    c.allocate(1, 2, placement=[6, 7] if held < 4 else [0, 1])
    c.check()
    c.owner[c.owner < 0] = 5  # corrupt: a GPU owned by a job that holds nothing
    with pytest.raises(AssertionError):
        c.check()


def test_cluster_prefers_one_server_for_a_gang():
    c = Cluster([8, 8], gpus_per_server=8, track_gpus=True)
    c.allocate(0, 6)
    c.allocate(1, 4)  # does not fit the rest of server 0: goes to server 1
    assert set(c.server_of(c.held[1]).tolist()) == {1}
    c.allocate(2, 2)  # best fit: the 2 GPUs left on server 0
    assert set(c.server_of(c.held[2]).tolist()) == {0}


# ----------------------------------------------------------------------------- properties


@st.composite
def workloads(draw):
    """Small random workloads: 1-3 pools, up to 25 jobs, colliding integer times."""
    n_pools = draw(st.integers(1, 3))
    quotas = [draw(st.integers(1, 6)) for _ in range(n_pools)]
    n = draw(st.integers(1, 25))
    rows = []
    for i in range(n):
        p = draw(st.integers(0, n_pools - 1))
        rows.append((
            f"j{i:02d}", f"p{p}",
            float(draw(st.integers(0, 40))),
            float(draw(st.sampled_from([1, 2, 3, 5, 8, 13, 30]))) + draw(st.sampled_from([0, 0.5])),
            draw(st.integers(1, quotas[p])),
        ))
    return table(rows), make_pools({f"p{i}": q for i, q in enumerate(quotas)})


BASELINES = ["fcfs", "ssf", "gssf", "maxmin"]


def check_schedule(jobs: pl.DataFrame, pools: pl.DataFrame, res: pl.DataFrame) -> None:
    """Assert the result table is a valid non-preemptive gang schedule."""
    assert res["job_id"].to_list() == jobs["job_id"].to_list()
    assert res["start_time"].is_not_null().all()
    assert (res["start_time"] >= res["submit_time"]).all()
    assert (res["end_time"] == res["start_time"] + res["duration"]).all()
    # sweep: total use never above the cluster, dedicated use never above quota
    quota = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    total = sum(quota.values())
    events = sorted(
        [(r["start_time"], 1, r) for r in res.iter_rows(named=True)]
        + [(r["end_time"], 0, r) for r in res.iter_rows(named=True)],
        key=lambda e: (e[0], e[1]),
    )
    used = 0
    ded = dict.fromkeys(quota, 0)
    for _, is_start, r in events:
        sign = 1 if is_start else -1
        used += sign * r["num_gpus"]
        if not r["opportunistic"]:
            ded[r["pool"]] += sign * r["num_gpus"]
        assert used <= total
        assert ded[r["pool"]] <= quota[r["pool"]]


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workloads(), st.sampled_from(BASELINES))
def test_every_baseline_keeps_the_invariants(wl, name):
    jobs, pools = wl
    res = simulate(jobs, pools, make_policy(name), check_invariants=True, gpus_per_server=4)
    check_schedule(jobs, pools, res)
    again = simulate(jobs, pools, make_policy(name))
    assert res.equals(again)


@settings(max_examples=40, deadline=None)
@given(workloads())
def test_fcfs_never_shares_and_keeps_arrival_order_per_pool(wl):
    jobs, pools = wl
    res = simulate(jobs, pools, make_policy("fcfs"), check_invariants=True)
    assert not res["opportunistic"].any()
    for pool in pools["pool"]:
        mine = res.filter(pl.col("pool") == pool)
        alone = simulate(jobs.filter(pl.col("pool") == pool), pools.filter(pl.col("pool") == pool),
                         make_policy("fcfs"))
        assert mine["start_time"].to_list() == alone["start_time"].to_list()
        ordered = mine.sort(["submit_time", "job_id"])["start_time"].to_numpy()
        assert (np.diff(ordered) >= 0).all()


@settings(max_examples=40, deadline=None)
@given(workloads())
def test_with_one_pool_maxmin_is_fcfs_and_gssf_is_ssf(wl):
    jobs, pools = wl
    pool = pools["pool"][0]
    jobs = jobs.filter(pl.col("pool") == pool)
    pools = pools.filter(pl.col("pool") == pool)
    if jobs.height == 0:
        return
    def starts(name):
        return simulate(jobs, pools, make_policy(name))["start_time"].to_list()
    assert starts("maxmin") == starts("fcfs")
    assert starts("gssf") == starts("ssf")


def test_registry_lists_names_and_rejects_unknown_ones():
    assert {"fcfs", "ssf", "gssf", "maxmin", "sia-vc", "oracle"} <= set(POLICY_NAMES)
    with pytest.raises(ConfigError, match="unknown policy 'nope'; known policies: fcfs"):
        make_policy("nope")
    with pytest.raises(ConfigError, match="option 'colour' is not an option of policy 'fcfs'"):
        make_policy("fcfs", colour="red")


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from(["base", "higher-load", "more-queues"]),
       st.sampled_from(BASELINES))
def test_invariants_hold_on_synthetic_workloads(seed, variant, name):
    from sia.data.synthetic import generate_workload

    jobs, pools = generate_workload(variant, seed, days=0.5)
    res = simulate(jobs, pools, make_policy(name), check_invariants=True, tick_s=600.0)
    check_schedule(jobs, pools.select("pool", "quota_gpus"), res)


def test_invariant_mode_catches_a_policy_that_corrupts_the_state():
    class Vandal:
        name = "vandal"
        uses_ticks = False

        def reset(self, trace, cluster):
            pass

        def decide(self, view):
            plist = view.pending(0)
            if len(plist) > 1:
                plist.pop()  # "read-only" list, mutated: a job silently vanishes
            return [Start(plist[0])] if plist and view.free_gpus else []

    jobs = table([("a", "p", 0.0, 5.0, 1), ("b", "p", 0.0, 5.0, 1), ("c", "p", 0.0, 5.0, 1)])
    with pytest.raises(AssertionError, match="lost a pending job"):
        simulate(jobs, make_pools({"p": 1}), Vandal(), check_invariants=True)


def test_progress_bar_runs(capsys):
    jobs = table([("a", "p", 0.0, 5.0, 1), ("b", "p", 1.0, 5.0, 1)])
    res = simulate(jobs, make_pools({"p": 1}), make_policy("fcfs"), progress=True)
    assert res["end_time"].to_list() == [5.0, 10.0]


def test_a_wakeup_in_the_past_is_an_error_and_numpy_indices_are_accepted():
    class Late:
        name = "late"
        uses_ticks = False

        def reset(self, trace, cluster):
            pass

        def decide(self, view):
            return [Start(np.int64(j)) for j in view.pending(0)[: view.free_gpus]]

        def next_wakeup(self, now):
            return now

    jobs = table([("a", "p", 0.0, 5.0, 1)])
    with pytest.raises(PolicyError, match="asked to wake up at 0.0, not later"):
        simulate(jobs, make_pools({"p": 1}), Late())
    Late.next_wakeup = lambda self, now: None
    res = simulate(jobs, make_pools({"p": 1}), Late(), check_invariants=True)
    assert res["start_time"].to_list() == [0.0]


class StopAndRestart:
    """FCFS on one pool that, at t = 50, stops job 0 and restarts it at once, at no cost."""

    name = "stop-restart"
    uses_ticks = False

    def reset(self, trace, cluster):
        self.done = False

    def decide(self, view):
        from sia.scheduler.core.simulator import Preempt

        if view.now == 50.0 and not self.done:
            self.done = True
            return [Preempt(0, 0.0, 0.0), Start(0, False)]
        return [Start(j, False) for j in view.pending(0)][:1] if view.free_gpus >= 2 else []

    def next_wakeup(self, now):
        return 50.0 if now < 50.0 else None


def test_a_free_stop_and_restart_in_one_instant_completes_the_job_once():
    """Job 0 (100 s) runs from 0, is stopped and restarted at 50 with nothing lost: it still
    ends at 100, once (its first run's heap entry has the same end), and job 1 follows it."""
    jobs = table([("a", "p", 0.0, 100.0, 2), ("b", "p", 0.0, 10.0, 2)])
    res = by_id(simulate(jobs, make_pools({"p": 2}), StopAndRestart(), check_invariants=True))
    assert (res["a"]["start_time"], res["a"]["end_time"]) == (0.0, 100.0)
    assert (res["b"]["start_time"], res["b"]["end_time"]) == (100.0, 110.0)
