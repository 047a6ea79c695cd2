"""The Slurm sacct reader on small hand-written exports, and on the real Graham trace."""

from __future__ import annotations

import gzip
from pathlib import Path

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError, TraceError
from sia.data.readers import detect_format, read_trace
from sia.data.sacct import is_sacct, read_sacct, slurm_seconds
from sia.data.schema import check_jobs

GRAHAM = Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "graham" / \
    "graham.sacct.txt.gz"

#: A Graham-like export (its fields, a subset of its rows' shapes).
GRAHAM_FIELDS = ["JobIDRaw", "Account", "Partition", "Submit", "Eligible", "Start", "End",
                 "ElapsedRaw", "TimelimitRaw", "ReqCPUS", "ReqMem", "ReqTRES", "AllocNodes",
                 "State", "Priority"]
GRAHAM_ROWS = [
    # a CPU-only job
    ["100", "5449", "27", "2021-05-01T00:02:52", "2021-05-01T00:02:52", "2021-05-01T15:43:48",
     "2021-05-03T17:41:21", "179853", "8880", "32", "20480M",
     "billing=32,cpu=32,mem=20480M,node=1", "1", "COMPLETED", "1514457"],
    # GPU jobs
    ["101", "2166", "45", "2021-05-01T00:18:07", "2021-05-01T00:18:08", "2021-05-01T15:09:02",
     "2021-05-01T22:09:31", "25229", "420", "1", "8192M",
     "billing=1,cpu=1,gres/gpu=1,mem=8192M,node=1", "1", "TIMEOUT", "1299400"],
    ["102", "50", "8", "2021-05-01T00:34:13", "2021-05-01T00:34:13", "2021-05-01T13:37:31",
     "2021-05-01T15:57:12", "8381", "540", "8", "32000M",
     "billing=2,cpu=8,gres/gpu=4,mem=32000M,node=1", "1", "COMPLETED", "1361469"],
]


def export(path: Path, fields: list[str], rows: list[list[str]], *, trailing: bool = False,
           gz: bool = False) -> Path:
    """Write a sacct export (``-P``; ``trailing``: ``-p`` with a '|' ending each line)."""
    end = "|" if trailing else ""
    text = "\n".join("|".join(r) + end for r in [fields, *rows]) + "\n"
    if gz:
        path.write_bytes(gzip.compress(text.encode()))
    else:
        path.write_text(text)
    return path


def graham_like(tmp_path: Path, **kw) -> Path:
    return export(tmp_path / "g.sacct.txt", GRAHAM_FIELDS, GRAHAM_ROWS, **kw)


# --------------------------------------------------------------------------- the basics

def test_graham_layout_hand_checked(tmp_path):
    p = graham_like(tmp_path)
    assert detect_format(p) == "sacct" and is_sacct(p)
    jobs, report = read_sacct(p)
    check_jobs(jobs)
    assert jobs["job_id"].to_list() == ["101", "102"]
    # each job arrives when eligible (101: submitted 00:18:07, eligible 00:18:08), rebased to
    # the first arrival: 00:34:13 is 965 s later
    assert jobs["submit_time"].to_list() == [0.0, 965.0]
    assert report.first_submit == "2021-05-01 00:18:08"
    assert jobs["duration"].to_list() == [25229.0, 8381.0]
    assert jobs["num_gpus"].to_list() == [1, 4]
    assert jobs["time_limit"].to_list() == [420 * 60.0, 540 * 60.0]
    assert jobs["pool"].to_list() == ["45", "8"]
    assert jobs["user"].to_list() == ["2166", "50"]  # Account: Graham's user identity
    assert jobs["tag"].to_list() == [None, None]
    assert jobs["state"].to_list() == ["TIMEOUT", "COMPLETED"]
    assert report.rows_read == 3 and report.rows_kept == 2
    assert report.left_out["cpu_only"] == 1
    assert sum(report.left_out.values()) + report.rows_kept == report.rows_read
    assert any("Account" in n for n in report.notes)


