"""Fuzz the study configs: every corrupted variant of the shipped configs is one clear error.

For each config under ``experiments/`` and each of its values (scalars and
list items, found by walking the YAML), the value is replaced by something no
key accepts (NaN, infinity, a mapping of an unknown key) and the config's own
loader must raise a :class:`~sia.data.errors.ConfigError` whose message is one
line, starts with the file and names the key path (``a.b[2]``); anything else
(another exception, a silent acceptance, a message naming another key) fails.
Whole-file corruptions (non-UTF-8 bytes, a duplicated key, a top-level list,
broken YAML, an unknown key) are checked the same way.
"""

from __future__ import annotations

import copy
import functools
import math
from pathlib import Path
from typing import Any

import pytest
import yaml
from sia.data.errors import ConfigError
from sia.pipelines.studies.experiment import load_config
from sia.pipelines.studies.figure5 import load_figure5_config
from sia.pipelines.studies.figure16 import load_figure16_config

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = sorted((ROOT / "experiments").rglob("*.yaml"))
LOADERS = {"evaluate": load_config, "figure5": load_figure5_config,
           "figure16": load_figure16_config}
#: values no key of any study accepts
BAD_VALUES: dict[str, Any] = {"nan": math.nan, "inf": math.inf, "mapping": {"no_such_key": 1}}


def _leaves(node: Any, path: tuple = ()) -> list[tuple]:
    """Return the paths (keys and list indices) of every scalar and list item under ``node``."""
    if isinstance(node, dict):
        return [p for k, v in node.items() for p in _leaves(v, (*path, k))]
    if isinstance(node, list):
        return [(*path, i) for i in range(len(node))] + [
            p for i, v in enumerate(node) if isinstance(v, dict | list) for p in _leaves(v, (*path, i))]
    return [path]


def _key(path: tuple) -> str:
    """Return a path as the configs' error messages write it: ``a.b[2].c``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _set(raw: Any, path: tuple, value: Any) -> Any:
    node = raw
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return raw


def _cases() -> list:
    cases = []
    for cfg in CONFIGS:
        raw = yaml.safe_load(cfg.read_text())
        for path in _leaves(raw):
            if path == ("study",):
                continue  # names the loader; checked below with the whole-file cases
            for bad in BAD_VALUES:
                cases.append(pytest.param(cfg, path, bad,
                                          id=f"{cfg.relative_to(ROOT)}:{_key(path)}={bad}"))
    return cases


def _expect_one_line_error(load, path: Path, *names: str) -> str:
    with pytest.raises(ConfigError) as err:
        load(path)
    msg = str(err.value)
    assert "\n" not in msg and msg.startswith(str(path)), msg
    for name in names:
        assert name in msg, (name, msg)
    return msg


@functools.cache
def _parsed(cfg: Path) -> Any:
    """The shipped config ``cfg`` as YAML reads it, parsed once for its ~100 cases (each
    corrupts a deep copy)."""
    return yaml.safe_load(cfg.read_text())


@pytest.mark.parametrize("cfg, path, bad", _cases())
def test_a_bad_value_anywhere_is_one_line_naming_its_key(cfg, path, bad, tmp_path):
    raw = copy.deepcopy(_parsed(cfg))
    load = LOADERS[raw.get("study", "evaluate")]
    out = tmp_path / cfg.name
    out.write_text(yaml.safe_dump(_set(raw, path, BAD_VALUES[bad]), sort_keys=False))
    # a bad list item may be named by its list (``policies: unknown policy ...``)
    names = (_key(path),) if not isinstance(path[-1], int) else (_key(path[:-1]),)
    _expect_one_line_error(load, out, *names)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda p: str(p.relative_to(ROOT)))
def test_whole_file_corruptions_are_one_line(cfg, tmp_path):
    text = cfg.read_text()
    load = LOADERS[yaml.safe_load(text).get("study", "evaluate")]
    out = tmp_path / cfg.name
    out.write_bytes(text.encode() + b"\nname: caf\xe9\n")  # Latin-1, not UTF-8
    _expect_one_line_error(load, out, "UTF-8")
    out.write_text(text + "\nname: twice\n")
    _expect_one_line_error(load, out, "name")
    out.write_text(text + "\nno_such_option: 1\n")
    _expect_one_line_error(load, out, "no_such_option")
    out.write_text("- " + text.replace("\n", "\n  "))
    _expect_one_line_error(load, out)
    out.write_text(text + "\npolicies: [fcfs\n")
    _expect_one_line_error(load, out)


@pytest.mark.parametrize("value, words", [("no", "true or false"), (1, "true or false")])
def test_an_option_of_the_wrong_type_is_refused_naming_it(tmp_path, value, words):
    """`adaptation: "no"` was a true value for the policy; it is now an error naming the key."""
    cfg = {"name": "t", "trace": {"synthetic": "base", "days": 2},
           "policies": ["fcfs", {"name": "sia-perfect", "options": {"adaptation": value}}]}
    out = tmp_path / "t.yaml"
    out.write_text(yaml.safe_dump(cfg))
    _expect_one_line_error(load_config, out, "policies[1].options.adaptation", words)


def test_an_unknown_option_is_refused_before_any_work_naming_the_closest_one(tmp_path):
    """A typo in an option name was only found by the replay, after the predictors trained."""
    cfg = {"name": "t", "trace": {"synthetic": "base", "days": 2},
           "policies": ["fcfs", {"name": "sia-perfect",
                                 "options": {"loan_ramp_wake_unti": "quiet"}}]}
    out = tmp_path / "t.yaml"
    out.write_text(yaml.safe_dump(cfg))
    _expect_one_line_error(load_config, out, "policies[1].options.loan_ramp_wake_unti",
                           "is not an option of policy 'sia-perfect' (did you mean "
                           "'loan_ramp_wake_until'?)")
    # an option of the base class, taken through the subclass's **options, is known
    cfg["policies"][1]["options"] = {"loan_ramp_wake_until": "quiet", "seed": 3}
    out.write_text(yaml.safe_dump(cfg))
    load_config(out)


def test_make_policy_checks_simple_option_types():
    from sia.scheduler.registry import make_policy

    with pytest.raises(ConfigError, match="option adaptation must be true or false, not 'no'"):
        make_policy("sia-perfect", adaptation="no")
    with pytest.raises(ConfigError, match="option refresh_s must be a number, not 'x'"):
        make_policy("sia-perfect", refresh_s="x")
    make_policy("sia-perfect", adaptation=False, refresh_s=60, windows_s=(300.0, 3600.0))
