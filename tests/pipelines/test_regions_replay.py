"""`sia replay --regions`: the regions file, the modes, the region report; region metrics."""

from __future__ import annotations

import json
import re

import numpy as np
import polars as pl
import pytest
from sia.pipelines.cli import main
from sia.scheduler.regions.config import read_regions_file
from sia.scheduler.regions.metrics import demand_to_supply, ratio_summary
from sia.scheduler.regions.model import RegionsError

SPLIT = """transfer_rate: 0.001
period_h: 12
pools:
  q0: {home: A, size: 2.0}
  q1: B
  q2: C
  q3: {home: A, replicas: [B]}
  q4: B
  q5: C
  q6: A
  q7: B
"""


def test_replay_on_regions_routes_and_reports(tmp_path):
    split = tmp_path / "split.yaml"
    split.write_text(SPLIT)
    out = tmp_path / "hist"
    code = main(["replay", "--synthetic", "more-queues", "--days", "2", "--seed", "1",
                 "--warmup-days", "0.5", "--policy", "sia-perfect", "--regions", str(split),
                 "--regions-mode", "history", "--out", str(out), "--no-mlflow"])
    assert code == 0
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert set(jobs["region"].unique().to_list()) <= {"A", "B", "C"}
    reg = json.loads((out / "summary.json").read_text())["regions"]
    assert reg["mode"] == "history" and reg["supply_gpus"] == {"A": 24, "B": 24, "C": 16}
    assert reg["routed"] == int((jobs["region"] != jobs["pool"].replace_strict(
        {"q0": "A", "q1": "B", "q2": "C", "q3": "A", "q4": "B", "q5": "C", "q6": "A",
         "q7": "B"})).sum())
    assert reg["routed"] > 0 and reg["data_plans"] >= 3  # plans at 0 h, 12 h, 24 h, ...
    assert reg["scan_attempts"] > 0 and 0 <= reg["scan_hit_rate"] < 1
    assert reg["queued_running_hourly"]["worst_over_avg_mean"] >= 1.0


def test_generate_regions_writes_a_workload_and_its_regions_file(tmp_path):
    from sia.data.synthetic import generate_regions_workload

    out = tmp_path / "gen"
    assert main(["generate", "--regions", "--days", "1", "--seed", "4", "--out", str(out)]) == 0
    jobs, pools, homes = generate_regions_workload(4, days=1)
    assert pl.read_parquet(out / "jobs.parquet").equals(jobs)
    assert pools["quota_gpus"].to_list() == [8] * 7 + [16] * 2
    regions = read_regions_file(out / "regions.yml")
    assert dict(regions.homes) == homes
    lay = regions.layout(dict(zip(pools["pool"], pools["quota_gpus"], strict=True)))
    assert dict(zip([r.name for r in lay.regions], lay.gpus.tolist(), strict=True)) == \
        {"cold": 32, "hot": 32, "mid": 24}
    # uneven demand: the hot region's pools carry more load than the cold one's
    load = pools.with_columns(pl.col("pool").replace_strict(homes).alias("region")) \
        .group_by("region").agg((pl.col("target_load") * pl.col("quota_gpus")).sum()
                                / pl.col("quota_gpus").sum())
    by = dict(load.iter_rows())
    assert by["hot"] > by["cold"]


