"""Composing forecasters: each of SIA's three predictions from a different source (Figure 15a).

The ablations of SIA 6.3 replace one predictor at a time: (a) WillJobsArrive
by a fair coin, (b) WillJobsArrive and JobDuration by random draws, keeping
the rest of SIA's predictors. :class:`MixedForecaster` takes each of the
three answers of the :class:`~sia.scheduler.core.forecast.Forecaster` protocol
from a forecaster of its own; the helpers build the two strawmen on top of a
``base`` forecaster (the pipeline passes the learned one; the policy
factories default to :class:`~sia.scheduler.core.forecast.PerfectForecaster`).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from sia.data.forecast_view import ForecastView
from sia.scheduler.core.forecast import (
    Forecaster,
    PerfectForecaster,
    RandomForecaster,
    cdf_from_bins,
)


class MixedForecaster:
    """A forecaster answering WillJobsArrive, NewLoadEstimate and JobDuration from three sources.

    ``arrivals``, ``load`` and ``durations`` are forecasters (they may be the
    same object). Perfect information when any source used is.
    """

    def __init__(self, arrivals: Forecaster, load: Forecaster, durations: Forecaster,
                 name: str | None = None):
        self.arrivals = arrivals
        self.load = load
        self.durations = durations
        parts = (arrivals, load, durations)
        self.perfect_information = any(bool(getattr(f, "perfect_information", False))
                                       for f in parts)
        self.name = name or "mix({})".format(
            ", ".join(str(getattr(f, "name", type(f).__name__)) for f in parts))

    def will_jobs_arrive(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return bool [n_pools, n_windows] from the ``arrivals`` source."""
        return self.arrivals.will_jobs_arrive(view, windows_s)

    def new_load_estimate(self, view: ForecastView, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return float [n_pools, n_windows] (GPUs) from the ``load`` source."""
        return self.load.new_load_estimate(view, windows_s)

    def duration_bins(self, view: ForecastView, job_indices: np.ndarray) -> np.ndarray:
        """Return the predicted duration bins of ``job_indices`` from the ``durations`` source."""
        return self.durations.duration_bins(view, job_indices)

    def duration_cdf(self, view: ForecastView, job_indices: np.ndarray, windows_s: Any) -> np.ndarray:
        """Return P(duration <= w) of ``job_indices`` from the ``durations`` source."""
        src = self.durations
        if callable(getattr(src, "duration_cdf", None)):
            return src.duration_cdf(view, job_indices, windows_s)
        return cdf_from_bins(src.duration_bins(view, job_indices), windows_s)

    def parts(self) -> tuple[Forecaster, ...]:
        """The distinct sources (arrivals, load, durations; each once)."""
        out: list[Any] = []
        for f in (self.arrivals, self.load, self.durations):
            if all(f is not g for g in out):
                out.append(f)
        return tuple(out)

    def grow(self, trace: Any, n_old: int) -> bool:
        """Grow every source (the live service's growing arrays); False when one cannot."""
        return all(callable(getattr(f, "grow", None)) and f.grow(trace, n_old)
                   for f in self.parts())

    def last_submit_s(self, pool_names: Any) -> Any:
        """Per pool, its last submission before the replay, from the ``durations`` source (the
        history its predictions come from); NaN when that source has none."""
        last = getattr(self.durations, "last_submit_s", None)
        return last(pool_names) if callable(last) else np.full(len(pool_names), np.nan)

    def last_width(self, pool_names: Any) -> Any:
        """Per pool, the GPUs of its last job before the replay, from the first source with a
        prior history (arrivals, load, durations: the floor is on the arrival side); NaN
        when none has one."""
        for src in (self.arrivals, self.load, self.durations):
            last = getattr(src, "last_width", None)
            if callable(last):
                return last(pool_names)
        return np.full(len(pool_names), np.nan)

    def lend_risk_at(self, windows_s: Any) -> Any:
        """The ``durations`` source's eps per window for risk-aware lending (None: bin rule)."""
        at = getattr(self.durations, "lend_risk_at", None)
        return at(windows_s) if callable(at) else None


def random_arrivals(base: Forecaster, seed: int = 0) -> MixedForecaster:
    """Return strawman (a): WillJobsArrive ~ U{0, 1} (seeded), load and durations from ``base``."""
    coin = RandomForecaster(seed=seed, randomize="arrivals")
    return MixedForecaster(coin, base, base,
                           name=f"random-arrivals+{getattr(base, 'name', type(base).__name__)}")


def random_arrivals_and_durations(base: Forecaster, seed: int = 0) -> MixedForecaster:
    """Return strawman (b): WillJobsArrive ~ U{0, 1} and uniform duration bins, load from ``base``."""
    rnd = RandomForecaster(seed=seed, randomize="arrivals+durations")
    return MixedForecaster(rnd, base, rnd,
                           name=f"random-both+{getattr(base, 'name', type(base).__name__)}")


def perfect_durations(base: Forecaster) -> MixedForecaster:
    """Return ``base``'s WillJobsArrive and NewLoadEstimate with perfect JobDuration bins.

    With :func:`perfect_arrivals` it attributes a learned SIA's slowdowns: the
    slowdowns left here are due to the arrival and load predictions.
    """
    return MixedForecaster(base, base, PerfectForecaster(),
                           name=f"{getattr(base, 'name', type(base).__name__)}+perfect-durations")


def perfect_arrivals(base: Forecaster) -> MixedForecaster:
    """Return perfect WillJobsArrive and NewLoadEstimate with ``base``'s JobDuration bins.

    The slowdowns left here are due to the duration predictions (and placement).
    """
    perfect = PerfectForecaster()
    return MixedForecaster(perfect, perfect, base,
                           name=f"perfect-arrivals+{getattr(base, 'name', type(base).__name__)}")
