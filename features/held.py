"""Jobs a scheduler holds before they may run: known work to come, per pool, point in time.

A Slurm job held by a dependency, a ``--begin`` time or a hold sits in the queue from its
submission until it becomes eligible, which is when a replay lets it arrive (its
``submit_time``; the trace's ``hold_time`` is the gap). A live scheduler sees it all that
time, so at ``t`` a forecaster may count, per pool, the jobs known by ``t`` (``submit - hold
<= t``) that have not arrived (``t < submit``). When such a job will arrive is not known
before it does; that it exists is. Counting it reads nothing after ``t``.
"""

from __future__ import annotations

import numpy as np


class HeldJobs:
    """Per-pool counts of the jobs known and not yet arrived at a time (see the module doc).

    ``submit`` [n] (arrival times, s), ``hold`` [n] (s held before them; 0 or NaN: not
    held), ``pool`` [n] (indices < ``n_pools``) and ``gpus`` [n] are a trace's columns.
    :meth:`at` moves forward incrementally (a replay's clock); an earlier time starts the
    count again.
    """

    def __init__(self, submit: np.ndarray, hold: np.ndarray, pool: np.ndarray,
                 gpus: np.ndarray, n_pools: int):
        submit = np.asarray(submit, dtype=np.float64)
        hold = np.asarray(hold, dtype=np.float64)
        if not submit.shape == hold.shape == np.shape(pool) == np.shape(gpus):
            raise ValueError(f"HeldJobs: submit {submit.shape}, hold {hold.shape}, pool "
                             f"{np.shape(pool)} and gpus {np.shape(gpus)} must have one value "
                             "per job")
        held = np.flatnonzero(hold > 0.0)
        known = submit[held] - hold[held]
        by_known = np.argsort(known, kind="stable")
        by_arrival = np.argsort(submit[held], kind="stable")
        pool = np.asarray(pool, dtype=np.int64)[held]
        width = np.asarray(gpus, dtype=np.float64)[held]
        self._known = known[by_known]
        self._known_pool, self._known_gpus = pool[by_known], width[by_known]
        self._arrive = submit[held][by_arrival]
        self._arrive_pool, self._arrive_gpus = pool[by_arrival], width[by_arrival]
        self._n_pools = int(n_pools)
        self._start()

    def _start(self) -> None:
        self._counts = np.zeros(self._n_pools, dtype=np.int64)
        self._gpus = np.zeros(self._n_pools)
        self._i_known = self._i_arrive = 0
        self._t = -np.inf

    @property
    def n_held(self) -> int:
        """Jobs of the trace that were held at all."""
        return int(self._known.size)

    def at(self, t: float) -> tuple[np.ndarray, np.ndarray]:
        """Return (int64 [pools], float64 [pools]): the jobs known by ``t`` that arrive after
        ``t``, and their GPUs (read-only views, updated by the next call)."""
        if t < self._t:
            self._start()
        self._t = t
        P = self._n_pools
        i = int(np.searchsorted(self._known, t, side="right"))
        if i > self._i_known:
            sl = slice(self._i_known, i)
            self._counts += np.bincount(self._known_pool[sl], minlength=P)
            self._gpus += np.bincount(self._known_pool[sl], self._known_gpus[sl], minlength=P)
            self._i_known = i
        i = int(np.searchsorted(self._arrive, t, side="right"))
        if i > self._i_arrive:
            sl = slice(self._i_arrive, i)
            self._counts -= np.bincount(self._arrive_pool[sl], minlength=P)
            self._gpus -= np.bincount(self._arrive_pool[sl], self._arrive_gpus[sl], minlength=P)
            self._i_arrive = i
        jobs, gpus = self._counts.view(), self._gpus.view()
        jobs.setflags(write=False)
        gpus.setflags(write=False)
        return jobs, gpus
