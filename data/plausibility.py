"""Warnings about values that are valid but implausible (issue 16): kept, and said in the report.

A job table can pass the contract (DESIGN.md section 3) and still hold a
typo: a job wider than any cluster, a duration of centuries, or one such job
that alone sets its pool's quota when quotas are derived from load. These are
not errors (a trace may really have them), so nothing is dropped; each one
gets a line in the ingest report naming the job, the value and the threshold,
whose option the user can change.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from sia.data.units import DAY_S

if TYPE_CHECKING:  # polars is imported where used: the CLI reads Thresholds' defaults for --help
    import polars as pl

_YEAR_S = 365.25 * DAY_S


@dataclass(frozen=True)
class Thresholds:
    """Where a value stops being plausible (each one an option of `sia ingest`)."""

    #: a job wider than this many GPUs (``--warn-gpus``)
    max_gpus: int = 16_384
    #: a job running longer than this many days (``--warn-days``)
    max_duration_days: float = 365.0
    #: a pool whose quota from load shrinks by more than this factor without its
    #: largest job (``--warn-quota-factor``)
    quota_factor: float = 4.0
    #: submissions spanning more years than this are an error (issue 36): GPU clusters of
    #: training jobs are younger than that, and a trace in milliseconds read as seconds
    #: spans 1000 times its length (a week becomes 19 years, Philly's 80 days 219 years)
    max_span_years: float = 20.0
    #: a median job longer than this many days is an error (the same reason: clusters cap a
    #: job at days or weeks; a median job of 10 minutes in ms reads as 7 days)
    max_median_days: float = 60.0


def _job(row: dict) -> str:
    return f"job {row['job_id']!r} (pool {row['pool']!r})"


def _duration_text(seconds: float) -> str:
    if seconds >= _YEAR_S:
        return f"{seconds / _YEAR_S:,.0f} years"
    return f"{seconds / DAY_S:,.0f} days"


def job_warnings(jobs: pl.DataFrame, limits: Thresholds) -> list[str]:
    """Return one line per kind of implausible job value (the widest / longest named, with a count)."""
    import polars as pl

    out = []
    wide = jobs.filter(pl.col("num_gpus") > limits.max_gpus).sort("num_gpus", descending=True)
    if wide.height:
        r = wide.row(0, named=True)
        more = f" ({wide.height - 1} more such jobs)" if wide.height > 1 else ""
        out.append(f"num_gpus: {_job(r)} asks for {r['num_gpus']:,} GPUs, more than "
                   f"--warn-gpus {limits.max_gpus:,} (wider than any plausible cluster){more}; "
                   "kept as it is")
    long = jobs.filter(pl.col("duration") > limits.max_duration_days * DAY_S).sort(
        "duration", descending=True)
    if long.height:
        r = long.row(0, named=True)
        more = f" ({long.height - 1} more such jobs)" if long.height > 1 else ""
        out.append(f"duration: {_job(r)} runs {_duration_text(r['duration'])} "
                   f"({r['duration']:.3g} s), more than --warn-days {limits.max_duration_days:g}"
                   f"{more}; kept as it is")
    return out


def quota_warnings(jobs: pl.DataFrame, pools: pl.DataFrame, span_s: float,
                   limits: Thresholds) -> list[str]:
    """Return a line per pool whose quota from load rests on a single job.

    ``pools`` holds ``quota_gpus`` and ``target_load`` (:func:`sia.data.quotas.quotas_from_load`).
    A pool is named when its quota without its largest job (by GPU-seconds, or its widest
    job when that one sets the quota) would be more than ``limits.quota_factor`` times
    smaller.
    """
    import polars as pl

    if "target_load" not in pools.columns or span_s <= 0:
        return []
    out = []
    work = jobs.select("job_id", "pool", "num_gpus",
                       (pl.col("duration") * pl.col("num_gpus")).alias("gs"))
    for p in pools.iter_rows(named=True):
        mine = work.filter(pl.col("pool") == p["pool"])
        if mine.height < 2:
            continue
        for col in ("gs", "num_gpus"):
            top = mine.sort(col, descending=True).row(0, named=True)
            rest = mine.filter(pl.col("job_id") != top["job_id"])
            without = max(math.ceil(float(rest["gs"].sum()) / (span_s * p["target_load"])),
                          int(rest["num_gpus"].max()))
            if p["quota_gpus"] > limits.quota_factor * without:
                out.append(f"quota: pool {p['pool']!r} gets {p['quota_gpus']:,} GPUs from load, "
                           f"{without:,} without job {top['job_id']!r} alone (more than "
                           f"--warn-quota-factor {limits.quota_factor:g} times less); check that "
                           "job, or give quotas with --quotas")
                break
    return out


#: How a trace's times may be read, by factor to seconds, in the order a fitting one is offered.
_UNITS = (("ms", 1e3),)
#: With at least this many jobs, the span of the middle 98% of the submissions tells a few
#: outlying jobs (a typo, a year 9999) from a wrong unit (every time too large).
_ROBUST_MIN_JOBS = 10


def _years(seconds: float) -> str:
    years = seconds / _YEAR_S
    if years >= 10:
        return f"{years:,.0f} years"
    return f"{years:.1f} years" if years >= 1 else f"{seconds / DAY_S:,.1f} days"


def time_scale_problem(jobs: pl.DataFrame, limits: Thresholds, source: str,
                       unit: str | None) -> tuple[str, str] | None:
    """Return (what is implausible, a one-line error message) when ``jobs``' times cannot be
    right, else None.

    Cannot be right: the submissions span more than ``limits.max_span_years``
    years, or the median job runs longer than ``limits.max_median_days`` days.
    ``unit`` is the numeric unit the times were read in (``s`` / ``ms``, for a
    format whose unit the user chooses), None when the format fixes it. The
    message names what is implausible and what fits: the unit under which the
    trace is plausible (``--time-unit ms``), or the jobs that alone stretch the
    span; and ``--allow-implausible``, which keeps the times knowingly.
    """
    if jobs.height == 0:
        return None
    submit = jobs["submit_time"]
    span = float(submit.max() - submit.min())
    median = float(jobs["duration"].median())
    max_span = limits.max_span_years * _YEAR_S
    max_median = limits.max_median_days * DAY_S
    if span <= max_span and median <= max_median:
        return None
    what = []
    if span > max_span:
        what.append(f"the submissions span {_years(span)} (more than {limits.max_span_years:g} "
                    "years)")
    if median > max_median:
        what.append(f"the median job runs {_years(median)} (more than "
                    f"{limits.max_median_days:g} days)")
    what = " and ".join(what)
    head = f"{source}: {what}"
    keep = ("or keep them as they are with --allow-implausible (`sia ingest --allow-implausible` "
            "writes a folder every command reads)")
    robust = span
    if jobs.height >= _ROBUST_MIN_JOBS:  # without the first and last 1% (at least one job each)
        ordered = submit.sort()
        cut = max(1, jobs.height // 100)
        robust = float(ordered[-1 - cut] - ordered[cut])
    if median <= max_median and robust <= max_span:  # a few jobs stretch the span
        order = jobs.sort("submit_time")
        lo, hi = order.row(0, named=True), order.row(-1, named=True)
        mid = float(submit.median())
        far = hi if hi["submit_time"] - mid >= mid - lo["submit_time"] else lo
        return what, (f"{head}, because of a few jobs such as {far['job_id']!r} (pool "
                f"{far['pool']!r}, submitted {_years(abs(far['submit_time'] - mid))} from the "
                f"middle of the trace; the others span {_years(robust)}): check their "
                f"submission times, {keep}")
    if unit is not None:
        now = 1e3 if unit == "ms" else 1.0
        for name, factor in _UNITS:
            if factor > now and robust * now / factor <= max_span and \
                    median * now / factor <= max_median:
                return what, (f"{head}: implausible in {unit}; the times look like {name} "
                        f"(--time-unit {name}; time_unit: {name} in a config's trace section), "
                        f"{keep}")
        tried = "even in ms" if unit == "ms" else "in s, and in ms too"
        return what, (f"{head}: implausible {tried}; convert the times to seconds or milliseconds, "
                f"{keep}")
    return what, f"{head}: check the trace's times, {keep}"
