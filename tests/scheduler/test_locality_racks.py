"""Replays with 16- and 32-GPU gangs (rack cells) on a multi-rack topology, every cell-aware policy."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sia.data.synthetic import generate_workload
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import config_for_policy, simulate_cells
from sia.scheduler.registry import make_policy

WIDTHS = np.array([1, 2, 4, 8, 16, 32])


def rack_workload(seed: int, n_pools: int = 3, days: float = 0.4):
    """Pools of 32 GPUs (one rack each at 8 GPUs x 4 servers) with gangs of 1..32 GPUs, seeded."""
    jobs, pools = generate_workload("base", seed=seed, days=days, num_pools=n_pools, pool_gpus=32)
    rng = np.random.default_rng(seed)
    widths = rng.choice(WIDTHS, size=jobs.height, p=[0.3, 0.2, 0.15, 0.15, 0.1, 0.1])
    return jobs.with_columns(pl.Series("num_gpus", widths, dtype=pl.Int32)), pools


def gang_cells(res: pl.DataFrame) -> None:
    assert res["end_time"].is_not_nan().all()
    assert (res["start_time"] >= res["submit_time"]).all()


CASES = [("fcfs", ("buddy",)), ("maxmin", ("buddy", "mcf")), ("maxmin", ("buddy", "milp")),
         ("hived", ("buddy",)), ("hived", ("buddy", "hungarian")),
         ("sia-perfect", ("buddy",)), ("sia-perfect", ("buddy", "mcf"))]


@pytest.mark.parametrize(("policy", "chain"), CASES)
def test_rack_gangs_replay_with_invariants(policy, chain):
    jobs, pools = rack_workload(seed=11, days=0.15)
    assert {16, 32} <= set(jobs["num_gpus"].to_list())
    cfg = config_for_policy(LocalityConfig(chain=chain, debug=True), policy)
    # check_invariants: every gang in one cell of its level (a 16-GPU gang in one half rack,
    # a 32-GPU gang in one rack), no GPU double-booked, buddy safety after every operation
    res, summary = simulate_cells(jobs, pools, make_policy(policy), cfg, check_invariants=True)
    gang_cells(res)
    assert summary["placed_buddy"] + summary["placed_fallback"] >= jobs.height
    if policy == "fcfs":  # no sharing: each pool runs alone in its own rack, FCFS order
        for _, part in res.sort("submit_time").group_by("pool"):
            assert not part["opportunistic"].any()


def test_rack_gangs_with_preemption_and_adoption():
    # seed 6 (found by a scan of seeds 0-11): SIA preempts lent jobs and binds over a loan
    jobs, pools = rack_workload(seed=6, n_pools=4, days=0.1)
    cfg = LocalityConfig(preempt=True, preemptible_fraction=0.5, seed=6, lost_work_s=60.0,
                         restart_delay_s=30.0, debug=True)
    res, summary = simulate_cells(jobs, pools, make_policy("sia-perfect"), cfg,
                                  check_invariants=True)
    gang_cells(res)
    assert summary["preemptions"] > 0 and summary["adoptions"] > 0
    assert (res["end_time"] - res["start_time"] >= res["duration"] - 1e-6).all()


def test_rack_topology_is_multi_rack_and_16_gpu_cells_are_half_racks():
    from sia.scheduler.locality.cell_cluster import CellCluster

    jobs, pools = rack_workload(seed=11)
    c = CellCluster(pools["quota_gpus"].to_list(), pools["pool"].to_list(), LocalityConfig(),
                    widest=[32, 32, 32])
    assert c.topology.racks == 3 and c.topology.gpus_per_server * c.topology.servers_per_rack == 32
    assert all(cells == {32: 1} for name, cells in c.cell_quotas.items())
    c.reset()
    g16 = c.try_place(0, 0, 16, True)
    g32 = c.try_place(1, 1, 32, True)
    assert len(g16) == 16 and min(g16) % 16 == 0 and max(g16) - min(g16) == 15
    assert len(g32) == 32 and min(g32) % 32 == 0
    assert min(g16) // 32 != min(g32) // 32  # different racks (different pools' quota cells)
