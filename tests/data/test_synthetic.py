"""The synthetic generator against SIA Appendix A.1 / C."""

from __future__ import annotations

import math

import polars as pl
import pytest
from scipy import stats
from sia.data.errors import ConfigError
from sia.data.schema import check_jobs
from sia.data.synthetic import (
    VARIANTS,
    WorkloadSpec,
    burst_rate_per_s,
    expected_burst_width,
    generate_workload,
    mean_duration_s,
    variant_spec,
)

MIN = 60.0
DAYS = 60.0


@pytest.fixture(scope="module")
def long_base():
    """60 days of the base workload with 8 pools (about 16k jobs)."""
    return generate_workload("base", seed=11, days=DAYS, num_pools=8)


def test_base_shape_and_contract():
    jobs, pools = generate_workload()
    check_jobs(jobs)
    assert pools["pool"].to_list() == ["q0", "q1", "q2", "q3"]
    assert pools["quota_gpus"].to_list() == [8, 8, 8, 8]
    assert set(jobs["pool"].unique()) <= set(pools["pool"])
    assert jobs["job_id"].str.contains(r"^p\d+-\d{6}$").all()
    assert jobs["tag"].is_null().all() and jobs["user"].is_null().all()
    assert jobs["submit_time"].min() >= 0 and jobs["submit_time"].max() < 3 * 86_400
    assert pools["target_load"].is_between(0.6, 0.95).all()
    assert jobs["submit_time"].is_sorted()


def test_width_frequencies_match_spec(long_base):
    jobs, _ = long_base
    n = jobs.height
    freq = dict(jobs["num_gpus"].value_counts().iter_rows())
    assert set(freq) <= {1, 2, 4, 8}
    for w, p in zip((1, 2, 4, 8), (0.7, 0.1, 0.15, 0.05), strict=True):
        sd = math.sqrt(p * (1 - p) / n)
        assert abs(freq.get(w, 0) / n - p) < 5 * sd, (w, freq.get(w, 0) / n, p)


def test_duration_modes_and_bounds(long_base):
    jobs, _ = long_base
    d_min = jobs["duration"].to_numpy() / MIN
    assert d_min.min() >= math.sqrt(10) and d_min.max() <= 1000
    short = d_min[d_min <= 100]
    long = d_min[d_min > 100]
    n = d_min.size
    assert abs(short.size / n - 0.8) < 5 * math.sqrt(0.16 / n)
    # Each mode is uniform on its interval.
    lo = math.sqrt(10)
    assert stats.kstest(short, stats.uniform(lo, 100 - lo).cdf).pvalue > 1e-3
    assert stats.kstest(long, stats.uniform(100, 900).cdf).pvalue > 1e-3


def test_achieved_load_matches_target_over_long_horizon(long_base):
    jobs, pools = long_base
    achieved = (
        jobs.group_by("pool")
        .agg((pl.col("duration") * pl.col("num_gpus")).sum().alias("gs"))
        .join(pools, on="pool")
        .with_columns((pl.col("gs") / (DAYS * 86_400 * pl.col("quota_gpus"))).alias("load"))
    )
    ratio = achieved["load"] / achieved["target_load"]
    assert (ratio.is_between(0.75, 1.25)).all(), achieved
    total = achieved["gs"].sum() / (DAYS * 86_400 * 8)
    assert abs(total / pools["target_load"].sum() - 1) < 0.08


def test_bursts_fill_their_drawn_total(long_base):
    """Before its last job, a burst's total is below its target (<= pool size)."""
    jobs, _ = long_base
    bursts = jobs.sort(["pool", "burst", "job_id"]).group_by(["pool", "burst"]).agg(
        pl.col("num_gpus").sum().alias("total"),
        pl.col("num_gpus").last().alias("last"),
        pl.col("submit_time").n_unique().alias("times"),
    )
    assert (bursts["times"] == 1).all()  # a burst arrives at one instant
    assert ((bursts["total"] - bursts["last"]) <= 7).all()
    assert bursts["total"].min() >= 1
    mean_total = bursts["total"].mean()
    assert abs(mean_total / expected_burst_width(WorkloadSpec(), 8) - 1) < 0.05


