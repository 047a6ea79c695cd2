"""The contract's optional time_limit and state columns: validation, and the generic reader's
--map and --time-unit for them."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError, TraceError
from sia.data.readers import read_generic
from sia.data.schema import TIME_LIMIT_GRACE_S, check_jobs, validate


def table(**extra) -> pl.DataFrame:
    base = {"pool": ["a", "a", "b"], "submit_time": [0.0, 10.0, 20.0],
            "duration": [100.0, 200.0, 300.0], "num_gpus": [1, 2, 4]}
    return pl.DataFrame({**base, **extra})


def test_absent_columns_are_null_and_typed():
    jobs, report = validate(table())
    check_jobs(jobs)
    assert jobs["time_limit"].dtype == pl.Float64 and jobs["time_limit"].null_count() == 3
    assert jobs["state"].dtype == pl.String and jobs["state"].null_count() == 3
    assert report.warnings == []


def test_time_limit_strings_empty_is_no_limit():
    jobs, _ = validate(table(time_limit=["150", " ", "3600.5"], state=["COMPLETED", None, ""]))
    assert jobs["time_limit"].to_list() == [150.0, None, 3600.5]
    assert jobs["state"].to_list() == ["COMPLETED", None, ""]


@pytest.mark.parametrize(("value", "kind", "message"), [
    ("abc", "non_numeric", "'abc' is not a valid finite number"),
    ("inf", "non_numeric", "'inf' is not a valid finite number"),
    ("0", "out_of_range", "time limit 0.0 is not > 0 seconds"),
    ("-60", "out_of_range", "time limit -60.0 is not > 0 seconds"),
])
def test_bad_time_limit_is_a_bad_row(value, kind, message):
    t = table(time_limit=["500", value, "500"])
    with pytest.raises(TraceError, match=rf"t.csv: row 2, column 'time_limit': {message}"):
        validate(t, source="t.csv")
    jobs, report = validate(t, source="t.csv", on_bad_rows="drop")
    assert jobs.height == 2 and report.dropped == {kind: 1}


def test_run_past_limit_plus_grace_is_a_warning_not_an_error():
    # durations 100, 200, 300: the first is exactly at limit + grace (no warning), the second
    # one second past it, the third far past
    limits = [100.0 - TIME_LIMIT_GRACE_S, 200.0 - TIME_LIMIT_GRACE_S - 1, 10.0]
    jobs, report = validate(table(time_limit=limits), source="t.csv")
    assert jobs.height == 3
    assert len(report.warnings) == 1
    assert report.warnings[0].startswith("2 job(s) ran longer than their time limit plus 60 s")
    assert "t.csv: row 2" in report.warnings[0]


@settings(max_examples=50)
@given(st.lists(st.tuples(st.floats(1.0, 1e6), st.integers(1, 8), st.floats(0.0, 1e6)),
                min_size=1, max_size=20),
       st.floats(0.0, 1e5))
def test_property_a_limit_that_covers_each_run_changes_nothing_else(rows, slack):
    """A time_limit column of limits >= the run times (or the column absent) leaves every other
    column, the row order and the report's counts as they are, and warns about nothing."""
    t = pl.DataFrame({"pool": ["p"] * len(rows), "submit_time": [r[2] for r in rows],
                      "duration": [r[0] for r in rows], "num_gpus": [r[1] for r in rows]})
    plain, r0 = validate(t)
    limited, r1 = validate(t.with_columns((pl.col("duration") + slack).alias("time_limit")))
    assert limited.drop("time_limit").equals(plain.drop("time_limit"))
    assert (limited["time_limit"] >= limited["duration"]).all()
    assert r1.warnings == [] and r0.to_dict() | {"warnings": []} == r1.to_dict()


# --------------------------------------------------------------------------- generic --map

def test_generic_maps_time_limit_and_state(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("queue,sub,run,gpus,limit_s,status\n"
                 "a,0,100,1,3600,COMPLETED\n"
                 "a,5,50,2,,FAILED\n")
    jobs, _ = read_generic(p, {"pool": "queue", "submit_time": "sub", "duration": "run",
                               "num_gpus": "gpus", "time_limit": "limit_s", "state": "status"})
    assert jobs["time_limit"].to_list() == [3600.0, None]
    assert jobs["state"].to_list() == ["COMPLETED", "FAILED"]
    assert "limit_s" not in jobs.columns and "status" not in jobs.columns


def test_time_unit_ms_applies_to_time_limit_like_durations(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("pool,submit_time,duration,num_gpus,limit\n"
                 "a,0,100000,1,3600000\n"
                 "a,5000,50000,2,\n")
    jobs, _ = read_generic(p, {"time_limit": "limit"}, time_unit="ms")
    assert jobs["duration"].to_list() == [100.0, 50.0]
    assert jobs["time_limit"].to_list() == [3600.0, None]
    p.write_text("pool,submit_time,duration,num_gpus,limit\na,0,100000,1,soon\n")
    with pytest.raises(TraceError, match=r"t.csv: row 1, column 'time_limit': 'soon'"):
        read_generic(p, {"time_limit": "limit"}, time_unit="ms")


def test_time_limit_in_seconds_with_datetime_submissions(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("pool,submit_time,duration,num_gpus,time_limit\n"
                 "a,2024-03-01 10:00:00,100,1,7200\n")
    jobs, _ = read_generic(p, time_unit="datetime")
    assert jobs["time_limit"].to_list() == [7200.0]


def test_map_refuses_unknown_contract_column(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("pool,submit_time,duration,num_gpus\na,0,1,1\n")
    with pytest.raises(ConfigError, match="'limit' is not a column of the trace contract.*"
                                          "time_limit, state"):
        read_generic(p, {"limit": "duration"})


def test_hold_time_empty_is_none_and_a_bad_one_names_its_row():
    jobs, _ = validate(table(hold_time=["0", " ", "7200"]))
    assert jobs["hold_time"].dtype == pl.Float64
    assert jobs["hold_time"].to_list() == [0.0, None, 7200.0]
    assert validate(table())[0]["hold_time"].null_count() == 3  # absent: none known
    for value, kind, message in (("-1", "out_of_range", "hold time -1.0 is negative"),
                                 ("later", "non_numeric", "'later' is not a valid finite")):
        t = table(hold_time=["0", value, "5"])
        with pytest.raises(TraceError, match=rf"t.csv: row 2, column 'hold_time': {message}"):
            validate(t, source="t.csv")
        jobs, report = validate(t, source="t.csv", on_bad_rows="drop")
        assert jobs.height == 2 and report.dropped == {kind: 1}


def test_generic_maps_hold_time_in_the_durations_unit(tmp_path):
    p = tmp_path / "t.csv"
    p.write_text("pool,submit_time,duration,num_gpus,held\n"
                 "a,0,100000,1,3600000\n"
                 "a,5000,50000,2,\n")
    jobs, _ = read_generic(p, {"hold_time": "held"}, time_unit="ms")
    assert jobs["hold_time"].to_list() == [3600.0, None]
    jobs, _ = read_generic(p, {"hold_time": "held"})
    assert jobs["hold_time"].to_list() == [3600000.0, None]