def test_a_job_arrives_when_it_became_eligible(tmp_path):
    fields = ["JobID", "Submit", "Eligible", "Start", "End", "ElapsedRaw", "AllocTRES", "State",
              "Partition"]
    gpu = "cpu=1,gres/gpu=1"

    def row(jid, submit, eligible, start):
        return [jid, f"2024-03-01T{submit}", eligible and f"2024-03-01T{eligible}",
                f"2024-03-01T{start}", "2024-03-01T23:00:00", "60", gpu, "COMPLETED", "gpu"]

    rows = [row("1", "10:00:00", "10:00:00", "10:30:00"),   # eligible at once: t = 0
            row("2", "10:00:00", "12:00:00", "12:30:00"),   # afterok / --begin: arrives 12:00
            row("3", "10:00:00", "", "11:00:00"),           # Unknown: its submission
            row("4", "10:00:00", "14:00:00", "13:00:00"),   # eligible after it started: Start
            row("5", "10:00:00", "09:00:00", "10:10:00")]   # before its submission: Submit
    rows[2][2] = "Unknown"
    p = export(tmp_path / "e.txt", fields, rows)
    jobs, report = read_sacct(p)
    assert jobs.sort("job_id")["submit_time"].to_list() == [0.0, 7200.0, 0.0, 10800.0, 0.0]
    # held from its submission (10:00) until it arrived: what a forecaster may count as coming
    assert jobs.sort("job_id")["hold_time"].to_list() == [0.0, 7200.0, 0.0, 10800.0, 0.0]
    assert report.first_submit == "2024-03-01 10:00:00"
    note = next(n for n in report.notes if n.startswith("arrival:"))
    assert note.startswith("arrival: 2 job(s) became eligible after their submission") \
        and "2 of them an hour or more later (median 2.5 h)" in note
    # without the field every job arrives at its submission, and nothing is noted
    no_field = export(tmp_path / "s.txt", [f for f in fields if f != "Eligible"],
                      [[c for i, c in enumerate(r) if i != 2] for r in rows])
    jobs, report = read_sacct(no_field)
    assert jobs["submit_time"].to_list() == [0.0] * 5
    assert jobs["hold_time"].null_count() == 5  # not recorded: unknown, not 0
    assert not any(n.startswith("arrival:") for n in report.notes)
    rows[1][2] = "soon"  # not a date-time: a bad row naming the column
    with pytest.raises(TraceError, match=r"row 2, column 'Eligible': 'soon' is not a date-time"):
        read_sacct(export(tmp_path / "b.txt", fields, rows))


def _held_by_a_dependency(tmp_path: Path) -> Path:
    """An export of two jobs: 2 waits on 1 (afterok), eligible 2 h after its submission."""
    fields = ["JobID", "Submit", "Eligible", "Start", "End", "ElapsedRaw", "AllocTRES", "State",
              "Partition"]
    rows = [["1", "2024-03-01T10:00:00", "2024-03-01T10:00:00", "2024-03-01T10:00:05",
             "2024-03-01T12:00:00", "7195", "gres/gpu=1", "COMPLETED", "gpu"],
            ["2", "2024-03-01T10:00:00", "2024-03-01T12:00:00", "2024-03-01T12:00:30",
             "2024-03-01T13:00:00", "3570", "gres/gpu=1", "COMPLETED", "gpu"]]
    return export(tmp_path / "dep.sacct", fields, rows)


def test_arrival_submit_ignores_eligible_and_says_what_it_would_have_held(tmp_path):
    p = _held_by_a_dependency(tmp_path)
    # the default, and eligible by name: job 2 arrives when its dependency released it
    for jobs, report in (read_sacct(p), read_sacct(p, arrival="eligible"), read_trace(p)):
        assert jobs.sort("job_id")["submit_time"].to_list() == [0.0, 7200.0]
        note = next(n for n in report.notes if n.startswith("arrival:"))
        assert "1 job(s) became eligible after their submission" in note
        assert "--arrival submit" in note
    # submit: both arrive at their Submit, and the note says Eligible was ignored, and what
    # it would have done
    for jobs, report in (read_sacct(p, arrival="submit"), read_trace(p, arrival="submit")):
        assert jobs.sort("job_id")["submit_time"].to_list() == [0.0, 0.0]
        assert jobs["duration"].to_list() == [7195.0, 3570.0]  # nothing else changes
        assert jobs["hold_time"].null_count() == 2  # Eligible ignored: no hold is known
        notes = [n for n in report.notes if n.startswith("arrival:")]
        assert len(notes) == 1 and "Eligible field is ignored" in notes[0]
        assert "--arrival submit" in notes[0]
        assert ("1 job(s) arrive after their submission (dependencies, --begin, holds), 1 of "
                "them an hour or more later (median 2.0 h)") in notes[0]


def test_arrival_submit_does_not_check_the_ignored_eligible_cells(tmp_path):
    p = _held_by_a_dependency(tmp_path)
    p.write_text(p.read_text().replace("2024-03-01T12:00:00|2024-03-01T12:00:30", "soon|"
                                       "2024-03-01T12:00:30"))
    with pytest.raises(TraceError, match=r"column 'Eligible': 'soon' is not a date-time"):
        read_sacct(p)
    jobs, report = read_sacct(p, arrival="submit")
    assert jobs["submit_time"].to_list() == [0.0, 0.0]
    assert any("0 job(s) arrive after their submission" in n for n in report.notes)


