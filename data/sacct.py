"""Slurm ``sacct`` exports (``sacct --parsable2`` / ``-P``, or ``-p``) into the trace contract.

A file (optionally gzip'd, with or without a UTF-8 BOM, LF or CRLF line
ends) whose first line is a ``|``-separated header of sacct field names, in
any order, one job (or job step) a line. ``sacct --delimiter`` with ``;`` or a
tab reads the same (a ``,`` export is left to the generic CSV reader: it also
splits TRES strings). Refused by name: an export without its header
(``-n`` / ``--noheader``: the first line is a job, so no field can be named),
sacct's fixed-width table (no ``-P``: cells cut to their width), a second
header that differs from the first (exports of different ``--format``
concatenated) and an export of several clusters (``-M a,b`` / ``-L``: a
``Cluster`` field with more than one value). A line that repeats the header
(exports concatenated) is skipped and noted, as are blank lines. sacct does
not escape its delimiter: when the header has one free-text field (JobName,
Comment, WorkDir, ...), a row with too many fields holds the delimiter inside
it and is read whole (noted); otherwise such a row is a bad row naming it. The
reader uses these fields (matched case-insensitively; any other field is
tolerated and ignored):

* ``JobID`` (else ``JobIDRaw``): the job id. Steps (``123.batch``, ``123.0``,
  ``123.extern``) fold into their job: the job line carries the fields, and a
  step never becomes a job. Array elements (``123_4``) and pending array
  records (``123_[1-3%2]``) are jobs of their own. The components of a
  heterogeneous job (``123+0``, ``123+1``) are one gang: they fold into the
  first one kept, with their GPUs summed, the earliest submission and the
  longest run and limit (``JobIDRaw`` gives each component an id of its own,
  so an export without ``JobID`` reads them as jobs). With ``--duplicates``
  (``-D``) sacct lists each run of a requeued job under one id: when every run
  but the last (latest Submit) ended REQUEUED, PREEMPTED, NODE_FAIL, BOOT_FAIL
  or RESIZING, the job is its last run, as sacct shows it without ``-D``
  (Slurm resets the submit time on a requeue); any other repeated id is a bad
  row.
* ``Submit``, ``Start``, ``End``: ``YYYY-MM-DDTHH:MM:SS`` (or with a space), or
  Unix seconds when the whole field is (``SLURM_TIME_FORMAT=%s``); ``Unknown``,
  ``None`` or empty is missing. Times are read as written (no time zone): across a DST change the
  wall clock may put End before Start, which ``ElapsedRaw`` settles.
* ``Eligible`` (optional): when Slurm could first schedule the job, later than ``Submit`` for
  a job held by a dependency, a ``--begin`` time or a hold. A started job arrives then (kept
  within [Submit, Start]; ``Unknown`` keeps Submit), so a chain of dependent jobs is replayed
  one after another, not all at once; the report counts the jobs held. Its ``hold_time`` is
  the seconds from ``Submit`` to that arrival: Slurm's queue held it all that time, so a
  forecaster may count it as known work to come (0: not held). Without the field, or
  with ``arrival="submit"`` (``--arrival submit``: the field is ignored, and the report says
  how many jobs it would have held), jobs arrive at ``Submit`` and ``hold_time`` is empty.
* ``ElapsedRaw`` (seconds), else ``Elapsed``, else ``End - Start``: the
  duration. ``TimelimitRaw`` (minutes), else ``Timelimit``: the time limit;
  ``UNLIMITED``, ``Partition_Limit`` and the raw sentinels 4294967295 /
  4294967294 are no limit (null); ``INVALID`` (in Elapsed or Timelimit) is not
  recorded. ``Elapsed`` and ``Timelimit`` are Slurm time strings:
  ``D-HH:MM:SS``, ``D-HH:MM``, ``D-HH``, ``HH:MM:SS``, ``MM:SS``, ``MM:SS.mmm``
  or whole minutes.
* ``AllocTRES`` (for a job that started) else ``ReqTRES``: the GPUs, from
  ``gres/gpu=N``, else the sum of the typed ``gres/gpu:TYPE=N`` entries
  (Slurm lists the untyped total beside its typed parts, which are not added
  to it); both are the job's totals over its nodes. When the TRES name no GPU
  or are missing, ``AllocGRES`` / ``ReqGRES`` (Slurm < 19.05: ``gpu:2``,
  ``gpu:tesla:2``, ``gpu:tesla:2(IDX:0-1)``; read as totals over the nodes, see
  :data:`GPU_FIELDS`) give them. When no job names a GPU the report warns that the cluster's
  accounting may not track ``gres/gpu``.
* ``State``: ``CANCELLED by 123`` becomes ``CANCELLED``; other states
  (``PREEMPTED``, ``NODE_FAIL``, ``OUT_OF_MEMORY``, ``DEADLINE``...) are kept
  as written, upper case.
* ``Partition`` is the pool (``pool_from`` may name ``account``, ``user``,
  another field, ``const:NAME`` or ``file-stem``); ``User`` is the user, or
  ``Account`` when the file has no ``User`` field (Graham's export documents
  the account as the user's identity); ``JobName`` is the tag.

Left out by design and counted in ``report.left_out`` (never dropped
silently): step lines folded into their job (``job_steps``), steps whose job
line is not in the file (``step_without_job``), earlier runs of requeued jobs
(``requeued_runs``), REVOKED federated siblings (``revoked``: they ran on
another cluster), later components of heterogeneous jobs
(``het_components``), jobs with no GPU (``cpu_only``), jobs with no TRES or
GRES recorded at all (``no_tres``), jobs
cancelled while pending (``cancelled_pending``: state CANCELLED with no start,
or a zero-second run, as Slurm records a pending job's cancellation), other
jobs that never started (``never_started``: no start, or state PENDING),
jobs still running (``unfinished``: started, no end; RUNNING, SUSPENDED, a
REQUEUED job pending again) and zero-second runs (``zero_second_run``: the
contract's durations are > 0). Row N is data row N (line N + 1 of the file).
"""

from __future__ import annotations

import gzip
import io
import re
from pathlib import Path

import polars as pl
from sia.data.errors import ConfigError, TraceError
from sia.data.formats import arrival_problem
from sia.data.paths import check_regular
from sia.data.readers import _add_source, _check_header, _drop_blank_rows, _finish
from sia.data.schema import (
    INTERNAL_PREFIX,
    SOURCE_FILE,
    SOURCE_ROW,
    BadRows,
    CleaningReport,
    OnBadRows,
    flag_exact_duplicates,
    is_internal,
    strip_note,
    user_columns,
)

#: The sacct fields the reader uses, by their lower-case name.
FIELDS = {name.lower(): name for name in (
    "JobID", "JobIDRaw", "User", "Account", "Partition", "JobName", "Submit", "Eligible", "Start",
    "End", "Elapsed", "ElapsedRaw", "Timelimit", "TimelimitRaw", "ReqTRES", "AllocTRES", "ReqGRES",
    "AllocGRES", "State", "Cluster")}
