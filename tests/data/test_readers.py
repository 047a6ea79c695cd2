"""Readers on small files that mimic each real format, broken files, and the real Philly trace."""

from __future__ import annotations

import json

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError, TraceError
from sia.data.readers import (
    detect_format,
    read_canonical,
    read_generic,
    read_helios,
    read_pai,
    read_philly,
    read_philly_joblog,
    read_trace,
)
from sia.data.schema import check_jobs, validate

PHILLY_HEADER = "timestamp,duration,num_gpus,gpu_time,cluster\n"
HELIOS_HEADER = ("job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,"
                 "end_time,duration,queue\n")


def write(path, text):
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- Philly

def test_philly_small(tmp_path):
    p = write(tmp_path / "philly.csv", PHILLY_HEADER
              + "2017-10-09 07:01:55,66.0,1,66.0,vcA\n"
              + "2017-10-09 06:13:03,2951.0,2,5902.0,vcB\n"
              + "2017-10-09 06:00:00,10.0,8,80.0,vcA\n")
    jobs, report = read_philly(p)
    check_jobs(jobs)
    assert jobs["submit_time"].to_list() == [0.0, 783.0, 3715.0]
    assert jobs["job_id"].to_list() == ["3", "2", "1"]  # ids are the file's row numbers
    assert jobs["pool"].to_list() == ["vcA", "vcB", "vcA"]
    assert jobs["num_gpus"].to_list() == [8, 2, 1]
    assert jobs["gpu_time"].to_list() == [80.0, 5902.0, 66.0]
    assert report.first_submit == "2017-10-09 06:00:00"
    assert (report.rows_read, report.rows_kept, report.pools) == (3, 3, 2)
    assert detect_format(p) == "philly"


def test_philly_exact_duplicates(tmp_path):
    row = "2017-10-09 07:01:55,66.0,1,66.0,vcA\n"
    p = write(tmp_path / "philly.csv", PHILLY_HEADER + row + "2017-10-09 08:00:00,5,1,5,vcA\n" + row)
    with pytest.raises(TraceError, match=r"philly.csv: row 3: exact duplicate of row 1.*--clean"):
        read_philly(p)
    jobs, report = read_philly(p, on_bad_rows="drop")
    assert jobs.height == 2 and report.dropped == {"exact_duplicate": 1}
    # Same time and pool but another duration is not a duplicate.
    q = write(tmp_path / "p2.csv", PHILLY_HEADER + row + "2017-10-09 07:01:55,67.0,1,67.0,vcA\n")
    assert read_philly(q)[0].height == 2


# --------------------------------------------------------------------------- Helios

def test_helios_small(tmp_path):
    log = write(tmp_path / "cluster_log.csv", HELIOS_HEADER
                + "1425511,uXBbc,vcJkd,1,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,"
                  "2020-06-10 04:55:09,36848,0\n"
                + "1425512,uVMrF,vchbv,4,16,1,FAILED,2020-06-09 18:41:27,2020-06-09 18:41:30,"
                  "2020-06-09 18:45:36,246,3\n"
                + "1425513,uzqls,vcpDC,0,1,1,CANCELLED,2020-06-09 18:41:28,2020-06-09 18:41:28,"
                  "2020-06-17 14:15:21,675233,0\n")
    jobs, report = read_helios(log)
    check_jobs(jobs)
    assert jobs["job_id"].to_list() == ["1425511", "1425512"]
    assert jobs["user"].to_list() == ["uXBbc", "uVMrF"]
    assert jobs["submit_time"].to_list() == [0.0, 26.0]
    assert jobs["start_time"].to_list() == [0.0, 29.0]
    assert jobs["end_time"].to_list() == [36848.0, 275.0]
    assert jobs["state"].to_list() == ["COMPLETED", "FAILED"]
    assert report.left_out == {"cpu_only": 1}
    assert (report.rows_read, report.rows_kept) == (3, 2)
    assert report.first_submit == "2020-06-09 18:41:01"
    assert detect_format(log) == "helios"


