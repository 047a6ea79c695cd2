"""Replay metrics relative to a baseline (FCFS) on the same trace and quotas (DESIGN.md 6.4).

Per job: JCT = end - submit; speedup = JCT_baseline / JCT_policy (> 1 is
faster); a job is *slowed* when it ends more than :data:`SLOWED_AFTER_S` (1 s)
later than under the baseline, and its slowdown is the extra time in minutes
(0 for jobs not slowed). Only jobs submitted at or after ``first submission +
warmup_s`` count (SIA 6.1 evaluates after a warm-up).

Per run (:func:`compare`'s summary): mean, geometric mean, p5 and p95 of the
speedup, % of jobs slowed, total and max slowdown (minutes), per-pool
geometric mean speedup (SIA Table 12), mean queueing delay (s), GPU
utilization and each pool's demand-to-supply ratio over the evaluation
window (see :func:`compare`); with preemption, evictions and the GPU-hours
they wasted, and the share of non-preemptible jobs slowed.
"""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.data.units import DAY_S

#: A job is slowed when it ends more than this many seconds after its baseline end.
SLOWED_AFTER_S = 1.0

_NEEDED = ("job_id", "pool", "submit_time", "duration", "num_gpus", "start_time", "end_time")


def _check(table: pl.DataFrame, what: str) -> None:
    missing = [c for c in _NEEDED if c not in table.columns]
    if missing:
        raise ConfigError(f"{what}: missing column(s) {missing}; expected a replay result table")
    if table["start_time"].is_null().any() or table["start_time"].is_nan().any():
        jid = table.filter(
            pl.col("start_time").is_null() | pl.col("start_time").is_nan()
        )["job_id"][0]
        raise ConfigError(f"{what}: job {jid!r} never started; the replay is incomplete")


def per_job_metrics(result: pl.DataFrame, baseline: pl.DataFrame) -> pl.DataFrame:
    """Return every job's JCTs (s), speedup, slowed flag and slowdown (min), in ``result``'s order.

    Columns: job_id, pool, submit_time, num_gpus, duration, start_time,
    end_time, opportunistic (if present), jct, jct_baseline, end_baseline,
    speedup, slowed, slowdown_min, queue_delay (s). Raises ConfigError when
    the two tables do not hold the same jobs with the same submit times.
    """
    _check(result, "result")
    _check(baseline, "baseline")
    if result.height != baseline.height:
        raise ConfigError(
            f"result has {result.height} jobs but the baseline {baseline.height}; "
            "compare replays of the same trace"
        )
    base = baseline.select(
        "job_id",
        pl.col("submit_time").alias("_submit_b"),
        pl.col("end_time").alias("end_baseline"),
    )
    joined = result.join(base, on="job_id", how="left", maintain_order="left")
    if joined["end_baseline"].is_null().any():
        jid = joined.filter(pl.col("end_baseline").is_null())["job_id"][0]
        raise ConfigError(f"job {jid!r} is in the result but not in the baseline")
    differs = joined.filter(pl.col("_submit_b") != pl.col("submit_time"))
    if differs.height:
        r = differs.row(0, named=True)
        raise ConfigError(
            f"job {r['job_id']!r} was submitted at {r['submit_time']} in the result but at "
            f"{r['_submit_b']} in the baseline; compare replays of the same trace"
        )
    keep = [c for c in ("job_id", "pool", "submit_time", "num_gpus", "duration", "start_time",
                        "end_time", "opportunistic", "preemptible", "preemptions",
                        "wasted_gpu_s") if c in joined.columns]
    late = pl.col("end_time") - pl.col("end_baseline")
    return joined.select(
        *keep,
        (pl.col("end_time") - pl.col("submit_time")).alias("jct"),
        (pl.col("end_baseline") - pl.col("submit_time")).alias("jct_baseline"),
        "end_baseline",
    ).with_columns(
        (pl.col("jct_baseline") / pl.col("jct")).alias("speedup"),
        (late > SLOWED_AFTER_S).alias("slowed"),
        pl.when(late > SLOWED_AFTER_S).then(late / 60.0).otherwise(0.0).alias("slowdown_min"),
        (pl.col("start_time") - pl.col("submit_time")).alias("queue_delay"),
    )


def _geomean(x: np.ndarray) -> float | None:
    return float(np.exp(np.mean(np.log(x)))) if x.size else None


def _f(x: float | np.floating | None) -> float | None:
    """Return a plain float (None for None / NaN) for JSON."""
    if x is None:
        return None
    x = float(x)
    return None if math.isnan(x) else x


