"""Capture (learned SIA's speedup over sia-perfect's) and policies fed the predictors of another alias."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.inputs import replay_window
from sia.pipelines.studies import evaluate as ev
from sia.pipelines.studies.evaluate import run_sweep, with_capture
from sia.pipelines.studies.experiment import load_config, parse_config

SMALL = ["--synthetic", "more-queues", "--days", "5", "--train-days", "2", "--val-days", "1",
         "--warmup-days", "0.5", "--windows", "5,60", "--no-ablation",
         "--n-estimators", "5"]


def test_capture_by_hand():
    agg = pl.DataFrame({"group": ["g", "g", "g", "h"],
                        "policy": ["sia", "sia-perfect", "maxmin", "sia"],
                        "mean_speedup": [3.0, 4.0, 5.0, 2.0],
                        "geomean_speedup": [1.5, 2.0, 2.5, 1.0]})
    out = with_capture(agg)
    assert out["capture_mean"].to_list()[:3] == [0.75, 1.0, 1.25]
    assert out["capture_geomean"].to_list()[:3] == [0.75, 1.0, 1.25]
    assert out["capture_mean"][3] is None  # group h has no sia-perfect


def test_alias_on_a_policy_without_predictors_is_a_config_error():
    with pytest.raises(ConfigError, match=r"policies\[1\].alias"):
        parse_config({"name": "x", "trace": {"synthetic": "base"},
                      "policies": ["fcfs", {"name": "maxmin", "alias": "paper"}]})


def test_repo_capture_config_loads():
    cfg = load_config(Path(__file__).resolve().parents[2] / "experiments" / "capture_philly.yaml")
    aliases = {p.label: p.alias for p in cfg.policies}
    assert aliases["sia-paper"] == "paper" and aliases["sia"] is None
    assert cfg.predictors.alias == "champion" and cfg.replay_start_day == 58


def test_two_predictor_sets_side_by_side_with_capture(mlflow_uri, tmp_path, capsys):
    from mlflow import MlflowClient

    assert main(["train", *SMALL, "--alias", "champion", "--out", str(tmp_path / "a")]) == 0
    assert main(["train", *SMALL, "--recipe", "paper", "--alias", "paper",
                 "--out", str(tmp_path / "b")]) == 0
    assert main(["train", *SMALL, "--recipe", "paper", "--threshold", "0.3"]) == 2
    assert "--recipe paper sets --threshold" in capsys.readouterr().err
    client = MlflowClient()
    name = "sia-will-jobs-arrive-60m"
    paper = client.get_model_version_by_alias(name, "paper")
    assert paper.tags["method"] == "xgboost" and float(paper.tags["threshold"]) == 0.5
    spec = {
        "name": "capture", "seed": 1, "trace": {"synthetic": "more-queues", "days": 5},
        "replay": {"start_day": 3.5}, "warmup_days": 0.25, "experiments": 1,
        "pools_per_experiment": "all", "quotas": "recorded",
        # a synthetic cluster sees an arrival in every 12 hours: 5 and 60 min windows only
        "policies": ["fcfs", {"name": "sia", "options": {"windows_s": [300, 3600]}},
                     {"name": "sia", "label": "sia-paper", "alias": "paper",
                      "options": {"windows_s": [300, 3600]}},
                     {"name": "sia-perfect", "options": {"windows_s": [300, 3600]}}],
        "predictors": {"train": "registry", "alias": "champion", "windows_min": [5, 60]}}
    cfg = parse_config(spec)
    said: list[str] = []
    out = run_sweep(cfg, tmp_path / "sweep", progress=False, make_plots=False, say=said.append)
    # another seed: another trace, so not in-sample, but one line per alias names both traces
    warned = [line for line in said if line.startswith("warning: ")]
    assert not any("was trained on days" in line for line in warned), said
    assert [line.split(" learned from ")[0] for line in warned] == [
        "warning: alias champion", "warning: alias paper"], said
    said.clear()
    agg = out.aggregate
    # a sweep replaying the days an alias learned from (trained on days 0.5-2.5 and validated
    # on 2.5-3.5 of this seed's workload) says so, and from which day to replay
    early = parse_config({**spec, "seed": 0, "replay": {"start_day": 2}})
    ev.prepare_predictors(early, ev.load_trace(early), tmp_path / "early", said.append)
    assert [line for line in said if line.startswith("warning: ")] == [
        f"warning: alias {a} was trained on days 0.5-2.5 of this trace and validated on "
        "days 2.5-3.5; this replay starts on day 2, so it scores the predictors on days they "
        "were fit or chosen on: set replay.start_day to 3.5 in <dict> to replay after "
        "validation" for a in ("champion", "paper")]
    row = {r["policy"]: r for r in agg.iter_rows(named=True)}
    assert row["sia-perfect"]["capture_mean"] == pytest.approx(1.0)
    for label in ("sia", "sia-paper"):
        assert row[label]["capture_mean"] == pytest.approx(
            row[label]["mean_speedup"] / row["sia-perfect"]["mean_speedup"])
    assert "capture_mean" in (tmp_path / "sweep" / "aggregate.csv").read_text()
    # the paper policy's replays are keyed by its own alias and model versions
    from sia.pipelines.engine.predictors import resolve_registry

    fc = resolve_registry("paper", (5, 60), tracking_uri=mlflow_uri)
    assert fc.alias == "paper" and dict(fc.versions)[name] == str(paper.version) == "2"
    assert out.predictors["versions"]["paper"][name] == "2"
    champion = resolve_registry("champion", (5, 60), tracking_uri=mlflow_uri)
    jobs, _ = replay_window(ev.load_trace(cfg).jobs, cfg.replay_start_day, cfg.replay_end_day)
    specs = {s.where[-1]: s for s in ev.experiment_specs(cfg, out.experiments[0], jobs,
                                                          {"champion": champion, "paper": fc})}
    assert specs["sia-paper"].predictors is fc and specs["sia"].predictors is champion
    assert specs["sia-paper"].key != specs["sia"].key
    # the policy runs log the exact model versions each policy used
    import mlflow

    runs = mlflow.search_runs(experiment_names=["sia-evaluations"], output_format="list")
    used = {r.data.params["policy"]: r.data.params for r in runs
            if r.data.tags.get("sia.kind") == "policy"}
    champ = client.get_model_version_by_alias(name, "champion").version
    assert used["sia-paper"][f"model.{name}"] == "2" and used["sia"][f"model.{name}"] == str(champ)
    assert "model.sia-job-duration" in used["sia"] and not any(
        k.startswith("model.") for k in used["sia-perfect"])
