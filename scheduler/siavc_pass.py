"""The bulk part of one SIA_VC pass (Figure 6), compiled with numba.

One pass visits jobs in increasing virtual start time (VST, ties by job
index), reserving ``[VST, VST + d)`` for every job that cannot start now,
until the first job that can. :func:`bulk_pass` does everything of that visit
that does not depend on the guard's outcome (see
:class:`sia.scheduler.policy_siavc.SiaVCPolicy` for the guard): it merges the
pools' clocks, finds the candidates (jobs that could start now) and, for each,
whether Figure 6's ``MaxReservation(now, d) + width`` exceeds the cluster
over the plan of the jobs visited before it. Every visited job is reserved
whatever its own check says (a job that starts ends the pass), so the plan a
job sees is that of the jobs before it in the order.

Times are seconds, GPU counts ints.
"""

from __future__ import annotations

import heapq

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _merge(V, J, G, D, seg, npend, horizon):  # pragma: no cover - compiled
    """Merge the pools' clock segments in (VST, job) order; return merged V, J, G, D."""
    P = npend.shape[0]
    heads = np.empty(P, dtype=np.int64)
    stops = np.empty(P, dtype=np.int64)
    heap = [(0.0, np.int64(0), np.int64(0))]
    heap.pop()
    total = 0
    for p in range(P):
        a, b = seg[p], seg[p + 1]
        k = np.searchsorted(V[a:b], horizon, side="left")
        if k < npend[p]:
            k = npend[p]
        heads[p] = a
        stops[p] = a + k
        if k > 0:
            heap.append((V[a], J[a], np.int64(p)))
            total += k
    heapq.heapify(heap)
    mV = np.empty(total, dtype=np.float64)
    mJ = np.empty(total, dtype=np.int64)
    mG = np.empty(total, dtype=np.int64)
    mD = np.empty(total, dtype=np.float64)
    i = 0
    while len(heap) > 0:
        _, _, p = heapq.heappop(heap)
        h = heads[p]
        mV[i] = V[h]
        mJ[i] = J[h]
        mG[i] = G[h]
        mD[i] = D[h]
        i += 1
        h += 1
        heads[p] = h
        if h < stops[p]:
            heapq.heappush(heap, (V[h], J[h], p))
    return mV, mJ, mG, mD


