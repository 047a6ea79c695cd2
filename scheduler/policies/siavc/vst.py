"""Virtual clocks and logical resource-time plans (SIA 5.1), shared by SIA_VC and the oracle.

* :func:`fcfs_clock` / :func:`fcfs_pool_starts` -- the *virtual clock* (compiled
  with numba; arrays / Python sequences): a forward simulation of one
  pool alone (no sharing) from a given state, starting its jobs in strict
  arrival order (head-of-line blocking) as soon as the pool's capacity allows.
  From an empty pool at time 0 it is exactly the FCFS baseline of that pool
  (the same float operations as the simulator: a job ends at ``start +
  duration`` and a GPU freed at ``t`` is usable at ``t``).
* :func:`fcfs_baseline_starts` -- the no-sharing FCFS baseline of a whole
  trace (every pool on its own quota): the cut-off start times of the oracle
  and the reference of Theorem 1.
* :class:`ResourcePlan` -- the logical resource-time plan: a step function of
  reserved GPUs over time with ``reserve`` / ``max_reservation`` / ``clear``,
  kept as sorted breakpoints in numpy arrays.

Times are seconds, GPU counts ints.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

import numba
import numpy as np


@numba.njit(cache=True, nogil=True, inline="always")
def _heap_push(ends, gpus, size, e, g):  # pragma: no cover - compiled
    """Push (end ``e``, ``g`` GPUs) on the 8-ary min-heap of ends kept in ``ends[:size]`` (the
    children of slot ``i`` at ``8i + 1 .. 8i + 8``; GPUs alongside in ``gpus``); return the
    new size."""
    i = size
    while i > 0:
        parent = (i - 1) >> 3
        if ends[parent] <= e:
            break
        ends[i] = ends[parent]
        gpus[i] = gpus[parent]
        i = parent
    ends[i] = e
    gpus[i] = g
    return size + 1


@numba.njit(cache=True, nogil=True, inline="always")
def _heap_pop(ends, gpus, size):  # pragma: no cover - compiled
    """Remove the root (the earliest end) of the 8-ary heap ``ends[:size]``; return the new
    size. (An 8-ary heap: a third of the levels of a binary one, each read as one group of
    eight children; on Philly's clocks, ~25 ends held, about 20% less time per job run than
    the binary heap, 8% less than a 4-ary one, while 16 children cost more again.)"""
    size -= 1
    e = ends[size]
    g = gpus[size]
    i = 0
    while True:
        c = 8 * i + 1
        if c >= size:
            break
        m = c
        v = ends[c]
        if c + 7 < size:  # eight children (the usual case): a fixed loop, no bounds to test
            for x in range(c + 1, c + 8):
                if ends[x] < v:
                    m = x
                    v = ends[x]
        else:
            for x in range(c + 1, size):
                if ends[x] < v:
                    m = x
                    v = ends[x]
        if e <= v:
            break
        ends[i] = v
        gpus[i] = gpus[m]
        i = m
    ends[i] = e
    gpus[i] = g
    return size


@numba.njit(cache=True, nogil=True)
def _fcfs_kernel(order, submit, duration, gpus, deadline, use_deadline, capacity, now, busy_end,
                 busy_gpus, horizon, stop_when_idle, idle_after, until, keep, ref_prev, ref_vst,
                 changed_until):  # pragma: no cover
    """Compiled body of :func:`fcfs_clock` / :func:`fcfs_clock_against`; returns (starts,
    free GPUs after each start, position where the run met the reference run or -1)."""
    n_all = order.shape[0]
    out = np.empty(n_all, dtype=np.float64)
    rem = np.empty(n_all, dtype=np.int64)
    # the GPUs held, by end: an 8-ary min-heap on two arrays (numba's heapq on a list of
    # (end, GPUs) tuples took over twice as long per job)
    he = np.empty(busy_end.shape[0] + n_all, dtype=np.float64)
    hg = np.empty(busy_end.shape[0] + n_all, dtype=np.int64)
    size = 0
    held = np.int64(0)
    for i in range(busy_end.shape[0]):
        size = _heap_push(he, hg, size, busy_end[i], busy_gpus[i])
        held += busy_gpus[i]
    inf = np.inf
    t_prev = now
    n = 0
    n_ref = ref_vst.shape[0]
    last_diff = changed_until  # the latest end of anything that differs from the reference
    met = -1
    for i in range(n_all):
        k = order[i]
        s = submit[k]
        if s >= horizon:
            break
        g = gpus[k]
        t = s if s > t_prev else t_prev
        if n < n_ref and last_diff <= t:  # (something that differs still holds GPUs: no meeting)
            t_ref = s if s > ref_prev[n] else ref_prev[n]  # NaN: never equal
            if t == t_ref and t < inf:
                met = n  # same instant, same GPUs held from here on: the runs agree
                break
        if t == inf or g > capacity:
            out[n] = inf
            rem[n] = -1
            if n < n_ref and ref_vst[n] != inf:
                last_diff = inf
            n += 1
            t_prev = inf
            if use_deadline or (until < inf and n > keep):
                break
            continue
        while size > 0 and he[0] <= t:
            held -= hg[0]
            size = _heap_pop(he, hg, size)
        idle = size == 0 and t == s
        while capacity - held < g:
            e = he[0]
            held -= hg[0]
            size = _heap_pop(he, hg, size)
            if e > t:
                t = e
            while size > 0 and he[0] <= t:
                held -= hg[0]
                size = _heap_pop(he, hg, size)
        out[n] = t
        size = _heap_push(he, hg, size, t + duration[k], g)
        held += g
        rem[n] = capacity - held
        if n < n_ref and t != ref_vst[n]:
            e = (t if t > ref_vst[n] else ref_vst[n]) + duration[k]
            if e > last_diff:
                last_diff = e
        n += 1
        t_prev = t
        if stop_when_idle and idle and s >= idle_after:
            break
        if (t >= until and n > keep) or (use_deadline and t > deadline[k]):
            break
    return out[:n], rem[:n], met


_NO_DEADLINE = np.empty(0, dtype=np.float64)


@numba.njit(cache=True, nogil=True)
def charges_after(charge_end, charge_gpus, t, room):  # pragma: no cover - compiled
    """(ends, GPUs, count): the charges still held after ``t`` (ending after it), in their
    order, at the front of two arrays with ``room`` more slots for the caller to fill."""
    n = 0
    for c in range(charge_end.shape[0]):
        if charge_end[c] > t:
            n += 1
    be = np.empty(n + room, dtype=np.float64)
    bg = np.empty(n + room, dtype=np.int64)
    m = 0
    for c in range(charge_end.shape[0]):
        if charge_end[c] > t:
            be[m] = charge_end[c]
            bg[m] = charge_gpus[c]
            m += 1
    return be, bg, m


@numba.njit(cache=True, nogil=True)
def resume_state(jobs, vsts, i, charge_end, charge_gpus, duration, gpus,
                 deadline):  # pragma: no cover - compiled
    """The state a clock (``jobs``, ``vsts``) resumed at position ``i`` starts from: (the first
    position before ``i`` whose start is past its ``deadline`` (trace-wide), -1 if none; the
    GPUs held right after the start before ``i``, as (ends, GPUs): the charges
    (``charge_end`` / ``charge_gpus``) and the earlier jobs still running then). With
    ``i == 0`` every charge is held. In one compiled call instead of a few numpy passes over
    the clock's head."""
    for k in range(i):
        if vsts[k] > deadline[jobs[k]]:
            return k, np.empty(0, dtype=np.float64), np.empty(0, dtype=np.int64)
    t0 = vsts[i - 1] if i > 0 else -np.inf
    be, bg, m = charges_after(charge_end, charge_gpus, t0, i)
    for k in range(i):
        e = vsts[k] + duration[jobs[k]]
        if e > t0:
            be[m] = e
            bg[m] = gpus[jobs[k]]
            m += 1
    return -1, be[:m], bg[:m]


