"""`sia replay` end to end on small data."""

from __future__ import annotations

import json

import polars as pl
from sia.pipelines.cli import main

COLUMNS = ["job_id", "pool", "submit_time", "duration", "num_gpus", "start_time", "end_time",
           "opportunistic", "preemptible", "preemptions", "wasted_gpu_s"]


def test_replay_synthetic_writes_jobs_pools_summary(tmp_path, capsys):
    out = tmp_path / "mm"
    code = main(["replay", "--synthetic", "base", "--days", "1.5", "--seed", "2",
                 "--warmup-days", "0.5", "--policy", "maxmin", "--out", str(out)])
    assert code == 0
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert jobs.columns == COLUMNS
    assert jobs["start_time"].is_not_null().all()
    assert (jobs["end_time"] - jobs["start_time"] - jobs["duration"]).abs().max() < 1e-6
    pools = pl.read_parquet(out / "pools.parquet")
    assert pools["pool"].to_list() == ["q0", "q1", "q2", "q3"]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == "maxmin" and summary["baseline"] == "fcfs"
    assert 0 < summary["n_jobs"] < jobs.height  # the warm-up cut some jobs
    assert set(summary["per_pool"]) == {"q0", "q1", "q2", "q3"}
    assert summary["geomean_speedup"] >= 1.0 or summary["pct_slowed"] > 0
    printed = capsys.readouterr().out
    assert "maxmin vs FCFS" in printed and "jobs.parquet" in printed


def test_replay_is_byte_identical_for_same_inputs(tmp_path):
    args = ["replay", "--synthetic", "base", "--days", "1", "--seed", "5", "--policy", "gssf"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    a = (tmp_path / "a" / "jobs.parquet").read_bytes()
    b = (tmp_path / "b" / "jobs.parquet").read_bytes()
    assert a == b
    other = ["replay", "--synthetic", "base", "--days", "1", "--seed", "6", "--policy", "gssf"]
    assert main([*other, "--out", str(tmp_path / "c")]) == 0
    assert (tmp_path / "c" / "jobs.parquet").read_bytes() != a


def test_fcfs_against_itself_has_unit_speedup_and_speedup_option(tmp_path):
    out = tmp_path / "f"
    assert main(["replay", "--synthetic", "base", "--days", "1", "--warmup-days", "0",
                 "--policy", "fcfs", "--speedup", "10", "--out", str(out)]) == 0
    s = json.loads((out / "summary.json").read_text())
    assert s["mean_speedup"] == 1.0 and s["pct_slowed"] == 0.0 and s["speedup_factor"] == 10.0
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert jobs["duration"].max() <= 1000 * 60 / 10 + 1e-6  # the longest synthetic job, 10x faster


def test_replay_csv_trace_with_quota_file(tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("job_id,pool,submit_time,duration,num_gpus\n"
                     "a,p,0,100,2\nb,p,10,50,2\nc,q,20,10,1\n")
    quotas = tmp_path / "quotas.csv"
    quotas.write_text("pool,quota_gpus\np,2\nq,2\n")
    out = tmp_path / "o"
    assert main(["replay", str(trace), "--quotas", str(quotas), "--warmup-days", "0",
                 "--policy", "maxmin", "--out", str(out)]) == 0
    jobs = {r["job_id"]: r for r in pl.read_parquet(out / "jobs.parquet").iter_rows(named=True)}
    assert jobs["b"]["start_time"] == 10.0 and jobs["b"]["opportunistic"] is True


def test_unknown_policy_and_bad_options_are_one_line_errors(tmp_path, capsys):
    assert main(["replay", "--policy", "nope", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "unknown policy 'nope'" in err and "fcfs" in err
    assert main(["replay", "--policy", "fcfs", "--speedup", "0", "--out", str(tmp_path)]) == 2
    assert "--speedup" in capsys.readouterr().err
    assert main(["replay", "--policy", "fcfs", "--tick", "-5", "--out", str(tmp_path)]) == 2
    assert "--tick" in capsys.readouterr().err
    assert not (tmp_path / "x").exists()


def test_replay_on_buddy_cells_with_a_placement_chain(tmp_path, capsys):
    out = tmp_path / "cells"
    assert main(["replay", "--synthetic", "base", "--days", "2", "--policy", "sia-perfect",
                 "--topology", "gpus=8,rack=4", "--placement", "buddy,mcf", "--out",
                 str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["locality"] and "mcf" in summary["locality"]
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert jobs.height > 0 and jobs["end_time"].is_not_null().all()
    capsys.readouterr()
    assert main(["replay", "--synthetic", "base", "--policy", "fcfs", "--topology", "gpus=7",
                 "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err
    assert "--topology" in err and "power of two" in err


def test_replay_logs_an_mlflow_run_comparable_with_evaluations(tmp_path, mlflow_uri, capsys):
    import mlflow

    out = tmp_path / "mm"
    assert main(["replay", "--synthetic", "base", "--days", "1.5", "--seed", "2",
                 "--warmup-days", "0.5", "--policy", "maxmin", "--topology", "gpus=8,rack=4",
                 "--out", str(out)]) == 0
    assert "MLflow run " in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    mlflow.set_tracking_uri(mlflow_uri)
    (run,) = mlflow.search_runs(experiment_names=["sia-evaluations"], output_format="list")
    assert run.data.params["policy"] == "maxmin" and run.data.params["seed"] == "2"
    assert run.data.tags["sia.kind"] == "replay"
    metrics = run.data.metrics
    assert metrics["speedup/mean"] == summary["mean_speedup"]
    assert metrics["stats/baseline/utilization"] == summary["utilization_baseline"]
    assert metrics["stats/cells/preemptions"] == summary["cells"]["policy"]["preemptions"]
    assert "stats/baseline/cells/migrations" in metrics and not any("maxmin" in m for m in metrics)
    arts = {a.path for a in mlflow.MlflowClient().list_artifacts(run.info.run_id, "results")}
    assert arts == {"results/summary.json", "results/jobs.parquet"}
    # --no-mlflow: files only
    assert main(["replay", "--synthetic", "base", "--days", "1", "--policy", "fcfs",
                 "--no-mlflow", "--out", str(tmp_path / "f")]) == 0
    assert len(mlflow.search_runs(experiment_names=["sia-evaluations"],
                                  output_format="list")) == 1


def test_a_window_inside_its_warm_up_is_said_before_the_replay(tmp_path, capsys):
    # the synthetic trace spans 3 days: from day 2 with a 1.5-day warm-up nothing is scored; the
    # schedule is still written, and the warning says why its scores are empty
    out = tmp_path / "o"
    assert main(["replay", "--synthetic", "base", "--days", "3", "--policy", "maxmin",
                 "--replay-start-day", "2", "--warmup-days", "1.5", "--out", str(out),
                 "--no-mlflow"]) == 0
    err = capsys.readouterr().err
    assert "warning: --warmup-days: the replay window's jobs are submitted on days" in err
    assert "1.5-day warm-up" in err
    assert (out / "jobs.parquet").exists()
    # with a shorter warm-up some jobs are scored: no warning
    assert main(["replay", "--synthetic", "base", "--days", "3", "--policy", "maxmin",
                 "--replay-start-day", "2", "--warmup-days", "0.5", "--out", str(out),
                 "--no-mlflow"]) == 0
    assert "warm-up" not in capsys.readouterr().err
