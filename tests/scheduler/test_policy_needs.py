"""Policies declare their needs (PolicyNeeds): the registry reads them, checks a replay against
them before it starts, and a new policy is its module plus one registry line."""

from __future__ import annotations

import inspect
import json
import textwrap
from dataclasses import replace

import polars as pl
import pytest
import yaml
from sia.data.errors import ConfigError
from sia.data.schema import make_pools, validate
from sia.pipelines.cli import main
from sia.pipelines.studies.experiment import parse_config
from sia.scheduler.core.forecast import PerfectForecaster
from sia.scheduler.core.needs import NO_NEEDS, PolicyNeeds
from sia.scheduler.core.simulator import PolicyError, simulate
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import config_for_policy, simulate_cells
from sia.scheduler.registry import (
    POLICIES,
    POLICY_NAMES,
    check_policy,
    make_policy,
    policies_with,
    policy_class,
    policy_needs,
    policy_options,
)

# two pools of one 8-GPU server each; jobs of 1/2/4/8 GPUs, some lent across pools
ROWS = [("a0", "A", 0.0, 900.0, 4), ("a1", "A", 10.0, 600.0, 4), ("a2", "A", 20.0, 300.0, 2),
        ("b0", "B", 5.0, 1200.0, 8), ("b1", "B", 30.0, 300.0, 1), ("a3", "A", 40.0, 200.0, 8),
        ("b2", "B", 2000.0, 100.0, 2), ("a4", "A", 2100.0, 100.0, 1)]


def _jobs() -> pl.DataFrame:
    raw = pl.DataFrame(ROWS, schema=["job_id", "pool", "submit_time", "duration", "num_gpus"],
                       orient="row")
    return validate(raw)[0]


def _pipeline_options(needs: PolicyNeeds) -> dict:
    """What a pipeline gives the constructor: a forecaster under the declared option."""
    return {} if needs.forecaster is None else {needs.forecaster: PerfectForecaster()}


# ------------------------------------------------------------------ declared == accepted

@pytest.mark.parametrize("name", list(POLICY_NAMES))
def test_declared_needs_match_the_constructor(name):
    cls = policy_class(name)
    assert "needs" in vars(cls), f"{cls.__name__} must declare its own needs (not inherit them)"
    needs = policy_needs(name)
    assert isinstance(needs, PolicyNeeds)
    params = inspect.signature(cls).parameters
    # seed: declared exactly when the constructor names a seed parameter (the pipelines pass it)
    assert needs.seed == ("seed" in params), (name, list(params))
    if needs.forecaster is not None:
        assert needs.forecaster in params, (name, needs.forecaster, list(params))
    opts = _pipeline_options(needs)
    cls(**opts)  # builds from what the pipelines give it, nothing more
    if needs.seed:
        cls(**opts, seed=7)
    # the locality settings it requires are LocalityConfig options
    replace(LocalityConfig(), **needs.locality_requires)


@pytest.mark.parametrize("name", list(POLICY_NAMES))
def test_declared_locality_support_matches_a_replay_on_cells(name):
    """A policy that declares locality replays on buddy cells; one that does not fails there
    (which is why the registry refuses it before the replay starts)."""
    needs = policy_needs(name)
    policy = policy_class(name)(**_pipeline_options(needs))
    jobs, pools = _jobs(), make_pools({"A": 8, "B": 8})
    cells = replace(LocalityConfig(), **needs.locality_requires)
    if needs.locality:
        res, _ = simulate_cells(jobs, pools, policy, cells, check_invariants=True)
        assert res["start_time"].is_not_nan().all()
        assert config_for_policy(LocalityConfig(), name) == cells
    else:
        with pytest.raises(PolicyError, match="without a cell"):
            simulate_cells(jobs, pools, policy, cells)
        with pytest.raises(ConfigError) as err:
            make_policy(name, locality=LocalityConfig())
        msg = str(err.value)
        assert "\n" not in msg and f"policy {name!r}" in msg and "locality" in msg
        with pytest.raises(ConfigError, match=f"policy {name!r} does not support locality"):
            config_for_policy(LocalityConfig(), policy)


def test_needs_as_declared_for_the_paper_policies():
    assert policy_needs("sia").forecaster == "forecaster"
    assert policy_needs("sia-random").forecaster == "base"
    assert policy_needs("sia-perfect").forecaster is None
    assert dict(policy_needs("hived").locality_requires) == {"strict_buddies": False}
    assert set(policies_with(forecaster=True)) == {
        "sia", "sia-random", "sia-random-both", "sia-perfect-durations", "sia-perfect-arrivals",
        "sia-learned", "sia-preempt"}
    assert {"fcfs", "maxmin", "hived", "sia", "sia-perfect", "ssf", "gssf", "themis",
            "oracle"} <= set(policies_with(locality=True))
    assert "sia-vc" in set(policies_with(locality=True))  # on cells since issue 14
    with pytest.raises(ValueError, match="locality_requires needs locality"):
        PolicyNeeds(locality_requires={"strict_buddies": False})


def test_policy_options_add_the_seed_and_forecaster_as_declared():
    fc = PerfectForecaster()
    assert policy_options("themis", {"fairness_knob": 0.5}, seed=4) == {"fairness_knob": 0.5,
                                                                       "seed": 4}
    assert policy_options("themis", {"seed": 1}, seed=4) == {"seed": 1}  # an explicit one wins
    assert policy_options("sia-vc", seed=4) == {}
    assert policy_options("sia-random", seed=4, forecaster=fc) == {"seed": 4, "base": fc}
    assert policy_options("sia", forecaster=fc) == {"forecaster": fc}
    with pytest.raises(ConfigError) as err:
        policy_options("maxmin", forecaster=fc)
    assert "\n" not in str(err.value) and "policy 'maxmin' takes no forecaster" in str(err.value)


