"""Prediction windows and duration bins: the vocabulary predictors and the scheduler share.

Lives in the bottom layer so that `sia.models` (which may import only
`features` and `data`) and `sia.scheduler` (which never imports `models`)
both use one definition. Windows are in seconds (the paper's 5, 60 and 720
minutes); duration bins are (0, 5], (5, 60], (60, 720], (720, inf) minutes.
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sia.data.schema import TIME_LIMIT_GRACE_S

#: Default prediction windows in seconds: 5 min, 1 h, 12 h (SIA 5.4).
DEFAULT_WINDOWS_S: tuple[float, ...] = (300.0, 3600.0, 43200.0)

#: Upper edges of the duration bins in seconds; the last bin is (43200, inf).
DURATION_BIN_EDGES_S: tuple[float, ...] = (300.0, 3600.0, 43200.0)


def duration_bin_of(duration_s: np.ndarray | float) -> np.ndarray:
    """Return the bin index (0..len(edges)) of each duration in seconds.

    Bins are right-closed: 300 s is bin 0, 300.5 s is bin 1.
    """
    return np.searchsorted(np.asarray(DURATION_BIN_EDGES_S), np.asarray(duration_s), side="left")


def sliding_max_load(
    submit: np.ndarray,
    num_gpus: np.ndarray,
    pool: np.ndarray,
    n_pools: int,
    now: float,
    window_s: float,
    n_windows: int,
) -> np.ndarray:
    """Return, per pool, the max GPUs submitted in any of the last ``n_windows`` windows.

    The windows are (now - (j + 1) w, now - j w] for j = 0..n_windows-1 (point
    in time: nothing after ``now`` counts). ``submit`` (s, non-decreasing),
    ``num_gpus`` and ``pool`` (index < n_pools) are per-job arrays, e.g. the
    trace's arrived prefix. Returns float64 [n_pools] in GPUs (SIA 5.4.1's
    NewLoadEstimate: a sliding max over recent windows of the same size).
    """
    if n_windows < 1 or window_s <= 0:
        raise ValueError(f"need n_windows >= 1 and window_s > 0, got {n_windows}, {window_s}")
    lo = int(np.searchsorted(submit, now - n_windows * window_s, side="right"))
    hi = int(np.searchsorted(submit, now, side="right"))
    if hi <= lo:
        return np.zeros(n_pools, dtype=np.float64)
    age = now - submit[lo:hi]
    j = np.minimum((age // window_s).astype(np.int64), n_windows - 1)
    # age in [j w, (j+1) w) puts the job in window j; age == n_windows * w is excluded by lo.
    sums = np.bincount(pool[lo:hi] * n_windows + j, weights=num_gpus[lo:hi],
                       minlength=n_pools * n_windows)
    return sums.reshape(n_pools, n_windows).max(axis=1)


def cdf_from_bins(bins: np.ndarray, windows_s: Any) -> np.ndarray:
    """Return float [n_jobs, n_windows]: 1 where bin ``b``'s upper edge <= w, else 0.

    The duration probabilities of a predictor that only predicts bins (the
    open last bin fits no window).
    """
    upper = np.asarray((*DURATION_BIN_EDGES_S, np.inf))[np.asarray(bins, dtype=np.int64)]
    return (upper[:, None] <= np.asarray(windows_s, dtype=np.float64)[None, :]).astype(np.float64)


def limit_certain(time_limit_s: Any, windows_s: Any,
                  grace_s: float = TIME_LIMIT_GRACE_S) -> np.ndarray:
    """Return bool [n, len(windows_s)]: the job's limit guarantees it fits the window.

    A job with ``time_limit + grace_s <= w`` is certain to fit window w (s):
    Slurm ends it at its limit, at most ``grace_s`` later. NaN (no limit)
    guarantees nothing. ``grace_s`` is on the clock of the limits (a replay's speed-up
    divides both). The one rule of the limit's guarantee, for JobDuration and for SIA's
    lending alike.
    """
    limit = np.asarray(time_limit_s, dtype=np.float64).reshape(-1)
    w = np.asarray(windows_s, dtype=np.float64).reshape(-1)
    return (limit[:, None] + float(grace_s)) <= w[None, :]  # NaN compares False
