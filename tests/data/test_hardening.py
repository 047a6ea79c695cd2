"""Issue 36, the data layer: what hostile or odd traces must give (a one-line error naming the
place, or acceptance with a report line), checked on small hand-made files."""

from __future__ import annotations

import json

import polars as pl
import pytest
from sia.data.errors import TraceError
from sia.data.readers import (
    read_canonical,
    read_generic,
    read_helios,
    read_pai,
    read_philly,
    read_philly_joblog,
)

PHILLY = "timestamp,duration,num_gpus,gpu_time,cluster\n"


def write(path, text: str):
    path.write_text(text)
    return path


# --------------------------------------------------------------------------- bookkeeping columns

@pytest.mark.parametrize("name", ["_source_row", "_source_file", "_source_system", "__cast",
                                  "__abs_submit", "__dt"])
def test_a_users_column_with_a_name_the_readers_once_used_is_kept(tmp_path, name):
    p = write(tmp_path / "t.csv", f"pool,submit_time,duration,num_gpus,{name}\n"
                                  "a,0,60,1,x\na,10,60,1,y\n")
    jobs, _ = read_generic(p)
    assert jobs[name].to_list() == ["x", "y"]
    pl.DataFrame({"pool": ["a"], "submit_time": [0.0], "duration": [5.0], "num_gpus": [1],
                  name: [7]}).write_parquet(tmp_path / "t.parquet")
    assert read_generic(tmp_path / "t.parquet")[0][name].to_list() == [7]


def test_a_column_with_the_readers_reserved_prefix_is_an_error(tmp_path):
    p = write(tmp_path / "t.csv", "pool,submit_time,duration,num_gpus,__sia_x\na,0,60,1,x\n")
    with pytest.raises(TraceError, match=r"t.csv: column '__sia_x' starts with '__sia_'.*rename"):
        read_generic(p)


# --------------------------------------------------------------------------- duplicates

def test_generic_exact_duplicates_are_an_error_or_dropped_and_counted(tmp_path):
    p = write(tmp_path / "t.csv", "pool,submit_time,duration,num_gpus\n"
                                  "a,0,60,1\na,5,60,1\na,0,60,1\na,0,60,1\n")
    with pytest.raises(TraceError, match=r"t.csv: row 3: exact duplicate of row 1 \(2 duplicate "
                                         r"rows in all\).*--clean"):
        read_generic(p)
    jobs, report = read_generic(p, on_bad_rows="drop")
    assert jobs.height == 2 and report.dropped == {"exact_duplicate": 2}
    assert sorted(jobs["job_id"].to_list()) == ["1", "2"]  # the first copies are kept


def test_rows_that_differ_in_any_column_are_not_exact_duplicates(tmp_path):
    p = write(tmp_path / "t.csv", "pool,submit_time,duration,num_gpus,note\n"
                                  "a,0,60,1,x\na,0,60,1,y\n")
    assert read_generic(p)[0].height == 2


def test_generic_files_of_a_glob_repeat_rows_as_duplicates(tmp_path):
    for name in ("d1.csv", "d2.csv"):
        write(tmp_path / name, "pool,submit_time,duration,num_gpus\na,0,60,1\na,9,60,1\n")
    jobs, report = read_generic(str(tmp_path / "d*.csv"), on_bad_rows="drop")
    assert report.dropped == {"exact_duplicate": 2}
    assert sorted(jobs["job_id"].to_list()) == ["d1-1", "d1-2"]


def test_philly_rows_that_differ_only_in_gpu_time_are_not_duplicates(tmp_path):
    p = write(tmp_path / "p.csv", PHILLY + "2017-10-03 10:00:00,60,1,60,vc1\n"
                                           "2017-10-03 10:00:00,60,1,61,vc1\n"
                                           "2017-10-03 10:00:00,60,1,abc,vc1\n"
                                           "2017-10-03 10:00:00,60,1,abc,vc1\n")
    with pytest.raises(TraceError, match=r"p.csv: row 4: exact duplicate of row 3"):
        read_philly(p)  # was an IndexError: the text gpu_time was null, and null != null
    jobs, report = read_philly(p, on_bad_rows="drop")
    assert jobs.height == 3 and report.dropped == {"exact_duplicate": 1}


