"""`sia replay --policy sia|sia-random|sia-random-both` on learned predictors (tmp MLflow store)."""

from __future__ import annotations

import json

import polars as pl
from sia.data.synthetic import generate_workload
from sia.data.units import DAY_S
from sia.pipelines.cli import main

SYN = ["--synthetic", "base", "--days", "5", "--seed", "1"]
SPLIT = ["--train-days", "2", "--val-days", "1", "--warmup-days", "0.5"]


def _train(alias: str, tmp_path) -> None:
    assert main(["train", *SYN, *SPLIT, "--no-ablation", "--n-estimators", "10",
                 "--alias", alias, "--out", str(tmp_path / "train")]) == 0


def _direct_replay(policy: str, alias: str | None, start_day: float, **options):
    """The same replay built by hand: the registry loader (its forecaster primed with the jobs
    before the replay, as `sia replay` does), the policy factory, the simulator."""
    from sia.models.forecaster import LearnedForecaster
    from sia.pipelines.inputs import jobs_before
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.registry import make_policy

    every, pools = generate_workload("base", 1, days=5.0)
    jobs = every.filter(pl.col("submit_time") >= start_day * DAY_S)
    if alias is None:
        return simulate(jobs, pools, make_policy(policy, **options))
    fc = LearnedForecaster.from_registry((5, 60, 720), alias).prime(jobs_before(every, start_day))
    key = "forecaster" if policy == "sia" else "base"
    return simulate(jobs, pools, make_policy(policy, **{key: fc}, **options))


def test_replay_sia_and_strawmen_load_the_registered_predictors(mlflow_uri, tmp_path, capsys):
    _train("cand", tmp_path)
    capsys.readouterr()
    for policy, options in (("sia", {}), ("sia-random", {"seed": 1}),
                            ("sia-random-both", {"seed": 1}), ("sia-perfect-durations", {}),
                            ("sia-perfect-arrivals", {})):
        out = tmp_path / policy
        assert main(["replay", *SYN, "--policy", policy, "--alias", "cand",
                     "--replay-start-day", "3.5", "--warmup-days", "0",
                     "--out", str(out)]) == 0, capsys.readouterr().err
        summary = json.loads((out / "summary.json").read_text())
        assert summary["policy"] == policy and summary["replay_days"] == [3.5, None]
        pred = summary["predictors"]
        assert pred["alias"] == "cand" and pred["tracking_uri"] == mlflow_uri
        assert pred["will_arrive_versions"] == {"will-jobs-arrive-5m": "1",
                                                "will-jobs-arrive-60m": "1",
                                                "will-jobs-arrive-720m": "1"}
        # trained on days 0.5-2.5, validated on 2.5-3.5 of this workload: day 3.5 on is after
        assert pred["training_period"]["val_end_day"] == 3.5 and "warning" not in pred
        jobs = pl.read_parquet(out / "jobs.parquet")
        assert jobs["submit_time"].min() >= 3.5 * DAY_S
        # the predictions as SIA used them, scored after the replay
        served = summary["served"]
        assert set(served["will_arrive"]) == {"5m", "60m", "720m"}
        assert served["job_duration"]["60m"]["jobs"] > 0
        # the CLI replay is exactly the hand-built one on the registered predictors
        ref = _direct_replay(policy, "cand", 3.5, **options)
        cols = ["job_id", "start_time", "end_time", "opportunistic"]
        assert jobs.select(cols).sort("job_id").equals(ref.select(cols).sort("job_id"))
        if policy == "sia":  # ... and not what perfect predictions give (the check can fail)
            perfect = _direct_replay("sia-perfect", None, 3.5)
            assert not jobs.select(cols).sort("job_id").equals(perfect.select(cols).sort("job_id"))
        assert "predictors: alias cand" in capsys.readouterr().out