#: Cell values that mean "not recorded" (upper case).
MISSING = ("", "UNKNOWN", "NONE")
#: Time-limit values that mean "no limit" (upper case); the raw forms are Slurm's INFINITE and
#: NO_VAL sentinels.
NO_LIMIT = ("UNLIMITED", "PARTITION_LIMIT", "4294967295", "4294967294")
#: The date-time layouts of Submit / Start / End (sacct's default, and with a space).
DATETIME_FORMATS = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M:%S")
#: A Slurm time string: [D-]A[:B[:C]][.fraction]
_SLURM_TIME = r"^(?:(\d+)-)?(\d+)(?::(\d+))?(?::(\d+))?(\.\d+)?$"
#: Delimiters other than ``|`` that ``sacct --delimiter`` may have used, tried in this order on
#: the header line (``,`` is left to the generic CSV reader: it also separates the entries of a
#: TRES string, so only a quoted CSV can hold them).
OTHER_DELIMITERS = (";", "\t")
#: A job id as sacct prints it: ``123``, ``123_4``, ``123_[1-3%2]``, ``123+0``, ``123.batch``.
_JOB_ID = re.compile(r"^\d+(?:_(?:\d+|\[[^\]]*\]))?(?:\+\d+)?(?:\.\S+)?$")
_DATE_TIME = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d$")
_GZIP_MAGIC = b"\x1f\x8b"
_DATA = INTERNAL_PREFIX  # prefix of the reader's working columns
#: Working column: a job's Submit when it arrives at Eligible (its ``hold_time`` is the gap).
_SUBMITTED = f"{_DATA}submitted"
_RAW_POOL = _DATA + "raw_pool"  # the pool field's cells as written
_RAW_ID = _DATA + "raw_id"  # the job id field's cells as written


# --------------------------------------------------------------------------- detection

def _read_bytes(path: Path) -> bytes:
    """Return the file's bytes, decompressed when it is gzip (by its magic bytes)."""
    data = path.read_bytes()
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError) as exc:
            raise TraceError(f"{path}: a broken gzip file ({exc})") from None
    return data


def _first_line(path: Path) -> str | None:
    """Return a file's first line (gzip or not) without its BOM and line end; None when it
    cannot be read as UTF-8 text."""
    try:
        with path.open("rb") as fh:
            magic = fh.read(2)
        opener = gzip.open if magic == _GZIP_MAGIC else open
        with opener(path, "rb") as fh:
            line = fh.readline(1 << 16)
        return line.decode("utf-8").lstrip("\ufeff").rstrip("\r\n")
    except (OSError, EOFError, UnicodeDecodeError):
        return None


def _known(names: list[str]) -> set[str]:
    """Return the sacct fields (lower case) among ``names``."""
    return {n.strip().lower() for n in names} & set(FIELDS)


def _is_header(names: list[str]) -> bool:
    """Whether ``names`` read as a sacct header: JobID or JobIDRaw and one more field the reader
    uses, or without an id three of them (so that a missing JobID is named by the reader)."""
    known = _known(names)
    return len(known) >= (2 if known & {"jobid", "jobidraw"} else 3)


def split_header(line: str) -> tuple[str, list[str]] | None:
    """Return (delimiter, names) of a first line: ``|`` (``-p`` / ``-P``) when it holds one;
    else one of :data:`OTHER_DELIMITERS` (``--delimiter``) or white space (sacct's fixed-width
    table, ``" "``) when the names it gives hold JobID or JobIDRaw and two more sacct fields
    (a generic CSV keeps its own reader); None otherwise."""
    if "|" in line:
        return "|", [name.strip() for name in line.split("|")]
    for delim in (*OTHER_DELIMITERS, None):
        if delim is not None and delim not in line:
            continue
        names = [n.strip() for n in line.split(delim)]
        known = _known(names)
        if known & {"jobid", "jobidraw"} and len(known) >= 3:
            return delim or " ", names
    return None


def _looks_like_job_line(cells: list[str]) -> bool:
    """Whether ``cells`` (a ``|``-separated line) read as a sacct job line, not a header: a job
    id first or anywhere (``123``, ``123_4``, ``123+0``, ``123.batch``) and a date-time."""
    has_id = any(_JOB_ID.match(c.strip()) for c in cells)
    has_time = any(_DATE_TIME.match(c.strip()) for c in cells)
    return has_id and has_time


def is_sacct(path: Path | str) -> bool:
    """Return whether ``path`` is a file that starts with a sacct header: names (case-insensitive,
    see :func:`split_header`) holding JobID or JobIDRaw and one more field the reader uses, or
    without an id three of them (so that a missing JobID is named by the sacct reader); or a
    ``|``-separated job line (an export without its header, which the reader refuses by name)."""
    path = Path(path)
    if not path.is_file():
        return False
    line = _first_line(path)
    if line is None:
        return False
    split = split_header(line)
    if split is None:
        return False
    delim, names = split
    if _is_header(names):
        return True
    return delim == "|" and _looks_like_job_line(names)


# --------------------------------------------------------------------------- reading

def _decode(path: Path) -> tuple[bytes, str]:
    """Return a sacct export's bytes (decompressed) and its text without a BOM; a missing file,
    a folder or text that is not UTF-8 is a TraceError naming the file."""
    if not path.exists():
        raise TraceError(f"{path}: no such file")
    check_regular(path)
    if not path.is_file():
        raise TraceError(f"{path}: not a file (a sacct export is one file, gzip'd or not)")
    data = _read_bytes(path)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise TraceError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start}); "
                         "convert it, e.g. with iconv -f latin1 -t utf-8") from None
    return data, text.lstrip("\ufeff")


def _delimiter(first: str, path: Path) -> str:
    """Return the delimiter of an export's first line (:func:`split_header`; ``|`` when it has
    none); a first line that is a job (an export without its header) or sacct's fixed-width
    table is a TraceError naming the file and saying how to export."""
    if not first.strip():
        raise TraceError(f"{path}: empty first line; expected a sacct header such as "
                         "JobID|Submit|Start|End|State|...")
    split = split_header(first)
    if split is None:
        return "|"
    delim, names = split
    if delim == " ":
        raise TraceError(
            f"{path}: sacct's fixed-width table (columns cut to their width, e.g. "
            "'CANCELLED+'), not a parsable export; export with sacct --parsable2 (-P)")
    if delim == "|" and not _is_header(names) and _looks_like_job_line(names):
        raise TraceError(
            f"{path}: the first line is a job ({first[:60]!r}), not a header: the export has "
            "no header (sacct -n / --noheader), so its fields cannot be named; export again "
            "without -n, with --parsable2 and --format=JobID,Submit,Start,End,... (see "
            "the docs, 'Slurm (sacct)')")
    return delim


def _header_lines(body: pl.Series, first: str, delim: str, path: Path) -> pl.Series:
    """Return the mask of the body lines that repeat the header (exports concatenated, each
    with its header); a header line that differs from the first line is a TraceError naming
    its row (exports of different fields, which cannot be read as one table)."""
    body = body.str.replace_all("\ufeff", "", literal=True)  # each export's own BOM
    maybe = body.str.to_lowercase().str.contains("jobid", literal=True).fill_null(False)
    if not maybe.any():
        return maybe
    cells = pl.select(pl.when(maybe).then(body).str.split(delim)
                      .list.eval(pl.element().str.strip_chars().str.to_lowercase())).to_series()
    known = cells.list.eval(pl.element().is_in(list(FIELDS))).list.sum()
    has_id = cells.list.eval(pl.element().is_in(["jobid", "jobidraw"])).list.any()
    mask = ((known >= 2) & has_id).fill_null(False)
    if mask.any():
        norm = [c.strip().lower() for c in first.split(delim)]
        differs = mask & (cells.list.join("\x1f") != "\x1f".join(norm)).fill_null(True)
        if differs.any():
            idx = int(differs.arg_true()[0])
            raise TraceError(
                f"{path}: row {idx + 1}: a header line that differs from the first line's "
                "(exports with different fields or field order, concatenated?); export "
                "once with one --format, or read each export on its own")
    return mask


