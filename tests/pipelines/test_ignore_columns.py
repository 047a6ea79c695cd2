"""trace.ignore_columns: a workload read without some optional contract columns (an ablation)."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.inputs import without_columns
from sia.pipelines.studies.evaluate import load_trace
from sia.pipelines.studies.experiment import parse_config


def _trace(tmp_path):
    path = tmp_path / "jobs.csv"
    pl.DataFrame({"pool": ["a", "a", "b"], "submit_time": [0, 60, 120],
                  "duration": [100, 200, 300], "num_gpus": [1, 1, 1],
                  "user": ["u1", "u2", "u1"], "time_limit": [600, 900, 1200]}).write_csv(path)
    return path


def _cfg(path, **trace):
    return parse_config({"name": "t", "trace": {"path": str(path), **trace},
                         "policies": ["fcfs"], "experiments": 1,
                         "pools_per_experiment": "all"}, source="t.yaml")


def test_ignored_columns_read_as_absent_and_are_noted(tmp_path):
    path = _trace(tmp_path)
    full = load_trace(_cfg(path))
    assert full.jobs["time_limit"].to_list() == [600.0, 900.0, 1200.0]
    plain = load_trace(_cfg(path, ignore_columns=["time_limit", "user"]))
    assert plain.jobs["time_limit"].null_count() == 3 and plain.jobs["user"].null_count() == 3
    assert plain.jobs.drop("time_limit", "user").equals(full.jobs.drop("time_limit", "user"))
    assert any("columns ignored: time_limit, user" in n for n in plain.report.notes)


def test_only_optional_columns_can_be_ignored(tmp_path):
    with pytest.raises(ConfigError, match="trace.ignore_columns"):
        _cfg(_trace(tmp_path), ignore_columns=["duration"])
    with pytest.raises(ConfigError, match="cannot be ignored"):
        without_columns(pl.DataFrame({"pool": ["a"]}), ("pool",))
