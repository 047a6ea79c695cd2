"""JobDuration's censoring cap: what is known at t of the similar jobs' last starts."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.models.started_history import StartedLookAlikes, cap_cdf

EDGES = np.array([300.0, 3600.0, 43200.0])


class ReplayView:
    """A replay's view at ``now`` from known (start, end) per job; ``now`` is set by the test."""

    def __init__(self, pool, gpus, start, duration, tag=None):
        n = len(pool)
        self.trace = SimpleNamespace(
            n_jobs=n, n_pools=int(max(pool)) + 1, pool=np.asarray(pool, dtype=np.int64),
            num_gpus=np.asarray(gpus, dtype=np.int64),
            duration=np.asarray(duration, dtype=np.float64),
            tag_code=np.asarray(tag if tag is not None else [-1] * n, dtype=np.int64),
            tag=np.array([None] * n, dtype=object), submit=np.asarray(start, dtype=np.float64),
            pool_names=tuple(f"p{i}" for i in range(int(max(pool)) + 1)))
        self.start = np.asarray(start, dtype=np.float64)
        self.end = self.start + self.trace.duration
        self.now = 0.0

    @property
    def n_running(self):
        return len(self.running().job)

    @property
    def n_arrived(self):
        return int((self.trace.submit <= self.now).sum())

    def _done(self, p):
        jobs = np.flatnonzero((self.trace.pool == p) & (self.end <= self.now))
        return jobs[np.lexsort((jobs, self.end[jobs]))]  # completion order

    def n_completed(self, p):
        return len(self._done(p))

    def completions(self, p):
        return self.end[self._done(p)]

    def completed_jobs(self, p):
        return self._done(p)

    def running(self):
        run = np.flatnonzero((self.start <= self.now) & (self.end > self.now))
        return SimpleNamespace(job=run, pool=self.trace.pool[run], start=self.start[run])


def test_known_fits_known_misses_and_unknown_by_hand():
    # pool 0, 1 GPU: a ran 100 s, b runs 50,000 s, c ran 1,000 s; d is the job asked about
    view = ReplayView(pool=[0, 0, 0, 0], gpus=[1, 1, 1, 1], start=[0.0, 0.0, 10.0, 10**6],
                      duration=[100.0, 50000.0, 1000.0, 5.0])
    h = StartedLookAlikes(min_known=3)
    view.now = 4000.0
    # 5 min: a fits, b (running 4,000 s) and c miss; 1 h: a, c fit, b misses;
    # 12 h: a, c fit, b unknown: 2 known < 3 at the pool-and-width level, so the pool's (>= 1)
    np.testing.assert_allclose(h.share_within(view, np.array([3]), EDGES), [[1 / 3, 2 / 3, 1.0]])
    view.now = 50_001.0  # b finished after 50,000 s: it misses every edge
    np.testing.assert_allclose(h.share_within(view, np.array([3]), EDGES),
                               [[1 / 3, 2 / 3, 2 / 3]])


def test_no_history_is_no_cap_and_groups_stay_apart():
    view = ReplayView(pool=[0, 1], gpus=[1, 1], start=[0.0, 0.0], duration=[100.0, 100.0])
    h = StartedLookAlikes()
    view.now = 50.0  # job 0 is running for 50 s: nothing known of any edge yet
    assert np.isnan(h.share_within(view, np.array([0, 1]), EDGES)).all()
    view.now = 200.0
    np.testing.assert_array_equal(h.share_within(view, np.array([1]), EDGES), [[1.0, 1.0, 1.0]])


def test_prior_jobs_count_from_their_submission_and_are_known_only_once_past():
    prior = pl.DataFrame({"pool": ["p0", "p0"], "num_gpus": [1, 1],
                          "submit_time": [-1000.0, -100.0], "duration": [500.0, 10**5]})
    view = ReplayView(pool=[0], gpus=[1], start=[1000.0], duration=[10.0])
    h = StartedLookAlikes(min_known=1, prior=prior)
    view.now = 1000.0
    # the first ran 500 s (fits 1 h, not 5 min); the second has run 1,100 s so far: it misses
    # 5 min, and 1 h and 12 h are still unknown for it
    np.testing.assert_allclose(h.share_within(view, np.array([0]), EDGES), [[0.0, 1.0, 1.0]])


