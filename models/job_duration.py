"""JobDuration(job) -> bin (SIA 5.4.2): the duration bin from the point-in-time history.

Bins are those of :func:`sia.data.windows.duration_bin_of`:
(0, 5], (5, 60], (60, 720], (720, inf) minutes. A job's predicted bin is the
bin of the median duration of similar jobs finished before it (same tag, else
same pool and GPU count, else same pool; see
:mod:`sia.features.duration_history`), or, with ``quantile`` q != 0.5, the bin
of their q-quantile (:func:`sorted_quantile`): a higher quantile trades
accuracy for fewer under-predictions. A job with no history at all gets the
``fallback_bin`` (default: the longest bin, the conservative choice: an
over-prediction only forgoes lending, an under-prediction can slow a pool's
jobs down).

Evaluation: accuracy, the confusion matrix (rows true bin, columns predicted
bin), the under-prediction rate (predicted bin < true bin) and the
over-prediction rate.
"""

from __future__ import annotations

from bisect import insort
from collections import defaultdict
from typing import Any

import numpy as np
import polars as pl
from sia.data.forecast_view import ForecastView, TraceView
from sia.data.schema import TIME_LIMIT_GRACE_S
from sia.data.windows import DURATION_BIN_EDGES_S, duration_bin_of
from sklearn.base import BaseEstimator, ClassifierMixin
from sklearn.metrics import accuracy_score, confusion_matrix

N_BINS = len(DURATION_BIN_EDGES_S) + 1
BIN_NAMES = ("(0,5]m", "(5,60]m", "(60,720]m", "(720,inf)m")
#: JobDuration's methods (see :class:`JobDuration`).
METHODS: tuple[str, ...] = ("xgboost", "history", "history_cdf")
#: The paper's rule: the median of the similar jobs' durations.
DEFAULT_QUANTILE = 0.5
#: Quantiles tried by :func:`calibrate_quantile`, in increasing order.
QUANTILE_GRID: tuple[float, ...] = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9, 0.95, 1.0)


def check_quantile(q: float, what: str = "quantile") -> float:
    """Return ``q`` as a float; raise ValueError naming ``what`` unless 0 <= q <= 1."""
    q = float(q)
    if not 0.0 <= q <= 1.0:  # also refuses NaN
        raise ValueError(f"{what} must be in [0, 1], not {q}")
    return q


def sorted_quantile(values: list[float], q: float) -> float:
    """Return the q-quantile of ascending ``values`` (s; NaN when empty).

    The definition (Hyndman and Fan's type 7, numpy's ``method="linear"``):
    with n values ``v[0] <= ... <= v[n-1]``, ``h = q * (n - 1)``,
    ``i = floor(h)``, the quantile is ``v[i]`` when ``h == i`` and otherwise
    ``v[i] + (v[i+1] - v[i]) * (h - i)``, evaluated in exactly that order
    (pandas' rolling ``quantile(q, interpolation="linear")`` does the same
    arithmetic, so the offline history equals this bit for bit; numpy's
    ``np.quantile`` agrees up to floating-point rounding). ``q = 0.5`` is the
    median ``np.median`` computes (the mean of the two middle values), so the
    default reproduces the paper's rule exactly. O(1).
    """
    n = len(values)
    if n == 0:
        return float("nan")
    if q == 0.5:
        h = n // 2
        return values[h] if n % 2 else (values[h - 1] + values[h]) / 2.0
    pos = q * (n - 1)
    i = int(pos)
    frac = pos - i
    if frac == 0.0:
        return values[i]
    lo = values[i]
    return lo + (values[i + 1] - lo) * frac


def predict_bins(hist_median_s: np.ndarray, fallback_bin: int = N_BINS - 1) -> np.ndarray:
    """Return the predicted bin per job from its history median (s; NaN = no history)."""
    if not 0 <= fallback_bin < N_BINS:
        raise ValueError(f"fallback_bin must be in 0..{N_BINS - 1}, not {fallback_bin}")
    med = np.asarray(hist_median_s, dtype=np.float64)
    bins = duration_bin_of(np.where(np.isnan(med), 1.0, med)).astype(np.int64)
    return np.where(np.isnan(med), fallback_bin, bins)


def duration_metrics(true_bins: np.ndarray, pred_bins: np.ndarray) -> dict[str, Any]:
    """Return accuracy, under/over-prediction rates and the confusion matrix (list of lists)."""
    t = np.asarray(true_bins, dtype=np.int64)
    p = np.asarray(pred_bins, dtype=np.int64)
    if t.size == 0:
        return {"jobs": 0, "accuracy": float("nan"), "under_rate": float("nan"),
                "over_rate": float("nan"), "confusion": [[0] * N_BINS for _ in range(N_BINS)]}
    return {
        "jobs": int(t.size),
        "accuracy": float(accuracy_score(t, p)),
        "under_rate": float(np.mean(p < t)),
        "over_rate": float(np.mean(p > t)),
        "confusion": confusion_matrix(t, p, labels=list(range(N_BINS))).tolist(),
    }


def evaluate_history(
    schedule: pl.DataFrame,
    history: pl.DataFrame,
    start_s: float,
    end_s: float,
    *,
    fallback_bin: int = N_BINS - 1,
    quantile: float = DEFAULT_QUANTILE,
) -> dict[str, Any]:
    """Evaluate the history-based JobDuration on the jobs submitted in [start_s, end_s).

    ``history`` is :func:`sia.features.duration_history.point_in_time_history`
    of ``schedule`` (``job_id``, ``hist_median_s``, ``hist_source``, and
    ``hist_quantile_s`` when ``quantile`` != 0.5: build it with the same
    ``quantile``). Returns :func:`duration_metrics` of the quantile's bins
    plus the share of jobs per history level (``source_<level>``),
    ``fallback_bin`` and ``quantile``.
    """
    quantile = check_quantile(quantile)
    column = "hist_median_s" if quantile == 0.5 else "hist_quantile_s"
    if column not in history.columns:
        raise ValueError(f"history has no {column!r} column: build it with "
                         f"point_in_time_history(..., quantile={quantile})")
    jobs = schedule.filter((pl.col("submit_time") >= start_s) & (pl.col("submit_time") < end_s))
    joined = jobs.select("job_id", "duration").join(history, on="job_id", how="left")
    stat = joined[column].fill_null(float("nan")).to_numpy()
    out = duration_metrics(duration_bin_of(joined["duration"].to_numpy()),
                           predict_bins(stat, fallback_bin))
    if joined.height:
        counts = joined["hist_source"].fill_null("none").value_counts()
        for src, n in counts.sort("hist_source").iter_rows():  # value_counts' order is arbitrary
            out[f"source_{src}"] = n / joined.height
    out["fallback_bin"] = fallback_bin
    out["quantile"] = quantile
    return out


def calibrate_quantile(
    schedule: pl.DataFrame,
    start_s: float,
    end_s: float,
    target_under: float,
    *,
    min_count: int = 3,
    fallback_bin: int = N_BINS - 1,
    grid: tuple[float, ...] = QUANTILE_GRID,
) -> dict[str, Any]:
    """Return the smallest quantile of ``grid`` whose under-prediction rate is <= ``target_under``.

    The rate is measured on the jobs submitted in [start_s, end_s) (the
    training period; evaluate the choice on a later period). Predicted bins
    only grow with the quantile, so the rate only falls along the grid and
    the search stops at the first quantile that meets the target. Returns
    ``{"quantile", "under_rate", "met", "target_under"}``; when no quantile
    meets it, the largest one with ``met`` False.
    """
    from sia.features.duration_history import point_in_time_history

    target_under = check_quantile(target_under, "target under-prediction rate")
    qs = sorted(check_quantile(q, "grid quantile") for q in grid)
    if not qs:
        raise ValueError("calibrate_quantile: empty quantile grid")
    rate = float("nan")
    for q in qs:
        hist = point_in_time_history(schedule, min_count=min_count, quantile=q)
        rate = evaluate_history(schedule, hist, start_s, end_s, fallback_bin=fallback_bin,
                                quantile=q)["under_rate"]
        if rate <= target_under:
            return {"quantile": q, "under_rate": rate, "met": True, "target_under": target_under}
    return {"quantile": qs[-1], "under_rate": rate, "met": False, "target_under": target_under}


