"""Readers that turn real trace formats into the trace contract (DESIGN.md section 3).

Every reader returns ``(jobs, report)``: a canonical job table (through
:func:`sia.data.schema.validate`, with each row's file and 1-based data row
number for error messages) and a :class:`CleaningReport`. Submission times
become seconds since the trace's first (kept) submission; the origin is
recorded in ``report.first_submit``. Unknown extra columns are kept, never an
error. ``on_bad_rows="raise"`` (default) stops at the first bad row naming
file, row and column; ``"drop"`` drops and counts them.

Formats:

* Philly per-VC CSV (``timestamp,duration,num_gpus,gpu_time,cluster``):
  :func:`read_philly`.
* The original Philly job log (``cluster_job_log``, JSON, with each job's
  attempts and machines): :func:`read_philly_joblog`.
* Helios ``cluster_log.csv``: :func:`read_helios`.
* Alibaba PAI (``pai_job_table.csv`` with its task and group tag tables):
  :func:`read_pai`.
* Slurm ``sacct --parsable2`` exports (``|``-separated, optionally gzip'd):
  :func:`sia.data.sacct.read_sacct`.
* Any CSV / Parquet file, folder or glob with a column mapping:
  :func:`read_generic`.
* Canonical Parquet directories written by ``sia ingest`` / ``sia generate``
  (``jobs.parquet`` + ``pools.parquet``): :func:`read_canonical`.

:func:`read_trace` dispatches on the format, detecting it from the header
when asked (``fmt="auto"``).
"""

from __future__ import annotations

import csv
import glob as globmod
import json
import re
from collections.abc import Mapping
from pathlib import Path

import polars as pl
from sia.data.datasets import builtin_format, is_builtin, read_builtin_rows
from sia.data.errors import ConfigError, TraceError
from sia.data.formats import DATETIME_FORMAT_PREFIX, FORMATS, arrival_problem, time_unit_problem
from sia.data.paths import check_regular, is_glob
from sia.data.schema import (
    INTERNAL_PREFIX,
    JOB_SCHEMA,
    NULLABLE_EXTRA_SCHEMA,
    REGION_COLUMN,
    SOURCE_FILE,
    SOURCE_ROW,
    BadRows,
    CleaningReport,
    OnBadRows,
    _cast_numeric,
    _file,
    _optional_seconds,
    check_text_column,
    flag_exact_duplicates,
    is_internal,
    refuse_internal_columns,
    user_columns,
    validate,
)

#: a generic trace without durations may give each job's start and end instead
SPAN_COLUMNS = ("start_time", "end_time")
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
PAI_JOB_COLUMNS = ("job_name", "inst_id", "user", "status", "start_time", "end_time")
PAI_TASK_COLUMNS = ("job_name", "task_name", "inst_num", "status", "start_time", "end_time",
                    "plan_cpu", "plan_mem", "plan_gpu", "gpu_type")
PAI_GROUP_COLUMNS = ("inst_id", "user", "gpu_type_spec", "group", "workload")
HELIOS_COLUMNS = ("job_id", "user", "vc", "gpu_num", "cpu_num", "node_num", "state",
                  "submit_time", "start_time", "end_time", "duration", "queue")
_ABS = INTERNAL_PREFIX + "abs_submit"  # absolute submission time (seconds) kept through validate
_DT = INTERNAL_PREFIX + "dt"
_DERIVED_ID = INTERNAL_PREFIX + "derived_id"  # a generic file's <stem>-<row> job ids
_JSON = INTERNAL_PREFIX + "json"  # a job log record as canonical JSON (duplicates)
_PAI_GPUS = INTERNAL_PREFIX + "gpus"
_PAI_FIRST_START = INTERNAL_PREFIX + "first_start"
_PAI_LAST_END = INTERNAL_PREFIX + "last_end"


# --------------------------------------------------------------------------- helpers

def _read_csv_strings(path: Path) -> pl.DataFrame:
    """Read a CSV with every column as strings, adding file and 1-based row columns.

    Blank lines are not rows: they are skipped (readers note how many with
    :func:`_blank_note`),
    but they keep their place in the row numbering, so row N is line N + 1 of
    the file.
    """
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    check_regular(path)
    if path.is_file():
        with path.open("rb") as fh:
            if fh.read(2) in (b"\xff\xfe", b"\xfe\xff"):
                raise TraceError(f"{path}: UTF-16 text; save the file as UTF-8")
    try:
        df = pl.read_csv(path, infer_schema=False, glob=False)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise TraceError(_csv_problem(path, exc)) from exc
    _check_header(df.columns, path)
    return _drop_blank_rows(_add_source(df, path))


def _check_header(columns: list[str], path: Path | str) -> None:
    """Raise TraceError when a CSV header names a column twice (polars renames the second
    one ``NAME_duplicated_0``, which would silently leave one of them out)."""
    names = set(columns)
    for c in columns:
        m = re.fullmatch(r"(.+)_duplicated_\d+", c)
        if m and m.group(1) in names:
            raise TraceError(f"{path}: the header names column {m.group(1)!r} twice; rename "
                             "or remove one of them")


def _rename(df: pl.DataFrame, renames: dict[str, str], path: Path | str, fmt: str) -> pl.DataFrame:
    """Rename a format's columns onto the contract; a column already named like a target is
    a TraceError (which of the two to use would be a guess)."""
    clash = [dst for src, dst in renames.items() if src in df.columns and dst in df.columns]
    if clash:
        src = next(s for s, d in renames.items() if d == clash[0])
        raise TraceError(
            f"{path}: column {clash[0]!r} clashes with the {fmt} column {src!r} the reader "
            f"turns into {clash[0]!r}; rename or remove it, or read the file with "
            "--format generic and --map")
    return df.rename({s: d for s, d in renames.items() if s in df.columns})


def _drop_blank_rows(df: pl.DataFrame) -> pl.DataFrame:
    """Return ``df`` without the rows whose data cells are all null (blank CSV lines)."""
    data_cols = [c for c in df.columns if not is_internal(c)]
    if data_cols:
        blank = df.select(pl.all_horizontal([pl.col(c).is_null() for c in data_cols])).to_series()
        if blank.any():
            df = df.filter(~blank)
    return df


def _csv_problem(path: Path, exc: Exception) -> str:
    """Return a one-line message for a CSV polars cannot read, naming the first bad row."""
    try:
        with path.open(newline="", encoding="utf-8") as fh:
            reader = csv.reader(fh, strict=True)
            header = next(reader, [])
            for row_no, fields in enumerate(reader, start=1):
                if fields and len(fields) != len(header):
                    return (f"{path}: row {row_no}: {len(fields)} fields, but the header has "
                            f"{len(header)}; fix the row (or quote fields holding commas)")
    except csv.Error as err:
        return f"{path}: row {max(reader.line_num - 1, 1)}: malformed CSV ({err})"
    except UnicodeDecodeError as err:
        return f"{path}: not UTF-8 text ({err.reason} at byte {err.start})"
    return f"{path}: cannot read as CSV: {_first_line(exc)}"


def _first_line(exc: Exception) -> str:
    """Return the first line of an exception's message (polars messages run long)."""
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def _blank_note(df: pl.DataFrame, report: CleaningReport) -> None:
    """Note in ``report`` how many blank lines the CSV had (skipped, not rows)."""
    if SOURCE_ROW in df.columns and df.height:
        gaps = int(df[SOURCE_ROW].max()) - df.height
        if gaps:
            report.notes.append(f"{gaps} blank line(s) skipped (not counted as rows)")


