"""The replay engine (a spec in, an outcome out) and the studies' planners (config in, specs out)."""

from __future__ import annotations

from dataclasses import replace

import pytest
from sia.data.errors import ConfigError
from sia.data.synthetic import generate_workload
from sia.pipelines.cli import replay as cmd_replay
from sia.pipelines.engine import (
    FrameWorkload,
    RegistryPredictors,
    ReplaySpec,
    SyntheticWorkload,
    execute,
    run_replay,
    score,
    stored_outcome,
)
from sia.pipelines.executors import InlineExecutor
from sia.pipelines.studies import evaluate as ev
from sia.pipelines.studies import figure5, figure16
from sia.pipelines.studies.experiment import parse_config
from sia.scheduler.core.metrics import compare
from sia.scheduler.core.simulator import RESULT_COLUMNS, simulate
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import simulate_cells
from sia.scheduler.registry import make_policy

DAY = 0.25


def _frames(variant="fewer-queues", seed=0):
    jobs, pools = generate_workload(variant, seed, days=DAY)
    return jobs, pools.select("pool", "quota_gpus")


def test_a_spec_replays_to_the_simulators_per_job_table():
    jobs, pools = _frames()
    spec = ReplaySpec(SyntheticWorkload("fewer-queues", 0, DAY), "maxmin", tick_s=600.0)
    out = run_replay(spec)
    want = simulate(jobs, pools, make_policy("maxmin"), tick_s=600.0).select(RESULT_COLUMNS)
    assert out.result.equals(want)
    assert out.placement is None and out.facts == {} and out.wall_s > 0
    # the same jobs held in memory replay the same
    framed = run_replay(replace(spec, workload=FrameWorkload(jobs, pools, "k")))
    assert framed.result.equals(want)


def test_a_cell_spec_replays_on_cells_and_reports_its_placement():
    jobs, pools = _frames("base")
    loc = LocalityConfig()
    out = run_replay(ReplaySpec(SyntheticWorkload("base", 0, DAY), "hived", locality=loc))
    want, stats = simulate_cells(jobs, pools, make_policy("hived", locality=loc),
                                 replace(loc, strict_buddies=False))
    assert out.result.equals(want.select(RESULT_COLUMNS))
    assert out.placement["preemptions"] == stats["preemptions"] and "fragmentation" in out.placement


def test_the_oracle_reports_its_solver_facts_through_the_outcome():
    spec = ReplaySpec(SyntheticWorkload("fewer-queues", 0, 0.1), "oracle",
                      options={"time_limit_s": 10, "threads": 1})
    facts = run_replay(spec).facts
    assert facts["oracle_status"] in ("optimal", "feasible") and facts["oracle_gap"] >= 0
    assert facts["fcfs_delay_h"] >= facts["oracle_delay_h"] - 1e-9
    assert facts["oracle_reproducible"] is True  # a deterministic work limit, not the clock


def test_score_is_compare_against_the_baseline():
    spec = ReplaySpec(SyntheticWorkload("fewer-queues", 1, DAY), "ssf")
    mine, base = run_replay(spec), run_replay(replace(spec, policy="fcfs"))
    per_job, summary = score(mine, base, 3600.0)
    ref_jobs, ref = compare(mine.result, base.result, warmup_s=3600.0)
    assert summary == ref and per_job.equals(ref_jobs)


def test_the_key_holds_what_the_result_depends_on_and_nothing_else():
    a = ReplaySpec(SyntheticWorkload("base", 0, 1.0), "maxmin")
    assert a.key == ReplaySpec(SyntheticWorkload("base", 0, 1.0), "maxmin").key
    same = [replace(a, where=("x", "y")), replace(a, title="t"), replace(a, progress=True),
            replace(a, locality=None)]
    assert {s.key for s in same} == {a.key}
    differ = [replace(a, tick_s=600.0), replace(a, speedup=2.0), replace(a, seed=1),
              replace(a, options={"x": 1}), replace(a, policy="fcfs"),
              replace(a, workload=SyntheticWorkload("base", 1, 1.0)),
              replace(a, locality=LocalityConfig()),
              replace(a, locality=LocalityConfig(adopt_loans=False)),
              replace(a, predictors=RegistryPredictors("x", (5,), versions=(("m", "1"),))),
              replace(a, predictors=RegistryPredictors("x", (5,), versions=(("m", "2"),)))]
    keys = [s.key for s in differ]
    assert len(set(keys)) == len(keys) and a.key not in keys


def test_execute_stores_outcomes_and_reuses_them(tmp_path):
    specs = [ReplaySpec(SyntheticWorkload("fewer-queues", 0, DAY), p, where=("w", p))
             for p in ("fcfs", "maxmin", "sia-vc")]
    first = execute(specs, tmp_path, InlineExecutor())
    assert first.ran == ["w/fcfs", "w/maxmin", "w/sia-vc"] and not first.reused
    again = execute(specs, tmp_path, InlineExecutor())
    assert again.ran == [] and again.reused == first.ran
    got = stored_outcome(specs[1], tmp_path)
    assert got.result.equals(run_replay(specs[1]).result)
    other = replace(specs[1], tick_s=60.0)
    with pytest.raises(ConfigError, match="replay w/maxmin is not finished"):
        stored_outcome(other, tmp_path)