def test_bad_regions_files_name_the_file_and_key(tmp_path):
    f = tmp_path / "r.yaml"
    for text, key in [("pools: {q0: {home: A, size: big}}", "pools.q0.size: must be a number"),
                      ("pools: {q0: A}\nspeed: 3", "speed: unknown key"),
                      ("pools: {q0: {home: A, replicas: [Z]}}", "pools.q0.replicas[0]: 'Z' is not"),
                      ("transfer_rate: 0\npools: {q0: A}", "transfer_rate: must be a number > 0"),
                      ("reservations_period_h: 0\npools: {q0: A}",
                       "reservations_period_h: must be a number > 0"),
                      ("regions: {A: {gpus: 8}}\npools: {q0: A}", "regions.A: must be {storage")]:
        f.write_text(text)
        with pytest.raises(RegionsError, match="^" + re.escape(f"{f}: {key}")):
            read_regions_file(f)
    f.write_text("pools: {q0: A}")
    with pytest.raises(RegionsError, match=f"{f}: pool 'q1' of the workload has no home region"):
        read_regions_file(f).layout({"q0": 8, "q1": 8})
    lay = read_regions_file(f).layout({"q0": 8})
    assert lay.gpus.tolist() == [8]
    # reservations plan every 6 h unless the file says (data placement: daily)
    assert (read_regions_file(f).period_s, read_regions_file(f).reservations_period_s) == \
        (86400.0, 21600.0)
    f.write_text("period_h: 12\nreservations_period_h: 2\npools: {q0: A}")
    assert (read_regions_file(f).period_s, read_regions_file(f).reservations_period_s) == \
        (43200.0, 7200.0)


def test_regions_mode_errors(tmp_path):
    from sia.data.errors import ConfigError
    from sia.pipelines.cli.replay import regions_from_cli, regions_from_trace

    assert regions_from_cli(None, "history") is None  # the trace may carry regions
    jobs = pl.DataFrame({"job_id": ["a"], "pool": ["q0"]})
    with pytest.raises(ConfigError, match="--regions-mode needs --regions FILE or a region "
                                          "column in the trace"):
        regions_from_trace(jobs, "t.csv", "history")
    assert regions_from_trace(jobs, "t.csv", "static") is None
    with pytest.raises(ConfigError, match="--regions-mode must be one of home, static"):
        regions_from_cli(None, "psychic")
    # a column the user did not map is never used as regions
    assert regions_from_trace(jobs.with_columns(region=pl.lit("A")), "t.csv", "static",
                              mapped=False) is None


HOMES = {"q0": "A", "q1": "B", "q2": "C", "q3": "A", "q4": "B", "q5": "C", "q6": "A", "q7": "B"}


def test_regions_from_a_trace_column_equal_the_same_regions_file(tmp_path):
    """`--map region=dc` on a generic trace replays exactly as --regions with a file giving
    the same homes (and a trace without the column stays on one cluster)."""
    from sia.data.synthetic import generate_workload

    jobs, pools = generate_workload("more-queues", seed=1, days=2)
    trace = tmp_path / "jobs.csv"
    jobs.select("job_id", "pool", "submit_time", "duration", "num_gpus").with_columns(
        dc=pl.col("pool").replace_strict(HOMES)).write_csv(trace)
    quotas = tmp_path / "quotas.csv"
    pools.select("pool", "quota_gpus").write_csv(quotas)
    (tmp_path / "homes.yaml").write_text("pools: " + json.dumps(HOMES) + "\n")
    common = ["replay", str(trace), "--quotas", str(quotas), "--warmup-days", "0.5",
              "--policy", "sia-perfect", "--regions-mode", "history", "--no-mlflow"]
    assert main([*common, "--map", "region=dc", "--out", str(tmp_path / "col")]) == 0
    assert main([*common, "--regions", str(tmp_path / "homes.yaml"),
                 "--out", str(tmp_path / "file")]) == 0
    by_col = pl.read_parquet(tmp_path / "col" / "jobs.parquet")
    by_file = pl.read_parquet(tmp_path / "file" / "jobs.parquet")
    assert by_col.equals(by_file)
    reg = json.loads((tmp_path / "col" / "summary.json").read_text())["regions"]
    assert reg["supply_gpus"] == json.loads((tmp_path / "file" / "summary.json").read_text()
                                            )["regions"]["supply_gpus"]
    assert "column 'region'" in reg["file"]
    # a column that happens to be called region is used only when asked for
    named = tmp_path / "named.csv"
    pl.read_csv(trace).rename({"dc": "region"}).write_csv(named)
    plain = ["replay", str(named), "--quotas", str(quotas), "--warmup-days", "0.5",
             "--policy", "sia-perfect", "--no-mlflow"]
    assert main([*plain, "--out", str(tmp_path / "plain")]) == 0
    assert "regions" not in json.loads((tmp_path / "plain" / "summary.json").read_text())
    assert main([*plain, "--map", "region=region", "--regions-mode", "history",
                 "--out", str(tmp_path / "asked")]) == 0
    assert pl.read_parquet(tmp_path / "asked" / "jobs.parquet").equals(by_file)