def test_helios_pai_and_canonical_exact_duplicates(tmp_path):
    helios = write(tmp_path / "h.csv", "job_id,user,vc,gpu_num,submit_time,duration\n"
                                       "1,u,v,1,2020-04-01 00:00:00,60\n"
                                       "1,u,v,1,2020-04-01 00:00:00,60\n")
    with pytest.raises(TraceError, match=r"h.csv: row 2: exact duplicate of row 1"):
        read_helios(helios)
    assert read_helios(helios, on_bad_rows="drop")[1].dropped == {"exact_duplicate": 1}
    (tmp_path / "pai").mkdir()
    write(tmp_path / "pai/pai_job_table.csv", "j1,i1,u,Terminated,100,200\nj1,i1,u,Terminated,100,200\n")
    write(tmp_path / "pai/pai_task_table.csv", "j1,worker,1,Terminated,100,200,600,29,100,V100\n")
    with pytest.raises(TraceError, match=r"pai_job_table.csv: row 2: exact duplicate of row 1"):
        read_pai(tmp_path / "pai")
    pl.DataFrame({"job_id": ["a", "a"], "pool": ["p", "p"], "submit_time": [0.0, 0.0],
                  "duration": [5.0, 5.0], "num_gpus": [1, 1]}).write_parquet(tmp_path / "c.parquet")
    with pytest.raises(TraceError, match=r"c.parquet: row 2: exact duplicate of row 1"):
        read_canonical(tmp_path / "c.parquet")


# --------------------------------------------------------------------------- extra columns

def test_philly_gpu_time_text_is_noted(tmp_path):
    p = write(tmp_path / "p.csv", PHILLY + "2017-10-03 10:00:00,60,1,60,vc1\n"
                                           "2017-10-03 10:01:00,60,1,abc,vc1\n"
                                           "2017-10-03 10:02:00,60,1,,vc1\n")
    jobs, report = read_philly(p)
    assert jobs["gpu_time"].to_list() == [60.0, None, None]
    assert any("gpu_time: 1 value(s) that are not finite numbers read as empty (first: row 2, "
               "'abc')" in n for n in report.notes)


def test_helios_garbage_in_extra_columns_is_noted(tmp_path):
    p = write(tmp_path / "h.csv", "job_id,user,vc,gpu_num,cpu_num,submit_time,start_time,duration\n"
                                  "1,u,v,1,eight,2020-04-01 00:00:00,garbage,60\n"
                                  "2,u,v,1,8,2020-04-01 00:01:00,2020-04-01 00:02:00,60\n")
    jobs, report = read_helios(p)
    assert jobs["cpu_num"].to_list() == [None, 8.0]
    notes = "\n".join(report.notes)
    assert "cpu_num: 1 value(s) that are not finite numbers read as empty (first: row 1, 'eight')" in notes
    assert "start_time: 1 value(s) that are not date-times" in notes and "'garbage'" in notes


# --------------------------------------------------------------------------- the Philly job log

def _job(i, gpus, **over):
    job = {"jobid": f"j{i}", "vc": "vc1", "user": "u", "status": "Pass",
           "submitted_time": "2017-10-03 10:00:00",
           "attempts": [{"start_time": "2017-10-03 10:01:00", "end_time": "2017-10-03 11:01:00",
                         "detail": [{"ip": "m1", "gpus": gpus}]}]}
    job.update(over)
    return job


def test_joblog_gpus_as_a_number_is_read_and_noted(tmp_path):
    p = write(tmp_path / "l.json", json.dumps([_job(1, 4), _job(2, ["g0", "g1"])]))
    jobs, report = read_philly_joblog(p)
    assert sorted(jobs["num_gpus"].to_list()) == [2, 4]
    assert any("1 machine record(s) give a number of GPUs" in n for n in report.notes)


