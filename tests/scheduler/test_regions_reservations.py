"""Global reservations (issue 35): the plan, the share ledger and the simulator mode."""

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
from sia.scheduler.policies.sia.policy import DEFAULT_WINDOWS_S
from sia.scheduler.regions import reserved_policy
from sia.scheduler.regions.global_policy import layout_for_pools
from sia.scheduler.regions.model import PoolData, Region, RegionLayout, RegionsError
from sia.scheduler.regions.reservations import (
    ReservationPlan,
    ReservationWeights,
    ShareLedger,
    home_shares,
    plan_reservations,
    round_shares,
)
from sia.scheduler.regions.reserved_policy import ReservationRegionPolicy
from sia.scheduler.registry import make_policy

from .conftest import BlindForecaster

H = 3600.0
ALL = np.ones((2, 2), dtype=bool)


def table(rows: list[tuple]) -> pl.DataFrame:
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


# ----------------------------------------------------------------------------- the ledger
def test_a_share_moves_only_as_the_jobs_holding_it_end():
    # pools a (home A) and b (home B), 4 GPUs each; the plan swaps 2 GPUs of share
    led = ShareLedger(np.array([4, 4]), np.array([4, 4]), np.array([[4, 0], [0, 4]]))
    led.set_target(np.array([[2, 2], [2, 2]]))
    # b's jobs hold all of B: nothing can move (a could give 2 in A, but B has no room)
    assert not led.step(np.array([[2, 0], [0, 4]]), ALL).any()
    assert led.shares.tolist() == [[4, 0], [0, 4]]
    # one of b's jobs (1 GPU) ends: one GPU of each share moves, no more
    assert led.step(np.array([[2, 0], [0, 3]]), ALL).all()
    assert led.shares.tolist() == [[3, 1], [1, 3]]
    assert led.step(np.array([[2, 0], [0, 2]]), ALL).all()
    assert led.shares.tolist() == [[2, 2], [2, 2]] and led.settled and led.moved_gpus == 4


def test_a_share_never_moves_into_a_copy_not_yet_usable():
    led = ShareLedger(np.array([4, 4]), np.array([4, 4]), np.array([[4, 0], [0, 4]]))
    led.set_target(np.array([[2, 2], [2, 2]]))
    usable = np.array([[True, False], [True, True]])  # a's copy in B is still transferring
    assert not led.step(np.zeros((2, 2), dtype=np.int64), usable).any()
    assert led.step(np.zeros((2, 2), dtype=np.int64), ALL).all()
    assert led.settled


def test_free_gpus_of_a_region_take_a_share_without_a_swap():
    # region B has 2 GPUs no share holds: a moves 2 there without anyone leaving B
    led = ShareLedger(np.array([4, 2]), np.array([4, 4]), np.array([[4, 0], [0, 2]]))
    led.set_target(np.array([[2, 2], [0, 2]]))
    led.step(np.zeros((2, 2), dtype=np.int64), ALL)
    assert led.shares.tolist() == [[2, 2], [0, 2]]
    with pytest.raises(RegionsError, match="target shares"):
        led.set_target(np.array([[0, 4], [0, 2]]))  # B over its 4 GPUs


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n_p=st.integers(1, 5), n_r=st.integers(1, 4))
def test_ledger_steps_keep_both_invariants_and_never_take_held_gpus(data, n_p, n_r):
    quota = np.array(data.draw(st.lists(st.integers(1, 6), min_size=n_p, max_size=n_p)))

    def random_shares():
        s = np.zeros((n_p, n_r), dtype=np.int64)
        for p in range(n_p):
            cuts = sorted(data.draw(st.lists(st.integers(0, int(quota[p])), min_size=n_r - 1,
                                             max_size=n_r - 1)))
            s[p] = np.diff([0, *cuts, int(quota[p])])
        return s

    start, target = random_shares(), random_shares()
    gpus = np.maximum(start.sum(axis=0), target.sum(axis=0))
    led = ShareLedger(quota, gpus, start)
    led.set_target(target)
    for _ in range(4):
        used = np.array([[data.draw(st.integers(0, int(v))) for v in row] for row in led.shares])
        usable = np.array(data.draw(st.lists(st.booleans(), min_size=n_p * n_r,
                                             max_size=n_p * n_r))).reshape(n_p, n_r)
        before = led.shares.copy()
        led.step(used, usable)
        s = led.shares
        assert (s.sum(axis=1) == quota).all() and (s.sum(axis=0) <= gpus).all()
        assert (s >= np.minimum(before, used)).all()  # what running jobs hold stays
        grew = s > before
        assert (usable[grew]).all() and (s[grew] <= target[grew]).all()
    led.step(np.zeros_like(start), np.ones_like(start, dtype=bool))
    assert led.settled  # nothing held, every copy usable: the target is reached


# ----------------------------------------------------------------------------- the plan
def two_region_layout(sizes=None, storage=None):
    return layout_for_pools({"a": "A", "b": "B", "c": "B"}, {"a": 4, "b": 2, "c": 2},
                            sizes=sizes, storage=storage)


def test_the_plan_balances_demand_with_shares_and_keeps_quotas():
    lay = two_region_layout()
    quota = np.array([4, 2, 2])
    demand = np.array([4.0, 0.0, 0.0])  # a is busy, b and c idle: A at 1.0, B at 0
    w = ReservationWeights(move_weight=0.05, churn_weight=0.05)
    plan = plan_reservations(lay, quota, demand, lay.initial_replicas().held(),
                             home_shares(lay, quota), weights=w, min_share=[2, 1, 1])
    assert plan.status == "optimal" and not plan.kept_previous
    assert (plan.shares.sum(axis=1) == quota).all() and (plan.shares.sum(axis=0) <= 4).all()
    # balanced: half of a's demand in each region, idle b and c take A's rest
    assert plan.shares[0].tolist() == [2, 2]
    assert plan.region_load(demand, quota).tolist() == [2.0, 2.0]
    # one idle pool moves its whole share to A (a split one would keep two copies)
    assert plan.held[0].all() and plan.moved == 2.0 and plan.churn == 4
    assert sorted(plan.shares[1:].tolist()) == [[0, 2], [2, 0]]


def test_the_widest_job_fits_every_share_of_its_pool():
    lay = two_region_layout()
    quota = np.array([4, 2, 2])
    w = ReservationWeights(move_weight=0.05, churn_weight=0.05)
    plan = plan_reservations(lay, quota, [4.0, 0.0, 0.0], lay.initial_replicas().held(),
                             home_shares(lay, quota), weights=w, min_share=[4, 1, 1])
    assert plan.shares[0].tolist() == [4, 0]  # a's 4-GPU jobs cannot run on a split share