@numba.njit(cache=True, nogil=True)
def resume_clock(jobs, vsts, free, i, charge_end, charge_gpus, pool_jobs, pool_submit, k_future,
                 until, submit, duration, gpus, deadline, capacity, now,
                 n_pend):  # pragma: no cover - compiled
    """A cached clock (``jobs``, ``vsts``, ``free``: GPUs left free after each start; its
    ``n_pend`` pending jobs first) resumed without its entry at position ``i``: (jobs, VSTs,
    free GPUs). The entries before ``i`` are kept; from ``i`` on the clock runs again (see
    :func:`resume_state` for its starting state: the previous start as its time, else
    ``now``) over the cached jobs after ``i``, then the pool's jobs (``pool_jobs``, arriving
    at ``pool_submit``) not arrived yet (from ``k_future``) and not in the cached clock, up
    to and including the first arriving at or after ``until``; checked against ``deadline``
    (trace-wide; stopping at the first late job, also among the kept entries), stopping at
    the first VST at or after ``until`` once past the pending jobs, or where it meets the
    cached clock (same instant, nothing that differs still holding GPUs), whose rest it then
    takes. All in one compiled call (the resume_state, cut, joins and kernel calls of the
    policy's resume, each a call from Python before)."""
    late, busy_e, busy_g = resume_state(jobs, vsts, i, charge_end, charge_gpus, duration, gpus,
                                        deadline)
    if late >= 0:  # a late job: the re-run fails there
        return jobs[:late + 1], vsts[:late + 1], free[:late + 1]
    m_c = jobs.shape[0]
    t0 = vsts[i - 1] if i > 0 else now
    # after the cached clock come the jobs not arrived yet (from ``k_future``), not those that
    # arrived after its end and have started since
    tail = max(k_future, np.searchsorted(pool_jobs, jobs[m_c - 1], side="right"))
    stop = tail
    if tail < pool_jobs.shape[0]:
        stop = min(tail + np.searchsorted(pool_submit[tail:], until, side="left") + 1,
                   pool_jobs.shape[0])
    n1 = m_c - i - 1
    order = np.empty(n1 + stop - tail, dtype=np.int64)
    order[:n1] = jobs[i + 1:]
    order[n1:] = pool_jobs[tail:stop]
    m = min(order.shape[0], n1)  # jobs the cached clock also ran
    vst, rem, met = _fcfs_kernel(
        order, submit, duration, gpus, deadline, True, capacity, t0, busy_e, busy_g, np.inf,
        False, -np.inf, until, n_pend - i - 1, vsts[i:i + m], vsts[i + 1:i + 1 + m],
        vsts[i] + duration[jobs[i]])
    n_run = vst.shape[0]
    k = i + 1 + met if met >= 0 else m_c  # the cached clock's rest, from k (met) or none
    n_out = i + n_run + (m_c - k)
    oj = np.empty(n_out, dtype=np.int64)
    ov = np.empty(n_out, dtype=np.float64)
    orr = np.empty(n_out, dtype=np.int64)
    oj[:i] = jobs[:i]
    ov[:i] = vsts[:i]
    orr[:i] = free[:i]
    oj[i:i + n_run] = order[:n_run]
    ov[i:i + n_run] = vst
    orr[i:i + n_run] = rem
    oj[i + n_run:] = jobs[k:]
    ov[i + n_run:] = vsts[k:]
    orr[i + n_run:] = free[k:]
    return oj, ov, orr