def test_cap_lowers_and_keeps_the_cdf_non_decreasing():
    cdf = np.array([[0.9, 0.95, 0.99], [0.1, 0.5, 0.9], [0.2, 0.3, 0.4]])
    share = np.array([[np.nan, np.nan, 0.5], [0.3, np.nan, np.nan], [np.nan] * 3])
    np.testing.assert_allclose(cap_cdf(cdf, share),
                               [[0.5, 0.5, 0.5], [0.1, 0.5, 0.9], [0.2, 0.3, 0.4]])


def _brute_force(view, h, job):
    """The definition: the group's last ``recent`` jobs started by now, what is known of each."""
    now, t = view.now, view.trace
    out = np.full(EDGES.size, np.nan)
    levels = [(t.pool == t.pool[job]) & (t.num_gpus == t.num_gpus[job]), t.pool == t.pool[job]]
    for level, same in enumerate(levels):
        started = np.flatnonzero(same & (view.start <= now))
        started = started[np.lexsort((started, view.start[started]))][-h.recent:]
        done = view.end[started] <= now
        ran = np.where(done, t.duration[started], now - view.start[started])
        fits = done[:, None] & (ran[:, None] <= EDGES)
        known = fits | (ran[:, None] > EDGES)
        need = h.min_known if level == 0 else 1
        for e in range(EDGES.size):
            if np.isnan(out[e]) and known[:, e].sum() >= need:
                out[e] = fits[:, e].sum() / known[:, e].sum()
    return out


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 40), recent=st.integers(1, 6),
       min_known=st.integers(1, 3))
def test_shares_equal_the_definition_at_every_step_and_read_no_future(data, n, recent,
                                                                      min_known):
    times = st.sampled_from([0.0, 100.0, 300.0, 3600.0, 5000.0, 43200.0, 50000.0])
    start = np.array(data.draw(st.lists(times, min_size=n, max_size=n)))
    duration = np.array(data.draw(st.lists(st.sampled_from([1.0, 300.0, 600.0, 3600.0, 40000.0,
                                                            90000.0]), min_size=n, max_size=n)))
    view = ReplayView(pool=data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n)),
                      gpus=data.draw(st.lists(st.sampled_from([1, 2]), min_size=n, max_size=n)),
                      start=start, duration=duration)
    h = StartedLookAlikes(recent=recent, min_known=min_known)
    steps = sorted(set(data.draw(st.lists(st.sampled_from(
        [0.0, 200.0, 3000.0, 4000.0, 43300.0, 60000.0, 2e5]), min_size=1, max_size=5))))
    jobs = np.arange(n)
    for now in steps:
        view.now = now
        got = h.share_within(view, jobs, EDGES)
        want = np.array([_brute_force(view, h, j) for j in jobs])
        np.testing.assert_allclose(got, want, equal_nan=True)
        # what the future holds does not matter: the same view with every later end moved
        later = view.end > now
        other = ReplayView(view.trace.pool, view.trace.num_gpus, start,
                           np.where(later, duration + 7.0, duration))
        other.now = now
        np.testing.assert_allclose(StartedLookAlikes(recent=recent, min_known=min_known)
                                   .share_within(other, jobs, EDGES), got, equal_nan=True)


def test_a_share_follows_time_alone_running_jobs_passing_edges_and_prior_ends():
    """Between starts and ends a share still changes: a running job passes an edge, a prior job
    ends. A share kept from an earlier call must not outlive either."""
    prior = pl.DataFrame({"pool": ["p0"], "num_gpus": [1], "submit_time": [-100.0],
                          "duration": [2000.0]})  # ends at 1,900 s, having run 2,000 s
    view = ReplayView(pool=[0, 0], gpus=[1, 1], start=[0.0, 10**6], duration=[50000.0, 1.0])
    h = StartedLookAlikes(min_known=1, prior=prior)
    want = {100.0: [np.nan, np.nan, np.nan],  # both have run under 5 min: nothing known
            250.0: [0.0, np.nan, np.nan],     # the prior job has run 350 s: misses 5 min
            301.0: [0.0, np.nan, np.nan],     # it passed 5 min: a second miss of 5 min
            1900.0: [0.0, 1.0, 1.0],          # the prior job ended: fits 1 h and 12 h
            3601.0: [0.0, 0.5, 1.0],          # the replay's job passed 1 h
            43201.0: [0.0, 0.5, 0.5]}         # and 12 h
    for now, share in want.items():
        view.now = now
        np.testing.assert_allclose(h.share_within(view, np.array([0]), EDGES), [share],
                                   equal_nan=True, err_msg=f"at {now} s")


