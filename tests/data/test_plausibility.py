"""Implausible values are kept and warned about; non-finite and out-of-range ones are errors."""

from __future__ import annotations

import math

import polars as pl
import pytest
from hypothesis import example, given
from hypothesis import strategies as st
from sia.data.errors import TraceError
from sia.data.plausibility import Thresholds, job_warnings, quota_warnings
from sia.data.schema import validate
from sia.pipelines.cli import main


def _jobs(gpus, durations, pool="a"):
    n = len(gpus)
    return pl.DataFrame({"job_id": [f"j{i}" for i in range(n)], "pool": [pool] * n,
                         "submit_time": [float(i) for i in range(n)],
                         "duration": [float(d) for d in durations], "num_gpus": gpus},
                        schema_overrides={"num_gpus": pl.Int32})


def test_wide_and_long_jobs_are_named_with_their_threshold():
    jobs = _jobs([1, 20, 30], [10.0, 400 * 86400.0, 10.0])
    lines = job_warnings(jobs, Thresholds(max_gpus=16, max_duration_days=365))
    assert len(lines) == 2
    assert lines[0].startswith("num_gpus: job 'j2'") and "30 GPUs" in lines[0]
    assert "--warn-gpus 16" in lines[0] and "(1 more such jobs)" in lines[0]
    assert lines[1].startswith("duration: job 'j1'") and "--warn-days 365" in lines[1]
    assert job_warnings(jobs, Thresholds(max_gpus=30, max_duration_days=400)) == []


def test_a_quota_resting_on_one_job_is_named():
    # span 10 s, load 1: quota = ceil(gpu-seconds / 10); without j0: ceil(9 * 1 / 10) = 1
    jobs = _jobs([1] * 10, [1000.0] + [1.0] * 9).with_columns(
        pl.Series("submit_time", [float(i) * 10 / 9 for i in range(10)]))
    pools = pl.DataFrame({"pool": ["a"], "quota_gpus": [101], "target_load": [1.0]})
    (line,) = quota_warnings(jobs, pools, 10.0, Thresholds(quota_factor=4))
    assert "pool 'a' gets 101 GPUs" in line and "1 without job 'j0'" in line
    assert quota_warnings(jobs, pools, 10.0, Thresholds(quota_factor=200)) == []
    # quotas from a file (no target load) are the user's: nothing to say
    assert quota_warnings(jobs, pools.drop("target_load"), 10.0, Thresholds()) == []


def test_ingest_options_move_the_thresholds(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_text("pool,submit_time,duration,num_gpus\na,0,60,64\na,60,60,1\n")
    assert main(["ingest", str(path), "--out", str(tmp_path / "o")]) == 0
    assert "warning: num_gpus" not in capsys.readouterr().out
    assert main(["ingest", str(path), "--out", str(tmp_path / "o"), "--warn-gpus", "32"]) == 0
    assert "warning: num_gpus: job '1' (pool 'a') asks for 64 GPUs" in capsys.readouterr().out
    assert main(["ingest", str(path), "--out", str(tmp_path / "o"), "--warn-days", "nan"]) == 2
    assert "--warn-days must be a finite number > 0" in capsys.readouterr().err


@given(st.lists(st.floats(allow_nan=True, allow_infinity=True, width=64), min_size=1,
                max_size=8))
@example([1e308, -1e308])  # finite, but 2e308 s apart once rebased
def test_validate_keeps_only_finite_times_and_durations(values):
    n = len(values)
    raw = pl.DataFrame({"pool": ["a"] * n, "submit_time": values,
                        "duration": [abs(v) if math.isfinite(v) else v for v in values],
                        "num_gpus": [1] * n})
    # times and durations of 2^53 or more are refused: a float64 no longer counts them exactly
    finite_positive = (all(math.isfinite(v) and v != 0 and abs(v) < 2.0**53 for v in values)
                       and math.isfinite(max(values) - min(values)))
    if not finite_positive:
        with pytest.raises(TraceError, match="row [0-9]+, column '(submit_time|duration)'"):
            validate(raw, rebase_time=True)
        return
    jobs, _ = validate(raw, rebase_time=True)
    assert jobs.height == n
    assert jobs["submit_time"].is_finite().all() and (jobs["duration"] > 0).all()


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_gpu_counts_either_fit_the_contract_or_name_the_row(gpus):
    raw = pl.DataFrame({"pool": ["a", "a"], "submit_time": [0.0, 1.0],
                        "duration": [1.0, 1.0], "num_gpus": [1, gpus]})
    if 1 <= gpus <= 2**31 - 1:
        jobs, _ = validate(raw)
        assert jobs["num_gpus"].to_list() == [1, gpus]
    else:
        with pytest.raises(TraceError, match="row 2, column 'num_gpus'"):
            validate(raw)
