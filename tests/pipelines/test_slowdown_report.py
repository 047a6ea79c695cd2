"""Every slowdown explained in the pipelines (sia.pipelines.studies.slowdown_report): `sia replay` and
`sia evaluate` write each slowed job's loan, cause and cascade depth, and sum them."""

from __future__ import annotations

import json

import polars as pl
import pytest
import yaml
from sia.data.synthetic import generate_workload
from sia.data.units import DAY_S
from sia.pipelines.cli import main
from sia.pipelines.cli.replay import plan, replay_workload
from sia.pipelines.engine import ReplayOutcome, run_replay, score
from sia.pipelines.engine.tracking import policy_metrics
from sia.pipelines.studies import slowdown_report as sr
from sia.scheduler.core.attribution import CAUSES


@pytest.fixture(scope="module")
def random_replay():
    """A learned-like SIA that slows jobs (random arrivals and durations) against FCFS."""
    jobs, pools = generate_workload("higher-load", 3, days=2.0)
    pools = pools.select("pool", "quota_gpus")
    specs = plan(jobs, pools, "sia-random-both", speedup=1.0, tick_s=300.0, seed=1,
                 options={"adaptation": False, "loan_ramp": None})
    outcome, summary = replay_workload(specs, 0.5 * DAY_S)
    return outcome, summary, specs, run_replay(specs[-1])


def test_replay_names_a_cause_for_every_slowed_job(random_replay):
    outcome, summary, _, base = random_replay
    res = outcome.result
    assert set(sr.ATTRIBUTION_COLUMNS) <= set(res.columns)
    causes = summary["slowdown_causes"]
    # the counted (post warm-up) slowed jobs, as the metrics count them
    assert causes["slowed"] == round(summary["pct_slowed"] * summary["n_jobs"] / 100) > 0
    assert causes["slowdown_min"] == pytest.approx(summary["total_slowdown_min"])
    assert sum(v["jobs"] for v in causes["by_cause"].values()) == causes["slowed"]
    assert sum(v["slowdown_min"] for v in causes["by_cause"].values()) == pytest.approx(
        causes["slowdown_min"])
    assert set(causes["by_cause"]) == set(CAUSES)
    assert sum(v["jobs"] for pool in causes["by_pool"].values() for v in pool.values()) == \
        causes["slowed"]
    assert sum(v["cascade_jobs"] for v in causes["by_cause"].values()) == \
        causes["cascades"]["jobs"] == sum(causes["cascades"]["by_depth"].values())
    # per job: a cause exactly where the job ends more than 1 s after FCFS (warm-up included)
    late = res.join(base.result.select("job_id", pl.col("end_time").alias("_eb")), on="job_id")
    slowed = late["end_time"] > late["_eb"] + 1.0
    assert (late["cause"].is_not_null() == slowed).all()
    # a named loan is an opportunistic job; a cascade names the job it waited behind
    lent = set(res.filter(pl.col("opportunistic"))["job_id"].to_list())
    assert set(res["delayed_by"].drop_nulls().to_list()) <= lent
    casc = res.filter(pl.col("cascade_depth") > 0)
    assert casc["cascade_from"].is_not_null().all()
    assert res.filter(pl.col("cascade_depth") == 0)["cascade_from"].is_null().all()
    assert res.filter(pl.col("cause").is_in(["arrival", "load"]))["missed_pool"].is_not_null().all()
    # the loan's pool is the named job's; the borrowers' sums cover every job with a loan
    pools = dict(zip(res["job_id"], res["pool"], strict=True))
    named = res.filter(pl.col("delayed_by").is_not_null())
    assert named["loan_pool"].to_list() == [pools[j] for j in named["delayed_by"]]
    assert res.filter(pl.col("delayed_by").is_null())["loan_pool"].is_null().all()
    # (arrival, load and duration always name a loan; an unexplained job may)
    by_loans = sum(v["jobs"] for v in causes["by_loan_pool"].values())
    assert sum(v["jobs"] for c, v in causes["by_cause"].items()
               if c in ("duration", "arrival", "load")) <= by_loans <= causes["slowed"]


def test_cause_metrics_for_mlflow(random_replay):
    _, summary, _, _ = random_replay
    m = policy_metrics(summary)
    causes = summary["slowdown_causes"]
    for c in CAUSES:
        assert m[f"stats/slowdown_cause/{c}_jobs"] == causes["by_cause"][c]["jobs"]
        assert m[f"stats/slowdown_cause/{c}_min"] == pytest.approx(causes["by_cause"][c]["slowdown_min"])
    assert m["stats/slowdown_cause/cascade_max_depth"] == causes["cascades"]["max_depth"]
    assert sr.cause_metrics(None) == {} and sr.cause_metrics({"error": "x"}) == {}
    rows = dict(sr.table_rows(causes))
    assert "slowed jobs by cause (min)" in rows


