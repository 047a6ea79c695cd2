"""The compiled virtual clock (numba) against the first pure-Python one, option by option."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.scheduler.policies.siavc.vst import (
    _heap_pop,
    _heap_push,
    fcfs_clock,
    fcfs_clock_against,
    fcfs_pool_starts,
)


def python_fcfs_pool_starts(
    submit: Sequence[float],
    duration: Sequence[float],
    gpus: Sequence[int],
    capacity: int,
    *,
    now: float = 0.0,
    busy: Sequence[tuple[float, int]] = (),
    horizon: float = math.inf,
    stop_when_idle: bool = False,
    idle_after: float = -math.inf,
    until: float = math.inf,
    keep: int = 0,
    deadline: Sequence[float] | None = None,
    rem: list[int] | None = None,
) -> list[float]:
    """The first, pure-Python virtual clock, kept verbatim as the reference."""
    heap = [(float(e), int(g)) for e, g in busy]
    heapq.heapify(heap)
    held = sum(g for _, g in heap)
    pop, push = heapq.heappop, heapq.heappush
    out: list[float] = []
    t_prev = now
    inf = math.inf
    dl = iter(deadline) if deadline is not None else None
    for s, d, g in zip(submit, duration, gpus, strict=False):
        if s >= horizon:
            break
        t = s if s > t_prev else t_prev
        if t == inf or g > capacity:
            out.append(inf)
            if rem is not None:
                rem.append(-1)
            t_prev = inf
            if dl is not None or (until < inf and len(out) > keep):
                break  # inf is past any finite deadline and at or after ``until``
            continue
        while heap and heap[0][0] <= t:
            held -= pop(heap)[1]
        idle = not heap and t == s
        while capacity - held < g:
            e, gg = pop(heap)
            held -= gg
            if e > t:
                t = e
            while heap and heap[0][0] <= t:
                held -= pop(heap)[1]
        out.append(t)
        push(heap, (t + d, g))
        held += g
        if rem is not None:
            rem.append(capacity - held)
        t_prev = t
        if stop_when_idle and idle and s >= idle_after:
            break
        if (t >= until and len(out) > keep) or (dl is not None and t > next(dl)):
            break
    return out


@st.composite
def clocks(draw):
    """A pool's job list and state, with every early-stop option drawn."""
    n = draw(st.integers(0, 40))
    cap = draw(st.integers(1, 8))
    grid = draw(st.sampled_from([1.0, 7.5, 300.0]))
    submit = sorted(draw(st.lists(st.integers(0, 30), min_size=n, max_size=n)))
    submit = [x * grid for x in submit]
    dur = draw(st.lists(st.integers(1, 40).map(lambda x: x * grid), min_size=n, max_size=n))
    gpus = draw(st.lists(st.sampled_from([1, 1, 2, 4, 8, 9]), min_size=n, max_size=n))
    now = draw(st.integers(0, 10)) * grid
    busy = draw(st.lists(st.tuples(st.integers(0, 40).map(lambda x: x * grid + now),
                                   st.integers(1, 3)), max_size=3))
    busy = [(e, g) for e, g in busy]
    opts = {
        "horizon": draw(st.sampled_from([math.inf, 15 * grid])),
        "stop_when_idle": draw(st.booleans()),
        "idle_after": draw(st.sampled_from([-math.inf, 5 * grid])),
        "until": draw(st.sampled_from([math.inf, 10 * grid, 0.0])),
        "keep": draw(st.integers(0, 5)),
    }
    if draw(st.booleans()):
        opts["deadline"] = [s + draw(st.integers(0, 30)) * grid for s in submit]
    return submit, dur, gpus, cap, now, busy, opts


@settings(max_examples=400, deadline=None)
@given(clocks())
def test_compiled_clock_equals_the_python_one(case):
    """Same starts, same free GPUs after each start, same stopping point, for every option."""
    submit, dur, gpus, cap, now, busy, opts = case
    rem_a: list[int] = []
    rem_b: list[int] = []
    want = python_fcfs_pool_starts(submit, dur, gpus, cap, now=now, busy=busy, rem=rem_a, **opts)
    got = fcfs_pool_starts(iter(submit), iter(dur), iter(gpus), cap, now=now, busy=iter(busy),
                           rem=rem_b, **opts)
    assert got == want and rem_b == rem_a


def test_fcfs_clock_reads_jobs_through_the_order():
    """Trace-wide arrays read through ``order``: jobs 3 and 1 of a 2-GPU pool, one GPU busy to 4."""
    submit = np.array([0.0, 1.0, 0.0, 0.0])
    dur = np.array([9.0, 5.0, 9.0, 3.0])
    gpus = np.array([1, 2, 1, 1])
    starts, free = fcfs_clock(np.array([3, 1]), submit, dur, gpus, 2, now=0.0,
                              busy_end=np.array([4.0]), busy_gpus=np.array([1]))
    # job 3 (1 GPU) at 0 beside the busy GPU; job 1 (2 GPUs) waits for both: max(4, 0 + 3) = 4
    assert starts.tolist() == [0.0, 4.0] and free.tolist() == [0, 0]
    # then job 0 (1 GPU) waits for job 1 to end at 9; a deadline read trace-wide (job 1's is
    # 3.5 < 4) stops the clock right after job 1
    busy = {"busy_end": np.array([4.0]), "busy_gpus": np.array([1])}
    starts, _ = fcfs_clock(np.array([3, 1, 0]), submit, dur, gpus, 2, **busy)
    assert starts.tolist() == [0.0, 4.0, 9.0]
    deadline = np.array([99.0, 3.5, 99.0, 99.0])
    starts, _ = fcfs_clock(np.array([3, 1, 0]), submit, dur, gpus, 2, deadline=deadline, **busy)
    assert starts.tolist() == [0.0, 4.0]


