"""The trace contract (DESIGN.md section 3): the job table, the pools table, and `validate`.

Every reader turns its format into a raw polars DataFrame that carries the
contract's columns (possibly still as strings) plus two bookkeeping columns,
``__sia_source_file`` and ``__sia_source_row``, and hands it to :func:`validate`, which
casts, checks and sorts it. A bad row either stops the read with an error
naming the file, the row and the column (``on_bad_rows="raise"``, the
default) or is dropped and counted in a :class:`CleaningReport`
(``on_bad_rows="drop"``). Nothing is dropped silently.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Literal

import polars as pl
from sia.data.errors import TraceError

#: Canonical job table: column -> dtype. Extra columns are kept after these.
JOB_SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.String(),
    "pool": pl.String(),
    "submit_time": pl.Float64(),  # seconds since the trace's first submission
    "duration": pl.Float64(),  # run time in seconds, > 0
    "num_gpus": pl.Int32(),  # gang size, >= 1
    "tag": pl.String(),  # nullable: experiment tag / job name / group
    "user": pl.String(),  # nullable
    "preemptible": pl.Boolean(),  # false unless the trace says otherwise
}
#: Contract columns that a canonical table may lack (written before they existed, or built in
#: memory): absent means null for every job. ``validate`` always writes them.
NULLABLE_EXTRA_SCHEMA: dict[str, pl.DataType] = {
    # the requested time limit in seconds (Slurm's Timelimit): the scheduler ends the job
    # there (state TIMEOUT), so a job whose limit fits a window is certain to fit it
    "time_limit": pl.Float64(),
    "state": pl.String(),  # how the job ended: COMPLETED, FAILED, TIMEOUT, CANCELLED...
    # seconds the job waited in the scheduler's queue, known, before it could run (Slurm:
    # Eligible - Submit, a dependency, --begin or a hold; its submit_time is when it became
    # eligible): work a forecaster may count as coming (empty or 0: not held)
    "hold_time": pl.Float64(),
}
REQUIRED_JOB_COLUMNS = ("pool", "submit_time", "duration", "num_gpus")
OPTIONAL_JOB_COLUMNS = ("job_id", "tag", "user", "preemptible", *NULLABLE_EXTRA_SCHEMA)
#: Seconds Slurm lets a job run past its time limit before it is killed (OverTimeLimit, 0 by
#: default, plus KillWait, 30 s by default): a job that ran longer than its limit by more than
#: this is a warning, and a limit is a guarantee of fitting a window only with this margin.
#: On Graham 649 GPU jobs ran past their limit, all but one by at most 60 s.
TIME_LIMIT_GRACE_S = 60.0
#: An extra column a trace may carry (``--map region=YOURS``): the region that holds the
#: job's pool (its home, where its data starts); ``sia replay`` then replays on regions.
REGION_COLUMN = "region"

#: Canonical pools table.
POOL_SCHEMA: dict[str, pl.DataType] = {
    "pool": pl.String(),
    "quota_gpus": pl.Int32(),
}

#: Prefix of every column the readers add for their own bookkeeping (source file and row,
#: working columns). A trace's own column with this prefix is refused (it would clash), so a
#: user's column never vanishes under a name the readers use (issue 36).
INTERNAL_PREFIX = "__sia_"
SOURCE_FILE = INTERNAL_PREFIX + "source_file"
SOURCE_ROW = INTERNAL_PREFIX + "source_row"  # 1-based data row in the source file (header excluded)


def is_internal(column: str) -> bool:
    """Return whether ``column`` is a readers' bookkeeping column (:data:`INTERNAL_PREFIX`)."""
    return column.startswith(INTERNAL_PREFIX)


def user_columns(columns) -> list[str]:
    """Return the names of ``columns`` that are not bookkeeping columns, in order."""
    return [c for c in columns if not is_internal(c)]


def refuse_internal_columns(columns, path) -> None:
    """Raise TraceError when a trace's own column uses :data:`INTERNAL_PREFIX`."""
    clash = [c for c in columns if is_internal(c)]
    if clash:
        raise TraceError(f"{path}: column {clash[0]!r} starts with {INTERNAL_PREFIX!r}, which the "
                         "readers reserve for their own columns; rename it")

