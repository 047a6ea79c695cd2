"""Locality in the simulator: cell quotas, gangs in one cell, reservations, fallback chain, preemption."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.pipelines.locality_options import options_from_cli
from sia.scheduler.core.simulator import PolicyError
from sia.scheduler.locality.cell_cluster import CellCluster
from sia.scheduler.locality.config import PAD_POOL, LocalityConfig, derive_cell_quotas
from sia.scheduler.locality.replay import config_for_policy, simulate_cells
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.registry import make_policy


def table(rows, preemptible=None) -> pl.DataFrame:
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    if preemptible is not None:
        raw = raw.with_columns(pl.Series("preemptible", preemptible, dtype=pl.Boolean))
    return validate(raw)[0]


# ----------------------------------------------------------------------------- cell quotas
def test_cell_quotas_are_whole_servers_plus_binary_remainder():
    topo, quotas, pad = derive_cell_quotas([13, 8, 3], ["a", "b", "c"], LocalityConfig())
    assert quotas["a"] == {8: 1, 4: 1, 1: 1}
    assert quotas["b"] == {8: 1}
    assert quotas["c"] == {2: 1, 1: 1}
    # 24 GPUs -> 3 servers -> one rack of 4 servers; 8 padding GPUs pinned
    assert (topo.racks, topo.servers_per_rack, topo.gpus_per_server) == (1, 4, 8)
    assert pad == 8 and quotas[PAD_POOL] == {8: 1}
    # a small cluster shrinks its rack instead of padding
    topo2, _, pad2 = derive_cell_quotas([8, 8], ["a", "b"], LocalityConfig())
    assert (topo2.servers_per_rack, pad2) == (2, 0)


def test_cell_quota_that_cannot_hold_the_widest_job_is_rejected():
    with pytest.raises(ConfigError, match="pool 'c'.*4-GPU cell.*quota of 3"):
        derive_cell_quotas([8, 3], ["b", "c"], LocalityConfig(), widest=[8, 3])
    # a pool with 16-GPU jobs gets 16-GPU cells
    _, quotas, _ = derive_cell_quotas([32, 8], ["a", "b"], LocalityConfig(), widest=[16, 1])
    assert quotas["a"] == {16: 2}


def test_bad_locality_options_are_named():
    with pytest.raises(ConfigError, match="unknown stage 'simplex'"):
        options_from_cli(None, "buddy,simplex")
    with pytest.raises(ConfigError, match="--topology"):
        options_from_cli("gpus=6", None)
    cfg = options_from_cli("gpus=4,rack=2", "mcf,budget=0.25")
    assert cfg.chain == ("buddy", "mcf") and cfg.budget_s == 0.25 and cfg.gpus_per_server == 4
    assert options_from_cli(None, None) is None


# ----------------------------------------------------------------------------- cluster seam
def two_pools(**kw) -> CellCluster:
    return CellCluster([8, 8], ["a", "b"], LocalityConfig(debug=True, **kw), widest=[8, 8])


def test_reservation_that_cannot_be_met_blocks_opportunistic_until_cleared():
    c = two_pools(strict_buddies=False)
    gb = c.try_place(0, 1, 8, True)  # b's dedicated job binds a server
    c.allocate(0, 8, gb)
    g1 = c.try_place(1, 1, 1, False)  # b's opportunistic job in the other server
    c.allocate(1, 1, g1)
    assert c.topology.server_of_gpu(g1[0]) != c.topology.server_of_gpu(gb[0])
    assert not c.reserve(0, [8])  # a's server is partly held: the reservation stays pending
    assert c.blocked
    assert c.try_place(2, 1, 1, False) is None  # 6 GPUs free, but lending is blocked
    c.clear_reservations()
    assert not c.blocked
    g2 = c.try_place(2, 1, 1, False)
    assert g2 is not None
    c.allocate(2, 1, g2)
    c.check()


@pytest.mark.parametrize("solver", ["mcf", "hungarian", "milp"])
def test_chain_falls_back_when_buddy_refuses_and_places_validly(solver):
    strict = two_pools(spare_full_pools=False)
    g = strict.try_place(0, 0, 1, True)  # a binds one server; the other is its buddy
    strict.allocate(0, 1, g)
    assert strict.try_place(1, 1, 4, False) is None  # buddy only: kept out of the buddy server
    assert strict.stats.refused == 1
    c = two_pools(chain=("buddy", solver), spare_full_pools=False)
    c.allocate(0, 1, c.try_place(0, 0, 1, True))
    g1 = c.try_place(1, 1, 4, False)
    assert g1 is not None and len(g1) == 4
    c.allocate(1, 4, g1)
    assert c.stats.fallback_by == {solver: 1}
    assert min(g1) % 4 == 0 and max(g1) - min(g1) == 3  # one aligned 4-GPU cell
    assert c.topology.server_of_gpu(g1[0]) != c.topology.server_of_gpu(g[0])
    c.check()  # buddy invariants, one cell per gang, no double booking
    c.release(1, 4)
    c.release(0, 1)
    c.check()
    assert c.buddy.free_cells(c.topology.top_level) == [0]  # everything merged back


def test_buddy_of_a_pool_that_cannot_grow_is_lendable():
    c = two_pools()  # spare_full_pools: a's whole quota is its bound server
    c.allocate(0, 1, c.try_place(0, 0, 1, True))
    g = c.try_place(1, 1, 4, False)
    assert g is not None and c.stats.buddy == 2
    c.allocate(1, 4, g)
    c.check()
    # a pool with quota left to bind keeps its buddy server free of opportunistic jobs
    big = CellCluster([16, 16], ["a", "b"], LocalityConfig(debug=True), widest=[8, 8])
    big.allocate(0, 1, big.try_place(0, 0, 1, True))
    g = big.try_place(1, 1, 8, False)
    assert g is not None and big.topology.server_of_gpu(g[0]) >= 2


def test_policy_without_locality_support_gets_a_clear_error(fungible_only):
    jobs = table([("j1", "a", 0.0, 10.0, 1)])
    with pytest.raises(PolicyError, match="try_place"):
        simulate_cells(jobs, make_pools({"a": 8}), make_policy(fungible_only), LocalityConfig())


# ----------------------------------------------------------------------------- invariants
POLICIES = ["fcfs", "maxmin", "hived", "sia-perfect"]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_pools=st.integers(2, 3),
       chain=st.sampled_from([("buddy",), ("buddy", "mcf"), ("buddy", "hungarian")]),
       preempt=st.booleans())
# SIA lent a job it had just evicted for an owner's head, in the same decision (still running)
@example(seed=9999, n_pools=3, chain=("buddy",), preempt=True)
def test_every_gang_sits_in_one_cell_and_buddy_stays_safe(seed, n_pools, chain, preempt):
    jobs, pools = generate_workload("base", seed=seed, days=0.5, num_pools=n_pools)
    for name in POLICIES:
        cfg = LocalityConfig(chain=chain, strict_buddies=name != "hived", preempt=preempt,
                             preemptible_fraction=0.5 if preempt else 0.0, seed=seed,
                             lost_work_s=60.0, restart_delay_s=30.0)
        # check_invariants: CellCluster.check after every event (one cell per gang, no GPU
        # double-booked) and the buddy allocator in debug mode (safety after every operation)
        res, summary = simulate_cells(jobs, pools, make_policy(name), cfg, check_invariants=True)
        assert res["end_time"].is_not_nan().all()
        assert (res["end_time"] - res["start_time"] >= res["duration"] - 1e-6).all()
        assert summary["placed_buddy"] + summary["placed_fallback"] >= jobs.height


# ----------------------------------------------------------------------------- preemption
class BlindForecaster:
    """Predicts no arrivals and the shortest duration bin for every job (so SIA lends everything)."""

    def will_jobs_arrive(self, view, windows_s):
        return np.zeros((view.n_pools, len(windows_s)), dtype=bool)

    def new_load_estimate(self, view, windows_s):
        return np.zeros((view.n_pools, len(windows_s)))

    def duration_bins(self, view, job_indices):
        return np.zeros(len(job_indices), dtype=np.int64)


def preemption_case(preempt: bool):
    jobs = table([("b1", "b", 0.0, 100.0, 8), ("b2", "b", 0.0, 10_000.0, 8),
                  ("a1", "a", 50.0, 100.0, 8)], preemptible=[False, True, False])
    cfg = LocalityConfig(strict_buddies=False, preempt=preempt, lost_work_s=30.0,
                         restart_delay_s=20.0)
    pol = SiaPolicy(BlindForecaster(), adaptation=False, risk=None)
    res, summary = simulate_cells(jobs, make_pools({"a": 8, "b": 8}), pol, cfg,
                                  check_invariants=True)
    return {r["job_id"]: r for r in res.iter_rows(named=True)}, summary


def test_preemption_gives_the_owner_its_cells_and_charges_the_cost():
    rows, summary = preemption_case(preempt=True)
    assert rows["b2"]["start_time"] == 0.0  # lent onto a's idle server
    assert rows["a1"]["start_time"] == 50.0  # a gets its server back at once
    # b2 ran 50 s, loses 30 s of them, restarts when b1 frees b's server (t=100) + 20 s delay
    assert rows["b2"]["end_time"] == pytest.approx(100.0 + (10_000.0 - 50.0 + 30.0) + 20.0)
    assert summary["preemptions"] == 1 and summary["preempted_jobs"] == 1


def test_without_preemption_the_owner_waits():
    rows, summary = preemption_case(preempt=False)
    # quota cells are virtual: a gets a server only when b1 frees one; b2 is never stopped
    assert rows["a1"]["start_time"] == 100.0
    assert rows["b2"]["end_time"] == 10_000.0
    assert summary["preemptions"] == 0


class OnlyPoolAArrives(BlindForecaster):
    """Predicts 8 GPUs of new load for pool index 0 ('a') in every window, nothing elsewhere."""

    def will_jobs_arrive(self, view, windows_s):
        out = np.zeros((view.n_pools, len(windows_s)), dtype=bool)
        out[0] = True
        return out

    def new_load_estimate(self, view, windows_s):
        out = np.zeros((view.n_pools, len(windows_s)))
        out[0] = 8.0
        return out


def lending_case(preempt: bool, cost_s: float = 0.0):
    jobs = table([("b1", "b", 0.0, 1000.0, 8), ("b2", "b", 0.0, 5000.0, 8),
                  ("b3", "b", 0.0, 5000.0, 8), ("b4", "b", 50.0, 5000.0, 8),
                  ("a1", "a", 100.0, 100.0, 8)], preemptible=[False, True, True, True, False])
    cfg = LocalityConfig(strict_buddies=False, preempt=preempt, lost_work_s=cost_s)
    pol = SiaPolicy(OnlyPoolAArrives(), adaptation=False, loan_ramp=None, risk=None)  # the credit alone
    res, summary = simulate_cells(jobs, make_pools({"a": 8, "b": 8, "c": 8, "d": 8}), pol, cfg,
                                  check_invariants=True)
    return {r["job_id"]: r for r in res.iter_rows(named=True)}, summary


def test_preemptible_running_jobs_let_sia_lend_what_it_would_reserve():
    # a's predicted 8 GPUs keep the last free server idle: b4 waits for b's own server
    rows, _ = lending_case(preempt=False)
    assert rows["b2"]["start_time"] == rows["b3"]["start_time"] == 0.0
    assert rows["b4"]["start_time"] == 1000.0 and rows["a1"]["start_time"] == 100.0
    # b2 and b3 (16 preemptible GPUs) can be taken back: the reservation is covered, b4 is lent
    rows, summary = lending_case(preempt=True)
    assert rows["b4"]["start_time"] == 50.0
    assert rows["a1"]["start_time"] == 100.0  # a still starts on time, by preempting b4
    assert summary["preemptions"] == 1
    # b4 ran 50 s; lent again when a1 ends at t=200 (b2, b3 still cover a's reservation)
    assert rows["b4"]["end_time"] == pytest.approx(200.0 + 5000.0 - 50.0)
    # a preemption costing more than the window (5 min, 1 h, 12 h) buys no lending
    rows, _ = lending_case(preempt=True, cost_s=13 * 3600.0)
    assert rows["b4"]["start_time"] == 1000.0


# ----------------------------------------------------------------------------- zero slowdown
def slowed(jobs, pools, cfg, check=True):
    """(jobs ending > 1 s later under sia-perfect than FCFS, FCFS result, SIA result), all with cells."""
    base, _ = simulate_cells(jobs, pools, make_policy("fcfs"), cfg)
    res, _ = simulate_cells(jobs, pools, make_policy("sia-perfect"), cfg, check_invariants=check)
    m = base.join(res, on="job_id", suffix="_sia")
    return m.filter(pl.col("end_time_sia") > pl.col("end_time") + 1.0), base, res


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_pools=st.integers(2, 4))
def test_sia_perfect_never_slows_a_job_when_every_gang_is_one_gpu(seed, n_pools):
    """With 1-GPU gangs a pool's layout cannot fragment, and zero slowdown holds with cells too."""
    jobs, pools = generate_workload("base", seed=seed, days=1.0, num_pools=n_pools)
    jobs = jobs.with_columns(pl.lit(1, dtype=pl.Int32).alias("num_gpus"))
    assert slowed(jobs, pools, LocalityConfig())[0].height == 0


