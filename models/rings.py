"""Rings of recent values kept sorted, and the calibration's per-record loops, compiled (numba).

:class:`RingBank` holds many rings at once (one per pool and window in
:class:`~sia.models.calibration.PoolCalibration`): ring ``r`` keeps its last ``size`` values
in arrival order (``vals[r]``, a circular buffer from ``head[r]``, ``cnt[r]`` values) and the
same values sorted (``srt[r, :cnt[r]]``), so one order statistic of them is read at once after
each new value. A push drops the oldest value from the sorted copy (at the first equal value,
as :func:`bisect.bisect_left` finds it) and inserts the new one after the equal values (as
:func:`bisect.insort` does): the sorted copy holds the same floats as a sorted list of the
ring's values would. It moves the sorted values once, between the two places (:func:`_replace`).

The loops over a window's grid records (:func:`score_rows`: the load scores;
:func:`label_rows`: the arrival records' positives) read the calibration's grid of cumulative
GPUs (row ``j``, pool ``p``) and do, per record and pool, the arithmetic the calibration's
Python did (the same operations in the same order, on float64: the same floats). Per forecast,
:func:`score_windows` runs :func:`score_rows` for every window, and :func:`resolve_rows` labels
every due arrival record with :func:`label_rows`, folds its precision and recall flags
(:func:`fold_record`, :class:`FlagBank`) and writes the answer and the new record; each stops
at the first window or record it cannot do, untouched, where the calibration's Python goes on.
"""

from __future__ import annotations

import math

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _push(vals, srt, head, cnt, r, v):  # pragma: no cover - compiled
    size = vals.shape[1]
    n = cnt[r]
    if n == size:  # drop the oldest value: from the ring, and from the sorted copy
        old = vals[r, head[r]]
        lo, hi = 0, n
        while lo < hi:  # bisect_left
            mid = (lo + hi) >> 1
            if srt[r, mid] < old:
                lo = mid + 1
            else:
                hi = mid
        vals[r, head[r]] = v
        head[r] = (head[r] + 1) % size
        # not found (NaN upsets the order): the move left dropped the last value
        _replace(srt, r, n, min(lo, n - 1), v)
        return
    vals[r, (head[r] + n) % size] = v
    lo, hi = 0, n
    while lo < hi:  # bisect_right (insort)
        mid = (lo + hi) >> 1
        if v < srt[r, mid]:
            hi = mid
        else:
            lo = mid + 1
    for i in range(n, lo, -1):
        srt[r, i] = srt[r, i - 1]
    srt[r, lo] = v
    cnt[r] = n + 1


@numba.njit(cache=True, nogil=True)
def _replace(srt, r, n, gone, v):  # pragma: no cover - compiled
    """Drop ``srt[r, gone]`` and insort ``v`` in the ``n`` sorted values, in one move: the
    insort's search reads the values as they stand once the dropped one is gone (index ``i``
    of that copy is ``i`` before ``gone``, ``i + 1`` from it on), so it makes the same
    comparisons on the same floats and finds the same place; then only the values between
    the two places move, by one."""
    lo, hi = 0, n - 1
    while lo < hi:  # bisect_right (insort), on the values without srt[r, gone]
        mid = (lo + hi) >> 1
        if v < srt[r, mid + 1 if mid >= gone else mid]:
            hi = mid
        else:
            lo = mid + 1
    if lo <= gone:
        for i in range(gone, lo, -1):
            srt[r, i] = srt[r, i - 1]
    else:
        for i in range(gone, lo):
            srt[r, i] = srt[r, i + 1]
    srt[r, lo] = v


@numba.njit(cache=True, nogil=True)
def _upper(srt, cnt, r, rank_up, cold):  # pragma: no cover - compiled
    n = cnt[r]
    k = rank_up[n]  # conformal_upper's rank: past the last means cold
    return srt[r, k - 1] if k <= n else cold