def test_arrival_bad_value_and_other_formats_are_refused(tmp_path):
    p = _held_by_a_dependency(tmp_path)
    for call in (lambda: read_sacct(p, arrival="start"),
                 lambda: read_trace(p, arrival="Submit")):
        with pytest.raises(ConfigError, match=r"--arrival '(start|Submit)': choose eligible "
                                              r"\(.*\) or submit"):
            call()
    csv = tmp_path / "jobs.csv"
    csv.write_text("job_id,pool,submit_time,duration,num_gpus\na,p,0,60,1\n")
    for fmt in ("auto", "generic"):
        with pytest.raises(ConfigError, match=r"jobs.csv is read as a generic trace: --arrival "
                                              r"submit would be ignored .*; drop it"):
            read_trace(csv, fmt, arrival="submit")
    with pytest.raises(ConfigError, match=r"builtin:philly is read as a philly trace: --arrival "
                                          r"eligible would be ignored .*; drop it"):
        read_trace("builtin:philly", arrival="eligible")
    with pytest.raises(ConfigError, match="read as a generic trace: --arrival submit"):
        read_trace(p, "generic", arrival="submit")  # a sacct file read as generic: refused too


FULL_FIELDS = ["JobID", "JobIDRaw", "User", "Account", "Partition", "JobName", "Submit",
               "Start", "End", "Elapsed", "ElapsedRaw", "Timelimit", "TimelimitRaw", "ReqTRES",
               "AllocTRES", "State", "NNodes"]


def full_row(jid: str, raw: str, *, submit="2024-03-01T10:00:00", start="2024-03-01T10:05:00",
             end="2024-03-01T11:05:00", elapsed="01:00:00", elapsed_raw="3600",
             limit="02:00:00", limit_raw="120", req="billing=1,cpu=4,gres/gpu=1,node=1",
             alloc="billing=1,cpu=4,gres/gpu=1,node=1", state="COMPLETED", user="alice",
             account="lab", partition="gpu", name="train") -> list[str]:
    return [jid, raw, user, account, partition, name, submit, start, end, elapsed, elapsed_raw,
            limit, limit_raw, req, alloc, state, "1"]


def test_steps_fold_into_their_job_and_arrays_are_jobs(tmp_path):
    step = dict(user="", account="lab", partition="", name="batch", alloc="cpu=4,gres/gpu=1,node=1")
    rows = [
        full_row("10", "10"),
        full_row("10.batch", "10.batch", **step),
        full_row("10.extern", "10.extern", **step),
        full_row("10.0", "10.0", **step),
        full_row("20_1", "21", submit="2024-03-01T10:01:00"),
        full_row("20_1.batch", "21.batch", **step),
        full_row("20_2", "22", submit="2024-03-01T10:01:00"),
        # a pending array record: a job of its own, which never started
        full_row("20_[3-5]", "20", submit="2024-03-01T10:01:00", start="Unknown", end="Unknown",
                 elapsed="00:00:00", elapsed_raw="0", alloc="", state="PENDING"),
        # a step whose job line is not in the export
        full_row("30.batch", "30.batch", **step),
        # a heterogeneous job's component and its step
        full_row("40+0", "40", submit="2024-03-01T10:02:00"),
        full_row("40+0.0", "40.0", **step),
    ]
    jobs, report = read_sacct(export(tmp_path / "s.txt", FULL_FIELDS, rows))
    assert jobs["job_id"].to_list() == ["10", "20_1", "20_2", "40+0"]
    assert report.left_out["job_steps"] == 5
    assert report.left_out["step_without_job"] == 1
    assert report.left_out["never_started"] == 1
    assert report.rows_read == len(rows)
    assert sum(report.left_out.values()) + report.rows_kept == report.rows_read
    assert any("30.batch" in n for n in report.notes)
    assert jobs["user"].to_list() == ["alice"] * 4  # the User field, not Account
    assert jobs["tag"].to_list() == ["train"] * 4
    assert jobs["pool"].to_list() == ["gpu"] * 4
    # the Account field is kept as an extra column when it is not the user
    assert jobs["account"].to_list() == ["lab"] * 4


@pytest.mark.parametrize(("text", "seconds"), [
    ("1-02:03:04", 93784.0), ("02:03:04", 7384.0), ("03:04", 184.0), ("03:04.500", 184.5),
    ("00:00:01.250", 1.25), ("90", 5400.0), ("1-2", 93600.0), ("1-02:03", 93780.0),
    ("0-00:00:00", 0.0), ("25:00:00", 90000.0), ("90:30", 5430.0), ("7-00:00:00", 604800.0),
])
def test_slurm_time_formats(text, seconds):
    got = pl.select(slurm_seconds(pl.lit(text))).item()
    assert got == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["x", "1:75", "1:02:75", "1:2:3:4", "03.5:04", "-1:00", "1-",
                                  "1.5", "1-02.5", "01:02:03 ", "UNLIMITED"])
