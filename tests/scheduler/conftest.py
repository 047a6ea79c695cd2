"""Shared helpers of the scheduler tests."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import strategies as st
from sia.data.schema import validate
from sia.scheduler.core.forecast import PerfectForecaster


def job_table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus) tuples, via the contract."""
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


@st.composite
def small_traces(draw):
    """(rows, quotas): 2-3 pools of 1-4 GPUs, up to 25 jobs on a 150 s grid, durations on
    both sides of SIA's windows."""
    quotas = {f"p{i}": draw(st.integers(1, 4)) for i in range(draw(st.integers(2, 3)))}
    rows = []
    for i in range(draw(st.integers(1, 25))):
        pool = draw(st.sampled_from(sorted(quotas)))
        rows.append((f"j{i:03d}", pool, float(draw(st.integers(0, 40)) * 150),
                     draw(st.sampled_from([30.0, 299.0, 301.0, 3601.0, 20000.0, 50000.0])),
                     draw(st.integers(1, quotas[pool]))))
    return rows, quotas


class UnderForecaster:
    """Never expects an arrival and predicts every job <= 5 min (bin 0): long jobs overrun.
    A base for the tests' forecasters that add ``duration_cdf``."""

    name = "under"
    perfect_information = False

    def will_jobs_arrive(self, view, windows_s):
        return np.zeros((view.trace.n_pools, len(windows_s)), dtype=bool)

    def new_load_estimate(self, view, windows_s):
        return np.zeros((view.trace.n_pools, len(windows_s)))

    def duration_bins(self, view, job_indices):
        return np.zeros(len(job_indices), dtype=np.int64)


class Calibratable(UnderForecaster):
    """UnderForecaster with a ``calibrate`` hook that records what it was asked."""

    def __init__(self):
        self.asked: list[dict] = []

    def calibrate(self, windows_s, **options):
        self.asked.append(options)
        return self


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