def test_sia_perfect_can_slow_a_job_through_in_pool_fragmentation():
    """Zero slowdown does NOT hold with cells and mixed widths: a documented counterexample.

    Base workload, seed 5, 4 days: FCFS starts q3's 4-GPU job p3-000028 at
    t=57203 s while q3 runs two 1-GPU jobs (p3-000021, p3-000024) that sit
    in one half of its server; under SIA the *same two jobs* run at that
    time, but sit in different halves (the pool's earlier dedicated jobs
    differed, since SIA sent some of them elsewhere opportunistically), so
    no 4-GPU cell is free and the job waits ~3 h, with no opportunistic job
    running anywhere. Buddy placement is history dependent, so FCFS on a
    subset of a pool's jobs is not always earlier than FCFS on all of them
    (SIA's zero-slowdown argument needs that monotonicity). Repairing it
    would take migration (Tesserae's relabeling) within a pool.
    """
    jobs, pools = generate_workload("base", seed=5, days=4.0)
    bad, base, res = slowed(jobs, pools, LocalityConfig(), check=False)
    assert bad.height > 0
    first = bad.sort("submit_time").row(0, named=True)
    assert first["job_id"] == "p3-000028" and not first["opportunistic_sia"]
    t = first["start_time"]

    def running(tab):
        return tab.filter((pl.col("start_time") <= t) & (pl.col("end_time") > t))

    same_pool = {r: set(running(r_).filter(pl.col("pool") == "q3")["job_id"])
                 for r, r_ in (("fcfs", base), ("sia", res))}
    assert same_pool["fcfs"] - {"p3-000028"} == same_pool["sia"] == {"p3-000021", "p3-000024"}
    assert not running(res)["opportunistic"].any()