def test_a_replay_over_the_predictors_training_days_warns(mlflow_uri, tmp_path, capsys):
    """Replaying the days an alias was fit or chosen on scores it in-sample: `sia replay` says
    so (stderr, summary, the MLflow run's tags) and names the day to start from instead."""
    import mlflow

    _train("cand", tmp_path)
    capsys.readouterr()
    out = tmp_path / "early"
    assert main(["replay", *SYN, "--policy", "sia", "--alias", "cand", "--replay-start-day",
                 "2", "--warmup-days", "0", "--out", str(out)]) == 0
    err = capsys.readouterr().err
    assert ("warning: alias cand was trained on days 0.5-2.5 of this trace and validated on "
            "days 2.5-3.5; this replay starts on day 2") in err
    assert "--replay-start-day 3.5 to replay after validation" in err
    pred = json.loads((out / "summary.json").read_text())["predictors"]
    assert pred["training_period"] == {"trace": "synthetic:base seed=1",
                                       "trace_id": "synthetic:base seed=1",
                                       "train_start_day": 0.5, "train_end_day": 2.5,
                                       "val_end_day": 3.5}
    assert pred["warning"] in err
    run = mlflow.search_runs(experiment_names=["sia-evaluations"], output_format="list")[0]
    assert run.data.tags["sia.warning"] == pred["warning"]
    # another workload (a different seed) is not the trace the alias learned from: no
    # in-sample warning, but one line naming both traces (issue 36), also in summary.json
    other = ["--synthetic", "base", "--days", "5", "--seed", "2"]
    assert main(["replay", *other, "--policy", "sia", "--alias", "cand", "--warmup-days", "0",
                 "--no-mlflow", "--out", str(tmp_path / "other")]) == 0
    err = capsys.readouterr().err
    assert "was trained on days" not in err
    (line,) = [x for x in err.splitlines() if x.startswith("warning:")]
    assert "learned from synthetic:base seed=1" in line and "serves synthetic:base seed=2" in line
    pred = json.loads((tmp_path / "other" / "summary.json").read_text())["predictors"]
    assert pred["trace_mismatch"] == line.removeprefix("warning: ")
    assert pred["learned_from"]["trace"] == "synthetic:base seed=1"


def test_replay_train_on_the_fly_uses_the_period_before_the_replay(mlflow_uri, tmp_path, capsys):
    from mlflow import MlflowClient

    out = tmp_path / "sia"
    assert main(["replay", *SYN, "--policy", "sia", "--train", "--train-days", "2",
                 "--val-days", "1", "--train-warmup-days", "0.5", "--warmup-days", "0",
                 "--out", str(out)]) == 0, capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    trained = summary["predictors"]["trained"]
    start = summary["replay_days"][0]
    # no --replay-start-day: the replay starts where the validation period ends
    assert trained["val_days"][1] == start
    assert trained["train_days"][0] >= 0.5 and trained["val_days"][0] == trained["train_days"][1]
    assert summary["predictors"]["alias"] == "replay-train"
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert jobs["submit_time"].min() >= start * DAY_S
    client = MlflowClient()
    mv = client.get_model_version_by_alias("sia-will-jobs-arrive-60m", "replay-train")
    assert mv.run_id == trained["run_id"]
    run = client.get_run(trained["run_id"])
    assert float(run.data.params["split_val_end_day"]) <= start  # split params in days
    assert (out / "predictors" / "report.md").exists()
    # --train registers under its own alias and leaves champion alone
    for version in client.search_model_versions("name='sia-job-duration'"):
        assert "champion" not in version.aliases


