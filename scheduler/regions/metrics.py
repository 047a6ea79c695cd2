"""Per-region demand-to-supply ratios over time, from a replay's per-job result with regions.

Two views. :func:`demand_over_time` (MAST's): at each sample time, the GPUs
of the jobs queued (in their home region) or running (where they run) in a
region, over its GPUs. :func:`demand_to_supply`: a region's *demand* in a period is the work (GPU-seconds: GPUs x duration)
of the jobs submitted in that period that ran in the region; its
demand-to-supply ratio divides that by the region's GPUs x the period's
length. Home-region scheduling gives each region its home pools' offered
load; routing moves work (and so demand) to the regions that ran it. The
*balanced* ratio of a period is the total demand over the total supply
(what every region would have under perfect balance); ``worst / average``
is the largest region ratio over it (1 = perfectly balanced; MAST reports
2.63 before global scheduling).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl


def demand_to_supply(result: pl.DataFrame, supply: Mapping[str, int], *, period_s: float = 86400.0,
                     start_s: float | None = None) -> pl.DataFrame:
    """Return one row per (period, region): ``period`` (index), ``t_start`` (s), ``region``,
    ``demand_gpu_s``, ``supply_gpus``, ``ratio``, and the period's ``balanced`` ratio.

    ``result`` needs ``submit_time``, ``duration``, ``num_gpus`` and ``region`` (jobs
    that did not run in any region are an error naming one); ``supply``: region -> GPUs;
    periods start at ``start_s`` (default: the first submission), jobs before it are left out.
    """
    if result.filter(pl.col("region").is_null()).height:
        bad = result.filter(pl.col("region").is_null())["job_id"][0]
        raise ValueError(f"demand_to_supply: job {bad!r} ran in no region")
    unknown = sorted(set(result["region"].unique().to_list()) - set(supply))
    if unknown:
        raise ValueError(f"demand_to_supply: region {unknown[0]!r} of the result has no supply")
    t0 = float(result["submit_time"].min()) if start_s is None else float(start_s)
    regions = sorted(supply)
    jobs = result.filter(pl.col("submit_time") >= t0).with_columns(
        ((pl.col("submit_time") - t0) // period_s).cast(pl.Int64).alias("period"),
        (pl.col("num_gpus") * pl.col("duration")).alias("work"))
    n = int(jobs["period"].max()) + 1 if jobs.height else 0
    grid = pl.DataFrame({"period": np.repeat(np.arange(n), len(regions)),
                         "region": regions * n})
    per = jobs.group_by("period", "region").agg(pl.col("work").sum().alias("demand_gpu_s"))
    sup = pl.DataFrame({"region": regions, "supply_gpus": [int(supply[r]) for r in regions]})
    out = (grid.join(per, on=["period", "region"], how="left").fill_null(0.0)
           .join(sup, on="region").with_columns(
               (t0 + pl.col("period") * period_s).alias("t_start"),
               (pl.col("demand_gpu_s") / (pl.col("supply_gpus") * period_s)).alias("ratio")))
    total = sum(int(supply[r]) for r in regions)
    bal = out.group_by("period").agg((pl.col("demand_gpu_s").sum() / (total * period_s))
                                     .alias("balanced"))
    return out.join(bal, on="period").sort("period", "region").select(
        "period", "t_start", "region", "demand_gpu_s", "supply_gpus", "ratio", "balanced")


def ratio_summary(table: pl.DataFrame, period_s: float = 86400.0
                  ) -> dict[str, float | dict[str, float] | None]:
    """Headline numbers of :func:`demand_to_supply`'s table (periods with demand only):
    ``worst_over_avg_mean`` / ``_max`` (per period: largest region ratio over the balanced
    one), ``max_ratio``, ``spread_mean`` (largest minus smallest region ratio), and
    ``overall_worst_over_avg`` and ``ratio_by_region`` over the whole replay."""
    busy = table.filter(pl.col("balanced") > 0)
    if not busy.height:
        return {"worst_over_avg_mean": None, "worst_over_avg_max": None, "max_ratio": None,
                "spread_mean": None, "overall_worst_over_avg": None, "ratio_by_region": {}}
    per = busy.group_by("period").agg(
        (pl.col("ratio").max() / pl.col("balanced").first()).alias("w"),
        (pl.col("ratio").max() - pl.col("ratio").min()).alias("spread"))
    whole = busy.group_by("region").agg(pl.col("demand_gpu_s").sum(), pl.col("supply_gpus").first())
    n_periods = busy["period"].n_unique()
    whole = whole.with_columns((pl.col("demand_gpu_s") / (pl.col("supply_gpus") * n_periods
                                                          * period_s)).alias("r"))
    balanced = float(whole["demand_gpu_s"].sum() / (whole["supply_gpus"].sum() * n_periods * period_s))
    return {
        "worst_over_avg_mean": float(per["w"].mean()),
        "worst_over_avg_max": float(per["w"].max()),
        "max_ratio": float(busy["ratio"].max()),
        "spread_mean": float(per["spread"].mean()),
        "overall_worst_over_avg": float(whole["r"].max()) / balanced if balanced > 0 else None,
        "ratio_by_region": dict(zip(whole["region"].to_list(), whole["r"].to_list(), strict=True)),
    }


def demand_over_time(result: pl.DataFrame, supply: Mapping[str, int], homes: Mapping[str, str],
                     *, step_s: float = 3600.0, queued_where_ran: bool = False,
                     moves: Sequence[Sequence[Any]] | None = None) -> pl.DataFrame:
    """Queued-plus-running demand per region, sampled every ``step_s`` seconds (MAST's view).

    A job asks for its GPUs in its pool's home region (``homes``: pool -> region) from its
    submission until it starts, then in the region it ran in (``region``) until it ends.
    ``queued_where_ran``: it waits in the region it ran in instead (global reservations
    queue a job in a region its pool has a share in, and it starts there). ``moves``
    (``[job id, time, from region, to region]``, a reservations replay's ``queue_moves``):
    a job that moved between queues waits in each queue for the time it was there (its
    first queue from its submission to its first move, and so on; the last one until it
    starts); without them it counts its whole wait in the region it ran in.
    Samples run from the first to the last submission. Same columns as
    :func:`demand_to_supply` (``period`` is the sample's index, ``demand_gpu_s`` the GPUs
    asked for at the sample times ``step_s``), so :func:`ratio_summary` (with ``period_s =
    step_s``) reads it too.
    """
    regions = sorted(supply)
    idx = {r: i for i, r in enumerate(regions)}
    home = np.array([idx[homes[p]] for p in result["pool"].to_list()], dtype=np.int64)
    ran = np.array([idx[r] for r in result["region"].to_list()], dtype=np.int64)
    sub, start, end = (result[c].to_numpy() for c in ("submit_time", "start_time", "end_time"))
    gpus = result["num_gpus"].to_numpy().astype(float)
    t = np.arange(sub.min(), sub.max() + step_s, step_s)
    demand = np.zeros((t.size, len(regions)))
    waits = (sub, start, ran if queued_where_ran else home, gpus)
    if moves:
        waits = _queue_spans(result["job_id"].cast(pl.String).to_list(), waits, moves, idx)
    # each interval [a, b) adds its GPUs to the samples a <= t < b of its region
    for a, b, reg, w in (waits, (start, end, ran, gpus)):
        for r in range(len(regions)):
            m = reg == r
            demand[:, r] += _active(a[m], b[m], w[m], t)
    sup = np.array([supply[r] for r in regions], dtype=float)
    bal = demand.sum(axis=1) / sup.sum()
    n = t.size
    return pl.DataFrame({
        "period": np.repeat(np.arange(n), len(regions)), "t_start": np.repeat(t, len(regions)),
        "region": regions * n, "demand_gpu_s": (demand * step_s).ravel(),
        "supply_gpus": np.tile(sup.astype(np.int64), n), "ratio": (demand / sup).ravel(),
        "balanced": np.repeat(bal, len(regions))})


def _queue_spans(ids: list[str], waits: tuple[np.ndarray, ...], moves: Sequence[Sequence[Any]],
                 idx: Mapping[str, int]) -> tuple[np.ndarray, ...]:
    """``waits`` (submit, start, region, GPUs per job) with each moved job's wait split at its
    moves (:func:`demand_over_time`); a move of a job not in ``ids`` is an error naming it."""
    sub, start, reg, gpus = waits
    row = {j: i for i, j in enumerate(ids)}
    by_job: dict[int, list[tuple[float, int, int]]] = {}
    for job, when, a, b in moves:
        if str(job) not in row:
            raise ValueError(f"demand_over_time: moved job {job!r} is not in the result")
        by_job.setdefault(row[str(job)], []).append((float(when), idx[a], idx[b]))
    keep = np.ones(sub.size, dtype=bool)
    keep[list(by_job)] = False
    parts = [(sub[keep], start[keep], reg[keep], gpus[keep])]
    for i, hops in by_job.items():
        hops.sort()
        times = [t for t, _, _ in hops]
        a = np.array([sub[i], *times])
        b = np.array([*times, start[i]])
        where = np.array([hops[0][1], *[to for _, _, to in hops]])
        parts.append((a, b, where, np.full(a.size, gpus[i])))
    return tuple(np.concatenate([p[k] for p in parts]) for k in range(4))


def _active(a: np.ndarray, b: np.ndarray, w: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Sum of ``w`` over the intervals [a, b) that hold each time of ``t``."""
    oa, ob = np.argsort(a), np.argsort(b)
    ca = np.concatenate([[0.0], np.cumsum(w[oa])])
    cb = np.concatenate([[0.0], np.cumsum(w[ob])])
    return ca[np.searchsorted(a[oa], t, side="right")] - cb[np.searchsorted(b[ob], t, side="right")]