def test_simulate_maybe_cells_dispatches_and_hived_relaxes_buddies():
    from sia.scheduler.locality.replay import config_for_policy, simulate_maybe_cells

    jobs = table([("j1", "a", 0.0, 10.0, 2), ("j2", "b", 5.0, 10.0, 4)])
    pools = make_pools({"a": 8, "b": 8})
    fungible = simulate_maybe_cells(jobs, pools, make_policy("fcfs"), None)
    cells = simulate_maybe_cells(jobs, pools, make_policy("fcfs"), LocalityConfig(),
                                 check_invariants=True)
    assert fungible["start_time"].to_list() == cells["start_time"].to_list() == [0.0, 5.0]
    assert not config_for_policy(LocalityConfig(), "hived").strict_buddies
    assert config_for_policy(LocalityConfig(), "sia").strict_buddies


def test_strict_reservations_block_lending_when_the_pools_cells_are_fragmented():
    """Pool a (one 8-GPU server) holds GPUs 0 and 2: 6 GPUs of quota left, but no free 2-GPU cell.

    Reserving [4, 2]: the 4-GPU cell (GPUs 4-7) is met; the 2-GPU cell fits a's GPU quota
    (2 + 4 + 2 = 8) but not its cells. By default it is dropped as over quota and b may borrow;
    with strict_reservations it is pending and b's opportunistic job is refused (SIA 5.5).
    A cell beyond the GPU quota ([4, 4]: 2 + 4 + 4 = 10 > 8) is dropped either way.
    """
    for strict in (False, True):
        cl = CellCluster([8, 8], ["a", "b"], LocalityConfig(strict_reservations=strict, debug=True))
        cl.reset()
        for j in ("j0", "j1", "j2"):
            cl.buddy.allocate_dedicated(j, "a", 1)
        cl.buddy.release("j1")
        assert cl.buddy.quota_gpus_left("a") == 6
        met = cl.reserve(0, [4, 2])
        assert met is (not strict) and cl.blocked is strict
        got = cl.try_place(10, 1, 1, dedicated=False)
        assert (got is None) is strict
        if got is not None:
            cl.grants.pop(10)
            cl.buddy.release("10")
        cl.clear_reservations()
        assert not cl.blocked
        cl.buddy.allocate_dedicated("j3", "a", 1)  # GPUs 0, 1, 2 held: 5 left, as 1 + 4
        assert cl.reserve(0, [4, 4]) is True and not cl.blocked  # second 4: beyond the quota
        cl.clear_reservations()