class SortedHistory:
    """The durations of one group kept sorted, with an O(1) median and quantiles.

    ``add`` is :func:`bisect.insort` (a binary search and a memmove); the
    median of the sorted values is cached until the next ``add``. It equals
    ``np.median`` of the same values exactly (the middle value, or the mean
    ``(a + b) / 2`` of the two middle ones, as numpy computes it).
    ``quantile(q)`` is :func:`sorted_quantile` (two index lookups). Durations
    must not be NaN (the trace contract forbids it).
    """

    __slots__ = ("values", "_median")

    def __init__(self) -> None:
        self.values: list[float] = []
        self._median: float | None = None

    def __len__(self) -> int:
        return len(self.values)

    def add(self, duration_s: float) -> None:
        """Insert one duration (s)."""
        insort(self.values, duration_s)
        self._median = None

    def extend(self, durations_s: list[float]) -> None:
        """Insert many durations (s) at once: one sort instead of one insertion each."""
        self.values.extend(durations_s)
        self.values.sort()
        self._median = None

    def median(self) -> float:
        """Return the median duration (s); NaN when empty."""
        m = self._median
        if m is None:
            v, n = self.values, len(self.values)
            if n == 0:
                return float("nan")
            h = n // 2
            m = self._median = v[h] if n % 2 else (v[h - 1] + v[h]) / 2.0
        return m

    def quantile(self, q: float) -> float:
        """Return the q-quantile of the durations (s; :func:`sorted_quantile`); NaN when empty."""
        return self.median() if q == 0.5 else sorted_quantile(self.values, q)


def prior_jobs(prior: Any, trace: TraceView, *, with_user: bool = False,
               with_limit: bool = False) -> list[tuple]:
    """Return the jobs of ``prior`` keyed like ``trace``'s, in ``prior``'s row order.

    ``prior``: None, or a frame of the jobs submitted before the replay
    (``pool``, ``num_gpus``, ``submit_time``, ``duration``, optional
    ``tag`` and ``user``). Returns (tag code or -1, pool index, GPUs, submit
    time s, duration s as recorded) per job; jobs of pools the replay does
    not hold are dropped, tags it never sees become -1. ``with_user`` appends
    the user keyed like the trace's ``user_code`` (None when unknown; a user
    the replay never sees keeps its name, so it matches none of its jobs). ``with_limit``
    appends the time limit (s as recorded; NaN when none or when ``prior`` has no
    ``time_limit`` column).
    """
    if prior is None or trace.n_jobs == 0 or prior.height == 0:
        return []
    pools = {name: i for i, name in enumerate(trace.pool_names)}
    codes = {t: int(c) for t, c in zip(trace.tag.tolist(), trace.tag_code.tolist(), strict=True)
             if c >= 0}
    user_codes = getattr(trace, "user_code", None)
    read_users = with_user and user_codes is not None and "user" in prior.columns
    users = ({u: int(c) for u, c in zip(trace.user.tolist(), user_codes.tolist(), strict=True)
              if c >= 0} if read_users else {})
    rows = prior.select(pl.col("pool").cast(pl.String), pl.col("num_gpus").cast(pl.Int64),
                        pl.col("submit_time").cast(pl.Float64),
                        pl.col("duration").cast(pl.Float64),
                        tag=pl.col("tag") if "tag" in prior.columns else pl.lit(None),
                        user=pl.col("user") if read_users else pl.lit(None),
                        limit=(pl.col("time_limit").cast(pl.Float64).fill_null(float("nan"))
                               if with_limit and "time_limit" in prior.columns
                               else pl.lit(float("nan"))))
    out: list[tuple] = []
    for pool, g, submit, d, tag, user, limit in rows.iter_rows():
        p = pools.get(pool)
        if p is None:
            continue
        row = (codes.get(tag, -1) if tag is not None else -1, p, int(g), submit, d)
        if with_user:
            row += (None if user is None or user == "" else users.get(user, user),)
        if with_limit:
            row += (limit,)
        out.append(row)
    return out


def prior_completions(prior: Any, trace: TraceView, *, with_user: bool = False,
                      with_limit: bool = False) -> list[tuple]:
    """Return the jobs of ``prior`` finished before ``trace``'s first submission, keyed like its jobs.

    ``prior``: as :func:`prior_jobs`, e.g. the trace before the replay
    window. A job counts as finished at ``submit_time + duration`` (its end
    with no queueing, the schedule the predictors are trained on), and only
    if that is at or before the replay's first submission, so nothing after
    the replay's start leaks in. Returns (tag code or -1, pool index, GPUs,
    duration in replay seconds: divided by the trace's speed-up) in end-time
    order; jobs of pools the replay does not hold are dropped, tags it never
    sees become -1. ``with_user``: (tag, user, pool, GPUs, duration), the user
    as :func:`prior_jobs` keys it; ``with_limit`` (with ``with_user``) appends the time
    limit (replay seconds, divided by the speed-up as the durations are; NaN when none).
    """
    jobs = prior_jobs(prior, trace, with_user=with_user, with_limit=with_limit and with_user)
    if not jobs:
        return []
    start = float(trace.submit[0])
    speedup = float(getattr(trace, "speedup", 1.0))
    done = sorted((r for r in jobs if r[3] + r[4] <= start), key=lambda r: r[3] + r[4])
    if with_user and with_limit:
        return [(tag, user, p, g, d / speedup, limit / speedup)
                for tag, p, g, _, d, user, limit in done]
    if with_user:
        return [(tag, user, p, g, d / speedup) for tag, p, g, _, d, user in done]
    return [(tag, p, g, d / speedup) for tag, p, g, _, d in done]