OnBadRows = Literal["raise", "drop"]

# Kinds of bad rows, in the order they are checked; report keys use these names.
BAD_ROW_KINDS = (
    "missing_value",
    "non_numeric",
    "out_of_range",
    "unparsable_time",
    "nonpositive_duration",
    "negative_submit_time",
    "too_few_gpus",
    "exact_duplicate",
    "duplicate_job_id",
    "malformed",  # a record of the wrong shape (a job log's JSON)
)


@dataclass
class CleaningReport:
    """What a read saw and what it dropped, per kind of bad row."""

    source: str
    rows_read: int = 0
    rows_kept: int = 0
    dropped: dict[str, int] = field(default_factory=dict)
    left_out: dict[str, int] = field(default_factory=dict)  # by design, e.g. CPU-only jobs
    notes: list[str] = field(default_factory=list)
    #: values kept but implausible (a job wider than any cluster, ...): see sia.data.plausibility
    warnings: list[str] = field(default_factory=list)
    pools: int = 0
    first_submit: str | None = None  # the trace's clock origin, when it had one

    def drop(self, kind: str, count: int) -> None:
        """Count ``count`` rows dropped as ``kind``."""
        if count:
            self.dropped[kind] = self.dropped.get(kind, 0) + int(count)

    def leave_out(self, kind: str, count: int) -> None:
        """Count ``count`` rows left out by design (not errors) as ``kind``."""
        if count:
            self.left_out[kind] = self.left_out.get(kind, 0) + int(count)

    @property
    def rows_dropped(self) -> int:
        """Total rows dropped as bad."""
        return sum(self.dropped.values())

    def to_dict(self) -> dict:
        """Return the report as plain JSON-ready data."""
        return {
            "source": self.source,
            "rows_read": self.rows_read,
            "rows_kept": self.rows_kept,
            "rows_dropped": self.rows_dropped,
            "dropped": dict(self.dropped),
            "left_out": dict(self.left_out),
            "pools": self.pools,
            "first_submit": self.first_submit,
            "notes": list(self.notes),
            "warnings": list(self.warnings),
        }

    def to_json(self) -> str:
        """Return the report as indented JSON."""
        return json.dumps(self.to_dict(), indent=2)

    def merge(self, other: CleaningReport) -> None:
        """Add another file's counts to this report (multi-file reads)."""
        self.rows_read += other.rows_read
        self.rows_kept += other.rows_kept
        for k, v in other.dropped.items():
            self.drop(k, v)
        for k, v in other.left_out.items():
            self.leave_out(k, v)
        self.notes.extend(other.notes)
        self.warnings.extend(other.warnings)


def _file(df: pl.DataFrame, source: str) -> str:
    """Return the file a table was read from (its first row's), else ``source``."""
    if SOURCE_FILE in df.columns and df.height:
        return str(df[SOURCE_FILE][0])
    return source


def _where(df: pl.DataFrame, idx: int, source: str) -> str:
    """Return 'file: row N' for the row at position ``idx`` of ``df``."""
    file = df[SOURCE_FILE][idx] if SOURCE_FILE in df.columns else source
    row = df[SOURCE_ROW][idx] if SOURCE_ROW in df.columns else idx + 1
    return f"{file}: row {row}"


class BadRows:
    """Collects bad rows of one table; raises on the first or drops and counts them.

    Readers use it too (for their own parse steps) so that every error has the
    same shape: ``FILE: row N, column 'C': PROBLEM``.
    """

    def __init__(self, df: pl.DataFrame, source: str, on_bad_rows: OnBadRows,
                 report: CleaningReport, hint: str | None = None):
        if on_bad_rows not in ("raise", "drop"):
            raise TraceError(f"on_bad_rows must be 'raise' or 'drop', not {on_bad_rows!r}")
        self.df = df
        self.source = source
        self.on_bad_rows = on_bad_rows
        self.report = report
        self.hint = hint or "fix the file, or pass --clean to drop such rows (they are counted in the report)"

    def flag(self, mask: pl.Series, column: str, kind: str, problem: str) -> pl.DataFrame:
        """Handle the rows where ``mask`` is true; return the table without them.

        ``problem`` may use ``{value}`` for the offending cell's value.
        """
        mask = mask.fill_null(False)
        n_bad = int(mask.sum())
        if n_bad == 0:
            return self.df
        if self.on_bad_rows == "raise":
            idx = int(mask.arg_true()[0])
            value = self.df[column][idx] if column in self.df.columns else None
            more = f" ({n_bad - 1} more such rows)" if n_bad > 1 else ""
            raise TraceError(
                f"{_where(self.df, idx, self.source)}, column '{column}': "
                f"{problem.format(value=value)}{more}; {self.hint}"
            )
        self.report.drop(kind, n_bad)
        self.df = self.df.filter(~mask)
        return self.df