# ----------------------------------------------------------------------------- migration
def fragmented_pool(preemptible, migrate=True):
    """Pool a (one 8-GPU server) runs 1-GPU jobs 0 and 4 at GPUs 0 and 4 (jobs 1-3 left)."""
    c = CellCluster([8, 8], ["a", "b"], LocalityConfig(debug=True, migrate=migrate), widest=[8, 8],
                    preemptible=np.array(preemptible))
    c.reset()
    for j in range(5):
        c.allocate(j, 1, c.try_place(j, 0, 1, True))
    for j in (1, 2, 3):
        c.release(j, 1)
    assert {j: g.tolist() for j, g in c.held.items()} == {0: [0], 4: [4]}
    return c


def test_migration_moves_one_preemptible_job_so_a_4_gpu_gang_starts():
    c = fragmented_pool([True, False, False, False, False, False])
    g = c.try_place(5, 0, 4, True)
    assert g == (0, 1, 2, 3)  # job 0 leaves the first half
    assert c.take_moves() == [(0, False, (5,))]  # best fit: next to job 4
    assert c.stats.migrations == 1 and c.stats.migration_steps == 1
    assert 0 not in c.preemptible_running()
    # the simulator's side: stop job 0, restart it on its new GPU, start job 5
    c.release(0, 1)
    c.allocate(0, 1, (5,))
    c.allocate(5, 4, g)
    c.check()
    assert c.owner[:8].tolist() == [5, 5, 5, 5, 4, 0, -1, -1]


