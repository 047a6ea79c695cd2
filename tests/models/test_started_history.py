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


class ZeroQueueReplayView:
    """The view a replay with no queue gives at ``now`` (every job runs from its submission to
    submission + duration; jobs submitted at ``now`` have not started): the reference the
    vectorized :func:`zero_queue_shares` is checked against, by asking
    :class:`StartedLookAlikes` at each instant as a replay would."""

    def __init__(self, trace):
        self.trace = trace
        self.end = trace.submit + trace.duration
        self.now = 0.0

    @property
    def n_arrived(self):
        return int(np.searchsorted(self.trace.submit, self.now, side="left"))

    def running(self):
        run = np.flatnonzero(self.end[:self.n_arrived] > self.now)
        return SimpleNamespace(job=run, pool=self.trace.pool[run], start=self.trace.submit[run])

    @property
    def n_running(self):
        return len(self.running().job)

    def completed_jobs(self, p):
        jobs = np.flatnonzero((self.trace.pool == p) & (self.end <= self.now))
        return jobs[np.lexsort((jobs, self.end[jobs]))]  # completion order

    def n_completed(self, p):
        return len(self.completed_jobs(p))

    def completions(self, p):
        return self.end[self.completed_jobs(p)]


def _replayed_zero_queue_shares(frame, prior, recent, min_known):
    """Each job's shares asked of :class:`StartedLookAlikes` at its submission in a replay with
    no queue, the jobs of one instant together (rows in ``frame``'s order)."""
    order = np.argsort(frame["submit_time"].to_numpy(), kind="stable")
    s = frame[order]
    names = tuple(sorted(set(s["pool"].to_list())))
    tags = s["tag"].to_list() if "tag" in s.columns else [None] * s.height
    codes = {}
    code = np.array([-1 if t is None or t == "" else codes.setdefault(t, len(codes))
                     for t in tags], dtype=np.int64)
    trace = SimpleNamespace(
        n_jobs=s.height, n_pools=len(names), pool_names=names, speedup=1.0,
        pool=np.array([names.index(p) for p in s["pool"].to_list()], dtype=np.int64),
        num_gpus=s["num_gpus"].to_numpy().astype(np.int64), tag_code=code,
        tag=np.array([None if c < 0 else t for t, c in zip(tags, code, strict=True)],
                     dtype=object),
        submit=s["submit_time"].to_numpy().astype(np.float64),
        duration=s["duration"].to_numpy().astype(np.float64))
    view = ZeroQueueReplayView(trace)
    looks = StartedLookAlikes(recent=recent, min_known=min_known, prior=prior)
    out = np.full((s.height, EDGES.size), np.nan)
    for t in np.unique(trace.submit):
        at = np.flatnonzero(trace.submit == t)
        view.now = float(t)
        out[at] = looks.share_within(view, at, EDGES)
    back = np.empty_like(out)
    back[order] = out
    return back


def test_zero_queue_shares_by_hand_with_ties_prior_jobs_and_tags():
    from sia.models.started_history import zero_queue_shares

    prior = pl.DataFrame({"pool": ["p0", "p0", "p1"], "num_gpus": [1, 1, 1],
                          "tag": ["x", None, "x"],
                          "submit_time": [-5000.0, -200.0, -10.0],
                          "duration": [100.0, 50000.0, 10.0]})
    # a and b start together at 0; a ends at 300 s, exactly when c is submitted (it counts
    # as finished then); d, of tag x, sees the prior x job and a
    frame = pl.DataFrame({"pool": ["p0", "p0", "p0", "p0"], "num_gpus": [1, 1, 1, 2],
                          "tag": ["x", None, None, "x"],
                          "submit_time": [0.0, 0.0, 300.0, 400.0],
                          "duration": [300.0, 4000.0, 5.0, 5.0]})
    got = zero_queue_shares(frame, prior, EDGES, recent=50, min_known=1)
    want = np.array([
        # a (x): the prior x job ran 100 s (fits all); its pool's other prior job has run
        # 200 s: the tag level already knows every edge
        [1.0, 1.0, 1.0],
        # b (no tag), pool and width: the prior job that ran 100 s is known; the other has
        # run 200 s, under every edge
        [1.0, 1.0, 1.0],
        # c at 300: a finished (300 s fits 5 min); b has run 300 s (not past 5 min: unknown);
        # the second prior job has run 500 s: misses 5 min
        [2 / 3, 1.0, 1.0],
        # d (x, 2 GPUs) at 400: tag x has the prior x job and a, both finished within 5 min
        [1.0, 1.0, 1.0],
    ])
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(got, _replayed_zero_queue_shares(frame, prior, 50, 1))