def _foothold_plan(bonus, foothold_share=(1, 1), storage=None):
    # a (quota 4, widest job 2) at home in A (4 GPUs), b (4, widest 1) in B (4); both as busy
    # (4 GPUs each): home is balanced, and any move only costs. Sizes 1 (of 2 in all)
    lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 4, "b": 4}, storage=storage)
    quota = np.array([4, 4])
    return plan_reservations(lay, quota, [4.0, 4.0], lay.initial_replicas().held(),
                             home_shares(lay, quota), min_share=[2, 1],
                             foothold=None if bonus is None else [[0.0, bonus], [0.0, 0.0]],
                             foothold_share=foothold_share)


def test_a_foothold_bonus_buys_a_small_share_where_it_beats_its_costs():
    # a foothold of a in B (share 1, its widest short job) makes b give up 1 GPU in A, so
    # both copy (moved 1 of 2 each: 1.0), store 4 copies (0.01 * 2) and move 2 GPUs of
    # share each way (churn 0.5 * 4 / 16 = 0.125); balance stays (both regions at 4): the
    # plan costs 1.145 - bonus against home's 0.01, so a bonus above 1.135 buys it
    assert _foothold_plan(None).shares.tolist() == [[4, 0], [0, 4]]
    assert _foothold_plan(1.1).shares.tolist() == [[4, 0], [0, 4]]
    plan = _foothold_plan(1.2)
    assert plan.shares.tolist() == [[3, 1], [1, 3]] and plan.held.all()
    assert plan.objective == pytest.approx(1.145 - 1.2)
    assert plan.churn == 2 and plan.moved == 2.0


def test_a_foothold_share_is_small_only_where_the_bonus_is():
    # without the small foothold share, a's copy in B needs a's widest job (2): the bonus
    # buys 2 GPUs there (moved 1.0, stored 0.02, churn 0.5 * 8 / 16: 1.27 - 1.6 < 0.01)
    plan = _foothold_plan(1.6, foothold_share=None)
    assert plan.shares.tolist() == [[2, 2], [2, 2]]
    assert plan.objective == pytest.approx(1.27 - 1.6)
    # with it, the smaller foothold is cheaper (1.145 - 1.6); a's share at home stays at
    # least its widest job (no bonus there)
    assert _foothold_plan(1.6).shares.tolist() == [[3, 1], [1, 3]]
    assert _foothold_plan(1.6, foothold_share=(3, 1)).shares.tolist() == [[2, 2], [2, 2]]


def test_no_foothold_beyond_the_storage_limits():
    # each region holds one data set: a copy of a in B leaves no room for b's there, so a
    # large bonus buys a whole swap, never a small foothold beside b's copy
    plan = _foothold_plan(50.0, storage={"A": 1.0, "B": 1.0})
    assert plan.held.sum(axis=0).tolist() == [1, 1]
    assert plan.shares.tolist() == [[0, 4], [4, 0]]
    # a bonus of 1.2 buys the foothold with room (1.145, above), not a swap (1.0 moved, 0.01
    # stored, churn 0.5 * 16 / 16: 1.51); without room nothing moves
    plan = _foothold_plan(1.2, storage={"A": 1.0, "B": 1.0})
    assert plan.shares.tolist() == [[4, 0], [0, 4]] and not plan.held[0, 1]


def test_a_bad_foothold_bonus_is_refused():
    with pytest.raises(RegionsError, match="foothold"):
        _foothold_plan(-1.0)


def test_an_infeasible_plan_keeps_the_last_one_and_says_so():
    lay = two_region_layout(storage={"A": 0.0, "B": 0.0})  # no room for any data
    quota = np.array([4, 2, 2])
    prev = home_shares(lay, quota)
    plan = plan_reservations(lay, quota, [1.0, 1.0, 1.0], lay.initial_replicas().held(), prev)
    assert plan.kept_previous and plan.status == "infeasible"
    assert "previous plan is kept" in plan.message and (plan.shares == prev).all()


def test_rounding_keeps_rows_and_region_limits():
    frac = np.array([[1.5, 1.5, 1.0], [0.5, 0.5, 1.0]])
    out = round_shares(frac, np.array([4, 2]), np.array([2, 2, 2]))
    assert out.sum(axis=1).tolist() == [4, 2] and (out.sum(axis=0) <= 2).all()
    assert (np.abs(out - frac) < 1).all()


# ----------------------------------------------------------------------------- the simulator
def fixed_plan(shares_by_call):
    """A stand-in for plan_reservations returning the given target shares (layout order)."""
    calls = []

    def plan(layout, quota, demand, prev_held, prev_shares, keep=None, **kw):
        s = np.array(shares_by_call[min(len(calls), len(shares_by_call) - 1)])
        calls.append(kw)
        return ReservationPlan("optimal", prev_held | (s > 0), s, 0.0, 0.0, 0, 0.0, False, "")
    return plan


def test_in_the_simulator_a_share_moves_when_the_job_holding_it_ends(monkeypatch):
    # a and c (2 GPUs each) share region A, b has B (4). The plan at 30 min swaps c's share
    # in A with half of b's in B; b1 holds all of B until 1 h, so the swap waits until then.
    # At 2 h, c2 queues where c's share now is (B) and b2 beside it
    home = [[2, 0], [0, 4], [2, 0]]
    monkeypatch.setattr(reserved_policy, "plan_reservations",
                        fixed_plan([home, [[2, 0], [2, 2], [0, 2]]]))
    # (a1 arrives at 30 min so that a decision plans then; b and c have data in both regions)
    rows = [("b1", "b", 0.0, H, 4), ("a1", "a", H / 2, 600.0, 1), ("b2", "b", 2 * H, H, 2),
            ("c2", "c", 2 * H, H, 2)]
    quotas = {"a": 2, "b": 4, "c": 2}
    lay = layout_for_pools({"a": "A", "b": "B", "c": "A"}, quotas,
                           replicas={"b": ["B", "A"], "c": ["A", "B"]})
    pol = ReservationRegionPolicy(lay, lambda: make_policy("sia-perfect"),
                                  inner_name="sia-perfect", period_s=H / 2)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert got == {"b1": 0.0, "a1": H / 2, "b2": 2 * H, "c2": 2 * H}
    assert [(t, s.tolist()) for t, s in pol.share_log] == [(0.0, home),
                                                           (H, [[2, 0], [2, 2], [0, 2]])]
    assert pol.stats["plans"][1]["t"] == H / 2  # planned at 30 min, moved at 1 h
    assert pol.job_regions()["region"] == ["B", "A", "B", "B"]
    assert not res["opportunistic"].any()  # c2 runs as an owner in B, not as a guest
    facts = pol.facts()
    assert facts["ran_outside_home"] == 1 and facts["share_gpus_moved"] == 4


