"""Global scan pass: routing by quality, replicas usable after transfer, the negative cache."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.scheduler.regions.global_scan import (
    JobRequest,
    Plan,
    RegionScheduler,
    queue_order,
    scan_pass,
)
from sia.scheduler.regions.model import PoolData, Region, RegionLayout, RegionsError
from sia.scheduler.regions.server_region import ServerRegion


def run(jobs, regions, held, homes, use_cache=True, chunk=2048, vector_min=1):
    """One pass; ``vector_min=1``: every chunk takes the whole-chunk (numpy) cache check."""
    pools = {f"p{k}": k for k in range(len(homes))}
    return scan_pass(jobs, regions, np.array(held, dtype=bool), pools, np.array(homes),
                     use_cache=use_cache, chunk=chunk, vector_min=vector_min)


def test_server_region_is_a_region_scheduler():
    assert isinstance(ServerRegion("A", 1), RegionScheduler)


def test_home_first_then_the_other_holder_when_home_is_full():
    a, b = ServerRegion("A", 1), ServerRegion("B", 1)
    jobs = [JobRequest("j1", "p0", 8), JobRequest("j2", "p0", 4)]
    res = run(jobs, [a, b], [[True, True]], [0])
    assert res.region.tolist() == [0, 1]
    assert a.free_gpus() == 0 and b.free_gpus() == 4


def test_fewer_machines_beat_the_home_region():
    a, b = ServerRegion("A", 2), ServerRegion("B", 1)
    for s in (0, 1):
        a.commit(Plan("A", f"x{s}", 4, 1, 0, ((s, 4),)))  # A: 8 free GPUs, 4 on each server
    res = run([JobRequest("j", "p0", 8)], [a, b], [[True, True]], [0])
    assert res.region.tolist() == [1]  # B starts it on one machine, A would need two


def test_away_from_home_the_least_loaded_region_wins():
    r0, r1, r2 = ServerRegion("R0", 1), ServerRegion("R1", 2), ServerRegion("R2", 2)
    r1.commit(Plan("R1", "x", 8, 1, 0, ((0, 8),)))
    res = run([JobRequest("j", "p0", 4, locality="server")], [r0, r1, r2], [[False, True, True]], [0])
    assert res.region.tolist() == [2]  # R2 is left with 12 of 16 free, R1 with 4 of 16


def test_no_region_without_data_or_hardware():
    a = ServerRegion("A", 1, hardware=frozenset({"v100"}))
    b = ServerRegion("B", 1, hardware=frozenset({"a100"}))
    jobs = [JobRequest("j1", "p0", 1, hardware="a100"), JobRequest("j2", "p1", 1, hardware="a100")]
    res = run(jobs, [a, b], [[True, False], [True, True]], [0, 0])
    assert res.region.tolist() == [-1, 1]
    assert res.attempts == 1  # A has no A100s and j1's data is only in A: nothing to ask


def test_replica_is_used_only_after_its_transfer():
    lay = RegionLayout([Region("A", 8), Region("B", 8)], [PoolData("p0", "A", 100.0)], transfer_rate=10.0)
    reps, _ = lay.initial_replicas().apply(lay, np.array([[True, True]]), now=0.0)
    for now, want in ((9.0, -1), (10.0, 1)):
        a, b = ServerRegion("A", 1), ServerRegion("B", 1)
        a.commit(Plan("A", "busy", 8, 1, 0, ((0, 8),)))
        res = scan_pass([JobRequest("j", "p0", 2)], [a, b], reps.usable(now), lay.pool_index, lay.home)
        assert res.region.tolist() == [want], now


def test_cache_hits_skip_equal_or_larger_requests_and_reset_per_pass():
    jobs = [JobRequest("j1", "p0", 8, priority=4), JobRequest("j2", "p0", 8, priority=3),
            JobRequest("j3", "p0", 16, priority=2), JobRequest("j4", "p0", 2, priority=1),
            JobRequest("j5", "p0", 2, locality="server", priority=0)]
    # j1 fails (asked), j2 and j3 hit the cache, j4 is asked and fits, j5 has another shape: asked
    # j2 and j3 are skipped in the loop or by the whole-chunk check (not taken by a chunk of
    # fewer than vector_min jobs)
    for chunk, vector_min in ((1, 1), (2, 1), (2048, 1), (2048, 64)):
        a = ServerRegion("A", 1, gpus_per_server=4)
        res = run(jobs, [a], [[True]], [0], chunk=chunk, vector_min=vector_min)
        assert (res.attempts, res.cache_hits, res.placed) == (3, 2, 2)
        assert res.hit_rate == pytest.approx(2 / 5)
        assert res.region.tolist() == [-1, -1, -1, 0, 0]
    # next pass: the cache starts empty, so the first 8-GPU request is asked again
    res2 = run([JobRequest("k1", "p0", 8), JobRequest("k2", "p0", 8)], [a], [[True]], [0])
    assert (res2.attempts, res2.cache_hits) == (1, 1)


def test_queue_order_is_priority_then_credit_then_position():
    assert queue_order([0, 1, 1, 0], [5.0, 1.0, 2.0, 5.0]).tolist() == [2, 1, 0, 3]


def test_unknown_pool_and_shape_mismatch_are_named():
    with pytest.raises(RegionsError, match="job 'j': pool 'zz' is not in the region layout"):
        run([JobRequest("j", "zz", 1)], [ServerRegion("A", 1)], [[True]], [0])
    with pytest.raises(RegionsError, match="one column per region"):
        run([JobRequest("j", "p0", 1)], [ServerRegion("A", 1)], [[True, True]], [0])
    with pytest.raises(RegionsError, match="locality 'rack' is not one of"):
        run([JobRequest("j", "p0", 1, locality="rack")], [ServerRegion("A", 1)], [[True]], [0])


def test_an_empty_queue_is_a_pass_that_does_nothing():
    a = ServerRegion("A", 1)
    res = run([], [a], [[True]], [0])
    assert (res.region.tolist(), res.attempts, res.cache_hits, res.hit_rate) == ([], 0, 0, 0.0)
    assert a.free_gpus() == 8
    with pytest.raises(RegionsError, match="chunk must be >= 1 job, got 0"):
        run([], [a], [[True]], [0], chunk=0)


def test_commit_refuses_a_stale_plan():
    a = ServerRegion("A", 1)
    plan = a.try_plan(JobRequest("j", "p0", 6))
    a.commit(plan)
    with pytest.raises(RegionsError, match="needs 6 GPUs on server 0, which has 2 free"):
        a.commit(plan)


@st.composite
def scan_cases(draw):
    n_r = draw(st.integers(1, 3))
    n_p = draw(st.integers(1, 3))
    shapes = [(draw(st.integers(1, 3)), draw(st.sampled_from([2, 4, 8])), draw(st.sampled_from(["x", "y"])))
              for _ in range(n_r)]
    held = [[draw(st.booleans()) for _ in range(n_r)] for _ in range(n_p)]
    homes = [draw(st.integers(0, n_r - 1)) for _ in range(n_p)]
    jobs = [JobRequest(f"j{k}", f"p{draw(st.integers(0, n_p - 1))}", draw(st.integers(1, 12)),
                       draw(st.sampled_from(["x", "y"])), draw(st.sampled_from(["any", "server"])),
                       draw(st.integers(0, 2)), draw(st.floats(0, 1)))
            for k in range(draw(st.integers(1, 30)))]
    return shapes, held, homes, jobs, draw(st.integers(1, 8))


@settings(max_examples=150)
@given(scan_cases())
def test_cache_on_and_off_decide_alike_and_regions_never_overflow(case):
    # chunks of a few jobs make the whole-chunk cache check (numpy) skip jobs mid-pass
    shapes, held, homes, jobs, chunk = case
    outcomes = []
    for use_cache, vector_min in ((False, 1), (True, 1), (True, 10**9)):
        regions = [ServerRegion(f"R{r}", s, g, frozenset({hw})) for r, (s, g, hw) in enumerate(shapes)]
        res = run(jobs, regions, held, homes, use_cache=use_cache, chunk=chunk,
                  vector_min=vector_min)
        for reg in regions:
            assert all(0 <= f <= reg.gpus_per_server for f in reg.free)
            assert reg.free_gpus() == sum(reg.free) >= 0
        used = np.zeros(len(regions))
        for job, r in zip(jobs, res.region.tolist(), strict=True):
            if r >= 0:
                assert held[int(job.pool[1:])][r] and job.hardware in regions[r].hardware
                used[r] += job.gpus
        assert used.tolist() == [reg.total_gpus - reg.free_gpus() for reg in regions]
        outcomes.append(res)
    off, on, per_job = outcomes
    assert on.region.tolist() == off.region.tolist()
    assert on.attempts + on.cache_hits == off.attempts and off.cache_hits == 0
    # the per-job loop alone answers as the whole-chunk check does, hit for hit
    assert (per_job.region.tolist(), per_job.attempts, per_job.cache_hits) == \
        (on.region.tolist(), on.attempts, on.cache_hits)