@settings(max_examples=60, deadline=None)
@given(data=st.data(), n=st.integers(1, 12), min_known=st.integers(1, 3))
def test_shares_equal_the_definition_as_time_passes_with_nothing_starting(data, n, min_known):
    """Every job starts at 0, so between the queries only time moves (and jobs end)."""
    duration = np.array(data.draw(st.lists(st.sampled_from([1.0, 300.0, 600.0, 3600.0, 40000.0,
                                                            90000.0]), min_size=n, max_size=n)))
    view = ReplayView(pool=[0] * n, gpus=data.draw(st.lists(st.sampled_from([1, 2]), min_size=n,
                                                            max_size=n)),
                      start=np.zeros(n), duration=duration)
    h = StartedLookAlikes(recent=50, min_known=min_known)
    steps = sorted(set(data.draw(st.lists(st.floats(0.0, 1e5), min_size=1, max_size=12))))
    jobs = np.arange(n)
    for now in steps:
        view.now = now
        want = np.array([_brute_force(view, h, j) for j in jobs])
        np.testing.assert_allclose(h.share_within(view, jobs, EDGES), want, equal_nan=True)


@settings(max_examples=40, deadline=None)
@given(data=st.data(), n=st.integers(1, 25), recent=st.integers(1, 5),
       min_known=st.integers(1, 3))
def test_zero_queue_shares_are_the_caps_of_a_replay_with_no_queue(data, n, recent, min_known):
    """Offline (the training report): each job's shares at its submission equal what the cap
    reads in a replay where every job starts when submitted (times chosen so no end meets a
    submission: the replay is asked just before each one, when the job has not started)."""
    from sia.models.started_history import zero_queue_shares

    submit = np.sort(np.array(data.draw(st.lists(st.integers(0, 30000), min_size=n, max_size=n,
                                                 unique=True)))) * 2.0
    duration = np.array(data.draw(st.lists(st.sampled_from([1.0, 301.0, 999.0, 3601.0, 40001.0]),
                                           min_size=n, max_size=n)))
    pool = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    gpus = data.draw(st.lists(st.sampled_from([1, 2]), min_size=n, max_size=n))
    frame = pl.DataFrame({"pool": [f"p{p}" for p in pool], "num_gpus": gpus,
                          "submit_time": submit, "duration": duration})
    got = zero_queue_shares(frame.reverse(), recent=recent, min_known=min_known)[::-1]
    for j in range(n):
        view = ReplayView(pool=pool + [0, 1], gpus=gpus + [1, 1],  # both pools in the trace
                          start=list(submit) + [1e9, 1e9], duration=list(duration) + [1.0, 1.0])
        view.trace.pool_names = ("p0", "p1")
        view.now = submit[j] - 0.5
        want = StartedLookAlikes(recent=recent, min_known=min_known).share_within(
            view, np.array([j]), EDGES)
        np.testing.assert_allclose(got[j], want[0], equal_nan=True, err_msg=f"job {j}")


def test_bad_sizes_are_refused():
    with pytest.raises(ValueError, match="recent and min_known"):
        StartedLookAlikes(recent=0)


def test_the_forecaster_caps_a_job_durations_cdf_when_its_model_says_so():
    from sia.data.windows import DURATION_BIN_EDGES_S
    from sia.features.duration_features import DURATION_FEATURES
    from sia.models.forecaster import LearnedForecaster
    from sia.models.job_duration import JobDuration

    x = np.full((4, len(DURATION_FEATURES)), np.nan)
    y = np.array([0, 1, 2, 3])
    # pool 0, 1 GPU: three 100 s jobs finish, then four start that run for days; job 7 asks
    view = ReplayView(pool=[0] * 8, gpus=[1] * 8,
                      start=[0.0, 0.0, 0.0, 1000.0, 1000.0, 1000.0, 1000.0, 10**5],
                      duration=[100.0] * 3 + [10**6] * 4 + [10.0])
    view.now = 50_000.0
    jobs = np.array([6])  # arrived (its features at submission: three short look-alikes)
    served = {}
    for cap in (False, True):
        model = JobDuration("history_cdf", history_recent=1.0, started_cap=cap).fit(x, y)
        fc = LearnedForecaster({}, duration_model=model)
        assert fc.censor_cap is cap
        served[cap] = fc.duration_cdf(view, jobs, DURATION_BIN_EDGES_S)
    # submitted at 1,000 s it saw only the three short ones: "fits 5 min" for sure
    np.testing.assert_allclose(served[False], [[1.0, 1.0, 1.0]])
    # at 50,000 s four of the last seven started have run past 12 h: 3 of 7 known fit 12 h
    np.testing.assert_allclose(served[True], [[3 / 7, 3 / 7, 3 / 7]])


