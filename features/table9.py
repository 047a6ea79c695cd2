"""SIA Table 9 features as one long polars table: (k_min, pool, t) x features x labels.

The feature table contract (models train against these names; keep them stable):

keys
    ``pool`` (str), ``t`` (float64, seconds since the trace start, on the grid),
    ``k_min`` (int32, the window length k in minutes).
periodic (``FEATURE_GROUPS["periodic"]``)
    ``periodic_{1h,1d}_x{1,2,3}``: new jobs submitted in (t - x p, t - x p + k],
    cut at t, i.e. in (t - x p, min(t - x p + k, t)], for p = 1 hour / 1 day.
recent arrivals
    ``arrivals_x{1,10,100}``: jobs submitted in [t - x k, t].
recent completions
    ``completions_x{1,10,100}``: jobs whose end_time is in [t - x k, t].
future completions
    ``future_completions_within_k`` / ``future_completions_after_k``: jobs
    running at t (start_time <= t < end_time) whose *expected* end
    (start_time + the point-in-time median duration of similar jobs finished
    before the job started, see ``sia.features.duration_history``; never the
    true end) is <= t + k / is > t + k. An expected end already in the past
    (a running job older than expected) counts as "within k": it is expected
    to finish any moment now.
labels
    ``label_arrival`` (int8): 1 iff a job is submitted in (t, t + k];
    ``label_load_gpus`` (float64): the GPUs of the jobs submitted in (t, t + k].
extras (not features)
    ``running_jobs`` (start_time <= t < end_time) and ``pending_jobs``
    (submit_time <= t < start_time) at t.
"""

from __future__ import annotations

import polars as pl

#: Window lengths k in minutes (SIA 5.2: 5 min, 1 h, 12 h).
DEFAULT_WINDOWS_MIN: tuple[int, ...] = (5, 60, 720)
#: Periods p of the periodic features, in seconds, by name.
PERIODS_S: dict[str, float] = {"1h": 3600.0, "1d": 86400.0}
#: Multipliers x of the periodic features.
PERIODIC_X: tuple[int, ...] = (1, 2, 3)
#: Multipliers x of the recent arrival / completion windows [t - x k, t].
RECENT_X: tuple[int, ...] = (1, 10, 100)

KEY_COLUMNS: list[str] = ["pool", "t", "k_min"]

FEATURE_GROUPS: dict[str, list[str]] = {
    "periodic": [f"periodic_{p}_x{x}" for p in PERIODS_S for x in PERIODIC_X],
    "recent_arrivals": [f"arrivals_x{x}" for x in RECENT_X],
    "recent_completions": [f"completions_x{x}" for x in RECENT_X],
    "future_completions": ["future_completions_within_k", "future_completions_after_k"],
}

FEATURE_COLUMNS: list[str] = [c for group in FEATURE_GROUPS.values() for c in group]

LABEL_COLUMNS: list[str] = ["label_arrival", "label_load_gpus"]

#: Extra state columns at t, not features (not in FEATURE_COLUMNS).
EXTRA_COLUMNS: list[str] = ["running_jobs", "pending_jobs"]


def build_features(
    schedule: pl.DataFrame,
    *,
    grid_s: float = 300.0,
    windows_min: tuple[int, ...] = DEFAULT_WINDOWS_MIN,
    start_s: float | None = None,
    end_s: float | None = None,
    expected_duration: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Return the Table 9 feature table for every pool, grid time t and window k.

    ``schedule`` is a job table with the canonical columns (``job_id``, ``pool``,
    ``submit_time``, ``duration``, ``num_gpus``, ``tag``, ...) plus ``start_time``
    and ``end_time`` in seconds (the FCFS replay of a trace). The grid is common
    to all pools: t = start_s + i * grid_s for every i with t <= end_s, where
    ``start_s`` defaults to the first submission floored to the grid and
    ``end_s`` to the last submission; a pool with no jobs yet gets zeros.
    ``expected_duration`` (columns ``job_id``, ``hist_median_s``) overrides the
    point-in-time duration history used for the expected end of running jobs.

    Columns: KEY_COLUMNS, FEATURE_COLUMNS (int32 counts), LABEL_COLUMNS,
    EXTRA_COLUMNS; sorted by (k_min, pool, t). Counts are numbers of jobs.
    """
    raise NotImplementedError("being written: see issue 4")
