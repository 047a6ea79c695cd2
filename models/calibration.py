"""Per-pool calibration of SIA's arrival predictions, online and point in time (issue 32, item 2).

WillJobsArrive is one model across all pools with one threshold; NewLoadEstimate
is a sliding max. Neither says how often it misses in *this* pool lately. This
module calibrates both per pool and window on the pool's own recent outcomes,
and keeps doing so during a replay: a forecast made at ``t`` for ``(t, t + w]``
is scored only once ``t + w`` has passed (never earlier: no peeking).

* **Load: split conformal upper bounds.** On the 5-minute grid, the score of
  a record at ``t`` is ``realized - base``: the GPUs that arrived in the pool
  during ``(t, t + w]`` minus the sliding max at ``t`` (the paper's
  NewLoadEstimate, :func:`sia.data.windows.sliding_max_load`), over the
  records whose window saw an arrival (the load estimate is read only when an
  arrival is predicted). The bound at ``now`` is ``base(now) + q``, with ``q``
  the conformal quantile (:func:`conformal_upper`) of the pool's last
  ``memory`` scores at level ``1 - alpha``: under exchangeability, the load of
  a window that sees arrivals exceeds the bound with probability <= ``alpha``.
  The grid's records come from the arrivals alone, so the records of the
  prior period (the trace before the replay, :meth:`PoolCalibration.prime`)
  count too, and every 5-minute point counts, not only those SIA acted on.
* **Arrivals: a per-pool threshold at a target recall.** At each forecast
  (at most one record per 5-minute slot) the model's P(arrival) per pool and
  window is recorded; once its window has passed, a record whose window saw
  an arrival is a *positive*. The pool's threshold is the conformal lower
  bound of its last ``memory`` positives' probabilities
  (:func:`recall_threshold`): a future window with an arrival gets a
  probability below it with probability <= ``alpha`` (recall >= 1 - alpha
  per pool), whatever the global threshold was tuned for.
* **Realized precision, online.** Of the resolved records predicted "yes"
  (with the threshold in force when they were made), the share that saw an
  arrival, per pool and window over the last ``memory``; and the share of
  positives predicted "yes" (realized recall). Reported, not used to decide.
* **Cold pools.** A pool and window with too few scores for the quantile
  (fewer than ``ceil(1 / alpha) - 1`` positives or load scores) is *cold*.
  With ``cold="reserve"`` its bound is infinite (SIA then reserves its whole
  unused quota in that window: it lends only what is certain) and its
  threshold 0 (every window is predicted to see an arrival); with
  ``cold="registered"`` it keeps the uncalibrated answers (the sliding max,
  the model's registered threshold) until it is warm.
* **Per-pool miss rates** (:meth:`PoolCalibration.set_pool_alpha`, optional). A caller may
  give each pool its own miss rate (SIA's risk budget with ``risk_arrival_cost``: a busier
  pool, whose miss delays more jobs, gets a smaller one). The bounds and thresholds are then
  read from the same rings at the pool's rate when asked for; the rings themselves do not
  depend on the rate.

Bookkeeping. The arrivals of all pools are kept in one list in submission order
(:class:`_Timeline`), with each pool's cumulative GPUs at every point of the grid as one row
(built when first read). A grid record's load score reads its ``n_windows + 2`` rows, and only
the pools whose cumulative GPUs grew over its window score; a forecast's labels (made at a
grid time, as SIA's ticks are) compare two rows, or else take one slice of the list. Every
read sees exactly the arrivals absorbed before it, so the floats are those of the per-pool
searches the calibration made before (:class:`_Arrivals`, still used for a window that is not a
whole number of grid steps and when arrivals come out of submission order, and the reference
of the tests). The rings of recent values are kept sorted (:class:`~sia.models.rings.RingBank`),
each ring's order statistic read from a rank table as it moves, and the per-record loops over the
grid's rows (the load scores, an arrival record's positives) and the rows themselves are
compiled (:mod:`sia.models.rings`: the same operations in the same order, the same floats).
A forecast makes one compiled call per side: :meth:`PoolCalibration.load_bound` scores every
window's due records at once (:func:`~sia.models.rings.score_windows`), and
:meth:`PoolCalibration.arrivals` resolves every window's due records, writes its answer and
appends the new record at once (:func:`~sia.models.rings.resolve_rows`). The open records are
kept in arrays (one per forecast slot, all windows, each window reading from its own index) and
the precision and recall flags in fixed rings (:class:`~sia.models.rings.FlagBank`). What a
call cannot do from the rows (rows to drop first, a record off the grid, the per-pool searches)
it leaves untouched to the per-window and per-record Python it replaced, which goes on from there.
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from typing import Any

import numpy as np
from sia.data.errors import ConfigError
from sia.models.rings import (
    FlagBank,
    RingBank,
    append_arrivals,
    fill_rows,
    fold_record,
    label_rows,
    resolve_rows,
    score_rows,
    score_windows,
)

#: The grid of records (s): SIA's tick.
GRID_S = 300.0
#: Default miss rate per pool and window (both sides): chosen on training weeks (see the README).
DEFAULT_ALPHA = 0.1
#: Default number of recent records per pool and window that calibrate (a day of ticks).
DEFAULT_MEMORY = 288
#: Default days of the trace before the replay whose arrivals calibrate the load bounds at start.
DEFAULT_PRIOR_DAYS = 7.0
#: Records per window and call up to which the load scores are computed point by point.
_FEW = 8
#: Grid rows kept before the timeline drops those no window reads again.
_KEEP_ROWS = 8192


def conformal_upper(scores: Sequence[float] | np.ndarray, alpha: float) -> float:
    """Return the split-conformal upper bound of ``scores`` at miss rate ``alpha``.

    The ``ceil((n + 1)(1 - alpha))``-th smallest of the ``n`` scores; +inf when
    that rank exceeds ``n`` (too few scores: no finite bound is valid). If the
    scores and a new one are exchangeable, P(new > bound) <= alpha.
    """
    s = np.asarray(scores, dtype=np.float64)
    n = s.size
    rank = math.ceil((n + 1) * (1.0 - alpha) - 1e-12)
    if rank > n:
        return math.inf
    return float(np.partition(s, rank - 1)[rank - 1])


def recall_threshold(positive_probs: Sequence[float] | np.ndarray, alpha: float) -> float:
    """Return the conformal lower bound of the positives' probabilities at miss rate ``alpha``.

    The ``floor(alpha (n + 1))``-th smallest of the ``n`` probabilities; 0 when
    that rank is 0 (too few positives: predict every window positive). If they
    and a new positive's probability are exchangeable, P(new < threshold) <= alpha.
    """
    p = np.asarray(positive_probs, dtype=np.float64)
    rank = math.floor(alpha * (p.size + 1) + 1e-12)
    if rank < 1:
        return 0.0
    return float(np.partition(p, rank - 1)[rank - 1])


def cold_reserve(cold: str) -> bool:
    """Return True when a cold pool reserves its unused quota (``cold="reserve"``)."""
    return cold == "reserve"


class _Arrivals:
    """Per-pool arrival times and cumulative GPUs, appended in arrival order."""

    def __init__(self, n_pools: int):
        self.sub = [np.empty(64) for _ in range(n_pools)]
        self.cum = [np.empty(64) for _ in range(n_pools)]
        self.n = [0] * n_pools
        self.latest = [-math.inf] * n_pools  # each pool's latest submission so far
        # the same as Python lists: a few points at a time are read faster by bisect
        self.subl: list[list[float]] = [[] for _ in range(n_pools)]
        self.cuml: list[list[float]] = [[] for _ in range(n_pools)]

    def add(self, pool: int, t: float, gpus: float) -> None:
        n = self.n[pool]
        if n == self.sub[pool].size:
            self.sub[pool] = np.resize(self.sub[pool], 2 * n)
            self.cum[pool] = np.resize(self.cum[pool], 2 * n)
        c = gpus + (self.cuml[pool][-1] if n else 0.0)
        self.sub[pool][n] = t
        self.cum[pool][n] = c
        self.n[pool] = n + 1
        self.latest[pool] = t
        self.subl[pool].append(t)
        self.cuml[pool].append(c)

    def cum_one(self, pool: int, x: float) -> float:
        """:meth:`cum_at` of one point."""
        i = bisect_right(self.subl[pool], x)
        return self.cuml[pool][i - 1] if i else 0.0

    def cum_at(self, pool: int, x: np.ndarray) -> np.ndarray:
        """Return the GPUs of the pool's arrivals with submit <= x, per x."""
        n = self.n[pool]
        if n == 0:
            return np.zeros(np.shape(x))
        idx = np.searchsorted(self.sub[pool][:n], x, side="right")
        return np.where(idx > 0, self.cum[pool][:n][np.maximum(idx - 1, 0)], 0.0)