def test_in_the_simulator_a_share_waits_for_its_copy(monkeypatch):
    # a (A, 2) and c (A, 2) share region A; b has B (4). The plan moves a's whole share to B,
    # where a's data takes 2 h to copy (size 1 at 1/7200 per second): a's share stays in A
    # until then, and a2 (arriving at 1 h, a1 still running) waits for it
    monkeypatch.setattr(reserved_policy, "plan_reservations",
                        fixed_plan([[[0, 2], [2, 2], [2, 0]]]))
    rows = [("a1", "a", 0.0, 2 * H, 2), ("a2", "a", H, H, 2), ("b1", "b", 0.0, 60.0, 1)]
    lay = layout_for_pools({"a": "A", "b": "B", "c": "A"}, {"a": 2, "b": 4, "c": 2},
                           transfer_rate=1 / 7200)
    pol = ReservationRegionPolicy(lay, lambda: make_policy("sia-perfect"),
                                  inner_name="sia-perfect", period_s=24 * H)
    res = simulate(table(rows), make_pools({"a": 2, "b": 4, "c": 2}), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    times = [t for t, _ in pol.share_log]
    assert times[1] == 2 * H  # the first move: when a's copy in B is usable (and a1 ends)
    assert pol.share_log[-1][1].tolist() == [[0, 2], [2, 2], [2, 0]]
    # a2 cannot start as an owner at 1 h (a1 holds a's share, the copy is not usable); SIA
    # lends it c's idle GPUs in A (perfect predictions: c has no jobs)
    assert got["a2"] == H and res.filter(pl.col("job_id") == "a2")["opportunistic"][0]


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["fcfs", "sia-perfect", "sia-random"]))
def test_one_region_with_reservations_is_todays_replay(seed, name):
    jobs, pools = generate_workload("base", seed, days=1.5)
    pools = pools.select("pool", "quota_gpus")
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    opts = {"seed": seed} if name == "sia-random" else {}
    today = simulate(jobs, pools, make_policy(name, **opts))
    pol = ReservationRegionPolicy(layout_for_pools({p: "only" for p in quotas}, quotas),
                                  lambda: make_policy(name, **opts), inner_name=name,
                                  foothold="backlog")
    ours = simulate(jobs, pools, pol, check_invariants=True)
    assert today.height > 20
    for col in ("start_time", "end_time", "opportunistic"):
        assert ours[col].to_list() == today[col].to_list(), col


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["fcfs", "sia-perfect"]),
       placement=st.sampled_from(["history", "perfect"]), probe=st.sampled_from(["estimate", "sia"]),
       consolidate=st.sampled_from(["off", "swap", "free"]),
       foothold=st.sampled_from(["off", "backlog"]))
def test_reservations_never_overfill_a_region_and_never_preempt(seed, name, placement, probe,
                                                                consolidate, foothold):
    check_reservations(seed, name, placement, probe, consolidate, foothold)


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), placement=st.sampled_from(["history", "perfect"]))
def test_footholds_never_overfill_a_region_and_never_preempt(seed, placement):
    # (footholds need SIA's lending: the property test above draws them with it rarely)
    check_reservations(seed, "sia-perfect", placement, "estimate", "off", "backlog")


def check_reservations(seed, name, placement, probe, consolidate, foothold):
    """The invariants of a replay with global reservations (the property tests above)."""
    jobs, pools = generate_workload("base", seed, days=2, pool_gpus=8)
    pools = pools.select("pool", "quota_gpus")
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    homes = {p: "ABC"[i % 3] for i, p in enumerate(sorted(quotas))}
    lay = layout_for_pools(homes, quotas, sizes={p: 0.01 for p in quotas})
    cheap = ReservationWeights(move_weight=0.01, churn_weight=0.01)
    pol = ReservationRegionPolicy(lay, lambda: make_policy(name), inner_name=name,
                                  placement=placement, period_s=6 * H, weights=cheap,
                                  lend_probe=probe, consolidate=consolidate,
                                  foothold=foothold)
    res = simulate(jobs, pools, pol, check_invariants=True)
    names = list(pol._trace.pool_names)
    quota = np.array([quotas[p] for p in names])
    # result rows -> region and pool index
    region_of = dict(zip(*pol.job_regions().values(), strict=True))
    reg = np.array([lay.region_index[region_of[j]] for j in res["job_id"]])
    pool = np.array([names.index(p) for p in res["pool"]])
    start, end = res["start_time"].to_numpy(), res["end_time"].to_numpy()
    gpus, opp = res["num_gpus"].to_numpy(), res["opportunistic"].to_numpy()
    assert np.allclose(end - start, res["duration"].to_numpy())  # ran once, to its end
    times = np.unique(np.concatenate([start, [t for t, _ in pol.share_log]]))
    log_t = np.array([t for t, _ in pol.share_log])
    for t in times:
        shares = pol.share_log[int(np.searchsorted(log_t, t, side="right")) - 1][1]
        assert (shares.sum(axis=1) == quota).all()  # shares sum to the quota at every instant
        run = (start <= t) & (t < end)
        busy = np.bincount(reg[run], weights=gpus[run], minlength=lay.n_regions)
        assert (busy <= lay.gpus).all()  # a region never runs more than its GPUs
        assert (shares.sum(axis=0) <= lay.gpus).all()
        ded = np.zeros_like(shares)
        np.add.at(ded, (pool[run & ~opp], reg[run & ~opp]), gpus[run & ~opp])
        assert (ded <= shares).all()  # no plan takes a share its dedicated jobs hold
    assert len(pol.stats["plans"]) >= 7
    # every queue move is logged, of a waiting job, between two regions, the last into the
    # region it ran in
    assert len(pol.queue_moves) == pol.stats["routed"]
    row = {j: i for i, j in enumerate(res["job_id"].to_list())}
    ids = pol._trace.job_ids
    last = {}
    for j, t, a, b in pol.queue_moves:
        i = row[str(ids[j])]
        assert a != b and res["submit_time"][i] <= t <= start[i]
        last[i] = b
    assert all(reg[i] == b for i, b in last.items())


def test_a_region_no_pool_may_take_a_share_in_still_plans():
    # region C holds no copy and no pool may go there: it gets no term in the model
    lay = RegionLayout([Region("A", 6), Region("B", 2), Region("C", 2)],
                       [PoolData("a", "A", 1.0), PoolData("b", "B", 1.0),
                        PoolData("c", "C", 1.0, ("A",))], 1.0)
    quota = np.array([4, 2, 2])
    prev = np.array([[True, False, False], [False, True, False], [True, False, False]])
    shares = np.array([[4, 0, 0], [0, 2, 0], [2, 0, 0]])
    plan = plan_reservations(lay, quota, [1.0, 1.0, 1.0], prev, shares, candidates=prev)
    assert plan.status == "optimal" and (plan.shares == shares).all()


def recording_plan(seen):
    """A stand-in for plan_reservations that keeps the shares and records each demand."""
    def plan(layout, quota, demand, prev_held, prev_shares, keep=None, **kw):
        seen.append(np.asarray(demand, dtype=float).tolist())
        return ReservationPlan("optimal", prev_held.copy(), np.array(prev_shares), 0.0, 0.0, 0,
                               0.0, False, "")
    return plan


