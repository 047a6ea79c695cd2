"""JobDuration submission-time features: hand-checked values, point in time, offline == online."""

from __future__ import annotations

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.features.duration_features import DURATION_FEATURES, submission_features
from sia.models.job_duration import OnlineSubmissionFeatures
from sia.scheduler.core.view import TraceArrays

from .conftest import schedule


def _row(feats: pl.DataFrame, job: str) -> dict:
    return feats.filter(pl.col("job_id") == job).row(0, named=True)


def test_hand_case_history_burst_and_calendar():
    # pool p: a (100 s) and b (4000 s) finish before c is submitted; d finishes after.
    s = schedule([
        {"id": "a", "submit": 0, "start": 0, "end": 100, "gpus": 1, "tag": "x"},
        {"id": "b", "submit": 10, "start": 10, "end": 4010, "gpus": 2},
        {"id": "c", "submit": 4010, "start": 4010, "end": 4020, "gpus": 1, "tag": "x"},
        {"id": "d", "submit": 4015, "start": 4015, "end": 90000, "gpus": 1},
    ])
    f = submission_features(s)
    c = _row(f, "c")
    # b ends exactly at c's submission: it counts (end <= t)
    assert c["pool_count"] == 2 and c["pool_median_s"] == (100 + 4000) / 2
    assert c["pool_last_s"] == 4000.0  # b finished last
    assert c["pool_le5m"] == 0.5 and c["pool_le60m"] == 0.5 and c["pool_le720m"] == 1.0
    assert c["tag_count"] == 1 and c["tag_median_s"] == 100.0
    assert c["pool_gpus_count"] == 1 and c["pool_gpus_median_s"] == 100.0  # only a had 1 GPU
    assert np.isnan(c["user_median_s"]) and c["user_count"] == 0
    # bursts: a and b were submitted in [t - 1 h, t], none in the last 5 min
    assert c["pool_subs_60m"] == 0 and c["since_pool_sub_s"] == 4000.0
    d = _row(f, "d")
    assert d["pool_subs_5m"] == 1 and d["pool_same_width_60m"] == 1  # c: 5 s before, 1 GPU
    assert d["pool_count"] == 2  # a and b; c ends at 4020, after d is submitted
    assert abs(d["hour_of_day"] - 4015 / 3600) < 1e-12 and d["day_of_week"] == 0.0
    a = _row(f, "a")
    assert a["pool_count"] == 0 and np.isnan(a["pool_median_s"]) and np.isnan(a["since_pool_sub_s"])


def test_recent_shares_cover_only_the_last_finished_jobs(monkeypatch):
    """``*_recent_le*``: the shares over the group's last RECENT_JOBS finished jobs, by finish order."""
    import sia.features.duration_features as df

    monkeypatch.setattr(df, "RECENT_JOBS", 2)
    # pool p finishes 100 s, 4000 s, 200 s jobs (in that order) before e is submitted
    s = schedule([
        {"id": "a", "submit": 0, "start": 0, "end": 100, "gpus": 1},
        {"id": "b", "submit": 5, "start": 5, "end": 4005, "gpus": 1},
        {"id": "c", "submit": 4800, "start": 4800, "end": 5000, "gpus": 1},
        {"id": "d", "submit": 4050, "start": 4050, "end": 4051, "gpus": 1},
        {"id": "e", "submit": 6000, "start": 6000, "end": 6100, "gpus": 1},
    ])
    f = submission_features(s)
    e = _row(f, "e")
    # all four: 1 s, 100 s, 200 s fit 5 min, 4000 s does not
    assert e["pool_count"] == 4 and e["pool_le5m"] == 0.75 and e["pool_le60m"] == 0.75
    # the last two to finish are d (1 s, ends at 4051) and c (200 s, ends at 5000)
    assert e["pool_recent_le5m"] == 1.0 and e["pool_recent_le720m"] == 1.0
    c = _row(f, "c")  # at 4800: a, b, d finished; the last two are b (4000 s) and d (1 s)
    assert c["pool_recent_le5m"] == 0.5 and c["pool_recent_le60m"] == 0.5
    assert c["pool_recent_le720m"] == 1.0
    assert np.isnan(_row(f, "a")["pool_recent_le5m"])  # nothing finished yet