def _grid_count(t: float, t_end: float) -> int:
    """The number of grid records from ``t`` to ``t_end``: ``np.arange(t, t_end + 1e-9,
    GRID_S).size``, computed as numpy does (the ceiling of the span over the step)."""
    return math.ceil((t_end + 1e-9 - t) / GRID_S)


class _Timeline:
    """Every arrival of the replay's pools in one list, in arrival order, and the pools'
    cumulative GPUs at the points of the 5-minute grid: row ``j`` holds, per pool, the GPUs of
    the arrivals with submit <= ``origin + j GRID_S``, the same floats as :class:`_Arrivals`'
    (each pool's GPUs added one by one in arrival order). What the calibration reads at a grid
    time is then one row for all pools, and the pools with an arrival in ``(t, t + w]`` one
    slice of the list, as long as the submissions come in order (``sorted``; otherwise the
    calibration falls back to :class:`_Arrivals`). A row is built when first read, from the
    arrivals absorbed by then; an arrival absorbed later with a submission at or before a built
    row's time drops the rows from there on (they are built again), so every read sees exactly
    the arrivals absorbed before it, as a search in :class:`_Arrivals` would. The rows are one
    array (``rows``: row ``j`` at ``j - base``), built by the compiled
    :func:`~sia.models.rings.fill_rows`."""

    def __init__(self, n_pools: int, origin: float):
        # the arrivals (the first ``n`` entries): submission, pool, GPUs (as the float it equals)
        self.n = 0
        self.sub_np = np.empty(1024)
        self.pool_np = np.empty(1024, dtype=np.int64)
        self.gpus_np = np.empty(1024)
        self.sorted = True
        self.n_pools = n_pools
        self.origin = origin
        self.rows = np.zeros((64, n_pools))
        self.base = 0  # the grid index of rows[0] (rows never read again are dropped)
        self.n_rows = 0  # grid rows built: indices base .. n_rows - 1
        self.running = np.zeros(n_pools)  # cumulative GPUs at the last built row
        self.ptr = 0  # arrivals counted in ``running``

    def add(self, sub: list[float], pool: list[int], gpus: list[float]) -> bool:
        """Append a batch of arrivals (in arrival order); return whether all came in order."""
        return self.add_from(np.asarray(sub, dtype=np.float64), np.asarray(pool, dtype=np.int64),
                             np.asarray(gpus, dtype=np.float64), 0, len(sub))

    def add_from(self, sub: np.ndarray, pool: np.ndarray, gpus: np.ndarray, lo: int, hi: int
                 ) -> bool:
        """Append arrivals ``lo .. hi - 1`` of the columns ``sub``, ``pool`` and ``gpus`` (a
        trace's, in arrival order), copied by one compiled call (:func:`append_arrivals`);
        return whether all came in order."""
        n, m = self.n, hi - lo
        if m <= 0:
            return self.sorted
        if n + m > self.pool_np.size:
            size = 2 * (n + m)
            self.sub_np, self.pool_np, self.gpus_np = (
                np.resize(self.sub_np, size), np.resize(self.pool_np, size),
                np.resize(self.gpus_np, size))
        in_order = append_arrivals(sub, pool, gpus, lo, hi, self.sub_np, self.pool_np,
                                   self.gpus_np, n)
        if self.sorted:  # (what follows reads only the first n arrivals: those before)
            first = float(self.sub_np[n])
            if (n and first < self.sub_np[n - 1]) or not in_order:
                self.sorted = False
            elif self.n_rows and first <= self.origin + (self.n_rows - 1) * GRID_S:
                self._rewind(first)
        self.n = n + m
        return self.sorted

    def columns(self, lo: int = 0) -> tuple[list[float], list[int], list[float]]:
        """The arrivals from ``lo`` on as Python lists: submissions, pools, GPUs."""
        n = self.n
        return (self.sub_np[lo:n].tolist(), self.pool_np[lo:n].tolist(),
                self.gpus_np[lo:n].tolist())

    def _rewind(self, s: float) -> None:
        """Drop the built rows at grid times >= ``s`` (an arrival submitted then came late)."""
        n = self.n_rows
        while n and self.origin + (n - 1) * GRID_S >= s:
            n -= 1
        self.n_rows = n
        if n > self.base:
            x = self.origin + (n - 1) * GRID_S
            self.running = self.rows[n - 1 - self.base].copy()
            self.ptr = int(np.searchsorted(self.sub_np[:self.n], x, side="right"))
            return
        self.base = n  # before the rows kept: count again from the first arrival, in order
        running, g = [0.0] * self.n_pools, 0
        x = self.origin + (n - 1) * GRID_S
        sub, pool, gpus = self.columns()
        while n and g < len(sub) and sub[g] <= x:
            running[pool[g]] += gpus[g]
            g += 1
        self.running, self.ptr = np.array(running), g

    def compact(self, keep_from: int) -> None:
        """Drop the built rows before index ``keep_from`` (no window reads them again)."""
        drop = min(keep_from, self.n_rows) - self.base
        if drop > 0:
            kept = self.n_rows - self.base - drop
            self.rows[:kept] = self.rows[drop:drop + kept]
            self.base += drop

    def fill(self, j_hi: int) -> None:
        """Build the grid rows up to index ``j_hi``."""
        if j_hi < self.n_rows:
            return
        need = j_hi + 1 - self.base
        if need > self.rows.shape[0]:
            grown = np.zeros((max(need, 2 * self.rows.shape[0]), self.n_pools))
            grown[:self.n_rows - self.base] = self.rows[:self.n_rows - self.base]
            self.rows = grown
        # the same sums, in the same order, as _Arrivals
        self.ptr = fill_rows(self.rows, self.n_rows - self.base, self.n_rows, j_hi, self.origin,
                             GRID_S, self.sub_np, self.pool_np, self.gpus_np, self.ptr,
                             self.n, self.running)
        self.n_rows = j_hi + 1

    def pools_in(self, lo: float, hi: float) -> list[int]:
        """Return the pools with an arrival submitted in ``(lo, hi]``."""
        a, b = np.searchsorted(self.sub_np[:self.n], (lo, hi), side="right").tolist()
        if b - a <= 16:
            return list(set(self.pool_np[a:b].tolist()))
        mark = np.zeros(self.n_pools, dtype=bool)
        mark[self.pool_np[a:b]] = True
        return np.flatnonzero(mark).tolist()


