"""How every CLI command gets its workload: one function and shared option declarations.

:func:`load_workload` turns a trace path (any format the readers know) or a
synthetic variant into a :class:`Workload` (jobs, pools, cleaning report).
The ``*Arg``/``*Opt`` ``Annotated`` types declare the shared command-line
flags so every command spells them the same way; :func:`workload_from_options`
parses their raw values and calls :func:`load_workload`.

Example (a command module)::

    def register(app):
        @app.command("mycmd")
        def mycmd(trace: inputs.TraceArg = None, synthetic: inputs.SyntheticOpt = None,
                  fmt: inputs.FormatOpt = "auto", map_: inputs.MapOpt = None,
                  pool_from: inputs.PoolFromOpt = None, time_unit: inputs.TimeUnitOpt = "s",
                  clean: inputs.CleanOpt = False, quotas: inputs.QuotasOpt = None,
                  load_range: inputs.LoadRangeOpt = "0.6,1.1", seed: inputs.SeedOpt = 0,
                  days: inputs.DaysOpt = None, arrival: inputs.ArrivalOpt = None):
            wl = inputs.workload_from_options(trace, synthetic, fmt, map_, pool_from,
                                              time_unit, clean, quotas, load_range, seed, days,
                                              arrival=arrival)
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from sia.data.errors import ConfigError, TraceError
from sia.data.formats import FORMATS, arrival_problem, time_unit_problem
from sia.data.plausibility import Thresholds, job_warnings, quota_warnings
from sia.data.units import DAY_S
from sia.data.variants import VARIANTS

# Every command module imports this one for its option declarations, so `sia --help`
# pays for its top level: polars and the readers are imported where they are used.
if TYPE_CHECKING:
    import polars as pl
    from sia.data.schema import CleaningReport

HELIOS_GPU_FILE = "cluster_gpu_number.csv"


@dataclass
class Workload:
    """A workload ready for the pipeline: canonical jobs, pools, what was read, and from where."""

    jobs: pl.DataFrame
    pools: pl.DataFrame
    report: CleaningReport
    source: str


def _pools_from_quota_path(path: Path) -> tuple[pl.DataFrame, str]:
    """Read a quota file or a Helios GPU-number file (told apart by its 'date' column)."""
    import polars as pl
    from sia.data.quotas import read_helios_gpu_numbers, read_quota_file

    if not path.exists():
        raise ConfigError(f"--quotas {path}: no such file")
    from sia.data.paths import check_regular

    check_regular(path, "quota file")
    if path.suffix.lower() != ".parquet":
        try:
            header = pl.read_csv(path, n_rows=0, infer_schema=False, glob=False).columns
        except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
            raise TraceError(f"--quotas {path}: cannot read as CSV: "
                             f"{str(exc).strip().splitlines()[0]}") from exc
        if "date" in header and "quota_gpus" not in header:
            return read_helios_gpu_numbers(path), f"quotas: Helios GPU numbers in {path} (max per VC)"
    return read_quota_file(path), f"quotas: file {path}"


def load_workload(trace: Path | None = None, *, synthetic: str | None = None, fmt: str = "auto",
                  mapping: dict[str, str] | None = None, pool_from: str | None = None,
                  time_unit: str = "s", clean: bool = False, quotas: Path | None = None,
                  load_range: tuple[float, float] = (0.6, 1.1), seed: int = 0,
                  days: float | None = None, limits: Thresholds | None = None,
                  ignore_columns: tuple[str, ...] = (), allow_implausible: bool = False,
                  max_jobs: int | None = None, arrival: str | None = None) -> Workload:
    """Return the :class:`Workload` of a trace or a synthetic variant.

    ``trace`` may be ``builtin:philly``: the Philly trace shipped in the
    package (:mod:`sia.data.datasets`), read as its CSV would be.

    With neither ``trace`` nor ``synthetic``, the synthetic ``base`` workload.
    A synthetic workload uses ``seed`` and ``days`` (default 3) and its own
    pools (8 GPUs each) unless ``quotas`` names a file. For a trace: read with
    :func:`sia.data.readers.read_trace` (``clean`` drops bad rows and counts
    them instead of stopping), keep the first ``days`` days when given (the
    rest is counted in ``report.left_out['after_days']``), and take pools from,
    in order: ``quotas`` (a ``pool,quota_gpus`` CSV/Parquet, or a Helios
    ``cluster_gpu_number.csv``), the canonical directory's ``pools.parquet``,
    a ``cluster_gpu_number.csv`` beside a Helios ``cluster_log.csv``, or
    quotas derived from load (SIA 6.1) with ``load_range`` and ``seed``.
    Implausible values (``limits``, :mod:`sia.data.plausibility`) are kept and
    warned about in ``report.warnings``; times that cannot be right (a span of
    centuries, a median job of years: a wrong unit) are a TraceError suggesting
    the unit that fits, unless ``allow_implausible`` (then a warning) or the trace
    is a canonical folder (``sia ingest`` checked it, or was told to allow it).
    A synthetic workload of more than ``max_jobs`` expected jobs (default
    :data:`sia.data.synthetic.MAX_JOBS`) is a ConfigError before it is generated. ``ignore_columns`` (among
    :data:`IGNORABLE_COLUMNS`) are read as absent: null for every job, as in a
    trace without them (noted in the report). ``arrival`` (``eligible`` or
    ``submit``; None: the reader's default) says when a Slurm sacct export's jobs
    arrive; it is a ConfigError for any other trace and for a synthetic workload.
    """
    import polars as pl
    from sia.data.readers import read_trace, resolve_format
    from sia.data.schema import check_pools

    limits = limits or Thresholds()
    if trace is not None and synthetic is not None:
        raise ConfigError("give either a TRACE or --synthetic, not both")
    if days is not None and not (math.isfinite(days) and days > 0):
        raise ConfigError(f"--days must be a finite number of days > 0, not {days} "
                          "(omit it to keep every day)")
    check_seed(seed)
    if trace is None:
        if arrival is not None:
            raise ConfigError(f"--arrival {arrival} would be ignored: it chooses when a Slurm "
                              "sacct export's jobs arrive, and a synthetic workload has no "
                              "export; drop it")
        return _synthetic_workload(synthetic or "base", seed, days, quotas, max_jobs)

    trace = Path(trace)
    resolved = resolve_format(trace, fmt, mapping=mapping, pool_from=pool_from)
    jobs, report = read_trace(trace, resolved, mapping=mapping, pool_from=pool_from,
                              time_unit=time_unit, on_bad_rows="drop" if clean else "raise",
                              arrival=arrival)
    report.notes.insert(0, f"format: {resolved}")
    _check_time_scale(jobs, report, trace, resolved, time_unit, limits, allow_implausible)
    if ignore_columns:
        jobs = without_columns(jobs, ignore_columns)
        report.notes.append(f"columns ignored: {', '.join(ignore_columns)} (read as absent)")
    if days is not None:
        late = jobs["submit_time"] >= days * DAY_S
        report.leave_out("after_days", int(late.sum()))
        jobs = jobs.filter(~late)
        report.rows_kept = jobs.height
        report.pools = jobs["pool"].n_unique()
    if jobs.height == 0:
        left_out = {k: v for k, v in report.left_out.items() if v}
        raise TraceError(f"{trace}: no jobs left to schedule ({report.to_dict()['dropped']} dropped"
                         + (f", {left_out} left out" if left_out else "") + ")")
    report.warnings.extend(job_warnings(jobs, limits))
    pools, note = _trace_pools(trace, resolved, jobs, report, quotas, load_range, seed, limits)
    report.notes.append(note)
    # Keep only the pools that have jobs (a quota file may list more).
    pools = pools.filter(pl.col("pool").is_in(jobs["pool"].unique().implode()))
    check_pools(pools, jobs, where=note.split(": ", 1)[1])
    return Workload(jobs, pools.sort("pool"), report, str(trace))


def _check_time_scale(jobs: pl.DataFrame, report: CleaningReport, trace: Path, resolved: str,
                      time_unit: str, limits: Thresholds, allow_implausible: bool) -> None:
    """Raise TraceError when the trace's times cannot be right (see
    :func:`sia.data.plausibility.time_scale_problem`); with ``allow_implausible``, or for a
    canonical folder (written by `sia ingest`, which checked it), warn in ``report``."""
    from sia.data.plausibility import time_scale_problem

    unit = time_unit if resolved == "generic" and time_unit in ("s", "ms") else None
    problem = time_scale_problem(jobs, limits, str(trace), unit)
    if problem is None:
        return
    what, message = problem
    if allow_implausible or (resolved == "canonical" and trace.is_dir()):
        how = "--allow-implausible" if allow_implausible else "read from a canonical folder"
        report.warnings.append(f"times: {what}; kept as they are ({how})")
        return
    raise TraceError(message)


#: Optional contract columns a workload can be read without (``trace.ignore_columns``).
IGNORABLE_COLUMNS = ("tag", "user", "time_limit", "state", "hold_time")


def without_columns(jobs: pl.DataFrame, columns: tuple[str, ...]) -> pl.DataFrame:
    """Return ``jobs`` with the optional contract ``columns`` nulled (as a trace without them
    reads); raises ConfigError for a column that is not optional."""
    import polars as pl

    bad = [c for c in columns if c not in IGNORABLE_COLUMNS]
    if bad:
        raise ConfigError(f"ignore_columns: {', '.join(map(repr, bad))} cannot be ignored; "
                          f"choose among {', '.join(IGNORABLE_COLUMNS)}")
    return jobs.with_columns(pl.lit(None, dtype=jobs.schema[c]).alias(c)
                             for c in columns if c in jobs.columns)


def _synthetic_workload(variant: str, seed: int, days: float | None,
                        quotas: Path | None, max_jobs: int | None = None) -> Workload:
    """Return the synthetic workload ``variant`` (``days`` default 3), its own pools unless
    ``quotas`` names a file."""
    from sia.data.schema import CleaningReport, check_pools
    from sia.data.synthetic import generate_workload

    jobs, pools = generate_workload(variant, seed, days=3.0 if days is None else days,
                                    max_jobs=max_jobs)
    source = f"synthetic:{variant} seed={seed}"
    report = CleaningReport(source=source, rows_read=jobs.height, rows_kept=jobs.height,
                            pools=pools.height)
    if quotas is not None:
        pools, note = _pools_from_quota_path(Path(quotas))
        report.notes.append(note)
    else:
        report.notes.append("quotas: synthetic pool sizes")
    check_pools(pools, jobs)
    return Workload(jobs, pools, report, source)


def _trace_pools(trace: Path, resolved: str, jobs: pl.DataFrame, report: CleaningReport,
                 quotas: Path | None,
                 load_range: tuple[float, float], seed: int, limits: Thresholds
                 ) -> tuple[pl.DataFrame, str]:
    """Return (the pools of a trace, a note saying where they came from): the ``quotas``
    file, a canonical folder's pools.parquet, Helios GPU numbers beside the log, or quotas
    from load (whose implausible values are warned about in ``report``)."""
    import polars as pl
    from sia.data.quotas import quotas_from_load, read_helios_gpu_numbers, trace_span_s

    canonical_pools = trace / "pools.parquet" if trace.is_dir() else None
    helios_gpu = trace.parent / HELIOS_GPU_FILE if resolved == "helios" else None
    if quotas is not None:
        return _pools_from_quota_path(Path(quotas))
    if canonical_pools is not None and resolved == "canonical" and canonical_pools.exists():
        from sia.data.paths import check_regular

        check_regular(canonical_pools, "pools file")
        try:
            return pl.read_parquet(canonical_pools, glob=False), f"quotas: {canonical_pools}"
        except (pl.exceptions.PolarsError, OSError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise TraceError(f"{canonical_pools}: cannot read as Parquet: {first}") from exc
    if helios_gpu is not None and helios_gpu.exists():
        return (read_helios_gpu_numbers(helios_gpu),
                f"quotas: Helios GPU numbers in {helios_gpu} (max per VC)")
    lo, hi = load_range
    pools = quotas_from_load(jobs, load_range, seed)
    report.warnings.extend(quota_warnings(jobs, pools, trace_span_s(jobs), limits))
    return pools, f"quotas: from load, target load per pool U[{lo:g}, {hi:g}], seed {seed} (SIA 6.1)"


# --------------------------------------------------------------------------- option parsing

#: seeds go to numpy, XGBoost and Optuna alike: the range all of them take
MAX_SEED = 2**32 - 1


def check_seed(seed: int, option: str = "--seed") -> int:
    """Return ``seed`` when it is a whole number in [0, 2^32 - 1]; ConfigError otherwise."""
    if isinstance(seed, bool) or not isinstance(seed, int) or not 0 <= seed <= MAX_SEED:
        raise ConfigError(f"{option} must be a whole number from 0 to {MAX_SEED}, not {seed!r}")
    return seed


#: What MLflow accepts as a registered model alias: letters, digits, "_" and "-", not a
#: version name (v1, V2, ...) nor "latest", at most 255 characters.
_ALIAS_OK = re.compile(r"^[\w\-]{1,255}$")
_ALIAS_VERSION = re.compile(r"^[vV]\d+$")


def check_alias(alias: str, option: str = "--alias") -> str:
    """Return ``alias`` when MLflow's registry can set it; ConfigError naming the rule otherwise.

    Checked before any work: MLflow refuses a bad alias only when the trained
    models are registered, at the very end.
    """
    if not _ALIAS_OK.match(alias or ""):
        example = re.sub(r"[^\w-]", "_", alias or "")[:255] or "champion"
        raise ConfigError(f"{option} {alias!r}: a registry alias may only hold letters, digits, "
                          f"'_' and '-' (1 to 255 of them), e.g. {example!r}")
    if _ALIAS_VERSION.match(alias) or alias.lower() == "latest":
        raise ConfigError(f"{option} {alias!r}: MLflow reserves 'latest' and version names "
                          "(v1, v2, ...); choose another alias")
    return alias


def parse_mapping(items: list[str] | None) -> dict[str, str]:
    """Return {contract column: source column} from ``--map`` values (``a=b``, comma-separable)."""
    mapping: dict[str, str] = {}
    for item in items or []:
        for part in item.split(","):
            part = part.strip()
            if not part:
                continue
            if "=" not in part:
                raise ConfigError(
                    f"--map {part!r}: expected CONTRACT_COLUMN=YOUR_COLUMN, e.g. submit_time=submitted"
                )
            dst, src = (x.strip() for x in part.split("=", 1))
            if not dst or not src:
                raise ConfigError(f"--map {part!r}: both sides of '=' must be column names")
            if mapping.get(dst, src) != src:
                raise ConfigError(f"--map maps {dst!r} twice ({dst}={mapping[dst]} and "
                                  f"{dst}={src}); keep one of them")
            mapping[dst] = src
    return mapping


def parse_load_range(text: str | tuple[float, float]) -> tuple[float, float]:
    """Return (low, high) from ``--load-range`` text such as ``0.6,1.1``."""
    if isinstance(text, tuple):
        return text
    parts = [p.strip() for p in str(text).split(",")]
    try:
        lo, hi = (float(p) for p in parts)
    except ValueError:
        raise ConfigError(f"--load-range {text!r}: expected two numbers LOW,HIGH such as 0.6,1.1") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise ConfigError(f"--load-range {text!r}: expected finite numbers such as 0.6,1.1")
    if not (0 < lo <= hi):
        raise ConfigError(f"--load-range {text!r}: need 0 < LOW <= HIGH")
    return lo, hi


def workload_from_options(trace: Path | None, synthetic: str | None, fmt: str,
                          map_: list[str] | None, pool_from: str | None, time_unit: str,
                          clean: bool, quotas: Path | None, load_range: str, seed: int,
                          days: float | None, limits: Thresholds | None = None, *,
                          allow_implausible: bool = False,
                          max_jobs: int | None = None, arrival: str | None = None) -> Workload:
    """Parse the shared options' raw values and return :func:`load_workload`'s result."""
    if fmt not in FORMATS:
        raise ConfigError(f"--format {fmt!r}: choose one of {', '.join(FORMATS)}")
    if arrival is not None and arrival_problem(arrival):
        raise ConfigError(arrival_problem(arrival))
    problem = time_unit_problem(time_unit)
    if problem:
        raise ConfigError(f"--time-unit: {problem}")
    return load_workload(trace, synthetic=synthetic, fmt=fmt, mapping=parse_mapping(map_),
                         pool_from=pool_from, time_unit=time_unit, clean=clean, quotas=quotas,
                         load_range=parse_load_range(load_range), seed=seed, days=days,
                         limits=limits, allow_implausible=allow_implausible,
                         max_jobs=check_max(max_jobs, "--max-jobs"), arrival=arrival)


# --------------------------------------------------------------------------- shared options

TraceArg = Annotated[Path | None, typer.Argument(
    help="Trace to read: builtin:philly (the real Philly trace shipped in the package; "
         "add --clean for its 65 duplicate rows), a Philly CSV or job log (JSON), a Helios "
         "CSV, a Slurm `sacct --parsable2` export (gzip'd or not; pools from Partition or "
         "--pool-from), an Alibaba PAI "
         "folder (pai_job_table.csv), any CSV/Parquet file, folder or glob "
         "(with --map), or a canonical folder from `sia ingest`/`sia generate`. "
         "Omit it to use the synthetic workload.",
    show_default=False)]
SyntheticOpt = Annotated[str | None, typer.Option(
    "--synthetic",
    help="Use a synthetic SIA workload instead of a trace: " + ", ".join(VARIANTS) + ".",
    show_default=False)]
FormatOpt = Annotated[str, typer.Option(
    "--format", help="Trace format: " + ", ".join(FORMATS)
    + " (auto: from the header; --map or --pool-from mean generic, except on a Slurm sacct "
      "export, which takes --pool-from).")]
MapOpt = Annotated[list[str] | None, typer.Option(
    "--map", help="Map a contract column to yours: CONTRACT=YOURS, repeatable or comma "
                  "separated, e.g. --map submit_time=submitted,num_gpus=gpus. Contract columns: "
                  "job_id, pool, submit_time, duration, num_gpus, tag, user, preemptible, "
                  "time_limit (the requested limit, in the durations' unit; empty: none), "
                  "state, hold_time (seconds a job was known, held, before its submit_time; "
                  "durations' unit); without a duration, start_time and end_time give it (end - start).",
    show_default=False)]
PoolFromOpt = Annotated[str | None, typer.Option(
    "--pool-from", help="Where the pool comes from: a column name, const:NAME (one pool), "
                        "or file-stem (each file of a folder/glob is a pool). Default: the "
                        "'pool' column; for a Slurm sacct export, its Partition (account, user "
                        "or another field name choose those).", show_default=False)]
ArrivalOpt = Annotated[str | None, typer.Option(
    "--arrival", help="Slurm sacct exports: when a job arrives. eligible (the default): at its "
                      "Eligible time when the export has that field (a job held by a "
                      "dependency, --begin or a hold arrives when Slurm could first run it, "
                      "kept within its Submit and Start). submit: at its Submit time, Eligible "
                      "ignored (the report counts the jobs it would have held). Other formats "
                      "refuse it.", show_default=False)]
TimeUnitOpt = Annotated[str, typer.Option(
    "--time-unit", help="Generic traces: submission times (and durations and time limits) as "
                        "numbers in s or ms, or 'datetime' for date-time submissions "
                        "(durations and time limits in seconds; "
                        "'datetime:FORMAT' gives the format, e.g. 'datetime:%m/%d/%Y %H:%M', "
                        "for dates whose day and month order the values leave open).")]
CleanOpt = Annotated[bool, typer.Option(
    "--clean", help="Drop bad rows (missing or non-numeric values, duration <= 0, zero GPUs, "
                    "duplicates, unparsable times) and count them in the report, instead of "
                    "stopping at the first one.")]
QuotasOpt = Annotated[Path | None, typer.Option(
    "--quotas", help="Pool quotas: a CSV/Parquet with columns pool,quota_gpus, or a Helios "
                     "cluster_gpu_number.csv (a VC's quota = its most GPUs on any day). "
                     "Default: the trace's own (canonical folder, Helios file beside the log), "
                     "else derived from load (see --load-range).", show_default=False)]
LoadRangeOpt = Annotated[str, typer.Option(
    "--load-range", help="Quotas from load (SIA 6.1): each pool's target load is drawn "
                         "uniformly in LOW,HIGH and quota = max(ceil(GPU-seconds / "
                         "(span x load)), widest job).")]
SeedOpt = Annotated[int, typer.Option("--seed", help="Seed for every random draw (synthetic "
                                                     "workload, target loads).")]
DaysOpt = Annotated[float | None, typer.Option(
    "--days", help="Synthetic: days to generate (default 3). Trace: keep only jobs submitted "
                   "in the first DAYS days.", show_default=False)]


AllowImplausibleOpt = Annotated[bool, typer.Option(
    "--allow-implausible", help="Keep times that cannot be right (submissions spanning "
    "centuries, a median job of years: usually a trace in ms read as seconds) as they are, "
    "with a warning in the report, instead of stopping with the unit that fits.")]
MaxJobsOpt = Annotated[int | None, typer.Option(
    "--max-jobs", help="Synthetic workloads: refuse to generate more than this many expected "
    "jobs (default 10,000,000; memory grows with them).", show_default=False)]
MaxRowsOpt = Annotated[int | None, typer.Option(
    "--max-rows", help="Refuse to build a feature table of more than this many rows (pools x "
    "times x windows; default 20,000,000, some 2 GiB; estimated before any work).",
    show_default=False)]


def check_max(value: int | None, option: str) -> int | None:
    """Return a size limit option's value (None: the default) when it is a whole number >= 1."""
    if value is not None and (isinstance(value, bool) or value < 1):
        raise ConfigError(f"{option} must be a whole number >= 1, not {value}")
    return value