def _cast_numeric(bad: BadRows, column: str, dtype: pl.DataType) -> None:
    """Cast ``column`` to ``dtype`` in place; cells that are not finite numbers are bad rows.

    Every cell is checked whatever the column's type (a Parquet float column
    may hold inf or NaN); a boolean column is not numbers (a true would
    silently become 1), and an integer column must fit ``dtype`` (a GPU count
    of 2^31 or more does not fit the contract's Int32).
    """
    df = bad.df
    col = df[column]
    if col.dtype == pl.Boolean:
        raise TraceError(
            f"{_file(df, bad.source)}: column '{column}' holds "
            "true/false values, not numbers; give it as numbers (or map another column "
            "onto it with --map)")
    if col.dtype == pl.String:
        casted = col.str.strip_chars().cast(pl.Float64, strict=False)
    elif col.dtype.is_numeric():
        casted = col.cast(pl.Float64, strict=False)
    else:
        raise TraceError(
            f"{_file(df, bad.source)}: column '{column}' has type "
            f"{col.dtype}, not numbers")
    bad_mask = casted.is_null() & col.is_not_null()
    bad_mask = bad_mask | (casted.is_not_null() & ~casted.is_finite())
    bad.df = df.with_columns(casted.alias(_CAST))
    bad.flag(bad_mask, column, "non_numeric", "{value!r} is not a valid finite number")
    if dtype.is_float():  # times: beyond 2^53 a float no longer holds every whole number
        cast = bad.df[_CAST]
        # >=: a whole number just above 2^53 (in a string or an Int64) rounds to 2^53
        bad.flag(cast.is_not_null() & (cast.abs() >= MAX_EXACT_SECONDS), column, "out_of_range",
                 f"{{value!r}} is 2^53 ({MAX_EXACT_SECONDS:,.0f}) or more, too large to count "
                 "time exactly (nearby values would become equal); check the unit, or subtract "
                 "the trace's start from the times")
    if dtype.is_integer():
        cast = bad.df[_CAST]
        bad.flag(cast.is_not_null() & (cast != cast.round(0)), column, "non_numeric",
                 "{value!r} is not a whole number")
        cast = bad.df[_CAST]
        top = float(2 ** (8 * _INT_BYTES[dtype.__class__] - 1) - 1)
        bad.flag(cast.is_not_null() & (cast.abs() > top), column, "out_of_range",
                 f"{{value!r}} is out of range (at most {top:,.0f})")
    bad.df = bad.df.with_columns(pl.col(_CAST).alias(column)).drop(_CAST)
    if dtype.is_integer():
        bad.df = bad.df.with_columns(pl.col(column).round(0).cast(dtype))


_CAST = INTERNAL_PREFIX + "cast"
#: The largest time (in the file's unit) a float64 holds with every whole number below it:
#: 2^53. Int64 times near 2^62 would all become the same float (issue 36).
MAX_EXACT_SECONDS = float(2**53)
_INT_BYTES = {pl.Int8: 1, pl.Int16: 2, pl.Int32: 4, pl.Int64: 8}


#: The contract's text columns (and preemptible, read from text): one scalar per cell.
TEXT_COLUMNS = ("job_id", "pool", "tag", "user", "state", "preemptible")


def check_text_column(df: pl.DataFrame, column: str, source: str, what: str | None = None) -> None:
    """Raise TraceError when ``column`` of ``df`` holds lists, structs, arrays, objects or binary
    values (a Parquet file's nested or byte columns): a pool, id, tag or user is one text
    value per cell. ``what`` names the column in the message (default: its own name)."""
    if column not in df.columns:
        return
    dtype = df.schema[column]
    nested = isinstance(dtype, pl.List | pl.Array | pl.Struct | pl.Object)
    if not (nested or dtype == pl.Binary):
        return
    kind = "binary (bytes)" if dtype == pl.Binary else f"nested ({dtype})"
    raise TraceError(
        f"{_file(df, source)}: column {what or repr(column)} holds {kind} values, not text; "
        "store one text value per cell (e.g. cast it to a string column), or map another "
        "column onto it with --map")


