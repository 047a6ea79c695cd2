"""`sia shadow --time-scale`: the pacer sends each instant when it is due on the wall clock."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.schema import JOB_SCHEMA, make_pools
from sia.scheduler.registry import make_policy
from sia.service.core import ServiceCore
from sia.service.drive import Pacer, core_sender, drive_trace, shadow_trace


class FakeClock:
    """A wall clock that moves only when slept on (or by hand)."""

    def __init__(self) -> None:
        self.t = 100.0
        self.sleeps: list[float] = []

    def now(self) -> float:
        return self.t

    def sleep(self, s: float) -> None:
        self.sleeps.append(s)
        self.t += s


def test_the_pacer_sleeps_until_each_instant_is_due_and_never_to_catch_up():
    clock = FakeClock()
    pace = Pacer(60.0, sleep=clock.sleep, now=clock.now)
    pace.wait(1000.0)  # the origin: no sleep
    pace.wait(1600.0)  # 600 s of trace at 60x: due 10 s later
    assert clock.sleeps == [pytest.approx(10.0)]
    clock.t += 30.0  # a slow answer: 1900 s was due at wall 115, it is 140 now
    pace.wait(1900.0)
    assert clock.sleeps == [pytest.approx(10.0)]
    pace.wait(3400.0)  # due at wall 100 + 2400 / 60 = 140: now
    pace.wait(3460.0)  # due at 141
    assert clock.sleeps == [pytest.approx(10.0), pytest.approx(1.0)]


@pytest.mark.parametrize("scale", [0.0, -1.0, float("inf"), float("nan")])
def test_a_time_scale_must_be_a_finite_positive_number(scale):
    with pytest.raises(ValueError, match="time scale"):
        Pacer(scale)


def _jobs() -> pl.DataFrame:
    return pl.DataFrame({"job_id": ["a", "b", "c"], "pool": ["p", "p", "p"],
                         "submit_time": [0.0, 60.0, 60.0], "duration": [120.0, 30.0, 30.0],
                         "num_gpus": [1, 1, 1], "tag": [None] * 3, "user": [None] * 3,
                         "preemptible": [False] * 3}, schema=JOB_SCHEMA)


def test_a_paced_drive_sends_each_instant_at_its_wall_time_with_the_same_starts():
    """FCFS on 1 GPU: instants 0 (a starts), 60 (b, c arrive), 120 (a ends, b starts), 150
    (b ends, c starts), 180; at 10x they are sent 0, 6, 12, 15 and 18 s after the first."""
    clock = FakeClock()
    sent: list[float] = []
    core = ServiceCore(make_pools({"p": 1}), lambda: make_policy("fcfs"))
    send = core_sender(core)

    def timed(events):
        sent.append(clock.t - 100.0)
        return send(events)

    got = drive_trace(_jobs(), timed, lookahead_s=0.0,
                      pace=Pacer(10.0, sleep=clock.sleep, now=clock.now))
    assert got.starts == {"a": 0.0, "b": 120.0, "c": 150.0}
    assert sent == pytest.approx([0.0, 6.0, 12.0, 15.0, 18.0])


def test_a_paced_shadow_feed_sends_one_request_per_instant():
    clock = FakeClock()
    sent: list[tuple[float, float]] = []
    core = ServiceCore(make_pools({"p": 1}), lambda: make_policy("fcfs"), mode="shadow")
    send = core_sender(core)

    def timed(events):
        sent.append((clock.t - 100.0, events[-1]["time"]))
        return send(events)

    shadow_trace(_jobs(), make_pools({"p": 1}), timed,
                 pace=Pacer(10.0, sleep=clock.sleep, now=clock.now))
    assert [t for t, _ in sent] == pytest.approx([(at - 0.0) / 10.0 for _, at in sent])
    assert [at for _, at in sent] == [0.0, 60.0, 120.0, 150.0, 180.0]