def test_a_region_column_names_the_pool_and_job_it_cannot_use():
    from sia.scheduler.regions.config import regions_from_jobs

    jobs = pl.DataFrame({"job_id": ["a", "b", "c", "d"], "pool": ["q0", "q0", "q1", "q1"],
                         "region": ["A", "A", "B", "C"]})
    with pytest.raises(RegionsError, match="^t.csv: column 'region': pool 'q1' is in 2 regions "
                                           r"\('B', 'C'\), e.g. job 'd' in 'C'"):
        regions_from_jobs(jobs, "t.csv")
    with pytest.raises(RegionsError, match="job 'c' \\(pool 'q1'\\) has no region"):
        regions_from_jobs(jobs.with_columns(region=pl.Series(["A", "A", None, "B"])), "t.csv")
    with pytest.raises(RegionsError, match="has no 'region' column"):
        regions_from_jobs(jobs.drop("region"), "t.csv")
    ok = regions_from_jobs(jobs.with_columns(region=pl.Series([1, 1, 2, 2])), "t.csv")
    assert ok.homes == (("q0", "1"), ("q1", "2"))
    assert ok.layout({"q0": 8, "q1": 4}).gpus.tolist() == [8, 4]


def test_demand_to_supply_by_hand():
    # day 0: A gets 2 GPUs x 12 h, B 1 GPU x 24 h; day 1: B 4 GPUs x 6 h
    res = pl.DataFrame({"job_id": ["a", "b", "c"], "submit_time": [0.0, 3600.0, 90000.0],
                        "duration": [43200.0, 86400.0, 21600.0], "num_gpus": [2, 1, 4],
                        "region": ["A", "B", "B"]})
    t = demand_to_supply(res, {"A": 4, "B": 2})
    day0 = t.filter(pl.col("period") == 0)
    assert day0["ratio"].to_list() == [0.25, 0.5]
    assert np.isclose(day0["balanced"][0], (2 * 0.5 + 1) / 6)
    day1 = t.filter(pl.col("period") == 1)
    assert day1["ratio"].to_list() == [0.0, 0.5]
    s = ratio_summary(t)
    assert np.isclose(s["worst_over_avg_max"], 0.5 / (1 / 6))
    assert np.isclose(s["spread_mean"], (0.25 + 0.5) / 2)
    assert s["ratio_by_region"] == {"A": 0.125, "B": 0.5}