@numba.njit(cache=True, nogil=True)
def guard_clock(jobs, vsts, free, n_pend, without, use_ref, pool_jobs, k_future, ahead,
                charge_end, charge_gpus, extra_end, extra_gpus, submit, duration, gpus,
                deadline, capacity, now, idle_after, changed_until):  # pragma: no cover
    """A guard's re-run of one pool's clock from ``now``, against its cached clock (``jobs``,
    ``vsts``, ``free``: GPUs left free after each start; its ``n_pend`` pending jobs first):
    (jobs, VSTs, free GPUs, retries).

    The run reads the pending jobs but ``without`` (if >= 0: the job that starts), then the
    pool's future jobs (``pool_jobs`` from ``k_future``): at first only as many as the cached
    clock holds plus ``ahead``, and once more on all of them if it used them all (counted in
    ``retries``), so the result is exact. With the charges (``charge_end`` / ``charge_gpus``)
    that end after ``now`` held, and ``extra_gpus`` until ``extra_end`` if that is after
    ``now`` (the tentative charge), it stops at its first job past ``deadline``
    (trace-wide), at the first idle point among jobs submitted at or after ``idle_after``,
    or where it meets the cached clock as its reference (with ``use_ref``: a lender's is
    the clock itself, the own pool's the clock without ``without``, whose end then counts
    in ``changed_until``; see :func:`fcfs_clock_against`), whose rest it then takes. All in
    one compiled call (the pending jobs, the reference, the order's joins and the result's
    were numpy calls from Python per re-run before)."""
    m_c = jobs.shape[0]
    n_fut = pool_jobs.shape[0] - k_future
    busy_end, busy_gpus = _busy_with(charge_end, charge_gpus, now, extra_end, extra_gpus)
    pending = _pending_but(jobs, n_pend, without)
    n_p = pending.shape[0]
    # the future jobs handed at first: as many as the cached clock holds, plus ``ahead``
    held = m_c - n_p - (1 if without >= 0 else 0)
    handed = (held if held > 0 else 0) + ahead
    whole = False
    retries = 0
    while True:
        stop = pool_jobs.shape[0] if whole else min(k_future + handed, pool_jobs.shape[0])
        n_f = stop - k_future if stop > k_future else 0
        order = np.empty(n_p + n_f, dtype=np.int64)
        order[:n_p] = pending
        order[n_p:] = pool_jobs[k_future:k_future + n_f]
        rp, rv, rj, rr, cu = _guard_reference(order, jobs, vsts, free, without, use_ref,
                                              duration, changed_until)
        vst, rem, met = _fcfs_kernel(order, submit, duration, gpus, deadline, True, capacity,
                                     now, busy_end, busy_gpus, np.inf, True, idle_after, np.inf,
                                     n_p, rp, rv, cu)
        if not (met < 0 and vst.shape[0] == order.shape[0] and not whole
                and handed < n_fut):
            break
        retries += 1  # it may have run out of jobs: run on them all
        whole = True
    if met < 0:
        return order[:vst.shape[0]], vst, rem, retries
    oj, ov, orr = _run_then_reference(order, vst, rem, met, rj, rv, rr)
    return oj, ov, orr, retries


