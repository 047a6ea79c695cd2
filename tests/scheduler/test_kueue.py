"""The Kueue-style baseline: admission within quota, borrowing, reclaim of the newest borrowers."""

from __future__ import annotations

import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.scheduler.core.metrics import compare
from sia.scheduler.core.simulator import PreemptionConfig, simulate
from sia.scheduler.registry import make_policy

COST = PreemptionConfig(checkpoint_s=1800.0, restart_delay_s=120.0)


def table(rows: list[tuple]) -> pl.DataFrame:
    """Jobs from (job_id, pool, submit_time, duration, num_gpus, preemptible) tuples."""
    cols = ["job_id", "pool", "submit_time", "duration", "num_gpus", "preemptible"][:len(rows[0])]
    return validate(pl.DataFrame(rows, schema=cols, orient="row"))[0]


def run(rows, quotas, **options) -> tuple[dict[str, dict], object]:
    pol = make_policy("kueue", **options)
    res = simulate(table(rows), make_pools(quotas), pol, preemption=COST, check_invariants=True)
    return {r["job_id"]: r for r in res.iter_rows(named=True)}, pol


# Pools a and b, 4 GPUs each. b0 (4 GPUs, 10000 s) fills b's quota at 0; b1 and b2 (2 GPUs
# each, 5000 s) arrive at 1 and 2 and borrow a's idle quota (b1 first). At 100, a1 (2 GPUs)
# needs a's quota back: the newest borrower, b2, is evicted (98 s since its start, no
# checkpoint yet: 98 s lost, + 120 s restart) and a1 starts at once; b1 keeps running.
# b2 goes back to b's queue; b's quota is full and a has 0 idle GPUs left: it waits until b1
# ends at 5001, then borrows again and runs 5000 - 98 + 98 + 120 = 5120 s: ends 10121.
RECLAIM = [("b0", "b", 0.0, 10000.0, 4, False), ("b1", "b", 1.0, 5000.0, 2, False),
           ("b2", "b", 2.0, 5000.0, 2, False), ("a1", "a", 100.0, 300.0, 2, False)]


def test_reclaim_evicts_the_newest_borrower_first():
    res, pol = run(RECLAIM, {"a": 4, "b": 4})
    assert res["b1"]["start_time"] == 1.0 and res["b1"]["opportunistic"]
    assert res["b1"]["preemptions"] == 0
    assert res["b2"]["start_time"] == 2.0 and res["b2"]["preemptions"] == 1
    assert res["b2"]["wasted_gpu_s"] == 2 * (98.0 + 120.0)
    assert res["a1"]["start_time"] == 100.0 and not res["a1"]["opportunistic"]
    # a1 ends at 400, which frees 2 of a's GPUs: b2 borrows them again at once
    assert res["b2"]["end_time"] == 400.0 + 5000.0 - 98.0 + 98.0 + 120.0
    assert pol.stats == {"admitted": 2, "borrowed": 3, "evictions": 1}  # b1, b2, b2 again


def test_reclaim_takes_only_the_borrowers_it_needs():
    # a1 needs 1 GPU: of the two borrowers (2 GPUs each) only the newest goes
    rows = RECLAIM[:3] + [("a1", "a", 100.0, 300.0, 1, False)]
    res, _ = run(rows, {"a": 4, "b": 4})
    assert res["b2"]["preemptions"] == 1 and res["b1"]["preemptions"] == 0


def test_owner_waits_when_borrowers_cannot_cover_it():
    # a's own borrower (a2, beyond a's quota) is not evicted for a's head: Kueue reclaims
    # within the cohort only from other queues; the head waits for its quota
    rows = [("a0", "a", 0.0, 1000.0, 2, False), ("a2", "a", 1.0, 1000.0, 2, False),
            ("a3", "a", 5.0, 100.0, 2, False)]
    res, pol = run(rows, {"a": 2, "b": 2})
    assert res["a2"]["opportunistic"] and res["a2"]["preemptions"] == 0
    assert res["a3"]["start_time"] == 1000.0  # a0's end frees a's quota
    assert pol.stats["evictions"] == 0


def test_borrow_order_is_oldest_submission_first_across_pools():
    # b's head (submitted at 1) borrows before c's (submitted at 2): only one fits a's 2 GPUs
    rows = [("b0", "b", 0.0, 1000.0, 2, False), ("c0", "c", 0.0, 1000.0, 2, False),
            ("c1", "c", 2.0, 500.0, 2, False), ("b1", "b", 1.0, 500.0, 2, False)]
    res, _ = run(rows, {"a": 2, "b": 2, "c": 2})
    assert res["b1"]["start_time"] == 1.0 and res["b1"]["opportunistic"]
    assert res["c1"]["start_time"] == 501.0


def test_evict_preemptible_lets_only_preemptible_jobs_borrow():
    rows = [("b0", "b", 0.0, 1000.0, 2, False), ("b1", "b", 1.0, 500.0, 2, False),
            ("b2", "b", 2.0, 500.0, 2, True)]
    anyone, _ = run(rows, {"a": 2, "b": 2})
    assert anyone["b1"]["opportunistic"] and anyone["b1"]["start_time"] == 1.0
    only, _ = run(rows, {"a": 2, "b": 2}, evict="preemptible")
    # b1 may not borrow and, StrictFIFO, blocks b2 behind it until b0 ends at 1000; then b1
    # takes b's quota and b2, preemptible, borrows a's idle GPUs
    assert only["b1"]["start_time"] == 1000.0 and not only["b1"]["opportunistic"]
    assert only["b2"]["start_time"] == 1000.0 and only["b2"]["opportunistic"]
    with pytest.raises(ConfigError, match="evict"):
        make_policy("kueue", evict="some")


@st.composite
def small_traces(draw):
    n_pools = draw(st.integers(2, 3))
    quotas = {f"p{i}": draw(st.integers(1, 4)) for i in range(n_pools)}
    rows = []
    for i in range(draw(st.integers(1, 18))):
        pool = f"p{draw(st.integers(0, n_pools - 1))}"
        rows.append((f"j{i:03d}", pool, float(draw(st.integers(0, 40)) * 150),
                     draw(st.sampled_from([60.0, 200.0, 900.0, 2000.0, 5000.0])),
                     draw(st.integers(1, quotas[pool])), draw(st.booleans())))
    return rows, quotas


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(trace=small_traces(), evict=st.sampled_from(["any", "preemptible"]))
def test_kueue_replays_every_job_and_charges_every_eviction(trace, evict):
    rows, quotas = trace
    jobs, pools = table(rows), make_pools(quotas)
    pol = make_policy("kueue", evict=evict)
    res = simulate(jobs, pools, pol, preemption=COST, check_invariants=True)
    assert res["end_time"].is_not_null().all()
    assert int(res["preemptions"].sum()) == pol.stats["evictions"]
    # each eviction costs at least the restart delay, on the evicted job's GPUs
    waste = res.filter(pl.col("preemptions") > 0)
    assert (waste["wasted_gpu_s"] >= waste["preemptions"] * waste["num_gpus"] * 120.0).all()
    if evict == "preemptible":  # only preemptible jobs borrowed, so only they are evicted
        assert res.filter(pl.col("opportunistic") & ~pl.col("preemptible")).height == 0
        assert res.filter((pl.col("preemptions") > 0) & ~pl.col("preemptible")).height == 0
    base = simulate(jobs, pools, make_policy("fcfs"), preemption=COST)
    compare(res, base, warmup_s=0.0)  # a complete, comparable replay
