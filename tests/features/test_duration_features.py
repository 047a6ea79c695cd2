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
                     "tag": draw(st.sampled_from([None, "t1", "t2"])),
                     "user": draw(st.sampled_from([None, "", "u1", "u2"]))})
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
    """The forecaster's incremental rows equal the batch rows for the same schedule (tags and
    users included: the replay's trace carries both)."""
    s = s.sort("submit_time", "job_id")
    pools = tuple(sorted(set(s["pool"].to_list())))
    trace = TraceArrays.build(
        s["job_id"].to_numpy(), s["submit_time"].to_numpy(), s["duration"].to_numpy(),
        s["num_gpus"].to_numpy(), np.array([pools.index(p) for p in s["pool"].to_list()]),
        np.array(s["tag"].to_list(), dtype=object), pools, np.full(len(pools), 4),
        user=np.array(s["user"].to_list(), dtype=object))
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


def _fed_one_by_one(s: pl.DataFrame) -> np.ndarray:
    """The definition: SubmissionFeatures fed the completions and submissions one event at a
    time (completions first at equal times, then by row), rows in (submit_time, job_id) order."""
    import sia.features.duration_features as df

    s = s.sort("submit_time", "job_id")
    n = s.height
    keys = {c: ([None if v is None or v == "" else v for v in s[c].to_list()]
                if c in s.columns else [None] * n) for c in ("tag", "user")}
    end = s["end_time"].fill_null(np.inf).fill_nan(np.inf).to_list()
    events = sorted([(e, 0, i) for i, e in enumerate(end) if np.isfinite(e)]
                    + [(t, 1, i) for i, t in enumerate(s["submit_time"].to_list())])
    builder = df.SubmissionFeatures()
    out = np.full((n, len(DURATION_FEATURES)), np.nan)
    pool, gpus, dur = s["pool"].to_list(), s["num_gpus"].to_list(), s["duration"].to_list()
    for t, kind, i in events:
        args = (keys["tag"][i], keys["user"][i], pool[i], gpus[i])
        if kind == 0:
            builder.complete(*args, dur[i])
        else:
            out[i] = builder.submit(t, *args)
    return out


def test_batch_rows_by_hand_ties_missing_ends_and_empty_keys():
    """Two jobs end exactly at a third's submission (both count); one never ends; an empty tag
    is no tag; the median of an even count is the mean of the middle two."""
    s = schedule([
        {"id": "a", "submit": 0, "start": 0, "end": 100, "gpus": 1, "tag": "x"},
        {"id": "b", "submit": 0, "start": 0, "end": 100.5, "gpus": 1, "tag": ""},
        {"id": "c", "submit": 100.5, "start": 100.5, "end": 200, "gpus": 1, "tag": "x"},
        {"id": "d", "submit": 100.5, "start": 100.5, "end": 10**6, "gpus": 2},
        {"id": "e", "submit": 5000, "start": 5000, "end": 5001, "gpus": 1},
    ]).with_columns(end_time=pl.when(pl.col("job_id") == "d").then(None)
                    .otherwise(pl.col("end_time")))
    f = submission_features(s)
    c = _row(f, "c")
    assert c["pool_count"] == 2 and c["pool_median_s"] == 100.25 and c["pool_last_s"] == 100.5
    assert c["tag_count"] == 1 and c["tag_q90_s"] == 100.0  # b's empty tag is no tag
    assert c["pool_subs_5m"] == 2 and c["since_pool_sub_s"] == 100.5
    d = _row(f, "d")  # submitted with c, after it in row order: c is one of its earlier ones
    assert d["pool_subs_5m"] == 3 and d["since_pool_sub_s"] == 0.0
    assert d["pool_same_width_60m"] == 0 and d["log2_gpus"] == 1.0
    assert np.isnan(d["tag_median_s"]) and d["tag_count"] == 0
    e = _row(f, "e")  # d never ends: a, b, c finished
    assert e["pool_count"] == 3 and e["pool_median_s"] == 100.0 and e["pool_last_s"] == 99.5
    # 99.5, 100, 100.5: the 90th percentile is at 0.9 * 2 = 1.8, between 100 and 100.5
    assert e["pool_q90_s"] == 100.0 + (100.5 - 100.0) * (0.9 * 2 - 1) and e["pool_le5m"] == 1.0
    np.testing.assert_array_equal(f.select(DURATION_FEATURES).to_numpy(), _fed_one_by_one(s))


@st.composite
def tied_schedules(draw):
    """Schedules with many ties: shared submissions, ends on submissions, missing ends."""
    n = draw(st.integers(1, 40))
    times = st.sampled_from([0.0, 0.5, 300.0, 300.5, 3600.0, 3900.0, 86400.0, 90000.0])
    rows = []
    for i in range(n):
        submit = draw(times)
        wait = draw(st.sampled_from([0.0, 0.5, 299.5, 3300.0]))
        dur = draw(st.sampled_from([0.5, 1.0, 299.5, 300.0, 300.5, 3600.0, 43200.0, 50000.0]))
        rows.append({"id": f"j{draw(st.integers(0, 10**6)):07d}-{i}",
                     "pool": draw(st.sampled_from(["p", "q"])), "submit": submit,
                     "start": submit + wait, "end": submit + wait + dur,
                     "gpus": draw(st.sampled_from([1, 2, 3])),
                     "tag": draw(st.sampled_from([None, "", "t1", "t2"]))})
    s = schedule(rows)
    users = draw(st.lists(st.sampled_from([None, "", "u1", "u2"]), min_size=n, max_size=n))
    lost = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    return s.with_columns(user=pl.Series(users, dtype=pl.String),
                          end_time=pl.when(pl.Series(lost)).then(None)
                          .otherwise(pl.col("end_time")))


