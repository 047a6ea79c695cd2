"""SIA's ``reserve_floor``: every pool keeps room for a job as wide as its last one."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.policies.sia.spare import margin, reservations
from sia.scheduler.registry import make_policy

from .conftest import BlindForecaster, job_table, small_traces

table = job_table


def starts(rows, quotas, policy) -> dict[str, tuple[float, bool]]:
    res = simulate(table(rows), make_pools(quotas), policy, check_invariants=True)
    return {r["job_id"]: (r["start_time"], r["opportunistic"]) for r in res.iter_rows(named=True)}


def _rows(a0_gpus: int) -> list[tuple]:
    # A (quota 2) ran a0 (a0_gpus GPUs, 10 s) and is idle when B's b1 (200 s, fits 5 minutes)
    # waits behind b0 on B's one GPU at 100; A's 2-GPU a1 comes at 150, unpredicted
    return [("a0", "A", 0.0, 10.0, a0_gpus), ("b0", "B", 100.0, 1000.0, 1),
            ("b1", "B", 100.0, 200.0, 1), ("a1", "A", 150.0, 100.0, 2)]


def test_without_the_floor_a_surprise_burst_waits_for_the_loan():
    got = starts(_rows(2), {"A": 2, "B": 1}, SiaPolicy(BlindForecaster()))
    assert got["b1"] == (100.0, True)  # lent one of A's idle GPUs
    assert got["a1"] == (300.0, False)  # 1 GPU free at 150: waits for b1's end


def test_the_floor_keeps_room_for_the_last_jobs_width():
    got = starts(_rows(2), {"A": 2, "B": 1},
                 SiaPolicy(BlindForecaster(), reserve_floor="last_width"))
    # A's last job took 2 GPUs: both stay reserved, b1 waits for B's own GPU, a1 is on time
    assert got["a1"] == (150.0, False)
    assert got["b1"] == (1100.0, False)


def test_the_floor_is_the_last_jobs_width_not_the_quota():
    # a0 took 1 GPU: A reserves 1, the other is lent, and the 2-GPU a1 waits as without a floor
    got = starts(_rows(1), {"A": 2, "B": 1},
                 SiaPolicy(BlindForecaster(), reserve_floor="last_width"))
    assert got["b1"] == (100.0, True)
    assert got["a1"] == (300.0, False)


def test_reservations_by_hand():
    # pending + predicted, at least the floor, at most the unused quota
    assert reservations([0, 2, 0], [0.0, 1.0, 0.0], [4, 4, 1], None) == [0.0, 3.0, 0.0]
    assert reservations([0, 2, 0], [0.0, 1.0, 0.0], [4, 4, 1], [2, 1, 4]) == [2, 3.0, 1]


@pytest.mark.parametrize("bad", ["last", "quota", True, 2])
def test_the_floor_option_is_checked(bad):
    with pytest.raises(ConfigError, match="reserve_floor"):
        SiaPolicy(BlindForecaster(), reserve_floor=bad)


@pytest.mark.parametrize("floor", ["last_width", "margin"])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces())
def test_with_perfect_predictions_the_floor_slows_no_job(floor, trace):
    rows, quotas = trace
    jobs, pools = table(rows), make_pools(quotas)
    base = simulate(jobs, pools, make_policy("fcfs"))
    res = simulate(jobs, pools, make_policy("sia-perfect", reserve_floor=floor),
                   check_invariants=True)
    late = res["end_time"].to_numpy() > base["end_time"].to_numpy() + 1e-6
    assert not late.any()


@given(rows=st.lists(st.tuples(st.integers(0, 8), st.floats(0, 8), st.integers(0, 8),
                                st.integers(0, 8)), min_size=1, max_size=6))
def test_the_floor_only_adds_reservations_within_the_unused_quota(rows):
    pend, col, unused, floor = (list(c) for c in zip(*rows, strict=True))
    off = reservations(pend, col, unused, None)
    on = reservations(pend, col, unused, floor)
    for p in range(len(rows)):
        assert off[p] <= on[p] <= unused[p]
        assert on[p] >= min(floor[p], unused[p])


class PrimedBlindForecaster(BlindForecaster):
    """Silent, with a prior history whose last job of A took 2 GPUs (B's is unknown)."""

    def last_width(self, pool_names):
        return np.array([2.0 if p == "A" else np.nan for p in pool_names])


def test_the_floor_starts_from_the_prior_historys_last_job():
    # A submits nothing in the replay before a1: without a prior its floor is 0 and b1 is lent
    rows = _rows(2)[1:]
    got = starts(rows, {"A": 2, "B": 1}, SiaPolicy(BlindForecaster(), reserve_floor="last_width"))
    assert got["b1"] == (100.0, True) and got["a1"] == (300.0, False)
    # with the prior's last job of A (2 GPUs), both of A's GPUs stay reserved
    got = starts(rows, {"A": 2, "B": 1},
                 SiaPolicy(PrimedBlindForecaster(), reserve_floor="last_width"))
    assert got["a1"] == (150.0, False) and got["b1"] == (1100.0, False)


# ----------------------------------------------------------------------------- "margin"
def test_margin_by_hand():
    # the largest min(last width, unused - reserved): A's 2 fits its room, C's 4 is cut to 3
    assert margin([2, 4, 1], [0.0, 1.0, 0.0], [2, 4, 1]) == 3
    # a pool with no room (reserved all of its unused quota) leaves no margin for its width
    assert margin([8, 1], [4.0, 0.0], [4, 3]) == 1
    assert margin([0, 0], [0.0, 0.0], [4, 4]) == 0
    assert margin([], [], []) == 0


@given(rows=st.lists(st.tuples(st.integers(0, 8), st.floats(0, 8), st.integers(0, 8)),
                     min_size=1, max_size=6))
def test_margin_is_one_pools_room_within_the_unused_quota(rows):
    widths, res_raw, unused = (list(c) for c in zip(*rows, strict=True))
    res = [min(r, u) for r, u in zip(res_raw, unused, strict=True)]
    m = margin(widths, res, unused)
    rooms = [min(w, u - r) for w, u, r in zip(widths, unused, res, strict=True)]
    assert m == max([0.0, *rooms])
    # one pool's room at most: the reservations and the margin stay within the unused quota
    assert sum(res) + m <= sum(unused) + 1e-9
    assert m <= max(widths)


def _two_silent(a_width: int) -> list[tuple]:
    # A and C (quota 2 each) ran one job each and are silent when B's b1-b4 (200 s, fit
    # 5 minutes) wait behind b0 on B's one GPU at 100; A's a1 (a_width GPUs) comes at 150
    return [("a0", "A", 0.0, 10.0, a_width), ("c0", "C", 0.0, 10.0, 2),
            ("b0", "B", 100.0, 1000.0, 1),
            *((f"b{i}", "B", 100.0, 200.0, 1) for i in range(1, 5)),
            ("a1", "A", 150.0, 100.0, a_width)]


def test_margin_keeps_room_for_one_surprise_not_every_pools():
    quotas = {"A": 2, "B": 1, "C": 2}
    off = starts(_two_silent(2), quotas, SiaPolicy(BlindForecaster()))
    assert all(off[f"b{i}"] == (100.0, True) for i in range(1, 5))  # all 4 idle GPUs lent
    assert off["a1"] == (300.0, False)  # waits for the loans
    floors = starts(_two_silent(2), quotas,
                    SiaPolicy(BlindForecaster(), reserve_floor="last_width"))
    assert not any(floors[f"b{i}"][1] for i in range(1, 5))  # A's and C's floors: none lent
    assert floors["a1"] == (150.0, False)
    got = starts(_two_silent(2), quotas, SiaPolicy(BlindForecaster(), reserve_floor="margin"))
    # a margin of 2 (one 2-GPU job of A or C): b1 and b2 are lent, b3 and b4 wait (for the
    # loans' end), a1 on time
    assert got["b1"] == (100.0, True) and got["b2"] == (100.0, True)
    assert got["b3"][0] > 100.0 and got["b4"][0] > 100.0
    assert got["a1"] == (150.0, False)


def test_margin_is_the_widest_last_job_that_fits_a_pools_room():
    # A's last job took 1 GPU: the margin is C's 2, so A's 2-GPU surprise still finds room
    quotas = {"A": 2, "B": 1, "C": 2}
    rows = [r if r[0] != "a1" else ("a1", "A", 150.0, 100.0, 2) for r in _two_silent(1)]
    got = starts(rows, quotas, SiaPolicy(BlindForecaster(), reserve_floor="margin"))
    assert got["a1"] == (150.0, False)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces())
def test_the_margin_never_lends_more_than_without_it_at_the_first_decision(trace):
    # on the same state a margin only removes unreserved GPUs: a blind SIA's first loans with
    # it are a prefix-subset of those without it (compare the loans of the first instant)
    rows, quotas = trace
    jobs, pools = table(rows), make_pools(quotas)
    off = simulate(jobs, pools, SiaPolicy(BlindForecaster()))
    on = simulate(jobs, pools, SiaPolicy(BlindForecaster(), reserve_floor="margin"))
    t0 = float(jobs["submit_time"].min())
    lent_off = set(off.filter(off["opportunistic"] & (off["start_time"] == t0))["job_id"])
    lent_on = set(on.filter(on["opportunistic"] & (on["start_time"] == t0))["job_id"])
    assert lent_on <= lent_off
