"""Metrics on hand-made result pairs."""

from __future__ import annotations

import math

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.data.schema import make_pools
from sia.scheduler.core.metrics import compare, per_job_metrics


def result(rows: list[tuple]) -> pl.DataFrame:
    """A result table from (job_id, pool, submit, duration, gpus, start) tuples."""
    df = pl.DataFrame(
        rows, schema=["job_id", "pool", "submit_time", "duration", "num_gpus", "start_time"],
        orient="row",
    )
    return df.with_columns(
        pl.col("submit_time", "duration", "start_time").cast(pl.Float64),
        (pl.col("start_time") + pl.col("duration")).alias("end_time"),
    )


BASE = result([
    ("a", "p", 0.0, 10.0, 1, 0.0),    # JCT 10
    ("b", "p", 100.0, 10.0, 2, 130.0),  # JCT 40
    ("c", "q", 200.0, 20.0, 1, 200.0),  # JCT 20
    ("d", "q", 300.0, 10.0, 1, 300.0),  # JCT 10
])
POLICY = result([
    ("a", "p", 0.0, 10.0, 1, 0.0),      # same
    ("b", "p", 100.0, 10.0, 2, 100.0),  # JCT 10: speedup 4
    ("c", "q", 200.0, 20.0, 1, 200.5),  # ends 0.5 s later: speedup 20/20.5, NOT slowed
    ("d", "q", 300.0, 10.0, 1, 390.0),  # ends 90 s later: speedup 0.1, slowed 1.5 min
])


def test_per_job_speedup_and_slowed_threshold():
    pj = per_job_metrics(POLICY, BASE)
    assert pj["job_id"].to_list() == ["a", "b", "c", "d"]
    assert pj["speedup"].to_list() == pytest.approx([1.0, 4.0, 20 / 20.5, 0.1])
    assert pj["slowed"].to_list() == [False, False, False, True]
    assert pj["slowdown_min"].to_list() == pytest.approx([0.0, 0.0, 0.0, 1.5])
    assert pj["queue_delay"].to_list() == [0.0, 0.0, 0.5, 90.0]


def test_slowed_only_beyond_one_second():
    base = result([("x", "p", 0.0, 10.0, 1, 0.0), ("y", "p", 0.0, 10.0, 1, 0.0)])
    pol = result([("x", "p", 0.0, 10.0, 1, 1.0), ("y", "p", 0.0, 10.0, 1, 1.001)])
    assert per_job_metrics(pol, base)["slowed"].to_list() == [False, True]


def test_summary_without_warmup():
    _, s = compare(POLICY, BASE, warmup_s=0.0)
    sp = [1.0, 4.0, 20 / 20.5, 0.1]
    assert s["n_jobs"] == 4
    assert s["mean_speedup"] == pytest.approx(sum(sp) / 4)
    assert s["geomean_speedup"] == pytest.approx(math.prod(sp) ** 0.25)
    assert s["pct_slowed"] == pytest.approx(25.0)
    assert s["total_slowdown_min"] == pytest.approx(1.5)
    assert s["max_slowdown_min"] == pytest.approx(1.5)
    assert s["mean_queue_delay_s"] == pytest.approx((0 + 0 + 0.5 + 90) / 4)
    assert s["mean_queue_delay_baseline_s"] == pytest.approx(30 / 4)
    assert s["per_pool"]["p"]["geomean_speedup"] == pytest.approx(2.0)
    assert s["per_pool"]["q"]["geomean_speedup"] == pytest.approx(math.sqrt(20 / 20.5 * 0.1))
    # numpy's default (linear) percentiles of the four speedups
    ordered = sorted(sp)
    assert s["p5_speedup"] == pytest.approx(ordered[0] + 0.15 * (ordered[1] - ordered[0]))
    assert s["p95_speedup"] == pytest.approx(ordered[2] + 0.85 * (ordered[3] - ordered[2]))


def test_warmup_cut_is_measured_from_first_submission():
    shifted_p = POLICY.with_columns(pl.col("submit_time", "start_time", "end_time") + 1000.0)
    shifted_b = BASE.with_columns(pl.col("submit_time", "start_time", "end_time") + 1000.0)
    jobs, s = compare(shifted_p, shifted_b, warmup_s=200.0)
    assert jobs["job_id"].to_list() == ["c", "d"]  # submitted at 1200 and 1300 >= 1000 + 200
    assert s["n_jobs"] == 2 and s["n_jobs_total"] == 4
    assert s["geomean_speedup"] == pytest.approx(math.sqrt(20 / 20.5 * 0.1))
    assert set(s["per_pool"]) == {"q"}


def test_utilization_and_demand_to_supply_over_the_window():
    pools = make_pools({"p": 2, "q": 2})
    _, s = compare(POLICY, BASE, warmup_s=100.0, pools=pools)
    # window [100, 300] (last submission at 300), 200 s x 4 GPUs = 800 GPU-s.
    assert s["window_s"] == 200.0
    # policy busy inside it: b 2x10, c [200.5, 220.5) 1x20 -> 40 GPU-s
    assert s["utilization"] == pytest.approx(40 / 800)
    # baseline: b [130, 140) 2x10, c [200, 220) 20 -> 40 GPU-s
    assert s["utilization_baseline"] == pytest.approx(40 / 800)
    # counted jobs b, c, d: p requests 20 GPU-s, q 20 + 10
    assert s["per_pool"]["p"]["demand_to_supply"] == pytest.approx(20 / (2 * 200))
    assert s["per_pool"]["q"]["demand_to_supply"] == pytest.approx(30 / (2 * 200))
    assert s["per_pool"]["q"]["quota_gpus"] == 2


def test_all_jobs_in_warmup_gives_empty_summary_not_a_crash():
    jobs, s = compare(POLICY, BASE, warmup_s=10_000.0)
    assert jobs.height == 0 and s["n_jobs"] == 0
    assert s["mean_speedup"] is None and s["geomean_speedup"] is None
    assert s["total_slowdown_min"] == 0.0


def test_mismatched_tables_are_clear_errors():
    with pytest.raises(ConfigError, match="result has 3 jobs but the baseline 4"):
        compare(POLICY.head(3), BASE)
    other = BASE.with_columns(pl.when(pl.col("job_id") == "b").then(pl.lit("z"))
                              .otherwise(pl.col("job_id")).alias("job_id"))
    with pytest.raises(ConfigError, match="job 'b' is in the result but not in the baseline"):
        compare(POLICY, other)
    moved = BASE.with_columns(pl.col("submit_time") + 1.0)
    with pytest.raises(ConfigError, match="submitted at"):
        compare(POLICY, moved)
    with pytest.raises(ConfigError, match="never started"):
        compare(POLICY.with_columns(pl.lit(None, dtype=pl.Float64).alias("start_time")), BASE)
