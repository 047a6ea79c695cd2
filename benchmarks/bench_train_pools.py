"""Benchmark: training the predictors on a cluster with many pools, by WillJobsArrive's row cap.

WillJobsArrive trains on one row per pool and 5-minute grid point, so its rows grow as pools x
days: a Slurm export with accounts as pools has hundreds of pools. This script makes such a
trace from Graham's GPU jobs (``../shared/traces/graham``, accounts as pools): ``--copies K``
copies of every job, copy k's pools and users renamed ``NAME~k`` and its submissions moved by a
seeded 0-10 minute offset per job, so the load per pool stays Graham's and the pools are K
times as many (copy 0 is Graham's own jobs, unmoved; the moved copies are less bursty than
Graham, so their arrivals are easier to predict: a scale test, not a second Graham). It
replays FCFS on the days before day 38 and trains the predictors as
``experiments/graham.yaml`` trains them on the fly (warm-up 3, training 21, validation 14 days),
once per cap of ``--caps`` (0: every row), each in a fresh process (its peak memory is its
own), and prints a table: WillJobsArrive's training rows per window, the seconds spent in the
features and in the fits, the process's peak resident memory, and the validation F at 5 / 60 /
720 minutes with persistence's.

    .venv/bin/python benchmarks/bench_train_pools.py [--copies 8] [--caps 0,1000000,250000]
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import resource
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
GRAHAM = ROOT.parent / "shared" / "traces" / "graham" / "graham.sacct.txt.gz"
START_DAY = 38.0  # graham.yaml's replay start: the predictors train on the days before


def many_pools(path: Path, copies: int, out: Path) -> tuple[int, int]:
    """Write the jobs before START_DAY of ``copies`` renamed copies of Graham's GPU jobs
    (accounts as pools) to ``out`` (Parquet); return (jobs, pools)."""
    import numpy as np
    import polars as pl
    from sia.data.readers import read_trace
    from sia.models.split import DAY_S

    jobs, _ = read_trace(path, pool_from="account")
    rng = np.random.default_rng(0)
    parts = []
    for k in range(copies):
        shift = rng.integers(0, 600, jobs.height).astype(np.float64) * (k > 0)  # 0: as is
        suffix = "" if k == 0 else f"~{k}"
        parts.append(jobs.with_columns(
            (pl.col("job_id").cast(pl.String) + f"#{k}").alias("job_id"),
            (pl.col("pool").cast(pl.String) + suffix).alias("pool"),
            (pl.col("user").cast(pl.String) + suffix).alias("user"),
            (pl.col("submit_time") + pl.Series(shift)).alias("submit_time")))
    big = pl.concat(parts).sort("submit_time").filter(pl.col("submit_time") < START_DAY * DAY_S)
    big.write_parquet(out)
    return big.height, big["pool"].n_unique()


def train_once(jobs_path: str, cap: int, queue: mp.Queue) -> None:
    """Train with WillJobsArrive's row cap ``cap`` (0: every row); put the figures on ``queue``."""
    import polars as pl
    from sia.data.quotas import quotas_from_load
    from sia.pipelines.inputs import fcfs_schedule
    from sia.pipelines.train import TrainConfig, train_predictors

    jobs = pl.read_parquet(jobs_path)
    pools = quotas_from_load(jobs, seed=0).select("pool", "quota_gpus")
    schedule = fcfs_schedule(jobs, pools)
    first = START_DAY - 14.0 - 21.0 - 3.0
    config = TrainConfig(train_days=21.0, val_days=14.0, warmup_days=3.0, start_day=first,
                         max_fit_rows=cap or None)
    clock = time.perf_counter()
    result = train_predictors(schedule, config)
    wall = time.perf_counter() - clock
    queue.put({
        "cap": cap, "wall_s": wall, "features_s": result.timings_s["features_s"],
        "fit_s": result.timings_s["fit_s"],
        "peak_gb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20,
        "rows": [w.train_rows for w in result.windows],
        "f1": [w.metrics["f1"] for w in result.windows],
        "persistence": [w.baselines["persistence"]["f1"] for w in result.windows],
        "methods": [w.model.method_ for w in result.windows]})


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", type=Path, default=GRAHAM)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--caps", default="0,1000000,250000",
                    help="WillJobsArrive's row caps to train with, comma separated (0: every row)")
    args = ap.parse_args()
    from rich.console import Console
    from rich.table import Table

    caps = [int(c) for c in args.caps.split(",")]
    ctx = mp.get_context("spawn")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "jobs.parquet"
        n_jobs, n_pools = many_pools(args.trace, args.copies, path)
        for cap in caps:
            queue = ctx.Queue()
            proc = ctx.Process(target=train_once, args=(str(path), cap, queue))
            proc.start()
            rows.append(queue.get())
            proc.join()
    table = Table(title=f"training on {n_jobs:,} jobs of {n_pools} pools (Graham x "
                        f"{args.copies}, accounts as pools; days 3-24 / 24-38)")
    for col in ("cap", "train rows / window", "features s", "fits s", "train s", "peak GB",
                "F 5 / 60 / 720 min", "persistence", "registered"):
        table.add_column(col, justify="right")
    for r in rows:
        table.add_row(f"{r['cap']:,}" if r["cap"] else "every row",
                      " / ".join(f"{n:,}" for n in r["rows"]), f"{r['features_s']:.1f}",
                      f"{r['fit_s']:.1f}", f"{r['wall_s']:.1f}", f"{r['peak_gb']:.2f}",
                      " / ".join(f"{f:.3f}" for f in r["f1"]),
                      " / ".join(f"{f:.3f}" for f in r["persistence"]), ", ".join(r["methods"]))
    Console(width=200).print(table)


if __name__ == "__main__":
    main()
