"""Per-pool online calibration (models/calibration.py): hand-built pools and properties."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError, SiaError
from sia.data.schema import make_pools, validate
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.calibration import (
    PoolCalibration,
    conformal_upper,
    recall_threshold,
)
from sia.models.forecaster import LearnedForecaster
from sia.models.rings import RingBank
from sia.models.will_arrive import WillJobsArrive
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.sia.policy import SiaPolicy

from .conftest import CalView, cal_trace

H = 3600.0


# ---------------------------------------------------------------------------- the two quantiles
def test_conformal_upper_by_hand():
    s = [float(x) for x in range(1, 10)]  # 1..9, n = 9
    assert conformal_upper(s, 0.1) == 9.0  # rank ceil(10 * 0.9) = 9
    assert conformal_upper(s, 0.2) == 8.0  # rank ceil(10 * 0.8) = 8
    assert conformal_upper(s, 0.5) == 5.0  # rank ceil(10 * 0.5) = 5
    assert conformal_upper(s[:5], 0.1) == math.inf  # rank ceil(6 * 0.9) = 6 > 5: too few
    assert conformal_upper([], 0.5) == math.inf


def test_recall_threshold_by_hand():
    p = [0.9, 0.1, 0.5, 0.3, 0.7, 0.2, 0.8, 0.4, 0.6]  # n = 9
    assert recall_threshold(p, 0.1) == 0.1  # rank floor(0.1 * 10) = 1: the smallest
    assert recall_threshold(p, 0.3) == 0.3  # rank 3
    assert recall_threshold(p, 0.05) == 0.0  # rank 0: too few positives, every window is "yes"
    assert recall_threshold([], 0.5) == 0.0


scores = st.lists(st.floats(-1e6, 1e6, allow_nan=False), min_size=1, max_size=60)
alphas = st.floats(0.01, 0.99)
probs = st.lists(st.floats(0.0, 1.0), min_size=1, max_size=60)


@settings(max_examples=200, deadline=None)
@given(scores, alphas)
def test_leave_one_out_coverage_holds_for_any_data(s, alpha):
    """Exchangeability's guarantee, deterministically: of n + 1 scores, each bounded by the
    other n, at least (1 - alpha)(n + 1) are covered (so a random one is with prob >= 1 - alpha)."""
    n1 = len(s)
    covered = sum(s[i] <= conformal_upper(s[:i] + s[i + 1:], alpha) for i in range(n1))
    assert covered >= (1 - alpha) * n1 - 1e-9

@settings(max_examples=200, deadline=None)
@given(probs, alphas)
def test_leave_one_out_recall_holds_for_any_probabilities(p, alpha):
    n1 = len(p)
    kept = sum(p[i] >= recall_threshold(p[:i] + p[i + 1:], alpha) for i in range(n1))
    assert kept >= (1 - alpha) * n1 - 1e-9


@settings(max_examples=200, deadline=None)
@given(scores, probs, alphas, alphas)
def test_monotone_in_the_risk_level(s, p, a, b):
    lo, hi = min(a, b), max(a, b)
    assert conformal_upper(s, lo) >= conformal_upper(s, hi)  # a smaller miss rate: wider
    assert recall_threshold(p, lo) <= recall_threshold(p, hi)  # ... and a lower threshold


def test_coverage_on_exchangeable_data_is_near_its_level():
    rng = np.random.default_rng(0)
    for alpha in (0.05, 0.1, 0.3):
        hits = 0
        for _ in range(2000):
            x = rng.exponential(size=21)
            hits += x[20] <= conformal_upper(x[:20], alpha)
        # exact: ceil(21 (1 - alpha)) / 21 = 0.952 / 0.905 / 0.714
        want = math.ceil(21 * (1 - alpha)) / 21
        assert abs(hits / 2000 - want) < 0.03


# ---------------------------------------------------------------------------- hand-built pools
def test_a_pool_whose_arrivals_turn_bursty_widens_its_load_bound():
    # pool a: one 1-GPU job every 5 minutes for a day (the sliding max always equals the next
    # window's load: score 0), then one 10-GPU job every 30 minutes for a day (a 5-minute window
    # that sees one follows three empty ones: score 10 - 0 = 10)
    steady = [(300.0 * i + 1.0, 0, 1) for i in range(288)]
    bursty = [(86400.0 + 1800.0 * i + 1.0, 0, 10) for i in range(48)]
    trace = cal_trace(steady + bursty)
    cal = PoolCalibration((300.0,), alpha=0.1, memory=40)
    cal.reset(trace.pool_names, 0.0)
    zero = np.zeros((2, 1))
    before = cal.load_bound(CalView(trace, 86400.0), zero)
    assert before[0, 0] == 0.0  # calibrated: the sliding max was never exceeded
    assert before[1, 0] == math.inf  # pool b never saw a job: cold
    after = cal.load_bound(CalView(trace, 2 * 86400.0), zero)
    assert after[0, 0] == 10.0  # the bursts' scores pushed the steady ones out: widened
    # point in time: at 1 day + 20 min only the burst at 1 day + 1 s was scored
    cal.reset(trace.pool_names, 0.0)
    early = cal.load_bound(CalView(trace, 86400.0 + 1200.0), zero)
    assert early[0, 0] == 0.0


def test_the_precision_tracker_sees_a_pool_go_quiet():
    # pool a: a job every 5 minutes for 10 hours, then nothing; the model says 0.9 throughout
    trace = cal_trace([(300.0 * i + 1.0, 0, 1) for i in range(120)])
    cal = PoolCalibration((300.0,), alpha=0.1, memory=50)
    cal.reset(trace.pool_names, 0.0)
    proba = np.array([[0.9], [0.9]])
    for t in np.arange(0.0, 10 * H, 300.0):
        yes = cal.arrivals(CalView(trace, t), proba)
    assert yes[0, 0]
    assert cal.precision()[0, 0] == 1.0
    assert cal.thresholds()[0, 0] == 0.9  # warm: its positives all had 0.9
    for t in np.arange(10 * H, 20 * H, 300.0):
        cal.arrivals(CalView(trace, t), proba)
    assert cal.precision()[0, 0] < 0.1  # the last 50 "yes" windows saw (almost) nothing
    assert cal.recall()[0, 0] == 1.0


def test_a_pool_with_two_events_stays_cold():
    # pool b: two jobs in two days; pool a: busy
    busy = [(300.0 * i + 1.0, 0, 1) for i in range(576)]
    trace = cal_trace(busy + [(1000.0, 1, 2), (90000.0, 1, 2)])
    cal = PoolCalibration((300.0, 3600.0), alpha=0.1, memory=288)
    cal.reset(trace.pool_names, 0.0)
    proba = np.array([[0.9, 0.9], [0.0, 0.0]])  # the model never expects pool b's jobs
    for t in np.arange(0.0, 2 * 86400.0, 300.0):
        yes = cal.arrivals(CalView(trace, t), proba)
    bound = cal.load_bound(CalView(trace, 2 * 86400.0), np.zeros((2, 2)))
    # two positives: no threshold can be trusted -> every window "yes"; two 5-minute scores:
    # no finite bound -> the pool's whole unused quota stays reserved
    assert yes[1].tolist() == [True, True]
    assert bound[1, 0] == math.inf
    # its 1-hour window saw 2 x 12 records with an arrival: warm there, the bound covers a job
    assert bound[1, 1] == 2.0
    assert np.isfinite(bound[0]).all()


def test_prior_jobs_calibrate_the_load_before_the_replay_starts():
    prior_sub = np.array([300.0 * i + 1.0 for i in range(288)])
    cal = PoolCalibration((300.0,), alpha=0.1, memory=288, prior_days=1.0)
    cal.prime(prior_sub, np.ones(288), ["a"] * 288)
    trace = cal_trace([(86400.0 + 1.0, 0, 1)])
    cal.reset(trace.pool_names, 86400.0 + 1.0)
    bound = cal.load_bound(CalView(trace, 86400.0 + 1.0), np.zeros((2, 1)))
    assert bound[0, 0] == 0.0  # warm from the day before
    assert bound[1, 0] == math.inf
    # only the days asked for: none
    cal = PoolCalibration((300.0,), prior_days=0.0)
    cal.prime(prior_sub, np.ones(288), ["a"] * 288)
    cal.reset(trace.pool_names, 86400.0 + 1.0)
    assert cal.load_bound(CalView(trace, 86400.0 + 1.0), np.zeros((2, 1)))[0, 0] == math.inf


@pytest.mark.parametrize("opts", [dict(alpha=0.0), dict(alpha=1.0), dict(memory=1),
                                  dict(prior_days=-1.0)])
def test_bad_options_name_themselves(opts):
    with pytest.raises(ConfigError, match="calibration_"):
        PoolCalibration((300.0,), **opts)


@pytest.mark.parametrize("bad", [0, -1, 2.5, True])
def test_a_sliding_max_of_no_windows_is_named(bad):
    # the load score subtracts the largest of n_windows windows: none is not a score
    with pytest.raises(ConfigError, match="n_windows"):
        PoolCalibration((300.0,), n_windows=bad)


# ---------------------------------------------------------------------------- wired into SIA
class _Never:
    """A stand-in classifier: P(arrival) = 0 everywhere (no training needed)."""

    def set_param(self, params):
        pass

    def inplace_predict(self, x, **kwargs):
        return np.zeros(len(x))


def _sia(calibration):
    models = {k: WillJobsArrive.from_booster(k, _Never(), 0.5, list(FEATURE_COLUMNS))
              for k in (5, 60, 720)}
    fc = LearnedForecaster(models, duration_config={"fallback_bin": 0})  # every job <= 5 min
    return SiaPolicy(fc, calibration=calibration, loan_ramp=None, risk=None)


def test_a_cold_pool_lends_nothing_under_calibration():
    # pool a (4 GPUs) submits two 4-GPU jobs of 2 minutes; pool b (4 GPUs) never submits.
    jobs = validate(pl.DataFrame({"job_id": ["j1", "j2"], "pool": ["a", "a"],
                                  "submit_time": [0.0, 0.0], "duration": [120.0, 120.0],
                                  "num_gpus": [4, 4]}))[0]
    pools = make_pools({"a": 4, "b": 4})
    plain = simulate(jobs, pools, _sia(False)).sort("job_id")
    # the model says "no arrival" in b: j2 borrows b's idle GPUs at once
    assert plain["start_time"].to_list() == [0.0, 0.0]
    policy = _sia(True)
    cal = simulate(jobs, pools, policy).sort("job_id")
    # calibrated, b is cold (no history): its unused quota stays reserved, j2 waits for j1
    assert cal["start_time"].to_list() == [0.0, 120.0]
    report = policy.facts()["calibration"]
    assert report["pools"]["b"]["5m"]["load_offset_gpus"] is None  # infinite: cold
    assert report["pools"]["b"]["5m"]["threshold"] == 0.0


def test_the_policy_checks_the_calibration_option():
    with pytest.raises(ConfigError, match="calibration"):
        _sia("sometimes")


def test_the_report_becomes_finite_mlflow_metrics_per_pool():
    from sia.pipelines.engine.tracking import calibration_metrics

    trace = cal_trace([(300.0 * i + 1.0, 0, 1) for i in range(288)])
    cal = PoolCalibration((300.0,), alpha=0.1, memory=50)
    cal.reset(trace.pool_names, 0.0)
    cal.arrivals(CalView(trace, 0.0), np.array([[0.5], [0.5]]))
    cal.load_bound(CalView(trace, 86400.0), np.zeros((2, 1)))
    report = cal.report(trace.pool_names)
    assert (report["from_day"], report["to_day"]) == (0.0, 1.0)
    m = calibration_metrics(report)
    assert m["calib/a/load_offset_gpus_5m"] == 0.0
    assert m["calib/a/load_scores_5m"] == 50
    assert "calib/b/load_offset_gpus_5m" not in m  # infinite (cold): not a metric
    assert m["calib/to_day"] == 1.0
    assert calibration_metrics(None) == {}


def test_a_cold_pool_may_keep_the_uncalibrated_answers_instead():
    busy = [(300.0 * i + 1.0, 0, 1) for i in range(576)]
    trace = cal_trace(busy + [(1000.0, 1, 2), (90000.0, 1, 2)])
    cal = PoolCalibration((300.0,), alpha=0.1, memory=288, cold="registered")
    cal.reset(trace.pool_names, 0.0)
    proba = np.array([[0.9], [0.3]])
    for t in np.arange(0.0, 2 * 86400.0, 300.0):
        yes = cal.arrivals(CalView(trace, t), proba, np.array([0.5]))
    base = np.array([[1.0], [0.0]])
    bound = cal.load_bound(CalView(trace, 2 * 86400.0), base)
    assert yes[:, 0].tolist() == [True, False]  # b is cold: the registered 0.5 says "no" to 0.3
    assert bound[1, 0] == 0.0  # b is cold: its sliding max, not +inf
    assert bound[0, 0] == 1.0  # a is warm: calibrated (score 0 over its sliding max)
    with pytest.raises(ConfigError, match="calibration_cold"):
        PoolCalibration((300.0,), cold="never")


@settings(max_examples=200, deadline=None)
@given(values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), max_size=60),
       maxlen=st.integers(2, 12), alpha=st.floats(0.01, 0.99), n_rings=st.integers(1, 3))
def test_the_ring_bank_answers_as_the_conformal_functions_on_its_last_values(values, maxlen,
                                                                             alpha, n_rings):
    # values dealt to the rings in turn (repeats and -0.0 included by hypothesis): each ring
    # keeps its last maxlen values in order and sorted, and its order statistics are the
    # conformal functions' on them
    bank = RingBank(n_rings, maxlen)
    for i, v in enumerate(values):
        r = i % n_rings
        bank.push(r, v)
        mine = values[r::n_rings][:i // n_rings + 1]
        last = mine[max(0, len(mine) - maxlen):]
        assert bank.values(r) == last and bank.sorted(r).tolist() == sorted(last)
        assert bank.count(r) == len(last)
        n = len(last)
        up = math.ceil((n + 1) * (1.0 - alpha) - 1e-12)
        lo = math.floor(alpha * (n + 1) + 1e-12)
        assert (bank.sorted(r)[up - 1] if up <= n else math.inf) == conformal_upper(last, alpha)
        assert (bank.sorted(r)[lo - 1] if lo >= 1 else 0.0) == recall_threshold(last, alpha)


def test_a_full_ring_drops_its_oldest_value_by_hand():
    bank = RingBank(1, 3)
    for v in (5.0, 1.0, 5.0, 3.0, 2.0):
        bank.push(0, v)
    assert bank.values(0) == [5.0, 3.0, 2.0]
    assert bank.sorted(0).tolist() == [2.0, 3.0, 5.0]


@settings(max_examples=40, deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])  # set before each use
@given(events=st.lists(st.tuples(st.integers(0, 2000).map(lambda x: x * 37.0),
                                 st.integers(0, 1), st.integers(1, 8)), min_size=1, max_size=40),
       steps=st.lists(st.integers(1, 40).map(lambda x: x * 300.0), min_size=1, max_size=12))
def test_scoring_point_by_point_gives_the_arrays_scores(monkeypatch, events, steps):
    # _score_load computes a call's few records in Python floats, many with arrays: the same
    # scores either way, whatever the calls' spacing (one record or dozens per window)
    import sia.models.calibration as calibration

    trace = cal_trace(events)
    rings = []
    for few in (0, 10_000):
        monkeypatch.setattr(calibration, "_FEW", few)
        cal = PoolCalibration((300.0, 3600.0), alpha=0.2, memory=30)
        cal.reset(trace.pool_names, 0.0)
        now = 0.0
        for dt in steps:
            now += dt
            cal.load_bound(CalView(trace, now), np.zeros((2, 2)))
        rings.append([cal.recent(p, k)[0] for p in range(2) for k in range(2)])
    assert rings[0] == rings[1]


def test_the_floor_keeps_the_registered_load_where_the_calibrated_bound_is_lower():
    # pool a: a 4-GPU job every 15 minutes, a 1-GPU job in each 5-minute window between. The
    # sliding max of 3 windows (the registered answer, load_method "sliding_max") is always 4;
    # the next window holds 4 GPUs a third of the time and 1 otherwise, so two thirds of the
    # scores (next window's GPUs - sliding max) are -3 and the upper bound at miss rate 0.5 is
    # 4 - 3 = 1: below the registered 4. With ``floor`` the answer is never below the
    # registered one.
    events = [(900.0 * h + 1.0, 0, 4) for h in range(192)]
    events += [(300.0 * i + 2.0, 0, 1) for i in range(576) if i % 3]
    trace = cal_trace(events)
    models = {k: WillJobsArrive.from_booster(k, _Never(), 0.5, list(FEATURE_COLUMNS))
              for k in (5,)}
    now = 47 * 3600.0 + 450.0
    view = CalView(trace, now)
    answers = {}
    for floor in (False, True):
        fc = LearnedForecaster(models, duration_config={"fallback_bin": 0})
        fc.calibrate((300.0,), alpha=0.5, memory=288, floor=floor)
        answers[floor] = fc.new_load_estimate(view, (300.0,))
    plain = LearnedForecaster(models).new_load_estimate(view, (300.0,))
    assert plain[0, 0] == 4.0
    assert answers[False][0, 0] == 1.0  # the calibrated bound alone: 4 - 3
    assert answers[True][0, 0] == 4.0  # the floor: the registered answer
    assert answers[True][1, 0] == math.inf  # b is cold: the calibration reserves it either way


def test_the_floor_keeps_a_registered_yes_where_the_calibrated_threshold_says_no():
    # pool a submits a job every 5 minutes; for a day the model says P = 0.9 there, so the
    # calibrated threshold (recall over those positives) is 0.9. Then P falls to 0.55: the
    # registered threshold 0.5 still says "yes", the calibrated one "no". With ``floor`` the
    # answer stays "yes", and the registered answer is kept for SIA's adaptation.
    trace = cal_trace([(300.0 * i + 1.0, 0, 1) for i in range(600)])
    models = {5: WillJobsArrive.from_booster(5, _Never(), 0.5, list(FEATURE_COLUMNS))}
    answers = {}
    for floor in (False, True):
        fc = LearnedForecaster(models)
        fc.calibrate((300.0,), alpha=0.1, memory=288, floor=floor)
        fc.arrival_proba = lambda view, windows_s: np.array([[0.9], [0.9]])
        for t in np.arange(0.0, 86400.0, 300.0):
            fc.will_jobs_arrive(CalView(trace, t), (300.0,))
        fc.arrival_proba = lambda view, windows_s: np.array([[0.55], [0.55]])
        answers[floor] = fc.will_jobs_arrive(CalView(trace, 86400.0 + 300.0), (300.0,))
        if floor:
            assert fc.registered_arrive[:, 0].tolist() == [True, True]
    assert answers[False][0, 0] is np.False_  # calibrated alone: 0.55 < 0.9
    assert answers[True][0, 0] is np.True_  # the floor: the registered "yes"
    assert answers[False][1, 0] and answers[True][1, 0]  # b is cold: reserved either way


# ---------------------------------------------------------------------------- per-pool miss rates
REGISTERED = np.array([0.3, 0.6])  # the model's registered thresholds (cold="registered")


def _run(trace, alpha, pool_alpha, steps, proba, cold="reserve"):
    cal = PoolCalibration((300.0, 3600.0), alpha=alpha, memory=30, cold=cold)
    cal.reset(trace.pool_names, 0.0)
    cal.set_pool_alpha(pool_alpha)
    out, now = [], 0.0
    for dt in steps:
        now += dt
        view = CalView(trace, now)
        out.append((cal.arrivals(view, proba, REGISTERED).tolist(),
                    cal.load_bound(view, np.ones((2, 2))).tolist(),
                    cal.thresholds().tolist()))
    return out, cal


@settings(max_examples=40, deadline=None)
@given(events=st.lists(st.tuples(st.integers(0, 2000).map(lambda x: x * 37.0),
                                 st.integers(0, 1), st.integers(1, 8)), min_size=1, max_size=40),
       steps=st.lists(st.integers(1, 12).map(lambda x: x * 300.0), min_size=1, max_size=30),
       a=st.sampled_from([0.05, 0.2, 0.5, 0.75, 0.9]), b=st.sampled_from([0.1, 0.3, 0.6]),
       seed=st.integers(0, 100), cold=st.sampled_from(["reserve", "registered"]))
def test_a_pools_own_miss_rate_answers_as_a_calibration_at_that_rate(events, steps, a, b, seed,
                                                                     cold):
    # pool 0 at rate a and pool 1 at rate b answer, pool by pool, exactly as two calibrations
    # at one rate each (the rings do not depend on the rate; only the ranks read do), with
    # either answer of a cold pool (reserve: every window "yes", no load bound; registered:
    # the model's thresholds and the sliding max)
    trace = cal_trace(events)
    proba = np.random.default_rng(seed).random((2, 2))
    mixed, cal = _run(trace, 0.5, [a, b], steps, proba, cold)
    at_a, _ = _run(trace, a, None, steps, proba, cold)
    at_b, _ = _run(trace, b, None, steps, proba, cold)
    for m, ra, rb in zip(mixed, at_a, at_b, strict=True):
        for part in range(3):
            assert m[part][0] == ra[part][0] and m[part][1] == rb[part][1]
    assert cal.report(trace.pool_names)["pool_alpha"] == {"a": a, "b": b}


def test_a_smaller_miss_rate_reserves_more_by_hand():
    # pool a: one 1-GPU job every 5 minutes for 2 hours, then a 4-GPU job every 5 minutes for
    # an hour. A 5-minute score is the window's GPUs minus the max of the 3 windows before: 0 in
    # steady state, 4 - 1 = 3 in the first 4-GPU window, 0 after it. At memory 30, the last 30
    # scores at 3 h 5 min are 29 zeros and one 3: conformal_upper at 0.5 is the 16th smallest
    # (ceil(31 x 0.5)) = 0, at 0.05 the 30th (ceil(31 x 0.95)) = 3
    ev = [(300.0 * i + 1.0, 0, 1) for i in range(24)]
    ev += [(7200.0 + 300.0 * i + 1.0, 0, 4) for i in range(12)]
    trace = cal_trace(ev)
    cal = PoolCalibration((300.0,), alpha=0.5, memory=30)
    cal.reset(trace.pool_names, 0.0)
    view = CalView(trace, 3 * H + 300.0)
    base = np.zeros((2, 1))
    assert cal.load_bound(view, base)[0, 0] == 0.0
    cal.set_pool_alpha([0.05, 0.5])
    assert cal.load_bound(view, base)[0, 0] == 3.0
    cal.set_pool_alpha(None)
    assert cal.load_bound(view, base)[0, 0] == 0.0


@pytest.mark.parametrize("bad", [[0.0, 0.5], [0.5, 1.0], [float("nan"), 0.5]])
def test_bad_pool_miss_rates_are_named(bad):
    cal = PoolCalibration((300.0,), alpha=0.5)
    with pytest.raises(ValueError, match="per-pool miss rates must be in"):
        cal.set_pool_alpha(bad)


def test_the_learned_forecaster_passes_per_pool_rates_to_its_calibration():
    models = {k: WillJobsArrive.from_booster(k, _Never(), 0.5, list(FEATURE_COLUMNS))
              for k in (5, 60, 720)}
    fc = LearnedForecaster(models)
    with pytest.raises(SiaError, match="per-pool miss rates need a calibrated forecaster"):
        fc.set_pool_alpha([0.1, 0.2])
    fc.calibrate((300.0,), alpha=0.5)
    fc.set_pool_alpha([0.1, 0.2])
    assert fc.calibration._alpha_p == [0.1, 0.2]


def test_under_the_arrival_cost_a_replay_reports_each_pools_rate():
    # end to end with the learned forecaster: pool a runs a 4-GPU job for 2 days on its quota of
    # 4 (load 1: cost capped at 100, rate 3 / 103), pool b never submits (load 0: rate 3 / 4)
    models = {k: WillJobsArrive.from_booster(k, _Never(), 0.5, list(FEATURE_COLUMNS))
              for k in (5, 60, 720)}
    fc = LearnedForecaster(models, duration_config={"fallback_bin": 0})
    jobs = validate(pl.DataFrame({"job_id": ["long", "short"], "pool": ["a", "a"],
                                  "submit_time": [0.0, 90000.0],
                                  "duration": [2 * 86400.0, 60.0], "num_gpus": [4, 1]}))[0]
    policy = SiaPolicy(fc, loan_ramp=None, risk=3.0, risk_arrival_cost=True)
    simulate(jobs, make_pools({"a": 4, "b": 4}), policy)
    rates = policy.facts()["calibration"]["pool_alpha"]
    assert rates == {"a": pytest.approx(3.0 / 103.0, abs=1e-6), "b": 0.75}


def test_a_pool_cold_at_its_own_rate_keeps_the_registered_threshold_by_hand():
    # pool a submits every 5 minutes for an hour: 12 positives, all with P(arrival) 0.1. At the
    # calibration's rate 0.5 it is warm (threshold: the 6th smallest, floor(0.5 x 13) = 6: 0.1,
    # so "yes"); at its own rate 0.05 it is cold (floor(0.05 x 13) = 0 < 1) and, with
    # cold="registered", keeps the model's threshold 0.3: "no"
    trace = cal_trace([(300.0 * i + 1.0, 0, 1) for i in range(12)])
    cal = PoolCalibration((300.0,), alpha=0.5, memory=30, cold="registered")
    cal.reset(trace.pool_names, 0.0)
    proba, reg = np.array([[0.1], [0.1]]), np.array([0.3])
    for t in np.arange(0.0, 4200.0, 300.0):
        cal.arrivals(CalView(trace, t), proba, reg)
    view = CalView(trace, 4200.0)
    assert cal.arrivals(view, proba, reg)[0, 0]
    cal.set_pool_alpha([0.05, 0.5])
    assert not cal.arrivals(view, proba, reg)[0, 0]
    assert cal.thresholds()[0, 0] == 0.0  # cold at its own rate


def _persistence_sia(held: bool):
    models = {k: WillJobsArrive.from_booster(k, None, 0.5, list(FEATURE_COLUMNS))
              for k in (5, 60, 720)}
    for m in models.values():
        m.method_ = "persistence"
    fc = LearnedForecaster(models, duration_config={"fallback_bin": 0})  # every job <= 5 min
    return SiaPolicy(fc, calibration=True, calibration_alpha=0.5, loan_ramp=None, risk=None,
                     calibration_held=held)


def test_held_jobs_let_a_pool_whose_arrivals_were_held_lend_while_it_holds_none():
    """Pool b's one arrival (b1, at 1 h, 4 GPUs) was held in its queue from t = 0: persistence
    misses it. Calibrated at miss rate 1/2 that miss makes b's threshold 0 (a "yes" in every
    window) and its load bound 4 GPUs, so b reserves its quota from then on; ranked by its held
    jobs (calibration_held), the miss had the held rank, b's threshold is that rank, and at
    20,000 s, holding nothing, b lends its idle GPUs to a's short job (a is full with a
    10-hour one). Pool a's jobs pending before 1 h make SIA forecast (and record) every tick."""
    early = [(f"e{i:02d}", 300.0 * i, 60.0) for i in range(12)]
    rows = [("a0", 0.0, 7200.0), *early, ("a1", 19000.0, 36000.0), ("a2", 20000.0, 120.0)]
    jobs = validate(pl.DataFrame({
        "job_id": ["b1", *[r[0] for r in rows]], "pool": ["b"] + ["a"] * len(rows),
        "submit_time": [3600.0, *[r[1] for r in rows]],
        "duration": [60.0, *[r[2] for r in rows]], "num_gpus": [4] * (1 + len(rows)),
        "hold_time": [3600.0] + [0.0] * len(rows)}))[0]
    pools = make_pools({"a": 4, "b": 4})
    starts = {}
    for held in (False, True):
        policy = _persistence_sia(held)
        out = simulate(jobs, pools, policy)
        starts[held] = dict(zip(out["job_id"].to_list(), out["start_time"].to_list(),
                                strict=True))
        thr = policy.facts()["calibration"]["pools"]["b"]["5m"]["threshold"]
        assert thr == (0.25 if held else 0.0)
    assert starts[True]["a2"] == 20000.0  # lent b's idle GPUs
    assert starts[False]["a2"] == 19000.0 + 36000.0  # waited for a's own
    # without holds in the trace the option changes nothing
    plain = jobs.drop("hold_time")
    assert (simulate(plain, pools, _persistence_sia(True)).sort("job_id")["start_time"]
            .to_list() == simulate(plain, pools, _persistence_sia(False)).sort("job_id")
            ["start_time"].to_list())
