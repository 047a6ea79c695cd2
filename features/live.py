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
from sia.features.incremental import IncrementalTable9
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
    hold_seconds,
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
    held_jobs: int = 0  # jobs known by t (submitted, held) that arrive after t
    held_gpus: float = 0.0  # their GPUs


@dataclass
class LiveState:
    """Per-pool :class:`PoolState` at time ``t`` (seconds); pools missing from the dict have no jobs."""

    t: float
    pools: dict[str, PoolState] = field(default_factory=dict)

    @classmethod
    def from_schedule(cls, schedule: pl.DataFrame, t: float,
                      expected_duration: pl.DataFrame | None = None) -> LiveState:
        """Return the state at ``t`` of a schedule, using only what is known at t.

        Jobs submitted after t are ignored, but for the held ones known by t (``hold_time``:
        ``submit_time - hold_time <= t``), which count in their pool's ``held_jobs``;
        completions count only when end_time <= t; a job is running when start_time <= t <
        end_time and its expected end is start + point-in-time median (see
        :func:`sia.features.table9.expected_ends`), never its true end.
        """
        check_schedule(schedule)
        held = _held_at(schedule, t)
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
                **held.pop(str(pool), {}),
            )
        for pool, counts in held.items():  # pools whose only jobs so far are held
            state.pools[pool] = PoolState(**counts)
        return state


def _held_at(schedule: pl.DataFrame, t: float) -> dict[str, dict[str, float]]:
    """Return {pool: its PoolState's held counts} at ``t`` for the pools holding jobs."""
    if "hold_time" not in schedule.columns:
        return {}
    hold = hold_seconds()
    rows = (schedule.filter((pl.col("submit_time") > t) & (hold > 0)
                            & (pl.col("submit_time") - hold <= t))
            .group_by("pool").agg(pl.len().alias("n"), pl.col("num_gpus").sum().alias("g")))
    return {str(p): {"held_jobs": int(n), "held_gpus": float(g)}
            for p, n, g in rows.iter_rows()}


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
    The features come from the incremental builder the learned forecaster
    uses (:class:`~sia.features.incremental.IncrementalTable9`), fed with the state.
    """
    windows = sorted({int(k) for k in windows_min})
    names = sorted(state.pools) if pools is None else list(pools)
    t = float(t)
    n_w, n_p = len(windows), len(names)
    got = [state.pools.get(name, _NO_JOBS) for name in names]
    builder = _builder(got, t)
    run_pool = np.repeat(np.arange(n_p), [ps.running_starts.size for ps in got])
    run_end = (np.concatenate([ps.running_expected_ends for ps in got]) if got else _empty())
    held = (np.array([ps.held_jobs for ps in got], dtype=np.float64),
            np.array([ps.held_gpus for ps in got], dtype=np.float64))
    blocks = builder.features(t, tuple(windows), run_pool, run_end, held)
    # Rows in (window, pool) order.
    by_col = (np.concatenate([blocks[k] for k in windows]).T.copy() if windows  # column-major
              else np.empty((len(FEATURE_COLUMNS), 0), dtype=np.float32))
    cols: dict[str, object] = {
        "pool": pl.Series("pool", names, dtype=pl.String).gather(np.tile(np.arange(n_p), n_w)),
        "t": np.full(n_w * n_p, t),
        "k_min": np.repeat(np.asarray(windows, dtype=np.int32), n_p),
    }
    for c, col in enumerate(FEATURE_COLUMNS):
        cols[col] = by_col[c] if col in TIME_COLUMNS else by_col[c].astype(np.int32)
    extras = np.array([(ps.running_starts.size, ps.pending_jobs) for ps in got],
                      dtype=np.int64).reshape(n_p, 2)
    for c, col in enumerate(EXTRA_COLUMNS):
        cols[col] = np.tile(extras[:, c], n_w).astype(np.int32)
    schema: dict[str, pl.DataType] = {"pool": pl.String(), "t": pl.Float64(), "k_min": pl.Int32()}
    schema.update({c: (pl.Float32() if c in TIME_COLUMNS else pl.Int32())
                   for c in [*FEATURE_COLUMNS, *EXTRA_COLUMNS]})
    return pl.DataFrame(cols, schema=schema)


_NO_JOBS = PoolState()


def _builder(pools: list[PoolState], t: float) -> IncrementalTable9:
    """Return an :class:`IncrementalTable9` holding the pools' submissions and completions."""
    arrivals = [ps.arrival_times for ps in pools]
    completions = [ps.completion_times for ps in pools]
    firsts = [a[0] for a in (*arrivals, *completions) if a.size]  # the arrays are sorted
    lasts = [a[-1] for a in (*arrivals, *completions) if a.size]
    origin = float(min([t - 1.0, *firsts])) - 1.0
    return IncrementalTable9.of_pools(arrivals, completions, origin,
                                      float(max([t - 1.0, *lasts])) - origin + 2.0)
