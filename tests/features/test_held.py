"""HeldJobs: the jobs a scheduler's queue holds before they may run, counted by hand and
against a direct count at every time (hypothesis), forward and backward."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.features.held import HeldJobs


def test_counts_by_hand():
    # job 0: pool 0, known 100, arrives 1000 (2 GPUs); job 1: pool 0, known 400, arrives 900
    # (4 GPUs); job 2: pool 0, not held; job 3: pool 1, known 250, arrives 650 (1 GPU)
    h = HeldJobs(np.array([1000.0, 900.0, 700.0, 650.0]), np.array([900.0, 500.0, 0.0, 400.0]),
                 np.array([0, 0, 0, 1]), np.array([2, 4, 1, 1]), 3)
    assert h.n_held == 3
    want = {0.0: ([0, 0, 0], [0, 0, 0]), 100.0: ([1, 0, 0], [2, 0, 0]),
            300.0: ([1, 1, 0], [2, 1, 0]), 400.0: ([2, 1, 0], [6, 1, 0]),
            650.0: ([2, 0, 0], [6, 0, 0]), 899.0: ([2, 0, 0], [6, 0, 0]),
            900.0: ([1, 0, 0], [2, 0, 0]), 1000.0: ([0, 0, 0], [0, 0, 0])}
    for t, (jobs, gpus) in want.items():
        n, g = h.at(t)
        assert n.tolist() == jobs and g.tolist() == gpus, t
    n, g = h.at(400.0)  # back in time: counted again from the start
    assert n.tolist() == [2, 1, 0] and g.tolist() == [6, 1, 0]
    with pytest.raises(ValueError):
        n[0] = 5  # read-only views


def test_no_hold_and_nan_holds_count_nowhere():
    h = HeldJobs(np.array([10.0, 20.0]), np.array([0.0, np.nan]), np.array([0, 1]),
                 np.array([1, 1]), 2)
    assert h.n_held == 0 and h.at(15.0)[0].tolist() == [0, 0]
    with pytest.raises(ValueError, match="one value per job"):
        HeldJobs(np.array([1.0]), np.array([1.0, 2.0]), np.array([0]), np.array([1]), 1)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 50), st.integers(0, 20), st.integers(0, 2),
                          st.integers(1, 8)), max_size=25),
       st.lists(st.integers(0, 80), min_size=1, max_size=12))
def test_equals_a_direct_count_at_any_time(jobs, times):
    submit = np.array([10.0 * s for s, _, _, _ in jobs])
    hold = np.array([10.0 * h for _, h, _, _ in jobs])
    pool = np.array([p for _, _, p, _ in jobs], dtype=np.int64)
    gpus = np.array([g for _, _, _, g in jobs])
    h = HeldJobs(submit, hold, pool, gpus, 3)
    for t in (10.0 * x - 5.0 * (x % 2) for x in times):  # forward and back, on and off ties
        held = (submit - hold <= t) & (t < submit) & (hold > 0)
        n, g = h.at(t)
        assert n.tolist() == np.bincount(pool[held], minlength=3).tolist()
        assert g.tolist() == np.bincount(pool[held], gpus[held], minlength=3).tolist()