class OnlineDurationHistory:
    """The same fallback chain, kept up to date from a simulator view's completions.

    ``update(view)`` absorbs the completions since the last call (their
    durations are known: they finished); ``median_s(view, jobs)`` returns the
    history median (s, NaN when none) for each job index as of now, and
    ``quantile_s(view, jobs, q)`` any quantile of the same group. Each
    group (tag, (pool, GPUs), pool) keeps its durations sorted
    (:class:`SortedHistory`), so absorbing a job costs a binary insertion and a
    median lookup is O(1); the values equal ``np.median`` of the group's
    durations exactly.
    """

    def __init__(self, min_count: int = 3, prior: Any = None):
        self.min_count = min_count
        #: jobs finished before the replay (see :func:`prior_completions`), absorbed at start
        self.prior = prior
        self._seen: list[int] = []
        self._by_tag: dict[int, SortedHistory] = defaultdict(SortedHistory)
        self._by_pool_gpus: dict[tuple[int, int], SortedHistory] = defaultdict(SortedHistory)
        self._by_pool: dict[int, SortedHistory] = defaultdict(SortedHistory)
        self._trace_id = None

    def update(self, view: ForecastView) -> None:
        """Absorb the jobs completed since the last call."""
        trace = view.trace
        self.start(trace)
        for p in range(trace.n_pools):
            done = view.completed_jobs(p)
            self.add(trace, done[self._seen[p]:])
            self._seen[p] = len(done)

    def start(self, trace: TraceView) -> None:
        """Forget everything when ``trace`` is a new replay's trace."""
        if self._trace_id != id(trace):
            self.__init__(self.min_count, self.prior)
            self._trace_id = id(trace)
            self._seen = [0] * trace.n_pools
            batches: dict[tuple[int, Any], list[float]] = defaultdict(list)
            for tag, p, g, d in prior_completions(self.prior, trace):
                if tag >= 0:
                    batches[(0, tag)].append(d)
                batches[(1, (p, g))].append(d)
                batches[(2, p)].append(d)
            groups = (self._by_tag, self._by_pool_gpus, self._by_pool)
            for (level, key), durations in batches.items():
                groups[level][key].extend(durations)

    def add(self, trace: Any, jobs: np.ndarray) -> None:
        """Absorb finished jobs (indices into ``trace``; their durations are known)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        if jobs.size == 0:
            return
        by_tag, by_pg, by_pool = self._by_tag, self._by_pool_gpus, self._by_pool
        for d, p, g, tag in zip(trace.duration[jobs].tolist(), trace.pool[jobs].tolist(),
                                trace.num_gpus[jobs].tolist(), trace.tag_code[jobs].tolist(),
                                strict=True):
            d = float(d)
            if tag >= 0:
                by_tag[tag].add(d)
            by_pg[(p, g)].add(d)
            by_pool[p].add(d)

    def median_s(self, view: ForecastView, jobs: np.ndarray) -> np.ndarray:
        """Return the history median (s; NaN when nothing similar finished) per job index."""
        return self.quantile_s(view, jobs, DEFAULT_QUANTILE)

    def quantile_s(self, view: ForecastView, jobs: np.ndarray, q: float) -> np.ndarray:
        """Return the history q-quantile (s; NaN when nothing similar finished) per job index.

        Same fallback chain as the median; ``q`` = 0.5 is :meth:`median_s`.
        """
        trace = view.trace
        jobs = np.asarray(jobs, dtype=np.int64)
        out = np.full(len(jobs), np.nan)
        if jobs.size == 0:
            return out
        by_tag, by_pg, by_pool = self._by_tag, self._by_pool_gpus, self._by_pool
        need = self.min_count
        for i, (tag, p, g) in enumerate(zip(trace.tag_code[jobs].tolist(),
                                            trace.pool[jobs].tolist(),
                                            trace.num_gpus[jobs].tolist(), strict=True)):
            hist = by_tag.get(tag) if tag >= 0 else None
            if hist is None or len(hist) < need:
                hist = by_pg.get((p, g))
                if hist is None or len(hist) < need:
                    hist = by_pool.get(p)
                    if hist is None or not len(hist):
                        continue
            out[i] = hist.median() if q == 0.5 else sorted_quantile(hist.values, q)
        return out


# ----------------------------------------------------------------------------- the estimator

_INDEX: dict[str, int] = {}


def _feature_index() -> dict[str, int]:
    """Return the column index of each JobDuration feature, the time-limit ones included (they
    follow the others; built once: a tick asks it)."""
    if not _INDEX:
        from sia.features.duration_features import feature_names

        _INDEX.update({c: i for i, c in enumerate(feature_names(True))})
    return _INDEX


#: The history rule's levels, in order (SIA 5.4.2: same tag, else same pool and width, else pool).
_RULE_LEVELS: tuple[str, ...] = ("tag", "pool_gpus", "pool")
_RULE_COLUMNS: dict[tuple[bool, bool, bool], tuple[np.ndarray, np.ndarray, np.ndarray]] = {}


def rule_levels(tag: bool = True, user: bool = False, use: bool = False) -> tuple[str, ...]:
    """Return the look-alike levels in order: the same tag (with ``tag``), the user's use of
    their limits applied to this job's limit (with ``use``: ``user_use``), the same user (with
    ``user``), the same pool and GPU count, the same pool. The rule's: ``tag`` alone."""
    return ((("tag",) if tag else ()) + (("user_use",) if use else ())
            + (("user",) if user else ()) + _RULE_LEVELS[1:])


