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
"""

from __future__ import annotations

import heapq
import math
from bisect import bisect_right, insort
from collections import deque
from functools import partial
from typing import Any

import llvmlite.binding as llvm
import numba
import numpy as np
from numba import types as nbt
from numba.extending import get_cython_function_address
from scipy.special import betainc, betaincinv
from scipy.special.cython_special import betainc as _betainc
from sia.data.errors import ConfigError
from sia.scheduler.policies.sia.recent_use import RecentUse

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
#: Relative half-widths (in the threshold and in the prior's rates) of the boxes a pool's
#: certificate may cover, widest first (:meth:`RiskBudget._certify_pool`).
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


class _Floor:
    """The first bin's floor of one prior: per window, Beta(pa, memory + 1 + pb) (see
    :meth:`RiskBudget._update_prior`), whose ``level`` quantile is below every pool's quantile
    of that bin under the prior. :meth:`fails` reads it through the cdf (one ``betainc`` per
    window and threshold, kept), not its quantile: a window fails when the cdf at the
    threshold is below ``level`` by more than ``_CDF_SLACK``, i.e. the floor is above it."""

    __slots__ = ("_a", "_b", "_src", "level", "_memo", "_open")

    def __init__(self, a: list[float] | None, b: list[float] | None, level: float,
                 src: tuple | None = None):
        self._a, self._b, self.level = a, b, level  # b NaN: no floor (nothing fails by it)
        self._src = src  # (a and b None) the prior's counts, n0 and cap they come from
        self._memo: dict[float, list[bool]] = {}
        self._open: dict[float, tuple[int, ...]] = {}

    @property
    def a(self) -> list[float]:
        """The floor's first Beta parameter per window (computed when first read)."""
        if self._a is None:
            self._params()
        return self._a

    @property
    def b(self) -> list[float]:
        """The floor's second Beta parameter per window (computed when first read)."""
        if self._b is None:
            self._params()
        return self._b

    def _params(self) -> None:
        """Compute a and b from the prior's counts (see :meth:`RiskBudget._update_prior`):
        ``a = n0 x``, ``b = cap + n0 (1 - x)`` with x the first bin's rate (0 and ``cap`` in a
        window never updated)."""
        counts, n0, cap = self._src
        a, b = [], []
        for c in counts:
            x = None if c is None else _prior_rates(c, n0, (1,))[0]
            a.append(0.0 if x is None else n0 * x)
            b.append(cap + (0.0 if x is None else n0 * (1.0 - x)))
        self._a, self._b = a, b

    def fails(self, t: float) -> list[bool]:
        """Return, per window, whether the floor quantile is surely above ``t``."""
        got = self._memo.get(t)
        if got is None:
            # (scipy's scalar betainc, window by window: the ufunc's floats, without its overhead)
            lo = self.level - _CDF_SLACK
            got = self._memo[t] = [_betainc(a, b, t) < lo  # NaN: False
                                   for a, b in zip(self.a, self.b, strict=True)]
        return got

    def opened(self, t: float) -> tuple[int, ...]:
        """Return the windows that :meth:`fails` does not fail at ``t``, in order."""
        got = self._open.get(t)
        if got is None:
            got = self._open[t] = tuple(k for k, f in enumerate(self.fails(t)) if not f)
        return got

    def quantiles(self) -> list[float]:
        """Return the floor quantiles themselves (NaN: none)."""
        return betaincinv(np.asarray(self.a), np.asarray(self.b), self.level).tolist()


class _Prior:
    """The prior of one update (each window and bin's rate over all pools, see
    :meth:`RiskBudget._update_prior`), computed per window when first read: the decayed global
    counts are kept as of the update (``counts[k]``: the decay factor and copies of the
    window's outcomes, overruns and sum of q per bin; None: a window never updated, its rates
    0) and :meth:`row` computes the rates from them with the arithmetic the update made them
    with, hence the same floats. A window without a new outcome shares the previous prior's
    counts and rows."""

    __slots__ = ("counts", "rows", "n0", "_arrs")

    def __init__(self, counts: list[tuple[float, list[float], list[float], list[float]] | None],
                 rows: list[tuple[list[float], list[float], list[float]] | None], n0: float):
        self.counts, self.rows, self.n0 = counts, rows, n0
        self._arrs: list[np.ndarray | None] = [None] * len(rows)

    def rates(self, k: int) -> np.ndarray:
        """Window ``k``'s rates (:meth:`row`'s first list) as an array, kept (the compiled
        certificates read it)."""
        got = self._arrs[k]
        if got is None:
            got = self._arrs[k] = np.asarray(self.row(k)[0], dtype=np.float64)
        return got

    def row(self, k: int) -> tuple[list[float], list[float], list[float]]:
        """Return window ``k``'s (rates g, prior_n g, prior_n (1 - g)) over bins 1..NEVER-1."""
        got = self.rows[k]
        if got is None:
            c = self.counts[k]
            if c is None:
                zero = [0.0] * (NEVER - 1)
                got = (zero, zero, zero)
            else:
                n0 = self.n0
                g = _prior_rates(c, n0, range(1, NEVER))
                got = (g, [n0 * x for x in g], [n0 * (1.0 - x) for x in g])
            self.rows[k] = got
        return got


