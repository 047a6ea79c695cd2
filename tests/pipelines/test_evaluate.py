"""`sia evaluate`: config validation, experiments, a tiny sweep end to end, resume, Dask == local."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

import numpy as np
import polars as pl
import pytest
import yaml
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.engine import run_replay
from sia.pipelines.engine.tracking import policy_metrics
from sia.pipelines.executors import DaskExecutor, LocalExecutor
from sia.pipelines.inputs import replay_window
from sia.pipelines.studies import evaluate as ev
from sia.pipelines.studies.experiment import load_config, parse_config
from sia.scheduler.core.metrics import compare
from sia.scheduler.core.simulator import simulate
from sia.scheduler.registry import POLICY_NAMES, make_policy

# sia-perfect joins the tiny sweep once the SIA policy is registered
POLICIES = ["fcfs", "maxmin"] + (["sia-perfect"] if "sia-perfect" in POLICY_NAMES else [])


def tiny(**over) -> dict:
    """A tiny config: synthetic base over 3 days, 2 experiments of 3 pools, quotas from load."""
    cfg = {"name": "tiny", "seed": 3, "trace": {"synthetic": "base", "days": 3},
           "warmup_days": 0.5, "experiments": 2, "pools_per_experiment": 3,
           "quotas": "from_load", "load_range": [0.6, 1.1], "policies": list(POLICIES)}
    cfg.update(over)
    return cfg


def write(tmp_path: Path, cfg: dict, name: str = "cfg.yaml") -> Path:
    path = tmp_path / name
    path.write_text(yaml.safe_dump(cfg))
    return path


@pytest.fixture
def env(mlflow_uri):
    """A fresh SQLite MLflow store in tmp_path (the shared conftest fixture)."""
    return mlflow_uri


# --------------------------------------------------------------------------- validation

@pytest.mark.parametrize(("change", "key", "words"), [
    ({"trace": None}, "trace", "trace.path"),
    ({"trace": {"synthetic": "nope"}}, "trace.synthetic", "'nope' is not one of"),
    ({"trace": {"synthetic": "base", "path": "x.csv"}}, "trace", "exactly one"),
    ({"trace": {"path": "missing.csv"}}, "trace.path", "no such file"),
    ({"trace": {"synthetic": "base", "format": "philly"}}, "trace.format", "path only"),
    ({"experiments": 0}, "experiments", "must be >= 1"),
    ({"experiments": 2.5}, "experiments", "integer"),
    ({"pools_per_experiment": "some"}, "pools_per_experiment", "\"all\""),
    ({"pools_per_experiment": [2, "x"]}, "pools_per_experiment[1]", "integer"),
    ({"quotas": "guess"}, "quotas", "from_load, recorded"),
    ({"load_range": [1.1, 0.6]}, "load_range", "LOW 1.1 > HIGH 0.6"),
    ({"load_range": 0.7}, "load_range", "[LOW, HIGH]"),
    ({"quota_scale": [0.8, -1]}, "quota_scale[1]", "> 0"),
    ({"locality": "yes"}, "locality", "true or false"),
    ({"locality": {"topology": "gpus=6"}}, "locality", "power of two"),
    ({"locality": {"placement": "buddy,teleport"}}, "locality", "teleport"),
    ({"locality": {"cells": 3}}, "locality", "unknown key"),
    ({"locality": {"options": {"preemt": True}}}, "locality.options.preemt",
     "unknown key 'preemt'; valid keys: adopt_loans"),
    ({"locality": {"options": {"preempt": "maybe"}}}, "locality.options.preempt",
     "expected true/false/1/0/yes/no, got 'maybe'"),
    ({"locality": {"options": {"preemptible_fraction": 2}}}, "locality.options.preemptible_fraction",
     "must be in [0, 1]"),
    ({"locality": {"options": {"seed": 0.5}}}, "locality.options.seed", "expected an integer"),
    ({"locality": {"options": {"gpus_per_server": 4}}}, "locality.options.gpus_per_server",
     "set by the topology"),
    ({"locality": {"options": ["preempt=true"]}}, "locality.options", "expected a mapping"),
    ({"policies": []}, "policies", "non-empty list"),
    ({"policies": ["fcfs", "warp-drive"]}, "policies[1].name", "unknown policy 'warp-drive'"),
    ({"policies": ["maxmin", {"name": "maxmin"}]}, "policies", "appears twice"),
    ({"policies": [{"name": "maxmin", "label": "a/b"}]}, "policies[0].label", "file name"),
    ({"policies": [{"name": "maxmin", "options": [1]}]}, "policies[0].options", "mapping"),
    ({"policies": [{"name": "maxmin", "colour": 1}]}, "policies[0].colour", "unknown key"),
    ({"replay": {"start_day": 5, "end_day": 4}}, "replay.end_day", "after replay.start_day"),
    ({"replay": {"start_day": 0, "end_day": 1}, "warmup_days": 2}, "warmup_days", "nothing"),
    ({"replay": {"start_day": "after_training"}, "predictors": {"train": "registry"}},
     "replay.start_day", "needs predictors.train: on_the_fly"),
    ({"replay": {"start_day": "after_validation"}}, "replay.start_day", "after_training"),
    ({"replay": {"start_day": "after_training", "end_day": 10},
      "predictors": {"train": "on_the_fly", "train_days": 7, "val_days": 3, "warmup_days": 1}},
     "replay.end_day", "after replay.start_day (11)"),
    ({"predictors": {"train": "sometimes"}}, "predictors.train", "registry, on_the_fly"),
    ({"predictors": {"alias": "bad alias"}}, "predictors.alias", "alias"),
    ({"tick_s": 0}, "tick_s", "> 0"),
    ({"predictors": {"duration_quantile": 1.5}}, "predictors.duration_quantile", "<= 1"),
    ({"predictors": {"duration_target_under": "low"}}, "predictors.duration_target_under",
     "a number"),
    ({"speed": 3}, "speed", "unknown key"),
])
def test_config_errors_name_the_file_and_key(tmp_path, change, key, words):
    cfg = tiny()
    cfg.update(change)
    if cfg.get("trace") is None:
        del cfg["trace"]
    path = write(tmp_path, cfg)
    with pytest.raises(ConfigError) as err:
        load_config(path)
    msg = str(err.value)
    assert msg.startswith(f"{path}: {key}:"), msg
    assert words in msg, msg


def test_config_file_level_errors(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "none.yaml")
    bad = tmp_path / "bad.yaml"
    bad.write_text("policies: [fcfs\n")
    with pytest.raises(ConfigError, match=r"bad.yaml: not valid YAML"):
        load_config(bad)
    lst = tmp_path / "list.yaml"
    lst.write_text("- fcfs\n")
    with pytest.raises(ConfigError, match="must be a YAML mapping"):
        load_config(lst)


def test_on_the_fly_needs_room_before_the_replay(tmp_path):
    if "sia" not in POLICY_NAMES:
        # without the SIA policy the learned-forecaster path is reached through forecaster: learned
        pol = [{"name": "maxmin", "forecaster": "learned"}]
    else:
        pol = ["sia"]
    cfg = tiny(policies=pol, replay={"start_day": 10, "end_day": 12},
               predictors={"train": "on_the_fly", "train_days": 7, "val_days": 3})
    with pytest.raises(ConfigError, match=r"predictors: on_the_fly training needs .* = 11 days"):
        load_config(write(tmp_path, cfg))


def test_after_training_starts_the_replay_after_the_training_days(tmp_path):
    cfg = tiny(replay={"start_day": "after_training", "end_day": 30},
               predictors={"train": "on_the_fly", "train_days": 7, "val_days": 3,
                           "warmup_days": 1})
    got = load_config(write(tmp_path, cfg))
    assert got.replay_start_day == 11.0 and got.replay_end_day == 30.0
    # the same as writing the day out
    cfg["replay"]["start_day"] = 11
    assert load_config(write(tmp_path, cfg)).replay_start_day == 11.0


def test_a_window_inside_its_warm_up_stops_before_any_replay(tmp_path):
    # the synthetic trace spans 3 days: a replay from day 2 with a 1.5-day warm-up scores nothing
    cfg = load_config(write(tmp_path, tiny(replay={"start_day": 2}, warmup_days=1.5,
                                           policies=["fcfs", "maxmin"])))
    with pytest.raises(ConfigError, match=r"warmup_days: the replay window's jobs are submitted "
                                          r"on days 2\.\d-[23]\.\d, all within the 1\.5-day"):
        ev.run_sweep(cfg, tmp_path / "sw", progress=False, make_plots=False, log_mlflow=False,
                     say=lambda _: None)
    assert not (tmp_path / "sw" / "summary.csv").exists()


def test_relative_trace_path_resolves_against_the_config_folder(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / "sub" / "t.csv").write_text("job_id,pool,submit_time,duration,num_gpus\n")
    cfg = tiny(trace={"path": "t.csv"})
    got = load_config(write(tmp_path / "sub", cfg))
    assert got.trace.path == str((tmp_path / "sub" / "t.csv").resolve())


def test_trace_time_unit_takes_a_date_time_format(tmp_path):
    (tmp_path / "t.csv").write_text("job_id,pool,submit_time,duration,num_gpus\n")
    got = parse_config(tiny(trace={"path": str(tmp_path / "t.csv"),
                                   "time_unit": "datetime:%m/%d/%Y %H:%M"}))
    assert got.trace.time_unit == "datetime:%m/%d/%Y %H:%M"
    with pytest.raises(ConfigError, match=r"trace\.time_unit.*'dt' is not a time unit"):
        parse_config(tiny(trace={"path": str(tmp_path / "t.csv"), "time_unit": "dt"}))


def test_repo_configs_are_valid():
    folder = Path(__file__).resolve().parents[2] / "experiments"
    names = sorted(p.name for p in folder.glob("*.yaml"))
    assert {"table17_philly.yaml", "figure13.yaml", "figure14.yaml", "figure15a.yaml",
            "figure18.yaml", "demo.yaml"} <= set(names)
    for path in [*folder.glob("*.yaml"), folder / "locality" / "figure16_philly.yaml"]:
        if path.name == "figure5.yaml":
            continue  # the Figure 5 runner's own format
        try:
            load_config(path)
        except ConfigError as exc:
            # only a policy that has not landed yet may be missing from the registry
            assert "unknown policy" in str(exc) or "cannot be imported" in str(exc), str(exc)


# --------------------------------------------------------------------------- experiments

def _experiments(cfg_dict):
    cfg = parse_config(cfg_dict)
    wl = ev.load_trace(cfg)
    jobs, span = replay_window(wl.jobs, cfg.replay_start_day, cfg.replay_end_day)
    return cfg, jobs, span, ev.build_experiments(cfg, jobs, span, wl.pools)


def test_experiments_are_seeded_and_quotas_follow_the_load_formula():
    cfg, jobs, span, exps = _experiments(tiny(experiments=4))
    _, _, _, again = _experiments(tiny(experiments=4))
    assert [e.to_dict() for e in exps] == [e.to_dict() for e in again]
    assert len({tuple(e.pools["pool"]) for e in exps}) > 1  # the draws differ between experiments
    for e in exps:
        assert e.pools.height == 3
        for row in e.pools.iter_rows(named=True):
            part = jobs.filter(pl.col("pool") == row["pool"])
            gpu_s = float((part["duration"] * part["num_gpus"]).sum())
            want = max(math.ceil(gpu_s / (span * row["target_load"])), int(part["num_gpus"].max()))
            assert row["quota_gpus"] == want
            assert 0.6 <= row["target_load"] <= 1.1
    _, _, _, other = _experiments(tiny(experiments=4, seed=4))
    assert [e.to_dict()["pools"] for e in other] != [e.to_dict()["pools"] for e in exps]


def test_groups_and_quota_scale_share_pools_and_loads():
    cfg, jobs, _, exps = _experiments(tiny(experiments=2, pools_per_experiment=[2, "all"],
                                           quota_scale=[0.5, 1.0]))
    assert [e.group for e in exps] == ["pools-2_scale-0.5"] * 2 + ["pools-2_scale-1"] * 2 + \
        ["pools-all_scale-0.5"] * 2 + ["pools-all_scale-1"] * 2
    assert len({e.exp_id for e in exps}) == 8
    by = {(e.group, e.index): e for e in exps}
    widest = dict(jobs.group_by("pool").agg(pl.col("num_gpus").max()).iter_rows())
    for i in range(2):
        half, full = by[("pools-2_scale-0.5", i)], by[("pools-2_scale-1", i)]
        assert half.pools["pool"].to_list() == full.pools["pool"].to_list()
        assert half.pools["target_load"].to_list() == full.pools["target_load"].to_list()
        for p, qh, qf in zip(full.pools["pool"], half.pools["quota_gpus"], full.pools["quota_gpus"],
                             strict=True):
            assert qh == max(round(qf * 0.5), widest[p])
    assert by[("pools-all_scale-1", 0)].pools.height == jobs["pool"].n_unique()


def test_too_many_pools_is_a_config_error():
    with pytest.raises(ConfigError, match="pools_per_experiment: 99 pools wanted"):
        _experiments(tiny(pools_per_experiment=99))


def test_recorded_quotas_are_kept():
    cfg, jobs, _, exps = _experiments(tiny(quotas="recorded"))
    for e in exps:
        assert set(e.pools["quota_gpus"].to_list()) == {8}  # the synthetic pools' size


def test_pooled_summary_of_one_experiment_is_its_summary():
    cfg, jobs, _, exps = _experiments(tiny(experiments=1))
    exp = exps[0]
    results = {s.where[-1]: run_replay(s) for s in ev.experiment_specs(cfg, exp, jobs, None)}
    per_job, summaries = ev.score_experiment(cfg, exp, results)
    pooled = ev.pooled_summary(per_job.filter(pl.col("policy") == "maxmin"))
    for m in ev.SUMMARY_METRICS:
        assert pooled[m] == pytest.approx(summaries["maxmin"][m]), m


# --------------------------------------------------------------------------- the sweep

def _check_against_compare(out: Path, cfg, summary: pl.DataFrame) -> None:
    """Re-simulate every experiment independently and compare with the summary table."""
    wl = ev.load_trace(cfg)
    for exp_dir in sorted(out.glob("exp-*")):
        info = json.loads((exp_dir / "experiment.json").read_text())
        pools = pl.DataFrame({"pool": info["pools"], "quota_gpus": info["quota_gpus"]},
                             schema={"pool": pl.String, "quota_gpus": pl.Int32})
        jobs = wl.jobs.filter(pl.col("pool").is_in(info["pools"]))
        base = simulate(jobs, pools, make_policy("fcfs"))
        for label in ("maxmin", "fcfs"):
            res = simulate(jobs, pools, make_policy(label))
            stored = pl.read_parquet(exp_dir / f"{label}.parquet")
            assert stored.equals(res)
            _, want = compare(res, base, warmup_s=cfg.warmup_days * 86400, pools=pools)
            row = summary.filter((pl.col("exp_id") == exp_dir.name)
                                 & (pl.col("policy") == label)).row(0, named=True)
            for m in ev.SUMMARY_METRICS:
                assert row[m] == pytest.approx(want[m]), (exp_dir.name, label, m)


def test_tiny_sweep_end_to_end(tmp_path, env, capsys):
    import mlflow

    path = write(tmp_path, tiny())
    out = tmp_path / "res"
    assert main(["evaluate", str(path), "--out", str(out), "--workers", "1"]) == 0
    text = capsys.readouterr().out
    assert "maxmin" in text and "mlflow ui --backend-store-uri " + env in text
    cfg = load_config(path)
    for exp in ("exp-000", "exp-001"):
        for label in POLICIES:
            assert (out / exp / f"{label}.parquet").exists()
            assert json.loads((out / exp / f"{label}.done.json").read_text())["key"]
        for png in ("speedup_cdf", "slowdown_box", "per_pool_table"):
            assert (out / exp / "plots" / f"{png}.png").stat().st_size > 1000
    for f in ("summary.csv", "summary.md", "aggregate.csv"):
        assert (out / f).exists()
    assert len(list((out / "plots").glob("*.png"))) == 3
    summary = pl.read_csv(out / "summary.csv")
    assert summary.height == 2 * len(POLICIES)
    fc = summary.filter(pl.col("policy") == "fcfs")
    assert (fc["mean_speedup"] == 1.0).all() and (fc["pct_slowed"] == 0.0).all()
    _check_against_compare(out, cfg, summary)
    if "sia-perfect" in POLICIES:
        assert (summary.filter(pl.col("policy") == "sia-perfect")["pct_slowed"] == 0).all()
        # SIA's predictions as it used them reach its summary (perfect: every arrival seen)
        per_policy = json.loads((out / "exp-000" / "summary.json").read_text())
        served = per_policy["sia-perfect"]["served"]["will_arrive"]
        assert served["60m"]["records"] > 0 and served["60m"]["recall"] in (None, 1.0)
        assert "served" not in per_policy["maxmin"]
        table = pl.read_csv(out / "served.csv")
        assert set(table["policy"]) == {"sia-perfect"} and table.height == 2 * 3  # exps x windows
        assert table.filter(pl.col("window") == "60m")["arrive_recall"].drop_nulls().eq(1.0).all()
        assert "## Predictions as served" in (out / "summary.md").read_text()

    # MLflow: a parent run; under it one run per experiment holding one run per policy
    # (policy a parameter, metric names without it), and one aggregate run per policy
    mlflow.set_tracking_uri(env)
    runs = mlflow.search_runs(experiment_names=["sia-evaluations"], output_format="list")
    parent = json.loads((out / "sweep.json").read_text())["parent_run_id"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent
                and r.data.tags.get("sia.kind") == "experiment"]
    assert len(children) == 2
    (sweep,) = [r for r in runs if r.info.run_id == parent]
    # the sweep's name: the config's name and the short hash of the resolved config first
    # (issue 36), then the start time
    assert re.fullmatch(rf"{cfg.name} {cfg.digest()[:8]} sweep \d\d-\d\d \d\d:\d\d:\d\d",
                        sweep.info.run_name)
    assert all(r.info.run_name.startswith(f"{cfg.name} {cfg.digest()[:8]} ") for r in runs)
    assert all(r.data.tags["sia.config_digest"] == cfg.digest() for r in runs)
    # every run says the settings that differ from an evaluate config's defaults
    from sia.pipelines.studies.evaluate import changed_settings

    changed = changed_settings(cfg)
    assert changed and all(r.data.tags[f"sia.set.{k}"] == v for r in runs
                           for k, v in changed.items())
    for child in children:
        exp_id = child.data.params["exp.id"]
        row = summary.filter((pl.col("exp_id") == exp_id)
                             & (pl.col("policy") == "maxmin")).row(0, named=True)
        policy_runs = {r.data.params["policy"]: r for r in runs
                       if r.data.tags.get("mlflow.parentRunId") == child.info.run_id}
        assert set(policy_runs) == set(POLICIES)
        mm = policy_runs["maxmin"]
        assert mm.data.metrics["speedup/mean"] == pytest.approx(row["mean_speedup"])
        assert mm.data.metrics["slowdown/pct_jobs"] == pytest.approx(row["pct_slowed"])
        assert "stats/baseline/utilization" in mm.data.metrics
        assert not any("maxmin" in m for m in mm.data.metrics)
        # the headline metrics sort first by name (MLflow's compare view lists them so)
        names = sorted(mm.data.metrics)
        headline = [m for m in names if m.startswith(("speedup/", "slowdown/"))]
        assert len(headline) == 7 and names[:7] == headline
        if "sia-perfect" in POLICIES:
            assert "stats/served/will_arrive/records_60m" in policy_runs["sia-perfect"].data.metrics
            assert not any(m.startswith("stats/served/") for m in mm.data.metrics)
        assert mm.data.params["exp.id"] == exp_id and mm.data.params["policy.name"] == "maxmin"
        assert child.data.params["exp.pools"] == ",".join(
            json.loads((out / exp_id / "experiment.json").read_text())["pools"])
        arts = {a.path for a in mlflow.MlflowClient().list_artifacts(child.info.run_id, "plots")}
        assert "plots/speedup_cdf.png" in arts
    agg = {r.data.params["policy"]: r for r in runs if r.data.tags.get("sia.kind") == "aggregate"}
    assert set(agg) == set(POLICIES)
    row = res_agg = pl.read_csv(out / "aggregate.csv").filter(pl.col("policy") == "maxmin")
    assert agg["maxmin"].data.metrics["speedup/mean"] == pytest.approx(res_agg["mean_speedup"][0])
    assert row.height == 1


def test_resume_reruns_only_the_missing_replay(tmp_path):
    cfg = parse_config(tiny())
    out = tmp_path / "res"
    first = ev.run_sweep(cfg, out, progress=False, log_mlflow=False,
                        make_plots=False)
    assert len(first.ran) == 2 * len(POLICIES) and not first.reused
    (out / "exp-001" / "maxmin.parquet").unlink()
    second = ev.run_sweep(cfg, out, progress=False, log_mlflow=False,
                        make_plots=False)
    assert second.ran == ["exp-001/maxmin"]
    assert second.summary.equals(first.summary)
    # a marker from a different config (another key) does not count as done
    marker = out / "exp-000" / "fcfs.done.json"
    marker.write_text(json.dumps({"key": "stale"}))
    third = ev.run_sweep(cfg, out, progress=False, log_mlflow=False,
                        make_plots=False)
    assert third.ran == ["exp-000/fcfs"]
    # a truncated Parquet (its marker intact) is not a finished replay
    parquet = out / "exp-001" / "fcfs.parquet"
    parquet.write_bytes(parquet.read_bytes()[:100])
    again = ev.run_sweep(cfg, out, progress=False, log_mlflow=False, make_plots=False)
    assert again.ran == ["exp-001/fcfs"] and again.summary.equals(first.summary)
    # a changed config reruns everything it changes
    fourth = ev.run_sweep(parse_config(tiny(load_range=[0.7, 0.9])), out, progress=False,
                          log_mlflow=False)
    assert len(fourth.ran) == 2 * len(POLICIES)


def test_interrupted_sweep_resumes_without_redoing_finished_replays(tmp_path, crashing):
    cfg = parse_config(tiny())
    out = tmp_path / "res"
    with pytest.raises(crashing.Interrupted):
        ev.run_sweep(cfg, out, crashing(3), progress=False, log_mlflow=False,
                        make_plots=False)
    done = sorted(p.name for p in out.glob("exp-*/*.done.json"))
    assert len(done) == 3
    resumed = ev.run_sweep(cfg, out, progress=False, log_mlflow=False,
                        make_plots=False)
    assert len(resumed.ran) == 2 * len(POLICIES) - 3 and len(resumed.reused) == 3
    fresh = ev.run_sweep(cfg, tmp_path / "fresh", progress=False, log_mlflow=False,
                        make_plots=False)
    assert resumed.summary.equals(fresh.summary)


def _replays(out: Path) -> dict[str, pl.DataFrame]:
    return {str(p.relative_to(out)): pl.read_parquet(p) for p in sorted(out.glob("exp-*/*.parquet"))
            if p.name != "per_job.parquet"}


def test_dask_and_process_pool_match_the_inline_run(tmp_path):
    from dask.distributed import Client, LocalCluster

    cfg = parse_config(tiny())
    local = ev.run_sweep(cfg, tmp_path / "inline", progress=False, log_mlflow=False,
                        make_plots=False)
    with LocalCluster(n_workers=2, threads_per_worker=1, processes=False,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        dask = ev.run_sweep(cfg, tmp_path / "dask", DaskExecutor(client=client),
                            progress=False, log_mlflow=False,
                        make_plots=False)
    pool = LocalExecutor(2)
    try:
        procs = ev.run_sweep(cfg, tmp_path / "procs", pool, progress=False, log_mlflow=False,
                        make_plots=False)
    finally:
        pool.close()
    want = _replays(tmp_path / "inline")
    for other, res in (("dask", dask), ("procs", procs)):
        got = _replays(tmp_path / other)
        assert got.keys() == want.keys()
        for k in want:
            assert got[k].equals(want[k]), (other, k)
        assert res.summary.equals(local.summary)
        assert sorted(res.ran) == sorted(local.ran)


def test_worker_failure_names_the_replay(tmp_path):
    # windows that do not increase pass the config's checks and fail in the worker
    cfg = parse_config(tiny(policies=["fcfs", {"name": "sia-perfect",
                                               "options": {"windows_s": [600, 300]}}]))
    with pytest.raises(ConfigError, match=r"exp-000/sia-perfect: policy 'sia-perfect': "
                                          r"windows_s must be increasing"):
        ev.run_sweep(cfg, tmp_path / "res", progress=False, log_mlflow=False,
                        make_plots=False)


def test_cli_config_error_is_one_line(tmp_path, capsys):
    path = write(tmp_path, tiny(experiments=-1))
    assert main(["evaluate", str(path), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "experiments: must be >= 1" in err


def test_summary_markdown_matches_csv(tmp_path):
    cfg = parse_config(tiny(experiments=1))
    res = ev.run_sweep(cfg, tmp_path / "res", progress=False, log_mlflow=False,
                        make_plots=False)
    md = (tmp_path / "res" / "summary.md").read_text()
    row = res.aggregate.filter(pl.col("policy") == "maxmin").row(0, named=True)
    assert f"| {row['group']} | maxmin | 1 | {row['n_jobs']} | {ev._fmt(row['mean_speedup'])} |" in md
    assert np.isfinite(row["geomean_speedup"])


def test_locality_sweep_replays_on_cells_and_keys_differ(tmp_path):
    from sia.pipelines.locality_options import options_from_cli
    from sia.scheduler.locality.replay import simulate_maybe_cells

    cfg = parse_config(tiny(experiments=1, policies=["fcfs", "maxmin"],
                            locality={"topology": "gpus=8,rack=4", "placement": "buddy,mcf"}))
    assert cfg.locality == {"topology": "gpus=8,rack=4", "placement": "buddy,mcf"}
    out = tmp_path / "cells"
    res = ev.run_sweep(cfg, out, progress=False, log_mlflow=False, make_plots=False)
    assert len(res.ran) == 2
    # the stored replay is the cell replay, not the fungible one
    _, jobs, _, exps = _experiments(tiny(experiments=1))
    exp = exps[0]
    jobs = jobs.filter(pl.col("pool").is_in(exp.pools["pool"].to_list()))
    pools = exp.pools.select("pool", "quota_gpus")
    want = simulate_maybe_cells(jobs, pools, make_policy("maxmin"),
                                options_from_cli("gpus=8,rack=4", "buddy,mcf"))
    got = pl.read_parquet(out / "exp-000" / "maxmin.parquet")
    assert got.select("job_id", "start_time").sort("job_id").equals(
        want.select("job_id", "start_time").sort("job_id"))
    fungible = ev.experiment_specs(parse_config(tiny(experiments=1)), exp, jobs, None)
    cells = ev.experiment_specs(cfg, exp, jobs, None)
    assert {t.key for t in fungible}.isdisjoint({t.key for t in cells})



def test_locality_options_round_trip_into_the_replay_and_its_key(tmp_path):
    from sia.pipelines.locality_options import options_from_cli
    from sia.scheduler.locality.config import LocalityConfig
    from sia.scheduler.locality.replay import simulate_cells, simulate_maybe_cells

    def cfg_with(options, name="cfg.yaml"):
        loc = {"topology": "gpus=8,rack=4", "placement": "buddy"}
        if options is not None:
            loc["options"] = options
        return load_config(write(tmp_path, tiny(experiments=1, policies=["fcfs", "maxmin"],
                                                locality=loc), name))

    mig = {"migrate": True, "preemptible_fraction": 1.0, "restart_delay_s": 10,
           "migrate_for": ["dedicated", "opportunistic"], "pack": False}
    cfg = cfg_with(mig)
    # values typed, defaults (migrate_for, pack) left out so they do not change the key
    assert cfg.locality["options"] == {"migrate": True, "preemptible_fraction": 1.0,
                                       "restart_delay_s": 10.0}
    assert cfg.to_params()["locality.options.migrate"] == "true"
    plain, defaults = cfg_with(None), cfg_with({"pack": False, "seed": 0})
    assert "options" not in plain.locality and defaults.locality == plain.locality

    _, jobs, _, exps = _experiments(tiny(experiments=1))
    exp = exps[0]
    keys = {name: {t.where[-1]: t.key for t in ev.experiment_specs(c, exp, jobs, None)}
            for name, c in [("plain", plain), ("defaults", defaults), ("mig", cfg),
                            ("mig20", cfg_with({**mig, "restart_delay_s": 20}))]}
    assert keys["plain"] == keys["defaults"]
    assert len({k["maxmin"] for k in keys.values()}) == 3  # plain, mig, mig20 all differ

    out = tmp_path / "res"
    first = ev.run_sweep(cfg, out, progress=False, log_mlflow=False, make_plots=False)
    assert len(first.ran) == 2 and not first.reused
    assert not (out / "served.csv").exists()  # no SIA policy: no predictions to report
    # the stored replay is the one with the options (migration changes this workload's ends)
    part = jobs.filter(pl.col("pool").is_in(exp.pools["pool"].to_list()))
    pools = exp.pools.select("pool", "quota_gpus")
    loc = options_from_cli("gpus=8,rack=4", "buddy", cfg.locality["options"])
    assert loc == LocalityConfig(migrate=True, preemptible_fraction=1.0, restart_delay_s=10.0)
    want = simulate_maybe_cells(part, pools, make_policy("maxmin"), loc)
    without = simulate_maybe_cells(part, pools, make_policy("maxmin"), LocalityConfig())
    got = pl.read_parquet(out / "exp-000" / "maxmin.parquet")
    cols = ["job_id", "start_time", "end_time"]
    assert got.select(cols).sort("job_id").equals(want.select(cols).sort("job_id"))
    assert not want.select(cols).sort("job_id").equals(without.select(cols).sort("job_id"))
    # the placement counters of the cell replays reach the summaries, the table and MLflow
    _, stats = simulate_cells(part, pools, make_policy("maxmin"), loc)
    _, base_stats = simulate_cells(part, pools, make_policy("fcfs"), loc)
    summary = json.loads((out / "exp-000" / "summary.json").read_text())["maxmin"]
    assert summary["cells"] == json.loads(json.dumps({"policy": stats, "baseline": base_stats}))
    assert stats["migrations"] > 0
    row = first.summary.filter(pl.col("policy") == "maxmin").row(0, named=True)
    assert row["migrations"] == stats["migrations"]
    assert first.aggregate.filter(pl.col("policy") == "maxmin")["migrations"].item() == \
        stats["migrations"]
    logged = policy_metrics(summary, summary["cells"]["policy"], summary["cells"]["baseline"])
    assert logged["stats/cells/migrations"] == stats["migrations"]
    # the same config reuses; another option value replays again in the same folder
    again = ev.run_sweep(cfg, out, progress=False, log_mlflow=False, make_plots=False)
    assert len(again.reused) == 2 and not again.ran
    other = ev.run_sweep(cfg_with({**mig, "restart_delay_s": 20}, "other.yaml"), out,
                         progress=False, log_mlflow=False, make_plots=False)
    assert len(other.ran) == 2 and not other.reused