def test_zero_queue_shares_push_the_jobs_of_one_instant_in_the_replays_start_order():
    """A job that ended before the next instant has its start recorded as end - duration,
    which can be a rounding above its submission: the replay pushes it after the others of its
    instant, and with one recent job only that one is in the window."""
    from sia.models.started_history import zero_queue_shares

    assert (0.1 + 0.2) - 0.2 > 0.1
    frame = pl.DataFrame({"pool": ["p0"] * 3, "num_gpus": [1] * 3,
                          "submit_time": [0.1, 0.1, 5.0], "duration": [0.2, 1000.0, 1.0]})
    got = zero_queue_shares(frame, None, EDGES, recent=1, min_known=1)
    # at 5 s the last pushed is the 0.2 s job (done, fits); the 1,000 s one would be unknown
    np.testing.assert_array_equal(got[2], [1.0, 1.0, 1.0])
    np.testing.assert_array_equal(got, _replayed_zero_queue_shares(frame, None, 1, 1))


@settings(max_examples=150, deadline=None)
@given(data=st.data(), n=st.integers(1, 30), recent=st.integers(1, 5),
       min_known=st.integers(1, 3), n_prior=st.integers(0, 6))
def test_zero_queue_shares_equal_a_replay_with_no_queue_bit_for_bit(data, n, recent, min_known,
                                                                    n_prior):
    """Ties everywhere (instants shared by several jobs, ends on later submissions, fractional
    times whose end - duration is not the submission), tags, prior jobs (some of a tag or pool
    the jobs never have), any row order: the same floats as the replay."""
    from sia.models.started_history import zero_queue_shares

    times = st.sampled_from([0.0, 0.1, 0.3, 100.0, 300.0, 300.1, 400.0, 3600.0, 3900.0,
                             43200.0, 43500.0])
    durs = st.sampled_from([0.2, 1.0, 100.0, 200.0, 300.0, 3300.0, 3600.0, 3601.0, 43200.0,
                            50000.0])
    tags = st.sampled_from([None, "", "x", "y"])

    def jobs(k, when, pools):
        return pl.DataFrame({
            "pool": data.draw(st.lists(st.sampled_from(pools), min_size=k, max_size=k)),
            "num_gpus": data.draw(st.lists(st.sampled_from([1, 2]), min_size=k, max_size=k)),
            "tag": data.draw(st.lists(tags, min_size=k, max_size=k)),
            "submit_time": data.draw(st.lists(when, min_size=k, max_size=k)),
            "duration": data.draw(st.lists(durs, min_size=k, max_size=k))},
            schema={"pool": pl.String, "num_gpus": pl.Int64, "tag": pl.String,
                    "submit_time": pl.Float64, "duration": pl.Float64})

    frame = jobs(n, times, ["p0", "p1"])
    prior = jobs(n_prior, times.map(lambda t: t - 50000.0), ["p0", "p1", "p2"]) \
        if n_prior else None
    got = zero_queue_shares(frame, prior, EDGES, recent=recent, min_known=min_known)
    want = _replayed_zero_queue_shares(frame, prior, recent, min_known)
    np.testing.assert_array_equal(got, want)
