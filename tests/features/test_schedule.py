"""Attaching a replay's times to a job table, and a trace's own schedule columns."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.errors import TraceError
from sia.features.schedule import has_schedule, schedule_from_columns, with_schedule


def _jobs() -> pl.DataFrame:
    return pl.DataFrame({"job_id": ["a", "b"], "pool": ["p", "q"], "submit_time": [0.0, 5.0],
                         "duration": [10.0, 1.0], "num_gpus": [1, 2], "tag": ["x", None]})


def test_with_schedule_keeps_job_columns_and_order():
    replay = pl.DataFrame({"job_id": ["b", "a"], "start_time": [7.0, 0.0], "end_time": [8.0, 10.0],
                           "opportunistic": [False, False]})
    out = with_schedule(_jobs(), replay)
    assert out["job_id"].to_list() == ["a", "b"]
    assert out["tag"].to_list() == ["x", None]
    assert out["start_time"].to_list() == [0.0, 7.0] and out["end_time"].to_list() == [10.0, 8.0]
    assert "opportunistic" not in out.columns and has_schedule(out) and not has_schedule(_jobs())


def test_with_schedule_names_a_missing_job():
    replay = pl.DataFrame({"job_id": ["a"], "start_time": [0.0], "end_time": [10.0]})
    with pytest.raises(TraceError, match="job 'b'"):
        with_schedule(_jobs(), replay)
    with pytest.raises(TraceError, match="end_time"):
        with_schedule(_jobs(), replay.drop("end_time"))


def test_schedule_from_text_columns():
    jobs = _jobs().with_columns(pl.Series("start_time", [" 0", "7"]),
                                pl.Series("end_time", ["10", "8.5"]))
    out = schedule_from_columns(jobs)
    assert out["start_time"].to_list() == [0.0, 7.0] and out["end_time"].to_list() == [10.0, 8.5]
    bad = jobs.with_columns(pl.Series("end_time", ["10", "later"]))
    with pytest.raises(TraceError, match="job 'b', column 'end_time': 'later'"):
        schedule_from_columns(bad, where="t.csv")
