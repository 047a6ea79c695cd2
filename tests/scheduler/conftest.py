"""Shared helpers of the scheduler tests."""

from __future__ import annotations

import numpy as np
from sia.scheduler.core.forecast import PerfectForecaster


class BlindForecaster:
    """Never expects an arrival (every arrival is a miss, every burst a surprise); true
    duration bins (perfect information on durations: SIA's loan ramp stays off)."""

    name = "blind"
    perfect_information = True

    def __init__(self):
        self._perfect = PerfectForecaster()

    def will_jobs_arrive(self, view, windows_s):
        return np.zeros((view.trace.n_pools, len(windows_s)), dtype=bool)

    def new_load_estimate(self, view, windows_s):
        return np.zeros((view.trace.n_pools, len(windows_s)))

    def duration_bins(self, view, job_indices):
        return self._perfect.duration_bins(view, job_indices)