@settings(max_examples=150, deadline=None)
@given(tied_schedules(), st.integers(1, 6))
def test_batch_rows_equal_the_builder_fed_one_event_at_a_time(s, recent):
    """submission_features computes all rows at once; the builder one event at a time: the
    same floats, bit for bit, any ties, any recent window."""
    import sia.features.duration_features as df

    old = df.RECENT_JOBS
    df.RECENT_JOBS = recent
    try:
        got = submission_features(s.sample(fraction=1.0, shuffle=True, seed=1))
        want = _fed_one_by_one(s)
    finally:
        df.RECENT_JOBS = old
    assert got["job_id"].to_list() == s.sort("submit_time", "job_id")["job_id"].to_list()
    np.testing.assert_array_equal(got.select(DURATION_FEATURES).to_numpy(), want)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 300), min_size=1, max_size=80), st.data())
def test_kth_smallest_of_slices_equals_sorting_them(values, data):
    from sia.features.duration_features import _KthSmallest

    v = np.array(values)
    kth = _KthSmallest(v)
    queries = data.draw(st.lists(st.tuples(st.integers(0, v.size - 1), st.integers(1, v.size),
                                           st.integers(0, v.size)), min_size=1, max_size=20))
    lo, hi, k = [], [], []
    for a, length, j in queries:
        b = min(v.size, a + length)
        lo.append(a), hi.append(b), k.append(j % (b - a))
    got = kth.query(np.array(lo), np.array(hi), np.array(k))
    want = [np.sort(v[a:b])[j] for a, b, j in zip(lo, hi, k, strict=True)]
    np.testing.assert_array_equal(got, want)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.sampled_from([0.5, 300.0, 300.5, 3600.0, 3600.5, 43200.0, 43200.5, 1e6,
                                 float("nan"), float("inf")]), max_size=30),
       st.integers(1, 4))
def test_a_groups_recent_shares_are_counted_over_its_last_durations(durations, recent):
    """The incremental counts of the last RECENT_JOBS durations fitting each edge (d <= edge;
    NaN fits none) equal counting them again, edges themselves included."""
    import sia.features.duration_features as df

    old = df.RECENT_JOBS
    df.RECENT_JOBS = recent
    try:
        group = df._Group()
        for i, d in enumerate(durations):
            group.add(d)
            last = durations[max(0, i + 1 - recent):i + 1]
            want = [sum(x <= e for x in last) / len(last) for e in df._EDGES]
            assert list(group.stats()[-len(df._EDGES):]) == want, (durations[:i + 1], recent)
    finally:
        df.RECENT_JOBS = old


def test_refresh_reads_the_look_alikes_finished_since_and_records_nothing():
    import sia.features.duration_features as df

    names = df.feature_names(limits=True)
    col = {n: i for i, n in enumerate(names)}
    b, twin = df.SubmissionFeatures(limits=True), df.SubmissionFeatures(limits=True)
    row = b.submit(100.0, None, "u", "P", 2, 3600.0)
    twin.submit(100.0, None, "u", "P", 2, 3600.0)
    assert row[col["pool_gpus_count"]] == 0 and np.isnan(row[col["user_use_median"]])
    # a look-alike (same user, pool and width) ends after 30 s, having used 30 / 3600 of its limit
    b.complete(None, "u", "P", 2, 30.0, 3600.0)
    now = b.refresh(row, None, "u", "P", 2, 3600.0)
    assert now[col["pool_gpus_count"]] == 1 and now[col["pool_gpus_median_s"]] == 30.0
    assert now[col["user_recent_le5m"]] == 1.0 and now[col["pool_le5m"]] == 1.0
    assert now[col["user_use_median"]] == 30.0 / 3600.0
    assert now[col["limit_x_user_use_median_s"]] == 30.0
    # the submission's own columns stay: burst, calendar, the limit itself
    keep = [col[c] for c in (*df.BURST_COLUMNS, *df.CALENDAR_COLUMNS, "limit_log_s",
                             "limit_fits_60m")]
    np.testing.assert_array_equal(now[keep], row[keep])
    assert row[col["pool_gpus_count"]] == 0  # the submitted row is not changed
    # nothing recorded: the next submission sees what it would have without the refresh
    twin.complete(None, "u", "P", 2, 30.0, 3600.0)
    np.testing.assert_array_equal(b.submit(200.0, None, "u", "P", 2, 3600.0),
                                  twin.submit(200.0, None, "u", "P", 2, 3600.0))
