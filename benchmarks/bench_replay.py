"""Replay speed: jobs replayed per second on the whole Philly trace, and at 2x / 4x its size.

Reads the Philly per-VC trace (bad rows dropped and counted), derives quotas
from load (SIA 6.1, seed 0), and replays each policy on the trace and on
traces made of 2 and 4 back-to-back copies (copy k shifted by k x the
submission span, job ids suffixed ``#k``; same quotas, so the load stays the
same and only the length grows). Wall time covers ``simulate`` end to end
(tables to arrays, the event loop, the result table). Prints a table.

    .venv/bin/python benchmarks/bench_replay.py [--policies fcfs,maxmin,sia-vc] [--scales 1,2,4]
        [--dense] [--option KEY=VALUE ...]

``--option KEY=VALUE`` (repeatable; VALUE read as YAML) passes a policy option to every
policy listed, e.g. ``--policies sia-perfect --scales 1 --option dedicated_order=allocation``
to time SIA's dedicated order. Measured 2026-11-30 (that command against the same with
``dedicated_order=repay``, whole-process, three alternated pairs on a quiet machine): see
docs/concepts/lending.md ("Whose head starts first").

``--dense`` overlays the copies in the same pools instead (quotas x scale; copy k > 0 moved by
0-10 minutes per job): queues and running sets grow with the scale, not the trace's length.
Measured 2026-11-30 (``--policies fcfs,maxmin,sia-perfect --dense``, whole Philly, wall s at
1x / 2x / 4x = 82,182 / 164,364 / 328,728 jobs, on a machine shared with other work): FCFS 0.85 /
2.07 / 5.12, MaxMin 1.54 / 4.00 / 6.53, sia-perfect 26.2 / 47.7 / 101.4 (3,140 / 3,443 / 3,241
jobs/s): SIA grows with its jobs, FCFS a little faster (its queues grow with the load's
backlog: a mean wait of 258-326 h here).

Targets on the 2-core machine: FCFS on the whole trace < 3 s, MaxMin < 15 s,
SIA_VC < 120 s. Measured 2026-11-22 (wall s at 1x / 2x / 4x): FCFS 0.55 / 1.18 /
2.35; MaxMin 0.84 / 1.89 / 3.62; SIA_VC 87.0 / 178.8 / 377.6 (945 / 919 / 871
jobs/s; the 2x and 4x runs shared the machine with other work), so all three
grow linearly with the trace.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.data.quotas import quotas_from_load
from sia.data.readers import read_philly
from sia.scheduler.core.simulator import simulate
from sia.scheduler.registry import make_policy

PHILLY = "builtin:philly"  # the trace shipped in the package (sia.data.datasets)


def scaled(jobs: pl.DataFrame, copies: int, dense: bool = False) -> pl.DataFrame:
    """Return ``copies`` back-to-back copies of ``jobs`` (shifted submit times, new ids).

    ``dense``: the copies overlaid in the same pools instead (copy k > 0's submissions moved
    by a seeded 0-10 minute offset per job), for pools ``copies`` times as busy; the caller
    multiplies the quotas by ``copies``.
    """
    if copies == 1:
        return jobs
    if dense:
        rng = np.random.default_rng(0)
        return pl.concat([jobs.with_columns(
            pl.col("submit_time") + pl.Series(rng.integers(0, 600, jobs.height) * (k > 0),
                                              dtype=pl.Float64),
            (pl.col("job_id") + f"#{k}").alias("job_id")) for k in range(copies)]
        ).sort("submit_time", maintain_order=True)
    span = float(jobs["submit_time"].max() - jobs["submit_time"].min()) + 1.0
    parts = [
        jobs.with_columns(
            (pl.col("submit_time") + k * span).alias("submit_time"),
            (pl.col("job_id") + f"#{k}").alias("job_id"),
        )
        for k in range(copies)
    ]
    return pl.concat(parts)


def parse_options(items: list[str]) -> dict:
    """``KEY=VALUE`` strings to a dict of policy options (VALUE read as YAML); a ConfigError
    names an item without ``=``."""
    import yaml

    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ConfigError(f"--option {item!r}: expected KEY=VALUE, e.g. dedicated_order=repay")
        out[key] = yaml.safe_load(value)
    return out


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=PHILLY)
    ap.add_argument("--policies", default="fcfs,maxmin,ssf,gssf,sia-vc")
    ap.add_argument("--scales", default="1,2,4")
    ap.add_argument("--dense", action="store_true",
                    help="overlay the copies in the same pools (quotas x scale): pools that "
                         "many times as busy, instead of a trace that many times as long")
    ap.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                    help="a policy option for every policy (repeatable; VALUE read as YAML)")
    args = ap.parse_args()
    options = parse_options(args.option)

    t = time.perf_counter()
    jobs, report = read_philly(args.trace, on_bad_rows="drop")
    pools = quotas_from_load(jobs, seed=0)
    print(f"read {jobs.height} jobs, {pools.height} pools, {int(pools['quota_gpus'].sum())} GPUs "
          f"({report.rows_dropped} bad rows dropped) in {time.perf_counter() - t:.2f} s")

    rows = []
    for name in args.policies.split(","):
        try:
            make_policy(name, **options)
        except ConfigError as exc:
            print(f"skip {name}: {exc}")
            continue
        for scale in (int(s) for s in args.scales.split(",")):
            data = scaled(jobs, scale, args.dense)
            quotas = (pools.with_columns(pl.col("quota_gpus") * scale) if args.dense
                      else pools)
            t = time.perf_counter()
            res = simulate(data, quotas, make_policy(name, **options))
            wall = time.perf_counter() - t
            wait_h = float((res["start_time"] - res["submit_time"]).mean()) / 3600
            rows.append((name, scale, data.height, wall, data.height / wall,
                         int(res["opportunistic"].sum()), wait_h))
            print(f"  {name} x{scale}: {wall:.2f} s", flush=True)

    print()
    print(f"{'policy':<8} {'scale':>5} {'jobs':>8} {'wall s':>8} {'jobs/s':>10} "
          f"{'opportun.':>9} {'mean wait h':>11}")
    for name, scale, n, wall, rate, opp, wait_h in rows:
        print(f"{name:<8} {scale:>5} {n:>8} {wall:>8.2f} {rate:>10.0f} {opp:>9} {wait_h:>11.2f}")


if __name__ == "__main__":
    main()
