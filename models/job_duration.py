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
from sia.data.windows import DURATION_BIN_EDGES_S, duration_bin_of
from sklearn.metrics import accuracy_score, confusion_matrix

N_BINS = len(DURATION_BIN_EDGES_S) + 1
BIN_NAMES = ("(0,5]m", "(5,60]m", "(60,720]m", "(720,inf)m")
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
        for src, n in joined["hist_source"].fill_null("none").value_counts().iter_rows():
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

    def __init__(self, min_count: int = 3):
        self.min_count = min_count
        self._seen: list[int] = []
        self._by_tag: dict[int, SortedHistory] = defaultdict(SortedHistory)
        self._by_pool_gpus: dict[tuple[int, int], SortedHistory] = defaultdict(SortedHistory)
        self._by_pool: dict[int, SortedHistory] = defaultdict(SortedHistory)
        self._trace_id = None

    def update(self, view: Any) -> None:
        """Absorb the jobs completed since the last call."""
        trace = view.trace
        self.start(trace)
        for p in range(trace.n_pools):
            done = view.completed_jobs(p)
            self.add(trace, done[self._seen[p]:])
            self._seen[p] = len(done)

    def start(self, trace: Any) -> None:
        """Forget everything when ``trace`` is a new replay's trace."""
        if self._trace_id != id(trace):
            self.__init__(self.min_count)
            self._trace_id = id(trace)
            self._seen = [0] * trace.n_pools

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

    def median_s(self, view: Any, jobs: np.ndarray) -> np.ndarray:
        """Return the history median (s; NaN when nothing similar finished) per job index."""
        return self.quantile_s(view, jobs, DEFAULT_QUANTILE)

    def quantile_s(self, view: Any, jobs: np.ndarray, q: float) -> np.ndarray:
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