def validate(
    jobs: pl.DataFrame,
    source: str = "<table>",
    on_bad_rows: OnBadRows = "raise",
    report: CleaningReport | None = None,
    duplicate_subset: Sequence[str] | None = None,
    rebase_time: bool = False,
) -> tuple[pl.DataFrame, CleaningReport]:
    """Check a raw job table against the contract; return (clean table, report).

    ``jobs`` must hold the required columns (``pool``, ``submit_time`` in
    seconds, ``duration`` in seconds, ``num_gpus``), as numbers or numeric
    strings. Missing optional columns are filled (``job_id`` from the row
    number, ``tag``/``user`` null, ``preemptible`` false). Extra columns are
    kept. ``duplicate_subset`` names the columns on which two rows count as
    exact duplicates (default: no such check; readers check the rows as read with
    :func:`flag_exact_duplicates` themselves). With ``rebase_time`` the
    submit times are shifted so the first submission is at 0.

    The result is sorted by (submit_time, job_id), has the contract's dtypes
    first, and no bookkeeping columns.
    """
    report = report or CleaningReport(source=source)
    missing = [c for c in REQUIRED_JOB_COLUMNS if c not in jobs.columns]
    if missing:
        raise TraceError(
            f"{source}: missing column(s) {', '.join(repr(c) for c in missing)}; "
            f"found {', '.join(repr(c) for c in user_columns(jobs.columns))}. "
            "Map your columns onto the contract (e.g. --map submit_time=submitted)."
        )
    for column in TEXT_COLUMNS:
        check_text_column(jobs, column, source)
    if SOURCE_ROW not in jobs.columns:
        jobs = jobs.with_row_index(SOURCE_ROW, offset=1)
    if report.rows_read == 0:
        report.rows_read = jobs.height
    bad = BadRows(jobs, source, on_bad_rows, report)
    _flag_values(bad, rebase_time)
    if duplicate_subset:
        flag_exact_duplicates(bad, list(duplicate_subset))
    _flag_job_ids(bad, on_bad_rows, source)
    df = _to_contract(bad, source, rebase_time)
    report.rows_kept = df.height
    report.pools = df["pool"].n_unique()
    return df, report


def _flag_values(bad: BadRows, rebase_time: bool) -> None:
    """Flag missing values in the required columns (empty strings count as missing), cast
    them to numbers, and flag durations <= 0, jobs without GPUs and (unless the times are
    rebased) negative submit times."""
    for column in REQUIRED_JOB_COLUMNS:
        col = bad.df[column]
        mask = col.is_null()
        if col.dtype == pl.String:
            mask = mask | (col.str.strip_chars() == "")
        elif col.dtype.is_float():
            mask = mask | col.is_nan()
        bad.flag(mask, column, "missing_value", "value is missing")

    _cast_numeric(bad, "submit_time", pl.Float64())
    _cast_numeric(bad, "duration", pl.Float64())
    _cast_numeric(bad, "num_gpus", pl.Int32())

    bad.flag(bad.df["duration"] <= 0, "duration", "nonpositive_duration",
             "duration {value} is not > 0 seconds")
    bad.flag(bad.df["num_gpus"] < 1, "num_gpus", "too_few_gpus",
             "num_gpus {value} is not >= 1 (CPU-only jobs are not GPU jobs)")
    if not rebase_time:
        bad.flag(bad.df["submit_time"] < 0, "submit_time", "negative_submit_time",
                 "submit_time {value} is negative (seconds since the trace's start)")
    if "time_limit" in bad.df.columns:
        _flag_time_limits(bad)
    if "hold_time" in bad.df.columns:
        _optional_seconds(bad, "hold_time")
        hold = bad.df["hold_time"]
        bad.flag((hold < 0).fill_null(False), "hold_time", "out_of_range",
                 "hold time {value} is negative (seconds from the job's submission to its "
                 "submit_time, when it could first run; leave the cell empty for none)")