@st.composite
def schedules(draw):
    n = draw(st.integers(1, 25))
    rows = []
    for i in range(n):
        submit = draw(st.integers(0, 5000))
        wait = draw(st.integers(0, 500))
        dur = draw(st.sampled_from([1, 60, 300, 301, 3600, 50000]))
        rows.append({"id": f"j{i:02d}", "pool": draw(st.sampled_from(["p", "q"])),
                     "submit": submit, "start": submit + wait, "end": submit + wait + dur,
                     "gpus": draw(st.sampled_from([1, 2])),
                     "tag": draw(st.sampled_from([None, "t1", "t2"]))})
    return schedule(rows)


@settings(max_examples=60, deadline=None)
@given(schedules())
def test_nothing_after_submission_is_used(s):
    """Changing what ends after a job's submission never changes that job's features."""
    f = submission_features(s)
    for job in s["job_id"].to_list()[:5]:
        t = s.filter(pl.col("job_id") == job)["submit_time"][0]
        later = s.with_columns(
            duration=pl.when(pl.col("end_time") > t).then(pl.col("duration") * 7 + 1)
            .otherwise(pl.col("duration")),
            end_time=pl.when(pl.col("end_time") > t).then(pl.col("end_time") + 1e6)
            .otherwise(pl.col("end_time")))
        later = later.with_columns(
            submit_time=pl.when(pl.col("submit_time") > t).then(pl.col("submit_time") + 1e5)
            .otherwise(pl.col("submit_time")))
        a = _row(f, job)
        b = _row(submission_features(later), job)
        for c in DURATION_FEATURES:
            assert a[c] == b[c] or (np.isnan(a[c]) and np.isnan(b[c])), (job, c)


class _ReplayView:
    """The view fields OnlineSubmissionFeatures reads, advanced through a schedule's events."""

    def __init__(self, trace: TraceArrays, end: np.ndarray):
        self.trace, self._end = trace, end
        self.n_arrived, self.now = 0, -1.0

    def advance(self, now: float) -> None:
        self.now = now
        self.n_arrived = int(np.searchsorted(self.trace.submit, now, side="right"))

    def _done(self, p: int) -> np.ndarray:
        jobs = self.trace.pool_jobs[p]
        jobs = jobs[self._end[jobs] <= self.now]
        return jobs[np.lexsort((jobs, self._end[jobs]))]

    def n_completed(self, p: int) -> int:
        return int(self._done(p).size)

    def completions(self, p: int) -> np.ndarray:
        return self._end[self._done(p)]

    def completed_jobs(self, p: int) -> np.ndarray:
        return self._done(p)


@settings(max_examples=60, deadline=None)
@given(schedules(), st.integers(1, 4))
def test_online_equals_offline(s, stride):
    """The forecaster's incremental rows equal the batch rows for the same schedule."""
    s = s.sort("submit_time", "job_id")
    pools = tuple(sorted(set(s["pool"].to_list())))
    trace = TraceArrays.build(
        s["job_id"].to_numpy(), s["submit_time"].to_numpy(), s["duration"].to_numpy(),
        s["num_gpus"].to_numpy(), np.array([pools.index(p) for p in s["pool"].to_list()]),
        np.array(s["tag"].to_list(), dtype=object), pools, np.full(len(pools), 4))
    view = _ReplayView(trace, s["end_time"].to_numpy())
    online = OnlineSubmissionFeatures()
    times = np.unique(np.concatenate([s["submit_time"].to_numpy(), s["end_time"].to_numpy()]))
    for now in times[::stride].tolist() + [float(times[-1])]:  # skipping events batches them
        view.advance(now)
        online.update(view)
    got = online.rows(np.arange(s.height))
    want = submission_features(s).select(DURATION_FEATURES).to_numpy()
    np.testing.assert_array_equal(got, want)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["t1", "t2", None]), st.sampled_from(["u", None]),
                          st.sampled_from(["a", "b"]), st.sampled_from([1, 2, 8]),
                          st.one_of(st.integers(1, 100).map(float),
                                    st.floats(1.0, 1e6, allow_nan=False))),
                max_size=120),
       st.integers(1, 5))
def test_bulk_completions_equal_one_by_one(jobs, recent):
    """complete_many (a replay's prior history) leaves every group as complete() of each would."""
    import sia.features.duration_features as df

    old = df.RECENT_JOBS
    df.RECENT_JOBS = recent  # small, so the recent window is exercised
    try:
        one, bulk = df.SubmissionFeatures(), df.SubmissionFeatures()
        for job in jobs:
            one.complete(*job)
        bulk.complete_many(jobs)
        for key in [("t1", "u", "a", 1), (None, None, "b", 8), ("t2", None, "a", 2)]:
            np.testing.assert_array_equal(one.submit(1e9, *key), bulk.submit(1e9, *key))
    finally:
        df.RECENT_JOBS = old
