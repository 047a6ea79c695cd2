"""The service grows its arrays in place as jobs arrive one at a time (a live cluster): the same
decisions as `sia replay`, with one build and no re-run of the log."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import JOB_SCHEMA, make_pools
from sia.data.synthetic import generate_workload
from sia.models.forecaster import LearnedForecaster
from sia.models.job_duration import JobDuration
from sia.scheduler.core.simulator import simulate
from sia.scheduler.core.view import TraceArrays
from sia.scheduler.registry import make_policy, policy_options
from sia.service.core import ServiceCore
from sia.service.drive import core_sender, drive_trace, first_difference

from .conftest import small_forecaster

_BYTES: dict[str, tuple] = {}


def _learned_sia(with_model: bool = False, **options):
    """Learned SIA on :func:`small_forecaster` (with a JobDuration model: the history CDF
    with the started-jobs cap, whose per-job features and look-alikes grow with the
    arrays), decoded from its bytes (fitted once)."""
    key = "model" if with_model else "rule"
    if key not in _BYTES:
        model = None
        if with_model:
            from sia.features.duration_features import DURATION_FEATURES

            x = np.full((4, len(DURATION_FEATURES)), np.nan)
            model = JobDuration("history_cdf", started_cap=True).fit(x, np.array([0, 1, 2, 3]))
        _BYTES[key] = small_forecaster(model).to_bytes()
    document, boosters = _BYTES[key]
    fc = LearnedForecaster.from_bytes(document, boosters, cache_key=("test-grow", key))
    return make_policy("sia", forecaster=fc, **options)


def _maker(name: str):
    if name == "sia":
        return _learned_sia
    if name == "sia-risk":  # the risk budget: run times learned at the jobs' ends
        return lambda: _learned_sia(risk=1.0)  # its arrivals calibrated online per pool
    if name == "sia-risk-predicted":
        return lambda: _learned_sia(risk=1.0, risk_arrivals="predicted")
    if name == "sia-duration-model":
        return lambda: _learned_sia(with_model=True)
    return lambda: make_policy(name, **policy_options(name, seed=0))


def _replay_starts(jobs: pl.DataFrame, pools: pl.DataFrame, make) -> dict[str, float]:
    res = simulate(jobs, pools, make())
    return dict(zip(res["job_id"], res["start_time"], strict=True))


def _one_at_a_time(jobs, pools, make, lookahead_s: float = 0.0):
    core = ServiceCore(pools, make)
    got = drive_trace(jobs, core_sender(core), lookahead_s=lookahead_s)
    return core, got


@pytest.fixture(scope="module")
def workload() -> tuple[pl.DataFrame, pl.DataFrame]:
    return generate_workload("base", seed=2, days=1.5)


@pytest.mark.parametrize("name", ["fcfs", "maxmin", "hived", "sia", "sia-duration-model",
                                  "sia-risk", "sia-risk-predicted"])
def test_jobs_one_at_a_time_decide_as_the_replay_with_one_build(workload, name):
    """Each submission at its own instant (clock events between): every start equals the
    replay's, the arrays were built once and grown at every other arrival instant."""
    jobs, pools = workload
    make = _maker(name)
    replay = _replay_starts(jobs, pools, make)
    core, got = _one_at_a_time(jobs, pools, make)
    assert first_difference(got.starts, replay) is None
    assert len(got.starts) == jobs.height
    assert core.rebuilds <= 1
    assert core.grows == jobs["submit_time"].n_unique() - 1
    if name.startswith("sia") or name == "maxmin":
        assert got.lent, "the workload should make it lend"


def _perfect_arrivals_sia():
    """SIA with perfect WillJobsArrive / NewLoadEstimate (they read the future submissions)
    and the learned durations of :func:`small_forecaster`."""
    fc = _learned_sia().forecaster
    return make_policy("sia-perfect-arrivals", base=fc)