def test_helios_zero_duration_is_bad(tmp_path):
    log = write(tmp_path / "cluster_log.csv", HELIOS_HEADER
                + "1,u,vcA,1,1,1,COMPLETED,2020-06-09 18:41:01,,,0,0\n"
                + "2,u,vcA,2,1,1,COMPLETED,2020-06-09 18:42:01,,,60,0\n")
    with pytest.raises(TraceError, match=r"row 1, column 'duration'"):
        read_helios(log)
    jobs, report = read_helios(log, on_bad_rows="drop")
    assert jobs["job_id"].to_list() == ["2"] and report.dropped == {"nonpositive_duration": 1}
    assert jobs["submit_time"].to_list() == [0.0]  # origin is the first *kept* submission


# --------------------------------------------------------------------------- Philly job log

JOBLOG = [
    {"status": "Pass", "vc": "vcA", "jobid": "app_1", "user": "u1",
     "submitted_time": "2017-10-03 10:00:00",
     "attempts": [{"start_time": "2017-10-03 10:05:00", "end_time": "2017-10-03 10:15:00",
                   "detail": [{"ip": "m1", "gpus": ["gpu0", "gpu1"]}]},
                  {"start_time": "2017-10-03 11:00:00", "end_time": "2017-10-03 11:30:00",
                   "detail": [{"ip": "m2", "gpus": ["gpu0", "gpu1"]},
                              {"ip": "m3", "gpus": ["gpu0", "gpu1"]}]}]},
    {"status": "Killed", "vc": "vcB", "jobid": "app_2", "user": "u2",
     "submitted_time": "2017-10-03 09:59:00", "attempts": []},
    {"status": "Pass", "vc": "vcB", "jobid": "app_3", "user": "u2",
     "submitted_time": "2017-10-03 10:01:00",
     "attempts": [{"start_time": "2017-10-03 10:01:00", "end_time": "2017-10-03 10:02:00",
                   "detail": [{"ip": "m4", "gpus": []}]}]},
    {"status": "Failed", "vc": "vcB", "jobid": "app_4", "user": "u3",
     "submitted_time": "2017-10-03 10:02:00",
     "attempts": [{"start_time": "2017-10-03 10:03:00", "end_time": "None",
                   "detail": [{"ip": "m5", "gpus": ["gpu3"]}]},
                  {"start_time": "2017-10-03 10:10:00", "end_time": "2017-10-03 10:11:40",
                   "detail": [{"ip": "m5", "gpus": ["gpu3"]}]}]},
]


def test_philly_joblog_gang_duration_and_left_out_jobs(tmp_path):
    """app_1: 4 GPUs at most, 10 + 30 min of attempts; app_2 never ran; app_3 held no GPU;
    app_4: the attempt without an end does not count (100 s)."""
    p = tmp_path / "cluster_job_log"
    p.write_text(json.dumps(JOBLOG))
    assert detect_format(p) == "philly-joblog"
    jobs, report = read_trace(p)
    check_jobs(jobs)
    rows = {r["job_id"]: r for r in jobs.iter_rows(named=True)}
    assert set(rows) == {"app_1", "app_4"}
    assert (rows["app_1"]["num_gpus"], rows["app_1"]["duration"]) == (4, 2400.0)
    assert (rows["app_4"]["num_gpus"], rows["app_4"]["duration"]) == (1, 100.0)
    assert rows["app_1"]["pool"] == "vcA" and rows["app_4"]["status"] == "Failed"
    assert rows["app_1"]["submit_time"] == 0.0 and rows["app_4"]["submit_time"] == 120.0
    assert report.left_out == {"never_ran": 1, "cpu_only": 1}
    assert report.rows_read == 4


def test_philly_joblog_errors_name_row_and_column(tmp_path):
    broken = [dict(JOBLOG[0]), dict(JOBLOG[3])]
    broken[1]["attempts"] = [{"start_time": "yesterday", "end_time": "2017-10-03 10:11:40",
                              "detail": [{"gpus": ["g"]}]}]
    p = tmp_path / "log.json"
    p.write_text(json.dumps(broken))
    with pytest.raises(TraceError, match=r"log\.json: row 2, column 'attempts\.start_time'"):
        read_philly_joblog(p)
    jobs, report = read_philly_joblog(p, on_bad_rows="drop")
    assert jobs["job_id"].to_list() == ["app_1"] and report.dropped == {"unparsable_time": 1}
    p.write_text("{not json")
    with pytest.raises(TraceError, match=r"log\.json: not JSON \(line 1"):
        read_philly_joblog(p)
    p.write_text('{"jobs": []}')
    with pytest.raises(TraceError, match="expected a JSON list of jobs"):
        read_philly_joblog(p)