def test_migration_moves_nothing_when_only_non_preemptible_jobs_fragment():
    c = fragmented_pool([False] * 6)
    assert c.try_place(5, 0, 4, True) is None
    assert c.take_moves() == [] and c.stats.migrations == 0
    c.check()
    off = fragmented_pool([True] * 6, migrate=False)  # option off: no move either
    assert off.try_place(5, 0, 4, True) is None and off.stats.migrations == 0


def migration_case(migrate: bool, delay_s: float = 20.0, lost_s: float = 30.0):
    # a1..a3 end at t=50; a0 (GPU 0, preemptible) and a4 (GPU 4) fragment a's server;
    # a5 (4 GPUs) arrives at t=100
    jobs = table([("a0", "a", 0.0, 1000.0, 1), ("a1", "a", 0.0, 50.0, 1),
                  ("a2", "a", 0.0, 50.0, 1), ("a3", "a", 0.0, 50.0, 1),
                  ("a4", "a", 0.0, 2000.0, 1), ("a5", "a", 100.0, 300.0, 4)],
                 preemptible=[True, False, False, False, False, False])
    cfg = LocalityConfig(migrate=migrate, lost_work_s=lost_s, restart_delay_s=delay_s)
    res, summary = simulate_cells(jobs, make_pools({"a": 8}), make_policy("fcfs"), cfg,
                                  check_invariants=True, record_placements=True)
    return {r["job_id"]: r for r in res.iter_rows(named=True)}, summary