@pytest.mark.parametrize("placement, at_h", [
    # at 1 h: b1 (4 GPUs) runs to 2 h, b2 (4) and a1 (1, arriving now) wait: backlog a 1, b 8.
    # perfect: a2 (2 GPUs, from 1.5 h for 15 min) is 1/4 of the hour -> a 1 + 0.5
    ("perfect", [1.5, 8.0]),
    # history: the last hour's jobs as they ran within it: b1 the whole hour (4), b2 the
    # half hour since it arrived (2) -> b 8 + 6
    ("history", [1.0, 14.0]),
])
def test_the_plan_balances_outstanding_demand_backlog_and_arrivals(monkeypatch, placement, at_h):
    seen: list[list[float]] = []
    monkeypatch.setattr(reserved_policy, "plan_reservations", recording_plan(seen))
    rows = [("b1", "b", 0.0, 2 * H, 4), ("b2", "b", H / 2, H, 4), ("a1", "a", H, 60.0, 1),
            ("a2", "a", 1.5 * H, H / 4, 2)]
    quotas = {"a": 2, "b": 4}
    lay = layout_for_pools({"a": "A", "b": "B"}, quotas)
    pol = ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                  placement=placement, period_s=H, plan_demand="outstanding")
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    assert dict(zip(res["job_id"], res["start_time"], strict=True))["b2"] == 2 * H
    times = [p["t"] for p in pol.stats["plans"]]
    assert times[:2] == [0.0, H]
    assert seen[1] == pytest.approx(at_h)
    if placement == "perfect":  # at 0: b1 waits (4); b2 arrives at 30 min, half the hour (2)
        assert seen[0] == pytest.approx([0.0, 6.0])
    # the period's arrivals alone (data placement's demand): b1 and b2's work in the last hour
    arrivals = ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                       placement=placement, period_s=H, plan_demand="arrivals")
    seen.clear()
    simulate(table(rows), make_pools(quotas), arrivals)
    if placement == "history":
        assert seen[1] == pytest.approx([0.0, 6.0])


def test_an_unknown_plan_demand_is_refused():
    lay = layout_for_pools({"a": "A"}, {"a": 2})
    with pytest.raises(ConfigError, match="plan_demand must be one of outstanding, arrivals, placed"):
        ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), plan_demand="backlog")


# ----------------------------------------------------------------------------- work limits
def uneven_layout(seed: int = 0, n_pools: int = 13, n_regions: int = 3):
    """13 pools over 3 regions (Philly's size) with uneven demand: SCIP needs branching."""
    rng = np.random.default_rng(seed)
    homes = {f"p{i}": f"R{int(rng.integers(n_regions))}" for i in range(n_pools)}
    qd = {p: int(q) for p, q in zip(homes, rng.integers(2, 40, n_pools), strict=True)}
    lay = layout_for_pools(homes, qd)
    quota = np.array([qd[p.name] for p in lay.pools])
    demand = quota * rng.lognormal(0.0, 0.8, n_pools)
    widest = np.minimum(rng.integers(1, 9, n_pools), quota)
    return lay, quota, demand, widest


def test_the_node_limit_reaches_scip_and_the_plan_says_it_stopped_there(scip_parameters):
    sent = scip_parameters
    lay, quota, demand, widest = uneven_layout()
    plan = plan_reservations(lay, quota, demand, lay.initial_replicas().held(),
                             home_shares(lay, quota), min_share=widest, node_limit=3,
                             lp_iteration_limit=5000, time_limit_s=120)
    assert "limits/totalnodes = 3\n" in sent
    assert sent.count("max_number_of_iterations: 5000") == 2  # both warm-start LPs
    # seed 0 needs more than 3 nodes (238 to optimality): the work limit stopped it
    assert plan.status == "feasible" and plan.stopped_by == "work"
    assert "work limit 3 nodes" in plan.message
    assert (plan.shares.sum(axis=1) == quota).all()


def test_a_plan_solved_to_the_gap_names_no_limit():
    lay = two_region_layout()
    quota = np.array([4, 2, 2])
    plan = plan_reservations(lay, quota, [4.0, 0.0, 0.0], lay.initial_replicas().held(),
                             home_shares(lay, quota), min_share=[2, 1, 1])
    assert plan.status == "optimal" and plan.stopped_by == "" and plan.message == ""


@pytest.mark.parametrize("bad", [0, -5, 2.5, True, None])
def test_a_bad_work_limit_is_refused(bad):
    lay = two_region_layout()
    quota = np.array([4, 2, 2])
    with pytest.raises(RegionsError, match="node_limit must be a whole number"):
        plan_reservations(lay, quota, [1.0, 1.0, 1.0], lay.initial_replicas().held(),
                          home_shares(lay, quota), node_limit=bad)


def _busy(stop) -> None:
    """Spin until ``stop`` is set (a CPU hog for the determinism test)."""
    x = 0
    while not stop.is_set():
        x += 1


def test_the_same_inputs_give_the_same_plan_under_cpu_load():
    import multiprocessing as mp

    lay, quota, demand, widest = uneven_layout()
    args = (lay, quota, demand, lay.initial_replicas().held(), home_shares(lay, quota))
    kw = dict(min_share=widest, node_limit=20, time_limit_s=300)
    quiet = plan_reservations(*args, **kw)
    ctx = mp.get_context("spawn")
    stop = ctx.Event()
    hogs = [ctx.Process(target=_busy, args=(stop,), daemon=True) for _ in range(2)]
    for h in hogs:
        h.start()
    try:
        loaded = plan_reservations(*args, **kw)
    finally:
        stop.set()
        for h in hogs:
            h.join(10)
    assert quiet.stopped_by == loaded.stopped_by == "work"
    assert (quiet.shares == loaded.shares).all() and (quiet.held == loaded.held).all()
    assert quiet.objective == loaded.objective


# ----------------------------------------------------------------------------- session 18
def test_running_load_that_no_share_moves_steers_the_plan():
    # a (busy, 4 GPUs of demand still to start) and b (idle) have 4 GPUs each; region A
    # already runs 4 GPUs of jobs that stay there (fixed load). Balance puts a's whole share
    # in B: A at (4 + 0) / 4, B at 4 / 4, both at rho = 8 / 8. Without the fixed load the
    # plan splits a's share 2 / 2 (the previous test's reasoning)
    lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 4, "b": 4}, sizes={"a": 0.0, "b": 0.0})
    quota = np.array([4, 4])
    w = ReservationWeights(move_weight=0.0, storage_weight=0.0, churn_weight=0.0)
    args = (lay, quota, [4.0, 0.0], lay.initial_replicas().held(), home_shares(lay, quota))
    plan = plan_reservations(*args, weights=w, fixed_load=[4.0, 0.0])
    assert plan.shares.tolist() == [[0, 4], [4, 0]]
    assert plan.region_load([4.0, 0.0], quota, [4.0, 0.0]).tolist() == [4.0, 4.0]
    free = plan_reservations(*args, weights=w)
    assert free.shares[0].tolist() == [2, 2]
    with pytest.raises(RegionsError, match="fixed_load"):
        plan_reservations(*args, weights=w, fixed_load=[-1.0, 0.0])