def _read_parquet(path: Path) -> pl.DataFrame:
    """Read a Parquet file; a file that is not Parquet is a TraceError naming it."""
    check_regular(path)
    try:
        return pl.read_parquet(path, glob=False)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise TraceError(f"{path}: cannot read as Parquet: {_first_line(exc)}") from exc


def _read_any(path: Path) -> pl.DataFrame:
    """Read one CSV (as strings) or Parquet file (native types) with source columns."""
    if path.suffix.lower() == ".parquet":
        if not path.exists():
            raise TraceError(f"{path}: no such file")
        return _add_source(_read_parquet(path), path)
    return _read_csv_strings(path)


def _add_source(df: pl.DataFrame, path: Path | str) -> pl.DataFrame:
    """Return ``df`` with its file and 1-based row columns; a column of the file that uses the
    readers' reserved prefix is a TraceError (see :func:`sia.data.schema.refuse_internal_columns`)."""
    refuse_internal_columns(df.columns, path)
    return df.with_columns(
        pl.lit(str(path)).alias(SOURCE_FILE),
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias(SOURCE_ROW),
    )


def _require_columns(df: pl.DataFrame, columns, path: Path | str, what: str) -> None:
    missing = [c for c in columns if c not in df.columns]
    if missing:
        found = ", ".join(repr(c) for c in user_columns(df.columns))
        raise TraceError(
            f"{path}: missing column(s) {', '.join(repr(c) for c in missing)} of the {what} "
            f"format; found {found}"
        )


def _missing_mask(col: pl.Series) -> pl.Series:
    mask = col.is_null()
    if col.dtype == pl.String:
        mask = mask | (col.str.strip_chars() == "")
    return mask


def _parse_submit_seconds(bad: BadRows, column: str, time_unit: str,
                          typed_datetimes: bool = False,
                          orders: dict[str, str] | None = None) -> str | None:
    """Turn ``column`` of ``bad.df`` into absolute seconds (Float64) in place.

    Returns how the unit reads in the report (a datetime origin is formatted
    later): "datetime" for date-times. Missing cells are left null for
    :func:`validate` to report. With ``typed_datetimes``, a column whose own
    type is date-time (Parquet) is read as date-times under the default unit
    "s" (the submissions: the unit returned is then the one the other time
    columns must be read in). ``orders`` carries the day / month order that
    dates like 03/25/2021 settled in one column to the next (start and end
    times take the submissions' order where their own values leave it open).
    """
    problem = time_unit_problem(time_unit)
    if problem:
        raise ConfigError(f"--time-unit: {problem}")
    col = bad.df[column]
    if time_unit.startswith("datetime"):
        fmt = time_unit.removeprefix(DATETIME_FORMAT_PREFIX) if ":" in time_unit else None
        if col.dtype == pl.String:
            stripped = col.str.strip_chars()
            present = ~_missing_mask(col)
            if fmt is None:
                fmt = _numeric_date_format(bad, column, stripped.filter(present),
                                           {} if orders is None else orders)
            try:
                parsed = stripped.str.to_datetime(format=fmt, strict=False, time_unit="ms")
            except pl.exceptions.PolarsError:
                parsed = pl.Series(column, [None] * col.len(), dtype=pl.Datetime("ms"))
            bad.df = bad.df.with_columns(parsed.alias(_DT))
            expected = (f"in the format {fmt!r}".replace("{", "{{").replace("}", "}}") if fmt
                        else "(expected e.g. 2020-06-09 18:41:01)")
            bad.flag(parsed.is_null() & present, column, "unparsable_time",
                     "{value!r} is not a date-time " + expected)
            bad.df = bad.df.with_columns(pl.col(_DT).alias(column)).drop(_DT)
            col = bad.df[column]
        elif col.dtype == pl.Date:
            col = col.cast(pl.Datetime("ms"))
        elif not isinstance(col.dtype, pl.Datetime):
            if column != "submit_time":
                raise TraceError(
                    f"{_file_of(bad)}: column {column!r} has type {col.dtype}, but the "
                    "submissions are date-times: give start and end times as date-times too, "
                    "or map a duration column")
            raise TraceError(
                f"{_file_of(bad)}: column {column!r} has type {col.dtype}, not date-times; "
                "use --time-unit s or ms for numeric times"
            )
        secs = col.dt.epoch("ms").cast(pl.Float64) / 1000.0
        bad.df = bad.df.with_columns(secs.alias(column))
        return "datetime"
    # numeric times: blank cells become null, for validate to report as missing
    if bad.df[column].dtype == pl.String:
        _refuse_date_times(bad, column)
        bad.df = bad.df.with_columns(
            pl.when(pl.col(column).str.strip_chars() == "").then(None)
            .otherwise(pl.col(column)).alias(column)
        )
    elif isinstance(bad.df[column].dtype, pl.Datetime | pl.Date):
        if time_unit == "s" and typed_datetimes:  # the file's own type says what it holds
            return _parse_submit_seconds(bad, column, "datetime")
        raise TraceError(f"{_file_of(bad)}: column {column!r} holds date-times, not {time_unit} "
                         "numbers; use --time-unit datetime" + (
                             "" if typed_datetimes or time_unit != "s" else
                             " (with the submissions as date-times too)"))
    _cast_numeric(bad, column, pl.Float64())
    if time_unit == "ms":
        bad.df = bad.df.with_columns(pl.col(column) / 1000.0)
    return time_unit


#: A date that starts with two numbers separated by / . or -, then a 4-digit year and the end
#: of the value, a space or a T: 03/01/2021, 03/01/2021 10:00, 03/01/2021T10:00.
_NUMERIC_DATE = r"^(\d{1,2})([/.\-])(\d{1,2})[/.\-]\d{4}(?:$|[ T])"
#: What may follow such a date, tried in order.
_NUMERIC_DATE_TAILS = tuple(
    f"{sep}{time}" for sep in (" ", "T")
    for time in ("%H:%M:%S", "%H:%M", "%H:%M:%S%.f", "%I:%M %p", "%I:%M:%S %p", "%H:%M:%S%:z",
                 "%H:%M:%S%z", "%H:%M%:z", "%H:%M:%SZ", "%H:%M:%S%.fZ")) + ("",)
#: The dates the time part is chosen on (the whole column is then read with it).
_NUMERIC_DATE_SAMPLE = 10_000


