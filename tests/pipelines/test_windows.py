"""`sia evaluate --windows`: one sweep per replay window, side by side and pooled.

The tiny synthetic config (3 days, 2 experiments of 3 pools) replayed on days 0-1.5 and
1.5-end: each window's rows must be its own sweep's aggregate, the same as a plain
`sia evaluate` of that window; the pooled rows are checked against the windows' rows by hand
(jobs add up, minutes add up, the share of jobs slowed is over jobs, the worst window is the
larger share).
"""

from __future__ import annotations

import polars as pl
import pytest
import yaml
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.studies.windows import POOLED, Window, parse_windows

CFG = {"name": "tinyw", "seed": 3, "trace": {"synthetic": "base", "days": 3},
       "warmup_days": 0.5, "experiments": 2, "pools_per_experiment": 3,
       "quotas": "from_load", "load_range": [0.6, 1.1], "policies": ["fcfs", "maxmin"]}


def test_parse_windows():
    assert parse_windows("24:38, 31:45,38:end") == [Window(24, 38), Window(31, 45),
                                                     Window(38, None)]
    w = Window(38.5, None)
    assert (w.label, w.dirname) == ("days 38.5-end", "days-38.5-end")
    assert w.overrides() == ["replay.start_day=38.5", "replay.end_day=null"]
    assert Window(0, 14).overrides() == ["replay.start_day=0", "replay.end_day=14"]


@pytest.mark.parametrize(("text", "words"), [
    ("24", "'24': expected START:END"),
    ("24:x", "'24:x': expected START:END"),
    ("-1:5", "'-1:5': expected START:END"),
    ("end:5", "'end:5': expected START:END"),
    ("24:38,", "'': expected START:END"),
    ("38:24", "'38:24': the end (24) must be after the start (38)"),
    ("5:5", "'5:5': the end (5) must be after the start (5)"),
    ("1:2,1:2", "'1:2': the window is given twice"),
])
def test_bad_windows_name_the_option_and_the_item(text, words):
    with pytest.raises(ConfigError, match="--windows " + words.replace("(", r"\(")
                       .replace(")", r"\)")):
        parse_windows(text)


def run(tmp_path, *args) -> int:
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(CFG))
    return main(["evaluate", str(path), "--workers", "1", "--no-mlflow", *args])


def test_windows_side_by_side_and_pooled(tmp_path, capsys):
    out = tmp_path / "w"
    assert run(tmp_path, "--out", str(out), "--windows", "0:1.5,1.5:end") == 0
    text = capsys.readouterr().out
    assert "window days 0-1.5" in text and "pooled over 2 windows" in text
    table = pl.read_csv(out / "windows.csv")
    cols = ["experiments", "n_jobs", "mean_speedup", "pct_slowed", "total_slowdown_min"]
    for name, folder in (("days 0-1.5", "days-0-1.5"), ("days 1.5-end", "days-1.5-end")):
        agg = pl.read_csv(out / folder / "aggregate.csv").sort("policy")
        mine = table.filter(pl.col("window") == name).sort("policy")
        assert mine["policy"].to_list() == agg["policy"].to_list() == ["fcfs", "maxmin"]
        assert mine.select(cols).rows() == agg.select(cols).rows()
    a, b = (table.filter((pl.col("window") == w) & (pl.col("policy") == "maxmin")).row(
        0, named=True) for w in ("days 0-1.5", "days 1.5-end"))
    pooled = table.filter((pl.col("window") == POOLED) & (pl.col("policy") == "maxmin")).row(
        0, named=True)
    assert pooled["n_jobs"] == a["n_jobs"] + b["n_jobs"]
    assert pooled["experiments"] == 4
    assert pooled["total_slowdown_min"] == pytest.approx(a["total_slowdown_min"]
                                                          + b["total_slowdown_min"])
    slowed = (a["pct_slowed"] * a["n_jobs"] + b["pct_slowed"] * b["n_jobs"]) / 100
    assert pooled["pct_slowed"] == pytest.approx(100 * slowed / pooled["n_jobs"])
    assert pooled["worst_window_pct_slowed"] == max(a["pct_slowed"], b["pct_slowed"])
    assert pooled["max_slowdown_min"] == pytest.approx(max(a["max_slowdown_min"],
                                                           b["max_slowdown_min"]))
    assert "| pooled | " in (out / "windows.md").read_text()

    # a window's rows are what a plain run of that window gives
    plain = tmp_path / "plain"
    assert run(tmp_path, "--out", str(plain), "--set", "replay.start_day=0",
               "--set", "replay.end_day=1.5") == 0
    want = pl.read_csv(plain / "aggregate.csv").sort("policy").select(cols).rows()
    got = table.filter(pl.col("window") == "days 0-1.5").sort("policy").select(cols).rows()
    assert got == want


def test_a_bad_window_stops_before_any_work(tmp_path, capsys):
    out = tmp_path / "w"
    # the second window leaves nothing after the 0.5-day warm-up: refused by the config's
    # own check before the first window runs
    assert run(tmp_path, "--out", str(out), "--windows", "0:1.5,1.5:1.8") == 2
    err = capsys.readouterr().err
    assert "warmup_days" in err and err.count("\n") == 1
    assert not (out / "days-0-1.5").exists()
    assert run(tmp_path, "--out", str(out), "--windows", "1.5:0") == 2
    assert "--windows '1.5:0'" in capsys.readouterr().err


def test_the_window_is_not_also_set_and_an_empty_window_stops_first(tmp_path, capsys):
    out = tmp_path / "w"
    assert run(tmp_path, "--out", str(out), "--windows", "0:1.5",
               "--set", "replay.start_day=1") == 2
    assert "both set the replay window" in capsys.readouterr().err
    # a window after the trace's last job is refused before the first window runs
    assert run(tmp_path, "--out", str(out), "--windows", "0:1.5,100:end") == 2
    err = capsys.readouterr().err
    assert "--windows 100-end: no job is submitted" in err
    assert not (out / "days-0-1.5").exists()


def test_each_window_trains_under_its_own_alias():
    from sia.pipelines.studies.experiment import parse_config
    from sia.pipelines.studies.windows import alias_override

    base = {**CFG, "policies": ["fcfs", "sia"], "replay": {"start_day": 30},
            "trace": {"synthetic": "base", "days": 40}}
    learned = parse_config({**base, "predictors": {"train": "on_the_fly", "alias": "mine"}})
    assert alias_override(learned, Window(24, 38)) == ["predictors.alias=mine-days-24-38"]
    default = parse_config({**base, "predictors": {"train": "on_the_fly"}})
    assert alias_override(default, Window(38, None)) == [
        "predictors.alias=eval-tinyw-days-38-end"]
    registry = parse_config({**base, "predictors": {"train": "registry", "alias": "champion"}})
    assert alias_override(registry, Window(24, 38)) == []