def test_placed_demand_leaves_running_jobs_where_they_run(monkeypatch):
    # b1 (3 GPUs) runs in B from 0 to 10 h; the second plan comes at a1's arrival (1.5 h,
    # the first decision after 1 h), a1 waiting (1 GPU for the whole period). A "placed"
    # plan gets B's 3 GPUs as fixed load (perfect: b1 runs the whole 1 h period) and b's pool
    # demand 0; an "outstanding" one counts b1 in b's demand
    seen = []

    def plan(layout, quota, demand, prev_held, prev_shares, keep=None, **kw):
        seen.append((np.asarray(demand).tolist(), kw.get("fixed_load")))
        return ReservationPlan("optimal", prev_held, prev_shares, 0.0, 0.0, 0, 0.0, True, "")

    monkeypatch.setattr(reserved_policy, "plan_reservations", plan)
    rows = [("b1", "b", 0.0, 10 * H, 3), ("a1", "a", 1.5 * H, H, 1)]
    lay = layout_for_pools({"a": "A", "b": "B"}, {"a": 2, "b": 4})
    for how in ("placed", "outstanding"):
        seen.clear()
        pol = ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                      placement="perfect", period_s=H, plan_demand=how)
        simulate(table(rows), make_pools({"a": 2, "b": 4}), pol, check_invariants=True)
        demand, fixed = seen[1]
        assert pol.stats["plans"][1]["t"] == 1.5 * H
        if how == "placed":
            assert demand == [1.0, 0.0] and fixed.tolist() == [0.0, 3.0]
        else:
            assert demand == [1.0, 3.0] and fixed is None


def test_a_region_reserves_only_its_part_of_a_pools_arrivals():
    # one cluster of 3 GPUs: a (quota 1) runs a1 for 10 h; a2 (1 GPU, 30 min) arrives at
    # 1 h and can only be lent; b (quota 2, idle) gets b1 (2 GPUs) at 1.5 h, which perfect
    # predictions see. Reserving all of b's arrivals (min(0 + 2, 2) = 2) lends nothing until
    # b1 ends at 2.5 h; reserving half of them here (the rest in another region holding b's
    # unused share) leaves 1 GPU: a2 is lent at 1 h and ends before b1 arrives
    rows = [("a1", "a", 0.0, 10 * H, 1), ("a2", "a", H, H / 2, 1), ("b1", "b", 1.5 * H, H, 2)]
    starts = {}
    for frac in (None, [1.0, 0.5]):
        pol = make_policy("sia-perfect", refresh_s=0)
        reset = pol.reset

        def split_reset(trace, cluster, pol=pol, reset=reset, frac=frac):
            reset(trace, cluster)
            pol.set_arrival_share(frac)

        pol.reset = split_reset
        res = simulate(table(rows), make_pools({"a": 1, "b": 2}), pol, check_invariants=True)
        starts[frac is None] = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert starts[True] == {"a1": 0.0, "a2": 2.5 * H, "b1": 1.5 * H}
    assert starts[False] == {"a1": 0.0, "a2": H, "b1": 1.5 * H}