def _optional_seconds(bad: BadRows, column: str) -> None:
    """Cast the optional seconds column ``column`` to floats (empty cells: none), flagging the
    cells that are not numbers."""
    col = bad.df[column]
    if col.dtype == pl.String:
        col = col.str.strip_chars()
        bad.df = bad.df.with_columns(pl.when(col == "").then(None).otherwise(col).alias(column))
    elif col.dtype == pl.Null:
        bad.df = bad.df.with_columns(pl.col(column).cast(pl.Float64))
    _cast_numeric(bad, column, pl.Float64())


def _flag_time_limits(bad: BadRows) -> None:
    """Cast the optional ``time_limit`` column (seconds; empty cells are no limit) and flag
    limits that are not positive numbers; a job that ran past its limit by more than
    :data:`TIME_LIMIT_GRACE_S` is kept and counted in the report's warnings (Slurm would have
    ended it there: the trace or the limit is off)."""
    _optional_seconds(bad, "time_limit")
    bad.flag(bad.df["time_limit"] <= 0, "time_limit", "out_of_range",
             "time limit {value} is not > 0 seconds (leave the cell empty for no limit)")
    over = (bad.df["duration"] > bad.df["time_limit"] + TIME_LIMIT_GRACE_S).fill_null(False)
    n_over = int(over.sum())
    if n_over:
        idx = int(over.arg_true()[0])
        bad.report.warnings.append(
            f"{n_over} job(s) ran longer than their time limit plus {TIME_LIMIT_GRACE_S:.0f} s of "
            f"grace (first: {_where(bad.df, idx, bad.source)}, duration "
            f"{bad.df['duration'][idx]:.0f} s, time_limit {bad.df['time_limit'][idx]:.0f} s); "
            "kept as they ran (a loan made on such a limit overruns; the lending report counts it)")


def flag_exact_duplicates(bad: BadRows, columns: Sequence[str] | None = None) -> None:
    """Flag the rows equal to an earlier row in every one of ``columns`` (default: every column
    of ``bad.df`` but the bookkeeping ones): exact duplicates.

    The one duplicate rule of every reader (issue 36): readers call it on the
    rows as read (the file's own text, before any parsing), so rows that differ
    in any field, even one the reader does not use, are not duplicates. With
    ``"raise"`` the first duplicate is a TraceError naming its row and the row it
    repeats; with ``"drop"`` every later copy is dropped and counted as
    ``exact_duplicate`` (the first copy is kept).
    """
    cols = list(columns) if columns is not None else user_columns(bad.df.columns)
    if not cols or bad.df.height < 2:
        return
    idx = INTERNAL_PREFIX + "index"
    first = bad.df.with_row_index(idx).select(pl.col(idx).min().over(cols)).to_series()
    later = first != pl.int_range(0, bad.df.height, dtype=first.dtype, eager=True)
    n_later = int(later.sum())
    if not n_later:
        return
    if bad.on_bad_rows == "raise":
        i = int(later.arg_true()[0])
        repeated = _where(bad.df, int(first[i]), bad.source).split(": ", 1)[1]
        raise TraceError(
            f"{_where(bad.df, i, bad.source)}: exact duplicate of {repeated} ({n_later} duplicate "
            f"rows in all); {bad.hint}")
    bad.flag(later, cols[0], "exact_duplicate", "exact duplicate row")


def _flag_job_ids(bad: BadRows, on_bad_rows: OnBadRows, source: str) -> None:
    """Give ``bad.df`` its job ids (the row numbers when the table has none), flag missing
    ones and repeats of an earlier id (raise on the first with "raise")."""
    df = bad.df
    if "job_id" not in df.columns or df["job_id"].null_count() == df.height:
        df = df.with_columns(pl.col(SOURCE_ROW).cast(pl.String).alias("job_id"))
    else:
        df = df.with_columns(stripped(df["job_id"].cast(pl.String), bad.report))
        bad.df = df
        bad.flag(df["job_id"].is_null() | (df["job_id"] == ""), "job_id", "missing_value",
                 "value is missing")
        df = bad.df
    bad.df = df
    dup_id = df["job_id"].is_duplicated() & ~df["job_id"].is_first_distinct()
    if on_bad_rows == "raise" and dup_id.any():
        idx = int(dup_id.arg_true()[0])
        jid = df["job_id"][idx]
        first_idx = int((df["job_id"] == jid).arg_true()[0])
        raise TraceError(
            f"{_where(df, idx, source)}, column 'job_id': duplicate job id {jid!r} "
            f"(first at {_where(df, first_idx, source).split(': ', 1)[1]}); {bad.hint}"
        )
    bad.flag(dup_id, "job_id", "duplicate_job_id", "duplicate job id {value!r}")


