"""The service's core in-process: the same starts as the replay, rebuilds, restore, refusals."""

from __future__ import annotations

import math

import polars as pl
import pytest
from sia.data.schema import make_pools
from sia.data.synthetic import generate_workload
from sia.models.forecaster import LearnedForecaster
from sia.scheduler.core.simulator import simulate
from sia.scheduler.registry import make_policy, policy_options
from sia.service.api_models import to_core_events
from sia.service.core import EventError, ServiceCore
from sia.service.drive import core_sender, drive_trace, first_difference

from .conftest import small_forecaster


@pytest.fixture(scope="module")
def workload() -> tuple[pl.DataFrame, pl.DataFrame]:
    return generate_workload("base", seed=1, days=1.0)


def _replay(jobs: pl.DataFrame, pools: pl.DataFrame, name: str) -> dict[str, float]:
    res = simulate(jobs, pools, make_policy(name, **policy_options(name, seed=0)))
    return dict(zip(res["job_id"], res["start_time"], strict=True))


_BYTES: list = []


def _learned_sia():
    """Learned SIA on :func:`small_forecaster`, decoded from its bytes (fitted once)."""
    if not _BYTES:
        _BYTES.append(small_forecaster().to_bytes())
    document, boosters = _BYTES[0]
    fc = LearnedForecaster.from_bytes(document, boosters, cache_key=("test-serve", 1))
    return make_policy("sia", forecaster=fc)


@pytest.mark.parametrize("name", ["fcfs", "maxmin", "sia-random-both", "sia"])
@pytest.mark.parametrize("lookahead", [math.inf, 0.0])
def test_same_starts_as_the_replay(workload, name, lookahead):
    """The service decides what the replay decides, with every submission sent first (the
    replay's arrays) or each at its instant (a live cluster). The random strawman is left
    out of the live case: its coin flips follow the number of jobs in the arrays."""
    if name == "sia-random-both" and lookahead == 0.0:
        pytest.skip("the strawman's random draws depend on the arrays' size")
    jobs, pools = workload
    if name == "sia":
        res = simulate(jobs, pools, _learned_sia())
        replay = dict(zip(res["job_id"], res["start_time"], strict=True))
        make = _learned_sia
    else:
        replay = _replay(jobs, pools, name)

        def make():
            return make_policy(name, **policy_options(name, seed=0))
    core = ServiceCore(pools, make)
    got = drive_trace(jobs, core_sender(core), lookahead_s=lookahead)
    assert first_difference(got.starts, replay) is None
    assert len(got.starts) == jobs.height
    # submissions one instant at a time grow the arrays in place: one build, no re-run
    assert core.rebuilds == 1
    if lookahead == 0.0:
        assert core.grows == jobs["submit_time"].n_unique() - 1
    if name.startswith("sia"):
        assert got.lent, "the workload should make SIA lend"


def test_restore_decides_the_same(workload):
    """A core restored from the log of a half-driven run holds the same decisions, and
    driving it on ends as an uninterrupted run."""
    jobs, pools = workload
    make = _learned_sia
    core = ServiceCore(pools, make)
    logged: list[dict] = []
    send = core_sender(core)

    def logging_send(events):
        answer = send(events)
        logged.extend(events)
        return answer

    steps = []
    drive_trace(jobs.head(40), logging_send, lookahead_s=3600.0, on_step=steps.append)
    restored = ServiceCore(pools, make)
    restored.restore(to_core_events(logged))
    assert restored.decisions == core.decisions
    assert restored.clock == core.clock
    assert restored.rebuilds == 1


def _core(**quota: int) -> ServiceCore:
    pools = make_pools(quota)
    return ServiceCore(pools, lambda: make_policy("fcfs"))


def _events(*evs: dict) -> list:
    return to_core_events(list(evs))