def _rule_columns(tag: bool = True, user: bool = False, use: bool = False
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return the column indices of the levels of :func:`rule_levels` (built once): their counts
    [levels], their recent shares and their shares over all their history [levels, edges]
    (5 / 60 / 720 min). ``user_use`` has one kind of share (``user_use_fit_le*``, over all the
    user's jobs with a limit) and counts ``user_use_count`` (NaN for a job without a limit:
    the level never applies to it)."""
    got = _RULE_COLUMNS.get((tag, user, use))
    if got is None:
        idx = _feature_index()
        levels = rule_levels(tag, user, use)

        def share(lv: str, kind: str, m: int) -> int:
            return idx[f"user_use_fit_le{m}m" if lv == "user_use" else f"{lv}_{kind}le{m}m"]

        shares = [[[share(lv, kind, m) for m in (5, 60, 720)] for lv in levels]
                  for kind in ("recent_", "")]
        got = _RULE_COLUMNS[(tag, user, use)] = (
            np.array([idx[f"{lv}_count"] for lv in levels]), np.array(shares[0]),
            np.array(shares[1]))
    return got


#: ``history_shrink``'s levels, from the most general to the most specific: each level's shares
#: are shrunk toward the estimate of the levels before it.
_SHRINK_LEVELS: tuple[str, ...] = ("pool", "pool_gpus", "user", "tag")
_N_EDGES = N_BINS - 1


def _as_frame(X: Any, columns: list[str], what: str) -> np.ndarray:
    """Return X's ``columns`` as float64 [n, len(columns)]; names what is missing or wrong."""
    import pandas as pd

    if isinstance(X, pl.DataFrame):
        X = X.to_pandas()
    if isinstance(X, pd.DataFrame):
        missing = [c for c in columns if c not in X.columns]
        if missing:
            raise ValueError(f"{what}: X lacks feature column(s) {missing}; build them with "
                             "sia.features.duration_features.submission_features")
        return X[columns].to_numpy(dtype=np.float64)
    arr = np.asarray(X, dtype=np.float64)
    if arr.ndim != 2 or arr.shape[1] != len(columns):
        raise ValueError(f"{what}: X must be a frame with the feature columns or a 2-D array "
                         f"with {len(columns)} columns in DURATION_FEATURES order, not shape "
                         f"{arr.shape}")
    return arr


def _check_bins(y: Any, n: int) -> np.ndarray:
    y = np.asarray(y)
    if y.ndim != 1 or y.size != n:
        raise ValueError(f"JobDuration.fit: y must be 1-D with one bin per row of X ({n}), not "
                         f"shape {y.shape}")
    if y.size and (not np.all(np.isfinite(y.astype(np.float64)))
                   or np.any(y != np.round(y)) or y.min() < 0 or y.max() >= N_BINS):
        raise ValueError(f"JobDuration.fit: y must hold duration bins 0..{N_BINS - 1} "
                         "(sia.data.windows.duration_bin_of of the durations)")
    return y.astype(np.int64)


def _interp(x: np.ndarray, knots: tuple[list[float], list[float]] | None) -> np.ndarray:
    """Return the isotonic map given by its knots at ``x`` (identity when None), clipped to [0, 1]."""
    if knots is None or not knots[0]:
        return np.clip(x, 0.0, 1.0)
    return np.interp(x, knots[0], knots[1])


class JobDuration(ClassifierMixin, BaseEstimator):
    """JobDuration(job) -> bin, with calibrated probabilities (DESIGN.md 5.3); sklearn-compatible.

    ``method="xgboost"`` (the default): an XGBoost classifier over the four
    duration bins on the submission-time features of
    :mod:`sia.features.duration_features`, fit on the first
    ``1 - calibration_fraction`` of the training rows (by time); its
    cumulative probabilities P(duration <= edge) at the three bin edges are
    calibrated by isotonic regression on the last ``calibration_fraction``
    (the training tail), then the booster is refit on all rows with the same
    number of rounds (sklearn's ``CalibratedClassifierCV(ensemble=False)``
    scheme, with a time split instead of folds). The calendar features
    (hour of day, day of week) are left out unless ``calendar``: with a few
    weeks of training they let the trees memorize days (on Philly, fit on
    days 23-40 and scored on days 40-44, both inside the default training
    period: log-loss 1.91 with them, 1.78 without). Jobs of a pool with fewer
    than ``min_pool_history`` finished jobs get the history rule instead.

    ``method="history_cdf"``: the rule's similar jobs (same level as below),
    but their whole point-in-time distribution instead of its median:
    P(duration <= edge) is the share of them that ran at most that long (no
    learning, no fit; it adapts as jobs finish). With SIA's risk-aware
    lending at eps = 0.5 it lends what the median rule lends; a smaller eps
    lends only jobs most of whose look-alikes fit. ``history_recent`` (in
    [0, 1]) is the weight of the shares over the level's last
    ``RECENT_JOBS`` finished jobs (the ``*_recent_le*`` features, which
    follow what the group runs now) against the shares over its whole history.
    ``history_tag`` False skips the tag level (pool and GPU count, then
    pool; with ``history_shrink``, the tag is left out of the pooling): for a
    trace whose tags (job names) say less about a job's duration than its
    pool and width do. ``history_user`` True puts the same user's jobs after
    the tag and before the pool and width (``history_shrink`` always pools
    the user's shares). ``history_use`` True (with ``limits``) puts, after the
    tag, the user's use of their limits applied to this job's limit
    (``user_use_fit_le*``: the share of the user's finished jobs with a limit
    whose use times this limit fits the edge; only for a job with a limit
    and a user with at least ``history_min_count`` such jobs; not pooled by
    ``history_shrink``). :func:`choose_history_levels`
    decides them on the training rows. The started look-alikes of
    ``started_cap`` follow the tag choice; they never use the user (the
    replay's trace view carries no users), so with ``history_user`` the cap
    reads the pool and width.

    ``method="history"``: the paper's rule (SIA 5.4.2), the baseline and the
    fallback: the bin of the median duration of the finished jobs with the
    same tag (at least ``history_min_count``), else the same pool and GPU
    count (at least ``history_min_count``), else the same pool; the
    ``fallback_bin`` when nothing finished. Its probabilities are 0/1.

    ``started_cap``: a serving instruction, not used by ``predict_cdf``:
    the forecaster caps P(duration <= edge) by what it knows *now* of the
    similar jobs' last started ones (:mod:`sia.models.started_history`:
    the shares over finished jobs alone miss the long jobs still running).
    Models registered before it existed load with it off.

    ``limits`` True: X also has the time-limit columns
    (:data:`sia.features.duration_features.LIMIT_COLUMNS`; the learned model
    reads them), and a job whose limit plus Slurm's grace fits an edge gets
    P(duration <= edge) = 1 there, whatever the method (a hard bound).

    ``fit(X, y, time=None)``: X the feature frame, y the true bins
    (:func:`sia.data.windows.duration_bin_of`), ``time`` each row's
    submission time (the tail is the last part of the span; None: row
    order). ``predict_cdf(X)`` returns P(duration <= 5 / 60 / 720 min),
    ``predict_proba`` the four bin probabilities, ``predict`` the likeliest bin.
    """

    def __init__(self, method: str = "xgboost", *, n_estimators: int = 200, max_depth: int = 5,
                 learning_rate: float = 0.1, min_child_weight: float = 1.0,
                 subsample: float = 1.0, colsample_bytree: float = 1.0, reg_lambda: float = 1.0,
                 calibration_fraction: float = 0.25, min_pool_history: int = 20,
                 history_min_count: int = 3, history_quantile: float = DEFAULT_QUANTILE,
                 history_recent: float = 0.0, history_shrink: float = 0.0,
                 history_tag: bool = True, history_user: bool = False,
                 history_use: bool = False, fallback_bin: int = N_BINS - 1,
                 started_cap: bool = False, calendar: bool = False, limits: bool = False,
                 n_jobs: int = 1, seed: int = 0):
        self.method = method
        self.n_estimators = n_estimators
        self.max_depth = max_depth
        self.learning_rate = learning_rate
        self.min_child_weight = min_child_weight
        self.subsample = subsample
        self.colsample_bytree = colsample_bytree
        self.reg_lambda = reg_lambda
        self.calibration_fraction = calibration_fraction
        self.min_pool_history = min_pool_history
        self.history_min_count = history_min_count
        self.history_quantile = history_quantile
        self.history_recent = history_recent
        self.history_shrink = history_shrink
        self.history_tag = history_tag
        self.history_user = history_user
        self.history_use = history_use
        self.fallback_bin = fallback_bin
        self.started_cap = started_cap
        self.calendar = calendar
        self.limits = limits
        self.n_jobs = n_jobs
        self.seed = seed

    @classmethod
    def rule(cls, *, min_count: int = 3, fallback_bin: int = N_BINS - 1,
             quantile: float = DEFAULT_QUANTILE) -> JobDuration:
        """Return the paper's history rule as a fitted JobDuration (it learns nothing).

        ``quantile`` is the history statistic the scheduler's online rule bins
        (:class:`OnlineDurationHistory`); the estimator's own
        ``predict`` uses the median feature.
        """
        from sia.features.duration_features import DURATION_FEATURES

        est = cls("history", history_min_count=min_count, fallback_bin=fallback_bin,
                  history_quantile=quantile)
        est._check_params()
        est.feature_names_in_ = np.asarray(DURATION_FEATURES, dtype=object)
        est.n_features_in_ = len(DURATION_FEATURES)
        est.limit_fits_ = None
        est.classes_ = np.arange(N_BINS)
        est.calibrators_ = [None] * _N_EDGES
        est.booster_ = None
        est.lend_risk_ = None
        return est

    # ------------------------------------------------------------------ checks
    def _check_params(self) -> None:
        if self.method not in METHODS:
            raise ValueError(f"JobDuration: method must be one of {METHODS}, not "
                             f"{self.method!r}")
        if not 0.0 < float(self.calibration_fraction) < 1.0:
            raise ValueError("JobDuration: calibration_fraction must be in (0, 1), not "
                             f"{self.calibration_fraction}")
        if not 0 <= int(self.fallback_bin) < N_BINS:
            raise ValueError(f"JobDuration: fallback_bin must be in 0..{N_BINS - 1}, not "
                             f"{self.fallback_bin}")
        check_quantile(self.history_quantile, "JobDuration: history_quantile")
        if not 0.0 <= float(self.history_recent) <= 1.0:
            raise ValueError("JobDuration: history_recent must be in [0, 1], not "
                             f"{self.history_recent}")
        if not 0.0 <= float(self.history_shrink) < np.inf:
            raise ValueError("JobDuration: history_shrink must be a finite number >= 0, not "
                             f"{self.history_shrink}")
        for name in ("history_tag", "history_user", "history_use", "limits"):
            if not isinstance(getattr(self, name), bool | np.bool_):
                raise ValueError(f"JobDuration: {name} must be True or False, not "
                                 f"{getattr(self, name)!r}")
        if self.history_use and not self.limits:
            raise ValueError("JobDuration: history_use reads the time-limit features: it needs "
                             "limits=True")
        if int(self.history_min_count) < 1 or int(self.min_pool_history) < 0:
            raise ValueError("JobDuration: history_min_count must be >= 1 and min_pool_history "
                             ">= 0")

    def _check_fitted(self) -> None:
        if getattr(self, "feature_names_in_", None) is not None:
            return  # fitted (the scheduler asks at nearly every decision: skip sklearn's check)
        from sklearn.utils.validation import check_is_fitted

        check_is_fitted(self, "feature_names_in_")

    # ------------------------------------------------------------------ fit
    def fit(self, X: Any, y: Any, *, time: Any = None) -> JobDuration:
        """Fit on feature rows X and true bins y (see the class doc); return self."""
        from sia.features.duration_features import feature_names

        self._check_params()
        cols = feature_names(bool(self.limits))
        x = _as_frame(X, cols, "JobDuration.fit")
        y = _check_bins(y, x.shape[0])
        if x.shape[0] == 0:
            raise ValueError("JobDuration.fit: no training rows; check the split against the "
                             "trace's span")
        self.feature_names_in_ = np.asarray(cols, dtype=object)
        self.n_features_in_ = len(cols)
        self.limit_fits_ = _limit_fits_index(cols)
        self.classes_ = np.arange(N_BINS)
        self.calibrators_: list[tuple[list[float], list[float]] | None] = [None] * _N_EDGES
        self.booster_ = None
        self.lend_risk_: float | None = None
        if self.method in ("history", "history_cdf"):
            return self
        order = np.arange(y.size)
        if time is not None:
            t = np.asarray(time, dtype=np.float64)
            if t.shape != y.shape or not np.all(np.isfinite(t)):
                raise ValueError("JobDuration.fit: time must hold one finite time per row of X")
            order = np.argsort(t, kind="stable")
            cut_t = t.min() + (1.0 - float(self.calibration_fraction)) * (t.max() - t.min())
            n_head = int(np.searchsorted(t[order], cut_t, side="right"))
        else:
            n_head = int(round((1.0 - float(self.calibration_fraction)) * y.size))
        head, tail = order[:n_head], order[n_head:]
        if head.size and tail.size >= 50:
            cdf = _cumulative(self._train(x[head], y[head]).inplace_predict(
                self._model_input(x[tail])))
            self.calibrators_ = [_isotonic(cdf[:, b], y[tail] <= b) for b in range(_N_EDGES)]
        self.booster_ = self._train(x, y)
        return self

    def _model_input(self, x: np.ndarray) -> np.ndarray:
        """Return the columns the booster sees (all features; the calendar only with ``calendar``)."""
        if self.calendar:
            return x
        from sia.features.duration_features import CALENDAR_COLUMNS

        keep = [i for i, c in enumerate(self.feature_names_in_) if c not in CALENDAR_COLUMNS]
        return x[:, keep]

    def _train(self, x: np.ndarray, y: np.ndarray):
        import xgboost as xgb

        x = self._model_input(x)
        params = {"objective": "multi:softprob", "num_class": N_BINS, "tree_method": "hist",
                  "max_depth": int(self.max_depth), "eta": float(self.learning_rate),
                  "min_child_weight": float(self.min_child_weight),
                  "subsample": float(self.subsample),
                  "colsample_bytree": float(self.colsample_bytree),
                  "lambda": float(self.reg_lambda), "nthread": int(self.n_jobs),
                  "seed": int(self.seed), "eval_metric": "mlogloss"}
        dm = xgb.DMatrix(x, label=y, missing=np.nan)
        return xgb.train(params, dm, num_boost_round=int(self.n_estimators))

    # ------------------------------------------------------------------ predict
    def history_bins(self, X: Any) -> np.ndarray:
        """Return the history rule's bin per row (the paper's rule; see the class doc)."""
        from sia.features.duration_features import feature_names

        cols = getattr(self, "feature_names_in_", None)
        cols = feature_names(bool(self.limits)) if cols is None else list(cols)
        x = _as_frame(X, cols, "JobDuration.history_bins")
        return self._bound_bins(x, self._rule(x), _limit_fits_index(cols))

    def _rule(self, x: np.ndarray) -> np.ndarray:
        from sia.features.duration_features import DURATION_FEATURES

        idx = {c: i for i, c in enumerate(DURATION_FEATURES)}
        stat = np.full(x.shape[0], np.nan)
        need = float(self.history_min_count)
        for level in _RULE_LEVELS:
            count = x[:, idx[f"{level}_count"]]
            ok = np.isnan(stat) & (count >= (need if level != "pool" else 1.0))
            stat[ok] = x[ok, idx[f"{level}_median_s"]]
        return predict_bins(stat, int(self.fallback_bin))

    def predict_cdf(self, X: Any) -> np.ndarray:
        """Return float [n, 3]: calibrated P(duration <= 5 min / 60 min / 720 min) per row.

        With the time-limit features (``limits``), a job whose limit plus Slurm's grace fits an
        edge gets P = 1 there, whatever the method says (:func:`limit_bound`).
        """
        self._check_fitted()
        x = _as_frame(X, list(self.feature_names_in_), "JobDuration.predict")
        return self._bound(x, self._cdf(x))

    def _bound(self, x: np.ndarray, cdf: np.ndarray) -> np.ndarray:
        """Return ``cdf`` with P = 1 at the edges the rows' limits guarantee (``limits`` only)."""
        fits = getattr(self, "limit_fits_", None)
        if fits is None or x.shape[0] == 0:
            return cdf
        return limit_bound(cdf, x[:, fits] == 1.0)

    @staticmethod
    def _bound_bins(x: np.ndarray, bins: np.ndarray, fits: np.ndarray | None) -> np.ndarray:
        """Return ``bins`` capped by the bin the rows' limits guarantee (``fits``: the indices
        of the limit-fits columns, None without them)."""
        if fits is None or x.shape[0] == 0:
            return bins
        certain = x[:, fits] == 1.0
        # the first edge the limit guarantees: no bin beyond it (N_BINS - 1 where none)
        cap = np.where(certain.any(axis=1), certain.argmax(axis=1), N_BINS - 1)
        return np.minimum(bins, cap)

    def _history_cdf(self, x: np.ndarray) -> np.ndarray:
        """Return the empirical P(duration <= edge) of the rule's similar jobs (its level's shares).

        The level is the rule's (same tag with enough history, else same pool
        and GPU count, else same pool); rows with no history get the
        fallback bin's 0/1 step. Every row's level is found at once (the
        first level whose count reaches its minimum): the scheduler asks
        this for one or two jobs at a time, so a few whole-array steps beat
        a pass per level.
        """
        if float(self.history_shrink) > 0.0:
            return self._shrunk_cdf(x)
        counts, recent, whole = _rule_columns(bool(self.history_tag), bool(self.history_user),
                                              bool(self.history_use))
        need = np.full(counts.size, float(self.history_min_count))
        need[-1] = 1.0  # the pool level: any finished job
        ok = x[:, counts] >= need[None, :]  # NaN counts never qualify
        level = ok.argmax(axis=1)
        rows = np.arange(x.shape[0])[:, None]
        w = float(self.history_recent)
        shares = x[rows, recent[level]] if w != 0.0 else x[rows, whole[level]]
        if 0.0 < w < 1.0:
            shares = w * shares + (1.0 - w) * x[rows, whole[level]]
        step = (int(self.fallback_bin) <= np.arange(_N_EDGES)).astype(np.float64)
        out = np.where(ok.any(axis=1)[:, None], shares, step[None, :])
        return np.maximum.accumulate(np.where(np.isnan(out), 0.0, out), axis=1)

    def _level_shares(self, x: np.ndarray, level: str, rows: np.ndarray) -> np.ndarray:
        """Return the shares [r, 3] of one history level for the ``rows`` (bool mask) of ``x``,
        the recent and all-history shares blended by history_recent."""
        idx = _feature_index()
        w = float(self.history_recent)
        recent = x[np.ix_(rows, [idx[f"{level}_recent_le{m}m"] for m in (5, 60, 720)])]
        if w == 1.0:
            return recent
        whole = x[np.ix_(rows, [idx[f"{level}_le{m}m"] for m in (5, 60, 720)])]
        return whole if w == 0.0 else w * recent + (1.0 - w) * whole

    def _level_count(self, x: np.ndarray, level: str) -> np.ndarray:
        """Return the jobs behind one level's blended shares per row of ``x``: the recent shares
        cover the group's last ``RECENT_JOBS`` finished jobs, so they stand for at most that many."""
        from sia.features.duration_features import RECENT_JOBS

        w = float(self.history_recent)
        count = np.nan_to_num(x[:, _feature_index()[f"{level}_count"]], nan=0.0)
        return w * np.minimum(count, float(RECENT_JOBS)) + (1.0 - w) * count

    def _shrunk_cdf(self, x: np.ndarray) -> np.ndarray:
        """Return P(duration <= edge) shrunk level by level (``history_shrink`` = a > 0).

        From the pool to the tag (:data:`_SHRINK_LEVELS`), each level's shares
        p over its n jobs are pooled with the estimate P of the levels before
        it as (n p + a P) / (n + a): a group of few jobs moves the estimate
        little, a group of many decides it. The first level with history
        starts the estimate; rows with none get the fallback bin's 0/1 step.
        """
        a = float(self.history_shrink)
        est = np.full((x.shape[0], _N_EDGES), np.nan)
        every = np.ones(x.shape[0], dtype=bool)
        for level in _SHRINK_LEVELS:
            if level == "tag" and not self.history_tag:
                continue
            p, n = self._level_shares(x, level, every), self._level_count(x, level)
            has = (n > 0) & ~np.isnan(p).any(axis=1)
            prior = ~np.isnan(est[:, 0])
            first = has & ~prior
            est[first] = p[first]
            both = has & prior
            nb = n[both, None]
            est[both] = (nb * p[both] + a * est[both]) / (nb + a)
        none = np.isnan(est[:, 0])
        est[none] = (int(self.fallback_bin) <= np.arange(_N_EDGES)).astype(np.float64)
        return np.maximum.accumulate(est, axis=1)

    def _cdf(self, x: np.ndarray) -> np.ndarray:
        if self.method == "history_cdf":
            return self._history_cdf(x)
        step = (self._rule(x)[:, None] <= np.arange(_N_EDGES)[None, :]).astype(np.float64)
        if self.booster_ is None or x.shape[0] == 0:
            return step
        raw = _cumulative(self.booster_.inplace_predict(self._model_input(x)))
        cdf = np.column_stack([_interp(raw[:, b], self.calibrators_[b]) for b in range(_N_EDGES)])
        cdf = np.maximum.accumulate(cdf, axis=1)
        pool_count = x[:, _feature_index()["pool_count"]]
        few = ~(pool_count >= float(self.min_pool_history))
        cdf[few] = step[few]
        return cdf

    def predict_proba(self, X: Any) -> np.ndarray:
        """Return float [n, 4]: the probability of each duration bin per row."""
        cdf = self.predict_cdf(X)
        full = np.column_stack([np.zeros(cdf.shape[0]), cdf, np.ones(cdf.shape[0])])
        return np.diff(full, axis=1)

    def predict(self, X: Any) -> np.ndarray:
        """Return the likeliest duration bin per row."""
        return np.argmax(self.predict_proba(X), axis=1)

    def serve(self, frame: Any) -> np.ndarray:
        """Return what the scheduler uses: P(duration <= 5 / 60 / 720 min) per row."""
        return self.predict_cdf(frame)

    # ------------------------------------------------------------------ artifacts
    def to_artifacts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return (JSON params, boosters) for :mod:`sia.models.serving`."""
        self._check_fitted()
        params = {"kind": "job_duration", "estimator": self.get_params(),
                  "calibrators": self.calibrators_,
                  "lend_risk": getattr(self, "lend_risk_", None),
                  "feature_names": [str(c) for c in self.feature_names_in_]}
        return params, ({"main": self.booster_} if self.booster_ is not None else {})

    @classmethod
    def from_artifacts(cls, params: dict[str, Any], boosters: dict[str, Any]) -> JobDuration:
        """Return the fitted JobDuration stored by :meth:`to_artifacts`."""
        from sia.features.duration_features import feature_names

        names = list(params["feature_names"])
        est = cls(**params["estimator"])  # registered before ``limits`` existed: without them
        if names != feature_names(bool(est.limits)):
            raise ValueError("registered JobDuration was trained on other features "
                             f"({len(names)} columns); retrain it with `sia train`")
        est.feature_names_in_ = np.asarray(names, dtype=object)
        est.n_features_in_ = len(names)
        est.limit_fits_ = _limit_fits_index(names)
        est.classes_ = np.arange(N_BINS)
        est.calibrators_ = [None if c is None else (list(c[0]), list(c[1]))
                            for c in params["calibrators"]]
        est.booster_ = boosters.get("main")
        est.lend_risk_ = params.get("lend_risk")
        return est


def _cumulative(proba: np.ndarray) -> np.ndarray:
    """Return P(bin <= b) for b = 0..2 from [n, 4] bin probabilities."""
    p = np.asarray(proba, dtype=np.float64).reshape(-1, N_BINS)
    return np.cumsum(p, axis=1)[:, :_N_EDGES]


def _isotonic(score: np.ndarray, outcome: np.ndarray) -> tuple[list[float], list[float]] | None:
    """Return the knots of an isotonic map score -> P(outcome), or None when it cannot be fit."""
    from sklearn.isotonic import IsotonicRegression

    outcome = np.asarray(outcome, dtype=np.float64)
    if outcome.size < 50 or outcome.min() == outcome.max():
        return None
    iso = IsotonicRegression(y_min=0.0, y_max=1.0, out_of_bounds="clip", increasing=True)
    iso.fit(score, outcome)
    return [float(v) for v in iso.X_thresholds_], [float(v) for v in iso.y_thresholds_]


class OnlineSubmissionFeatures:
    """The JobDuration features of every arrived job, kept up to date from a simulator view.

    ``update(view)`` replays the completions and arrivals since the last
    call in time order (completions first at equal times, as
    :func:`sia.features.duration_features.submission_features` does offline)
    through one :class:`~sia.features.duration_features.SubmissionFeatures`,
    so a job's row is its features at its submission: the same numbers as
    offline for the same schedule. ``rows(jobs)`` returns them.
    """

    def __init__(self, prior: Any = None, *, limits: bool = False) -> None:
        #: jobs finished before the replay (:func:`prior_completions`): the history it starts with
        self.prior = prior
        #: with the time-limit columns, from the trace's ``time_limit`` (NaN when it has none)
        self.limits = bool(limits)
        self._trace_id: int | None = None

    def _start(self, trace: TraceView) -> None:
        from sia.features.duration_features import SubmissionFeatures, feature_names

        self._trace_id = id(trace)
        speedup = float(getattr(trace, "speedup", 1.0))
        self._builder = SubmissionFeatures(self.limits, TIME_LIMIT_GRACE_S / speedup)
        self._builder.complete_many([(tag if tag >= 0 else None, *rest)
                                     for tag, *rest in prior_completions(
                                         self.prior, trace, with_user=True,
                                         with_limit=self.limits)])
        self._rows = np.full((trace.n_jobs, len(feature_names(self.limits))), np.nan)
        limits = getattr(trace, "time_limit", None) if self.limits else None
        self._limit = (limits.tolist() if limits is not None
                       else [float("nan")] * trace.n_jobs)
        self._seen = [0] * trace.n_pools
        self._arrived = 0
        tags = trace.tag_code.tolist()
        self._tag = [t if t >= 0 else None for t in tags]
        users = getattr(trace, "user_code", None)
        self._user = ([u if u >= 0 else None for u in users.tolist()] if users is not None
                      else [None] * trace.n_jobs)
        self._pool = trace.pool.tolist()
        self._gpus = trace.num_gpus.tolist()

    def grow(self, trace: TraceView, n_old: int) -> None:
        """Take the jobs the live service appended to ``trace`` after index ``n_old`` (not yet
        arrived): their tags, users, pools, widths and limits, and room for their rows."""
        if self._trace_id != id(trace):
            return  # not started on this trace: its start reads the trace as it is then
        from sia.data.growth import reserve

        n = trace.n_jobs
        self._rows = reserve(self._rows, n, np.nan)
        limits = getattr(trace, "time_limit", None) if self.limits else None
        self._limit.extend(limits[n_old:].tolist() if limits is not None
                           else [float("nan")] * (n - n_old))
        self._tag.extend(t if t >= 0 else None for t in trace.tag_code[n_old:].tolist())
        users = getattr(trace, "user_code", None)
        self._user.extend([u if u >= 0 else None for u in users[n_old:].tolist()]
                          if users is not None else [None] * (n - n_old))
        self._pool.extend(trace.pool[n_old:].tolist())
        self._gpus.extend(trace.num_gpus[n_old:].tolist())

    def rows_now(self, jobs: np.ndarray) -> np.ndarray:
        """Return the rows of arrived ``jobs`` (after :meth:`update`) with their look-alike
        history as of now (:meth:`SubmissionFeatures.refresh`): for a pending job predicted
        again once jobs like it have ended."""
        b, tag, user, pool, gpus, limit = (self._builder, self._tag, self._user, self._pool,
                                           self._gpus, self._limit)
        return np.array([b.refresh(self._rows[j], tag[j], user[j], pool[j], gpus[j], limit[j])
                         for j in np.asarray(jobs, dtype=np.int64).tolist()],
                        dtype=np.float64).reshape(-1, self._rows.shape[1])

    def update(self, view: ForecastView) -> None:
        """Absorb the completions and arrivals since the last call."""
        trace = view.trace
        if self._trace_id != id(trace):
            self._start(trace)
        times, kinds, jobs = [], [], []
        for p in range(trace.n_pools):
            n = view.n_completed(p)
            if n > self._seen[p]:
                times.append(view.completions(p)[self._seen[p]:n])
                jobs.append(view.completed_jobs(p)[self._seen[p]:n])
                kinds.append(np.zeros(n - self._seen[p], dtype=np.int8))
                self._seen[p] = n
        hi = int(view.n_arrived)
        if hi > self._arrived:
            times.append(trace.submit[self._arrived:hi])
            jobs.append(np.arange(self._arrived, hi))
            kinds.append(np.ones(hi - self._arrived, dtype=np.int8))
            self._arrived = hi
        if not times:
            return
        t, k, j = np.concatenate(times), np.concatenate(kinds), np.concatenate(jobs)
        order = np.lexsort((j, k, t))
        b, tag, user, pool, gpus, dur, limit = (self._builder, self._tag, self._user, self._pool,
                                                self._gpus, trace.duration, self._limit)
        for ti, ki, ji in zip(t[order].tolist(), k[order].tolist(), j[order].tolist(),
                              strict=True):
            if ki == 0:
                b.complete(tag[ji], user[ji], pool[ji], gpus[ji], float(dur[ji]), limit[ji])
            else:
                self._rows[ji] = b.submit(ti, tag[ji], user[ji], pool[ji], gpus[ji], limit[ji])

    def rows(self, jobs: np.ndarray) -> np.ndarray:
        """Return the feature rows (float64 [len(jobs), n_features]) of arrived jobs."""
        return self._rows[np.asarray(jobs, dtype=np.int64)]


def _limit_fits_index(columns: list[str]) -> np.ndarray | None:
    """Return the column indices of ``limit_fits_5m / 60m / 720m`` in ``columns`` (None when
    the feature row has no time-limit columns)."""
    from sia.features.duration_features import LIMIT_FITS_COLUMNS

    if not all(c in columns for c in LIMIT_FITS_COLUMNS):
        return None
    return np.array([list(columns).index(c) for c in LIMIT_FITS_COLUMNS], dtype=np.int64)


def limit_bound(cdf: np.ndarray, certain: np.ndarray) -> np.ndarray:
    """Return a copy of ``cdf`` (P(duration <= w) per row and window) with 1 where ``certain``
    (same shape, e.g. :func:`sia.data.windows.limit_certain`): a limit that fits a window is a hard upper bound."""
    out = np.array(cdf, dtype=np.float64, copy=True)
    out[np.asarray(certain, dtype=bool)] = 1.0
    return out


def cdf_at_windows(cdf_at_edges: np.ndarray, windows_s: Any) -> np.ndarray:
    """Return P(duration <= w) per row and window from P(duration <= edge) at the bin edges.

    For a window w the probability at the largest edge <= w (a lower bound
    of P(duration <= w)); 0 for a window shorter than the first edge.
    """
    cdf = np.asarray(cdf_at_edges, dtype=np.float64).reshape(-1, _N_EDGES)
    w = np.asarray(windows_s, dtype=np.float64)
    k = np.searchsorted(np.asarray(DURATION_BIN_EDGES_S), w, side="right") - 1
    padded = np.column_stack([np.zeros(cdf.shape[0]), cdf])
    return padded[:, k + 1]


# ----------------------------------------------------------------------------- selection and report

#: eps values tried for risk-aware lending (the same eps for every window).
LEND_RISK_GRID: tuple[float, ...] = (0.02, 0.05, 0.1, 0.2, 0.3, 0.5)
#: The share of the training period (its end) held out to choose between the rule and the model.
SELECTION_FRACTION = 0.2


def lend_risk_at_edges(eps: Any) -> np.ndarray:
    """Return eps per duration-bin edge (5 / 60 / 720 min) from one value or one per edge."""
    arr = np.asarray(eps, dtype=np.float64).reshape(-1)
    if arr.size == 1:
        arr = np.repeat(arr, _N_EDGES)
    if arr.size != _N_EDGES or not np.all((arr >= 0.0) & (arr < 1.0)):
        raise ValueError(f"lend risk must be one value in [0, 1) or one per duration-bin edge "
                         f"({_N_EDGES}: 5, 60, 720 min), not {eps!r}")
    return arr


def lend_risk_for_windows(eps: Any, windows_s: Any) -> np.ndarray:
    """Return eps per scheduling window from eps per bin edge (:func:`lend_risk_at_edges`).

    A window uses the eps of the largest edge <= it, as :func:`cdf_at_windows`
    uses that edge's probability; a window shorter than the first edge (where
    nothing is lendable) gets the first edge's.
    """
    at_edges = lend_risk_at_edges(eps)
    w = np.asarray(windows_s, dtype=np.float64)
    k = np.searchsorted(np.asarray(DURATION_BIN_EDGES_S), w, side="right") - 1
    return at_edges[np.maximum(k, 0)]


def lending_table(cdf: np.ndarray, true_bins: np.ndarray, eps: Any) -> list[dict[str, float]]:
    """Return per window (5 / 60 / 720 min): the share of jobs lendable at ``eps``, their overrun
    rate, and the ROC AUC of P(duration <= w) for "fits w" (scikit-learn).

    A job is lendable in window w when P(duration <= w) >= 1 - eps (``eps``
    one value, or one per window); it overruns when its true bin is beyond w.
    ``overrun`` is NaN when nothing is lendable, ``auc`` when every job fits w
    or none does. The same scores of a replay, as SIA used the predictions,
    are in its ``served`` report (:mod:`sia.scheduler.core.served`).
    """
    from sklearn.metrics import roc_auc_score

    eps = lend_risk_at_edges(eps)
    out = []
    for b in range(_N_EDGES):
        lend = cdf[:, b] >= 1.0 - eps[b]
        over = float(np.mean(true_bins[lend] > b)) if lend.any() else float("nan")
        fits = true_bins <= b
        auc = (float(roc_auc_score(fits, cdf[:, b])) if 0 < int(fits.sum()) < fits.size
               else float("nan"))
        out.append({"window_min": int(DURATION_BIN_EDGES_S[b] // 60), "eps": float(eps[b]),
                    "lendable": float(lend.mean())
                    if lend.size else float("nan"), "overrun": over, "auc": auc})
    return out


def reliability_table(cdf: np.ndarray, true_bins: np.ndarray, n_bins: int = 10
                      ) -> list[dict[str, float]]:
    """Return the reliability (calibration) curve of P(duration <= w) per window (5 / 60 / 720 min).

    For each window, sklearn's ``calibration_curve`` over ``n_bins`` equal
    probability bins: the mean predicted P(duration <= w) of a bin's jobs
    (``predicted``) against the share of them that did fit w (``observed``);
    a window whose jobs all fit (or none does) has no curve.
    """
    from sklearn.calibration import calibration_curve

    cdf = np.asarray(cdf, dtype=np.float64).reshape(-1, _N_EDGES)
    true_bins = np.asarray(true_bins)
    rows: list[dict[str, float]] = []
    for b in range(_N_EDGES):
        fits = true_bins <= b
        if fits.all() or not fits.any():
            continue
        observed, predicted = calibration_curve(fits, cdf[:, b], n_bins=n_bins)
        rows += [{"window_min": int(DURATION_BIN_EDGES_S[b] // 60), "predicted": float(p),
                  "observed": float(o)} for p, o in zip(predicted, observed, strict=True)]
    return rows


def select_job_duration(X: Any, y: np.ndarray, time: np.ndarray, *,
                        grid: tuple[float, ...] = LEND_RISK_GRID,
                        selection_fraction: float = SELECTION_FRACTION,
                        baseline: JobDuration | None = None,
                        **params: Any) -> tuple[JobDuration, list[dict[str, Any]]]:
    """Return (the JobDuration to register, the selection table), chosen on training rows only.

    The last ``selection_fraction`` of the training span is held out: the
    learned model is fit on the rest and scored per window on the held-out
    jobs (share lendable, overrun rate, AUC, Brier score of P(duration <=
    w)) beside the rule.

    Without ``baseline`` the rule is the paper's history rule (lending at eps
    0.5) and the learned model is tried at each eps of ``grid``: it is chosen,
    with the eps that lends the most jobs over the three windows, only if at
    that eps it overruns no more often than the rule in *every* window
    (lending must not get riskier); it is then refit on all training rows
    with ``lend_risk_`` = that eps. Otherwise the rule is registered
    (``lend_risk_`` None: SIA lends by its bins, the paper's way).

    With ``baseline`` (a fitted JobDuration whose ``lend_risk_`` is the eps it
    lends at per window, e.g. the product's ``history_cdf``; it learns
    nothing, so it is scored as it is), the learned model is scored at the
    baseline's own eps (the same promised risk) and chosen only if it
    dominates it on the held-out jobs: it lends more in total, overruns no
    more often in any window (where the baseline lends nothing: no more often
    than its eps there), and its probabilities score no worse (Brier) in any
    window. Otherwise the baseline is returned as given.

    ``params`` go to the learned model (and the paper's rule);
    ``limits=True`` reads the time-limit columns
    (:data:`sia.features.duration_features.LIMIT_COLUMNS`) and bounds the
    probabilities by them.
    """
    from sia.features.duration_features import feature_names

    x = _as_frame(X, feature_names(bool(params.get("limits", False))), "select_job_duration")
    y = _check_bins(y, x.shape[0])
    t = np.asarray(time, dtype=np.float64)
    cut = t.min() + (1.0 - selection_fraction) * (t.max() - t.min()) if t.size else 0.0
    fit, hold = t < cut, t >= cut
    fits = (y[hold][:, None] <= np.arange(_N_EDGES)[None, :]).astype(np.float64)

    if baseline is None:
        rule = JobDuration(method="history", **params).fit(x, y)
        rule_name, rule_eps = "history rule", 0.5
    else:
        rule, rule_name = baseline, f"{baseline.method} (baseline)"
        rule_eps = 0.5 if getattr(baseline, "lend_risk_", None) is None else baseline.lend_risk_
        grid = (rule_eps,)
    table: list[dict[str, Any]] = []
    rule_x = x if rule.n_features_in_ == x.shape[1] else x[:, :rule.n_features_in_]
    rule_cdf = rule.predict_cdf(rule_x[hold])
    rule_rows = lending_table(rule_cdf, y[hold], rule_eps)
    rule_brier = _brier(rule_cdf, fits)
    table += [{"candidate": rule_name, **r, "brier": float(b)}
              for r, b in zip(rule_rows, rule_brier, strict=True)]
    best = None
    if fit.sum() >= 200 and hold.sum() >= 50 and np.unique(y[fit]).size > 1:
        learned = JobDuration(method="xgboost", **params).fit(x[fit], y[fit], time=t[fit])
        best = _best_learned_eps(learned.predict_cdf(x[hold]), y[hold], fits, grid,
                                 (rule_rows, rule_brier), baseline is not None, table)
    if best is None:
        if baseline is not None:
            return baseline, table
        rule.lend_risk_ = None
        return rule, table
    model = JobDuration(method="xgboost", **params).fit(x, y, time=t)
    model.lend_risk_ = (float(best) if np.ndim(best) == 0
                        else lend_risk_at_edges(best).tolist())
    return model, table


def _brier(cdf: np.ndarray, fits: np.ndarray) -> np.ndarray:
    """Per window, the Brier score of P(duration <= w) against whether the job fit it (NaN
    when there are no jobs)."""
    return np.mean((cdf - fits) ** 2, axis=0) if fits.size else np.full(_N_EDGES, np.nan)


def _best_learned_eps(cdf: np.ndarray, y_hold: np.ndarray, fits: np.ndarray,
                      grid: tuple[Any, ...], rule: tuple[list[dict[str, Any]], np.ndarray],
                      against_baseline: bool, table: list[dict[str, Any]]) -> Any:
    """Return the eps of ``grid`` at which the learned model (held-out ``cdf``) lends the most
    while staying as safe as the rule (its lending rows and Brier scores), or None; append the
    learned model's rows at each eps to ``table``.

    Safe: in every window it lends nothing or overruns no more often than the rule (where a
    baseline lends nothing, than the baseline's eps); against a baseline it must also lend
    more than it in total and score no worse (Brier) in any window."""
    rule_rows, rule_brier = rule
    learned_brier = _brier(cdf, fits)
    best, best_lend = None, (sum(r["lendable"] for r in rule_rows) if against_baseline
                             else -1.0)
    for eps in grid:
        rows = lending_table(cdf, y_hold, eps)
        table += [{"candidate": "learned", **r, "brier": float(b)}
                  for r, b in zip(rows, learned_brier, strict=True)]
        # where a baseline lends nothing, its promise (its eps) is the bar
        safe = all(r["lendable"] == 0.0 or not (r["overrun"] > (
            rr["eps"] if against_baseline and rr["lendable"] == 0.0 else rr["overrun"]))
            for r, rr in zip(rows, rule_rows, strict=True))
        if against_baseline:
            safe = safe and not np.any(learned_brier > rule_brier)
        lend = sum(r["lendable"] for r in rows)
        if safe and lend > best_lend:
            best, best_lend = eps, lend
    return best


#: The look-alike chains :func:`choose_history_levels` compares, (history_tag, history_user), the
#: paper's first: ties go to the earlier one.
HISTORY_CHAINS: tuple[tuple[bool, bool], ...] = ((True, False), (False, False), (False, True),
                                                 (True, True))


def choose_history_levels(X: Any, y: Any, **params: Any
                          ) -> tuple[dict[str, bool], list[dict[str, Any]]]:
    """Return (the ``history_tag`` / ``history_user`` (and, with ``limits``, ``history_use``)
    that ``history_cdf`` should use, the comparison rows), chosen on training rows only.

    X: the training jobs' submission features, y: their true bins; ``params``:
    the other ``history_cdf`` parameters. Nothing is fit, so every row
    scores. Each chain of :data:`HISTORY_CHAINS` gives each row a CDF; a chain
    is scored by the Brier score of P(duration <= edge), averaged over the
    three edges, on the rows where the chains' CDFs do not all agree (a job
    with no tag or user, or too little of their history, reads the same
    everywhere). The lowest score wins; ties, and a trace where nothing
    differs, keep the paper's rule (the tag, no user). So tags that name what
    a job runs stay first, tags that say less than the pool and width are
    dropped, and a user's jobs are read first only where they say more. With
    ``limits=True`` every chain is also tried with the user's use of their
    limits after the tag (``history_use``), after the chains without it.
    """
    from sia.features.duration_features import feature_names

    limits = bool(params.get("limits", False))
    x = _as_frame(X, feature_names(limits), "choose_history_levels")
    y = _check_bins(y, x.shape[0])
    fits = (y[:, None] <= np.arange(_N_EDGES)[None, :]).astype(np.float64)
    params = {k: v for k, v in params.items()
              if k not in ("method", "history_tag", "history_user", "history_use")}
    # with limits, each chain also with the user's use of their limits after the tag
    chains = [(tag, user, False) for tag, user in HISTORY_CHAINS]
    if limits:
        chains += [(tag, user, True) for tag, user in HISTORY_CHAINS]
    cdfs = [JobDuration("history_cdf", history_tag=tag, history_user=user, history_use=use,
                        **params).fit(x, y).predict_cdf(x) for tag, user, use in chains]
    differ = np.zeros(x.shape[0], dtype=bool)
    for cdf in cdfs[1:]:
        differ |= np.any(cdf != cdfs[0], axis=1)
    rows: list[dict[str, Any]] = []
    for (tag, user, use), cdf in zip(chains, cdfs, strict=True):
        brier = (float(np.mean((cdf[differ] - fits[differ]) ** 2)) if differ.any()
                 else float("nan"))
        rows.append({"levels": ", ".join(rule_levels(tag, user, use)),
                     "rows_compared": int(differ.sum()), "rows": int(x.shape[0]),
                     "brier": brier})
    best = 0
    for i, row in enumerate(rows):
        if row["brier"] < rows[best]["brier"]:  # NaN never wins: the paper's rule stays
            best = i
    for i, row in enumerate(rows):
        row["chosen"] = i == best
    tag, user, use = chains[best]
    return ({"history_tag": tag, "history_user": user, **({"history_use": use} if limits else {})},
            rows)
