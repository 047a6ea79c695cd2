"""Attach a replay's start and end times to a job table: the schedule the features are built from."""

from __future__ import annotations

import polars as pl
from sia.data.errors import TraceError


def has_schedule(jobs: pl.DataFrame) -> bool:
    """Return True when ``jobs`` already carries complete ``start_time`` and ``end_time`` columns."""
    return all(c in jobs.columns and jobs[c].null_count() == 0 for c in ("start_time", "end_time"))


def schedule_from_columns(jobs: pl.DataFrame, where: str = "trace") -> pl.DataFrame:
    """Return ``jobs`` with its own ``start_time``/``end_time`` columns cast to float64 seconds.

    For traces that already record when each job ran (e.g. read from CSV,
    where extra columns arrive as text). A value that is not a number raises a
    TraceError naming the column and the job.
    """
    casts = []
    for c in ("start_time", "end_time"):
        col = jobs[c]
        num = col.cast(pl.Float64, strict=False) if col.dtype != pl.String else (
            col.str.strip_chars().cast(pl.Float64, strict=False))
        bad = num.is_null() | ~num.is_finite()
        if bad.any():
            i = int(bad.arg_true()[0])
            job = jobs["job_id"][i] if "job_id" in jobs.columns else f"#{i + 1}"
            raise TraceError(f"{where}: job {job!r}, column {c!r}: {col[i]!r} is not a number "
                             "of seconds")
        casts.append(num.alias(c))
    return jobs.with_columns(casts)


def with_schedule(jobs: pl.DataFrame, replay: pl.DataFrame) -> pl.DataFrame:
    """Return ``jobs`` (canonical columns kept, e.g. ``tag``) with ``start_time``/``end_time`` from ``replay``.

    ``replay`` is one row per job with ``job_id``, ``start_time`` and
    ``end_time`` in seconds (e.g. the simulator's result of the FCFS replay);
    every job of ``jobs`` must appear in it, or a TraceError names the first
    missing one. Rows keep the order of ``jobs``.
    """
    for c in ("job_id", "start_time", "end_time"):
        if c not in replay.columns:
            raise TraceError(f"replay result: missing column {c!r}")
    base = jobs.drop([c for c in ("start_time", "end_time") if c in jobs.columns])
    out = base.join(
        replay.select("job_id", pl.col("start_time").cast(pl.Float64),
                      pl.col("end_time").cast(pl.Float64)),
        on="job_id", how="left", maintain_order="left",
    )
    missing = out.filter(pl.col("start_time").is_null() | pl.col("end_time").is_null())
    if missing.height:
        raise TraceError(
            f"replay result: {missing.height} job(s) have no start/end time, "
            f"e.g. job {missing['job_id'][0]!r} (did the replay finish every job?)"
        )
    return out
