"""Arrays that grow by appending (the live service's per-job state): the values of plain
concatenation, amortized buffers, and never a write into an array the caller owns."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.growth import extend, reserve
from sia.features.incremental import SegmentedEvents

chunks = st.lists(st.lists(st.integers(-5, 5), max_size=7), min_size=1, max_size=12)


@settings(max_examples=60, deadline=None)
@given(chunks=chunks, writable=st.booleans())
def test_extend_equals_concatenation_and_spares_the_callers_array(chunks, writable):
    first = np.array(chunks[0], dtype=np.int64)
    caller = first.copy()
    arr = first
    arr.setflags(write=writable)
    expected = list(chunks[0])
    allocations = 0
    for c in chunks[1:]:
        before = arr.base
        arr = extend(arr, np.array(c, dtype=np.int64))
        allocations += arr.base is not before
        expected += c
        assert arr.tolist() == expected
        assert arr.flags.writeable == writable
    np.testing.assert_array_equal(first, caller)  # the caller's own array is never written
    # doubling: O(log n) buffers for n appends
    assert allocations <= 2 + int(np.log2(max(len(expected), 1)))


def test_extend_never_writes_past_a_foreign_arrays_end():
    """An array that is a prefix of someone else's buffer gets a new buffer of its own."""
    owner = np.arange(10)
    prefix = owner[:4]
    out = extend(prefix, [99])
    assert out.tolist() == [0, 1, 2, 3, 99]
    assert owner.tolist() == list(range(10))


def test_extend_of_rows_and_reserve():
    rows = extend(np.zeros((2, 3)), np.ones((2, 3)))
    assert rows.shape == (4, 3) and rows[2:].sum() == 6
    r = reserve(np.array([1.0, 2.0]), 5, np.nan)
    assert r.size >= 5 and r[:2].tolist() == [1.0, 2.0] and np.isnan(r[2:5]).all()
    same = np.array([1, 2, 3])
    assert reserve(same, 3, 0) is same


@settings(max_examples=40, deadline=None)
@given(events=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 50)), max_size=30),
       cap=st.lists(st.integers(0, 3), min_size=3, max_size=3),
       split=st.integers(0, 30))
def test_segmented_events_reserve_keeps_every_count(events, cap, split):
    """Events added to a segmented store that grows its capacity as needed count as in a
    store given the whole capacity from the start."""
    span, origin = 1000.0, 0.0
    need = np.bincount([p for p, _ in events], minlength=3)
    full = SegmentedEvents(origin, span, need)
    grown = SegmentedEvents(origin, span, np.minimum(np.array(cap), need))
    for i, (p, t) in enumerate(events):
        if i == split:
            grown.reserve(need)
        grown.reserve(np.maximum(grown.count + (np.arange(3) == p), grown.capacity))
        for store in (full, grown):
            store.add_pool(p, np.array([float(t)]))
    pools = np.arange(3)
    for t in (0.0, 10.5, 25.0, 60.0):
        np.testing.assert_array_equal(full.last_at_or_before(pools, t),
                                      grown.last_at_or_before(pools, t))
        for p in range(3):
            q = full.query_keys(np.array([p]), np.array([t]))
            assert (np.searchsorted(full.keys, q, "right") - full.offset[p]
                    == np.searchsorted(grown.keys, q, "right") - grown.offset[p])