def test_missing_predictors_and_misplaced_options_are_one_line_errors(mlflow_uri, tmp_path,
                                                                      capsys):
    out = tmp_path / "x"
    assert main(["replay", *SYN, "--policy", "sia", "--alias", "nothing-here",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--alias nothing-here" in err and "sia train" in err and "--train" in err
    assert main(["replay", *SYN, "--policy", "maxmin", "--train", "--out", str(out)]) == 2
    assert "--train applies to" in capsys.readouterr().err
    assert main(["replay", *SYN, "--policy", "sia", "--train", "--replay-start-day", "1",
                 "--out", str(out)]) == 2
    assert "--replay-start-day 1" in capsys.readouterr().err
    assert main(["replay", *SYN, "--policy", "sia", "--load-method", "max", "--out", str(out)]) == 2
    assert "--load-method" in capsys.readouterr().err
    assert main(["replay", *SYN, "--policy", "fcfs", "--replay-start-day", "9",
                 "--out", str(out)]) == 2
    assert "no job is submitted" in capsys.readouterr().err
    assert not out.exists()


def test_in_sample_warning_knows_a_trace_by_its_resolved_path(tmp_path, monkeypatch):
    """The same file named another way (relative, absolute, through a link) is the same trace;
    another file with the same name is not; runs logged before trace_id compare as written."""
    from sia.data.paths import trace_identity
    from sia.pipelines.engine.predictors import in_sample_warning

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    for d in ("a", "b"):
        (tmp_path / d / "t.csv").write_text(f"{d}\n")
    (tmp_path / "link.csv").symlink_to(tmp_path / "a" / "t.csv")
    monkeypatch.chdir(tmp_path / "a")
    period = {"trace": "t.csv", "trace_id": trace_identity("t.csv"), "train_start_day": 1.0,
              "train_end_day": 3.0, "val_end_day": 4.0}

    def warns(source, start=2.0, p=period):
        return in_sample_warning(p, source, "x", start, "start on day {day:g}") is not None

    assert warns("t.csv") and warns(str(tmp_path / "a" / "t.csv")) and warns("../link.csv")
    assert warns("./t.csv", None)  # no start day: the replay starts at day 0
    assert not warns("t.csv", 4.0)  # after validation
    assert not warns("../b/t.csv")  # another file with the same name
    # a glob: its folder resolved, its pattern kept
    glob = {**period, "trace_id": trace_identity("*.csv")}
    assert warns(str(tmp_path / "a" / "*.csv"), p=glob) and not warns("../b/*.csv", p=glob)
    legacy = {k: v for k, v in period.items() if k != "trace_id"}
    assert warns("t.csv", p=legacy) and not warns(str(tmp_path / "a" / "t.csv"), p=legacy)
    assert in_sample_warning(None, "t.csv", "x", 0.0, "{day}") is None
    assert in_sample_warning(period, "t.csv", "x", 2.0, "start on day {day:g}").endswith(
        "start on day 4")


def test_evaluate_names_both_traces_when_the_predictors_learned_another(mlflow_uri, tmp_path,
                                                                       capsys):
    """Issue 36: synthetic models served on another trace said nothing; now one line names
    both, in the output, each experiment's summary.json and the MLflow runs of the policy."""
    import mlflow

    _train("cand", tmp_path)
    config = tmp_path / "mm.yaml"
    config.write_text("study: evaluate\nname: mm\nseed: 0\n"
                      "trace: {synthetic: base, days: 5, seed: 2}\nreplay: {start_day: 3.5}\n"
                      "warmup_days: 0\ngrid: {experiments: 1, pools_per_experiment: 2}\n"
                      "policies: [fcfs, sia]\npredictors: {alias: cand}\n")
    capsys.readouterr()
    assert main(["evaluate", str(config), "--workers", "1", "--out", str(tmp_path / "ev")]) == 0
    out = capsys.readouterr().out.replace("\n", " ")
    assert "warning: alias cand learned from synthetic:base seed=1" in out
    summaries = json.loads((tmp_path / "ev" / "exp-000" / "summary.json").read_text())
    line = summaries["sia"]["trace_mismatch"]
    assert "serves synthetic:base seed=2" in line and "trace_mismatch" not in summaries["fcfs"]
    runs = mlflow.search_runs(experiment_names=["sia-evaluations"], output_format="list")
    tagged = {r.data.tags.get("sia.policy") for r in runs if "sia.trace_mismatch" in r.data.tags
              and r.data.tags.get("sia.kind") in ("policy", "aggregate")}
    assert tagged == {"sia"}