def _numeric_date_format(bad: BadRows, column: str, values: pl.Series,
                         orders: dict[str, str]) -> str | None:
    """Return the format of dates like 03/25/2021 10:00; None when fewer than half the cells
    with a digit are such dates (polars then infers the format).

    The day / month order is settled by the values whose first number is above
    12 (day first) or whose second one is (month first), or else by
    ``orders["order"]`` (``"dm"`` / ``"md"``, what an earlier column settled;
    this one's order is stored there); cells that are not such dates, or that
    have both numbers above 12 (a sentinel like 99/99/9999), vote for neither
    and become bad rows under the format. The time part is the one that reads
    the most of the first dates. A TraceError asks for the format with
    ``--time-unit datetime:FORMAT`` when the order is a guess (polars would take
    one silently, and a wrong guess scrambles the trace's order), when the
    values settle both orders, or when no time part reads most of them.
    """
    if values.is_empty():
        return None
    parts = values.str.extract_groups(_NUMERIC_DATE)
    first = parts.struct.field("1").cast(pl.Int64, strict=False)
    dated = first.is_not_null()
    n_dated = int(dated.sum())
    if not n_dated or n_dated * 2 < int(values.str.contains(r"\d").sum()):
        return None
    first = first.filter(dated)
    second = parts.struct.field("3").cast(pl.Int64, strict=False).filter(dated)
    sep = parts.struct.field("2").filter(dated)[0]
    shown = values.filter(dated)
    day_first = (first > 12) & (second <= 12)
    month_first = (second > 12) & (first <= 12)
    where = f"{_file_of(bad)}: column {column!r}: dates such as {shown[0]!r}"
    if day_first.any() and month_first.any():
        d, m = shown.filter(day_first)[0], shown.filter(month_first)[0]
        raise TraceError(f"{where} are read day first by some values ({d!r}) and month first by "
                         f"others ({m!r}); give the format with --time-unit 'datetime:FORMAT'")
    kind = "dm" if day_first.any() else "md" if month_first.any() else orders.get("order")
    sample = shown.head(_NUMERIC_DATE_SAMPLE)

    def reads(fmt: str) -> int:
        try:
            return sample.len() - sample.str.to_datetime(format=fmt, strict=False).null_count()
        except pl.exceptions.PolarsError:
            return 0

    order = f"%d{sep}%m" if kind == "dm" else f"%m{sep}%d"
    best, best_read = None, 0
    for tail in _NUMERIC_DATE_TAILS:
        n = reads(f"{order}{sep}%Y{tail}")
        if n > best_read:
            best, best_read = tail, n
    if kind is None:
        shape = (f"%m{sep}%d{sep}%Y{best}' or '{DATETIME_FORMAT_PREFIX}%d{sep}%m{sep}%Y{best}"
                 if best is not None else "FORMAT")
        raise TraceError(f"{where} could be month/day or day/month (no value has a number above "
                         f"12 there); give the format, e.g. --time-unit "
                         f"'{DATETIME_FORMAT_PREFIX}{shape}' (time_unit in a config)")
    if best is None or best_read * 2 < sample.len():
        raise TraceError(f"{where} are {'day/month' if kind == 'dm' else 'month/day'}, but no "
                         "time part this reader tries reads most of them; give the format with "
                         f"--time-unit '{DATETIME_FORMAT_PREFIX}FORMAT' (e.g. "
                         f"'{DATETIME_FORMAT_PREFIX}{order}{sep}%Y %H:%M:%S'; time_unit in a "
                         "config)")
    orders["order"] = kind
    return f"{order}{sep}%Y{best}"


def _refuse_date_times(bad: BadRows, column: str) -> None:
    """Raise a TraceError saying to pass ``--time-unit datetime`` when ``column`` (strings, read
    as numeric times) holds date-times: no cell is a number and the cells parse as date-times.

    Without it, every row of a date-time column is reported as "not a number",
    and the advice to drop bad rows with --clean would drop them all.
    """
    col = bad.df[column]
    present = col.filter(~_missing_mask(col)).str.strip_chars()
    if present.is_empty() or present.cast(pl.Float64, strict=False).is_not_null().any():
        return
    try:
        parsed = present.str.to_datetime(strict=False, time_unit="ms")
    except pl.exceptions.PolarsError:
        return
    if parsed.is_null().all():
        return
    example = present.filter(parsed.is_not_null())[0]
    raise TraceError(
        f"{_file_of(bad)}: column {column!r} holds date-times (e.g. {example!r}), not "
        "numbers; pass --time-unit datetime (time_unit: datetime in a config's trace section) "
        "to read them")


def _file_of(bad: BadRows) -> str:
    return _file(bad.df, bad.source)


def _unparsed_note(df: pl.DataFrame, column: str, parsed: pl.Series, report: CleaningReport,
                   what: str) -> pl.DataFrame:
    """Return ``df`` with ``column`` replaced by ``parsed``; the cells that held a value but
    parse to nothing (null, or a number that is not finite) are noted in ``report`` (how many,
    the first row and value): an extra column the reader does not need is kept, its bad cells
    empty, never changed without a word."""
    raw = df[column]
    lost = ~_missing_mask(raw) & parsed.is_null()
    if parsed.dtype.is_float():
        lost = lost | (parsed.is_not_null() & ~parsed.is_finite())
        parsed = parsed.set(lost.fill_null(False), None)
    n = int(lost.fill_null(False).sum())
    if n:
        i = int(lost.fill_null(False).arg_true()[0])
        row = df[SOURCE_ROW][i] if SOURCE_ROW in df.columns else i + 1
        report.notes.append(f"{column}: {n} value(s) that are not {what} read as empty (first: "
                            f"row {row}, {raw[i]!r}); the jobs are kept (the reader does not "
                            "need this column)")
    return df.with_columns(parsed.alias(column))


def _extra_numbers(df: pl.DataFrame, column: str, report: CleaningReport) -> pl.DataFrame:
    """Return ``df`` with the extra text column ``column`` as Float64 (see :func:`_unparsed_note`)."""
    col = df[column]
    parsed = (col.str.strip_chars().cast(pl.Float64, strict=False) if col.dtype == pl.String
              else col.cast(pl.Float64, strict=False))
    return _unparsed_note(df, column, parsed, report, "finite numbers")


def _finish(raw: pl.DataFrame, source: str, on_bad_rows: OnBadRows, report: CleaningReport,
            unit: str) -> tuple[pl.DataFrame, CleaningReport, float]:
    """Validate ``raw`` (absolute submit seconds), rebase time to the first kept submission.

    Returns (jobs, report, origin): origin is the first kept submission in
    absolute seconds (epoch seconds for date-times), 0 for an empty table.
    """
    raw = raw.with_columns(pl.col("submit_time").alias(_ABS))
    jobs, report = validate(raw, source=source, on_bad_rows=on_bad_rows, report=report,
                            rebase_time=True)
    origin = 0.0
    if jobs.height:
        origin = float(jobs[_ABS].min())
        if unit == "datetime":
            report.first_submit = str(pl.Series([origin * 1000.0]).cast(pl.Int64)
                                      .cast(pl.Datetime("ms"))[0])
        else:
            report.first_submit = f"{origin:g} (seconds, in the file's own clock)"
    jobs = jobs.drop(_ABS)
    return jobs, report, origin


# --------------------------------------------------------------------------- Philly