def test_slurm_time_rejects(text):
    assert pl.select(slurm_seconds(pl.lit(text))).item() is None


def test_time_limits_unlimited_partition_limit_unknown(tmp_path):
    rows = [
        full_row("1", "1", limit="UNLIMITED", limit_raw="UNLIMITED"),
        full_row("2", "2", limit="Partition_Limit", limit_raw="Partition_Limit"),
        full_row("3", "3", limit="Unknown", limit_raw=""),
        full_row("4", "4", limit="1-00:00:00", limit_raw=""),  # Timelimit where Raw is empty
        full_row("5", "5", limit="00:30:00", limit_raw="45"),  # Raw decides when given
        full_row("6", "6", limit="30", limit_raw="None"),  # bare minutes
        full_row("7", "7", limit="01:30", limit_raw=""),  # MM:SS
    ]
    jobs, report = read_sacct(export(tmp_path / "t.txt", FULL_FIELDS, rows))
    got = dict(zip(jobs["job_id"], jobs["time_limit"], strict=True))
    assert got == {"1": None, "2": None, "3": None, "4": 86400.0, "5": 2700.0, "6": 1800.0,
                   "7": 90.0}
    assert any("4 job(s) with a limit, 2 UNLIMITED or Partition_Limit (no limit), 1 not "
               "recorded" in n for n in report.notes)


def test_durations_elapsed_raw_then_elapsed_then_end_minus_start(tmp_path):
    rows = [
        full_row("1", "1", elapsed="00:10:00", elapsed_raw="3600"),  # ElapsedRaw wins
        full_row("2", "2", elapsed="00:10:00.500", elapsed_raw=""),  # Elapsed
        full_row("3", "3", elapsed="", elapsed_raw="Unknown"),  # End - Start = 1 h
        full_row("4", "4", elapsed="1-00:00:00", elapsed_raw=""),
    ]
    jobs, report = read_sacct(export(tmp_path / "d.txt", FULL_FIELDS, rows))
    got = dict(zip(jobs["job_id"], jobs["duration"], strict=True))
    assert got == {"1": 3600.0, "2": 600.5, "3": 3600.0, "4": 86400.0}
    assert any("ElapsedRaw for 1, Elapsed for 2, End - Start for 1" in n for n in report.notes)


def test_gpus_typed_untyped_alloc_and_req(tmp_path):
    rows = [
        full_row("1", "1", alloc="cpu=1,gres/gpu=2,gres/gpu:a100=2,node=1"),  # no double count
        full_row("2", "2", alloc="cpu=1,gres/gpu:a100=1,gres/gpu:v100=2,node=1"),  # typed sum
        full_row("3", "3", alloc="cpu=1,gres/gpu:nvidia_a100-sxm4-80gb=4"),
        full_row("4", "4", req="gres/gpu=4", alloc="gres/gpu=2"),  # ran: AllocTRES
        full_row("5", "5", req="gres/gpu=3", alloc=""),  # ran, no AllocTRES: ReqTRES
        full_row("6", "6", req="cpu=2,gres/gpumem=40G", alloc="cpu=2,gres/gpumem=40G"),
        full_row("7", "7", req="cpu=2,mem=4G", alloc="cpu=2,mem=4G"),  # CPU-only
        full_row("8", "8", req="", alloc=""),  # no TRES recorded
        full_row("9", "9", req="gres/gpu:1g.5gb=1,gres/gpu:v100=1", alloc=""),
    ]
    jobs, report = read_sacct(export(tmp_path / "g.txt", FULL_FIELDS, rows))
    got = dict(zip(jobs["job_id"], jobs["num_gpus"], strict=True))
    assert got == {"1": 2, "2": 3, "3": 4, "4": 2, "5": 3, "9": 2}
    assert report.left_out["cpu_only"] == 2 and report.left_out["no_tres"] == 1
    assert any("AllocTRES for 4 job(s), ReqTRES for 2" in n for n in report.notes)


