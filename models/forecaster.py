"""LearnedForecaster: the registered predictors behind the scheduler's forecasting protocol.

Implements :class:`sia.scheduler.forecast.Forecaster` (structurally) with the
models of the MLflow registry (loaded by name and alias, see
:mod:`sia.models.registry`). Every call is batched over all pools:

- ``will_jobs_arrive``: the Table 9 features of every pool at ``view.now``
  (computed from the view with a few vectorized ``searchsorted`` calls over
  all pools at once; the same values as
  :func:`sia.features.live.features_at`, which the tests check), then one
  XGBoost call per window over all pools, thresholded at the model's
  registered threshold;
- ``new_load_estimate``: SIA's sliding max over the last ``load_windows``
  windows (``load_method="sliding_max"``) or the calibrated estimate
  (``"calibrated"``);
- ``duration_bins``: the bin of the point-in-time history median (same tag,
  then same pool and GPU count, then same pool), kept up to date from the
  view's completions; the registered fallback bin when there is no history.

Everything is point in time: only arrivals with submit <= now, completions
the view reports, and running jobs' expected ends (start + the history median
of jobs finished by the forecaster's previous call; when it is called at every
decision, that is exactly the history at the job's start; +inf when unknown).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from sia.data.windows import sliding_max_load
from sia.features.table9 import FEATURE_COLUMNS, window_bounds
from sia.models import registry
from sia.models.job_duration import N_BINS, OnlineDurationHistory, predict_bins
from sia.models.new_load import CalibratedLoad

_COUNT_COLUMNS = [c for c in FEATURE_COLUMNS if not c.startswith("future_")]


class _SortedEvents:
    """Per-pool sorted event times as one composite-key array: ``pool * span + (time - origin)``."""

    def __init__(self, origin: float, span: float):
        self.origin = origin
        self.span = span
        self.keys = np.empty(0, dtype=np.float64)

    def add(self, pool: np.ndarray, times: np.ndarray) -> None:
        """Insert events (pool index, time in s) keeping the keys sorted."""
        if times.size == 0:
            return
        new = np.sort(pool.astype(np.float64) * self.span + (times - self.origin))
        self.keys = np.insert(self.keys, np.searchsorted(self.keys, new, side="right"), new)

    def query_keys(self, pools: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Return the composite keys of times ``x`` (s) for each pool (clipped into its segment)."""
        rel = np.clip(np.asarray(x, dtype=np.float64) - self.origin, 0.0, self.span - 1.0)
        return pools.astype(np.float64) * self.span + rel


