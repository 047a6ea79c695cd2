"""Regions in the simulator: today's results with one region, routing, GPUs per region, cache."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import simulate
from sia.scheduler.regions.global_policy import GlobalRegionPolicy, layout_for_pools
from sia.scheduler.regions.model import RegionsError
from sia.scheduler.registry import make_policy

H = 3600.0


def table(rows: list[tuple]) -> pl.DataFrame:
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


def wrapped(layout, name: str, **kw) -> GlobalRegionPolicy:
    return GlobalRegionPolicy(layout, lambda: make_policy(name), inner_name=name, **kw)


def three_regions(pools: pl.DataFrame, replicas: bool = True, **kw):
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    names = sorted(quotas)
    homes = {p: "ABC"[i % 3] for i, p in enumerate(names)}
    reps = {p: ["A", "B", "C"] for p in names} if replicas else None
    return layout_for_pools(homes, quotas, replicas=reps, **kw)


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["fcfs", "maxmin", "sia-perfect", "sia-random"]))
def test_one_region_gives_todays_results_exactly(seed, name):
    jobs, pools = generate_workload("base", seed, days=1.5)
    pools = pools.select("pool", "quota_gpus")
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    layout = layout_for_pools({p: "only" for p in quotas}, quotas)
    today = simulate(jobs, pools, make_policy(name, **({"seed": seed} if name == "sia-random" else {})))
    opts = {"seed": seed} if name == "sia-random" else {}
    pol = GlobalRegionPolicy(layout, lambda: make_policy(name, **opts), inner_name=name)
    ours = simulate(jobs, pools, pol, check_invariants=True)
    assert today.height > 20
    for col in ("start_time", "end_time", "opportunistic"):
        assert ours[col].to_list() == today[col].to_list(), col
    assert (pol.ran_in == 0).all()


def test_each_region_s_trace_keeps_its_jobs_time_limits_and_holds():
    """What an inner policy's forecaster reads of its region's jobs is the whole trace's: the
    time limits and the held jobs (hold_time) of its own jobs (a region replay once dropped the
    holds, so a model trained on them read zeros there)."""
    jobs, pools = generate_workload("base", 3, days=1.0)
    pools = pools.select("pool", "quota_gpus")
    n = jobs.height
    jobs = jobs.with_columns(pl.Series("hold_time", np.where(np.arange(n) % 3 == 0, 3600.0, 0.0)),
                             pl.Series("time_limit", np.full(n, 2 * 86400.0)))
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    names = sorted(quotas)
    layout = layout_for_pools({p: ("east" if i % 2 else "west") for i, p in enumerate(names)},
                              quotas)
    seen = []

    class Recording:
        def __init__(self):
            self.inner = make_policy("fcfs")

        def reset(self, trace, cluster):
            seen.append(trace)
            self.inner.reset(trace, cluster)

        def __getattr__(self, name):
            return getattr(self.inner, name)

    whole = simulate(jobs, pools, make_policy("fcfs"))
    simulate(jobs, pools, GlobalRegionPolicy(layout, Recording, inner_name="fcfs"))
    assert len(seen) == 2 and sum(t.n_jobs for t in seen) == n
    by_id = dict(zip(jobs["job_id"].to_list(), jobs["hold_time"].to_list(), strict=True))
    for t in seen:
        assert t.hold is not None and t.time_limit is not None
        assert t.hold.tolist() == [by_id[j] for j in t.job_ids.tolist()]
    assert whole.height == n


def region_peaks(res: pl.DataFrame, ran_in: np.ndarray, order: np.ndarray, n_regions: int):
    """Most GPUs each region ran at once (a sweep over starts and ends)."""
    start, end = res["start_time"].to_numpy(), res["end_time"].to_numpy()
    gpus = res["num_gpus"].to_numpy()
    region = np.empty(res.height, dtype=np.int64)
    region[order] = ran_in  # ran_in is in job-index (arrival) order
    peaks = np.zeros(n_regions, dtype=np.int64)
    for r in range(n_regions):
        m = region == r
        t = np.concatenate([start[m], end[m]])
        d = np.concatenate([gpus[m], -gpus[m]])
        k = np.lexsort((d, t))  # ends before starts at the same instant
        peaks[r] = np.cumsum(d[k]).max(initial=0)
    return peaks


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_regions_never_run_more_than_their_gpus(seed):
    jobs, pools = generate_workload("base", seed, days=1.5, pool_gpus=8)
    pools = pools.select("pool", "quota_gpus")
    layout = three_regions(pools)
    pol = wrapped(layout, "sia-perfect")
    res = simulate(jobs, pools, pol, check_invariants=True)
    order = jobs.select(pl.arg_sort_by(["submit_time", "job_id"], maintain_order=True)).to_series().to_numpy()
    assert (pol.ran_in >= 0).all()
    peaks = region_peaks(res, pol.ran_in, order, layout.n_regions)
    assert (peaks <= layout.gpus).all(), (peaks, layout.gpus)


def test_a_waiting_job_runs_as_a_guest_where_its_data_is():
    # pool a (4 GPUs, region A) gets two 4-GPU 30-minute jobs; region B (pool b) is idle
    rows = [("a1", "a", 0.0, 1800.0, 4), ("a2", "a", 0.0, 1800.0, 4), ("b1", "b", 7200.0, 600.0, 4)]
    jobs, pools = table(rows), make_pools({"a": 4, "b": 4})
    for replicas, a2_start in (({"a": ["A", "B"]}, 0.0), (None, 1800.0)):
        lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 4, "b": 4}, replicas=replicas)
        pol = wrapped(lay, "sia-perfect")
        res = simulate(jobs, pools, pol, check_invariants=True)
        got = dict(zip(res["job_id"], res["start_time"], strict=True))
        assert got == {"a1": 0.0, "a2": a2_start, "b1": 7200.0}
        assert pol.facts()["routed"] == (1 if replicas else 0)


def test_a_guest_never_takes_gpus_the_region_reserves_for_its_own_pool():
    # b1 arrives at 10 min and needs B's 4 GPUs: with perfect predictions B lends nothing to a2
    # (a2 would run 30 min), so b1 starts on time and a2 goes to B only when b1 has ended
    rows = [("a1", "a", 0.0, 1800.0, 4), ("a2", "a", 0.0, 1800.0, 4), ("b1", "b", 600.0, 600.0, 4)]
    lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 4, "b": 4}, replicas={"a": ["A", "B"]})
    res = simulate(table(rows), make_pools({"a": 4, "b": 4}), wrapped(lay, "sia-perfect"),
                   check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert got == {"a1": 0.0, "a2": 1200.0, "b1": 600.0}


def test_a_new_replica_is_usable_only_after_its_transfer():
    # pool a's data (size 3600) copies to B at 1 unit/s: a plan at t=0 makes it usable at 1 h.
    # Demand over the first 12 h: a 4.2 GPUs (ratio 1.05 in A), b ~0: moving half of a's data
    # (cost 0.5) beats the imbalance (over 2 x 0.53 + under 0.53 + overflow 4 x 0.05)
    rows = [("a0", "a", 0.0, 12 * H, 4)] + [(f"a{k}", "a", 0.0, 1200.0, 4) for k in (1, 2)] \
        + [("b0", "b", 0.0, 60.0, 4)] + [(f"b{k}", "b", k * 8 * H, 60.0, 4) for k in (1, 2)]
    lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 4, "b": 4}, sizes={"a": 3600.0, "b": 3600.0})
    pol = wrapped(lay, "sia-perfect", placement="perfect", period_s=12 * H)
    res = simulate(table(rows), make_pools({"a": 4, "b": 4}), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert pol.stats["plans"][0]["moved"] == 3600.0
    assert got["a1"] == 3600.0  # routed to B as soon as the copy is usable
    assert got["a2"] == 3600.0 + 1200.0
    assert pol.facts()["routed"] == 2


def test_the_negative_cache_changes_no_decision_and_saves_attempts():
    jobs, pools = generate_workload("base", 3, days=2)
    pools = pools.select("pool", "quota_gpus")
    layout = three_regions(pools)
    on, off = wrapped(layout, "sia-perfect"), wrapped(layout, "sia-perfect", neg_cache=False)
    a = simulate(jobs, pools, on)
    b = simulate(jobs, pools, off)
    assert a["start_time"].to_list() == b["start_time"].to_list()
    assert (on.ran_in == off.ran_in).all()
    assert on.facts()["routed"] > 0
    assert on.stats["scan_hits"] > 0 and off.stats["scan_hits"] == 0
    assert on.stats["scan_attempts"] < off.stats["scan_attempts"]


def test_home_only_never_routes_and_region_sizes_must_match_quotas():
    jobs, pools = generate_workload("base", 5, days=1)
    pools = pools.select("pool", "quota_gpus")
    pol = wrapped(three_regions(pools), "sia-perfect", route=False)
    simulate(jobs, pools, pol, check_invariants=True)
    res_home = pol.ran_in
    trace_pool_home = pol._home[np.asarray(pol._trace.pool)]
    assert (res_home == trace_pool_home).all() and pol.facts()["routed"] == 0
    with pytest.raises(RegionsError, match="pool 'q0' of the workload has no home region"):
        layout_for_pools({"q1": "A"}, {"q0": 8, "q1": 8})
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    small = layout_for_pools({p: "A" for p in quotas}, {p: 1 for p in quotas})
    with pytest.raises(RegionsError, match="region 'A' has .* GPUs in the layout but its pools' quotas"):
        simulate(jobs, pools, wrapped(small, "fcfs"))


def test_policies_that_cannot_lose_a_job_refuse_routing():
    lay = layout_for_pools({"a": "A"}, {"a": 4})
    with pytest.raises(ConfigError, match="plans ahead"):
        wrapped(lay, "oracle", route=False)
    with pytest.raises(ConfigError, match="keeps per-job state"):
        wrapped(lay, "ssf")
    with pytest.raises(ConfigError, match="placement must be one of"):
        wrapped(lay, "fcfs", placement="psychic")


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_with_perfect_predictions_routed_jobs_slow_no_job_down(seed):
    # SIA's zero-slowdown property across regions: guests only take what the region's
    # reservations leave, so no job (home or routed) starts later than under FCFS
    jobs, pools = generate_workload("base", seed, days=1.5)
    pools = pools.select("pool", "quota_gpus")
    fcfs = simulate(jobs, pools, make_policy("fcfs"))
    pol = wrapped(three_regions(pools), "sia-perfect")
    res = simulate(jobs, pools, pol, check_invariants=True)
    late = (res["start_time"] - fcfs["start_time"]).to_numpy()
    assert late.max() <= 1.0


def test_long_jobs_route_only_when_guests_may_take_idle_gpus():
    # a2 runs 20 h: longer than SIA's largest window, so SIA's rule never lends it; 'idle' does
    rows = [("a1", "a", 0.0, 20 * H, 4), ("a2", "a", 0.0, 20 * H, 4), ("b1", "b", 30 * H, 60.0, 4)]
    lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 4, "b": 4}, replicas={"a": ["A", "B"]})
    for guests, a2_start in (("sia", 20 * H), ("idle", 0.0)):
        pol = wrapped(lay, "sia-perfect", guests=guests)
        res = simulate(table(rows), make_pools({"a": 4, "b": 4}), pol, check_invariants=True)
        got = dict(zip(res["job_id"], res["start_time"], strict=True))
        assert got == {"a1": 0.0, "a2": a2_start, "b1": 30 * H}
    with pytest.raises(ConfigError, match="guests 'idle' needs a region policy that checks free"):
        wrapped(lay, "fcfs", guests="idle")


def test_forecast_placement_reads_each_regions_forecaster():
    # at t = 1 h (a0 done after 1 h) the perfect forecaster sees a1 (2 GPUs) arrive within its
    # largest window (12 h): 2 / 43200 GPUs per second x a's mean finished duration 3600 s
    rows = [("a0", "a", 0.0, 3600.0, 4), ("a1", "a", 7200.0, 600.0, 2), ("b0", "b", 0.0, 60.0, 4)]
    lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 4, "b": 4})
    pol = wrapped(lay, "sia-perfect", placement="forecast", period_s=3600.0)
    simulate(table(rows), make_pools({"a": 4, "b": 4}), pol, check_invariants=True)
    plans = {p["t"]: p["demand"] for p in pol.stats["plans"]}
    assert plans[0.0] == [0.0, 0.0]  # nothing finished yet: no duration to go by
    assert plans[3600.0] == pytest.approx([2 / 43200 * 3600, 0.0])
    assert plans[7200.0] == [0.0, 0.0]  # a1 has arrived: nothing more is coming
    with pytest.raises(ConfigError, match="placement 'forecast' needs a region policy with a forecaster"):
        wrapped(lay, "maxmin", placement="forecast")
