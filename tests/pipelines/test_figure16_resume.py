"""`sia figure16` resumes: finished replays on disk are reused, missing / truncated / stale ones redone."""

from __future__ import annotations

import polars as pl
import pytest
from sia.pipelines.cli import main
from sia.pipelines.studies.figure16 import load_figure16_config, plan, replays_of, run_figure16

TINY = """
variants: [fewer-queues]
seeds: [3]
policies: [sia-perfect, hived]
no_locality_policies: [hived]
days: 1.0
warmup_s: 0
chains: ["buddy"]
chain_policy: hived
chain_variants: [fewer-queues]
"""


@pytest.fixture
def tiny(tmp_path):
    path = tmp_path / "f16.yaml"
    path.write_text(TINY)
    return path


def _tables(out):
    return {name: (out / name).read_bytes() for name in
            ("figure16.csv", "figure16.md", "figure16_by_allocator.md", "figure16_runs.csv",
             "chains.csv", "chain_runs.csv")}


def test_rerun_reuses_every_replay_and_writes_identical_tables(tiny, tmp_path):
    cfg = load_figure16_config(tiny)
    out = tmp_path / "out"
    first = run_figure16(cfg, out, workers=1)
    items = replays_of(sum(plan(cfg), []))
    # 2 allocators x (fcfs + 2 policies) on cells, fcfs + hived fungible, fcfs + hived for chains
    assert len(items) == 2 * 3 + 2 + 2 == len(first.ran) and not first.reused
    for item in items:
        parquet, marker = item.files(out)
        assert parquet.exists() and marker.exists(), item.name
    before = _tables(out)
    again = run_figure16(cfg, out, workers=1)
    assert again.ran == [] and sorted(again.reused) == sorted(i.name for i in items)
    assert _tables(out) == before


def test_missing_or_truncated_replay_is_redone_alone(tiny, tmp_path):
    cfg = load_figure16_config(tiny)
    out = tmp_path / "out"
    run_figure16(cfg, out, workers=1)
    before = _tables(out)
    items = {i.name: i for i in replays_of(sum(plan(cfg), []))}
    gone = items["fewer-queues/seed 3/cells-no-adopt/hived"]
    cut = items["fewer-queues/seed 3/fungible/fcfs"]
    gone.files(out)[0].unlink()
    parquet = cut.files(out)[0]
    parquet.write_bytes(parquet.read_bytes()[:100])
    again = run_figure16(cfg, out, workers=1)
    assert sorted(again.ran) == sorted([gone.name, cut.name])
    # replays are deterministic: only the redone replay's wall time may differ
    after = _tables(out)
    assert {k: v for k, v in after.items() if k != "figure16_runs.csv"} == {
        k: v for k, v in before.items() if k != "figure16_runs.csv"}
    runs = pl.read_csv(out / "figure16_runs.csv")
    (tmp_path / "before.csv").write_bytes(before["figure16_runs.csv"])
    old = pl.read_csv(tmp_path / "before.csv")
    assert runs.drop("replay_wall_s").equals(old.drop("replay_wall_s"))


def test_changed_allocator_redoes_only_its_replays_and_names_the_key(tiny, tmp_path):
    out = tmp_path / "out"
    run_figure16(load_figure16_config(tiny), out, workers=1)
    tiny.write_text(TINY + "allocators: {adopt-loans: {adopt_loans: true}, "
                    "no-adopt: {adopt_loans: false, pack: true}}\n")
    said: list[str] = []
    again = run_figure16(load_figure16_config(tiny), out, workers=1, say=said.append)
    assert sorted(again.stale) == sorted(again.ran) == sorted(
        f"fewer-queues/seed 3/cells-no-adopt/{p}" for p in ("fcfs", "sia-perfect", "hived"))
    assert any("config changed: allocators" in m for m in said)


def test_cli_redo_replays_everything(tiny, tmp_path, capsys):
    out = tmp_path / "out"
    assert main(["figure16", str(tiny), "--out", str(out), "--workers", "1"]) == 0
    assert "10 replay(s) run, 0 reused" in capsys.readouterr().out
    assert main(["figure16", str(tiny), "--out", str(out), "--workers", "1"]) == 0
    assert "0 replay(s) run, 10 reused" in capsys.readouterr().out
    assert main(["figure16", str(tiny), "--out", str(out), "--workers", "1", "--redo"]) == 0
    assert "10 replay(s) run, 0 reused" in capsys.readouterr().out
    runs = pl.read_csv(out / "figure16_runs.csv")
    assert set(runs["allocator"]) == {"adopt-loans", "no-adopt", "none"}


def test_key_ignores_locality_options_left_at_their_default(tiny):
    from dataclasses import replace

    from sia.pipelines.studies.figure16 import replay_spec
    from sia.scheduler.locality.config import LocalityConfig

    cfg = load_figure16_config(tiny)
    a = replay_spec(cfg, "base", 0, "hived", "cells-x", "hived", LocalityConfig())
    same = replace(a, locality=LocalityConfig(strict_reservations=False, pack=False))
    other = replace(a, locality=LocalityConfig(strict_reservations=True))
    assert a.key == same.key != other.key
    seed1 = replay_spec(cfg, "base", 1, "hived", "cells-x", "hived", LocalityConfig())
    assert seed1.key != a.key and replace(a, locality=None).key != a.key


def test_learned_options_reach_the_policy_and_key_and_bad_ones_are_named(tiny, tmp_path):
    from sia.data.errors import ConfigError
    from sia.pipelines.studies.figure16 import replay_spec
    from sia.scheduler.locality.config import LocalityConfig

    path = tmp_path / "opts.yaml"
    path.write_text(TINY + "learned_options: {adapt_durations: true, duration_max_misses: 2}\n")
    cfg = load_figure16_config(path)
    assert cfg.learned_options == {"adapt_durations": True, "duration_max_misses": 2}
    plain_cfg = load_figure16_config(tiny)
    plain = replay_spec(plain_cfg, "base", 0, "sia-learned", "cells-x", "sia-learned",
                        LocalityConfig())
    opted = replay_spec(cfg, "base", 0, "sia-learned", "cells-x", "sia-learned", LocalityConfig())
    assert opted.key != plain.key and opted.options == cfg.learned_options
    # other policies' keys do not depend on the learned options
    hived = [replay_spec(c, "base", 0, "hived", "cells-x", "hived", LocalityConfig())
             for c in (plain_cfg, cfg)]
    assert hived[0].key == hived[1].key
    for bad, named in (("{duration_max_misses: 99}", "max_misses"),
                       ("{no_such_option: 1}", "no_such_option"), ("[1]", "mapping")):
        path.write_text(TINY + f"learned_options: {bad}\n")
        with pytest.raises(ConfigError, match=f"learned_options.*{named}"):
            load_figure16_config(path)
