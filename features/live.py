"""Table 9 features for one prediction time t from the live state of a running simulation.

The learned forecaster keeps a :class:`LiveState` up to date from the
simulator's view (or builds it with :meth:`LiveState.from_schedule`) and asks
:func:`features_at` for the feature rows at the current tick. The values are
exactly those of :func:`sia.features.table9.build_features` at the same t (both
count events against :func:`sia.features.table9.window_bounds`).

Per pool, the state holds only what is known at t:

- ``arrival_times``: submit times of the jobs submitted so far (<= t), sorted;
- ``arrival_gpus``: their GPU counts (same order; not a Table 9 feature, kept
  for load estimates);
- ``completion_times``: end times of the jobs finished so far (<= t), sorted;
- ``running_starts`` / ``running_expected_ends``: for each job running at t
  (start <= t < end), its start and its *expected* end (start + the
  point-in-time median duration, +inf when unknown; never the true end);
- ``pending_jobs``: the number of jobs submitted but not started.

Old history can be trimmed: no count feature looks further back than
``max(100 k, 3 days)`` (:func:`lookback_s`); the rhythm features
``since_arrival_s`` / ``since_completion_s`` need each pool's last submission
and completion, however old.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl
from sia.features.table9 import (
    DEFAULT_WINDOWS_MIN,
    EXTRA_COLUMNS,
    FEATURE_COLUMNS,
    PERIODIC_X,
    PERIODS_S,
    RECENT_X,
    TIME_COLUMNS,
    check_schedule,
    expected_ends,
    time_features,
    window_bounds,
)


def _empty() -> np.ndarray:
    return np.empty(0, dtype=np.float64)


@dataclass
class PoolState:
    """What is known about one pool at the current time (arrays sorted where stated)."""

    arrival_times: np.ndarray = field(default_factory=_empty)  # sorted, seconds
    arrival_gpus: np.ndarray = field(default_factory=lambda: np.empty(0, dtype=np.int32))
    completion_times: np.ndarray = field(default_factory=_empty)  # sorted, seconds
    running_starts: np.ndarray = field(default_factory=_empty)  # seconds
    running_expected_ends: np.ndarray = field(default_factory=_empty)  # seconds, +inf = unknown
    pending_jobs: int = 0


@dataclass
class LiveState:
    """Per-pool :class:`PoolState` at time ``t`` (seconds); pools missing from the dict have no jobs."""

    t: float
    pools: dict[str, PoolState] = field(default_factory=dict)

    @classmethod
    def from_schedule(cls, schedule: pl.DataFrame, t: float,
                      expected_duration: pl.DataFrame | None = None) -> LiveState:
        """Return the state at ``t`` of a schedule, using only what is known at t.

        Jobs submitted after t are ignored; completions count only when
        end_time <= t; a job is running when start_time <= t < end_time and
        its expected end is start + point-in-time median (see
        :func:`sia.features.table9.expected_ends`), never its true end.
        """
        check_schedule(schedule)
        known = schedule.filter(pl.col("submit_time") <= t)
        exp_end = expected_ends(known, expected_duration) if known.height else _empty()
        known = known.with_columns(pl.Series("_exp_end", exp_end, dtype=pl.Float64))
        state = cls(t=float(t))
        for (pool,), g in known.group_by(["pool"], maintain_order=True):
            g = g.sort("submit_time")
            done = g.filter(pl.col("end_time") <= t)["end_time"].sort()
            run = g.filter((pl.col("start_time") <= t) & (pl.col("end_time") > t))
            state.pools[str(pool)] = PoolState(
                arrival_times=g["submit_time"].cast(pl.Float64).to_numpy(),
                arrival_gpus=g["num_gpus"].cast(pl.Int32).to_numpy(),
                completion_times=done.cast(pl.Float64).to_numpy(),
                running_starts=run["start_time"].cast(pl.Float64).to_numpy(),
                running_expected_ends=run["_exp_end"].to_numpy(),
                pending_jobs=int((g["start_time"] > t).sum()),
            )
        return state


def lookback_s(windows_min: Sequence[int] = DEFAULT_WINDOWS_MIN) -> float:
    """Return how far back (seconds) any feature looks: history older than t minus this can go."""
    return max(max(RECENT_X) * 60.0 * max(windows_min), max(PERIODIC_X) * max(PERIODS_S.values()))


def features_at(state: LiveState, t: float, windows_min: Sequence[int] = DEFAULT_WINDOWS_MIN,
                pools: Sequence[str] | None = None) -> pl.DataFrame:
    """Return the feature rows at time ``t`` (seconds): one per (window, pool).

    Columns: ``pool``, ``t``, ``k_min``, FEATURE_COLUMNS and EXTRA_COLUMNS (no
    labels: the future is unknown), sorted by (k_min, pool), with the same
    values and dtypes as the batch table's rows at t. ``pools`` defaults to the
    state's pools (sorted); a pool absent from the state gets zeros. The
    state's arrays must hold only what is known at t (see :class:`PoolState`).
    Cost: a few numpy calls per pool (all windows and features at once).
    """
    windows = sorted({int(k) for k in windows_min})
    names = sorted(state.pools) if pools is None else list(pools)
    t = float(t)
    n_w, n_p = len(windows), len(names)
    # Bounds of every (window, count feature), per event kind, as arrays.
    per_kind: dict[str, tuple[list[int], list[float], list[float], list[bool]]] = {
        "arrivals": ([], [], [], []), "completions": ([], [], [], [])}
    for w, k_min in enumerate(windows):
        for col, (kind, lo, hi, ends) in window_bounds(t, 60.0 * k_min).items():
            slot, los, his, opens = per_kind[kind]
            slot.append(w * len(FEATURE_COLUMNS) + FEATURE_COLUMNS.index(col))
            los.append(float(lo))
            his.append(float(hi))
            opens.append(ends == "(]")
    horizons = np.array([t + 60.0 * k for k in windows])
    values = np.zeros((n_p, n_w * len(FEATURE_COLUMNS)), dtype=np.int64)
    extras = np.zeros((n_p, 2), dtype=np.int64)
    last = np.full((2, n_p), np.nan)  # last arrival / completion at or before t
    i_within = FEATURE_COLUMNS.index("future_completions_within_k")
    i_after = FEATURE_COLUMNS.index("future_completions_after_k")
    w_off = np.arange(n_w) * len(FEATURE_COLUMNS)
    for j, name in enumerate(names):
        ps = state.pools.get(name)
        if ps is None:
            continue
        for kind, events in (("arrivals", ps.arrival_times),
                             ("completions", ps.completion_times)):
            slot, los, his, opens = per_kind[kind]
            lo, hi = np.asarray(los), np.asarray(his)
            upper = np.searchsorted(events, hi, side="right")  # x <= hi
            lower = np.where(opens, np.searchsorted(events, lo, side="right"),  # x <= lo
                             np.searchsorted(events, lo, side="left"))  # x < lo
            values[j, slot] = np.maximum(upper - lower, 0)
        ends_sorted = np.sort(ps.running_expected_ends)
        within = np.searchsorted(ends_sorted, horizons, side="right")  # expected end <= t + k
        values[j, w_off + i_within] = within
        values[j, w_off + i_after] = ends_sorted.size - within
        extras[j] = (ps.running_starts.size, ps.pending_jobs)
        for r, events in enumerate((ps.arrival_times, ps.completion_times)):
            if events.size:
                last[r, j] = events[-1]
    # Rows in (window, pool) order.
    stacked = values.reshape(n_p, n_w, len(FEATURE_COLUMNS)).transpose(1, 0, 2).reshape(
        n_w * n_p, len(FEATURE_COLUMNS))
    cols: dict[str, object] = {
        "pool": pl.Series("pool", names, dtype=pl.String).gather(np.tile(np.arange(n_p), n_w)),
        "t": np.full(n_w * n_p, t),
        "k_min": np.repeat(np.asarray(windows, dtype=np.int32), n_p),
    }
    timed = time_features(np.full(n_p, t), last[0], last[1])
    for c, col in enumerate(FEATURE_COLUMNS):
        cols[col] = (np.tile(timed[col], n_w) if col in TIME_COLUMNS
                     else stacked[:, c].astype(np.int32))
    for c, col in enumerate(EXTRA_COLUMNS):
        cols[col] = np.tile(extras[:, c], n_w).astype(np.int32)
    schema: dict[str, pl.DataType] = {"pool": pl.String(), "t": pl.Float64(), "k_min": pl.Int32()}
    schema.update({c: (pl.Float32() if c in TIME_COLUMNS else pl.Int32())
                   for c in [*FEATURE_COLUMNS, *EXTRA_COLUMNS]})
    return pl.DataFrame(cols, schema=schema)
