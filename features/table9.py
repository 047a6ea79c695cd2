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
rhythm (``FEATURE_GROUPS["rhythm"]``: what a persistence baseline and a pool's rhythm carry)
    ``arrivals_1h`` / ``arrivals_1d``: jobs submitted in [t - 1 h, t] / [t - 1 day, t]
    (the same for every k); ``since_arrival_s`` / ``since_completion_s`` (float32):
    t minus the pool's last submission / last completion at or before t (NaN when
    there is none yet); ``hour_of_day`` (t mod 1 day, in hours) and ``day_of_week``
    (floor(t / 1 day) mod 7), float32, on the trace's own clock.
future completions
    ``future_completions_within_k`` / ``future_completions_after_k``: jobs
    running at t (start_time <= t < end_time) whose *expected* end
    (start_time + the point-in-time median duration of similar jobs finished
    before the job started, see ``sia.features.duration_history``; never the
    true end) is <= t + k / is > t + k. An expected end already in the past
    (a running job older than expected) counts as "within k": it is expected
    to finish any moment now.
held (``FEATURE_GROUPS["held"]``: only traces that record holds, e.g. Slurm's Eligible)
    ``held_jobs`` / ``held_gpus``: the jobs (their GPUs) known by t that arrive after t:
    submitted to the scheduler at or before t (``submit_time - hold_time <= t``) and held
    there, by a dependency, a ``--begin`` time or a hold, until their ``submit_time > t``.
    That such a job exists is known at t; when it will arrive is not. 0 without holds.
labels
    ``label_arrival`` (int8): 1 iff a job is submitted in (t, t + k];
    ``label_load_gpus`` (float64): the GPUs of the jobs submitted in (t, t + k].
extras (not features)
    ``running_jobs`` (start_time <= t < end_time) and ``pending_jobs``
    (submit_time <= t < start_time) at t.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl
from sia.data.errors import ConfigError, TraceError
from sia.features.duration_history import point_in_time_history

#: Window lengths k in minutes (SIA 5.2: 5 min, 1 h, 12 h).
DEFAULT_WINDOWS_MIN: tuple[int, ...] = (5, 60, 720)
DAY_S = 86400.0
#: Periods p of the periodic features, in seconds, by name.
PERIODS_S: dict[str, float] = {"1h": 3600.0, "1d": DAY_S}
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
    "rhythm": ["arrivals_1h", "arrivals_1d", "since_arrival_s", "since_completion_s",
               "hour_of_day", "day_of_week"],
    "held": ["held_jobs", "held_gpus"],
}
#: The feature groups every trace has (WillJobsArrive's default); "held" needs recorded holds.
TABLE9_GROUPS: tuple[str, ...] = tuple(g for g in FEATURE_GROUPS if g != "held")
#: The held jobs' columns (k-independent; 0 in a trace without holds).
HELD_COLUMNS: list[str] = FEATURE_GROUPS["held"]
#: The columns of TABLE9_GROUPS: what a model reads unless told otherwise.
TABLE9_COLUMNS: list[str] = [c for g in TABLE9_GROUPS for c in FEATURE_GROUPS[g]]

FEATURE_COLUMNS: list[str] = [c for group in FEATURE_GROUPS.values() for c in group]

#: Windows of the k-independent rhythm counts: [t - w, t], by column.
RHYTHM_COUNT_S: dict[str, float] = {"arrivals_1h": 3600.0, "arrivals_1d": 86400.0}
#: Feature columns that are not counts of jobs (float32, NaN = unknown).
TIME_COLUMNS: list[str] = ["since_arrival_s", "since_completion_s", "hour_of_day", "day_of_week"]
#: Feature columns that count events in a window of :func:`window_bounds`.
COUNT_COLUMNS: list[str] = [c for c in FEATURE_COLUMNS if c not in TIME_COLUMNS
                            and not c.startswith("future_") and c not in HELD_COLUMNS]

LABEL_COLUMNS: list[str] = ["label_arrival", "label_load_gpus"]

#: Extra state columns at t, not features (not in FEATURE_COLUMNS).
EXTRA_COLUMNS: list[str] = ["running_jobs", "pending_jobs"]