class PoolCalibration:
    """Online per-pool calibration of arrivals and load for one replay (see the module doc).

    ``windows_s``: SIA's windows (s); ``n_windows``: the sliding max's windows
    (the base of the load bound); ``alpha``: the miss rate per pool and window;
    ``memory``: records kept per pool and window; ``prior_days``: days before the
    replay whose arrivals calibrate the load bounds at its start; ``cold``: what a
    cold pool answers (``"reserve"`` or ``"registered"``, see the module doc). Call
    :meth:`prime` (optional) and :meth:`reset`, then :meth:`arrivals` and
    :meth:`load_bound` with the view at each forecast.
    """

    def __init__(self, windows_s: Sequence[float], *, n_windows: int = 3,
                 alpha: float = DEFAULT_ALPHA, memory: int = DEFAULT_MEMORY,
                 prior_days: float = DEFAULT_PRIOR_DAYS, cold: str = "reserve",
                 name: str = "sia"):
        if not (isinstance(alpha, int | float) and 0.0 < alpha < 1.0):
            raise ConfigError(f"policy {name!r}: calibration_alpha must be in (0, 1), not "
                              f"{alpha!r}")
        if not (isinstance(memory, int) and not isinstance(memory, bool) and memory >= 2):
            raise ConfigError(f"policy {name!r}: calibration_memory must be a whole number of "
                              f"records >= 2, not {memory!r}")
        if not (isinstance(prior_days, int | float) and prior_days >= 0):
            raise ConfigError(f"policy {name!r}: calibration_prior_days must be >= 0 days, not "
                              f"{prior_days!r}")
        if not (isinstance(n_windows, int) and not isinstance(n_windows, bool) and n_windows >= 1):
            raise ConfigError(f"policy {name!r}: the load estimate's n_windows (the sliding "
                              f"max's windows) must be a whole number >= 1, not {n_windows!r}")
        if cold not in ("reserve", "registered"):
            raise ConfigError(f"policy {name!r}: calibration_cold must be 'reserve' or "
                              f"'registered', not {cold!r}")
        self.cold = cold
        self.windows_s = tuple(float(w) for w in windows_s)
        self.n_windows = int(n_windows)
        self.alpha = float(alpha)
        self.memory = int(memory)
        self.prior_days = float(prior_days)
        self._prior: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
        self._prior_names: tuple[str, ...] = ()
        self._alpha_p: list[float] | None = None  # per-pool miss rates (set_pool_alpha)

    # ------------------------------------------------------------------ life cycle
    def prime(self, submit: np.ndarray, gpus: np.ndarray, pool_names: Sequence[str]) -> None:
        """Keep the jobs submitted before the replay (submit s, GPUs, pool name per job)."""
        order = np.argsort(np.asarray(submit, dtype=np.float64), kind="stable")
        self._prior = (np.asarray(submit, dtype=np.float64)[order],
                       np.asarray(gpus, dtype=np.float64)[order],
                       np.asarray(list(pool_names), dtype=object)[order])

    def reset(self, pool_names: Sequence[str], start: float) -> None:
        """Forget the replay's records; the replay's pools and its first submission ``start`` (s).

        The prior jobs of the replay's pools submitted in the last ``prior_days``
        before ``start`` are added, and the grid starts there.
        """
        P, K = len(pool_names), len(self.windows_s)
        self.n_pools = P
        self.pool_names = tuple(pool_names)
        first = start
        if self._prior is not None and self.prior_days > 0:
            first = start - self.prior_days * 86400.0
        # the load side: next grid time to score per window, scores per pool and window
        t0 = math.ceil(first / GRID_S) * GRID_S
        self._grid_setup(t0)
        self._arr: _Arrivals | None = None if all(self._steps) else _Arrivals(P)
        if self._prior is not None and self.prior_days > 0:
            sub, g, names = self._prior
            index = {name: i for i, name in enumerate(pool_names)}
            keep = (sub >= first) & (sub < start)
            rows = [(t, index.get(name), gp) for t, gp, name in
                    zip(sub[keep].tolist(), g[keep].tolist(), names[keep].tolist(), strict=True)]
            rows = [r for r in rows if r[1] is not None]
            self._add([r[0] for r in rows], [r[1] for r in rows], [float(r[2]) for r in rows])
        self._seen = 0  # replay jobs added
        # the windows (s) and each one's next grid record (float64: the compiled loops move
        # them); the windows' grid steps and next arrival record to resolve (_arrival_setup):
        # two arrays of rows, as the compiled loops take them (each array costs a call)
        self._wn = np.array([self.windows_s, [t0] * K], dtype=np.float64).reshape(2, K)
        self._wins, self._next_t = self._wn
        self._sd = np.zeros((2, K), dtype=np.int64)
        self._sd[0] = self._steps
        self._steps_np = self._sd[0]
        # the load scores and the positives' probabilities: ring p * K + k per pool and window
        self._sc = RingBank(P * K, self.memory)
        self._q = np.full((P, K), math.inf if cold_reserve(self.cold) else 0.0)
        self._arrival_setup(P, K)
        self.stats = {"load_scores": 0, "arrival_records": 0, "arrival_resolved": 0}
        # the rows' offsets each grid record reads (t + i w, i = -n_windows .. 1)
        self._offs = np.array([[m * i for i in range(-self.n_windows, 2)] for m in self._steps],
                              dtype=np.int64).reshape(K, self.n_windows + 2)
        self._grid = any(self._steps)  # some window on the grid: rows to read
        self._reach = max(self._steps, default=0)  # the most rows a window spans
        self._cold_q = math.inf if cold_reserve(self.cold) else 0.0  # "registered": sliding max
        # the ranks of conformal_upper / recall_threshold per number of values (<= memory)
        a = self.alpha
        self._rank_up = np.array([math.ceil((n + 1) * (1.0 - a) - 1e-12)
                                  for n in range(self.memory + 1)], dtype=np.int64)
        self._rank_lo = np.array([math.floor(a * (n + 1) + 1e-12)
                                  for n in range(self.memory + 1)], dtype=np.int64)
        self._calib_start = first
        self._last_now = first

    def _arrival_setup(self, P: int, K: int) -> None:
        """The arrival side's state: the open records, the positives' rings and thresholds,
        the precision and recall rings."""
        self._slot = -math.inf
        # the records (one per forecast slot, all windows): the first _n_rec of _rec_t (t),
        # _rec_p (the model's P(arrival) [K, P]) and _rec_y (the "yes" [K, P]); window k's
        # next one to resolve (at t + w) is _done[k]
        self._rec_t = np.empty(256)
        self._rec_p = np.empty((256, K, P))
        self._rec_y = np.empty((256, K, P), dtype=bool)
        self._n_rec = 0
        self._done = self._sd[1]
        self._done[:] = 0
        self._pb = RingBank(P * K, self.memory)
        self._thr = np.zeros((P, K))
        self._cold = np.ones((P, K), dtype=bool)  # too few positives for a threshold
        # of the positives, whether said "yes" (recall: ring p * K + k); of the "yes", whether
        # one arrived (precision: ring P * K + p * K + k); the last `memory` of each
        self._flags = FlagBank(2 * P * K, self.memory)

    def _grid_setup(self, t0: float) -> None:
        """The grid's rows (:class:`_Timeline`) start early enough for the sliding max's windows
        of the first record; a window that is not a whole number of grid steps (or a grid too
        far from 0 for exact integer times) is scored by :class:`_Arrivals` instead."""
        steps = [int(w // GRID_S) if w > 0 and w % GRID_S == 0 else 0 for w in self.windows_s]
        reach = self.n_windows * max(steps, default=0)
        origin = t0 - reach * GRID_S
        if not (math.isfinite(origin) and abs(origin) < 2.0**50 and abs(t0) < 2.0**50
                and max(self.windows_s, default=0.0) < 2.0**40):
            steps = [0] * len(steps)
        self._steps = steps
        self._tl = _Timeline(self.n_pools, origin)

    def _add(self, sub: list[float], pool: list[int], gpus: list[float]) -> None:
        """Add a batch of arrivals, in arrival order, to the timeline (and :class:`_Arrivals`
        when a window or the arrivals' order needs it)."""
        self._added(self._tl.add(sub, pool, gpus), self._tl.n - len(sub))

    def _added(self, in_order: bool, lo: int) -> None:
        """After the timeline took in arrivals ``lo`` on (``in_order``: all so far in
        submission order), add them to :class:`_Arrivals` when it is kept, or start keeping it
        when the order broke."""
        if not in_order and self._arr is None:
            self.per_pool_searches()  # out of order: searches per pool from now on
        elif self._arr is not None:
            for t, p, g in zip(*self._tl.columns(lo), strict=True):
                self._arr.add(p, t, g)

    def per_pool_searches(self) -> None:
        """Answer from searches pool by pool in :class:`_Arrivals` from now on, not from the
        timeline (the reference the timeline is tested against; also what arrivals out of
        submission order fall back to)."""
        tl = self._tl
        tl.sorted = False
        if self._arr is None:
            self._arr = _Arrivals(self.n_pools)
            for t, p, g in zip(*tl.columns(), strict=True):
                self._arr.add(p, t, g)

    def _absorb(self, view: Any) -> float:
        """Add the replay's arrivals up to now; return now (s)."""
        hi = int(view.n_arrived)
        if hi > self._seen:
            trace, lo, tl = view.trace, self._seen, self._tl
            if hi > len(trace.submit):  # (the compiled copy reads the columns unchecked)
                raise ValueError(f"the view's n_arrived ({hi}) exceeds the trace's "
                                 f"{len(trace.submit)} jobs")
            # (an int GPU count is added as the float it equals: a pool's sums are the same
            # floats as _Arrivals')
            n = tl.n
            self._added(tl.add_from(trace.submit, trace.pool, trace.num_gpus, lo, hi), n)
            self._seen = hi
        now = float(view.now)
        if now > self._last_now:
            self._last_now = now
        return now

    # ------------------------------------------------------------------ load
    def _score_load(self, now: float) -> None:
        """Score every grid record whose window has passed by ``now`` and update the bounds of
        the rings given new scores. On the grid, all windows in one compiled call
        (:func:`~sia.models.rings.score_windows`: :meth:`_score_grid`'s reads of the same rows,
        built first up to ``now``, which every window's last record reads); it leaves to
        :meth:`_score_from` the window where rows are to be dropped first (or a window off the
        grid) and those after it."""
        k0, tl = 0, self._tl
        if tl.sorted:
            j = self._row_at(now)
            if j >= tl.n_rows:
                tl.fill(j)
            sc = self._sc
            k0, new = score_windows(now, self._wn, self._sd, tl.rows,
                                    tl.base, tl.n_rows, tl.origin, GRID_S, _KEEP_ROWS, self._offs,
                                    sc.vs, sc.hc, self._q, self._rank_up, self._cold_q)
            self.stats["load_scores"] += new
            if k0 < 0:
                return
        self._score_from(now, k0)

    def _row_at(self, now: float) -> int:
        """The last grid row at or before ``now`` (-1: none, or no row on the grid)."""
        if not self._grid or not now >= self._tl.origin:
            return -1
        return int((now - self._tl.origin) // GRID_S)

    def _score_from(self, now: float, k0: int) -> None:
        """Score windows ``k0`` on, one by one (:meth:`_score_grid` or, off the grid or with the
        arrivals out of order, :meth:`_score_window`)."""
        dirty: set[tuple[int, int]] = set()
        for k in range(k0, len(self.windows_s)):
            w = self.windows_s[k]
            t_end = now - w
            nt = float(self._next_t[k])
            if nt > t_end:
                continue
            if self._steps[k] and self._tl.sorted:  # integer grid times: exact arithmetic
                n = _grid_count(nt, t_end)
                if n <= 0:
                    continue
                self._next_t[k] = nt + n * GRID_S
                self._score_grid(k, int((nt - self._tl.origin) // GRID_S), n)
                continue
            ts = np.arange(nt, t_end + 1e-9, GRID_S)
            if ts.size:
                self._next_t[k] = float(ts[-1]) + GRID_S
                self._score_window(k, w, ts, dirty)
        if not dirty:
            return
        cold_q = math.inf if cold_reserve(self.cold) else 0.0  # "registered": the sliding max
        K = len(self.windows_s)
        for p, k in dirty:
            srt = self._sc.sorted(p * K + k)
            r = int(self._rank_up[srt.size])  # conformal_upper: +inf (cold) past the last
            self._q[p, k] = srt[r - 1] if r <= srt.size else cold_q

    def _score_grid(self, k: int, j0: int, n: int) -> None:
        """Score window ``k``'s ``n`` grid records from row ``j0`` on, from the timeline's rows
        (:func:`~sia.models.rings.score_rows`): a pool scores where its cumulative GPUs grew
        over ``(t, t + w]``, with the same differences and maxima as :meth:`_score_window`'s
        (the same floats); its bound is updated at once."""
        tl, m, nw = self._tl, self._steps[k], self.n_windows
        if tl.n_rows - tl.base > _KEEP_ROWS:  # drop the rows no window reads again
            tl.compact(min(min(self._row(i) - nw * self._steps[i]
                               for i in range(len(self._steps))), j0 - nw * m))
        tl.fill(j0 + n - 1 + m)
        sc = self._sc
        self.stats["load_scores"] += score_rows(
            tl.rows, j0 - tl.base, n, self._offs[k], sc.vs, sc.hc, k, len(self.windows_s), self._q,
            k, self._rank_up, self._cold_q)

    def _row(self, k: int) -> int:
        """The grid row of window ``k``'s next record (a huge index for a window scored
        without the grid: it keeps no row)."""
        if not self._steps[k]:
            return 1 << 62
        return int((float(self._next_t[k]) - self._tl.origin) // GRID_S)

    def _score_window(self, k: int, w: float, ts: np.ndarray, dirty: set[tuple[int, int]]) -> None:
        """Score window ``k``'s grid records at ``ts`` pool by pool from :class:`_Arrivals`."""
        arr, nw = self._arr, self.n_windows
        few = ts.size <= _FEW and ts.tolist()
        for p in range(self.n_pools):
            if arr.latest[p] <= ts[0]:
                continue  # nothing arrived in any (t, t + w]: no record saw an arrival
            if few:  # one record per tick: the same values point by point
                self._score_few(p, k, few, w, dirty)
                continue
            edges = arr.cum_at(p, ts[:, None] + w * np.arange(-nw, 2)[None, :])
            # edges[:, i] = cum(t + (i - nw) w): the sliding max's windows, then (t, t + w]
            loads = np.diff(edges, axis=1)
            realized = loads[:, -1]
            base = loads[:, :-1].max(axis=1)
            got = realized > 0
            if got.any():
                for v in (realized[got] - base[got]).tolist():
                    self._sc.push(p * len(self.windows_s) + k, v)
                dirty.add((p, k))
                self.stats["load_scores"] += int(got.sum())

    def _score_few(self, p: int, k: int, ts: list[float], w: float,
                   dirty: set[tuple[int, int]]) -> None:
        """:meth:`_score_window`'s scores of pool ``p`` and window ``k`` at the grid times
        ``ts``, in Python floats (the same operations as the arrays')."""
        one, nw = self._arr.cum_one, self.n_windows
        new = []
        for t in ts:
            c = [one(p, t + w * i) for i in range(-nw, 2)]
            realized = c[-1] - c[-2]
            if realized > 0:
                new.append(realized - max(c[i + 1] - c[i] for i in range(nw)))
        for v in new:
            self._sc.push(p * len(self.windows_s) + k, v)
        if new:
            dirty.add((p, k))
            self.stats["load_scores"] += len(new)

    def load_bound(self, view: Any, base: np.ndarray) -> np.ndarray:
        """Return float [pools, windows]: the conformal upper bounds on the load (GPUs) given
        the sliding max ``base`` [pools, windows] at ``view.now`` (+inf: a cold pool)."""
        self._score_load(self._absorb(view))
        q = self._q if self._alpha_p is None else self._per_pool()[0]
        return np.maximum(np.asarray(base, dtype=np.float64) + q, 0.0)

    # ------------------------------------------------------------------ per-pool miss rates
    def set_pool_alpha(self, alpha: Sequence[float] | np.ndarray | None) -> None:
        """Use miss rate ``alpha[p]`` (each in (0, 1)) for pool ``p`` from the next answer on,
        in both bounds (None: :attr:`alpha` for every pool). Raises ValueError on a rate
        outside (0, 1)."""
        if alpha is None:
            self._alpha_p = None
            return
        a = np.asarray(alpha, dtype=np.float64).ravel()
        if not np.all((a > 0.0) & (a < 1.0)):
            raise ValueError(f"per-pool miss rates must be in (0, 1), got {a.tolist()}")
        self._alpha_p = a.tolist()

    def _per_pool(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Return (load offsets q, thresholds, cold) [pools, windows] at the per-pool miss
        rates: the same order statistics of the same rings as at :attr:`alpha`
        (:func:`conformal_upper`, :func:`recall_threshold`), at each pool's rank."""
        alphas = self._alpha_p
        if alphas is None or len(alphas) != self.n_pools:
            raise ValueError(f"per-pool miss rates for {self.n_pools} pools needed, got "
                             f"{None if alphas is None else len(alphas)}")
        cold_q = math.inf if cold_reserve(self.cold) else 0.0
        q, thr = self._q.copy(), self._thr.copy()
        cold = self._cold.copy()
        K = len(self.windows_s)
        for p, a in enumerate(alphas):
            for k in range(K):
                srt = self._sc.sorted(p * K + k)
                r = math.ceil((srt.size + 1) * (1.0 - a) - 1e-12)
                q[p, k] = srt[r - 1] if r <= srt.size else cold_q
                pos = self._pb.sorted(p * K + k)
                r = math.floor(a * (pos.size + 1) + 1e-12)
                thr[p, k] = pos[r - 1] if r >= 1 else 0.0
                cold[p, k] = r < 1
        return q, thr, cold

    # ------------------------------------------------------------------ arrivals
    def _resolve_arrivals(self, now: float, proba: np.ndarray | None = None,
                          yes: np.ndarray | None = None, record: bool = False) -> None:
        """Resolve the records whose window has passed by ``now``; update the thresholds of the
        pools given new positives, and the precision and recall rings. The records labelled
        from the grid's rows (a forecast at a grid time, the rows it reads built first) are
        resolved in one compiled call (:func:`~sia.models.rings.resolve_rows`: :meth:`_label`'s
        :func:`~sia.models.rings.label_rows` on the same rows, then
        :func:`~sia.models.rings.fold_record`); it stops at a record labelled otherwise, which
        :meth:`_resolve_one` resolves before it goes on. Given ``proba``, the same call then
        writes the answer ``yes = proba >= thresholds`` and, if ``record``, appends the record
        (:meth:`arrivals`' default case, room made)."""
        tl, n = self._tl, self._n_rec
        if not n and proba is None:
            return
        grid = tl.sorted and self._grid
        if grid and n:  # the rows the records read: up to the last one's t + w, not after now
            j = min(self._row_at(now), self._row_at(float(self._rec_t[n - 1])) + self._reach)
            if j >= tl.n_rows:
                tl.fill(j)
        pb, fl = self._pb, self._flags
        answer = 0 if proba is None else 2 if record else 1
        while True:
            k, new = resolve_rows(now, self._wn, self._sd, grid, n,
                                  self._rec_t, self._rec_p, self._rec_y, tl.rows, tl.base,
                                  tl.n_rows, tl.origin, GRID_S, pb.vs, pb.hc, self._thr,
                                  self._cold, self._rank_lo, fl.fm,
                                  self._thr if proba is None else proba,
                                  self._cold if yes is None else yes, answer)
            self.stats["arrival_resolved"] += new
            if k < 0:
                return
            self._resolve_one(k)

    def _resolve_one(self, k: int) -> None:
        """Resolve window ``k``'s next record with :meth:`_label` and fold it."""
        i, K = int(self._done[k]), len(self.windows_s)
        label = self._label(k, float(self._rec_t[i]), self.windows_s[k], self._rec_p[i, k])
        fold_record(self._rec_y[i, k], label, k, K, self._flags.fm)
        self._done[k] = i + 1
        self.stats["arrival_resolved"] += 1

    def _label(self, k: int, t: float, w: float, probs: np.ndarray) -> np.ndarray:
        """Return bool [pools]: the pools with an arrival in ``(t, t + w]``; push each one's
        probability ``probs[p]`` into its ring and update its threshold. Where the cumulative
        GPUs grew between the timeline's rows at ``t`` and ``t + w`` when ``t`` is a grid time
        (SIA's forecasts come at its ticks: :func:`~sia.models.rings.label_rows`), else from
        the timeline's list or the per-pool searches."""
        tl, m, K = self._tl, self._steps[k], len(self.windows_s)
        pb, label = self._pb, np.empty(self.n_pools, dtype=bool)
        j = round((t - tl.origin) / GRID_S) if m and tl.sorted else -1
        if j >= tl.base and tl.origin + j * GRID_S == t:
            tl.fill(j + m)
            label_rows(tl.rows, j - tl.base, j + m - tl.base, probs, pb.vs, pb.hc, k, K,
                       self._thr, self._cold, k, self._rank_lo, label)
            return label
        label[:] = False
        pos = tl.pools_in(t, t + w) if tl.sorted else self._positives(t, t + w)
        for p in pos:
            label[p] = True
            pb.push(p * K + k, probs[p])
            r = int(self._rank_lo[pb.count(p * K + k)])  # recall_threshold: 0 (cold) below 1
            self._thr[p, k] = pb.sorted(p * K + k)[r - 1] if r >= 1 else 0.0
            self._cold[p, k] = r < 1
        return label

    def _positives(self, lo: float, hi: float) -> list[int]:
        """The pools with an arrival in ``(lo, hi]``, searched pool by pool (:class:`_Arrivals`)."""
        arr = self._arr
        return [p for p in range(self.n_pools)
                if arr.latest[p] > lo and arr.cum_one(p, hi) > arr.cum_one(p, lo)]

    def _record(self, now: float, proba: np.ndarray, yes: np.ndarray) -> None:
        """Append a record (copies of ``proba`` and ``yes`` per window) after the open ones."""
        n = self._room()
        self._rec_t[n] = now
        self._rec_p[n] = proba.T
        self._rec_y[n] = yes.T
        self._n_rec = n + 1

    def _room(self) -> int:
        """Make room for one more record: when the arrays are full, drop the records every
        window has resolved (or double them); return the next record's index."""
        n = self._n_rec
        if n == self._rec_t.size:
            lo = int(self._done.min())
            if lo == 0:  # all open: twice the room
                self._rec_t, self._rec_p, self._rec_y = (
                    np.resize(a, (2 * n,) + a.shape[1:])
                    for a in (self._rec_t, self._rec_p, self._rec_y))
            else:
                for a in (self._rec_t, self._rec_p, self._rec_y):
                    a[:n - lo] = a[lo:n]
                self._done -= lo
                n -= lo
                self._n_rec = n
        return n

    def arrivals(self, view: Any, proba: np.ndarray,
                 registered: np.ndarray | None = None) -> np.ndarray:
        """Return bool [pools, windows]: ``proba`` (the model's P(arrival) at ``view.now``) at or
        above each pool's calibrated threshold; records the forecast (one per grid slot).
        ``registered`` [windows]: the model's thresholds, which a cold pool keeps with
        ``cold="registered"`` (default 0.5)."""
        now = self._absorb(view)
        proba = np.asarray(proba, dtype=np.float64)
        slot = math.floor(now / GRID_S)
        if (self._alpha_p is None and cold_reserve(self.cold) and proba.shape == self._thr.shape
                and proba.flags.c_contiguous):  # the answer and the record in the same call
            yes = np.empty(proba.shape, dtype=bool)
            record = slot != self._slot
            if record:
                self._n_rec = self._room()
            self._resolve_arrivals(now, proba, yes, record)
            if record:
                self._slot = slot
                self._n_rec += 1
                self.stats["arrival_records"] += 1
            return yes
        self._resolve_arrivals(now)
        thr, cold = ((self._thr, self._cold) if self._alpha_p is None
                     else self._per_pool()[1:])
        if not cold_reserve(self.cold):
            reg = np.full(len(self.windows_s), 0.5) if registered is None else registered
            thr = np.where(cold, np.asarray(reg, dtype=np.float64)[None, :], thr)
        yes = proba >= thr
        if slot != self._slot:
            self._slot = slot
            self._record(now, proba, yes)
            self.stats["arrival_records"] += 1
        return yes

    # ------------------------------------------------------------------ report
    def recent(self, p: int, k: int) -> tuple[list[float], list[float]]:
        """Return pool ``p``'s and window ``k``'s recent load scores and positives'
        probabilities (the values that calibrate it), oldest first."""
        r = p * len(self.windows_s) + k
        return self._sc.values(r), self._pb.values(r)

    def thresholds(self) -> np.ndarray:
        """Return float [pools, windows]: the thresholds in force (0: cold)."""
        return self._thr.copy() if self._alpha_p is None else self._per_pool()[1]

    def precision(self) -> np.ndarray:
        """Return float [pools, windows]: realized precision of the recent "yes" (NaN: none)."""
        return self._share(len(self.windows_s) * self.n_pools)

    def recall(self) -> np.ndarray:
        """Return float [pools, windows]: share of the recent positives predicted "yes"."""
        return self._share(0)

    def _share(self, ring0: int) -> np.ndarray:
        """The share of ones in flag rings ``ring0 + p * K + k`` (NaN: none), as ``sum / len``
        of each ring's flags (whole numbers: the same float)."""
        meta = self._flags.meta[ring0:ring0 + self.n_pools * len(self.windows_s)]
        out = np.full(meta.shape[0], np.nan)
        some = meta[:, 1] > 0
        out[some] = meta[some, 2] / meta[some, 1]
        return out.reshape(self.n_pools, len(self.windows_s))

    def report(self, pool_names: Sequence[str]) -> dict[str, Any]:
        """Return what is calibrated, per pool and window (JSON-ready): the options, the days
        whose outcomes it was calibrated on (``from_day``: the first grid record, prior
        included; ``to_day``: the last forecast, days of the trace's clock), the counts, and per
        pool and window the threshold, the load bound's offset over the sliding max (None:
        infinite, a cold pool), the records behind them and the realized precision and recall
        of the recent "yes" predictions."""
        wins = [f"{round(w / 60)}m" for w in self.windows_s]
        prec, rec = self.precision(), self.recall()
        q_in, thr_in = ((self._q, self._thr) if self._alpha_p is None
                        else self._per_pool()[:2])

        def num(x: float) -> float | None:
            return None if not math.isfinite(x) else round(float(x), 4)

        pools = {}
        for p, name in enumerate(pool_names):
            pools[name] = {wk: {"threshold": num(thr_in[p, k]),
                                "load_offset_gpus": num(q_in[p, k]),
                                "load_scores": self._sc.count(p * len(wins) + k),
                                "positives": self._pb.count(p * len(wins) + k),
                                "precision": num(prec[p, k]), "recall": num(rec[p, k])}
                           for k, wk in enumerate(wins)}
        extra = {} if self._alpha_p is None else {  # the rates in force at the last answer
            "pool_alpha": {name: round(self._alpha_p[p], 6) for p, name in enumerate(pool_names)}}
        return {"alpha": self.alpha, **extra, "memory": self.memory, "prior_days": self.prior_days,
                "cold": self.cold,
                "from_day": round(self._calib_start / 86400.0, 4),
                "to_day": round(self._last_now / 86400.0, 4), **self.stats, "pools": pools}
