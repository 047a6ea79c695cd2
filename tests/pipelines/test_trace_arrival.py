"""trace.arrival: when a Slurm export's jobs arrive in an experiment (Eligible or Submit)."""

from __future__ import annotations

import pytest
from sia.data.errors import ConfigError
from sia.pipelines.studies.evaluate import load_trace
from sia.pipelines.studies.experiment import load_config, parse_config

#: Two GPU jobs submitted together; job 2 waited on job 1 (afterok): eligible 2 h later.
HELD = ("JobID|Partition|Submit|Eligible|Start|End|ElapsedRaw|AllocTRES|State\n"
        "1|gpu|2024-03-01T10:00:00|2024-03-01T10:00:00|2024-03-01T10:00:05|"
        "2024-03-01T12:00:00|7195|gres/gpu=1|COMPLETED\n"
        "2|gpu|2024-03-01T10:00:00|2024-03-01T12:00:00|2024-03-01T12:00:30|"
        "2024-03-01T13:00:00|3570|gres/gpu=1|COMPLETED\n")


def _cfg(trace: dict):
    return parse_config({"name": "t", "trace": trace, "policies": ["fcfs"], "experiments": 1,
                         "pools_per_experiment": "all"}, source="t.yaml")


def test_trace_arrival_reaches_the_reader(tmp_path):
    path = tmp_path / "held.sacct"
    path.write_text(HELD)
    default = _cfg({"path": str(path)})
    submit = _cfg({"path": str(path), "arrival": "submit"})
    assert default.trace.arrival is None and submit.trace.arrival == "submit"
    assert load_trace(default).jobs.sort("job_id")["submit_time"].to_list() == [0.0, 7200.0]
    wl = load_trace(submit)
    assert wl.jobs.sort("job_id")["submit_time"].to_list() == [0.0, 0.0]
    assert any("Eligible field is ignored" in n for n in wl.report.notes)
    eligible = _cfg({"path": str(path), "arrival": "eligible"})
    assert load_trace(eligible).jobs.sort("job_id")["submit_time"].to_list() == [0.0, 7200.0]


def test_trace_arrival_keys_the_replays_only_when_set(tmp_path):
    path = tmp_path / "held.sacct"
    path.write_text(HELD)
    default = _cfg({"path": str(path)})
    # a config without the key keeps the digest and replay keys it had before the key existed
    assert "arrival" not in default.to_dict()["trace"] and "arrival" not in default.trace.key()
    submit = _cfg({"path": str(path), "arrival": "submit"})
    assert submit.to_dict()["trace"]["arrival"] == "submit"
    assert submit.trace.key()["arrival"] == "submit"
    assert submit.digest() != default.digest()


def test_trace_arrival_mistakes_name_the_key(tmp_path):
    path = tmp_path / "held.sacct"
    path.write_text(HELD)
    with pytest.raises(ConfigError, match=r"t.yaml: trace.arrival: 'start' is not one of "
                                          r"eligible, submit"):
        _cfg({"path": str(path), "arrival": "start"})
    with pytest.raises(ConfigError, match=r"trace.arrival: applies to a Slurm sacct export "
                                          r"only, and trace.format is philly"):
        _cfg({"path": str(path), "format": "philly", "arrival": "submit"})
    with pytest.raises(ConfigError, match=r"trace.arrival: applies to trace.path only"):
        _cfg({"synthetic": "base", "arrival": "submit"})
    # through the YAML file and its schema: one line naming the file and the key
    yaml = tmp_path / "exp.yaml"
    yaml.write_text(f"trace: {{path: {path}, arrival: Submit}}\npolicies: [fcfs]\n")
    with pytest.raises(ConfigError, match=r"exp.yaml: trace.arrival: 'Submit' is not one of"):
        load_config(yaml)
    # a trace of another format (auto-detected) is refused when it is read
    csv = tmp_path / "jobs.csv"
    csv.write_text("job_id,pool,submit_time,duration,num_gpus\na,p,0,60,1\n")
    with pytest.raises(ConfigError, match="--arrival submit would be ignored"):
        load_trace(_cfg({"path": str(csv), "arrival": "submit"}))
