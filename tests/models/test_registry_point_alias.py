"""Reusing an on-the-fly training points its alias back at its own model versions.

Two trainings under one alias (two replay windows, or two configs sharing an alias): the
second moves the alias. A re-run that reuses the first training must score it with the
first training's versions, not with the second's, which may have been trained on the very
days the first replays.
"""

from __future__ import annotations

import json
from dataclasses import asdict

from mlflow import MlflowClient
from sia.models import registry
from sia.pipelines.studies import evaluate as ev
from sia.pipelines.studies.experiment import parse_config
from sia.pipelines.tracking import tracking_uri


def two_versions(name: str) -> MlflowClient:
    client = MlflowClient()
    client.create_registered_model(name)
    for _ in range(2):
        client.create_model_version(name, "file:///nowhere")
    client.set_registered_model_alias(name, "w", "2")  # the later training took the alias
    return client


def test_point_alias_moves_it_back_and_refuses_a_missing_version(mlflow_uri):
    client = two_versions("m")
    assert registry.point_alias("w", {"m": "1"})
    assert str(client.get_model_version_by_alias("m", "w").version) == "1"
    assert not registry.point_alias("w", {"m": "9"})  # gone: the training must be redone
    assert str(client.get_model_version_by_alias("m", "w").version) == "1"


def test_the_reused_training_gets_its_versions_back(mlflow_uri, tmp_path):
    client = two_versions("sia-job-duration-t")
    cfg = parse_config({"name": "t", "trace": {"synthetic": "base", "days": 40},
                        "replay": {"start_day": 30}, "policies": ["fcfs", "sia"],
                        "predictors": {"train": "on_the_fly", "alias": "w"}})
    key = ev.result_key(cfg.trace.key(), 30.0, asdict(cfg.predictors), tracking_uri())
    saved = {"key": key, "run_id": "r1", "alias": "w", "versions": {"sia-job-duration-t": "1"}}
    (tmp_path / "predictors.json").write_text(json.dumps(saved))
    said = []
    got = ev.train_on_the_fly(cfg, None, tmp_path, said.append)  # no trace read: reused
    assert got == saved and "reusing the on-the-fly training of run r1" in said[0]
    assert str(client.get_model_version_by_alias("sia-job-duration-t", "w").version) == "1"
