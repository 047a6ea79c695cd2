"""JobDuration's time-limit features: hand-checked values, offline == online, absent = unchanged."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.schema import TIME_LIMIT_GRACE_S
from sia.features.duration_features import (
    DURATION_FEATURES,
    LIMIT_COLUMNS,
    feature_names,
    has_limits,
    submission_features,
)
from sia.models.job_duration import OnlineSubmissionFeatures
from sia.scheduler.core.view import TraceArrays

from .conftest import schedule


def _with_limits(s: pl.DataFrame, limits: list) -> pl.DataFrame:
    return s.with_columns(pl.Series("time_limit", limits, dtype=pl.Float64))


def _row(feats: pl.DataFrame, job: str) -> dict:
    return feats.filter(pl.col("job_id") == job).row(0, named=True)


def test_hand_case_limit_use_and_fits():
    # user u: a ran 100 s of a 1000 s limit (use .1), b 900 s of 1000 s (use .9); both end
    # before c is submitted. c asks for 3000 s; d has no limit; e is another user's.
    s = _with_limits(schedule([
        {"id": "a", "submit": 0, "start": 0, "end": 100, "user": "u"},
        {"id": "b", "submit": 10, "start": 10, "end": 910, "user": "u"},
        {"id": "c", "submit": 1000, "start": 1000, "end": 1100, "user": "u"},
        {"id": "d", "submit": 1001, "start": 1001, "end": 1200, "user": "u"},
        {"id": "e", "submit": 1002, "start": 1002, "end": 1300, "user": "v"},
    ]), [1000.0, 1000.0, 3000.0, None, 240.0])
    f = submission_features(s)
    assert f.columns[1:] == feature_names(True)
    c = _row(f, "c")
    assert c["limit_log_s"] == math.log(3000.0)
    # 3000 s + 60 s of grace: fits 60 and 720 min, not 5 min
    assert (c["limit_fits_5m"], c["limit_fits_60m"], c["limit_fits_720m"]) == (0.0, 1.0, 1.0)
    assert c["user_use_count"] == 2 and c["user_use_median"] == 0.5
    assert abs(c["user_use_q90"] - (0.1 + 0.8 * 0.9)) < 1e-12 and c["user_use_last"] == 0.9
    assert c["pool_gpus_use_median"] == 0.5
    assert c["limit_x_user_use_median_s"] == 1500.0
    # the user's uses times c's limit: 300 s and 2700 s: one of two fits 5 min, both 60 min
    assert (c["user_use_fit_le5m"], c["user_use_fit_le60m"]) == (0.5, 1.0)
    assert c["pool_gpus_use_fit_le5m"] == 0.5
    d = _row(f, "d")  # no limit: every limit column NaN
    assert all(np.isnan(d[col]) for col in LIMIT_COLUMNS)
    e = _row(f, "e")  # 240 s + 60 s of grace = 300 s: fits 5 min exactly
    assert e["limit_fits_5m"] == 1.0
    assert e["user_use_count"] == 0 and np.isnan(e["user_use_median"])  # v has no history
    assert e["pool_gpus_use_median"] == 0.5  # a and b (c ends at 1100, after e's submission)
    assert np.isnan(e["limit_x_user_use_median_s"])
    a = _row(f, "a")
    assert a["user_use_count"] == 0 and np.isnan(a["pool_gpus_use_q90"])


def test_absent_limits_change_nothing():
    """No time_limit column, or one with no limit in it: exactly today's columns and values."""
    s = schedule([
        {"id": "a", "submit": 0, "start": 0, "end": 100, "user": "u", "tag": "x"},
        {"id": "b", "submit": 50, "start": 60, "end": 5000, "user": "u"},
        {"id": "c", "submit": 6000, "start": 6000, "end": 6100, "tag": "x"},
    ])
    plain = submission_features(s)
    assert plain.columns[1:] == DURATION_FEATURES
    empty = _with_limits(s, [None, None, None])
    assert not has_limits(empty) and has_limits(_with_limits(s, [None, 5.0, None]))
    assert submission_features(empty).equals(plain)
    # with limits, the first columns are still today's, value for value
    limited = submission_features(_with_limits(s, [10.0, 100.0, None]))
    assert limited.select(["job_id", *DURATION_FEATURES]).equals(plain)