def test_expected_burst_width_hand_cases():
    only_ones = WorkloadSpec(width_probs=(1.0, 0.0, 0.0, 0.0))
    assert expected_burst_width(only_ones, 8) == pytest.approx(4.5)
    assert expected_burst_width(WorkloadSpec(), 1) == pytest.approx(1.0)
    # pool of 2: widths {1, 2} with p .875/.125; f(1) = 1.125, f(2) = .875 * 2.125 + .25
    assert expected_burst_width(WorkloadSpec(), 2) == pytest.approx((1.125 + 2.109375) / 2)


def test_rate_gives_the_target_load():
    spec = WorkloadSpec()
    rate = burst_rate_per_s(spec, 8, 0.8)
    assert rate * expected_burst_width(spec, 8) * mean_duration_s(spec) / 8 == pytest.approx(0.8)


def test_duration_means_are_equal_across_skews():
    means = [mean_duration_s(variant_spec(v)) / MIN
             for v in ("base", "more-duration-skew", "less-duration-skew")]
    assert max(means) - min(means) < 1.0
    assert means[0] == pytest.approx(0.8 * (math.sqrt(10) + 100) / 2 + 0.2 * 550)


def test_determinism():
    a, pa = generate_workload("base", seed=5)
    b, pb = generate_workload("base", seed=5)
    c, _ = generate_workload("base", seed=6)
    assert a.equals(b) and pa.equals(pb)
    assert not a.equals(c)


def test_more_queues_extends_base_pools():
    base, bp = generate_workload("base", seed=2)
    more, mp = generate_workload("more-queues", seed=2)
    assert mp.height == 8 and bp.height == 4
    assert mp.head(4)["target_load"].to_list() == bp["target_load"].to_list()
    assert more.filter(pl.col("pool") == "q0").equals(base.filter(pl.col("pool") == "q0"))


@pytest.mark.parametrize("variant", list(VARIANTS))
def test_every_variant_generates(variant):
    jobs, pools = generate_workload(variant, seed=1, days=20)
    check_jobs(jobs)
    assert jobs.height > 0
    expected_pools = {"more-queues": 8, "fewer-queues": 2}.get(variant, 4)
    assert pools.height == expected_pools
    base_loads = generate_workload("base", seed=1, days=1, num_pools=expected_pools)[1]
    factor = {"higher-load": 1.05, "lower-load": 0.75}.get(variant, 1.0)
    assert pools["target_load"].to_list() == pytest.approx(
        (base_loads["target_load"] * factor).to_list())
    d = jobs["duration"] / MIN
    top = {"more-duration-skew": 2000, "less-duration-skew": 300}.get(variant, 1000)
    assert d.min() >= math.sqrt(10) and d.max() <= top
    assert set(jobs["num_gpus"].unique()) <= {1, 2, 4, 8}


def test_variant_width_skews_show():
    wide, _ = generate_workload("more-wide-jobs", seed=1, days=20)
    narrow, _ = generate_workload("fewer-wide-jobs", seed=1, days=20)
    assert (wide["num_gpus"] == 8).mean() > 0.2
    assert (narrow["num_gpus"] == 1).mean() > 0.85


def test_more_duration_skew_reaches_past_1000_minutes():
    jobs, _ = generate_workload("more-duration-skew", seed=1, days=30)
    assert (jobs["duration"] / MIN > 1000).any()


def test_small_pools_never_get_wider_jobs():
    jobs, pools = generate_workload("more-wide-jobs", seed=0, days=10, pool_gpus=4)
    assert jobs["num_gpus"].max() <= 4
    assert pools["quota_gpus"].to_list() == [4] * 4


def test_bad_arguments():
    with pytest.raises(ConfigError, match="unknown synthetic variant 'nope'"):
        generate_workload("nope")
    with pytest.raises(ConfigError, match="days"):
        generate_workload(days=0)
