"""`builtin:philly` (the trace shipped in the package) wherever a trace path is accepted.

`sia ingest` and `sia features` on it are tested in test_cli_data.py and
test_cli_features.py (the `philly_path` fixture is ``builtin:philly``).
"""

from __future__ import annotations

import json

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.inputs import load_workload
from sia.pipelines.studies.evaluate import run_sweep
from sia.pipelines.studies.experiment import load_config, parse_config


def test_load_workload_reads_builtin_philly():
    wl = load_workload("builtin:philly", clean=True)
    assert wl.source == "builtin:philly"
    assert wl.report.dropped == {"exact_duplicate": 65} and wl.jobs.height == 82_182
    assert wl.pools.height == 15


def test_without_clean_every_command_names_the_duplicate_and_clean(tmp_path, capsys):
    for cmd in (["ingest", "builtin:philly", "--out", str(tmp_path / "i")],
                ["replay", "builtin:philly", "--policy", "fcfs", "--out", str(tmp_path / "r")]):
        assert main(cmd) == 2
        err = capsys.readouterr().err
        assert "builtin:philly: row 3136: exact duplicate of row 3135" in err and "--clean" in err
    assert main(["ingest", "builtin:nope", "--out", str(tmp_path / "n")]) == 2
    assert "no such built-in dataset" in capsys.readouterr().err


def test_replay_builtin_philly(tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["replay", "builtin:philly", "--clean", "--policy", "maxmin",
                 "--replay-start-day", "58", "--replay-end-day", "60", "--warmup-days", "0.5",
                 "--out", str(out)]) == 0
    assert "maxmin vs FCFS" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    assert "builtin:philly" in json.dumps(summary)
    assert pl.read_parquet(out / "jobs.parquet").height > 1000


@pytest.mark.slow
def test_train_builtin_philly(mlflow_uri, tmp_path, capsys):
    import mlflow

    code = main(["train", "builtin:philly", "--clean", "--start-day", "40", "--warmup-days", "0",
                 "--train-days", "4", "--val-days", "2", "--windows", "60",
                 "--n-estimators", "5", "--no-ablation", "--alias", "philly",
                 "--out", str(tmp_path / "rep")])
    out = capsys.readouterr().out
    assert code == 0, out
    run_id = out.split("MLflow run id:")[1].split()[0]
    mlflow.set_tracking_uri(mlflow_uri)
    assert mlflow.get_run(run_id).data.params["trace"] == "builtin:philly"


def test_experiment_configs_name_builtin_philly(tmp_path):
    from pathlib import Path

    root = Path(__file__).resolve().parents[2] / "experiments"
    for name in ("figure13.yaml", "table17_philly.yaml", "locality/figure16_philly.yaml"):
        assert load_config(root / name).trace.path == "builtin:philly"
    with pytest.raises(ConfigError, match=r"trace.path: builtin:nope: no such built-in dataset"):
        parse_config({"trace": {"path": "builtin:nope"}, "policies": ["fcfs"]})


def test_evaluate_config_on_builtin_philly(tmp_path):
    cfg = parse_config({
        "name": "tiny", "seed": 1, "trace": {"path": "builtin:philly", "clean": True},
        "replay": {"start_day": 58, "end_day": 60}, "warmup_days": 0.5, "experiments": 1,
        "pools_per_experiment": 3, "min_jobs_per_pool": 20, "policies": ["fcfs", "maxmin"]})
    result = run_sweep(cfg, tmp_path / "ev", log_mlflow=False, make_plots=False)
    assert result.summary["policy"].to_list() == ["fcfs", "maxmin"]
    exp = json.loads((tmp_path / "ev" / "exp-000" / "experiment.json").read_text())
    assert len(exp["pools"]) == 3
    assert pl.read_parquet(tmp_path / "ev" / "exp-000" / "maxmin.parquet").height > 0