class LearnedForecaster:
    """The learned predictors behind the forecasting protocol (see the module doc)."""

    name = "learned"
    perfect_information = False

    def __init__(
        self,
        will_arrive: dict[int, registry.LoadedWillArrive],
        *,
        loads: dict[int, CalibratedLoad] | None = None,
        load_method: str = "sliding_max",
        load_windows: int = 3,
        duration_config: dict[str, Any] | None = None,
    ):
        if load_method not in ("sliding_max", "calibrated"):
            raise ValueError(f"load_method must be 'sliding_max' or 'calibrated', not {load_method!r}")
        if load_method == "calibrated" and not loads:
            raise ValueError("load_method='calibrated' needs the calibrated loads per window")
        self.will_arrive = dict(will_arrive)
        self.loads = dict(loads or {})
        self.load_method = load_method
        self.load_windows = int(load_windows)
        cfg = duration_config or {}
        self.fallback_bin = int(cfg.get("fallback_bin", N_BINS - 1))
        self.history = OnlineDurationHistory(int(cfg.get("min_count", 3)))
        self._trace_id: int | None = None

    @classmethod
    def from_registry(cls, windows_min: Sequence[int] = (5, 60, 720), alias: str = "champion",
                      *, load_method: str = "sliding_max", load_windows: int = 3,
                      tracking_uri: str | None = None) -> LearnedForecaster:
        """Return a forecaster with the models registered under ``alias`` for each window.

        ``tracking_uri`` (default: MLflow's current one) names the store.
        Raises :class:`~sia.models.registry.RegistryError` when a model is missing.
        """
        if tracking_uri:
            import mlflow

            mlflow.set_tracking_uri(tracking_uri)
            mlflow.set_registry_uri(tracking_uri)
        models = {int(k): registry.load_will_arrive(int(k), alias) for k in windows_min}
        loads = ({int(k): registry.load_new_load(int(k), alias) for k in windows_min}
                 if load_method == "calibrated" else None)
        return cls(models, loads=loads, load_method=load_method, load_windows=load_windows,
                   duration_config=registry.load_job_duration(alias))

    # ----------------------------------------------------------------- state from the view
    def _reset(self, trace: Any) -> None:
        self._trace_id = id(trace)
        lo = float(trace.submit.min()) - 1.0 if trace.n_jobs else -1.0
        hi = float(trace.submit.max()) if trace.n_jobs else 0.0
        span = hi - lo + 2.0 + 1e9  # room for completions long after the last submission
        self._origin, self._span = lo, span
        self._arrivals = _SortedEvents(lo, span)
        self._arrivals.add(trace.pool, trace.submit)
        self._completions = _SortedEvents(lo, span)
        self._seen = np.zeros(trace.n_pools, dtype=np.int64)
        self._expected_end = np.full(trace.n_jobs, np.nan)
        self._pool_index = np.arange(trace.n_pools)

    def _sync(self, view: Any) -> None:
        """Absorb completions and newly running jobs since the last call."""
        trace = view.trace
        if self._trace_id != id(trace):
            self._reset(trace)
            self.history = OnlineDurationHistory(self.history.min_count)
        run = view.running()
        new = run.job[np.isnan(self._expected_end[run.job])]
        if new.size:  # history as of the last call, i.e. jobs finished by the job's start
            starts = np.array([view.start_time_of(int(j)) for j in new])
            med = self.history.median_s(view, new)
            self._expected_end[new] = starts + np.where(np.isnan(med), np.inf, med)
        self.history.start(trace)
        pools, times = [], []
        for p in range(trace.n_pools):
            ends = view.completions(p)
            n = ends.shape[0]
            if n > self._seen[p]:
                times.append(ends[self._seen[p]:])
                pools.append(np.full(n - self._seen[p], p, dtype=np.int64))
                self.history.add(trace, view.completed_jobs(p)[self._seen[p]:n])
                self._seen[p] = n
        if times:
            self._completions.add(np.concatenate(pools), np.concatenate(times))

    # ----------------------------------------------------------------- features
    def features(self, view: Any, windows_min: Sequence[int]) -> dict[int, np.ndarray]:
        """Return, per window (min), the float32 [n_pools, len(FEATURE_COLUMNS)] feature matrix at now."""
        self._sync(view)
        t = float(view.now)
        P = view.trace.n_pools
        pools = self._pool_index
        specs = []  # (window, column, kind, lo, hi, ends)
        for k in windows_min:
            for col, (kind, lo, hi, ends) in window_bounds(t, 60.0 * k).items():
                specs.append((k, col, kind, float(lo), float(min(hi, t)), ends))
        counts: dict[tuple[int, str], np.ndarray] = {}
        for kind, events in (("arrivals", self._arrivals), ("completions", self._completions)):
            sel = [s for s in specs if s[2] == kind]
            # bounds are shared by all pools: search each distinct bound once per pool, with
            # pool-major needles that are already sorted (fast searchsorted)
            right = sorted({s[4] for s in sel} | {s[3] for s in sel if s[5] == "(]"})
            left = sorted({s[3] for s in sel if s[5] != "(]"})
            found = {}
            for side, values in (("right", right), ("left", left)):
                if not values:
                    continue
                needles = events.query_keys(pools[:, None], np.array(values)[None, :])
                pos = np.searchsorted(events.keys, needles.ravel(), side=side)
                pos = pos.reshape(needles.shape)
                for i, v in enumerate(values):
                    found[(side, v)] = pos[:, i]
            for k, col, _, lo, hi, ends in sel:
                lower = found[("right" if ends == "(]" else "left", lo)]
                counts[(k, col)] = np.maximum(found[("right", hi)] - lower, 0)
        run = view.running()
        exp_end = self._expected_end[run.job]
        out = {}
        for k in windows_min:
            within = exp_end <= t + 60.0 * k
            w = np.bincount(run.pool, weights=within, minlength=P)
            total = np.bincount(run.pool, minlength=P)
            cols = [counts[(k, c)] for c in _COUNT_COLUMNS] + [w, total - w]
            out[int(k)] = np.stack(cols, axis=1).astype(np.float32)
        return out

    # ----------------------------------------------------------------- protocol
    def _windows_min(self, windows_s: Sequence[float]) -> list[int]:
        ks = [int(round(float(w) / 60.0)) for w in windows_s]
        missing = [k for k in ks if k not in self.will_arrive]
        if missing:
            raise registry.RegistryError(
                f"no WillJobsArrive model for window(s) {missing} min; loaded: "
                f"{sorted(self.will_arrive)}; train them with `sia train --windows ...`"
            )
        return ks

    def arrival_proba(self, view: Any, windows_s: Sequence[float]) -> np.ndarray:
        """Return float [n_pools, n_windows]: P(a job arrives in (now, now + w])."""
        ks = self._windows_min(windows_s)
        feats = self.features(view, sorted(set(ks)))
        out = np.empty((view.trace.n_pools, len(ks)))
        for i, k in enumerate(ks):
            m = self.will_arrive[k]
            order = [FEATURE_COLUMNS.index(c) for c in m.feature_columns]
            out[:, i] = m.model.get_booster().inplace_predict(feats[k][:, order])
        return out

    def will_jobs_arrive(self, view: Any, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return bool [n_pools, n_windows]: P(arrival) >= the model's threshold."""
        ks = self._windows_min(windows_s)
        proba = self.arrival_proba(view, windows_s)
        thresholds = np.array([self.will_arrive[k].threshold for k in ks])
        return proba >= thresholds[None, :]

    def new_load_estimate(self, view: Any, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return float [n_pools, n_windows]: the GPUs expected to arrive in (now, now + w]."""
        trace = view.trace
        n = int(view.n_arrived)
        cols = []
        for w in windows_s:
            s = sliding_max_load(trace.submit[:n], trace.num_gpus[:n], trace.pool[:n],
                                 trace.n_pools, float(view.now), float(w), self.load_windows)
            if self.load_method == "calibrated":
                k = int(round(float(w) / 60.0))
                if k not in self.loads:
                    raise registry.RegistryError(f"no calibrated NewLoadEstimate for {k} min")
                s = self.loads[k].estimate(s)
            cols.append(s)
        return np.stack(cols, axis=1) if cols else np.zeros((trace.n_pools, 0))

    def duration_bins(self, view: Any, job_indices: np.ndarray) -> np.ndarray:
        """Return the predicted bin of each job from the point-in-time history (fallback bin when none)."""
        self._sync(view)
        med = self.history.median_s(view, np.asarray(job_indices, dtype=np.int64))
        return predict_bins(med, self.fallback_bin)
