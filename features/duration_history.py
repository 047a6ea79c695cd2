"""Point-in-time duration history: what was known, when a job started, about jobs like it.

For each job j with a start time, the history is the set of jobs i with
``end_time_i <= start_time_j`` (finished before j started; a job ending exactly
when j starts counts). Among them, the *level* used is the first of this
fallback chain that has enough jobs (SIA 5.4.2: same experiment tag, else the
same pool with similar resource requirements):

1. ``"tag"``: same ``tag`` (any pool), if at least ``min_count`` such jobs
   (jobs with a null or empty tag never use this level);
2. ``"pool_gpus"``: same ``pool`` and same ``num_gpus``, if at least ``min_count``;
3. ``"pool"``: same ``pool``, if at least one such job;
4. ``"none"``: nothing finished before j in its pool; the median is null.

``hist_median_s`` is the median of those jobs' ``duration`` (seconds; the mean
of the two middle values for an even count) and ``hist_count`` their number.
With ``quantile=q``, ``hist_quantile_s`` is their q-quantile (linear
interpolation between order statistics, numpy's default ``method="linear"``:
``v[i] + (v[i+1] - v[i]) * (h - i)`` with ``h = q (n - 1)``, ``i = floor(h)``;
pandas' rolling quantile; equal to ``hist_median_s`` for q = 0.5), the
statistic JobDuration bins when asked for a quantile other than the median.
This is what JobDuration builds on and what the future-completion features use
for the *expected* end of a running job (start + median). Jobs without a start
time (never started in the schedule) get the "none" level.

Vectorized, no Python loop over jobs or groups: per level, the finished jobs
are sorted by (group, end time) and pandas' windowed median (a skiplist) runs
once over the whole array with a custom window per row (from the first row of
its group to the row: an expanding median per group); every job is then
located in that order by one sorted search on an exact integer key (group id,
rank of the time among all end and start times), which gives the number of
its group's jobs with ``end_time <= start_time`` and the median of exactly
those.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import polars as pl
from pandas.api.indexers import BaseIndexer
from sia.data.errors import TraceError

#: Levels of the fallback chain, in order; "none" when no level applies.
HIST_LEVELS: dict[str, list[str]] = {
    "tag": ["tag"],
    "pool_gpus": ["pool", "num_gpus"],
    "pool": ["pool"],
}

HISTORY_SCHEMA: dict[str, pl.DataType] = {
    "job_id": pl.String(),
    "hist_median_s": pl.Float64(),
    "hist_count": pl.Int32(),
    "hist_source": pl.String(),
}

_NEEDED = ("job_id", "pool", "num_gpus", "tag", "duration", "start_time", "end_time")


def _check(schedule: pl.DataFrame) -> None:
    missing = [c for c in _NEEDED if c not in schedule.columns]
    if missing:
        raise TraceError(
            f"schedule: missing column(s) {', '.join(repr(c) for c in missing)}; "
            "a schedule is a job table with start_time and end_time (e.g. the FCFS replay)"
        )


class _GroupPrefixIndexer(BaseIndexer):
    """Window of row i = from the first row of i's group to i (an expanding window per group)."""

    def __init__(self, group_first: np.ndarray):
        super().__init__()
        self.group_first = group_first

    def get_window_bounds(self, num_values=0, min_periods=None, center=None, closed=None,
                          step=None):
        """Return (start, end) row bounds: the group's first row and i + 1."""
        return self.group_first, np.arange(1, num_values + 1, dtype=np.int64)


def _group_prefix_medians(gid: np.ndarray, values: np.ndarray,
                          quantile: float = 0.5) -> np.ndarray:
    """Return, for rows sorted by group id, the median (or ``quantile``) of values[group start .. i]."""
    first = np.zeros(gid.size, dtype=np.int64)
    if gid.size:
        starts = np.flatnonzero(np.r_[True, gid[1:] != gid[:-1]])
        first = np.repeat(starts, np.diff(np.r_[starts, gid.size]))
    # pandas' windowed median (a skiplist, O(n log n)) over variable, monotone windows.
    rolling = pd.Series(values).rolling(_GroupPrefixIndexer(first), min_periods=1)
    if quantile == 0.5:
        return rolling.median().to_numpy()
    return rolling.quantile(quantile, interpolation="linear").to_numpy()


def _level_history(gid: np.ndarray, end: np.ndarray, duration: np.ndarray, start: np.ndarray,
                   time_rank: tuple[np.ndarray, np.ndarray],
                   quantiles: tuple[float, ...] = (0.5,)) -> tuple[list[np.ndarray], np.ndarray]:
    """Return ([statistic per quantile], count) per job at one level; ``gid`` < 0: no group.

    Finished jobs (``end`` not NaN, ``gid`` >= 0) are sorted by (group, end);
    each job with a start and a group is located in that order by an exact
    integer key (group, rank of the time among all end and start times).
    """
    end_rank, start_rank = time_rank
    n = gid.size
    width = np.int64(2 * n + 2)
    fin = np.flatnonzero((gid >= 0) & ~np.isnan(end))
    fin_key = gid[fin].astype(np.int64) * width + end_rank[fin]
    order = np.argsort(fin_key)
    fin_key = fin_key[order]
    fin_gid = gid[fin][order]
    stats_sorted = [_group_prefix_medians(fin_gid, duration[fin][order], q) for q in quantiles]
    q = np.flatnonzero((gid >= 0) & ~np.isnan(start))
    qg = gid[q].astype(np.int64)
    q_key = qg * width + start_rank[q]
    q_order = np.argsort(q_key)  # sorted needles search much faster
    pos = np.empty(q.size, dtype=np.int64)
    pos[q_order] = np.searchsorted(fin_key, q_key[q_order], side="right")  # end <= start
    group_begin = np.empty(q.size, dtype=np.int64)
    group_begin[q_order] = np.searchsorted(fin_key, qg[q_order] * width, side="left")
    count = np.zeros(n, dtype=np.int64)
    count[q] = pos - group_begin
    has = q[count[q] > 0]
    stats = []
    for st in stats_sorted:
        value = np.full(n, np.nan)
        value[has] = st[pos[count[q] > 0] - 1]
        stats.append(value)
    return stats, count