def strip_note(raw: pl.Series, stripped_values: pl.Series, name: str | None = None) -> str | None:
    """Return the report's line on the white space stripped from a column's values (how many
    changed, examples, and which names merged with another as a result); None when nothing
    changed. ``raw`` and ``stripped_values`` are the column before and after, row by row."""
    changed = (raw != stripped_values).fill_null(False)
    n = int(changed.sum())
    if not n:
        return None
    name = name or raw.name
    pairs = pl.DataFrame({"raw": raw.filter(changed), "new": stripped_values.filter(changed)})
    shown = ", ".join(f"{a!r} -> {b!r}" for a, b in pairs.unique(maintain_order=True)
                      .head(3).iter_rows())
    both = pl.DataFrame({"raw": raw, "new": stripped_values}).drop_nulls().unique()
    merged = both.group_by("new").agg(pl.col("raw").sort()).filter(pl.col("raw").list.len() > 1)
    merged = merged.sort("new")
    line = (f"{name}: leading/trailing white space removed from {n} value(s) ({shown}"
            f"{', ...' if pairs.unique().height > 3 else ''})")
    if merged.height:
        groups = "; ".join(f"{r['new']!r} from {', '.join(map(repr, r['raw']))}"
                           for r in merged.head(3).iter_rows(named=True))
        line += (f"; {merged.height} {name} name(s) now equal to another, read as one: {groups}"
                 f"{'; ...' if merged.height > 3 else ''}")
    return line


def stripped(col: pl.Series, report: CleaningReport) -> pl.Series:
    """Return the text column ``col`` with leading/trailing white space stripped, noting in
    ``report`` what changed (:func:`strip_note`): names never merge without a word."""
    out = col.str.strip_chars()
    note = strip_note(col, out)
    if note:
        report.notes.append(note)
    return out


def _to_contract(bad: BadRows, source: str, rebase_time: bool) -> pl.DataFrame:
    """Return ``bad.df`` with the optional columns filled, the contract's dtypes first (extra
    columns after, bookkeeping dropped), the submit times rebased if asked, sorted by
    (submit_time, job_id)."""
    df = bad.df
    fills = []
    for column in ("tag", "user"):
        if column not in df.columns:
            fills.append(pl.lit(None, dtype=pl.String).alias(column))
        else:
            fills.append(pl.col(column).cast(pl.String))
    for column, dtype in NULLABLE_EXTRA_SCHEMA.items():
        fills.append(pl.lit(None, dtype=dtype).alias(column) if column not in df.columns
                     else pl.col(column).cast(dtype))
    if "preemptible" not in df.columns:
        fills.append(pl.lit(False).alias("preemptible"))
    else:
        fills.append(_to_bool(df["preemptible"], source, df).alias("preemptible"))
    df = df.with_columns(fills)
    df = df.with_columns(stripped(df["pool"].cast(pl.String), bad.report))
    if rebase_time and df.height:
        df = df.with_columns(pl.col("submit_time") - pl.col("submit_time").min())
        bad.df = df
        df = bad.flag(~df["submit_time"].is_finite(), "submit_time", "non_numeric",
                      "{value} s after the first submission is too far to count in seconds")

    contract = {**JOB_SCHEMA, **NULLABLE_EXTRA_SCHEMA}
    # extra columns follow, and a reader's working columns (it drops them itself)
    extra = [c for c in df.columns if c not in contract and c not in (SOURCE_FILE, SOURCE_ROW)]
    return df.select(
        [pl.col(c).cast(t) for c, t in contract.items()] + [pl.col(c) for c in extra]
    ).sort(["submit_time", "job_id"], maintain_order=True)


