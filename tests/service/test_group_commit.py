"""Group commit: requests applied in a group answer exactly as they would one at a time, a
refused request refuses only itself, a failed commit refuses the whole group and leaves the
service holding what the log holds."""

from __future__ import annotations

import asyncio
from pathlib import Path

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.schema import make_pools
from sia.scheduler.registry import make_policy
from sia.service.api_models import EventIn
from sia.service.core import EventError, ServiceCore
from sia.service.service import Service
from sia.service.store import EventLog, StoreError
from sia.service.writer import GroupCommit


def _service(state: Path) -> Service:
    core = ServiceCore(make_pools({"a": 2, "b": 1}), lambda: make_policy("fcfs"))
    return Service(core, EventLog(state), token=None)


def _submit(i: int, t: float, pool: str = "a", gpus: int = 1, job: str | None = None) -> EventIn:
    return EventIn(id=f"s{i}", type="submit", time=t, job=job or f"j{i}", pool=pool, gpus=gpus)


def _clock(t: float) -> EventIn:
    return EventIn(id=f"c{t}", type="clock", time=t)


def _outcome(result):
    """An answer, or a refusal as (exception type, message): comparable across runs."""
    if isinstance(result, BaseException):
        return type(result).__name__, str(result)
    return result


def test_a_group_answers_each_request_as_if_alone(tmp_path):
    """Hand-checked: the second request reuses an id with other content (409, only it is
    refused); the third is a retry (a duplicate); the clock decides the first job."""
    service = _service(tmp_path)
    group = [[_submit(0, 1.0)], [_submit(0, 2.0)], [_submit(0, 1.0)], [_clock(1.0)]]
    got = service.post_group(group)
    assert got[0]["accepted"] == 1 and got[0]["duplicates"] == 0
    assert isinstance(got[1], EventError) and got[1].status == 409
    assert "id already used by a different event" in str(got[1])
    assert got[2]["accepted"] == 0 and got[2]["duplicates"] == 1
    assert [d["job"] for d in got[3]["decisions"]] == ["j0"]
    assert [e["id"] for e in service.log.read()] == ["s0", "c1.0"]
    assert service.metrics.rejected == 1 and service.metrics.duplicates == 1


def test_a_failed_commit_refuses_the_group_and_rolls_the_core_back_to_the_log(tmp_path):
    service = _service(tmp_path)
    assert not isinstance(service.post_group([[_submit(0, 1.0)], [_clock(1.0)]])[0], Exception)

    def refuse(rows):
        raise StoreError("the event log could not be written (disk full)")

    service.log.append = refuse
    got = service.post_group([[_submit(1, 2.0)], [_clock(2.0)]])
    assert [type(r) for r in got] == [StoreError, StoreError]
    core = service.core
    assert list(core.jobs) == ["j0"] and core.clock == 1.0
    assert [d.job for d in core.decisions] == ["j0"]
    del service.log.append  # the disk has room again: the same events go through
    again = service.post_group([[_submit(1, 2.0)], [_clock(2.0)]])
    assert again[0]["accepted"] == 1 and again[1]["clock"] == 2.0
    assert not service.failed


def _requests(draw_events):
    return st.lists(st.lists(draw_events, min_size=1, max_size=3), min_size=1, max_size=12)


_EVENT = st.one_of(
    st.builds(lambda i, t, p, g: _submit(i, t, p, g), st.integers(0, 6),
              st.sampled_from([1.0, 2.0, 3.0, 4.0]), st.sampled_from(["a", "b", "c"]),
              st.integers(1, 4)),
    st.builds(_clock, st.sampled_from([1.0, 2.0, 3.0, 4.0])),
    st.builds(lambda i, t: EventIn(id=f"f{i}{t}", type="finish", time=t, job=f"j{i}"),
              st.integers(0, 6), st.sampled_from([2.0, 3.0, 4.0])),
)


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(requests=_requests(_EVENT), cuts=st.lists(st.integers(1, 4), min_size=12, max_size=12))
def test_grouping_changes_no_answer_and_no_log(tmp_path_factory, requests, cuts):
    """Any split of the same requests into groups answers each request as posting them one
    by one does, and leaves the same log and decisions."""
    alone = _service(tmp_path_factory.mktemp("alone"))
    one_by_one = [_outcome(alone.post_group([r])[0]) for r in requests]
    grouped = _service(tmp_path_factory.mktemp("grouped"))
    got, k = [], 0
    for cut in cuts:
        if k >= len(requests):
            break
        got += [_outcome(r) for r in grouped.post_group(requests[k:k + cut])]
        k += cut
    assert got == one_by_one
    assert grouped.log.read() == alone.log.read()
    assert grouped.core.decisions == alone.core.decisions


def test_the_writer_groups_waiting_requests_and_routes_each_result():
    calls: list[list] = []

    def commit(requests):
        calls.append(list(requests))
        return [ValueError(f"bad {r[0]}") if r[0] % 5 == 0 else r[0] * 10 for r in requests]

    async def run():
        writer = GroupCommit(commit)
        results = await asyncio.gather(*(writer.submit([i]) for i in range(1, 21)),
                                       return_exceptions=True)
        writer.close()
        return writer, results

    writer, results = asyncio.run(run())
    for i, r in zip(range(1, 21), results, strict=True):
        if i % 5 == 0:
            assert isinstance(r, ValueError) and str(r) == f"bad {i}"
        else:
            assert r == i * 10
    assert [r[0] for group in calls for r in group] == list(range(1, 21))  # arrival order
    assert len(calls) < 20 and writer.groups == len(calls) and writer.requests == 20


def test_a_group_closes_at_its_event_cap_but_never_splits_a_request():
    calls: list[list[int]] = []

    def commit(requests):
        calls.append([len(r) for r in requests])
        return [None] * len(requests)

    async def run():
        writer = GroupCommit(commit, group_events=5)
        await asyncio.gather(*(writer.submit([0] * n) for n in (3, 3, 7, 1, 1)))
        writer.close()

    asyncio.run(run())
    assert [n for group in calls for n in group] == [3, 3, 7, 1, 1]
    assert all(sum(g) <= 5 or len(g) == 1 for g in calls)


def test_the_writer_answers_every_request_when_the_commit_raises():
    def commit(requests):
        raise OSError("disk gone")

    async def run():
        writer = GroupCommit(commit)
        out = await asyncio.gather(writer.submit([1]), writer.submit([2]),
                                   return_exceptions=True)
        writer.close()
        return out

    assert [str(r) for r in asyncio.run(run())] == ["disk gone", "disk gone"]


def test_a_request_cancelled_while_waiting_is_still_committed():
    """A client that hangs up does not take its events out of the group (nothing half-done):
    they are committed, and the other requests are answered."""
    seen: list[list] = []

    def commit(requests):
        seen.append([r[0] for r in requests])
        return [r[0] for r in requests]

    async def run():
        writer = GroupCommit(commit)
        first = asyncio.ensure_future(writer.submit([1]))
        second = asyncio.ensure_future(writer.submit([2]))
        await asyncio.sleep(0)  # both are queued
        second.cancel()
        got = await first
        await asyncio.sleep(0.05)
        writer.close()
        return got, second.cancelled()

    assert asyncio.run(run()) == (1, True)
    assert [x for group in seen for x in group] == [1, 2]
