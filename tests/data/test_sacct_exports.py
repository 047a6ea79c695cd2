"""The sacct reader on exports from other sites and Slurm versions than Graham's: layouts
(no header, concatenated exports, other delimiters, fixed-width tables, BOM, CRLF), old GRES
fields, requeued jobs listed with --duplicates, heterogeneous jobs, time values and states."""

from __future__ import annotations

import gzip
from pathlib import Path

import pytest
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