def test_perfect_arrivals_grow_and_decide_as_the_replay_when_sent_a_window_ahead():
    """Perfect arrival predictions read the future submissions: sent a day ahead (more than
    the largest window, 12 h), the grown arrays hold them when they are read, so SIA with
    perfect arrivals decides as the replay, with one build."""
    jobs, pools = generate_workload("base", seed=3, days=3.0)
    replay = _replay_starts(jobs, pools, _perfect_arrivals_sia)
    core, got = _one_at_a_time(jobs, pools, _perfect_arrivals_sia, lookahead_s=86400.0)
    assert first_difference(got.starts, replay) is None
    assert got.lent
    assert core.rebuilds == 1 and core.grows > 0


def test_sia_perfect_grown_decides_as_one_build():
    """sia-perfect also reads true durations, which a live service knows only at the end
    (so it does not decide as the replay live), but growing the arrays a day ahead decides
    as one build of every job (every submission sent first)."""
    jobs, pools = generate_workload("base", seed=3, days=3.0)
    make = _maker("sia-perfect")
    _, once = _one_at_a_time(jobs, pools, make, lookahead_s=math.inf)
    core, grown = _one_at_a_time(jobs, pools, make, lookahead_s=86400.0)
    assert grown.starts == once.starts and grown.lent == once.lent
    assert core.rebuilds == 1 and core.grows > 0


def test_a_policy_without_grow_still_rebuilds(workload):
    """The random strawman cannot grow (its draws follow the arrays): it rebuilds as before."""
    jobs, pools = workload
    core, _ = _one_at_a_time(jobs.head(30), pools, _maker("sia-random-both"), math.inf)
    assert core.rebuilds == 1 and core.grows == 0
    late = ServiceCore(pools, _maker("sia-random-both"))
    assert not late.make_policy().growable


def test_trace_grow_equals_a_build_of_all_the_jobs():
    """Growing the arrays job by job gives the arrays of one build: codes by first
    appearance, per-pool job lists, users and limits appearing with the first one."""
    tags = [None, "a", "b", "a", None, "c", "b"]
    users = [None, None, "u", "v", "u", None, "w"]
    limits = [None, None, None, 60.0, None, 30.0, None]
    pool = [0, 1, 0, 1, 1, 0, 1]
    n = len(tags)
    full = TraceArrays.build([f"j{i}" for i in range(n)], np.arange(n, dtype=float),
                             np.ones(n), np.ones(n, dtype=int), pool, tags, ("p", "q"),
                             np.array([2, 2]), user=users, time_limit=limits)
    grown = TraceArrays.build(["j0"], [0.0], [1.0], [1], [0], [None], ("p", "q"),
                              np.array([2, 2]), user=[None], time_limit=[None])
    for lo, hi in ((1, 2), (2, 5), (5, 7)):
        assert grown.grow([f"j{i}" for i in range(lo, hi)], np.arange(lo, hi, dtype=float),
                          np.ones(hi - lo), np.ones(hi - lo, dtype=int), pool[lo:hi],
                          tags[lo:hi], users[lo:hi], limits[lo:hi]) == lo
    for name in ("job_ids", "submit", "duration", "num_gpus", "pool", "tag", "tag_code",
                 "user", "user_code"):
        assert getattr(grown, name).tolist() == getattr(full, name).tolist(), name
    np.testing.assert_array_equal(grown.time_limit, full.time_limit)
    assert [a.tolist() for a in grown.pool_jobs] == [a.tolist() for a in full.pool_jobs]
    assert not grown.submit.flags.writeable


def test_holds_are_kept_when_a_job_was_held_and_grown_jobs_are_not_held():
    """``hold`` (seconds a job was known before it arrived): None unless some job was held
    (NaN and 0 are not held); the service's grown jobs come when they can run (hold 0)."""
    def build(hold):
        return TraceArrays.build(["a", "b", "c"], [0.0, 5.0, 9.0], np.ones(3), np.ones(3, int),
                                 [0, 1, 0], [None] * 3, ("p", "q"), np.array([2, 2]), hold=hold)
    assert build(None).hold is None
    assert build([0.0, np.nan, None]).hold is None
    t = build([0.0, 300.0, np.nan])
    assert t.hold.tolist() == [0.0, 300.0, 0.0] and not t.hold.flags.writeable
    assert t.grow(["d"], [12.0], [1.0], [1], [1], [None]) == 3
    assert t.hold.tolist() == [0.0, 300.0, 0.0, 0.0] and t.n_jobs == 4