def test_exclusions_are_counted_each(tmp_path):
    rows = [
        full_row("1", "1"),
        full_row("2", "2", start="None", end="2024-03-01T10:30:00", elapsed_raw="0",
                 alloc="", state="CANCELLED by 1234"),  # cancelled while pending
        full_row("3", "3", start="2024-03-01T10:30:00", end="2024-03-01T10:30:00",
                 elapsed_raw="0", elapsed="00:00:00", alloc="",
                 state="CANCELLED by 1234"),  # Slurm's Start = End = the cancellation
        full_row("4", "4", start="Unknown", end="Unknown", elapsed_raw="0", alloc="",
                 state="PENDING"),
        full_row("5", "5", start="Unknown", end="Unknown", elapsed_raw="0", alloc="",
                 state="FAILED"),  # never started, not cancelled
        full_row("6", "6", end="Unknown", elapsed_raw="1200", state="RUNNING"),
        full_row("7", "7", end="2024-03-01T10:05:00", elapsed_raw="0", elapsed="00:00:00",
                 state="FAILED"),  # ran 0 s
        full_row("8", "8", state="CANCELLED by 99"),  # cancelled while running: a job
        full_row("9", "9", start="2024-03-02T00:00:00", state="PENDING"),  # expected start only
    ]
    jobs, report = read_sacct(export(tmp_path / "x.txt", FULL_FIELDS, rows))
    assert jobs["job_id"].to_list() == ["1", "8"]
    assert jobs["state"].to_list() == ["COMPLETED", "CANCELLED"]
    assert report.left_out == {"cpu_only": 0, "cancelled_pending": 2, "never_started": 3,
                               "unfinished": 1, "zero_second_run": 1}
    # the notes describe the kept jobs only
    assert "durations: ElapsedRaw for 2" in report.notes
    assert "GPUs: AllocTRES for 2 job(s), ReqTRES for 0" in report.notes


def test_zero_counts_are_listed_so_a_reader_sees_the_checks(tmp_path):
    _, report = read_sacct(graham_like(tmp_path))
    assert report.left_out == {"cpu_only": 1, "cancelled_pending": 0, "never_started": 0,
                               "unfinished": 0, "zero_second_run": 0}


def test_ran_past_limit_is_a_warning(tmp_path):
    rows = [full_row("1", "1", elapsed_raw="7300", limit_raw="120"),  # 100 s over: warned
            full_row("2", "2", elapsed_raw="7250", limit_raw="120")]  # 50 s over: grace
    jobs, report = read_sacct(export(tmp_path / "w.txt", FULL_FIELDS, rows))
    assert jobs.height == 2
    assert len(report.warnings) == 1 and "1 job(s) ran longer than their time limit" in \
        report.warnings[0] and "row 1" in report.warnings[0]


# --------------------------------------------------------------------------- layouts

def _frame(jobs: pl.DataFrame) -> pl.DataFrame:
    return jobs.select(sorted(jobs.columns))


def test_gzip_trailing_pipe_and_plain_read_the_same(tmp_path):
    plain, _ = read_sacct(graham_like(tmp_path))
    gz = export(tmp_path / "g.txt.gz", GRAHAM_FIELDS, GRAHAM_ROWS, gz=True)
    no_suffix = export(tmp_path / "g_gz_no_suffix", GRAHAM_FIELDS, GRAHAM_ROWS, gz=True)
    piped = export(tmp_path / "p.txt", GRAHAM_FIELDS, GRAHAM_ROWS, trailing=True)
    for p in (gz, no_suffix, piped):
        assert detect_format(p) == "sacct"
        jobs, report = read_sacct(p)
        assert jobs.equals(plain), p
        assert report.rows_read == 3


def test_lower_case_header_crlf_and_blank_lines(tmp_path):
    fields = [f.lower() for f in GRAHAM_FIELDS]
    text = "\r\n".join("|".join(r) for r in [fields, GRAHAM_ROWS[0], [], GRAHAM_ROWS[1],
                                              GRAHAM_ROWS[2]]) + "\r\n"
    p = tmp_path / "c.txt"
    p.write_text(text)
    jobs, report = read_sacct(p)
    plain, _ = read_sacct(graham_like(tmp_path))
    assert jobs.equals(plain)
    assert any("1 blank line" in n for n in report.notes)


def _shuffled(fields: list[str], rows: list[list[str]], order: list[int]):
    return [fields[i] for i in order], [[r[i] for i in order] for r in rows]


def test_field_order_shuffled(tmp_path):
    rows = [full_row("1", "1"), full_row("2", "2", limit_raw="", limit="UNLIMITED"),
            full_row("3", "3", user="bob", submit="2024-03-01T09:00:00")]
    ref, _ = read_sacct(export(tmp_path / "a.txt", FULL_FIELDS, rows))
    order = list(reversed(range(len(FULL_FIELDS))))
    f, r = _shuffled(FULL_FIELDS, rows, order)
    jobs, _ = read_sacct(export(tmp_path / "b.txt", f, r))
    assert _frame(jobs).equals(_frame(ref))