# --------------------------------------------------------------------------- Alibaba PAI

def pai_folder(tmp_path, *, header=False):
    """A tiny cluster-trace-gpu-v2020: job, task and group tag tables (headerless as released)."""
    folder = tmp_path / "pai"
    folder.mkdir(parents=True)
    jobs = ("j1,inst1,u1,Terminated,100,500\nj2,inst2,u2,Terminated,200,900\n"
            "j3,inst3,u1,Terminated,300,400\nj4,inst4,u3,Running,400,\nj5,inst5,u3,Failed,450,460\n")
    tasks = ("j1,worker,2,Terminated,110,410,600,29.3,50,V100\n"
             "j1,ps,1,Terminated,105,400,600,29.3,,\n"
             "j2,worker,1,Terminated,250,850,600,29.3,800,P100\n"
             "j3,worker,1,Terminated,300,400,600,29.3,0,\n"
             "j4,worker,1,Running,400,,600,29.3,100,T4\n")
    if header:
        jobs = "job_name,inst_id,user,status,start_time,end_time\n" + jobs
    write(folder / "pai_job_table.csv", jobs)
    write(folder / "pai_task_table.csv", tasks)
    write(folder / "pai_group_tag_table.csv", "inst1,u1,,g-resnet,ctr\ninst2,u2,,g-bert,nlp\n")
    return folder


@pytest.mark.parametrize("header", [False, True])
def test_pai_gang_duration_pool_and_tag_from_tasks(tmp_path, header):
    """j1: 2 x 50% GPU -> 1 GPU, tasks 105..410 -> 305 s, pool V100; j2: 8 GPUs, 600 s, P100;
    j3 plans no GPU; j4 still runs; j5 has no task."""
    folder = pai_folder(tmp_path, header=header)
    assert detect_format(folder) == detect_format(folder / "pai_job_table.csv") == "pai"
    jobs, report = read_trace(folder)
    check_jobs(jobs)
    rows = {r["job_id"]: r for r in jobs.iter_rows(named=True)}
    assert set(rows) == {"j1", "j2"}
    assert (rows["j1"]["num_gpus"], rows["j1"]["duration"], rows["j1"]["pool"]) == (1, 305.0, "V100")
    assert (rows["j2"]["num_gpus"], rows["j2"]["duration"], rows["j2"]["pool"]) == (8, 600.0, "P100")
    assert (rows["j1"]["submit_time"], rows["j2"]["submit_time"]) == (0.0, 100.0)
    assert (rows["j1"]["tag"], rows["j2"]["user"]) == ("g-resnet", "u2")
    assert report.left_out == {"cpu_only": 1, "unfinished": 2}
    assert report.rows_read == 5


def test_pai_errors_name_file_and_row(tmp_path):
    folder = pai_folder(tmp_path)
    (folder / "pai_task_table.csv").unlink()
    with pytest.raises(TraceError, match=r"pai_task_table\.csv: no such file"):
        read_pai(folder)
    folder = pai_folder(tmp_path / "b")
    write(folder / "pai_job_table.csv", "j1,inst1,u1,Terminated,soon,500\n")
    with pytest.raises(TraceError, match=r"pai_job_table\.csv: row 1, column 'submit_time'"):
        read_pai(folder)
    write(folder / "pai_job_table.csv", "j1,inst1,u1\n")
    with pytest.raises(TraceError, match="3 columns, but a PAI table of this kind has 6"):
        read_pai(folder)


# --------------------------------------------------------------------------- generic

def test_generic_folder_one_csv_per_pool(tmp_path):
    folder = tmp_path / "trace"
    folder.mkdir()
    write(folder / "alpha.csv", "submitted,runtime,gpus,owner\n100,60,1,ann\n50,30,2,bob\n")
    write(folder / "beta.csv", "submitted,runtime,gpus,owner\n70,10,4,cid\n")
    mapping = {"submit_time": "submitted", "duration": "runtime", "num_gpus": "gpus",
               "user": "owner"}
    jobs, report = read_generic(folder, mapping, pool_from="file-stem")
    check_jobs(jobs)
    assert jobs["pool"].to_list() == ["alpha", "beta", "alpha"]
    assert jobs["submit_time"].to_list() == [0.0, 20.0, 50.0]
    assert jobs["job_id"].to_list() == ["alpha-2", "beta-1", "alpha-1"]
    assert jobs["user"].to_list() == ["bob", "cid", "ann"]
    assert report.rows_read == 3 and report.pools == 2
    # a glob works the same way
    assert read_generic(str(folder / "*.csv"), mapping, pool_from="file-stem")[0].equals(jobs)


