"""The forecasting protocol the scheduler asks (DESIGN.md 5.3).

The scheduler never imports `sia.models`. Learned predictors (in
`sia.models`), perfect oracles that read the trace's future, and the paper's
random strawmen all implement :class:`Forecaster`. Calls are batched: one call
answers every pool and every window at once, so a policy makes one call per
scheduling decision, never one per job per event.

Windows are given in seconds (the paper's 5, 60 and 720 minutes are
300, 3600 and 43200). Duration bins are indices into :data:`DURATION_BIN_EDGES_S`:
bin i holds durations in (edges[i-1], edges[i]] with edges[-1] = 0 and the last
bin open-ended, i.e. (0, 5], (5, 60], (60, 720], (720, inf) minutes.
"""

from __future__ import annotations

from typing import Any, Protocol, runtime_checkable

import numpy as np
from sia.data.forecast_view import ForecastView
from sia.data.windows import (  # re-exported: the scheduler's vocabulary too
    DEFAULT_WINDOWS_S,
    DURATION_BIN_EDGES_S,
    cdf_from_bins,
    duration_bin_of,
    sliding_max_load,
)

__all__ = [
    "DEFAULT_WINDOWS_S",
    "DURATION_BIN_EDGES_S",
    "DurationCdfForecaster",
    "Forecaster",
    "ForecastView",
    "cdf_from_bins",
    "PerfectForecaster",
    "RandomForecaster",
    "duration_bin_of",
    "sliding_max_load",
]

