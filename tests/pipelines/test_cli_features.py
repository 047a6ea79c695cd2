"""`sia features` end to end on small data (and once on the real Philly trace)."""

from __future__ import annotations

import polars as pl
import pytest
from sia.features.table9 import FEATURE_COLUMNS, KEY_COLUMNS, LABEL_COLUMNS, build_features
from sia.pipelines.cli import main
from sia.pipelines.inputs import fcfs_schedule, load_workload, parse_windows


def test_synthetic_replays_fcfs_and_writes_the_table(tmp_path, capsys):
    out = tmp_path / "f.parquet"
    code = main(["features", "--synthetic", "base", "--days", "1", "--seed", "3",
                 "--windows", "5,60", "--out", str(out)])
    text = capsys.readouterr().out
    assert code == 0, text
    assert "schedule: FCFS replay" in text
    assert "k =    5 min: positive rate" in text and "k =   60 min" in text and "720" not in text
    table = pl.read_parquet(out)
    assert table.columns[:3] == KEY_COLUMNS
    assert set(FEATURE_COLUMNS + LABEL_COLUMNS) <= set(table.columns)
    assert f"features: {table.height:,} rows" in text
    # What was written is the table of the FCFS schedule.
    wl = load_workload(synthetic="base", days=1, seed=3)
    want = build_features(fcfs_schedule(wl.jobs, wl.pools), windows_min=(5, 60),
                          pools=wl.pools["pool"].to_list())
    assert table.equals(want)
    rate5 = table.filter(pl.col("k_min") == 5)["label_arrival"].mean()
    assert f"positive rate (a job arrives in the next k) {rate5:.3f}" in text


def test_trace_with_its_own_schedule(tmp_path, capsys):
    csv = tmp_path / "own.csv"
    pl.DataFrame({
        "pool": ["a", "a", "b"], "submit_time": [0.0, 100.0, 50.0], "duration": [60.0] * 3,
        "num_gpus": [1, 1, 2], "start_time": [0.0, 400.0, 60.0], "end_time": [60.0, 460.0, 120.0],
    }).write_csv(csv)
    out = tmp_path / "own.parquet"
    assert main(["features", str(csv), "--grid-s", "100", "--out", str(out)]) == 0
    assert "the trace's own start_time/end_time" in capsys.readouterr().out
    t = pl.read_parquet(out).filter((pl.col("pool") == "a") & (pl.col("k_min") == 5))
    # job 2 of pool a waits from 100 to 400 (its own schedule, not a replay's)
    assert t.filter(pl.col("t") == 100.0)["pending_jobs"].item() == 1


def test_bad_options_are_one_line_errors(tmp_path, capsys):
    assert main(["features", "--synthetic", "base", "--windows", "5,x",
                 "--out", str(tmp_path / "a.parquet")]) == 2
    assert "--windows" in capsys.readouterr().err
    assert main(["features", "--synthetic", "base", "--out", str(tmp_path / "a.csv")]) == 2
    assert ".parquet" in capsys.readouterr().err
    csv = tmp_path / "bad.csv"
    pl.DataFrame({"pool": ["a"], "submit_time": [0.0], "duration": [1.0], "num_gpus": [1],
                  "start_time": ["soon"], "end_time": [1.0]}).write_csv(csv)
    assert main(["features", str(csv), "--out", str(tmp_path / "b.parquet")]) == 2
    err = capsys.readouterr().err
    assert "'start_time'" in err and "'soon'" in err and err.count("\n") == 1


def test_parse_windows():
    assert parse_windows("5, 60,720") == (5, 60, 720)
    with pytest.raises(Exception, match="positive"):
        parse_windows("0")


@pytest.mark.slow
def test_philly_end_to_end(philly_path, tmp_path, capsys):
    out = tmp_path / "philly.parquet"
    assert main(["features", str(philly_path), "--clean", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    table = pl.read_parquet(out, columns=["pool", "k_min", "label_arrival"])
    assert table["pool"].n_unique() == 15
    sizes = table.group_by("pool", "k_min").len()["len"]
    assert sizes.n_unique() == 1 and sizes.len() == 45  # the whole grid for every pool and window
    assert 1_350_000 < table.height < 1_450_000  # about 109 days on a 5-minute grid
    assert "k =  720 min" in text