@pytest.mark.parametrize("gpus", ["g0g1", 1.5, True, {"a": 1}, -1, 2**40])
def test_joblog_gpus_of_another_shape_is_a_bad_row(tmp_path, gpus):
    p = write(tmp_path / "l.json", json.dumps([_job(1, gpus), _job(2, ["g0"])]))
    with pytest.raises(TraceError, match=r"l.json: row 1, column 'attempts.detail.gpus': .* is "
                                         r"not the list of a machine's GPUs"):
        read_philly_joblog(p)
    jobs, report = read_philly_joblog(p, on_bad_rows="drop")
    assert jobs["job_id"].to_list() == ["j2"] and report.dropped == {"malformed": 1}


@pytest.mark.parametrize(("key", "value"), [("vc", {"a": 1}), ("jobid", [1]),
                                            ("attempts", "x"), ("attempts", [3])])
def test_joblog_fields_of_the_wrong_shape_are_bad_rows(tmp_path, key, value):
    p = write(tmp_path / "l.json", json.dumps([_job(1, ["g"], **{key: value}), _job(2, ["g"])]))
    with pytest.raises(TraceError, match=rf"l.json: row 1, column '{key}': expected"):
        read_philly_joblog(p)


def test_joblog_duplicates_and_deep_nesting(tmp_path):
    p = write(tmp_path / "l.json", json.dumps([_job(1, ["g"]), _job(1, ["g"])]))
    with pytest.raises(TraceError, match=r"l.json: row 2: exact duplicate of row 1"):
        read_philly_joblog(p)
    deep = write(tmp_path / "d.json", "[" * 200_000 + "]" * 200_000)
    with pytest.raises(TraceError, match=r"d.json: JSON nested too deeply"):
        read_philly_joblog(deep)


# --------------------------------------------------------------------------- Parquet types

@pytest.mark.parametrize("column", ["pool", "job_id", "tag", "user"])
@pytest.mark.parametrize(("values", "dtype", "kind"), [
    ([["p1"], ["p2"]], pl.List(pl.String), "nested"),
    ([{"a": "p1"}, {"a": "p2"}], None, "nested"),
    ([b"p1", b"\xff\xfe"], pl.Binary, "binary"),
])
def test_parquet_nested_or_binary_text_columns_are_a_clear_error(tmp_path, column, values, dtype,
                                                                 kind):
    data = {"job_id": ["a", "b"], "pool": ["p", "p"], "submit_time": [0.0, 1.0],
            "duration": [5.0, 5.0], "num_gpus": [1, 1]}
    data[column] = pl.Series(column, values, dtype=dtype)
    pl.DataFrame(data).write_parquet(tmp_path / "t.parquet")
    with pytest.raises(TraceError, match=rf"t.parquet: column '{column}' holds {kind}"):
        read_generic(tmp_path / "t.parquet")
    if column != "pool":
        return
    pl.DataFrame(data).rename({"pool": "queue"}).write_parquet(tmp_path / "q.parquet")
    with pytest.raises(TraceError, match=r"q.parquet: column 'queue' \(--pool-from\) holds"):
        read_generic(tmp_path / "q.parquet", pool_from="queue")


# --------------------------------------------------------------------------- white space

def test_pool_names_stripped_are_noted_with_the_pools_they_merge(tmp_path):
    p = write(tmp_path / "t.csv", "pool,submit_time,duration,num_gpus\n"
                                  "p1,0,60,1\np1 ,1,60,1\n\" p1\",2,60,1\np2\t,3,60,1\n")
    jobs, report = read_generic(p)
    assert sorted(set(jobs["pool"])) == ["p1", "p2"]
    note = next(n for n in report.notes if n.startswith("pool:"))
    assert "removed from 3 value(s)" in note and "'p1 ' -> 'p1'" in note
    assert "1 pool name(s) now equal to another, read as one: 'p1' from ' p1', 'p1', 'p1 '" in note
    philly = write(tmp_path / "p.csv", PHILLY + "2017-10-03 10:00:00,60,1,60,vc2 \n"
                                                "2017-10-03 10:01:00,60,1,60,vc2\n")
    assert any("'vc2' from 'vc2', 'vc2 '" in n for n in read_philly(philly)[1].notes)
    clean = write(tmp_path / "c.csv", "pool,submit_time,duration,num_gpus\np1,0,60,1\n")
    assert not any(n.startswith("pool:") for n in read_generic(clean)[1].notes)