@runtime_checkable
class Forecaster(Protocol):
    """What SIA asks about the future; every method is batched over pools.

    ``view`` is the simulator's read-only state view at decision time
    (``view.now`` in seconds; pools in the simulator's pool order). Results
    are indexed ``[pool, window]`` in that order.
    """

    def will_jobs_arrive(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return a bool array [n_pools, n_windows]: will any job arrive in (now, now + w]?"""
        ...

    def new_load_estimate(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return a float array [n_pools, n_windows]: GPUs expected to arrive in (now, now + w]."""
        ...

    def duration_bins(self, view: ForecastView, job_indices: np.ndarray) -> np.ndarray:
        """Return the predicted duration bin (see :func:`duration_bin_of`) of each job."""
        ...


@runtime_checkable
class DurationCdfForecaster(Forecaster, Protocol):
    """A forecaster that also gives duration probabilities (SIA's risk-aware lending).

    It may also have ``lend_risk_at(windows_s) -> list[float] | None``: the
    eps per window its JobDuration was chosen with (SIA's ``lend_risk="auto"``).
    """

    def duration_cdf(self, view: ForecastView, job_indices: np.ndarray,
                     windows_s: tuple[float, ...]) -> np.ndarray:
        """Return float [n_jobs, n_windows]: P(duration <= w) per job and window."""
        ...


class PerfectForecaster:
    """Answers from the trace's future: for ablations and the zero-slowdown checks.

    Perfect information: reads jobs that have not arrived and true durations
    (``view.trace``). ``will_jobs_arrive`` is true iff some job of the pool is
    submitted in (now, now + w]; ``new_load_estimate`` is exactly their GPUs;
    ``duration_bins`` are the true bins.
    """

    name = "perfect"
    perfect_information = True

    def _future_load(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        trace = view.trace
        now = float(view.now)
        lo = int(np.searchsorted(trace.submit, now, side="right"))
        out = np.zeros((trace.n_pools, len(windows_s)), dtype=np.float64)
        for i, w in enumerate(windows_s):
            hi = int(np.searchsorted(trace.submit, now + float(w), side="right"))
            if hi > lo:
                out[:, i] = np.bincount(trace.pool[lo:hi], weights=trace.num_gpus[lo:hi],
                                        minlength=trace.n_pools)
        return out

    def grow(self, trace: Any, n_old: int) -> bool:
        """Nothing to extend when the live service's trace grows: every answer reads the
        trace as it is (True)."""
        return True

    def will_jobs_arrive(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return bool [n_pools, n_windows]: does a job truly arrive in (now, now + w]?"""
        return self._future_load(view, windows_s) > 0

    def new_load_estimate(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return float [n_pools, n_windows]: the GPUs truly submitted in (now, now + w]."""
        return self._future_load(view, windows_s)

    def duration_bins(self, view: ForecastView, job_indices: np.ndarray) -> np.ndarray:
        """Return the true duration bin of each job."""
        return duration_bin_of(view.trace.duration[np.asarray(job_indices, dtype=np.int64)])

    def duration_cdf(self, view: ForecastView, job_indices: np.ndarray, windows_s: Any) -> np.ndarray:
        """Return float [n_jobs, n_windows]: 1 where the job truly runs at most w, else 0."""
        d = view.trace.duration[np.asarray(job_indices, dtype=np.int64)]
        return (d[:, None] <= np.asarray(windows_s, dtype=np.float64)[None, :]).astype(np.float64)


class RandomForecaster:
    """The paper's strawmen (SIA 6.3, Figure 15a): WillJobsArrive ~ U{0, 1}, bins uniform.

    ``randomize`` picks what is random: ``"arrivals"`` (strawman a) or
    ``"arrivals+durations"`` (strawman b; the default). What is not random
    comes from the trace's past only: durations from the median of the pool's
    finished jobs of the same GPU count (longest bin when none), and
    ``new_load_estimate`` is SIA's own sliding max over the last
    ``load_windows`` windows (the paper randomizes only WillJobsArrive and
    JobDuration, so the load estimate stays SIA's). Seeded: the same seed and
    the same sequence of calls give the same answers.
    """

    name = "random"
    perfect_information = False

    def __init__(self, seed: int = 0, randomize: str = "arrivals+durations",
                 load_windows: int = 3):
        if randomize not in ("arrivals", "arrivals+durations"):
            raise ValueError(f"randomize must be 'arrivals' or 'arrivals+durations', not {randomize!r}")
        self.seed = seed
        self.randomize = randomize
        self.load_windows = load_windows
        self._rng = np.random.default_rng(seed)
        # each job's random bin, drawn once (per trace): asked again, a job keeps its draw
        self._drawn: dict[int, int] = {}
        self._drawn_trace: int | None = None

    def will_jobs_arrive(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return bool [n_pools, n_windows], each a fair coin flip."""
        return self._rng.integers(0, 2, size=(view.trace.n_pools, len(windows_s))).astype(bool)

    def new_load_estimate(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return float [n_pools, n_windows]: SIA's sliding max over arrived jobs (GPUs)."""
        trace = view.trace
        n = int(view.n_arrived)
        cols = [
            sliding_max_load(trace.submit[:n], trace.num_gpus[:n], trace.pool[:n],
                             trace.n_pools, float(view.now), float(w), self.load_windows)
            for w in windows_s
        ]
        return np.stack(cols, axis=1) if cols else np.zeros((trace.n_pools, 0))

    def duration_cdf(self, view: ForecastView, job_indices: np.ndarray, windows_s: Any) -> np.ndarray:
        """Return 0/1 probabilities from :meth:`duration_bins` (see :func:`cdf_from_bins`)."""
        return cdf_from_bins(self.duration_bins(view, job_indices), windows_s)

    def duration_bins(self, view: ForecastView, job_indices: np.ndarray) -> np.ndarray:
        """Return a uniform random bin per job (strawman b; drawn once per job, in the order
        first asked: a job asked again keeps its bin), else the pool/GPU history bin."""
        jobs = np.asarray(job_indices, dtype=np.int64)
        n_bins = len(DURATION_BIN_EDGES_S) + 1
        if self.randomize == "arrivals+durations":
            if self._drawn_trace != id(view.trace):
                self._drawn, self._drawn_trace = {}, id(view.trace)
            drawn = self._drawn
            new = [j for j in dict.fromkeys(jobs.tolist()) if j not in drawn]
            drawn.update(zip(new, self._rng.integers(0, n_bins, size=len(new)).tolist(),
                             strict=True))
            return np.array([drawn[j] for j in jobs.tolist()], dtype=np.int64)
        trace = view.trace
        out = np.full(jobs.size, n_bins - 1, dtype=np.int64)
        done = [view.completed_jobs(p) for p in range(trace.n_pools)]
        for i, j in enumerate(jobs):
            finished = done[int(trace.pool[j])]
            same = finished[trace.num_gpus[finished] == trace.num_gpus[j]]
            if same.size:
                out[i] = int(duration_bin_of(float(np.median(trace.duration[same]))))
        return out