@settings(max_examples=400, deadline=None)
@given(seed=st.integers(0, 10**6), n=st.integers(1, 60), change=st.sampled_from(
    ["charge", "remove", "remove+charge", "remove-charge"]))
def test_a_run_that_meets_its_reference_can_take_the_rest_from_it(seed, n, change):
    """Re-run a pool after a charge is added or a job taken out: the run stops where it meets
    the earlier run, and its prefix plus the earlier run's rest is exactly the full re-run."""
    rng = np.random.default_rng(seed)
    cap = int(rng.integers(2, 9))
    submit = np.sort(rng.integers(0, 40, n) * 100.0)
    dur = rng.choice([50.0, 100.0, 300.0, 1000.0], n)
    gpus = np.minimum(rng.choice([1, 1, 2, 4], n), cap).astype(np.int64)
    busy_e, busy_g = [250.0], [1]
    old_order = np.arange(n)
    old, old_free = fcfs_clock(old_order, submit, dur, gpus, cap, busy_end=np.array(busy_e),
                               busy_gpus=np.array(busy_g))
    order, ref_prev, ref_vst, changed = old_order, np.r_[np.nan, old[:-1]], old, -np.inf
    ref_free = old_free
    if "remove" in change:
        x = int(rng.integers(0, n))
        order = np.delete(old_order, x)
        prev = np.r_[np.nan, old[:-1]]
        ref_prev, ref_vst, ref_free = np.delete(prev, x), np.delete(old, x), np.delete(old_free, x)
        if x + 1 < n:
            ref_prev[x] = old[x]  # the job after x came, in the reference, after x's start
        changed = old[x] + dur[x]
    if change == "remove-charge":  # the removed job becomes a charge from 0 (an early start)
        busy_e, busy_g = busy_e + [float(dur[x])], busy_g + [int(gpus[x])]
        changed = max(changed, float(dur[x]))
    elif "charge" in change:
        e = float(rng.integers(1, 30) * 100)
        busy_e, busy_g = busy_e + [e], busy_g + [int(rng.integers(1, cap + 1))]
        changed = max(changed, e)
    kw = {"busy_end": np.array(busy_e), "busy_gpus": np.array(busy_g)}
    full, full_free = fcfs_clock(order, submit, dur, gpus, cap, **kw)
    part, part_free, met = fcfs_clock_against(order, submit, dur, gpus, cap, ref_prev=ref_prev,
                                              ref_vst=ref_vst, changed_until=changed, **kw)
    if met < 0:
        assert part.tolist() == full.tolist()
    else:
        assert part.shape[0] == met
        assert np.r_[part, ref_vst[met:]].tolist() == full.tolist()
        assert np.r_[part_free, ref_free[met:]].tolist() == full_free.tolist()


@settings(max_examples=200, deadline=None)
@given(ops=st.lists(st.one_of(st.none(), st.tuples(st.integers(0, 20), st.integers(1, 8))),
                    max_size=80))
def test_the_clock_heap_pops_ends_in_order_like_heapq(ops):
    """Pushes ((end, GPUs)) and pops (None) in any order: the compiled heap's root is always
    heapq's smallest end, and the GPUs popped at each end sum the same."""
    ends = np.empty(len(ops) + 1)
    gpus = np.empty(len(ops) + 1, dtype=np.int64)
    size = 0
    ref: list[tuple[float, int]] = []
    popped: dict[float, int] = {}
    popped_ref: dict[float, int] = {}
    for op in ops:
        if op is None:
            if not ref:
                continue
            e, g = heapq.heappop(ref)
            popped_ref[e] = popped_ref.get(e, 0) + g
            assert ends[0] == e
            popped[ends[0]] = popped.get(ends[0], 0) + int(gpus[0])
            size = _heap_pop(ends, gpus, size)
        else:
            heapq.heappush(ref, (float(op[0]), op[1]))
            size = _heap_push(ends, gpus, size, float(op[0]), op[1])
        assert size == len(ref)
    while ref:  # drain both
        e, g = heapq.heappop(ref)
        popped_ref[e] = popped_ref.get(e, 0) + g
        assert ends[0] == e
        popped[ends[0]] = popped.get(ends[0], 0) + int(gpus[0])
        size = _heap_pop(ends, gpus, size)
    assert popped == popped_ref


@settings(max_examples=300, deadline=None)
@given(ends=st.lists(st.integers(0, 1000), min_size=1, max_size=300),
       pops=st.lists(st.integers(0, 3), max_size=300))
def test_the_clock_heap_holding_many_ends_pops_them_in_order(ends, pops):
    """Up to 300 ends pushed, with a few pops in between (so that nodes with all their
    children and the last, partial one both occur at every level): each pop takes the
    smallest end held, as heapq's, and the rest come out sorted."""
    buf = np.empty(len(ends) + 1)
    gpus = np.empty(len(ends) + 1, dtype=np.int64)
    size = 0
    ref: list[float] = []
    for k, e in enumerate(ends):
        size = _heap_push(buf, gpus, size, float(e), 1)
        heapq.heappush(ref, float(e))
        for _ in range(min(pops[k] if k < len(pops) else 0, size - 1)):
            assert buf[0] == heapq.heappop(ref)
            size = _heap_pop(buf, gpus, size)
    out = []
    while size:
        out.append(buf[0])
        size = _heap_pop(buf, gpus, size)
    assert out == sorted(ref)