def read_philly(path: Path | str, on_bad_rows: OnBadRows = "raise") -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from the per-VC Philly CSV.

    Columns ``timestamp`` (``YYYY-MM-DD HH:MM:SS``, the submission),
    ``duration`` (seconds), ``num_gpus``, ``gpu_time`` and ``cluster`` (the
    VC: the pool). Rows are unsorted in the file; the table comes back sorted.
    Job ids are the 1-based data row numbers of the file. A row identical to
    an earlier row in every field is an exact duplicate: an error naming both
    rows by default, dropped and counted as ``exact_duplicate`` with
    ``on_bad_rows="drop"``. ``gpu_time`` is kept as an extra Float64 column.
    ``path`` may be ``builtin:philly``: the trace embedded in the package
    (the same rows, read the same way; see :mod:`sia.data.datasets`).
    """
    if is_builtin(path):
        source = str(path)
        if builtin_format(source) != "philly":
            raise TraceError(f"{source}: not a Philly per-VC trace")
        df = _drop_blank_rows(_add_source(read_builtin_rows(source), source))
    else:
        path = Path(path)
        df = _read_csv_strings(path)
    _require_columns(df, ("timestamp", "duration", "num_gpus", "cluster"), path, "Philly")
    report = CleaningReport(source=str(path), rows_read=df.height)
    _blank_note(df, report)
    if "job_id" in df.columns:
        raise TraceError(f"{path}: column 'job_id' clashes with the job ids the Philly reader "
                         "gives (the data row numbers); rename or remove it, or read the file "
                         "with --format generic and --map")
    bad = BadRows(df, str(path), on_bad_rows, report)
    flag_exact_duplicates(bad)
    df = _rename(bad.df, {"timestamp": "submit_time", "cluster": "pool"}, path, "Philly")
    if "gpu_time" in df.columns:
        df = _extra_numbers(df, "gpu_time", report)
    bad.df = df
    unit = _parse_submit_seconds(bad, "submit_time", "datetime")
    jobs, report, _ = _finish(bad.df, str(path), on_bad_rows, report, unit)
    return jobs, report


def read_philly_joblog(path: Path | str, on_bad_rows: OnBadRows = "raise"
                       ) -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from the original Philly job log (``cluster_job_log``, JSON).

    The file is a JSON list of jobs, each with ``jobid``, ``vc`` (the pool),
    ``user``, ``status``, ``submitted_time`` (``YYYY-MM-DD HH:MM:SS``) and
    ``attempts``: the runs of the job, each with ``start_time``,
    ``end_time`` and ``detail`` (the machines it ran on, each with its
    ``gpus``). Row N is the N-th job of the list. A job's gang size is the
    most GPUs any attempt held, its duration the summed run time of its
    attempts (seconds; the waits between retries are not work); ``status``
    and ``attempts`` (their count) are kept as extra columns. Jobs that never
    ran (no attempt with a start and an end) are left out and counted as
    ``never_ran``; jobs whose attempts held no GPU as ``cpu_only``. An
    unparsable attempt time is a bad row naming ``attempts.start_time`` or
    ``attempts.end_time``. A machine's ``gpus`` is the list of its GPUs; a whole
    number is read as that many GPUs (noted in the report). A record of another
    shape (a job that is not an object, a field that is a list or an object,
    ``gpus`` given as text) is a bad row of kind ``malformed`` naming the key; a
    record equal to an earlier one is an exact duplicate; JSON nested deeper than
    Python reads is a TraceError.
    """
    path = Path(path)
    raw = _load_joblog(path)
    df, att, notes = _joblog_tables(path, raw)
    report = CleaningReport(source=str(path), rows_read=df.height, notes=notes)
    df = _joblog_run_times(df, att, path)
    bad = BadRows(df, str(path), on_bad_rows, report)
    flag_exact_duplicates(bad, [_JSON])
    for key in _JOBLOG_KEYS:  # records of the wrong shape (the first problem of each)
        mask = bad.df[_SHAPE_KEY] == key
        if mask.any():
            problem = bad.df.filter(mask)[_SHAPE][0]
            bad.flag(mask, key, "malformed", problem.replace("{", "{{").replace("}", "}}"))
    bad.df = bad.df.drop(_SHAPE_KEY, _SHAPE, _JSON)
    for c in ("attempts.start_time", "attempts.end_time"):
        bad.df = bad.flag(bad.df[c].is_not_null(), c, "unparsable_time",
                          "{value!r} is not a date-time (expected e.g. 2017-10-03 14:05:01)")
    bad.df = bad.df.drop("attempts.start_time", "attempts.end_time")
    never = bad.df["duration"].is_null()
    report.leave_out("never_ran", int(never.sum()))
    cpu = ~never & (bad.df["num_gpus"] == 0)
    report.leave_out("cpu_only", int(cpu.sum()))
    bad.df = bad.df.filter(~never & ~cpu)
    unit = _parse_submit_seconds(bad, "submit_time", "datetime")
    jobs, report, _ = _finish(bad.df, str(path), on_bad_rows, report, unit)
    return jobs, report


def _load_joblog(path: Path) -> list:
    """:func:`read_philly_joblog`'s file: the JSON list of job records, or a one-line
    TraceError (no such file, not a regular file, not JSON, not UTF-8, nested too deeply, not a
    list)."""
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    check_regular(path)
    try:
        with path.open(encoding="utf-8") as fh:
            raw = json.load(fh)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: not JSON (line {exc.lineno}, column {exc.colno}: "
                         f"{exc.msg})") from None
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except RecursionError:
        raise TraceError(f"{path}: JSON nested too deeply to read; a job log is a list of jobs, "
                         "each with its attempts and their machines") from None
    if not isinstance(raw, list):
        raise TraceError(f"{path}: expected a JSON list of jobs (the Philly cluster_job_log), "
                         f"got a JSON {type(raw).__name__}")
    return raw


def _joblog_tables(path: Path, raw: list) -> tuple[pl.DataFrame, pl.DataFrame, list[str]]:
    """:func:`read_philly_joblog`'s records as tables: one row per job (its fields, gang size,
    attempt count, and its shape problem and JSON text for the checks), one row per attempt
    (start and end as text), and the report's notes."""
    jobs_rows, att_rows, shapes = [], [], []
    counts = [0, None]  # machine records giving a GPU count; the first one's row
    for row, job in enumerate(raw, start=1):
        shape = _joblog_shape(job)
        fields = {k: _text(job.get(k)) if shape is None else None
                  for k in ("jobid", "vc", "user", "status", "submitted_time")}
        gpus, n_attempts = 0, 0
        if shape is None:
            attempts = job.get("attempts") or []
            n_attempts = len(attempts)
            for a in attempts:
                held = 0
                for m in a.get("detail") or []:
                    g = m.get("gpus")
                    if isinstance(g, int) and not isinstance(g, bool):
                        counts[0] += 1
                        counts[1] = counts[1] or row
                        held += g
                    elif isinstance(g, list):
                        held += len(g)
                gpus = max(gpus, held)
                att_rows.append((row, _text(a.get("start_time")), _text(a.get("end_time"))))
        try:
            record = json.dumps(job, sort_keys=True, default=str)
        except RecursionError:
            raise TraceError(f"{path}: row {row}: JSON nested too deeply; a job log record "
                             "holds a job, its attempts and their machines") from None
        shapes.append((shape or (None, None)) + (record,))
        jobs_rows.append((row, fields["jobid"], fields["vc"], fields["user"], fields["status"],
                          fields["submitted_time"], gpus, n_attempts))
    if counts[0]:
        notes = [f"attempts.detail.gpus: {counts[0]} machine record(s) give a number of GPUs "
                 f"instead of the list of their GPUs (first: row {counts[1]}); read as that "
                 "many GPUs"]
    else:
        notes = []
    df = pl.DataFrame(jobs_rows, orient="row", schema={
        SOURCE_ROW: pl.Int64(), "job_id": pl.String(), "pool": pl.String(),
        "user": pl.String(), "status": pl.String(), "submit_time": pl.String(),
        "num_gpus": pl.Int64(), "attempts": pl.Int64()})
    att = pl.DataFrame(att_rows, orient="row", schema={
        SOURCE_ROW: pl.Int64(), "start": pl.String(), "end": pl.String()})
    df = df.with_columns(pl.Series(_SHAPE_KEY, [k for k, _, _ in shapes], dtype=pl.String),
                         pl.Series(_SHAPE, [d for _, d, _ in shapes], dtype=pl.String),
                         pl.Series(_JSON, [r for _, _, r in shapes], dtype=pl.String))
    return df, att, notes