def _prior_rates(c: tuple[float, list[float], list[float], list[float]], n0: float,
                 bins: Any) -> list[float]:
    """The rates over all pools of ``bins`` from a window's kept counts ``c`` (see _Prior)."""
    f, gnk, gmk, gsk = c
    out = []
    for b in bins:  # (a loop here, not a call per bin: _Prior.row is on the budget's hot path)
        gn = f * gnk[b]
        qbar = f * gsk[b] / max(gn, 1e-12) if gn > 0 else Q_EDGES[b - 1]
        # never below G_FLOOR (a model that says "certain" (q = 0) is not taken at its word, and
        # Beta(0, b) has no quantile)
        out.append(max((f * gmk[b] + n0 * qbar) / (gn + n0), G_FLOOR))
    return out


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


def _window_certificate(nk: list[float], mk: list[float], f: float, g: Any, i: int,
                        t: float, n0: float, level: float) -> tuple | None:
    """Return a certificate that a window's row ``i`` (its scan at threshold ``t``; decayed
    counts ``f`` x (``nk``, ``mk``), from CERTAIN; prior rates ``g``) holds in a box around
    ``t`` and ``g``: ``(t_lo, t_hi, lo, his)``, valid at thresholds in ``[t_lo, t_hi]`` when
    the prior's rate of bin ``i`` is >= ``lo`` (-inf when ``i`` is the last bin) and of each bin
    ``j < i`` <= ``his[j]``; None when no box of :data:`_CERT_BOXES` certifies some bin.

    A bin's posterior is Beta(a, b), ``a = md + n0 g``, ``b = max(max(nd - md, 0) + n0 (1 -
    g), 1e-9)`` (the scan's arithmetic): a grows and b falls with g, also as rounded (rounding
    is monotone). The Beta cdf falls with a and grows with b and x, so its ``level`` quantile
    grows with g. Bin ``i`` fails at every threshold up to ``t_hi = t (1 + w)`` and rate from
    ``g (1 - w)`` up when the cdf there, at ``t_hi (1 + _BRACKET)``, is below ``level`` by more
    than ``_CDF_SLACK``: its quantile is then above the bracket of each such threshold, where
    :meth:`RiskBudget._scan` finds a failure whether the cdf or the exact quantile decides
    (the margins of :func:`cell_within`; below ``_TINY_T`` the exact quantile decides the
    same way). A bin before it passes at every threshold from ``t (1 - w)`` up (and >= 1,
    where everything passes) and rate up to ``g (1 + w)`` when the cdf at ``t (1 - w) (1 -
    _BRACKET)`` and that rate is above ``level`` by more than the slack. Each bin takes the
    widest box that certifies it."""
    his = np.empty(NEVER)
    ok, t_lo, t_hi, g_lo = _window_certificate_c(np.array((nk, mk), dtype=np.float64), f,
                                                 np.asarray(g, dtype=np.float64), i, t, n0,
                                                 level, his)
    return (t_lo, t_hi, g_lo, his[:i].tolist()) if ok else None


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


@numba.njit(cache=True, nogil=True, error_model="numpy")
def _window_certificate_c(nm, f, g, i, t, n0, level, his):  # pragma: no cover - compiled
    """:func:`_window_certificate` compiled: ``nm`` the counts [2, NEVER + 1] (outcomes, overruns),
    ``g`` the prior's rates; the upper bounds go to ``his[:i]``. Returns (certified, t_lo,
    t_hi, g_lo). The same operations in the same order (Python's ``max(a, b)`` is ``b if b > a
    else a``), hence the same floats."""
    hi, lo, B = level + _CDF_SLACK, level - _CDF_SLACK, NEVER - 1
    t_lo, t_hi, g_lo = -math.inf, math.inf, -math.inf
    if i < B:
        nd, md = f * nm[0, i + 1], f * nm[1, i + 1]
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
        nd, md = f * nm[0, j + 1], f * nm[1, j + 1]
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


