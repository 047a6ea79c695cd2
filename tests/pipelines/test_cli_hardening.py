"""Issue 36 end to end: `sia ingest`, `sia features` and `sia generate` refuse what cannot be
right with one line naming the fix, and accept it knowingly with a warning in the report."""

from __future__ import annotations

import json

import polars as pl
from sia.pipelines.cli import main

YEAR_S = 365.25 * 86400


def _ms_trace(path, n=300):
    """A trace in milliseconds: jobs every ~4 hours for ~50 days, durations of minutes (ms)."""
    rows = ["pool,submit_time,duration,num_gpus"]
    rows += [f"p{i % 3},{1_600_000_000_000 + i * 14_400_000},{600_000 + i * 1000},1"
             for i in range(n)]
    path.write_text("\n".join(rows) + "\n")
    return path


def _one_line_error(err: str) -> str:
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    return lines[0]


def test_a_trace_in_ms_read_as_seconds_is_refused_with_the_unit(tmp_path, capsys):
    trace = _ms_trace(tmp_path / "ms.csv")
    assert main(["ingest", str(trace), "--out", str(tmp_path / "o")]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "ms.csv: the submissions span 136 years" in line and "--time-unit ms" in line
    assert not (tmp_path / "o" / "jobs.parquet").exists()
    # the unit it suggests reads it
    assert main(["ingest", str(trace), "--time-unit", "ms", "--out", str(tmp_path / "ok")]) == 0
    assert "span: 49.83 days" in capsys.readouterr().out
    # knowingly: kept, with a warning in the report and on screen
    assert main(["ingest", str(trace), "--allow-implausible", "--out", str(tmp_path / "k")]) == 0
    out = capsys.readouterr().out
    warn = "times: the submissions span 136 years (more than 20 years); kept as they are"
    assert warn in out
    assert any(w.startswith(warn) for w in
               json.loads((tmp_path / "k" / "report.json").read_text())["warnings"])
    # the folder it wrote reads in every command, with the warning
    assert main(["features", str(tmp_path / "k"), "--grid-s", "86400", "--windows", "720",
                 "--out", str(tmp_path / "f.parquet")]) == 0


def test_features_estimates_its_size_before_any_work(tmp_path, capsys):
    trace = _ms_trace(tmp_path / "ms.csv")
    folder = tmp_path / "ok"
    assert main(["ingest", str(trace), "--time-unit", "ms", "--out", str(folder)]) == 0
    capsys.readouterr()
    out = tmp_path / "f.parquet"
    assert main(["features", str(folder), "--grid-s", "1e-6", "--out", str(out)]) == 2
    line = _one_line_error(capsys.readouterr().err)
    assert "--grid-s 1e-06: the feature table would have" in line and "--max-rows" in line
    assert not out.exists()
    # the limit is an option: 3 pools x 50 days at 1 h x 1 window = 3,591 rows
    args = ["features", str(folder), "--grid-s", "3600", "--windows", "60", "--out", str(out)]
    assert main([*args, "--max-rows", "3000"]) == 2
    assert "more than --max-rows 3,000" in capsys.readouterr().err
    assert main([*args, "--max-rows", "4000"]) == 0
    assert pl.read_parquet(out).height == 3 * 1197  # floor(4,305,600 s / 3,600) + 1 times
    assert main([*args, "--max-rows", "0"]) == 2
    assert "--max-rows must be a whole number >= 1" in capsys.readouterr().err


def test_generate_and_synthetic_features_refuse_a_billion_days(tmp_path, capsys):
    for argv in (["generate", "--days", "1e9", "--out", str(tmp_path / "g")],
                 ["generate", "--regions", "--days", "1e9", "--out", str(tmp_path / "g")],
                 ["features", "--synthetic", "base", "--days", "1e9",
                  "--out", str(tmp_path / "f.parquet")]):
        assert main(argv) == 2, argv
        line = _one_line_error(capsys.readouterr().err)
        assert "--days 1e+09:" in line and "--max-jobs" in line
    assert main(["generate", "--days", "1", "--max-jobs", "10", "--out", str(tmp_path / "g")]) == 2
    assert "more than the limit of 10 (--max-jobs)" in capsys.readouterr().err
    assert main(["generate", "--days", "1", "--max-jobs", "1000", "--out", str(tmp_path / "g")]) == 0
