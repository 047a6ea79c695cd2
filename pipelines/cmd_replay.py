"""`sia replay`: replay a trace (or a synthetic workload) under a policy and score it against FCFS."""

from __future__ import annotations

import inspect
import json
import time
from pathlib import Path
from typing import Annotated

import polars as pl
import typer
from rich.console import Console
from rich.table import Table
from sia.data.errors import ConfigError
from sia.pipelines import inputs
from sia.scheduler.metrics import DAY_S, compare
from sia.scheduler.registry import POLICY_NAMES, make_policy, policy_class
from sia.scheduler.simulator import RESULT_COLUMNS, simulate

#: Replays with at least this many jobs show a progress bar.
PROGRESS_FROM_JOBS = 20_000

HELP = """Replay a workload under a scheduling policy and compare it with FCFS.

The workload is a trace (any format `sia ingest` reads, or a canonical
folder) or a synthetic SIA workload (the default). The policy and FCFS (the
no-sharing baseline) are both replayed on the same jobs and quotas; metrics
count only jobs submitted after the warm-up.

Writes DIR/jobs.parquet (job_id, pool, submit_time, duration, num_gpus,
start_time, end_time, opportunistic; durations after --speedup),
DIR/pools.parquet (the quotas used) and DIR/summary.json (the metrics).

\b
Examples:
  sia replay --policy maxmin --out out/replay/maxmin
  sia replay ../shared/traces/philly/philly.csv --clean --policy fcfs --out out/philly-fcfs
"""


def _policy_options(name: str, seed: int) -> dict:
    """Return the keyword options to build policy ``name`` with (``seed`` when it takes one)."""
    params = inspect.signature(policy_class(name)).parameters
    return {"seed": seed} if "seed" in params else {}


def replay_workload(jobs: pl.DataFrame, pools: pl.DataFrame, policy: str, *, speedup: float,
                    tick_s: float, warmup_s: float, seed: int = 0,
                    progress: bool = False) -> tuple[pl.DataFrame, pl.DataFrame, dict]:
    """Replay ``policy`` and FCFS; return (policy result, FCFS result, summary dict).

    The summary holds :func:`sia.scheduler.metrics.compare`'s metrics plus the
    policy, its options and the replay's wall time in seconds.
    """
    options = _policy_options(policy, seed)
    timings = {}
    t = time.perf_counter()
    res = simulate(jobs, pools, make_policy(policy, **options), tick_s=tick_s, speedup=speedup,
                   progress=progress)
    timings["policy_s"] = time.perf_counter() - t
    if policy.strip().lower() == "fcfs":
        base = res
        timings["baseline_s"] = 0.0
    else:
        t = time.perf_counter()
        base = simulate(jobs, pools, make_policy("fcfs"), tick_s=tick_s, speedup=speedup,
                        progress=progress)
        timings["baseline_s"] = time.perf_counter() - t
    _, summary = compare(res, base, warmup_s=warmup_s, pools=pools)
    summary = {
        "policy": policy,
        "policy_options": options,
        "baseline": "fcfs",
        "speedup_factor": speedup,
        "tick_s": tick_s,
        **summary,
        "wall_time_s": timings,
    }
    return res, base, summary


def summary_table(summary: dict) -> Table:
    """Return a rich table of the headline metrics of a replay summary."""
    def fmt(x, spec=".3g"):
        return "-" if x is None else format(x, spec)

    table = Table(title=f"{summary['policy']} vs FCFS ({summary['n_jobs']} jobs after warm-up)")
    table.add_column("metric")
    table.add_column("value", justify="right")
    rows = [
        ("mean speedup", fmt(summary["mean_speedup"])),
        ("geometric mean speedup", fmt(summary["geomean_speedup"])),
        ("p5 / p95 speedup", f"{fmt(summary['p5_speedup'])} / {fmt(summary['p95_speedup'])}"),
        ("jobs slowed (%)", fmt(summary["pct_slowed"], ".2f")),
        ("total slowdown (min)", fmt(summary["total_slowdown_min"], ".1f")),
        ("max slowdown (min)", fmt(summary["max_slowdown_min"], ".1f")),
        ("mean queueing delay (min)", fmt(_div(summary["mean_queue_delay_s"], 60.0), ".1f")),
        ("  under FCFS (min)", fmt(_div(summary["mean_queue_delay_baseline_s"], 60.0), ".1f")),
        ("GPU utilization (FCFS)",
         f"{fmt(summary.get('utilization'))} ({fmt(summary.get('utilization_baseline'))})"),
    ]
    for name, value in rows:
        table.add_row(name, value)
    return table


def _div(x: float | None, d: float) -> float | None:
    return None if x is None else x / d


def register(app: typer.Typer) -> None:
    """Add the `replay` command to ``app``."""

    @app.command("replay", help=HELP)
    def replay(
        trace: inputs.TraceArg = None,
        policy: Annotated[str, typer.Option(
            "--policy", help="Policy to replay: " + ", ".join(POLICY_NAMES) + ".",
            show_default=False)] = ...,
        out: Annotated[Path, typer.Option(
            "--out", help="Folder to write jobs.parquet, pools.parquet and summary.json into.",
            show_default=False)] = ...,
        speedup: Annotated[float, typer.Option(
            "--speedup", help="Divide every job's duration by this factor (the paper uses 10).")
        ] = 1.0,
        tick: Annotated[float, typer.Option(
            "--tick", help="Seconds between the periodic scheduling ticks.")] = 300.0,
        warmup_days: Annotated[float, typer.Option(
            "--warmup-days", help="Days after the first submission whose jobs are not scored.")
        ] = 2.0,
        synthetic: inputs.SyntheticOpt = None,
        fmt: inputs.FormatOpt = "auto",
        map_: inputs.MapOpt = None,
        pool_from: inputs.PoolFromOpt = None,
        time_unit: inputs.TimeUnitOpt = "s",
        clean: inputs.CleanOpt = False,
        quotas: inputs.QuotasOpt = None,
        load_range: inputs.LoadRangeOpt = "0.6,1.1",
        seed: inputs.SeedOpt = 0,
        days: inputs.DaysOpt = None,
    ) -> None:
        if not speedup > 0:
            raise ConfigError(f"--speedup must be > 0, not {speedup}")
        if not tick > 0:
            raise ConfigError(f"--tick must be > 0 seconds, not {tick}")
        if not warmup_days >= 0:
            raise ConfigError(f"--warmup-days must be >= 0, not {warmup_days}")
        policy_class(policy)  # fail on an unknown policy before reading anything
        wl = inputs.workload_from_options(trace, synthetic, fmt, map_, pool_from, time_unit,
                                          clean, quotas, load_range, seed, days)
        res, _, summary = replay_workload(
            wl.jobs, wl.pools, policy, speedup=speedup, tick_s=tick,
            warmup_s=warmup_days * DAY_S, seed=seed,
            progress=wl.jobs.height >= PROGRESS_FROM_JOBS,
        )
        summary = {"source": wl.source, "seed": seed, **summary}
        out.mkdir(parents=True, exist_ok=True)
        res.select(RESULT_COLUMNS).write_parquet(out / "jobs.parquet")
        wl.pools.write_parquet(out / "pools.parquet")
        (out / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
        Console().print(summary_table(summary))
        typer.echo(f"wrote {out / 'jobs.parquet'}, {out / 'pools.parquet'}, "
                   f"{out / 'summary.json'}")