def _joblog_run_times(df: pl.DataFrame, att: pl.DataFrame, path: Path) -> pl.DataFrame:
    """:func:`read_philly_joblog`'s attempt times: each job's first unparsable start and end
    (columns ``attempts.start_time`` / ``attempts.end_time``, for the bad-row check) and its
    run time, the summed durations of its attempts that have both (``duration``)."""
    att = att.with_columns(
        [pl.col(c).str.strip_chars().str.to_datetime(strict=False, time_unit="ms").alias(c + "_t")
         for c in ("start", "end")])
    for c in ("start", "end"):
        broken = att.filter(pl.col(c).is_not_null() & pl.col(c + "_t").is_null())
        first = broken.group_by(SOURCE_ROW, maintain_order=True).first()
        df = df.join(first.select(SOURCE_ROW, pl.col(c).alias(f"attempts.{c}_time")),
                     on=SOURCE_ROW, how="left")
    ran = att.filter(pl.col("start_t").is_not_null() & pl.col("end_t").is_not_null())
    run = ran.group_by(SOURCE_ROW).agg(
        ((pl.col("end_t") - pl.col("start_t")).dt.total_milliseconds() / 1000.0).sum()
        .alias("duration"))
    return df.join(run, on=SOURCE_ROW, how="left").with_columns(
        pl.lit(str(path)).alias(SOURCE_FILE))


_SHAPE_KEY = INTERNAL_PREFIX + "shape_key"  # the key of a job log record of the wrong shape
_SHAPE = INTERNAL_PREFIX + "shape"  # what is wrong with it
#: The keys of a job log record whose shape is checked, in the order they are reported.
_JOBLOG_KEYS = ("job", "jobid", "vc", "user", "status", "submitted_time", "attempts",
                "attempts.start_time", "attempts.end_time", "attempts.detail",
                "attempts.detail.gpus")
_SCALARS = (str, int, float, bool)
#: The most GPUs a machine record may give as a number (the contract's num_gpus is Int32).
_MAX_GPUS = 2**31 - 1


def _shown(value: object) -> str:
    """A JSON value for a message, cut to 60 characters."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _joblog_shape(job: object) -> tuple[str, str] | None:
    """Return (key, problem) for the first part of a job log record that has the wrong shape
    (a job that is not an object, a field that is not a scalar, attempts or their machines that
    are not lists of objects, GPUs that are neither a list nor a whole number); None when the
    record reads."""
    if not isinstance(job, dict):
        return "job", f"expected a job object, got {type(job).__name__} {_shown(job)}"
    for key in ("jobid", "vc", "user", "status", "submitted_time"):
        value = job.get(key)
        if value is not None and not isinstance(value, _SCALARS):
            return key, f"expected a text or number, got {type(value).__name__} {_shown(value)}"
    attempts = job.get("attempts") or []
    if not isinstance(attempts, list):
        return "attempts", f"expected a list of attempts, got {_shown(attempts)}"
    for a in attempts:
        if not isinstance(a, dict):
            return "attempts", f"expected attempt objects, got {_shown(a)}"
        for key in ("start_time", "end_time"):
            value = a.get(key)
            if value is not None and not isinstance(value, _SCALARS):
                return f"attempts.{key}", f"expected a date-time, got {_shown(value)}"
        detail = a.get("detail") or []
        if not isinstance(detail, list) or not all(isinstance(m, dict) for m in detail):
            return "attempts.detail", ("expected a list of machine objects (each with its "
                                       f"gpus), got {_shown(detail)}")
        for m in detail:
            g = m.get("gpus")
            if g is None or (isinstance(g, list) and all(isinstance(x, str | int) for x in g)):
                continue
            if isinstance(g, int) and not isinstance(g, bool) and 0 <= g <= _MAX_GPUS:
                continue
            return "attempts.detail.gpus", (f"{_shown(g)} is not the list of a machine's GPUs "
                                            "(e.g. [\"gpu0\", \"gpu1\"]) nor a whole number "
                                            f"of GPUs from 0 to {_MAX_GPUS:,}")
    return None


def _text(value: object) -> str | None:
    """A JSON scalar as text; null, "" and the log's "None" as None."""
    if value is None:
        return None
    text = str(value)  # white space is stripped (and noted) where the contract does it
    return None if text.strip() in ("", "None") else text


# --------------------------------------------------------------------------- Helios

def read_helios(path: Path | str, on_bad_rows: OnBadRows = "raise") -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from a Helios ``cluster_log.csv``.

    ``vc`` is the pool, ``gpu_num`` the gang size, ``submit_time`` a
    ``YYYY-MM-DD HH:MM:SS`` date-time, ``duration`` seconds. Rows with
    ``gpu_num == 0`` are CPU jobs: left out and counted in
    ``report.left_out['cpu_only']``. ``state``, ``cpu_num``, ``node_num``,
    ``queue`` are kept as extra columns, and ``start_time``/``end_time`` as
    seconds since the same origin as ``submit_time`` (null where unparsable).
    """
    path = Path(path)
    df = _read_csv_strings(path)
    _require_columns(df, ("job_id", "vc", "gpu_num", "submit_time", "duration"), path, "Helios")
    report = CleaningReport(source=str(path), rows_read=df.height)
    _blank_note(df, report)
    bad = BadRows(df, str(path), on_bad_rows, report)
    flag_exact_duplicates(bad)
    df = bad.df
    gpus = df["gpu_num"].str.strip_chars().cast(pl.Float64, strict=False)
    cpu_only = (gpus == 0).fill_null(False)
    report.leave_out("cpu_only", int(cpu_only.sum()))
    df = _rename(df.filter(~cpu_only), {"vc": "pool", "gpu_num": "num_gpus"}, path, "Helios")
    for column in ("cpu_num", "node_num", "queue"):
        if column in df.columns:
            df = _extra_numbers(df, column, report)
    for column in ("start_time", "end_time"):
        if column in df.columns:
            text = df[column].str.strip_chars()
            try:
                parsed = text.str.to_datetime(strict=False, time_unit="ms")
            except pl.exceptions.PolarsError:  # polars infers one format: none fits
                parsed = pl.Series(column, [None] * df.height, dtype=pl.Datetime("ms"))
            secs = parsed.dt.epoch("ms").cast(pl.Float64) / 1000.0
            df = _unparsed_note(df, column, secs, report,
                                "date-times (a job without both is replayed under FCFS by "
                                "`sia features`)")
    bad.df = df
    unit = _parse_submit_seconds(bad, "submit_time", "datetime")
    jobs, report, origin = _finish(bad.df, str(path), on_bad_rows, report, unit)
    if jobs.height:
        rel = [pl.col(c) - origin for c in ("start_time", "end_time") if c in jobs.columns]
        if rel:
            jobs = jobs.with_columns(rel)
    return jobs, report


# --------------------------------------------------------------------------- generic

def _resolve_files(spec: Path | str) -> list[Path]:
    """Return the files a path, folder or glob names (CSV and Parquet), sorted."""
    text = str(spec)
    if is_glob(text):  # a file literally named like a pattern is read as that file
        matches = [Path(p) for p in sorted(globmod.glob(text))]
        for p in matches:
            check_regular(p)
        files = [p for p in matches if p.is_file()]
        if not files:
            raise TraceError(f"{text}: the pattern matches no files")
        return files
    path = Path(text)
    check_regular(path)
    if path.is_dir():
        files = sorted(p for p in path.iterdir() if p.suffix.lower() in (".csv", ".parquet")
                       and not p.is_dir())
        for p in files:
            check_regular(p)
        if not files:
            raise TraceError(f"{path}: the folder holds no .csv or .parquet files")
        return files
    if not path.exists():
        raise TraceError(f"{path}: no such file or folder")
    return [path]


def read_generic(path: Path | str, mapping: Mapping[str, str] | None = None, *,
                 pool_from: str | None = None, time_unit: str = "s",
                 on_bad_rows: OnBadRows = "raise") -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from CSV / Parquet files with a column mapping.

    ``path`` is one file, a folder (every ``.csv``/``.parquet`` in it) or a
    glob. ``mapping`` maps contract columns to the file's columns, e.g.
    ``{"submit_time": "submission_time", "num_gpus": "num_gpu"}``; contract
    columns the file already has need no mapping. ``pool_from`` gives the
    pool: a column name, ``const:NAME`` (every job in pool NAME) or
    ``file-stem`` (each file's name without extension); default: the
    ``pool`` column. ``time_unit``: ``s`` or ``ms`` for numeric submission
    times and durations, ``datetime`` for date-time submissions (any ISO-like
    format polars can parse; durations then in seconds). The optional
    ``time_limit`` column (a requested limit, empty for none) and ``hold_time`` (the
    seconds a job was held, known, before its submit time: empty for none) are durations:
    read in the durations' unit (ms with ``ms``, else seconds); ``state`` is
    text. Without a job id column, ids are the data row numbers
    (``<stem>-<row>`` for several files).
    """
    mapping = dict(mapping or {})
    _check_mapping(mapping, pool_from)
    files = _resolve_files(path)
    notes: list[str] = []
    frames = [_read_mapped(file, mapping, pool_from, len(files) > 1, notes) for file in files]
    raw = pl.concat(frames, how="diagonal_relaxed") if len(frames) > 1 else frames[0]
    source = str(path)
    report = CleaningReport(source=source, rows_read=raw.height)
    for frame in frames:
        _blank_note(frame, report)
    report.notes.extend(notes)
    bad = BadRows(raw, source, on_bad_rows, report)
    flag_exact_duplicates(bad)
    if _DERIVED_ID in bad.df.columns:  # <stem>-<row> ids of the files without a job_id column
        ids = pl.col(_DERIVED_ID)
        if "job_id" in bad.df.columns:
            ids = pl.coalesce(ids, pl.col("job_id").cast(pl.String))
        bad.df = bad.df.with_columns(ids.alias("job_id")).drop(_DERIVED_ID)
    orders: dict[str, str] = {}
    unit = _parse_submit_seconds(bad, "submit_time", time_unit, typed_datetimes=True,
                                 orders=orders)
    # start and end times are read like the submissions (date-times when those were, in
    # the day / month order the submissions settled)
    span = _generic_durations(bad, "datetime" if (time_unit, unit) == ("s", "datetime")
                              else time_unit, report, orders)
    if time_unit == "ms":
        for column in ("time_limit", "hold_time"):
            if column in bad.df.columns:
                _seconds_from_ms(bad, column)
    if len(files) > 1:
        report.notes.append(f"read {len(files)} files: {', '.join(f.name for f in files)}")
    jobs, report, origin = _finish(bad.df, source, on_bad_rows, report, unit)
    if span and jobs.height:  # start and end on the same clock as the submissions
        jobs = jobs.with_columns([pl.col(c) - origin for c in SPAN_COLUMNS])
    return jobs, report