def test_generic_parquet_ms_and_extra_columns(tmp_path):
    p = tmp_path / "jobs.parquet"
    pl.DataFrame({
        "queue": ["x", "y"], "t_ms": [2_000, 5_500], "dur_ms": [1_500.0, 60_000.0],
        "num_gpus": [1, 8], "model": ["resnet", "bert"],
    }).write_parquet(p)
    jobs, report = read_generic(p, {"pool": "queue", "submit_time": "t_ms", "duration": "dur_ms"},
                                time_unit="ms")
    assert jobs["submit_time"].to_list() == [0.0, 3.5]
    assert jobs["duration"].to_list() == [1.5, 60.0]
    assert jobs["model"].to_list() == ["resnet", "bert"]  # unknown columns kept
    assert report.first_submit.startswith("2 ")
    assert detect_format(p) == "generic"


def test_generic_datetime_csv_with_const_pool(tmp_path):
    p = write(tmp_path / "dt.csv",
              "submit_time,duration,num_gpus,job_id\n"
              "2021-03-01T10:00:00,100,1,a\n2021-03-01 09:59:00,5,2,b\n")
    jobs, report = read_generic(p, pool_from="const:main", time_unit="datetime")
    assert jobs["job_id"].to_list() == ["b", "a"]
    assert jobs["submit_time"].to_list() == [0.0, 60.0]
    assert jobs["pool"].unique().to_list() == ["main"]
    assert report.first_submit == "2021-03-01 09:59:00"


def test_generic_date_times_read_as_numbers_say_to_pass_time_unit_datetime(tmp_path):
    """A date-time column read with the default numeric unit is one error naming the fix, not
    every row reported as "not a number" (with advice to drop them all)."""
    p = write(tmp_path / "dt.csv", "submitted,duration,num_gpus,pool\n"
              "2021-03-01T10:00:00,100,1,a\n 2021-03-01 09:59:00,5,2,a\n,7,1,a\n")
    with pytest.raises(TraceError, match=r"dt\.csv: column 'submit_time' holds date-times "
                                         r"\(e\.g\. '2021-03-01T10:00:00'\), not numbers; "
                                         r"pass --time-unit datetime"):
        read_generic(p, {"submit_time": "submitted"}, on_bad_rows="drop")
    # the same in end times, when durations come from start and end
    q = write(tmp_path / "span.csv", "pool,submit_time,start_time,end_time,num_gpus\n"
              "a,0,2021-03-01 10:00:00,2021-03-01 11:00:00,1\n")
    with pytest.raises(TraceError, match="column 'start_time' holds date-times"):
        read_generic(q)
    # one date-time among numbers is a bad row, as before (row 2, not the whole column)
    r = write(tmp_path / "one.csv", "submit_time,duration,num_gpus,pool\n"
              "5,100,1,a\n2021-03-01 09:59:00,5,2,a\n")
    with pytest.raises(TraceError, match=r"row 2, column 'submit_time'"):
        read_generic(r)
    assert read_generic(r, on_bad_rows="drop")[0].height == 1