def test_refusals_name_the_event_and_change_nothing():
    core = _core(a=4)
    core.apply(core.check(_events(
        {"id": "s1", "type": "submit", "time": 10.0, "job": "j1", "pool": "a", "gpus": 2},
        {"id": "c1", "type": "clock", "time": 10.0})))
    assert [d.job for d in core.decisions] == ["j1"]
    cases = [
        ({"id": "s0", "type": "submit", "time": 5.0, "job": "j0", "pool": "a", "gpus": 1},
         "not after the service's clock"),
        ({"id": "s2", "type": "submit", "time": 11.0, "job": "j1", "pool": "a", "gpus": 1},
         "already submitted"),
        ({"id": "s3", "type": "submit", "time": 11.0, "job": "j3", "pool": "zz", "gpus": 1},
         "unknown pool"),
        ({"id": "s4", "type": "submit", "time": 11.0, "job": "j4", "pool": "a", "gpus": 9},
         "cluster has 4"),
        ({"id": "f9", "type": "finish", "time": 11.0, "job": "nope"}, "unknown job"),
        ({"id": "s1", "type": "submit", "time": 12.0, "job": "j7", "pool": "a", "gpus": 1},
         "id already used"),
    ]
    for ev, words in cases:
        ok = {"id": "ok", "type": "submit", "time": 20.0, "job": "fine", "pool": "a", "gpus": 1}
        with pytest.raises(EventError, match=words) as info:
            core.check(_events(ok, ev))
        assert f"event 1 (id {ev['id']!r})" in str(info.value)
        assert "fine" not in core.jobs  # all or nothing
    # a retry of a known event is no new event
    assert core.check(_events({"id": "s1", "type": "submit", "time": 10.0, "job": "j1",
                               "pool": "a", "gpus": 2})) == []


def test_drive_finish_needs_a_started_job():
    core = _core(a=2)
    core.apply(core.check(_events(
        {"id": "s1", "type": "submit", "time": 0.0, "job": "j1", "pool": "a", "gpus": 2},
        {"id": "s2", "type": "submit", "time": 0.0, "job": "j2", "pool": "a", "gpus": 2},
        {"id": "c1", "type": "clock", "time": 0.0})))
    assert [d.job for d in core.decisions] == ["j1"]
    with pytest.raises(EventError, match="is not running"):
        core.check(_events({"id": "f2", "type": "finish", "time": 5.0, "job": "j2"}))
    decided = core.apply(core.check(_events(
        {"id": "f1", "type": "finish", "time": 5.0, "job": "j1"},
        {"id": "c2", "type": "clock", "time": 5.0})))
    assert [(d.job, d.time) for d in decided] == [("j2", 5.0)]
    assert core.next_time() is None  # nothing pending: no tick; j2's end is not known yet


def test_shadow_mode_runs_simulated_jobs_as_long_as_the_real_ones():
    """The cluster started j2 late; the simulated schedule starts it when j1 ends and runs it
    for j2's real run time once the cluster reports it."""
    core = ServiceCore(make_pools({"a": 2}), lambda: make_policy("fcfs"), mode="shadow")
    send = core_sender(core)
    send([{"id": "s1", "type": "submit", "time": 0.0, "job": "j1", "pool": "a", "gpus": 2},
          {"id": "s2", "type": "submit", "time": 0.0, "job": "j2", "pool": "a", "gpus": 2},
          {"id": "r1", "type": "start", "time": 0.0, "job": "j1"},
          {"id": "c0", "type": "clock", "time": 0.0}])
    send([{"id": "f1", "type": "finish", "time": 10.0, "job": "j1"},
          {"id": "c1", "type": "clock", "time": 10.0}])
    assert [(d.job, d.time) for d in core.decisions] == [("j1", 0.0), ("j2", 10.0)]
    send([{"id": "r2", "type": "start", "time": 30.0, "job": "j2"},
          {"id": "f2", "type": "finish", "time": 37.0, "job": "j2"},
          {"id": "c2", "type": "clock", "time": 40.0}])
    # simulated j2 ran 7 s from 10 s, but its run time was known only at 37 s
    assert core._loop.state.n_comp[0] == 2
    assert core._loop.trace.duration[core._index["j2"]] == 7.0