@settings(max_examples=3, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_a_pools_arrivals_are_reserved_once_over_all_regions(seed):
    # after a three-region replay under sia-perfect, the parts of each pool's arrivals the
    # regions reserve sum to one, each region's part its unused share there over the pool's
    # unused share everywhere (no unused share: its share over its quota)
    jobs, pools = generate_workload("base", seed, days=1, pool_gpus=8)
    pools = pools.select("pool", "quota_gpus")
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    homes = {p: "ABC"[i % 3] for i, p in enumerate(sorted(quotas))}
    lay = layout_for_pools(homes, quotas, sizes={p: 0.01 for p in quotas})
    pol = ReservationRegionPolicy(lay, lambda: make_policy("sia-perfect"), inner_name="sia-perfect",
                                  placement="perfect", period_s=3 * H,
                                  weights=ReservationWeights(move_weight=0.01, churn_weight=0.01))
    simulate(jobs, pools, pol, check_invariants=True)
    share, used = pol._ledger.shares, pol._used()
    assert pol._ledger.moved_gpus > 0
    for when in ("end", "mid"):
        if when == "mid":  # a state with unused shares: pretend half the GPUs are in use
            used = np.minimum(used, share // 2)
            pol._used = lambda used=used: used
        pol._split_arrivals()
        frac = np.array([reg.policy._arrival_frac for reg in pol._regions]).T
        assert np.allclose(frac.sum(axis=1), 1.0)
        unused = np.maximum(share - used, 0)
        has = unused.sum(axis=1) > 0
        assert np.allclose(frac[has], unused[has] / unused[has].sum(axis=1, keepdims=True))
        assert np.allclose(frac[~has], share[~has] / pol._trace.quota[~has, None])


@pytest.mark.parametrize("probe", ["estimate", "sia"])
@pytest.mark.parametrize("lend_route", [True, False])
def test_a_job_moves_to_the_region_that_lends_it_now(monkeypatch, lend_route, probe):
    # A (3 GPUs) and B (3): the plan at 0 gives a 1 + 1, b 1 + 2, c 1 + 0. a1 and a2 hold a's
    # shares; short a3 (1 GPU, 30 min) arrives at 1 h and queues in A. b1 and c1 (1 GPU
    # each) arrive at 1.25 h, which perfect predictions see. A lends 2 - c's 1 - b's
    # 1/3 (b's unused share: 1 of 3 in A) < 1 GPU; B lends 2 - b's 2/3 >= 1: a3 moves to B
    # and is lent there at 1 h. Without that move it waits in A until c1 and b1 start
    # (b1 at home in B) and A lends it b's idle GPU at 1.25 h
    monkeypatch.setattr(reserved_policy, "plan_reservations",
                        fixed_plan([[[1, 1], [1, 2], [1, 0]]]))
    if not lend_route:
        monkeypatch.setattr(ReservationRegionPolicy, "_lend_target", lambda self, *a: -1)
    rows = [("a1", "a", 0.0, 10 * H, 1), ("a2", "a", 0.0, 10 * H, 1), ("a3", "a", H, H / 2, 1),
            ("b1", "b", 1.25 * H, H, 1), ("c1", "c", 1.25 * H, H, 1)]
    quotas = {"a": 2, "b": 3, "c": 1}
    lay = layout_for_pools({"a": "A", "b": "B", "c": "A"}, quotas,
                           replicas={"a": ["A", "B"], "b": ["B", "A"]})
    pol = ReservationRegionPolicy(lay, lambda: make_policy("sia-perfect", refresh_s=0),
                                  inner_name="sia-perfect", period_s=100 * H, lend_probe=probe)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    where = dict(zip(res["job_id"], pol.job_regions()["region"], strict=True))
    assert pol.share_log[-1][1].tolist() == [[1, 1], [1, 2], [1, 0]]
    assert (got["a1"], got["a2"], where["a1"], where["a2"]) == (0.0, 0.0, "A", "B")
    assert (got["b1"], got["c1"], where["b1"], where["c1"]) == (1.25 * H, 1.25 * H, "B", "A")
    assert res.filter(pl.col("job_id") == "a3")["opportunistic"][0]
    if lend_route:
        assert (got["a3"], where["a3"]) == (H, "B")
    else:
        assert (got["a3"], where["a3"]) == (1.25 * H, "A")


class _DistrustB:
    """An online adaptation distrusting pool b's (trace index 1) arrival predictions in every
    window, recording nothing."""

    n_records = 0

    def reset(self, trace):
        self.n = trace.n_pools

    def record(self, view, tnl):
        pass

    def distrusted(self, view):
        out = np.zeros((self.n, len(DEFAULT_WINDOWS_S)), dtype=bool)
        out[1] = True
        return out

    def miss_counts(self):
        return np.zeros((self.n, len(DEFAULT_WINDOWS_S)), dtype=np.int64)


@pytest.mark.parametrize("probe", ["estimate", "sia"])
def test_the_route_asks_sia_and_a_distrusted_share_is_not_offered(monkeypatch, probe):
    # the case above, every region's SIA distrusting b's arrival predictions: b reserves its
    # whole unused share, 2 in B, so B lends a3 nothing at 1 h (3 - a2 - 2 = 0 GPUs). The
    # estimate ignores the distrust (2 - b's 2/3 >= 1) and moves a3 to B at 1 h, where it is
    # not lent; asked, B's SIA says no and a3 stays in A
    monkeypatch.setattr(reserved_policy, "plan_reservations",
                        fixed_plan([[[1, 1], [1, 2], [1, 0]]]))

    def inner():
        pol = make_policy("sia-perfect", refresh_s=0)
        pol.tracker = _DistrustB()
        return pol

    rows = [("a1", "a", 0.0, 10 * H, 1), ("a2", "a", 0.0, 10 * H, 1), ("a3", "a", H, H / 2, 1),
            ("b1", "b", 1.25 * H, H, 1), ("c1", "c", 1.25 * H, H, 1)]
    quotas = {"a": 2, "b": 3, "c": 1}
    lay = layout_for_pools({"a": "A", "b": "B", "c": "A"}, quotas,
                           replicas={"a": ["A", "B"], "b": ["B", "A"]})
    pol = ReservationRegionPolicy(lay, inner, inner_name="sia-perfect", period_s=100 * H,
                                  lend_probe=probe)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    j3 = list(pol._trace.job_ids).index("a3")
    at_1h = [(a, b) for j, t, a, b in pol.queue_moves if j == j3 and t == H]
    assert got["a3"] > H
    assert at_1h == ([(0, 1)] if probe == "estimate" else [])


@pytest.mark.parametrize("foothold", ["off", "backlog"])
def test_a_foothold_lets_a_pools_short_jobs_reach_an_idle_region(monkeypatch, foothold):
    # A holds a (quota 3, widest job 2), B holds b (3, idle: perfect predictions lend all 3).
    # At 0: a1 (2 GPUs, 20 h) and a2 (1, 1 h) take a's share; short a3 and a4 (1 GPU, 30 min)
    # wait. The plan at 0 sees a's lendable backlog a2 + a3 + a4 (a1 is longer than 12 h):
    # 3 GPUs, widest 1, and B lending 3: a bonus of min(3, 3) * (1 / 3 + 2 / 3) = 3 for a
    # copy of a in B with a share of at least 1. Balance wants it anyway (a's 4 waiting GPUs
    # all in A, B idle) but without the foothold a's share may not split (its widest job
    # is 2 of 3): the plan stays home. With it the target is a 2 + 1, b 1 + 2, reached at
    # 1 h when a2 frees a's GPU in A: a3 starts as an owner in B, and A lends a4 the idle GPU
    # b's share took there, both at 1 h; at home a3 starts at 1 h, a4 at 1.5 h
    calls = []
    real = reserved_policy.plan_reservations

    def spy(*a, **kw):
        calls.append(kw)
        return real(*a, **kw)

    monkeypatch.setattr(reserved_policy, "plan_reservations", spy)
    rows = [("a1", "a", 0.0, 20 * H, 2), ("a2", "a", 0.0, H, 1), ("a3", "a", 0.0, H / 2, 1),
            ("a4", "a", 0.0, H / 2, 1)]
    quotas = {"a": 3, "b": 3}
    lay = layout_for_pools({"a": "A", "b": "B"}, quotas)
    pol = ReservationRegionPolicy(lay, lambda: make_policy("sia-perfect", refresh_s=0),
                                  inner_name="sia-perfect", period_s=100 * H,
                                  placement="perfect", foothold=foothold)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    where = dict(zip(res["job_id"], pol.job_regions()["region"], strict=True))
    assert len(calls) == 1
    if foothold == "off":
        assert calls[0]["foothold"] is None and pol.stats["plans"][0]["footholds"] == 0
        assert pol.share_log[-1][1].tolist() == [[3, 0], [0, 3]]
        assert (got["a3"], got["a4"]) == (H, 1.5 * H) and where["a4"] == "A"
        return
    assert calls[0]["foothold"].tolist() == [[0.0, 3.0], [0.0, 0.0]]
    assert calls[0]["foothold_share"].tolist() == [1, 1]
    assert pol.stats["plans"][0]["footholds"] == 1  # a's new copy in B
    assert pol.share_log[-1][1].tolist() == [[2, 1], [1, 2]] and pol.share_log[-1][0] == H
    assert (got["a3"], got["a4"], where["a3"], where["a4"]) == (H, H, "B", "A")
    opp = dict(zip(res["job_id"], res["opportunistic"], strict=True))
    assert not opp["a3"] and opp["a4"]


def test_a_bad_foothold_is_refused():
    lay = layout_for_pools({"a": "A"}, {"a": 1})
    with pytest.raises(ConfigError, match="foothold"):
        ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                foothold="on")


def test_a_bad_lend_probe_is_refused():
    lay = layout_for_pools({"a": "A"}, {"a": 1})
    with pytest.raises(ConfigError, match="lend_probe"):
        ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                lend_probe="guess")


def optimistic_lendable(self, r, lend):
    """A stand-in for ``_lendable`` as optimistic as learned SIA's estimates can be: a region
    with no job waiting lends a GPU in every window, one with a waiting job lends none."""
    busy = any(self._regions[r].state.pending)
    return lend.setdefault(r, [0.0 if busy else 1.0] * len(self._regions[r].policy.windows_s))