def test_generic_parquet_date_times_need_no_time_unit(tmp_path):
    """A Parquet file's own date-time type says what the column holds: read as date-times under
    the default unit; --time-unit ms on it is an error naming the column."""
    from datetime import datetime

    p = tmp_path / "dt.parquet"
    pl.DataFrame({"pool": ["a", "a"], "submitted": [datetime(2021, 3, 1, 10), datetime(2021, 3, 1, 9)],
                  "duration": [100.0, 5.0], "num_gpus": [1, 2]}).write_parquet(p)
    jobs, report = read_generic(p, {"submit_time": "submitted"})
    assert jobs["submit_time"].to_list() == [0.0, 3600.0] and jobs["duration"].to_list() == [5.0, 100.0]
    assert report.first_submit == "2021-03-01 09:00:00"
    with pytest.raises(TraceError, match=r"dt\.parquet: column 'submit_time' holds date-times, "
                                         r"not ms numbers; use --time-unit datetime"):
        read_generic(p, {"submit_time": "submitted"}, time_unit="ms")
    # start and end times are then read as date-times too: numbers there are an error, not
    # epoch seconds subtracted from the file's own clock
    q = tmp_path / "span.parquet"
    pl.DataFrame({"pool": ["a"], "submit_time": [datetime(2021, 3, 1, 10)], "start_time": [5.0],
                  "end_time": [35.0], "num_gpus": [1]}).write_parquet(q)
    with pytest.raises(TraceError, match=r"column 'start_time' has type Float64, but the "
                                         r"submissions are date-times: give start and end"):
        read_generic(q)
    r = tmp_path / "span_dt.parquet"
    pl.DataFrame({"pool": ["a"], "submit_time": [datetime(2021, 3, 1, 10)],
                  "start_time": [datetime(2021, 3, 1, 10, 5)], "end_time": [datetime(2021, 3, 1, 11)],
                  "num_gpus": [1]}).write_parquet(r)
    jobs = read_generic(r)[0]
    assert jobs["duration"].to_list() == [3300.0] and jobs["start_time"].to_list() == [300.0]
    # numeric submissions with date-time start and end: an error naming the column
    n = tmp_path / "span_num.parquet"
    pl.DataFrame({"pool": ["a"], "submit_time": [0.0], "start_time": [datetime(2021, 3, 1, 10)],
                  "end_time": [datetime(2021, 3, 1, 11)], "num_gpus": [1]}).write_parquet(n)
    with pytest.raises(TraceError, match=r"column 'start_time' holds date-times, not s numbers"):
        read_generic(n)


