"""`sia features`: the Table 9 feature table of a trace, as Parquet."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated

import typer
from sia.data.errors import ConfigError
from sia.data.paths import output_root
from sia.pipelines import inputs

HELP = """Build the SIA Table 9 feature table of a trace and write it as Parquet.

One row per (window k, pool, prediction time t) on a grid common to all pools
(every --grid-s seconds from the first submission to the last): the periodic,
recent-arrival, recent-completion and future-completion features (only what is
known at t), the labels label_arrival (a job arrives in (t, t+k]) and
label_load_gpus (GPUs arriving in (t, t+k]), and running_jobs / pending_jobs.

Completions need a schedule: when the trace has no start_time and end_time
columns, it is replayed under FCFS (each pool alone on its quota) first.

\b
Examples:
  sia features builtin:philly --clean --out out/philly_features.parquet
  sia features --synthetic base --days 7 --out out/synth_features.parquet
  sia features out/philly --windows 5,60 --grid-s 600
"""


def register(app: typer.Typer) -> None:
    """Add the `features` command to ``app``."""

    @app.command("features", help=HELP)
    def features(
        trace: inputs.TraceArg = None,
        out: Annotated[Path | None, typer.Option(
            "--out", help="Parquet file to write (default: OUTPUT_ROOT/features.parquet).",
            show_default=False)] = None,
        grid_s: Annotated[float, typer.Option(
            "--grid-s", help="Seconds between prediction times.")] = 300.0,
        windows: Annotated[str, typer.Option(
            "--windows", help="Window lengths k in minutes, comma separated.")] = "5,60,720",
        synthetic: inputs.SyntheticOpt = None,
        fmt: inputs.FormatOpt = "auto",
        map_: inputs.MapOpt = None,
        pool_from: inputs.PoolFromOpt = None,
        arrival: inputs.ArrivalOpt = None,
        time_unit: inputs.TimeUnitOpt = "s",
        clean: inputs.CleanOpt = False,
        quotas: inputs.QuotasOpt = None,
        load_range: inputs.LoadRangeOpt = "0.6,1.1",
        seed: inputs.SeedOpt = 0,
        days: inputs.DaysOpt = None,
        allow_implausible: inputs.AllowImplausibleOpt = False,
        max_rows: inputs.MaxRowsOpt = None,
        max_jobs: inputs.MaxJobsOpt = None,
    ) -> None:
        from sia.features.table9 import (
            MAX_ROWS,
            build_features,
            check_feature_rows,
            grid_count,
        )

        if not (grid_s > 0 and math.isfinite(grid_s)):
            raise ConfigError(f"--grid-s {grid_s}: must be a finite positive number of seconds")
        wins = inputs.parse_windows(windows)
        out_path = Path(out) if out is not None else output_root() / "features.parquet"
        if out_path.suffix.lower() != ".parquet":
            raise ConfigError(f"--out {out_path}: expected a .parquet file name")
        from sia.pipelines.output import check_file, write_parquet

        check_file(out_path)  # an unusable --out fails before the work
        t0 = time.perf_counter()
        max_rows = inputs.check_max(max_rows, "--max-rows")
        wl = inputs.workload_from_options(trace, synthetic, fmt, map_, pool_from, time_unit,
                                          clean, quotas, load_range, seed, days,
                                          allow_implausible=allow_implausible, max_jobs=max_jobs,
                                          arrival=arrival)
        typer.echo(f"workload: {wl.source}: {wl.jobs.height:,} jobs, {wl.pools.height} pools")
        # the table's size before any work (the FCFS replay included): the grid spans the
        # submissions
        check_feature_rows(wl.pools.height, grid_count(wl.jobs["submit_time"].to_numpy(), grid_s),
                           len(set(wins)), grid_s, max_rows)
        sched = _schedule(wl)
        t1 = time.perf_counter()
        table = build_features(sched, grid_s=grid_s, windows_min=wins,
                               pools=wl.pools["pool"].to_list(),
                               max_rows=MAX_ROWS if max_rows is None else max_rows)
        t_build = time.perf_counter() - t1
        write_parquet(table, out_path)  # through a temporary name: never a partial file
        _report(table, wins, t_build)
        typer.echo(f"wrote {out_path} (total {time.perf_counter() - t0:.2f} s)")


def _schedule(wl):
    """Return the schedule the features are built from: the trace's own start and end times
    when it has them, else an FCFS replay of it (printed)."""
    from sia.features.schedule import has_schedule, schedule_from_columns

    if has_schedule(wl.jobs):
        sched = schedule_from_columns(wl.jobs, where=wl.source)
        how = "the trace's own start_time/end_time (seconds, same clock as submit_time)"
    else:
        t1 = time.perf_counter()
        sched = inputs.fcfs_schedule(wl.jobs, wl.pools)
        how = f"FCFS replay ({time.perf_counter() - t1:.2f} s)"
    typer.echo(f"schedule: {how}")
    return sched


def _report(table, wins: list[int], t_build: float) -> None:
    """Print the feature table's shape and, per window, its positive rate and mean load."""
    import polars as pl
    from sia.features.table9 import FEATURE_COLUMNS

    n_grid = table["t"].n_unique() if table.height else 0
    typer.echo(
        f"features: {table.height:,} rows x {table.width} columns "
        f"({table['pool'].n_unique() if table.height else 0} pools x {n_grid:,} times x "
        f"{len(set(wins))} windows; {len(FEATURE_COLUMNS)} features), "
        f"{table.estimated_size() / 2**20:.1f} MB in memory, built in {t_build:.2f} s"
    )
    if table.height:
        rates = (table.group_by("k_min")
                 .agg(pl.col("label_arrival").mean().alias("rate"),
                      pl.col("label_load_gpus").mean().alias("load"))
                 .sort("k_min"))
        for r in rates.iter_rows(named=True):
            typer.echo(f"  k = {r['k_min']:>4} min: positive rate (a job arrives in the "
                       f"next k) {r['rate']:.3f}, mean GPUs arriving {r['load']:.2f}")