@pytest.mark.parametrize("lend_moves", [None, 1])
def test_a_job_the_route_would_bounce_moves_once(monkeypatch, lend_moves):
    # A (2 GPUs) and B (2): the plan at 0 gives a 1 + 1 and b 1 + 1; a1, a2 (10 h) and b1,
    # b2 (5 h) fill both regions. Short a3 (1 GPU, 30 min) arrives at 1 h and queues at home
    # (A). The route's estimate says B lends it a GPU now (no job waits there): it moves to
    # B, where nothing is free. Without a limit the estimate then says A lends and B does
    # not: a3 moves back to A at the next decision (every 5 min), then to B again, 49 moves
    # until b1 and b2 end at 5 h (a GPU free in each region) and B, where the 49th move
    # left it, lends it the GPU b1 freed. With one lending move it stays in B from 1 h on,
    # and starts there at 5 h all the same
    monkeypatch.setattr(reserved_policy, "plan_reservations", fixed_plan([[[1, 1], [1, 1]]]))
    monkeypatch.setattr(ReservationRegionPolicy, "_lendable", optimistic_lendable)
    rows = [("a1", "a", 0.0, 10 * H, 1), ("a2", "a", 0.0, 10 * H, 1), ("b1", "b", 0.0, 5 * H, 1),
            ("b2", "b", 0.0, 5 * H, 1), ("a3", "a", H, H / 2, 1)]
    quotas = {"a": 2, "b": 2}
    lay = layout_for_pools({"a": "A", "b": "B"}, quotas,
                           replicas={"a": ["A", "B"], "b": ["B", "A"]})
    pol = ReservationRegionPolicy(lay, lambda: make_policy("sia-perfect", refresh_s=0),
                                  inner_name="sia-perfect", period_s=100 * H,
                                  lend_moves=lend_moves)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    where = dict(zip(res["job_id"], pol.job_regions()["region"], strict=True))
    assert [where[j] for j in ("a1", "a2", "b1", "b2")] == ["A", "B", "B", "A"]
    j3 = list(pol._trace.job_ids).index("a3")
    a3_moves = [(t, a, b) for j, t, a, b in pol.queue_moves if j == j3]
    assert res.filter(pl.col("job_id") == "a3")["opportunistic"][0] and got["a3"] == 5 * H
    if lend_moves is None:
        assert a3_moves == [(H + 300.0 * i, i % 2, 1 - i % 2) for i in range(49)]
        assert pol.lent_moves[j3] == 49
    else:
        assert a3_moves == [(H, 0, 1)] and pol.lent_moves[j3] == 1
    assert where["a3"] == "B"


@pytest.mark.parametrize("bad", [-1, 1.5, True, "1"])
def test_a_bad_lend_moves_is_refused(bad):
    lay = layout_for_pools({"a": "A"}, {"a": 1})
    with pytest.raises(ConfigError, match="lend_moves"):
        ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                lend_moves=bad)


@settings(max_examples=4, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), limit=st.sampled_from([0, 1, 2]))
def test_no_job_makes_more_lending_moves_than_the_limit(seed, limit):
    # three regions under SIA whose lending estimate is as optimistic as learned SIA's can
    # be: the route would move jobs at every decision; the limit holds, no region runs more
    # than its GPUs and every job runs once, to its end
    class Optimistic(ReservationRegionPolicy):
        _lendable = optimistic_lendable

    jobs, pools = generate_workload("base", seed, days=1.5, pool_gpus=8)
    pools = pools.select("pool", "quota_gpus")
    quotas = dict(zip(pools["pool"], pools["quota_gpus"], strict=True))
    homes = {p: "ABC"[i % 3] for i, p in enumerate(sorted(quotas))}
    lay = layout_for_pools(homes, quotas, sizes={p: 0.01 for p in quotas})
    pol = Optimistic(lay, lambda: make_policy("sia-perfect"), inner_name="sia-perfect",
                     placement="perfect", period_s=3 * H, lend_moves=limit,
                     weights=ReservationWeights(move_weight=0.01, churn_weight=0.01))
    res = simulate(jobs, pools, pol, check_invariants=True)
    assert pol.lent_moves.max() <= limit
    assert pol.lent_moves.sum() <= pol.stats["routed"] == len(pol.queue_moves)
    region_of = dict(zip(*pol.job_regions().values(), strict=True))
    reg = np.array([lay.region_index[region_of[j]] for j in res["job_id"]])
    start, end = res["start_time"].to_numpy(), res["end_time"].to_numpy()
    gpus = res["num_gpus"].to_numpy()
    assert np.allclose(end - start, res["duration"].to_numpy())
    for t in np.unique(start):
        run = (start <= t) & (t < end)
        busy = np.bincount(reg[run], weights=gpus[run], minlength=lay.n_regions)
        assert (busy <= lay.gpus).all()


# ----------------------------------------------------------------------------- consolidation
def test_consolidation_swaps_unused_shares_into_one_region():
    # p holds 3 in A (2 used) and 1 in B; q holds 1 in A and 3 in B, nothing used. A 2-GPU
    # job of p fits p's unused 1 + 1 but neither region: q's unused GPU in A swaps with p's
    # in B, so p has 4 in A (2 unused) and q 4 in B
    led = ShareLedger(np.array([4, 4]), np.array([4, 4]), np.array([[3, 1], [1, 3]]))
    used = np.array([[2, 0], [0, 0]])
    changed = led.consolidate(0, 0, 2, used, ALL)
    assert changed.tolist() == [True, True]
    assert led.shares.tolist() == [[4, 0], [0, 4]] and led.moved_gpus == 2
    assert led.target.tolist() == [[3, 1], [1, 3]]  # the plan's target stays


def test_consolidation_without_a_partner_changes_nothing():
    # q has no usable copy in B, and A has no GPU outside the shares: no swap, no change;
    # a job needing more than p's unused quota cannot be helped either
    led = ShareLedger(np.array([4, 4]), np.array([4, 4]), np.array([[3, 1], [1, 3]]))
    used = np.array([[2, 0], [0, 0]])
    usable = np.array([[True, True], [True, False]])
    assert led.consolidate(0, 0, 2, used, usable) is None
    assert led.consolidate(0, 0, 3, used, ALL) is None
    assert led.shares.tolist() == [[3, 1], [1, 3]] and led.moved_gpus == 0
    # GPUs of A outside every share take p's share from B without a swap
    led = ShareLedger(np.array([4, 2]), np.array([5, 3]), np.array([[3, 1], [1, 1]]))
    assert led.consolidate(0, 0, 2, used, usable).tolist() == [True, True]
    assert led.shares.tolist() == [[4, 0], [1, 1]]
    # with no free GPU in B, q may not take p's share there (loans might hold it)
    led = ShareLedger(np.array([4, 4]), np.array([4, 4]), np.array([[3, 1], [1, 3]]))
    assert led.consolidate(0, 0, 2, used, ALL, idle=np.array([4, 0])) is None
    assert led.consolidate(0, 0, 2, used, ALL, idle=np.array([0, 1])).tolist() == [True, True]


def test_a_bad_consolidate_is_refused():
    lay = layout_for_pools({"a": "A"}, {"a": 1})
    with pytest.raises(ConfigError, match="consolidate"):
        ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                consolidate=True)