@numba.njit(cache=True, nogil=True)
def _bulk_pass(V, J, G, D, seg, npend, horizon, n_arr, now, C, free, run_e,
               run_g):  # pragma: no cover - compiled
    mV, mJ, mG, mD = _merge(V, J, G, D, seg, npend, horizon)
    total = mV.shape[0]
    none = np.empty(0, dtype=np.int64)
    last = -1
    for i in range(total):
        if mJ[i] < n_arr:
            last = i
    if last < 0:
        return none, mV[:0], mD[:0], none, np.empty(0, dtype=np.bool_)
    # the level reserved at ``now`` before each job; the visit ends once it reaches C
    level0 = np.int64(0)
    for r in range(run_e.shape[0]):
        if run_e[r] > now:
            level0 += run_g[r]
    n = last + 1
    lnb = np.empty(n, dtype=np.int64)
    lev = level0
    for i in range(last + 1):
        lnb[i] = lev
        if mV[i] <= now and mG[i] > 0 and mD[i] > 0:
            lev += mG[i]
        if lev >= C:
            n = i + 1
            break
    cand = np.empty(n, dtype=np.int64)
    nc = 0
    for i in range(n):
        if mJ[i] < n_arr and mG[i] <= free and lnb[i] + mG[i] <= C:
            cand[nc] = i
            nc += 1
    if nc == 0:
        return none, mV[:0], mD[:0], none, np.empty(0, dtype=np.bool_)
    # exclusive prefix sums of reserved GPUs, and the reservations' ends in order
    cg = np.zeros(n + 1, dtype=np.int64)
    n_res = 0
    for i in range(n):
        res = mG[i] > 0 and mD[i] > 0
        cg[i + 1] = cg[i] + (mG[i] if res else 0)
        if res:
            n_res += 1
    ends = np.empty(n_res, dtype=np.float64)
    end_g = np.empty(n_res, dtype=np.int64)
    r = 0
    for i in range(n):
        if mG[i] > 0 and mD[i] > 0:
            ends[r] = mV[i] + mD[i]
            end_g[r] = mG[i]
            r += 1
    eo = np.argsort(ends)
    ro = np.argsort(run_e)
    total_run = run_g.sum()
    # the plan's level at each distinct reservation start u (running jobs + reservations)
    u = np.empty(n_res, dtype=np.float64)
    lv = np.empty(n_res, dtype=np.int64)
    nu = 0
    pr = 0
    run_done = np.int64(0)
    pe = 0
    ended = np.int64(0)
    i = 0
    while i < n:
        if not (mG[i] > 0 and mD[i] > 0):
            i += 1
            continue
        x = mV[i]
        j2 = i
        while j2 < n and mV[j2] == x:
            j2 += 1
        while pr < ro.shape[0] and run_e[ro[pr]] <= x:
            run_done += run_g[ro[pr]]
            pr += 1
        while pe < n_res and ends[eo[pe]] <= x:
            ended += end_g[eo[pe]]
            pe += 1
        u[nu] = x
        lv[nu] = total_run - run_done + cg[j2] - ended
        nu += 1
        i = j2
    u = u[:nu]
    lv = lv[:nu]
    pm = lv.copy()
    for k in range(1, nu):
        if pm[k - 1] > pm[k]:
            pm[k] = pm[k - 1]
    # each candidate's MaxReservation(now, d) over the plan of the jobs before it
    Vn = mV[:n]
    fails = np.empty(nc, dtype=np.bool_)
    for c in range(nc):
        i = cand[c]
        v = mV[i]
        limit = now + mD[i]
        x = v if v < limit else limit
        m = np.searchsorted(u, x, side="left")
        top = lnb[i]
        if m > 0 and pm[m - 1] > top:
            top = pm[m - 1]
        gs = np.searchsorted(Vn, v, side="left")
        prior = cg[i] - cg[gs]  # reserved GPUs of earlier jobs at the same VST
        if prior > 0 and v < limit:
            ge = np.searchsorted(Vn, v, side="right")
            iu = np.searchsorted(u, v, side="left")
            partial = lv[iu] - (cg[ge] - cg[i])
            if partial > top:
                top = partial
        fails[c] = top + mG[i] > C
    cand = cand[:nc]
    return mJ[cand], mV[cand], mD[cand], mG[cand], fails


def bulk_pass(
    V: np.ndarray, J: np.ndarray, G: np.ndarray, D: np.ndarray, seg: np.ndarray,
    npend: np.ndarray, *, horizon: float, n_arrived: int, now: float, capacity: int,
    free: int, run_end: np.ndarray, run_gpus: np.ndarray,
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Return the pass's candidates in visit order: (jobs, VSTs s, durations s, GPUs, fails).

    ``V, J, G, D`` (float64 VST s, int64 job, int64 GPUs, float64 duration s)
    are the pools' cached clocks laid end to end, pool ``p`` at
    ``seg[p]:seg[p + 1]``, each sorted by VST with jobs ascending; the first
    ``npend[p]`` of a pool's are its pending jobs. Of each pool the pass visits
    its pending jobs and the future ones with a VST before ``horizon`` (s), in
    (VST, job) order, up to the last pending job, stopping early once the
    level reserved at ``now`` (``run_end`` / ``run_gpus``: the running jobs,
    then every visited job with a VST at ``now``) reaches ``capacity``. A
    candidate is a visited job that has arrived (index below ``n_arrived``)
    and fits the ``free`` GPUs and the level at ``now``; ``fails`` marks the
    candidates whose width plus ``MaxReservation(now, d)`` over the plan of
    the jobs visited before them exceeds ``capacity``.
    """
    return _bulk_pass(
        np.ascontiguousarray(V, dtype=np.float64), np.ascontiguousarray(J, dtype=np.int64),
        np.ascontiguousarray(G, dtype=np.int64), np.ascontiguousarray(D, dtype=np.float64),
        np.ascontiguousarray(seg, dtype=np.int64), np.ascontiguousarray(npend, dtype=np.int64),
        float(horizon), np.int64(n_arrived), float(now), np.int64(capacity), np.int64(free),
        np.ascontiguousarray(run_end, dtype=np.float64),
        np.ascontiguousarray(run_gpus, dtype=np.int64),
    )