@numba.njit(cache=True, nogil=True)
def _busy_with(charge_end, charge_gpus, now, extra_end, extra_gpus):  # pragma: no cover
    """The charges that end after ``now`` (:func:`charges_after`), plus ``extra_gpus`` until
    ``extra_end`` if that is after ``now``: (ends, GPUs)."""
    busy_end, busy_gpus, b = charges_after(charge_end, charge_gpus, now,
                                           1 if extra_end > now else 0)
    if extra_end > now:
        busy_end[b] = extra_end
        busy_gpus[b] = extra_gpus
    return busy_end, busy_gpus


@numba.njit(cache=True, nogil=True)
def _pending_but(jobs, n_pend, without):  # pragma: no cover - compiled
    """The cached clock's ``n_pend`` pending jobs (its first entries) but ``without`` (if >= 0;
    it is one of them)."""
    if without < 0:
        return jobs[:n_pend]
    w = np.searchsorted(jobs[:n_pend], without)
    pending = np.empty(n_pend - 1, dtype=np.int64)
    pending[:w] = jobs[:w]
    pending[w:] = jobs[w + 1:n_pend]
    return pending


@numba.njit(cache=True, nogil=True)
def _guard_reference(order, jobs, vsts, free, without, use_ref, duration,
                     changed_until):  # pragma: no cover - compiled
    """The reference a guard's run over ``order`` may meet (:func:`guard_clock`): (previous
    starts, VSTs, jobs, free GPUs, changed-until). With ``use_ref``, the cached clock itself
    (``without`` < 0: a lender's) or the clock without ``without`` (the own pool's, whose end
    then counts in changed-until), if ``order`` starts with its jobs; else none (empty
    starts and VSTs, changed-until -inf)."""
    m_c = jobs.shape[0]
    nothing = np.empty(0, dtype=np.float64)
    if use_ref:
        if without < 0:
            if starts_with(order, jobs):
                rp = np.empty(m_c, dtype=np.float64)
                if m_c > 0:
                    rp[0] = np.nan
                    rp[1:] = vsts[:m_c - 1]
                return rp, vsts, jobs, free, changed_until
        else:
            i = np.searchsorted(jobs, without)
            if i < m_c and jobs[i] == without:
                cu = max(changed_until, vsts[i] + duration[without])
                same, prev, cj2, cv2, cr2 = clock_reference(order, jobs, vsts, free, i)
                if same:
                    return prev, cv2, cj2, cr2, cu
    return nothing, nothing, jobs, free, -np.inf