def parse_windows(text: str, option: str = "--windows") -> tuple[int, ...]:
    """Return window lengths in whole minutes from text such as ``5,60,720``."""
    try:
        windows = tuple(int(p) for p in text.split(",") if p.strip())
    except ValueError:
        raise ConfigError(f"{option} {text!r}: expected whole minutes such as 5,60,720") from None
    if not windows or min(windows) <= 0:
        raise ConfigError(f"{option} {text!r}: expected positive minutes such as 5,60,720")
    return windows


def fcfs_schedule(jobs: pl.DataFrame, pools: pl.DataFrame) -> pl.DataFrame:
    """Return ``jobs`` with ``start_time`` / ``end_time`` (s) of the FCFS replay (the baseline schedule)."""
    from sia.features.schedule import with_schedule
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.registry import make_policy

    return with_schedule(jobs, simulate(jobs, pools, make_policy("fcfs")))


def jobs_in_days(jobs: pl.DataFrame, start_day: float | None, end_day: float | None,
                 ) -> pl.DataFrame:
    """Return the jobs submitted in [start_day, end_day) days since the trace start.

    ``None`` leaves that end open. The caller decides what an empty window means.
    """
    import polars as pl

    lo = -math.inf if start_day is None else start_day * DAY_S
    hi = math.inf if end_day is None else end_day * DAY_S
    return jobs.filter((pl.col("submit_time") >= lo) & (pl.col("submit_time") < hi))


