"""NewLoadEstimate(pool, k): a conservative estimate of the GPUs arriving in the next k (SIA 5.4.1).

One scikit-learn estimator, :class:`NewLoadEstimate`, with three methods, all
point in time (their inputs at t use only jobs submitted at or before t):

``sliding_max``
    SIA's: the max over the GPUs that arrived in the same pool in each of the
    last ``n_windows`` windows of length k, (t - (j + 1) k, t - j k] for
    j = 0..N-1 (:func:`sliding_max_for_rows` offline,
    :func:`sia.data.windows.sliding_max_load` online). It learns nothing.
``calibrated``
    The sliding max rescaled so the estimate is exceeded in about a target
    fraction ``alpha`` of the windows with arrivals (split-conformal, by
    stratum). On the training rows with arrivals: where the sliding max s is
    positive, ``scale_`` is the (1 - alpha) quantile of actual / s, and the
    estimate is ``scale_ * s``; where s is 0 (a quiet pool waking up),
    ``empty_`` is the (1 - alpha) quantile of the actual load and the
    estimate is ``empty_``.
``quantile``
    An XGBoost regressor of the (1 - alpha) quantile of the load
    (``reg:quantileerror``) on the sliding max and the Table 9 features
    (:data:`sia.features.table9.TABLE9_COLUMNS`), fit on the rows with
    arrivals, plus a conformal correction ``offset_`` (GPUs, added; can be
    negative): the booster is first fit on the earlier part of the training
    rows, ``offset_`` is the (1 - alpha) quantile of actual - prediction on
    the later part (``calibration_fraction`` of the rows, by time), and the
    booster is then refit on all rows. Clipped at 0.

The estimate is only used when jobs are predicted to arrive, so every method
is fit, and evaluated, on windows with arrivals only: the exceedance rate
(actual > estimate), the mean over-reservation (mean of
max(estimate - actual, 0), GPUs) and the mean shortfall (mean of
max(actual - estimate, 0), GPUs) (:func:`load_metrics`).
:func:`evaluate_window` fits all three on the training rows, reports them on
the last days of the training period (to choose) and on validation (to
report), and returns the one to register.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import polars as pl
from sia.data.errors import ConfigError
from sia.models.frames import frame_columns
from sklearn.base import BaseEstimator, RegressorMixin

LOAD_LABEL = "label_load_gpus"
#: The input column every method reads: the paper's sliding max at t (GPUs).
SLIDING_MAX = "sliding_max"
METHODS: tuple[str, ...] = ("sliding_max", "calibrated", "quantile")
#: ``evaluate_window(method="auto")`` allows this much more exceedance than alpha on the hold-out.
AUTO_TOLERANCE = 0.02
#: The share of the training period (its end) held out to compare the methods.
SELECTION_FRACTION = 0.2
#: The name under which :func:`evaluate_window` reports the quantile booster without its offset.
RAW_QUANTILE = "quantile_raw"


def _rows_by_pool(row_pool: np.ndarray) -> dict[Any, np.ndarray]:
    """Return each pool's row indices (ascending), by pool: one sort of the rows instead of a
    scan of every row per pool (with hundreds of pools the scans were most of the work)."""
    if row_pool.size == 0:
        return {}
    names, which = np.unique(row_pool, return_inverse=True)
    order = np.argsort(which, kind="stable")
    edges = np.searchsorted(which[order], np.arange(names.size + 1))
    return {name: order[edges[i]:edges[i + 1]] for i, name in enumerate(names.tolist())}


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
    row_t = rows["t"].to_numpy().astype(np.float64)
    rows_of = _rows_by_pool(rows["pool"].to_numpy())
    js = jobs.select("pool", "submit_time", "num_gpus").sort("pool", "submit_time")
    for (pool,), part in js.group_by("pool", maintain_order=True):
        mask = rows_of.get(pool)
        if mask is None:
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


def load_metrics(estimate: np.ndarray, actual: np.ndarray) -> dict[str, float]:
    """Return exceedance rate, mean over-reservation and mean shortfall (GPUs) over windows with arrivals.

    Also ``windows_with_arrivals`` (a count) and ``mean_estimate_gpus``.
    """
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


def _calibrate(s: np.ndarray, a: np.ndarray, alpha: float) -> tuple[float, float]:
    """Return (scale, empty GPUs) of the calibrated estimate from rows with arrivals.

    ``s`` sliding max, ``a`` actual load (GPUs, all > 0). A stratum with no
    rows falls back to scale 1 (the sliding max) or to the overall
    (1 - alpha) quantile (0 without any row).
    """
    q = 1.0 - alpha
    pos = s > 0
    scale = float(np.quantile(a[pos] / s[pos], q, method="higher")) if pos.any() else 1.0
    if (~pos).any():
        empty = float(np.quantile(a[~pos], q, method="higher"))
    elif a.size:
        empty = float(np.quantile(a, q, method="higher"))
    else:
        empty = 0.0
    return scale, empty


_MATRIX_HINT = (f"add '{SLIDING_MAX}' (sia.models.new_load.sliding_max_for_rows) and, for "
                "method='quantile', the Table 9 features (sia.features.table9.build_features)")


def _as_matrix(X: Any, columns: list[str], what: str) -> np.ndarray:
    """Return X's ``columns`` as float64 [n, len(columns)]; ValueError naming what is missing."""
    return frame_columns(X, columns, what, _MATRIX_HINT)