# ------------------------------------------------------------------ errors reach the user

def test_sia_replay_refuses_locality_for_a_policy_without_it(tmp_path, capsys, fungible_only):
    out = tmp_path / "o"
    assert main(["replay", "--synthetic", "base", "--days", "1", "--policy", fungible_only,
                 "--no-mlflow",
                 "--topology", "gpus=8,rack=4", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1
    assert err.startswith("error: --topology: policy 'fungible-only' does not support "
                          "locality"), err
    assert not out.exists()


def test_sia_evaluate_refuses_locality_or_a_forecaster_the_policy_cannot_take(tmp_path, capsys,
                                                                             fungible_only):
    base = {"name": "t", "trace": {"synthetic": "base", "days": 3}, "experiments": 1,
            "pools_per_experiment": 2, "warmup_days": 0.5}
    for change, words in (({"policies": ["fcfs", fungible_only], "locality": True},
                           "locality: policy 'fungible-only' does not support locality"),
                          ({"policies": [{"name": "fcfs"}, {"name": "maxmin",
                                                            "forecaster": "learned"}]},
                           "policies[1].forecaster: policy 'maxmin' takes no forecaster")):
        path = tmp_path / "c.yaml"
        path.write_text(yaml.safe_dump({**base, **change}))
        assert main(["evaluate", str(path), "--out", str(tmp_path / "o")]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and words in err, err
    # a policy that takes one defaults to the learned forecaster; the others to none
    cfg = parse_config({**base, "policies": ["fcfs", "sia-random"]})
    assert [p.forecaster for p in cfg.policies] == ["none", "learned"]


# ------------------------------------------------------------------ a new policy

TOY_MODULE = '''
"""A toy policy: FCFS per pool, newest job first (LIFO), with buddy cells."""

from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.view import Start


class ToyLifoPolicy:
    name = "toy-lifo"
    uses_ticks = False
    needs = PolicyNeeds(seed=True, locality=True)

    def __init__(self, seed: int = 0):
        self.seed = seed

    def reset(self, trace, cluster):
        self._gpus = trace.num_gpus.tolist()
        self._quota = trace.quota.tolist()
        self._place = cluster.try_place if getattr(cluster, "cell_aware", False) else None

    def decide(self, view):
        starts = []
        for p in sorted(view.touched_pools):
            free = self._quota[p] - view.used_dedicated_of(p)
            for j in reversed(view.pending(p)):
                g = self._gpus[j]
                if g > free:
                    continue
                cell = self._place(j, p, g, True) if self._place is not None else None
                if self._place is not None and cell is None:
                    continue
                free -= g
                starts.append(Start(j, False, cell))
        return starts
'''


@pytest.fixture
def toy(tmp_path, monkeypatch):
    """The toy policy's module on the path and its one registry line (undone after the test)."""
    (tmp_path / "toy_policy_mod.py").write_text(textwrap.dedent(TOY_MODULE))
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(POLICIES, "toy-lifo", "toy_policy_mod:ToyLifoPolicy")
    return "toy-lifo"


def test_a_new_policy_is_its_module_plus_one_registry_line(toy, tmp_path):
    assert toy in POLICY_NAMES and policy_needs(toy) == PolicyNeeds(seed=True, locality=True)
    assert check_policy(toy, locality=LocalityConfig()).locality
    assert policy_options(toy, seed=9) == {"seed": 9}
    jobs, pools = _jobs(), make_pools({"A": 8, "B": 8})
    res = simulate(jobs, pools, make_policy(toy, seed=1), check_invariants=True)
    assert res["start_time"].is_not_nan().all()
    # the CLI and the sweep take it as they are, with cells and with the experiment's seed
    out = tmp_path / "replay"
    assert main(["replay", "--synthetic", "base", "--days", "1", "--policy", toy, "--seed", "5",
                 "--topology", "gpus=8,rack=4", "--no-mlflow", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    assert summary["policy"] == toy and summary["policy_options"] == {"seed": 5}
    assert summary["cells"]["policy"]["preemptions"] == 0
    cfg = tmp_path / "toy.yaml"
    cfg.write_text(yaml.safe_dump({"name": "toy", "seed": 2, "trace": {"synthetic": "base",
                                   "days": 2}, "experiments": 1, "pools_per_experiment": 2,
                                   "warmup_days": 0.5, "locality": True,
                                   "policies": ["fcfs", toy]}))
    assert main(["evaluate", str(cfg), "--out", str(tmp_path / "sweep"), "--workers", "1",
                 "--no-mlflow"]) == 0
    assert (tmp_path / "sweep" / "exp-000" / f"{toy}.parquet").exists()


def test_a_policy_that_declares_nothing_gets_no_needs(tmp_path, monkeypatch):
    (tmp_path / "bare_policy_mod.py").write_text("class Bare:\n    pass\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setitem(POLICIES, "bare", "bare_policy_mod:Bare")
    assert policy_needs("bare") is NO_NEEDS
    assert policy_options("bare", seed=3) == {}
    with pytest.raises(ConfigError, match="policy 'bare' does not support locality"):
        check_policy("bare", locality=LocalityConfig())
