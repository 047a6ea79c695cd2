"""Placement interface, checker, chain and the three solvers (MCF, Hungarian, MILP)."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.scheduler.locality.migration import (
    plan_migration,
    relabel_in_cells,
    relabel_min_migration,
)
from sia.scheduler.locality.topology import Topology
from sia.scheduler.placement.chain import PlacementChain
from sia.scheduler.placement.costs import CostModel, placement_cost
from sia.scheduler.placement.hungarian import HungarianPlacer
from sia.scheduler.placement.mcf import MinCostFlowPlacer
from sia.scheduler.placement.milp import MilpPlacer, Option, solve_strl
from sia.scheduler.placement.protocol import (
    ClusterState,
    InvalidPlacement,
    PlacementRequest,
    PlacementResult,
    validate_placement,
)

R = PlacementRequest


def small_state(seed, racks=1, per_rack=2, gpus=8, p_free=0.6, pools=("a", "b")):
    rng = np.random.default_rng(seed)
    topo = Topology(racks=racks, servers_per_rack=per_rack, gpus_per_server=gpus)
    free = rng.random(topo.n_gpus) < p_free
    ded = np.where(rng.random(topo.n_servers) < 0.4, rng.integers(0, len(pools), topo.n_servers), -1)
    ded = np.repeat(ded, gpus)
    return ClusterState(topo, free, ded, tuple(pools))


# ------------------------------------------------------------------ validation
def test_validate_placement_rules():
    topo = Topology(racks=1, servers_per_rack=2)
    free = np.ones(16, dtype=bool)
    free[5] = False
    state = ClusterState(topo, free)
    batch = [R("a", 2), R("b", 1)]

    def check(placements, unplaced=None):
        validate_placement(PlacementResult("t", placements, unplaced or {}), batch, state)

    check({"a": (0, 1), "b": (2,)})
    check({"a": (8, 9)}, {"b": "none"})
    with pytest.raises(InvalidPlacement, match="spans more than one 2-GPU cell"):
        check({"a": (1, 2), "b": (4,)})
    with pytest.raises(InvalidPlacement, match="not free"):
        check({"a": (0, 1), "b": (5,)})
    with pytest.raises(InvalidPlacement, match="shares its cell"):
        check({"a": (0, 1), "b": (1,)})
    with pytest.raises(InvalidPlacement, match="got 1 GPUs"):
        check({"a": (0,), "b": (2,)})
    with pytest.raises(InvalidPlacement, match="neither placed nor unplaced"):
        check({"a": (0, 1)})
    with pytest.raises(InvalidPlacement, match="out of range"):
        check({"a": (0, 1), "b": (16,)})
    # a 3-GPU gang holds its whole 4-cell: the free GPU left in it is not for anyone else
    batch3 = [R("a", 3), R("b", 1)]
    with pytest.raises(InvalidPlacement, match="shares its cell"):
        validate_placement(PlacementResult("t", {"a": (8, 9, 10), "b": (11,)}), batch3, state)


# ------------------------------------------------------------------ TetriSched
def test_tetrisched_three_job_example():
    """TetriSched 5.1: 3 machines, slots 0/10/20/30 s; optimum 3 with job 1 at 0, job 3 at 10, job 2 at 20."""
    job1 = [Option(0, 1, {"M": 2}, 1)]
    job2 = [Option(s, 2, {"M": 1}, 1) for s in (0, 1, 2)]
    job3 = [Option(s, 1, {"M": 3}, 1) for s in (0, 1)]
    sol = solve_strl([job1, job2, job3], {"M": [3, 3, 3, 3]}, 4)
    assert sol.objective == 3 and sol.status == "OPTIMAL" and sol.gap == 0
    starts = [opts[c].start * 10 for opts, c in zip([job1, job2, job3], sol.choice, strict=True)]
    assert starts == [0, 20, 10]


def test_strl_respects_capacity_when_not_everything_fits():
    # two 2-machine jobs on 3 machines, one slot: only one can run
    jobs = [[Option(0, 1, {"M": 2}, 5)], [Option(0, 1, {"M": 2}, 3)]]
    sol = solve_strl(jobs, {"M": [3]}, 1)
    assert sol.objective == 5 and sol.choice == [0, None]


def _wait_or_fallback_state():
    topo = Topology(racks=1, servers_per_rack=2)
    free = np.zeros(16, dtype=bool)
    free[:8] = True  # server 0 free now, but it holds pool a's dedicated cells
    busy = np.where(free, 0.0, 600.0)  # server 1 (no dedicated cells) frees at +600 s
    ded = np.r_[np.zeros(8, dtype=int), -np.ones(8, dtype=int)]
    return ClusterState(topo, free, ded, ("a",), now=0.0, busy_until=busy)


def test_milp_waits_for_preferred_cells_or_falls_back_now():
    state = _wait_or_fallback_state()
    batch = [R("o", 8, "a", dedicated=False, duration_s=600.0)]
    cost = CostModel(near_dedicated_penalty=64)
    patient = MilpPlacer(cost, horizon_s=3600, slot_s=300, wait_weight=4)  # waiting 2 slots: 8 < 64
    res = patient.place(batch, state, 5.0)
    validate_placement(res, batch, state)
    assert res.placements == {} and "planned to start in 600 s" in res.unplaced["o"]
    assert patient.plan["o"] == (600.0, -1)
    # the next call is warm-started from that plan
    again = patient.place(batch, state, 5.0)
    assert again.stats["hinted"] == 1
    hasty = MilpPlacer(cost, horizon_s=3600, slot_s=300, wait_weight=40)  # waiting costs 80 > 64
    res = hasty.place(batch, state, 5.0)
    assert res.placements == {"o": tuple(range(8))}


@settings(max_examples=25, deadline=None)
@given(seed=st.integers(0, 10_000))
def test_milp_launches_only_valid_gangs(seed):
    rng = np.random.default_rng(seed)
    state = small_state(seed, racks=1, per_rack=4)
    state.busy_until = np.where(state.free, 0.0, rng.uniform(0, 5000, state.topology.n_gpus))
    batch = [R(f"j{k}", int(rng.choice([1, 2, 3, 4, 8, 16])), "a", bool(rng.integers(2)), float(rng.uniform(60, 4000))) for k in range(6)]
    res = MilpPlacer(horizon_s=3600, slot_s=600).place(batch, state, 5.0)
    validate_placement(res, batch, state)
    assert res.stats["gap"] >= 0


# ------------------------------------------------------------------ MCF vs Hungarian vs brute force
def brute_force(batch, state, cost):
    """Minimum placement_cost over every assignment of jobs to disjoint free cells (or none)."""
    topo = state.topology
    options = []
    for r in batch:
        lv = topo.level_for(r.num_gpus)
        cells = state.free_cells(lv)
        options.append([None] + [(lv, int(c)) for c in cells])
    best = None
    for combo in itertools.product(*options):
        used = np.zeros(topo.n_gpus, dtype=bool)
        ok = True
        placements = {}
        for r, cell in zip(batch, combo, strict=True):
            if cell is None:
                continue
            lv, c = cell
            span = slice(c << lv, (c + 1) << lv)
            if used[span].any():
                ok = False
                break
            used[span] = True
            placements[r.job_id] = tuple(range(c << lv, (c << lv) + r.num_gpus))
        if ok:
            value = placement_cost(placements, batch, state, cost)
            best = value if best is None else min(best, value)
    return best


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 100_000), width=st.sampled_from([1, 2, 4]), n_jobs=st.integers(1, 3), prio=st.integers(0, 3))
def test_mcf_hungarian_brute_force_agree_on_one_width(seed, width, n_jobs, prio):
    """One gang width: cells of that level are disjoint, so all three find the same optimum cost."""
    rng = np.random.default_rng(seed)
    state = small_state(seed, per_rack=1, gpus=8, p_free=0.7)
    cost = CostModel(priority_weight=prio)
    batch = [R(f"j{k}", width, str(rng.choice(["a", "b"])), bool(rng.integers(2))) for k in range(n_jobs)]
    best = brute_force(batch, state, cost)
    hung = HungarianPlacer(cost).place(batch, state, 1.0)
    mcf = MinCostFlowPlacer(cost).place(batch, state, 1.0)
    for res in (hung, mcf):
        validate_placement(res, batch, state)
    assert hung.objective == placement_cost(hung.placements, batch, state, cost) == best
    assert mcf.stats["flow_costs"][0] == best  # the flow optimum is the optimum
    assert placement_cost(mcf.placements, batch, state, cost) == best


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), n_jobs=st.integers(1, 3))
def test_mixed_widths_flow_is_a_lower_bound_and_solvers_are_valid(seed, n_jobs):
    """Mixed widths: the flow relaxes cell alignment, so its cost bounds the optimum from below."""
    rng = np.random.default_rng(seed)
    state = small_state(seed, per_rack=2, gpus=4, p_free=0.7)
    cost = CostModel()
    batch = [R(f"j{k}", int(rng.choice([1, 2, 3, 4, 8])), "a", bool(rng.integers(2))) for k in range(n_jobs)]
    best = brute_force(batch, state, cost)
    mcf = MinCostFlowPlacer(cost).place(batch, state, 1.0)
    hung = HungarianPlacer(cost).place(batch, state, 1.0)
    for res in (mcf, hung):
        validate_placement(res, batch, state)
        assert placement_cost(res.placements, batch, state, cost) >= best
    assert mcf.stats["flow_costs"][0] <= best


@settings(max_examples=30, deadline=None)
@given(seed=st.integers(0, 100_000))
def test_every_solver_returns_a_valid_placement_on_larger_instances(seed):
    rng = np.random.default_rng(seed)
    state = small_state(seed, racks=2, per_rack=4, gpus=8, p_free=0.7)
    batch = [R(f"j{k}", int(rng.choice([1, 2, 4, 8, 16, 32, 64])), str(rng.choice(["a", "b"])), bool(rng.integers(2)), 900.0) for k in range(15)]
    for solver in (MinCostFlowPlacer(), HungarianPlacer(), MilpPlacer(horizon_s=1800, slot_s=600)):
        res = solver.place(batch, state, 5.0)
        validate_placement(res, batch, state)
        assert res.unplaced.get("j0", "") != "" or "j0" in res.placements
        wide = [r.job_id for r in batch if r.num_gpus == 64]
        assert all("wider than a rack" in res.unplaced[j] for j in wide)


def test_mcf_places_gangs_whole_and_prefers_best_fit_and_non_dedicated():
    topo = Topology(racks=1, servers_per_rack=4)
    free = np.ones(32, dtype=bool)
    free[0:4] = False  # server 0 has 4 free GPUs (4..7): best fit for a 4-gang
    ded = np.full(32, -1)
    ded[8:16] = 0  # server 1 holds pool a's dedicated cells
    state = ClusterState(topo, free, ded, ("a",))
    batch = [R("opp4", 4, "b"), R("ded8", 8, "a", dedicated=True), R("opp8", 8, "b")]
    res = MinCostFlowPlacer().place(batch, state, 1.0)
    validate_placement(res, batch, state)
    assert res.placements["opp4"] == (4, 5, 6, 7)
    assert res.servers_of("ded8", topo) == [1]
    assert res.servers_of("opp8", topo) in ([2], [3])


# ------------------------------------------------------------------ Tesserae relabeling
@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000))
def test_relabeling_a_pure_renaming_costs_nothing(seed):
    rng = np.random.default_rng(seed)
    topo = Topology(racks=1, servers_per_rack=4, gpus_per_server=4)
    old, gpu = {}, 0
    for k in range(8):
        w = int(rng.choice([1, 2, 4]))
        start = ((gpu + w - 1) // w) * w
        if start + w > topo.n_gpus:
            break
        old[f"j{k}"] = tuple(range(start, start + w))
        gpu = start + w
    server_perm = rng.permutation(topo.n_servers)
    gpu_perm = [rng.permutation(4) for _ in range(topo.n_servers)]
    rename = {s * 4 + g: int(server_perm[s]) * 4 + int(gpu_perm[s][g]) for s in range(4) for g in range(4)}
    new = {j: tuple(rename[g] for g in gpus) for j, gpus in old.items()}
    out = relabel_min_migration(old, new, topo)
    assert out.cost == 0 and out.migrated == []
    assert {j: set(g) for j, g in out.relabeled.items()} == {j: set(g) for j, g in old.items()}


def test_relabeling_counts_half_out_half_in():
    topo = Topology(racks=1, servers_per_rack=2, gpus_per_server=4)
    old = {"j1": (0,), "j2": (4,), "gone": (1,)}
    new = {"j1": (4,), "j2": (5,), "fresh": (0,)}  # j1 and j2 now share a server
    out = relabel_min_migration(old, new, topo)
    assert out.cost == pytest.approx(1.0)  # one 1-GPU job moves: 0.5 out + 0.5 in
    assert len(out.migrated) == 1
    two = {"m": (0, 1)}
    out2 = relabel_min_migration(two, {"m": (6, 7)}, topo)
    assert out2.cost == 0 and out2.relabeled["m"] == (0, 1)


# ------------------------------------------------------------------ chain
class Failing:
    name = "failing"

    def place(self, batch, state, budget_s):
        return PlacementResult.failed(self.name, batch, "solver gave up")


class Crashing:
    name = "crashing"

    def place(self, batch, state, budget_s):
        raise RuntimeError("boom")


class Invalid:
    name = "invalid"

    def place(self, batch, state, budget_s):
        busy = int(np.flatnonzero(~state.free)[0])
        return PlacementResult(self.name, {batch[0].job_id: (busy,)}, {r.job_id: "x" for r in batch[1:]})


class Slow:
    """Places everything validly but its fake clock says it took 10 s."""

    name = "slow"

    def __init__(self, clock):
        self.clock = clock

    def place(self, batch, state, budget_s):
        res = HungarianPlacer().place(batch, state, budget_s)
        self.clock.t += 10.0
        return res


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def test_chain_falls_through_on_failure_crash_invalid_and_timeout():
    state = small_state(3, racks=1, per_rack=2, p_free=0.5)
    state.free[0] = False
    batch = [R("a", 1), R("b", 2), R("c", 1)]
    clock = FakeClock()
    chain = PlacementChain([Failing(), Crashing(), Invalid(), Slow(clock), MinCostFlowPlacer()], budget_s=1.0, clock=clock)
    res = chain.place(batch, state)
    validate_placement(res, batch, state)
    attempts = res.stats["attempts"]
    assert [a.solver for a in attempts] == ["failing", "crashing", "invalid", "slow", "mcf"]
    assert attempts[0].failure == "solver gave up"
    assert "boom" in attempts[1].failure
    assert attempts[2].failure.startswith("invalid placement")
    assert attempts[3].timed_out and attempts[3].placed == []
    assert set(res.placements) == set(attempts[4].placed)
    assert all(res.stats["placed_by"][j] == "mcf" for j in res.placements)


def test_chain_hands_leftovers_to_the_next_solver():
    topo = Topology(racks=1, servers_per_rack=2)
    state = ClusterState.empty(topo)

    class OnlyFirst:
        name = "first"

        def place(self, batch, state, budget_s):
            r = batch[0]
            return PlacementResult(self.name, {r.job_id: tuple(range(r.num_gpus))}, {x.job_id: "skipped" for x in batch[1:]})

    batch = [R("x", 8), R("y", 4), R("z", 16)]
    res = PlacementChain([OnlyFirst(), HungarianPlacer()]).place(batch, state)
    validate_placement(res, batch, state)
    assert res.stats["placed_by"] == {"x": "first", "y": "hungarian"}
    assert res.placements["y"][0] >= 8  # server 0 was taken by the first solver
    assert "first: skipped" in res.unplaced["z"] and "hungarian" in res.unplaced["z"]
    everyone_fails = PlacementChain([Failing()]).place(batch, state)
    assert everyone_fails.failure == "every solver failed" and everyone_fails.placements == {}


def test_work_budget_is_deterministic_and_falls_through():
    """enforce_budget="work": answers are judged by their work estimate, not by the clock."""
    from sia.scheduler.placement.milp import MilpPlacer

    state = small_state(5, racks=2, per_rack=4, p_free=0.6)
    batch = [R(f"j{k}", w) for k, w in enumerate([1, 2, 4, 1, 8, 2])]
    clock = FakeClock()
    solvers = [Slow(clock), MinCostFlowPlacer(), HungarianPlacer(), MilpPlacer()]
    chain = PlacementChain(solvers, budget_s=1.0, enforce_budget="work", clock=clock)
    # the chain switched the solvers with wall-clock limits to deterministic ones
    assert solvers[1].deterministic and solvers[3].deterministic
    res = chain.place(batch, state)
    attempts = res.stats["attempts"]
    # the "slow" solver's 10 s on the clock do not count: its work estimate is within budget
    assert attempts[0].failure is None and not attempts[0].timed_out
    assert res.stats["placed_by"] and set(res.stats["placed_by"].values()) == {"slow"}
    validate_placement(res, batch, state)

    class NoWork(Failing):
        name = "nowork"

        def place(self, batch, state, budget_s):
            return PlacementResult(self.name, {}, {r.job_id: "x" for r in batch})

    res = PlacementChain([NoWork(), HungarianPlacer()], enforce_budget="work").place(batch, state)
    assert "no deterministic work" in res.stats["attempts"][0].failure
    # each solver's estimate: positive, and the same on every call (no clock in it)
    for solver in solvers[1:]:
        a = solver.place(batch, state, 1.0).stats["work_s"]
        b = solver.place(batch, state, 1.0).stats["work_s"]
        assert a == b and a > 0
    # a budget below the flow's work estimate makes the flow fail over budget, Hungarian next
    tiny = MinCostFlowPlacer().place(batch, state, 1.0).stats["work_s"] / 2
    res = PlacementChain([MinCostFlowPlacer(), HungarianPlacer()], budget_s=tiny,
                         enforce_budget="work").place(batch, state)
    first, second = res.stats["attempts"]
    assert first.timed_out and "over work budget" in first.failure
    assert second.solver == "hungarian"
    with pytest.raises(ValueError, match="enforce_budget"):
        PlacementChain([HungarianPlacer()], enforce_budget="wall")


# ------------------------------------------------------------------ relabeling inside cells
def _tree_maps(level: int):
    """Every map of a level-``level`` cell onto itself that mirrors subtrees (keeps cells aligned).

    Yields dicts {(lv, i): (lv, j)} over all cells inside it (cell 0 of ``level``).
    """
    if level == 0:
        yield {(0, 0): (0, 0)}
        return
    for left, right in itertools.product(list(_tree_maps(level - 1)), repeat=2):
        for swap in (0, 1):
            out = {(level, 0): (level, 0)}
            for child, sub in ((0, left), (1, right)):
                target = child ^ swap
                for (lv, i), (_, j) in sub.items():
                    span = 1 << (level - 1 - lv)
                    out[(lv, child * span + i)] = (lv, target * span + j)
            yield out


def test_relabel_in_cells_pure_renaming_costs_nothing():
    # one 8-GPU server: jobs of 1, 2, 4 GPUs; mirror the halves, then the pairs of one half
    old = {"a": (2, 0), "b": (1, 2), "c": (0, 6), "d": (0, 7)}
    new = {"a": (2, 1), "b": (1, 1), "c": (0, 0), "d": (0, 1)}
    out = relabel_in_cells(old, new, [(3, 0)])
    assert out.cost == 0 and out.migrated == [] and out.relabeled == old
    # two region cells (servers) swapped as well
    old2 = {"x": (3, 0), "y": (1, 5)}
    new2 = {"x": (3, 1), "y": (1, 1)}
    out2 = relabel_in_cells(old2, new2, [(3, 0), (3, 1)])
    assert out2.cost == 0 and out2.relabeled == old2


def test_relabel_in_cells_counts_a_move_and_keeps_fixed_jobs():
    # f is fixed at GPU 0; m at GPU 1 must land in the other half in the new plan: 1 move
    old = {"f": (0, 0), "m": (0, 1)}
    new = {"f": (0, 0), "m": (0, 4), "fresh": (1, 1)}
    out = relabel_in_cells(old, new, [(3, 0)], fixed={"f"})
    assert out.cost == pytest.approx(1.0) and out.migrated == ["m"]
    assert out.relabeled["f"] == (0, 0)
    # without the fixed mark, moving f instead is as good: still one move
    assert relabel_in_cells(old, new, [(3, 0)]).cost == pytest.approx(1.0)
    with pytest.raises(ValueError, match="outside the region"):
        relabel_in_cells(old, {"m": (0, 9)}, [(3, 0)])


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000))
def test_relabel_in_cells_matches_brute_force_over_aligned_maps(seed):
    """On one 8-GPU server: the optimum over all 128 subtree mirrorings, and a valid relabeled plan."""
    rng = np.random.default_rng(seed)

    def random_plan(names):
        free = np.ones(8, dtype=bool)
        plan = {}
        for x in names:
            lv = int(rng.choice([0, 0, 1, 2]))
            cells = [i for i in range(8 >> lv) if free[i << lv : (i + 1) << lv].all()]
            if cells:
                i = int(rng.choice(cells))
                free[i << lv : (i + 1) << lv] = False
                plan[x] = (lv, i)
        return plan

    old = random_plan([f"j{k}" for k in range(5)])
    new = random_plan(rng.permutation([f"j{k}" for k in range(6)]).tolist())
    both = set(old) & set(new)
    best = min(sum(m[new[x]] != old[x] for x in both) for m in _tree_maps(3))
    out = relabel_in_cells(old, new, [(3, 0)])
    assert out.cost == pytest.approx(best) and len(out.migrated) == best
    used = np.zeros(8, dtype=int)
    for lv, i in out.relabeled.values():
        used[i << lv : (i + 1) << lv] += 1
    assert (used <= 1).all()  # the relabeled plan is still a plan: cells disjoint, levels kept
    assert all(out.relabeled[x][0] == new[x][0] for x in new)


# ------------------------------------------------------------------ migration planning
def test_plan_migration_moves_the_fewest_preemptible_jobs():
    topo = Topology(racks=1, servers_per_rack=1)  # one 8-GPU server
    # movable 1-GPU jobs at GPUs 0 and 5, 2-GPU job at GPUs 2-3: a 4-GPU gang has no cell
    movable = {"a": (0, 0), "b": (1, 1), "c": (0, 5)}
    plan = plan_migration(topo, [(3, 0)], [], movable, level=2)
    # fewest moves: empty the half with one job (GPUs 4-7: c) into GPU 1
    assert plan.new_cell == (2, 1) and plan.moves == {"c": (0, 1)}
    # c fixed: the first half must be emptied (a and b move into 4-7 around c)
    plan = plan_migration(topo, [(3, 0)], [(0, 5)], {"a": (0, 0), "b": (1, 1)}, level=2)
    assert plan.new_cell == (2, 0) and set(plan.moves) == {"a", "b"}
    assert plan.moves["b"] == (1, 3) and plan.moves["a"] == (0, 4)
    # only fixed jobs fragment the server: nothing can move
    assert plan_migration(topo, [(3, 0)], [(0, 0), (0, 5)], {}, level=2) is None
    # not enough room even if everything moved
    assert plan_migration(topo, [(3, 0)], [(2, 0)], {"c": (0, 5)}, level=2) is None


def _fits(avail: np.ndarray, levels: list[int]) -> bool:
    """Brute force: can gangs of these levels take disjoint aligned wholly available cells?"""
    if not levels:
        return True
    lv, rest = levels[0], levels[1:]
    for i in range(avail.size >> lv):
        span = slice(i << lv, (i + 1) << lv)
        if avail[span].all():
            avail[span] = False
            ok = _fits(avail, rest)
            avail[span] = True
            if ok:
                return True
    return False


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), level=st.integers(1, 3))
def test_plan_migration_is_minimal_and_valid_against_brute_force(seed, level):
    """Two 8-GPU servers, random fixed and movable jobs: fewest moves (by brute force) and a valid plan."""
    rng = np.random.default_rng(seed)
    topo = Topology(racks=1, servers_per_rack=2)
    free = np.ones(16, dtype=bool)
    fixed, movable = [], {}
    for k in range(int(rng.integers(1, 8))):
        lv = int(rng.choice([0, 0, 1, 2]))
        cells = [i for i in range(16 >> lv) if free[i << lv : (i + 1) << lv].all()]
        if not cells:
            continue
        i = int(rng.choice(cells))
        free[i << lv : (i + 1) << lv] = False
        if rng.random() < 0.3:
            fixed.append((lv, i))
        else:
            movable[f"m{k}"] = (lv, i)
    region = [(4, 0)] if rng.random() < 0.5 else [(3, 0), (3, 1)]
    plan = plan_migration(topo, region, fixed, movable, level)
    # brute force: smallest set of movable jobs whose cells, with the free ones, hold them and the gang
    names = sorted(movable)
    best = None
    for size in range(len(names) + 1):
        for moved in itertools.combinations(names, size):
            avail = free.copy()
            for x in moved:
                lv, i = movable[x]
                avail[i << lv : (i + 1) << lv] = True
            ok = _fits_in_region(avail, [level, *(movable[x][0] for x in moved)], region)
            if ok:
                best = size
                break
        if best is not None:
            break
    if best is None:
        assert plan is None
        return
    assert plan is not None and len(plan.moves) == best
    # the plan is valid: cells disjoint, inside the region, fixed cells untouched, levels kept
    after = {**movable, **plan.moves, "new": plan.new_cell}
    used = np.zeros(16, dtype=int)
    for lv, i in [*after.values(), *fixed]:
        used[i << lv : (i + 1) << lv] += 1
    assert (used <= 1).all()
    assert plan.new_cell[0] == level
    assert all(after[x][0] == movable[x][0] for x in movable)
    for lv, i in after.values():  # each gang inside one region cell
        assert any(rl >= lv and i >> (rl - lv) == ri for rl, ri in region)


def _fits_in_region(avail: np.ndarray, levels: list[int], region) -> bool:
    """As _fits, with cells confined to region cells (a cell may not straddle two of them)."""
    mask = np.zeros_like(avail)
    reg_level = np.full(avail.size, -1)
    for lv, i in region:
        reg_level[i << lv : (i + 1) << lv] = lv
        mask[i << lv : (i + 1) << lv] = True
    levels = sorted(levels, reverse=True)
    if any(lv > reg_level.max() for lv in levels):
        return False
    if len({rl for rl, _ in region}) == 1 and levels and levels[0] <= region[0][0]:
        return _fits(avail & mask, levels)
    raise AssertionError("test regions are uniform")