#: Interval conventions: "(]" = lo < x <= hi, "[]" = lo <= x <= hi.
_OPEN_CLOSED = "(]"
_CLOSED = "[]"


def window_bounds(t, k_s: float) -> dict[str, tuple[str, object, object, str]]:
    """Return, per count feature, (event kind, lo, hi, ends) of its window at time(s) t.

    ``t`` is a float or a numpy array of seconds, ``k_s`` the window length in
    seconds; event kind is "arrivals" (submit times) or "completions" (end
    times); ends is "(]" or "[]". Batch and live features both count events
    against exactly these bounds, so they agree to the last bit. Every ``hi``
    is <= t: the periodic window (t - x p, t - x p + k] is cut at t.
    """
    out: dict[str, tuple[str, object, object, str]] = {}
    for pname, p in PERIODS_S.items():
        for x in PERIODIC_X:
            lo = t - x * p
            hi = np.minimum(lo + k_s, t)
            out[f"periodic_{pname}_x{x}"] = ("arrivals", lo, hi, _OPEN_CLOSED)
    for x in RECENT_X:
        out[f"arrivals_x{x}"] = ("arrivals", t - x * k_s, t, _CLOSED)
    for x in RECENT_X:
        out[f"completions_x{x}"] = ("completions", t - x * k_s, t, _CLOSED)
    for name, w in RHYTHM_COUNT_S.items():
        out[name] = ("arrivals", t - w, t, _CLOSED)
    return out


def time_features(t, last_arrival, last_completion) -> dict[str, np.ndarray]:
    """Return the float32 time columns of :data:`TIME_COLUMNS` at time(s) ``t`` (s).

    ``last_arrival`` / ``last_completion`` are the pool's last submission /
    completion at or before t (s, NaN when none). Batch and live features
    both call this, so they agree to the last bit.
    """
    t = np.asarray(t, dtype=np.float64)
    return {
        "since_arrival_s": (t - np.asarray(last_arrival, dtype=np.float64)).astype(np.float32),
        "since_completion_s": (t - np.asarray(last_completion, dtype=np.float64)).astype(np.float32),
        "hour_of_day": (np.mod(t, DAY_S) / 3600.0).astype(np.float32),
        "day_of_week": np.mod(np.floor(t / DAY_S), 7.0).astype(np.float32),
    }


def last_at_or_before(sorted_times: np.ndarray, t: np.ndarray) -> np.ndarray:
    """Return, for each t, the largest of ``sorted_times`` that is <= t (NaN when none)."""
    i = np.searchsorted(sorted_times, t, side="right")
    out = np.full(np.shape(t), np.nan)
    has = i > 0
    out[has] = sorted_times[i[has] - 1]
    return out