@numba.njit(cache=True, nogil=True)
def score_rows(rows, j0, n, offs, vs, hc, ring0, stride, q, k, rank_up,
               cold):  # pragma: no cover - compiled
    """Score ``n`` grid records of window ``k`` from row ``j0`` on: ``offs`` are the rows'
    offsets of ``t + i w``, i = -nw .. 1. A pool scores where its cumulative GPUs grew over
    ``(t, t + w]``: the realized GPUs minus the largest of the nw windows before (the first
    largest, as Python's ``max``); its ring is ``ring0 + p * stride`` and ``q[p, k]`` its upper
    bound after the push (``vs``, ``hc``: the rings' :attr:`RingBank.vs`, :attr:`RingBank.hc`).
    Returns the number of scores."""
    vals, srt, head, cnt = vs[0], vs[1], hc[0], hc[1]
    n_pools = rows.shape[1]
    nw = offs.size - 2
    new = 0
    for j in range(j0, j0 + n):
        jl, jp = j + offs[nw + 1], j + offs[nw]
        for p in range(n_pools):
            hi = rows[jl, p]
            lo = rows[jp, p]
            if not hi > lo:
                continue
            best = rows[j + offs[1], p] - rows[j + offs[0], p]
            for i in range(1, nw):
                d = rows[j + offs[i + 1], p] - rows[j + offs[i], p]
                if d > best:
                    best = d
            r = ring0 + p * stride
            _push(vals, srt, head, cnt, r, hi - lo - best)
            q[p, k] = _upper(srt, cnt, r, rank_up, cold)
            new += 1
    return new


@numba.njit(cache=True, nogil=True)
def label_rows(rows, ja, jb, probs, vs, hc, ring0, stride, thr, cold, k, rank_lo,
               label):  # pragma: no cover - compiled
    """One arrival record of window ``k``: the pools whose cumulative GPUs grew between rows
    ``ja`` and ``jb`` saw an arrival (``label[p]``); each pushes its probability ``probs[p]``
    into its ring (``ring0 + p * stride``) and takes the ring's lower bound as its threshold
    ``thr[p, k]`` (0 and ``cold`` while too few)."""
    vals, srt, head, cnt = vs[0], vs[1], hc[0], hc[1]
    for p in range(rows.shape[1]):
        if not rows[jb, p] > rows[ja, p]:
            label[p] = False
            continue
        label[p] = True
        r = ring0 + p * stride
        _push(vals, srt, head, cnt, r, probs[p])
        m = rank_lo[cnt[r]]  # recall_threshold's rank: below the first means cold
        thr[p, k] = srt[r, m - 1] if m >= 1 else 0.0
        cold[p, k] = m < 1


@numba.njit(cache=True, nogil=True)
def append_arrivals(src_sub, src_pool, src_gpus, lo, hi, sub, pool, gpus, n
                    ):  # pragma: no cover - compiled
    """Copy arrivals ``lo .. hi - 1`` of the source columns to ``sub``, ``pool`` and ``gpus``
    (float64, int64, float64) from index ``n`` on (room made); return whether they are in
    submission order among themselves (a NaN compares as in order, as Python's ``<``)."""
    in_order = True
    for i in range(lo, hi):
        t = np.float64(src_sub[i])
        if i > lo and t < sub[n - 1]:
            in_order = False
        sub[n] = t
        pool[n] = src_pool[i]
        gpus[n] = src_gpus[i]
        n += 1
    return in_order


@numba.njit(cache=True, nogil=True)
def fill_rows(rows, at, j_lo, j_hi, origin, step, sub, pool, gpus, ptr, n_sub,
              running):  # pragma: no cover - compiled
    """Write the grid rows ``j_lo .. j_hi`` (at ``rows[at]`` on): per row the cumulative GPUs
    per pool of the arrivals with submit <= ``origin + j step``, adding each arrival's GPUs to
    its pool in arrival order from arrival ``ptr`` on. Returns the next arrival."""
    g = ptr
    for j in range(j_lo, j_hi + 1):
        x = origin + j * step
        while g < n_sub and sub[g] <= x:
            running[pool[g]] += gpus[g]
            g += 1
        rows[at + j - j_lo, :] = running
    return g


