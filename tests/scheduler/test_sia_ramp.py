"""SIA's loan ramp: at most `cap` unproven loans per pool and window; a miss resets the cap."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.scheduler.core.forecast import PerfectForecaster
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy
from sia.scheduler.policies.sia.ramp import LoanRamp
from sia.scheduler.registry import make_policy


class _ShortBins(PerfectForecaster):
    """Perfect arrivals and load; every job predicted to fit 5 minutes (bin 0)."""

    perfect_information = False

    def duration_bins(self, view, job_indices):
        return np.zeros(len(job_indices), dtype=np.int64)


def table(rows) -> pl.DataFrame:
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


def starts(rows, quotas, **options) -> tuple[dict[str, float], dict]:
    # one window (5 min): each window has a cap of its own; only loans score the pool unless
    # a test says otherwise (the witnesses have tests of their own below)
    options.setdefault("loan_ramp_evidence", "loans")
    pol = SiaPolicy(_ShortBins(), refresh_s=0, adaptation=False, windows_s=(300.0,), **options, risk=None)
    res = simulate(table(rows), make_pools(quotas), pol, check_invariants=True)
    return dict(zip(res["job_id"], res["start_time"], strict=True)), pol.facts()


# B (quota 1) is busy with b0 for 20000 s; b1-b3 wait, predicted to fit 5 minutes. A's 2 GPUs
# are idle and nothing arrives in A before 50000 s.
def _rows(d: float) -> list[tuple]:
    return [("b0", "B", 0.0, 20000.0, 1), ("b1", "B", 0.0, d, 1), ("b2", "B", 0.0, d, 1),
            ("b3", "B", 0.0, d, 1), ("a0", "A", 50000.0, 10.0, 1)]


def test_without_the_ramp_every_wrong_prediction_is_lent_at_once():
    got, facts = starts(_rows(5000.0), {"A": 2, "B": 1}, loan_ramp=None)
    assert (got["b1"], got["b2"]) == (0.0, 0.0) and "loan_ramp" not in facts


def test_a_loan_that_overruns_holds_its_pool_back_until_it_ends():
    # ramp 1: b1 alone is lent at 0; it is still running at 300 s (a miss), so B lends nothing
    # more in 5 minutes until b1 ends at 5000; then b2, then b3 (cap back at 1 each time)
    got, facts = starts(_rows(5000.0), {"A": 2, "B": 1}, loan_ramp=1)
    assert (got["b1"], got["b2"], got["b3"]) == (0.0, 5000.0, 10000.0)
    assert facts["loan_ramp"]["missed"] == 3 and facts["loan_ramp"]["proven"] == 0


def test_a_loan_that_ends_in_its_window_doubles_the_cap():
    # the predictions were right (100 s jobs): b1 ends at 100 within its window, the cap
    # doubles to 2 and b2, b3 are lent together
    got, facts = starts(_rows(100.0), {"A": 2, "B": 1}, loan_ramp=1)
    assert (got["b1"], got["b2"], got["b3"]) == (0.0, 100.0, 100.0)
    assert facts["loan_ramp"]["proven"] == 3 and facts["loan_ramp"]["missed"] == 0


def test_a_late_end_seen_after_the_fact_is_a_miss():
    # b1 runs 400 s against a 300 s window, and the policy first looks again at its end:
    # the ramp scores it by its end time (400 > 300), not by when it noticed
    ramp = LoanRamp(1)
    ramp.reset(1, 1)
    ramp.lent(0, 0, 0, 0.0, 300.0)
    ramp.update(400.0, [1], lambda p: np.array([0]), np.array([400.0]))
    assert ramp.stats == {"proven": 0, "missed": 1, "held_back": 0, "witnessed": 0,
                          "witness_missed": 0} and ramp.cap == [[1]]


def test_the_ramp_is_on_for_predicted_durations_only():
    from sia.scheduler.policies.sia.ramp import DEFAULT_EVIDENCE, DEFAULT_LOAN_RAMP

    assert SiaPolicy(_ShortBins(), risk=None).loan_ramp.initial == DEFAULT_LOAN_RAMP
    assert SiaPolicy(_ShortBins(), risk=None).loan_ramp.evidence == DEFAULT_EVIDENCE == "misses"
    assert make_policy("sia-perfect").loan_ramp is None
    assert SiaPolicy(_ShortBins(), loan_ramp=None, risk=None).loan_ramp is None


def test_a_loan_its_time_limit_makes_certain_skips_the_ramp():
    # b1-b3 run 5000 s and are predicted to fit 5 min; b3's limit (200 s + grace) would make
    # it certain to fit, but b3 has that limit and runs 200 s: it is lent at 0 beside b1,
    # although the ramp holds B's predicted loans at one, and it does not count against it
    rows = _rows(5000.0)
    rows[3] = ("b3", "B", 0.0, 200.0, 1)
    raw = pl.DataFrame(rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row").with_columns(
        pl.Series("time_limit", [None, None, None, 200.0, None], dtype=pl.Float64))
    pol = SiaPolicy(_ShortBins(), refresh_s=0, adaptation=False, windows_s=(300.0,),
                    loan_ramp=1, loan_ramp_evidence="loans", risk=None)
    res = simulate(validate(raw)[0], make_pools({"A": 2, "B": 1}), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert (got["b1"], got["b3"], got["b2"]) == (0.0, 0.0, 5000.0)


@pytest.mark.parametrize("bad", [0, -1, 1.5, True, "2"])
def test_the_ramp_is_a_whole_number_of_loans(bad):
    with pytest.raises(ConfigError, match="loan_ramp"):
        SiaPolicy(PerfectForecaster(), loan_ramp=bad, risk=None)


DURATIONS = [30.0, 299.0, 1800.0, 3500.0, 20000.0, 50000.0]


@st.composite
def small_traces(draw):
    n_pools = draw(st.integers(2, 3))
    quotas = {f"p{i}": draw(st.integers(1, 4)) for i in range(n_pools)}
    rows = []
    for i in range(draw(st.integers(1, 20))):
        pool = f"p{draw(st.integers(0, n_pools - 1))}"
        rows.append((f"j{i:03d}", pool, float(draw(st.integers(0, 40)) * 150),
                     draw(st.sampled_from(DURATIONS)), draw(st.integers(1, quotas[pool]))))
    return rows, quotas


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), ramp=st.integers(1, 3), refresh=st.sampled_from([0.0, 300.0]))
def test_with_perfect_predictions_the_ramp_scores_no_miss_and_slows_no_job(trace, ramp, refresh):
    rows, quotas = trace
    jobs, pools = table(rows), make_pools(quotas)
    pol = make_policy("sia-perfect", loan_ramp=ramp, refresh_s=refresh)
    res = simulate(jobs, pools, pol, check_invariants=True)
    base = simulate(jobs, pools, make_policy("fcfs"))
    assert (res["end_time"] <= base["end_time"] + 1e-6).all()
    assert pol.facts()["loan_ramp"]["missed"] == 0


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces())
def test_a_ramp_that_never_binds_changes_nothing(trace):
    # a cap above every job of the trace never holds a loan back: the replay is today's
    rows, quotas = trace
    jobs, pools = table(rows), make_pools(quotas)
    plain = simulate(jobs, pools, SiaPolicy(_ShortBins(), refresh_s=0, loan_ramp=None, risk=None))
    ramped = simulate(jobs, pools, SiaPolicy(_ShortBins(), refresh_s=0, loan_ramp=len(rows), risk=None))
    assert plain.equals(ramped)


def test_each_window_has_a_cap_of_its_own():
    # with the three windows, B's first loan of the 5-min window (b1) and of the 1-h window
    # (b2) both start at 0; A's 2 GPUs are then full
    pol = SiaPolicy(_ShortBins(), refresh_s=0, adaptation=False, loan_ramp=1,
                    loan_ramp_evidence="loans", risk=None)
    res = simulate(table(_rows(5000.0)), make_pools({"A": 2, "B": 1}), pol)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert (got["b1"], got["b2"]) == (0.0, 0.0) and got["b3"] > 0.0


def test_an_evicted_or_refused_loan_is_forgotten_unscored():
    ramp = LoanRamp(1)
    ramp.reset(1, 2)
    ramp.lent(7, 0, 1, 0.0, 3600.0)
    assert ramp.full(0, 1)
    ramp.forget(7, 0)
    assert not ramp.full(0, 1) and ramp.cap == [[1, 1]]
    ramp.update(5000.0, [1], lambda p: np.array([7]), np.array([100.0]))  # it ends later
    assert ramp.stats["proven"] == ramp.stats["missed"] == 0


def test_with_a_memory_misses_the_lending_rule_accepted_do_not_back_off():
    # eps 0.2 in the window, memory 10: up to 2 misses among the last 10 scored loans are the
    # overruns the lending rule accepted; the third backs the cap off
    ramp = LoanRamp(1, memory=10)
    ramp.reset(1, 1, tolerance=[0.2])
    dur = np.zeros(20)
    done: list[int] = []

    def finish(j: int, d: float) -> None:
        ramp.lent(j, 0, 0, 0.0, 300.0)
        dur[j] = d
        done.append(j)
        ramp.update(1000.0, [len(done)], lambda p: np.array(done), dur)

    finish(0, 100.0)
    finish(1, 100.0)  # two proven: cap 4
    assert ramp.cap == [[4]]
    finish(2, 400.0)
    finish(3, 400.0)  # two misses of four: within 0.2 x 10
    assert ramp.cap == [[4]]
    finish(4, 400.0)  # a third: back to 1
    assert ramp.cap == [[1]] and ramp.stats["missed"] == 3
    # without a memory every miss backs off
    ramp = LoanRamp(1)
    ramp.reset(1, 1, tolerance=[0.2])
    done.clear()
    finish(0, 100.0)
    finish(1, 400.0)
    assert ramp.cap == [[1]]


# Witnesses (loan_ramp_evidence): B's own jobs, started on its quota, score its predictions.
# B (quota 1) runs b0 (predicted to fit 5 min, runs 20000 s); b1, b2 wait, also predicted to
# fit 5 min and running 5000 s. A's 2 GPUs are idle until a0 arrives at 50000 s.
def _witness_rows() -> list[tuple]:
    return [("b0", "B", 0.0, 20000.0, 1), ("b1", "B", 10.0, 5000.0, 1),
            ("b2", "B", 10.0, 5000.0, 1), ("a0", "A", 50000.0, 10.0, 1)]


def test_with_loans_evidence_only_loans_score_the_pool():
    # evidence "loans": b0's overrun on B's own quota is not seen; b1 is lent at 10 (cap 1),
    # overruns at 310, and b2 waits for it (b1 ends at 5010)
    got, facts = starts(_witness_rows(), {"A": 2, "B": 1}, loan_ramp=1,
                        loan_ramp_evidence="loans")
    assert (got["b1"], got["b2"]) == (10.0, 5010.0)
    assert facts["loan_ramp"]["witnessed"] == 0


def test_a_witnessed_overrun_holds_the_pool_back_until_it_ends():
    # evidence "misses": b0 was predicted to fit 5 min; at 300 s it is still running, a miss
    # that counts against B's cap of 1 until b0 ends at 20000. b1 is lent at 10 (before the
    # miss is known), overruns too; b2 is not lent when b1 ends (b0 still holds the cap) and
    # starts on B's own quota when b0 ends at 20000. Witnessed: b0, b2 (both overrun) and a0
    got, facts = starts(_witness_rows(), {"A": 2, "B": 1}, loan_ramp=1,
                        loan_ramp_evidence="misses")
    assert got["b1"] == 10.0 and got["b2"] == 20000.0
    assert facts["loan_ramp"]["witnessed"] == 3 and facts["loan_ramp"]["witness_missed"] == 2


def test_a_witness_counts_only_from_its_miss_and_until_its_end():
    ramp = LoanRamp(1, evidence="misses")
    ramp.reset(1, 1)
    ramp.witness(3, 0, 0, 0.0, 300.0)
    assert not ramp.full(0, 0)  # it holds no lent GPU before its miss
    ramp.update(301.0, [0], lambda p: np.array([], dtype=np.int64), np.array([0.0] * 4))
    assert ramp.full(0, 0) and ramp.stats["witness_missed"] == 1
    ramp.update(900.0, [1], lambda p: np.array([3]), np.array([0, 0, 0, 900.0]))
    assert not ramp.full(0, 0) and ramp.count == [[0]] and ramp.stats["missed"] == 0


@pytest.mark.parametrize("evidence,cap", [("misses", 1), ("all", 2)])
def test_a_witnessed_fit_proves_the_pool_only_under_all(evidence, cap):
    ramp = LoanRamp(1, evidence=evidence)
    ramp.reset(1, 1)
    ramp.witness(0, 0, 0, 0.0, 300.0)
    ramp.update(200.0, [1], lambda p: np.array([0]), np.array([200.0]))
    assert ramp.cap == [[cap]] and ramp.count == [[0]]


def test_loans_evidence_witnesses_nothing_and_bad_evidence_is_an_error():
    ramp = LoanRamp(1)
    ramp.reset(1, 1)
    ramp.witness(0, 0, 0, 0.0, 300.0)
    assert ramp.open == [{}]
    with pytest.raises(ConfigError, match="loan_ramp_evidence"):
        LoanRamp(1, evidence="some")


def test_a_cold_pool_lends_only_after_its_own_jobs_fit():
    # warmup 1: B has no fit yet, so b1 is not lent at 10 although A is idle; b0 (witnessed,
    # 20000 s) never fits, so B stays cold and b1, b2 run on B's own quota one after another
    got, facts = starts(_witness_rows(), {"A": 2, "B": 1}, loan_ramp=1,
                        loan_ramp_evidence="misses", loan_ramp_warmup=1)
    assert (got["b1"], got["b2"]) == (20000.0, 25000.0)
    assert facts["loan_ramp"]["held_back"] > 0
    # a first job that fits warms it: b0 runs 100 s; at its end b1 takes B's quota and bx is
    # lent on A's idle GPUs at once
    rows = [("b0", "B", 0.0, 100.0, 1), ("b1", "B", 10.0, 5000.0, 1),
            ("bx", "B", 10.0, 5000.0, 1), ("a0", "A", 50000.0, 10.0, 1)]
    got, _ = starts(rows, {"A": 2, "B": 1}, loan_ramp=1, loan_ramp_evidence="misses",
                    loan_ramp_warmup=1)
    assert (got["b1"], got["bx"]) == (100.0, 100.0)


def test_a_fit_warms_its_window_and_the_later_ones():
    ramp = LoanRamp(1, evidence="misses", warmup=1)
    ramp.reset(1, 3)
    assert ramp.full(0, 0) and ramp.full(0, 2)
    ramp.witness(0, 0, 1, 0.0, 3600.0)
    ramp.update(100.0, [1], lambda p: np.array([0]), np.array([100.0]))
    assert ramp.full(0, 0) and not ramp.full(0, 1) and not ramp.full(0, 2)


@pytest.mark.parametrize("bad", [-1, 1.5, True])
def test_the_warmup_is_a_whole_number_and_needs_witnesses(bad):
    with pytest.raises(ConfigError, match="loan_ramp_warmup"):
        LoanRamp(1, evidence="misses", warmup=bad)
    with pytest.raises(ConfigError, match="needs loan_ramp_evidence"):
        LoanRamp(1, warmup=1)


# loan_ramp_witness: what a witnessed job's miss does. One pool, one window of 300 s; job 0 is
# witnessed at 0 (deadline 300) and still running at 301: a miss.
def _witness_miss(rule: str, tolerance=None, fits: int = 0) -> LoanRamp:
    ramp = LoanRamp(1, evidence="misses", witness=rule)
    ramp.reset(1, 1, tolerance)
    ramp.cap = [[8]]  # a pool with proven loans
    done = np.arange(fits + 1, fits + 1 + fits)  # earlier witnesses that fit
    for i, j in enumerate(done.tolist()):
        ramp.witness(j, 0, 0, float(i), float(i) + 300.0)
    dur = np.full(2 * fits + 2, 100.0)
    ramp.update(150.0, [fits], lambda p: done, dur)  # each ended after 100 s: fits
    ramp.witness(0, 0, 0, 0.0, 300.0)
    ramp.update(301.0, [fits], lambda p: done, dur)
    return ramp


def test_hold_a_witnessed_miss_resets_the_cap_and_holds_it():
    ramp = _witness_miss("hold")
    assert ramp.cap == [[1]] and ramp.count == [[1]] and ramp.full(0, 0)


def test_reset_a_witnessed_miss_resets_the_cap_and_holds_nothing():
    ramp = _witness_miss("reset")
    assert ramp.cap == [[1]] and ramp.count == [[0]] and not ramp.full(0, 0)
    # when the witness ends, nothing is released twice
    ramp.update(900.0, [1], lambda p: np.array([0]), np.array([900.0]))
    assert ramp.count == [[0]]


def test_tolerate_a_miss_within_eps_of_the_last_witnesses_changes_nothing():
    # eps 0.2 of 20 witnessed outcomes: up to 4 misses are what the lending rule accepted
    ramp = _witness_miss("tolerate", tolerance=[0.2], fits=5)
    assert ramp.cap == [[8]] and ramp.count == [[0]]
    assert list(ramp.witnessed[0][0]) == [0] * 5 + [1]


def test_tolerate_misses_beyond_eps_hold_the_pool_like_hold():
    # eps 0: every miss is beyond what the lending rule accepted
    ramp = _witness_miss("tolerate", tolerance=[0.0])
    assert ramp.cap == [[1]] and ramp.count == [[1]] and ramp.full(0, 0)
    ramp.update(900.0, [1], lambda p: np.array([0]), np.array([900.0]))  # it ends: released
    assert ramp.count == [[0]] and not ramp.full(0, 0)


def test_a_burst_of_witnessed_misses_stops_a_tolerant_pool():
    # eps 0.2: the 5th miss among 20 is beyond 4, so the pool is held from then on
    ramp = LoanRamp(1, evidence="misses", witness="tolerate")
    ramp.reset(1, 1, [0.2])
    ramp.cap = [[8]]
    for j in range(6):
        ramp.witness(j, 0, 0, 0.0, 300.0)
    ramp.update(301.0, [0], lambda p: np.array([], dtype=np.int64), np.zeros(6))
    assert ramp.stats["witness_missed"] == 6
    assert ramp.cap == [[1]] and ramp.count == [[2]]  # the 5th and 6th misses hold


def test_the_witness_rule_is_checked():
    with pytest.raises(ConfigError, match="loan_ramp_witness"):
        LoanRamp(1, evidence="misses", witness="forgive")
    with pytest.raises(ConfigError, match="loan_ramp_witness"):
        SiaPolicy(_ShortBins(), loan_ramp_witness="forgive", risk=None)


@settings(max_examples=60, deadline=None)
@given(durs=st.lists(st.floats(10.0, 2000.0), min_size=1, max_size=30),
       eps=st.sampled_from([0.0, 0.05, 0.2, 0.5]))
def test_tolerate_never_holds_a_pool_more_than_hold(durs, eps):
    # the same witnessed jobs (one started every 100 s, deadline 300 s after it) under both
    # rules: tolerate's cap is never lower and its count never higher, at every step
    rules = {r: LoanRamp(1, evidence="misses", witness=r) for r in ("hold", "tolerate")}
    for ramp in rules.values():
        ramp.reset(1, 1, [eps])
        ramp.cap = [[8]]
    dur = np.asarray(durs)
    ends = [(100.0 * j + d, j) for j, d in enumerate(durs)]
    for step in range(len(durs) + 25):
        now = 100.0 * step
        done = np.asarray([j for e, j in sorted(ends) if e <= now], dtype=np.int64)
        for ramp in rules.values():
            if step < len(durs):
                ramp.witness(step, 0, 0, now, now + 300.0)
            ramp.update(now + 1.0, [len(done)], lambda p, done=done: done, dur)
        hold, tol = rules["hold"], rules["tolerate"]
        assert tol.cap[0][0] >= hold.cap[0][0] and tol.count[0][0] <= hold.count[0][0]
    assert all(r.count == [[0]] for r in rules.values())  # every witness ended: none held


# loan_ramp_wake_days: a job after a silence of D days makes its pool cold again.
DAY = 86400.0


def _wake_rows(gap_days: float) -> list[tuple]:
    # B's first jobs (t = 0) fit; after a silence, b0 holds B's quota for 20000 s and b1, b2
    # (predicted 5 minutes) run 5000 s; A (2 GPUs) idle until long after
    t = gap_days * DAY
    return [("e0", "B", 0.0, 100.0, 1), ("b0", "B", t, 20000.0, 1),
            ("b1", "B", t + 10.0, 5000.0, 1), ("b2", "B", t + 10.0, 5000.0, 1),
            ("a0", "A", t + 50000.0, 10.0, 1)]


def test_a_pool_waking_from_a_long_silence_lends_only_after_its_own_jobs_fit():
    t = 2.0 * DAY
    # off: b1 is the ramp's probe loan at once, and overruns
    got, facts = starts(_wake_rows(2.0), {"A": 2, "B": 1}, loan_ramp=1,
                        loan_ramp_evidence="misses")
    assert got["b1"] == t + 10.0 and "woke" not in facts["loan_ramp"]
    # 1 day: b0 arrives after 2 days of silence, B is cold; b0 never fits 5 minutes, so b1
    # and b2 wait for B's own GPU (after b0, then after b1)
    got, facts = starts(_wake_rows(2.0), {"A": 2, "B": 1}, loan_ramp=1,
                        loan_ramp_evidence="misses", loan_ramp_wake_days=1.0)
    assert (got["b1"], got["b2"]) == (t + 20000.0, t + 25000.0)
    assert facts["loan_ramp"]["woke"] == 1
    # a silence shorter than D changes nothing: the same probe loan as off
    got, facts = starts(_wake_rows(2.0), {"A": 2, "B": 1}, loan_ramp=1,
                        loan_ramp_evidence="misses", loan_ramp_wake_days=3.0)
    assert got["b1"] == t + 10.0 and facts["loan_ramp"]["woke"] == 0


def test_a_woken_pool_warms_again_with_its_first_fit():
    # after the silence b0 fits (100 s): B is warm again and bx is lent at b0's end
    t = 2.0 * DAY
    rows = [("e0", "B", 0.0, 100.0, 1), ("b0", "B", t, 100.0, 1),
            ("b1", "B", t + 10.0, 5000.0, 1), ("bx", "B", t + 10.0, 5000.0, 1),
            ("a0", "A", t + 50000.0, 10.0, 1)]
    got, _ = starts(rows, {"A": 2, "B": 1}, loan_ramp=1, loan_ramp_evidence="misses",
                    loan_ramp_wake_days=1.0)
    assert (got["b1"], got["bx"]) == (t + 100.0, t + 100.0)


def test_the_prior_history_counts_and_an_unknown_past_wakes_nothing():
    ramp = LoanRamp(2, evidence="misses", wake_days=1.0)
    ramp.reset(2, 2, last_submit=[0.0, float("nan")])
    ramp.cap = [[8, 8], [8, 8]]
    ramp.arrived(1, 5.0 * DAY)  # pool 1: no known past, its first job wakes nothing
    assert not ramp.full(1, 0) and ramp.cap[1] == [8, 8]
    ramp.arrived(0, 0.5 * DAY)  # pool 0: half a day after its prior's last job: warm
    assert not ramp.full(0, 1)
    ramp.arrived(0, 1.5 * DAY)  # exactly one day of silence: cold in every window, cap reset
    assert ramp.full(0, 0) and ramp.full(0, 1) and ramp.cap[0] == [2, 2]
    assert ramp.stats["woke"] == 1
    ramp.witness(7, 0, 1, 1.5 * DAY, 1.5 * DAY + 3600.0)  # a witness that fits window 1
    ramp.update(1.5 * DAY + 60.0, [1, 0], lambda p: np.array([7]), np.zeros(8) + 60.0)
    assert ramp.full(0, 0) and not ramp.full(0, 1)


@pytest.mark.parametrize("bad", [0, -1.0, float("inf"), "1", True])
def test_the_wake_is_a_positive_number_of_days_and_needs_witnesses(bad):
    with pytest.raises(ConfigError, match="loan_ramp_wake_days"):
        LoanRamp(1, evidence="misses", wake_days=bad)
    with pytest.raises(ConfigError, match="needs loan_ramp_evidence"):
        LoanRamp(1, wake_days=1.0)


def _wake_replay(rows, **options):
    pol = SiaPolicy(_ShortBins(), refresh_s=0, adaptation=False, windows_s=(300.0,), loan_ramp=1,
                    loan_ramp_evidence="misses", **options, risk=None)
    res = simulate(table(rows), make_pools({"A": 2, "B": 1}), pol, check_invariants=True)
    return dict(zip(res["job_id"], res["start_time"], strict=True)), pol.stats


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(gaps=st.lists(st.floats(0.0, 3.0), min_size=1, max_size=8),
       durs=st.lists(st.floats(10.0, 20000.0), min_size=8, max_size=8))
def test_wake_ups_only_withhold_loans(gaps, durs):
    # B's jobs come after random silences: wake-ups never add a loan, and a wake longer than
    # every silence changes no start
    t, rows = 0.0, []
    for i, g in enumerate(gaps):
        t += g * DAY
        rows.append((f"b{i}", "B", t, durs[i], 1))
    rows.append(("a0", "A", t + 30000.0, 10.0, 1))
    off, off_stats = _wake_replay(rows)
    _, on_stats = _wake_replay(rows, loan_ramp_wake_days=1.0)
    assert on_stats["opportunistic"] <= off_stats["opportunistic"]
    never, _ = _wake_replay(rows, loan_ramp_wake_days=4.0)
    assert never == off



def test_a_job_that_ran_past_its_window_warms_the_first_later_window_it_fit():
    # windows 5 min, 1 h, 12 h; a woken pool's witness predicted to fit 5 minutes runs 30
    # minutes: a miss of 5 minutes, a fit of 1 h and 12 h; one running 13 h warms nothing
    ramp = LoanRamp(1, evidence="misses", wake_days=1.0)
    ramp.reset(2, 3, last_submit=[0.0, 0.0], windows=(300.0, 3600.0, 43200.0))
    t = 2.0 * DAY
    ramp.arrived(0, t)
    ramp.arrived(1, t)
    assert all(ramp.full(p, k) for p in (0, 1) for k in range(3))
    ramp.witness(3, 0, 0, t, t + 300.0)
    ramp.witness(4, 1, 0, t, t + 300.0)
    dur = np.zeros(5)
    dur[3], dur[4] = 1800.0, 13 * 3600.0
    ramp.update(t + 1800.0, [1, 0], lambda p: np.array([3]), dur)
    assert ramp.full(0, 0) and not ramp.full(0, 1) and not ramp.full(0, 2)
    ramp.update(t + 13 * 3600.0, [1, 1], lambda p: np.array([3] if p == 0 else [4]), dur)
    assert all(ramp.full(1, k) for k in range(3))
    # without the windows (reset's default) an overrun warms nothing, as before
    ramp.reset(1, 3, last_submit=[0.0])
    ramp.arrived(0, t)
    ramp.witness(3, 0, 0, t, t + 300.0)
    ramp.update(t + 1800.0, [1], lambda p: np.array([3]), dur)
    assert all(ramp.full(0, k) for k in range(3))


@pytest.mark.parametrize("until", ["fit", "quiet"])
def test_a_woken_pool_with_no_evidence_is_warm_after_a_quiet_largest_window(until):
    W = (300.0, 3600.0, 43200.0)
    ramp = LoanRamp(1, evidence="misses", wake_days=1.0, wake_until=until)
    ramp.reset(2, 3, last_submit=[0.0, 0.0], windows=W)
    t = 2.0 * DAY
    ramp.arrived(0, t)
    ramp.arrived(1, t)
    # pool 1's new job was predicted to fit 5 minutes and is still running at 5 min + 1 s
    ramp.witness(4, 1, 0, t, t + 300.0)
    ramp.update(t + 301.0, [0, 0], lambda p: np.array([], dtype=int), np.zeros(5))
    ramp.update(t + 43199.0, [0, 0], lambda p: np.array([], dtype=int), np.zeros(5))
    assert all(ramp.full(p, k) for p in (0, 1) for k in range(3))  # cold before 12 h
    ramp.update(t + 43200.0, [0, 0], lambda p: np.array([], dtype=int), np.zeros(5))
    # after 12 h: pool 0 gave no evidence either way, pool 1's job ran past its window
    assert [ramp.full(0, k) for k in range(3)] == [until == "fit"] * 3
    assert all(ramp.full(1, k) for k in range(3))
    ramp.arrived(0, t + 5.0 * DAY)  # a new silence: cold again, the quiet counted anew
    ramp.update(t + 5.0 * DAY + 60.0, [0, 0], lambda p: np.array([], dtype=int), np.zeros(5))
    assert all(ramp.full(0, k) for k in range(3))


def test_the_wake_until_is_fit_or_quiet():
    with pytest.raises(ConfigError, match="loan_ramp_wake_until must be one of"):
        LoanRamp(1, evidence="misses", wake_days=1.0, wake_until="never")


def test_quiet_warms_only_woken_pools_not_the_warmup():
    ramp = LoanRamp(1, evidence="misses", warmup=1, wake_until="quiet")
    ramp.reset(1, 1, windows=(300.0,))
    ramp.update(10 * DAY, [0], lambda p: np.array([], dtype=int), np.zeros(1))
    assert ramp.full(0, 0)  # never woke: the cold start still needs a fit


class _TrueBins(PerfectForecaster):
    """Perfect arrivals, load and duration bins, taken as predictions (the ramp is on)."""

    perfect_information = False


@pytest.mark.parametrize("options, start", [
    ({}, 10.0),  # no wake-up: b1 is lent at once
    ({"loan_ramp_wake_days": 1.0}, 20000.0),  # fit: cold until b0 frees B's quota for b1
    ({"loan_ramp_wake_days": 1.0, "loan_ramp_wake_until": "quiet"}, 300.0),  # one quiet window
])
def test_a_woken_pool_whose_quota_a_long_job_holds_lends_after_a_quiet_window(options, start):
    # B wakes at t with b0 (20000 s, predicted long: no evidence either way) on its only GPU;
    # b1 (100 s, predicted to fit 5 minutes) waits; A's 2 GPUs are idle until t + 50000
    t = 2.0 * DAY
    rows = [("e0", "B", 0.0, 100.0, 1), ("b0", "B", t, 20000.0, 1), ("b1", "B", t + 10.0, 100.0, 1),
            ("a0", "A", t + 50000.0, 10.0, 1)]
    pol = SiaPolicy(_TrueBins(), refresh_s=0, adaptation=False, windows_s=(300.0,), loan_ramp=1,
                    loan_ramp_evidence="misses", **options, risk=None)
    res = simulate(table(rows), make_pools({"A": 2, "B": 1}), pol, check_invariants=True)
    got = dict(zip(res["job_id"], res["start_time"], strict=True))
    assert got["b1"] == t + start
