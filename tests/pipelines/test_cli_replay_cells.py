"""`sia replay --cells-option KEY=VALUE`: the parser of LocalityConfig options and a replay with preemption."""

from __future__ import annotations

import json
from dataclasses import fields

import numpy as np
import polars as pl
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.data.synthetic import generate_workload
from sia.pipelines.cli import main
from sia.pipelines.locality_options import (
    SHAPE_FIELDS,
    cells_option_types,
    options_from_cli,
    parse_cells_options,
)
from sia.scheduler.locality.config import LocalityConfig


# ----------------------------------------------------------------------------- the parser
def test_every_non_shape_field_is_an_option_with_its_type():
    types = cells_option_types()
    assert set(types) == {f.name for f in fields(LocalityConfig)} - set(SHAPE_FIELDS)
    assert types["preempt"] is bool and types["seed"] is int
    assert types["preemptible_fraction"] is float and types["migrate_for"] is tuple


@pytest.mark.parametrize(("text", "value"), [
    ("true", True), ("TRUE", True), ("1", True), ("yes", True), (" Yes ", True),
    ("false", False), ("0", False), ("no", False), ("False", False)])
def test_bool_words(text, value):
    assert parse_cells_options([f"migrate={text}"]) == {"migrate": value}


def test_int_float_and_tuple_values():
    got = parse_cells_options(["seed=7", "lost_work_s=60", "restart_delay_s=2.5e1",
                               "preemptible_fraction=.25", "migrate_for=dedicated, opportunistic"])
    assert got == {"seed": 7, "lost_work_s": 60.0, "restart_delay_s": 25.0,
                   "preemptible_fraction": 0.25, "migrate_for": ("dedicated", "opportunistic")}
    assert isinstance(got["lost_work_s"], float) and isinstance(got["seed"], int)
    assert parse_cells_options(["migrate_for=opportunistic"]) == {"migrate_for": ("opportunistic",)}
    assert parse_cells_options(["migrate_for="]) == {"migrate_for": ()}  # nobody may migrate
    assert parse_cells_options(None) == {} and parse_cells_options([]) == {}


def test_mapping_values_from_yaml_take_native_types_and_the_same_texts():
    got = parse_cells_options({"preempt": True, "preemptible_fraction": 0.3, "seed": 4,
                               "lost_work_s": 10, "migrate_for": ["dedicated"], "pack": "yes"},
                              option="locality.options")
    assert got == {"preempt": True, "preemptible_fraction": 0.3, "seed": 4, "lost_work_s": 10.0,
                   "migrate_for": ("dedicated",), "pack": True}
    with pytest.raises(ConfigError, match=r"locality\.options\.preempt: expected true/false"):
        parse_cells_options({"preempt": 1}, option="locality.options")
    with pytest.raises(ConfigError, match=r"locality\.options\.seed: expected an integer"):
        parse_cells_options({"seed": 2.5}, option="locality.options")
    with pytest.raises(ConfigError, match=r"locality\.options\.lost_work_s: expected a finite"):
        parse_cells_options({"lost_work_s": True}, option="locality.options")


@pytest.mark.parametrize(("item", "needle"), [
    ("preemt=true", "unknown key 'preemt'; valid keys: adopt_loans, debug,"),
    ("preempt=maybe", "--cells-option 'preempt=maybe': expected true/false/1/0/yes/no"),
    ("seed=1.5", "--cells-option 'seed=1.5': expected an integer"),
    ("seed=-3", "expected an integer >= 0"),
    ("lost_work_s=abc", "--cells-option 'lost_work_s=abc': expected a finite number"),
    ("restart_delay_s=inf", "expected a finite number"),
    ("restart_delay_s=-1", "restart_delay_s must be >= 0"),
    ("preemptible_fraction=1.5", "--cells-option 'preemptible_fraction=1.5': preemptible_fraction "
                                 "must be in [0, 1]"),
    ("migrate_for=everyone", "migrate_for must be a list of dedicated / opportunistic"),
    ("preempt", "expected KEY=VALUE"),
    ("=true", "expected KEY=VALUE"),
    ("gpus_per_server=4", "set by the topology / placement"),
    ("chain=buddy", "set by the topology / placement"),
])
def test_bad_items_name_the_option_and_what_is_wrong(item, needle):
    with pytest.raises(ConfigError) as exc:
        parse_cells_options([item])
    assert needle in str(exc.value)
    assert str(exc.value).startswith("--cells-option")


def test_unknown_key_lists_every_valid_key_and_a_key_given_twice_fails():
    with pytest.raises(ConfigError) as exc:
        parse_cells_options(["nope=1"])
    for name in cells_option_types():
        assert name in str(exc.value)
    with pytest.raises(ConfigError, match="given twice"):
        parse_cells_options(["seed=1", "seed=2"])


def test_options_from_cli_options_imply_default_cells_and_keep_the_old_calls():
    assert options_from_cli(None, None) is None and options_from_cli(None, None, []) is None
    cfg = options_from_cli(None, None, ["preempt=true", "preemptible_fraction=0.5"])
    assert cfg == LocalityConfig(preempt=True, preemptible_fraction=0.5)
    cfg = options_from_cli("gpus=4,rack=2", "buddy,mcf,budget=0.25", {"migrate": True})
    assert (cfg.gpus_per_server, cfg.servers_per_rack, cfg.chain, cfg.budget_s, cfg.migrate) == (
        4, 2, ("buddy", "mcf"), 0.25, True)
    assert options_from_cli("gpus=4,rack=2", None) == LocalityConfig(gpus_per_server=4,
                                                                      servers_per_rack=2)


