"""NewLoadEstimate(pool, k): a conservative estimate of the GPUs arriving in the next k (SIA 5.4.1).

Two estimators, both point in time:

``sliding_max``
    SIA's: the max over the GPUs that arrived in the same pool in each of the
    last ``n_windows`` windows of length k, (t - (j + 1) k, t - j k] for
    j = 0..N-1.
``calibrated``
    The sliding max rescaled so the estimate is exceeded in about a target
    fraction ``alpha`` of the windows with arrivals (split-conformal, by
    stratum). On the training rows with arrivals: where the sliding max s is
    positive, ``scale`` is the (1 - alpha) quantile of actual / s, and the
    estimate is ``scale * s``; where s is 0 (a quiet pool waking up),
    ``empty`` is the (1 - alpha) quantile of the actual load and the estimate
    is ``empty``. Exceedance is judged on a disjoint later period.

Evaluation (on windows with arrivals only, as the estimate is only used when
jobs are predicted to arrive): the exceedance rate (actual > estimate), the
mean over-reservation (mean of max(estimate - actual, 0), GPUs) and the mean
shortfall (mean of max(actual - estimate, 0), GPUs).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl
from sia.data.errors import ConfigError

LOAD_LABEL = "label_load_gpus"


def sliding_max_for_rows(
    jobs: pl.DataFrame, rows: pl.DataFrame, window_s: float, n_windows: int
) -> np.ndarray:
    """Return the sliding max (GPUs) for each (pool, t) row of ``rows``, in row order.

    ``jobs`` has ``pool``, ``submit_time`` (s) and ``num_gpus``; only jobs
    submitted at or before each row's t count.
    """
    if n_windows < 1:
        raise ConfigError(f"--load-windows must be >= 1, not {n_windows}")
    out = np.zeros(rows.height, dtype=np.float64)
    row_pool = rows["pool"].to_numpy()
    row_t = rows["t"].to_numpy().astype(np.float64)
    js = jobs.select("pool", "submit_time", "num_gpus").sort("pool", "submit_time")
    for (pool,), part in js.group_by("pool", maintain_order=True):
        mask = row_pool == pool
        if not mask.any():
            continue
        times = part["submit_time"].to_numpy()
        cum = np.concatenate([[0.0], np.cumsum(part["num_gpus"].to_numpy(), dtype=np.float64)])
        t = row_t[mask]
        best = np.zeros(t.size)
        upper = cum[np.searchsorted(times, t, side="right")]
        for j in range(1, n_windows + 1):
            lower = cum[np.searchsorted(times, t - j * window_s, side="right")]
            np.maximum(best, upper - lower, out=best)
            upper = lower
        out[mask] = best
    return out


@dataclass
class CalibratedLoad:
    """Constants of the calibrated estimate for one window (see the module doc)."""

    k_min: int
    alpha: float
    n_windows: int
    scale: float  # multiplies a positive sliding max
    empty: float  # the estimate when the sliding max is 0 (GPUs)

    def estimate(self, sliding_max: np.ndarray) -> np.ndarray:
        """Return the calibrated estimate (GPUs) for each sliding max (GPUs)."""
        s = np.asarray(sliding_max, dtype=np.float64)
        return np.where(s > 0, self.scale * s, self.empty)

    def to_params(self) -> dict[str, float | int]:
        """Return the constants as flat parameters."""
        return {f"load_{self.k_min}m_{k}": v for k, v in asdict(self).items() if k != "k_min"}


def calibrate(
    sliding_max: np.ndarray, actual: np.ndarray, *, k_min: int, alpha: float, n_windows: int
) -> CalibratedLoad:
    """Return the calibrated estimate fit on training windows (arrays of GPUs per row).

    Only rows with arrivals (actual > 0) are used. ``alpha`` in (0, 1) is the
    target exceedance rate. A stratum with no rows falls back to
    scale 1 (the sliding max) or to the overall (1 - alpha) quantile.
    """
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"--load-alpha must be in (0, 1), not {alpha}")
    s = np.asarray(sliding_max, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    arrived = a > 0
    q = 1.0 - alpha
    pos = arrived & (s > 0)
    zero = arrived & (s <= 0)
    scale = float(np.quantile(a[pos] / s[pos], q, method="higher")) if pos.any() else 1.0
    if zero.any():
        empty = float(np.quantile(a[zero], q, method="higher"))
    elif arrived.any():
        empty = float(np.quantile(a[arrived], q, method="higher"))
    else:
        empty = 0.0
    return CalibratedLoad(k_min=k_min, alpha=alpha, n_windows=n_windows, scale=scale, empty=empty)


def load_metrics(estimate: np.ndarray, actual: np.ndarray) -> dict[str, float]:
    """Return exceedance rate, mean over-reservation and mean shortfall (GPUs) over windows with arrivals."""
    e = np.asarray(estimate, dtype=np.float64)
    a = np.asarray(actual, dtype=np.float64)
    arrived = a > 0
    n = int(arrived.sum())
    if n == 0:
        return {"windows_with_arrivals": 0, "exceedance_rate": float("nan"),
                "mean_over_reservation_gpus": float("nan"), "mean_shortfall_gpus": float("nan"),
                "mean_estimate_gpus": float("nan")}
    e, a = e[arrived], a[arrived]
    return {
        "windows_with_arrivals": n,
        "exceedance_rate": float(np.mean(a > e)),
        "mean_over_reservation_gpus": float(np.mean(np.maximum(e - a, 0.0))),
        "mean_shortfall_gpus": float(np.mean(np.maximum(a - e, 0.0))),
        "mean_estimate_gpus": float(np.mean(e)),
    }


@dataclass
class LoadResult:
    """One window's NewLoadEstimate evaluation: both estimators on validation."""

    k_min: int
    calibrated: CalibratedLoad
    sliding_max: dict[str, float]
    calibrated_metrics: dict[str, float]


def evaluate_window(
    jobs: pl.DataFrame,
    train: pl.DataFrame,
    val: pl.DataFrame,
    k_min: int,
    *,
    n_windows: int = 3,
    alpha: float = 0.1,
) -> LoadResult:
    """Calibrate on ``train`` rows and evaluate both estimators on ``val`` rows (one window k).

    Rows carry ``pool``, ``t`` (s) and ``label_load_gpus``.
    """
    w = k_min * 60.0
    s_train = sliding_max_for_rows(jobs, train, w, n_windows)
    s_val = sliding_max_for_rows(jobs, val, w, n_windows)
    cal = calibrate(s_train, train[LOAD_LABEL].to_numpy(), k_min=k_min, alpha=alpha,
                    n_windows=n_windows)
    actual = val[LOAD_LABEL].to_numpy()
    return LoadResult(
        k_min=k_min,
        calibrated=cal,
        sliding_max=load_metrics(s_val, actual),
        calibrated_metrics=load_metrics(cal.estimate(s_val), actual),
    )
