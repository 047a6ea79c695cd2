"""The Slurm poller sketch on squeue / sacct fixtures: the events it makes, and a shadow-mode
service that takes them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

from sia.data.schema import make_pools
from sia.scheduler.registry import make_policy
from sia.service.core import ServiceCore
from sia.service.drive import core_sender
from sia.service.slurm import SlurmPoller, gpus_of, limit_seconds

FIX = Path(__file__).parent / "fixtures"


def _t(text: str) -> float:
    return datetime.fromisoformat(text).replace(tzinfo=UTC).timestamp()


def test_parsers():
    assert gpus_of("gres/gpu:4", "1") == 4
    assert gpus_of("gpu:a100:4", "2") == 8
    assert gpus_of("gres/gpu=1", "1") == 1
    assert gpus_of("(null)", "1") == 0
    assert limit_seconds("1-00:00:00") == 86400.0
    assert limit_seconds("02:00:00") == 7200.0
    assert limit_seconds("30:00") == 1800.0
    assert limit_seconds("UNLIMITED") is None


def test_two_polls_make_the_events_a_shadow_service_takes():
    poller = SlurmPoller()
    first = poller.poll((FIX / "squeue_1.txt").read_text(), (FIX / "sacct_1.txt").read_text(),
                        now=_t("2026-11-28T10:05:00"))
    assert [(e["type"], e.get("job")) for e in first] == [
        ("submit", "1001"), ("start", "1001"), ("submit", "1002"), ("clock", None)]
    sub = first[0]
    assert sub["pool"] == "gpu-a" and sub["gpus"] == 4 and sub["time_limit"] == 86400.0
    assert sub["time"] == _t("2026-11-28T10:00:00") and sub["tag"] == "train-resnet"
    assert first[2]["gpus"] == 8  # 2 nodes x 4 GPUs; 1003 has no GPU and is skipped
    second = poller.poll((FIX / "squeue_2.txt").read_text(), (FIX / "sacct_2.txt").read_text(),
                         now=_t("2026-11-28T10:25:00"))
    assert [(e["type"], e.get("job")) for e in second] == [
        ("finish", "1001"), ("start", "1002"), ("submit", "1004"), ("clock", None)]
    assert second[0]["time"] == _t("2026-11-28T10:19:30")
    # a repeated poll sends only a new clock
    again = poller.poll((FIX / "squeue_2.txt").read_text(), (FIX / "sacct_2.txt").read_text(),
                        now=_t("2026-11-28T10:25:30"))
    assert [e["type"] for e in again] == ["clock"]

    core = ServiceCore(make_pools({"gpu-a": 8, "gpu-b": 2}), lambda: make_policy("fcfs"),
                       mode="shadow")
    send = core_sender(core)
    for events in (first, second, again):
        send(events)
    # the simulated FCFS schedule started 1002 when 1001 ended, as the cluster did a bit later
    starts = {d.job: d.time for d in core.decisions}
    assert starts["1001"] == _t("2026-11-28T10:00:00")
    assert starts["1002"] == _t("2026-11-28T10:19:30")
    assert starts["1004"] == _t("2026-11-28T10:21:00")


def test_a_job_held_by_a_dependency_arrives_when_it_may_run():
    # as a sacct export is replayed (a job arrives when eligible): a pending job whose reason
    # is a dependency, a begin time or a hold sends no submit until a poll sees it eligible
    line = "{job}|gpu-a|ann|chain|2026-11-28T10:00:00|{start}|{state}|1:00:00|1|gpu:2|{reason}"
    poller = SlurmPoller()
    first = poller.poll("\n".join([
        line.format(job="7", start="N/A", state="PENDING", reason="Dependency"),
        line.format(job="8", start="N/A", state="PENDING", reason="BeginTime"),
        line.format(job="9", start="N/A", state="PENDING", reason="Resources")]), "",
        now=_t("2026-11-28T10:05:00"))
    assert [(e["type"], e.get("job")) for e in first] == [("submit", "9"), ("clock", None)]
    assert first[0]["time"] == _t("2026-11-28T10:00:00")  # not held: its submission
    second = poller.poll("\n".join([
        line.format(job="7", start="N/A", state="PENDING", reason="Priority"),
        line.format(job="8", start="2026-11-28T10:07:00", state="RUNNING", reason="None"),
        line.format(job="9", start="N/A", state="PENDING", reason="Resources")]), "",
        now=_t("2026-11-28T10:10:00"))
    assert [(e["type"], e.get("job"), e["time"]) for e in second[:-1]] == [
        ("submit", "8", _t("2026-11-28T10:07:00")),  # eligible and started between polls
        ("start", "8", _t("2026-11-28T10:07:00")),
        ("submit", "7", _t("2026-11-28T10:10:00"))]  # eligible since the last poll: now
    # output without the reason column (the old format) reads as before
    old = SlurmPoller().poll("7|gpu-a|ann|chain|2026-11-28T10:00:00|N/A|PENDING|1:00:00|1|gpu:2",
                             "", now=_t("2026-11-28T10:05:00"))
    assert [(e["type"], e.get("job")) for e in old] == [("submit", "7"), ("clock", None)]