def _seconds_from_ms(bad: BadRows, column: str) -> None:
    """Turn ``bad.df``'s ``column`` (``time_limit`` or ``hold_time``: durations, so they take
    the durations' unit) from milliseconds into seconds; empty cells stay empty (none), a cell
    that is not a number is a bad row naming the column."""
    _optional_seconds(bad, column)
    bad.df = bad.df.with_columns(pl.col(column) / 1000.0)


def _check_mapping(mapping: dict[str, str], pool_from: str | None) -> None:
    """Refuse a --map that names no contract column, or that clashes with --pool-from."""
    if pool_from and "pool" in mapping:
        raise ConfigError(f"--map pool={mapping['pool']} and --pool-from {pool_from} both say "
                          "where the pool comes from; give only one of them")
    contract = (*JOB_SCHEMA, *NULLABLE_EXTRA_SCHEMA)
    for dst in mapping:
        if dst not in contract and dst not in SPAN_COLUMNS and dst != REGION_COLUMN:
            raise ConfigError(
                f"--map {dst}={mapping[dst]}: {dst!r} is not a column of the trace contract "
                f"({', '.join(contract)}) nor {' / '.join(SPAN_COLUMNS)} nor {REGION_COLUMN}"
            )


def _read_mapped(file: Path, mapping: dict[str, str], pool_from: str | None, several: bool,
                 notes: list[str]) -> pl.DataFrame:
    """Return one file of a generic trace with the contract's column names (``mapping``
    applied, the pool taken from ``pool_from``, ids ``<stem>-<row>`` when ``several`` files
    lack them); notes on what was replaced or ignored go to ``notes``."""
    df = _read_any(file)
    missing = [src for src in mapping.values() if src not in df.columns]
    if missing:
        found = ", ".join(repr(c) for c in user_columns(df.columns))
        raise TraceError(
            f"{file}: --map names column(s) {', '.join(repr(c) for c in missing)} that the "
            f"file does not have; found {found}"
        )
    if mapping:
        sources = set(mapping.values())
        replaced = sorted(dst for dst, src in mapping.items()
                          if dst in df.columns and dst != src and dst not in sources)
        if replaced:
            notes.append(f"{file.name}: column(s) {', '.join(map(repr, replaced))} of the "
                         "file replaced by the --map source(s)")
        df = df.with_columns([pl.col(src).alias(dst) for dst, src in mapping.items()])
        df = df.drop([s for s in sources if s not in mapping])
    if pool_from and pool_from != "pool" and "pool" in df.columns:
        notes.append(f"{file.name}: its 'pool' column is not used (--pool-from {pool_from})")
    if pool_from:
        df = _pool_from(df, file, pool_from)
    if "job_id" not in df.columns and several:  # given after the duplicate check
        df = df.with_columns(
            (pl.lit(f"{file.stem}-") + pl.col(SOURCE_ROW).cast(pl.String)).alias(_DERIVED_ID)
        )
    _require_generic_columns(df, file)
    return df


def _pool_from(df: pl.DataFrame, file: Path, pool_from: str) -> pl.DataFrame:
    """Return ``df`` with its pool column as --pool-from says (a column, const:NAME, file-stem)."""
    if pool_from == "file-stem":
        return df.with_columns(pl.lit(file.stem).alias("pool"))
    if pool_from.startswith("const:"):
        name = pool_from.split(":", 1)[1].strip()
        if not name:
            raise ConfigError("--pool-from const:NAME needs a pool name after 'const:'")
        return df.with_columns(pl.lit(name).alias("pool"))
    if pool_from not in df.columns:
        raise TraceError(
            f"{file}: --pool-from column {pool_from!r} is not in the file; found "
            f"{', '.join(repr(c) for c in df.columns if not c.startswith('_'))}"
        )
    check_text_column(df, pool_from, str(file), f"{pool_from!r} (--pool-from)")
    return df.with_columns(pl.col(pool_from).cast(pl.String).alias("pool"))


