"""The one study config schema: every error at once naming file and key, strict YAML, grid:, --set."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.studies.experiment import load_config, parse_config
from sia.pipelines.studies.figure5 import load_figure5_config
from sia.pipelines.studies.figure16 import load_figure16_config
from sia.pipelines.studies.study_schema import MODELS, apply_overrides, check, json_schema

ROOT = Path(__file__).resolve().parents[2]


def tiny(**over) -> dict:
    cfg = {"name": "tiny", "seed": 3, "trace": {"synthetic": "base", "days": 3},
           "warmup_days": 0.5, "grid": {"experiments": 2, "pools_per_experiment": 3},
           "policies": ["fcfs", "maxmin"]}
    cfg.update(over)
    return cfg


def write(tmp_path: Path, cfg, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(cfg if isinstance(cfg, str) else yaml.safe_dump(cfg))
    return path


def test_every_error_is_reported_at_once_each_naming_file_and_key(tmp_path):
    path = write(tmp_path, tiny(tick_s=-3, colour="red", load_range=[0.6, 1.1],
                                grid={"experiments": 0, "quota_scale": [1.0, -2]},
                                predictors={"load_windows": "many"}))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: ") and "\n" not in msg
    for key, words in (("colour", "unknown key"), ("tick_s", "> 0"),
                       ("grid.experiments", ">= 1"), ("grid.quota_scale[1]", "> 0"),
                       ("predictors.load_windows", "integer")):
        assert f"{key}: {words}" in msg or (key in msg and words in msg), (key, msg)


def test_a_single_schema_error_reads_as_before(tmp_path):
    path = write(tmp_path, tiny(quotas="guess"))
    with pytest.raises(ConfigError, match=r": quotas: 'guess' is not one of from_load, recorded$"):
        load_config(path)


@pytest.mark.parametrize("value", [".nan", ".inf", "-.inf"])
def test_nan_and_infinite_values_are_rejected_naming_the_key(tmp_path, value):
    text = yaml.safe_dump(tiny()) + f"load_range: [{value}, 1.1]\n"
    path = write(tmp_path, text)
    with pytest.raises(ConfigError, match=r"load_range\[0\]: NaN or infinite") as err:
        load_config(path)
    assert str(err.value).startswith(str(path))
    # nested and free-form sections too (locality options are a plain mapping)
    text = yaml.safe_dump(tiny(locality={"options": {"preemptible_fraction": 0.25}}))
    path = write(tmp_path, text.replace("0.25", value), "loc.yaml")
    with pytest.raises(ConfigError, match=r"locality\.options\.preemptible_fraction: .*finite"):
        load_config(path)


def test_duplicate_keys_are_rejected_with_their_lines(tmp_path):
    path = write(tmp_path, "trace: {synthetic: base}\npolicies: [fcfs]\nseed: 1\n"
                           "policies: [maxmin]\n")
    with pytest.raises(ConfigError, match=r"line 4: duplicate key 'policies' \(first on line 2\)"):
        load_config(path)
    nested = write(tmp_path, "trace: {synthetic: base, synthetic: more-queues}\n"
                             "policies: [fcfs]\n", "nested.yaml")
    with pytest.raises(ConfigError, match="duplicate key 'synthetic'"):
        load_config(nested)


def test_non_utf8_file_is_a_one_line_cli_error(tmp_path, capsys):
    path = tmp_path / "latin1.yaml"
    path.write_bytes("name: caf\xe9\ntrace: {synthetic: base}\npolicies: [fcfs]\n"
                     .encode("latin-1"))
    for cmd in ("evaluate", "figure5", "figure16"):
        assert main([cmd, str(path), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "Traceback" not in err
        assert str(path) in err and "not UTF-8" in err and "0xe9" in err


def test_grid_section_reads_as_the_flat_keys(tmp_path):
    flat = {k: v for k, v in tiny().items() if k != "grid"} | tiny()["grid"]
    from_grid = load_config(write(tmp_path, tiny(study="evaluate")))
    assert from_grid.to_dict() == parse_config(flat, default_name="cfg").to_dict()
    assert from_grid.experiments == 2 and from_grid.pools_per_experiment == (3,)
    # a key both at the top and under grid: is ambiguous
    both = write(tmp_path, tiny(experiments=5), "both.yaml")
    with pytest.raises(ConfigError, match="grid.experiments: experiments is given twice"):
        load_config(both)


def test_a_config_for_another_study_is_named(tmp_path):
    path = write(tmp_path, tiny(study="figure16"))
    with pytest.raises(ConfigError, match="study: this config is for `sia figure16`"):
        load_config(path)


def test_set_overrides_dotted_keys_with_yaml_values(tmp_path):
    path = write(tmp_path, tiny())
    cfg = load_config(path, ["grid.experiments=1", "grid.quota_scale=[0.8, 1.2]",
                             "trace.days=2", "predictors.alias=paper", "locality=true"])
    assert cfg.experiments == 1 and cfg.quota_scale == (0.8, 1.2) and cfg.trace.days == 2.0
    assert cfg.predictors.alias == "paper" and cfg.locality is not None
    # errors name the override
    with pytest.raises(ConfigError, match=r"--set 'grid'.*KEY=VALUE"):
        load_config(path, ["grid"])
    with pytest.raises(ConfigError, match=r"--set trace.synthetic.x: trace.synthetic is not a"):
        load_config(path, ["trace.synthetic.x=1"])
    with pytest.raises(ConfigError, match=r"grid.experiments: expected an integer, got 'x'"):
        load_config(path, ["grid.experiments=x"])
    with pytest.raises(ConfigError, match=r"--set tick_s: value"):
        load_config(path, ["tick_s=[1"])


@given(st.dictionaries(st.sampled_from(["a", "b", "c.d", "c.e", "f.g.h"]),
                       st.one_of(st.integers(-5, 5), st.booleans(), st.text("xyz", min_size=1)),
                       min_size=1))
def test_set_puts_each_value_at_its_dotted_key(values):
    out = apply_overrides({}, [f"{k}={json.dumps(v)}" for k, v in values.items()], "<test>")
    for key, value in values.items():
        node = out
        for part in key.split("."):
            node = node[part]
        assert node == value


def test_set_reaches_figure5_and_figure16_configs(tmp_path, capsys):
    f5 = load_figure5_config(ROOT / "experiments" / "figure5.yaml",
                             ["grid.seeds=[7]", "oracle.time_limit_s=5"])
    assert f5.seeds == (7,) and f5.oracle["time_limit_s"] == 5
    f16 = load_figure16_config(ROOT / "experiments" / "locality" / "figure16.yaml",
                               ["grid.variants=[base]", "days=1"])
    assert f16.variants == ("base",) and f16.days == 1.0
    assert main(["figure5", "--set", "grid.seeds=[-1]", "--out", str(tmp_path)]) == 2
    assert "grid.seeds[0]: must be >= 0" in capsys.readouterr().err


def test_schema_command_writes_a_json_schema_that_knows_every_key(tmp_path, capsys):
    out = tmp_path / "schema.json"
    assert main(["schema", "--out", str(out)]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    schema = json.loads(out.read_text())
    assert schema == json_schema()
    text = out.read_text()
    for key in ("pools_per_experiment", "quota_scale", "workloads", "allocators", "grid",
                "chain_locality", "duration_target_under"):
        assert f'"{key}"' in text, key
    assert main(["schema", "--study", "figure5"]) == 0
    one = json.loads(capsys.readouterr().out)
    assert one["properties"]["grid"] and "trace" not in one["properties"]
    assert main(["schema", "--study", "nope"]) == 2


def test_shipped_configs_pass_the_schema_and_use_grid():
    for path in sorted((ROOT / "experiments").rglob("*.yaml")):
        raw = yaml.safe_load(path.read_text())
        study = raw.get("study", "evaluate")
        assert study in MODELS, path
        _, problems = check(raw, study, str(path))
        assert problems == {}, (path, problems)


def test_a_sweep_that_scores_no_job_exits_2(tmp_path, capsys):
    # a 3-day replay whose warm-up (5 days) covers every job
    path = write(tmp_path, tiny(warmup_days=5, grid={"experiments": 1,
                                                     "pools_per_experiment": 2}))
    assert main(["evaluate", str(path), "--out", str(tmp_path / "o"), "--workers", "1",
                 "--no-mlflow"]) == 2
    err = capsys.readouterr().err.strip()
    # found before any training or replay, from the replay window's submissions
    assert len(err.splitlines()) == 1 and "no job would be scored" in err
    assert "warmup_days:" in err and "5-day warm-up" in err
    assert not (tmp_path / "o" / "summary.csv").exists()


def test_every_unknown_name_is_reported_not_only_the_first(tmp_path):
    path = write(tmp_path, tiny(policies=["fcfs", "warp-drive", {"name": "teleport"}]))
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert "policies[1].name: unknown policy 'warp-drive'" in msg
    assert "policies[2].name: unknown policy 'teleport'" in msg
    f16 = write(tmp_path, {"study": "figure16", "grid": {"variants": ["base", "huge"]},
                           "policies": ["hived", "nope"], "days": -1}, "f16.yaml")
    with pytest.raises(ConfigError) as err:
        load_figure16_config(f16)
    msg = str(err.value)
    for part in ("grid.variants[1]: unknown variant 'huge'", "unknown policy 'nope'",
                 "days: must be > 0"):
        assert part in msg, msg