def test_generic_numeric_dates_day_and_month_order(tmp_path):
    """03/01/2021 is a guess between March 1 and January 3: asked for when no value settles it,
    read in the order the values settle, or in the format given."""
    rows = "submit_time,duration,num_gpus,pool\n{}\n"
    amb = write(tmp_path / "amb.csv", rows.format("03/01/2021 10:00,100,1,a\n03/02/2021 09:59,5,2,a"))
    with pytest.raises(TraceError, match=r"amb\.csv: column 'submit_time': dates such as "
                                         r"'03/01/2021 10:00' could be month/day or day/month.*"
                                         r"--time-unit 'datetime:%m/%d/%Y %H:%M'"):
        read_generic(amb, time_unit="datetime")
    jobs, report = read_generic(amb, time_unit="datetime:%m/%d/%Y %H:%M")
    assert jobs["submit_time"].to_list() == [0.0, 86340.0]  # March 1 10:00 -> March 2 09:59
    assert report.first_submit == "2021-03-01 10:00:00"
    jobs, _ = read_generic(amb, time_unit="datetime:%d/%m/%Y %H:%M")
    assert jobs["submit_time"].max() == 31 * 86400.0 - 60.0  # January 3 -> February 3
    us = write(tmp_path / "us.csv", rows.format("03/01/2021 10:00,100,1,a\n03/25/2021 10:00,5,2,a"))
    assert read_generic(us, time_unit="datetime")[0]["submit_time"].max() == 24 * 86400.0
    eu = write(tmp_path / "eu.csv", rows.format("25.03.2021 10:00:05,100,1,a\n"
                                                "03.01.2021 10:00:05,5,2,a"))
    jobs, report = read_generic(eu, time_unit="datetime")
    assert jobs["submit_time"].max() == 81 * 86400.0 and report.first_submit.startswith("2021-01-03")
    # a value the given format does not read is a bad row naming the format
    with pytest.raises(TraceError, match=r"row 2, column 'submit_time': '2021-03-25 10:00' is "
                                         r"not a date-time in the format '%m/%d/%Y %H:%M'"):
        read_generic(write(tmp_path / "mix.csv", rows.format(
            "03/01/2021 10:00,100,1,a\n2021-03-25 10:00,5,2,a")), time_unit="datetime:%m/%d/%Y %H:%M")
    with pytest.raises(ConfigError, match=r"'dt' is not a time unit.*datetime:FORMAT"):
        read_generic(us, time_unit="dt")
    # the order comes from the values that are such dates: a bad cell is a bad row, not a reason
    # to let polars guess (it took day/month from the first value and scrambled the trace)
    na = write(tmp_path / "na.csv", rows.format("03/01/2021 10:00,1,1,a\n03/25/2021 10:00,1,1,a\n"
                                                "04/02/2021 10:00,1,1,a\nn/a,1,1,a"))
    with pytest.raises(TraceError, match=r"row 4, column 'submit_time': 'n/a' is not a date-time "
                                         r"in the format '%m/%d/%Y %H:%M'"):
        read_generic(na, time_unit="datetime")
    jobs, report = read_generic(na, time_unit="datetime", on_bad_rows="drop")
    assert jobs["submit_time"].to_list() == [0.0, 24 * 86400.0, 32 * 86400.0]
    assert report.dropped == {"unparsable_time": 1}
    # the time part is found too (seconds, fractions, AM/PM, a T), and the advice for an
    # ambiguous column names the one its values have
    for text, gap in (("03/01/2021 10:00:00.5,1,1,a\n03/25/2021 10:00:00.5", 24 * 86400.0),
                      ("03/01/2021 10:00 AM,1,1,a\n03/25/2021 01:00 PM", 24 * 86400.0 + 3 * 3600),
                      ("13/01/2021T10:00:00,1,1,a\n03/01/2021T10:00:00", 10 * 86400.0)):
        got = read_generic(write(tmp_path / "tail.csv", rows.format(text + ",1,1,a")),
                           time_unit="datetime")[0]["submit_time"]
        assert got.max() - got.min() == gap, text
    only = write(tmp_path / "only.csv", rows.format("03/01/2021,1,1,a\n03/02/2021,1,1,a"))
    with pytest.raises(TraceError, match=r"'datetime:%m/%d/%Y' or 'datetime:%d/%m/%Y'"):
        read_generic(only, time_unit="datetime")
    assert read_generic(only, time_unit="datetime:%m/%d/%Y")[0].height == 2
    # cells without a date vote for no order, however many: a sentinel (99/99/9999), n/a,
    # an impossible date each become a bad row, and --clean drops only them
    many = write(tmp_path / "many.csv", rows.format(
        "n/a,1,1,a\nn/a,1,1,a\nn/a,1,1,a\n03/25/2021 10:00,1,1,a\n04/01/2021 10:00,1,1,a\n"
        "99/99/9999 00:00,1,1,a\n02/30/2021 10:00,1,1,a"))
    jobs, report = read_generic(many, time_unit="datetime", on_bad_rows="drop")
    assert jobs["submit_time"].to_list() == [0.0, 7 * 86400.0]  # March 25 -> April 1
    # the three n/a rows are the same row three times: two are exact duplicates (issue 36)
    assert report.dropped == {"exact_duplicate": 2, "unparsable_time": 3}
    with pytest.raises(TraceError, match=r"day first by some values \('25/03/2021'\) and month "
                                         r"first by others \('03/26/2021'\)"):
        read_generic(write(tmp_path / "both.csv", rows.format("25/03/2021,1,1,a\n03/26/2021,1,1,a")),
                     time_unit="datetime")
    # start and end times take the order the submissions settled where their own leave it open
    span = write(tmp_path / "span.csv", "pool,submit_time,start_time,end_time,num_gpus\n"
                 "a,25/03/2021 10:00,01/04/2021 10:00,01/04/2021 11:00,1\n")
    jobs = read_generic(span, time_unit="datetime")[0]
    assert jobs["start_time"].to_list() == [7 * 86400.0] and jobs["duration"].to_list() == [3600.0]
    with pytest.raises(TraceError, match=r"'03/01/2021T10:00' could be month/day or day/month"):
        read_generic(write(tmp_path / "t.csv", rows.format("03/01/2021T10:00,1,1,a\n"
                                                           "03/02/2021T10:00,1,1,a")),
                     time_unit="datetime")