def _rates_within(prior: _Prior, bounds: list[tuple[int, int, float, list[float]]]) -> bool:
    """Return whether ``prior``'s rates meet a pool certificate's ``bounds`` (per warm window
    ``k`` with row ``i``: bin ``i``'s rate >= ``lo``, each bin ``j < i``'s <= ``his[j]``, see
    :func:`_window_certificate`)."""
    rows = prior.rows
    for k, i, lo, his in bounds:
        g = (rows[k] or prior.row(k))[0]
        if not g[i] >= lo if i < NEVER - 1 else False:
            return False
        for j, x in enumerate(his):
            if not g[j] <= x:
                return False
    return True


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
        self._k_range = np.arange(len(self.windows_s))
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
        # glam^t for t < _RENORM (the global counts' decay at the prior), by numpy's power as
        # the array of the windows' t was raised before: the same floats
        self._gpos = (self._glam ** np.arange(_RENORM, dtype=np.float64)).tolist()
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
        P, K, B = trace.n_pools, len(self.windows_s), NEVER + 1
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
        # per job and window: its bin (bytearrays: fast reads in the lending loop)
        self.job_bin = [bytearray([NEVER]) * trace.n_jobs for _ in range(K)]
        self._predicted = bytearray(trace.n_jobs)  # has a prediction to score
        self._q = [[math.nan] * trace.n_jobs for _ in range(K)]  # per window: each job's q
        # decayed outcome counts, kept lazily: an outcome is added with weight decay^-t (t: the
        # outcomes of its pool and window so far) and the counts are read times decay^t, which
        # is the same as decaying every older count at each new outcome (see _decayed)
        # (Python lists, [P][K][B] and [K][B]: resolve updates one count at a time, and Python
        # floats do the same IEEE arithmetic as numpy's float64 scalars, without their overhead)
        self._n = [[[0.0] * B for _ in range(K)] for _ in range(P)]  # per pool: outcomes ...
        self._m = [[[0.0] * B for _ in range(K)] for _ in range(P)]  # ... and overruns
        self._t = [[0] * K for _ in range(P)]
        self._seen = [[0] * K for _ in range(P)]  # outcomes taken in, per pool and window
        self._gseen = [0] * K  # ... and per window over all pools
        self._gn = [[0.0] * B for _ in range(K)]  # over all pools: outcomes, overruns, sum of q
        self._gm = [[0.0] * B for _ in range(K)]
        self._gs = [[0.0] * B for _ in range(K)]
        self._gt = [0] * K
        self._warm = [[self.cold_n <= 0.0] * K for _ in range(P)]  # cold_n outcomes seen
        self._version = 0  # bumped whenever a bound or warmth changes
        self._allowed_key: tuple | None = None
        self._allowed: list[list[int]] = []
        self._reset_snapshots(P, K)
        self._prior_ver = [0] * K  # bumped when a window's prior counts move (a new outcome)
        self._prior_seen: list[int] | None = None  # _gseen at the prior's last computation
        # (time the outcome is known, job, k), a heap, and the first of those times (inf: none;
        # resolve() before it is a no-op)
        self._events: list[tuple[float, int, int]] = []
        self.next_due = math.inf
        # live (run times unknown until the end): the predicted jobs running, (job, start), and
        # the (job, window) outcomes taken at a completion, whose deadline event is then moot
        self._running_live: list[tuple[int, float]] = []
        self._taken_live: set[tuple[int, int]] = set()
        # the pools due for a refresh: an overrun since their last one (resolve adds them) or
        # their last one 300 s old (moved here from _fresh); every pool at the start
        self._due: set[int] = set(range(P))
        self._bound_time = [-math.inf] * P
        # (time, pool) of the refreshes in time order: a FIFO, since a replay's clock never goes
        # back (a refresh at an earlier time than the last one, as after bounds() at +inf, is
        # inserted in order)
        self._fresh: deque[tuple[float, int]] = deque()
        self._prior_time = -math.inf
        self._prior = _Prior([None] * K, [None] * K, self.prior_n)  # rates 0 until updated
        self._use = RecentUse(P)  # GPU-seconds run per pool in the last load_days
        self._load: np.ndarray | None = np.zeros(P)
        self._load_list = [0.0] * P
        self._cost_list = [1.0] * P  # miss_cost of each pool's load (_take_loads)
        self._by_load = list(range(P))  # pools by recent load, busiest first
        self._cost_arr, self._order_arr = np.empty(P), np.empty(P, np.int64)  # (_take_loads')
        self._load_time = -math.inf
        self.stats = {"outcomes": 0, "overruns": 0, "lent_certain": 0, "lent_predicted": 0,
                      "cost_sum": 0.0, "cost_n": 0}

    def _reset_snapshots(self, P: int, K: int) -> None:
        """Forget the snapshots, their quantiles and floors and the last scans (see reset)."""
        # per pool, window and bin - 1: the Beta posterior's quantile as of the last refresh
        # (None until read); quantiles by parameters (pools without outcomes share them)
        self._snap: list[tuple] = [()] * P  # (outcomes, overruns, t, prior) at the refresh
        # a pool's snapshot shares the live counts until its next outcome copies them (copy on
        # write: most snapshots are taken anew before their pool sees another outcome)
        self._shared = [False] * P
        self._raw: list[list[list[float | None]]] = [[[1.0] * (NEVER - 1) for _ in range(K)]
                                                     for _ in range(P)]
        self._qcache: dict[tuple[float, float], float] = {}
        # per pool and window: the (outcomes seen, prior version) its quantiles in _raw were
        # computed for (None: not yet; see _valid_raw)
        self._raw_key: list[list[tuple[int, int] | None]] = [[None] * K for _ in range(P)]
        # per pool and window: the cost of its last scan (NaN: none valid) and the bins it
        # passed, kept while the window's quantiles are (see _scan)
        self._scan_c = [[math.nan] * K for _ in range(P)]
        self._scan_bins = [[CERTAIN] * K for _ in range(P)]
        # per pool: the certificate of its last row (see _certify_pool; None: none)
        self._pool_cert: list[tuple | None] = [None] * P
        # per pool and window: the certificate of its row (see _certify_pool; None: none)
        self._win_cert: list[list[tuple | None]] = [[None] * K for _ in range(P)]
        # the first bin's floor of the prior (a _Floor, see _update_prior), and the
        # floor of the prior each pool's snapshot took (NaN: none, nothing is skipped)
        self._prior_floor = _Floor([math.nan] * K, [math.nan] * K, self.level)
        self._snap_floor = [self._prior_floor] * P
        # per pool: a version bumped when its quantiles are reset or a window warms, and its
        # last scan in _lendable (the row, the version and the cost it was made with)
        self._pool_ver = [0] * P
        self._rows: list[list[int]] = [[CERTAIN] * K for _ in range(P)]
        self._row_ver = [-1] * P
        self._row_c = [math.nan] * P
        # what a pool's quantiles were computed from: its outcomes seen per window and the
        # prior's version per window at its last refresh (None: never refreshed); a refresh
        # keeps a window's quantiles when neither moved (the same parameters, the same floats)
        self._snap_seen: list[list[int] | None] = [None] * P
        self._snap_prior: list[list[int] | None] = [None] * P

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
        for col in self.job_bin:
            col.extend(bytearray([NEVER]) * (n - n_old))
        self._predicted.extend(bytes(n - n_old))
        for col in self._q:
            col.extend([math.nan] * (n - n_old))

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
        perfect, jb, qk, pred = self.perfect_durations, self.job_bin, self._q, self._predicted
        out = []
        for j, row, s in zip(jobs, rows, sl, strict=True):
            qs = [1.0 - (0.0 if c < 0.0 else 1.0 if c > 1.0 else c) for c in row]
            if s >= K and not perfect:  # (the common case: no time limit that fits)
                brow = [bisect_right(Q_EDGES, q) + 1 for q in qs]
            else:  # perfect information: a fit is certain, an overrun never lent
                brow = [CERTAIN if k >= s else (CERTAIN if q <= 0.0 else NEVER) if perfect
                        else bisect_right(Q_EDGES, q) + 1 for k, q in enumerate(qs)]
            for k in range(K):
                qk[k][j] = qs[k]
                jb[k][j] = brow[k]
            pred[j] = 1
            out.append(brow)
        return out

    # ------------------------------------------------------------------ outcomes
    def started(self, now: float, jobs: list[int]) -> None:
        """Record the jobs started by a decision at ``now`` (s). A predicted job's outcome in
        window w becomes known at ``now + min(duration, w)``: when it ends, or when it has run
        w and is still running (the time is queued now, the outcome is read only then)."""
        dur = self._dur if self._dur_list is None else self._dur_list  # (the same floats)
        W, pred, ev, pool, gpus = (self.windows_s, self._predicted, self._events, self._pool,
                                   self._gpus_f)
        use = self._use
        live = self._live
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
                for k, w in enumerate(W):
                    heapq.heappush(ev, (now + min(d, w), j, k))
        if live and self._running_live:
            self.next_due = -math.inf  # a completion can come at any time
        elif ev:
            self.next_due = ev[0][0]

    def lent(self, job: int, k: int) -> None:
        """Count a loan of ``job`` that had to fit window ``k``: on certainty or on prediction."""
        key = "lent_certain" if self.job_bin[k][job] == CERTAIN else "lent_predicted"
        self.stats[key] += 1

    def resolve(self, now: float) -> None:
        """Take in the outcomes known by ``now``: count each job's overrun (or fit) of each window
        in its pool's and the global counts of its bin, after decaying the pool's counts.
        Nothing is known before ``next_due`` (the first outcome's time): a call with ``now <
        next_due`` does nothing, and a caller may skip it."""
        ev = self._events
        if self._running_live:
            self._completions()
        if not ev or ev[0][0] > now:
            return
        W, pool, q, jb = self.windows_s, self._pool, self._q, self.job_bin
        dur = self._dur if self._dur_list is None else self._dur_list  # (the same floats)
        taken, live = self._taken_live, self._live
        lam, glam = self.decay, self._glam
        n, m, t, gn, gm, gs, gt = (self._n, self._m, self._t, self._gn, self._gm, self._gs,
                                   self._gt)
        stats, warm, cold_n = self.stats, self._warm, self.cold_n
        shared, snap, seen, gseen = self._shared, self._snap, self._seen, self._gseen
        wpow, gwpow, pop = self._wpow.table(), self._gwpow.table(), heapq.heappop
        outcomes = overruns = 0
        while ev and ev[0][0] <= now:
            _, j, k = pop(ev)
            b = jb[k][j]
            if b == CERTAIN:
                continue
            d = float(dur[j])
            over = not d <= W[k]  # live: a job still running at its deadline (NaN) overran
            if live and d <= W[k]:  # live: its fit comes once, at its end or its deadline
                if (j, k) in taken:
                    taken.discard((j, k))
                    continue
                taken.add((j, k))
            p = pool[j]
            seen[p][k] += 1
            gseen[k] += 1
            if shared[p]:  # the snapshot keeps the counts as of its refresh
                snap[p] = ([r[:] for r in n[p]], [r[:] for r in m[p]], t[p][:], snap[p][3])
                shared[p] = False
            np_, mp, tp = n[p][k], m[p][k], t[p]
            tk = tp[k] + 1
            if tk >= _RENORM:  # fold the decay into the counts before the weights overflow
                f = lam ** (tk - 1)
                np_[:] = [x * f for x in np_]
                mp[:] = [x * f for x in mp]
                tk = 1
            tp[k] = tk
            w = wpow[tk]
            np_[b] += w
            # warmth only grows: each outcome adds 1 to a decayed sum and decays the rest (summed
            # by numpy as before: its order of additions; only until the window is warm)
            if not warm[p][k] and np.asarray(np_[1:]).sum() * lam ** tk >= cold_n:
                warm[p][k] = True
                self._version += 1
                self._pool_ver[p] += 1
            g = gt[k] + 1
            gnk, gmk, gsk = gn[k], gm[k], gs[k]
            if g >= _RENORM:
                f = glam ** (g - 1)
                gnk[:] = [x * f for x in gnk]
                gmk[:] = [x * f for x in gmk]
                gsk[:] = [x * f for x in gsk]
                g = 1
            gt[k] = g
            gw = gwpow[g]
            gnk[b] += gw
            gsk[b] += gw * q[k][j]
            outcomes += 1
            if over:  # a miss tightens the pool at once; fits widen it at the next refresh
                mp[b] += w
                gmk[b] += gw
                overruns += 1
                self._due.add(p)
        stats["outcomes"] += outcomes
        stats["overruns"] += overruns
        self.next_due = (-math.inf if self._running_live else ev[0][0] if ev else math.inf)

    def _completions(self) -> None:
        """Live: queue the fits of the running predicted jobs whose run time became known (they
        ended), at their end, as a replay with the run times known queues them at the start."""
        W, dur, ev, keep = self.windows_s, self._dur, self._events, []
        for j, s in self._running_live:
            d = float(dur[j])
            if d != d:  # still running
                keep.append((j, s))
                continue
            for k, w in enumerate(W):
                if d <= w:
                    heapq.heappush(ev, (s + d, j, k))
        self._running_live = keep

    def bounds(self, now: float = math.inf, pools: list[int] | None = None) -> np.ndarray:
        """Return the upper bounds [pools, windows, bins 1..NEVER-1] on each bin's overrun rate
        (the ``level`` quantile of the pool's Beta posterior, non-decreasing over the bins).

        Only ``pools`` (default: all) are brought up to date (see :meth:`_refresh`); every
        quantile not computed yet is computed here (:meth:`allowed` compares the bounds with
        its threshold through the Beta cdf and computes a quantile only where that cannot
        decide, see :meth:`_lendable`)."""
        self._refresh(now, pools)
        P, K, B = len(self._raw), len(self.windows_s), NEVER - 1
        for p in range(P):
            self._valid_raw(p, range(K))
            self._scan_c[p] = [math.nan] * K  # (scans read the quantiles computed here)
        self._quantiles([(p, k, b) for p in range(P) for k in range(K) for b in range(B)
                         if self._raw[p][k][b] is None])
        return np.maximum.accumulate(np.asarray(self._raw, dtype=np.float64), axis=2)

    def _refresh(self, now: float, pools: list[int] | None) -> None:
        """Bring the Beta posteriors of ``pools`` (default: all) up to date at ``now`` (s).

        A pool's posterior is taken anew when it is 300 s old and as soon as one of its jobs
        overran (a miss tightens at once, fits widen at the next refresh); the prior over all
        pools, which moves slowly, every 300 s. Only the counts are kept (a copy, cheap):
        its quantiles (or their comparisons) are computed when first read. A window whose
        outcomes and prior did not change since the pool's last refresh keeps its quantiles:
        their parameters, hence their floats, are the same."""
        if now - self._prior_time >= 300.0:
            self._update_prior(now)
        fresh = self._fresh
        if fresh and now - fresh[0][0] >= 300.0:
            self._stale(now)
        due = self._due
        if due and (pools is None or not due.isdisjoint(pools)):
            rows = due.intersection(range(len(self._bound_time)) if pools is None else pools)
            if rows:
                self._snapshot(now, rows)

    def _stale(self, now: float) -> None:
        """Move the pools whose last refresh is 300 s old at ``now`` into the due set.

        ``now - t >= 300`` is monotone in ``t`` (rounding is), so the oldest refresh not
        300 s old ends the pass; an entry of a pool refreshed since is skipped."""
        fresh, bt, due, pop = self._fresh, self._bound_time, self._due, self._fresh.popleft
        while fresh and now - fresh[0][0] >= 300.0:
            t, p = pop()
            if bt[p] == t:
                due.add(p)

    def _snapshot(self, now: float, rows: set[int]) -> None:
        """Refresh the posteriors of the due pools ``rows`` at ``now`` (see :meth:`_refresh`;
        the order of ``rows`` changes nothing)."""
        bt, fresh = self._bound_time, self._fresh
        seen, pver, snap_seen, snap_prior = (self._seen, self._prior_ver, self._snap_seen,
                                             self._snap_prior)
        self._due -= rows
        moved = []
        push = fresh.append if not fresh or fresh[-1][0] <= now else partial(insort, fresh)
        for p in rows:
            bt[p] = now
            push((now, p))
            if seen[p] != snap_seen[p] or pver != snap_prior[p]:
                moved.append(p)  # (else the snapshot's counts and prior are the same as now)
        if moved:
            self._retake(moved)

    def _retake(self, rows: list[int]) -> None:
        """Take the snapshots of ``rows`` anew (pools whose outcomes or prior moved since).

        The counts as of now are kept (shared with the live counts until the pool's next
        outcome copies them, see resolve); a posterior's parameters are computed from them
        only when one of its quantiles is first read; its quantiles are forgotten when
        first read (:meth:`_valid_raw`), in the windows that moved."""
        snap, prior = self._snap, self._prior
        n, m, t, shared = self._n, self._m, self._t, self._shared
        seen, pver, snap_seen, snap_prior = (self._seen, self._prior_ver, self._snap_seen,
                                             self._snap_prior)
        pool_ver, snap_floor, floor = self._pool_ver, self._snap_floor, self._prior_floor
        pv = pver[:]  # (one copy for all: the snapshots' lists are never written)
        for p in rows:  # (a retaken pool has a window that moved: its version moves)
            snap[p] = (n[p], m[p], t[p], prior)
            snap_floor[p] = floor
            shared[p] = True
            snap_seen[p], snap_prior[p] = seen[p][:], pv
            pool_ver[p] += 1
        self._version += 1  # the bounds moved: allowed() must scan again

    def _valid_raw(self, p: int, ks: Any) -> None:
        """Forget pool ``p``'s quantiles of the windows ``ks`` that were computed for other
        parameters than its snapshot's (see :meth:`_retake`): a window's quantiles are kept
        while its outcomes seen and its prior's version are those they were computed with
        (``_raw_key``); both only grow, so equal stamps mean the same parameters, the same
        floats. A pool never refreshed keeps its quantiles of 1.0."""
        ss = self._snap_seen[p]
        if ss is None:
            return
        sp, rk, rp, B = self._snap_prior[p], self._raw_key[p], self._raw[p], NEVER - 1
        for k in ks:
            key = (ss[k], sp[k])
            if rk[k] != key:
                rk[k] = key
                rp[k] = [None] * B

    def _update_prior(self, now: float) -> None:
        """Take the prior (each bin's rate over all pools) anew from the global counts at
        ``now``: a :class:`_Prior` keeping the counts of the windows with a new outcome since
        the last update (their rates are computed when first read) and sharing the others';
        skipped when no outcome came at all (the same floats)."""
        self._prior_time = now
        seen, old_seen = self._gseen, self._prior_seen
        if old_seen == seen:
            return
        self._prior_seen = seen[:]
        n0, gpow, ver, old = self.prior_n, self._gpos, self._prior_ver, self._prior
        counts, rows = old.counts[:], old.rows[:]  # a new prior: snapshots keep theirs
        for k, (gnk, gmk, gsk) in enumerate(zip(self._gn, self._gm, self._gs, strict=True)):
            if old_seen is not None and old_seen[k] == seen[k]:
                continue  # no outcome in this window since: the same counts, the same rates
            # the decay of the window's counts (numpy's power, as before, from a table); the
            # rates are computed from these copies when first read (_Prior.row), in Python
            # floats (the same IEEE operations as the arrays [K, B] were computed with)
            counts[k] = (gpow[self._gt[k]], gnk[:], gmk[:], gsk[:])
            rows[k] = None
            # the window's rates moved (a new outcome changes the decay of every count; where
            # none did, as in a bin without outcomes, the quantiles recomputed are the same)
            ver[k] += 1
        self._prior = _Prior(counts, rows, n0)
        # the first bin's floor: the quantile of Beta(pa, memory + 1 + pb). Every pool's
        # posterior in that bin is Beta(m + pa, max(n - m, 0) + pb) with m >= 0 and n <= memory
        # (decayed counts: a sum of decay^i over distinct i >= 0), and the Beta quantile grows
        # with the first parameter and falls with the second: no pool's quantile is below it.
        # So a threshold t whose t_hi = t (1 + 2 _BRACKET) is below the floor fails the bin in
        # every pool whose snapshot has this prior (betaincinv's error is far below _BRACKET),
        # without its own quantile; _lendable skips those windows (98% of them on Philly at
        # risk 0.1): a skipped window's scan would have stopped at its first bin, so skipping
        # changes no answer. "Below the floor" is read from the cdf (_Floor.fails: the cdf at
        # t_hi below level - _CDF_SLACK), only for the thresholds _lendable asks about, not from
        # the floor's quantile: betaincinv at each prior cost a tenth of allowed() on Philly.
        # (memory <= 1 makes the decay <= 0: the counts' bound fails, so no floor (NaN))
        # (its parameters are computed when first read: since the scans' certificates, few
        # priors' floors are)
        cap = 1.0 / (1.0 - self.decay) + 1.0 if self.decay > 0.0 else math.nan
        self._prior_floor = _Floor(None, None, self.level, (counts, n0, cap))

    def _quantiles(self, cells: list[tuple[int, int, int]]) -> None:
        """Compute the ``level`` quantiles of the Beta posteriors of ``cells`` (pool, window,
        bin - 1) into ``_raw`` (one vectorised call; a pool with no outcome in a bin has the
        prior's parameters, shared by every such pool: those come from a cache)."""
        if not cells:
            return
        snap, lam, cache, raw = self._snap, self.decay, self._qcache, self._raw
        if len(cache) > 100_000:  # bounded: parameters drift with the decay
            cache.clear()
        miss: list[tuple[int, int, int, tuple[float, float]]] = []
        for p, k, b in cells:  # the arithmetic of _decayed and the prior's, in the same order
            n, m, t, prior = snap[p]
            _, pa, pb = prior.row(k)
            f = lam ** float(t[k])
            nd, md = f * n[k][b + 1], f * m[k][b + 1]  # the counts have every bin, from CERTAIN
            key = (md + pa[b], max(max(nd - md, 0.0) + pb[b], 1e-9))
            x = cache.get(key)
            if x is None:
                miss.append((p, k, b, key))
            else:
                raw[p][k][b] = x
        if miss:
            got = betaincinv(np.asarray([c[3][0] for c in miss]),
                             np.asarray([c[3][1] for c in miss]), self.level).tolist()
            for (p, k, b, key), x in zip(miss, got, strict=True):
                cache[key] = x
                raw[p][k][b] = x

    def _decayed(self, idx: np.ndarray, lo: int = 1, hi: int = NEVER
                 ) -> tuple[np.ndarray, np.ndarray]:
        """Return the decayed (outcomes, overruns) of pools ``idx`` in bins lo..hi-1 [.., K, B]."""
        rows = np.asarray(idx, dtype=np.int64).tolist()
        f = (self.decay ** np.asarray([self._t[p] for p in rows], dtype=np.float64))[:, :, None]
        n = np.asarray([self._n[p] for p in rows]).reshape(len(rows), len(self.windows_s), -1)
        m = np.asarray([self._m[p] for p in rows]).reshape(n.shape)
        return f * n[:, :, lo:hi], f * m[:, :, lo:hi]

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
        pool. Only ``pools`` (default: all) are evaluated; the others get CERTAIN."""
        P, K = len(self._raw), len(self.windows_s)
        if self.risk <= 0.0 or (pools is not None and not pools):
            return [[CERTAIN] * K for _ in range(P)]
        c = self.cost(now, unused)
        stats = self.stats
        stats["cost_sum"] += c
        stats["cost_n"] += 1
        self._refresh(now, pools)
        key = (self._version, c, None if pools is None else tuple(pools))
        if key == self._allowed_key:  # nothing it depends on changed since the last call
            return self._allowed
        # one row shared by the pools not evaluated (rows are never written after the scan)
        out = [self._certain_row] * P
        self._lendable(out, range(P) if pools is None else pools, c)
        self._allowed_key, self._allowed = key, out
        return out

    def _lendable(self, out: list[list[int]], pools: Any, c: float) -> None:
        """Set ``out[p]`` for ``pools``: per window, the number of leading bins whose bound
        times ``c`` is within the budget (0 in a cold window).

        The bounds are the running maximum of the quantiles over the bins, so a bin passes
        exactly when every bin before it passed and its own quantile does: the scan
        (:meth:`_scan`) stops at the first bin that fails, and only the bins it reaches are
        compared. A window whose first bin fails by the prior's floor (see
        :meth:`_update_prior`) is not scanned at all. A pool whose quantiles and warmth did not
        change since it was last scanned at the same ``c`` gets that scan's row (the same
        bins: rows are shared, never written after the scan). Else a pool keeps its last row
        while that row's certificate (:meth:`_certify_pool`) holds at the threshold and its
        snapshot's prior, or a new certificate of that row can be had at its snapshot now
        (the box holds today's threshold and prior: the row is the scan's); only then is it
        scanned, and its new row certified. (On Philly at risk 3, 99.2% of the rescans gave
        the row they gave before: 208,202 pool scans become about 1,600.)"""
        warm = self._warm
        rows, row_v, row_c, pver = self._rows, self._row_ver, self._row_c, self._pool_ver
        snap_floor, memo = self._snap_floor, self._within_t
        t = memo.get(c)
        if t is None:
            if len(memo) > 10_000:  # bounded: the costs follow the loads
                memo.clear()
            t = memo[c] = largest_within(self.risk, c)
        t_hi = t * (1.0 + 2.0 * _BRACKET)
        last, opened, certain = None, (), self._certain_row
        certs, seen, snap = self._pool_cert, self._snap_seen, self._snap
        for p in pools:
            if row_v[p] == pver[p] and row_c[p] == c:
                out[p] = rows[p]
                continue
            row_v[p], row_c[p] = pver[p], c
            pc = certs[p]  # the last scan's row holds here (see _certify_pool)
            if pc is not None and pc[0] <= t <= pc[1] and pc[2] == seen[p] and pc[3] == warm[p]:
                prior = snap[p][3]
                if prior is pc[4]:
                    out[p] = rows[p]
                    continue
                if _rates_within(prior, pc[5]):  # (the next check at this prior is quick)
                    certs[p] = (*pc[:4], prior, pc[5])
                    out[p] = rows[p]
                    continue
            pc = certs[p] = self._certify_pool(p, rows[p], t)  # the last row, anew here?
            if pc is not None:
                out[p] = rows[p]
                continue
            # the windows whose first bin the floor does not fail (all of them in a pool never
            # refreshed: its floor is the NaN one, and its quantiles are 1.0); most pools
            # share the prior's floor
            floor = snap_floor[p]
            if floor is not last:
                last, opened = floor, floor.opened(t_hi)
            wp = warm[p]
            ks = [k for k in opened if wp[k]] if opened else opened
            if ks:
                out[p] = rows[p] = self._scan(p, ks, t, c)
            else:  # no bin to scan: the shared row (never written)
                out[p] = rows[p] = certain
            certs[p] = self._certify_pool(p, rows[p], t)

    def _certify_pool(self, p: int, row: list[int], t: float) -> tuple | None:
        """Return a certificate that pool ``p``'s ``row`` holds at its snapshot now, at
        threshold ``t``, and at other thresholds and priors: ``(t_lo, t_hi, seen, warm, prior,
        bounds)``, valid while its snapshot's outcomes seen and its warmth are ``seen`` and
        ``warm``, at a threshold in ``[t_lo, t_hi]``, when its snapshot's prior is ``prior``
        or its rates meet ``bounds`` (:func:`_rates_within`). None: some warm window has no
        certificate, or no prior yet, or the pool was never refreshed.

        Each warm window's row is certified on its own (:func:`_window_certificate`), and its
        certificate kept while its outcomes seen stay (the same counts, the same parameters)
        and it holds at ``t`` and the snapshot's prior. A window the floor skipped is certified
        as a scanned one (its row is 0: its first bin fails); a cold window's row is 0 while
        its warmth stays."""
        ss = self._snap_seen[p]
        if ss is None:
            return None
        n, m, tp, prior = self._snap[p]
        wp, wcs, lam = self._warm[p], self._win_cert[p], self.decay
        t_lo, t_hi, bounds = -math.inf, math.inf, []
        for k, i in enumerate(row):
            if not wp[k]:
                if i:  # (a cold window's row is CERTAIN)
                    return None
                continue
            wc = wcs[k]
            if (wc is None or wc[0] != ss[k] or wc[3] != i or not wc[1] <= t <= wc[2]
                    or not _rates_within(prior, ((k, i, wc[4], wc[5]),))):
                if prior.counts[k] is None:
                    return None
                got = _window_certificate(n[k], m[k], lam ** float(tp[k]), prior.rates(k), i,
                                          t, self.prior_n, self.level)
                if got is None:
                    return None
                wc = wcs[k] = (ss[k], got[0], got[1], i, got[2], got[3])
            t_lo, t_hi = max(t_lo, wc[1]), min(t_hi, wc[2])
            bounds.append((k, i, wc[4], wc[5]))
        return (t_lo, t_hi, ss, wp[:], prior, bounds)

    def _scan(self, p: int, ks: list[int], t: float, c: float) -> list[int]:
        """Return pool ``p``'s row: per window of ``ks``, the number of leading bins whose
        quantile times ``c`` is within the budget, i.e. is <= ``t`` (:func:`largest_within`);
        CERTAIN in the other windows. A quantile already computed is compared itself; else the
        comparison is read from the Beta cdf (:func:`cell_within`, inline: scipy's scalar
        ``betainc``, the same floats as :func:`quantile_within`'s ufunc; the posteriors'
        parameters by the arithmetic of :meth:`_quantiles`), and where the cdf cannot decide
        from the exact quantile (:meth:`_quantiles`). A window's quantiles are first made
        valid for its snapshot (:meth:`_valid_raw`, inline); a window whose quantiles were
        kept and whose last scan was at the same ``c`` keeps that scan's bins (the same
        comparisons: a quantile computed since came from that scan, see bounds())."""
        row = [CERTAIN] * len(self.windows_s)
        n, m, tp, prior = self._snap[p]
        lam, raw, risk, level, B = self.decay, self._raw[p], self.risk, self.level, NEVER - 1
        ss, sp, rkey = self._snap_seen[p], self._snap_prior[p], self._raw_key[p]
        sc, sb, prows = self._scan_c[p], self._scan_bins[p], prior.rows
        hi, lo = level + _CDF_SLACK, level - _CDF_SLACK  # cell_within's, at t's bracket:
        x0, x1 = t * (1.0 - _BRACKET), min(t * (1.0 + _BRACKET), 1.0)
        cdf = 1 if t >= 1.0 else -1 if t < _TINY_T else 0  # 0: read the cdf
        for k in ks:
            if ss is not None:  # (else never refreshed: its quantiles are 1.0, no stamp)
                key = (ss[k], sp[k])
                if rkey[k] != key:
                    rkey[k] = key
                    raw[k] = [None] * B
                elif sc[k] == c:
                    row[k] = sb[k]
                    continue
            pr = prows[k] or prior.row(k)
            pa, pb = pr[1], pr[2]
            f = lam ** float(tp[k])
            nk, mk, rk = n[k], m[k], raw[k]
            i = 0
            while i < B:
                x = rk[i]
                if x is None:
                    d = cdf
                    if not d:
                        nd, md = f * nk[i + 1], f * mk[i + 1]  # the counts have every bin
                        a, b = md + pa[i], max(max(nd - md, 0.0) + pb[i], 1e-9)
                        d = (1 if _betainc(a, b, x0) >= hi else 0 if _betainc(a, b, x1) <= lo
                             else -1)
                    if d < 0:
                        self._quantiles([(p, k, i)])
                        d = rk[i] * c <= risk
                    if not d:
                        break
                elif not x * c <= risk:
                    break
                i += 1
            row[k] = sb[k] = i
            sc[k] = c
        return row

    def summary(self) -> dict[str, Any]:
        """Return the budget's counters: outcomes scored and overrun, loans on certainty and on
        prediction, the mean cost of a miss (jobs)."""
        s = dict(self.stats)
        n = s.pop("cost_n")
        s["mean_cost"] = s.pop("cost_sum") / n if n else None
        return s
