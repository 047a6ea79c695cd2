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
def _sort_starts(st_t, st_p, st_g, n):  # pragma: no cover - compiled
    """Sort the first ``n`` starts by (time, pool, GPUs), as Python sorts the tuples (an
    insertion sort: the starts come in time order, or nearly)."""
    for i in range(1, n):
        t, p, g = st_t[i], st_p[i], st_g[i]
        j = i - 1
        while j >= 0 and (st_t[j] > t or (st_t[j] == t and (
                st_p[j] > p or (st_p[j] == p and st_g[j] > g)))):
            st_t[j + 1], st_p[j + 1], st_g[j + 1] = st_t[j], st_p[j], st_g[j]
            j -= 1
        st_t[j + 1], st_p[j + 1], st_g[j + 1] = t, p, g


@numba.njit(cache=True, nogil=True)
def _sweep(now, lo, new, st_t, st_p, st_g, n_st, he, hp, hg, hn, pt, pp, pg, ph, pn, front,
           back):  # pragma: no cover - compiled
    """Add the starts recorded since the last query (``new``: rows of time, pool, GPUs, end)
    to the starts and their ends to the heap, sort the starts, take in the starts and the
    heap's ends up to ``now`` at the front and the passed events up to ``lo`` at the back;
    keep the starts not taken first. Returns (starts left, heap size, passed head, passed
    count)."""
    for r in range(new.shape[0]):
        p = np.int64(new[r, 1])
        st_t[n_st], st_p[n_st], st_g[n_st] = new[r, 0], p, new[r, 2]
        n_st += 1
        hn = heap_push(he, hp, hg, hn, new[r, 3], p, -new[r, 2])
    _sort_starts(st_t, st_p, st_g, n_st)
    a, s, last = front[0], front[1], front[2]
    i = 0
    while True:  # the starts and ends up to now, merged in time order
        if i < n_st and st_t[i] <= now and not (hn > 0 and he[0] < st_t[i]):
            t, p, g = st_t[i], st_p[i], st_g[i]
            i += 1
        elif hn > 0 and he[0] <= now:
            t, p, g = he[0], hp[0], hg[0]
            hn = heap_pop(he, hp, hg, hn)
        else:
            break
        a[p] += s[p] * (t - last[p])
        s[p] += g
        last[p] = t
        pt[pn], pp[pn], pg[pn] = t, p, g
        pn += 1
    ab, sb, lastb = back[0], back[1], back[2]
    while ph < pn and pt[ph] <= lo:
        t, p, g = pt[ph], pp[ph], pg[ph]
        ph += 1
        ab[p] += sb[p] * (t - lastb[p])
        sb[p] += g
        lastb[p] = t
    for j in range(i, n_st):  # the starts not taken in, first
        st_t[j - i], st_p[j - i], st_g[j - i] = st_t[j], st_p[j], st_g[j]
    return n_st - i, hn, ph, pn


@numba.njit(cache=True, nogil=True)
def _used(now, lo, front, back, quota, span, out):  # pragma: no cover - compiled
    """``out[p]``: the GPU-seconds of pool ``p`` in ``[lo, now]`` over ``quota[p] * span``."""
    for p in range(out.size):
        out[p] = (((front[0, p] + front[1, p] * (now - front[2, p]))
                   - (back[0, p] + back[1, p] * (lo - back[2, p]))) / (quota[p] * span))


@numba.njit(cache=True, nogil=True)
def _sweep_used(now, lo, new, st_t, st_p, st_g, n_st, he, hp, hg, hn, pt, pp, pg, ph, pn, front,
                back, quota, span, out):  # pragma: no cover - compiled
    """:func:`_sweep`, then :func:`_used` into ``out``, in one call; returns :func:`_sweep`'s."""
    r = _sweep(now, lo, new, st_t, st_p, st_g, n_st, he, hp, hg, hn, pt, pp, pg, ph, pn, front,
               back)
    _used(now, lo, front, back, quota, span, out)
    return r


def _grown(arrays: tuple[np.ndarray, ...], need: int) -> tuple[np.ndarray, ...]:
    """``arrays`` (of one size) with room for ``need`` entries (at least doubled when they
    grow)."""
    if need <= arrays[0].size:
        return arrays
    out = []
    for a in arrays:
        b = np.empty(max(need, 2 * a.size), dtype=a.dtype)
        b[:a.size] = a
        out.append(b)
    return tuple(out)


class RecentUse:
    """Each pool's GPU-seconds run in a trailing period, kept incrementally (see the module
    doc)."""

    def __init__(self, n_pools: int):
        P = n_pools
        # the starts since the last query, rows (time, pool, GPUs, end), and how many
        self._new, self._m = np.empty((64, 4)), 0
        self._new_flat = memoryview(self._new.reshape(-1))  # (its items, written one by one)
        # starts not yet taken in, the heap of the running jobs' ends, and the events taken in
        # by the front not yet by the back (from index _ph to _pn), as arrays
        self._st_t, self._st_p, self._st_g = np.empty(64), np.empty(64, np.int64), np.empty(64)
        self._n_st = 0
        self._he, self._hp, self._hg = np.empty(64), np.empty(64, np.int64), np.empty(64)
        self._hn = 0
        self._pt, self._pp, self._pg = np.empty(64), np.empty(64, np.int64), np.empty(64)
        self._ph = self._pn = 0
        # per pool: A at last, slope, last time; at the front and at the back
        self._front, self._back = np.zeros((3, P)), np.zeros((3, P))
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
            if self._hn + m > self._he.size:
                self._he, self._hp, self._hg = _grown((self._he, self._hp, self._hg),
                                                      self._hn + m)
            if self._n_st + m > self._st_t.size:
                self._st_t, self._st_p, self._st_g = _grown(
                    (self._st_t, self._st_p, self._st_g), self._n_st + m)
        if self._ph > 4096 and 2 * self._ph > self._pn:  # drop the events both sides passed
            k = self._pn - self._ph
            for a in (self._pt, self._pp, self._pg):
                a[:k] = a[self._ph:self._pn]
            self._ph, self._pn = 0, k
        need = self._pn + self._n_st + self._hn + 2 * m
        if need > self._pt.size:
            self._pt, self._pp, self._pg = _grown((self._pt, self._pp, self._pg), need)
        self._n_st, self._hn, self._ph, self._pn = _sweep_used(
            now, lo, self._new[:m], self._st_t, self._st_p, self._st_g, self._n_st, self._he,
            self._hp, self._hg, self._hn, self._pt, self._pp, self._pg, self._ph, self._pn,
            self._front, self._back, quota, span, self._out)
        self._now = now
        return self._out