def test_generic_duration_from_start_and_end(tmp_path):
    """No duration column: each job's duration is end - start, in the submissions' unit."""
    p = write(tmp_path / "span.csv", "pool,submitted,began,ended,num_gpus\n"
              "a,100,130,190,1\na,110,190,200,2\n")
    jobs, report = read_generic(p, {"submit_time": "submitted", "start_time": "began",
                                    "end_time": "ended"})
    check_jobs(jobs)
    assert jobs["duration"].to_list() == [60.0, 10.0]
    assert jobs["start_time"].to_list() == [30.0, 90.0]  # on the submissions' clock
    assert any("end_time - start_time for 2 row(s)" in n for n in report.notes)
    # date-times, and a file mixing given and derived durations (ms: given ones in ms)
    d = write(tmp_path / "dt.csv", "pool,submit_time,start_time,end_time,num_gpus\n"
              "a,2021-03-01 10:00:00,2021-03-01 10:05:00,2021-03-01 11:05:00,1\n")
    assert read_generic(d, time_unit="datetime")[0]["duration"].to_list() == [3600.0]
    m = write(tmp_path / "ms.csv", "pool,submit_time,start_time,end_time,duration,num_gpus\n"
              "a,0,1000,4000,,1\na,0,,,2500,1\n")
    assert sorted(read_generic(m, time_unit="ms")[0]["duration"].to_list()) == [2.5, 3.0]


def test_generic_span_errors_name_row_and_column(tmp_path):
    p = write(tmp_path / "span.csv", "pool,submit_time,start_time,end_time,num_gpus\n"
              "a,0,10,20,1\na,5,30,25,1\na,6,,40,1\n")
    with pytest.raises(TraceError, match=r"span\.csv: row 3, column 'start_time'"):
        read_generic(p)
    jobs, report = read_generic(p, on_bad_rows="drop")
    assert jobs["duration"].to_list() == [10.0]
    assert report.dropped == {"end_before_start": 1, "missing_value": 1}
    q = write(tmp_path / "half.csv", "pool,submit_time,start_time,num_gpus\na,0,10,1\n")
    with pytest.raises(TraceError, match="no 'duration' column, and 'start_time' without "
                                         "'end_time'"):
        read_generic(q)


# Broken files: each fails naming file, row and column, and drops + counts with "drop".
BROKEN = {
    "missing_value": ("1,x,60,1\n2,x,,1\n3,x,70,1\n", 2, "duration"),
    "non_numeric": ("1,x,60,1\n2,x,60,two\n", 2, "num_gpus"),
    "nonpositive_duration": ("1,x,60,1\n2,x,-5,1\n3,x,0,1\n", 2, "duration"),
    "too_few_gpus": ("1,x,60,1\n2,x,60,0\n", 2, "num_gpus"),
    "duplicate_job_id": ("1,x,60,1\n1,y,60,1\n", 2, "job_id"),
    "unparsable_time": None,
}


@pytest.mark.parametrize("kind", list(BROKEN))
def test_broken_files_fail_with_file_row_column(tmp_path, kind):
    if kind == "unparsable_time":
        p = write(tmp_path / "bad.csv", "job_id,pool,submit_time,duration,num_gpus\n"
                  "a,x,2021-03-01 10:00:00,60,1\nb,x,yesterday,60,1\n")
        args = {"time_unit": "datetime"}
        row, column, n_bad = 2, "submit_time", 1
    else:
        body, row, column = BROKEN[kind]
        lines = body.splitlines()
        # columns: job_id,pool,duration,num_gpus with submit times 0,10,20...
        text = "job_id,pool,submit_time,duration,num_gpus\n" + "".join(
            f"{a},{b},{10 * i},{c},{d}\n" for i, (a, b, c, d) in
            enumerate(line.split(",") for line in lines))
        p = write(tmp_path / "bad.csv", text)
        args = {}
        n_bad = len(lines) - 1 if kind == "nonpositive_duration" else 1
    with pytest.raises(TraceError, match=rf"bad\.csv: row {row}, column '{column}'"):
        read_generic(p, **args)
    jobs, report = read_generic(p, on_bad_rows="drop", **args)
    assert report.dropped == {kind: n_bad}
    assert report.rows_kept + report.rows_dropped == report.rows_read
    assert jobs.height == report.rows_kept


def test_generic_mapping_errors(tmp_path):
    p = write(tmp_path / "t.csv", "a,b,c\n1,2,3\n")
    with pytest.raises(TraceError, match=r"t\.csv: --map names column\(s\) 'nope'"):
        read_generic(p, {"submit_time": "nope"})
    with pytest.raises(ConfigError, match="'when' is not a column of the trace contract"):
        read_generic(p, {"when": "a"})
    with pytest.raises(TraceError, match=r"t\.csv: missing column\(s\) 'pool', 'submit_time'"):
        read_generic(p)
    with pytest.raises(TraceError, match="--pool-from column 'q'"):
        read_generic(p, {"submit_time": "a", "duration": "b", "num_gpus": "c"}, pool_from="q")
    with pytest.raises(TraceError, match="no such file"):
        read_trace(tmp_path / "missing.csv")
    with pytest.raises(ConfigError, match="--format"):
        read_trace(p, fmt="excel")


