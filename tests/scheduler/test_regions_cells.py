"""Regions on buddy cells: one region is today's cell replay, guests follow SIA's cell rule."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_regions_workload, generate_workload
from sia.scheduler.core.simulator import simulate
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import config_for_policy, simulate_cells
from sia.scheduler.regions.global_policy import GlobalRegionPolicy, layout_for_pools
from sia.scheduler.registry import make_policy

H = 3600.0
BUDDY = LocalityConfig()
MCF = LocalityConfig(chain=("buddy", "mcf"))


def table(rows: list[tuple]) -> pl.DataFrame:
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


def on_cells(layout, name: str, cfg: LocalityConfig = BUDDY, **kw) -> GlobalRegionPolicy:
    return GlobalRegionPolicy(layout, lambda: make_policy(name), inner_name=name,
                              locality=config_for_policy(cfg, name), **kw)


def starts(res: pl.DataFrame) -> dict[str, float]:
    return dict(zip(res["job_id"], res["start_time"], strict=True))


# ----------------------------------------------------------------------------- one region
@pytest.mark.parametrize("name", ["fcfs", "maxmin", "sia-perfect", "sia-random", "hived", "ssf",
                                  "themis"])
@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cfg=st.sampled_from([BUDDY, MCF]))
def test_one_region_on_cells_is_todays_cell_replay_start_for_start_and_cell_for_cell(name, seed,
                                                                                     cfg):
    """Routed policies (fcfs, maxmin, sia) and home-only ones placed as a batch (ssf, themis)."""
    jobs, pools = generate_workload("base", seed, days=1.5)
    pools = pools.select("pool", "quota_gpus")
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    layout = layout_for_pools({p: "only" for p in quotas}, quotas)
    opts = {"seed": seed} if name == "sia-random" else {}
    today, counters = simulate_cells(jobs, pools, make_policy(name, **opts),
                                     config_for_policy(cfg, name), record_placements=True)
    pol = GlobalRegionPolicy(layout, lambda: make_policy(name, **opts), inner_name=name,
                             locality=config_for_policy(cfg, name),
                             route=name not in ("hived", "ssf", "themis"))
    ours = simulate(jobs, pools, pol, check_invariants=True)
    assert today.height > 20
    for col in ("start_time", "end_time", "opportunistic"):
        assert ours[col].to_list() == today[col].to_list(), col
    mine = pol.placement_summary(record_placements=True)
    assert mine["placements"] == counters["placements"]  # cell for cell
    assert mine["pad_gpus"] == counters["pad_gpus"]
    for key, value in counters.items():
        assert mine[key] == value, key
    assert mine["region_gpus"] == [[0, pol._regions[0].cluster.n_gpus]]


# ----------------------------------------------------------------------------- two regions by hand
A_AND_B = ("a1", "a", 0.0, H, 8), ("a2", "a", 0.0, 600.0, 4), ("b1", "b", 0.0, 2 * H, 4)


def two_regions(rows, quotas, homes, cfg=BUDDY, locality=True):
    """Replay ``rows`` on regions with a's data also in B; return (starts, policy)."""
    lay = layout_for_pools(homes, quotas, replicas={"a": ["A", "B"]})
    pol = (on_cells(lay, "sia-perfect", cfg) if locality else
           GlobalRegionPolicy(lay, lambda: make_policy("sia-perfect"), inner_name="sia-perfect"))
    res = simulate(table(list(rows)), make_pools(quotas), pol, check_invariants=True)
    if locality:
        for reg in pol._regions:
            reg.cluster.check()  # every gang in one cell of its region, buddy invariants
    return starts(res), pol