def test_migration_in_a_replay_starts_the_gang_and_charges_the_move():
    rows, summary = migration_case(migrate=False)
    assert rows["a5"]["start_time"] == 1000.0  # waits for a0 to end
    rows, summary = migration_case(migrate=True)
    assert rows["a5"]["start_time"] == 100.0
    assert rows["a0"]["start_time"] == 0.0  # first start kept
    assert rows["a0"]["end_time"] == pytest.approx(1000.0 + 30.0 + 20.0)  # lost work + restart
    assert summary["migrations"] == 1 and summary["migrated_jobs"] == 1
    assert summary["preempted_jobs"] == 0  # a move is not counted as a preemption
    assert summary["placements"]["a0"] == (5,) and summary["placements"]["a5"] == (0, 1, 2, 3)
    rows, summary = migration_case(migrate=True, delay_s=0.0)
    assert rows["a0"]["end_time"] == pytest.approx(1030.0)  # a0 had run 100 s: loses 30
    # a move that costs nothing is done by the cluster alone: same times, no stop
    rows, summary = migration_case(migrate=True, delay_s=0.0, lost_s=0.0)
    assert rows["a5"]["start_time"] == 100.0 and rows["a0"]["end_time"] == 1000.0
    assert summary["migrations"] == 1 and summary["placements"]["a0"] == (5,)


def test_a_pure_renaming_needs_no_migration():
    """A target that is a mirror image of the current layout moves nobody (Tesserae: cost 0)."""
    from sia.scheduler.locality.migration import relabel_in_cells

    c = fragmented_pool([True] * 6)
    current = {str(j): (a.level, a.index) for j, a in c.allocs.items()}
    mirrored = {j: (lv, (c.topology.cell_gpus(3 - lv) - 1) - i) for j, (lv, i) in current.items()}
    out = relabel_in_cells(current, mirrored, c.buddy.domain_cells("a"))
    assert out.cost == 0 and out.migrated == [] and out.relabeled == current


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), n_pools=st.integers(2, 3), policy=st.sampled_from(POLICIES),
       delay=st.sampled_from([0.0, 30.0]))
