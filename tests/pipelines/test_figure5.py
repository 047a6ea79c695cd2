"""The Figure 5 pipeline: config validation, an end-to-end run on a tiny workload, resume."""

from __future__ import annotations

import polars as pl
import pytest
import yaml
from sia.data.errors import ConfigError
from sia.data.synthetic import generate_workload
from sia.pipelines.cli import main
from sia.pipelines.engine import run as engine_run
from sia.pipelines.studies.figure5 import (
    load_figure5_config,
    parse_figure5_config,
    replay_spec,
    run_figure5,
)
from sia.scheduler.core.simulator import RESULT_COLUMNS, simulate
from sia.scheduler.registry import make_policy


def test_shipped_config_parses_with_the_paper_setup():
    from sia.pipelines.cli.figure5 import DEFAULT_CONFIG

    cfg = load_figure5_config(DEFAULT_CONFIG)
    assert cfg.workloads == ("base", "more-queues", "higher-load") and cfg.seeds == (0, 1, 2)
    assert set(cfg.policies) == {"fcfs", "ssf", "gssf", "maxmin", "sia-vc", "oracle"}
    assert cfg.days == 3.0 and cfg.oracle["time_limit_s"] > 0


@pytest.mark.parametrize("raw, word", [
    ({"workloads": ["nope"]}, "unknown variant"),
    ({"policies": ["fifo"]}, "unknown policy"),
    ({"seeds": "0"}, "'seeds'"),
    ({"days": -1}, "'days'"),
    ({"colour": 1}, "unknown key"),
    ({"oracle": {"steps": 3}}, "'oracle'"),
])
def test_bad_config_names_the_key(raw, word):
    with pytest.raises(ConfigError, match=word):
        parse_figure5_config(raw, source="cfg.yaml")


def test_missing_config_file_is_one_line_error(tmp_path, capsys):
    assert main(["figure5", str(tmp_path / "none.yaml"), "--out", str(tmp_path)]) == 2
    assert "no such config file" in capsys.readouterr().err


def test_end_to_end_tiny(tmp_path):
    cfg = parse_figure5_config({
        "workloads": ["base", "fewer-queues"], "seeds": [0, 1],
        "policies": ["fcfs", "maxmin", "sia-vc", "oracle"], "days": 0.25,
        "oracle": {"time_limit_s": 20, "threads": 1},
    })
    table = run_figure5(cfg, tmp_path, workers=1, progress=False).table
    assert table.height == 2 * 2 * 4
    for f in ("figure5.csv", "figure5_summary.csv", "figure5.png"):
        assert (tmp_path / f).stat().st_size > 0
    fcfs = table.filter(pl.col("policy") == "fcfs")
    assert (fcfs["mean_speedup"] == 1.0).all() and (fcfs["total_slowdown_min"] == 0).all()
    for pol in ("sia-vc", "oracle"):
        part = table.filter(pl.col("policy") == pol)
        assert (part["max_slowdown_min"] <= 1 / 60).all() and (part["mean_speedup"] >= 1).all()
    orc = table.filter(pl.col("policy") == "oracle")
    assert orc["oracle_status"].is_in(["optimal", "feasible"]).all()
    summary = pl.read_csv(tmp_path / "figure5_summary.csv")
    assert summary.height == 2 * 4 and (summary["seeds"] == 2).all()


# --------------------------------------------------------------------------- resume

TINY = {"workloads": ["fewer-queues"], "seeds": [0, 1], "policies": ["maxmin", "gssf"],
        "days": 0.25}


def _tiny(**change):
    return parse_figure5_config({**TINY, **change})


@pytest.fixture
def count_replays(monkeypatch):
    """Count the simulator calls of figure5's replays (in-process runs only)."""
    calls = []

    def counting(jobs, pools, policy, **kw):
        calls.append(getattr(policy, "name", type(policy).__name__))
        return simulate(jobs, pools, policy, **kw)

    monkeypatch.setattr(engine_run, "simulate", counting)
    return calls


def _same(a, b):
    """Tables equal but for the wall time of replays run again."""
    return a.drop("runtime_s").equals(b.drop("runtime_s"))


def _run(cfg, out, **kw):
    return run_figure5(cfg, out, workers=1, progress=False, **kw)


def test_every_replay_is_written_as_per_job_parquet(tmp_path):
    cfg = _tiny()
    run = _run(cfg, tmp_path)
    # FCFS is replayed as the baseline although the config does not list it
    assert len(run.ran) == 2 * 3 and not run.reused and not run.stale
    assert set(run.table["policy"]) == {"maxmin", "gssf"} and run.table.height == 4
    for seed in (0, 1):
        for pol in ("fcfs", "maxmin", "gssf"):
            parquet = tmp_path / "replays" / "fewer-queues" / f"seed-{seed}" / f"{pol}.parquet"
            frame = pl.read_parquet(parquet)
            assert tuple(frame.columns) == RESULT_COLUMNS
    # the stored result is the simulator's replay of that workload, row for row
    jobs, pools = generate_workload("fewer-queues", 1, days=0.25)
    want = simulate(jobs, pools, make_policy("maxmin"), tick_s=cfg.tick_s).select(RESULT_COLUMNS)
    got = pl.read_parquet(tmp_path / "replays" / "fewer-queues" / "seed-1" / "maxmin.parquet")
    assert got.equals(want)
    assert (run.table.filter(pl.col("policy") == "maxmin")["n_jobs"] > 0).all()


def test_rerun_replays_nothing_and_gives_the_same_table(tmp_path, count_replays):
    cfg = _tiny()
    first = _run(cfg, tmp_path)
    assert len(count_replays) == 6
    csv = (tmp_path / "figure5.csv").read_text()
    count_replays.clear()
    said = []
    second = _run(cfg, tmp_path, say=said.append)
    assert count_replays == [] and second.ran == []
    assert sorted(second.reused) == sorted(first.ran)
    assert second.table.equals(first.table)
    assert (tmp_path / "figure5.csv").read_text() == csv
    assert any("reusing 6 of 6" in m for m in said)