@st.composite
def limited_schedules(draw):
    n = draw(st.integers(1, 25))
    rows, limits = [], []
    for i in range(n):
        submit = draw(st.integers(0, 5000))
        wait = draw(st.integers(0, 500))
        dur = draw(st.sampled_from([1, 60, 240, 300, 3600, 50000]))
        rows.append({"id": f"j{i:02d}", "pool": draw(st.sampled_from(["p", "q"])),
                     "submit": submit, "start": submit + wait, "end": submit + wait + dur,
                     "gpus": draw(st.sampled_from([1, 2])),
                     "tag": draw(st.sampled_from([None, "t1"])),
                     "user": draw(st.sampled_from([None, "", "u1", "u2"]))})
        limits.append(draw(st.sampled_from([None, 240.0, 3540.0, 7200.0, 43140.0, 1e6])))
    return _with_limits(schedule(rows), limits)


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


def _trace(s: pl.DataFrame) -> TraceArrays:
    pools = tuple(sorted(set(s["pool"].to_list())))
    return TraceArrays.build(
        s["job_id"].to_numpy(), s["submit_time"].to_numpy(), s["duration"].to_numpy(),
        s["num_gpus"].to_numpy(), np.array([pools.index(p) for p in s["pool"].to_list()]),
        np.array(s["tag"].to_list(), dtype=object), pools, np.full(len(pools), 4),
        user=np.array(s["user"].to_list(), dtype=object),
        time_limit=s["time_limit"].to_list())


@settings(max_examples=60, deadline=None)
@given(limited_schedules(), st.integers(1, 4))
def test_online_equals_offline_with_limits(s, stride):
    """The forecaster's incremental rows (limits from the replay's TraceArrays) equal the batch
    rows bit for bit, the limit columns included."""
    s = s.sort("submit_time", "job_id")
    limits = has_limits(s)
    trace = _trace(s)
    view = _ReplayView(trace, s["end_time"].to_numpy())
    online = OnlineSubmissionFeatures(limits=limits)
    times = np.unique(np.concatenate([s["submit_time"].to_numpy(), s["end_time"].to_numpy()]))
    for now in times[::stride].tolist() + [float(times[-1])]:
        view.advance(now)
        online.update(view)
    got = online.rows(np.arange(s.height))
    want = submission_features(s, limits=limits).select(feature_names(limits)).to_numpy()
    np.testing.assert_array_equal(got, want)


@settings(max_examples=40, deadline=None)
@given(limited_schedules())
def test_nothing_after_submission_is_used_with_limits(s):
    """Changing what ends after a job's submission (durations, limits of later jobs) never
    changes that job's limit features."""
    f = submission_features(s, limits=True)
    for job in s["job_id"].to_list()[:5]:
        t = s.filter(pl.col("job_id") == job)["submit_time"][0]
        later = s.with_columns(
            duration=pl.when(pl.col("end_time") > t).then(pl.col("duration") * 3 + 1)
            .otherwise(pl.col("duration")),
            end_time=pl.when(pl.col("end_time") > t).then(pl.col("end_time") + 1e6)
            .otherwise(pl.col("end_time")),
            time_limit=pl.when((pl.col("end_time") > t) & (pl.col("job_id") != job))
            .then(pl.col("time_limit") * 2).otherwise(pl.col("time_limit")))
        a, b = _row(f, job), _row(submission_features(later, limits=True), job)
        for c in LIMIT_COLUMNS:
            assert a[c] == b[c] or (np.isnan(a[c]) and np.isnan(b[c])), (job, c)


def test_fits_columns_use_the_grace():
    s = _with_limits(schedule([{"id": "a", "submit": 0, "start": 0, "end": 10}] * 1),
                     [300.0 - TIME_LIMIT_GRACE_S + 1.0])
    a = _row(submission_features(s), "a")
    assert a["limit_fits_5m"] == 0.0 and a["limit_fits_60m"] == 1.0
