"""Online adaptation of SIA's lending (SIA 5.3): stop lending where predictions keep missing.

SIA 5.3: "if the observed prediction accuracy were to dip for some pools or
time windows, SIA can selectively disable sharing on those pools and time
windows". The paper gives no rule; this module's rule is:

* **Record.** Every prediction SIA makes at a periodic tick is recorded, per
  pool ``p`` and window ``w``: the predicted TotalNewLoad (NewLoadEstimate
  when WillJobsArrive says 1, else 0; GPUs) for ``(t, t + w]``. Predictions
  made at arrivals and completions between ticks are not recorded, so the
  record is a regular 5-minute series (as in the paper's Figure 21), not one
  weighted by bursts of events.
* **Score.** A record is a *miss* when the GPUs that actually arrived in its
  pool during ``(t, t + w]`` exceed its predicted load (so a "no arrival"
  prediction misses on any arrival, and a "yes" misses when its load
  estimate was too low; ``count_load_misses=False`` keeps only the first
  kind). A miss is known as soon as the arrivals exceed the prediction (it
  need not wait for ``t + w``); a record whose window closes without that is
  a hit. Arrivals are read from the view's arrival history (arrived jobs
  only: point in time).
* **Distrust.** Pool ``p`` is *distrusted* in window ``w`` while at least
  ``max_misses`` (strictness) of its ``lookback`` most recent records for
  ``w`` are known misses. Windows overlap, so one arrival that nobody
  predicted turns every recent record of that window into a miss at once;
  the distrust then lasts until ``lookback`` newer records (one hour of
  5-minute ticks by default) have pushed the misses out, and is renewed by
  every new miss. Records still open count as not missed.

While ``(p, w)`` is distrusted, SIA reserves all of ``p``'s unused quota in
window ``w``: it lends none of it (see :mod:`sia.scheduler.policy_sia`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.view import TraceArrays

#: Tolerance in GPUs when comparing arrived load with a predicted load.
_EPS = 1e-9


class ArrivalMissTracker:
    """Recent prediction misses per pool and window, and the distrust they imply.

    Call :meth:`reset` before a replay, :meth:`observe` at *every* decision
    (it is cheap; arrivals are only seen there), :meth:`record` after
    ``observe`` at ticks, and :meth:`distrusted` when lending is considered.
    """

    def __init__(self, windows_s: tuple[float, ...], *, lookback: int = 12, max_misses: int = 1,
                 count_load_misses: bool = True):
        if int(lookback) != lookback or lookback < 1:
            raise ConfigError(f"adaptation lookback must be an integer >= 1 (records), not {lookback}")
        if int(max_misses) != max_misses or not 1 <= max_misses <= lookback:
            raise ConfigError(
                f"adaptation max_misses must be an integer in [1, lookback={lookback}], "
                f"not {max_misses}")
        self.windows_s = tuple(float(w) for w in windows_s)
        self.lookback = int(lookback)
        self.max_misses = int(max_misses)
        self.count_load_misses = bool(count_load_misses)
        self._trace: TraceArrays | None = None

    def reset(self, trace: TraceArrays) -> None:
        """Forget every record; prepare for a replay of ``trace``."""
        P, K, N = trace.n_pools, len(self.windows_s), self.lookback
        self._trace = trace
        self._P = P
        self._seen = 0  # jobs (arrival order) whose arrival is counted in _cum
        self._cum = np.zeros(P)  # GPUs arrived per pool so far
        self._w = np.asarray(self.windows_s)
        self._end = np.full((K, N), math.inf)  # end of each record's window (s)
        self._pred = np.zeros((K, N, P))  # predicted TotalNewLoad (GPUs)
        self._base = np.zeros((K, N, P))  # GPUs arrived up to the record's time
        self._missed = np.zeros((K, N, P), dtype=bool)
        self._live = np.zeros((K, N), dtype=bool)  # window still open
        self._slot = 0
        self._next_close = math.inf
        self.n_records = 0
        self.n_misses = np.zeros((P, K), dtype=np.int64)  # misses found, for reports

    def observe(self, view: Any) -> None:
        """Take in the arrivals since the last call and close the windows that ended before now."""
        now = float(view.now)
        lo, hi = self._seen, int(view.n_arrived)
        trace = self._trace
        if now > self._next_close:
            # windows (t, t + w] with t + w < now are complete: count the arrivals up to t + w
            sub = trace.submit[lo:hi]
            pool = trace.pool[lo:hi]
            gpus = trace.num_gpus[lo:hi]
            for k, slot in zip(*np.nonzero(self._live & (self._end < now)), strict=True):
                end = self._end[k, slot]
                upto = int(np.searchsorted(sub, end, side="right"))
                cum = self._cum + np.bincount(pool[:upto], weights=gpus[:upto], minlength=self._P)
                self._close(k, slot, cum)
            self._next_close = float(self._end[self._live].min()) if self._live.any() else math.inf
        if hi > lo:
            if hi - lo == 1:
                self._cum[trace.pool[lo]] += trace.num_gpus[lo]
            else:
                self._cum += np.bincount(trace.pool[lo:hi], weights=trace.num_gpus[lo:hi],
                                         minlength=self._P)
            self._seen = hi

    def _close(self, k: int, slot: int, cum: np.ndarray) -> None:
        miss = (cum - self._base[k, slot]) > self._pred[k, slot] + _EPS
        if not self.count_load_misses:
            miss &= self._pred[k, slot] <= _EPS
        new = miss & ~self._missed[k, slot]
        self.n_misses[:, k] += new
        self._missed[k, slot] |= miss
        self._live[k, slot] = False

    def record(self, now: float, predicted_load: np.ndarray) -> None:
        """Record the predicted TotalNewLoad [pools, windows] (GPUs) made at time ``now``.

        Call after :meth:`observe` at the same instant (arrivals at ``now`` are
        not part of ``(now, now + w]``). The oldest record is dropped.
        """
        s = self._slot
        pred = np.asarray(predicted_load, dtype=np.float64)
        self._end[:, s] = now + self._w
        self._pred[:, s, :] = pred.T
        self._base[:, s, :] = self._cum
        self._missed[:, s, :] = False
        self._live[:, s] = True
        self._slot = (s + 1) % self.lookback
        self.n_records += 1
        self._next_close = min(self._next_close, now + float(self._w.min()))

    def distrusted(self) -> np.ndarray:
        """Return bool [pools, windows]: True where lending must stop now (see the module rule)."""
        live = self._live
        if live.any():
            seen = self._cum[None, None, :] - self._base  # arrived since each record
            miss = live[:, :, None] & (seen > self._pred + _EPS)
            if not self.count_load_misses:
                miss &= self._pred <= _EPS
            new = miss & ~self._missed
            if new.any():
                self.n_misses += new.sum(axis=1).T
                self._missed |= miss
        return (self._missed.sum(axis=1) >= self.max_misses).T