def test_evaluate_on_regions_and_the_region_report(tmp_path, monkeypatch):
    from sia.data.errors import ConfigError
    from sia.pipelines.studies import evaluate as ev
    from sia.pipelines.studies.experiment import load_config
    from sia.pipelines.studies.regions_report import main as report_main

    (tmp_path / "split.yml").write_text("pools: {q0: A, q1: A, q2: B, q3: B}\n"
                                        "transfer_rate: 0.01\nperiod_h: 12\n")
    cfg = {"name": "tiny-regions", "seed": 3, "trace": {"synthetic": "base", "days": 3},
           "warmup_days": 0.5, "experiments": 1, "pools_per_experiment": "all",
           "quotas": "from_load", "load_range": [0.6, 1.1],
           "regions": {"file": "split.yml"},
           "policies": ["fcfs", {"name": "sia-perfect", "label": "home", "regions": "home"},
                        {"name": "sia-perfect", "label": "hist", "regions": "history"}]}
    path = tmp_path / "cfg.yaml"
    import yaml

    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "res"
    sweep = ev.run_sweep(load_config(path), out, progress=False, log_mlflow=False,
                         make_plots=False)
    assert sorted(sweep.ran) == ["exp-000/fcfs", "exp-000/hist", "exp-000/home"]
    hist = pl.read_parquet(out / "exp-000" / "hist.parquet")
    home = pl.read_parquet(out / "exp-000" / "home.parquet")
    assert (home["region"] == home["pool"].replace_strict(
        {"q0": "A", "q1": "A", "q2": "B", "q3": "B"})).all()
    assert set(hist["region"].to_list()) == {"A", "B"}
    assert report_main([str(path), "--out", str(out)]) == 0
    rows = pl.read_csv(out / "exp-000" / "regions.csv")
    # sia evaluate writes the same report at the end of the sweep
    from sia.pipelines.cli import main as cli_main

    again = tmp_path / "res2"
    reads = []  # the report after the sweep reads nothing again: one trace read in all
    load_trace = ev.load_trace
    monkeypatch.setattr(ev, "load_trace", lambda c: reads.append(c) or load_trace(c))
    assert cli_main(["evaluate", str(path), "--out", str(again), "--workers", "1",
                     "--no-mlflow"]) == 0
    assert len(reads) == 1
    from polars.testing import assert_frame_equal

    timed = [c for c in rows.columns if c.startswith("scan_s")]  # wall time of the scans
    assert timed
    assert_frame_equal(pl.read_csv(again / "exp-000" / "regions.csv").drop(timed),
                       rows.drop(timed), rtol=1e-12)
    assert rows["policy"].to_list() == ["home", "hist"]
    assert rows.filter(pl.col("policy") == "home")["speedup_vs_home"][0] == pytest.approx(1.0)
    assert (out / "exp-000" / "plots" / "demand_to_supply.png").stat().st_size > 0
    # a policy on regions without the section, and a bad mode, name their key
    for change, key in [({"regions": None}, "policies[1].regions: needs the top-level regions"),
                        ({"policies": ["fcfs", {"name": "sia-perfect", "regions": "nowhere"}]},
                         "policies[1].regions")]:
        path.write_text(yaml.safe_dump({**cfg, **change}))
        with pytest.raises(ConfigError, match=re.escape(key)):
            load_config(path)


def test_evaluate_takes_regions_from_a_trace_column(tmp_path):
    """`regions: {column: dc}` on a trace with a dc column sweeps exactly as the same homes in
    a file; the region report reads the same column; a bad config names the key."""
    import yaml
    from sia.data.errors import ConfigError
    from sia.data.synthetic import generate_workload
    from sia.pipelines.studies import evaluate as ev
    from sia.pipelines.studies.experiment import load_config
    from sia.pipelines.studies.regions_report import report as region_report

    homes = {"q0": "A", "q1": "A", "q2": "B", "q3": "B"}
    jobs, pools = generate_workload("base", seed=3, days=3, num_pools=4)
    jobs.select("job_id", "pool", "submit_time", "duration", "num_gpus").with_columns(
        dc=pl.col("pool").replace_strict(homes)).write_csv(tmp_path / "jobs.csv")
    (tmp_path / "split.yml").write_text("pools: " + json.dumps(homes) + "\n")
    base = {"seed": 3, "trace": {"path": "jobs.csv"}, "warmup_days": 0.5, "experiments": 1,
            "pools_per_experiment": "all", "quotas": "from_load", "load_range": [0.6, 1.1],
            "policies": ["fcfs", {"name": "sia-perfect", "label": "hist", "regions": "history"}]}
    tables = {}
    for name, section in (("by-column", {"column": "dc"}), ("by-file", {"file": "split.yml"})):
        path = tmp_path / f"{name}.yaml"
        path.write_text(yaml.safe_dump({**base, "name": name, "regions": section}))
        cfg = load_config(path)
        ev.run_sweep(cfg, tmp_path / name, log_mlflow=False, make_plots=False, progress=False)
        region_report(path, tmp_path / name, cfg)
        tables[name] = pl.read_parquet(tmp_path / name / "exp-000" / "hist.parquet")
        assert (tmp_path / name / "exp-000" / "regions.csv").exists()
    assert tables["by-column"].equals(tables["by-file"])
    bad = tmp_path / "bad.yaml"
    for section, why in (({"column": "dc", "file": "split.yml"}, "exactly one of file"),
                         ({"column": ""}, "regions.column: must be a column name")):
        bad.write_text(yaml.safe_dump({**base, "name": "bad", "regions": section}))
        with pytest.raises(ConfigError, match=why):
            load_config(bad)


