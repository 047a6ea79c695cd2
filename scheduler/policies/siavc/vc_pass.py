"""The bulk part of one SIA_VC pass (Figure 6), compiled with numba.

One pass visits jobs in increasing virtual start time (VST, ties by job
index), reserving ``[VST, VST + d)`` for every job that cannot start now,
until the first job that can. :func:`bulk_pass` does everything of that visit
that does not depend on the guard's outcome (see
:class:`sia.scheduler.policies.siavc.policy.SiaVCPolicy` for the guard): over the
pools' clocks merged in visit order (:func:`merge_clocks`, kept up to date by
:func:`update_merged` and :func:`drop_job`), it finds the candidates (jobs
that could start now) and, for each,
whether Figure 6's ``MaxReservation(now, d) + width`` exceeds the cluster
over the plan of the jobs visited before it. Every visited job is reserved
whatever its own check says (a job that starts ends the pass), so the plan a
job sees is that of the jobs before it in the order. :func:`lazy_pass` finds the
candidates and works out their verdicts only as far as the walk
(:class:`CandidateWalk`) asks for them.

Times are seconds, GPU counts ints.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from itertools import accumulate

import numba
import numpy as np


def merge_clocks(
    V: np.ndarray, J: np.ndarray, G: np.ndarray, D: np.ndarray, seg: np.ndarray,
    pools: np.ndarray | None = None,
) -> tuple[np.ndarray, ...]:
    """Return the pools' clocks merged in (VST, job) order: (V, J, G, D, pool, order of the
    entries by end V + D, alive, the ends in that order, reserved GPUs, reserved GPUs in
    end order).

    The policy merges only the clocks' entries before a bound past the horizon (see
    :func:`cut_merged` and :func:`pending_tail`): a pass reads ends up to the horizon only.

    ``alive`` (bool) marks the entries still in their clock: :func:`drop_job` clears
    an entry in place when its job leaves its clock without changing the others.
    *Reserved GPUs* (int64) are what an entry reserves when visited: its GPUs if it is
    alive, at least 1 wide and of a positive duration, else 0; kept in both orders so
    that a pass sums them without reading the other arrays (or the end order's
    positions, scattered over the merge) per entry.

    ``V, J, G, D`` (float64 VST s, int64 job, int64 GPUs, float64 duration s)
    are the clocks laid end to end, the k-th at ``seg[k]:seg[k + 1]``, each
    sorted by VST with jobs ascending; ``pools[k]`` is the k-th clock's pool
    (default k).
    """
    V = np.asarray(V, dtype=np.float64)
    J = np.asarray(J, dtype=np.int64)
    seg = np.asarray(seg, dtype=np.int64)
    D = np.asarray(D, dtype=np.float64)
    G = np.asarray(G, dtype=np.int64)
    sizes = np.diff(seg)
    if sizes.shape[0] == 1:  # one clock: already in (VST, job) order
        mV, mJ, mG, mD = V, J, G, D
        mP = np.full(V.shape[0], 0 if pools is None else pools[0], dtype=np.int64)
    else:
        at = np.repeat(np.arange(sizes.shape[0], dtype=np.int64), sizes)
        pool = at if pools is None else np.asarray(pools, dtype=np.int64)[at]
        order = _merge_order(V, J, seg)  # the sorted runs merged in linear time
        mV, mJ, mG, mD, mP = V[order], J[order], G[order], D[order], pool[order]
    eo, ends, rg, erg = _by_end(np.ascontiguousarray(mV), np.ascontiguousarray(mD),
                                np.ascontiguousarray(mG))
    return (mV, mJ, mG, mD, mP, eo, np.ones(V.shape[0], dtype=np.bool_), ends, rg, erg)


@numba.njit(cache=True, nogil=True)
def argsort_floats(x):  # pragma: no cover - compiled
    """An order sorting the float64 array ``x`` (no NaN) ascending: a least-significant-digit
    radix sort on the bits, linear in the length. Only the bits that differ between keys
    are sorted on, in digits of equal width (at most 11 bits, 8 for short arrays): the
    merge's changed spans (~2k ends on average, up to tens of thousands) differ in 14-23
    bits, so two or three passes instead of three or four bytes. Equal keys come in no
    particular order. (numpy's comparison sort cost several times as much on those spans.)"""
    n = x.shape[0]
    bits = x.view(np.int64)
    key = np.empty(n, dtype=np.int64)
    lowest = np.int64(-0x8000000000000000)
    for i in range(n):  # the floats' order as unsigned integers (negative floats reversed)
        b = bits[i]
        key[i] = (b if b >= 0 else b ^ 0x7FFFFFFFFFFFFFFF) ^ lowest
    idx = np.arange(n)
    if n < 2:
        return idx
    all_or = key[0]
    all_and = key[0]
    for i in range(1, n):
        all_or |= key[i]
        all_and &= key[i]
    diff = all_or ^ all_and  # the bits that differ between some keys
    if diff == 0:
        return idx
    lo = 0
    while (diff >> lo) & 1 == 0:
        lo += 1
    hi = 63
    while (diff >> hi) & 1 == 0:
        hi -= 1
    width = hi - lo + 1
    widest = 11 if n >= 1024 else 8
    passes = (width + widest - 1) // widest
    digit = (width + passes - 1) // passes
    mask = (np.int64(1) << digit) - 1
    key2 = np.empty(n, dtype=np.int64)
    idx2 = np.empty(n, dtype=np.int64)
    cnt = np.empty((1 << digit) + 1, dtype=np.int64)
    for p in range(passes):
        shift = lo + p * digit
        cnt[:] = 0
        for i in range(n):  # (an arithmetic shift: bits past 63 come masked out, as
            cnt[((key[i] >> shift) & mask) + 1] += 1  # shift + digit <= 64 + digit - 1)
        for d in range(1 << digit):
            cnt[d + 1] += cnt[d]
        for i in range(n):
            d = (key[i] >> shift) & mask
            k = cnt[d]
            cnt[d] = k + 1
            key2[k] = key[i]
            idx2[k] = idx[i]
        key, key2 = key2, key
        idx, idx2 = idx2, idx
    return idx


@numba.njit(cache=True, nogil=True)
def _by_end(mV, mD, mG):  # pragma: no cover - compiled
    # (order by end, the ends in that order, reserved GPUs, reserved GPUs in end order)
    ends = mV + mD
    eo = argsort_floats(ends)
    n = ends.shape[0]
    rg = np.empty(n, dtype=np.int64)
    for i in range(n):
        rg[i] = mG[i] if mG[i] > 0 and mD[i] > 0 else 0
    se = np.empty(n, dtype=np.float64)
    erg = np.empty(n, dtype=np.int64)
    for k in range(n):
        se[k] = ends[eo[k]]
        erg[k] = rg[eo[k]]
    return eo, se, rg, erg


@numba.njit(cache=True, nogil=True)
def _replace(aV, aJ, aG, aD, aP, aEO, aA, aE, aR, aER, lo, hi, bV, bJ, bG, bD, bP, bEO, bA,
             bE, bR, bER):  # pragma: no cover - compiled
    # one sweep in (VST, job) order writes the kept old entries and the new ones where they
    # go (recording the old and new entries' output positions), then one sweep in end
    # order merges the kept entries' end order with the new ones'
    mV, mJ, mG, mD, mP, mR, pos_a, pos_b, n = _replace_by_vst(
        aV, aJ, aG, aD, aP, aA, aR, lo, hi, bV, bJ, bG, bD, bP, bR)
    eo, ends, er, o = _replace_end_order(aEO, aE, aER, pos_a, bEO, bE, bER, pos_b, n)
    return (mV[:n], mJ[:n], mG[:n], mD[:n], mP[:n], eo[:o], np.ones(n, dtype=np.bool_),
            ends[:o], mR[:n], er[:o])


@numba.njit(cache=True, nogil=True)
def _replace_by_vst(aV, aJ, aG, aD, aP, aA, aR, lo, hi, bV, bJ, bG, bD, bP,
                    bR):  # pragma: no cover - compiled
    # _replace's first sweep: the kept old entries (alive, job outside their pool's
    # [lo, hi]) and the new ones merged in (VST, job) order, with each old and new entry's
    # output position (-1: an old entry dropped) and the count written
    na = aV.shape[0]
    nb = bV.shape[0]
    cap = na + nb
    mV = np.empty(cap, dtype=np.float64)
    mJ = np.empty(cap, dtype=np.int64)
    mG = np.empty(cap, dtype=np.int64)
    mD = np.empty(cap, dtype=np.float64)
    mP = np.empty(cap, dtype=np.int64)
    mR = np.empty(cap, dtype=np.int64)
    pos_a = np.empty(na, dtype=np.int64)
    pos_b = np.empty(nb, dtype=np.int64)
    o = 0
    k = 0
    for i in range(na):
        a = aP[i]
        j = aJ[i]
        if not aA[i] or (lo[a] <= j and j <= hi[a]):
            pos_a[i] = -1
            continue
        v = aV[i]
        while k < nb and (bV[k] < v or (bV[k] == v and bJ[k] < j)):
            mV[o] = bV[k]
            mJ[o] = bJ[k]
            mG[o] = bG[k]
            mD[o] = bD[k]
            mP[o] = bP[k]
            mR[o] = bR[k]
            pos_b[k] = o
            o += 1
            k += 1
        mV[o] = v
        mJ[o] = j
        mG[o] = aG[i]
        mD[o] = aD[i]
        mP[o] = a
        mR[o] = aR[i]
        pos_a[i] = o
        o += 1
    while k < nb:
        mV[o] = bV[k]
        mJ[o] = bJ[k]
        mG[o] = bG[k]
        mD[o] = bD[k]
        mP[o] = bP[k]
        mR[o] = bR[k]
        pos_b[k] = o
        o += 1
        k += 1
    return mV, mJ, mG, mD, mP, mR, pos_a, pos_b, o


@numba.njit(cache=True, nogil=True)
def _replace_end_order(aEO, aE, aER, pos_a, bEO, bE, bER, pos_b,
                       n):  # pragma: no cover - compiled
    # _replace's second sweep: the kept entries' end order (in their old order) merged with
    # the new ones', as output positions (pos_a / pos_b), ends and reserved GPUs, and the
    # count written
    eo = np.empty(n, dtype=np.int64)
    ends = np.empty(n, dtype=np.float64)
    er = np.empty(n, dtype=np.int64)
    o = 0
    k = 0
    nbe = bEO.shape[0]
    for i in range(aEO.shape[0]):
        q = pos_a[aEO[i]]
        if q < 0:
            continue
        e = aE[i]
        while k < nbe and bE[k] < e:
            eo[o] = pos_b[bEO[k]]
            ends[o] = bE[k]
            er[o] = bER[k]
            o += 1
            k += 1
        eo[o] = q
        ends[o] = e
        er[o] = aER[i]
        o += 1
    while k < nbe:
        eo[o] = pos_b[bEO[k]]
        ends[o] = bE[k]
        er[o] = bER[k]
        o += 1
        k += 1
    return eo, ends, er, o


def replace_pools(
    merged: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray, new: tuple[np.ndarray, ...],
) -> tuple[np.ndarray, ...]:
    """Return ``merged`` (see :func:`merge_clocks`) without the entries of each pool ``p`` whose
    job index lies in ``[lo[p], hi[p]]`` (empty when ``lo[p] > hi[p]``) and without dead
    entries, and with the entries of ``new`` (a :func:`merge_clocks` result for the replacing
    entries, carrying their pool ids) merged in, in linear time."""
    return _replace(*merged, np.ascontiguousarray(lo, dtype=np.int64),
                    np.ascontiguousarray(hi, dtype=np.int64), *new)


@numba.njit(cache=True, nogil=True)
def _merge_order(V, J, seg):  # pragma: no cover - compiled
    # the order merging runs seg[r]:seg[r + 1], each in (VST, job) order, in (VST, job)
    # order: the non-empty runs merged two by two, round after round (log2 of the runs'
    # number rounds over the entries, not every run compared for every entry)
    n = V.shape[0]
    order = np.arange(n)
    out = np.empty(n, dtype=np.int64)
    b = np.empty(seg.shape[0], dtype=np.int64)  # the runs' boundaries, empty runs left out
    nb = 1
    b[0] = seg[0]
    for r in range(seg.shape[0] - 1):
        if seg[r + 1] > seg[r]:
            b[nb] = seg[r + 1]
            nb += 1
    while nb > 2:
        m = 1
        for r in range(0, nb - 1, 2):
            lo = b[r]
            mid = b[r + 1]
            hi = b[r + 2] if r + 2 < nb else mid
            x, y, o = lo, mid, lo
            while x < mid and y < hi:
                a, c = order[x], order[y]
                if V[c] < V[a] or (V[c] == V[a] and J[c] < J[a]):
                    out[o] = c
                    y += 1
                else:
                    out[o] = a
                    x += 1
                o += 1
            while x < mid:
                out[o] = order[x]
                x += 1
                o += 1
            while y < hi:
                out[o] = order[y]
                y += 1
                o += 1
            b[m] = hi
            m += 1
        order, out = out, order
        nb = m
    return order


def cut_merged(merged: tuple[np.ndarray, ...], bound: float) -> tuple[np.ndarray, ...]:
    """Return ``merged`` (see :func:`merge_clocks`, its end order covering every entry) cut
    to its entries with a VST before ``bound`` (a prefix of the (VST, job) order), its end
    order kept to those."""
    k = int(np.searchsorted(merged[0], bound, side="left"))
    if k == merged[0].shape[0]:
        return merged
    eo, ends = merged[5], merged[7]
    keep = eo < k
    return (*(x[:k] for x in merged[:5]), eo[keep], merged[6][:k], ends[keep], merged[8][:k],
            merged[9][keep])


def update_merged(
    merged: tuple[np.ndarray, ...], lo: np.ndarray, hi: np.ndarray, V: np.ndarray,
    J: np.ndarray, G: np.ndarray, D: np.ndarray, seg: np.ndarray, pools: list[int],
) -> tuple[np.ndarray, ...]:
    """Return ``merged`` with the entries of pools' changed spans replaced: the changed
    clocks' spans (laid end to end as for :func:`merge_clocks`, ``pools`` naming them)
    merged in, each pool ``p``'s entries of jobs in ``[lo[p], hi[p]]`` left out (see
    :func:`replace_pools`). All in one compiled call (``merge_clocks`` then ``replace_pools``
    cost ~20 us of numpy calls and argument handling per update besides their work)."""
    return _update(*merged, np.ascontiguousarray(lo, dtype=np.int64),
                   np.ascontiguousarray(hi, dtype=np.int64),
                   np.ascontiguousarray(V, dtype=np.float64),
                   np.ascontiguousarray(J, dtype=np.int64), np.ascontiguousarray(G, dtype=np.int64),
                   np.ascontiguousarray(D, dtype=np.float64),
                   np.ascontiguousarray(seg, dtype=np.int64), np.asarray(pools, dtype=np.int64))


@numba.njit(cache=True, nogil=True)
def _update(aV, aJ, aG, aD, aP, aEO, aA, aE, aR, aER, lo, hi, V, J, G, D, seg,
            pools):  # pragma: no cover - compiled
    # merge_clocks (with the runs' pools) and _replace in one call
    n = V.shape[0]
    P = np.empty(n, dtype=np.int64)
    for r in range(seg.shape[0] - 1):
        for i in range(seg[r], seg[r + 1]):
            P[i] = pools[r]
    if seg.shape[0] > 2:  # several runs: merged in (VST, job) order
        order = _merge_order(V, J, seg)
        V, J, G, D, P = V[order], J[order], G[order], D[order], P[order]
    eo, ends, rg, erg = _by_end(V, D, G)
    return _replace(aV, aJ, aG, aD, aP, aEO, aA, aE, aR, aER, lo, hi, V, J, G, D, P, eo,
                    np.ones(n, dtype=np.bool_), ends, rg, erg)


@numba.njit(cache=True, nogil=True)
def _span(oj, ov, nj, nv):  # pragma: no cover - compiled
    n = min(oj.shape[0], nj.shape[0])
    pre = 0
    while pre < n and oj[pre] == nj[pre] and ov[pre] == nv[pre]:
        pre += 1
    m = n - pre
    suf = 0
    a = oj.shape[0] - 1
    b = nj.shape[0] - 1
    while suf < m and oj[a - suf] == nj[b - suf] and ov[a - suf] == nv[b - suf]:
        suf += 1
    return pre, suf


def changed_span(old_jobs: np.ndarray, old_vsts: np.ndarray, new_jobs: np.ndarray,
                 new_vsts: np.ndarray) -> tuple[int, int]:
    """Return (common prefix, common suffix) lengths of two clocks of one pool: the entries
    (job, VST) the new clock shares with the old at its start and at its end, not
    overlapping. What lies between is all that changed."""
    pre, suf = _span(old_jobs, old_vsts, new_jobs, new_vsts)
    return int(pre), int(suf)


@numba.njit(cache=True, nogil=True, inline="always")
def _gallop(a, lo, hi, x):  # pragma: no cover - compiled
    """The first index in ``[lo, hi)`` of the sorted ``a`` whose value is at least ``x`` (hi if
    none), given ``a[lo] < x``: steps doubling from ``lo``, then a binary search."""
    step = 1
    prev = lo
    k = lo + 1
    while k < hi and a[k] < x:
        prev = k
        step *= 2
        k = lo + step
    if k > hi:
        k = hi
    lo2 = prev + 1
    while lo2 < k:
        mid = (lo2 + k) >> 1
        if a[mid] < x:
            lo2 = mid + 1
        else:
            k = mid
    return lo2


@numba.njit(cache=True, nogil=True)
def _running_level(run_e, run_g, now):  # pragma: no cover - compiled
    # the GPUs of the running jobs that end after ``now``
    level = np.int64(0)
    for r in range(run_e.shape[0]):
        if run_e[r] > now:
            level += run_g[r]
    return level


@numba.njit(cache=True, nogil=True)
def _scan_full(aV, aJ, aG, aA, horizon, n_arr, C, free, lev, cand, lnb, nc, seen, p0, h,
               n_end):  # pragma: no cover - compiled
    # _bulk_search with the cluster full at ``now`` before any entry fills it: the visit
    # ends with the first visited entry from p0 (a pending one may still be a candidate):
    # (candidates, pending met, n_end, stopped)
    for i in range(p0, h):
        if not aA[i]:
            continue
        if aJ[i] < n_arr:
            seen += 1
            if aG[i] <= free and lev + aG[i] <= C:
                cand[nc] = i
                lnb[nc] = lev
                nc += 1
        elif not aV[i] < horizon:
            continue  # not visited
        return nc, seen, i + 1, True  # no room left at ``now``: the visit ends with this job
    return nc, seen, n_end, False


@numba.njit(cache=True, nogil=True)
def _scan_to_cut(aV, aJ, aG, aP, aA, n_arr, C, free, lev, cand, lnb, nc, seen, p0, h, n_pend,
                 use_sure, sure_free, sure_by):  # pragma: no cover - compiled
    # _bulk_search from p0 up to ``cut`` (h), the level at ``now`` fixed below the cluster:
    # the pending entries that are candidates, until the first sure one or every pending
    # job met: (candidates, pending met, the sure candidate or -1)
    for i in range(p0, h):
        if aJ[i] < n_arr and aA[i]:
            seen += 1
            if aG[i] <= free and lev + aG[i] <= C:
                cand[nc] = i
                lnb[nc] = lev
                nc += 1
                if use_sure and aV[i] <= sure_by and sure_free[aP[i]] >= aG[i]:
                    return nc, seen, nc - 1
            if seen >= n_pend:  # every pending job met
                break
    return nc, seen, -1


@numba.njit(cache=True, nogil=True)
def _scan_past_cut(aJ, aG, aA, n_arr, C, free, lev, cand, lnb, nc, seen, h, n_pend,
                   n_end):  # pragma: no cover - compiled
    # _bulk_search past ``cut`` (from h): the pending entries that are candidates, until
    # every pending job is met: (candidates, pending met, n_end, stopped)
    for i in range(h, aJ.shape[0]):
        if seen >= n_pend:  # every pending job met: the rest are future jobs
            break
        if aJ[i] < n_arr and aA[i]:
            seen += 1
            if aG[i] <= free and lev + aG[i] <= C:
                cand[nc] = i
                lnb[nc] = lev
                nc += 1
            if lev >= C:  # the cluster full at ``now`` (only with zero-wide candidates:
                return nc, seen, i + 1, True  # the policy's jobs are wider): the visit ends
    return nc, seen, n_end, False


@numba.njit(cache=True, nogil=True)
def _candidate_entries(aV, aJ, aG, aD, cand, nc):  # pragma: no cover - compiled
    # the job, VST, duration and width of the merged entries cand[:nc]
    oJ = np.empty(nc, dtype=np.int64)
    oV = np.empty(nc, dtype=np.float64)
    oD = np.empty(nc, dtype=np.float64)
    oG = np.empty(nc, dtype=np.int64)
    for c in range(nc):
        i = cand[c]
        oJ[c], oV[c], oD[c], oG[c] = aJ[i], aV[i], aD[i], aG[i]
    return oJ, oV, oD, oG


@numba.njit(cache=True, nogil=True)
def _bulk_search(aV, aJ, aG, aD, aP, aEO, aA, aE, aR, aER, horizon, n_arr, now, C, free, run_e,
                 run_g, wi, wf, cut, n_pend, sure_free,
                 sure_by):  # pragma: no cover - compiled
    # The visit's first part: the candidates (jobs, VSTs, durations, widths), the first sure
    # one (-1: none), where the visit ends (n_end) and the first entry past ``now`` (p0);
    # the prefix sums are written up to p0, each candidate's entry and level at ``now``
    # before it into scratch rows 1 and 2. _bulk_verdicts then reads the plan from there.
    # Visited: live entries that are pending (arrived: a clock holds no started job) or
    # have a VST before the horizon. Work on the merged arrays in place: an entry that is
    # not visited reserves nothing, so it only has to be skipped.
    N = aV.shape[0]
    lev = _running_level(run_e, run_g, now)  # the level reserved at ``now`` before entry i
    # scratch from the caller (wi: 5 int64 rows, wf: 1 float64 row, each at least N + 1 long)
    cg = wi[0]  # exclusive prefix sums of reserved GPUs
    cg[0] = 0
    cand = wi[1]
    lnb = wi[2]
    nc = 0
    n_end = N
    stopped = False  # the visit ended early (no room left at ``now``), at n_end
    # past ``cut`` (at or after the horizon and now + every candidate's duration), no
    # entry's reservation can be read by a candidate, nor change the level at ``now``: only
    # the candidates are looked for there, and the prefix sums are left unwritten
    h = np.searchsorted(aV, cut, side="right")
    # the level at ``now`` only grows along the entries with a VST at or before ``now`` (a
    # handful); past them it is fixed, and the prefix sums are written later, only as far
    # as the candidates read the plan (see n_plan)
    p0 = np.searchsorted(aV, now, side="right")
    if p0 > h:
        p0 = h
    seen = 0  # pending entries met so far (the candidates are among them)
    # the first candidate sure to start if the walk reaches it (see bulk_pass): the search
    # for candidates ends there
    sure = -1
    use_sure = sure_free.shape[0] > 0
    for i in range(p0):
        pend = aA[i] and aJ[i] < n_arr
        seen += pend
        vis = pend or (aA[i] and aV[i] < horizon)
        res = vis and aG[i] > 0 and aD[i] > 0
        cg[i + 1] = cg[i] + (aG[i] if res else 0)
        if not vis:
            continue
        if sure < 0 and aJ[i] < n_arr and aG[i] <= free and lev + aG[i] <= C:
            cand[nc] = i
            lnb[nc] = lev
            nc += 1
            if use_sure and aV[i] <= sure_by and sure_free[aP[i]] >= aG[i]:
                sure = nc - 1
        if res and aV[i] <= now:
            lev += aG[i]
        if lev >= C:  # no room left at ``now``: the visit ends with this job
            n_end = i + 1
            stopped = True
            break
    if not stopped and lev >= C:  # the cluster full at ``now`` before any entry fills it
        nc, seen, n_end, stopped = _scan_full(aV, aJ, aG, aA, horizon, n_arr, C, free, lev,
                                              cand, lnb, nc, seen, p0, h, n_end)
    if not stopped and sure < 0:  # the rest of the visit up to ``cut``, the level at ``now``
        # fixed below the cluster: only the pending entries (the candidates) are looked for
        nc, seen, sure = _scan_to_cut(aV, aJ, aG, aP, aA, n_arr, C, free, lev, cand, lnb, nc,
                                      seen, p0, h, n_pend, use_sure, sure_free, sure_by)
    if not stopped and sure < 0:
        nc, seen, n_end, stopped = _scan_past_cut(aJ, aG, aA, n_arr, C, free, lev, cand, lnb,
                                                  nc, seen, h, n_pend, n_end)
    # the candidates' job, VST, duration and width
    oJ, oV, oD, oG = _candidate_entries(aV, aJ, aG, aD, cand, nc)
    # whether the visit goes on to the pending jobs past the merge (see _tail_candidates)
    return oJ, oV, oD, oG, sure, n_end, p0, lev, not stopped and sure < 0


@numba.njit(cache=True, nogil=True)
def _tail_candidates(tV, tJ, tG, tD, free, lev, C, N, cand, lnb, nc):  # pragma: no cover
    # The visit's end: the pending jobs past the merge (the tail, after every merged entry
    # in visit order and past ``cut``): candidates only, at the level ``lev`` left at
    # ``now``, written after the merged ones (``nc`` of them) into scratch rows 1 and 2 as
    # entries N + t; their job, VST, duration and width returned.
    k = nc
    for t in range(tV.shape[0]):
        if tG[t] <= free and lev + tG[t] <= C:
            cand[k] = N + t
            lnb[k] = lev
            k += 1
        if lev >= C:  # as in the merge: the visit ends with the first one
            break
    n = k - nc
    oJ = np.empty(n, dtype=np.int64)
    oV = np.empty(n, dtype=np.float64)
    oD = np.empty(n, dtype=np.float64)
    oG = np.empty(n, dtype=np.int64)
    for c in range(n):
        t = cand[nc + c] - N
        oJ[c], oV[c], oD[c], oG[c] = tJ[t], tV[t], tD[t], tG[t]
    return oJ, oV, oD, oG


#: the positions in a pass's state (int64) kept by _bulk_verdicts between calls
_ST_DONE, _ST_WRITTEN, _ST_I, _ST_NU, _ST_PR, _ST_RUN_DONE, _ST_PE, _ST_ENDED, _ST_IU, _ST_GS, \
    _ST_GE, _ST_NEND, _ST_LEN = range(13)


@numba.njit(cache=True, nogil=True)
def _plan_levels(aV, aG, aEO, aE, aER, cg, n_plan, n_end, run_e, run_g, direct, u, lv, pm,
                 st):  # pragma: no cover - compiled
    # _bulk_verdicts' plan: its level at each distinct reservation start u[k] (lv[k]) and
    # their running maximum (pm[k]), for the entries before n_plan, from where the last
    # call stopped (``st``); ``direct`` (x_max <= horizon): the ended entries' reserved
    # GPUs are read in end order (see below)
    total_run = run_g.sum()  # (the running jobs come sorted by end: see lazy_pass)
    # An entry ending by a start x <= x_max began by then, so it lies in the plan's prefix
    # (or ends where it begins, reserving nothing); with x_max <= horizon it is visited iff
    # alive (one at the horizon ending by x_max <= horizon has no duration): its reserved
    # GPUs are read in end order directly, not through its position (scattered reads).
    # Both ways count the same for ends up to x_max <= horizon, so a call may read them
    # directly while an earlier or a later one does not.
    n_e = aEO.shape[0]
    # the plan's level at each distinct reservation start u (running jobs + reservations),
    # from where the last call stopped (always at a new distinct start: a call takes every
    # entry at or before its x_max)
    nu = st[_ST_NU]
    nu0 = nu
    pr = st[_ST_PR]
    run_done = st[_ST_RUN_DONE]
    pe = st[_ST_PE]
    ended = st[_ST_ENDED]
    i = st[_ST_I]
    while i < n_plan:
        if cg[i + 1] == cg[i]:  # reserves nothing
            i += 1
            continue
        x = aV[i]
        j2 = i
        while j2 < n_end and aV[j2] == x:
            j2 += 1
        while pr < run_e.shape[0] and run_e[pr] <= x:
            run_done += run_g[pr]
            pr += 1
        if direct:  # see above
            while pe < n_e and aE[pe] <= x:
                ended += aER[pe]
                pe += 1
        else:
            while pe < n_e and aE[pe] <= x:
                e = aEO[pe]
                if e < n_plan and cg[e + 1] > cg[e]:
                    ended += aG[e]
                pe += 1
        u[nu] = x
        lv[nu] = total_run - run_done + cg[j2] - ended
        nu += 1
        i = j2
    st[_ST_I], st[_ST_NU], st[_ST_PR], st[_ST_RUN_DONE], st[_ST_PE], st[_ST_ENDED] = \
        i, nu, pr, run_done, pe, ended
    for k in range(nu0, nu):  # the levels' running maximum
        pm[k] = lv[k] if k == 0 or pm[k - 1] < lv[k] else pm[k - 1]


@numba.njit(cache=True, nogil=True)
def _max_reservation_verdicts(Vn, n_end, cand, lnb, cg, u, lv, pm, nu, oV, oD, oG, now, C,
                              fails, st, c0, c_to):  # pragma: no cover - compiled
    # _bulk_verdicts' check: whether candidates c0 to c_to fail MaxReservation over the plan
    # (``u``, ``lv``, ``pm`` up to ``nu``: :func:`_plan_levels`), into ``fails``
    # each candidate's MaxReservation(now, d) over the plan of the jobs before it
    # (candidates come in VST order: the first distinct start and the first entry at or
    # after a candidate's VST are found by galloping on from the previous candidate's, the
    # first entry after its VST by stepping on: each pointer only moves forward; one that
    # stopped at the last start computed so far is exact for every candidate that reads
    # no start past it)
    iu = st[_ST_IU]
    gs = st[_ST_GS]
    ge = st[_ST_GE]
    for c in range(c0, c_to):
        i = cand[c]  # a tail candidate has v >= cut >= limit: only the first branches read i
        v = oV[c]
        limit = now + oD[c]
        if iu < nu and u[iu] < v:
            iu = _gallop(u, iu, nu, v)
        if v < limit:
            m = iu  # the distinct starts before v
        else:
            m = np.searchsorted(u[:iu], limit, side="left")
        top = lnb[c]
        if m > 0 and pm[m - 1] > top:
            top = pm[m - 1]
        if v < limit:  # v < now + d <= cut: the prefix sums are written up to here
            if Vn[gs] < v:  # Vn[i] == v: found at i at the latest
                gs = _gallop(Vn, gs, i + 1, v)
            prior = cg[i] - cg[gs]  # reserved GPUs of earlier jobs at the same VST
        else:
            prior = 0
        if prior > 0:
            if ge < i:
                ge = i
            while ge < n_end and Vn[ge] <= v:
                ge += 1
            partial = lv[iu] - (cg[ge] - cg[i])
            if partial > top:
                top = partial
        fails[c] = top + oG[c] > C
    st[_ST_IU], st[_ST_GS], st[_ST_GE], st[_ST_DONE] = iu, gs, ge, c_to


@numba.njit(cache=True, nogil=True)
def _bulk_verdicts(aV, aJ, aG, aEO, aE, aR, aER, horizon, n_arr, now, C, run_e, run_g, wi, wf,
                   oV, oD, oG, fails, st, xs, c_to):  # pragma: no cover - compiled
    # The visit's second part: whether each candidate from st[_ST_DONE] up to c_to fails
    # MaxReservation (written into ``fails``), reading the plan only as far as those
    # candidates do, and going on from where the previous call stopped (the prefix sums,
    # the levels at the distinct starts, their running maximum and the candidates'
    # pointers only move forward; ``st`` / ``xs[0]`` keep their positions and the plan's
    # reach). So calls up to c_1 < c_2 < ... give what one call up to the last gives.
    c0 = st[_ST_DONE]
    if c_to <= c0:
        return
    n_end = st[_ST_NEND]
    cg = wi[0]
    cand = wi[1]
    lnb = wi[2]
    lv = wi[3]
    pm = wi[4]
    u = wf[0]
    # the candidates ask for the plan only on [now, x_max]; later reservations cannot matter
    x_max = xs[0]
    for c in range(c0, c_to):
        x = min(oV[c], now + oD[c])
        if x > x_max:
            x_max = x
    xs[0] = x_max
    Vn = aV[:n_end]
    n_plan = np.searchsorted(Vn, x_max, side="right")
    # the prefix sums the plan reads (n_plan <= h): every entry before the horizon is
    # visited, one at it only if pending
    n_hz = np.searchsorted(aV, horizon, side="left")
    for i in range(st[_ST_WRITTEN], n_plan):
        cg[i + 1] = cg[i] + (aR[i] if i < n_hz or aJ[i] < n_arr else 0)
    if n_plan > st[_ST_WRITTEN]:
        st[_ST_WRITTEN] = n_plan
    _plan_levels(aV, aG, aEO, aE, aER, cg, n_plan, n_end, run_e, run_g, x_max <= horizon,
                 u, lv, pm, st)
    _max_reservation_verdicts(Vn, n_end, cand, lnb, cg, u, lv, pm, st[_ST_NU], oV, oD, oG,
                              now, C, fails, st, c0, c_to)


@numba.njit(cache=True, nogil=True)
def _carry_levels(aV, aE, aER, run_e, run_g, u, st_old, h_old, st,
                  horizon):  # pragma: no cover - compiled
    # Take over from an earlier pass over the same merge (st_old, horizon h_old), with the
    # same entries alive and the same running jobs but those over by this pass's ``now``,
    # the plan's levels it worked out that this pass would work out alike: those at the
    # distinct starts before every entry that the two horizons or visits' ends treat
    # differently (every start is at or after ``now``, as every VST is: a running job over
    # by then counts in neither), and the prefix sums up to there. The pointers are set as
    # _bulk_verdicts leaves them after its last kept start (every entry, end and running
    # job at or before it taken); the candidates' pointers start afresh.
    N = aV.shape[0]
    n_valid = np.searchsorted(aV, min(h_old, horizon), side="left")
    n_valid = min(n_valid, st_old[_ST_NEND], st[_ST_NEND], st_old[_ST_WRITTEN])
    if st[_ST_WRITTEN] < n_valid:
        st[_ST_WRITTEN] = n_valid
    v_cut = aV[n_valid] if n_valid < N else np.inf
    nk = np.searchsorted(u[:st_old[_ST_NU]], v_cut, side="left")
    if nk == 0:
        return
    x = u[nk - 1]
    pr = np.searchsorted(run_e, x, side="right")
    st[_ST_NU] = nk
    st[_ST_PR] = pr
    st[_ST_RUN_DONE] = run_g[:pr].sum()
    # (the entry pointer goes back to just past x: entries after it that reserved nothing
    # then may reserve now, at another horizon or with more jobs arrived)
    st[_ST_I] = np.searchsorted(aV, x, side="right")
    if nk == st_old[_ST_NU]:  # every start kept: the ends taken are the old pass's
        st[_ST_PE] = st_old[_ST_PE]
        st[_ST_ENDED] = st_old[_ST_ENDED]
        return
    pe = np.searchsorted(aE, x, side="right")
    st[_ST_PE] = pe
    st[_ST_ENDED] = aER[:pe].sum()


@numba.njit(cache=True, nogil=True)
def _is_sorted(x):  # pragma: no cover - compiled
    for i in range(1, x.shape[0]):
        if x[i] < x[i - 1]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def _reached_and_passes(D, G, fails, k):  # pragma: no cover - compiled
    # whether candidate k is not dominated by an earlier failed one no wider and no shorter
    # (as CandidateWalk skips them) and passes MaxReservation itself
    width = 0
    for c in range(k + 1):
        width = max(width, G[c] + 1)
    best = np.full(width, np.inf)
    for c in range(k):
        if D[c] < best[G[c]] and fails[c]:
            for w in range(G[c], width):
                if D[c] < best[w]:
                    best[w] = D[c]
    return D[k] < best[G[k]] and not fails[k]


def bulk_pass(
    merged: tuple[np.ndarray, ...], *, horizon: float, n_arrived: int, now: float,
    capacity: int, free: int, run_end: np.ndarray, run_gpus: np.ndarray,
    scratch: PassScratch | None = None, longest: float = math.inf, n_pending: int = -1,
    tail: tuple[np.ndarray, ...] | None = None, sure_free: np.ndarray | None = None,
    sure_by: float = -math.inf,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return the pass's candidates in visit order: (jobs, VSTs s, durations s, GPUs, fails).

    ``merged`` is :func:`merge_clocks`' result (live entries only are read); the
    pass visits the pending jobs (index below ``n_arrived``: a clock holds no
    started job) and the other entries with a VST before ``horizon`` (s), in
    (VST, job) order up to the last pending one, stopping early once the level
    reserved at ``now`` (``run_end`` / ``run_gpus``: the running jobs, then
    every visited job with a VST at ``now``) reaches ``capacity``. A candidate
    is a pending job that fits the ``free`` GPUs and the level at ``now``;
    ``fails`` marks the candidates whose width plus ``MaxReservation(now, d)``
    over the plan of the jobs visited before them exceeds ``capacity``.

    ``longest`` (s) bounds the duration of every pending job no wider than ``free``
    (the possible candidates); entries with a VST past both the horizon and
    ``now + longest`` can then only be candidates, and the visit only looks for
    candidates among them (the default, inf, visits everything in full).
    ``n_pending``, the live entries of arrived jobs (if known, else -1), ends the search
    for candidates once that many have been met (counting the tail's).

    ``tail`` (VSTs s, jobs, GPUs, durations; see :func:`pending_tail`): pending jobs that
    are not in ``merged`` because they come after all of its entries in visit order, with
    VSTs at or after both the horizon and ``now + longest``. Such a job reserves nothing
    a candidate can read (its reservation starts at or after every candidate's
    ``now + d``), so a merge cut at a bound past the horizon loses nothing by leaving
    them out, as long as the pass still meets them as candidates after the merged ones.

    ``sure_free`` (per pool, GPUs; the policy's free charged capacities) and ``sure_by`` (s):
    a merged candidate with a VST at or before ``sure_by`` whose pool has at least its
    width free is *sure*: if the walk reaches it and it passes MaxReservation, its
    guard starts it (on time, on its own quota), so no later candidate is ever looked
    at. The search for candidates then ends at the first sure one; if that one is
    reached by the walk (no earlier failed candidate no wider and no shorter dominates
    it) and passes, only the candidates up to it are returned, their verdicts read off
    the plan up to their VSTs (at most ``sure_by``, so a few entries) instead of the
    whole visit's; otherwise the pass is done again in full. Typically the job whose VST
    is now, first in the visit.

    This is :func:`lazy_pass` with the tail's candidates found and every verdict worked
    out; the policy walks a lazy pass instead (see :class:`CandidateWalk`).
    """
    out = lazy_pass(merged, horizon=horizon, n_arrived=n_arrived, now=now, capacity=capacity,
                    free=free, run_end=run_end, run_gpus=run_gpus, scratch=scratch,
                    longest=longest, n_pending=n_pending, tail=tail, sure_free=sure_free,
                    sure_by=sure_by)
    out.add_tail()
    out.verdicts_upto(out.jobs.shape[0])
    return out.jobs, out.vsts, out.durations, out.gpus, out.fails


class PassVerdicts:
    """One pass's candidates (see :func:`bulk_pass`) with their MaxReservation verdicts worked
    out only as far as they are asked for (:meth:`verdicts_upto`), and the pending tail's
    candidates found only when asked for (:meth:`add_tail`): the walk usually stops a
    third of the way through the candidates, and the plan it reads up to there is about
    60% of the one all of them read (Philly, 40,000 jobs). ``jobs``, ``vsts``,
    ``durations``, ``gpus`` (and ``pools``, given the jobs' pools) hold the candidates
    found so far; ``fails[c]`` is valid for ``c < known``.

    It reads the merge, the running jobs and the caller's scratch rows until the pass is
    over: nothing may change them in between (the policy's guards do not touch them)."""

    def __init__(self, args: tuple, found: tuple, tail, job_pool: np.ndarray | None,
                 carried: PassVerdicts | None = None) -> None:
        (self._aV, self._aJ, self._aG, _, _, self._aEO, _, self._aE, self._aR, self._aER,
         self._horizon, self._n_arr, self._now, self._C, self._free, self._run_e, self._run_g,
         self._wi, self._wf, self._cut) = args[:20]
        self.jobs, self.vsts, self.durations, self.gpus, self.sure, n_end, p0, self._lev, \
            open_tail = found
        self._job_pool = job_pool
        self.pools = None if job_pool is None else job_pool[self.jobs]
        self.fails = np.zeros(self.jobs.shape[0], dtype=np.bool_)
        self._st = np.zeros(_ST_LEN, dtype=np.int64)
        self._st[_ST_WRITTEN] = p0
        self._st[_ST_NEND] = n_end
        self._xs = np.array([-np.inf])
        if carried is not None:
            _carry_levels(self._aV, self._aE, self._aER, self._run_e, self._run_g, self._wf[0],
                          carried._st, carried._horizon, self._st, self._horizon)
        #: the candidates whose verdicts are known (a prefix)
        self.known = 0
        #: the pending tail (arrays, or a function returning them or None) if the visit goes
        #: on to it and its candidates are not found yet, else None
        self._tail = tail if open_tail else None

    @property
    def tail_pending(self) -> bool:
        """Whether the pending tail's candidates may still come after those found so far."""
        return self._tail is not None

    def add_tail(self) -> int:
        """Find the pending tail's candidates (after every merged one) if not done yet;
        return how many were added."""
        tail, self._tail = self._tail, None
        if tail is not None and callable(tail):
            tail = tail()
        if tail is None or not tail[0].shape[0]:
            return 0
        assert tail[0][0] >= self._cut and (not self._aV.shape[0]
                                            or tail[0][0] >= self._aV[-1])
        nc = self.jobs.shape[0]
        tJ, tV, tD, tG = _tail_candidates(
            tail[0], tail[1], tail[2], tail[3], self._free, self._lev, self._C,
            np.int64(self._aV.shape[0]), self._wi[1], self._wi[2], np.int64(nc))
        if not tJ.shape[0]:
            return 0
        self.jobs = np.concatenate((self.jobs, tJ))
        self.vsts = np.concatenate((self.vsts, tV))
        self.durations = np.concatenate((self.durations, tD))
        self.gpus = np.concatenate((self.gpus, tG))
        self.fails = np.concatenate((self.fails, np.zeros(tJ.shape[0], dtype=np.bool_)))
        if self._job_pool is not None:
            self.pools = np.concatenate((self.pools, self._job_pool[tJ]))
        return int(tJ.shape[0])

    def verdicts_upto(self, k: int) -> None:
        """Work out ``fails`` for the candidates before ``k`` (at most all found so far)."""
        k = min(int(k), self.jobs.shape[0])
        if k <= self.known:
            return
        _bulk_verdicts(self._aV, self._aJ, self._aG, self._aEO, self._aE, self._aR, self._aER,
                       self._horizon, self._n_arr, self._now, self._C, self._run_e, self._run_g,
                       self._wi, self._wf, self.vsts, self.durations, self.gpus, self.fails,
                       self._st, self._xs, np.int64(k))
        self.known = k

    @property
    def plan_read(self) -> int:
        """How many merged entries (a prefix, in visit order) the verdicts so far have read."""
        return int(self._st[_ST_WRITTEN])

    def truncated(self, k: int) -> PassVerdicts:
        """This pass cut to its first ``k`` candidates (whose verdicts are known)."""
        self.jobs, self.vsts, self.durations, self.gpus, self.fails = (
            x[:k] for x in (self.jobs, self.vsts, self.durations, self.gpus, self.fails))
        if self.pools is not None:
            self.pools = self.pools[:k]
        self.known = min(self.known, k)
        return self


def lazy_pass(
    merged: tuple[np.ndarray, ...], *, horizon: float, n_arrived: int, now: float,
    capacity: int, free: int, run_end: np.ndarray, run_gpus: np.ndarray,
    scratch: PassScratch | None = None, longest: float = math.inf, n_pending: int = -1,
    tail: tuple[np.ndarray, ...] | Callable[[], tuple[np.ndarray, ...] | None] | None = None,
    n_tail: int = -1, sure_free: np.ndarray | None = None, sure_by: float = -math.inf,
    job_pool: np.ndarray | None = None, plan_key: object = None,
) -> PassVerdicts:
    """:func:`bulk_pass` with the verdicts worked out on demand: the merged candidates, and
    their ``fails`` valid up to ``known`` (see :class:`PassVerdicts`); the tail's come with
    :meth:`PassVerdicts.add_tail`. With a sure candidate reached that passes, only the
    candidates up to it, their verdicts known.

    ``tail`` may also be a function returning the tail (or None), called only if the tail
    is asked for; ``n_tail`` is then how many jobs it holds (to count the merged pending
    entries from ``n_pending``). ``job_pool`` (trace-wide, per job) gives the candidates'
    pools (``pools``).

    ``plan_key`` (with ``scratch``): passes over the same ``merged`` object given equal keys
    (not None) promise the same plan: the same entries alive and the same running jobs, but
    for those over by the later pass's ``now``. Such a pass takes over the plan's levels the
    previous pass worked out (those this one would work out alike: the levels at the
    distinct starts from ``now`` on before either pass's horizon or end of visit, see
    ``_carry_levels``) instead of working them out again. The policy keys its
    passes by its count of starts: a pass that starts nothing is often followed, at the next
    decision, by one over the same merge."""
    cut = max(float(horizon), float(now) + float(longest))
    if len(merged) == 8:  # without the reserved GPUs (an older merge layout): derive them
        merged = _with_reserved(merged)
    if tail is None:
        tail = _NO_TAIL
    if n_tail < 0:
        n_tail = tail[0].shape[0]
    scratch = scratch or PassScratch()
    wi, wf = scratch.rows(merged[0].shape[0] + n_tail + 1)
    run_end = np.ascontiguousarray(run_end, dtype=np.float64)
    run_gpus = np.ascontiguousarray(run_gpus, dtype=np.int64)
    if not _is_sorted(run_end):  # the verdicts read the running jobs in end order
        o = np.argsort(run_end, kind="stable")
        run_end, run_gpus = run_end[o], run_gpus[o]
    args = (*merged, float(horizon), np.int64(n_arrived), float(now), np.int64(capacity),
            np.int64(free), run_end, run_gpus, wi, wf, cut,
            np.int64(n_pending - n_tail if n_pending >= 0 else merged[0].shape[0]))
    last = scratch.last
    carried = None
    if (plan_key is not None and last is not None and last[0] is merged and last[1] == plan_key
            and last[2]._wi is wi):
        carried = last[2]
    if sure_free is not None:
        out = PassVerdicts(args, _bulk_search(*args, np.ascontiguousarray(sure_free,
                                                                         dtype=np.int64),
                                              float(sure_by)), tail, job_pool, carried)
        scratch.last = (merged, plan_key, out)
        if out.sure >= 0:
            out.verdicts_upto(out.sure + 1)
            if _reached_and_passes(out.durations, out.gpus, out.fails, out.sure):
                return out.truncated(out.sure + 1)
            carried = out if plan_key is not None else None
        else:
            return out
    out = PassVerdicts(args, _bulk_search(*args, _NO_SURE, -math.inf), tail, job_pool, carried)
    scratch.last = (merged, plan_key, out)
    return out


def _with_reserved(merged: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
    """``merged`` in the 8-array layout with its reserved GPUs added (see :func:`merge_clocks`)."""
    rg = np.where(merged[6] & (merged[2] > 0) & (merged[3] > 0), merged[2], 0)
    return (*merged, rg, rg[merged[5]])


_NO_TAIL = (np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64),
            np.empty(0, dtype=np.int64), np.empty(0, dtype=np.float64))
_NO_SURE = np.empty(0, dtype=np.int64)


def pending_tail(clocks: list[tuple[np.ndarray, ...]], starts: list[int], n_pend: list[int],
                 gpus: np.ndarray, duration: np.ndarray) -> tuple[np.ndarray, ...] | None:
    """The pending jobs of the pools' clocks from position ``starts[p]`` of pool ``p``'s on
    (its first entry not in a merge cut at a bound), in (VST, job) order, as
    :func:`bulk_pass`'s ``tail`` (VSTs s, jobs, GPUs, durations), or None if none.

    ``clocks[p]`` is pool ``p``'s clock (jobs, VSTs, ...), listing its ``n_pend[p]`` pending
    jobs first (in arrival order, VSTs non-decreasing); ``gpus`` / ``duration`` are
    trace-wide.
    """
    parts = []
    for p, k in enumerate(n_pend):
        a = starts[p]
        if k > a:
            clock = clocks[p]
            parts.append((clock[1][a:k], clock[0][a:k]))
    if not parts:
        return None
    if len(parts) == 1:
        V, J = parts[0]
    else:  # each part is in (VST, job) order already: merged, not sorted
        V = np.concatenate([v for v, _ in parts])
        J = np.concatenate([j for _, j in parts])
        seg = np.array([0, *accumulate(v.shape[0] for v, _ in parts)], dtype=np.int64)
        o = _merge_order(V, J, seg)
        V, J = V[o], J[o]
    return (np.ascontiguousarray(V, dtype=np.float64), np.ascontiguousarray(J, dtype=np.int64),
            gpus[J], duration[J])


class PassScratch:
    """Working rows for :func:`bulk_pass`, kept by its caller across passes so a pass
    allocates nothing in proportion to the clocks (its results never point into them)."""

    def __init__(self) -> None:
        self._int = np.empty((5, 0), dtype=np.int64)
        self._float = np.empty((1, 0), dtype=np.float64)
        #: (merge, plan key, PassVerdicts) of the last pass, whose plan levels the rows hold
        self.last: tuple | None = None

    def rows(self, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Return (int64 [5, >= n], float64 [1, >= n]) rows, grown (doubled) when too short."""
        if self._int.shape[1] < n:
            self._int = np.empty((5, 2 * n), dtype=np.int64)
            self._float = np.empty((1, 2 * n), dtype=np.float64)
        return self._int, self._float


def drop_job(merged: tuple[np.ndarray, ...], job: int) -> None:
    """Mark ``job``'s entry of ``merged`` dead, in place (its clock lost just that job): it
    reserves nothing any more, in either order. Compiled: the entry is found in one scan and
    its place in the end order by a binary search on its end (two numpy scans of the whole
    merge before)."""
    _drop(merged[0], merged[1], merged[3], merged[5], merged[6], merged[7], merged[8],
          merged[9], np.int64(job))


@numba.njit(cache=True, nogil=True)
def _drop(aV, aJ, aD, aEO, aA, aE, aR, aER, job):  # pragma: no cover - compiled
    for i in range(aJ.shape[0]):
        if aJ[i] != job:
            continue
        aA[i] = False
        aR[i] = 0
        # its end as the end order holds it (the same sum), among any equal ends
        k = np.searchsorted(aE, aV[i] + aD[i])
        while k < aE.shape[0] and aEO[k] != i:
            k += 1
        if k < aE.shape[0]:
            aER[k] = 0


@numba.njit(cache=True, nogil=True)
def _walk(D, G, P, fails, start, best, now, thr, ce, cf, acc, known):  # pragma: no cover
    for i in range(start, D.shape[0]):
        g = G[i]
        if not D[i] < best[g]:
            continue  # no shorter than a job no wider that already failed MaxReservation
        if i >= known:
            return -2 - i  # its MaxReservation verdict is not worked out yet
        if fails[i]:
            for k in range(g, best.shape[0]):
                if D[i] < best[k]:
                    best[k] = D[i]
            continue
        p = P[i]
        t = thr[p, g]
        if np.isnan(t):
            return -2 - i  # the guard's verdict for this pool and width is not known yet
        if now + D[i] > t:  # the guard fails without re-running a clock
            acc[0] += ce[p, g]
            acc[1] += cf[p, g]
            continue
        return i
    return -1


#: verdicts first worked out when the walk needs one (then twice as many each time)
_FIRST_VERDICTS = 64


class CandidateWalk:
    """The walk over one pass's candidates (Figure 6's visit after :func:`bulk_pass`), compiled.

    :meth:`next` skips, in order, every candidate the pass can decide without
    running its guard's re-runs: one no shorter than an already-failed candidate
    no wider than it (MaxReservation only grows along the pass), one that fails
    MaxReservation (recorded for that dominance), and one whose guard fails
    without a re-run by its pool and width's verdict (:meth:`set_verdict`: it
    fails exactly when the job would end after a threshold; the skipped guard's
    early-start and failed-check counts are added to :attr:`counts`). It returns
    the next candidate that needs its guard run, or one whose pool and width
    has no verdict yet (:meth:`needs_verdict`).
    """

    def __init__(self, durations: np.ndarray, gpus: np.ndarray, pools: np.ndarray,
                 fails: np.ndarray | PassVerdicts, n_pools: int, now: float,
                 widest: int = -1, tables: WalkTables | None = None) -> None:
        """``widest``: if >= 0, the tables per width are sized for candidates up to this wide
        (the trace's widest job, say: no candidate, the tail's neither, may be wider), not to
        the widest candidate found so far (grown with the tail). ``tables`` (with ``widest``
        >= 0): tables the caller keeps across walks, one walk at a time (see
        :class:`WalkTables`), taken instead of new ones."""
        #: the verdicts worked out on demand (a PassVerdicts, whose pending tail's candidates
        #: are found when the walk gets past the others), or None: all given
        self._lazy = fails if isinstance(fails, PassVerdicts) else None
        self._take(durations, gpus, pools, fails if self._lazy is None else self._lazy.fails)
        self._now = float(now)
        self._sized = widest >= 0  # the tables fit every candidate: they never grow
        self._tables = tables if widest >= 0 else None
        if self._tables is not None:
            self._best, self._thr, self._ce, self._cf = self._tables.take(n_pools, widest + 1)
        else:
            if widest >= 0:
                width = widest + 1
            else:
                width = int(self._G.max()) + 1 if self._G.size else 1
            self._best = np.empty(width)
            self._best.fill(np.inf)
            self._thr = np.empty((n_pools, width))
            self._thr.fill(np.nan)
            self._ce = np.zeros((n_pools, width), dtype=np.int64)
            self._cf = np.zeros((n_pools, width), dtype=np.int64)
        self._pending = -1  # the candidate next() stopped at for want of a verdict
        #: [early starts, failed checks] of the guards skipped by their verdicts
        self.counts = np.zeros(2, dtype=np.int64)

    def _take(self, durations: np.ndarray, gpus: np.ndarray, pools: np.ndarray,
              fails: np.ndarray) -> None:
        self._D = np.ascontiguousarray(durations, dtype=np.float64)
        self._G = np.ascontiguousarray(gpus, dtype=np.int64)
        self._P = np.ascontiguousarray(pools, dtype=np.int64)
        self._fails = np.ascontiguousarray(fails, dtype=np.bool_)

    def _add_tail(self) -> bool:
        """Take the pending tail's candidates from the lazy pass, if any; whether any came.
        The tables per width grow to the widest: a wider entry of ``best`` starts as the
        narrower's (every failed candidate so far is narrower), of the verdicts unknown."""
        lazy = self._lazy
        if lazy is None or not lazy.tail_pending or not lazy.add_tail():
            return False
        if lazy.pools is None:
            raise ValueError("a lazy pass with a pending tail needs the jobs' pools (job_pool)")
        self._take(lazy.durations, lazy.gpus, lazy.pools, lazy.fails)
        if self._sized:
            return True
        width = int(self._G.max()) + 1
        old = self._best.shape[0]
        if width > old:
            n_pools = self._thr.shape[0]
            self._best = np.concatenate((self._best, np.full(width - old, self._best[-1])))
            self._thr = np.concatenate((self._thr, np.full((n_pools, width - old), np.nan)), 1)
            self._ce = np.concatenate((self._ce, np.zeros((n_pools, width - old), np.int64)), 1)
            self._cf = np.concatenate((self._cf, np.zeros((n_pools, width - old), np.int64)), 1)
        return True

    def next(self, start: int) -> int:
        """Return the index of the first candidate at or after ``start`` that needs its guard
        or a verdict (see :meth:`needs_verdict`), or -1 when there is none."""
        lazy = self._lazy
        while True:
            n = self._D.shape[0]
            known = n if lazy is None else lazy.known
            i = int(_walk(self._D, self._G, self._P, self._fails, np.int64(start), self._best,
                          self._now, self._thr, self._ce, self._cf, self.counts,
                          np.int64(known)))
            if i == -1 and self._add_tail():
                start = n  # on to the tail's candidates
                continue
            if i > -2:
                return i
            i = -2 - i
            if i < known:
                self._pending = i
                return i
            # its MaxReservation verdict first: work out a few more (doubling), and go on
            lazy.verdicts_upto(max(i + 1, 2 * known, _FIRST_VERDICTS))
            start = i

    def needs_verdict(self, i: int) -> bool:
        """Whether :meth:`next` stopped at candidate ``i`` because its pool and width have no
        verdict yet (set one with :meth:`set_verdict`, then call ``next(i)`` again)."""
        return i == self._pending

    def set_verdict(self, pool: int, gpus: int, threshold: float, early_starts: int,
                    checks_failed: int) -> None:
        """Record that a guard of a ``gpus``-wide job of ``pool`` fails without re-running a
        clock exactly when the job would end after ``threshold`` (s; -inf: always, inf:
        never), adding ``early_starts`` / ``checks_failed`` to the stats when it does."""
        self._thr[pool, gpus] = threshold
        self._ce[pool, gpus] = early_starts
        self._cf[pool, gpus] = checks_failed
        self._pending = -1
        if self._tables is not None:
            self._tables.set_at.append((pool, gpus))


class WalkTables:
    """The tables of :class:`CandidateWalk` (per width: the shortest failed duration; per pool
    and width: the verdicts and their counts), kept by the caller across walks: a walk takes
    them back with only the verdicts the walk before it set cleared (a few of the pools x
    widths entries) and the widths' row refilled, instead of new ones allocated and filled
    (4 arrays per pass). One walk at a time."""

    def __init__(self) -> None:
        self._shape: tuple[int, int] | None = None
        #: the (pool, width) entries the current walk set a verdict at
        self.set_at: list[tuple[int, int]] = []

    def take(self, n_pools: int, width: int) -> tuple[np.ndarray, ...]:
        """Return (best [width], thresholds [n_pools, width], early starts, failed checks) as
        a new walk starts them: inf, NaN (no verdict); the counts are read only where a
        verdict is set, which sets them too."""
        if self._shape != (n_pools, width):
            self._shape = (n_pools, width)
            self._best = np.empty(width)
            self._thr = np.full((n_pools, width), np.nan)
            self._ce = np.zeros((n_pools, width), dtype=np.int64)
            self._cf = np.zeros((n_pools, width), dtype=np.int64)
        else:
            thr = self._thr
            for p, g in self.set_at:
                thr[p, g] = np.nan
        self.set_at = []
        self._best.fill(np.inf)
        return self._best, self._thr, self._ce, self._cf


@numba.njit(cache=True, nogil=True)
def _wakeup(aV, aJ, aP, aA, now, n_arr, submit, horizon, n_pools):  # pragma: no cover
    seen = np.zeros(n_pools, dtype=np.bool_)
    left = n_pools
    for i in range(np.searchsorted(aV, now, side="right"), aV.shape[0]):
        if not aA[i] or seen[aP[i]]:
            continue
        if aJ[i] < n_arr or submit[aJ[i]] < horizon:
            return aV[i]
        seen[aP[i]] = True
        left -= 1
        if left == 0:
            break
    return np.inf


def next_vst(merged: tuple[np.ndarray, ...], *, now: float, n_arrived: int,
             submit: np.ndarray, horizon: float, n_pools: int) -> float:
    """Return the smallest, over pools, of each pool's first VST after ``now`` (s) if its
    job has arrived or arrives before ``horizon`` (s), or inf: the wake-up of a pass."""
    aV, aJ, aP, aA = merged[0], merged[1], merged[4], merged[6]
    return float(_wakeup(aV, aJ, aP, aA, float(now), np.int64(n_arrived), submit,
                         float(horizon), np.int64(n_pools)))