def test_a_routed_job_runs_on_a_cell_of_the_region_it_runs_in():
    # A (pool a, one server) runs a1; B (pools b, c: a server each) runs b1 in b's server. c's
    # server is free, next to a pool (b) whose quota is all bound: a2 goes there, in B's cells
    got, pol = two_regions(A_AND_B, {"a": 8, "b": 8, "c": 8}, {"a": "A", "b": "B", "c": "B"})
    assert got == {"a1": 0.0, "a2": 0.0, "b1": 0.0}
    assert pol.facts()["routed"] == 1
    summary = pol.placement_summary(record_placements=True)
    (a_lo, a_n), (b_lo, b_n) = summary["region_gpus"]
    assert (a_lo, b_lo) == (0, a_n)  # regions one after the other in global GPU ids
    places = summary["placements"]
    assert set(places["a1"]) <= set(range(a_lo, a_lo + a_n))
    for job in ("a2", "b1"):
        assert set(places[job]) <= set(range(b_lo, b_lo + b_n)), job
    # a2 sits in the server b1 does not (b1's server is b's bound cell)
    gps = summary["gpus_per_server"]
    assert {g // gps for g in places["a2"]}.isdisjoint({g // gps for g in places["b1"]})
    assert pol.ran_in.tolist() == [0, 1, 1]  # a1, a2, b1 in arrival order


def test_a_guest_keeps_out_of_the_buddy_of_a_pool_that_can_still_grow():
    # B is one pool b of two servers; b1 binds one of them and b still has a server of quota
    # unbound: the other server is the buddy of b's dedicated cell, which SIA never lends
    # (strict buddies), so a2 is refused in B on cells, though B lends 12 GPUs by count
    quotas, homes = {"a": 8, "b": 16}, {"a": "A", "b": "B"}
    got, pol = two_regions(A_AND_B, quotas, homes)
    assert got["a2"] == H and pol.facts()["routed"] == 0
    fungible, _ = two_regions(A_AND_B, quotas, homes, locality=False)
    assert fungible["a2"] == 0.0


def test_a_guest_is_refused_when_the_regions_reservations_as_cells_leave_it_no_cell():
    # c1 (4 GPUs) arrives within a2's window: B reserves a 4-GPU cell of c's quota, which binds
    # c's server; by count 8 GPUs stay lendable, but no cell is left outside bound cells. When
    # c1 has ended (t = 1800 s) nothing more is coming to c and a2 goes to B (before a1 ends)
    rows = (*A_AND_B, ("c1", "c", 1200.0, 600.0, 4))
    quotas, homes = {"a": 8, "b": 8, "c": 8}, {"a": "A", "b": "B", "c": "B"}
    got, pol = two_regions(rows, quotas, homes)
    assert got == {"a1": 0.0, "a2": 1800.0, "b1": 0.0, "c1": 1200.0}
    assert pol.ran_in.tolist() == [0, 1, 1, 1]
    fungible, _ = two_regions(rows, quotas, homes, locality=False)
    assert fungible["a2"] == 0.0 and fungible["c1"] == 1200.0


def test_a_guest_wider_than_the_regions_largest_cell_is_never_routed_there():
    # B is one server: a 16-GPU job of pool a (home A, two servers) can never run in B
    rows = [("a1", "a", 0.0, H, 16), ("a2", "a", 0.0, 600.0, 16), ("b1", "b", 0.0, 60.0, 8)]
    got, pol = two_regions(rows, {"a": 16, "b": 8}, {"a": "A", "b": "B"})
    assert got["a2"] == H and pol.facts()["routed"] == 0


def test_bad_region_configs_name_the_region_and_the_numbers():
    lay = layout_for_pools({"a": "east", "b": "west"}, {"a": 12, "b": 8})
    with pytest.raises(ConfigError, match=r"region 'east' has 12 GPUs, not a whole number of "
                                          r"8-GPU machines \(1 machines and 4 GPUs left over\)"):
        on_cells(lay, "sia-perfect")
    on_cells(lay, "sia-perfect", LocalityConfig(gpus_per_server=4))  # 3 + 2 machines of 4
    ok = layout_for_pools({"a": "east"}, {"a": 8})
    for option in ({"preempt": True}, {"migrate": True}):
        with pytest.raises(ConfigError, match=f"cells option {next(iter(option))} is not supported"):
            on_cells(ok, "sia-perfect", LocalityConfig(**option))
    # a pool whose widest job needs a cell its quota has not: the error names region and pool
    jobs = table([("a1", "a", 0.0, 60.0, 3)])
    lay = layout_for_pools({"a": "east", "b": "east"}, {"a": 3, "b": 5})
    with pytest.raises(ConfigError, match="region 'east': pool 'a': its widest job needs a 4-GPU cell"):
        simulate(jobs, make_pools({"a": 3, "b": 5}), on_cells(lay, "fcfs"))


# ----------------------------------------------------------------------------- synthetic regions
def synthetic_regions(seed: int, days: float = 1.5, one_gpu: bool = False):
    jobs, pools, homes = generate_regions_workload(seed, days=days)
    if one_gpu:
        jobs = jobs.with_columns(pl.lit(1, dtype=pl.Int32).alias("num_gpus"))
    pools = pools.select("pool", "quota_gpus")
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    layout = layout_for_pools(homes, quotas, replicas={p: ["hot", "mid", "cold"] for p in quotas})
    return jobs, pools, layout


def held_at_once_ok(res: pl.DataFrame, places: dict, bounds: list[list[int]], ran: dict) -> None:
    """Every job's GPUs lie in the region it ran in, and no GPU runs two jobs at once."""
    busy: dict[int, list[tuple[float, float]]] = {}
    for job, s, e in zip(res["job_id"], res["start_time"], res["end_time"], strict=True):
        lo, n = bounds[ran[job]]
        gpus = places[job]
        assert all(lo <= g < lo + n for g in gpus), job
        for g in gpus:
            busy.setdefault(g, []).append((s, e))
    for g, spans in busy.items():
        spans.sort()
        for (_, e1), (s2, _) in zip(spans, spans[1:], strict=False):
            assert s2 >= e1, f"GPU {g} runs two jobs at once"


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_regions_on_cells_never_run_more_than_their_gpus_or_outside_their_cells(seed):
    jobs, pools, layout = synthetic_regions(seed)
    pol = on_cells(layout, "sia-perfect", MCF)
    res = simulate(jobs, pools, pol, check_invariants=True)
    for reg in pol._regions:
        reg.cluster.check()
    summary = pol.placement_summary(record_placements=True)
    names = [r.name for r in layout.regions]
    ran = {j: names.index(r) for j, r in zip(*pol.job_regions().values(), strict=True)}
    held_at_once_ok(res, summary["placements"], summary["region_gpus"], ran)
    gpus = res["num_gpus"].to_numpy()
    region = np.array([ran[j] for j in res["job_id"]])
    for r in range(layout.n_regions):  # most GPUs at once per region, by a sweep
        m = region == r
        t = np.concatenate([res["start_time"].to_numpy()[m], res["end_time"].to_numpy()[m]])
        d = np.concatenate([gpus[m], -gpus[m]])
        k = np.lexsort((d, t))
        assert np.cumsum(d[k]).max(initial=0) <= layout.gpus[r]
    assert pol.facts()["routed"] > 0


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_with_perfect_predictions_regions_on_cells_slow_no_job_against_fcfs_on_cells(seed):
    # one-GPU gangs: a pool's cells cannot fragment, so SIA's guarantee holds on cells
    # (tests/scheduler/test_locality.py shows the in-pool counterexample for mixed widths)
    jobs, pools, layout = synthetic_regions(seed, one_gpu=True)
    fcfs, _ = simulate_cells(jobs, pools, make_policy("fcfs"), MCF)
    pol = on_cells(layout, "sia-perfect", MCF)
    res = simulate(jobs, pools, pol, check_invariants=True)
    assert (res["start_time"] - fcfs["start_time"]).max() <= 1.0
    assert pol.facts()["routed"] > 0


def test_the_negative_cache_changes_no_decision_on_cells():
    jobs, pools, layout = synthetic_regions(3, days=2.0)
    on, off = on_cells(layout, "sia-perfect", MCF), on_cells(layout, "sia-perfect", MCF,
                                                             neg_cache=False)
    a, b = simulate(jobs, pools, on), simulate(jobs, pools, off)
    assert a["start_time"].to_list() == b["start_time"].to_list()
    assert (on.ran_in == off.ran_in).all() and on.facts()["routed"] > 0
    # cell for cell, and the same counters: a plan the scan did not take left none behind
    a_cells, b_cells = (
        {k: v for k, v in pol.placement_summary(True).items() if not k.endswith("_s")}
        for pol in (on, off))  # the solvers' wall times differ from run to run
    assert a_cells == b_cells and a_cells["solver_calls"] > 0
    assert on.stats["scan_attempts"] < off.stats["scan_attempts"]
