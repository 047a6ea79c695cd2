"""The explicit time split of a trace into a training and a validation period (DESIGN.md 5.1).

SIA trains on three weeks and validates on a disjoint two-week period. Real
traces often start nearly empty (Philly's first three weeks hold a few dozen
jobs), so the default start is not the trace's first second but its *active
start*: the first day whose submissions reach a fraction of the median daily
count, plus a warm-up that lets the longest look-back features (the periodic
ones reach three days back) see real history.

A feature row at grid time t with window k has its label in (t, t + k]. A row
belongs to training iff ``train_start <= t`` and ``t + k <= train_end``, and
to validation iff ``train_end <= t`` and ``t + k <= val_end``: the label
windows of the two sets never overlap, so the split is disjoint in what is
predicted (features may look back across the boundary: that is the past).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from sia.data.errors import ConfigError

DAY_S = 86400.0


@dataclass(frozen=True)
class TimeSplit:
    """Boundaries in seconds since the trace start: train [train_start, train_end), val [train_end, val_end)."""

    train_start: float
    train_end: float
    val_end: float
    active_start: float  # the first active day's start, before the warm-up
    how: str  # how train_start was chosen, for the record

    @property
    def train_days(self) -> float:
        """Length of the training period in days."""
        return (self.train_end - self.train_start) / DAY_S

    @property
    def val_days(self) -> float:
        """Length of the validation period in days."""
        return (self.val_end - self.train_end) / DAY_S

    def to_params(self) -> dict[str, float | str]:
        """Return the split as flat MLflow-ready parameters (seconds and days)."""
        d = {f"split_{k}": v for k, v in asdict(self).items()}
        d["split_train_days"] = round(self.train_days, 4)
        d["split_val_days"] = round(self.val_days, 4)
        return d


def active_start_s(submit_times: np.ndarray, min_fraction: float = 0.1) -> float:
    """Return the start (s, a multiple of a day) of the first day with enough submissions.

    "Enough" is at least ``min_fraction`` of the median count over the days
    that have any submission (and at least one job).
    """
    times = np.asarray(submit_times, dtype=np.float64)
    if times.size == 0:
        raise ConfigError("cannot split an empty trace: it has no submissions")
    days = np.floor(times / DAY_S).astype(np.int64)
    uniq, counts = np.unique(days, return_counts=True)
    need = max(1.0, min_fraction * float(np.median(counts)))
    first = uniq[np.argmax(counts >= need)]
    return float(first) * DAY_S


def choose_split(
    submit_times: np.ndarray,
    *,
    train_days: float = 21.0,
    val_days: float = 14.0,
    warmup_days: float = 3.0,
    start_day: float | None = None,
    min_fraction: float = 0.1,
) -> TimeSplit:
    """Return the split: ``train_days`` then ``val_days``, after the active start plus warm-up.

    ``start_day`` (days since the trace start) overrides the active-start rule.
    Raises ConfigError when the periods do not fit in the trace, naming the
    option to change.
    """
    if train_days <= 0:
        raise ConfigError(f"--train-days must be > 0, not {train_days}")
    if val_days <= 0:
        raise ConfigError(f"--val-days must be > 0, not {val_days}")
    if warmup_days < 0:
        raise ConfigError(f"--warmup-days must be >= 0, not {warmup_days}")
    times = np.asarray(submit_times, dtype=np.float64)
    if times.size == 0:
        raise ConfigError("cannot split an empty trace: it has no submissions")
    if start_day is not None:
        if start_day < 0:
            raise ConfigError(f"--start-day must be >= 0, not {start_day}")
        active = float(start_day) * DAY_S
        how = f"start_day={start_day}"
    else:
        active = active_start_s(times, min_fraction)
        how = f"first day with >= {min_fraction:g} x median daily submissions"
    train_start = active + warmup_days * DAY_S
    train_end = train_start + train_days * DAY_S
    val_end = train_end + val_days * DAY_S
    last = float(times.max())
    if val_end > last + DAY_S:
        span_days = (last - train_start) / DAY_S
        # the same proportions in what the trace has, whole tenths of a day, rounded down
        fit = (math.floor(10 * span_days * train_days / (train_days + val_days)) / 10,
               math.floor(10 * span_days * val_days / (train_days + val_days)) / 10)
        hint = (f" (e.g. --train-days {fit[0]:g} --val-days {fit[1]:g})"
                if span_days > 0 and min(fit) > 0 else "")
        raise ConfigError(
            f"the split does not fit the trace: training starts on day {train_start / DAY_S:.1f} "
            f"and needs {train_days:g} + {val_days:g} days, but the trace ends {span_days:.1f} "
            f"days later; lower --train-days / --val-days{hint} / --warmup-days or set "
            "--start-day"
        )
    return TimeSplit(train_start, train_end, val_end, active, how)


def _in_period(start: float, end: float) -> pl.Expr:
    """Rows whose label window (t, t + k] lies in [start, end] with t >= start (module doc)."""
    label_end = pl.col("t") + pl.col("k_min").cast(pl.Float64) * 60.0
    return (pl.col("t") >= start) & (label_end <= end)


def split_features(features: pl.DataFrame, split: TimeSplit) -> tuple[pl.DataFrame, pl.DataFrame]:
    """Return (train, val) rows of a feature table (columns ``t`` in s, ``k_min``).

    Each row's label window (t, t + k] lies inside its period (see the module doc).
    """
    return (features.filter(_in_period(split.train_start, split.train_end)),
            features.filter(_in_period(split.train_end, split.val_end)))


def split_by_window(features: pl.DataFrame, split: TimeSplit, windows: tuple[int, ...]
                    ) -> dict[int, tuple[pl.DataFrame, pl.DataFrame]]:
    """Return {k: (train, val) rows of window ``k``}: :func:`split_features` per window.

    The same rows as filtering :func:`split_features`'s two tables by ``k_min``, in the same
    order, without a copy of the two whole periods: the caller may then drop ``features``, so
    a table of many pools is held once, not three times (the whole table, its two periods
    and their per-window parts), while the predictors fit.
    """
    rows = {}
    for k in windows:
        mine = pl.col("k_min") == k
        rows[k] = (features.filter(mine & _in_period(split.train_start, split.train_end)),
                   features.filter(mine & _in_period(split.train_end, split.val_end)))
    return rows