@numba.njit(cache=True, nogil=True)
def _run_then_reference(order, vst, rem, met, rj, rv, rr):  # pragma: no cover - compiled
    """A run that met its reference at ``met``: its own (jobs, VSTs, free GPUs) up to ``met``,
    then the reference's rest."""
    n_out = rv.shape[0]
    oj = np.empty(n_out, dtype=np.int64)
    ov = np.empty(n_out, dtype=np.float64)
    orr = np.empty(n_out, dtype=np.int64)
    oj[:met] = order[:met]
    ov[:met] = vst
    orr[:met] = rem
    oj[met:] = rj[met:]
    ov[met:] = rv[met:]
    orr[met:] = rr[met:]
    return oj, ov, orr


@numba.njit(cache=True, nogil=True)
def first_short(jobs, vsts, free, s, duration, gpus, deadline):  # pragma: no cover - compiled
    """For a cached clock (``jobs``, ``vsts``, ``free``: GPUs left free after each start) and a
    loan of ``s`` GPUs: (the first position ``k`` whose start left fewer than ``s`` free, -1
    if none; whether a job up to ``k`` starts past its ``deadline`` (trace-wide); the GPUs
    of the jobs before ``k`` still running at ``deadline[jobs[k]]``). In one compiled call:
    the lenders' thresholds read these for each (pool, loan)."""
    k = -1
    for i in range(free.shape[0]):
        if free[i] < s:
            k = i
            break
    if k < 0:
        return -1, False, 0
    tau = deadline[jobs[k]]
    late = False
    held = 0
    for i in range(k + 1):
        j = jobs[i]
        if vsts[i] > deadline[j]:
            late = True
        if i < k and vsts[i] + duration[j] > tau:
            held += gpus[j]
    return k, late, held


@numba.njit(cache=True, nogil=True)
def starts_with(order, jobs):  # pragma: no cover - compiled
    """Whether ``order`` starts with ``jobs`` (int64 arrays)."""
    if jobs.shape[0] > order.shape[0]:
        return False
    for k in range(jobs.shape[0]):
        if order[k] != jobs[k]:
            return False
    return True


@numba.njit(cache=True, nogil=True)
def clock_reference(order, jobs, vsts, free, skip):  # pragma: no cover - compiled
    """A cached clock (``jobs``, ``vsts``, ``free``) without its entry at position ``skip``
    (none if -1), as the reference of a re-run over ``order``: (whether ``order`` starts with
    those jobs, the previous start of each (NaN for the first; the entry after the skipped
    one keeps the skipped one's), jobs, VSTs, free GPUs). One compiled call for what took
    several numpy calls per guard."""
    m = jobs.shape[0]
    n = m - 1 if skip >= 0 else m
    rj = np.empty(n, dtype=np.int64)
    rv = np.empty(n, dtype=np.float64)
    rr = np.empty(n, dtype=np.int64)
    prev = np.empty(n, dtype=np.float64)
    last = np.nan
    k = 0
    for i in range(m):
        if i == skip:
            last = vsts[i]
            continue
        rj[k] = jobs[i]
        rv[k] = vsts[i]
        rr[k] = free[i]
        prev[k] = last
        last = vsts[i]
        k += 1
    same = n <= order.shape[0]
    if same:
        for k in range(n):
            if order[k] != rj[k]:
                same = False
                break
    return same, prev, rj, rv, rr