def _level_columns(base: pl.DataFrame, quantile: float | None) -> dict[str, np.ndarray]:
    """Return, per level of :data:`HIST_LEVELS`, each job's ``{level}_median``,
    ``{level}_quantile`` (the median again when ``quantile`` is None or 0.5) and
    ``{level}_count`` over the similar jobs finished by its start (``base``: the typed
    columns of :func:`point_in_time_history`)."""
    end = base["end_time"].fill_null(np.nan).to_numpy()
    start = base["start_time"].fill_null(np.nan).to_numpy()
    duration = base["duration"].to_numpy()
    # Exact ranks of all end and start times on one scale: end <= start iff rank <= rank.
    # (NaN, for a missing time, ranks last and is never used.)
    _, inverse = np.unique(np.concatenate([end, start]), return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    time_rank = (inverse[: end.size], inverse[end.size:])
    cols = {}
    for name, keys in HIST_LEVELS.items():
        gid = base.select(
            pl.when(pl.all_horizontal(pl.col(k).is_not_null() for k in keys))
            .then(pl.struct(keys).rank("dense").cast(pl.Int64)).otherwise(0) - 1
        ).to_series().to_numpy()
        quantiles = (0.5,) if quantile is None or quantile == 0.5 else (0.5, quantile)
        stats, count = _level_history(gid, end, duration, start, time_rank, quantiles)
        cols[f"{name}_median"] = stats[0]
        cols[f"{name}_quantile"] = stats[-1]
        cols[f"{name}_count"] = count
    return cols


def _pick_level(suffix: str, default: pl.Expr) -> pl.Expr:
    """The ``{level}_{suffix}`` column of each row's ``hist_source`` level, else ``default``."""
    return (
        pl.when(pl.col("hist_source") == "tag").then(pl.col(f"tag_{suffix}"))
        .when(pl.col("hist_source") == "pool_gpus").then(pl.col(f"pool_gpus_{suffix}"))
        .when(pl.col("hist_source") == "pool").then(pl.col(f"pool_{suffix}"))
        .otherwise(default)
    )


def point_in_time_history(schedule: pl.DataFrame, *, min_count: int = 3,
                          quantile: float | None = None) -> pl.DataFrame:
    """Return one row per job: job_id, hist_median_s, hist_count, hist_source.

    ``hist_median_s`` (seconds, null when ``hist_source == "none"``) is the
    median duration of the jobs similar to this one that finished at or before
    its start (``end_time <= start_time``), at the first level of the chain
    tag (>= ``min_count`` jobs) -> pool and num_gpus (>= ``min_count``) -> pool
    (>= 1) -> none; ``hist_count`` is the number of those jobs (0 for none).
    Rows come back in the order of ``schedule``. With ``quantile`` q in
    [0, 1], a ``hist_quantile_s`` column (seconds) follows ``hist_median_s``:
    the q-quantile of the same jobs (see the module docstring).
    """
    _check(schedule)
    if min_count < 1:
        raise TraceError(f"min_count must be >= 1, not {min_count}")
    if quantile is not None and not 0.0 <= float(quantile) <= 1.0:
        raise TraceError(f"quantile must be in [0, 1], not {quantile}")
    schema = dict(HISTORY_SCHEMA)
    if quantile is not None:
        quantile = float(quantile)
        schema = {"job_id": pl.String(), "hist_median_s": pl.Float64(),
                  "hist_quantile_s": pl.Float64(), "hist_count": pl.Int32(),
                  "hist_source": pl.String()}
    if schedule.height == 0:
        return pl.DataFrame(schema=schema)
    base = schedule.select(
        pl.col("job_id").cast(pl.String),
        pl.col("pool").cast(pl.String),
        pl.col("num_gpus").cast(pl.Int32),
        pl.when(pl.col("tag").cast(pl.String).str.len_chars() > 0)
        .then(pl.col("tag").cast(pl.String)).alias("tag"),
        pl.col("duration").cast(pl.Float64),
        pl.col("start_time").cast(pl.Float64),
        pl.col("end_time").cast(pl.Float64),
    )
    cols = _level_columns(base, quantile)
    out = pl.DataFrame({"job_id": base["job_id"], **cols}).with_columns(
        pl.col(f"{name}_{stat}").fill_nan(None) for name in HIST_LEVELS
        for stat in ("median", "quantile"))
    cnt = {name: pl.col(f"{name}_count").fill_null(0) for name in HIST_LEVELS}
    source = (
        pl.when(cnt["tag"] >= min_count).then(pl.lit("tag"))
        .when(cnt["pool_gpus"] >= min_count).then(pl.lit("pool_gpus"))
        .when(cnt["pool"] >= 1).then(pl.lit("pool"))
        .otherwise(pl.lit("none"))
    )
    out = out.with_columns(source.alias("hist_source"))
    none = pl.lit(None, dtype=pl.Float64)
    return out.select(
        "job_id",
        _pick_level("median", none).cast(pl.Float64).alias("hist_median_s"),
        *([_pick_level("quantile", none).cast(pl.Float64).alias("hist_quantile_s")]
          if quantile is not None else []),
        _pick_level("count", pl.lit(0, dtype=pl.Int32)).cast(pl.Int32).alias("hist_count"),
        "hist_source",
    )
