"""What a forecaster may read of a running replay: the typed contract between scheduler and models.

The scheduler asks its forecasters (learned, perfect, random) through
:class:`sia.scheduler.forecast.Forecaster`, passing its read-only state view;
the learned forecaster lives in ``sia.models``, which never imports the
scheduler. Both sides therefore meet here, in the lowest layer: the
scheduler's :class:`~sia.scheduler.view.SimView` satisfies :class:`ForecastView`
structurally, and a forecaster is typed against it (and reads nothing else).

Times are seconds on the trace's clock; pools and jobs are indices in the
replay's order (job indices sorted by submission).
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

import numpy as np


class TraceView(Protocol):
    """The replay's jobs as parallel arrays (indexed by job) and its pools.

    A trace may also carry ``hold`` (float64 seconds each job was held, known, before it
    arrived; None when no job was): a forecaster reads it with ``getattr`` and counts a held
    job from ``submit - hold`` until it arrives (:mod:`sia.features.held`).
    """

    submit: np.ndarray  #: float64 submit times (s), sorted
    duration: np.ndarray  #: float64 true durations (s): only perfect forecasters may read them
    num_gpus: np.ndarray  #: int gang sizes
    pool: np.ndarray  #: int64 pool index of each job
    tag: np.ndarray  #: the jobs' tags (object; None when unknown)
    tag_code: np.ndarray  #: int64 code of each job's tag (-1 when unknown)
    pool_names: tuple[str, ...]

    @property
    def n_jobs(self) -> int:
        """Number of jobs."""
        ...

    @property
    def n_pools(self) -> int:
        """Number of pools."""
        ...


class RunningView(Protocol):
    """The running jobs as parallel arrays."""

    job: np.ndarray  #: int64 job indices
    pool: np.ndarray  #: int64 pool indices
    start: np.ndarray  #: float64 start times (s)


@runtime_checkable
class ForecastView(Protocol):
    """The state of a replay at decision time, as far as forecasting may see it."""

    @property
    def now(self) -> float:
        """The current time (s)."""
        ...

    @property
    def trace(self) -> TraceView:
        """The replay's jobs (arrived or not: the point-in-time rule is the forecaster's)."""
        ...

    @property
    def n_arrived(self) -> int:
        """Jobs arrived so far: job indices < n_arrived have arrived."""
        ...

    @property
    def n_running(self) -> int:
        """Number of running jobs."""
        ...

    def running(self) -> RunningView:
        """Return the running jobs."""
        ...

    def n_completed(self, pool: int) -> int:
        """Return the number of pool ``pool``'s completed jobs (a view may also offer
        ``completed_counts()``, every pool's at once, which forecasters use when present)."""
        ...

    def completions(self, pool: int) -> np.ndarray:
        """Return the end times (s) of pool ``pool``'s completed jobs, in completion order."""
        ...

    def completed_jobs(self, pool: int) -> np.ndarray:
        """Return the job indices of pool ``pool``'s completed jobs, in completion order."""
        ...