_cells = st.sampled_from
_row = st.fixed_dictionaries({
    "start": _cells(["2024-03-01T10:05:00", "Unknown", "None"]),
    "elapsed_raw": _cells(["3600", "0", "", "12"]),
    "limit_raw": _cells(["120", "UNLIMITED", "Partition_Limit", "", "1"]),
    "limit": _cells(["02:00:00", "UNLIMITED", "Unknown", "1-00:00:00", "30"]),
    "alloc": _cells(["gres/gpu=1", "", "cpu=1", "gres/gpu=2,gres/gpu:a100=2"]),
    "req": _cells(["gres/gpu=1", "cpu=2", "gres/gpu:v100=3"]),
    "state": _cells(["COMPLETED", "CANCELLED by 7", "FAILED", "PENDING", "TIMEOUT"]),
    "partition": _cells(["gpu", "long"]),
    "user": _cells(["alice", "bob", ""]),
    "submit": _cells(["2024-03-01T10:00:00", "2024-03-01T09:00:00", "2024-03-01T10:00:01"]),
})


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(rows=st.lists(_row, min_size=1, max_size=6),
       order=st.permutations(list(range(len(FULL_FIELDS)))),
       steps=st.booleans())
def test_property_field_order_does_not_change_the_result(tmp_path_factory, rows, order, steps):
    tmp = tmp_path_factory.mktemp("perm")
    lines = []
    for i, kw in enumerate(rows):
        lines.append(full_row(str(i), str(i), **kw))
        if steps:
            lines.append(full_row(f"{i}.batch", f"{i}.batch", **kw))
    try:
        ref = read_sacct(export(tmp / "a.txt", FULL_FIELDS, lines), on_bad_rows="drop")
    except TraceError as exc:  # e.g. no job left: the shuffled file must fail the same way
        with pytest.raises(TraceError) as other:
            f, r = _shuffled(FULL_FIELDS, lines, order)
            read_sacct(export(tmp / "b.txt", f, r), on_bad_rows="drop")
        assert str(other.value).replace("b.txt", "a.txt") == str(exc)
        return
    f, r = _shuffled(FULL_FIELDS, lines, order)
    got = read_sacct(export(tmp / "b.txt", f, r), on_bad_rows="drop")
    assert _frame(got[0]).equals(_frame(ref[0]))
    assert got[1].left_out == ref[1].left_out and got[1].dropped == ref[1].dropped
    assert got[1].rows_read == ref[1].rows_read == len(lines)
    assert sum(got[1].left_out.values()) + got[1].rows_kept + got[1].rows_dropped == len(lines)


# --------------------------------------------------------------------------- pools

def test_pool_from_account_user_and_const(tmp_path):
    rows = [full_row("1", "1", user="alice", account="labA", partition="gpu"),
            full_row("2", "2", user="bob", account="labB", partition="gpu")]
    p = export(tmp_path / "p.txt", FULL_FIELDS, rows)
    for choice, pools in (("account", ["labA", "labB"]), ("user", ["alice", "bob"]),
                          ("Partition", ["gpu", "gpu"]), ("const:all", ["all", "all"]),
                          ("NNodes", ["1", "1"])):
        jobs, _ = read_sacct(p, pool_from=choice)
        assert jobs["pool"].to_list() == pools, choice
    jobs, _ = read_sacct(p, pool_from="account")
    assert jobs["partition"].to_list() == ["gpu", "gpu"]  # kept when it is not the pool
    # through read_trace: --pool-from keeps the sacct reader (not the generic one)
    jobs, report = read_trace(p, pool_from="user")
    assert jobs["pool"].to_list() == ["alice", "bob"]


def test_pool_from_user_on_graham_layout_is_the_account(tmp_path):
    jobs, _ = read_sacct(graham_like(tmp_path), pool_from="user")
    assert jobs["pool"].to_list() == ["2166", "50"]


def test_pool_errors(tmp_path):
    p = export(tmp_path / "p.txt", FULL_FIELDS, [full_row("1", "1", partition="")])
    with pytest.raises(TraceError, match=r"p.txt: row 1, column 'Partition': value is missing"):
        read_sacct(p)
    with pytest.raises(TraceError, match=r"p.txt: --pool-from qos: the export has no 'qos'"):
        read_sacct(p, pool_from="qos")
    with pytest.raises(ConfigError, match="const:NAME"):
        read_sacct(p, pool_from="const:")


# --------------------------------------------------------------------------- bad input

@pytest.mark.parametrize("field", ["Submit", "Start", "End", "State", "Partition"])
def test_missing_required_field_is_named(tmp_path, field):
    keep = [i for i, f in enumerate(GRAHAM_FIELDS) if f != field]
    f, r = _shuffled(GRAHAM_FIELDS, GRAHAM_ROWS, keep)
    p = export(tmp_path / "m.txt", f, r)
    with pytest.raises(TraceError, match=rf"m.txt: the sacct export lacks field\(s\) {field}"):
        read_sacct(p)


