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
This is what JobDuration builds on and what the future-completion features use
for the *expected* end of a running job (start + median). Jobs without a start
time (never started in the schedule) get the "none" level.

Vectorized: per level, the finished jobs are sorted by (group, end time), an
expanding median per group is computed by pandas' windowed groupby (Cython, one
pass, no Python loop over jobs or groups), and every job is matched to the last
finished job of its group with ``end_time <= start_time`` by a polars
``join_asof``.
"""

from __future__ import annotations

import polars as pl
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


def _level_history(finished: pl.DataFrame, queries: pl.DataFrame, keys: list[str],
                   name: str) -> pl.DataFrame:
    """Return queries' job_id with ``{name}_median`` / ``{name}_count`` at this level."""
    right = finished.drop_nulls(keys).sort([*keys, "end_time"])
    if right.height:
        pdf = right.select([*keys, "duration"]).to_pandas()
        med = pdf.groupby(keys, sort=False, dropna=True)["duration"].expanding().median()
        # The result is indexed by (group keys..., original row); realign on the row.
        med = med.droplevel(list(range(len(keys)))).sort_index().to_numpy()
        right = right.with_columns(
            pl.Series(f"{name}_median", med, dtype=pl.Float64),
            (pl.int_range(pl.len(), dtype=pl.Int32).over(keys) + 1).alias(f"{name}_count"),
        )
    else:
        right = right.with_columns(
            pl.lit(None, dtype=pl.Float64).alias(f"{name}_median"),
            pl.lit(None, dtype=pl.Int32).alias(f"{name}_count"),
        )
    # Several jobs ending at the same instant: keep the last (the largest prefix).
    right = (
        right.unique(subset=[*keys, "end_time"], keep="last", maintain_order=True)
        .select([*keys, "end_time", f"{name}_median", f"{name}_count"])
        .sort("end_time")
    )
    left = queries.select(["job_id", *keys, "start_time"]).sort("start_time")
    joined = left.join_asof(
        right, left_on="start_time", right_on="end_time", by=keys,
        strategy="backward", allow_exact_matches=True, check_sortedness=False,
    )
    return joined.select(["job_id", f"{name}_median", f"{name}_count"])


def point_in_time_history(schedule: pl.DataFrame, *, min_count: int = 3) -> pl.DataFrame:
    """Return one row per job: job_id, hist_median_s, hist_count, hist_source.

    ``hist_median_s`` (seconds, null when ``hist_source == "none"``) is the
    median duration of the jobs similar to this one that finished at or before
    its start (``end_time <= start_time``), at the first level of the chain
    tag (>= ``min_count`` jobs) -> pool and num_gpus (>= ``min_count``) -> pool
    (>= 1) -> none; ``hist_count`` is the number of those jobs (0 for none).
    Rows come back in the order of ``schedule``.
    """
    _check(schedule)
    if min_count < 1:
        raise TraceError(f"min_count must be >= 1, not {min_count}")
    if schedule.height == 0:
        return pl.DataFrame(schema=HISTORY_SCHEMA)
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
    finished = base.filter(pl.col("end_time").is_not_null())
    queries = base.filter(pl.col("start_time").is_not_null())
    out = base.select("job_id")
    for name, keys in HIST_LEVELS.items():
        out = out.join(_level_history(finished, queries, keys, name), on="job_id", how="left",
                       maintain_order="left")
    cnt = {name: pl.col(f"{name}_count").fill_null(0) for name in HIST_LEVELS}
    source = (
        pl.when(cnt["tag"] >= min_count).then(pl.lit("tag"))
        .when(cnt["pool_gpus"] >= min_count).then(pl.lit("pool_gpus"))
        .when(cnt["pool"] >= 1).then(pl.lit("pool"))
        .otherwise(pl.lit("none"))
    )
    out = out.with_columns(source.alias("hist_source"))
    pick = lambda suffix, default: (  # noqa: E731
        pl.when(pl.col("hist_source") == "tag").then(pl.col(f"tag_{suffix}"))
        .when(pl.col("hist_source") == "pool_gpus").then(pl.col(f"pool_gpus_{suffix}"))
        .when(pl.col("hist_source") == "pool").then(pl.col(f"pool_{suffix}"))
        .otherwise(default)
    )
    return out.select(
        "job_id",
        pick("median", pl.lit(None, dtype=pl.Float64)).cast(pl.Float64).alias("hist_median_s"),
        pick("count", pl.lit(0, dtype=pl.Int32)).cast(pl.Int32).alias("hist_count"),
        "hist_source",
    )
