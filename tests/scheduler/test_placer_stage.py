"""The simulator's placer stage: starts without a placement are placed as one batch after the
decision, and the refused ones go back to the policy (DESIGN.md 6.1)."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.simulator import PolicyError, build_trace, run_trace
from sia.scheduler.core.view import Start
from sia.scheduler.locality.cell_cluster import CellCluster
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import config_for_policy, simulate_cells
from sia.scheduler.policies.ssf import GlobalSSFPolicy
from sia.scheduler.registry import make_policy


def _table(rows) -> pl.DataFrame:
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


class RefuseFirstOnce(Cluster):
    """A tracked fungible cluster whose placer stage refuses the first start of every batch the
    first time that job is asked for, and records each batch."""

    def __init__(self, quota):
        super().__init__(quota, track_gpus=True)
        self.batches: list[list[int]] = []
        self.refused_once: set[int] = set()

    def place_batch(self, starts):
        self.batches.append([s[0] for s in starts])
        first = starts[0][0]
        out = {job: None for job, _, _, _ in starts}  # None: the cluster picks the GPUs
        if first not in self.refused_once:
            self.refused_once.add(first)
            del out[first]
        return out


class RecordingGSSF(GlobalSSFPolicy):
    def reset(self, trace, cluster):
        super().reset(trace, cluster)
        self.told: list[list[int]] = []

    def refused(self, jobs):
        self.told.append(list(jobs))
        super().refused(jobs)


def test_refused_starts_go_back_to_the_policy_and_start_later():
    jobs = _table([("a0", "A", 0.0, 40.0, 2), ("a1", "A", 0.0, 10.0, 1), ("b0", "B", 0.0, 20.0, 2),
                   ("b1", "B", 0.0, 30.0, 1)])
    trace, _ = build_trace(jobs, make_pools({"A": 4, "B": 4}))
    cluster, policy = RefuseFirstOnce(trace.quota), RecordingGSSF()
    state = run_trace(trace, cluster, policy, check_invariants=True)
    # the decision at t=0 starts all four: one batch of four, its first start refused
    assert cluster.batches[0] == [1, 3, 2, 0]  # gSSF's order: shortest service first
    assert policy.told[0] == [1]
    assert state.start_time[1] > 0 and (state.start_time[[0, 2, 3]] == 0).all()
    # every refused job was told to the policy exactly once, and every job ran
    assert sorted(j for told in policy.told for j in told) == sorted(cluster.refused_once)
    assert not any(s != s for s in state.start_time)


class OwnStarts:
    """Starts every pending job that fits the free GPUs on spare GPUs (no refused())."""

    uses_ticks = False

    def reset(self, trace, cluster):
        self._gpus = trace.num_gpus.tolist()

    def decide(self, view):
        starts, free = [], view.free_gpus
        for j in view.pending_all().tolist():
            if self._gpus[j] <= free:
                starts.append(Start(j, True))
                free -= self._gpus[j]
        return starts


def test_a_policy_without_refused_keeps_placing_its_own_starts():
    jobs = _table([("a0", "A", 0.0, 10.0, 1)])
    trace, _ = build_trace(jobs, make_pools({"A": 4}))
    cluster = RefuseFirstOnce(trace.quota)
    state = run_trace(trace, cluster, OwnStarts(), check_invariants=True)
    assert cluster.batches == []  # no refused(): no placer stage
    assert state.start_time[0] == 0.0


def two_pools(**kw) -> CellCluster:
    return CellCluster([8, 8], ["a", "b"], LocalityConfig(debug=True, **kw), widest=[8, 8])


@pytest.mark.parametrize("solver", ["mcf", "hungarian", "milp"])
def test_the_fallback_chain_places_the_whole_batch_in_one_call(solver):
    c = two_pools(chain=("buddy", solver), spare_full_pools=False)
    got = c.place_batch([(0, 0, 1, True), (1, 1, 2, False), (2, 1, 2, False), (3, 0, 8, True)])
    # a binds one server and its buddy server is kept from opportunistic gangs: buddy refuses
    # both 2-GPU gangs, and the chain places them together; a's 8-GPU job finds no cell
    assert sorted(got) == [0, 1, 2]
    assert c.stats.buddy == 1 and c.stats.solver_calls == 1
    assert c.stats.fallback_by == {solver: 2} and c.stats.refused == 1
    for job, width in ((0, 1), (1, 2), (2, 2)):
        c.allocate(job, width, got[job])
        gpus = got[job]
        assert len(gpus) == width and min(gpus) % width == 0  # one aligned cell each
    assert set(got[1]).isdisjoint(got[2])
    c.check()  # buddy invariants, one cell per gang, no double booking, no stray grant


@pytest.mark.parametrize("name", ["ssf", "gssf", "themis"])
def test_policies_placed_by_the_simulator_replay_on_cells(name):
    jobs, pools = generate_workload("base", seed=3, days=0.5, num_pools=3)
    pools = pools.select("pool", "quota_gpus")
    for chain in (("buddy",), ("buddy", "mcf")):
        res, summary = simulate_cells(jobs, pools, make_policy(name), LocalityConfig(chain=chain),
                                      check_invariants=True)
        assert res["start_time"].is_not_nan().all()
        assert summary["placed_buddy"] + summary["placed_fallback"] >= jobs.height


def test_the_oracle_on_cells_asks_again_for_a_start_without_a_cell():
    """Its plan is count-level: h (4 GPUs) is planned at t=10, when six GPUs are free but no
    aligned 4-GPU cell; the placer refuses it, and the oracle asks again at every decision
    until p ends at 50 and frees the cell. The others start as planned."""
    oracle = make_policy("oracle", work_limit=2.0)
    res, summary = simulate_cells(fragmented_pool(), make_pools({"a": 8}), oracle,
                                  LocalityConfig(), check_invariants=True,
                                  record_placements=True)
    start = dict(zip(res["job_id"], res["start_time"], strict=True))
    plan = dict(zip(res["job_id"].to_list(), oracle.result.start_s.tolist(), strict=True))
    assert plan["h"] == 10.0 and start["h"] == 50.0
    assert all(start[j] == plan[j] for j in "pqrsk")
    assert summary["placements"]["h"] == (0, 1, 2, 3)
    assert summary["refused"] >= 1 and summary["frag_refused"] >= 1
    # on fungible GPUs the same plan runs as planned
    fungible = make_policy("oracle", work_limit=2.0)
    state = run_trace(build_trace(fragmented_pool(), make_pools({"a": 8}))[0],
                      Cluster([8]), fungible, check_invariants=True)
    assert state.start_time.tolist() == fungible.result.start_s.tolist()


@pytest.mark.parametrize("chain", [("buddy",), ("buddy", "mcf")])
def test_the_oracle_replays_on_cells_never_before_its_plan(chain):
    jobs, pools = generate_workload("base", seed=6, days=1.0, num_pools=3)
    pools = pools.select("pool", "quota_gpus")
    oracle = make_policy("oracle", work_limit=2.0)
    res, summary = simulate_cells(jobs, pools, oracle, LocalityConfig(chain=chain),
                                  check_invariants=True)
    trace, order = build_trace(jobs, pools)
    start = res["start_time"].to_numpy()
    assert not np.isnan(start).any()
    # result rows follow the jobs table; the plan follows the trace's (submit) order
    plan = np.empty(trace.n_jobs)
    plan[order] = oracle.result.start_s
    assert (start >= plan - 1e-9).all()
    assert summary["frag_refused"] > 0  # the workload's gangs do meet fragmentation
    assert (start > plan + 1e-9).any()
    assert summary["placed_buddy"] + summary["placed_fallback"] >= jobs.height


# ----------------------------------------------------------------------------- can_place
def fragmented_pool() -> pl.DataFrame:
    """One pool of 8 GPUs (one server). At t=0: p (1 GPU, to t=50) takes GPU 0, q (1, to 10)
    GPU 1, r (2, to 10) GPUs 2-3, s (1, to 100) GPU 4. At t=10 six GPUs are free (1-3, 5-7)
    but no aligned 4-GPU cell: h (4 GPUs, arrived at 5) fits by count, not by cells, until
    p ends at 50; k (1 GPU, arrived at 6) queues behind h."""
    return _table([("p", "a", 0.0, 50.0, 1), ("q", "a", 0.0, 10.0, 1), ("r", "a", 0.0, 10.0, 2),
                   ("s", "a", 0.0, 100.0, 1), ("h", "a", 5.0, 20.0, 4), ("k", "a", 6.0, 20.0, 1)])


@pytest.mark.parametrize("name", ["fcfs", "maxmin", "hived"])
def test_a_head_without_a_cell_blocks_its_pool(name):
    cfg = config_for_policy(LocalityConfig(), name)
    res, summary = simulate_cells(fragmented_pool(), make_pools({"a": 8}), make_policy(name),
                                  cfg, check_invariants=True, record_placements=True)
    start = dict(zip(res["job_id"], res["start_time"], strict=True))
    # k would get GPU 5 at t=10, but FCFS order within the pool keeps it behind h (HiveD*: as
    # a low-priority job k needs a cell outside the pool's bound cells, and there is none)
    assert start == {"p": 0.0, "q": 0.0, "r": 0.0, "s": 0.0, "h": 50.0, "k": 50.0}
    assert summary["placements"]["h"] == (0, 1, 2, 3)
    assert summary["frag_refused"] >= 1 and summary["refused"] >= 1


class ProbeOnly:
    """Asks can_place for every pending job of pool 0 in arrival order and starts those told
    True, except that it leaves out the first one it was told True for while ``drop`` lasts
    (the cell it held must come back at the placer stage)."""

    uses_ticks = False

    def __init__(self, drop: int = 0, kind_of_start: bool | None = None):
        self.drop, self.kind_of_start, self.answers = drop, kind_of_start, []

    def reset(self, trace, cluster):
        self.answers = []

    def decide(self, view):
        starts = []
        for j in list(view.pending(0)):
            ok = view.can_place(j, False)
            self.answers.append((view.now, j, ok))
            if not ok:
                break
            if self.drop:
                self.drop -= 1
                continue
            opp = False if self.kind_of_start is None else self.kind_of_start
            starts.append(Start(j, opp))
        return starts

    def refused(self, jobs):
        raise AssertionError(f"a start told True was refused: {jobs}")


def test_a_cell_held_for_a_start_the_decision_leaves_out_is_freed():
    jobs = _table([("w", "a", 0.0, 10.0, 8), ("x", "a", 1.0, 10.0, 8)])
    pol = ProbeOnly(drop=1)
    res, summary = simulate_cells(jobs, make_pools({"a": 8}), pol, LocalityConfig(),
                                  check_invariants=True)  # CellCluster.check: no stray grant
    # t=0: w is told True (its cell held) but left out; t=1: the cell is free again for w,
    # and x (8 GPUs) is then refused because w holds the pool's only cell
    assert pol.answers[:3] == [(0.0, 0, True), (1.0, 0, True), (1.0, 1, False)]
    assert res["start_time"].to_list() == [1.0, 11.0]
    assert summary["placed_buddy"] == 3  # w twice (the dropped hold counts), x once at t=11


def test_can_place_asks_for_the_kind_the_start_has():
    jobs = _table([("w", "a", 0.0, 10.0, 2)])
    with pytest.raises(PolicyError, match="with another kind than the dedicated start it asked"):
        simulate_cells(jobs, make_pools({"a": 8}), ProbeOnly(kind_of_start=True), LocalityConfig())


class ProbeWithoutRefused(ProbeOnly):
    refused = None


def test_can_place_on_cells_needs_the_placer_stage():
    jobs = _table([("w", "a", 0.0, 10.0, 2)])
    with pytest.raises(PolicyError, match="asked can_place on cells but has no refused"):
        simulate_cells(jobs, make_pools({"a": 8}), ProbeWithoutRefused(), LocalityConfig())


def test_can_place_is_true_on_fungible_gpus():
    jobs = _table([("w", "a", 0.0, 10.0, 8), ("x", "a", 0.0, 10.0, 8)])
    trace, _ = build_trace(jobs, make_pools({"a": 8}))
    pol = ProbeOnly()
    with pytest.raises(PolicyError, match="needing 8 GPUs but only 0 are free"):
        run_trace(trace, Cluster(trace.quota), pol)  # the GPU count is the policy's business
    assert pol.answers == [(0.0, 0, True), (0.0, 1, True)]


def _out_of_order(res: pl.DataFrame, dedicated_only: bool = False) -> int:
    """Starts (dedicated ones only, if asked) preceded in their pool's arrival order by a job
    that started later."""
    bad = 0
    for _, grp in res.sort("submit_time", "job_id").group_by("pool"):
        start = grp["start_time"].to_numpy()
        before = np.maximum.accumulate(np.concatenate([[-np.inf], start[:-1]]))
        late = before > start
        if dedicated_only:
            late &= ~grp["opportunistic"].to_numpy()
        bad += int(late.sum())
    return bad


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), name=st.sampled_from(["fcfs", "maxmin"]),
       chain=st.sampled_from([("buddy",), ("buddy", "mcf")]),
       variant=st.sampled_from(["base", "more-wide-jobs"]))
def test_fcfs_and_maxmin_keep_arrival_order_within_a_pool_on_cells(seed, name, chain, variant):
    jobs, pools = generate_workload(variant, seed=seed, days=0.5, num_pools=3)
    res, _ = simulate_cells(jobs, pools.select("pool", "quota_gpus"), make_policy(name),
                            LocalityConfig(chain=chain), check_invariants=True)
    assert res["start_time"].is_not_nan().all()
    assert _out_of_order(res) == 0


@settings(max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), chain=st.sampled_from([("buddy",), ("buddy", "mcf")]),
       variant=st.sampled_from(["base", "higher-load", "more-wide-jobs"]),
       adopt=st.booleans())
def test_hived_on_cells_keeps_its_invariants_and_fcfs_guaranteed_jobs(seed, chain, variant, adopt):
    jobs, pools = generate_workload(variant, seed=seed, days=0.5, num_pools=3)
    cfg = config_for_policy(LocalityConfig(chain=chain, adopt_loans=adopt), "hived")
    # check_invariants: the buddy allocator's invariants (HiveD's safety among them) after every
    # allocation, CellCluster.check (one cell per gang, no stray grant) after every event
    res, summary = simulate_cells(jobs, pools.select("pool", "quota_gpus"),
                                  make_policy("hived", seed=seed), cfg, check_invariants=True)
    assert res["start_time"].is_not_nan().all()
    assert _out_of_order(res, dedicated_only=True) == 0
    assert summary["placed_buddy"] + summary["placed_fallback"] >= jobs.height


def test_sia_takes_a_refused_start_back_and_starts_it_later():
    # the only job's start is refused at t=0: SIA must count it as pending again (else it sees
    # nothing to do and the replay stalls); it starts at the next tick
    trace, _ = build_trace(_table([("a0", "A", 0.0, 10.0, 1)]), make_pools({"A": 4, "B": 4}))
    cluster, policy = RefuseFirstOnce(trace.quota), make_policy("sia-perfect")
    state = run_trace(trace, cluster, policy, tick_s=300.0, check_invariants=True)
    assert cluster.batches == [[0], [0]]
    assert state.start_time[0] == 300.0
