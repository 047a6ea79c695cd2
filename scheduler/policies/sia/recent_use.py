"""Each pool's GPU-seconds run in a trailing period, kept incrementally (the risk budget's loads).

:class:`RecentUse` answers, per pool, the GPU-seconds its started jobs ran in ``[lo, now]``
(a running job counts up to ``now``). It is ``A(now) - A(lo)``, where ``A(t)`` is the pool's
cumulative GPU-seconds up to ``t``: piecewise linear, its slope the GPUs the pool runs. Two
sweeps over the starts and ends, in time order, keep ``A`` at the front (``now``) and at the
back (``lo``); each event is taken in twice in all, so a query costs O(pools) plus the events
passed since the last one, instead of a pass over every job of the period. With whole-second
times and GPU counts (every shipped trace) all the sums are integers below 2**53, hence exact:
the same floats as summing the jobs one by one in any order; otherwise they agree up to
rounding.

The sweeps are compiled (numba): the starts in the order of their ``(time, pool, GPUs)``, the
ends from a binary heap ordered by ``(end, pool, -GPUs)``, a start before an end at the same
time, and per event ``A += slope * (t - last)``, ``slope += GPUs`` (the operations, and their
order, of the Python sweeps they replaced: the same floats).

Queries must not go back in time (``now`` and ``lo`` non-decreasing), and a start must not
precede an earlier query's ``now``: a replay's clock.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _less(he, hp, hg, i, j):  # pragma: no cover - compiled
    """Heap order: entry i's (first, second, third) below entry j's, as tuples compare
    (here (end, pool, -GPUs))."""
    if he[i] != he[j]:
        return he[i] < he[j]
    if hp[i] != hp[j]:
        return hp[i] < hp[j]
    return hg[i] < hg[j]


@numba.njit(cache=True, nogil=True, inline="always")
def _swap(he, hp, hg, i, j):  # pragma: no cover - compiled
    """Swap heap entries i and j."""
    he[i], he[j] = he[j], he[i]
    hp[i], hp[j] = hp[j], hp[i]
    hg[i], hg[j] = hg[j], hg[i]


@numba.njit(cache=True, nogil=True)
def heap_push(he, hp, hg, n, e, p, g):  # pragma: no cover - compiled
    """Push entry (e, p, g) on the heap of ``n`` entries in (e, p, g) order (room for it);
    return the new size. (Also the risk budget's heap of outcome events.)"""
    he[n], hp[n], hg[n] = e, p, g
    i = n
    while i > 0:
        up = (i - 1) >> 1
        if not _less(he, hp, hg, i, up):
            break
        _swap(he, hp, hg, i, up)
        i = up
    return n + 1


@numba.njit(cache=True, nogil=True)
def heap_pop(he, hp, hg, n):  # pragma: no cover - compiled
    """Remove the top entry (read it first); return the new size. With no two equal entries
    but identical ones, the entries come out in the order Python's heapq gives them."""
    n -= 1
    he[0], hp[0], hg[0] = he[n], hp[n], hg[n]
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(he, hp, hg, c + 1, c):
            c += 1
        if not _less(he, hp, hg, c, i):
            break
        _swap(he, hp, hg, i, c)
        i = c
    return n


@numba.njit(cache=True, nogil=True)
def _sort_starts(st, n):  # pragma: no cover - compiled
    """Sort the first ``n`` starts (columns of ``st``: time, pool, GPUs) by (time, pool, GPUs),
    as Python sorts the tuples (an insertion sort: the starts come in time order, or nearly)."""
    st_t, st_p, st_g = st[0], st[1], st[2]
    for i in range(1, n):
        t, p, g = st_t[i], st_p[i], st_g[i]
        j = i - 1
        while j >= 0 and (st_t[j] > t or (st_t[j] == t and (
                st_p[j] > p or (st_p[j] == p and st_g[j] > g)))):
            st_t[j + 1], st_p[j + 1], st_g[j + 1] = st_t[j], st_p[j], st_g[j]
            j -= 1
        st_t[j + 1], st_p[j + 1], st_g[j + 1] = t, p, g


@numba.njit(cache=True, nogil=True)
def _sweep(now, lo, new, m, st, n_st, h, hn, ps, ph, pn, fb):  # pragma: no cover - compiled
    """Add the ``m`` starts recorded since the last query (``new``: rows of time, pool, GPUs,
    end) to the starts ``st`` and their ends to the heap ``h`` (rows: end, pool, -GPUs), sort
    the starts, take in the starts and the heap's ends up to ``now`` at the front (``fb[0]``)
    and the passed events ``ps`` up to ``lo`` at the back (``fb[1]``); keep the starts not
    taken first. A pool is kept as the float it equals. Returns (starts left, heap size,
    passed head, passed count)."""
    st_t, st_p, st_g = st[0], st[1], st[2]
    he, hp, hg = h[0], h[1], h[2]
    pt, pp, pg = ps[0], ps[1], ps[2]
    for r in range(m):
        st_t[n_st], st_p[n_st], st_g[n_st] = new[r, 0], new[r, 1], new[r, 2]
        n_st += 1
        hn = heap_push(he, hp, hg, hn, new[r, 3], new[r, 1], -new[r, 2])
    _sort_starts(st, n_st)
    a, s, last = fb[0, 0], fb[0, 1], fb[0, 2]
    i = 0
    while True:  # the starts and ends up to now, merged in time order
        if i < n_st and st_t[i] <= now and not (hn > 0 and he[0] < st_t[i]):
            t, p, g = st_t[i], np.int64(st_p[i]), st_g[i]
            i += 1
        elif hn > 0 and he[0] <= now:
            t, p, g = he[0], np.int64(hp[0]), hg[0]
            hn = heap_pop(he, hp, hg, hn)
        else:
            break
        a[p] += s[p] * (t - last[p])
        s[p] += g
        last[p] = t
        pt[pn], pp[pn], pg[pn] = t, p, g
        pn += 1
    ab, sb, lastb = fb[1, 0], fb[1, 1], fb[1, 2]
    while ph < pn and pt[ph] <= lo:
        t, p, g = pt[ph], np.int64(pp[ph]), pg[ph]
        ph += 1
        ab[p] += sb[p] * (t - lastb[p])
        sb[p] += g
        lastb[p] = t
    for j in range(i, n_st):  # the starts not taken in, first
        st_t[j - i], st_p[j - i], st_g[j - i] = st_t[j], st_p[j], st_g[j]
    return n_st - i, hn, ph, pn


@numba.njit(cache=True, nogil=True)
def _used(now, lo, fb, quota, span, out):  # pragma: no cover - compiled
    """``out[p]``: the GPU-seconds of pool ``p`` in ``[lo, now]`` over ``quota[p] * span``
    (``fb``: the front's and the back's A, slope and last time per pool)."""
    for p in range(out.size):
        out[p] = (((fb[0, 0, p] + fb[0, 1, p] * (now - fb[0, 2, p]))
                   - (fb[1, 0, p] + fb[1, 1, p] * (lo - fb[1, 2, p]))) / (quota[p] * span))


@numba.njit(cache=True, nogil=True)
def _sweep_used(now, lo, new, m, st, n_st, h, hn, ps, ph, pn, fb, quota, span, out
                ):  # pragma: no cover - compiled
    """:func:`_sweep`, then :func:`_used` into ``out``, in one call; returns :func:`_sweep`'s.
    (Few arguments, each an array of rows: a call's cost grows with its arrays.)"""
    r = _sweep(now, lo, new, m, st, n_st, h, hn, ps, ph, pn, fb)
    _used(now, lo, fb, quota, span, out)
    return r


def _grown(a: np.ndarray, need: int) -> np.ndarray:
    """``a`` (rows of entries) with room for ``need`` entries (at least doubled when it
    grows)."""
    if need <= a.shape[1]:
        return a
    b = np.empty((a.shape[0], max(need, 2 * a.shape[1])), dtype=a.dtype)
    b[:, :a.shape[1]] = a
    return b


class RecentUse:
    """Each pool's GPU-seconds run in a trailing period, kept incrementally (see the module
    doc)."""

    def __init__(self, n_pools: int):
        P = n_pools
        # the starts since the last query, rows (time, pool, GPUs, end), and how many
        self._new, self._m = np.empty((64, 4)), 0
        self._new_flat = memoryview(self._new.reshape(-1))  # (its items, written one by one)
        # starts not yet taken in (rows: time, pool, GPUs), the heap of the running jobs' ends
        # (end, pool, -GPUs), and the events taken in by the front not yet by the back (time,
        # pool, GPUs; from index _ph to _pn), as arrays of rows (a pool as the float it equals)
        self._st, self._n_st = np.empty((3, 64)), 0
        self._h, self._hn = np.empty((3, 64)), 0
        self._ps, self._ph, self._pn = np.empty((3, 64)), 0, 0
        # per pool: A at last, slope, last time; at the front [0] and at the back [1]
        self._fb = np.zeros((2, 3, P))
        self._out = np.empty(P)
        self._ones = np.ones(P)  # used(): per_quota over a quota of 1 and a span of 1 (exact)
        self._now = -math.inf  # the last query's now

    def start(self, t: float, pool: int, gpus: float, end: float) -> None:
        """Record a job of ``pool`` holding ``gpus`` from ``t`` to ``end`` (> t)."""
        if t < self._now:
            raise ValueError(f"a start at {t} precedes the last query at {self._now}")
        m = self._m
        if m == self._new.shape[0]:
            self._new = np.resize(self._new, (2 * m, 4))
            self._new_flat = memoryview(self._new.reshape(-1))
        i, new = 4 * m, self._new_flat  # (a pool is exact as a float)
        new[i], new[i + 1], new[i + 2], new[i + 3] = t, pool, gpus, end
        self._m = m + 1

    def used(self, now: float, lo: float) -> list[float]:
        """Return each pool's GPU-seconds in ``[lo, now]`` (``lo <= now``)."""
        return self._query(now, lo, self._ones, 1.0).tolist()  # (u / 1.0 is u)

    def per_quota(self, now: float, lo: float, quota: list[float], span: float) -> list[float]:
        """Return each pool's ``used(now, lo) / (quota * span)`` (``span`` > 0)."""
        return self.per_quota_array(now, lo, np.asarray(quota, dtype=np.float64), span).tolist()

    def per_quota_array(self, now: float, lo: float, quota: np.ndarray, span: float
                        ) -> np.ndarray:
        """:meth:`per_quota` for a float64 array of quotas, answered in an array that the next
        query overwrites (copy it to keep it)."""
        return self._query(now, lo, quota, span)

    def _query(self, now: float, lo: float, quota: np.ndarray, span: float) -> np.ndarray:
        """Take in the starts and ends up to ``now`` at the front, up to ``lo`` at the back, and
        answer each pool's GPU-seconds in ``[lo, now]`` over ``quota * span`` in ``_out``: one
        compiled call (:func:`_sweep_used`), the arrays grown first where they need room."""
        m = self._m
        if m:
            self._m = 0  # (the sweep takes the rows in before the next start writes over them)
            if self._hn + m > self._h.shape[1]:
                self._h = _grown(self._h, self._hn + m)
            if self._n_st + m > self._st.shape[1]:
                self._st = _grown(self._st, self._n_st + m)
        ps, ph, pn = self._ps, self._ph, self._pn
        if ph > 4096 and 2 * ph > pn:  # drop the events both sides passed
            ps[:, :pn - ph] = ps[:, ph:pn]  # (numpy copies first where the two overlap)
            self._ph, self._pn = 0, pn - ph
        need = self._pn + self._n_st + self._hn + 2 * m
        if need > ps.shape[1]:
            self._ps = _grown(ps, need)
        self._n_st, self._hn, self._ph, self._pn = _sweep_used(
            now, lo, self._new, m, self._st, self._n_st, self._h, self._hn, self._ps, self._ph,
            self._pn, self._fb, quota, span, self._out)
        self._now = now
        return self._out