def _require_generic_columns(df: pl.DataFrame, file: Path) -> None:
    """Refuse a mapped file without the contract's columns (a duration may come from a span)."""
    if "duration" not in df.columns and all(c in df.columns for c in SPAN_COLUMNS):
        pass  # derived later as end_time - start_time
    elif "duration" not in df.columns and any(c in df.columns for c in SPAN_COLUMNS):
        have, lack = (c for c in sorted(SPAN_COLUMNS, key=lambda c: c not in df.columns))
        raise TraceError(
            f"{file}: no 'duration' column, and {have!r} without {lack!r} cannot give one; "
            "map both start_time and end_time (or duration) with --map")
    else:
        _require_columns(df, ("pool", "submit_time", "duration", "num_gpus"), file,
                         "trace contract (map yours with --map, the pool with --pool-from; "
                         "a duration may also come from start_time and end_time)")
    _require_columns(df, ("pool", "submit_time", "num_gpus"), file,
                     "trace contract (map yours with --map, the pool with --pool-from)")


def _generic_durations(bad: BadRows, time_unit: str, report: CleaningReport,
                       orders: dict[str, str] | None = None) -> bool:
    """Give ``bad.df`` its durations in seconds; return whether they came from start and end
    times (durations missing while both times are given; the times are then read as times,
    and with every duration given they stay as they are)."""
    if "duration" not in bad.df.columns:
        bad.df = bad.df.with_columns(pl.lit(None, dtype=pl.Float64()).alias("duration"))
    span = (all(c in bad.df.columns for c in SPAN_COLUMNS)
            and bool(_missing_mask(bad.df["duration"]).any()))
    if span:
        _duration_from_span(bad, time_unit, report, orders)
    elif time_unit == "ms":
        d = bad.df["duration"]
        bad.df = bad.df.with_columns(pl.when(pl.Series(_missing_mask(d))).then(None)
                                     .otherwise(pl.col("duration")).alias("duration"))
        _cast_numeric(bad, "duration", pl.Float64())
        bad.df = bad.df.with_columns(pl.col("duration") / 1000.0)
    return span


def _duration_from_span(bad: BadRows, time_unit: str, report: CleaningReport,
                        orders: dict[str, str] | None = None) -> None:
    """Give ``bad.df``'s rows without a duration ``end_time - start_time`` (seconds), both read
    in ``time_unit`` like the submissions (and kept, in seconds). A row with neither a
    duration nor both times, with an unparsable time, or ending before it starts is a bad
    row naming that column."""
    need = INTERNAL_PREFIX + "no_duration"
    bad.df = bad.df.with_columns(pl.Series(need, _missing_mask(bad.df["duration"])))
    for column in SPAN_COLUMNS:
        bad.df = bad.flag(bad.df[need] & pl.Series(_missing_mask(bad.df[column])), column,
                          "missing_value", "no duration, and no " + column + " to derive it from")
        _parse_submit_seconds(bad, column, time_unit, orders=orders)
    bad.df = bad.df.with_columns(pl.when(pl.col(need)).then(None).otherwise(pl.col("duration"))
                                 .alias("duration"))
    _cast_numeric(bad, "duration", pl.Float64())
    if time_unit == "ms":
        bad.df = bad.df.with_columns(pl.col("duration") / 1000.0)
    span = pl.col("end_time") - pl.col("start_time")
    bad.df = bad.flag(bad.df.select(pl.col(need) & (span < 0)).to_series(), "end_time",
                      "end_before_start", "end_time {value} is before the job's start_time")
    n = int(bad.df[need].sum())
    bad.df = bad.df.with_columns(pl.when(pl.col(need)).then(span).otherwise(pl.col("duration"))
                                 .alias("duration")).drop(need)
    if n:
        report.notes.append(f"duration derived as end_time - start_time for {n} row(s)")


# --------------------------------------------------------------------------- Alibaba PAI

def _read_pai_table(path: Path, columns: tuple[str, ...]) -> pl.DataFrame:
    """Read one PAI table as strings with source columns; the released files have no header
    (its names are ``columns``), but a file that starts with that header is read too."""
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    check_regular(path)
    try:
        first = pl.read_csv(path, n_rows=0, infer_schema=False, glob=False).columns
        has_header = [c.strip() for c in first][: len(columns)] == list(columns)
        df = pl.read_csv(path, has_header=has_header, infer_schema=False, glob=False)
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise TraceError(_csv_problem(path, exc)) from exc
    if df.width < len(columns):
        raise TraceError(f"{path}: {df.width} columns, but a PAI table of this kind has "
                         f"{len(columns)} ({', '.join(columns)})")
    if not has_header:
        df = df.rename(dict(zip(df.columns, columns, strict=False)))
    return _add_source(df, path)