def _take_rows(X: Any, rows: np.ndarray) -> Any:
    """Return the rows of frame ``X`` (polars or pandas) at positions ``rows``, in that order."""
    return X[rows] if isinstance(X, pl.DataFrame) else X.iloc[rows]


class NewLoadEstimate(RegressorMixin, BaseEstimator):
    """NewLoadEstimate(pool, k): GPUs to reserve for the next window of ``window_min`` (DESIGN.md 5.2).

    ``method`` is ``"sliding_max"`` (the paper's), ``"calibrated"`` (the
    sliding max rescaled for a target exceedance rate ``alpha``) or
    ``"quantile"`` (a conformally corrected XGBoost quantile regressor); see
    the module doc. ``n_windows`` is the N of the sliding max the inputs were
    computed with (recorded, so the scheduler computes the same one).

    ``fit(X, y, *, time=None)``: X a pandas or polars frame with column
    ``sliding_max`` (GPUs) and, for ``"quantile"``, the Table 9 feature
    columns; y the GPUs that arrived in the next window
    (``label_load_gpus``); ``time`` each row's t (s), which orders the rows
    for the conformal split (None: row order). Only rows with y > 0 are
    used. ``predict(X)`` returns the estimate in GPUs (float64, >= 0) per
    row; ``serve`` is the same (what the scheduler reserves).

    Fitted attributes: ``feature_names_in_``, ``n_features_in_``,
    ``scale_`` and ``empty_`` (calibrated: the multiplier of a positive
    sliding max and the estimate when it is 0, GPUs; 1 and 0 otherwise),
    ``offset_`` (quantile: the conformal correction, GPUs),
    ``booster_`` (quantile: the XGBoost booster, else None),
    ``n_fit_rows_`` (rows with arrivals used), and, for quantile,
    ``holdout_exceedance_raw_`` / ``holdout_exceedance_`` (the exceedance
    on the conformal split's later part before / after the correction; NaN
    when it was too small, in which case the offset is 0).
    """

    def __init__(self, method: str = "calibrated", *, window_min: int = 5, n_windows: int = 3,
                 alpha: float = 0.1, conformal: bool = True, calibration_fraction: float = 0.25,
                 min_calibration_rows: int = 50, n_estimators: int = 200, max_depth: int = 4,
                 learning_rate: float = 0.1, min_child_weight: float = 1.0,
                 subsample: float = 1.0, reg_lambda: float = 1.0, n_jobs: int = 1,
                 seed: int = 0):
        self.method = method
        self.window_min = window_min
        self.n_windows = n_windows
        self.alpha = alpha
        self.conformal = conformal
        self.calibration_fraction = calibration_fraction
        self.min_calibration_rows = min_calibration_rows
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.reg_lambda = reg_lambda
        self.n_jobs = n_jobs
        self.seed = seed

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"NewLoadEstimate: method must be one of {list(METHODS)}, not "
                             f"{self.method!r}")
        alpha = float(self.alpha)
        if not 0.0 < alpha < 1.0:  # also refuses NaN
            raise ValueError(f"NewLoadEstimate: alpha (the target exceedance rate) must be in "
                             f"(0, 1), not {self.alpha}")
        if int(self.n_windows) < 1:
            raise ValueError(f"NewLoadEstimate: n_windows must be >= 1, not {self.n_windows}")
        if int(self.window_min) <= 0:
            raise ValueError(f"NewLoadEstimate: window_min must be > 0 minutes, not "
                             f"{self.window_min}")
        if not 0.0 < float(self.calibration_fraction) < 1.0:
            raise ValueError("NewLoadEstimate: calibration_fraction must be in (0, 1), not "
                             f"{self.calibration_fraction}")

    def columns(self) -> list[str]:
        """Return the input columns ``method`` reads: ``sliding_max`` (+ Table 9 for quantile)."""
        if self.method == "quantile":
            from sia.features.table9 import TABLE9_COLUMNS

            return [SLIDING_MAX, *TABLE9_COLUMNS]
        return [SLIDING_MAX]

    def _check_fitted(self) -> None:
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "feature_names_in_")

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, *, time: Any = None) -> NewLoadEstimate:
        """Fit on rows X and next-window loads y (GPUs; see the class doc); return self."""
        self._check_params()
        cols = self.columns()
        s = _as_matrix(X, cols[:1], "NewLoadEstimate.fit")[:, 0]
        _as_matrix(X.head(0), cols, "NewLoadEstimate.fit")  # names any missing column now
        y = np.asarray(y, dtype=np.float64)
        if y.ndim != 1 or y.size != s.size:
            raise ValueError(f"NewLoadEstimate.fit: y must be 1-D with one load per row of X "
                             f"({s.size}), not shape {y.shape}")
        if not np.all(np.isfinite(y)) or (y.size and y.min() < 0):
            raise ValueError("NewLoadEstimate.fit: y must hold finite loads >= 0 (GPUs; "
                             f"'{LOAD_LABEL}'); found NaN, inf or a negative value")
        if not np.all(np.isfinite(s)) or (s.size and s.min() < 0):
            raise ValueError(f"NewLoadEstimate.fit: '{SLIDING_MAX}' must be finite and >= 0 "
                             "(GPUs)")
        if time is not None:
            t = np.asarray(time, dtype=np.float64)
            if t.shape != y.shape or not np.all(np.isfinite(t)):
                raise ValueError("NewLoadEstimate.fit: time must hold one finite time (s) per "
                                 "row of X")
            order = np.argsort(t, kind="stable")
        else:
            order = np.arange(y.size)
        arrived = order[y[order] > 0]  # rows with arrivals, in time order
        # only these rows are fitted: the matrix of every row (mostly empty windows) is not made
        xa, ya = _as_matrix(_take_rows(X, arrived), cols, "NewLoadEstimate.fit"), y[arrived]
        self.feature_names_in_ = np.asarray(cols, dtype=object)
        self.n_features_in_ = len(cols)
        self.n_fit_rows_ = int(ya.size)
        self.scale_, self.empty_, self.offset_ = 1.0, 0.0, 0.0
        self.booster_ = None
        self.holdout_exceedance_raw_ = float("nan")
        self.holdout_exceedance_ = float("nan")
        if self.method == "calibrated":
            self.scale_, self.empty_ = _calibrate(xa[:, 0], ya, float(self.alpha))
        elif self.method == "quantile" and ya.size:
            self._fit_quantile(xa, ya)
        return self

    def _fit_quantile(self, x: np.ndarray, y: np.ndarray) -> None:
        """Fit the booster and its conformal offset on rows with arrivals in time order."""
        q = 1.0 - float(self.alpha)
        n_tail = int(round(float(self.calibration_fraction) * y.size))
        head = y.size - n_tail
        if n_tail >= int(self.min_calibration_rows) and head > 0:
            raw = np.maximum(self._train(x[:head], y[:head]).inplace_predict(x[head:]), 0.0)
            resid = y[head:] - raw
            self.holdout_exceedance_raw_ = float(np.mean(y[head:] > raw))
            if self.conformal:
                # the ceil((n + 1) q)-th smallest residual: split-conformal's finite-sample rank
                rank = min(int(np.ceil((n_tail + 1) * q)), n_tail) - 1
                self.offset_ = float(np.sort(resid)[rank])
            self.holdout_exceedance_ = float(np.mean(y[head:] > np.maximum(raw + self.offset_,
                                                                           0.0)))
        self.booster_ = self._train(x, y)

    def _train(self, x: np.ndarray, y: np.ndarray):
        import xgboost as xgb

        params = {"objective": "reg:quantileerror", "quantile_alpha": 1.0 - float(self.alpha),
                  "tree_method": "hist", "max_depth": int(self.max_depth),
                  "eta": float(self.learning_rate),
                  "min_child_weight": float(self.min_child_weight),
                  "subsample": float(self.subsample), "lambda": float(self.reg_lambda),
                  "nthread": int(self.n_jobs), "seed": int(self.seed)}
        return xgb.train(params, xgb.DMatrix(x, label=y), num_boost_round=int(self.n_estimators))

    # ------------------------------------------------------------------ predict
    def predict(self, X: Any) -> np.ndarray:
        """Return the estimate per row of X (GPUs, float64, >= 0)."""
        self._check_fitted()
        names = list(self.feature_names_in_)
        if self.method != "quantile" or self.booster_ is None or len(X) == 0:
            x = _as_matrix(X, names, "NewLoadEstimate.predict")
            return self.estimate(x[:, 0], x[:, 1:] if x.shape[1] > 1 else None)
        # the booster's own input, made once: float32 holds every value exactly (GPU counts
        # and Table 9's int32 / float32 columns) and is what XGBoost compares in anyway
        x = frame_columns(X, names, "NewLoadEstimate.predict", _MATRIX_HINT, dtype=np.float32)
        pred = np.asarray(self.booster_.inplace_predict(x), dtype=np.float64) + self.offset_
        return np.maximum(pred, 0.0)

    def estimate(self, sliding_max: Any, features: Any = None) -> np.ndarray:
        """Return the estimate (GPUs, >= 0) from arrays: the scheduler's fast path.

        ``sliding_max`` is [n] GPUs; ``features`` (quantile only) is
        [n, len(FEATURE_COLUMNS)] in :data:`~sia.features.table9.FEATURE_COLUMNS`
        order: the model reads its first columns, those of
        :data:`~sia.features.table9.TABLE9_COLUMNS` (the held group, last, is not read).
        """
        self._check_fitted()
        s = np.asarray(sliding_max, dtype=np.float64).reshape(-1)
        if self.method == "sliding_max":
            out = s
        elif self.method == "calibrated":
            out = np.where(s > 0, self.scale_ * s, self.empty_)
        elif self.booster_ is None:  # quantile fit without a single arrival
            out = s
        else:
            if features is None:
                raise ValueError("NewLoadEstimate(method='quantile') needs the Table 9 "
                                 "features beside the sliding max")
            f = np.asarray(features, dtype=np.float64).reshape(s.size, -1)
            if f.shape[1] < self.n_features_in_ - 1:
                raise ValueError(f"NewLoadEstimate: features must have {self.n_features_in_ - 1}"
                                 f" columns in FEATURE_COLUMNS order, not {f.shape[1]}")
            f = f[:, :self.n_features_in_ - 1]
            if s.size == 0:
                return np.zeros(0)
            pred = self.booster_.inplace_predict(np.column_stack([s, f]))
            out = np.asarray(pred, dtype=np.float64) + self.offset_
        return np.maximum(np.asarray(out, dtype=np.float64), 0.0)

    def serve(self, frame: Any) -> np.ndarray:
        """Return what the scheduler reserves for each row of ``frame``: the estimate (GPUs)."""
        return self.predict(frame)

    # ------------------------------------------------------------------ artifacts
    def to_artifacts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return (JSON params with ``kind`` "new_load", boosters by name) for :mod:`sia.models.serving`."""
        self._check_fitted()
        params = {"kind": "new_load", "estimator": self.get_params(),
                  "feature_names": [str(c) for c in self.feature_names_in_],
                  "scale": float(self.scale_), "empty": float(self.empty_),
                  "offset": float(self.offset_), "n_fit_rows": int(self.n_fit_rows_),
                  "holdout_exceedance_raw": _json_float(self.holdout_exceedance_raw_),
                  "holdout_exceedance": _json_float(self.holdout_exceedance_)}
        return params, ({"main": self.booster_} if self.booster_ is not None else {})

    @classmethod
    def from_artifacts(cls, params: dict[str, Any], boosters: dict[str, Any]) -> NewLoadEstimate:
        """Return the fitted NewLoadEstimate stored by :meth:`to_artifacts`."""
        est = cls(**params["estimator"])
        names = list(params["feature_names"])
        if names != est.columns():
            raise ValueError("registered NewLoadEstimate was trained on other columns "
                             f"({names}); retrain it with `sia train`")
        est.feature_names_in_ = np.asarray(names, dtype=object)
        est.n_features_in_ = len(names)
        est.scale_ = float(params["scale"])
        est.empty_ = float(params["empty"])
        est.offset_ = float(params["offset"])
        est.n_fit_rows_ = int(params["n_fit_rows"])
        est.holdout_exceedance_raw_ = _float_or_nan(params.get("holdout_exceedance_raw"))
        est.holdout_exceedance_ = _float_or_nan(params.get("holdout_exceedance"))
        est.booster_ = boosters.get("main")
        if est.method == "quantile" and est.n_fit_rows_ and est.booster_ is None:
            raise ValueError("registered NewLoadEstimate(method='quantile') has no booster")
        return est


def _json_float(v: float) -> float | None:
    """Return ``v`` or None for NaN (JSON has no NaN)."""
    return None if v is None or not np.isfinite(v) else float(v)


def _float_or_nan(v: Any) -> float:
    return float("nan") if v is None else float(v)


# ----------------------------------------------------------------------------- evaluation


@dataclass
class LoadResult:
    """One window's NewLoadEstimate evaluation (every method) and the estimator to register.

    ``validation`` and ``holdout`` map each method to its :func:`load_metrics`
    on the validation period (fit on all training rows) and on the last
    ``SELECTION_FRACTION`` of the training period (fit on the rest); they
    also hold ``"quantile_raw"``, the quantile booster without its
    conformal offset (a diagnostic: it is never registered).
    """

    k_min: int
    estimator: NewLoadEstimate  # the one to register, fit on all training rows
    validation: dict[str, dict[str, float]]
    holdout: dict[str, dict[str, float]]
    estimators: dict[str, NewLoadEstimate] = field(default_factory=dict)

    @property
    def method(self) -> str:
        """Return the registered method."""
        return self.estimator.method


def _raw(est: NewLoadEstimate) -> NewLoadEstimate:
    """Return a copy of a fitted quantile estimate without its conformal offset."""
    import copy

    raw = copy.copy(est)
    raw.offset_ = 0.0
    return raw


def load_frame(jobs: pl.DataFrame, rows: pl.DataFrame, k_min: int, n_windows: int) -> pl.DataFrame:
    """Return ``rows`` with the column ``sliding_max`` (GPUs) for window ``k_min`` minutes."""
    s = sliding_max_for_rows(jobs, rows, k_min * 60.0, n_windows)
    return rows.with_columns(pl.Series(SLIDING_MAX, s, dtype=pl.Float64))


def choose_method(holdout: dict[str, dict[str, float]], alpha: float,
                  tolerance: float = AUTO_TOLERANCE) -> str:
    """Return the method with the least over-reservation among those exceeded at most alpha + tolerance.

    ``holdout`` maps method -> :func:`load_metrics` on held-out training
    rows. When none meets the target, the one exceeded least; without any
    hold-out window with arrivals, ``"calibrated"``. Ties go to the earlier
    method of :data:`METHODS` (the simpler one).
    """
    rates = {m: holdout[m]["exceedance_rate"] for m in METHODS}
    if all(not np.isfinite(r) for r in rates.values()):
        return "calibrated"
    ok = [m for m in METHODS if rates[m] <= alpha + tolerance]
    if ok:
        return min(ok, key=lambda m: holdout[m]["mean_over_reservation_gpus"])
    return min(METHODS, key=lambda m: np.nan_to_num(rates[m], nan=1.0))


def evaluate_window(
    jobs: pl.DataFrame,
    train: pl.DataFrame,
    val: pl.DataFrame,
    k_min: int,
    *,
    n_windows: int = 3,
    alpha: float = 0.1,
    method: str = "calibrated",
    selection_fraction: float = SELECTION_FRACTION,
    **params: Any,
) -> LoadResult:
    """Fit every method on ``train`` rows, evaluate them, return the one ``method`` names (one window k).

    Rows carry ``pool``, ``t`` (s), ``label_load_gpus`` and the Table 9
    features; ``jobs`` (``pool``, ``submit_time``, ``num_gpus``) gives the
    sliding max. Each method is fit on the training rows before the last
    ``selection_fraction`` of their span and scored there (``holdout``:
    training data only, where choices are made), then refit on all training
    rows and scored on ``val`` (``validation``: for the report only).
    ``method="auto"`` registers :func:`choose_method` of the hold-out. The
    quantile booster is scored on the hold-out only when that decides
    something (``method`` ``"auto"`` or ``"quantile"``): with another
    method fixed its two hold-out fits would only fill report rows, and they
    are most of a window's training time (the validation report still has
    every method). ``params`` go to every :class:`NewLoadEstimate`.
    """
    if method not in (*METHODS, "auto"):
        raise ConfigError(f"--load-method must be one of {', '.join(METHODS)} or auto, not "
                          f"{method!r}")
    if not 0.0 < alpha < 1.0:
        raise ConfigError(f"--load-alpha must be in (0, 1), not {alpha}")
    tr = load_frame(jobs, train, k_min, n_windows)
    va = load_frame(jobs, val, k_min, n_windows)
    t = tr["t"].to_numpy().astype(np.float64)
    cut = t.min() + (1.0 - selection_fraction) * (t.max() - t.min()) if t.size else 0.0
    head, tail = tr.filter(pl.col("t") < cut), tr.filter(pl.col("t") >= cut)
    kw = {"window_min": k_min, "n_windows": n_windows, "alpha": alpha, **params}
    holdout, validation, fitted = {}, {}, {}
    for m in METHODS:
        scored = m != "quantile" or method in ("auto", "quantile")
        if scored and head.height:
            h = NewLoadEstimate(m, **kw).fit(head, head[LOAD_LABEL], time=head["t"])
            holdout[m] = load_metrics(h.predict(tail), tail[LOAD_LABEL].to_numpy())
        elif scored:
            holdout[m] = load_metrics(np.zeros(0), np.zeros(0))
        fitted[m] = NewLoadEstimate(m, **kw).fit(tr, tr[LOAD_LABEL], time=tr["t"])
        validation[m] = load_metrics(fitted[m].predict(va), va[LOAD_LABEL].to_numpy())
        if m == "quantile":  # diagnostic: the booster alone, without the conformal offset
            if scored:
                holdout[RAW_QUANTILE] = (load_metrics(_raw(h).predict(tail),
                                                      tail[LOAD_LABEL].to_numpy())
                                         if head.height else holdout[m])
            validation[RAW_QUANTILE] = load_metrics(_raw(fitted[m]).predict(va),
                                                    va[LOAD_LABEL].to_numpy())
    chosen = choose_method(holdout, alpha) if method == "auto" else method
    return LoadResult(k_min=k_min, estimator=fitted[chosen], validation=validation,
                      holdout=holdout, estimators=fitted)
