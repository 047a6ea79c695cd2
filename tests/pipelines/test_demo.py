"""`sia demo` end to end (Philly and --synthetic, small sizes), and its configs equal the YAML files."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.cli.demo import (
    DEMO_POLICIES,
    SMALL_DAYS,
    SYNTHETIC_POLICIES,
    available_policies,
    demo_config,
    philly_demo_config,
)
from sia.pipelines.studies.experiment import load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]


def test_demo_yaml_is_the_demo_config():
    from_file = load_config(ROOT / "experiments" / "demo.yaml").to_dict()
    assert from_file == parse_config(philly_demo_config()).to_dict()
    from_file = load_config(ROOT / "experiments" / "demo_synthetic.yaml").to_dict()
    assert from_file == parse_config(demo_config()).to_dict()


def test_philly_demo_replays_two_weeks_after_the_default_split():
    from sia.data.datasets import load_philly
    from sia.models.split import choose_split

    cfg = parse_config(philly_demo_config())
    assert cfg.trace.path == "builtin:philly" and cfg.trace.clean
    jobs, _ = load_philly()
    split = choose_split(jobs["submit_time"].to_numpy())  # the default split
    assert split.val_end / 86400 == cfg.replay_start_day == 58.0
    p = cfg.predictors
    assert (p.train_days, p.val_days) == (split.train_days, split.val_days) == (21.0, 14.0)
    assert cfg.replay_start_day - p.train_days - p.val_days == split.train_start / 86400
    assert cfg.replay_end_day - cfg.replay_start_day == 14.0
    assert [s.name for s in cfg.policies] == list(DEMO_POLICIES)


def test_demo_days_is_for_synthetic_only(tmp_path, capsys):
    assert main(["demo", "--days", "20", "--out", str(tmp_path / "d")]) == 2
    assert "--days applies to --synthetic only" in capsys.readouterr().err


def test_demo_config_needs_room_to_train_and_replay():
    with pytest.raises(ConfigError, match="--days must be at least 9"):
        demo_config(8.5)
    cfg = parse_config(demo_config(20))
    assert (cfg.replay_start_day, cfg.replay_end_day, cfg.warmup_days) == (8.0, 20.0, 1.0)
    assert cfg.predictors.train == "on_the_fly" and cfg.predictors.alias == "demo"


@pytest.mark.slow
def test_demo_end_to_end_small_on_philly(tmp_path, mlflow_uri, capsys):
    import mlflow

    uri = mlflow_uri
    out = tmp_path / "demo"
    assert main(["demo", "--small", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    ok, skipped = available_policies()
    assert ok == list(DEMO_POLICIES), skipped  # the final demo runs every policy
    assert "builtin:philly" in text and "exact_duplicate 65" in text
    for n in range(1, 5):
        assert f"[{n}/4]" in text  # a progress line per stage
    assert "Successfully registered model" not in text
    assert f"mlflow ui --backend-store-uri {uri}" in text
    for label in DEMO_POLICIES:
        assert f"│ {label}" in text  # the speedup / slowdown table lists it
        assert (out / "exp-000" / f"{label}.parquet").exists()
    summary = pl.read_csv(out / "summary.csv")
    assert summary["policy"].to_list() == list(DEMO_POLICIES)
    perfect = summary.filter(pl.col("policy") == "sia-perfect").row(0, named=True)
    assert perfect["pct_slowed"] == 0.0 and perfect["mean_speedup"] >= 1.0
    # one experiment: the sweep plots without the per-experiment CDFs (one point per policy)
    assert sorted(p.name for p in (out / "plots").glob("*.png")) == [
        "pools-all_scale-1_speedup_cdf.png", "pools-all_scale-1_total_slowdown_box.png"]
    trained = json.loads((out / "predictors.json").read_text())
    assert trained["alias"] == "demo"
    mlflow.set_tracking_uri(uri)
    run = mlflow.get_run(trained["run_id"])
    assert mlflow.get_experiment(run.info.experiment_id).name == "sia-predictors"
    assert run.data.params["trace"] == "builtin:philly"
    assert float(run.data.params["split_train_days"]) == pytest.approx(7.0)
    evals = mlflow.search_runs(experiment_names=["sia-evaluations"], output_format="list")
    kinds = [r.data.tags.get("sia.kind") for r in evals]
    assert kinds.count("sweep") == 1 and kinds.count("experiment") == 1  # one experiment
    child = next(r for r in evals if r.data.tags.get("sia.kind") == "policy"
                 and r.data.params["policy"] == "sia-perfect")
    assert child.data.metrics["slowdown/pct_jobs"] == 0.0


def test_demo_end_to_end_small_synthetic(tmp_path, mlflow_uri, capsys):
    import mlflow

    out = tmp_path / "demo"
    assert main(["demo", "--synthetic", "--small", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "synthetic SIA base workload" in text
    # issue 36: the split is printed one way ("days 23..58" stood beside "days 23-44"), and the
    # list of plots names the predictors' precision-recall plot, which is there
    splits = set(re.findall(r"training on days [\d.]+-[\d.]+, validating on days [\d.]+-[\d.]+",
                            text))
    assert len(splits) == 1 and ".." not in text.replace("...", ""), text
    assert "precision_recall.png" in text
    assert (out / "predictors" / "precision_recall.png").exists()
    summary = pl.read_csv(out / "summary.csv")
    assert summary["policy"].to_list() == list(SYNTHETIC_POLICIES)
    trained = json.loads((out / "predictors.json").read_text())
    mlflow.set_tracking_uri(mlflow_uri)
    run = mlflow.get_run(trained["run_id"])
    assert float(run.data.params["split_train_days"]) == pytest.approx(5.0)
    assert SMALL_DAYS == 9.0
