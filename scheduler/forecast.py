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

#: Default prediction windows in seconds: 5 min, 1 h, 12 h (SIA 5.4).
DEFAULT_WINDOWS_S: tuple[float, ...] = (300.0, 3600.0, 43200.0)

#: Upper edges of the duration bins in seconds; the last bin is (43200, inf).
DURATION_BIN_EDGES_S: tuple[float, ...] = (300.0, 3600.0, 43200.0)


def duration_bin_of(duration_s: np.ndarray | float) -> np.ndarray:
    """Return the bin index (0..len(edges)) of each duration in seconds.

    Bins are right-closed: 300 s is bin 0, 300.5 s is bin 1.
    """
    return np.searchsorted(np.asarray(DURATION_BIN_EDGES_S), np.asarray(duration_s), side="left")


@runtime_checkable
class Forecaster(Protocol):
    """What SIA asks about the future; every method is batched over pools.

    ``view`` is the simulator's read-only state view at decision time
    (``view.now`` in seconds; pools in the simulator's pool order). Results
    are indexed ``[pool, window]`` in that order.
    """

    def will_jobs_arrive(self, view: Any, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return a bool array [n_pools, n_windows]: will any job arrive in (now, now + w]?"""
        ...

    def new_load_estimate(self, view: Any, windows_s: tuple[float, ...]) -> np.ndarray:
        """Return a float array [n_pools, n_windows]: GPUs expected to arrive in (now, now + w]."""
        ...

    def duration_bins(self, view: Any, job_indices: np.ndarray) -> np.ndarray:
        """Return the predicted duration bin (see :func:`duration_bin_of`) of each job."""
        ...