@settings(max_examples=40, deadline=None)
@given(preempt=st.booleans(), frac=st.floats(0, 1), seed=st.integers(0, 2**31),
       lost=st.floats(0, 1e6), who=st.sets(st.sampled_from(["dedicated", "opportunistic"])))
def test_texts_of_a_config_parse_back_to_it(preempt, frac, seed, lost, who):
    cfg = LocalityConfig(preempt=preempt, preemptible_fraction=frac, seed=seed, lost_work_s=lost,
                         migrate_for=tuple(sorted(who)))
    texts = [f"preempt={str(preempt).lower()}", f"preemptible_fraction={frac!r}", f"seed={seed}",
             f"lost_work_s={lost!r}", "migrate_for=" + ",".join(sorted(who))]
    assert options_from_cli(None, None, texts) == cfg


# ----------------------------------------------------------------------------- the CLI
def test_cli_bad_cells_option_is_one_line_exit_2(tmp_path, capsys):
    out = tmp_path / "x"
    assert main(["replay", "--policy", "fcfs", "--cells-option", "preemt=true",
                 "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert "--cells-option 'preemt=true'" in err and "preemptible_fraction" in err
    assert main(["replay", "--policy", "fcfs", "--cells-option", "preemptible_fraction=x",
                 "--out", str(out)]) == 2
    assert "'preemptible_fraction=x': expected a finite number" in capsys.readouterr().err
    assert not out.exists()


def rack_trace(tmp_path, seed: int = 6):
    """Four 32-GPU pools (a rack each) with gangs of 1..32 GPUs over 0.1 day, as CSV files."""
    jobs, pools = generate_workload("base", seed=seed, days=0.1, num_pools=4, pool_gpus=32)
    rng = np.random.default_rng(seed)
    widths = rng.choice([1, 2, 4, 8, 16, 32], size=jobs.height, p=[0.3, 0.2, 0.15, 0.15, 0.1, 0.1])
    jobs = jobs.with_columns(pl.Series("num_gpus", widths, dtype=pl.Int32))
    trace, quotas = tmp_path / "rack.csv", tmp_path / "quotas.csv"
    jobs.select("job_id", "pool", "submit_time", "duration", "num_gpus").write_csv(trace)
    pools.select("pool", "quota_gpus").write_csv(quotas)
    return trace, quotas


def test_replay_with_preemption_reports_counts_consistent_with_the_jobs_table(tmp_path, capsys):
    trace, quotas = rack_trace(tmp_path)
    base = ["replay", str(trace), "--quotas", str(quotas), "--policy", "sia-perfect",
            "--warmup-days", "0"]
    delay = 30.0
    out = tmp_path / "pre"
    assert main([*base, "--cells-option", "preempt=true", "--cells-option",
                 "preemptible_fraction=0.5", "--cells-option", f"restart_delay_s={delay}",
                 "--cells-option", "seed=6", "--out", str(out)]) == 0
    assert "preemptions" in capsys.readouterr().out
    summary = json.loads((out / "summary.json").read_text())
    cells = summary["cells"]
    assert cells["options"] == {"preempt": True, "preemptible_fraction": 0.5,
                                "restart_delay_s": delay, "seed": 6}
    assert "gpus_per_server=8" in summary["locality"]  # default topology implied
    pol, fcfs = cells["policy"], cells["baseline"]
    # this workload and mask make SIA stop lent jobs (seeds 2-6 all do; found by a scan)
    assert pol["preemptions"] > 0 and pol["migrations"] == 0
    assert fcfs["preemptions"] == 0  # FCFS never lends, so never takes a loan back
    jobs = pl.read_parquet(out / "jobs.parquet")
    # a job runs exactly its duration unless stopped; each stop costs >= the restart delay
    extra = (jobs["end_time"] - jobs["start_time"] - jobs["duration"]).to_numpy()
    assert (extra > -1e-6).all()
    assert int((extra > 1e-6).sum()) == pol["preempted_jobs"]
    assert pol["preemptions"] >= pol["preempted_jobs"] > 0
    assert extra.sum() >= pol["preemptions"] * delay - 1e-6

    out0 = tmp_path / "no-pre"
    assert main([*base, "--topology", "gpus=8,rack=4", "--out", str(out0)]) == 0
    s0 = json.loads((out0 / "summary.json").read_text())
    assert s0["cells"]["options"] == {} and s0["cells"]["policy"]["preemptions"] == 0
    jobs0 = pl.read_parquet(out0 / "jobs.parquet")
    assert (jobs0["end_time"] - jobs0["start_time"] - jobs0["duration"]).abs().max() < 1e-6


def test_replay_with_migration_counts_moves(tmp_path):
    trace, quotas = rack_trace(tmp_path, seed=3)  # FCFS moves jobs here (seeds 1, 3; not 6)
    out = tmp_path / "mig"
    assert main(["replay", str(trace), "--quotas", str(quotas), "--policy", "fcfs",
                 "--warmup-days", "0", "--cells-option", "migrate=yes", "--cells-option",
                 "preemptible_fraction=1", "--cells-option", "restart_delay_s=10",
                 "--out", str(out)]) == 0
    cells = json.loads((out / "summary.json").read_text())["cells"]
    pol = cells["policy"]
    assert cells["baseline"] == pol  # FCFS is its own baseline
    assert pol["migrations"] >= pol["migrated_jobs"] > 0 and pol["preempted_jobs"] == 0
    jobs = pl.read_parquet(out / "jobs.parquet")
    extra = (jobs["end_time"] - jobs["start_time"] - jobs["duration"]).to_numpy()
    assert int((extra > 1e-6).sum()) == pol["migrated_jobs"]
