"""Figure 16 pipeline (locality) end to end on a tiny config, and its config errors."""

from __future__ import annotations

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.data.synthetic import generate_workload
from sia.pipelines.cli import main
from sia.pipelines.figure16 import load_figure16_config
from sia.scheduler.locality import LocalityConfig, simulate_cells
from sia.scheduler.metrics import compare
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
    assert set(zip(main_t["policy"], main_t["locality"], strict=True)) == {
        ("sia-perfect", True), ("hived", True), ("sia-perfect", False),
        ("sia-perfect+preempt", True), ("sia-learned", True)}
    # the sia-perfect row is exactly metrics.compare against FCFS on the same cells
    jobs, pools = generate_workload("fewer-queues", seed=3, days=1.5)
    pools = pools.select("pool", "quota_gpus")
    base, _ = simulate_cells(jobs, pools, make_policy("fcfs"), LocalityConfig())
    res, _ = simulate_cells(jobs, pools, make_policy("sia-perfect"), LocalityConfig())
    _, s = compare(res, base, warmup_s=0)
    row = main_t.filter((pl.col("policy") == "sia-perfect") & pl.col("locality")).row(0, named=True)
    assert row["geomean_speedup"] == pytest.approx(s["geomean_speedup"])
    assert row["pct_slowed"] == pytest.approx(s["pct_slowed"])
    chains = pl.read_csv(out / "chains.csv")
    assert chains["chain"].to_list() == ["buddy", "buddy+hungarian"]
    assert chains.filter(pl.col("chain") == "buddy")["placed_fallback"].item() == 0


def test_figure16_config_errors_name_the_problem(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("variants: [base]\nseedz: [1]\n")
    with pytest.raises(ConfigError, match="unknown key.*seedz"):
        load_figure16_config(bad)
    bad.write_text("chains: ['buddy,simplex']\n")
    with pytest.raises(ConfigError, match="unknown stage 'simplex'"):
        load_figure16_config(bad)
    bad.write_text("locality: {preemptible_fraction: 2}\n")
    with pytest.raises(ConfigError, match="preemptible_fraction"):
        load_figure16_config(bad)
    assert main(["figure16", str(tmp_path / "missing.yaml")]) == 2


def test_shipped_figure16_config_loads():
    from sia.pipelines.cmd_figure16 import DEFAULT_CONFIG

    cfg = load_figure16_config(DEFAULT_CONFIG)
    assert cfg.variants == ("fewer-queues", "base", "more-queues")
    assert ("buddy", "milp") in cfg.chains and cfg.chain_locality == {"spare_full_pools": False}