@numba.njit(cache=True, nogil=True)
def _push_flag(flags, meta, r, v):  # pragma: no cover - compiled
    size = flags.shape[1]
    h, n = meta[r, 0], meta[r, 1]
    if n == size:  # drop the oldest flag
        meta[r, 2] -= flags[r, h]
        flags[r, h] = v
        meta[r, 0] = (h + 1) % size
    else:
        flags[r, (h + n) % size] = v
        meta[r, 1] = n + 1
    meta[r, 2] += v


@numba.njit(cache=True, nogil=True)
def fold_record(yes, label, ring0, stride, fm):  # pragma: no cover - compiled
    """One resolved arrival record: per pool ``p`` (ring ``ring0 + p * stride``), a positive
    (``label[p]``) appends whether it was predicted (``yes[p]``) to the recall ring, and a
    "yes" appends whether it saw an arrival to the precision ring (the same ring plus
    ``flags.shape[0] // 2``; ``fm``: the rings' :attr:`FlagBank.fm`): the flags a deque of
    each would get, record after record."""
    flags, meta = fm[:, 3:], fm[:, :3]
    half = flags.shape[0] // 2
    for p in range(label.size):
        r = ring0 + p * stride
        if label[p]:
            _push_flag(flags, meta, r, 1 if yes[p] else 0)
        if yes[p]:
            _push_flag(flags, meta, half + r, 1 if label[p] else 0)


@numba.njit(cache=True, nogil=True)
def _answer(now, proba, thr, yes, record, n_rec, rec_t, rec_p, rec_y):  # pragma: no cover
    for p in range(proba.shape[0]):
        for k in range(proba.shape[1]):
            yes[p, k] = proba[p, k] >= thr[p, k]
            if record:
                rec_p[n_rec, k, p] = proba[p, k]
                rec_y[n_rec, k, p] = yes[p, k]
    if record:
        rec_t[n_rec] = now


@numba.njit(cache=True, nogil=True)
def resolve_rows(now, wn, sd, grid, n_rec, rec_t, rec_p, rec_y, rows, base, n_rows,
                 origin, step, vs, hc, thr, cold, rank_lo, fm, proba, yes,
                 answer):  # pragma: no cover - compiled
    """Resolve, window by window, the arrival records (``rec_t[i]``, ``rec_p[i, k]``,
    ``rec_y[i, k]``, i < ``n_rec``) whose window has passed by ``now`` (the windows
    ``wins = wn[0]``), from window ``k``'s next one (``done[k]``; ``steps, done = sd``) on: each is labelled from the grid's rows at ``t`` and ``t + w``
    (:func:`label_rows`) and folded (:func:`fold_record`). A record that is not labelled so
    (``grid`` off, a window off the grid, a time off the grid or before the rows kept, rows
    not built) stops the loop: returns its window and the records resolved. Once all are
    resolved (returns -1), ``answer`` > 0 writes ``yes = proba >= thr`` (the thresholds just
    updated), and ``answer`` 2 also appends the record (``now``, ``proba``, ``yes``: their
    floats and flags, per window) at ``n_rec``."""
    wins, steps, done = wn[0], sd[0], sd[1]
    P = rows.shape[1]
    K = wins.size
    label = np.empty(P, dtype=np.bool_)
    new = 0
    for k in range(K):
        w, m, i = wins[k], steps[k], done[k]
        while i < n_rec and rec_t[i] + w <= now:
            t = rec_t[i]
            x = (t - origin) / step
            if not (grid and m > 0 and abs(x) < 2.0**50):
                done[k] = i
                return k, new
            j = int(np.rint(x))  # on the grid iff exact: then any rounding gives this j
            if not (j >= base and origin + j * step == t and j + m < n_rows):
                done[k] = i
                return k, new
            label_rows(rows, j - base, j + m - base, rec_p[i, k], vs, hc, k, K, thr, cold, k,
                       rank_lo, label)
            fold_record(rec_y[i, k], label, k, K, fm)
            i += 1
            new += 1
        done[k] = i
    if answer > 0:
        _answer(now, proba, thr, yes, answer == 2, n_rec, rec_t, rec_p, rec_y)
    return -1, new


