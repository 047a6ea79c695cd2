"""Test doubles shared by the calibration's tests: a trace of arrivals and a view of it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass
class CalTrace:
    """What :class:`~sia.models.calibration.PoolCalibration` reads of a replay's trace."""

    submit: np.ndarray
    num_gpus: np.ndarray
    pool: np.ndarray
    pool_names: tuple

    @property
    def n_jobs(self):
        return len(self.submit)

    @property
    def n_pools(self):
        return len(self.pool_names)


@dataclass
class CalView:
    """The view at ``now``: the jobs arrived are ``arrived`` (default: submitted by now)."""

    trace: CalTrace
    now: float
    arrived: int | None = None

    @property
    def n_arrived(self):
        if self.arrived is not None:
            return self.arrived
        return int(np.searchsorted(self.trace.submit, self.now, side="right"))


def cal_trace(events, names=("a", "b")) -> CalTrace:
    """A trace of ``(submit s, pool index, GPUs)`` events, sorted by submission."""
    ev = sorted(events)
    return CalTrace(np.array([e[0] for e in ev], dtype=float),
                    np.array([e[2] for e in ev], dtype=np.int32),
                    np.array([e[1] for e in ev], dtype=np.int64), tuple(names))