def test_missing_tres_and_id_fields_are_named(tmp_path):
    for drop, name in (("ReqTRES", "ReqTRES or AllocTRES"), ("JobIDRaw", None)):
        keep = [i for i, f in enumerate(GRAHAM_FIELDS) if f != drop]
        f, r = _shuffled(GRAHAM_FIELDS, GRAHAM_ROWS, keep)
        p = export(tmp_path / f"m{drop}.txt", f, r)
        if name is None:  # still read as a sacct export, which names the id it lacks
            assert detect_format(p) == "sacct"
            with pytest.raises(TraceError, match="lacks field\\(s\\) JobID or JobIDRaw"):
                read_sacct(p)
        else:
            with pytest.raises(TraceError, match=f"lacks field\\(s\\) {name}"):
                read_sacct(p)


@pytest.mark.parametrize(("field", "value", "message"), [
    ("TimelimitRaw", "abc", "'abc' is not a time limit"),
    ("TimelimitRaw", "0", "time limit '0' is not > 0"),
    ("Timelimit", "1:75:00", "'1:75:00' is not a time limit"),
    ("ElapsedRaw", "-5", "'-5' is not a number of seconds"),
    ("ElapsedRaw", "1e400", "is not a number of seconds"),
    ("Elapsed", "ten", "'ten' is not a Slurm duration"),
    ("Submit", "2021-13-01T00:00:00", "is not a date-time"),
    ("Submit", "", "value is missing"),
    ("Start", "yesterday", "is not a date-time"),
    ("End", "2024-03-01T10:00:00", "is before the job's Start"),
    ("AllocTRES", "gres/gpu=x", "GPU count that is not a whole number"),
    ("AllocTRES", "gres/gpu:a100=1.5", "GPU count that is not a whole number"),
    ("JobID", "", "value is missing"),
])
def test_bad_cell_names_file_row_and_column(tmp_path, field, value, message):
    rows = [full_row("1", "1"), full_row("2", "2"), full_row("3", "3")]
    rows[1][FULL_FIELDS.index(field)] = value
    if field == "End":  # the duration comes from End - Start only without Elapsed(Raw)
        rows[1][FULL_FIELDS.index("ElapsedRaw")] = rows[1][FULL_FIELDS.index("Elapsed")] = ""
    if field == "Elapsed":
        rows[1][FULL_FIELDS.index("ElapsedRaw")] = ""
    if field == "Timelimit":
        rows[1][FULL_FIELDS.index("TimelimitRaw")] = ""
    p = export(tmp_path / "bad.txt", FULL_FIELDS, rows)
    with pytest.raises(TraceError) as exc:
        read_sacct(p)
    text = str(exc.value)
    assert text.startswith(f"{p}: row 2, column '{field}': ") and message in text, text
    jobs, report = read_sacct(p, on_bad_rows="drop")
    assert jobs["job_id"].to_list() == ["1", "3"] and report.rows_dropped == 1


def test_duplicate_job_ids(tmp_path):
    p = export(tmp_path / "dup.txt", FULL_FIELDS,
               [full_row("1", "1"), full_row("1", "1", end="2024-03-01T11:06:00")])
    with pytest.raises(TraceError, match=r"dup.txt: row 2, column 'JobID': duplicate job id"):
        read_sacct(p)
    # the same line twice is an exact duplicate, as in every reader (issue 36)
    same = export(tmp_path / "same.txt", FULL_FIELDS, [full_row("1", "1"), full_row("1", "1")])
    with pytest.raises(TraceError, match=r"same.txt: row 2: exact duplicate of row 1"):
        read_sacct(same)
    jobs, report = read_sacct(same, on_bad_rows="drop")
    assert jobs.height == 1 and report.dropped == {"exact_duplicate": 1}


def test_a_pipe_inside_a_job_name_is_read_whole(tmp_path):
    # sacct does not escape its delimiter: with one free-text field (JobName) in the header,
    # the fields before it are read from the left and those after it from the right
    rows = [full_row("1", "1"), full_row("2", "2", name="a|b||c"), full_row("3", "3")]
    jobs, report = read_sacct(export(tmp_path / "r.txt", FULL_FIELDS, rows))
    assert jobs["job_id"].to_list() == ["1", "2", "3"]
    assert jobs["tag"].to_list() == ["train", "a|b||c", "train"]
    assert jobs["num_gpus"].to_list() == [1, 1, 1] and jobs["user"].to_list() == ["alice"] * 3
    assert any("1 row(s) with '|' inside their JobName read whole (first: row 2)" in n
               for n in report.notes)
    # -p's trailing '|' too
    piped = export(tmp_path / "p.txt", FULL_FIELDS, rows, trailing=True)
    assert read_sacct(piped)[0]["tag"].to_list() == ["train", "a|b||c", "train"]