#: The sacct fields of free text, which may hold the delimiter (sacct does not escape it).
FREE_TEXT = ("jobname", "comment", "admincomment", "systemcomment", "submitline", "workdir",
             "constraints", "wckey", "reason", "stdout", "stderr", "stdin", "extra",
             "container")


def _rejoin_free_text(df: pl.DataFrame, body: pl.Series, ragged: pl.Series, header: str,
                      delim: str, report: CleaningReport) -> tuple[pl.DataFrame, pl.Series]:
    """Return ``df`` with the rows that have more fields than the header rebuilt, and the
    mask of the rows still ragged: when the header has one free-text field
    (:data:`FREE_TEXT`, e.g. JobName), a row's extra fields are delimiters inside it, so the
    fields before it are read from the left and those after it from the right (noted). A
    row whose rejoined text holds a date-time (two lines run together?) stays ragged."""
    names = [n.strip().lower() for n in header.split(delim)]
    free = [i for i, n in enumerate(names) if n in FREE_TEXT]
    if len(free) != 1:
        return df, ragged
    k, n_fields, fixed = free[0], len(names), {}
    for idx in ragged.arg_true().to_list():
        cells = body[idx].split(delim)
        extra = len(cells) - n_fields
        inner = cells[k:k + extra + 1]
        if extra <= 0 or any(_DATE_TIME.match(c.strip()) for c in inner):
            continue
        fixed[idx] = [*cells[:k], delim.join(inner), *cells[k + extra + 1:]]
    if not fixed:
        return df, ragged
    rows = list(fixed)
    df = df.with_columns([df[c].scatter(rows, [fixed[i][j] for i in rows])
                          for j, c in enumerate(df.columns[:n_fields])])
    field = header.split(delim)[k].strip()
    report.notes.append(f"{len(rows)} row(s) with {delim!r} inside their {field} read whole "
                        f"(first: row {rows[0] + 1})")
    return df, ragged & ~pl.Series(range(len(ragged))).is_in(rows)


def _read_export(path: Path, on_bad_rows: OnBadRows, report: CleaningReport) -> pl.DataFrame:
    """Return the export as strings, its known fields renamed to their sacct spelling, with
    source file and row columns (row N = line N + 1); :func:`_strip_cells` strips the cells.

    A row whose field count differs from the header's (a ``|`` inside a job
    name, a cut line) stops the read, or with ``on_bad_rows="drop"`` is
    dropped and counted as ``wrong_field_count``. Lines that repeat the header
    (concatenated exports) are skipped and noted, like blank lines, which
    stay (all null) for the caller to skip.
    """
    data, text = _decode(path)
    lines = pl.Series(text.split("\n")).str.strip_suffix("\r")
    delim = _delimiter(lines[0], path)
    try:
        df = pl.read_csv(io.BytesIO(data), separator=delim, quote_char=None, infer_schema=False,
                         truncate_ragged_lines=True)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise TraceError(f"{path}: cannot read as a sacct export: "
                         f"{str(exc).strip().splitlines()[0]}") from None
    _check_header(df.columns, path)
    df = _add_source(df, path)
    body = lines.slice(1)
    if body.len() < df.height or (body.slice(df.height).str.strip_chars() != "").any():
        raise TraceError(f"{path}: cannot line up its rows with its lines (a line break inside "
                         "a field?); export with sacct --parsable2")
    body = body.head(df.height)
    headers = _header_lines(body, lines[0], delim, path)
    if headers.any():
        report.notes.append(f"{int(headers.sum())} line(s) repeating the header skipped "
                            "(concatenated exports; not counted as rows)")
    n_fields = lines[0].count(delim) + 1
    counts = body.str.count_matches(delim, literal=True) + 1
    ragged = (counts != n_fields) & (body.str.strip_chars() != "") & ~headers
    if ragged.any():
        df, ragged = _rejoin_free_text(df, body, ragged, lines[0], delim, report)
    if ragged.any():
        idx = int(ragged.arg_true()[0])
        if on_bad_rows == "raise":
            more = int(ragged.sum()) - 1
            raise TraceError(
                f"{path}: row {idx + 1}: {counts[idx]} fields, but the header has {n_fields}"
                + (f" ({more} more such rows)" if more else "")
                + f"; a {delim!r} inside a field (a job name, and the export has more than one "
                "free-text field to put it in?) or a cut line; fix the row, or pass --clean to "
                "drop such rows (they are counted in the report)")
        report.drop("wrong_field_count", int(ragged.sum()))
    df = df.filter(~ragged & ~headers)
    return _rename_fields(df, path)


def _rename_fields(df: pl.DataFrame, path: Path) -> pl.DataFrame:
    """Return ``df`` with its known fields renamed to their sacct spelling and the empty field
    of ``-p``'s trailing ``|`` dropped; a field named twice is a TraceError."""
    renames: dict[str, str] = {}
    for column in df.columns:
        name = column.lstrip("\ufeff").strip()
        known = FIELDS.get(name.lower())
        if known is not None:
            if known in renames.values():
                raise TraceError(f"{path}: the header names field {known!r} twice; remove one")
            renames[column] = known
        elif name == "" and not is_internal(column):
            renames[column] = f"{_DATA}empty{len(renames)}"  # sacct -p: a trailing '|'
    df = df.rename(renames)
    return df.drop([c for c in df.columns if c.startswith(f"{_DATA}empty")])


def _raw_names(df: pl.DataFrame, pool_source: tuple) -> pl.DataFrame:
    """Return the source row, the pool field's cells (when the pool is a field) and the job
    id's, as written (before :func:`_strip_cells`)."""
    id_field = "JobID" if "JobID" in df.columns else "JobIDRaw"
    cols = [pl.col(id_field).alias(_RAW_ID)]
    if pool_source[0] == "field":
        cols.append(pl.col(pool_source[1]).alias(_RAW_POOL))
    return df.select(SOURCE_ROW, *cols)


def _strip_notes(df: pl.DataFrame, raw: pl.DataFrame, id_field: str) -> list[str]:
    """Return the report's lines on the white space stripped from the pools and job ids of the
    jobs kept (``raw``: :func:`_raw_names`)."""
    kept = df.select(SOURCE_ROW, "pool", id_field).join(raw, on=SOURCE_ROW, how="left")
    notes = [strip_note(kept[_RAW_ID], kept[id_field], id_field)]
    if _RAW_POOL in raw.columns:
        notes.append(strip_note(kept[_RAW_POOL], kept["pool"], "pool"))
    return [n for n in notes if n]


def _strip_cells(df: pl.DataFrame) -> pl.DataFrame:
    """Return ``df`` with its data cells stripped, empty ones null."""
    data_cols = [c for c in df.columns if not is_internal(c)]
    return df.with_columns([
        pl.when(pl.col(c).str.strip_chars() == "").then(None)
        .otherwise(pl.col(c).str.strip_chars()).alias(c) for c in data_cols])