_SETTINGS = settings(max_examples=25, deadline=None,
                     suppress_health_check=[HealthCheck.too_slow,
                                            HealthCheck.function_scoped_fixture])


@st.composite
def small_workloads(draw):
    """Up to 14 jobs (each within its pool's quota) on 2-3 pools of 1-4 GPUs, submitted at a
    few distinct instants (ties included), lasting 1 s to 2 days."""
    n_pools = draw(st.integers(2, 3))
    quota = [draw(st.integers(1, 4)) for _ in range(n_pools)]
    n = draw(st.integers(1, 14))
    rows = []
    for i in range(n):
        p = draw(st.integers(0, n_pools - 1))
        rows.append({"job_id": f"j{i:02d}", "pool": f"p{p}",
                     "submit_time": float(draw(st.integers(0, 40)) * 450.0),
                     "duration": float(draw(st.sampled_from([1.0, 200.0, 2000.0, 20000.0,
                                                              172800.0]))),
                     "num_gpus": draw(st.integers(1, quota[p])),
                     "tag": draw(st.sampled_from([None, "x", "y"])),
                     "user": draw(st.sampled_from([None, "u"])), "preemptible": False})
    jobs = pl.DataFrame(rows, schema=JOB_SCHEMA)
    pools = make_pools({f"p{p}": quota[p] for p in range(n_pools)})
    return jobs, pools


@_SETTINGS
@given(data=small_workloads(), name=st.sampled_from(["fcfs", "maxmin", "sia"]))
def test_property_jobs_one_at_a_time_decide_as_the_replay(data, name):
    jobs, pools = data
    make = _maker(name)
    replay = _replay_starts(jobs, pools, make)
    core, got = _one_at_a_time(jobs, pools, make)
    assert first_difference(got.starts, replay) is None
    assert core.rebuilds == 1


def test_restart_after_growing_reruns_once_and_grows_on(workload):
    """A core restored from the log of a run that grew at every arrival re-runs the log once
    to the same decisions, then grows on new jobs as the uninterrupted core does."""
    from sia.service.api_models import to_core_events

    jobs, pools = workload
    jobs = jobs.head(60)
    core = ServiceCore(pools, _learned_sia)
    logged: list[dict] = []
    send = core_sender(core)

    def logging_send(events):
        logged.extend(events)
        return send(events)

    drive_trace(jobs, logging_send, lookahead_s=0.0)
    assert core.rebuilds == 1 and core.grows > 0
    restored = ServiceCore(pools, _learned_sia)
    restored.restore(to_core_events(logged))
    assert restored.decisions == core.decisions
    assert (restored.rebuilds, restored.grows) == (1, 0)
    t = core.clock + 10.0
    late = [{"id": "late-s", "type": "submit", "time": t, "job": "late", "pool":
             str(pools["pool"][0]), "gpus": 1}, {"id": "late-c", "type": "clock", "time": t}]
    for c in (core, restored):
        c.apply(c.check(to_core_events(late)))
    assert restored.decisions == core.decisions and restored.grows == 1
    assert restored.decisions[-1].job == "late"


def test_shadow_mode_grows_to_the_decisions_of_the_rebuild_path(workload):
    """In shadow mode (the cluster reports its own starts and ends, some of them before the
    service's clock reaches the job), growing decides what the rebuild path (growing off:
    the code before) decides, with one build."""
    from sia.service.drive import shadow_trace

    jobs, pools = workload
    jobs = jobs.head(80)
    grown = ServiceCore(pools, _learned_sia, mode="shadow")
    rebuilt = ServiceCore(pools, _learned_sia, mode="shadow")
    rebuilt._grow = lambda: False
    a = shadow_trace(jobs, pools, core_sender(grown), batch=25)
    b = shadow_trace(jobs, pools, core_sender(rebuilt), batch=25)
    assert a.starts == b.starts and a.lent == b.lent and len(a.starts) == jobs.height
    assert grown.decisions == rebuilt.decisions
    assert grown.rebuilds == 1 and rebuilt.rebuilds > 1