def test_replay_on_regions_with_buddy_cells_routes_and_reports(tmp_path, capsys):
    """`sia replay --regions ... --topology --placement`: every region on its own cells, the
    region report and the regions' placement counters; a region that is not whole machines
    is a one-line error naming it and its numbers."""
    split = tmp_path / "split.yaml"
    split.write_text("pools: {q0: A, q1: A, q2: B, q3: {home: B, replicas: [A]}}\n")
    out = tmp_path / "cells"
    common = ["replay", "--synthetic", "base", "--days", "2", "--seed", "2", "--warmup-days",
              "0.5", "--policy", "sia-perfect", "--regions", str(split), "--no-mlflow"]
    assert main([*common, "--regions-mode", "static", "--topology", "gpus=8,rack=4",
                 "--placement", "buddy,mcf", "--out", str(out)]) == 0
    summary = json.loads((out / "summary.json").read_text())
    jobs = pl.read_parquet(out / "jobs.parquet")
    reg, cells = summary["regions"], summary["cells"]
    assert reg["supply_gpus"] == {"A": 16, "B": 16}
    assert reg["routed"] == int((jobs["region"] == "A").sum() - jobs["pool"].is_in(["q0", "q1"]).sum())
    assert reg["routed"] > 0
    assert set(jobs.filter(pl.col("region") != "A")["pool"].to_list()) <= {"q2", "q3"}
    assert cells["policy"]["placed_buddy"] + cells["policy"]["placed_fallback"] >= jobs.height
    assert cells["options"] == {"chain": ["buddy", "mcf"]}
    capsys.readouterr()
    split.write_text("pools: {q0: A, q1: B, q2: B, q3: B}\n")
    assert main([*common, "--topology", "gpus=16,rack=4", "--out", str(tmp_path / "bad")]) == 2
    err = capsys.readouterr().err.strip()
    assert "region 'A' has 8 GPUs, not a whole number of 16-GPU machines" in err, err


def test_evaluate_on_regions_with_buddy_cells(tmp_path):
    """An evaluate config with both regions: and locality: sweeps every region on cells."""
    import yaml
    from sia.pipelines.studies import evaluate as ev
    from sia.pipelines.studies.experiment import load_config
    from sia.pipelines.studies.regions_report import main as report_main

    (tmp_path / "split.yml").write_text(
        "pools: {q0: {home: A, replicas: [B]}, q1: {home: A, replicas: [B]}, "
        "q2: {home: B, replicas: [A]}, q3: B}\n")
    cfg = {"name": "tiny-regions-cells", "seed": 3, "trace": {"synthetic": "base", "days": 2},
           "warmup_days": 0.5, "experiments": 1, "pools_per_experiment": "all",
           "quotas": "recorded", "regions": {"file": "split.yml"},
           "locality": {"topology": "gpus=8,rack=4", "placement": "buddy,mcf"},
           "policies": ["fcfs", {"name": "sia-perfect", "label": "home", "regions": "home"},
                        {"name": "sia-perfect", "label": "static", "regions": "static"}]}
    path = tmp_path / "cfg.yaml"
    path.write_text(yaml.safe_dump(cfg))
    out = tmp_path / "res"
    sweep = ev.run_sweep(load_config(path), out, progress=False, log_mlflow=False,
                         make_plots=False)
    assert sorted(sweep.ran) == ["exp-000/fcfs", "exp-000/home", "exp-000/static"]
    static = pl.read_parquet(out / "exp-000" / "static.parquet")
    assert (static.filter(pl.col("pool") == "q3")["region"] == "B").all()  # data in B only
    assert (static["region"] != static["pool"].replace_strict(
        {"q0": "A", "q1": "A", "q2": "B", "q3": "B"})).any()
    assert report_main([str(path), "--out", str(out)]) == 0
    rows = pl.read_csv(out / "exp-000" / "regions.csv")
    assert rows["policy"].to_list() == ["home", "static"]


