"""Data-placement MIP: a two-region case checked by hand, the fallbacks, and plan invariants."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.scheduler.regions.data_placement import (
    PlacementWeights,
    balance_candidates,
    greedy_plan,
    keep_set,
    plan_data_placement,
    plan_objective,
    supply_shares,
)
from sia.scheduler.regions.model import PoolData, Region, RegionLayout, RegionsError

W = PlacementWeights(over_weight=2.0, under_weight=1.0, overflow_weight=4.0, move_weight=1.0,
                     storage_weight=0.01)


def two_regions(storage_b=None):
    # A and B have 10 GPUs each; A's two pools want 16 GPUs, B's pool 2: rho = 18 / 20 = 0.9
    return RegionLayout([Region("A", 10), Region("B", 10, storage=storage_b)],
                        [PoolData("p1", "A", 1.0), PoolData("p2", "A", 3.0), PoolData("p3", "B", 2.0)], 1.0)


DEMAND = [8.0, 8.0, 2.0]


def test_hand_case_copies_the_smallest_pool_and_balances():
    # Copying p1 (size 1, the cheapest) to B and serving 7/8 of it there gives A = B = 9 GPUs,
    # ratio 0.9 = rho everywhere: cost = move 1/6 + storage 0.01 * 7/6 (total data 6).
    plan = plan_data_placement(two_regions(), DEMAND, weights=W, time_limit_s=10)
    assert plan.status == "optimal" and not plan.kept_previous
    assert plan.held.tolist() == [[True, True], [True, False], [False, True]]
    assert plan.region_load(DEMAND) == pytest.approx([9.0, 9.0])
    assert plan.shares[0] == pytest.approx([1 / 8, 7 / 8])
    assert plan.objective == pytest.approx(1 / 6 + 0.01 * 7 / 6)
    assert plan.moved == 1.0 and plan.replicas == 4


def test_storage_limit_blocks_the_copy():
    # B can store 2 units, all taken by p3: nothing moves, ratios stay 1.6 and 0.2.
    plan = plan_data_placement(two_regions(storage_b=2.0), DEMAND, weights=W, time_limit_s=10)
    assert plan.status == "optimal"
    assert plan.held.tolist() == [[True, False], [True, False], [False, True]]
    # over 2 * 0.7 + under 1 * 0.7 + overflow 4 * 0.6 + storage 0.01 * 6/6
    assert plan.objective == pytest.approx(1.4 + 0.7 + 2.4 + 0.01)


def test_overload_weighing_more_than_underload_changes_the_decision():
    # A: 10 GPUs, pool p wants 15; B: 10 GPUs, pool q wants 5; rho = 1. Balancing (copy p to B,
    # serve 1/3 of it there) gains over_weight * 0.5 + under_weight * 0.5 and costs
    # move_weight * 1/2 = 1.2. Symmetric weights (1, 1) gain 1.0 < 1.2: stay. Weights (2, 1)
    # gain 1.5 > 1.2: move.
    lay = RegionLayout([Region("A", 10), Region("B", 10)], [PoolData("p", "A", 1.0), PoolData("q", "B", 1.0)], 1.0)
    base = dict(overflow_weight=0.0, move_weight=2.4, storage_weight=0.0)
    sym = plan_data_placement(lay, [15.0, 5.0], weights=PlacementWeights(1.0, 1.0, **base), time_limit_s=10)
    asym = plan_data_placement(lay, [15.0, 5.0], weights=PlacementWeights(2.0, 1.0, **base), time_limit_s=10)
    assert sym.held.tolist() == [[True, False], [False, True]]
    assert sym.objective == pytest.approx(1.0)
    assert asym.held.tolist() == [[True, True], [False, True]]
    assert asym.region_load([15.0, 5.0]) == pytest.approx([10.0, 10.0])
    assert asym.objective == pytest.approx(1.2)


def test_infeasible_keeps_the_previous_plan_and_says_so():
    lay = RegionLayout([Region("A", 10, storage=0.5), Region("B", 10)],
                       [PoolData("p", "A", 1.0)], 1.0)
    plan = plan_data_placement(lay, [5.0], weights=W, time_limit_s=10)
    assert plan.status == "infeasible" and plan.kept_previous
    assert plan.held.tolist() == [[True, False]]
    assert "previous plan is kept" in plan.message and plan.objective is None


def test_no_time_left_keeps_the_previous_plan_and_says_so():
    # the budget covers model building too: a microsecond is gone before the solver starts
    plan = plan_data_placement(two_regions(), DEMAND, weights=W, time_limit_s=1e-6)
    assert plan.status == "timeout" and plan.kept_previous
    assert plan.held.tolist() == [[True, False], [True, False], [False, True]]
    assert "within the wall-clock safety net" in plan.message and plan.stopped_by == "time"


@pytest.mark.parametrize("demand, match", [
    ([1.0, 2.0], r"demand: shape \(2,\) is not \(pools,\) = \(3,\)"),
    ([1.0, float("nan"), 2.0], "demand for pool 'p2': must be finite and >= 0"),
    ({"p1": 1.0, "p2": 2.0}, "demand: no value for pool 'p3'"),
    ({"p1": 1.0, "p2": 2.0, "p3": 1.0, "zz": 1.0}, "demand: pool 'zz' is not in the layout"),
])
def test_bad_demand_is_a_one_line_error(demand, match):
    with pytest.raises(RegionsError, match=match):
        plan_data_placement(two_regions(), demand)


def test_bad_weight_is_named():
    with pytest.raises(RegionsError, match="over_weight must be a finite number >= 0"):
        PlacementWeights(over_weight=-1.0)


def test_candidates_restrict_new_copies():
    lay = two_regions()
    cand = balance_candidates(lay, np.array(DEMAND), lay.initial_replicas().held())
    # A is above rho (donor pools p1, p2 may go to B), B below it (p3 stays)
    assert cand.tolist() == [[True, True], [True, True], [False, True]]
    none_new = lay.initial_replicas().held()
    plan = plan_data_placement(lay, DEMAND, candidates=none_new, weights=W, time_limit_s=10)
    assert plan.held.tolist() == none_new.tolist()


def test_greedy_warm_start_balances_the_hand_case():
    lay = two_regions()
    prev = lay.initial_replicas().held()
    held, shares = greedy_plan(lay, np.array(DEMAND), prev, np.ones_like(prev))
    # A is 7 GPUs over its balanced 9: p1 (most demand per unit of data) is copied to B
    assert held.tolist() == [[True, True], [True, False], [False, True]]
    assert np.array(DEMAND) @ shares == pytest.approx([9.0, 9.0])


def test_replanning_keeps_a_usable_copy_while_new_ones_transfer():
    # day 1: p1 is copied to B (size 1 at rate 1/3600 per second: usable after an hour)
    lay = RegionLayout([Region("A", 10), Region("B", 10)],
                       [PoolData("p1", "A", 1.0), PoolData("p2", "A", 3.0), PoolData("p3", "B", 2.0)],
                       transfer_rate=1 / 3600)
    reps = lay.initial_replicas()
    day1 = plan_data_placement(lay, DEMAND, reps.held(), keep_set(reps, 0.0), weights=W, time_limit_s=10)
    reps, moved = reps.apply(lay, day1.held, now=0.0)
    assert moved == 1.0 and not reps.usable(1800.0)[0, 1] and reps.usable(3600.0)[0, 1]
    # half an hour later demand flips to B: p1's copy in B is not usable yet, so A's copy must stay
    keep = keep_set(reps, 1800.0)
    assert keep.tolist() == [[True, False], [True, False], [False, True]]
    day2 = plan_data_placement(lay, [8.0, 0.0, 2.0], reps.held(), keep, weights=W, time_limit_s=10)
    assert day2.held[0, 0]
    reps.apply(lay, day2.held, now=1800.0)  # accepted: no pool loses its last usable copy


@st.composite
def cases(draw):
    n_r = draw(st.integers(2, 3))
    n_p = draw(st.integers(1, 4))
    sizes = [draw(st.floats(0.5, 5.0)) for _ in range(n_p)]
    homes = [draw(st.integers(0, n_r - 1)) for _ in range(n_p)]
    regions = []
    for r in range(n_r):
        at_home = sum(s for s, h in zip(sizes, homes, strict=True) if h == r)
        extra = draw(st.one_of(st.none(), st.floats(0.0, 6.0)))
        regions.append(Region(f"r{r}", draw(st.integers(1, 16)), None if extra is None else at_home + extra))
    pools = [PoolData(f"p{k}", f"r{h}", s) for k, (s, h) in enumerate(zip(sizes, homes, strict=True))]
    demand = [draw(st.floats(0.0, 20.0)) for _ in range(n_p)]
    return RegionLayout(regions, pools, 1.0), np.array(demand)


@settings(max_examples=40)
@given(cases())
def test_plan_respects_storage_keeps_a_copy_and_beats_standing_still(case):
    lay, demand = case
    prev = lay.initial_replicas().held()
    plan = plan_data_placement(lay, demand, weights=W, time_limit_s=20, mip_gap=0.0)
    assert plan.status == "optimal"  # homes always fit (storage >= home data), so feasible
    stored = (lay.sizes[:, None] * plan.held).sum(axis=0)
    assert np.all(stored <= lay.storage + 1e-6)
    assert np.all((plan.held & prev).any(axis=1))  # a current copy survives
    assert plan.shares.sum(axis=1) == pytest.approx(np.ones(lay.n_pools))
    assert np.all(plan.shares[~plan.held] == 0)
    # the optimum is no worse than keeping the previous plan with its supply-proportional split
    standing = plan_objective(lay, demand, prev, supply_shares(lay, prev), prev, W)
    assert plan.objective <= standing + 1e-6
    # the greedy warm start keeps every copy, stays within storage and splits each pool's demand
    g_held, g_shares = greedy_plan(lay, demand, prev, np.ones_like(prev))
    assert np.all(g_held >= prev)
    assert np.all((lay.sizes[:, None] * g_held).sum(axis=0) <= lay.storage + 1e-6)
    assert g_shares.sum(axis=1) == pytest.approx(np.ones(lay.n_pools))
    assert np.all(g_shares[~g_held] == 0)
    assert plan.objective <= plan_objective(lay, demand, g_held, g_shares, prev, W) + 1e-6


def _uneven_placement(seed: int, n_pools: int = 40, n_regions: int = 4):
    """Pools with lognormal sizes and demand, homes crowded into the first region."""
    rng = np.random.default_rng(seed)
    gpus = rng.integers(20, 80, n_regions)
    home = rng.choice(n_regions, n_pools, p=np.linspace(3, 1, n_regions) / np.linspace(3, 1, n_regions).sum())
    sizes = rng.lognormal(0.0, 1.0, n_pools)
    storage = 1.5 * np.maximum(np.bincount(home, weights=sizes, minlength=n_regions), sizes.sum() / n_regions)
    regions = [Region(f"r{r}", int(gpus[r]), float(storage[r])) for r in range(n_regions)]
    pools = [PoolData(f"p{p}", f"r{home[p]}", float(sizes[p])) for p in range(n_pools)]
    demand = rng.lognormal(0.0, 1.0, n_pools)
    return RegionLayout(regions, pools, transfer_rate=1.0), demand * 0.8 * gpus.sum() / demand.sum()


def test_the_node_limit_reaches_scip_and_the_plan_names_the_limit(scip_parameters):
    sent = scip_parameters
    lay, demand = _uneven_placement(seed=1)  # SCIP needs more than the root node here
    plan = plan_data_placement(lay, demand, node_limit=1, time_limit_s=120)
    assert sent == ["limits/totalnodes = 1\n"]
    assert plan.status == "feasible" and not plan.kept_previous
    assert plan.stopped_by == "work" and "work limit 1 nodes" in plan.message
    full = plan_data_placement(lay, demand, time_limit_s=120)
    assert full.status == "optimal" and full.stopped_by == "" and full.message == ""
    assert full.objective <= plan.objective + 1e-9
    with pytest.raises(RegionsError, match="node_limit must be a whole number"):
        plan_data_placement(lay, demand, node_limit=0)