def _grid_ranges(grid_lo: np.ndarray, grid_hi: np.ndarray, ends: str,
                 events: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return [first, stop) grid indices i at which each event lies in (lo[i], hi[i]] / [lo[i], hi[i]].

    ``grid_lo`` and ``grid_hi`` are the window bounds over the grid (both
    non-decreasing); the answer is exact for the float bounds given.
    """
    first = np.searchsorted(grid_hi, events, side="left")  # hi[i] >= e
    side = "left" if ends == _OPEN_CLOSED else "right"  # lo[i] < e  /  lo[i] <= e
    stop = np.searchsorted(grid_lo, events, side=side)
    return first, stop


def _search(a: np.ndarray, v: np.ndarray, side: str) -> np.ndarray:
    """Return np.searchsorted(a, v, side), searching with v sorted (much faster for large v)."""
    order = np.argsort(v)
    out = np.empty(v.size, dtype=np.int64)
    out[order] = np.searchsorted(a, v[order], side=side)
    return out


class _GridCounter:
    """Counts, per pool and grid index, the events whose index range covers it (difference arrays)."""

    def __init__(self, n_pools: int, n_grid: int):
        self.n_pools = n_pools
        self.n_grid = n_grid
        self.width = n_grid + 1

    def count(self, pool_idx: np.ndarray, first: np.ndarray, stop: np.ndarray,
              weights: np.ndarray | None = None) -> np.ndarray:
        """Return an (n_pools, n_grid) array: sum of weights of events with first <= i < stop."""
        stop = np.maximum(stop, first)  # an empty range adds and removes at the same index
        size = self.n_pools * self.width
        base = pool_idx * self.width
        diff = np.bincount(base + first, weights=weights, minlength=size)
        diff -= np.bincount(base + stop, weights=weights, minlength=size)
        return np.cumsum(diff.reshape(self.n_pools, self.width), axis=1)[:, : self.n_grid]


def make_grid(schedule: pl.DataFrame, grid_s: float = 300.0, start_s: float | None = None,
              end_s: float | None = None) -> np.ndarray:
    """Return the prediction times in seconds: start_s + i * grid_s for every i with t <= end_s.

    ``start_s`` defaults to the first submission floored to a multiple of
    ``grid_s`` (the trace's start, common to all pools), ``end_s`` to the last
    submission.
    """
    if not (grid_s > 0 and np.isfinite(grid_s)):
        raise ConfigError(f"grid_s must be a positive number of seconds, not {grid_s}")
    if schedule.height == 0 and (start_s is None or end_s is None):
        return np.empty(0, dtype=np.float64)
    submit = schedule["submit_time"]
    if start_s is None:
        start_s = float(np.floor(float(submit.min()) / grid_s) * grid_s)
    if end_s is None:
        end_s = float(submit.max())
    if end_s < start_s:
        return np.empty(0, dtype=np.float64)
    n = int(np.floor((end_s - start_s) / grid_s)) + 1
    grid = start_s + np.arange(n, dtype=np.float64) * grid_s
    return grid[grid <= end_s]


#: The most rows `sia features` builds unless told otherwise (``--max-rows``): about 2 GiB at
#: the 111 bytes a row takes (issue 36: a trace reaching year 9999 or a grid of 1e-6 s asked
#: for terabytes). Philly's whole trace at the default grid: about 1.4 million.
MAX_ROWS = 20_000_000
#: The most rows :func:`build_features` builds for any caller (training, backtests) unless
#: told otherwise: some 20 GiB, more than a machine that runs this holds.
MAX_ROWS_ANY = 200_000_000


def grid_count(submit_times, grid_s: float, start_s: float | None = None,
               end_s: float | None = None) -> int:
    """Return how many times :func:`make_grid` gives for these submissions (seconds), without
    making the grid (0 for none)."""
    if not (grid_s > 0 and np.isfinite(grid_s)):
        raise ConfigError(f"grid_s must be a positive number of seconds, not {grid_s}")
    times = np.asarray(submit_times, dtype=np.float64)
    if times.size == 0 and (start_s is None or end_s is None):
        return 0
    if start_s is None:
        start_s = float(np.floor(float(times.min()) / grid_s) * grid_s)
    if end_s is None:
        end_s = float(times.max())
    if end_s < start_s:
        return 0
    n = np.floor((end_s - start_s) / grid_s) + 1
    return int(n) if np.isfinite(n) else 2**63


def check_feature_rows(n_pools: int, n_grid: int, n_windows: int, grid_s: float,
                       max_rows: int | None = None, option: str | None = "--max-rows") -> int:
    """Return the rows a feature table of this shape has; ConfigError, naming the sizes and
    what to change, when they exceed ``max_rows`` (default :data:`MAX_ROWS`). ``option`` is
    the command-line option that raises the limit (None: the caller has none)."""
    rows = n_pools * n_grid * n_windows
    limit = MAX_ROWS if max_rows is None else max_rows
    if rows > limit:
        span_days = (n_grid - 1) * grid_s / DAY_S
        limit_text = f"{option} {limit:,}" if option else f"the limit of {limit:,} rows"
        raise ConfigError(
            f"--grid-s {grid_s:g}: the feature table would have {rows:,.4g} rows ({n_pools} "
            f"pools x {n_grid:,.4g} times over {span_days:,.4g} days x {n_windows} windows, "
            f"some {rows * _ROW_BYTES / 2**30:,.4g} GiB), more than {limit_text}; use a "
            "coarser --grid-s, fewer --days or windows"
            + (f", or raise {option} knowingly" if option else ""))
    return rows


#: Bytes a feature table row takes in memory (polars' estimate on 14 synthetic days: 111).
_ROW_BYTES = 111


_SCHEDULE_COLUMNS = ("job_id", "pool", "submit_time", "num_gpus", "start_time", "end_time")


def check_schedule(schedule: pl.DataFrame, where: str = "schedule") -> None:
    """Raise TraceError unless ``schedule`` has the columns the features need, with sane times."""
    missing = [c for c in _SCHEDULE_COLUMNS if c not in schedule.columns]
    if missing:
        raise TraceError(
            f"{where}: missing column(s) {', '.join(repr(c) for c in missing)}; the features "
            "need a schedule (a job table with start_time and end_time, e.g. the FCFS replay)"
        )
    if schedule.height == 0:
        return
    for c in ("submit_time", "start_time", "end_time"):
        if not schedule[c].dtype.is_numeric():
            raise TraceError(f"{where}: column {c!r} has dtype {schedule[c].dtype}, expected "
                             "seconds as numbers")
        if schedule[c].null_count():
            raise TraceError(f"{where}: column {c!r} has {schedule[c].null_count()} missing values")
    if (schedule["start_time"] < schedule["submit_time"]).any():
        raise TraceError(f"{where}: some jobs start before they are submitted (start_time < submit_time)")
    if (schedule["end_time"] <= schedule["start_time"]).any():
        raise TraceError(f"{where}: some jobs end at or before they start (end_time <= start_time)")


def expected_ends(schedule: pl.DataFrame, expected_duration: pl.DataFrame | None = None) -> np.ndarray:
    """Return each job's expected end in seconds (start_time + point-in-time median duration).

    The median comes from ``expected_duration`` (``job_id``, ``hist_median_s``)
    when given, else from :func:`point_in_time_history`. A job with no history
    gets +inf: its end is unknown, so it counts as finishing after t + k.
    """
    if expected_duration is None:
        expected_duration = point_in_time_history(schedule)
    for c in ("job_id", "hist_median_s"):
        if c not in expected_duration.columns:
            raise TraceError(f"expected_duration: missing column {c!r}")
    med = (
        schedule.select(pl.col("job_id").cast(pl.String))
        .join(expected_duration.select(pl.col("job_id").cast(pl.String),
                                       pl.col("hist_median_s").cast(pl.Float64)),
              on="job_id", how="left", maintain_order="left")["hist_median_s"]
    )
    start = schedule["start_time"].cast(pl.Float64).to_numpy()
    return start + med.fill_null(np.inf).to_numpy()


def build_features(
    schedule: pl.DataFrame,
    *,
    grid_s: float = 300.0,
    windows_min: tuple[int, ...] = DEFAULT_WINDOWS_MIN,
    start_s: float | None = None,
    end_s: float | None = None,
    expected_duration: pl.DataFrame | None = None,
    pools: Sequence[str] | None = None,
    max_rows: int | None = None,
    held_after: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """Return the Table 9 feature table for every pool, grid time t and window k.

    ``schedule`` is a job table with the canonical columns (``job_id``, ``pool``,
    ``submit_time``, ``duration``, ``num_gpus``, ``tag``, ...) plus ``start_time``
    and ``end_time`` in seconds (the FCFS replay of a trace). The grid is common
    to all pools: t = start_s + i * grid_s for every i with t <= end_s, where
    ``start_s`` defaults to the first submission floored to the grid and
    ``end_s`` to the last submission; a pool with no jobs yet gets zeros. Labels
    near end_s look past the last submission (pass an earlier end_s to avoid
    training on them). ``expected_duration`` (columns ``job_id``,
    ``hist_median_s``) overrides the point-in-time duration history used for
    the expected end of running jobs. ``pools`` lists the pools to include
    (default: those of the schedule; a listed pool without jobs gets zeros).

    Columns: KEY_COLUMNS, FEATURE_COLUMNS (int32 counts of jobs), LABEL_COLUMNS,
    EXTRA_COLUMNS (int32); sorted by (k_min, pool, t). A feature at t uses only
    submissions, completions and starts at or before t and the expected (never
    the true) end of the jobs running at t. A table of more than ``max_rows``
    rows (default :data:`MAX_ROWS_ANY`) is a ConfigError before anything is built.
    ``held_after``: jobs cut off the schedule that were held across its end (known before it,
    arriving after: :func:`held_across`), counted in the held columns only.
    """
    # window_features refuses an empty set of windows, so there is always a table to concat
    return pl.concat([table for _, table in window_features(
        schedule, grid_s=grid_s, windows_min=windows_min, start_s=start_s, end_s=end_s,
        expected_duration=expected_duration, pools=pools, max_rows=max_rows,
        held_after=held_after)],
        how="vertical", rechunk=False)


def hold_seconds() -> pl.Expr:
    """The ``hold_time`` column as seconds held, 0 where empty or NaN (not held)."""
    return pl.col("hold_time").cast(pl.Float64).fill_null(0.0).fill_nan(0.0)


def held_across(jobs: pl.DataFrame, cut_s: float) -> pl.DataFrame | None:
    """Return the jobs of ``jobs`` held across ``cut_s`` (known before it: ``submit_time -
    hold_time < cut_s``; arriving at or after it), for :func:`build_features`'s
    ``held_after`` when a table is cut at ``cut_s`` by arrival; None when there are none."""
    if "hold_time" not in jobs.columns:
        return None
    hold = hold_seconds()
    out = jobs.filter((pl.col("submit_time") >= cut_s) & (hold > 0)
                      & (pl.col("submit_time") - hold < cut_s))
    return out.select("pool", "submit_time", "hold_time", "num_gpus") if out.height else None


def window_features(
    schedule: pl.DataFrame,
    *,
    grid_s: float = 300.0,
    windows_min: tuple[int, ...] = DEFAULT_WINDOWS_MIN,
    start_s: float | None = None,
    end_s: float | None = None,
    expected_duration: pl.DataFrame | None = None,
    pools: Sequence[str] | None = None,
    max_rows: int | None = None,
    held_after: pl.DataFrame | None = None,
) -> Iterator[tuple[int, pl.DataFrame]]:
    """Yield (k, the rows of window k) of :func:`build_features`'s table, k ascending.

    The same rows (arguments as there), one window at a time: a caller that keeps only part
    of each window's rows (a training split) never holds the whole table. The checks run
    before the first window is built.
    """
    check_schedule(schedule)
    windows = sorted({int(k) for k in windows_min})
    if not windows or windows[0] <= 0:
        raise ConfigError(f"windows_min must be positive minutes, not {windows_min}")
    pool_names = _pool_names(schedule, pools)
    check_feature_rows(len(pool_names), grid_count(schedule["submit_time"].to_numpy(), grid_s,
                                                   start_s, end_s), len(windows), grid_s,
                       MAX_ROWS_ANY if max_rows is None else max_rows, option=None)
    return _window_tables(schedule, pool_names, windows, grid_s, start_s, end_s,
                          expected_duration, held_after)


def _window_tables(schedule: pl.DataFrame, pool_names: list[str], windows: list[int],
                   grid_s: float, start_s: float | None, end_s: float | None,
                   expected_duration: pl.DataFrame | None,
                   held_after: pl.DataFrame | None = None
                   ) -> Iterator[tuple[int, pl.DataFrame]]:
    """Yield each window's table (:func:`window_features`, after its checks)."""
    grid = make_grid(schedule, grid_s, start_s, end_s)
    jobs = _GridJobs.of(schedule, pool_names, grid, expected_duration)
    n_pools, n_grid = len(pool_names), grid.size
    # State at t (does not depend on k): running (start <= t < end), pending (submit <= t < start).
    running = _i32(jobs.counter.count(jobs.pool_idx, jobs.run_first, jobs.run_stop))
    pending = _i32(jobs.counter.count(jobs.pool_idx, _search(grid, jobs.submit, "left"),
                                      jobs.run_first))
    every_k = _rhythm_columns(jobs, n_pools)  # (the columns that do not depend on k)
    every_k.update(_held_columns(jobs, pool_names, held_after))
    pool_col = pl.Series("pool", pool_names, dtype=pl.String).gather(
        np.repeat(np.arange(n_pools), n_grid))
    t_col = np.tile(grid, n_pools)
    for k_min in windows:
        cols: dict[str, object] = {"pool": pool_col, "t": t_col,
                                   "k_min": np.full(n_pools * n_grid, k_min, dtype=np.int32)}
        cols.update(_window_columns(jobs, 60.0 * k_min))
        cols.update(every_k)
        cols.update(_label_columns(jobs, 60.0 * k_min))
        cols["running_jobs"] = running
        cols["pending_jobs"] = pending
        yield k_min, pl.DataFrame(cols, schema=_output_schema())


def _pool_names(schedule: pl.DataFrame, pools: Sequence[str] | None) -> list[str]:
    """Return the pools of the table, sorted: ``pools``, or those of the schedule."""
    pool_names = sorted(set(schedule["pool"].cast(pl.String).unique().to_list())
                        if pools is None else {str(p) for p in pools})
    if pools is not None:
        unknown = set(schedule["pool"].unique().to_list()) - set(pool_names)
        if unknown:
            raise ConfigError(f"pools: the schedule has jobs in unlisted pool(s) {sorted(unknown)[:5]}")
    return pool_names


def _i32(a: np.ndarray) -> np.ndarray:
    """Return counts as a flat int32 array (float sums rounded first)."""
    a = np.rint(a) if a.dtype.kind == "f" else a
    return a.astype(np.int32).reshape(-1)


@dataclass
class _GridJobs:
    """The schedule's jobs as arrays (seconds), with what every window's count needs."""

    grid: np.ndarray
    pool_idx: np.ndarray
    submit: np.ndarray
    end: np.ndarray
    gpus: np.ndarray
    exp_end: np.ndarray  # expected ends (never the true ones)
    by_submit: np.ndarray  # job order by submission
    events: dict[str, tuple[np.ndarray, np.ndarray]]  # kind -> (sorted times, their pools)
    counter: _GridCounter
    run_first: np.ndarray  # first grid index at which each job runs
    run_stop: np.ndarray  # first grid index at which it no longer does
    known: np.ndarray  # when the scheduler first knew each job (submit - hold_time)

    @classmethod
    def of(cls, schedule: pl.DataFrame, pool_names: list[str], grid: np.ndarray,
           expected_duration: pl.DataFrame | None) -> _GridJobs:
        n_pools = len(pool_names)
        pool_idx = (
            schedule.select(pl.col("pool").cast(pl.String).replace_strict(
                pool_names, list(range(n_pools)), return_dtype=pl.Int64))
            .to_series().to_numpy()
            if schedule.height else np.empty(0, dtype=np.int64)
        )
        submit = schedule["submit_time"].cast(pl.Float64).to_numpy()
        start = schedule["start_time"].cast(pl.Float64).to_numpy()
        end = schedule["end_time"].cast(pl.Float64).to_numpy()
        gpus = schedule["num_gpus"].cast(pl.Float64).to_numpy()
        exp_end = expected_ends(schedule, expected_duration) if schedule.height else end
        # Events sorted by time: searchsorted runs several times faster on sorted needles.
        by_submit = np.argsort(submit, kind="stable")
        by_end = np.argsort(end, kind="stable")
        events = {"arrivals": (submit[by_submit], pool_idx[by_submit]),
                  "completions": (end[by_end], pool_idx[by_end])}
        hold = (schedule.select(hold_seconds()).to_series().to_numpy()
                if "hold_time" in schedule.columns else np.zeros(submit.size))
        return cls(grid, pool_idx, submit, end, gpus, exp_end, by_submit, events,
                   _GridCounter(n_pools, grid.size), _search(grid, start, "left"),
                   _search(grid, end, "left"), submit - np.maximum(hold, 0.0))


def _rhythm_columns(jobs: _GridJobs, n_pools: int) -> dict[str, np.ndarray]:
    """Rhythm time features (they do not depend on k): from the last submission / completion
    at or before t."""
    grid = jobs.grid
    last_sub = np.full((n_pools, grid.size), np.nan)
    last_end = np.full((n_pools, grid.size), np.nan)
    for p in range(n_pools):
        last_sub[p] = last_at_or_before(np.sort(jobs.submit[jobs.pool_idx == p]), grid)
        last_end[p] = last_at_or_before(np.sort(jobs.end[jobs.pool_idx == p]), grid)
    return time_features(np.tile(grid, n_pools), last_sub.reshape(-1), last_end.reshape(-1))


def _held_columns(jobs: _GridJobs, pool_names: list[str], held_after: pl.DataFrame | None
                  ) -> dict[str, np.ndarray]:
    """The held jobs at every pool and grid time (they do not depend on k): known <= t <
    submit (a job not held has known == submit and counts nowhere); ``held_after``'s jobs
    (held across the schedule's end) count too, those of its pools."""
    known, submit, pool, gpus = jobs.known, jobs.submit, jobs.pool_idx, jobs.gpus
    if held_after is not None and held_after.height:
        extra = held_after.filter(pl.col("pool").cast(pl.String).is_in(pool_names))
        if extra.height:
            at = extra["submit_time"].cast(pl.Float64).to_numpy()
            hold = extra.select(hold_seconds()).to_series().to_numpy()
            index = {name: i for i, name in enumerate(pool_names)}
            known = np.concatenate([known, at - np.maximum(hold, 0.0)])
            submit = np.concatenate([submit, at])
            pool = np.concatenate([pool, np.array([index[str(p)] for p in extra["pool"]],
                                                  dtype=np.int64)])
            gpus = np.concatenate([gpus, extra["num_gpus"].cast(pl.Float64).to_numpy()])
    first, stop = _search(jobs.grid, known, "left"), _search(jobs.grid, submit, "left")
    return {"held_jobs": _i32(jobs.counter.count(pool, first, stop)),
            "held_gpus": _i32(jobs.counter.count(pool, first, stop, weights=gpus))}


def _window_columns(jobs: _GridJobs, k_s: float) -> dict[str, np.ndarray]:
    """The count features of window ``k_s`` (s) at every pool and grid time, flat int32."""
    cols: dict[str, np.ndarray] = {}
    for name, (kind, lo, hi, ends) in window_bounds(jobs.grid, k_s).items():
        times, pools_of = jobs.events[kind]
        first, stop = _grid_ranges(lo, hi, ends, times)
        cols[name] = _i32(jobs.counter.count(pools_of, first, stop))
    # Future completions: running at t and expected end <= t + k (within) or > t + k (after).
    horizon = _search(jobs.grid + k_s, jobs.exp_end, "left")  # first i: t_i + k >= exp_end
    cols["future_completions_within_k"] = _i32(jobs.counter.count(
        jobs.pool_idx, np.maximum(jobs.run_first, horizon), jobs.run_stop))
    cols["future_completions_after_k"] = _i32(jobs.counter.count(
        jobs.pool_idx, jobs.run_first, np.minimum(jobs.run_stop, horizon)))
    return cols


def _label_columns(jobs: _GridJobs, k_s: float) -> dict[str, np.ndarray]:
    """The labels of window ``k_s`` (s): submissions in (t, t + k]: lo = t, hi = t + k."""
    sub_sorted, sub_pools = jobs.events["arrivals"]
    lab_first, lab_stop = _grid_ranges(jobs.grid, jobs.grid + k_s, _OPEN_CLOSED, sub_sorted)
    counter = jobs.counter
    load = counter.count(sub_pools, lab_first, lab_stop,
                         weights=jobs.gpus[jobs.by_submit]).reshape(-1)
    n_new = counter.count(sub_pools, lab_first, lab_stop).reshape(-1)
    return {"label_arrival": (n_new > 0.5).astype(np.int8),
            "label_load_gpus": load.astype(np.float64)}


def _output_schema() -> dict[str, pl.DataType]:
    schema: dict[str, pl.DataType] = {"pool": pl.String(), "t": pl.Float64(), "k_min": pl.Int32()}
    schema.update({c: (pl.Float32() if c in TIME_COLUMNS else pl.Int32())
                   for c in FEATURE_COLUMNS})
    schema.update({"label_arrival": pl.Int8(), "label_load_gpus": pl.Float64()})
    schema.update({c: pl.Int32() for c in EXTRA_COLUMNS})
    return schema


#: dtypes of the feature table, column by column.
OUTPUT_SCHEMA: dict[str, pl.DataType] = _output_schema()
