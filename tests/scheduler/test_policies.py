"""Baseline policies on hand-computed schedules (SIA Figure 1 included)."""

from __future__ import annotations

import polars as pl
from sia.data.schema import make_pools, validate
from sia.scheduler.core.simulator import simulate
from sia.scheduler.registry import make_policy


def table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus) tuples, via the contract."""
    raw = pl.DataFrame(
        rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"], orient="row"
    )
    return validate(raw)[0]


def run(rows, quotas, policy) -> dict[str, tuple[float, float, bool]]:
    """{job_id: (start, end, opportunistic)} of a replay with invariants checked."""
    res = simulate(table(rows), make_pools(quotas), make_policy(policy), check_invariants=True)
    return {r["job_id"]: (r["start_time"], r["end_time"], r["opportunistic"])
            for r in res.iter_rows(named=True)}


# ----------------------------------------------------------------------------- FCFS

HOL = [
    # pool A, quota 4
    ("a0", "A", 0.0, 10.0, 3),
    ("a1", "A", 1.0, 5.0, 2),  # 1 GPU free: blocked until a0 ends at 10
    ("a2", "A", 2.0, 1.0, 1),  # would fit the free GPU, but FCFS waits behind a1
    # pool B, quota 2, with idle GPUs FCFS never lends
    ("b0", "B", 0.0, 3.0, 1),
    ("b1", "B", 4.0, 2.0, 2),
]


def test_fcfs_hand_schedule_with_head_of_line_blocking():
    got = run(HOL, {"A": 4, "B": 2}, "fcfs")
    assert got == {
        "a0": (0.0, 10.0, False),
        "a1": (10.0, 15.0, False),
        "a2": (10.0, 11.0, False),
        "b0": (0.0, 3.0, False),
        "b1": (4.0, 6.0, False),
    }


# ----------------------------------------------------------------------------- Figure 1
#
# Two users, 4 GPUs each. User 1 (pool U1): J0 runs [0, 10) on all 4 GPUs; J2
# (2 GPUs, long: 20 s) arrives at 1, J3 and J4 (1 GPU, 2 s) at 2, J5 (2 GPUs, 3 s)
# at 3. User 2 (pool U2): J1 runs [0, 4) on 2 GPUs; J6 and J7 (2 GPUs, 5 s) arrive
# at 5, when U2 would be idle again.
#
# FCFS: J2 waits for J0: [10, 30); J3, J4 [10, 12); J5 [12, 15); J6, J7 [5, 10).
# MaxMin: at 1, J2 borrows U2's 2 idle GPUs: [1, 21). At 4 (J1 ends) J3, J4 borrow
# the 2 freed GPUs: [4, 6). At 5 J6, J7 find every GPU busy. At 6 (J3, J4 end) U2
# (allocation 0/4) goes first: J6 [6, 11). At 10 (J0 ends, 4 free) U1 and U2 both
# hold 2/4; the tie goes to U1 (pool order): J5 dedicated [10, 13), then J7 [10, 15).
# So J2..J5 speed up while J6 (+1 s) and J7 (+5 s) slow down: Figure 1's point.

FIG1 = [
    ("J0", "U1", 0.0, 10.0, 4),
    ("J1", "U2", 0.0, 4.0, 2),
    ("J2", "U1", 1.0, 20.0, 2),
    ("J3", "U1", 2.0, 2.0, 1),
    ("J4", "U1", 2.0, 2.0, 1),
    ("J5", "U1", 3.0, 3.0, 2),
    ("J6", "U2", 5.0, 5.0, 2),
    ("J7", "U2", 5.0, 5.0, 2),
]


def test_figure1_fcfs():
    got = run(FIG1, {"U1": 4, "U2": 4}, "fcfs")
    assert {j: got[j][:2] for j in got} == {
        "J0": (0.0, 10.0), "J1": (0.0, 4.0), "J2": (10.0, 30.0), "J3": (10.0, 12.0),
        "J4": (10.0, 12.0), "J5": (12.0, 15.0), "J6": (5.0, 10.0), "J7": (5.0, 10.0),
    }


def test_figure1_maxmin_lends_idle_gpus_to_long_j2_and_delays_j6_j7():
    got = run(FIG1, {"U1": 4, "U2": 4}, "maxmin")
    assert got == {
        "J0": (0.0, 10.0, False), "J1": (0.0, 4.0, False),
        "J2": (1.0, 21.0, True), "J3": (4.0, 6.0, True), "J4": (4.0, 6.0, True),
        "J5": (10.0, 13.0, False), "J6": (6.0, 11.0, False), "J7": (10.0, 15.0, False),
    }
    fcfs = run(FIG1, {"U1": 4, "U2": 4}, "fcfs")
    slowed = sorted(j for j in got if got[j][1] > fcfs[j][1] + 1.0 - 1e-9)
    faster = sorted(j for j in got if got[j][1] < fcfs[j][1])
    assert slowed == ["J6", "J7"]
    assert faster == ["J2", "J3", "J4", "J5"]


# ----------------------------------------------------------------------------- SSF / gSSF

def test_ssf_orders_by_service_and_skips_jobs_that_do_not_fit():
    rows = [
        ("x0", "A", 0.0, 10.0, 2),
        ("x1", "A", 1.0, 8.0, 1),  # service 8
        ("x2", "A", 1.0, 3.0, 2),  # service 6
        ("x3", "A", 1.0, 5.0, 1),  # service 5
    ]
    # at 10: x3 (5) starts, x2 (6) needs 2 GPUs but 1 is left: skipped, x1 (8) starts;
    # x2 waits for both: x3 ends at 15, x1 at 18.
    got = run(rows, {"A": 2}, "ssf")
    assert {j: got[j][:2] for j in got} == {
        "x0": (0.0, 10.0), "x3": (10.0, 15.0), "x1": (10.0, 18.0), "x2": (18.0, 21.0),
    }
    assert not any(v[2] for v in got.values())


def test_ssf_does_not_share_between_pools():
    rows = [("a0", "A", 0.0, 10.0, 1), ("a1", "A", 0.0, 1.0, 1), ("b0", "B", 50.0, 1.0, 1)]
    got = run(rows, {"A": 1, "B": 1}, "ssf")
    assert got["a1"][:2] == (0.0, 1.0)  # shorter service first
    assert got["a0"][:2] == (1.0, 11.0)  # B's idle GPU is never lent


def test_ssf_breaks_ties_by_arrival():
    rows = [("z", "A", 0.0, 4.0, 1), ("y", "A", 1.0, 2.0, 1), ("w", "A", 2.0, 2.0, 1)]
    got = run(rows, {"A": 1}, "ssf")
    assert got["y"][0] == 4.0 and got["w"][0] == 6.0


def test_gssf_uses_all_gpus_marks_borrowed_ones_opportunistic_and_can_slow_others():
    rows = [
        ("j0", "A", 0.0, 10.0, 2),
        ("j1", "A", 1.0, 4.0, 1),  # service 4
        ("j2", "A", 1.0, 1.0, 2),  # service 2: first, on B's idle GPUs
        ("j3", "B", 3.0, 1.0, 2),  # B's own job finds one of its GPUs lent to j1
    ]
    got = run(rows, {"A": 2, "B": 2}, "gssf")
    assert got == {
        "j0": (0.0, 10.0, False),
        "j2": (1.0, 2.0, True),
        "j1": (2.0, 6.0, True),
        "j3": (6.0, 7.0, False),
    }
    fcfs = run(rows, {"A": 2, "B": 2}, "fcfs")
    assert fcfs["j3"][:2] == (3.0, 4.0)


def test_gssf_picks_shortest_service_across_pools():
    rows = [
        ("j0", "A", 0.0, 5.0, 2),  # with b0, fills the 3-GPU cluster until 5
        ("b0", "B", 0.0, 20.0, 1),
        ("long", "A", 1.0, 100.0, 1),
        ("short", "B", 2.0, 1.0, 1),
        ("mid", "B", 3.0, 10.0, 1),
    ]
    # at 5, 2 GPUs free: short, then mid (B's quota is held by b0: both borrow A's);
    # long waits for short to end, then runs on A's own quota.
    got = run(rows, {"A": 2, "B": 1}, "gssf")
    assert got["short"] == (5.0, 6.0, True)
    assert got["mid"] == (5.0, 15.0, True)
    assert got["long"] == (6.0, 106.0, False)
    assert run(rows, {"A": 2, "B": 1}, "fcfs")["long"][:2] == (5.0, 105.0)


# ----------------------------------------------------------------------------- MaxMin

def test_maxmin_equalizes_allocation_over_quota():
    rows = [
        ("a0", "A", 0.0, 100.0, 4),
        ("a1", "A", 0.0, 50.0, 2),
        ("a2", "A", 0.0, 50.0, 2),
        ("c0", "C", 0.0, 100.0, 4),
        ("c1", "C", 0.0, 50.0, 2),
    ]
    # B (4 GPUs) is idle. A and C both hold 4/4: tie -> A takes 2 (6/4), then C takes 2.
    got = run(rows, {"A": 4, "B": 4, "C": 4}, "maxmin")
    assert got["a1"] == (0.0, 50.0, True)
    assert got["c1"] == (0.0, 50.0, True)
    assert got["a2"] == (50.0, 100.0, True)


def test_maxmin_weights_by_quota():
    rows = [
        ("a0", "A", 0.0, 100.0, 2),  # A holds 2 of 2: ratio 1.0
        ("a1", "A", 0.0, 10.0, 2),
        ("c0", "C", 0.0, 100.0, 6),  # C holds 6 of 8: ratio 0.75 (but more GPUs than A)
        ("c1", "C", 0.0, 10.0, 4),  # wider than C's 2 unused GPUs: must borrow
    ]
    # 4 GPUs free (B's 2 and C's 2). By allocation / quota C goes first and c1 takes all 4;
    # by absolute allocation A would go first and c1 could not start.
    got = run(rows, {"A": 2, "B": 2, "C": 8}, "maxmin")
    assert got["c1"] == (0.0, 10.0, True)
    assert got["a1"] == (10.0, 20.0, True)


def test_maxmin_does_not_backfill_past_a_blocked_head():
    rows = [
        ("a0", "A", 0.0, 100.0, 3),
        ("a1", "A", 0.0, 10.0, 4),  # head of A: needs 4, 3 GPUs are free
        ("a2", "A", 0.0, 10.0, 1),  # would fit (even A's own quota), but is behind a1
        ("c0", "C", 0.0, 100.0, 2),
        ("c1", "C", 0.0, 10.0, 2),  # C's head fits the free GPUs
    ]
    # A (3/4) goes before C (2/2) but its head does not fit; C's head takes 2 of the 3.
    got = run(rows, {"A": 4, "B": 2, "C": 2}, "maxmin")
    assert got["c1"] == (0.0, 10.0, True)
    # a1 needs 4 free GPUs: only when a0 and c0 end at 100; a2 stays strictly behind it.
    assert got["a1"] == (100.0, 110.0, False)
    assert got["a2"] == (100.0, 110.0, True)
