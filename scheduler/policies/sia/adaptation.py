"""Online adaptation of SIA's lending (SIA 5.3): stop lending where predictions keep missing.

SIA 5.3: "if the observed prediction accuracy were to dip for some pools or
time windows, SIA can selectively disable sharing on those pools and time
windows". The paper gives no rule; this module's rule is:

* **Record.** Every forecast SIA makes at a periodic tick is recorded, per
  pool ``p`` and window ``w``: the predicted TotalNewLoad (NewLoadEstimate
  when WillJobsArrive says 1, else 0; GPUs) for ``(t, t + w]``. Forecasts
  made at arrivals and completions between ticks are not recorded, so the
  record is a series on the 5-minute grid (as in the paper's Figure 21), not
  one weighted by bursts of events. SIA forecasts only when it could lend
  (idle GPUs, pending jobs, something lendable), so ticks without a lending
  opportunity leave no record: the record is of the predictions SIA acted on.
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
  the distrust then lasts until ``lookback`` newer records (four hours of
  5-minute ticks with SIA's default, :data:`DEFAULT_LOOKBACK`) have pushed the misses out, and is renewed by
  every new miss. Records still open count as not missed.

While ``(p, w)`` is distrusted, SIA reserves all of ``p``'s unused quota in
window ``w``: it lends none of it (see :mod:`sia.scheduler.policies.sia.policy`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.view import TraceArrays

#: Tolerance in GPUs when comparing arrived load with a predicted load.
_EPS = 1e-9
#: SIA's default ``lookback`` for arrivals (tick records: 48 = 4 hours of 5-minute ticks; it was
#: 12). Chosen on training weeks only (experiments/risk_training_weeks.yaml: 20 experiments of
#: 4 Philly pools on days 35-56, predictors trained on days 14-35, the loan ramp on) by the rule:
#: the fewest slowed jobs among the values that keep at least 90% of the mean speedup of the
#: earlier default. Measured (2026-11-28; % slowed / total slowdown min / mean speedup): 12:
#: 0.88% / 19,475 / 83.4; 48: 0.62% / 14,518 / 80.8; 288 (a day): 0.38% / 46,418 / 59.5 (71%
#: of the mean: out). A pool whose forecasts missed an arrival is distrusted for 4 hours of
#: records instead of one: on bursty pools (Graham's partitions) the next burst comes sooner.
DEFAULT_LOOKBACK = 48



def _check_rule(windows_s, lookback, max_misses, unit: str) -> tuple[tuple[float, ...], int, int]:
    """The windows (s), lookback and max_misses of a distrust rule, checked (ConfigError naming
    the bad option); ``unit`` is what the lookback counts."""
    if int(lookback) != lookback or lookback < 1:
        raise ConfigError(f"adaptation lookback must be an integer >= 1 ({unit}), not {lookback}")
    if int(max_misses) != max_misses or not 1 <= max_misses <= lookback:
        raise ConfigError(
            f"adaptation max_misses must be an integer in [1, lookback={lookback}], "
            f"not {max_misses}")
    return tuple(float(w) for w in windows_s), int(lookback), int(max_misses)

class ArrivalMissTracker:
    """Recent prediction misses per pool and window, and the distrust they imply.

    Call :meth:`reset` before a replay, :meth:`record` at ticks and
    :meth:`distrusted` when lending is considered; both first take in the
    arrivals since the previous call (from the view's arrival history, in
    one vectorized batch), so nothing is needed at other decisions.

    Each record keeps its own count of the GPUs that arrived in its window
    so far; an arrival at time ``s`` is added to every record with
    ``t < s <= t + w``, so a record is final once its window has passed.
    """

    def __init__(self, windows_s: tuple[float, ...], *, lookback: int = 12, max_misses: int = 1,
                 count_load_misses: bool = True):
        self.windows_s, self.lookback, self.max_misses = _check_rule(windows_s, lookback,
                                                                     max_misses, "records")
        self.count_load_misses = bool(count_load_misses)
        self._trace: TraceArrays | None = None

    def reset(self, trace: TraceArrays) -> None:
        """Forget every record; prepare for a replay of ``trace``."""
        P, K, N = trace.n_pools, len(self.windows_s), self.lookback
        self._trace = trace
        self._P = P
        self._seen = 0  # jobs (arrival order) already counted
        self._w = np.asarray(self.windows_s)
        self._t = np.full((K, N), math.inf)  # record times (inf: empty slot)
        self._end = np.full((K, N), -math.inf)  # t + w
        self._pred = np.zeros((K, N, P))  # predicted TotalNewLoad (GPUs)
        self._got = np.zeros((K, N, P))  # GPUs arrived in (t, min(now, t + w)]
        self._slot = 0
        self._dirty = True
        self._distrust = np.zeros((P, K), dtype=bool)
        self._last_end = -math.inf  # latest window end of any record
        self.n_records = 0
        self._closed_misses = np.zeros((P, K), dtype=np.int64)

    def _absorb(self, view: Any) -> None:
        """Add the arrivals since the last call to the records whose window they fall in."""
        lo, hi = self._seen, int(view.n_arrived)
        if hi <= lo:
            return
        self._seen = hi
        trace = self._trace
        sub = trace.submit[lo:hi]
        if float(sub[0]) > self._last_end:
            return  # every record's window is over
        if hi - lo == 1:
            s = sub[0]
            hit = (self._t < s) & (s <= self._end)
            if hit.any():
                self._got[hit, trace.pool[lo]] += trace.num_gpus[lo]
                self._dirty = True
            return
        # hit[k, n, i]: arrival i falls in record (k, n)'s window (t, t + w]
        hit = (self._t[:, :, None] < sub) & (sub <= self._end[:, :, None])
        if hit.any():
            kk, nn, ii = np.nonzero(hit)
            np.add.at(self._got, (kk, nn, trace.pool[lo:hi][ii]), trace.num_gpus[lo:hi][ii])
            self._dirty = True

    def record(self, view: Any, predicted_load: np.ndarray) -> None:
        """Record the predicted TotalNewLoad [pools, windows] (GPUs) made now (``view.now``).

        Arrivals at ``now`` are not part of ``(now, now + w]``. The oldest record is dropped.
        """
        self._absorb(view)
        now = float(view.now)
        s = self._slot
        pred = np.asarray(predicted_load, dtype=np.float64)
        self._closed_misses += self._miss()[:, s, :].T  # the dropped record's outcome
        self._t[:, s] = now
        self._end[:, s] = now + self._w
        self._pred[:, s, :] = pred.T
        self._got[:, s, :] = 0.0
        self._slot = (s + 1) % self.lookback
        self._last_end = max(self._last_end, now + float(self._w.max()))
        self.n_records += 1
        self._dirty = True

    def _miss(self) -> np.ndarray:
        """bool [windows, records, pools]: records whose arrivals exceeded their prediction."""
        miss = self._got > self._pred + _EPS
        if not self.count_load_misses:
            miss &= self._pred <= _EPS
        return miss

    def distrusted(self, view: Any) -> np.ndarray:
        """Return bool [pools, windows]: True where lending must stop now (see the module rule)."""
        self._absorb(view)
        if self._dirty:
            self._distrust = (self._miss().sum(axis=1) >= self.max_misses).T
            self._dirty = False
        return self._distrust

    def miss_counts(self) -> np.ndarray:
        """Return int [pools, windows]: records found to miss so far (dropped and current)."""
        return self._closed_misses + self._miss().sum(axis=1).T


class DurationMissTracker:
    """Recent JobDuration misses per pool and window, and the distrust they imply (SIA 5.3).

    SIA 5.3's adaptation applies to every prediction SIA lends on, and the
    JobDuration prediction is the one a loan relies on most: a job lent in
    window ``w`` is lent because its predicted bin fits ``w``. The rule
    mirrors :class:`ArrivalMissTracker`'s, on outcomes instead of ticks:

    * **Outcome.** Every job whose bin SIA predicted (:meth:`predicted`, with
      the first window its bin fits) is scored, once it starts, in each
      window ``w`` it was predicted to fit: a *miss* when it runs longer than
      ``w``, a hit otherwise. A miss is known as soon as the job has run
      ``w`` seconds without finishing (at ``start + w``, from the view's
      running jobs); a hit when it finishes within ``w``. A job that may be
      preempted (or moved) is scored at its end only, on its duration: its
      time since its first start also holds the time it was stopped and
      the restart costs, which are not the prediction's error. Dedicated and lent
      jobs alike are scored (the accuracy of the pool's predictions, not
      only of the loans; this also lets a pool that stopped borrowing earn
      trust back). Only durations of finished jobs and elapsed run times of
      running ones are read: point in time.
    * **Distrust.** Pool ``p`` is distrusted in window ``w`` while at least
      ``max_misses`` of its ``lookback`` most recent outcomes in ``w`` are
      misses; SIA then lends none of ``p``'s jobs in ``w`` (see
      :mod:`sia.scheduler.policies.sia.policy`). With ``earn_trust`` a replay starts
      as if the last ``lookback`` outcomes of every pool and window had
      missed: a pool is trusted in ``w`` only once enough real outcomes have
      pushed those out (no trust without evidence; off: trust until proven
      wrong).

    With perfect predictions no outcome is ever a miss (a job's true bin's
    upper edge is at most every window it is predicted to fit), so this
    never changes a decision of SIA with perfect coarse predictions.
    """

    def __init__(self, windows_s: tuple[float, ...], *, lookback: int = 12, max_misses: int = 1,
                 earn_trust: bool = False):
        self.windows_s, self.lookback, self.max_misses = _check_rule(windows_s, lookback,
                                                                     max_misses, "outcomes")
        self.earn_trust = bool(earn_trust)
        self._trace: TraceArrays | None = None

    def reset(self, trace: TraceArrays, preemptible: np.ndarray | None = None) -> None:
        """Forget every prediction and outcome; prepare for a replay of ``trace``.

        ``preemptible``: bool per job index, the jobs that may be stopped and
        restarted (scored at their end only); None: none.
        """
        P, K = trace.n_pools, len(self.windows_s)
        self._trace = trace
        self._K = K
        self._w = np.asarray(self.windows_s)
        # first window not yet scored per job (K: nothing to score: unpredicted or done)
        self._next = np.full(trace.n_jobs, K, dtype=np.int64)
        self._early = (np.ones(trace.n_jobs, dtype=bool) if preemptible is None
                       else ~np.asarray(preemptible, dtype=bool))
        self._tracked = 0  # predicted jobs not yet fully scored (skip the scans when 0)
        self._seen = [0] * P  # completions absorbed per pool
        # recent outcomes (True: miss); with earn_trust the replay starts as if every one missed
        self._ring = np.full((P, K, self.lookback), self.earn_trust, dtype=bool)
        self._pos = np.zeros((P, K), dtype=np.int64)
        self._distrust = np.zeros((P, K), dtype=bool)
        self._dirty = self.earn_trust
        self.n_outcomes = 0
        self._misses = np.zeros((P, K), dtype=np.int64)

    def grow(self, trace: TraceArrays, n_old: int, preemptible: np.ndarray | None = None
             ) -> None:
        """Take the jobs appended to ``trace`` after index ``n_old`` (not yet arrived;
        ``preemptible``: bool per new job, None: none): nothing predicted for them yet, as
        :meth:`reset` leaves them (arrays read at job indices only: room to spare)."""
        from sia.data.growth import reserve

        n = trace.n_jobs
        self._next = reserve(self._next, n, self._K)
        self._early = reserve(self._early, n, True)
        if preemptible is not None:
            self._early[n_old:n] = ~np.asarray(preemptible, dtype=bool)

    def predicted(self, jobs: np.ndarray, first_window: np.ndarray) -> None:
        """Note the predictions of ``jobs``: the first window index their bin fits (K: none)."""
        jobs = np.asarray(jobs, dtype=np.int64)
        kmin = np.minimum(np.asarray(first_window, dtype=np.int64), self._K)
        fresh = self._next[jobs] == self._K  # a job is predicted once
        self._next[jobs[fresh]] = kmin[fresh]
        self._tracked += int((kmin[fresh] < self._K).sum())

    def _push(self, pool: int, k: int, miss: bool) -> None:
        s = self._pos[pool, k]
        self._ring[pool, k, s] = miss
        self._pos[pool, k] = (s + 1) % self.lookback
        self.n_outcomes += 1
        if miss:
            self._misses[pool, k] += 1
        self._dirty = True

    def _absorb(self, view: Any) -> None:
        """Score the completions since the last call, then the running jobs past a window."""
        trace, K, w, nxt = self._trace, self._K, self._w, self._next
        for p in range(trace.n_pools):
            n = view.n_completed(p)
            if n > self._seen[p]:
                done = view.completed_jobs(p)[self._seen[p]:n]
                self._seen[p] = n
                for j in done[nxt[done] < K].tolist():
                    d = float(trace.duration[j])
                    for k in range(int(nxt[j]), K):
                        self._push(p, k, d > w[k])
                    nxt[j] = K
                    self._tracked -= 1
        if self._tracked <= 0:
            return
        run = view.running()
        open_ = (nxt[run.job] < K) & self._early[run.job]
        if not open_.any():
            return
        jobs, pools = run.job[open_], run.pool[open_]
        elapsed = float(view.now) - run.start[open_]
        for j, p, e in zip(jobs.tolist(), pools.tolist(), elapsed.tolist(), strict=True):
            k = int(nxt[j])
            while k < K and e > w[k]:  # still running after w[k]: known to miss w[k]
                self._push(p, k, True)
                k += 1
            if k != nxt[j]:
                nxt[j] = k
                if k == K:
                    self._tracked -= 1

    def distrusted(self, view: Any) -> np.ndarray:
        """Return bool [pools, windows]: True where the pool's jobs must not be lent now."""
        self._absorb(view)
        if self._dirty:
            self._distrust = self._ring.sum(axis=2) >= self.max_misses
            self._dirty = False
        return self._distrust

    def miss_counts(self) -> np.ndarray:
        """Return int [pools, windows]: outcomes found to miss so far."""
        return self._misses.copy()
