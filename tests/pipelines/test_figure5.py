"""The Figure 5 pipeline: config validation and an end-to-end run on a tiny workload."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.figure5 import load_figure5_config, parse_figure5_config, run_figure5


def test_shipped_config_parses_with_the_paper_setup():
    from sia.pipelines.cmd_figure5 import DEFAULT_CONFIG

    cfg = load_figure5_config(DEFAULT_CONFIG)
    assert cfg.workloads == ("base", "more-queues", "higher-load") and cfg.seeds == (0, 1, 2)
    assert set(cfg.policies) == {"fcfs", "ssf", "gssf", "maxmin", "sia-vc", "oracle"}
    assert cfg.days == 3.0 and cfg.oracle["time_limit_s"] > 0


@pytest.mark.parametrize("raw, word", [
    ({"workloads": ["nope"]}, "unknown variant"),
    ({"policies": ["fifo"]}, "unknown policy"),
    ({"seeds": "0"}, "'seeds'"),
    ({"days": -1}, "'days'"),
    ({"colour": 1}, "unknown key"),
    ({"oracle": {"steps": 3}}, "'oracle'"),
])
def test_bad_config_names_the_key(raw, word):
    with pytest.raises(ConfigError, match=word):
        parse_figure5_config(raw, source="cfg.yaml")


def test_missing_config_file_is_one_line_error(tmp_path, capsys):
    assert main(["figure5", str(tmp_path / "none.yaml"), "--out", str(tmp_path)]) == 2
    assert "no such config file" in capsys.readouterr().err


def test_end_to_end_tiny(tmp_path):
    cfg = parse_figure5_config({
        "workloads": ["base", "fewer-queues"], "seeds": [0, 1],
        "policies": ["fcfs", "maxmin", "sia-vc", "oracle"], "days": 0.25,
        "oracle": {"time_limit_s": 20, "threads": 1},
    })
    table = run_figure5(cfg, tmp_path, workers=1, progress=False)
    assert table.height == 2 * 2 * 4
    for f in ("figure5.csv", "figure5_summary.csv", "figure5.png"):
        assert (tmp_path / f).stat().st_size > 0
    fcfs = table.filter(pl.col("policy") == "fcfs")
    assert (fcfs["mean_speedup"] == 1.0).all() and (fcfs["total_slowdown_min"] == 0).all()
    for pol in ("sia-vc", "oracle"):
        part = table.filter(pl.col("policy") == pol)
        assert (part["max_slowdown_min"] <= 1 / 60).all() and (part["mean_speedup"] >= 1).all()
    orc = table.filter(pl.col("policy") == "oracle")
    assert orc["oracle_status"].is_in(["optimal", "feasible"]).all()
    summary = pl.read_csv(tmp_path / "figure5_summary.csv")
    assert summary.height == 2 * 4 and (summary["seeds"] == 2).all()