def test_malformed_csv_names_the_row(tmp_path):
    p = write(tmp_path / "rag.csv", "pool,submit_time,duration,num_gpus\na,0,10,1\na,1,2,3,4\n")
    with pytest.raises(TraceError, match=r"rag\.csv: row 2: 5 fields, but the header has 4"):
        read_trace(p)


def test_bad_preemptible_names_row(tmp_path):
    p = write(tmp_path / "pre.csv", "pool,submit_time,duration,num_gpus,preemptible\n"
              "a,0,10,1,yes\na,1,2,3,maybe\n")
    with pytest.raises(TraceError, match=r"pre\.csv: row 2, column 'preemptible': 'maybe'"):
        read_trace(p)
    q = write(tmp_path / "pre2.csv", "pool,submit_time,duration,num_gpus,preemptible\n"
              "a,0,10,1,yes\na,1,2,3,0\n")
    assert read_trace(q)[0]["preemptible"].to_list() == [True, False]


def test_canonical_round_trip(tmp_path):
    p = write(tmp_path / "philly.csv", PHILLY_HEADER + "2017-10-09 07:01:55,66.0,1,66.0,vcA\n"
              "2017-10-09 07:02:55,6.0,2,12.0,vcB\n")
    jobs, _ = read_philly(p)
    out = tmp_path / "canon"
    out.mkdir()
    jobs.write_parquet(out / "jobs.parquet")
    assert detect_format(out) == "canonical"
    again, report = read_trace(out)
    assert again.equals(jobs) and report.rows_read == 2
    assert read_canonical(out / "jobs.parquet")[0].equals(jobs)


def test_blank_lines_are_not_rows(tmp_path):
    p = write(tmp_path / "philly.csv", PHILLY_HEADER + "2017-10-09 07:01:55,66.0,1,66.0,vcA\n\n"
              "2017-10-09 07:02:55,6.0,2,12.0,vcB\n\n")
    jobs, report = read_philly(p)
    assert report.rows_read == 2 and jobs["job_id"].to_list() == ["1", "3"]
    assert any("blank line" in n for n in report.notes)


# --------------------------------------------------------------------------- real Philly

def test_real_philly(philly_path):
    with pytest.raises(TraceError, match=r"row \d+: exact duplicate of row \d+ \(65 duplicate"):
        read_philly(philly_path)
    jobs, report = read_philly(philly_path, on_bad_rows="drop")
    assert report.rows_read == 82_247
    assert report.dropped == {"exact_duplicate": 65}
    assert jobs.height == report.rows_kept == 82_182
    assert report.pools == 15 and jobs["pool"].n_unique() == 15
    assert jobs["submit_time"].min() == 0.0 and jobs["submit_time"].is_sorted()
    assert jobs["job_id"].n_unique() == jobs.height
    check_jobs(jobs)
    assert read_trace(philly_path, on_bad_rows="drop")[0].equals(jobs)


# --------------------------------------------------------------------------- property

CELL = st.one_of(st.integers(-3, 50).map(str), st.sampled_from(["", "abc", "1.5", " 7 ", "inf"]))


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "", "c"]), CELL, CELL, CELL,
                          st.sampled_from(["j1", "j2", "j3", "j4", "j5", "j6"])),
                min_size=1, max_size=25))
def test_validate_never_loses_rows_silently(rows):
    raw = pl.DataFrame(rows, schema=["pool", "submit_time", "duration", "num_gpus", "job_id"],
                       orient="row")
    jobs, report = validate(raw, on_bad_rows="drop")
    assert report.rows_read == len(rows)
    assert report.rows_kept + report.rows_dropped == report.rows_read == len(rows)
    assert jobs.height == report.rows_kept
    if report.rows_dropped:
        with pytest.raises(TraceError, match=r"row \d+"):
            validate(raw, on_bad_rows="raise")
    else:
        assert validate(raw, on_bad_rows="raise")[0].equals(jobs)