def test_shadow_feed_reports_what_sia_would_have_changed(workload):
    """Fed an FCFS cluster's schedule, a shadow-mode learned SIA lends and starts some jobs
    earlier than the cluster did; its simulated schedule never starts a job before it is
    submitted."""
    from sia.service.app import report_of
    from sia.service.drive import shadow_trace

    jobs, pools = workload
    core = ServiceCore(pools, _learned_sia, mode="shadow")
    got = shadow_trace(jobs, pools, core_sender(core))
    assert len(got.starts) == jobs.height and got.lent
    report = report_of(core)
    assert report["cluster"]["compared"] == jobs.height
    assert report["cluster"]["sia_earlier"] > 0
    assert report["mean_wait_s"] < report["cluster"]["mean_wait_s"]
    submit = dict(zip(jobs["job_id"], jobs["submit_time"], strict=True))
    assert all(t >= submit[j] for j, t in got.starts.items())


def _send(core: ServiceCore, *evs: dict) -> list:
    return core.apply(core.check(_events(*evs)))


def _sub(i: int, t: float, pool: str, gpus: int = 1) -> dict:
    return {"id": f"s{i}", "type": "submit", "time": t, "job": f"j{i}", "pool": pool,
            "gpus": gpus}


def _quota(t: float, pool: str, gpus: int) -> dict:
    return {"id": f"q{t}{pool}", "type": "quota", "time": t, "pool": pool, "gpus": gpus}


def test_a_quota_change_after_the_first_job_holds_from_its_time_on():
    """FCFS on pools a and b of 1 GPU: j2 waits behind j1 in a; b gives its GPU to a at t=2,
    so j2 starts then (the change's instant) instead of at j1's end. The change is kept in
    time: a late job grown into the arrays and a restore (a re-run) decide the same."""
    core = _core(a=1, b=1)
    _send(core, _sub(1, 1.0, "a"), _sub(2, 1.0, "a"), {"id": "c1", "type": "clock", "time": 1.0})
    assert [d.job for d in core.decisions] == ["j1"]
    assert _send(core, _quota(2.0, "b", 0), {"id": "c2", "type": "clock", "time": 1.5}) == []
    decided = _send(core, _quota(2.0, "a", 2), {"id": "c3", "type": "clock", "time": 300.0},
                    _sub(3, 400.0, "a"))
    assert [(d.job, d.time, d.lent) for d in decided] == [("j2", 2.0, False)]
    assert core.quota == {"a": 1, "b": 1}  # the cluster's layout is the first one
    assert core.state()["pools"]["a"]["quota"] == 2
    rebuilds, grows = core.rebuilds, core.grows
    _send(core, {"id": "c4", "type": "clock", "time": 400.0})  # j3 is not in the arrays yet
    assert (core.rebuilds, core.grows) == (rebuilds, grows + 1)
    assert [d.job for d in core.decisions] == ["j1", "j2"]
    restored = _core(a=1, b=1)
    restored.restore(_events(
        _sub(1, 1.0, "a"), _sub(2, 1.0, "a"), {"id": "c1", "type": "clock", "time": 1.0},
        _quota(2.0, "b", 0), {"id": "c2", "type": "clock", "time": 1.5}, _quota(2.0, "a", 2),
        {"id": "c3", "type": "clock", "time": 300.0}, _sub(3, 400.0, "a"),
        {"id": "c4", "type": "clock", "time": 400.0}))
    assert restored.decisions == core.decisions


def test_quota_changes_that_cannot_hold_are_refused():
    core = _core(a=1, b=1)
    _send(core, _sub(1, 1.0, "a"), {"id": "c1", "type": "clock", "time": 1.0})
    with pytest.raises(EventError, match="over the cluster's 2") as info:
        core.check(_events(_quota(2.0, "a", 2)))
    assert info.value.status == 422
    with pytest.raises(EventError, match="unknown pool 'c'"):
        core.check(_events(_quota(2.0, "c", 1)))
    _send(core, _quota(5.0, "b", 0))
    with pytest.raises(EventError, match="before the last one"):
        core.check(_events(_quota(4.0, "a", 1)))
    with pytest.raises(EventError, match="not after the service's clock"):
        core.check(_events(_quota(1.0, "a", 1)))
    assert core.check(_events(_quota(6.0, "a", 2)))  # b's GPU is free from t=5 on


def test_a_policy_without_set_quota_refuses_quota_changes():
    core = ServiceCore(make_pools({"a": 2}), lambda: make_policy("themis"))
    _send(core, _sub(1, 1.0, "a"))
    with pytest.raises(EventError, match="does not take quota changes"):
        core.check(_events(_quota(2.0, "a", 1)))
