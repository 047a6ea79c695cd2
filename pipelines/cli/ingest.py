"""`sia ingest`: read a trace in any supported format and write canonical Parquet."""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Annotated

import typer
from sia.data.errors import ConfigError
from sia.data.plausibility import Thresholds
from sia.pipelines import inputs

HELP = """Read a job trace and write it in the canonical format.

Writes OUT/jobs.parquet (one row per job: job_id, pool, submit_time and
duration in seconds since the first submission, num_gpus, tag, user,
preemptible, time_limit in seconds (null: none), state, then the trace's
extra columns), OUT/pools.parquet (pool,
quota_gpus[, target_load]) and OUT/report.json (rows read, kept, dropped by
kind, left out, the clock origin, where quotas came from).

Formats (detected from the header unless --format says): builtin:philly (the
real Philly trace shipped in the package, CC-BY-4.0, Microsoft); the per-VC Philly
CSV (timestamp,duration,num_gpus,gpu_time,cluster); Helios cluster_log.csv
(CPU-only jobs are left out and counted; a cluster_gpu_number.csv beside it
gives the quotas); a Slurm `sacct --parsable2` export, gzip'd or not (pools
from Partition, or --pool-from account|user; a job arrives at its Eligible
time when the export has it, or with --arrival submit at its Submit; CPU-only
jobs, jobs that never started, were cancelled while pending, are still
running or ran 0 s are left out and counted; a job run past its time limit is
a warning); any CSV/Parquet file, folder or glob with --map and --pool-from;
a canonical folder.

A bad row (missing, non-numeric or non-finite value, duration <= 0, zero
GPUs, duplicate id or row, unparsable time) stops the read with the file, row
and column; --clean drops such rows and counts them in the report instead.
Implausible values (a job wider than --warn-gpus, longer than --warn-days, a
quota from load that rests on one job) are kept and warned about in the report.
Times that cannot be right (submissions spanning centuries, a median job of
years: a trace in ms read as seconds) stop the read with the unit that fits;
--allow-implausible keeps them, with a warning.

\b
Examples:
  sia ingest builtin:philly --clean --out out/philly
  sia ingest helios/Venus/cluster_log.csv --clean --out out/venus
  sia ingest ../shared/traces/graham/graham.sacct.txt.gz --out out/graham
  sia ingest mytrace/ --pool-from file-stem \\
      --map submit_time=submitted,duration=runtime,num_gpus=gpus --out out/mine
  sia ingest jobs.parquet --time-unit ms --map pool=queue --out out/pq
"""


def thresholds(gpus: int, days: float, quota_factor: float) -> Thresholds:
    """Return the plausibility thresholds of the ``--warn-*`` options (ConfigError when not > 0)."""
    for option, value in (("--warn-gpus", gpus), ("--warn-days", days),
                          ("--warn-quota-factor", quota_factor)):
        if not (math.isfinite(value) and value > 0):
            raise ConfigError(f"{option} must be a finite number > 0, not {value}")
    return Thresholds(max_gpus=gpus, max_duration_days=days, quota_factor=quota_factor)


def register(app: typer.Typer) -> None:
    """Add the `ingest` command to ``app``."""

    @app.command("ingest", help=HELP)
    def ingest(
        trace: Annotated[Path, typer.Argument(
            help="Trace file, folder or glob (see the formats above).", show_default=False)],
        out: Annotated[Path, typer.Option("--out", help="Folder to write jobs.parquet, "
                                          "pools.parquet and report.json into.",
                                          show_default=False)],
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
        warn_gpus: Annotated[int, typer.Option(
            "--warn-gpus", help="Warn in the report about jobs wider than this many GPUs "
                                "(kept).")] = Thresholds.max_gpus,
        warn_days: Annotated[float, typer.Option(
            "--warn-days", help="Warn in the report about jobs running longer than this many "
                                "days (kept).")] = Thresholds.max_duration_days,
        warn_quota_factor: Annotated[float, typer.Option(
            "--warn-quota-factor", help="Quotas from load: warn about a pool whose quota would "
                                        "be more than this many times smaller without its "
                                        "largest job.")] = Thresholds.quota_factor,
        allow_implausible: inputs.AllowImplausibleOpt = False,
    ) -> None:
        from sia.pipelines.output import check_dir
        from sia.pipelines.workload_io import summary_lines, write_workload

        check_dir(out)  # an unusable --out fails before the trace is read
        t0 = time.perf_counter()
        limits = thresholds(warn_gpus, warn_days, warn_quota_factor)
        wl = inputs.workload_from_options(trace, None, fmt, map_, pool_from, time_unit, clean,
                                          quotas, load_range, seed, days, limits=limits,
                                          allow_implausible=allow_implausible, arrival=arrival)
        t_read = time.perf_counter() - t0
        paths = write_workload(wl, out)
        for line in summary_lines(wl):
            typer.echo(line)
        typer.echo(f"wrote {paths['jobs']}, {paths['pools']}, {paths['report']} "
                   f"(read {t_read:.2f} s, total {time.perf_counter() - t0:.2f} s)")
