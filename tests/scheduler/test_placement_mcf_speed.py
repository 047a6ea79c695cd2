"""Min-cost-flow placement: the network's size follows job classes, not jobs (no timing here)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.scheduler.locality.topology import Topology
from sia.scheduler.placement.costs import CostModel, placement_cost
from sia.scheduler.placement.mcf import MinCostFlowPlacer
from sia.scheduler.placement.protocol import ClusterState, PlacementRequest, validate_placement

R = PlacementRequest


def test_graph_size_does_not_grow_with_identical_jobs():
    topo = Topology(racks=1, servers_per_rack=4, gpus_per_server=8)
    state = ClusterState.empty(topo)
    sizes = []
    for n_jobs in (40, 400):
        batch = [R(f"j{k}", 1, "a") for k in range(n_jobs)]
        res = MinCostFlowPlacer().place(batch, state, 1.0)
        validate_placement(res, batch, state)
        assert len(res.placements) == 32  # the cluster is full after 32 one-GPU gangs
        sizes.append((res.stats["arcs"][0], res.stats["nodes"][0]))
    assert sizes[0] == sizes[1]


def test_identical_jobs_are_placed_in_batch_order():
    """Two free GPUs, four identical 1-GPU jobs: the first two get them, with or without priorities."""
    topo = Topology(racks=1, servers_per_rack=1, gpus_per_server=8)
    free = np.zeros(8, dtype=bool)
    free[[2, 5]] = True
    state = ClusterState(topo, free)
    batch = [R(f"j{k}", 1, "a") for k in range(4)]
    for prio in (0, 3):
        res = MinCostFlowPlacer(CostModel(priority_weight=prio)).place(batch, state, 1.0)
        validate_placement(res, batch, state)
        assert sorted(res.placements) == ["j0", "j1"]
        assert sorted(g for gpus in res.placements.values() for g in gpus) == [2, 5]


def test_priority_leaves_out_the_latest_job_of_each_class():
    """One free 4-GPU cell, a dedicated and an opportunistic class of 2-GPU gangs, no
    dedicated-cell penalties (every placement costs the same): priorities make leaving
    out d1 and o1 (ranks 2, 3) cheapest, so the two earliest gangs are placed."""
    topo = Topology(racks=1, servers_per_rack=1, gpus_per_server=8)
    free = np.zeros(8, dtype=bool)
    free[4:8] = True
    state = ClusterState(topo, free, pools=("a",))
    batch = [R("d0", 2, "a", True), R("o0", 2, "a"), R("d1", 2, "a", True), R("o1", 2, "a")]
    cost = CostModel(priority_weight=1, near_dedicated_penalty=0, far_from_pool_penalty=0)
    res = MinCostFlowPlacer(cost).place(batch, state, 1.0)
    validate_placement(res, batch, state)
    assert sorted(res.placements) == ["d0", "o0"]
    assert res.stats["flow_costs"][0] == placement_cost(res.placements, batch, state, cost)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), n_jobs=st.integers(1, 60), prio=st.integers(0, 3))
def test_many_jobs_few_classes_valid_and_bounded_by_the_flow(seed, n_jobs, prio):
    """Outputs stay valid and cost at least the flow's bound; the flow places as many GPUs as fit."""
    rng = np.random.default_rng(seed)
    topo = Topology(racks=2, servers_per_rack=2, gpus_per_server=8)
    free = rng.random(topo.n_gpus) < 0.6
    ded = np.repeat(np.where(rng.random(topo.n_servers) < 0.4, rng.integers(0, 2, topo.n_servers), -1), 8)
    state = ClusterState(topo, free, ded, ("a", "b"))
    cost = CostModel(priority_weight=prio)
    batch = [
        R(f"j{k}", int(rng.choice([1, 2, 4, 8])), str(rng.choice(["a", "b"])), bool(rng.integers(2)))
        for k in range(n_jobs)
    ]
    res = MinCostFlowPlacer(cost).place(batch, state, 1.0)
    validate_placement(res, batch, state)
    assert placement_cost(res.placements, batch, state, cost) >= res.stats["flow_costs"][0]
    classes = {(r.num_gpus, r.pool if r.dedicated else None) for r in batch}
    widths = {r.num_gpus for r in batch}
    # sink, one supply node per class, servers, at most one EC per target and width
    # (no (server, level) nodes for power-of-two widths): independent of n_jobs
    assert res.stats["nodes"][0] <= 1 + len(classes) + topo.n_servers * (1 + len(widths))


def test_dedicated_penalty_outweighs_small_priorities():
    """Same batch with the default penalties: a dedicated gang far from its pool costs 64
    more per GPU than the 1-per-rank priority gains, so both opportunistic gangs go."""
    topo = Topology(racks=1, servers_per_rack=1, gpus_per_server=8)
    free = np.zeros(8, dtype=bool)
    free[4:8] = True
    state = ClusterState(topo, free, pools=("a",))
    batch = [R("d0", 2, "a", True), R("o0", 2, "a"), R("d1", 2, "a", True), R("o1", 2, "a")]
    cost = CostModel(priority_weight=1)
    res = MinCostFlowPlacer(cost).place(batch, state, 1.0)
    validate_placement(res, batch, state)
    assert sorted(res.placements) == ["o0", "o1"]