def read_pai(path: Path | str, on_bad_rows: OnBadRows = "raise") -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from Alibaba PAI's GPU trace (cluster-trace-gpu-v2020).

    ``path`` is ``pai_job_table.csv`` or the folder holding it; its
    ``pai_task_table.csv`` must sit beside it, and ``pai_group_tag_table.csv``
    may. A job (one row of the job table, ``job_name``) is submitted at its
    ``start_time`` (seconds); its tasks give the rest: the gang is the GPUs
    its tasks plan (``inst_num x plan_gpu / 100``, a fraction of a GPU
    rounded up to a whole one), the duration runs from its first task's
    start to its last task's end, and the pool is its first task's
    ``gpu_type`` (PAI's GPU model pools). ``user`` is kept, the group tag
    (``group``: jobs that run the same code) becomes ``tag``, and ``status``
    an extra column. Jobs whose tasks plan no GPU are left out as
    ``cpu_only``; jobs without a task that started and ended (still running,
    or never ran) as ``unfinished``. Rows are numbered in the job table.
    """
    path = Path(path)
    folder = path if path.is_dir() else path.parent
    job_file = path if not path.is_dir() else folder / "pai_job_table.csv"
    jobs = _read_pai_table(job_file, PAI_JOB_COLUMNS)
    tasks = _read_pai_table(folder / "pai_task_table.csv", PAI_TASK_COLUMNS)
    report = CleaningReport(source=str(job_file), rows_read=jobs.height)
    rows = BadRows(jobs, str(job_file), on_bad_rows, report)
    flag_exact_duplicates(rows)
    jobs = rows.df
    num = {c: pl.col(c).str.strip_chars().cast(pl.Float64, strict=False)
           for c in ("inst_num", "plan_gpu", "start_time", "end_time")}
    tasks = tasks.with_columns(**num)
    per_job = tasks.group_by("job_name").agg(
        (pl.col("inst_num").fill_null(1.0) * pl.col("plan_gpu").fill_null(0.0) / 100.0).sum()
        .alias(_PAI_GPUS),
        pl.col("start_time").min().alias(_PAI_FIRST_START),
        pl.col("end_time").max().alias(_PAI_LAST_END),
        pl.col("gpu_type").drop_nulls().first().alias("pool"),
    )
    df = jobs.rename({"start_time": "submit_time", "end_time": "job_end_time"}).join(
        per_job, on="job_name", how="left")
    group_file = folder / "pai_group_tag_table.csv"
    if group_file.exists():
        groups = _read_pai_table(group_file, PAI_GROUP_COLUMNS).select(
            "inst_id", pl.col("group").alias("tag")).unique("inst_id", keep="first")
        df = df.join(groups, on="inst_id", how="left")
        report.notes.append(f"group tags from {group_file.name}")
    df = df.rename({"job_name": "job_id"}).with_columns(
        (pl.col(_PAI_LAST_END) - pl.col(_PAI_FIRST_START)).alias("duration"),
        pl.col(_PAI_GPUS).ceil().cast(pl.Int64).alias("num_gpus"))
    cpu = (df[_PAI_GPUS].fill_null(0.0) <= 0) & df[_PAI_FIRST_START].is_not_null()
    report.leave_out("cpu_only", int(cpu.sum()))
    unfinished = ~cpu & (df[_PAI_FIRST_START].is_null() | df[_PAI_LAST_END].is_null())
    report.leave_out("unfinished", int(unfinished.sum()))
    df = df.filter(~cpu & ~unfinished).drop(_PAI_GPUS, _PAI_FIRST_START, _PAI_LAST_END)
    bad = BadRows(df, str(job_file), on_bad_rows, report)
    unit = _parse_submit_seconds(bad, "submit_time", "s")
    jobs_out, report, _ = _finish(bad.df, str(job_file), on_bad_rows, report, unit)
    return jobs_out, report


# --------------------------------------------------------------------------- canonical

def read_canonical(path: Path | str, on_bad_rows: OnBadRows = "raise") -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from a canonical directory (``jobs.parquet``) or Parquet file.

    Times are already seconds since the trace's start and are kept as they are.
    """
    path = Path(path)
    file = path / "jobs.parquet" if path.is_dir() else path
    if not file.exists():
        raise TraceError(f"{path}: no jobs.parquet (write one with `sia ingest` or `sia generate`)")
    df = _add_source(_read_parquet(file), file)
    return validate(df, source=str(file), on_bad_rows=on_bad_rows,
                    duplicate_subset=user_columns(df.columns))


# --------------------------------------------------------------------------- dispatch

def detect_format(path: Path | str) -> str:
    """Return the format of a trace path: 'canonical', 'philly', 'philly-joblog', 'helios',
    'pai', 'sacct' or 'generic'.

    ``builtin:NAME`` has its embedded dataset's format (``builtin:philly``:
    philly). A folder with ``jobs.parquet`` is canonical; a Parquet file with
    every contract column is canonical; a CSV is Philly or Helios when its header
    has those formats' columns; a ``.json`` file or one named ``cluster_job_log``
    is the original Philly job log; ``pai_job_table.csv`` (or a folder holding it) is
    Alibaba PAI; a file (gzip'd or not) whose first line is a ``|``-separated header with
    JobID or JobIDRaw and another sacct field is a Slurm ``sacct`` export; anything else is
    generic.
    """
    text = str(path)
    if is_builtin(text):
        return builtin_format(text)
    if is_glob(text):
        return "generic"
    p = Path(text)
    check_regular(p)
    if p.is_dir():
        if (p / "jobs.parquet").exists():
            return "canonical"
        return "pai" if (p / "pai_job_table.csv").exists() else "generic"
    if p.name == "pai_job_table.csv":
        return "pai"
    if not p.exists():
        raise TraceError(f"{p}: no such file or folder")
    if p.suffix.lower() == ".json" or p.name == "cluster_job_log":
        return "philly-joblog"
    from sia.data.sacct import is_sacct  # sacct builds on this module's helpers

    if is_sacct(p):
        return "sacct"
    if p.suffix.lower() == ".parquet":
        try:
            names = pl.scan_parquet(p, glob=False).collect_schema()
        except (pl.exceptions.PolarsError, OSError) as exc:
            raise TraceError(f"{p}: cannot read as Parquet: {_first_line(exc)}") from exc
        return "canonical" if all(c in names for c in JOB_SCHEMA) else "generic"
    try:
        header = pl.read_csv(p, n_rows=0, infer_schema=False, glob=False).columns
    except (pl.exceptions.PolarsError, OSError, UnicodeDecodeError) as exc:
        raise TraceError(_csv_problem(p, exc)) from exc
    cols = {c.strip() for c in header}
    if {"timestamp", "duration", "num_gpus", "cluster"} <= cols:
        return "philly"
    if {"job_id", "vc", "gpu_num", "submit_time", "duration"} <= cols:
        return "helios"
    return "generic"


def resolve_format(path: Path | str, fmt: str = "auto", *,
                   mapping: Mapping[str, str] | None = None,
                   pool_from: str | None = None) -> str:
    """Return the format ``read_trace`` reads ``path`` as: ``fmt`` unless it is ``auto``; then
    generic when a mapping or ``pool_from`` is given (except for a ``sacct`` export, which
    takes ``pool_from`` itself and refuses a mapping), else :func:`detect_format`'s."""
    if fmt != "auto":
        return fmt
    if is_builtin(path):
        return builtin_format(path)
    if mapping or pool_from:
        from sia.data.sacct import is_sacct

        if not is_sacct(path):
            return "generic"
        if mapping:
            raise ConfigError(f"{path} is a Slurm sacct export, whose fields are fixed: --map "
                              "would be ignored; drop it (--pool-from account|user chooses the "
                              "pool)")
        return "sacct"
    return detect_format(path)


def read_trace(path: Path | str, fmt: str = "auto", *, mapping: Mapping[str, str] | None = None,
               pool_from: str | None = None, time_unit: str = "s",
               on_bad_rows: OnBadRows = "raise", arrival: str | None = None,
               ) -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from a trace in any supported format.

    ``fmt``: ``auto`` (see :func:`resolve_format`), ``philly``,
    ``philly-joblog``, ``helios``, ``pai``, ``sacct``, ``generic`` or
    ``canonical``. ``pool_from`` goes to the sacct and generic readers, the
    other arguments to the generic reader. ``arrival`` (``eligible`` or
    ``submit``, see :func:`sia.data.sacct.read_sacct`; None: the format's
    default) is for a Slurm ``sacct`` export only: given for another format it
    is a ConfigError, as it would be ignored.
    """
    if fmt not in FORMATS:
        raise ConfigError(f"--format must be one of {', '.join(FORMATS)}, not {fmt!r}")
    if arrival is not None and arrival_problem(arrival):
        raise ConfigError(arrival_problem(arrival))
    if is_builtin(path):
        own = builtin_format(path)
        if mapping or pool_from or fmt not in ("auto", own):
            raise ConfigError(f"{path} is a {own} trace: it takes neither --map, --pool-from "
                              f"nor a --format other than {own}")
        fmt = own
    fmt = resolve_format(path, fmt, mapping=mapping, pool_from=pool_from)
    if fmt != "generic":
        given = [opt for opt, on in (("--map", mapping),
                                     ("--pool-from", pool_from and fmt != "sacct"),
                                     (f"--time-unit {time_unit}", time_unit != "s")) if on]
        if given:
            raise ConfigError(
                f"{path} is read as a {fmt} trace, whose columns and time units are fixed: "
                f"{' and '.join(given)} would be ignored; drop {'them' if len(given) > 1 else 'it'}"
                ", or pass --format generic to map the columns yourself")
    if fmt == "sacct":
        from sia.data.sacct import read_sacct

        return read_sacct(path, on_bad_rows, pool_from=pool_from, arrival=arrival or "eligible")
    if arrival is not None:
        raise ConfigError(
            f"{path} is read as a {fmt} trace: --arrival {arrival} would be ignored (it chooses "
            "between a Slurm sacct export's Submit and Eligible times); drop it")
    if fmt == "philly":
        return read_philly(path, on_bad_rows)
    if fmt == "philly-joblog":
        return read_philly_joblog(path, on_bad_rows)
    if fmt == "pai":
        return read_pai(path, on_bad_rows)
    if fmt == "helios":
        return read_helios(path, on_bad_rows)
    if fmt == "canonical":
        return read_canonical(path, on_bad_rows)
    return read_generic(path, mapping, pool_from=pool_from, time_unit=time_unit,
                        on_bad_rows=on_bad_rows)