def test_a_deleted_replay_is_redone_alone(tmp_path, count_replays):
    cfg = _tiny()
    first = _run(cfg, tmp_path)
    (tmp_path / "replays" / "fewer-queues" / "seed-1" / "gssf.parquet").unlink()
    count_replays.clear()
    second = _run(cfg, tmp_path)
    assert second.ran == ["fewer-queues/seed 1/gssf"] and len(count_replays) == 1
    assert len(second.reused) == 5
    assert _same(second.table, first.table)


def test_a_leftover_temp_file_is_not_a_finished_replay(tmp_path):
    cfg = _tiny()
    first = _run(cfg, tmp_path)
    folder = tmp_path / "replays" / "fewer-queues" / "seed-0"
    # a crash while writing maxmin's Parquet: only the temporary file and no marker
    (folder / "maxmin.parquet").rename(folder / "maxmin.parquet.tmp")
    (folder / "maxmin.done.json").unlink()
    # and one whose Parquet was cut short under its final name
    data = (folder / "fcfs.parquet").read_bytes()
    (folder / "fcfs.parquet").write_bytes(data[: len(data) // 3])
    second = _run(cfg, tmp_path)
    assert sorted(second.ran) == ["fewer-queues/seed 0/fcfs", "fewer-queues/seed 0/maxmin"]
    assert not (folder / "maxmin.parquet.tmp").exists()
    assert _same(second.table, first.table)


def test_an_interrupted_run_resumes_where_it_stopped(tmp_path, crashing):
    cfg = _tiny()
    with pytest.raises(crashing.Interrupted):
        _run(cfg, tmp_path / "a", executor=crashing(4))
    assert len(list((tmp_path / "a").glob("replays/*/*/*.done.json"))) == 4
    resumed = _run(cfg, tmp_path / "a")
    assert len(resumed.ran) == 2 and len(resumed.reused) == 4
    fresh = _run(cfg, tmp_path / "b")
    assert _same(resumed.table, fresh.table)


@pytest.mark.parametrize("change", [{"days": 0.2}, {"tick_s": 600}])
def test_a_changed_workload_or_tick_redoes_every_replay(tmp_path, change):
    _run(_tiny(), tmp_path)
    said = []
    run = _run(_tiny(**change), tmp_path, say=said.append)
    assert len(run.ran) == 6 and not run.reused and len(run.stale) == 6
    msg = next(m for m in said if "other settings" in m)
    assert "6 replay(s)" in msg and next(iter(change)) in msg
    # the new replays replace the stale ones: a third run reuses them all
    assert len(_run(_tiny(**change), tmp_path).reused) == 6


def test_changed_seeds_or_policies_run_only_what_is_new(tmp_path, count_replays):
    first = _run(_tiny(), tmp_path)
    count_replays.clear()
    run = _run(_tiny(seeds=[1, 2], policies=["maxmin", "ssf"]), tmp_path)
    # seed 1's FCFS and MaxMin are the same replays; seed 2 and SSF are new
    assert sorted(run.reused) == ["fewer-queues/seed 1/fcfs", "fewer-queues/seed 1/maxmin"]
    assert sorted(run.ran) == ["fewer-queues/seed 1/ssf", "fewer-queues/seed 2/fcfs",
                               "fewer-queues/seed 2/maxmin", "fewer-queues/seed 2/ssf"]
    assert len(count_replays) == 4
    assert set(zip(run.table["seed"], run.table["policy"], strict=True)) == {
        (s, p) for s in (1, 2) for p in ("maxmin", "ssf")}
    same = first.table.filter((pl.col("seed") == 1) & (pl.col("policy") == "maxmin"))
    assert run.table.filter((pl.col("seed") == 1) & (pl.col("policy") == "maxmin")).equals(same)


def test_a_changed_warmup_rescores_without_replaying(tmp_path, count_replays):
    first = _run(_tiny(), tmp_path)
    count_replays.clear()
    run = _run(_tiny(warmup_s=3 * 3600), tmp_path)
    assert count_replays == [] and len(run.reused) == 6
    assert (run.table["n_jobs"] < first.table["n_jobs"]).all()


def test_oracle_options_key_only_the_oracle_replays():
    a, b = _tiny(oracle={"time_limit_s": 10}), _tiny(oracle={"time_limit_s": 20})
    assert replay_spec(a, "base", 0, "oracle").key != replay_spec(b, "base", 0, "oracle").key
    assert replay_spec(a, "base", 0, "maxmin").key == replay_spec(b, "base", 0, "maxmin").key
    assert replay_spec(a, "base", 0, "maxmin").key != replay_spec(a, "base", 1, "maxmin").key


def test_cli_rerun_says_what_it_reused(tmp_path, capsys):
    path = tmp_path / "f5.yaml"
    path.write_text(yaml.safe_dump(TINY))
    out = tmp_path / "out"
    args = ["figure5", str(path), "--out", str(out), "--workers", "1"]
    assert main(args) == 0
    assert "6 replay(s) run, 0 reused" in capsys.readouterr().out
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "0 replay(s) run, 6 reused" in text and "maxmin" in text
    assert "median [min, max] over seeds" in text  # the title is not eaten as rich markup


def test_redo_replays_everything_again(tmp_path, count_replays):
    _run(_tiny(), tmp_path)
    count_replays.clear()
    run = _run(_tiny(), tmp_path, reuse=False)
    assert len(run.ran) == 6 and not run.reused and len(count_replays) == 6