@pytest.mark.parametrize("consolidate", ["off", "swap", "free"])
def test_a_job_split_across_shares_starts_when_they_are_consolidated(monkeypatch, consolidate):
    # A and B have 4 GPUs each; the plan splits a's and b's quotas 3 + 1. a1 (2 GPUs, 2 h)
    # starts in A at 0, leaving 1 GPU of a's share in A and 1 in B (inner FCFS: no loans).
    # a2 (2 GPUs, 1 h) arrives at 30 min. Without consolidation it waits for a1 (2 h) and
    # a3 (2 GPUs, 45 min) behind it until 3 h; home FCFS starts them at 30 min and 1.5 h.
    # Consolidation swaps b's unused GPU in A with a's in B: a2 starts at 30 min, a3 at 1.5 h
    monkeypatch.setattr(reserved_policy, "plan_reservations", fixed_plan([[[3, 1], [1, 3]]]))
    rows = [("a1", "a", 0.0, 2 * H, 2), ("a2", "a", H / 2, H, 2), ("a3", "a", 0.75 * H, H, 2)]
    quotas = {"a": 4, "b": 4}
    lay = layout_for_pools({"a": "A", "b": "B"}, quotas,
                           replicas={"a": ["A", "B"], "b": ["B", "A"]})
    pol = ReservationRegionPolicy(lay, lambda: make_policy("fcfs"), inner_name="fcfs",
                                  period_s=100 * H, consolidate=consolidate)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    if consolidate != "off":  # (B's GPU that a gives up is free: "free" swaps it too)
        assert got == {"a1": 0.0, "a2": H / 2, "a3": 1.5 * H}
        # at 30 min for a2; at 1.5 h a2 ends, the ledger moves the shares back to the plan,
        # and a3 needs them consolidated again
        assert pol.stats["consolidations"] == 2
        assert [(t, x.tolist()) for t, x in pol.share_log if t == H / 2] == \
            [(H / 2, [[4, 0], [0, 4]])]
        assert pol.share_log[-1][1].tolist() == [[3, 1], [1, 3]]  # back to the plan later
    else:
        assert got == {"a1": 0.0, "a2": 2 * H, "a3": 3 * H}
        assert pol.stats["consolidations"] == 0


# ----------------------------------------------------------------------------- forecast plans
class _UnboundedLoad(BlindForecaster):
    """Predicts an arrival in every pool, with an unbounded load for pool ``a`` (what a
    calibrated forecaster answers for a pool too cold for a bound) and 1 GPU per window for
    the others; true duration bins."""

    name = "unbounded"

    def will_jobs_arrive(self, view, windows_s):
        return np.ones((view.trace.n_pools, len(windows_s)), dtype=bool)

    def new_load_estimate(self, view, windows_s):
        load = np.ones((view.trace.n_pools, len(windows_s)))
        load[list(view.trace.pool_names).index("a")] = np.inf
        return load


def test_a_forecast_plan_counts_an_unbounded_pool_at_its_quota_and_never_nan():
    # pool a's predicted load is unbounded before any of its jobs finished (mean duration 0):
    # inf x 0 made the plan's demand NaN (a RegionsError in the learned-reservations replay).
    # Now a pool whose rate is not known counts its whole quota; b's rate is 1 GPU per 12 h
    # times its finished job's mean duration (1 h)
    from sia.scheduler.policies.sia.policy import SiaPolicy
    rows = [("b1", "b", 0.0, H, 1), ("a1", "a", 2 * H, H, 1), ("b2", "b", 2 * H, H, 1)]
    quotas = {"a": 2, "b": 2}
    lay = layout_for_pools({"a": "A", "b": "B"}, quotas,
                           replicas={"a": ["A", "B"], "b": ["B", "A"]})
    pol = ReservationRegionPolicy(
        lay, lambda: SiaPolicy(_UnboundedLoad(), risk=None), inner_name="sia",
        placement="forecast", period_s=H)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    assert res.height == 3
    plans = {p["t"]: p["demand"] for p in pol.stats["plans"]}
    b_rate = 1 / DEFAULT_WINDOWS_S[-1] * H  # 1 GPU per 12 h x b's mean finished duration
    # each plan's demand = the GPUs running or waiting + the forecast part
    assert plans == {0.0: [2.0, 1.0],  # a: its quota; b: b1 running, nothing finished yet
                     H: [2.0, pytest.approx(b_rate)],  # b1 done (1 h)
                     2 * H: [3.0, pytest.approx(1 + b_rate)],  # a1 and b2 arrived
                     3 * H: [2.0, pytest.approx(b_rate)]}


def test_forecast_rates_read_the_registered_answers_under_the_floor():
    # three pools, windows 5 min and 12 h: a predicted to arrive with an unbounded load, b with
    # 2 GPUs in 12 h, c not predicted to arrive. Without kept registered
    # answers a's rate is not known; with them (the budget's floor), the registered answers
    # decide: a 1 GPU, b none
    from sia.scheduler.regions.global_policy import forecast_rates

    class View:
        def _invalidate(self):
            pass

    class Fc:
        def will_jobs_arrive(self, view, windows_s):
            return np.array([[True, True], [True, True], [False, False]])

        def new_load_estimate(self, view, windows_s):
            return np.array([[1.0, np.inf], [0.5, 2.0], [0.0, np.inf]])

    class Pol:
        windows_s = (300.0, 43200.0)
        forecaster = Fc()

        def __init__(self, kept=None):
            self.kept = kept

        def registered_answers(self):
            return self.kept

    rate, known = forecast_rates(Pol(), View())
    assert known.tolist() == [False, True, True]  # c: no arrival predicted, known to be 0
    assert rate.tolist() == [0.0, 2.0 / 43200, 0.0]
    kept = (np.array([[True, True], [False, False], [False, False]]),
            np.array([[1.0, 1.0], [0.5, 2.0], [0.0, 0.0]]))
    rate, known = forecast_rates(Pol(kept), View())
    assert known.tolist() == [True, True, True]
    assert rate.tolist() == [1.0 / 43200, 0.0, 0.0]


def test_a_pool_with_no_arrival_share_here_reserves_none_of_an_unbounded_load():
    # one region's SIA told that none of pool a's arrivals come here (set_arrival_share, as
    # global reservations do): a's unbounded predicted load reserves 0 of a's idle GPUs, so b2
    # is lent one at once. inf x 0 made a's reservation NaN and nothing was lent (b2 waited
    # for b1's end at 60 s)
    from sia.scheduler.policies.sia.policy import SiaPolicy

    class Shared(SiaPolicy):  # the share is set once the replay has reset the policy
        def reset(self, *args, **kwargs):
            super().reset(*args, **kwargs)
            self.set_arrival_share([0.0, 1.0])

    rows = [("b1", "b", 0.0, 60.0, 1), ("b2", "b", 0.0, 60.0, 1)]
    pol = Shared(_UnboundedLoad(), risk=None)
    res = simulate(table(rows), make_pools({"a": 2, "b": 1}), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert got == {"b1": 0.0, "b2": 0.0}
    assert res.filter(pl.col("job_id") == "b2")["opportunistic"][0]