#: :func:`fcfs_clock_against` without its argument handling, for callers that run it
#: hundreds of thousands of times with arrays already contiguous and of the right dtypes
#: (int64 jobs and GPUs, float64 times): positional arguments ``(order, submit, duration,
#: gpus, deadline, use_deadline, capacity, now, busy_end, busy_gpus, horizon,
#: stop_when_idle, idle_after, until, keep, ref_prev, ref_vst, changed_until)``, an empty
#: float64 array for no deadline or no reference (``changed_until`` -inf); returns (VSTs,
#: free GPUs after each start, position met or -1).
fcfs_clock_kernel = _fcfs_kernel
NO_ARRAY = _NO_DEADLINE


def fcfs_clock(
    order: np.ndarray,
    submit: np.ndarray,
    duration: np.ndarray,
    gpus: np.ndarray,
    capacity: int,
    **options,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (float64 VSTs s, int64 GPUs left free after each start) of one pool run alone.

    The compiled virtual clock (numba): ``order`` (int64) lists the pool's
    not-yet-started jobs in arrival order as indices into the trace-wide
    arrays ``submit`` (s), ``duration`` (s) and ``gpus``. ``options`` are
    :func:`fcfs_clock_against`'s state and early stops (``now``, ``busy_end`` /
    ``busy_gpus``, ``horizon``, ``stop_when_idle``, ``idle_after``, ``until``,
    ``keep``, ``deadline``), without a reference run. The result covers a
    prefix of ``order``; every option means what it means in
    :func:`fcfs_pool_starts`, which is this function on Python sequences.
    """
    starts, free, _ = fcfs_clock_against(order, submit, duration, gpus, capacity, **options)
    return starts, free


def fcfs_clock_against(
    order: np.ndarray,
    submit: np.ndarray,
    duration: np.ndarray,
    gpus: np.ndarray,
    capacity: int,
    *,
    ref_prev: np.ndarray | None = None,
    ref_vst: np.ndarray | None = None,
    changed_until: float = -math.inf,
    now: float = 0.0,
    busy_end: np.ndarray | None = None,
    busy_gpus: np.ndarray | None = None,
    horizon: float = math.inf,
    stop_when_idle: bool = False,
    idle_after: float = -math.inf,
    until: float = math.inf,
    keep: int = 0,
    deadline: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray, int]:
    """:func:`fcfs_clock` that also stops where it meets a reference run of the same pool:
    (VSTs s, GPUs free after each start, position met or -1).

    State and early stops: the run starts at ``now`` (s) with ``busy_end`` /
    ``busy_gpus`` GPUs held (until ``busy_end[i]``); ``deadline`` (float64,
    trace-wide, indexed like ``submit``) turns on the deadline stop; the other
    options are those of :func:`fcfs_pool_starts`.

    The reference is an earlier run of the same jobs (from position 0 on, the
    same ``order``) under a state that differed only by GPUs held until
    ``changed_until`` (s) at the latest: a charge added or taken away, or a job
    taken out of the sequence. ``ref_vst[m]`` is the reference's VST of the job
    at position ``m``, ``ref_prev[m]`` the reference's previous start before it
    (NaN if unknown). The run stops before position ``m`` once both runs come
    to that job at the same instant and everything that differs between them
    (the change, and every job whose start differs, until its later end) is
    over by then: both hold the same GPUs until the same ends and read the same
    jobs, so from ``m`` on the reference's VSTs and free GPUs are this run's.
    The caller takes them from the reference.
    """
    if busy_end is None or busy_gpus is None:
        busy_end = np.empty(0, dtype=np.float64)
        busy_gpus = np.empty(0, dtype=np.int64)
    if ref_vst is None or ref_prev is None:
        ref_vst = ref_prev = _NO_DEADLINE
    starts, free, met = _fcfs_kernel(
        np.ascontiguousarray(order, dtype=np.int64), np.ascontiguousarray(submit, dtype=np.float64),
        np.ascontiguousarray(duration, dtype=np.float64), np.ascontiguousarray(gpus, dtype=np.int64),
        _NO_DEADLINE if deadline is None else np.ascontiguousarray(deadline, dtype=np.float64),
        deadline is not None, np.int64(capacity), float(now),
        np.ascontiguousarray(busy_end, dtype=np.float64),
        np.ascontiguousarray(busy_gpus, dtype=np.int64), float(horizon), bool(stop_when_idle),
        float(idle_after), float(until), np.int64(keep),
        np.ascontiguousarray(ref_prev, dtype=np.float64),
        np.ascontiguousarray(ref_vst, dtype=np.float64), float(changed_until),
    )
    return starts, free, int(met)


def fcfs_pool_starts(
    submit: Iterable[float],
    duration: Iterable[float],
    gpus: Iterable[int],
    capacity: int,
    *,
    now: float = 0.0,
    busy: Iterable[tuple[float, int]] = (),
    horizon: float = math.inf,
    stop_when_idle: bool = False,
    idle_after: float = -math.inf,
    until: float = math.inf,
    keep: int = 0,
    deadline: Iterable[float] | None = None,
    rem: list[int] | None = None,
) -> list[float]:
    """Return the virtual start time (s) of each job of one pool run alone, FCFS from ``now``.

    The jobs (``submit``, ``duration``, ``gpus``, parallel sequences) are the
    pool's not-yet-started jobs in arrival order. ``busy`` lists the GPUs
    already held on this pool's capacity as ``(end_time, gpus)`` pairs (held
    until ``end_time``). Each job starts at the earliest time ``t >= now``,
    ``t >= submit``, ``t >=`` the previous job's start (strict order), at
    which ``capacity`` minus the GPUs held at ``t`` is at least its width.

    The returned list may be shorter than the job list: the simulation stops
    before the first job arriving at or after ``horizon``, and, with
    ``stop_when_idle``, after the first job that finds the pool completely
    empty at its arrival (from there on the pool's future no longer depends
    on its past) among jobs submitted at or after ``idle_after``. A job wider
    than ``capacity`` gets ``inf`` (it can never start on this pool alone),
    and so do all jobs after it.

    Two more early stops, both *after* appending the job that triggers them:
    the first job starting at or after ``until`` (not among the first ``keep``
    jobs, which are always simulated), and, with ``deadline`` (a
    sequence parallel to the jobs, seconds), the first job starting later than
    its deadline (the caller sees the violation as the last element).
    With ``rem`` (a list), the GPUs of the pool still free right after each
    job starts are appended to it (-1 for a job that never starts).

    Runs :func:`fcfs_clock` (compiled) on the sequences turned into arrays.
    """
    s = np.fromiter(submit, dtype=np.float64)
    d = np.fromiter(duration, dtype=np.float64, count=s.shape[0])
    g = np.fromiter(gpus, dtype=np.int64, count=s.shape[0])
    held = list(busy)
    starts, free = fcfs_clock(
        np.arange(s.shape[0], dtype=np.int64), s, d, g, capacity, now=now,
        busy_end=np.array([e for e, _ in held], dtype=np.float64),
        busy_gpus=np.array([x for _, x in held], dtype=np.int64), horizon=horizon,
        stop_when_idle=stop_when_idle, idle_after=idle_after, until=until, keep=keep,
        deadline=None if deadline is None else np.fromiter(deadline, dtype=np.float64,
                                                           count=s.shape[0]),
    )
    if rem is not None:
        rem.extend(free.tolist())
    return starts.tolist()


def fcfs_baseline_starts(
    submit: np.ndarray,
    duration: np.ndarray,
    gpus: np.ndarray,
    pool: np.ndarray,
    quota: Sequence[int] | np.ndarray,
) -> np.ndarray:
    """Return float64 [n]: each job's start time (s) under no-sharing FCFS per pool.

    Jobs are given in arrival order (ties broken by position, as the
    simulator's job index does); ``pool`` indexes ``quota``. Raises
    ValueError if a job is wider than its pool's quota (FCFS would never run it).
    """
    submit = np.asarray(submit, dtype=np.float64)
    duration = np.asarray(duration, dtype=np.float64)
    gpus = np.asarray(gpus, dtype=np.int64)
    pool = np.asarray(pool, dtype=np.int64)
    quota = np.asarray(quota, dtype=np.int64)
    out = np.empty(submit.shape[0], dtype=np.float64)
    for p in range(quota.shape[0]):
        idx = np.flatnonzero(pool == p)
        if not idx.size:
            continue
        too_wide = idx[gpus[idx] > quota[p]]
        if too_wide.size:
            j = int(too_wide[0])
            raise ValueError(
                f"job at position {j} needs {int(gpus[j])} GPUs but its pool {p} has a quota of "
                f"{int(quota[p])}: FCFS would never start it"
            )
        out[idx] = fcfs_clock(idx, submit, duration, gpus, int(quota[p]))[0]
    return out


class ResourcePlan:
    """A logical resource-time plan: GPUs reserved over time as a right-continuous step function.

    ``times`` (sorted, float64) are breakpoints and ``level[i]`` the GPUs
    reserved on ``[times[i], times[i+1])``; before ``times[0]`` and after the
    last breakpoint nothing is reserved. ``reserve`` adds ``gpus`` on
    ``[t, t + d)``; ``max_reservation(t, d)`` is the largest reservation on
    ``[t, t + d)``; ``clear`` drops everything. Each operation is a couple
    of ``searchsorted`` calls plus one vectorised slice, O(breakpoints).
    """

    __slots__ = ("times", "level")

    def __init__(self) -> None:
        self.times = np.empty(0, dtype=np.float64)
        self.level = np.empty(0, dtype=np.int64)

    def clear(self) -> None:
        """Release every reservation."""
        self.times = np.empty(0, dtype=np.float64)
        self.level = np.empty(0, dtype=np.int64)

    def _split(self, t: float) -> int:
        """Ensure a breakpoint at ``t``; return its index."""
        times = self.times
        i = int(np.searchsorted(times, t, side="left"))
        if i < times.shape[0] and times[i] == t:
            return i
        before = int(self.level[i - 1]) if i > 0 else 0
        self.times = np.insert(times, i, t)
        self.level = np.insert(self.level, i, before)
        return i

    def reserve(self, gpus: int, t: float, d: float) -> None:
        """Mark ``gpus`` GPUs busy on ``[t, t + d)`` (``d`` may be ``inf``)."""
        if gpus <= 0 or not d > 0:
            return
        i = self._split(t)
        end = t + d
        k = self.times.shape[0] if end == math.inf else self._split(end)
        self.level[i:k] += gpus

    def add_busy(self, ends: np.ndarray, gpus: np.ndarray, now: float) -> None:
        """Reserve ``gpus[i]`` on ``[now, ends[i])`` for every i (the running jobs), vectorised."""
        ends = np.asarray(ends, dtype=np.float64)
        gpus = np.asarray(gpus, dtype=np.int64)
        keep = ends > now
        if not keep.any():
            return
        ends, gpus = ends[keep], gpus[keep]
        uniq, inv = np.unique(ends, return_inverse=True)
        dropped = np.bincount(inv, weights=gpus, minlength=uniq.shape[0]).astype(np.int64)
        times = np.concatenate([[float(now)], uniq])
        level = int(gpus.sum()) - np.concatenate([[0], np.cumsum(dropped)])
        if self.times.shape[0] == 0:
            self.times, self.level = times, level.astype(np.int64)
            return
        for e, g in zip(ends.tolist(), gpus.tolist(), strict=True):
            self.reserve(g, now, e - now)

    def max_reservation(self, t: float, d: float) -> int:
        """Return the most GPUs reserved at any instant of ``[t, t + d)``."""
        times = self.times
        if times.shape[0] == 0 or not d > 0:
            return 0
        i = int(np.searchsorted(times, t, side="right")) - 1  # last breakpoint <= t
        k = int(np.searchsorted(times, t + d, side="left"))  # first breakpoint >= t + d
        if i < 0:
            return int(self.level[:k].max(initial=0))
        return int(self.level[i:max(k, i + 1)].max())

    def level_at(self, t: float) -> int:
        """Return the GPUs reserved at instant ``t``."""
        i = int(np.searchsorted(self.times, t, side="right")) - 1
        return int(self.level[i]) if i >= 0 else 0
