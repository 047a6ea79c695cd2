"""`sia ingest` and `sia generate` end to end, and load_workload."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
from sia.data.errors import ConfigError
from sia.pipelines.cli import main
from sia.pipelines.inputs import load_workload, parse_load_range, parse_mapping


def test_ingest_real_philly(philly_path, tmp_path, capsys):
    out = tmp_path / "philly"
    assert main(["ingest", str(philly_path), "--clean", "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rows read: 82,247" in text and "kept: 82,182" in text
    assert "exact_duplicate 65" in text and "pools: 15" in text
    report = json.loads((out / "report.json").read_text())
    assert report["rows_read"] == 82_247 and report["dropped"] == {"exact_duplicate": 65}
    jobs = pl.read_parquet(out / "jobs.parquet")
    pools = pl.read_parquet(out / "pools.parquet")
    assert jobs.height == 82_182 and pools.height == 15
    # the written folder reads back as a canonical trace with the same pools
    wl = load_workload(out)
    assert wl.jobs.equals(jobs) and wl.pools.equals(pools)


def test_ingest_without_clean_fails_naming_rows(philly_path, tmp_path, capsys):
    code = main(["ingest", str(philly_path), "--out", str(tmp_path / "o")])
    err = capsys.readouterr().err
    assert code == 2
    assert "exact duplicate of row" in err and "--clean" in err
    assert err.count("\n") == 1  # one line, no traceback


def test_ingest_generic_folder_with_mapping(tmp_path, capsys):
    folder = tmp_path / "trace"
    folder.mkdir()
    (folder / "vc1.csv").write_text("sub_s,run_s,n_gpu\n0,600,1\n30,60,2\n")
    (folder / "vc2.csv").write_text("sub_s,run_s,n_gpu\n10,6000,4\n")
    out = tmp_path / "out"
    code = main(["ingest", str(folder), "--pool-from", "file-stem",
                 "--map", "submit_time=sub_s,duration=run_s", "--map", "num_gpus=n_gpu",
                 "--load-range", "0.5,0.5", "--out", str(out)])
    assert code == 0, capsys.readouterr().err
    pools = pl.read_parquet(out / "pools.parquet")
    # span 30 s, load .5: vc1 ceil(720 / 15) = 48, vc2 ceil(24000 / 15) = 1600
    assert dict(zip(pools["pool"], pools["quota_gpus"], strict=True)) == {"vc1": 48, "vc2": 1600}


def test_ingest_helios_uses_gpu_numbers_beside_log(tmp_path):
    d = tmp_path / "Venus"
    d.mkdir()
    (d / "cluster_log.csv").write_text(
        "job_id,user,vc,gpu_num,cpu_num,node_num,state,submit_time,start_time,end_time,"
        "duration,queue\n"
        "1,u1,vcA,8,1,1,COMPLETED,2020-06-09 18:41:01,2020-06-09 18:41:01,"
        "2020-06-09 19:41:01,3600,0\n"
        "2,u2,vcB,0,1,1,COMPLETED,2020-06-09 18:42:01,2020-06-09 18:42:01,"
        "2020-06-09 18:43:01,60,0\n")
    (d / "cluster_gpu_number.csv").write_text("date,vcA,vcB,total\n2020-06-09,16,8,24\n")
    out = tmp_path / "out"
    assert main(["ingest", str(d / "cluster_log.csv"), "--out", str(out)]) == 0
    pools = pl.read_parquet(out / "pools.parquet")
    assert pools.to_dicts() == [{"pool": "vcA", "quota_gpus": 16}]
    report = json.loads((out / "report.json").read_text())
    assert report["left_out"] == {"cpu_only": 1}


def test_ingest_quota_file_too_small(tmp_path, capsys):
    trace = tmp_path / "t.csv"
    trace.write_text("pool,submit_time,duration,num_gpus\na,0,10,4\n")
    quotas = tmp_path / "q.csv"
    quotas.write_text("pool,quota_gpus\na,2\n")
    assert main(["ingest", str(trace), "--quotas", str(quotas), "--out", str(tmp_path / "o")]) == 2
    assert "quota 2 GPUs but a job needs 4" in capsys.readouterr().err


@pytest.mark.parametrize("args,message", [
    (["--load-range", "high"], "--load-range"),
    (["--time-unit", "hours"], "--time-unit"),
    (["--map", "submit_time"], "--map"),
    (["--format", "excel"], "--format"),
])
def test_ingest_bad_options(tmp_path, capsys, args, message):
    trace = tmp_path / "t.csv"
    trace.write_text("pool,submit_time,duration,num_gpus\na,0,10,4\n")
    assert main(["ingest", str(trace), "--out", str(tmp_path / "o"), *args]) == 2
    assert message in capsys.readouterr().err


def test_ingest_broken_file(tmp_path, capsys):
    trace = tmp_path / "broken.csv"
    trace.write_text("pool,submit_time,duration,num_gpus\na,0,10,4\na,5,ten,1\n")
    assert main(["ingest", str(trace), "--out", str(tmp_path / "o")]) == 2
    assert "broken.csv: row 2, column 'duration'" in capsys.readouterr().err
    assert main(["ingest", str(trace), "--clean", "--out", str(tmp_path / "o")]) == 0
    assert json.loads((tmp_path / "o" / "report.json").read_text())["dropped"] == {"non_numeric": 1}


def test_generate(tmp_path, capsys):
    out = tmp_path / "gen"
    assert main(["generate", "--variant", "fewer-queues", "--seed", "4", "--days", "2",
                 "--out", str(out)]) == 0
    pools = pl.read_parquet(out / "pools.parquet")
    assert pools["pool"].to_list() == ["q0", "q1"]
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert jobs.height > 0 and jobs["submit_time"].max() < 2 * 86_400
    assert main(["generate", "--variant", "nope", "--out", str(out)]) == 2
    assert "unknown synthetic variant 'nope'" in capsys.readouterr().err


def test_help_is_useful(capsys):
    assert main(["ingest", "--help"]) == 0
    text = capsys.readouterr().out
    for word in ("jobs.parquet", "pools.parquet", "report.json", "Philly", "Helios", "--map",
                 "--clean", "Examples"):
        assert word in text
    assert main(["generate", "--help"]) == 0
    text = capsys.readouterr().out
    for word in ("more-duration-skew", "fewer-wide-jobs", "jobs.parquet", "--seed"):
        assert word in text


def test_load_workload_defaults_to_synthetic_base():
    wl = load_workload()
    assert wl.source.startswith("synthetic:base")
    assert wl.pools.height == 4 and wl.report.rows_kept == wl.jobs.height


def test_load_workload_rejects_both_sources(tmp_path):
    with pytest.raises(ConfigError, match="either a TRACE or --synthetic"):
        load_workload(tmp_path, synthetic="base")


def test_option_parsers():
    assert parse_mapping(["a=b,c = d", "e=f"]) == {"a": "b", "c": "d", "e": "f"}
    assert parse_load_range("0.6, 1.1") == (0.6, 1.1)
    with pytest.raises(ConfigError):
        parse_load_range("1.1,0.6")
    with pytest.raises(ConfigError):
        parse_mapping(["=x"])


SACCT = ("JobID|User|Account|Partition|JobName|Submit|Start|End|ElapsedRaw|TimelimitRaw|"
         "ReqTRES|AllocTRES|State\n"
         "1|ann|lab|gpu|a|2024-03-01T10:00:00|2024-03-01T10:01:00|2024-03-01T11:01:00|3600|"
         "30|gres/gpu=1|gres/gpu=1|TIMEOUT\n"
         "1.batch|||||2024-03-01T10:01:00|2024-03-01T10:01:00|2024-03-01T11:01:00|3600||"
         "|gres/gpu=1|TIMEOUT\n"
         "2|bob|lab|gpu|b|2024-03-01T10:05:00|2024-03-01T10:06:00|2024-03-01T10:16:00|600|"
         "60|gres/gpu:a100=2|gres/gpu=2,gres/gpu:a100=2|COMPLETED\n"
         "3|bob|lab|cpu|c|2024-03-01T10:05:00|2024-03-01T10:06:00|2024-03-01T10:16:00|600|"
         "60|cpu=4|cpu=4|COMPLETED\n"
         "4|bob|lab|gpu|d|2024-03-01T10:07:00|Unknown|2024-03-01T10:09:00|0|60|gres/gpu=1||"
         "CANCELLED by 77\n")


def test_ingest_sacct_prints_exclusions_and_limit_warning(tmp_path, capsys):
    trace = tmp_path / "cluster.sacct"
    trace.write_text(SACCT)
    out = tmp_path / "out"
    assert main(["ingest", str(trace), "--out", str(out)]) == 0, capsys.readouterr().err
    text = capsys.readouterr().out
    assert "rows read: 5   kept: 2   dropped: 0" in text
    assert ("left out: job_steps 1, cpu_only 1, cancelled_pending 1, never_started 0, "
            "unfinished 0, zero_second_run 0") in text
    assert "format: sacct" in text and "pool: the Partition field" in text
    # job 1 ran 3600 s under a 30-minute limit: kept, and warned about
    assert "warning: 1 job(s) ran longer than their time limit plus 60 s" in text
    jobs = pl.read_parquet(out / "jobs.parquet")
    assert jobs.select("job_id", "num_gpus", "time_limit", "state", "user", "tag").rows() == [
        ("1", 1, 1800.0, "TIMEOUT", "ann", "a"), ("2", 2, 3600.0, "COMPLETED", "bob", "b")]
    report = json.loads((out / "report.json").read_text())
    assert report["left_out"]["cancelled_pending"] == 1 and len(report["warnings"]) == 1
    # the written folder reads back with its limits and states
    assert load_workload(out).jobs.equals(jobs)
    # --pool-from user keeps the sacct reader
    assert main(["ingest", str(trace), "--pool-from", "user", "--out", str(out)]) == 0
    assert sorted(pl.read_parquet(out / "jobs.parquet")["pool"]) == ["ann", "bob"]


def test_ingest_sacct_refuses_map_and_time_unit(tmp_path, capsys):
    trace = tmp_path / "cluster.sacct"
    trace.write_text(SACCT)
    for args, word in ((["--map", "pool=Account"], "--map"), (["--time-unit", "ms"],
                                                             "--time-unit ms")):
        assert main(["ingest", str(trace), "--out", str(tmp_path / "o"), *args]) == 2
        err = capsys.readouterr().err
        assert word in err and "sacct" in err and err.count("\n") == 1


def test_ingest_sacct_without_gpu_jobs_says_what_was_left_out(tmp_path, capsys):
    trace = tmp_path / "cpu.sacct"
    trace.write_text("\n".join(SACCT.splitlines()[:1] + SACCT.splitlines()[4:5]) + "\n")
    assert main(["ingest", str(trace), "--out", str(tmp_path / "o")]) == 2
    err = capsys.readouterr().err
    assert "cpu.sacct: no jobs left to schedule ({} dropped, {'cpu_only': 1} left out)" in err


#: Two GPU jobs submitted together; job 2 waited on job 1 (afterok): eligible 2 h later.
SACCT_HELD = ("JobID|Partition|Submit|Eligible|Start|End|ElapsedRaw|AllocTRES|State\n"
              "1|gpu|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:05|"
              "2024-03-01T12:00:00|7195|gres/gpu=1|COMPLETED\n"
              "2|gpu|2024-03-01T10:00:00|2024-03-01T12:00:00|2024-03-01T12:00:30|"
              "2024-03-01T13:00:00|3570|gres/gpu=1|COMPLETED\n")


def test_ingest_arrival_submit_reaches_the_sacct_reader(tmp_path, capsys):
    trace = tmp_path / "held.sacct"
    trace.write_text(SACCT_HELD)
    for args, submits, said in (([], [0.0, 7200.0], "became eligible after their submission"),
                                (["--arrival", "eligible"], [0.0, 7200.0], "became eligible"),
                                (["--arrival", "submit"], [0.0, 0.0], "Eligible field is ignored")):
        out = tmp_path / f"o{len(args)}{args[-1] if args else ''}"
        assert main(["ingest", str(trace), "--out", str(out), *args]) == 0, \
            capsys.readouterr().err
        assert said in capsys.readouterr().out
        jobs = pl.read_parquet(out / "jobs.parquet").sort("job_id")
        assert jobs["submit_time"].to_list() == submits, args
        notes = json.loads((out / "report.json").read_text())["notes"]
        assert any(said in n for n in notes)  # the choice is in the written report too


def test_arrival_option_errors(tmp_path, capsys):
    trace = tmp_path / "held.sacct"
    trace.write_text(SACCT_HELD)
    csv = tmp_path / "t.csv"
    csv.write_text("pool,submit_time,duration,num_gpus\na,0,10,4\n")
    for argv, message in (
            (["ingest", str(trace), "--arrival", "start"], "--arrival 'start': choose eligible"),
            (["ingest", str(csv), "--arrival", "submit"],
             "read as a generic trace: --arrival submit would be ignored"),
            (["ingest", "builtin:philly", "--arrival", "submit"],
             "read as a philly trace: --arrival submit would be ignored"),
            (["features", "--synthetic", "base", "--days", "1", "--arrival", "submit"],
             "a synthetic workload has no export; drop it")):
        assert main([*argv, "--out", str(tmp_path / "o.parquet")]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err


def test_every_command_reading_a_trace_takes_arrival():
    """--arrival goes wherever --pool-from does (the shared reader options)."""
    from sia.pipelines.cli import _command

    commands = _command().commands
    with_pool_from = {name for name, cmd in commands.items()
                      if any("--pool-from" in p.opts for p in cmd.params)}
    assert {"ingest", "replay", "backtest", "features", "train", "serve", "shadow"} \
        <= with_pool_from
    for name in with_pool_from:
        assert any("--arrival" in p.opts for p in commands[name].params), name


def test_serve_inputs_pass_arrival_on(tmp_path):
    from sia.pipelines.service_inputs import serve_inputs

    trace = tmp_path / "held.sacct"
    trace.write_text(SACCT_HELD)
    for arrival, submits in ((None, [0.0, 7200.0]), ("submit", [0.0, 0.0])):
        got = serve_inputs(trace, arrival=arrival)
        assert got.jobs.sort("job_id")["submit_time"].to_list() == submits


GRAHAM = (Path(__file__).resolve().parents[2] / ".." / "shared" / "traces" / "graham"
          / "graham.sacct.txt.gz")


@pytest.mark.skipif(not GRAHAM.exists(), reason="../shared/traces/graham is not here")
def test_ingest_real_graham_with_no_option(tmp_path, capsys):
    out = tmp_path / "graham"
    assert main(["ingest", str(GRAHAM), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    assert "rows read: 133,025   kept: 12,591   dropped: 0" in text
    assert ("left out: cpu_only 120,434, cancelled_pending 0, never_started 0, unfinished 0, "
            "zero_second_run 0") in text
    assert "pools: 15" in text and "warning: 1 job(s) ran longer" in text