def _require_fields(columns: list[str], path: Path, pool_from: str | None) -> None:
    """Raise TraceError naming the file and the fields a sacct export lacks."""
    have = set(columns)
    found = ", ".join(c for c in user_columns(columns))
    needs = [("JobID or JobIDRaw", ("JobID", "JobIDRaw")), ("Submit", ("Submit",)),
             ("Start", ("Start",)), ("End", ("End",)), ("State", ("State",)),
             ("ReqTRES or AllocTRES (or, before Slurm 19.05, AllocGRES or ReqGRES)",
              ("ReqTRES", "AllocTRES", "ReqGRES", "AllocGRES"))]
    if pool_from is None or pool_from.lower() == "partition":
        needs.append(("Partition", ("Partition",)))
    missing = [what for what, options in needs if not have & set(options)]
    if missing:
        raise TraceError(
            f"{path}: the sacct export lacks field(s) {', '.join(missing)}; found {found}. "
            "Export them with sacct --format (see the README, 'Slurm (sacct)')"
            + ("; or take the pool from elsewhere with --pool-from account|user"
               if "Partition" in missing else ""))


def _one_cluster(df: pl.DataFrame, path: Path) -> None:
    """Raise TraceError naming the file when its Cluster field holds more than one cluster
    (``sacct -M a,b`` / ``-L``): their job ids and partitions overlap, and each cluster is a
    trace of its own."""
    if "Cluster" not in df.columns:
        return
    clusters = sorted({c for c in df["Cluster"].str.strip_chars().drop_nulls().to_list() if c})
    if len(clusters) > 1:
        shown = ", ".join(repr(c) for c in clusters[:5]) + (", ..." if len(clusters) > 5 else "")
        raise TraceError(
            f"{path}: jobs of {len(clusters)} clusters ({shown}; sacct -M / -L): their job ids "
            "and partitions overlap; export one cluster per file (sacct -M NAME) and read each")


def _present(column: str) -> pl.Expr:
    """True where ``column`` holds a value (not null, Unknown or None)."""
    return pl.col(column).is_not_null() & ~pl.col(column).str.to_uppercase().is_in(MISSING)


def slurm_seconds(expr: pl.Expr) -> pl.Expr:
    """Return ``expr`` (Slurm time strings) as seconds (Float64); null where it is not one.

    ``D-HH:MM:SS``, ``D-HH:MM`` and ``D-HH`` count days and hours; without days,
    ``HH:MM:SS``, ``MM:SS`` and a bare number of minutes (Slurm's own reading of
    ``--time``). A fraction of a second (``MM:SS.mmm``) is allowed only on the
    seconds, and minutes and seconds after the first part must be below 60.
    """
    g = expr.str.extract_groups(_SLURM_TIME)
    days, a, b, c = (g.struct.field(k).cast(pl.Float64) for k in ("1", "2", "3", "4"))
    frac = g.struct.field("5")
    frac_s = frac.cast(pl.Float64, strict=False).fill_null(0.0)
    with_days = days.is_not_null()
    secs = (pl.when(with_days)
            .then(days * 86400 + a * 3600 + b.fill_null(0) * 60 + c.fill_null(0))
            .when(c.is_not_null()).then(a * 3600 + b * 60 + c)
            .when(b.is_not_null()).then(a * 60 + b)
            .otherwise(a * 60)) + frac_s
    frac_ok = frac.is_null() | pl.when(with_days).then(c.is_not_null()).otherwise(b.is_not_null())
    ranges_ok = (b.is_null() | (b < 60)) & (c.is_null() | (c < 60))
    return pl.when(a.is_not_null() & frac_ok & ranges_ok).then(secs).otherwise(None)


def _gpus(column: str) -> tuple[pl.Expr, pl.Expr]:
    """Return (GPUs as Int64 from a TRES string, a mask of cells whose GPU counts are not whole
    numbers >= 0): ``gres/gpu=N`` when given, else the sum of the ``gres/gpu:TYPE=N``."""
    tres = pl.col(column)
    untyped = tres.str.extract(r"(?:^|,)gres/gpu=([^,]*)", 1)
    untyped_n = untyped.str.strip_chars().cast(pl.Int64, strict=False)
    typed = tres.str.extract_all(r"(?:^|,)gres/gpu:[^=,]+=[^,]*").list.eval(
        pl.element().str.extract(r"=([^,]*)$", 1).str.strip_chars().cast(pl.Int64, strict=False))
    typed_bad = typed.list.eval(pl.element().is_null() | (pl.element() < 0)).list.any()
    bad = ((untyped.is_not_null() & (untyped_n.is_null() | (untyped_n < 0)))
           | typed_bad.fill_null(False))
    gpus = (pl.when(untyped_n.is_not_null()).then(untyped_n)
            .otherwise(typed.list.sum().fill_null(0)))
    return pl.when(tres.is_null()).then(None).otherwise(gpus), bad


def _recorded(column: str) -> pl.Expr:
    """True where a duration or limit ``column`` holds a value: :func:`_present` and not
    ``INVALID`` (what Slurm prints for a time it cannot show, e.g. a negative one)."""
    return _present(column) & (pl.col(column).str.to_uppercase() != "INVALID")


def _to_datetime(column: str) -> pl.Expr:
    """Return ``column`` parsed with :data:`DATETIME_FORMATS` (ms), or as Unix seconds when
    every present cell of the column is a whole number of 9 to 11 digits (an export made with
    ``SLURM_TIME_FORMAT=%s``; one such cell among date-times is not a time); null where
    missing or neither."""
    text = pl.when(_present(column)).then(pl.col(column)).otherwise(None)
    digits = text.str.contains(r"^\d{9,11}$")
    all_epoch = digits.fill_null(True).all() & text.is_not_null().any()
    epoch = (pl.when(all_epoch & digits)
             .then(pl.from_epoch(text.cast(pl.Int64, strict=False), time_unit="s")
                   .cast(pl.Datetime("ms"))))
    return pl.coalesce([*(text.str.to_datetime(fmt, strict=False, time_unit="ms")
                          for fmt in DATETIME_FORMATS), epoch])


#: Exclusions the report always lists, with 0 when no job had them (so that a reader of the
#: report sees they were checked); the others are listed when they happen.
ALWAYS_COUNTED = ("cpu_only", "cancelled_pending", "never_started", "unfinished",
                  "zero_second_run")


def _leave_out(bad: BadRows, mask: pl.Series, kind: str) -> None:
    """Count the rows of ``mask`` in ``report.left_out[kind]`` and remove them."""
    mask = mask.fill_null(False)
    if kind in ALWAYS_COUNTED:
        bad.report.left_out.setdefault(kind, 0)
    bad.report.leave_out(kind, int(mask.sum()))
    bad.df = bad.df.filter(~mask)


def _mask(bad: BadRows, expr: pl.Expr) -> pl.Series:
    return bad.df.select(expr.fill_null(False).alias("m")).to_series()


