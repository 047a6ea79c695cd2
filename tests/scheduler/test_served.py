"""Predictions as served (sia.scheduler.core.served): hand cases, chunking, perfect predictions."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.synthetic import generate_workload
from sia.scheduler.core import served as served_mod
from sia.scheduler.core.served import ServedPredictions, flat_metrics, prf
from sia.scheduler.core.simulator import simulate
from sia.scheduler.core.view import TraceArrays
from sia.scheduler.registry import make_policy


def _trace(submits, pools, gpus, durations):
    n = len(submits)
    return TraceArrays.build(np.array([f"j{i}" for i in range(n)], dtype=object),
                             np.array(submits, float), np.array(durations, float),
                             np.array(gpus), np.array(pools),
                             np.array([None] * n, dtype=object), ("A", "B"), np.array([4, 4]))


def test_prf_by_hand():
    assert prf(1, 0, 1) == (1.0, 0.5, pytest.approx(2 / 3))
    assert prf(0, 0, 0) == (None, None, None)
    assert prf(0, 0, 2) == (None, 0.0, 0.0)


def test_forecasts_scored_by_hand():
    # A gets 2 GPUs at 400 s and 1 GPU at 5000 s; B nothing. Windows 300 and 3600 s.
    trace = _trace([400.0, 5000.0], [0, 0], [2, 1], [100.0, 4000.0])
    rec = ServedPredictions((300.0, 3600.0))
    rec.reset(trace)
    rec.forecast(0.0, [[False, True], [False, False]], [[0.0, 2.0], [0.0, 0.0]])
    rec.forecast(200.0, [[False, True], [False, False]], [[0.0, 1.0], [0.0, 0.0]])
    rec.forecast(4800.0, [[True, True], [False, True]], [[1.0, 1.0], [0.0, 3.0]])
    wa = rec.report()["will_arrive"]
    # 5 min: A's arrival at 400 is in (200, 500] (missed) and 5000 in (4800, 5100] (caught)
    five = wa["5m"]
    assert five["records"] == 6
    assert (five["precision"], five["recall"]) == (1.0, 0.5)
    assert five["f1"] == pytest.approx(2 / 3)
    assert five["persistence_f1"] == 0.0  # no arrival in (t - 5 min, t] at any record
    assert five["load_exceeded"] == 0.5  # 2 GPUs > 0 reserved at 200; 1 <= 1 at 4800
    assert five["load_mean_gpus"] == pytest.approx(1 / 6)
    assert five["arrived_mean_gpus"] == pytest.approx(3 / 6)
    # 1 h: A has an arrival at every record (caught 3 times), B's "yes" at 4800 is false
    hour = wa["60m"]
    assert (hour["precision"], hour["recall"]) == (0.75, 1.0)
    assert hour["f1"] == pytest.approx(6 / 7)
    assert hour["persistence_f1"] == 0.0  # (1200, 4800] holds no arrival of A either
    assert hour["load_exceeded"] == pytest.approx(1 / 3)  # only 2 GPUs > 1 reserved at 200
    assert hour["load_mean_gpus"] == pytest.approx(7 / 6)
    assert hour["arrived_mean_gpus"] == pytest.approx(5 / 6)


def test_durations_scored_by_hand():
    trace = _trace([400.0, 5000.0, 6000.0], [0, 0, 1], [2, 1, 1], [100.0, 4000.0, 2000.0])
    rec = ServedPredictions((300.0, 3600.0))
    rec.reset(trace)
    rec.considered(np.array([0, 1]), np.array([0, 2]), np.array([[0.9, 0.95], [0.1, 0.5]]))
    rec.considered(np.array([2]), np.array([1]), np.array([[0.2, 0.85]]))
    rec.lent(0, 0)
    rec.lent(2, 1)
    jd = rec.report()["job_duration"]
    five, hour = jd["5m"], jd["60m"]
    # fits 5 min: job 0 only; lendable in 5 min: job 0 only (it fits)
    assert five["jobs"] == 3 and five["fit"] == pytest.approx(1 / 3)
    assert five["lendable"] == pytest.approx(1 / 3) and five["lendable_overrun"] == 0.0
    assert five["fit_lendable"] == 1.0 and five["auc"] == 1.0
    assert (five["lent"], five["lent_overrun"]) == (1, 0.0)
    # fits 1 h: jobs 0 and 2; lendable in 1 h: jobs 0 and 2; P(<= 1 h) .95, .5, .85 ranks them
    assert hour["fit"] == pytest.approx(2 / 3) and hour["lendable"] == pytest.approx(2 / 3)
    assert hour["lendable_overrun"] == 0.0 and hour["auc"] == 1.0
    assert (hour["lent"], hour["lent_overrun"]) == (1, 0.0)
    # a loan that overran is counted as such, and the bin rule has no AUC
    rec.reset(trace)
    rec.considered(np.array([1]), np.array([0]), None)
    rec.lent(1, 0)
    five = rec.report()["job_duration"]["5m"]
    assert five["lendable_overrun"] == 1.0 and five["lent_overrun"] == 1.0 and five["auc"] is None
    assert five["fit_lendable"] is None  # no considered job fits 5 min


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 10_000), st.integers(1, 7))
def test_scoring_in_chunks_changes_nothing(seed, chunk):
    rng = np.random.default_rng(seed)
    n = 40
    submits = np.sort(rng.uniform(0, 20_000, n))
    trace = _trace(submits, rng.integers(0, 2, n), rng.integers(1, 4, n), rng.uniform(1, 9000, n))
    ticks = np.sort(rng.uniform(0, 20_000, 25))
    arrive = rng.random((25, 2, 3)) < 0.5
    load = rng.integers(0, 5, (25, 2, 3)).astype(float)

    def report(chunk_size: int) -> dict:
        old = served_mod.CHUNK
        served_mod.CHUNK = chunk_size
        try:
            rec = ServedPredictions((300.0, 3600.0, 43200.0))
            rec.reset(trace)
            for t, a, ld in zip(ticks, arrive, load, strict=True):
                rec.forecast(float(t), a, ld)
            return rec.report()
        finally:
            served_mod.CHUNK = old

    assert report(chunk) == report(10**9)


def _served_after(policy_name: str, workload_seed: int, **options) -> dict:
    jobs, pools = generate_workload("base", workload_seed, days=1.0)
    pol = make_policy(policy_name, **options)
    simulate(jobs, pools.select("pool", "quota_gpus"), pol)
    return pol.facts()["served"]


@settings(max_examples=8, deadline=None)
@given(st.integers(0, 10_000), st.sampled_from([0.0, 300.0]))
def test_perfect_predictions_are_perfect_as_served(seed, refresh):
    got = _served_after("sia-perfect", seed, refresh_s=refresh)
    assert set(got["will_arrive"]) == {"5m", "60m", "720m"}
    for scores in got["will_arrive"].values():
        assert scores["precision"] in (None, 1.0) and scores["recall"] in (None, 1.0)
        assert scores["load_exceeded"] in (None, 0.0)  # TotalNewLoad = what arrives
    for scores in got["job_duration"].values():
        assert scores["lendable_overrun"] in (None, 0.0)
        assert scores["lent_overrun"] in (None, 0.0)
        assert scores["fit_lendable"] in (None, 1.0)


def test_random_predictions_are_scored_as_random():
    """The counter-case: the strawman's coin flips miss arrivals and its bins overrun."""
    got = _served_after("sia-random-both", 3, seed=1)
    assert any(s["recall"] is not None and s["recall"] < 0.9 for s in got["will_arrive"].values())
    assert any((s["lent_overrun"] or 0.0) > 0.0 for s in got["job_duration"].values())
    assert got["will_arrive"]["60m"]["records"] > 0


def test_recording_leaves_the_schedule_alone():
    """Replaying twice with the same policy object: the record is reset, the schedule equal."""
    jobs, pools = generate_workload("base", 5, days=1.0)
    pol = make_policy("sia-perfect")
    a = simulate(jobs, pools.select("pool", "quota_gpus"), pol)
    first = pol.facts()["served"]
    b = simulate(jobs, pools.select("pool", "quota_gpus"), pol)
    assert a.equals(b) and pol.facts()["served"] == first


def test_flat_metrics_names_and_skips_missing_values():
    served = {"will_arrive": {"5m": {"f1": 0.5, "records": 3, "precision": None}},
              "job_duration": {"720m": {"auc": float("nan"), "lent": 2}}}
    assert flat_metrics(served) == {"served/will_arrive/f1_5m": 0.5,
                                    "served/will_arrive/records_5m": 3.0,
                                    "served/job_duration/lent_720m": 2.0}
    assert flat_metrics(None) == {}