def test_replay_with_global_reservations_reports_shares(tmp_path, capsys):
    split = tmp_path / "split.yaml"
    split.write_text(SPLIT)
    out = tmp_path / "resv"
    code = main(["replay", "--synthetic", "more-queues", "--days", "2", "--seed", "1",
                 "--warmup-days", "0.5", "--policy", "fcfs", "--regions", str(split),
                 "--regions-mode", "reservations-perfect", "--out", str(out), "--no-mlflow"])
    assert code == 0
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert set(jobs["region"].unique().to_list()) <= {"A", "B", "C"}
    reg = json.loads((out / "summary.json").read_text())["regions"]
    assert reg["mode"] == "reservations-perfect" and reg["data_plans"] >= 3
    homes = {"q0": "A", "q1": "B", "q2": "C", "q3": "A", "q4": "B", "q5": "C", "q6": "A",
             "q7": "B"}
    assert reg["ran_outside_home"] == int((jobs["region"] != jobs["pool"].replace_strict(homes)).sum())
    assert reg["share_gpus_moved"] >= 0 and reg["share_moves"] >= 0
    capsys.readouterr()
    # reservations on buddy cells: a one-line error
    assert main(["replay", "--synthetic", "more-queues", "--days", "1", "--policy", "fcfs",
                 "--regions", str(split), "--regions-mode", "reservations-history",
                 "--topology", "gpus=8", "--out", str(tmp_path / "cells"), "--no-mlflow"]) != 0
    assert "global reservations (reservations-history) run on fungible GPUs only" in \
        capsys.readouterr().err


def test_a_moved_job_waits_in_each_queue_for_the_time_it_was_there():
    from sia.scheduler.regions.metrics import demand_over_time

    h = 3600.0
    # j1 (pool a, home A, 2 GPUs) waits in A, moves to B's queue at 2 h, runs in B 3-4 h;
    # j2 (1 GPU) runs in A 4-5 h
    res = pl.DataFrame({"job_id": ["j1", "j2"], "pool": ["a", "a"],
                        "submit_time": [0.0, 4 * h], "start_time": [3 * h, 4 * h],
                        "end_time": [4 * h, 5 * h], "num_gpus": [2, 1], "region": ["B", "A"]})

    def ratio(**kw):
        t = demand_over_time(res, {"A": 2, "B": 2}, {"a": "A"}, queued_where_ran=True, **kw)
        return {r: t.filter(pl.col("region") == r)["ratio"].to_list() for r in ("A", "B")}

    assert ratio(moves=[["j1", 2 * h, "A", "B"]]) == {"A": [1.0, 1.0, 0.0, 0.0, 0.5],
                                                       "B": [0.0, 0.0, 1.0, 1.0, 0.0]}
    # without the moves the whole wait counts where it ran
    assert ratio() == {"A": [0.0, 0.0, 0.0, 0.0, 0.5], "B": [1.0, 1.0, 1.0, 1.0, 0.0]}
    with pytest.raises(ValueError, match="moved job 'j9' is not in the result"):
        ratio(moves=[["j9", h, "A", "B"]])