def compare(
    result: pl.DataFrame,
    baseline: pl.DataFrame,
    *,
    warmup_s: float = 2 * DAY_S,
    pools: pl.DataFrame | None = None,
) -> tuple[pl.DataFrame, dict]:
    """Return (per-job metrics of the counted jobs, summary dict) of ``result`` vs ``baseline``.

    Counted jobs are those submitted at or after ``t_w = first submission +
    warmup_s`` (``per_job`` holds only them, columns as in
    :func:`per_job_metrics`). The summary (JSON-ready; None where undefined,
    e.g. no counted jobs) holds: ``n_jobs``, ``mean_speedup``,
    ``geomean_speedup``, ``p5_speedup``, ``p95_speedup``, ``pct_slowed``
    (percent), ``total_slowdown_min``, ``max_slowdown_min``,
    ``mean_queue_delay_s`` and ``mean_queue_delay_baseline_s``, and
    ``per_pool``: {pool: {n_jobs, geomean_speedup, pct_slowed, ...}}. When the
    result has the simulator's preemption columns: ``evictions`` (preemptions of
    counted jobs), ``evicted_jobs`` (counted jobs preempted at least once),
    ``wasted_gpu_hours`` (their lost work plus restart delays, x GPUs, in hours),
    ``n_preemptible`` and ``pct_slowed_nonpreemptible`` (percent of the counted
    jobs not marked preemptible that were slowed: the owners' promise).

    With ``pools`` (the pools table: ``pool``, ``quota_gpus``) it also holds
    the evaluation window ``[t_w, t_end]`` (``t_end`` = the last submission,
    or the last end when no job is submitted after ``t_w``) as
    ``window_s``, ``utilization`` and ``utilization_baseline`` (GPU-seconds
    busy inside the window / (total quota x window length)), and per pool
    ``quota_gpus`` and ``demand_to_supply`` (GPU-seconds requested by the
    pool's counted jobs / (quota x window length)).
    """
    if not warmup_s >= 0:
        raise ConfigError(f"warm-up must be >= 0 seconds, got {warmup_s}")
    every = per_job_metrics(result, baseline)
    t0 = float(every["submit_time"].min()) if every.height else 0.0
    t_w = t0 + float(warmup_s)
    jobs = every.filter(pl.col("submit_time") >= t_w)
    sp = jobs["speedup"].to_numpy()
    summary: dict = {
        "n_jobs": jobs.height,
        "n_jobs_total": every.height,
        "warmup_s": float(warmup_s),
        "mean_speedup": _f(sp.mean()) if sp.size else None,
        "geomean_speedup": _geomean(sp),
        "p5_speedup": _f(np.percentile(sp, 5)) if sp.size else None,
        "p95_speedup": _f(np.percentile(sp, 95)) if sp.size else None,
        "pct_slowed": _f(100.0 * jobs["slowed"].mean()) if sp.size else None,
        "total_slowdown_min": float(jobs["slowdown_min"].sum()),
        "max_slowdown_min": float(jobs["slowdown_min"].max()) if sp.size else 0.0,
        "mean_queue_delay_s": _f(jobs["queue_delay"].mean()) if sp.size else None,
        "mean_queue_delay_baseline_s": _f(
            (jobs["end_baseline"] - jobs["submit_time"] - jobs["duration"]).mean()
        ) if sp.size else None,
    }
    _add_preemption(summary, jobs)
    per_pool: dict[str, dict] = {}
    for (pool,), part in sorted(jobs.group_by("pool"), key=lambda kv: kv[0][0]):
        per_pool[pool] = {
            "n_jobs": part.height,
            "geomean_speedup": _geomean(part["speedup"].to_numpy()),
            "pct_slowed": _f(100.0 * part["slowed"].mean()),
            "total_slowdown_min": float(part["slowdown_min"].sum()),
        }
    if pools is not None:
        _add_supply(summary, per_pool, every, jobs, pools, t_w)
    summary["per_pool"] = per_pool
    return jobs, summary


def _add_supply(summary: dict, per_pool: dict[str, dict], every: pl.DataFrame,
                jobs: pl.DataFrame, pools: pl.DataFrame, t_w: float) -> None:
    """Add the window, utilizations and per-pool demand-to-supply to a summary (see compare)."""
    quota = dict(zip(pools["pool"].to_list(), pools["quota_gpus"].to_list(), strict=True))
    t_end = float(every["submit_time"].max()) if every.height else t_w
    if t_end <= t_w:
        t_end = float(every["end_time"].max()) if every.height else t_w
    window = t_end - t_w
    summary["window_s"] = window
    total = sum(quota.values())
    if window > 0 and total > 0:
        summary["utilization"] = _busy(every, "start_time", "end_time", t_w, t_end) / (
            total * window
        )
        base_start = every["end_baseline"] - every["duration"]
        summary["utilization_baseline"] = _busy(
            every.with_columns(base_start.alias("_bs")), "_bs", "end_baseline", t_w, t_end
        ) / (total * window)
    else:
        summary["utilization"] = summary["utilization_baseline"] = None
    demand = dict(
        jobs.group_by("pool")
        .agg((pl.col("duration") * pl.col("num_gpus")).sum())
        .iter_rows()
    )
    for pool in sorted(quota):
        entry = per_pool.setdefault(pool, {"n_jobs": 0, "geomean_speedup": None,
                                           "pct_slowed": None, "total_slowdown_min": 0.0})
        entry["quota_gpus"] = int(quota[pool])
        entry["demand_to_supply"] = (
            float(demand.get(pool, 0.0)) / (quota[pool] * window) if window > 0 else None
        )


def _busy(table: pl.DataFrame, start: str, end: str, lo: float, hi: float) -> float:
    """Return the GPU-seconds of the intervals [start, end) that fall inside [lo, hi]."""
    overlap = (pl.min_horizontal(pl.col(end), pl.lit(hi))
               - pl.max_horizontal(pl.col(start), pl.lit(lo))).clip(lower_bound=0.0)
    return float(table.select((overlap * pl.col("num_gpus")).sum()).item())


def _add_preemption(summary: dict, jobs: pl.DataFrame) -> None:
    """Add evictions, wasted GPU-hours and the non-preemptible jobs' slowdowns (see compare)."""
    if "preemptions" in jobs.columns:
        summary["evictions"] = int(jobs["preemptions"].sum())
        summary["evicted_jobs"] = int((jobs["preemptions"] > 0).sum())
    if "wasted_gpu_s" in jobs.columns:
        summary["wasted_gpu_hours"] = float(jobs["wasted_gpu_s"].sum()) / 3600.0
    if "preemptible" in jobs.columns:
        owners = jobs.filter(~pl.col("preemptible"))
        summary["n_preemptible"] = jobs.height - owners.height
        summary["pct_slowed_nonpreemptible"] = (
            _f(100.0 * owners["slowed"].mean()) if owners.height else None)