def read_sacct(path: Path | str, on_bad_rows: OnBadRows = "raise", pool_from: str | None = None,
               arrival: str = "eligible") -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report) from a Slurm ``sacct`` export (see the module docstring).

    Times are seconds since the first kept arrival (``report.first_submit``
    is its date-time), durations and ``time_limit`` seconds, ``num_gpus``
    whole GPUs. ``pool_from``: ``partition`` (the default), ``account``,
    ``user`` (the contract's user: ``User``, else ``Account``), any other
    field of the header, ``const:NAME`` or ``file-stem``. ``arrival``
    (:data:`sia.data.formats.ARRIVALS`): ``eligible`` (a started job arrives at
    its ``Eligible`` time when the export has the field) or ``submit`` (at its
    ``Submit`` time; the report notes what Eligible would have changed); another
    value is a ConfigError.
    """
    problem = arrival_problem(arrival)
    if problem:
        raise ConfigError(problem)
    path = Path(path)
    source = str(path)
    report = CleaningReport(source=source)
    df = _read_export(path, on_bad_rows, report)
    _require_fields(df.columns, path, pool_from)
    _one_cluster(df, path)
    cols = set(df.columns)
    user_field = "User" if "User" in cols else "Account" if "Account" in cols else None
    pool_source = _pool_source(df.columns, path, pool_from, user_field)
    raw = _raw_names(df, pool_source)  # to note the white space stripped
    bad = _bad_rows(df, source, on_bad_rows, report)
    id_field = "JobID" if "JobID" in cols else "JobIDRaw"
    _fold_steps(bad, id_field)
    _requeued_runs(bad, id_field)
    _gpu_counts(bad, cols)
    _leave_out_unstarted(bad)
    _times(bad, cols)
    _arrivals(bad, cols, arrival)
    _fold_het_components(bad, id_field)
    _users_and_tags(bad, cols, user_field)
    _pools(bad, pool_source, pool_from, report.notes)
    report.notes.extend(_strip_notes(bad.df, raw, id_field))
    _flag_duplicate_ids(bad, id_field)
    if bad.df.height:  # where the kept jobs' values came from
        report.notes.extend([_duration_note(bad.df), _limit_note(bad.df), _gpu_note(bad.df)])
    keep_extra = [c for c, used in (("Account", user_field == "Account"),
                                    ("Partition", pool_source == ("field", "Partition")))
                  if c in cols and not used]
    jobs, report, _ = _finish(_contract_columns(bad.df, id_field, keep_extra), source,
                              on_bad_rows, report, "datetime")
    return jobs, report


def _bad_rows(df: pl.DataFrame, source: str, on_bad_rows: OnBadRows,
              report: CleaningReport) -> BadRows:
    """Return the rows of ``df`` stripped, without blank lines (noted) and with exact duplicates
    flagged, in the :class:`BadRows` that the later steps flag and filter."""
    df = _strip_cells(df)
    lines = df.height
    df = _drop_blank_rows(df)
    if df.height < lines:
        report.notes.append(f"{lines - df.height} blank line(s) skipped (not counted as rows)")
    report.rows_read = df.height + report.rows_dropped
    bad = BadRows(df, source, on_bad_rows, report)
    flag_exact_duplicates(bad)
    return bad


def _fold_steps(bad: BadRows, id_field: str) -> None:
    """Flag missing job ids and leave out the step lines (``123.batch``): as ``job_steps``
    when their job's line is in the file, else as ``step_without_job``; both noted."""
    notes = bad.report.notes
    bad.flag(_mask(bad, ~_present(id_field)), id_field, "missing_value", "value is missing")
    is_step = _mask(bad, pl.col(id_field).str.contains(".", literal=True))
    parents = bad.df[id_field].str.replace(r"\..*$", "")
    job_ids = bad.df[id_field].filter(~is_step).implode()
    orphan = is_step & ~parents.is_in(job_ids)
    n_orphan = int(orphan.sum())
    if n_orphan:
        first = bad.df[id_field].filter(orphan)[0]
        notes.append(f"{n_orphan} step line(s) without their job's line (first: {first!r}) left "
                     "out as step_without_job (was the export filtered? sacct prints each job's "
                     "line before its steps)")
    _leave_out(bad, orphan, "step_without_job")
    is_step = _mask(bad, pl.col(id_field).str.contains(".", literal=True))
    if is_step.any():
        notes.append(f"{int(is_step.sum())} job step line(s) (123.batch, 123.0, ...) folded into "
                     "their jobs (left out as job_steps: the job line carries the fields)")
    _leave_out(bad, is_step, "job_steps")


#: States of a run that Slurm requeued (or resized): ``sacct -D`` lists it before the job's
#: later runs, under the same job id.
REQUEUE_STATES = ("REQUEUED", "REQUEUE_FED", "REQUEUE_HOLD", "PREEMPTED", "NODE_FAIL",
                  "BOOT_FAIL", "RESIZING")


def _requeued_runs(bad: BadRows, id_field: str) -> None:
    """Leave out REVOKED federated siblings (``revoked``: ``sacct -D`` shows them; they ran
    on another cluster) and the earlier runs of requeued jobs (``requeued_runs``, noted):
    when lines share a job id (``sacct -D``) and every one but the last (latest Submit, then
    file order) ended REQUEUED, PREEMPTED, NODE_FAIL... (:data:`REQUEUE_STATES`), the job is
    its last run, as sacct shows it without -D. Other repeated ids stay for
    :func:`_flag_duplicate_ids`."""
    revoked = _mask(bad, pl.col("State").str.to_uppercase() == "REVOKED")
    if revoked.any():
        bad.report.notes.append(f"{int(revoked.sum())} REVOKED line(s) left out as revoked "
                                "(federated sibling jobs, which ran on another cluster)")
    _leave_out(bad, revoked, "revoked")
    runs = bad.df.select(
        pl.int_range(pl.len()).alias("i"), pl.col(id_field).alias("id"),
        _to_datetime("Submit").alias("t"),
        pl.col("State").str.split(" ").list.first().str.to_uppercase().alias("s"),
    ).filter(pl.col("id").is_duplicated())
    if not runs.height:
        return
    runs = runs.sort(["id", "t", "i"]).with_columns(
        (pl.col("i") != pl.col("i").last().over("id")).alias("earlier"))
    groups = runs.group_by("id").agg(
        (~pl.col("earlier") | pl.col("s").is_in(REQUEUE_STATES)).all().alias("requeued"),
        pl.col("t").is_not_null().all().alias("timed"))
    ok = groups.filter(pl.col("requeued") & pl.col("timed"))["id"]
    earlier = runs.filter(pl.col("earlier") & pl.col("id").is_in(ok.implode()))["i"]
    if earlier.len():
        first = bad.df[id_field][int(earlier.min())]
        bad.report.notes.append(
            f"{earlier.len()} earlier run(s) of {ok.len()} requeued job(s) (sacct -D lists "
            f"each run; first: {first!r}) left out as requeued_runs: a job is its last run, "
            "as sacct shows it without -D")
    mask = pl.Series(range(bad.df.height)).is_in(earlier.implode())
    _leave_out(bad, mask, "requeued_runs")


def _started() -> pl.Expr:
    """True where a job started: it has a Start and its ``state`` is not PENDING."""
    return _present("Start") & (pl.col("state").fill_null("") != "PENDING")


def _gres_gpus(column: str) -> tuple[pl.Expr, pl.Expr]:
    """Return (GPUs as Int64 from a GRES string, a mask of cells whose GPU entries are not
    ``gpu[:TYPE][:N]``): Slurm < 19.05's ``AllocGRES`` / ``ReqGRES`` (``gpu:2``,
    ``gpu:tesla:2``, ``gpu:tesla:2(IDX:0-1)``, ``gres:gpu:2``), the untyped entries when any,
    else the sum of the typed ones; an entry without a count is one GPU (``--gres`` syntax)."""
    items = (pl.col(column).str.replace_all(r"(\d)\([^)]*\)", "${1}").str.split(",")
             .list.eval(pl.element().str.strip_chars().str.replace(r"^gres[:/]", "")))
    e = pl.element()
    untyped = (pl.when(e == "gpu").then(pl.lit(1, dtype=pl.Int64))
               .otherwise(e.str.extract(r"^gpu:(\d+)$", 1).cast(pl.Int64, strict=False)))
    typed = (pl.when(e.str.contains(r"^gpu:[^:\d][^:]*$")).then(pl.lit(1, dtype=pl.Int64))
             .otherwise(e.str.extract(r"^gpu:[^:]+:(\d+)$", 1).cast(pl.Int64, strict=False)))
    bad = items.list.eval(e.str.contains(r"^gpu(?::|$)") & untyped.is_null()
                          & typed.is_null()).list.any()
    untyped_n = items.list.eval(untyped.drop_nulls())
    gpus = (pl.when(pl.col(column).is_null()).then(None)
            .when(untyped_n.list.len() > 0).then(untyped_n.list.sum())
            .otherwise(items.list.eval(typed.drop_nulls()).list.sum().fill_null(0)))
    return gpus, bad.fill_null(False)


#: The fields that give the GPUs, as (allocated, requested) pairs in order of trust: TRES
#: (Slurm >= 15.08), then GRES (Slurm < 19.05). All are read as the job's totals: slurmctld
#: records AllocGRES as the per-node count times the node count (node_scheduler.c,
#: _get_gres_alloc); ReqGRES is taken to be a total the same way (not checked in Slurm's
#: source).
GPU_FIELDS = (("AllocTRES", "ReqTRES", _gpus), ("AllocGRES", "ReqGRES", _gres_gpus))


def _pair_gpus(bad: BadRows, cols: set[str], alloc: str, req: str, parse) -> tuple[pl.Expr,
                                                                                   pl.Expr]:
    """Return (GPUs, the field they came from) of one :data:`GPU_FIELDS` pair: the allocated
    field for a job that started (when its cell has a value), else the requested one; also
    the requested one when the allocated names no GPU but the request does (a job is given
    the GPUs it asks for: the allocation record lacks them). A GPU count that is not a whole
    number is a bad row naming its field."""
    present = [c for c in (req, alloc) if c in cols]
    for column in present:
        count, wrong = parse(column)
        bad.df = bad.df.with_columns(count.alias(f"{_DATA}gpus_{column}"),
                                     wrong.alias(f"{_DATA}wrong_{column}"))
    alloc_used = alloc_read = pl.lit(False)
    if alloc in cols:
        alloc_used = alloc_read = _started() & pl.col(alloc).is_not_null()
        if req in cols:
            alloc_used = alloc_used & ~((pl.col(f"{_DATA}gpus_{alloc}") == 0)
                                        & (pl.col(f"{_DATA}gpus_{req}") > 0)).fill_null(False)
    gpus, source = pl.lit(None, dtype=pl.Int64), pl.lit(None, dtype=pl.String)
    for column, use, read in ((req, ~alloc_used, ~alloc_used), (alloc, alloc_used, alloc_read)):
        if column not in cols:
            continue
        bad.flag(_mask(bad, read & pl.col(f"{_DATA}wrong_{column}")), column, "non_numeric",
                 "{value!r} has a GPU count that is not a whole number >= 0")
        gpus = pl.when(use).then(pl.col(f"{_DATA}gpus_{column}")).otherwise(gpus)
        source = pl.when(use).then(pl.lit(column)).otherwise(source)
    return gpus, source


def _gpu_counts(bad: BadRows, cols: set[str]) -> None:
    """Give ``bad.df`` its ``state`` and ``num_gpus``: from TRES (:func:`_pair_gpus`), else,
    when the TRES name no GPU (a cluster whose accounting does not track ``gres/gpu``) or are
    missing, from GRES; jobs without any (``no_tres``) or with no GPU (``cpu_only``) are left
    out."""
    bad.df = bad.df.with_columns(
        pl.col("State").str.split(" ").list.first().str.to_uppercase().alias("state"))
    (tres, tres_from), (gres, gres_from) = (_pair_gpus(bad, cols, *pair) for pair in GPU_FIELDS)
    bad.df = bad.df.with_columns(tres.alias(f"{_DATA}tres"), gres.alias(f"{_DATA}gres"),
                                 tres_from.alias(f"{_DATA}tres_from"),
                                 gres_from.alias(f"{_DATA}gres_from"))
    t, g = pl.col(f"{_DATA}tres"), pl.col(f"{_DATA}gres")
    take_gres = ~(t > 0).fill_null(False) & g.is_not_null()
    bad.df = bad.df.with_columns(
        pl.when(take_gres).then(g).otherwise(t).alias("num_gpus"),
        pl.when(take_gres).then(pl.col(f"{_DATA}gres_from")).otherwise(pl.col(f"{_DATA}tres_from"))
        .alias(f"{_DATA}gpus_from"))
    _leave_out(bad, bad.df["num_gpus"].is_null(), "no_tres")
    _leave_out(bad, bad.df["num_gpus"] == 0, "cpu_only")
    if not bad.df.height and bad.report.left_out["cpu_only"]:
        fields = ", ".join(c for c in ("AllocTRES", "ReqTRES", "AllocGRES", "ReqGRES")
                           if c in cols)
        bad.report.warnings.append(
            f"no job names a GPU in {fields} ({bad.report.left_out['cpu_only']:,} CPU-only): "
            "if the cluster has GPUs, its accounting may not track gres/gpu "
            "(AccountingStorageTRES); export AllocGRES and ReqGRES too (Slurm < 19.05)")


def _gpu_note(df: pl.DataFrame) -> str:
    """Return the report's note on the fields the kept jobs' GPUs came from."""
    counts = df[f"{_DATA}gpus_from"].value_counts()
    n = dict(zip(counts[f"{_DATA}gpus_from"], counts["count"], strict=True))
    gres = "".join(f", {name} for {n[name]:,}" for name in ("AllocGRES", "ReqGRES") if n.get(name))
    return (f"GPUs: AllocTRES for {n.get('AllocTRES', 0):,} job(s), ReqTRES for "
            f"{n.get('ReqTRES', 0):,}{gres}")


def _leave_out_unstarted(bad: BadRows) -> None:
    """Leave out the jobs that never started: ``cancelled_pending`` when CANCELLED, else
    ``never_started``."""
    never = _mask(bad, ~_started())
    cancelled = _mask(bad, pl.col("state") == "CANCELLED")
    _leave_out(bad, never & cancelled, "cancelled_pending")
    _leave_out(bad, _mask(bad, ~_started()), "never_started")


def _times(bad: BadRows, cols: set[str]) -> None:
    """Parse Submit / Start / End (a cell that is not a date-time, or a missing Submit, is a bad
    row), leave out unfinished jobs, give ``bad.df`` its ``duration`` and ``time_limit``, and
    leave out zero-second runs (``cancelled_pending`` when CANCELLED)."""
    for column in ("Submit", "Start", "End"):
        bad.df = bad.df.with_columns(_to_datetime(column).alias(f"{_DATA}{column}"))
        bad.flag(_mask(bad, _present(column) & pl.col(f"{_DATA}{column}").is_null()), column,
                 "unparsable_time", "{value!r} is not a date-time (expected e.g. "
                 "2021-05-01T00:02:52: export with SLURM_TIME_FORMAT=standard)")
    bad.flag(_mask(bad, ~_present("Submit")), "Submit", "missing_value", "value is missing")
    _leave_out(bad, _mask(bad, ~_present("End")), "unfinished")
    _durations(bad, cols)
    zero = _mask(bad, pl.col("duration") == 0)
    _leave_out(bad, zero & _mask(bad, pl.col("state") == "CANCELLED"), "cancelled_pending")
    _leave_out(bad, _mask(bad, pl.col("duration") == 0), "zero_second_run")
    _time_limits(bad, cols)


def _arrivals(bad: BadRows, cols: set[str], arrival: str = "eligible") -> None:
    """Make each job arrive when it became eligible to run, when the export says so and
    ``arrival`` is ``eligible``.

    ``Eligible`` is when Slurm first could schedule the job: later than ``Submit`` for a job
    held by a dependency (``afterok``: a chain of jobs that continue one another), a
    ``--begin`` time or a hold. Replayed from its submission, such a job could start before
    the job it waits for had ended, and a whole chain would run at once. So a started job
    arrives at its ``Eligible`` time, kept within [Submit, Start] (a cell that is not a
    date-time is a bad row; ``Unknown`` keeps Submit). Without the field every job arrives at
    its submission; the note counts the jobs held and for how long. With ``arrival="submit"``
    every job arrives at its submission and the field is ignored (its cells are not checked):
    the note says so, and counts the jobs it would have held.
    """
    if "Eligible" not in cols:
        return
    eligible = f"{_DATA}Eligible"
    bad.df = bad.df.with_columns(_to_datetime("Eligible").alias(eligible))
    if arrival == "eligible":
        bad.flag(_mask(bad, _present("Eligible") & pl.col(eligible).is_null()), "Eligible",
                 "unparsable_time", "{value!r} is not a date-time (expected e.g. "
                 "2021-05-01T00:02:52: export with SLURM_TIME_FORMAT=standard)")
    submit, start = pl.col(f"{_DATA}Submit"), pl.col(f"{_DATA}Start")
    when = pl.max_horizontal(submit, pl.min_horizontal(pl.col(eligible).fill_null(submit),
                                                       start.fill_null(submit)))
    held = bad.df.select((when - submit).dt.total_seconds()).to_series()
    if arrival == "submit":
        bad.report.notes.append(_ignored_eligible_note(held))
        return
    # the submission stays known: the job was in Slurm's queue, held, from then on (hold_time)
    bad.df = bad.df.with_columns(when.alias(f"{_DATA}Submit"), submit.alias(_SUBMITTED))
    later = held.filter(held > 0)
    if later.len():
        bad.report.notes.append(
            f"arrival: {later.len():,} job(s) became eligible after their submission "
            f"(dependencies, --begin, holds) and arrive then: {_held_hours(held)}; their "
            "hold_time keeps the wait (the arrival predictor counts held jobs as work to "
            "come); --arrival submit replays them from Submit")


def _held_hours(held: pl.Series) -> str:
    """Return how many of the jobs ``held`` (seconds after their submission) waited an hour or
    more, and the median of those waits."""
    hours = held.filter(held >= 3600)
    return (f"{hours.len():,} of them an hour or more later "
            f"(median {_span(float(hours.median())) if hours.len() else '-'})")


def _ignored_eligible_note(held: pl.Series) -> str:
    """Return the report's note for an export whose Eligible field is ignored on request
    (``arrival="submit"``): what it would have changed (``held``: seconds after submission)."""
    later = held.filter(held > 0)
    return (f"arrival: Submit, as asked (--arrival submit): the export's Eligible field is "
            f"ignored; it would have made {later.len():,} job(s) arrive after their submission "
            f"(dependencies, --begin, holds), {_held_hours(held)}")


def _span(seconds: float) -> str:
    """Return ``seconds`` as hours, or days past two days."""
    return f"{seconds / 86400:.1f} days" if seconds >= 2 * 86400 else f"{seconds / 3600:.1f} h"


def _fold_het_components(bad: BadRows, id_field: str) -> None:
    """Fold the components of each heterogeneous job (``123+0``, ``123+1``: started together,
    one gang) into its first kept component: the GPUs summed, the earliest submission, the
    longest run and limit; the other components are left out as ``het_components`` (noted).
    The job keeps its first component's id, pool, user, tag and state."""
    leader = bad.df[id_field].str.extract(r"^(\d+)\+\d+$", 1)
    if leader.is_null().all():
        return
    key = pl.coalesce(pl.col(id_field).str.extract(r"^(\d+)\+\d+$", 1), pl.col(id_field))
    bad.df = bad.df.with_columns(
        pl.col("num_gpus").sum().over(key).cast(bad.df["num_gpus"].dtype),
        pl.col("duration").max().over(key),
        pl.col("time_limit").max().over(key),
        pl.col(f"{_DATA}Submit").min().over(key),
        *([pl.col(_SUBMITTED).min().over(key)] if _SUBMITTED in bad.df.columns else []))
    later = leader.is_not_null() & leader.is_duplicated() & ~leader.is_first_distinct()
    n_jobs = leader.filter(later).n_unique() if later.any() else 0
    if n_jobs:
        bad.report.notes.append(
            f"{int(later.sum())} component line(s) of {n_jobs} heterogeneous job(s) (123+1, "
            "...) folded into the job's first component (left out as het_components): its "
            "GPUs summed, its longest run")
    _leave_out(bad, later, "het_components")


def _users_and_tags(bad: BadRows, cols: set[str], user_field: str | None) -> None:
    """Give ``bad.df`` its ``user`` (``user_field``, noted) and ``tag`` (JobName) columns."""
    if user_field == "Account":
        bad.report.notes.append("user: the Account field (the export has no User field; on "
                                "Graham the account is documented as the user's identity)")
    elif user_field == "User":
        bad.report.notes.append("user: the User field")
    bad.df = bad.df.with_columns(
        (pl.col(user_field) if user_field else pl.lit(None, dtype=pl.String)).alias("user"),
        (pl.col("JobName") if "JobName" in cols else pl.lit(None, dtype=pl.String)).alias("tag"))


def _flag_duplicate_ids(bad: BadRows, id_field: str) -> None:
    """Flag every run of a job id after its first as a ``duplicate_job_id`` bad row."""
    ids = bad.df[id_field]
    bad.flag(ids.is_duplicated() & ~ids.is_first_distinct(), id_field, "duplicate_job_id",
             "duplicate job id {value!r}, whose other line is not a requeued run (REQUEUED, "
             "PREEMPTED, NODE_FAIL...): overlapping exports concatenated, or an id Slurm "
             "reused (a reset id counter); remove one, or pass --clean to keep the first")


def _contract_columns(df: pl.DataFrame, id_field: str, keep_extra: list[str]) -> pl.DataFrame:
    """Return the kept jobs' contract columns (submit time as epoch seconds), the ``keep_extra``
    fields in lower case, and the source columns."""
    arrived = pl.col(f"{_DATA}Submit")
    hold = ((arrived - pl.col(_SUBMITTED)).dt.total_seconds(fractional=True)
            if _SUBMITTED in df.columns else pl.lit(None, dtype=pl.Float64))
    df = df.with_columns(
        pl.col(id_field).alias("job_id"),
        (arrived.dt.epoch("ms").cast(pl.Float64) / 1000.0).alias("submit_time"),
        hold.cast(pl.Float64).alias("hold_time"))
    return df.select(
        "job_id", "pool", "submit_time", "duration", "num_gpus", "tag", "user", "time_limit",
        "state", "hold_time", *[pl.col(c).alias(c.lower()) for c in keep_extra],
        pl.col(SOURCE_FILE), pl.col(SOURCE_ROW))


def _durations(bad: BadRows, cols: set[str]) -> None:
    """Give ``bad.df`` its ``duration`` (seconds): ElapsedRaw, else Elapsed, else End - Start;
    a cell that is not a duration, or an end before the start, is a bad row naming its field."""
    sources = []
    if "ElapsedRaw" in cols:
        raw = pl.col("ElapsedRaw").cast(pl.Float64, strict=False)
        bad.df = bad.df.with_columns(pl.when(_present("ElapsedRaw")).then(raw)
                                     .alias(f"{_DATA}elapsed_raw"))
        bad.flag(_mask(bad, _present("ElapsedRaw") & (
            pl.col(f"{_DATA}elapsed_raw").is_null() | ~pl.col(f"{_DATA}elapsed_raw").is_finite()
            | (pl.col(f"{_DATA}elapsed_raw") < 0))), "ElapsedRaw", "non_numeric",
            "{value!r} is not a number of seconds >= 0")
        sources.append(("ElapsedRaw", pl.col(f"{_DATA}elapsed_raw")))
    if "Elapsed" in cols:
        bad.df = bad.df.with_columns(pl.when(_recorded("Elapsed"))
                                     .then(slurm_seconds(pl.col("Elapsed")))
                                     .alias(f"{_DATA}elapsed"))
        bad.flag(_mask(bad, _recorded("Elapsed") & pl.col(f"{_DATA}elapsed").is_null()), "Elapsed",
                 "unparsable_time", "{value!r} is not a Slurm duration (D-HH:MM:SS, HH:MM:SS, "
                 "MM:SS or MM:SS.mmm)")
        sources.append(("Elapsed", pl.col(f"{_DATA}elapsed")))
    span = ((pl.col(f"{_DATA}End") - pl.col(f"{_DATA}Start")).dt.total_milliseconds()
            .cast(pl.Float64) / 1000.0)
    sources.append(("End - Start", span))
    no_earlier = pl.lit(True)
    for _, expr in sources[:-1]:
        no_earlier = no_earlier & expr.is_null()
    bad.flag(_mask(bad, no_earlier & (span < 0)), "End", "nonpositive_duration",
             "{value!r} is before the job's Start")
    which = pl.lit(None, dtype=pl.String)
    for name, expr in reversed(sources):
        which = pl.when(expr.is_not_null()).then(pl.lit(name)).otherwise(which)
    bad.df = bad.df.with_columns(pl.coalesce([e for _, e in sources]).alias("duration"),
                                 which.alias(f"{_DATA}duration_from"))


def _duration_note(df: pl.DataFrame) -> str:
    """Return the report's note on where the kept jobs' durations came from."""
    counts = df[f"{_DATA}duration_from"].value_counts()
    n = dict(zip(counts[f"{_DATA}duration_from"], counts["count"], strict=True))
    return "durations: " + ", ".join(f"{name} for {n[name]:,}" for name in
                                     ("ElapsedRaw", "Elapsed", "End - Start") if n.get(name))


def _time_limits(bad: BadRows, cols: set[str]) -> None:
    """Give ``bad.df`` its ``time_limit`` (seconds, null for no limit or none recorded):
    TimelimitRaw (minutes) where its cell has a value, else Timelimit (a Slurm time string);
    UNLIMITED and Partition_Limit are no limit; a value that is not a limit > 0 is a bad row
    naming its field."""
    fields = [c for c in ("TimelimitRaw", "Timelimit") if c in cols]
    if not fields:
        bad.df = bad.df.with_columns(pl.lit(None, dtype=pl.Float64).alias("time_limit"))
        return
    limit, unlimited, decided = pl.lit(None, dtype=pl.Float64), pl.lit(False), pl.lit(False)
    for column in fields:
        no_limit = pl.col(column).str.to_uppercase().is_in(NO_LIMIT).fill_null(False)
        given = _recorded(column) & ~no_limit
        value = (pl.col(column).cast(pl.Float64, strict=False) * 60.0 if column == "TimelimitRaw"
                 else slurm_seconds(pl.col(column)))
        bad.df = bad.df.with_columns(pl.when(given).then(value).alias(f"{_DATA}{column}"))
        expected = ("a number of minutes" if column == "TimelimitRaw"
                    else "a Slurm time (D-HH:MM:SS, HH:MM:SS, MM:SS or minutes)")
        v = pl.col(f"{_DATA}{column}")
        bad.flag(_mask(bad, given & (v.is_null() | ~v.is_finite())), column, "non_numeric",
                 "{value!r} is not a time limit: expected " + expected
                 + ", UNLIMITED or Partition_Limit")
        bad.flag(_mask(bad, given & (v <= 0)), column, "out_of_range",
                 "time limit {value!r} is not > 0")
        take = ~decided & _recorded(column)
        limit = pl.when(take & ~no_limit).then(v).otherwise(limit)
        unlimited = unlimited | (take & no_limit)
        decided = decided | _recorded(column)
    bad.df = bad.df.with_columns(limit.alias("time_limit"), unlimited.alias(f"{_DATA}unlimited"))


def _limit_note(df: pl.DataFrame) -> str:
    """Return the report's note on the kept jobs' time limits."""
    if f"{_DATA}unlimited" not in df.columns:
        return "time limits: none (no Timelimit or TimelimitRaw field)"
    n_limit = int(df["time_limit"].is_not_null().sum())
    n_unlimited = int(df[f"{_DATA}unlimited"].sum())
    n_missing = df.height - n_limit - n_unlimited
    return (f"time limits: {n_limit:,} job(s) with a limit, {n_unlimited:,} UNLIMITED or "
            f"Partition_Limit (no limit), {n_missing:,} not recorded")


def _pool_source(columns: list[str], path: Path, pool_from: str | None,
                 user_field: str | None) -> tuple[str, str]:
    """Return where the pools come from: ``("field", NAME)`` (a header field) or
    ``("const", NAME)`` (every job in pool NAME), as ``pool_from`` says (see
    :func:`read_sacct`); a field the header lacks is a TraceError naming the file."""
    choice = (pool_from or "partition").strip()
    if choice.startswith("const:"):
        name = choice.split(":", 1)[1].strip()
        if not name:
            raise ConfigError("--pool-from const:NAME needs a pool name after 'const:'")
        return "const", name
    if choice == "file-stem":
        return "const", path.name.split(".")[0]
    if choice.lower() == "user":
        if user_field is None:
            raise TraceError(f"{path}: --pool-from user, but the export has neither a User nor "
                             "an Account field")
        return "field", user_field
    fields = user_columns(columns)
    match = [c for c in fields if c.strip().lower() == choice.lower()]
    if not match:
        raise TraceError(f"{path}: --pool-from {choice}: the export has no {choice!r} field; "
                         f"found {', '.join(fields)}")
    return "field", match[0]


def _pools(bad: BadRows, source: tuple[str, str], pool_from: str | None,
           notes: list[str]) -> None:
    """Give ``bad.df`` its ``pool`` from ``source`` (:func:`_pool_source`); a job without one is
    a bad row naming the field."""
    kind, name = source
    if kind == "const":
        bad.df = bad.df.with_columns(pl.lit(name).alias("pool"))
        notes.append(f"pool: {name!r} for every job (--pool-from {pool_from})")
        return
    bad.flag(_mask(bad, ~_present(name)), name, "missing_value",
             "value is missing (it gives the pool)")
    bad.df = bad.df.with_columns(pl.col(name).alias("pool"))
    notes.append(f"pool: the {name} field")
