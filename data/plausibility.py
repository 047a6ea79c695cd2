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