def _to_bool(col: pl.Series, source: str, df: pl.DataFrame | None = None) -> pl.Series:
    """Interpret a preemptible column (bool, 0/1, true/false/yes/no) as booleans."""
    if col.dtype == pl.Boolean:
        return col.fill_null(False)
    text = col.cast(pl.String).str.strip_chars().str.to_lowercase()
    truthy = text.is_in(["1", "true", "yes", "y", "t"])
    falsy = text.is_in(["0", "false", "no", "n", "f", ""]) | text.is_null()
    if not (truthy | falsy).all():
        idx = int((~(truthy | falsy)).arg_true()[0])
        where = _where(df, idx, source) if df is not None else f"{source}: row {idx + 1}"
        raise TraceError(
            f"{where}, column 'preemptible': {col[idx]!r} is not a boolean "
            "(use true/false, yes/no or 1/0)"
        )
    return truthy


def check_jobs(jobs: pl.DataFrame, where: str = "job table") -> None:
    """Raise TraceError unless ``jobs`` already is a canonical job table (for tables in memory)."""
    for column, dtype in JOB_SCHEMA.items():
        if column not in jobs.columns:
            raise TraceError(f"{where}: missing column {column!r} of the trace contract")
        if jobs[column].dtype != dtype:
            raise TraceError(
                f"{where}: column {column!r} has dtype {jobs[column].dtype}, expected {dtype}"
            )
    for column, dtype in NULLABLE_EXTRA_SCHEMA.items():
        if column in jobs.columns and jobs[column].dtype not in (dtype, pl.Null):
            raise TraceError(
                f"{where}: column {column!r} has dtype {jobs[column].dtype}, expected {dtype}")
    if jobs.height:
        if (jobs["duration"] <= 0).any():
            raise TraceError(f"{where}: column 'duration' has values <= 0")
        if (jobs["num_gpus"] < 1).any():
            raise TraceError(f"{where}: column 'num_gpus' has values < 1")
        if jobs["job_id"].is_duplicated().any():
            raise TraceError(f"{where}: column 'job_id' has duplicates")


def make_pools(quotas: dict[str, int]) -> pl.DataFrame:
    """Return a canonical pools table from ``{pool: quota_gpus}``, sorted by pool."""
    df = pl.DataFrame(
        {"pool": list(quotas), "quota_gpus": [int(q) for q in quotas.values()]},
        schema=POOL_SCHEMA,
    ).sort("pool")
    check_pools(df)
    return df


def check_pools(pools: pl.DataFrame, jobs: pl.DataFrame | None = None,
                where: str = "pools table") -> None:
    """Raise TraceError unless ``pools`` is a valid pools table (and covers ``jobs``).

    Every pool of ``jobs`` must have a quota, and the quota must fit the pool's
    widest job (otherwise that job could never run under FCFS).
    """
    for column in POOL_SCHEMA:
        if column not in pools.columns:
            raise TraceError(f"{where}: missing column {column!r}")
    if pools["pool"].is_duplicated().any():
        dup = pools.filter(pools["pool"].is_duplicated())["pool"][0]
        raise TraceError(f"{where}: pool {dup!r} is listed twice")
    if (pools["quota_gpus"] < 1).any():
        bad = pools.filter(pl.col("quota_gpus") < 1)["pool"][0]
        raise TraceError(f"{where}: pool {bad!r} has a quota below 1 GPU")
    if jobs is not None and jobs.height:
        # in job order: the error names the same pool every time (group_by alone does not keep
        # an order, so two identical checks could name different pools)
        widest = jobs.group_by("pool", maintain_order=True).agg(pl.col("num_gpus").max().alias("widest"))
        joined = widest.join(pools, on="pool", how="left")
        missing = joined.filter(pl.col("quota_gpus").is_null())
        if missing.height:
            raise TraceError(
                f"{where}: no quota for pool(s) {', '.join(sorted(missing['pool'].to_list()))}"
            )
        too_small = joined.filter(pl.col("quota_gpus") < pl.col("widest"))
        if too_small.height:
            r = too_small.row(0, named=True)
            raise TraceError(
                f"{where}: pool {r['pool']!r} has quota {r['quota_gpus']} GPUs but a job "
                f"needs {r['widest']}; such a job could never start"
            )
