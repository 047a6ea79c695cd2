"""The simulator's placer stage: starts without a placement are placed as one batch after the
decision, and the refused ones go back to the policy (DESIGN.md 6.1)."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.schema import make_pools, validate
from sia.data.synthetic import generate_workload
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.simulator import build_trace, run_trace
from sia.scheduler.locality.cell_cluster import CellCluster
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import simulate_cells
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


def test_a_policy_without_refused_keeps_placing_its_own_starts():
    jobs = _table([("a0", "A", 0.0, 10.0, 1)])
    trace, _ = build_trace(jobs, make_pools({"A": 4}))
    cluster = RefuseFirstOnce(trace.quota)
    run_trace(trace, cluster, make_policy("fcfs"), check_invariants=True)
    assert cluster.batches == []  # FCFS has no refused(): no placer stage


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
