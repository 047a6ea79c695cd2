"""Buddy-cell allocation: split/merge by hand, buddies, quota, reservations, safety under random ops."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.scheduler.locality.buddy import BuddyAllocator, CannotAllocate
from sia.scheduler.locality.topology import Topology


def one_server():
    return Topology(racks=1, servers_per_rack=1, gpus_per_server=8)


def test_split_and_merge_by_hand():
    b = BuddyAllocator(one_server(), {"a": {8: 1}}, debug=True)
    j1 = b.allocate_dedicated("j1", "a", 1)
    assert j1.gpus == (0,) and j1.level == 0
    # the server cell was bound to a and split: right halves are free in a's lists
    assert b.free_cells(0, "a") == [1] and b.free_cells(1, "a") == [1] and b.free_cells(2, "a") == [1]
    assert b.free_cells(3) == [] and b.usage("a")["bound"][3] == 1
    j2 = b.allocate_dedicated("j2", "a", 2)
    assert j2.gpus == (2, 3)  # the free 2-cell, buddy of j1's pair
    j3 = b.allocate_dedicated("j3", "a", 1)
    assert j3.gpus == (1,)  # buddy of j1
    j4 = b.allocate_dedicated("j4", "a", 3)  # a 3-GPU gang holds a whole 4-cell
    assert j4.gpus == (4, 5, 6) and j4.level == 2
    with pytest.raises(CannotAllocate, match="over quota"):
        b.allocate_dedicated("j5", "a", 1)
    b.release("j1")
    assert b.free_cells(0, "a") == [0]
    b.release("j3")  # GPUs 0 and 1 merge into the pair 0
    assert b.free_cells(0, "a") == [] and b.free_cells(1, "a") == [0]
    b.release("j2")  # pairs 0 and 1 merge into the 4-cell 0
    assert b.free_cells(2, "a") == [0]
    b.release("j4")  # whole server free: unbound, back in the global list
    assert b.free_cells(3) == [0] and b.usage("a")["bound"] == [0, 0, 0, 0]


def test_dedicated_cells_stay_together_and_opportunistic_away():
    topo = Topology(racks=1, servers_per_rack=4)  # 32 GPUs
    b = BuddyAllocator(topo, {"a": {8: 2}, "b": {8: 1}}, debug=True)
    a1 = b.allocate_dedicated("a1", "a", 2)
    a2 = b.allocate_dedicated("a2", "a", 2)
    assert topo.server_of_gpu(a1.gpus[0]) == topo.server_of_gpu(a2.gpus[0]) == 0
    # server 1 is the buddy of a's bound server 0: opportunistic jobs keep out of it
    o1 = b.allocate_opportunistic("o1", "b", 4)
    assert topo.server_of_gpu(o1.gpus[0]) in (2, 3)
    bound = b.bound_pool_map()
    assert (bound[o1.gpus[0] : o1.gpus[0] + 4] == -1).all()
    assert b.free_gpu_mask()[8:16].all()  # server 1 untouched


def test_strict_buddies_can_be_relaxed():
    topo = Topology(racks=1, servers_per_rack=2)  # 16 GPUs
    strict = BuddyAllocator(topo, {"a": {8: 1}, "b": {8: 1}}, debug=True)
    strict.allocate_dedicated("a1", "a", 1)
    with pytest.raises(CannotAllocate, match="outside dedicated cells"):
        strict.allocate_opportunistic("o1", "b", 4)
    loose = BuddyAllocator(topo, {"a": {8: 1}, "b": {8: 1}}, debug=True, strict_buddies=False)
    loose.allocate_dedicated("a1", "a", 1)
    assert loose.allocate_opportunistic("o1", "b", 4).gpus == (8, 9, 10, 11)


def test_pending_reservation_blocks_opportunistic_until_met_or_cancelled():
    topo = Topology(racks=1, servers_per_rack=2)
    b = BuddyAllocator(topo, {"a": {8: 1}, "b": {8: 1}}, debug=True)
    b.allocate_opportunistic("big", "b", 16)  # the whole rack, lent out
    with pytest.raises(CannotAllocate, match="cannot be bound|can be bound"):
        b.reserve("r1", "a", 8)
    assert b.pending_reservations == {"r1": ("a", 3)}
    b.release("big")
    with pytest.raises(CannotAllocate, match="blocked: reservation 'r1'"):
        b.allocate_opportunistic("o2", "b", 1)
    res = b.reserve("r1", "a", 8)
    assert res.kind == "reservation" and b.pending_reservations == {}
    assert b.usage("a")["reservation"][3] == 1
    b.reserve("r2", "b", 8)
    b.release("r1")
    with pytest.raises(CannotAllocate, match="over quota"):
        b.reserve("r3", "b", 1)
    assert b.pending_reservations == {}  # over quota never becomes pending
    b.cancel_reservation("nothing")


def test_binding_that_breaks_safety_is_refused():
    topo = Topology(racks=1, servers_per_rack=4)  # halves: servers 0-1, 2-3
    b = BuddyAllocator(topo, {"a": {16: 1}, "b": {8: 1}, "c": {8: 1}}, debug=True, strict_buddies=False)
    b.allocate_dedicated("b1", "b", 8)
    assert b.allocation("b1").index == 0
    b.allocate_opportunistic("o1", "c", 8)  # takes server 1, the only free whole server in half 0
    assert b.allocation("o1").index == 1
    # binding c to server 2 or 3 would split half 1, the only cell left for a's 16-GPU quota
    with pytest.raises(CannotAllocate, match="binding would break safety"):
        b.allocate_dedicated("c1", "c", 8)
    assert b.is_safe()
    b.release("o1")
    assert b.allocate_dedicated("c1", "c", 8).index == 1


def test_binding_over_loans_keeps_them_as_guests_until_the_last_dedicated_cell_leaves():
    topo = Topology(racks=1, servers_per_rack=2)  # 16 GPUs
    quotas = {"a": {8: 1}, "b": {8: 1}}
    plain = BuddyAllocator(topo, quotas, debug=True, strict_buddies=False)
    b = BuddyAllocator(topo, quotas, debug=True, strict_buddies=False, adopt_loans=True)
    for alloc in (plain, b):
        alloc.allocate_opportunistic("o1", "b", 2)  # server 0, GPUs 0-1
        alloc.allocate_opportunistic("o2", "b", 4)  # server 0, GPUs 4-7 (best fit)
        alloc.allocate_dedicated("b1", "b", 8)  # server 1, the only free whole server
    with pytest.raises(CannotAllocate, match="can be bound"):
        plain.allocate_dedicated("a1", "a", 2)  # no whole server is free
    a1 = b.allocate_dedicated("a1", "a", 2)  # server 0 bound to a with o1, o2 inside
    assert a1.gpus == (2, 3) and b.adoptions == 1
    assert b.usage("a")["bound"][3] == 1 and b.allocation("o1").kind == "opportunistic"
    with pytest.raises(CannotAllocate, match="can be bound|over quota"):
        b.allocate_dedicated("a2", "a", 4)  # a's server has no free 4-cell while o2 runs
    b.release("o2")  # the guest's cell goes to a
    assert b.free_cells(2, "a") == [1]
    assert b.allocate_dedicated("a2", "a", 4).gpus == (4, 5, 6, 7)
    b.release("a1")
    b.release("a2")  # a's last dedicated cell leaves: server 0 unbound, guest o1 stays
    assert sum(b.usage("a")["bound"]) == 0 and "o1" in b.allocations
    assert b.free_cells(1) == [1] and b.free_cells(2) == [1]
    b.release("o1")
    assert b.free_cells(3) == [0]
    # a request that does not fit the free part of any server is not bound over loans
    b.allocate_opportunistic("o3", "b", 1)
    with pytest.raises(CannotAllocate):
        b.allocate_dedicated("a3", "a", 8)
    assert b.adoptions == 1


@pytest.mark.parametrize("pack", [False, True])
def test_packing_keeps_the_larger_free_cell_whole(pack):
    b = BuddyAllocator(one_server(), {"a": {8: 1}}, debug=True, pack=pack)
    for name, width in [("x", 1), ("t", 1), ("u", 2), ("y1", 1), ("y2", 1), ("y3", 1), ("y4", 1)]:
        b.allocate_dedicated(name, "a", width)
    for name in ("t", "u", "y4"):
        b.release(name)  # free: GPU 1, GPUs 2-3 (half 0) and GPU 7 (half 1)
    assert b.allocate_dedicated("n", "a", 1).gpus == ((7,) if pack else (1,))
    b.release("x")
    # packed: half 0 (GPUs 0-3) is whole again and a 4-GPU gang fits; unpacked it does not
    if pack:
        assert b.allocate_dedicated("w", "a", 4).gpus == (0, 1, 2, 3)
    else:
        with pytest.raises(CannotAllocate):
            b.allocate_dedicated("w", "a", 4)


def test_unsatisfiable_quota_rejected():
    with pytest.raises(ConfigError, match="cannot be satisfied"):
        BuddyAllocator(Topology(racks=1, servers_per_rack=2), {"a": {8: 2}, "b": {4: 1}})


OPS = st.lists(
    st.tuples(
        st.sampled_from(["ded", "opp", "res", "release", "cancel"]),
        st.integers(0, 2),  # pool
        st.sampled_from([1, 1, 2, 3, 4, 8, 16]),
        st.integers(0, 10_000),
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(ops=OPS, strict=st.booleans(), adopt=st.booleans())
def test_invariants_hold_under_random_operations(ops, strict, adopt):
    """Debug mode re-checks every invariant (safety included) after every operation."""
    topo = Topology(racks=2, servers_per_rack=2)  # 32 GPUs, racks of 16
    quotas = {"p0": {8: 1, 2: 1}, "p1": {16: 1}, "p2": {4: 1, 1: 2}}
    b = BuddyAllocator(topo, quotas, debug=True, strict_buddies=strict, adopt_loans=adopt,
                       pack=adopt)
    pools = list(quotas)
    for n, (op, p, width, pick) in enumerate(ops):
        pool = pools[p]
        try:
            if op == "ded":
                b.allocate_dedicated(f"d{n}", pool, width)
            elif op == "opp":
                b.allocate_opportunistic(f"o{n}", pool, width)
            elif op == "res":
                b.reserve(f"r{n}", pool, width)
            elif op == "release" and b.allocations:
                ids = sorted(b.allocations)
                b.release(ids[pick % len(ids)])
            elif op == "cancel" and b.pending_reservations:
                ids = sorted(b.pending_reservations)
                b.cancel_reservation(ids[pick % len(ids)])
        except CannotAllocate:
            pass
        assert b.is_safe()
        # no GPU held twice; each allocation inside its own cell
        held = np.zeros(topo.n_gpus, dtype=int)
        for a in b.allocations.values():
            lo = a.index << a.level
            held[lo : lo + (1 << a.level)] += 1
            assert a.gpus[0] == lo and len(a.gpus) == a.num_gpus
        assert held.max(initial=0) <= 1
        assert not (b.free_gpu_mask() & (held > 0)).any()
        # dedicated usage never exceeds quota in GPUs
        for pool in pools:
            use = b.usage(pool)
            used = sum((use["dedicated"][lv] + use["reservation"][lv]) << lv for lv in topo.levels)
            assert used <= sum(q << lv for lv, q in enumerate(use["quota"]))
    for alloc_id in sorted(b.allocations):
        b.release(alloc_id)
    assert b.free_cells(topo.top_level) == [0, 1]
    assert all(sum(b.usage(p)["bound"]) == 0 for p in pools)