def test_sacct_partitions_stripped_are_noted(tmp_path):
    from sia.data.sacct import read_sacct

    p = write(tmp_path / "s.txt", "JobID|Partition|Submit|Start|End|State|ReqTRES\n"
              "1|gpu |2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:10:00|COMPLETED|gres/gpu=1\n"
              "2|gpu|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:10:00|COMPLETED|gres/gpu=1\n")
    jobs, report = read_sacct(p)
    assert jobs["pool"].to_list() == ["gpu", "gpu"]
    assert any(n.startswith("pool:") and "'gpu' from 'gpu', 'gpu '" in n for n in report.notes)


def test_sacct_job_ids_stripped_are_noted(tmp_path):
    from sia.data.sacct import read_sacct

    p = write(tmp_path / "s.txt", "JobID|Partition|Submit|Start|End|State|ReqTRES\n"
              " 1|gpu|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:10:00|COMPLETED|gres/gpu=1\n"
              "2|gpu|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:10:00|COMPLETED|gres/gpu=1\n")
    jobs, report = read_sacct(p)
    assert jobs["job_id"].to_list() == ["1", "2"]
    assert any(n.startswith("JobID:") and "' 1' -> '1'" in n for n in report.notes), report.notes
    clean = write(tmp_path / "c.txt", "JobID|Partition|Submit|Start|End|State|ReqTRES\n"
                  "1|gpu|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:10:00|COMPLETED|gres/gpu=1\n")
    assert not any(n.startswith("JobID:") for n in read_sacct(clean)[1].notes)


# --------------------------------------------------------------------------- huge integers

def test_int64_times_beyond_2_53_are_refused_not_collapsed(tmp_path):
    pl.DataFrame({"pool": ["a", "a"], "submit_time": [2**62, 2**62 + 1000],
                  "duration": [5, 5], "num_gpus": [1, 1]}).write_parquet(tmp_path / "t.parquet")
    with pytest.raises(TraceError, match=r"t.parquet: row 1, column 'submit_time': "
                                         r"4611686018427387904.* 2\^53 .* or more"):
        read_generic(tmp_path / "t.parquet")
    p = write(tmp_path / "t.csv", "pool,submit_time,duration,num_gpus\na,4611686018427387905,5,1\n")
    with pytest.raises(TraceError, match=r"column 'submit_time': .* 2\^53 .* or more"):
        read_generic(p)
    ok = write(tmp_path / "ok.csv", f"pool,submit_time,duration,num_gpus\na,{2**53 - 10},5,1\n"
                                    f"a,{2**53 - 4},5,1\n")
    edge = write(tmp_path / "e.csv", f"pool,submit_time,duration,num_gpus\na,{2**53 + 1},5,1\n")
    with pytest.raises(TraceError, match=r"column 'submit_time': .* 2\^53 .* or more"):
        read_generic(edge)  # rounds to 2^53 as a float: refused too
    assert read_generic(ok)[0]["submit_time"].to_list() == [0.0, 6.0]  # exact below 2^53


# --------------------------------------------------------------------------- paths

def test_a_file_named_like_a_glob_is_read_as_that_file(tmp_path):
    from sia.data.readers import read_trace

    write(tmp_path / "jobs[1].csv", "pool,submit_time,duration,num_gpus\nliteral,0,60,1\n")
    write(tmp_path / "jobs1.csv", "pool,submit_time,duration,num_gpus\nglob,0,60,1\n")
    jobs, _ = read_trace(tmp_path / "jobs[1].csv")
    assert jobs["pool"].to_list() == ["literal"]
    (tmp_path / "jobs[1].csv").unlink()  # a pattern when no such file exists
    assert read_trace(str(tmp_path / "jobs[1].csv"))[0]["pool"].to_list() == ["glob"]


