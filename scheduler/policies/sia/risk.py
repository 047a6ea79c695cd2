"""SIA's risk budget: lend a job only while the bound on the harm its loan may do is within budget.

The option ``risk`` of :class:`~sia.scheduler.policies.sia.policy.SiaPolicy` is
*the allowed expected number of owners' jobs that one loan delays*. Because a
loan that delays anyone delays at least one job, a budget <= 1 also bounds the
probability that a loan delays an owner's job; budgets above 1 (up to 100) are
allowed for the frontier's far end. With ``risk`` unset SIA lends
by its earlier rule (the predicted bin, or ``lend_risk``'s eps per window).

A loan of job ``j`` (pool ``p``) in window ``w`` (it must end within ``w``,
the horizon the reservations covered) can delay an owner only if it overruns
``w``. The bound on the harm is ``overrun(p, w, j) * cost``:

* **overrun(p, w, j)**, the duration side. The forecaster's
  ``q = 1 - P(duration <= w)`` puts the job in one of the bins of
  :data:`Q_EDGES`; the overrun rate of that bin is *estimated online per pool
  and window* from the outcomes of the pool's jobs that SIA considered
  (every considered job, lent or not, once started: its outcome is known when
  it ends or when it has run ``w``, never before). The estimate is
  hierarchical: a bin's rate over all pools (prior: ``prior_n`` pseudo-jobs at
  the bin's mean predicted q) is the prior of each pool's rate (``prior_n``
  pseudo-jobs again), and the bound is the ``level`` quantile of the pool's
  Beta posterior, made non-decreasing over the bins. Counts decay (each new
  outcome of a pool and window multiplies that pool's older counts by
  ``1 - 1/memory``), so a realized overrun tightens the pool at once and the
  pool recovers after a run of good outcomes.
* **cost**, the cost of a miss. An overrunning loan holds GPUs of the pools
  whose unused quota the idle GPUs are; a pool whose recent load is ``rho``
  passes one delay to the whole busy period it starts, about ``1 / (1 - rho)``
  jobs. ``cost = 1 / max(1 - rho_max, 1 / cost_cap)``, with ``rho_max`` the
  largest recent load among the pools with unused quota. A pool's recent load
  is the GPU-seconds its jobs ran during the last ``load_days`` (known online:
  a running job counts up to now) over its quota times that period. With
  ``cost_mode="expected"`` the cost is instead the expectation over the pools
  with unused quota, each weighted by its unused GPUs (the loan's GPUs drawn
  from the idle ones): ``sum_p u_p / max(1 - rho_p, 1 / cost_cap) / sum_p u_p``. With
  ``cost_mode="reclaim"`` each pool's weight is ``u_p rho_p``: a miss delays the owner who takes
  the GPUs back, and a pool reclaims its unused quota about as often as its quota is busy. The
  cost grows with the load, so this lies between the two others.

Certainty needs no budget: a job whose time limit plus Slurm's grace fits the
window, or whose duration comes from perfect information, is lendable there
at any budget (``risk=0`` lends only those). A *cold* pool (fewer than
``cold_n`` outcomes in the window, counted with the decay) lends only on
certainty: its rate is not known yet.

The arrival side (WillJobsArrive, NewLoadEstimate) is the policy's
(``risk_arrivals``, :func:`sia.scheduler.policies.sia.policy.arrival_side`): by
default each pool's reservation is its per-pool calibrated bound at miss rate
``risk / (1 + risk)``; ``risk=0`` reserves every pool's unused quota unless the
arrivals are perfect information.

Live (the service: a job's run time is unknown until it ends), an outcome is
taken at the job's end (a fit) or once it has run ``w`` (an overrun), the same
instants as a replay that knows the run times, so the same decisions.

How it is kept. The bookkeeping runs once per decision, so its cost is per call: the counts,
the snapshots each refresh takes, the prior, the rows, the pools due for a refresh and the
last answer's key are arrays, views of three buffers (floats, ints, flags: :func:`_layout`).
``allowed`` (the refresh, the last answer kept while nothing it depends on moved, the scan)
and ``resolve`` (the starts queued by ``started`` since the last one, then the outcomes) are
one compiled call each (numba), which takes the buffers and their offsets and reads only the
arrays it needs (:func:`_at`); ``allowed`` makes none when that call would return its last
answer (the same pools, version and cost, and no pool asked due). The kernels make the float
operations of the Python they replaced, in its order, so every answer is the same (the Python
stays in the tests as the reference). ``allowed`` reads a pool's bounds through the Beta cdf
(scipy's ``betainc``, called from the kernels) and keeps a window's row while a certificate
proves it unchanged (:func:`_window_certificate`).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from typing import Any

import llvmlite.binding as llvm
import numba
import numpy as np
from numba import types as nbt
from numba.extending import get_cython_function_address
from scipy.special import betainc, betaincinv
from scipy.special.cython_special import betainc as _betainc
from sia.data.errors import ConfigError
from sia.scheduler.policies.sia.recent_use import RecentUse, heap_pop, heap_push

#: SiaPolicy's default budget, with :data:`DEFAULT_RISK_MODE` (the budget as a veto on SIA's
#: own rule). Chosen on training data only (session 29, a rule written before its runs:
#: /docs/concepts/lending.md, "The budget as a veto"): among the budgets 0.3, 1, 3 and 10 under
#: the veto, those within 0.5% slowed pooled and 2% in every experiment on Philly's training
#: weeks (experiments/risk_training_weeks.yaml, days 35-56), with >= 90% of SIA's geometric
#: mean speedup without a budget and no more slowdown minutes on both Philly's weeks and
#: Graham's training days (experiments/graham_training_weeks.yaml, days 16-24), the one with
#: the fewest slowed jobs summed; it replaces "no budget" only if it slows fewer. Measured
#: (2026-11-30): no budget 270 + 37 slowed (geomean 1.87 / 1.86); veto 3: 211 + 0 (1.81 / 1.70);
#: 0.3 and 1 keep under 90% of the geomean on Philly's weeks (1.45, 1.62); 10 slows 2.28% of
#: one experiment. (Earlier, as the *replacement* of SIA's rule, the largest budget within
#: 0.5% / 2% was 0.3, and every budget cost most of the speedup: no default then.)
DEFAULT_RISK = 3.0
#: How the default budget meets SIA's rule (``risk_mode``): ``"veto"`` (see SiaPolicy).
DEFAULT_RISK_MODE = "veto"
#: Upper edges of the bins of q = P(duration > w) (the last bin is [0.3, 1)); q = 1 is "never".
Q_EDGES = (0.001, 0.01, 0.03, 0.1, 0.3, 1.0)
#: Outcomes of a pool and window after which the lazy decay is folded into the counts.
_RENORM = 2000
#: Least prior overrun rate of a bin (a tenth of the first bin's upper edge).
G_FLOOR = 1e-4
#: Bin of a certain fit (time limit, perfect information).
CERTAIN = 0
#: Bin of a job that cannot fit the window by its prediction (q >= 1).
NEVER = len(Q_EDGES) + 1


_EDGES = np.asarray(Q_EDGES)
#: Relative half-width of the bracket around a threshold t inside which :func:`quantile_within`
#: leaves the comparison "quantile <= t" to the exact quantile. scipy's ``betaincinv`` is
#: accurate to a few ulps (~1e-15 relative) where the bounds are compared; 1e-6 is a wide margin.
_BRACKET = 1e-6
#: Slack on the value of the Beta cdf (scipy's ``betainc``: ~1e-15 absolute), same purpose.
_CDF_SLACK = 1e-9
#: Thresholds below this leave every comparison to the exact quantile: a quantile that small
#: may have underflowed (to 0 or a subnormal), where no relative accuracy holds. The budget's
#: thresholds are risk / cost: 1e-5 and more for risk >= 0.001 and cost_cap = 100.
_TINY_T = 1e-12
#: Relative half-widths (in the threshold and in the prior's rates) of the boxes a window's
#: certificate may cover, widest first (:func:`_window_certificate`).
_CERT_BOXES = (0.1, 0.02, 0.002)


def largest_within(risk: float, c: float) -> float:
    """Return the largest float x with ``x * c <= risk`` in floating point (``c > 0``).

    Rounding is monotone, so for x >= 0 the product ``x * c`` (rounded) is within ``risk``
    exactly when x <= this threshold: a bound passes the budget iff it is <= the threshold."""
    t = risk / c
    while t * c > risk:
        t = math.nextafter(t, -math.inf)
    while (u := math.nextafter(t, math.inf)) * c <= risk:
        t = u
    return t


def quantile_within(a: np.ndarray, b: np.ndarray, level: float, t: float) -> np.ndarray:
    """Decide ``betaincinv(a, b, level) <= t`` from the cdf where it is safe: 1 (yes), 0 (no),
    -1 (left to the exact quantile), elementwise.

    The cdf is monotone: the ``level`` quantile is <= x exactly when ``betainc(a, b, x) >=
    level``. Both functions are computed with small errors, so the cdf is read at the edges
    of a bracket ``t (1 -+ _BRACKET)`` with a slack of ``_CDF_SLACK``: a quantile within the
    bracket (or a cdf too close to ``level`` there, or a NaN) is undecided, and so is every
    comparison with a threshold below ``_TINY_T``."""
    if t >= 1.0:  # every quantile is in [0, 1]
        return np.ones(np.shape(a), dtype=np.int8)
    if t < _TINY_T:
        return np.full(np.shape(a), -1, dtype=np.int8)
    x = np.asarray([t * (1.0 - _BRACKET), min(t * (1.0 + _BRACKET), 1.0)])
    f = betainc(np.asarray(a)[..., None], np.asarray(b)[..., None], x)
    yes = f[..., 0] >= level + _CDF_SLACK  # the true quantile is below the bracket
    no = f[..., 1] <= level - _CDF_SLACK  # ... above it
    return np.where(yes, 1, np.where(no, 0, -1)).astype(np.int8)


def cell_within(a: float, b: float, level: float, t: float) -> int:
    """:func:`quantile_within` for one cell: 1 (the ``level`` quantile of Beta(a, b) is <=
    ``t``), 0 (it is not), -1 (left to the exact quantile). scipy's scalar ``betainc``
    (``cython_special``) computes the same floats as the ufunc; the upper edge of the bracket
    is read only when the lower one does not decide (the ufunc's answer is the same)."""
    if t >= 1.0:
        return 1
    if t < _TINY_T:
        return -1
    if _betainc(a, b, t * (1.0 - _BRACKET)) >= level + _CDF_SLACK:
        return 1
    if _betainc(a, b, min(t * (1.0 + _BRACKET), 1.0)) <= level - _CDF_SLACK:
        return 0
    return -1  # (NaN too)


def q_bins(q: np.ndarray) -> np.ndarray:
    """Return the bin (1..len(Q_EDGES), NEVER for q >= 1 or NaN) of each overrun probability q.

    ``searchsorted`` orders NaN after every edge, so a NaN lands in NEVER as q = 1 does."""
    q = np.asarray(q, dtype=np.float64)
    return (np.searchsorted(_EDGES, q, side="right") + 1).astype(np.int64)


class _Prior:
    """The prior of one update (each window and bin's rate over all pools, see
    :meth:`RiskBudget._update_prior`): ``arr`` [3, K, NEVER - 1], per window and bin 1..NEVER-1
    the rate g, ``prior_n g`` and ``prior_n (1 - g)`` (0 in a window never updated), computed
    by :func:`_prior_params` from the decayed global counts at the update."""

    __slots__ = ("arr",)

    def __init__(self, arr: np.ndarray):
        self.arr = arr

    def row(self, k: int) -> tuple[list[float], list[float], list[float]]:
        """Return window ``k``'s (rates g, prior_n g, prior_n (1 - g)) over bins 1..NEVER-1."""
        return self.arr[0, k].tolist(), self.arr[1, k].tolist(), self.arr[2, k].tolist()


def _layout(P: int, K: int, R: int) -> tuple[tuple[tuple[str, tuple[int, ...]], ...], ...]:
    """The budget's state as three buffers (floats, ints, flags): each a sequence of named
    arrays (P pools, K windows, R weights; their places: ``_PLACE``). The kernels take the
    three buffers and their offsets (four arrays, whatever the state): a compiled call pays
    for each array it is given, and a kernel takes from them only the arrays it reads
    (:func:`_at`)."""
    B1, B = NEVER + 1, NEVER - 1
    floats = (("nm", (2, P, K, B1)), ("snap_nm", (2, P, K, B1)), ("snap_f", (P, K)),
              ("snap_ab", (P, 3, K, B)), ("row_c", (P,)), ("cert", (P, K, 3 + B)),
              ("g3", (3, K, B1)), ("prior", (3, K, B)), ("wpow", (R,)), ("gwpow", (R,)),
              ("w", (K,)), ("bt", (P,)), ("memo_c", (2,)), ("gpos", (R,)), ("prior_f", (K,)),
              ("edges", (B,)))
    ints = (("t", (P, K)), ("seen", (P, K)), ("gseen", (K,)), ("gt", (K,)), ("pool_ver", (P,)),
            ("row_ver", (P,)), ("rows", (P, K)), ("cert_i", (P, K, 2)), ("snap_ver", (P, K)),
            ("changed", (P,)), ("snap_seen", (P, K)), ("snap_pver", (P, K)),
            ("prior_ver", (K,)), ("ver", (2,)), ("memo_pools", (P + 1,)), ("prior_seen", (K,)))
    flags = (("warm", (P, K)), ("snapped", (P,)), ("due", (P,)), ("prior_moved", (K,)))
    return floats, ints, flags


#: Each named array's place in its buffer (:func:`_layout`), for :func:`_at`.
_PLACE = {name: x for part in _layout(1, 1, 1) for x, (name, _) in enumerate(part)}
(_NM, _SNAP_NM, _SNAP_F, _SNAP_AB, _ROW_C, _CERT, _G3, _PRIOR, _WPOW, _GWPOW, _W, _BT, _MEMO_C,
 _GPOS, _PRIOR_F, _EDGES_AT, _T, _SEEN, _GSEEN, _GT, _POOL_VER, _ROW_VER, _ROWS, _CERT_I,
 _SNAP_VER, _CHANGED, _SNAP_SEEN, _SNAP_PVER, _PRIOR_VER, _VER, _MEMO_POOLS, _PRIOR_SEEN, _WARM,
 _SNAPPED, _DUE, _PRIOR_MOVED) = (_PLACE[n] for n in (
    "nm", "snap_nm", "snap_f", "snap_ab", "row_c", "cert", "g3", "prior", "wpow", "gwpow", "w",
    "bt", "memo_c", "gpos", "prior_f", "edges", "t", "seen", "gseen", "gt", "pool_ver",
    "row_ver", "rows", "cert_i", "snap_ver", "changed", "snap_seen", "snap_pver", "prior_ver",
    "ver", "memo_pools", "prior_seen", "warm", "snapped", "due", "prior_moved"))


@numba.njit(cache=True, nogil=True, inline="always")
def _at(buf, lay, row, x):  # pragma: no cover - compiled
    """Array ``x`` (its place: ``_PLACE``) of the buffer ``buf`` (row ``row`` of ``lay``: 0
    floats, 1 ints, 2 flags; ``lay[3]``: P, K and R), flat; the kernel reshapes it. A kernel
    takes only the arrays it reads: every view costs (views of all of them, about a
    microsecond a call)."""
    return buf[lay[row, x]:lay[row, x + 1]]


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _prior_params(moved, f, g3, n0, edges, out):  # pragma: no cover - compiled
    """Write into ``out`` [3, K, NEVER - 1] (in place: the windows not moved keep theirs) the
    prior of the windows ``moved``: per bin b the rate over all pools of the decayed counts
    ``f[k]`` x ``g3`` [3, K, NEVER + 1] (outcomes, overruns, sum of q): ``(f m + n0 qbar) / (f n + n0)``, qbar the bin's mean predicted q
    (its upper edge without outcomes), never below ``G_FLOOR``; then ``n0 g`` and ``n0 (1 -
    g)``. (Python's ``max(a, b)`` is ``b if b > a else a``: the floats of the Python loop this
    replaced, which the tests keep as the reference.)"""
    for k in range(out.shape[1]):
        if not moved[k]:
            continue
        fk = f[k]
        for b in range(1, NEVER):
            gn = fk * g3[0, k, b]
            if gn > 0:
                qbar = fk * g3[2, k, b] / (1e-12 if 1e-12 > gn else gn)
            else:
                qbar = edges[b - 1]
            x = (fk * g3[1, k, b] + n0 * qbar) / (gn + n0)
            x = G_FLOOR if G_FLOOR > x else x
            out[0, k, b - 1] = x
            out[1, k, b - 1] = n0 * x
            out[2, k, b - 1] = n0 * (1.0 - x)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _prior_update(gseen, pseen, ver, moved, gt, gpos, f, g3, n0, edges,
                  out):  # pragma: no cover - compiled
    """:meth:`RiskBudget._update_prior` in one call: the windows whose outcomes seen over all
    pools (``gseen``) moved since the last update (``pseen``, -1: never) move their version
    (``ver``) and take their prior anew (:func:`_prior_params`, with the decay ``f[k] =
    gpos[gt[k]]``, glam^t from the table); none moved: nothing changes (the same floats)."""
    any_moved = False
    for k in range(gseen.size):
        m = gseen[k] != pseen[k]
        moved[k] = m
        if m:
            pseen[k] = gseen[k]
            ver[k] += 1
            any_moved = True
    if not any_moved:
        return
    for k in range(gt.size):
        f[k] = gpos[gt[k]]
    _prior_params(moved, f, g3, n0, edges, out)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _prior_update_at(n0, fb, ib, bb, lay):  # pragma: no cover - compiled
    """:func:`_prior_update` on the budget's buffers (its arrays are theirs)."""
    K = lay[3, 1]
    _prior_update(_at(ib, lay, 1, _GSEEN), _at(ib, lay, 1, _PRIOR_SEEN),
                  _at(ib, lay, 1, _PRIOR_VER), _at(bb, lay, 2, _PRIOR_MOVED), _at(ib, lay, 1, _GT),
                  _at(fb, lay, 0, _GPOS), _at(fb, lay, 0, _PRIOR_F),
                  _at(fb, lay, 0, _G3).reshape((3, K, NEVER + 1)), n0,
                  _at(fb, lay, 0, _EDGES_AT), _at(fb, lay, 0, _PRIOR).reshape((3, K, NEVER - 1)))


class _NegPowers:
    """``x ** -i`` for ``i`` in 0.._RENORM - 1 by index: a table, or when some power raises
    (x = 0, or an overflow: memory <= 2), computed at each read (raising where it does)."""

    def __init__(self, x: float):
        self._x = x
        try:
            self._table: list[float] | None = [x ** -i for i in range(_RENORM)]
        except (ZeroDivisionError, OverflowError):
            self._table = None

    def __getitem__(self, i: int) -> float:
        return self._x ** -i

    def table(self) -> Any:
        """The list of powers, or this object (its reads compute them)."""
        return self if self._table is None else self._table

    def array(self) -> np.ndarray:
        """The powers as an array, NaN where the power raises (read it from here to raise)."""
        if self._table is not None:
            return np.asarray(self._table, dtype=np.float64)
        out = np.full(_RENORM, math.nan)
        for i in range(_RENORM):
            try:
                out[i] = self[i]
            except (ZeroDivisionError, OverflowError):
                pass
        return out


@numba.njit(cache=True, nogil=True)
def _push_pending(pq, m, W, et, ej, ek, n):  # pragma: no cover - compiled
    """Push the outcome events of the ``m`` queued starts ``pq`` (rows: start time, job, end
    of its run) on the heap (``et``, ``ej``, ``ek`` of size ``n``, with room): at ``t0 +
    min(end, w)`` per window w (Python's ``min(d, w)``: d unless w < d); return the heap's
    new size."""
    for i in range(m):
        t0, j, d = pq[0, i], np.int64(pq[1, i]), pq[2, i]
        for k in range(W.size):
            w = W[k]
            n = heap_push(et, ej, ek, n, t0 + (w if w < d else d), j, k)
    return n


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _resolve(now, fb, ib, bb, lay, ev, n, jobs, q, dur, pool, live, lam, glam, renorm, cold_n,
             pq, m):  # pragma: no cover - compiled
    """Queue the events of the ``m`` starts ``pq`` (:func:`_push_pending`), then take in the
    events up to ``now`` (see :meth:`RiskBudget.resolve`; ``jobs`` [2 K, jobs]: each job's bin
    per window, then whether its fit was taken, live). An overrun makes its pool due (allowed()
    then calls its kernel); a warming window moves the state's version. Returns (heap size,
    outcomes, overruns, the weight index that had no power or -1). The Python loop's
    operations, in its order: the same floats (``x ** i``: the power of doubles; numpy's sums)."""
    P, K = lay[3, 0], lay[3, 1]
    nm = _at(fb, lay, 0, _NM).reshape((2, P, K, NEVER + 1))
    g3 = _at(fb, lay, 0, _G3).reshape((3, K, NEVER + 1))
    wpow, gwpow, W = _at(fb, lay, 0, _WPOW), _at(fb, lay, 0, _GWPOW), _at(fb, lay, 0, _W)
    tc, seen = _at(ib, lay, 1, _T).reshape((P, K)), _at(ib, lay, 1, _SEEN).reshape((P, K))
    gseen, gt = _at(ib, lay, 1, _GSEEN), _at(ib, lay, 1, _GT)
    pool_ver, ver = _at(ib, lay, 1, _POOL_VER), _at(ib, lay, 1, _VER)
    warm, due = _at(bb, lay, 2, _WARM).reshape((P, K)), _at(bb, lay, 2, _DUE)
    et, ej, ek = ev[0], ev[1], ev[2]
    n = _push_pending(pq, m, W, et, ej, ek, n)
    outcomes, overruns, warmed, err = 0, 0, 0, -1
    while n > 0 and et[0] <= now:
        j, k = np.int64(ej[0]), np.int64(ek[0])
        n = heap_pop(et, ej, ek, n)
        b = jobs[k, j]
        if b == CERTAIN:
            continue
        d = dur[j]
        over = not d <= W[k]  # live: a job still running at its deadline (NaN) overran
        if live and d <= W[k]:  # live: its fit comes once, at its end or its deadline
            if jobs[K + k, j]:
                jobs[K + k, j] = 0
                continue
            jobs[K + k, j] = 1
        p = pool[j]
        seen[p, k] += 1
        gseen[k] += 1
        tk = tc[p, k] + 1
        if tk >= renorm:  # fold the decay into the counts before the weights overflow
            f = lam ** np.float64(tk - 1)
            for x in range(nm.shape[3]):
                nm[0, p, k, x] *= f
                nm[1, p, k, x] *= f
            tk = 1
        tc[p, k] = tk
        w = wpow[tk]
        if w != w:
            err = tk
            break
        nm[0, p, k, b] += w
        if not warm[p, k]:  # warmth only grows: a decayed sum of the outcomes, until warm
            s = 0.0
            for x in range(1, nm.shape[3]):
                s += nm[0, p, k, x]
            if s * lam ** np.float64(tk) >= cold_n:
                warm[p, k] = True
                pool_ver[p] += 1
                warmed += 1
        g = gt[k] + 1
        if g >= renorm:
            f = glam ** np.float64(g - 1)
            for x in range(g3.shape[2]):
                g3[0, k, x] *= f
                g3[1, k, x] *= f
                g3[2, k, x] *= f
            g = 1
        gt[k] = g
        gw = gwpow[g]
        if gw != gw:
            err = -2 - g
            break
        g3[0, k, b] += gw
        g3[2, k, b] += gw * q[k, j]
        outcomes += 1
        if over:  # a miss tightens the pool at once; fits widen it at the next refresh
            nm[1, p, k, b] += w
            g3[1, k, b] += gw
            overruns += 1
            due[p] = True
            _at(fb, lay, 0, _MEMO_C)[1] = -np.inf  # (allowed() calls _allowed_call again)
    ver[0] += warmed
    return n, outcomes, overruns, err


def miss_cost(load: np.ndarray, inv_cap: float) -> np.ndarray:
    """The owners' jobs one delay reaches in a pool at ``load``: ``1 / max(1 - load, inv_cap)``
    (at most ``1 / inv_cap`` = ``cost_cap`` jobs), element by element."""
    return 1.0 / np.maximum(1.0 - load, inv_cap)


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _costs_by_load(load, inv_cap, cost, order):  # pragma: no cover - compiled
    """``cost[p]``: :func:`miss_cost` of ``load[p]`` (the same operations: ``1 - load``, the
    larger of it and ``inv_cap`` as ``np.maximum`` takes it, NaN first, then ``1 / it``, inf
    where it is 0 as numpy gives it: ``risk_cost_cap`` inf); ``order``: the pools by load,
    largest first, equal loads in pool order (as Python's stable ``sorted(..., reverse=True)``;
    loads are never NaN: used GPU-seconds over positive quotas and periods)."""
    for p in range(load.size):
        x = 1.0 - load[p]
        cost[p] = 1.0 / (x if (x >= inv_cap or x != x) else inv_cap)
        j = p
        while j > 0 and load[order[j - 1]] < load[p]:  # insertion: few pools
            order[j] = order[j - 1]
            j -= 1
        order[j] = p


#: How the cost of a miss is read from the pools' loads (``risk_cost``): the busiest pool with
#: unused quota (the default), the expectation over those pools by their unused GPUs
#: (``expected``), or by their unused GPUs times their loads (``reclaim``: who takes them back).
COST_MODES = ("busiest", "expected", "reclaim")


def _cython_double(name: str, n_args: int) -> int:
    """The address of scipy's ``cython_special.<name>`` for doubles: the function itself or,
    where it is fused (float and double, newer scipy), its double specialisation, found by the
    signature its capsule carries. Raises ImportError naming scipy's version when none has it."""
    import ctypes

    from scipy import __version__ as scipy_version
    from scipy.special import cython_special

    get_name = ctypes.PYFUNCTYPE(ctypes.c_char_p, ctypes.py_object)(
        ("PyCapsule_GetName", ctypes.pythonapi))  # (a prototype of our own: pythonapi's is shared)
    want = "double (" + ", ".join(["double"] * n_args) + ", int __pyx_skip_dispatch)"
    for key, cap in cython_special.__pyx_capi__.items():
        base = key[len("__pyx_fuse_"):].lstrip("0123456789") if key.startswith("__pyx_fuse_") else key
        if base == name and get_name(cap).decode() == want:
            return get_cython_function_address("scipy.special.cython_special", key)
    raise ImportError(f"scipy {scipy_version}: scipy.special.cython_special has no {name} "
                      f"with the signature {want!r}, which the risk budget's kernels call")


# scipy's scalar betainc for doubles (the cython_special function ``_betainc`` calls with
# floats: the same C code, the same floats), callable from compiled code. It is bound by a
# symbol name, not a pointer, so the kernels that call it can be cached: the symbol is
# registered at each import, before a cached kernel is loaded.
llvm.add_symbol("sia_risk_betainc", _cython_double("betainc", 3))
_betainc_c = nbt.ExternalFunction("sia_risk_betainc", nbt.float64(
    nbt.float64, nbt.float64, nbt.float64, nbt.intc))
# ... and its inverse (the function the ufunc ``betaincinv`` calls for doubles)
llvm.add_symbol("sia_risk_betaincinv", _cython_double("betaincinv", 3))
_betaincinv_c = nbt.ExternalFunction("sia_risk_betaincinv", nbt.float64(
    nbt.float64, nbt.float64, nbt.float64, nbt.intc))


@numba.njit(cache=True, nogil=True)
def _take_snapshot(p, lam, fb, ib, bb, lay):  # pragma: no cover - compiled
    """Take pool ``p``'s snapshot (see :func:`_allowed_rows`): copies of its counts (outcomes,
    overruns), their decay factors ``lam ** t`` (the power of doubles, as Python's) and the
    prior (rates and Beta parameters). A window whose counts or decay factor changed gets a
    new stamp (its certificate no longer holds); the pool's version moves."""
    P, K, B1, B = lay[3, 0], lay[3, 1], NEVER + 1, NEVER - 1
    nm = _at(fb, lay, 0, _NM).reshape((2, P, K, B1))
    snm = _at(fb, lay, 0, _SNAP_NM).reshape((2, P, K, B1))
    sf = _at(fb, lay, 0, _SNAP_F).reshape((P, K))
    sab = _at(fb, lay, 0, _SNAP_AB).reshape((P, 3, K, B))
    prior = _at(fb, lay, 0, _PRIOR).reshape((3, K, B))
    t, pool_ver = _at(ib, lay, 1, _T).reshape((P, K)), _at(ib, lay, 1, _POOL_VER)
    sver, snapped = _at(ib, lay, 1, _SNAP_VER).reshape((P, K)), _at(bb, lay, 2, _SNAPPED)
    for k in range(t.shape[1]):
        f = lam ** np.float64(t[p, k])
        same = f == sf[p, k]
        for b in range(nm.shape[3]):
            for x in range(2):
                if snm[x, p, k, b] != nm[x, p, k, b]:
                    same = False
                    snm[x, p, k, b] = nm[x, p, k, b]
        sf[p, k] = f
        if not same or not snapped[p]:
            sver[p, k] += 1
        for x in range(3):
            sab[p, x, k] = prior[x, k]
    snapped[p] = True
    pool_ver[p] += 1


@numba.njit(cache=True, nogil=True)
def _refresh_pools(now, pools, lam, fb, ib, bb, lay):  # pragma: no cover - compiled
    """Bring the posteriors of ``pools`` up to date at ``now`` (see :meth:`RiskBudget._refresh`):
    every pool whose last refresh (``bt``) is 300 s old becomes due; each due pool of ``pools``
    is refreshed now, and its snapshot taken anew (:func:`_take_snapshot`) when its outcomes
    seen or the prior's version moved in some window since its last one (else the snapshot's
    counts and prior are those of now: the same floats). The state's version moves when a
    snapshot does."""
    P, K = lay[3, 0], lay[3, 1]
    bt, due = _at(fb, lay, 0, _BT), _at(bb, lay, 2, _DUE)
    seen = _at(ib, lay, 1, _SEEN).reshape((P, K))
    snap_seen = _at(ib, lay, 1, _SNAP_SEEN).reshape((P, K))
    snap_pver = _at(ib, lay, 1, _SNAP_PVER).reshape((P, K))
    prior_ver, ver = _at(ib, lay, 1, _PRIOR_VER), _at(ib, lay, 1, _VER)
    for p in range(bt.size):
        if not due[p] and now - bt[p] >= 300.0:
            due[p] = True
    moved = False
    for p in pools:
        if not due[p]:
            continue
        due[p] = False
        bt[p] = now
        same = True
        for k in range(K):
            if seen[p, k] != snap_seen[p, k] or prior_ver[k] != snap_pver[p, k]:
                same = False
        if not same:
            snap_seen[p, :] = seen[p, :]
            snap_pver[p, :] = prior_ver
            _take_snapshot(p, lam, fb, ib, bb, lay)
            moved = True
    if moved:
        ver[0] += 1


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _window_certificate(n, m, f, g, i, t, n0, level, his):  # pragma: no cover - compiled
    """Certify that a window's row ``i`` (its scan at threshold ``t``; decayed counts ``f`` x
    (``n``, ``m``) [NEVER + 1], from CERTAIN; prior rates ``g`` [NEVER - 1]) holds in a box
    around ``t`` and ``g``: returns (certified, t_lo, t_hi, g_lo), valid at thresholds in
    ``[t_lo, t_hi]`` when the prior's rate of bin ``i`` is >= ``g_lo`` (-inf when ``i`` is the
    last bin) and of each bin ``j < i`` <= ``his[j]`` (written); not certified when no box of
    :data:`_CERT_BOXES` certifies some bin.

    A bin's posterior is Beta(a, b), ``a = md + n0 g``, ``b = max(max(nd - md, 0) + n0 (1 -
    g), 1e-9)`` (the scan's arithmetic): a grows and b falls with g, also as rounded (rounding
    is monotone). The Beta cdf falls with a and grows with b and x, so its ``level`` quantile
    grows with g. Bin ``i`` fails at every threshold up to ``t_hi = t (1 + w)`` and rate from
    ``g (1 - w)`` up when the cdf there, at ``t_hi (1 + _BRACKET)``, is below ``level`` by more
    than ``_CDF_SLACK``: its quantile is then above the bracket of each such threshold, where
    the scan (:func:`_bin_within`) finds a failure whether the cdf or the exact quantile
    decides (the margins of :func:`cell_within`; below ``_TINY_T`` the exact quantile decides
    the same way). A bin before it passes at every threshold from ``t (1 - w)`` up (and >= 1,
    where everything passes) and rate up to ``g (1 + w)`` when the cdf at ``t (1 - w) (1 -
    _BRACKET)`` and that rate is above ``level`` by more than the slack. Each bin takes the
    widest box that certifies it. (Python's ``max(a, b)`` is ``b if b > a else a``.)"""
    hi, lo, B = level + _CDF_SLACK, level - _CDF_SLACK, NEVER - 1
    t_lo, t_hi, g_lo = -math.inf, math.inf, -math.inf
    if i < B:
        nd, md = f * n[i + 1], f * m[i + 1]
        r = nd - md
        r = 0.0 if 0.0 > r else r
        ok = False
        for w in _CERT_BOXES:
            th = t * (1.0 + w)
            if th * (1.0 + _BRACKET) >= 1.0:
                continue
            x = g[i] * (1.0 - w)
            b = r + n0 * (1.0 - x)
            if _betainc_c(md + n0 * x, 1e-9 if 1e-9 > b else b, th * (1.0 + _BRACKET), 0) <= lo:
                t_hi, g_lo, ok = th, x, True
                break
        if not ok:
            return False, t_lo, t_hi, g_lo
    for j in range(i):
        nd, md = f * n[j + 1], f * m[j + 1]
        r = nd - md
        r = 0.0 if 0.0 > r else r
        ok = False
        for w in _CERT_BOXES:
            tl = t * (1.0 - w)
            if tl < _TINY_T:
                continue
            x = g[j] * (1.0 + w)
            b = r + n0 * (1.0 - x)
            if _betainc_c(md + n0 * x, 1e-9 if 1e-9 > b else b, tl * (1.0 - _BRACKET), 0) >= hi:
                t_lo = tl if tl > t_lo else t_lo
                his[j] = x
                ok = True
                break
        if not ok:
            return False, t_lo, t_hi, g_lo
    return True, t_lo, t_hi, g_lo


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _bin_within(f, n, m, pa, pb, cdf, x0, x1, hi, lo, c, risk, level):  # pragma: no cover
    """Whether one bin's bound passes: :func:`cell_within` (``cdf`` 0: read the cdf at the
    bracket ``x0``, ``x1`` with the slack's ``hi``, ``lo``; 1: t >= 1, every bin passes; -1: t
    below ``_TINY_T``) on the Beta posterior of decayed counts ``f`` x (``n``, ``m``) under the
    prior's ``pa``, ``pb``, and where that cannot decide, the exact quantile times ``c`` within
    ``risk``: the arithmetic of the Python scan it replaced, the same floats."""
    if cdf == 1:
        return True
    nd, md = f * n, f * m
    r = nd - md
    r = 0.0 if 0.0 > r else r
    a, b = md + pa, r + pb
    b = 1e-9 if 1e-9 > b else b
    if cdf == 0:
        if _betainc_c(a, b, x0, 0) >= hi:
            return True
        if _betainc_c(a, b, x1, 0) <= lo:
            return False
    return _betaincinv_c(a, b, level, 0) * c <= risk


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _scan_window(sn, sm, f, sab, k, t, c, risk, level):  # pragma: no cover - compiled
    """One window's row from its snapshot (counts ``sn``, ``sm``, decay ``f``, prior ``sab``
    [3, K, NEVER - 1]): the number of leading bins whose bound passes (:func:`_bin_within`)."""
    hi, lo = level + _CDF_SLACK, level - _CDF_SLACK
    x0, x1 = t * (1.0 - _BRACKET), t * (1.0 + _BRACKET)
    x1 = 1.0 if 1.0 < x1 else x1
    cdf = 1 if t >= 1.0 else -1 if t < _TINY_T else 0
    i = 0
    while i < NEVER - 1 and _bin_within(f, sn[i + 1], sm[i + 1], sab[1, k, i], sab[2, k, i],
                                        cdf, x0, x1, hi, lo, c, risk, level):
        i += 1
    return i


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _rates_within(g, i, g_lo, his):  # pragma: no cover - compiled
    """Whether the prior's rates ``g`` meet a window certificate's bounds (row ``i``: bin
    ``i``'s rate >= ``g_lo``, each bin ``j < i``'s <= ``his[j]``; see
    :func:`_window_certificate`)."""
    if i < NEVER - 1 and not g[i] >= g_lo:
        return False
    for j in range(i):
        if not g[j] <= his[j]:
            return False
    return True


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _allowed_rows(pools, c, t, risk, level, n0, certify, fb, ib, bb, lay
                  ):  # pragma: no cover - compiled
    """Bring ``rows[p]`` up to date for each pool of ``pools`` at cost ``c`` (threshold ``t =
    largest_within(risk, c)``); return how many pools' rows changed (listed in ``changed``).

    A row holds, per window, the number of leading bins whose bound times ``c`` is within the
    budget (CERTAIN in a cold window; every bound 1.0 in a pool never refreshed); the bounds
    are the running maximum of the quantiles over the bins, so the scan
    (:func:`_scan_window`) stops at the first bin that fails. A pool whose version (its
    snapshot or warmth moved) and cost are those of its last scan keeps its row. Else each
    warm window keeps its row while that row's certificate (:func:`_window_certificate`:
    ``cert`` [P, K, 3 + NEVER - 1] the box, ``cert_i`` [P, K, 2] the snapshot stamp and row it
    was made for) holds at ``t`` and the snapshot's prior, or while a new certificate of that
    row can be had at the snapshot now (the row is then the scan's); only then is it scanned,
    and its new row certified. (On Philly at risk 3, 99.2% of the rescans give the row they
    gave before.) With ``certify`` false every window is scanned (the tests' reference)."""
    P, K, B, n_changed = lay[3, 0], lay[3, 1], NEVER - 1, 0
    snm = _at(fb, lay, 0, _SNAP_NM).reshape((2, P, K, NEVER + 1))
    sf = _at(fb, lay, 0, _SNAP_F).reshape((P, K))
    sab = _at(fb, lay, 0, _SNAP_AB).reshape((P, 3, K, B))
    row_c, cert = _at(fb, lay, 0, _ROW_C), _at(fb, lay, 0, _CERT).reshape((P, K, 3 + B))
    pool_ver, row_ver = _at(ib, lay, 1, _POOL_VER), _at(ib, lay, 1, _ROW_VER)
    rows = _at(ib, lay, 1, _ROWS).reshape((P, K))
    cert_i = _at(ib, lay, 1, _CERT_I).reshape((P, K, 2))
    sver, changed = _at(ib, lay, 1, _SNAP_VER).reshape((P, K)), _at(ib, lay, 1, _CHANGED)
    warm, snapped = _at(bb, lay, 2, _WARM).reshape((P, K)), _at(bb, lay, 2, _SNAPPED)
    his = np.empty(NEVER)
    for p in pools:
        if row_ver[p] == pool_ver[p] and row_c[p] == c:
            continue
        row_ver[p], row_c[p] = pool_ver[p], c
        moved = False
        for k in range(K):
            i = rows[p, k]
            if not warm[p, k]:
                j = 0
            elif not snapped[p]:  # never refreshed: every bound 1.0
                j = 0
                while j < B and 1.0 * c <= risk:
                    j += 1
            else:
                cb, g = cert[p, k], sab[p, 0, k]
                if (certify and cert_i[p, k, 0] == sver[p, k] and cert_i[p, k, 1] == i
                        and cb[0] <= t <= cb[1] and _rates_within(g, i, cb[2], cb[3:])):
                    continue  # the row's certificate holds here
                j = i  # the row, certified anew at this snapshot? else scanned and certified
                ok, t_lo, t_hi, g_lo = False, 0.0, 0.0, 0.0
                if certify:
                    ok, t_lo, t_hi, g_lo = _window_certificate(snm[0, p, k], snm[1, p, k],
                                                               sf[p, k], g, j, t, n0, level, his)
                if not ok:
                    j = _scan_window(snm[0, p, k], snm[1, p, k], sf[p, k], sab[p], k, t, c,
                                     risk, level)
                    if certify:
                        ok, t_lo, t_hi, g_lo = _window_certificate(snm[0, p, k], snm[1, p, k],
                                                                   sf[p, k], g, j, t, n0, level,
                                                                   his)
                cert_i[p, k, 0] = sver[p, k] if ok else -1
                cert_i[p, k, 1] = j
                cb[0], cb[1], cb[2] = t_lo, t_hi, g_lo
                cb[3:3 + j] = his[:j]
            if j != i:
                rows[p, k] = j
                moved = True
        if moved:
            changed[n_changed] = p
            n_changed += 1
    return n_changed


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _allowed_call(now, pools, c, t, risk, level, n0, lam, fb, ib, bb, lay, certify, prior
                  ):  # pragma: no cover - compiled
    """:meth:`RiskBudget.allowed`'s work in one call: with ``prior``, update the prior first
    (:func:`_prior_update_at`, :meth:`RiskBudget._update_prior`'s); refresh ``pools`` at ``now``
    (:func:`_refresh_pools`); then, unless the state's version, the cost ``c`` and ``pools``
    are those of the last call (return -1: its answer stands), bring their rows up to date
    (:func:`_allowed_rows`, whose count of changed rows it returns). Keeps ``memo_c`` = (c,
    the earliest last refresh of ``pools``), which :meth:`RiskBudget.allowed` reads to know,
    without a call, that none of them is due (an overrun sets the second to -inf)."""
    if prior:
        _prior_update_at(n0, fb, ib, bb, lay)
    _refresh_pools(now, pools, lam, fb, ib, bb, lay)
    memo_c, ver = _at(fb, lay, 0, _MEMO_C), _at(ib, lay, 1, _VER)
    bt, first = _at(fb, lay, 0, _BT), np.inf
    for p in pools:  # (none of them is due now: each was refreshed or is younger than 300 s)
        if bt[p] < first:
            first = bt[p]
    memo_c[1] = first
    last = _at(ib, lay, 1, _MEMO_POOLS)
    same = ver[1] == ver[0] and memo_c[0] == c and last[0] == pools.size
    if same:
        for x in range(pools.size):
            if last[1 + x] != pools[x]:
                same = False
                break
    if same:
        return -1
    ver[1], memo_c[0], last[0] = ver[0], c, pools.size
    last[1:1 + pools.size] = pools
    return _allowed_rows(pools, c, t, risk, level, n0, certify, fb, ib, bb, lay)


class RiskBudget:
    """The risk budget's bookkeeping for one replay (see the module docstring).

    Call :meth:`reset` before a replay, :meth:`classify` when jobs are first
    considered, :meth:`resolve` at each decision (outcomes that became known),
    :meth:`started` with the decision's starts, and :meth:`allowed` for the
    largest job bin lendable per pool and window.
    """

    def __init__(self, windows_s: tuple[float, ...], risk: float, *, perfect_durations: bool = False,
                 level: float = 0.9, prior_n: float = 10.0, cold_n: float = 10.0,
                 memory: float = 100.0, load_days: float = 1.0, cost_cap: float = 100.0,
                 cost_mode: str = "busiest", name: str = "sia"):
        def bad(opt: str, want: str, v: Any) -> ConfigError:
            return ConfigError(f"policy {name!r}: {opt} must be {want}, not {v!r}")

        if not isinstance(risk, int | float) or isinstance(risk, bool) or not 0.0 <= risk <= 100.0:
            raise bad("risk", "a number in [0, 100] (expected owners' jobs delayed per loan)",
                      risk)
        if not 0.5 <= level < 1.0:
            raise bad("risk_level", "in [0.5, 1)", level)
        for opt, v in (("risk_prior_n", prior_n), ("risk_memory", memory),
                       ("risk_load_days", load_days)):
            if not v > 0:
                raise bad(opt, "> 0", v)
        if not cold_n >= 0:
            raise bad("risk_cold_n", ">= 0 outcomes", cold_n)
        if not cost_cap >= 1:
            raise bad("risk_cost_cap", ">= 1 (jobs)", cost_cap)
        if cost_mode not in COST_MODES:
            raise bad("risk_cost", " or ".join(repr(m) for m in COST_MODES), cost_mode)
        if memory <= cold_n:
            raise bad("risk_memory", f"> risk_cold_n={cold_n} (decayed counts never exceed it)",
                      memory)
        self.windows_s = tuple(float(w) for w in windows_s)
        self.risk = float(risk)
        self.perfect_durations = bool(perfect_durations)
        self.level = float(level)
        self.prior_n = float(prior_n)
        self.cold_n = float(cold_n)
        self.decay = 1.0 - 1.0 / float(memory)
        self.load_s = float(load_days) * 86400.0
        self.cost_cap = float(cost_cap)
        self._inv_cap = 1.0 / self.cost_cap
        self.cost_mode = cost_mode
        # the weight of a pool with unused quota in the expected cost: by its unused GPUs only
        # ("expected"), or times its load ("reclaim"); None: the busiest such pool
        self._weigh_load = {"busiest": None, "expected": False, "reclaim": True}[cost_mode]
        self._glam = 1.0 - (1.0 - self.decay) / 10.0  # the rate over all pools: 10x the memory
        # the outcomes' weights decay^-t and glam^-t for t < _RENORM, computed once (the same
        # floats as the power at each outcome); a zero base has none (the power raises there)
        self._wpow = _NegPowers(self.decay)
        self._gwpow = _NegPowers(self._glam)
        if not memory > 1.0 or self._wpow.table() is self._wpow:
            # (a decay <= 0 makes the counts no decayed sums; a smaller one overflows the
            # weights decay^-t before the counts are renormalised, at t = _RENORM)
            raise bad("risk_memory", "large enough that the outcomes' weights (1 - 1/memory)^-t "
                      f"stay finite for t < {_RENORM} (about 3.4 or more)", memory)
        # glam^t for t < _RENORM (the global counts' decay at the prior), by numpy's power as
        # the array of the windows' t was raised before: the same floats
        self._gpos = self._glam ** np.arange(_RENORM, dtype=np.float64)
        self._certain_row = [CERTAIN] * len(self.windows_s)  # (shared, never written)
        self._within_t: dict[float, float] = {}  # largest_within(risk, c) by cost c
        self._quota_of: np.ndarray | None = None  # the quotas _quota_list was read from
        self._quota_list: list[float] = []

    @property
    def _g(self) -> np.ndarray:
        """The prior's rate per window and bin 1..NEVER-1 [K, B] (over all pools)."""
        return np.asarray([self._prior.row(k)[0] for k in range(len(self.windows_s))])

    @property
    def _prior_ab(self) -> tuple[list[list[float]], list[list[float]]]:
        """The prior's Beta parameters prior_n x (g, 1 - g), each [K, B]."""
        rows = [self._prior.row(k) for k in range(len(self.windows_s))]
        return [r[1] for r in rows], [r[2] for r in rows]

    # ------------------------------------------------------------------ life cycle
    def reset(self, trace: Any) -> None:
        """Forget everything; prepare for a replay of ``trace`` (a TraceArrays)."""
        P, K = trace.n_pools, len(self.windows_s)
        # durations are read from the trace's array: the live service writes a job's run time
        # there once it finished (unknown ones are inf until then); GPUs and pools as lists
        self._dur = trace.duration
        self._gpus_f = trace.num_gpus.astype(np.float64).tolist()
        self._pool = trace.pool.tolist()
        # recent loads kept incrementally while every duration is known up front (a replay);
        # else (the live service) summed job by job from the array at each refresh
        self._live = not bool(np.isfinite(trace.duration[:trace.n_jobs]).all())
        # (a replay: the durations as a list too, whose reads are cheaper than the array's)
        self._dur_list = None if self._live else trace.duration[:trace.n_jobs].tolist()
        self._started_jobs: list[int] = []  # started since the last job-by-job load update
        self._start_t: list[float] = []
        self._run_jobs = np.zeros(0, dtype=np.int64)  # started jobs that may still count
        self._run_start = np.zeros(0)
        self._quota = np.maximum(trace.quota.astype(np.float64), 1.0)
        self._t0 = float(trace.submit[0]) if trace.n_jobs else 0.0
        self._predicted = bytearray(trace.n_jobs)  # has a prediction to score
        # per job and window its q, and (the compiled resolve's) its bin, then whether its fit
        # was taken
        self._q = np.full((K, trace.n_jobs), math.nan)
        self._jobs = np.zeros((2 * K, trace.n_jobs), dtype=np.uint8)
        self._jobs[:K] = NEVER
        self._rows_views(K)
        self._pool_arr = np.asarray(trace.pool, dtype=np.int64)
        st = self._alloc_state(P, K)
        # decayed outcome counts, kept lazily: an outcome is added with weight decay^-t (t: the
        # outcomes of its pool and window so far) and the counts are read times decay^t, which
        # is the same as decaying every older count at each new outcome (see _decayed)
        # (per pool, arrays [P, K, B]: a refresh copies a pool's counts for the compiled scan;
        # over all pools, Python lists [K][B]: Python floats do the same IEEE arithmetic)
        self._nm = st["nm"]  # per pool: outcomes and overruns
        self._n, self._m = self._nm[0], self._nm[1]
        self._t = st["t"]  # per pool and window: the decay's t
        self._seen = st["seen"]  # outcomes taken in, per pool and window
        self._gseen = st["gseen"]  # ... and per window over all pools
        self._g3 = st["g3"]  # over all pools: outcomes, overruns, sum of q
        self._gn, self._gm, self._gs = self._g3
        self._gt = st["gt"]
        self._warm = st["warm"]  # cold_n outcomes seen
        self._warm[:] = self.cold_n <= 0.0
        self._all_pools = np.arange(P, dtype=np.int64)
        self._ix_list, self._ix = None, self._all_pools  # the last pools asked, as an array
        # (_allowed_call's arguments that never change between resets)
        self._call_args = (self.risk, self.level, self.prior_n, self.decay, self._fb, self._ib,
                           self._bb, self._lay)
        # the state's version, bumped whenever a snapshot or a warmth changes, and that of
        # allowed()'s last answer (-1: none); the memo (its cost, the earliest last refresh of
        # the pools asked), the pools array of the last compiled call, and the latest time of
        # the calls skipped since (-inf: none): allowed()'s answer without the call
        st["ver"][1] = -1
        self._ver, self._memo_c, self._memo_ix = st["ver"], st["memo_c"], None
        self._skipped_at, self._no_pools = -math.inf, np.zeros(0, dtype=np.int64)
        self._allowed: list[list[int]] = []
        self._reset_snapshots(st, P, K)
        self._prior_ver = st["prior_ver"]  # bumped when a window's prior counts move
        self._prior_seen = st["prior_seen"]  # _gseen at the prior's last update
        self._prior_seen[:] = -1
        self._reset_events()
        # the pools due for a refresh: an overrun since their last one (resolve marks them) or
        # their last one (at bt) 300 s old; every pool at the start
        self._due, self._bt = st["due"], st["bt"]
        self._due[:] = True
        self._bt[:] = -math.inf
        self._prior_time = -math.inf
        self._prior = _Prior(st["prior"])  # rates 0 until updated (in place at each update)
        self._reset_loads(P)
        self.stats = {"outcomes": 0, "overruns": 0, "lent_certain": 0, "lent_predicted": 0,
                      "cost_sum": 0.0, "cost_n": 0}

    def _reset_events(self) -> None:
        """Forget the outcome events, queued and on the heap (see reset)."""
        # (time the outcome is known, job, k), a heap of arrays (heap_push; its size), and the
        # first of those times (inf: none; resolve() before it is a no-op)
        self._ev = np.empty((3, 1024))  # (times, jobs, windows: whole numbers, exact as floats)
        self._n_ev = 0
        self.next_due = math.inf
        # the starts not yet pushed on the heap (rows: start time, job, end of its run), and
        # the first of their events' times (inf: none)
        self._pq = np.empty((3, 64))
        self._pq_rows = tuple(memoryview(r) for r in self._pq)  # (kept: see _rows_views)
        self._n_pend, self._pend_first = 0, math.inf
        self._w0 = min(self.windows_s)  # (the first event of a start is in the shortest)
        # live (run times unknown until the end): the predicted jobs running, (job, start), and
        # the (window, job) outcomes taken at a completion, whose deadline event is then moot
        self._running_live: list[tuple[int, float]] = []

    def _reset_loads(self, P: int) -> None:
        """Forget the pools' recent loads and costs of a miss (see :meth:`loads`)."""
        self._use = RecentUse(P)  # GPU-seconds run per pool in the last load_days
        self._load: np.ndarray | None = np.zeros(P)
        self._load_list = [0.0] * P
        self._cost_list = [1.0] * P  # miss_cost of each pool's load (_take_loads)
        self._by_load = list(range(P))  # pools by recent load, busiest first
        self._cost_arr, self._order_arr = np.empty(P), np.empty(P, np.int64)  # (_take_loads')
        self._load_time = -math.inf

    def _alloc_state(self, P: int, K: int) -> dict[str, np.ndarray]:
        """Allocate the state's three buffers (:func:`_layout`) and return its named arrays,
        views of them (zeros; the weights and windows filled)."""
        wpow, gwpow = self._wpow.array(), self._gwpow.array()
        self._renorm = R = wpow.size  # (_RENORM when the budget was made: its tables')
        parts = _layout(P, K, R)
        lay = np.zeros((4, max(len(x) for x in parts) + 1), dtype=np.int64)
        lay[3, :3] = P, K, R
        out, bufs = {}, []
        for row, (part, dtype) in enumerate(zip(parts, (np.float64, np.int64, np.bool_),
                                                strict=True)):
            sizes = [math.prod(shape) for _, shape in part]
            lay[row, 1:len(sizes) + 1] = np.cumsum(sizes)
            buf = np.zeros(int(lay[row, len(sizes)]), dtype=dtype)
            bufs.append(buf)
            for (name, shape), lo, hi in zip(part, lay[row, :-1], lay[row, 1:], strict=False):
                out[name] = buf[lo:hi].reshape(shape)
        self._fb, self._ib, self._bb = bufs
        self._lay = lay
        out["wpow"][:], out["gwpow"][:] = wpow, gwpow
        out["w"][:] = self.windows_s
        out["gpos"][:], out["edges"][:] = self._gpos, _EDGES  # (the prior's update reads them)
        return out

    def _reset_snapshots(self, st: dict[str, np.ndarray], P: int, K: int) -> None:
        """Forget the snapshots, the last scans and the certificates (see reset)."""
        # per pool, as of its last refresh (the compiled scan's arrays): the counts [2, P, K,
        # NEVER + 1], their decay factor per window, the prior [P, 3, K, NEVER - 1], per window a
        # stamp moved when its counts do, and whether it was ever refreshed (else its bounds
        # are 1.0)
        self._snap_nm, self._snap_f, self._snap_ab = st["snap_nm"], st["snap_f"], st["snap_ab"]
        self._snap_f[:] = 1.0
        self._snap_ver, self._snapped = st["snap_ver"], st["snapped"]
        # per pool: a version bumped when its snapshot is taken anew or a window warms, and its
        # last scan (the row, the version and the cost it was made with; see _allowed_rows),
        # the rows as lists, and each window's certificate (box; stamp and row, -1: none)
        self._pool_ver, self._rows, self._row_ver = st["pool_ver"], st["rows"], st["row_ver"]
        self._row_lists = [[CERTAIN] * K for _ in range(P)]
        self._row_ver[:] = -1
        self._row_c = st["row_c"]
        self._row_c[:] = math.nan
        self._cert, self._cert_i, self._changed = st["cert"], st["cert_i"], st["changed"]
        self._cert_i[:] = -1
        self._certify = True  # (the tests' reference scans every window anew: False)
        # what a pool's snapshot was taken from: its outcomes seen per window and the prior's
        # version per window at its last refresh (-1: never refreshed); a refresh keeps the
        # snapshot when neither moved (the same counts and prior, the same floats)
        st["snap_seen"][:] = -1
        st["snap_pver"][:] = -1

    def grow(self, trace: Any) -> None:
        """Take the jobs the live service appended to ``trace`` (not yet arrived): no bin and
        no prediction yet, as :meth:`reset` leaves them; the trace's grown columns."""
        n, n_old = trace.n_jobs, len(self._predicted)
        self._dur = trace.duration
        self._live = self._live or not bool(np.isfinite(trace.duration[n_old:n]).all())
        if self._live:
            self._dur_list = None
        elif self._dur_list is not None:
            self._dur_list.extend(trace.duration[n_old:n].tolist())
        self._pool.extend(trace.pool[n_old:n].tolist())
        self._gpus_f.extend(trace.num_gpus[n_old:n].astype(np.float64).tolist())
        self._predicted.extend(bytes(n - n_old))
        K = len(self.windows_s)
        more = np.zeros((2 * K, n - n_old), dtype=np.uint8)
        more[:K] = NEVER
        self._jobs = np.concatenate((self._jobs, more), 1)
        self._q = np.concatenate((self._q, np.full((K, n - n_old), math.nan)), 1)
        self._rows_views(K)
        self._pool_arr = np.asarray(trace.pool[:n], dtype=np.int64)

    def _rows_views(self, K: int) -> None:
        """Per window, the jobs' bins (``job_bin``, read by the lending loop) and q as
        memoryviews of the rows of ``_jobs`` and ``_q``: a job's bin is written once, where
        the compiled resolve reads it, and Python reads and writes a memoryview's items as
        fast as a bytearray's (a numpy scalar costs about twice that)."""
        self.job_bin = [memoryview(row) for row in self._jobs[:K]]
        self._q_rows = [memoryview(row) for row in self._q]

    # ------------------------------------------------------------------ predictions
    def classify(self, jobs: np.ndarray, cdf: np.ndarray, sure: np.ndarray | None) -> np.ndarray:
        """Record and return the bins [jobs, windows] of ``jobs`` given P(duration <= w)
        ``cdf`` [jobs, windows] and the first window each time limit guarantees (``sure``, K:
        none; None: no limits): :meth:`classify_rows` as an array."""
        rows = self.classify_rows(np.asarray(jobs, dtype=np.int64).tolist(), cdf, sure)
        return np.array(rows, dtype=np.int64).reshape(len(rows), len(self.windows_s))

    def classify_rows(self, jobs: list[int], cdf: np.ndarray, sure: np.ndarray | None
                      ) -> list[list[int]]:
        """:meth:`classify` for a list of job indices, answered as one list of bins per job
        (no array on the way: the policy's batches hold one or two jobs)."""
        # one job at a time in Python floats: the values of q = 1 - clip(cdf, 0, 1) and of
        # q_bins, NaN included (the conditionals keep a NaN, and -0.0, as min/max and
        # np.minimum/np.maximum do; bisect_right puts it after every edge as searchsorted does)
        rows = np.asarray(cdf, dtype=np.float64).tolist()
        K = len(self.windows_s)
        sl = [K] * len(jobs) if sure is None else np.asarray(sure).tolist()
        perfect, jb, pred, qa = self.perfect_durations, self.job_bin, self._predicted, self._q_rows
        out = []
        for j, row, s in zip(jobs, rows, sl, strict=True):
            qs = [1.0 - (0.0 if c < 0.0 else 1.0 if c > 1.0 else c) for c in row]
            if s >= K and not perfect:  # (the common case: no time limit that fits)
                brow = [bisect_right(Q_EDGES, q) + 1 for q in qs]
            else:  # perfect information: a fit is certain, an overrun never lent
                brow = [CERTAIN if k >= s else (CERTAIN if q <= 0.0 else NEVER) if perfect
                        else bisect_right(Q_EDGES, q) + 1 for k, q in enumerate(qs)]
            for k in range(K):  # (a scalar per window: cheaper than a column from a list)
                jb[k][j] = brow[k]
                qa[k][j] = qs[k]
            pred[j] = 1
            out.append(brow)
        return out

    # ------------------------------------------------------------------ outcomes
    def started(self, now: float, jobs: list[int]) -> None:
        """Record the jobs started by a decision at ``now`` (s). A predicted job's outcome in
        window w becomes known at ``now + min(duration, w)``: when it ends, or when it has run
        w and is still running (the time is queued now, the outcome is read only then). The
        starts wait in a queue that the next :meth:`resolve` pushes on the events' heap (in
        the same compiled call); ``next_due`` counts them at once."""
        dur = self._dur if self._dur_list is None else self._dur_list  # (the same floats)
        pred, pool, gpus, use, live = (self._predicted, self._pool, self._gpus_f, self._use,
                                       self._live)
        w0, m, first = self._w0, self._n_pend, self._pend_first
        if m + len(jobs) > self._pq.shape[1]:
            self._grow_pending(m + len(jobs))
        pt, pj, pd = self._pq_rows
        for j in jobs:
            d = float(dur[j])
            self._started_jobs.append(j)
            self._start_t.append(now)
            if not live:
                use.start(now, pool[j], gpus[j], now + d)
            if pred[j]:
                if live:  # run time unknown: the outcome at its end (_completions) or at now + w
                    self._running_live.append((j, now))
                    d = math.inf
                pt[m], pj[m], pd[m] = now, j, d
                m += 1
                t = now + (w0 if w0 < d else d)  # its first event
                if t < first:
                    first = t
        self._n_pend, self._pend_first = m, first
        if live and self._running_live:
            self.next_due = -math.inf  # a completion can come at any time
        elif self._n_ev or m:
            self.next_due = min(float(self._ev[0, 0]) if self._n_ev else math.inf, first)

    def _grow_pending(self, need: int) -> None:
        """Make room for ``need`` queued starts (doubled when it grows)."""
        pq = np.empty((3, max(need, 2 * self._pq.shape[1])))
        pq[:, :self._n_pend] = self._pq[:, :self._n_pend]
        self._pq, self._pq_rows = pq, tuple(memoryview(r) for r in pq)

    def lent(self, job: int, k: int) -> None:
        """Count a loan of ``job`` that had to fit window ``k``: on certainty or on prediction."""
        key = "lent_certain" if self.job_bin[k][job] == CERTAIN else "lent_predicted"
        self.stats[key] += 1

    def _room(self, m: int) -> None:
        """Make room for ``m`` more events on the heap (doubled when it grows)."""
        n, size = self._n_ev, self._ev.shape[1]
        if n + m > size:
            ev = np.empty((3, max(n + m, 2 * size)))
            ev[:, :n] = self._ev[:, :n]
            self._ev = ev

    def resolve(self, now: float) -> None:
        """Take in the outcomes known by ``now``: count each job's overrun (or fit) of each window
        in its pool's and the global counts of its bin, after decaying the pool's counts
        (:func:`_resolve`, compiled). A miss makes its pool due for a refresh at once; a
        window that becomes warm moves its pool's version. Nothing is known before
        ``next_due`` (the first outcome's time): a call with ``now < next_due`` does nothing,
        and a caller may skip it."""
        if self._running_live:
            self._completions()
        m = self._n_pend
        if not m and (not self._n_ev or self._ev[0, 0] > now):
            return
        if m:
            self._room(m * len(self.windows_s))
        n, outcomes, overruns, err = _resolve(
            now, self._fb, self._ib, self._bb, self._lay, self._ev, self._n_ev, self._jobs,
            self._q, self._dur, self._pool_arr, self._live, self.decay, self._glam, self._renorm,
            self.cold_n, self._pq, m)
        ev = self._ev
        self._n_ev, self._n_pend, self._pend_first = n, 0, math.inf
        stats = self.stats
        stats["outcomes"] += outcomes
        stats["overruns"] += overruns
        if err != -1:  # a weight the power has not (the memory's check excludes it): raise
            (self._wpow if err >= 0 else self._gwpow)[err if err >= 0 else -2 - err]
            raise ArithmeticError(f"no weight decay^-{err}")  # (the power did not raise)
        self.next_due = (-math.inf if self._running_live else float(ev[0, 0]) if n else math.inf)

    def _completions(self) -> None:
        """Live: queue the fits of the running predicted jobs whose run time became known (they
        ended), at their end, as a replay with the run times known queues them at the start."""
        W, dur, keep = self.windows_s, self._dur, []
        for j, s in self._running_live:
            d = float(dur[j])
            if d != d:  # still running
                keep.append((j, s))
                continue
            for k, w in enumerate(W):
                if d <= w:
                    self._room(1)
                    ev = self._ev
                    self._n_ev = heap_push(ev[0], ev[1], ev[2], self._n_ev, s + d, j, k)
        self._running_live = keep

    def bounds(self, now: float = math.inf, pools: list[int] | None = None) -> np.ndarray:
        """Return the upper bounds [pools, windows, bins 1..NEVER-1] on each bin's overrun rate
        (the ``level`` quantile of the pool's Beta posterior as of its last refresh,
        non-decreasing over the bins; 1.0 in a pool never refreshed).

        Only ``pools`` (default: all) are brought up to date (see :meth:`_refresh`). Every
        quantile is computed here (:meth:`allowed` compares them with its threshold through the
        Beta cdf and computes a quantile only where that cannot decide, see
        :func:`_allowed_rows`): the posteriors' parameters by the scan's arithmetic, one call of
        the ufunc ``betaincinv`` (the function the scan's exact quantiles call)."""
        self._refresh(now, pools)
        f = self._snap_f[:, :, None]
        nd, md = f * self._snap_nm[0, :, :, 1:NEVER], f * self._snap_nm[1, :, :, 1:NEVER]
        a = md + self._snap_ab[:, 1]
        b = np.maximum(np.maximum(nd - md, 0.0) + self._snap_ab[:, 2], 1e-9)
        q = betaincinv(a, b, self.level)
        q[~self._snapped] = 1.0
        return np.maximum.accumulate(q, axis=2)

    def _refresh(self, now: float, pools: list[int] | None) -> None:
        """Bring the Beta posteriors of ``pools`` (default: all) up to date at ``now`` (s).

        A pool's posterior is taken anew when it is 300 s old and as soon as one of its jobs
        overran (a miss tightens at once, fits widen at the next refresh); the prior over all
        pools, which moves slowly, every 300 s (:meth:`_update_prior`). The pools' part is
        compiled (:func:`_refresh_pools`): a refresh copies the counts (cheap), whose
        quantiles (or their comparisons) are computed when first read, and keeps the
        snapshot of a pool whose outcomes and prior did not change since its last one."""
        if now - self._prior_time >= 300.0:
            self._update_prior(now)
        self._mark_skipped(now)
        _refresh_pools(now, self._all_pools if pools is None else
                       np.asarray(pools, dtype=np.int64), self.decay, self._fb, self._ib,
                       self._bb, self._lay)
        self._memo_c[1] = -math.inf  # (it may have marked a pool allowed() asked: call again)

    def _mark_skipped(self, now: float) -> None:
        """Mark the pools that the compiled calls :meth:`allowed` skipped since the last one
        would have marked due (300 s old at the latest skipped time), when ``now`` is earlier:
        a later call marks them itself (the clock may go back: the same due pools as calling
        :func:`_allowed_call` every time)."""
        if now < self._skipped_at:
            _refresh_pools(self._skipped_at, self._no_pools, self.decay, self._fb, self._ib,
                           self._bb, self._lay)
        self._skipped_at = -math.inf

    def _update_prior(self, now: float) -> None:
        """Take the prior (each bin's rate over all pools) anew from the global counts at
        ``now`` (:func:`_prior_params`) in the windows with a new outcome since the last
        update; the others keep theirs. Skipped when no outcome came at all (the same floats).
        A window's version moves with its prior. One compiled call (:func:`_prior_update`)."""
        self._prior_time = now
        _prior_update_at(self.prior_n, self._fb, self._ib, self._bb, self._lay)

    def _decayed(self, idx: np.ndarray, lo: int = 1, hi: int = NEVER
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Return the decayed (outcomes, overruns) of pools ``idx`` in bins lo..hi-1 [.., K, B].
        The decay factors are the scalar power of doubles, as the kernels' (numpy's array power
        may differ by an ulp: it takes a vectorised path on processors with AVX-512)."""
        rows = np.asarray(idx, dtype=np.int64)
        lam = self.decay
        f = np.asarray([[lam ** float(t) for t in r] for r in self._t[rows].tolist()])[:, :, None]
        return f * self._n[rows, :, lo:hi], f * self._m[rows, :, lo:hi]

    # ------------------------------------------------------------------ the budget
    def loads(self, now: float) -> np.ndarray:
        """Return each pool's recent load: GPU-seconds its jobs ran in the last ``load_days``
        (up to ``now``) over quota x that period (shorter at the replay's start); refreshed at
        most every 300 s. The GPU-seconds are kept incrementally (:class:`RecentUse`)."""
        if now - self._load_time >= 300.0:
            self._take_loads(now)
        if self._load is None:  # (the array only when asked for: cost() reads the list)
            self._load = np.asarray(self._load_list)
        return self._load

    def _take_loads(self, now: float) -> None:
        """Refresh the loads' list (see :meth:`loads`) and the pools by load, busiest first."""
        span = max(min(self.load_s, now - self._t0), 3600.0)
        if self._live and self._quota is not self._quota_of:  # the quotas' list, anew when
            self._quota_of, self._quota_list = self._quota, self._quota.tolist()  # replaced
        if self._live:  # a running job counts up to now (no peek at its end)
            load = np.asarray([u / (q * span) for u, q in zip(
                self._used_job_by_job(now), self._quota_list, strict=True)], dtype=np.float64)
        else:
            load = self._use.per_quota_array(now, now - self.load_s, self._quota, span)
        cost, order = self._cost_arr, self._order_arr
        if cost.size != load.size:
            cost, order = self._cost_arr, self._order_arr = (np.empty(load.size),
                                                             np.empty(load.size, np.int64))
        _costs_by_load(load, self._inv_cap, cost, order)  # (one compiled pass: no numpy calls)
        self._load_list = load.tolist()
        self._cost_list = cost.tolist()
        self._load = None
        self._by_load = order.tolist()
        self._load_time = now

    def _used_job_by_job(self, now: float) -> list[float]:
        """Each pool's GPU-seconds in the last ``load_days``, summed job by job from the
        durations as the trace shows them now (the live service's, learned at the jobs' ends)."""
        if self._started_jobs:  # the starts since the last call join the arrays
            self._run_jobs = np.concatenate((self._run_jobs,
                                             np.asarray(self._started_jobs, dtype=np.int64)))
            self._run_start = np.concatenate((self._run_start, np.asarray(self._start_t)))
            self._started_jobs, self._start_t = [], []
        jobs, st = self._run_jobs, self._run_start
        lo = now - self.load_s
        end = np.fmin(st + self._dur[jobs], now)  # a running job's NaN end: it runs up to now
        ran = np.clip(end - np.maximum(st, lo), 0.0, None) * np.asarray(self._gpus_f)[jobs]
        used = np.bincount(np.asarray(self._pool)[jobs], weights=ran, minlength=self._quota.size)
        keep = end > lo  # jobs that ended before the period never count again
        if not keep.all():
            self._run_jobs, self._run_start = jobs[keep], st[keep]
        return used.tolist()

    def cost(self, now: float, unused: list[int]) -> float:
        """Return the cost of a miss in owners' jobs: ``1 / max(1 - rho, 1 / cost_cap)`` with
        rho the largest recent load among the pools with unused quota (``unused``, GPUs); with
        ``cost_mode="expected"`` the mean of the pools' costs weighted by their unused GPUs, with
        ``"reclaim"`` weighted by their unused GPUs times their loads (1.0 when none has load)."""
        if now - self._load_time >= 300.0:
            self._take_loads(now)
        costs, weigh_load = self._cost_list, self._weigh_load
        if weigh_load is not None:
            num = den = top = 0.0
            for u, c, rho in zip(unused, costs, self._load_list, strict=True):
                if u > 0:
                    w = u * rho if weigh_load else u
                    num += w * c
                    den += w
                    top = max(top, c)
            # a weighted mean is at most its largest term; the floats' rounding must not exceed it
            return min(num / den, top) if den > 0.0 else 1.0
        for p in self._by_load:  # the busiest pool with unused quota: the first such pool
            if unused[p] > 0:
                return costs[p]
        return 1.0

    def pool_costs(self, now: float) -> np.ndarray:
        """Return each pool's cost of a miss (:func:`miss_cost` of its recent load, :meth:`loads`)."""
        return miss_cost(self.loads(now), self._inv_cap)

    def allowed(self, now: float, unused: list[int], pools: list[int] | None = None
                ) -> list[list[int]]:
        """Return, per pool and window, the largest job bin lendable now (CERTAIN: certainty only):
        the bins whose overrun bound times :meth:`cost` is within the budget, none in a cold
        pool. Only ``pools`` (default: all) are evaluated; the others get CERTAIN.

        One compiled call (:func:`_allowed_call`) refreshes the pools (:meth:`_refresh`) and
        scans them from their snapshots (:func:`_allowed_rows`): per warm window, the leading
        bins whose bound passes, read through the Beta cdf and, only where that cannot decide,
        the exact quantile; a row is kept while nothing it depends on moved, or while its
        certificate holds. A call whose state version, cost and pools are the last call's gets
        the last answer (rows are never written after). Such a call needs no compiled call at
        all when the prior is not due (its update, every 300 s, is the compiled call's first
        step) and no pool asked is due: none overran since (an overrun, or a refresh by
        :meth:`bounds`, clears the earliest last refresh the kernel keeps) and none was last
        refreshed 300 s ago; the pools not asked that it would have marked due are marked by
        the next compiled call, before anything reads them (:meth:`_mark_skipped`), so every
        answer is that of calling it every time, in any time order."""
        P, K = len(self._seen), len(self.windows_s)
        if self.risk <= 0.0 or (pools is not None and not pools):
            return [[CERTAIN] * K for _ in range(P)]
        c = self.cost(now, unused)
        stats = self.stats
        stats["cost_sum"] += c
        stats["cost_n"] += 1
        prior = now - self._prior_time >= 300.0  # (the compiled call updates it first; its
        # time is kept once that call ran: a call that raises before it leaves the prior due)
        if pools is None:
            ix = self._all_pools
        elif pools == self._ix_list:  # (the policy asks the same pools call after call)
            ix = self._ix
        else:
            ix = self._ix = np.asarray(pools, dtype=np.int64)
            self._ix_list = list(pools)
        memo_c, ver = self._memo_c, self._ver
        if (not prior and ix is self._memo_ix and ver[0] == ver[1] and memo_c[0] == c
                and now - memo_c[1] < 300.0):  # no pool asked is due: _allowed_call's -1
            if now > self._skipped_at:  # (the pools not asked it would have marked due)
                self._skipped_at = now
            return self._allowed
        memo = self._within_t
        t = memo.get(c)
        if t is None:
            if len(memo) > 10_000:  # bounded: the costs follow the loads
                memo.clear()
            t = memo[c] = largest_within(self.risk, c)
        self._memo_ix = ix
        self._mark_skipped(now)
        n = _allowed_call(now, ix, c, t, *self._call_args, self._certify, prior)
        if prior:
            self._prior_time = now
        if n < 0:  # nothing it depends on changed since the last call
            return self._allowed
        lists, rows = self._row_lists, self._rows
        for p in self._changed[:n].tolist():  # (a new list: an answer's rows are never written)
            lists[p] = rows[p].tolist()
        # one row shared by the pools not evaluated (rows are never written after the scan)
        out = [self._certain_row] * P
        for p in range(P) if pools is None else pools:
            out[p] = lists[p]
        self._allowed = out
        return out

    def summary(self) -> dict[str, Any]:
        """Return the budget's counters: outcomes scored and overrun, loans on certainty and on
        prediction, the mean cost of a miss (jobs)."""
        s = dict(self.stats)
        n = s.pop("cost_n")
        s["mean_cost"] = s.pop("cost_sum") / n if n else None
        return s