@numba.njit(cache=True, nogil=True)
def score_windows(now, wn, sd, rows, base, n_rows, origin, step, keep, offs, vs,
                  hc, q, rank_up, cold):  # pragma: no cover - compiled
    """Score, window by window, the grid records whose window has passed by ``now``, from
    window ``k``'s next record time ``next_t[k]`` on (:func:`score_rows`; ``offs[k]`` the rows'
    offsets; ``wins, next_t = wn``, the grid steps ``sd[0]``), and move ``next_t[k]`` past them. A window that the rows cannot score (off the
    grid, rows not built, or more than ``keep`` rows kept: they are dropped first) stops the
    loop before it changes anything: returns that window (-1: all scored) and the scores."""
    wins, next_t, steps = wn[0], wn[1], sd[0]
    new = 0
    for k in range(wins.size):
        t_end = now - wins[k]
        nt = next_t[k]
        if nt > t_end:
            continue
        n = math.ceil((t_end + 1e-9 - nt) / step)  # _grid_count
        if n <= 0:
            continue
        m = steps[k]
        j0 = int((nt - origin) // step)
        if m <= 0 or n_rows - base > keep or j0 + n - 1 + m >= n_rows:
            return k, new
        next_t[k] = nt + n * step
        new += score_rows(rows, j0 - base, n, offs[k], vs, hc, k, wins.size, q, k, rank_up,
                          cold)
    return -1, new


class FlagBank:
    """``n`` rings of at most ``size`` flags (0 or 1) each, with each ring's count of ones: the
    precision and recall rings (see :func:`fold_record`). ``meta[r]`` = (head, count, ones).
    Both are views of one array ``fm`` (``meta`` its first three columns, ``flags`` the
    rest), which the compiled loops take (a compiled call's cost grows with its arrays)."""

    __slots__ = ("flags", "fm", "meta")

    def __init__(self, n: int, size: int):
        self.fm = np.zeros((n, 3 + int(size)), dtype=np.int64)
        self.flags, self.meta = self.fm[:, 3:], self.fm[:, :3]

    def values(self, r: int) -> list[int]:
        """Ring ``r``'s flags, oldest first."""
        h, n = int(self.meta[r, 0]), int(self.meta[r, 1])
        return self.flags[r, (h + np.arange(n)) % self.flags.shape[1]].tolist()


class RingBank:
    """``n`` rings of at most ``size`` values each, each also kept sorted (see the module doc).
    ``vals`` and ``srt`` are views of one array ``vs``, ``head`` and ``cnt`` of ``hc``, which
    the compiled loops take (a compiled call's cost grows with its arrays)."""

    __slots__ = ("cnt", "hc", "head", "size", "srt", "vals", "vs")

    def __init__(self, n: int, size: int):
        self.size = int(size)
        self.vs = np.zeros((2, n, self.size))
        self.vals, self.srt = self.vs[0], self.vs[1]
        self.hc = np.zeros((2, n), dtype=np.int64)
        self.head, self.cnt = self.hc[0], self.hc[1]

    def push(self, r: int, v: float) -> None:
        """Append ``v`` to ring ``r`` (dropping its oldest value when full)."""
        _push(self.vals, self.srt, self.head, self.cnt, r, float(v))

    def count(self, r: int) -> int:
        """The number of values in ring ``r``."""
        return int(self.cnt[r])

    def values(self, r: int) -> list[float]:
        """Ring ``r``'s values, oldest first."""
        n, h = int(self.cnt[r]), int(self.head[r])
        return self.vals[r, (h + np.arange(n)) % self.size].tolist()

    def sorted(self, r: int) -> np.ndarray:
        """Ring ``r``'s values, sorted (a view)."""
        return self.srt[r, :self.cnt[r]]
