"""SIGTERM behaves as Ctrl-C, and a sweep resumed after it is byte-identical (issue 36)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

CONFIG = """study: evaluate
name: sig
seed: 0
trace: {synthetic: base, days: 4}
replay: {start_day: 1}
warmup_days: 0.5
grid: {experiments: 8, pools_per_experiment: 3}
policies: [fcfs, maxmin, sia-perfect]
"""


def _sia() -> str:
    return str(Path(sys.executable).parent / "sia")


def _evaluate(config: Path, out: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen([_sia(), "evaluate", str(config), "--workers", "2", "--no-mlflow",
                             "--out", str(out)], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, env=env)


@pytest.mark.slow
def test_sigterm_stops_a_sweep_as_ctrl_c_and_the_resume_is_byte_identical(tmp_path):
    config = tmp_path / "sig.yaml"
    config.write_text(CONFIG)
    env = {**os.environ, "SIA_OUTPUT": str(tmp_path / "store")}
    env.pop("MLFLOW_TRACKING_URI", None)
    out = tmp_path / "interrupted"
    proc = _evaluate(config, out, env)
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and len(list(out.rglob("*.done.json"))) < 2:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.2)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    kept = len(list(out.rglob("*.done.json")))
    if proc.returncode == 0:  # pragma: no cover - the sweep beat the signal on this machine
        pytest.skip("the sweep finished before SIGTERM arrived")
    assert proc.returncode == 130, err
    assert "interrupted:" in err and "resume with:" in err, err
    assert "Traceback" not in err and "resource_tracker" not in err, err
    assert 2 <= kept < 24
    # the same command resumes: the kept replays are reused, the rest run
    resumed = _evaluate(config, out, env)
    text, err = resumed.communicate(timeout=600)
    assert resumed.returncode == 0, err
    assert f"reused from disk: {kept}" in text.replace("\n", " "), text
    whole = _evaluate(config, tmp_path / "whole", env)
    _, err = whole.communicate(timeout=600)
    assert whole.returncode == 0, err
    for name in ("aggregate.csv", "summary.csv"):  # neither holds a wall time
        assert (out / name).read_bytes() == (tmp_path / "whole" / name).read_bytes(), name
