"""The compiled virtual clock (numba) against the first pure-Python one, option by option."""

from __future__ import annotations

import heapq
import math
from collections.abc import Sequence

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.scheduler.vst import fcfs_clock, fcfs_pool_starts


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