def test_a_pipe_in_one_of_two_free_text_fields_names_the_row(tmp_path):
    fields = [*FULL_FIELDS, "Comment"]
    rows = [[*full_row("1", "1"), "x"], [*full_row("2", "2", name="a|b"), "y"],
            [*full_row("3", "3"), "z"]]
    p = export(tmp_path / "r.txt", fields, rows)
    with pytest.raises(TraceError, match=r"r.txt: row 2: 19 fields, but the header has 18"):
        read_sacct(p)
    jobs, report = read_sacct(p, on_bad_rows="drop")
    assert jobs["job_id"].to_list() == ["1", "3"]
    assert report.dropped == {"wrong_field_count": 1} and report.rows_read == 3
    # two lines run together (a date-time inside the would-be name) are not rejoined
    glued = export(tmp_path / "g.txt", FULL_FIELDS,
                   [full_row("1", "1"), full_row("2", "2") + full_row("3", "3")[1:]])
    with pytest.raises(TraceError, match=r"g.txt: row 2: 33 fields, but the header has 17"):
        read_sacct(glued)
    short = export(tmp_path / "s.txt", FULL_FIELDS, [full_row("1", "1"), full_row("2", "2")[:5]])
    with pytest.raises(TraceError, match=r"s.txt: row 2: 5 fields, but the header has 17"):
        read_sacct(short)


def test_not_utf8_and_broken_gzip(tmp_path):
    p = tmp_path / "l.txt"
    p.write_bytes("|".join(GRAHAM_FIELDS).encode() + b"\n" + "|".join(GRAHAM_ROWS[1])
                  .replace("2166", "caf\u00e9").encode("latin-1") + b"\n")
    with pytest.raises(TraceError, match="l.txt: not UTF-8"):
        read_sacct(p)
    g = tmp_path / "b.txt.gz"
    g.write_bytes(gzip.compress(("|".join(GRAHAM_FIELDS) + "\n").encode() * 50)[:40])
    with pytest.raises(TraceError, match="b.txt.gz"):
        read_trace(g, "sacct")


def test_options_that_do_not_apply_are_refused(tmp_path):
    p = graham_like(tmp_path)
    with pytest.raises(ConfigError, match="sacct export.*--map"):
        read_trace(p, mapping={"pool": "Account"})
    with pytest.raises(ConfigError, match="--time-unit ms"):
        read_trace(p, time_unit="ms")
    jobs, _ = read_trace(p, "sacct")
    assert jobs.height == 2


def test_a_folder_or_missing_file_is_a_clear_error(tmp_path):
    with pytest.raises(TraceError, match="not a file"):
        read_trace(tmp_path, "sacct")
    with pytest.raises(TraceError, match="nope.txt: no such file"):
        read_sacct(tmp_path / "nope.txt")


def test_other_formats_are_not_sacct(tmp_path):
    csv = tmp_path / "t.csv"
    csv.write_text("job_id,pool,submit_time,duration,num_gpus\n1,a,0,5,1\n")
    assert detect_format(csv) == "generic" and not is_sacct(csv)
    pipes = tmp_path / "x.txt"
    pipes.write_text("a|b|c\n1|2|3\n")
    assert not is_sacct(pipes)
    for header in ("JobID|a|b", "Submit|State|x"):  # too few sacct fields to be one
        pipes.write_text(header + "\n1|2|3\n")
        assert not is_sacct(pipes)
    assert not is_sacct(tmp_path)


# --------------------------------------------------------------------------- the real trace

@pytest.mark.skipif(not GRAHAM.exists(), reason="../shared/traces/graham is not here")
def test_real_graham_counts():
    jobs, report = read_trace(GRAHAM)
    check_jobs(jobs)
    # the README: 133,025 jobs, 12,591 on GPUs, every one of which ran (no exclusion but CPU)
    assert report.rows_read == 133_025
    assert report.left_out == {"cpu_only": 120_434, "cancelled_pending": 0,
                               "never_started": 0, "unfinished": 0, "zero_second_run": 0}
    assert report.rows_kept == jobs.height == 12_591 and report.rows_dropped == 0
    assert jobs["pool"].n_unique() == 15 and jobs["user"].n_unique() == 123
    assert jobs["time_limit"].null_count() == 0
    assert report.first_submit == "2021-05-01 00:18:08"  # the first arrival: its Eligible
    # 6,446 jobs became eligible after their submission, 1,351 of them an hour or more later
    assert any(n.startswith("arrival: 6,446 job(s) became eligible") and "1,351 of them" in n
               for n in report.notes)
    hold = jobs["hold_time"]
    assert hold.null_count() == 0 and (hold > 0).sum() == 6_446 and (hold >= 3600).sum() == 1_351
    # one job ran past its limit by more than Slurm's grace (the schema's comment)
    assert len(report.warnings) == 1 and report.warnings[0].startswith("1 job(s) ran longer")
    assert jobs["num_gpus"].max() == 16