def test_a_job_duration_registered_before_the_cap_loads_without_it():
    from sia.features.duration_features import DURATION_FEATURES
    from sia.models.job_duration import JobDuration

    x = np.full((4, len(DURATION_FEATURES)), np.nan)
    model = JobDuration("history_cdf", started_cap=True).fit(x, np.array([0, 1, 2, 3]))
    params, boosters = model.to_artifacts()
    assert JobDuration.from_artifacts(params, boosters).started_cap is True
    del params["estimator"]["started_cap"]  # as stored before the parameter existed
    assert JobDuration.from_artifacts(params, boosters).started_cap is False


@settings(max_examples=30, deadline=None)
@given(data=st.data(), n=st.integers(1, 25))
def test_without_the_tag_level_the_chain_is_that_of_untagged_jobs(data, n):
    """use_tag=False (JobDuration.history_tag False): every job's shares are those of the same
    jobs with their tags removed, at every step, prior jobs included."""
    from sia.models.started_history import zero_queue_shares

    submit = np.sort(np.array(data.draw(st.lists(st.integers(0, 30000), min_size=n, max_size=n,
                                                 unique=True)))) * 2.0
    duration = np.array(data.draw(st.lists(st.sampled_from([1.0, 301.0, 3601.0, 40001.0]),
                                           min_size=n, max_size=n)))
    pool = data.draw(st.lists(st.integers(0, 1), min_size=n, max_size=n))
    tag = data.draw(st.lists(st.sampled_from([None, "a", "b"]), min_size=n, max_size=n))
    frame = pl.DataFrame({"pool": [f"p{p}" for p in pool], "num_gpus": [1] * n,
                          "submit_time": submit, "duration": duration, "tag": tag})
    cut = n // 2
    prior, jobs = frame[:cut], frame[cut:]
    untagged = frame.with_columns(pl.lit(None, dtype=pl.String).alias("tag"))
    got = zero_queue_shares(jobs, prior, recent=3, min_known=1, use_tag=False)
    want = zero_queue_shares(untagged[cut:], untagged[:cut], recent=3, min_known=1)
    np.testing.assert_array_equal(got, want)


def test_the_forecasters_cap_follows_the_models_tag_level():
    """A JobDuration without the tag level caps by the pool-and-width look-alikes, not the tag's."""
    from sia.data.windows import DURATION_BIN_EDGES_S
    from sia.features.duration_features import DURATION_FEATURES
    from sia.models.forecaster import LearnedForecaster
    from sia.models.job_duration import JobDuration

    x = np.full((4, len(DURATION_FEATURES)), np.nan)
    y = np.array([0, 1, 2, 3])
    # pool 0, 1 GPU, tag 0: three jobs that ran 100 s; tag 1: three still running for days;
    # job 6 (tag 0, submitted at 1,000 s) asks at 50,000 s
    view = ReplayView(pool=[0] * 7, gpus=[1] * 7, start=[0.0] * 6 + [1000.0],
                      duration=[100.0] * 3 + [10**6] * 3 + [10.0], tag=[0, 0, 0, 1, 1, 1, 0])
    view.now = 50_000.0
    got = {}
    for tag in (True, False):
        model = JobDuration("history_cdf", history_recent=1.0, started_cap=True,
                            history_tag=tag).fit(x, y)
        fc = LearnedForecaster({}, duration_model=model)
        got[tag] = fc.duration_cdf(view, np.array([6]), DURATION_BIN_EDGES_S)
    # both CDFs are 1 (at 1,000 s the three 100 s jobs are the only finished look-alikes);
    # with the tag, job 6's chain starts at tag 0: jobs 0-2 and itself, all known to fit 5 min
    np.testing.assert_allclose(got[True], [[1.0, 1.0, 1.0]])
    # without it, pool and width: those four fit, jobs 3-5 have run past 12 h: 4 of 7
    np.testing.assert_allclose(got[False], [[4 / 7, 4 / 7, 4 / 7]])
