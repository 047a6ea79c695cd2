"""Point-in-time duration history: hand cases and a brute-force property."""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.errors import TraceError
from sia.features.duration_history import point_in_time_history


def _by_id(df: pl.DataFrame) -> dict[str, dict]:
    return {r["job_id"]: r for r in df.iter_rows(named=True)}


def test_only_jobs_finished_before_start_count(make_schedule):
    rows = [
        {"id": "a", "submit": 0, "start": 0, "end": 100, "tag": "x"},
        {"id": "b", "submit": 0, "start": 0, "end": 200, "tag": "x"},
        {"id": "c", "submit": 0, "start": 0, "end": 301, "tag": "x"},   # ends after d starts
        {"id": "d", "submit": 0, "start": 200, "end": 500, "tag": "x"},  # b ends exactly at 200
    ]
    h = _by_id(point_in_time_history(make_schedule(rows), min_count=2))
    assert h["d"]["hist_source"] == "tag"
    assert h["d"]["hist_count"] == 2 and h["d"]["hist_median_s"] == 150.0  # a (100), b (200)
    assert h["a"]["hist_source"] == "none" and h["a"]["hist_median_s"] is None
    assert h["a"]["hist_count"] == 0


def test_fallback_chain_tag_then_pool_gpus_then_pool(make_schedule):
    rows = [
        # finished history (all end by 1000)
        {"id": "t1", "pool": "p", "gpus": 1, "submit": 0, "start": 0, "end": 10, "tag": "x"},
        {"id": "t2", "pool": "q", "gpus": 8, "submit": 0, "start": 0, "end": 30, "tag": "x"},
        {"id": "t3", "pool": "q", "gpus": 8, "submit": 0, "start": 0, "end": 50, "tag": "x"},
        {"id": "g1", "pool": "p", "gpus": 2, "submit": 0, "start": 0, "end": 400},
        {"id": "g2", "pool": "p", "gpus": 2, "submit": 0, "start": 0, "end": 600},
        {"id": "g3", "pool": "p", "gpus": 2, "submit": 0, "start": 0, "end": 800},
        # queries, all starting at 1000
        {"id": "q_tag", "pool": "p", "gpus": 2, "submit": 0, "start": 1000, "end": 2000, "tag": "x"},
        {"id": "q_pg", "pool": "p", "gpus": 2, "submit": 0, "start": 1000, "end": 2000, "tag": "y"},
        {"id": "q_pool", "pool": "p", "gpus": 4, "submit": 0, "start": 1000, "end": 2000},
        {"id": "q_none", "pool": "r", "gpus": 1, "submit": 0, "start": 1000, "end": 2000, "tag": "x2"},
    ]
    h = _by_id(point_in_time_history(make_schedule(rows), min_count=3))
    # tag x: t1, t2, t3 (any pool): durations 10, 30, 50
    assert (h["q_tag"]["hist_source"], h["q_tag"]["hist_median_s"], h["q_tag"]["hist_count"]) == (
        "tag", 30.0, 3)
    # tag y unknown -> pool p with 2 GPUs: g1..g3: 400, 600, 800
    assert (h["q_pg"]["hist_source"], h["q_pg"]["hist_median_s"]) == ("pool_gpus", 600.0)
    # no tag, no 4-GPU history in p -> pool p: t1 (10), g1..g3 -> median of 10, 400, 600, 800
    assert (h["q_pool"]["hist_source"], h["q_pool"]["hist_median_s"], h["q_pool"]["hist_count"]) == (
        "pool", 500.0, 4)
    # pool r has no history, tag x2 has none either
    assert h["q_none"]["hist_source"] == "none"


def test_min_count_and_errors(make_schedule):
    rows = [{"id": "a", "submit": 0, "start": 0, "end": 10, "tag": "x"},
            {"id": "b", "submit": 0, "start": 20, "end": 30, "tag": "x"}]
    s = make_schedule(rows)
    assert _by_id(point_in_time_history(s, min_count=1))["b"]["hist_source"] == "tag"
    assert _by_id(point_in_time_history(s, min_count=2))["b"]["hist_source"] == "pool"
    with pytest.raises(TraceError, match="min_count"):
        point_in_time_history(s, min_count=0)
    with pytest.raises(TraceError, match="end_time"):
        point_in_time_history(s.drop("end_time"))
    assert point_in_time_history(s.head(0)).height == 0


def test_rows_follow_input_order(make_schedule):
    rows = [{"id": f"j{i}", "submit": 0, "start": 100 - i, "end": 200 + i} for i in range(5)]
    s = make_schedule(rows)
    assert point_in_time_history(s)["job_id"].to_list() == s["job_id"].to_list()


@st.composite
def _schedules(draw):
    n = draw(st.integers(1, 25))
    rows = []
    for i in range(n):
        start = draw(st.integers(0, 50))
        rows.append({
            "id": f"j{i}", "pool": draw(st.sampled_from(["p", "q"])),
            "gpus": draw(st.sampled_from([1, 2])), "tag": draw(st.sampled_from([None, "x", "y"])),
            "submit": 0, "start": start, "end": start + draw(st.integers(1, 30)),
        })
    return rows, draw(st.integers(1, 3))


@settings(max_examples=60, deadline=None)
@given(_schedules())
def test_matches_bruteforce(make_schedule, case):
    rows, min_count = case
    h = _by_id(point_in_time_history(make_schedule(rows), min_count=min_count))
    for r in rows:
        prior = [o for o in rows if o["end"] <= r["start"]]
        levels = [
            ("tag", [o for o in prior if r["tag"] is not None and o["tag"] == r["tag"]], min_count),
            ("pool_gpus", [o for o in prior if o["pool"] == r["pool"] and o["gpus"] == r["gpus"]],
             min_count),
            ("pool", [o for o in prior if o["pool"] == r["pool"]], 1),
        ]
        want = ("none", None, 0)
        for name, group, need in levels:
            if len(group) >= need:
                durs = [o["end"] - o["start"] for o in group]
                want = (name, float(np.median(durs)), len(group))
                break
        got = h[r["id"]]
        assert (got["hist_source"], got["hist_median_s"], got["hist_count"]) == want
