"""Figure 16 pipeline (locality) end to end on a tiny config, and its config errors."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.data.synthetic import generate_workload
from sia.pipelines.cli import main
from sia.pipelines.studies.figure16 import load_figure16_config
from sia.scheduler.core.metrics import compare
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import simulate_cells
from sia.scheduler.registry import make_policy

TINY = """
variants: [fewer-queues]
seeds: [3]
policies: [sia-perfect, hived, sia-learned]
no_locality_policies: [sia-perfect]
learned_train_days: 38
days: 1.5
warmup_s: 0
chains: ["buddy", "buddy,hungarian"]
chain_policy: sia-perfect
chain_variants: [fewer-queues]
preemption: {policy: sia-perfect, preemptible_fraction: 0.5, lost_work_s: 60}
"""


def test_figure16_cli_writes_tables_and_scores_against_fcfs_with_cells(tmp_path):
    cfg = tmp_path / "f16.yaml"
    cfg.write_text(TINY)
    out = tmp_path / "out"
    assert main(["figure16", str(cfg), "--out", str(out), "--workers", "1"]) == 0
    for name in ("figure16.csv", "figure16.md", "chains.csv", "chains.md", "figure16_runs.csv",
                 "figure16.png"):
        assert (out / name).stat().st_size > 0, name
    main_t = pl.read_csv(out / "figure16.csv")
    on_cells = {("sia-perfect", True), ("hived", True), ("sia-perfect+preempt", True),
                ("sia-learned", True)}
    assert set(zip(main_t["policy"], main_t["locality"], main_t["allocator"], strict=True)) == {
        *((p, loc, a) for p, loc in on_cells for a in ("adopt-loans", "no-adopt")),
        ("sia-perfect", False, "none")}
    # each sia-perfect row is exactly metrics.compare against FCFS on the same cells and allocator
    jobs, pools = generate_workload("fewer-queues", seed=3, days=1.5)
    pools = pools.select("pool", "quota_gpus")
    for alloc, adopt in (("adopt-loans", True), ("no-adopt", False)):
        loc = LocalityConfig(adopt_loans=adopt)
        base, _ = simulate_cells(jobs, pools, make_policy("fcfs"), loc)
        res, _ = simulate_cells(jobs, pools, make_policy("sia-perfect"), loc)
        _, s = compare(res, base, warmup_s=0)
        row = main_t.filter((pl.col("policy") == "sia-perfect") & pl.col("locality")
                            & (pl.col("allocator") == alloc)).row(0, named=True)
        assert row["geomean_speedup"] == pytest.approx(s["geomean_speedup"])
        assert row["pct_slowed"] == pytest.approx(s["pct_slowed"])
    wide = (out / "figure16_by_allocator.md").read_text()
    assert "| variant | policy | adopt-loans | no-adopt |" in wide
    chains = pl.read_csv(out / "chains.csv")
    assert chains["chain"].to_list() == ["buddy", "buddy+hungarian"]
    assert chains.filter(pl.col("chain") == "buddy")["placed_fallback"].item() == 0


FIGURE16_CONFIG_ERRORS = [
    ("variants: [base]\nseedz: [1]\n", "unknown key.*seedz"),
    ("chains: ['buddy,simplex']\n", "unknown stage 'simplex'"),
    ("locality: {preemptible_fraction: 2}\n", "preemptible_fraction"),
    ("allocators: {a: {adopt_loanz: true}}\n", "allocator 'a'.*adopt_loanz"),
    ("allocators: [adopt]\n", "allocators must be a non-empty mapping"),
    ("pool_gpus: many\n", "pool_gpus must be an integer"),
    ("variants: [base]\nmigration: true\n", "migration: true needs a preemption section"),
    ("variants: [base]\nmigration: maybe\n", "migration must be true or false"),
    ("policies: [sia-perfect, fungible-only]\n",
     "policies: policy 'fungible-only' does not support locality"),
    ("chain_policy: nope\n", "chain_policy: unknown policy 'nope'"),
]


@pytest.mark.parametrize(("text", "named"), FIGURE16_CONFIG_ERRORS)
def test_figure16_config_errors_name_the_problem(tmp_path, text, named, fungible_only):
    bad = tmp_path / "bad.yaml"
    bad.write_text(text)
    with pytest.raises(ConfigError, match=named):
        load_figure16_config(bad)


def test_figure16_missing_config_exits_2(tmp_path):
    assert main(["figure16", str(tmp_path / "missing.yaml")]) == 2


def test_shipped_figure16_config_loads():
    from sia.pipelines.cli.figure16 import DEFAULT_CONFIG

    cfg = load_figure16_config(DEFAULT_CONFIG)
    assert cfg.variants == ("fewer-queues", "base", "more-queues")
    assert ("buddy", "milp") in cfg.chains and cfg.chain_locality == {"spare_full_pools": False}
    assert {n: o["adopt_loans"] for n, o in cfg.allocators.items()} == {
        "adopt-loans": True, "no-adopt": False}


def test_slowdown_causes_name_the_loan_and_the_cascade():
    """b2 is lent onto the only other server; a1 then cannot bind one (root), a2 waits behind it."""
    import numpy as np
    from sia.data.schema import make_pools, validate
    from sia.pipelines.studies.figure16 import CAUSES, slowdown_causes
    from sia.scheduler.policies.sia.policy import SiaPolicy

    class Blind:  # no arrivals predicted, every job in the shortest bin: SIA lends everything
        def will_jobs_arrive(self, view, windows_s):
            return np.zeros((view.n_pools, len(windows_s)), dtype=bool)

        def new_load_estimate(self, view, windows_s):
            return np.zeros((view.n_pools, len(windows_s)))

        def duration_bins(self, view, job_indices):
            return np.zeros(len(job_indices), dtype=np.int64)

    jobs = validate(pl.DataFrame(
        [("b1", "b", 0.0, 100.0, 8), ("b2", "b", 0.0, 10_000.0, 1), ("a1", "a", 50.0, 100.0, 1),
         ("a2", "a", 60.0, 100.0, 2)],
        schema=["job_id", "pool", "submit_time", "duration", "num_gpus"], orient="row"))[0]
    pools = make_pools({"a": 8, "b": 8})
    quota = {"a": 8, "b": 8}
    for adopt, root in ((False, "loans-in-unbound-servers"), (True, None)):
        cfg = LocalityConfig(strict_buddies=False, adopt_loans=adopt)
        base, _ = simulate_cells(jobs, pools, make_policy("fcfs"), cfg)
        res, summ = simulate_cells(jobs, pools, SiaPolicy(Blind(), adaptation=False, risk=None), cfg,
                                   record_placements=True, check_invariants=True)
        causes = slowdown_causes(base, res, summ["placements"], quota, 8)
        got = dict(zip(causes["job_id"], causes["cause"], strict=True))
        if root is None:  # a binds the loan's server and starts on time: nothing of a is slowed
            assert "a1" not in got and "a2" not in got and summ["adoptions"] == 1
        else:
            assert got["a1"] == root and got["a2"] == "behind-earlier-job"
            assert causes.filter(pl.col("job_id") == "a1")["root"].item()
            assert not causes.filter(pl.col("job_id") == "a2")["root"].item()
        assert set(got.values()) <= set(CAUSES)


def test_figure16_causes_cli_writes_a_cause_per_slowed_job(tmp_path):
    from sia.pipelines.studies.figure16 import CAUSES

    cfg = tmp_path / "f16.yaml"
    cfg.write_text("variants: [fewer-queues]\nseeds: [3]\npolicies: [hived]\ndays: 1.5\n"
                   "warmup_s: 0\n")
    out = tmp_path / "out"
    assert main(["figure16", str(cfg), "--causes", "--out", str(out), "--workers", "1"]) == 0
    per_job = pl.read_csv(out / "causes_jobs.csv")
    counts = pl.read_csv(out / "causes.csv")
    assert (out / "causes.md").stat().st_size > 0
    assert set(per_job["cause"]) <= set(CAUSES) and counts["jobs"].sum() == per_job.height
    # exactly the jobs metrics.compare counts as slowed, under each default allocator setting
    jobs, pools = generate_workload("fewer-queues", seed=3, days=1.5)
    pools = pools.select("pool", "quota_gpus")
    assert set(per_job["allocator"]) == {"adopt-loans", "no-adopt"}
    for alloc, adopt in (("adopt-loans", True), ("no-adopt", False)):
        cfg_h = LocalityConfig(strict_buddies=False, adopt_loans=adopt)
        base, _ = simulate_cells(jobs, pools, make_policy("fcfs"), LocalityConfig(adopt_loans=adopt))
        res, _ = simulate_cells(jobs, pools, make_policy("hived"), cfg_h)
        _, s = compare(res, base, warmup_s=0)
        mine = per_job.filter(pl.col("allocator") == alloc)
        assert mine.height == round(s["pct_slowed"] * s["n_jobs"] / 100) > 0
