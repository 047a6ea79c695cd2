"""Perfect, random and learned forecasters asked through a probe policy during real replays."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from sia.data.synthetic import generate_workload
from sia.features.duration_history import point_in_time_history
from sia.features.live import LiveState, features_at
from sia.features.table9 import FEATURE_COLUMNS
from sia.models.forecaster import LearnedForecaster
from sia.models.will_arrive import WillJobsArrive
from sia.scheduler.core.forecast import (
    DEFAULT_WINDOWS_S,
    Forecaster,
    PerfectForecaster,
    RandomForecaster,
    duration_bin_of,
)
from sia.scheduler.core.simulator import simulate

WINDOWS = DEFAULT_WINDOWS_S


@pytest.fixture(scope="module")
def Probe(probe_policy):  # noqa: N802 - the class, under its old name
    """FCFS that also asks a forecaster at every decision and records what it saw."""
    return probe_policy


@pytest.fixture(scope="module")
def workload():
    jobs, pools = generate_workload("base", 3, days=2.0)
    # integer seconds (as in real traces) and a few repeated tags
    jobs = jobs.with_columns(pl.col("submit_time").round(0), pl.col("duration").round(0).clip(1),
                             (pl.lit("tag") + (pl.int_range(pl.len()) % 7).cast(pl.String))
                             .alias("tag"))
    return jobs.sort("submit_time", "job_id"), pools


def test_perfect_forecaster_is_perfect(workload, Probe):
    jobs, pools = workload
    f = PerfectForecaster()
    assert isinstance(f, Forecaster)

    def ask(view):
        tr = view.trace
        all_jobs = np.arange(tr.n_jobs)
        return (view.now, f.will_jobs_arrive(view, WINDOWS), f.new_load_estimate(view, WINDOWS),
                f.duration_bins(view, all_jobs), tr)

    probe = Probe(ask)
    simulate(jobs, pools, probe)
    assert len(probe.records) > 50
    for now, arrive, load, bins, tr in probe.records:
        for p in range(tr.n_pools):
            for i, w in enumerate(WINDOWS):
                mask = (tr.pool == p) & (tr.submit > now) & (tr.submit <= now + w)
                assert arrive[p, i] == mask.any()
                assert load[p, i] == tr.num_gpus[mask].sum()
        np.testing.assert_array_equal(bins, duration_bin_of(tr.duration))


def test_random_forecaster_is_seeded_and_fair(workload, Probe):
    jobs, pools = workload

    def run(seed):
        f = RandomForecaster(seed=seed)
        asked = iter(range(10**6))  # new jobs at each call (a job keeps its first draw)
        probe = Probe(lambda v: (f.will_jobs_arrive(v, WINDOWS),
                                 f.duration_bins(v, np.array([next(asked) for _ in range(5)])),
                                 f.new_load_estimate(v, WINDOWS)))
        simulate(jobs, pools, probe)
        return probe.records

    a, b, c = run(1), run(1), run(2)
    assert all(np.array_equal(x[0], y[0]) and np.array_equal(x[1], y[1]) for x, y in zip(a, b, strict=True))
    assert not all(np.array_equal(x[0], y[0]) for x, y in zip(a, c, strict=True))
    flips = np.concatenate([r[0].ravel() for r in a])
    assert 0.4 < flips.mean() < 0.6
    bins = np.concatenate([r[1] for r in a])
    assert set(np.unique(bins)) == {0, 1, 2, 3}
    assert all((r[2] >= 0).all() for r in a)


def test_a_random_bin_is_drawn_once_per_job():
    # asked again (SIA's veto asks the bin rule beside the budget's cdf), a job keeps its bin
    # and the stream is not spent: the next new job gets the draw it would have got
    from types import SimpleNamespace

    trace = SimpleNamespace()
    once, twice = RandomForecaster(seed=3), RandomForecaster(seed=3)
    view = SimpleNamespace(trace=trace)
    first = once.duration_bins(view, np.arange(40))
    np.testing.assert_array_equal(twice.duration_bins(view, np.arange(20)), first[:20])
    np.testing.assert_array_equal(twice.duration_bins(view, np.arange(10)), first[:10])
    np.testing.assert_array_equal(twice.duration_bins(view, np.arange(20, 40)), first[20:])
    # a new trace draws afresh
    other = twice.duration_bins(SimpleNamespace(trace=SimpleNamespace()), np.arange(3))
    assert other.shape == (3,)


class _Fixed:
    """A stand-in classifier: P(arrival) = a fixed function of the features (no training needed)."""

    def set_param(self, params):
        pass

    def inplace_predict(self, x, **kwargs):
        return (x[:, 0] + x[:, 6] > 0).astype(float)


def test_learned_features_equal_the_live_features(workload, Probe):
    jobs, pools = workload
    models = {k: WillJobsArrive.from_booster(k, _Fixed(), 0.5, list(FEATURE_COLUMNS))
              for k in (5, 60, 720)}
    f = LearnedForecaster(models)
    probe = Probe(lambda v: (v.now, f.features(v, (5, 60, 720)), f.will_jobs_arrive(v, WINDOWS)))
    result = simulate(jobs, pools, probe)
    schedule = jobs.join(result.select("job_id", "start_time", "end_time"), on="job_id")
    history = point_in_time_history(schedule)
    starts = set(schedule["start_time"].to_list())
    names = sorted(pools["pool"].to_list())
    checked = 0
    for now, feats, arrive in probe.records[::7]:  # a sample keeps the test fast
        if now in starts:  # the view has not started those jobs yet; the schedule has
            continue
        live = features_at(LiveState.from_schedule(schedule, now, history), now, (5, 60, 720), names)
        for i, k in enumerate((5, 60, 720)):
            ref = live.filter(pl.col("k_min") == k).select(FEATURE_COLUMNS).to_numpy()
            np.testing.assert_array_equal(feats[k], ref.astype(np.float32), err_msg=f"t={now} k={k}")
            np.testing.assert_array_equal(arrive[:, i], (ref[:, 0] + ref[:, 6]) > 0)
        checked += 1
    assert checked > 5


def test_the_held_columns_online_equal_the_live_state_and_only_calibration_reads_a_rank(
        workload, Probe):
    """A trace whose queue held some jobs (hold_time: known before they arrive): the learned
    forecaster's held columns at every decision are the live state's (itself the batch
    table's), and ``calibrate(held=True)`` gives a persistence window's calibration the held
    pools' HELD_RANK without changing any registered answer."""
    from sia.models.forecaster import HELD_RANK

    jobs, pools = workload
    rng = np.random.default_rng(5)
    hold = np.where(rng.random(jobs.height) < 0.3, rng.integers(1, 7200, jobs.height), 0)
    jobs = jobs.with_columns(pl.Series("hold_time", hold.astype(float)))
    persist = {k: WillJobsArrive.from_booster(k, None, 0.5, list(FEATURE_COLUMNS))
               for k in (5, 60, 720)}
    for m in persist.values():
        m.method_ = "persistence"
    seen = []
    fc = LearnedForecaster(persist).calibrate(WINDOWS, alpha=0.5, held=True)
    plain = LearnedForecaster(persist)

    def ask(v):
        proba = fc.arrival_proba(v, WINDOWS)
        seen.append((v.now, fc.features(v, (5, 60, 720)), proba,
                     fc._held_ranks(v, proba, [5, 60, 720]), fc.will_jobs_arrive(v, WINDOWS),
                     plain.will_jobs_arrive(v, WINDOWS)))
    simulate(jobs, pools, Probe(ask))
    result = simulate(jobs, pools, Probe(lambda v: None))
    schedule = jobs.join(result.select("job_id", "start_time", "end_time"), on="job_id")
    history = point_in_time_history(schedule)
    names = sorted(pools["pool"].to_list())
    held_cols = [FEATURE_COLUMNS.index(c) for c in ("held_jobs", "held_gpus")]
    some = 0
    for now, feats, proba, ranked, _, registered in seen[::5]:
        live = features_at(LiveState.from_schedule(schedule, now, history), now, (5,), names)
        want = live.select("held_jobs", "held_gpus").to_numpy().astype(np.float32)
        np.testing.assert_array_equal(feats[5][:, held_cols], want, err_msg=f"t={now}")
        held = want[:, 0] > 0
        some += int(held.any())
        assert np.array_equal(ranked, np.where(held[:, None] & (proba < HELD_RANK), HELD_RANK,
                                               proba))
        assert np.array_equal(registered, proba >= 0.5)  # persistence's answers, unchanged
    assert some > 3


def test_one_stacked_call_answers_every_window_as_xgboost_would(workload, Probe):
    """Real boosters of different features in one forest call (one of them "either": persistence
    or the classifier), and a persistence window beside them."""
    rng = np.random.default_rng(5)
    n = 600
    rows = pl.DataFrame({"t": np.arange(n) * 300.0,
                         **{c: rng.integers(0, 4, n).astype(np.float32) for c in FEATURE_COLUMNS}})
    y = ((rows["arrivals_x10"].to_numpy() + rows["since_arrival_s"].to_numpy() % 3) > 3)
    models = {
        5: WillJobsArrive(5, select="xgboost", n_estimators=15, max_depth=4).fit(rows, y),
        60: WillJobsArrive(60, select="either", n_estimators=9,
                           features=FEATURE_COLUMNS[7:]).fit(rows, y),
        720: WillJobsArrive(720, select="persistence").fit(rows, y),
    }
    f = LearnedForecaster(models)
    probe = Probe(lambda v: (f.features(v, (5, 60, 720)), f.arrival_proba(v, WINDOWS),
                             f.will_jobs_arrive(v, WINDOWS)))
    jobs, pools = workload
    simulate(jobs, pools, probe)
    for feats, proba, arrive in probe.records[::5]:
        for i, k in enumerate((5, 60, 720)):
            m = models[k]
            x = pl.DataFrame(feats[k], schema=FEATURE_COLUMNS)
            np.testing.assert_array_equal(proba[:, i], m.arrival_proba(x).astype(np.float32))
            np.testing.assert_array_equal(arrive[:, i], m.predict(x).astype(bool))


def test_the_simulator_view_is_what_forecasters_are_typed_against(workload, Probe):
    from sia.data.forecast_view import ForecastView
    from sia.scheduler.core.forecast import DurationCdfForecaster

    probe = Probe(lambda v: isinstance(v, ForecastView))
    simulate(*workload, probe)
    assert probe.records and all(probe.records)
    assert isinstance(PerfectForecaster(), DurationCdfForecaster)
    assert isinstance(LearnedForecaster({}), DurationCdfForecaster)


class _PerPoolCounts:
    """The simulator's view without ``completed_counts``: a forecaster must ask pool by pool."""

    def __init__(self, view):
        self._v = view

    def __getattr__(self, name):
        if name == "completed_counts":
            raise AttributeError(name)
        return getattr(self._v, name)


def test_the_one_call_completion_counts_change_no_feature(workload, Probe):
    """The simulator's ``completed_counts()`` (one call) and ``n_completed(p)`` pool by pool
    give the same features at every decision of a replay."""
    jobs, pools = workload
    models = {k: WillJobsArrive.from_booster(k, _Fixed(), 0.5, list(FEATURE_COLUMNS))
              for k in (5, 60, 720)}
    fast, slow = LearnedForecaster(models), LearnedForecaster(models)
    probe = Probe(lambda v: (hasattr(v, "completed_counts"), fast.features(v, (5, 60, 720)),
                             slow.features(_PerPoolCounts(v), (5, 60, 720))))
    simulate(jobs, pools, probe)
    assert len(probe.records) > 100 and all(r[0] for r in probe.records)
    for _, a, b in probe.records:
        for k in (5, 60, 720):
            np.testing.assert_array_equal(a[k], b[k])


def test_last_submissions_reads_each_pools_last_prior_job():
    import math

    from sia.models.forecaster import last_submissions

    prior = pl.DataFrame({"pool": ["a", "b", "a"], "submit_time": [5.0, 7.0, 30.0]})
    got = last_submissions(prior, ["a", "b", "c"])
    assert got[:2].tolist() == [30.0, 7.0] and math.isnan(got[2])
    assert np.isnan(last_submissions(None, ["a"])).all()
    assert np.isnan(last_submissions(prior.head(0), ["a"])).all()


def test_last_width_is_the_gpus_of_each_pools_last_submitted_prior_job():
    import math

    from sia.models.forecaster import last_submissions

    # rows out of submission order: a's last job is the one at 30 (2 GPUs), not the last row
    prior = pl.DataFrame({"pool": ["a", "b", "a", "a"], "submit_time": [5.0, 7.0, 30.0, 9.0],
                          "num_gpus": [8, 4, 2, 1]})
    got = last_submissions(prior, ["a", "b", "c"], "num_gpus")
    assert got[:2].tolist() == [2.0, 4.0] and math.isnan(got[2])