#: What a learned forecaster reads of the jobs before a replay (see :func:`jobs_before`).
PRIOR_COLUMNS: tuple[str, ...] = ("pool", "num_gpus", "submit_time", "duration", "tag", "user",
                                  "time_limit")


def jobs_before(jobs: pl.DataFrame, start_day: float | None) -> pl.DataFrame | None:
    """Return the jobs submitted before day ``start_day`` (None when the replay starts with the
    trace): the finished history a learned forecaster starts a replay with
    (:meth:`sia.models.forecaster.LearnedForecaster.prime`), as a running cluster would."""
    if start_day is None:
        return None
    prior = jobs_in_days(jobs, None, start_day)
    # the time limits only when there are some: a trace without them keys its replays as before
    return prior.select(c for c in PRIOR_COLUMNS if c in prior.columns
                        and (c != "time_limit" or prior[c].is_not_null().any()))


def warmup_covers_all(jobs: pl.DataFrame, warmup_days: float, where: str) -> str | None:
    """The problem (a message starting with ``where``, the option or key of the warm-up) when
    every job of ``jobs`` is submitted within ``warmup_days`` of the first, else None: a replay
    scores only the jobs submitted after its warm-up (an experiment's first submission is no
    earlier than the window's), so none would be scored. Asked before any training or replay
    (`sia evaluate` stops on it, `sia replay` warns)."""
    if jobs.height == 0:
        return None
    first, last = (float(x) / DAY_S for x in (jobs["submit_time"].min(), jobs["submit_time"].max()))
    if last >= first + warmup_days:
        return None
    return (f"{where}: the replay window's jobs are submitted on days {first:.1f}-{last:.1f}, "
            f"all within the {warmup_days:g}-day warm-up, so no job would be scored; shorten "
            "the warm-up or replay more days (an earlier replay start; with on-the-fly training, "
            "fewer training or validation days before it)")


def replay_window(jobs: pl.DataFrame, start_day: float | None, end_day: float | None, *,
                  where: str = "--replay-start-day / --replay-end-day",
                  ) -> tuple[pl.DataFrame, float]:
    """Return (the jobs submitted in [start_day, end_day) days since the trace start, the
    window's length in seconds).

    Open ends (None) default to the window's first / last submission for the
    length (at least 1 s). Times are kept as they are (time of day matters to
    the predictors). Raises ConfigError starting with ``where`` (the options
    or config key that set the window) when the window holds no job.
    """
    window = jobs_in_days(jobs, start_day, end_day)
    if window.height == 0:
        last = float(jobs["submit_time"].max()) / DAY_S if jobs.height else 0.0
        raise ConfigError(f"{where}: no job is submitted in the replay window [{start_day}, "
                          f"{end_day}) days; the trace's last submission is on day {last:.1f}")
    first = float(window["submit_time"].min()) if start_day is None else start_day * DAY_S
    last = float(window["submit_time"].max()) if end_day is None else end_day * DAY_S
    return window, max(last - first, 1.0)
