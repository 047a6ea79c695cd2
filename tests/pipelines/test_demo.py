"""`sia demo` end to end on its small size, and its config equals experiments/demo.yaml."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.cmd_demo import DEMO_POLICIES, SMALL_DAYS, available_policies, demo_config
from sia.pipelines.experiment import load_config, parse_config

ROOT = Path(__file__).resolve().parents[2]


def test_demo_yaml_is_the_demo_config():
    from_file = load_config(ROOT / "experiments" / "demo.yaml").to_dict()
    built = parse_config(demo_config()).to_dict()
    assert from_file == built


def test_demo_config_needs_room_to_train_and_replay():
    with pytest.raises(ConfigError, match="--days must be at least 9"):
        demo_config(8.5)
    cfg = parse_config(demo_config(20))
    assert (cfg.replay_start_day, cfg.replay_end_day, cfg.warmup_days) == (8.0, 20.0, 1.0)
    assert cfg.predictors.train == "on_the_fly" and cfg.predictors.alias == "demo"


def test_demo_end_to_end_small(tmp_path, mlflow_uri, capsys):
    import mlflow

    uri = mlflow_uri
    out = tmp_path / "demo"
    assert main(["demo", "--small", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    ok, skipped = available_policies()
    assert ok == list(DEMO_POLICIES), skipped  # the final demo runs every policy
    assert f"mlflow ui --backend-store-uri {uri}" in text
    for label in DEMO_POLICIES:
        assert f"│ {label}" in text  # the speedup / slowdown table lists it
        assert (out / "exp-000" / f"{label}.parquet").exists()
    summary = pl.read_csv(out / "summary.csv")
    assert summary["policy"].to_list() == list(DEMO_POLICIES)
    perfect = summary.filter(pl.col("policy") == "sia-perfect").row(0, named=True)
    assert perfect["pct_slowed"] == 0.0 and perfect["mean_speedup"] >= 1.0
    assert len(list((out / "plots").glob("*.png"))) == 3
    # the predictors were trained on the first 8 days and registered under "demo"
    trained = json.loads((out / "predictors.json").read_text())
    assert trained["alias"] == "demo"
    mlflow.set_tracking_uri(uri)
    run = mlflow.get_run(trained["run_id"])
    assert mlflow.get_experiment(run.info.experiment_id).name == "sia-predictors"
    assert float(run.data.params["split_train_days"]) == pytest.approx(5.0)
    evals = mlflow.search_runs(experiment_names=["sia-evaluations"], output_format="list")
    assert len(evals) == 2  # the sweep and its one experiment
    child = next(r for r in evals if "mlflow.parentRunId" in r.data.tags)
    assert child.data.metrics["sia-perfect.pct_slowed"] == 0.0
    assert SMALL_DAYS == 9.0