@pytest.mark.parametrize("name", ["t.csv", "t.parquet", "l.json", "cluster_log.csv"])
def test_a_fifo_as_the_trace_is_an_error_not_a_hang(tmp_path, name):
    import os

    from sia.data.readers import read_trace

    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(TraceError, match=rf"{name}: a FIFO \(named pipe\), not a regular file"):
        read_trace(fifo)
    (tmp_path / "d").mkdir()
    os.mkfifo(tmp_path / "d" / "x.csv")
    with pytest.raises(TraceError, match=r"x.csv: a FIFO"):
        read_trace(tmp_path / "d", "generic")


def test_a_fifo_as_the_quota_file_is_an_error(tmp_path):
    import os

    from sia.data.quotas import read_quota_file

    os.mkfifo(tmp_path / "q.csv")
    with pytest.raises(TraceError, match=r"q.csv: a FIFO"):
        read_quota_file(tmp_path / "q.csv")


# --------------------------------------------------------------------------- time scale

def _jobs(submits, durations):
    n = len(submits)
    return pl.DataFrame({"job_id": [str(i) for i in range(n)], "pool": ["a"] * n,
                         "submit_time": [float(s) for s in submits],
                         "duration": [float(d) for d in durations]})


def test_a_span_of_centuries_suggests_ms_when_ms_fits():
    from sia.data.plausibility import Thresholds, time_scale_problem

    year = 365.25 * 86400
    ms_trace = _jobs([i * 200 * year / 99 for i in range(100)], [600_000] * 100)  # 200 "years"
    what, message = time_scale_problem(ms_trace, Thresholds(), "t.csv", "s")
    assert what == "the submissions span 200 years (more than 20 years)"
    assert message.startswith("t.csv: the submissions span 200 years") and "--time-unit ms" in message
    assert "--allow-implausible" in message
    # a format whose unit is fixed gets no unit to try
    assert "--time-unit" not in time_scale_problem(ms_trace, Thresholds(), "t.csv", None)[1]
    # in ms already, nothing finer is offered
    assert "even in ms" in time_scale_problem(_jobs([0, 1e6 * year], [1, 1]), Thresholds(),
                                              "t.csv", "ms")[1]
    # 19 years, a median job of 59 days: plausible (no message)
    assert time_scale_problem(_jobs([0, 19 * year], [59 * 86400] * 2), Thresholds(), "t",
                              "s") is None


def test_a_median_job_of_years_is_an_error_and_one_far_job_is_named():
    from sia.data.plausibility import Thresholds, time_scale_problem

    day = 86400.0
    long = _jobs(range(0, 1000, 10), [400 * day] * 100)
    what, message = time_scale_problem(long, Thresholds(), "t.csv", "s")
    assert what == "the median job runs 1.1 years (more than 60 days)"
    assert "--time-unit ms" in message
    outlier = _jobs([*range(0, 3000, 100), 8000 * 365.25 * day], [60] * 31)
    message = time_scale_problem(outlier, Thresholds(), "p.csv", None)[1]
    assert "because of a few jobs such as '30'" in message and "--time-unit" not in message


def test_synthetic_size_is_estimated_and_refused_up_front():
    import math

    from sia.data.errors import ConfigError
    from sia.data.synthetic import expected_jobs, generate_workload

    mean_s = (0.8 * (math.sqrt(10) + 100) / 2 + 0.2 * (100 + 1000) / 2) * 60
    per_day = 4 * 0.95 * 8 / (mean_s * 1.9) * 86400  # 4 pools at the top load, mean width 1.9
    assert expected_jobs("base", 10.0) == pytest.approx(10 * per_day)
    jobs, _ = generate_workload("base", 0, days=30)
    assert 0.5 * expected_jobs("base", 30) < jobs.height <= expected_jobs("base", 30)
    with pytest.raises(ConfigError, match=r"--days 1e\+09: the base workload would hold about "
                                          r"1.52e\+11 jobs, more than the limit of 10,000,000 "
                                          r"\(--max-jobs\)"):
        generate_workload("base", 0, days=1e9)
    with pytest.raises(ConfigError, match=r"limit of 100 \(--max-jobs\)"):
        generate_workload("base", 0, days=1, max_jobs=100)
    with pytest.raises(ConfigError, match="finite number"):
        generate_workload("base", 0, days=float("nan"))