def test_migration_keeps_every_invariant_and_the_running_jobs(seed, n_pools, policy, delay):
    """After every migration step: buddy invariants and cell checks hold; moves keep jobs and widths."""
    jobs, pools = generate_workload("base", seed=seed, days=0.5, num_pools=n_pools)
    cfg = config_for_policy(LocalityConfig(migrate=True, preemptible_fraction=0.6, seed=seed,
                                           lost_work_s=60.0, restart_delay_s=delay), policy)
    seen = {"steps": 0}
    real = CellCluster._migrate

    def checked(self, job, pool, num_gpus, dedicated):
        before = {j: (a.num_gpus, a.kind) for j, a in self.buddy.allocations.items()}
        out = real(self, job, pool, num_gpus, dedicated)
        self.buddy.check_invariants()  # no GPU double-booked, gangs in their cells, safety
        after = {j: (a.num_gpus, a.kind) for j, a in self.buddy.allocations.items()}
        if out is None:
            assert after == before
        else:
            seen["steps"] += 1
            assert after == {**before, str(job): (num_gpus, out.kind)}
            cells = [(a.level, a.index) for a in self.buddy.allocations.values()]
            assert len(set(cells)) == len(cells)
        return out

    CellCluster._migrate = checked
    try:
        res, summary = simulate_cells(jobs, pools, make_policy(policy), cfg, check_invariants=True)
    finally:
        CellCluster._migrate = real
    assert seen["steps"] == summary["migration_steps"]
    assert res["end_time"].is_not_nan().all()
    assert (res["end_time"] - res["start_time"] >= res["duration"] - 1e-6).all()


def test_buddy_relocate_moves_cells_unbinds_an_emptied_cell_and_refuses_busy_targets():
    from sia.scheduler.locality.buddy import BuddyAllocator, CannotAllocate
    from sia.scheduler.locality.topology import Topology

    topo = Topology(racks=1, servers_per_rack=2)
    b = BuddyAllocator(topo, {"a": {8: 2}}, debug=True)
    b.allocate_dedicated("x", "a", 4)  # binds server 0: GPUs 0-3
    b.allocate_dedicated("y", "a", 4)  # GPUs 4-7
    b.allocate_dedicated("z", "a", 2)  # binds server 1: GPUs 8-9
    b.release("y")
    with pytest.raises(CannotAllocate, match="not free"):
        b.relocate({"z": 0})  # GPUs 0-1 are x's
    assert b.allocation("z").index == 4  # nothing changed
    # z moves next to x; server 1 holds no dedicated cell any more and is unbound
    new = b.relocate({"z": 2}, new=("w", "a", "dedicated", 8, 1))
    assert b.allocation("z").gpus == (4, 5) and new.gpus == tuple(range(8, 16))
    assert b.usage("a")["bound"][3] == 2 and b.usage("a")["dedicated"] == [0, 1, 1, 1, 0]
    b.release("w")
    assert b.domain_cells("a") == [(3, 0)] and b.domain_cells() == [(3, 1)]
    b.relocate({"z": 3})  # within the server: GPUs 6-7
    assert b.allocation("z").gpus == (6, 7) and b.free_cells(1, "a") == [2]
    b.check_invariants()


def test_migration_repairs_the_in_pool_counterexample_when_its_jobs_may_move():
    """The counterexample above, with every job preemptible and free moves, FCFS migrating too.

    q3's 1-GPU jobs can be moved into one half of its server, so p3-000028 (4 GPUs)
    is no longer held up, and no job of the workload ends later than under FCFS.
    With 30% preemptible (seed 5) both 1-GPU jobs happen to be non-preemptible and
    the job still waits.
    """
    jobs, pools = generate_workload("base", seed=5, days=4.0)
    cfg = LocalityConfig(preemptible_fraction=1.0, migrate=True)
    bad, base, res = slowed(jobs, pools, cfg, check=False)
    assert bad.height == 0
    row = res.filter(pl.col("job_id") == "p3-000028").row(0, named=True)
    assert row["start_time"] == row["submit_time"]


def test_migrate_for_limits_which_gangs_may_move_others():
    c = fragmented_pool([True] * 6)
    c.config = LocalityConfig(debug=True, migrate=True, migrate_for=["opportunistic"])
    assert c.try_place(5, 0, 4, True) is None and c.stats.migrations == 0
    assert LocalityConfig(migrate_for=["dedicated"]).migrate_for == ("dedicated",)
    with pytest.raises(ConfigError, match="migrate_for"):
        LocalityConfig(migrate_for=("everything",))
    with pytest.raises(ConfigError, match="migrate_for"):
        LocalityConfig(migrate_for="dedicated")
