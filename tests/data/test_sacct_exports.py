"""The sacct reader on exports from other sites and Slurm versions than Graham's: layouts
(no header, concatenated exports, other delimiters, fixed-width tables, BOM, CRLF), old GRES
fields, requeued jobs listed with --duplicates, heterogeneous jobs, time values and states."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import TraceError
from sia.data.readers import detect_format, read_trace
from sia.data.sacct import is_sacct, read_sacct

FIELDS = ["JobID", "User", "Partition", "JobName", "Submit", "Start", "End", "ElapsedRaw",
          "Timelimit", "AllocTRES", "State"]


def row(jid: str, *, submit="2024-03-01T10:00:00", start="2024-03-01T10:05:00",
        end="2024-03-01T11:05:00", elapsed_raw="3600", limit="02:00:00",
        alloc="billing=1,cpu=4,gres/gpu=1,node=1", state="COMPLETED", user="alice",
        partition="gpu", name="train") -> list[str]:
    return [jid, user, partition, name, submit, start, end, elapsed_raw, limit, alloc, state]


def write(path: Path, lines: list[list[str]], *, fields=FIELDS, delim="|", end="\n",
          prefix="", trailing="") -> Path:
    text = prefix + end.join(delim.join(r) + trailing for r in [fields, *lines]) + end
    path.write_text(text, newline="")
    return path


# --------------------------------------------------------------------------- layouts

def test_no_header_is_a_clear_error_naming_the_file(tmp_path):
    p = tmp_path / "nohead.txt"
    p.write_text("\n".join("|".join(r) for r in [row("7"), row("8")]) + "\n")
    # detected as sacct (not handed to the generic CSV reader, which would blame a column)
    assert is_sacct(p) and detect_format(p) == "sacct"
    for call in (lambda: read_trace(p), lambda: read_sacct(p)):
        with pytest.raises(TraceError, match=r"nohead.txt: the first line is a job .*no header "
                                             r"\(sacct -n / --noheader\).*without -n"):
            call()


def test_repeated_header_of_concatenated_exports_is_skipped_and_noted(tmp_path):
    one = write(tmp_path / "one.txt", [row("1"), row("2")])
    both = write(tmp_path / "both.txt", [row("1"), FIELDS, row("2")])
    ref, _ = read_sacct(one)
    jobs, report = read_sacct(both)
    assert jobs["job_id"].to_list() == ["1", "2"]
    assert jobs["job_id"].to_list() == ref["job_id"].to_list()
    assert jobs["num_gpus"].to_list() == [1, 1]
    # not a row, not a CPU-only job: skipped like a blank line, and said so
    assert report.rows_read == 2 and report.left_out["cpu_only"] == 0
    assert any("1 line(s) repeating the header skipped" in n for n in report.notes)
    # files concatenated with cat, each with its BOM and CRLF line ends
    text = "".join("\ufeff" + "\r\n".join("|".join(r) for r in [FIELDS, line]) + "\r\n"
                   for line in (row("1"), row("2")))
    (tmp_path / "cat.txt").write_text(text, newline="")
    jobs, report = read_sacct(tmp_path / "cat.txt")
    assert jobs["job_id"].to_list() == ["1", "2"] and report.rows_read == 2
    # with -p's trailing '|' on every line too
    piped = write(tmp_path / "piped.txt", [row("1"), FIELDS, row("2")], trailing="|")
    assert read_sacct(piped)[0]["job_id"].to_list() == ["1", "2"]


def test_a_different_second_header_names_its_row(tmp_path):
    other = list(reversed(FIELDS))
    p = write(tmp_path / "mixed.txt", [row("1"), other, list(reversed(row("2")))])
    with pytest.raises(TraceError, match=r"mixed.txt: row 2: a header line that differs"):
        read_sacct(p)
    fewer = write(tmp_path / "fewer.txt", [row("1"), FIELDS[:-1], row("2")[:-1]])
    with pytest.raises(TraceError, match=r"fewer.txt: row 2: a header line that differs"):
        read_sacct(fewer)


@pytest.mark.parametrize("delim", [";", "\t"])
def test_other_delimiters_read_the_same(tmp_path, delim):
    lines = [row("1"), row("2", alloc="cpu=2,gres/gpu:a100=2", user="bob")]
    ref, _ = read_sacct(write(tmp_path / "pipe.txt", lines))
    p = write(tmp_path / "other.txt", lines, delim=delim)
    assert detect_format(p) == "sacct"
    jobs, _ = read_trace(p)
    assert jobs.equals(ref)
    assert jobs["num_gpus"].to_list() == [1, 2]


def test_comma_separated_stays_generic(tmp_path):
    # a ',' delimiter would also split TRES strings: such a file is left to the CSV reader
    p = tmp_path / "c.csv"
    p.write_text("JobID,Submit,State,Partition\n1,2024-03-01T10:00:00,COMPLETED,gpu\n")
    assert not is_sacct(p) and detect_format(p) == "generic"


def test_fixed_width_table_is_refused_by_name(tmp_path):
    p = tmp_path / "plain.txt"
    p.write_text("       JobID    JobName  Partition      State\n"
                 "------------ ---------- ---------- ----------\n"
                 "123               train        gpu CANCELLED+\n")
    assert detect_format(p) == "sacct"
    with pytest.raises(TraceError, match=r"plain.txt: sacct's fixed-width table.*--parsable2"):
        read_trace(p)


def test_bom_crlf_and_trailing_pipe_together_read_the_same(tmp_path):
    lines = [row("1"), row("2", submit="2024-03-01T10:00:30")]
    ref, _ = read_sacct(write(tmp_path / "plain.txt", lines))
    p = write(tmp_path / "win.txt", lines, end="\r\n", prefix="\ufeff", trailing="|")
    assert is_sacct(p)
    jobs, report = read_trace(p)
    assert jobs.equals(ref)
    gz = tmp_path / "win.txt.gz"
    gz.write_bytes(gzip.compress(p.read_bytes()))
    assert read_trace(gz)[0].equals(ref)


# --------------------------------------------------------------------------- GPUs

OLD = ["JobID", "User", "Partition", "Submit", "Start", "End", "ElapsedRaw", "Timelimit",
       "NNodes", "ReqGRES", "AllocGRES", "State"]


def old_row(jid: str, req: str, alloc: str, *, start="2024-03-01T10:05:00", nnodes="1",
            state="COMPLETED") -> list[str]:
    return [jid, "alice", "gpu", "2024-03-01T10:00:00", start, "2024-03-01T11:05:00",
            "3600", "02:00:00", nnodes, req, alloc, state]


def test_gres_fields_of_slurm_before_19_05(tmp_path):
    rows = [
        old_row("1", "gpu:2", "gpu:2"),
        old_row("2", "gpu:tesla:2", "gpu:tesla:2(IDX:0-1)"),
        old_row("3", "gpu:4", "gpu:4(IDX:0,2-3)"),  # a ',' inside the index list
        old_row("4", "gpu:tesla:1,gpu:k80:2", "gpu:tesla:1,gpu:k80:2"),  # typed: summed
        old_row("5", "gpu:2,gpu:tesla:2", "gpu:2,gpu:tesla:2"),  # the untyped total wins
        old_row("6", "gres:gpu:3", ""),  # did not run... (no start: left out below)
        old_row("7", "gpu:8", "gpu:8", nnodes="2"),  # a total over the job's nodes
        old_row("8", "gpu:(null):2", "gpu:(null):2"),
        old_row("9", "mic:1", "mic:1"),  # no GPU
        old_row("10", "", ""),  # nothing recorded
        old_row("11", "gpu", "gpu"),  # --gres=gpu: one
        old_row("12", "gpu:3", "", state="FAILED"),  # ran, no AllocGRES: ReqGRES
    ]
    rows[5][4] = "Unknown"
    jobs, report = read_sacct(write(tmp_path / "old.txt", rows, fields=OLD))
    got = dict(zip(jobs["job_id"], jobs["num_gpus"], strict=True))
    assert got == {"1": 2, "2": 2, "3": 4, "4": 3, "5": 2, "7": 8, "8": 2, "11": 1, "12": 3}
    assert report.left_out["cpu_only"] == 1 and report.left_out["no_tres"] == 1
    assert report.left_out["never_started"] == 1
    assert "GPUs: AllocTRES for 0 job(s), ReqTRES for 0, AllocGRES for 8, ReqGRES for 1" \
        in report.notes


def test_gres_count_that_is_not_whole_names_the_cell(tmp_path):
    p = write(tmp_path / "bad.txt", [old_row("1", "gpu:2", "gpu:2"),
                                     old_row("2", "gpu:1.5", "gpu:tesla:x")], fields=OLD)
    with pytest.raises(TraceError, match=r"bad.txt: row 2, column 'AllocGRES': 'gpu:tesla:x' "
                                         r"has a GPU count that is not a whole number"):
        read_sacct(p)


def test_gres_when_tres_do_not_track_gpus(tmp_path):
    # a cluster with TRES but no gres/gpu in AccountingStorageTRES: GPUs only in the GRES
    fields = ["JobID", "Partition", "Submit", "Start", "End", "ElapsedRaw", "ReqTRES",
              "AllocTRES", "AllocGRES", "State"]
    base = ["gpu", "2024-03-01T10:00:00", "2024-03-01T10:05:00", "2024-03-01T11:05:00", "3600"]
    rows = [["1", *base, "cpu=4,mem=8G,node=1", "cpu=4,mem=8G,node=1", "gpu:2", "COMPLETED"],
            ["2", *base, "cpu=4,gres/gpu=1", "cpu=4,gres/gpu=1", "gpu:1", "COMPLETED"],
            ["3", *base, "cpu=4,node=1", "cpu=4,node=1", "", "COMPLETED"]]
    jobs, report = read_sacct(write(tmp_path / "t.txt", rows, fields=fields))
    assert dict(zip(jobs["job_id"], jobs["num_gpus"], strict=True)) == {"1": 2, "2": 1}
    assert report.left_out["cpu_only"] == 1
    assert "GPUs: AllocTRES for 1 job(s), ReqTRES for 0, AllocGRES for 1" in report.notes


def test_tres_typed_only_and_multi_node_totals(tmp_path):
    rows = [row("1", alloc="cpu=8,gres/gpu:tesla=2,node=1"),  # typed only: no untyped total
            row("2", alloc="cpu=16,gres/gpu=8,gres/gpu:v100=8,node=2"),  # a job's total
            row("3", alloc="cpu=4,gres/gpu:a100=1,gres/gpu:v100=1,gres/gpumem=80G")]
    jobs, _ = read_sacct(write(tmp_path / "t.txt", rows))
    assert jobs["num_gpus"].to_list() == [2, 8, 2]


# --------------------------------------------------------------------------- requeued jobs

def test_duplicates_export_keeps_the_last_run_of_a_requeued_job(tmp_path):
    rows = [
        # job 5: requeued once (its submit time reset on requeue, as Slurm does)
        row("5", submit="2024-03-01T10:00:00", start="2024-03-01T10:05:00",
            end="2024-03-01T10:30:00", elapsed_raw="1500", state="REQUEUED"),
        row("5", submit="2024-03-01T10:30:00", start="2024-03-01T10:40:00",
            end="2024-03-01T11:40:00", elapsed_raw="3600", state="COMPLETED"),
        # job 6: preempted, then a node failed, then it timed out; its last run listed first
        row("6", submit="2024-03-01T12:00:00", start="2024-03-01T12:00:00",
            end="2024-03-01T14:00:00", elapsed_raw="7200", state="TIMEOUT"),
        row("6", submit="2024-03-01T10:00:00", start="2024-03-01T10:01:00",
            end="2024-03-01T10:02:00", elapsed_raw="60", state="PREEMPTED"),
        row("6", submit="2024-03-01T11:00:00", start="2024-03-01T11:01:00",
            end="2024-03-01T11:31:00", elapsed_raw="1800", state="NODE_FAIL"),
        # job 7: requeued, then cancelled while pending: the job never ran its last run
        row("7", submit="2024-03-01T10:00:00", start="2024-03-01T10:01:00",
            end="2024-03-01T10:11:00", elapsed_raw="600", state="REQUEUED"),
        row("7", submit="2024-03-01T10:11:00", start="None", end="2024-03-01T12:00:00",
            elapsed_raw="0", alloc="", state="CANCELLED by 0"),
        row("8"),
    ]
    jobs, report = read_sacct(write(tmp_path / "d.txt", rows))
    got = {j: (d, s) for j, d, s in jobs.select("job_id", "duration", "state").iter_rows()}
    assert got == {"5": (3600.0, "COMPLETED"), "6": (7200.0, "TIMEOUT"),
                   "8": (3600.0, "COMPLETED")}
    assert report.left_out["requeued_runs"] == 4
    # job 7's last run: never allocated, and this export has no ReqTRES
    assert report.left_out["no_tres"] == 1
    assert sum(report.left_out.values()) + report.rows_kept == report.rows_read == len(rows)
    assert any("4 earlier run(s) of 3 requeued job(s)" in n and "'5'" in n for n in report.notes)
    # the submit times are the last runs' (rebased to the first kept, 10:00 of job 8)
    sub = dict(zip(jobs["job_id"], jobs["submit_time"], strict=True))
    assert sub == {"5": 1800.0, "6": 7200.0, "8": 0.0}


def test_a_repeated_id_that_is_not_a_requeue_is_still_an_error(tmp_path):
    rows = [row("9", state="COMPLETED"),
            row("9", submit="2024-06-01T10:00:00", start="2024-06-01T10:05:00",
                end="2024-06-01T11:05:00")]  # an id Slurm reused, or overlapping exports
    p = write(tmp_path / "r.txt", rows)
    with pytest.raises(TraceError, match=r"r.txt: row 2, column 'JobID': duplicate job id '9', "
                                         r"whose other line is not a requeued run"):
        read_sacct(p)
    jobs, report = read_sacct(p, on_bad_rows="drop")
    assert jobs.height == 1 and report.dropped == {"duplicate_job_id": 1}


# --------------------------------------------------------------------------- times and states

def test_invalid_and_none_times_are_not_recorded(tmp_path):
    fields = [*FIELDS, "Elapsed", "TimelimitRaw"]
    rows = [
        [*row("1", limit="INVALID"), "01:00:00", ""],  # no limit recorded
        [*row("2", limit="NONE"), "01:00:00", ""],
        [*row("3", limit="INVALID"), "01:00:00", "90"],  # TimelimitRaw decides
        [*row("4", limit="1-00:00:00", elapsed_raw=""), "INVALID", "4294967295"],  # INFINITE
        [*row("5", limit="Partition_Limit"), "01:00:00", "4294967294"],  # NO_VAL
    ]
    jobs, report = read_sacct(write(tmp_path / "t.txt", rows, fields=fields))
    limits = dict(zip(jobs["job_id"], jobs["time_limit"], strict=True))
    assert limits == {"1": None, "2": None, "3": 5400.0, "4": None, "5": None}
    # job 4: Elapsed INVALID and no ElapsedRaw: End - Start
    assert jobs["duration"].to_list() == [3600.0] * 5
    assert any("1 job(s) with a limit, 2 UNLIMITED or Partition_Limit (no limit), 2 not "
               "recorded" in n for n in report.notes)
    assert any("End - Start for 1" in n for n in report.notes)


def test_epoch_seconds_and_a_space_between_date_and_time(tmp_path):
    # SLURM_TIME_FORMAT=%s prints Unix seconds (1709287200 is 2024-03-01T10:00:00); "%F %T"
    # puts a space between date and time
    epoch = [row("1", submit="1709287200", start="1709287500", end="1709291100"),
             row("2", submit="1709287230", start="1709287500", end="None", state="RUNNING")]
    spaced = [row("1", submit="2024-03-01 10:00:00", start="2024-03-01 10:05:00",
                  end="2024-03-01 11:05:00"),
              row("2", submit="2024-03-01 10:00:30", start="2024-03-01 10:05:00",
                  end="Unknown", state="RUNNING")]
    for name, rows in (("e.txt", epoch), ("s.txt", spaced)):
        jobs, report = read_sacct(write(tmp_path / name, rows))
        assert jobs["submit_time"].to_list() == [0.0] and jobs["duration"].to_list() == [3600.0]
        assert report.first_submit == "2024-03-01 10:00:00"
        assert report.left_out["unfinished"] == 1


def test_relative_time_format_names_the_cell_and_the_fix(tmp_path):
    p = write(tmp_path / "rel.txt", [row("1", submit="Tomorr 10:00")])
    with pytest.raises(TraceError, match=r"rel.txt: row 1, column 'Submit': 'Tomorr 10:00' is "
                                         r"not a date-time.*SLURM_TIME_FORMAT=standard"):
        read_sacct(p)


def test_wall_clock_end_before_start_across_a_dst_change_uses_elapsed_raw(tmp_path):
    # 2024-11-03 01:50 EDT to 01:10 EST: 20 minutes ran, the wall clock went back 40
    rows = [row("1", submit="2024-11-03T01:40:00", start="2024-11-03T01:50:00",
                end="2024-11-03T01:10:00", elapsed_raw="1200"),
            # submitted after it started by the clock (skew between hosts): kept as written
            row("2", submit="2024-11-03T01:51:00", start="2024-11-03T01:50:58",
                end="2024-11-03T02:00:00", elapsed_raw="542")]
    jobs, report = read_sacct(write(tmp_path / "dst.txt", rows))
    assert jobs["duration"].to_list() == [1200.0, 542.0]
    assert jobs["submit_time"].to_list() == [0.0, 660.0]
    # without ElapsedRaw, End - Start is the only duration: a clear error on the row
    fields = [f for f in FIELDS if f != "ElapsedRaw"]
    cut = [[c for f, c in zip(FIELDS, r, strict=True) if f != "ElapsedRaw"] for r in rows]
    p = write(tmp_path / "nodur.txt", cut, fields=fields)
    with pytest.raises(TraceError, match=r"nodur.txt: row 1, column 'End': .* before the job"):
        read_sacct(p)


def test_end_states_of_other_sites(tmp_path):
    states = ["PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT", "DEADLINE", "FAILED",
              "CANCELLED by 0", "CANCELLED by 51234", "completed"]
    rows = [row(str(i), state=s) for i, s in enumerate(states)]
    rows += [
        row("90", state="BOOT_FAIL", end="2024-03-01T10:05:00", elapsed_raw="0"),  # ran 0 s
        row("91", state="RUNNING", end="Unknown"),
        row("92", state="REQUEUED", start="None", end="Unknown", alloc=""),  # pending again
        row("93", state="SUSPENDED", end="Unknown"),
        row("94", state="PENDING", start="Unknown", end="Unknown", alloc=""),
    ]
    jobs, report = read_sacct(write(tmp_path / "s.txt", rows))
    assert jobs["state"].to_list() == ["PREEMPTED", "NODE_FAIL", "OUT_OF_MEMORY", "TIMEOUT",
                                       "DEADLINE", "FAILED", "CANCELLED", "CANCELLED",
                                       "COMPLETED"]
    assert report.left_out["zero_second_run"] == 1
    assert report.left_out["unfinished"] == 2
    assert report.left_out["no_tres"] == 2  # never allocated, and no ReqTRES in the export
    assert sum(report.left_out.values()) + report.rows_kept == report.rows_read == len(rows)


# --------------------------------------------------------------------------- job ids

def test_heterogeneous_job_components_are_one_gang(tmp_path):
    rows = [
        row("40+0", alloc="cpu=4,gres/gpu=2", elapsed_raw="3600", limit="02:00:00"),
        row("40+0.batch", alloc="cpu=4,gres/gpu=2", name="batch"),
        row("40+1", submit="2024-03-01T10:00:02", alloc="cpu=8,gres/gpu:a100=4",
            elapsed_raw="3500", limit="03:00:00", partition="gpu-big"),
        row("40+1.0", alloc="cpu=8,gres/gpu:a100=4", name="python"),
        row("40+2", alloc="cpu=32,mem=100G"),  # a CPU component
        row("41", submit="2024-03-01T10:00:05"),
    ]
    jobs, report = read_sacct(write(tmp_path / "het.txt", rows))
    assert jobs["job_id"].to_list() == ["40+0", "41"]
    het = jobs.row(0, named=True)
    assert (het["num_gpus"], het["duration"], het["time_limit"], het["pool"]) == \
        (6, 3600.0, 3 * 3600.0, "gpu")
    assert report.left_out["het_components"] == 1 and report.left_out["cpu_only"] == 1
    assert report.left_out["job_steps"] == 2
    assert sum(report.left_out.values()) + report.rows_kept == report.rows_read == len(rows)
    assert any("1 component line(s) of 1 heterogeneous job(s)" in n for n in report.notes)


def test_array_ids_and_their_steps(tmp_path):
    rows = [row("20_1"), row("20_1.batch", name="batch"), row("20_1.extern", name="extern"),
            row("20_2", submit="2024-03-01T10:00:01"),
            row("20_[3-5%2]", start="Unknown", end="Unknown", elapsed_raw="0",
                state="PENDING")]
    jobs, report = read_sacct(write(tmp_path / "a.txt", rows))
    assert jobs["job_id"].to_list() == ["20_1", "20_2"]
    # the pending record was never allocated, and this export has no ReqTRES
    assert report.left_out["job_steps"] == 2 and report.left_out["no_tres"] == 1


def test_an_export_of_several_clusters_is_refused_by_name(tmp_path):
    fields = [*FIELDS, "Cluster"]
    one = write(tmp_path / "one.txt", [[*row("1"), "alpha"], [*row("2"), "alpha"]],
                fields=fields)
    assert read_sacct(one)[0].height == 2
    two = write(tmp_path / "two.txt", [[*row("1"), "alpha"], [*row("1"), "beta"]],
                fields=fields)
    with pytest.raises(TraceError, match=r"two.txt: jobs of 2 clusters \('alpha', 'beta'; "
                                         r"sacct -M / -L\).*sacct -M NAME"):
        read_sacct(two)


def test_no_gpu_anywhere_warns_how_gpus_may_be_missing(tmp_path):
    rows = [row("1", alloc="cpu=4,mem=1G,node=1"), row("2", alloc="cpu=4,node=1")]
    jobs, report = read_sacct(write(tmp_path / "cpu.txt", rows))
    assert jobs.height == 0 and report.left_out["cpu_only"] == 2
    assert len(report.warnings) == 1
    assert "no job names a GPU in AllocTRES (2 CPU-only)" in report.warnings[0]
    assert "AllocGRES" in report.warnings[0]
    # one GPU job: no such warning
    _, report = read_sacct(write(tmp_path / "gpu.txt", [*rows, row("3")]))
    assert report.warnings == []


def test_an_allocation_without_the_gpus_it_requested_takes_the_request(tmp_path):
    fields = [*FIELDS, "ReqTRES"]
    rows = [[*row("1", alloc="cpu=4,mem=8G,node=1"), "cpu=4,gres/gpu=2,node=1"],  # ran: 2
            [*row("2", alloc="cpu=4,gres/gpu=1"), "cpu=4,gres/gpu=2"],  # allocated 1: 1
            [*row("3", alloc="cpu=4,node=1"), "cpu=4,node=1"]]  # CPU-only
    jobs, report = read_sacct(write(tmp_path / "a.txt", rows, fields=fields))
    assert dict(zip(jobs["job_id"], jobs["num_gpus"], strict=True)) == {"1": 2, "2": 1}
    assert report.left_out["cpu_only"] == 1
    assert "GPUs: AllocTRES for 1 job(s), ReqTRES for 1" in report.notes


def test_one_epoch_cell_among_date_times_is_not_a_time(tmp_path):
    p = write(tmp_path / "mix.txt", [row("1"), row("2", submit="1709287200")])
    with pytest.raises(TraceError, match=r"mix.txt: row 2, column 'Submit': '1709287200' is "
                                         r"not a date-time"):
        read_sacct(p)


# --------------------------------------------------------------------------- property

_layout = st.fixed_dictionaries({
    "delim": st.sampled_from(["|", ";", "\t"]),
    "end": st.sampled_from(["\n", "\r\n"]),
    "bom": st.booleans(),
    "trailing": st.booleans(),
    "headers_at": st.lists(st.integers(0, 8), max_size=3),
})


@settings(max_examples=40, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(names=st.lists(st.sampled_from(["train", "a|b", "x||y|", "eval"]), min_size=1,
                      max_size=8),
       layout=_layout)
def test_property_layouts_do_not_change_the_jobs(tmp_path_factory, names, layout):
    """Any delimiter, line end, BOM, -p's trailing delimiter and repeated headers read the
    same jobs as a plain -P export; a '|' inside the job name (the one free-text field) is
    read whole."""
    tmp = tmp_path_factory.mktemp("layout")
    rows = [row(str(i), name=n, submit=f"2024-03-01T10:0{i}:00") for i, n in enumerate(names)]
    plain = [row(str(i), name=n.replace("|", "/"), submit=f"2024-03-01T10:0{i}:00")
             for i, n in enumerate(names)]
    ref, _ = read_sacct(write(tmp / "ref.txt", plain))
    lines = list(rows)
    for at in sorted(layout["headers_at"], reverse=True):
        lines.insert(min(at, len(lines)), FIELDS)
    delim = layout["delim"]
    if delim != "|":  # a job name holding the other delimiter: the '|' stays a character
        lines = [[c.replace(delim, "?") for c in r] for r in lines]
    p = write(tmp / "x.txt", lines, delim=delim, end=layout["end"],
              prefix="\ufeff" if layout["bom"] else "", trailing=delim if layout["trailing"]
              else "")
    jobs, report = read_sacct(p)
    assert jobs.drop("tag").equals(ref.drop("tag"))
    assert jobs["tag"].to_list() == names
    assert report.rows_read == len(names)


def test_revoked_federated_siblings_are_left_out_and_counted(tmp_path):
    rows = [row("67108865", state="REVOKED", start="None", end="2024-03-01T10:00:01",
                elapsed_raw="0", alloc=""),
            row("67108865")]  # the sibling that ran here
    jobs, report = read_sacct(write(tmp_path / "f.txt", rows))
    assert jobs["job_id"].to_list() == ["67108865"] and jobs["duration"].to_list() == [3600.0]
    assert report.left_out["revoked"] == 1
    assert any("1 REVOKED line(s) left out as revoked" in n for n in report.notes)