# ----------------------------------------------------------------------------- the planners
def test_figure5_plans_fcfs_and_every_policy_per_workload_and_seed_oracle_first():
    cfg = figure5.parse_figure5_config({"workloads": ["base", "more-queues"], "seeds": [0, 4],
                                        "policies": ["maxmin", "oracle"], "days": 1,
                                        "oracle": {"time_limit_s": 7}})
    specs = figure5.plan(cfg)
    assert len(specs) == 2 * 2 * 3 and len({s.name for s in specs}) == len(specs)
    assert [s.policy for s in specs[:4]] == ["oracle"] * 4
    oracle = next(s for s in specs if s.policy == "oracle")
    assert oracle.options == {"time_limit_s": 7} and oracle.workload.days == 1.0
    assert {(s.workload.variant, s.workload.seed, s.policy) for s in specs} == {
        (w, k, p) for w in ("base", "more-queues") for k in (0, 4)
        for p in ("fcfs", "maxmin", "oracle")}
    assert all(s.options == {} for s in specs if s.policy != "oracle")


def test_figure16_plans_learned_predictors_on_an_independent_workload():
    cfg = figure16.parse_figure16_config({"variants": ["base"], "seeds": [2],
                                          "policies": ["sia-learned", "hived"],
                                          "no_locality_policies": [], "chain_variants": [],
                                          "allocators": {"a": {}}, "learned_train_days": 9,
                                          "learned_seed_offset": 100,
                                          "learned_options": {"adapt_durations": True}})
    main_rows, chains = figure16.plan(cfg)
    learned = next(r for r in main_rows if r.policy == "sia-learned").replay
    assert learned.predictors.workload == SyntheticWorkload("base", 102, 9.0, 8)
    assert learned.options == {"adapt_durations": True} and learned.locality is not None
    hived = next(r for r in main_rows if r.policy == "hived").replay
    assert hived.predictors is None and hived.options == {}
    assert not hived.locality.strict_buddies  # HiveD*'s declared locality requirement
    items = figure16.replays_of(main_rows)
    assert items[0] is learned and len(items) == 3 and chains == []


def test_evaluate_plans_the_baseline_first_and_feeds_learned_policies_their_alias():
    cfg = parse_config({"trace": {"synthetic": "base", "days": 2}, "experiments": 1,
                        "pools_per_experiment": 2, "seed": 1, "warmup_days": 0.5,
                        "policies": ["maxmin", "sia", {"name": "sia", "label": "p",
                                                       "alias": "paper"}]})
    jobs, (exp,) = ev.sweep_experiments(cfg, ev.load_trace(cfg))
    refs = {a: RegistryPredictors(a, (5, 60, 720), versions=(("m", a),))
            for a in ("champion", "paper")}
    specs = ev.plan(cfg, jobs, [exp], refs)
    assert [s.where for s in specs] == [("exp-000", x) for x in ("fcfs", "maxmin", "sia", "p")]
    assert [s.predictors for s in specs] == [None, None, refs["champion"], refs["paper"]]
    assert all(s.seed == exp.seed for s in specs)
    assert set(specs[0].workload.jobs["pool"]) == set(exp.pools["pool"])
    with pytest.raises(ConfigError, match="policy 'sia' needs learned predictors"):
        ev.experiment_specs(cfg, exp, jobs, None)


def test_replay_plans_the_policy_then_fcfs_on_the_same_jobs():
    jobs, pools = _frames()
    specs = cmd_replay.plan(jobs, pools, "MaxMin", speedup=2.0, tick_s=60.0, seed=5)
    assert [s.policy for s in specs] == ["maxmin", "fcfs"]
    assert all(s.workload is specs[0].workload and s.speedup == 2.0 for s in specs)
    assert len(cmd_replay.plan(jobs, pools, "fcfs", speedup=1.0, tick_s=60.0)) == 1
    outcome, summary = cmd_replay.replay_workload(specs, 0.0)
    want = simulate(jobs, pools, make_policy("maxmin"), tick_s=60.0, speedup=2.0)
    assert outcome.result.equals(want.select(RESULT_COLUMNS))
    assert summary["policy"] == "maxmin" and summary["n_jobs"] == jobs.height


def test_prior_jobs_key_only_the_replays_of_learned_predictors():
    """The history a learned forecaster starts with is part of its replay's key; other keys stay."""
    import polars as pl
    from sia.pipelines.inputs import jobs_before

    jobs, pools = generate_workload("base", 0, days=DAY)
    cut = float(jobs["submit_time"].quantile(0.5)) / 86400.0
    prior = jobs_before(jobs, cut)
    assert prior.height and prior["submit_time"].max() < cut * 86400.0
    assert set(prior.columns) <= {"pool", "num_gpus", "submit_time", "duration", "tag", "user"}
    assert jobs_before(jobs, None) is None
    ref = RegistryPredictors("a", (5, 60), versions=(("m", "1"),))
    plain, primed = FrameWorkload(jobs, pools, "k"), FrameWorkload(jobs, pools, "k", prior)
    assert (ReplaySpec(plain, "sia", predictors=ref).key
            != ReplaySpec(primed, "sia", predictors=ref).key)
    other = FrameWorkload(jobs, pools, "k", prior.filter(pl.col("submit_time") < 0.0))
    assert ReplaySpec(primed, "sia", predictors=ref).key != ReplaySpec(other, "sia", predictors=ref).key
    assert ReplaySpec(plain, "fcfs").key == ReplaySpec(primed, "fcfs").key