def test_policies_that_do_not_lend_get_no_attribution(random_replay):
    outcome, _, specs, fcfs = random_replay
    per_job, summary = score(fcfs, fcfs, 0.0)
    assert sr.attach(per_job, summary, fcfs, fcfs, specs[0].workload.pools) is per_job
    assert "slowdown_causes" not in summary
    # a lending replay stored before loans were recorded says so instead of guessing
    old = ReplayOutcome(outcome.result.drop(*sr.ATTRIBUTION_COLUMNS),
                        facts={"served": outcome.facts["served"]})
    per_job, summary = score(old, fcfs, 0.0)
    assert sr.attach(per_job, summary, old, fcfs, specs[0].workload.pools) is per_job
    assert "stored without its loans" in summary["slowdown_causes"]["error"]


def test_sia_replay_cli_writes_the_columns(tmp_path):
    out = tmp_path / "sp"
    assert main(["replay", "--synthetic", "base", "--days", "1", "--seed", "2",
                 "--policy", "sia-perfect", "--no-mlflow", "--out", str(out)]) == 0
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert list(sr.ATTRIBUTION_COLUMNS) == jobs.columns[-len(sr.ATTRIBUTION_COLUMNS):]
    assert jobs["cause"].is_null().all()  # perfect predictions: nobody slowed (Theorem 1)
    causes = json.loads((out / "summary.json").read_text())["slowdown_causes"]
    assert causes["slowed"] == 0 and causes["cascades"]["max_depth"] == 0
    assert main(["replay", "--synthetic", "base", "--days", "1", "--policy", "maxmin",
                 "--no-mlflow", "--out", str(tmp_path / "mm")]) == 0
    assert "cause" not in pl.read_parquet(tmp_path / "mm" / "jobs.parquet").columns
    assert "slowdown_causes" not in json.loads((tmp_path / "mm" / "summary.json").read_text())


def test_sweep_writes_causes_per_pool_and_the_markdown(tmp_path, mlflow_uri):
    import mlflow

    cfg = {"name": "tiny", "seed": 3, "trace": {"synthetic": "higher-load", "days": 3},
           "warmup_days": 0.5, "experiments": 2, "pools_per_experiment": 3,
           "quotas": "from_load", "load_range": [0.6, 1.1],
           "policies": ["fcfs", "maxmin",
                        {"name": "sia-random-both", "label": "coin", "forecaster": "none",
                         "options": {"adaptation": False}}]}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "res"
    assert main(["evaluate", str(path), "--out", str(out), "--workers", "1"]) == 0
    summary = pl.read_csv(out / "summary.csv")
    table = pl.read_csv(out / "slowdown_causes.csv")
    assert set(table["policy"]) == {"coin"}
    coin = summary.filter(pl.col("policy") == "coin")
    assert table["jobs"].sum() == round((coin["pct_slowed"] * coin["n_jobs"] / 100).sum()) > 0
    assert table["slowdown_min"].sum() == pytest.approx(coin["total_slowdown_min"].sum())
    assert set(table["cause"]) <= set(CAUSES)
    assert table["loan_pool"].drop_nulls().len() > 0
    for exp in ("exp-000", "exp-001"):
        per_job = pl.read_parquet(out / exp / "per_job.parquet")
        mine = per_job.filter(pl.col("policy") == "coin")
        assert (mine["cause"].is_not_null() == mine["slowed"]).all()
        assert per_job.filter(pl.col("policy") == "maxmin")["cause"].is_null().all()
        s = json.loads((out / exp / "summary.json").read_text())
        assert "slowdown_causes" in s["coin"] and "slowdown_causes" not in s["maxmin"]
    # MLflow: each experiment's run of the lending policy carries the causes
    mlflow.set_tracking_uri(mlflow_uri)
    runs = [r for r in mlflow.search_runs(experiment_names=["sia-evaluations"],
                                          output_format="list")
            if r.data.tags.get("sia.kind") == "policy"]
    for r in runs:
        exp, label = r.data.tags["sia.exp"], r.data.params["policy"]
        if label == "coin":
            mine = table.filter((pl.col("exp_id") == exp) & (pl.col("cause") == "duration"))
            assert r.data.metrics["stats/slowdown_cause/duration_jobs"] == mine["jobs"].sum()
        else:
            assert not any(m.startswith("stats/slowdown_cause/") for m in r.data.metrics)
    assert {r.data.params["policy"] for r in runs} == {"fcfs", "maxmin", "coin"}
    md = (out / "summary.md").read_text()
    assert md.count("## Why jobs were slowed") == 1 and "| coin |" in md
    assert "the borrowers" in md
    # resuming rewrites the tables: the section is not appended twice
    assert main(["evaluate", str(path), "--out", str(out), "--workers", "1", "--no-mlflow"]) == 0
    assert (out / "summary.md").read_text().count("## Why jobs were slowed") == 1
