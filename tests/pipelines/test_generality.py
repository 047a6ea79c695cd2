"""Generality (issues 5 and 6): a trace format no other test uses, read by the generic reader,
retrained on with `sia train`, then replayed by `sia replay --policy sia` on those predictors,
with no code change: only command-line options."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
from sia.data.synthetic import generate_workload
from sia.data.units import DAY_S
from sia.pipelines.cli import main

EPOCH_MS = 1_700_000_000_000  # absolute Unix-epoch milliseconds, as a real system would log


def _write_per_pool_csvs(folder):
    """One CSV per pool (the file stem is the pool), own column names, times in ms."""
    jobs, _ = generate_workload("more-queues", 7, days=5.0)  # a variant and seed no other test uses
    jobs = jobs.with_columns(
        (pl.lit("exp-") + (pl.int_range(pl.len()) % 9).cast(pl.String)).alias("tag"))
    folder.mkdir()
    for (pool,), part in jobs.group_by(["pool"], maintain_order=True):
        part.select(
            pl.col("job_id").alias("jobName"),
            (pl.col("submit_time") * 1000 + EPOCH_MS).round(0).cast(pl.Int64).alias("queuedAtMs"),
            (pl.col("duration") * 1000).round(0).cast(pl.Int64).clip(1).alias("runtimeMs"),
            pl.col("num_gpus").alias("gpuCount"),
            pl.col("tag").alias("experiment"),
        ).write_csv(folder / f"cluster-{pool}.csv")
    return jobs


READER = ["--map", "job_id=jobName,submit_time=queuedAtMs,duration=runtimeMs,num_gpus=gpuCount,"
          "tag=experiment", "--pool-from", "file-stem", "--time-unit", "ms"]


def test_new_trace_format_train_then_replay_sia_with_its_predictors(mlflow_uri, tmp_path, capsys):
    from mlflow import MlflowClient

    source = _write_per_pool_csvs(tmp_path / "trace")
    trace = str(tmp_path / "trace")
    assert main(["train", trace, *READER, "--train-days", "2", "--val-days", "1",
                 "--warmup-days", "0.5", "--no-ablation", "--n-estimators", "10",
                 "--alias", "mytrace", "--out", str(tmp_path / "report")]) == 0, \
        capsys.readouterr().err
    printed = capsys.readouterr().out
    assert "MLflow run id:" in printed and "mlflow ui" in printed
    client = MlflowClient()
    mv = client.get_model_version_by_alias("sia-will-jobs-arrive-60m", "mytrace")
    assert client.get_run(mv.run_id).data.params["trace"] == trace

    out = tmp_path / "replay"
    assert main(["replay", trace, *READER, "--policy", "sia", "--alias", "mytrace",
                 "--replay-start-day", "3.5", "--warmup-days", "0", "--out", str(out)]) == 0, \
        capsys.readouterr().err
    summary = json.loads((out / "summary.json").read_text())
    assert summary["source"] == trace and summary["policy"] == "sia"
    assert summary["predictors"]["will_arrive_versions"]["will-jobs-arrive-60m"] == str(mv.version)
    jobs = pl.read_parquet(out / "jobs.parquet")
    pools = pl.read_parquet(out / "pools.parquet")
    # pools are the file stems; every job in the replay window came through, durations in s
    assert set(pools["pool"]) == {f"cluster-{p}" for p in source["pool"].unique()}
    t0 = float(source["submit_time"].min())
    want = source.filter(pl.col("submit_time") - t0 >= 3.5 * DAY_S - 1.0)
    assert jobs.height == want.height and summary["n_jobs"] == jobs.height
    got = jobs.join(source.select("job_id", pl.col("duration").alias("d0")), on="job_id")
    assert got.height == jobs.height
    np.testing.assert_allclose(got["duration"], got["d0"], atol=1e-3)  # ms -> s
    assert jobs["start_time"].is_not_null().all() and summary["mean_speedup"] >= 0.5


def test_new_trace_format_evaluation_sweep_with_predictors_retrained_on_it(mlflow_uri, tmp_path,
                                                                          capsys):
    """`sia evaluate` on the same unseen format: the config names the reader options and
    trains the predictors on the period before the replay (issue 6's generality check)."""
    import yaml

    _write_per_pool_csvs(tmp_path / "trace")
    cfg = {
        "name": "unseen", "seed": 5,
        "trace": {"path": str(tmp_path / "trace"), "pool_from": "file-stem", "time_unit": "ms",
                  "map": {"job_id": "jobName", "submit_time": "queuedAtMs",
                          "duration": "runtimeMs", "num_gpus": "gpuCount", "tag": "experiment"}},
        "replay": {"start_day": 3.5, "end_day": 5.0}, "warmup_days": 0.25,
        "experiments": 1, "pools_per_experiment": 4, "quotas": "from_load",
        "policies": ["fcfs", "maxmin", "sia", "sia-perfect"],
        "predictors": {"train": "on_the_fly", "train_days": 2, "val_days": 1,
                       "warmup_days": 0.5},
    }
    path = tmp_path / "unseen.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "sweep"
    assert main(["evaluate", str(path), "--out", str(out)]) == 0, capsys.readouterr().err
    summary = pl.read_csv(out / "summary.csv")
    assert set(summary["policy"]) == {"fcfs", "maxmin", "sia", "sia-perfect"}
    perfect = summary.filter(pl.col("policy") == "sia-perfect")
    assert perfect["pct_slowed"][0] == 0
    assert all(p.startswith("cluster-") for p in
               json.loads((out / "exp-000" / "experiment.json").read_text())["pools"])
