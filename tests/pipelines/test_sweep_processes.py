"""A sweep cleans up after itself: no worker outlives a killed parent; Ctrl-C says what was kept.

The subprocess tests start ``sia evaluate --workers 2`` on a synthetic sweep
of 120 small replays (long enough that it is still running when signalled,
however loaded the machine) and signal it as soon as its workers exist.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest
import yaml
from sia.pipelines.engine.execute import resume_command
from sia.pipelines.executors import InlineExecutor
from sia.pipelines.studies import evaluate as ev
from sia.pipelines.studies.experiment import parse_config

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")

SWEEP = {"name": "procs", "seed": 3, "trace": {"synthetic": "base", "days": 3},
         "warmup_days": 0.5, "experiments": 60, "pools_per_experiment": 3,
         "quotas": "from_load", "load_range": [0.6, 1.1], "policies": ["fcfs", "maxmin"]}
WAIT_S = 90  # upper bound for slow machines; the tests take a few seconds normally


def _start(tmp_path: Path) -> tuple[subprocess.Popen, Path, list[str]]:
    cfg = tmp_path / "procs.yaml"
    cfg.write_text(yaml.safe_dump(SWEEP))
    out = tmp_path / "res"
    argv = [sys.executable, "-m", "sia.pipelines.cli", "evaluate", str(cfg), "--workers", "2",
            "--no-mlflow", "--out", str(out)]
    env = {**os.environ, "SIA_OUTPUT": str(tmp_path / "root")}
    env.pop("MLFLOW_TRACKING_URI", None)
    # its own session, so the test can send Ctrl-C to the whole group as a terminal does
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=env, start_new_session=True)
    return proc, out, argv


def _workers(proc: subprocess.Popen) -> list[psutil.Process]:
    try:
        kids = psutil.Process(proc.pid).children(recursive=True)
    except psutil.NoSuchProcess:
        return []
    found = []
    for kid in kids:
        try:
            if "spawn_main" in " ".join(kid.cmdline()):
                found.append(kid)
        except psutil.Error:
            pass
    return found


def _wait_for(proc: subprocess.Popen, ready) -> list[psutil.Process]:
    """Wait until the sweep has 2 workers and ``ready()``; return its workers."""
    deadline = time.monotonic() + WAIT_S
    while time.monotonic() < deadline:
        assert proc.poll() is None, f"sweep ended early: {proc.communicate()}"
        workers = _workers(proc)
        if len(workers) == 2 and ready():
            return workers
        time.sleep(0.05)
    proc.kill()
    pytest.fail(f"no 2 workers within {WAIT_S} s: {proc.communicate()}")


def _alive(procs: list[psutil.Process]) -> list[int]:
    alive = []
    for p in procs:
        try:
            if p.is_running() and p.status() != psutil.STATUS_ZOMBIE:
                alive.append(p.pid)
        except psutil.NoSuchProcess:
            pass
    return alive


def _assert_gone(procs: list[psutil.Process], within_s: float = 10.0) -> None:
    deadline = time.monotonic() + within_s
    while _alive(procs) and time.monotonic() < deadline:
        time.sleep(0.05)
    left = _alive(procs)
    for pid in left:  # do not leave them running for the rest of the suite
        os.kill(pid, signal.SIGKILL)
    assert not left, f"worker processes {left} outlived the sweep"


def test_sigkill_of_the_sweep_leaves_no_worker_behind(tmp_path):
    proc, _, _ = _start(tmp_path)
    workers = _wait_for(proc, lambda: True)
    proc.kill()
    proc.wait(timeout=30)
    _assert_gone(workers)


def test_ctrl_c_says_what_was_kept_and_how_to_resume_and_exits_130(tmp_path):
    proc, out, argv = _start(tmp_path)
    workers = _wait_for(proc, lambda: any(out.glob("exp-*/*.done.json")))
    os.killpg(proc.pid, signal.SIGINT)  # what Ctrl-C in a terminal does
    stdout, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "Traceback" not in stdout + stderr
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    m = re.fullmatch(r"interrupted: (\d+) of 120 replays are kept in (.+); resume with: (.+)",
                     lines[0])
    assert m, lines[0]
    kept = len(list(out.glob("exp-*/*.done.json")))
    assert 1 <= int(m[1]) == kept < 120
    assert m[2] == str(out)
    assert m[3].split() == ["python", "-m", "sia.pipelines.cli"] + argv[3:]
    _assert_gone(workers)


class _CtrlC(InlineExecutor):
    """Runs ``n`` replays in-process, then raises KeyboardInterrupt (Ctrl-C)."""

    def __init__(self, n: int):
        self.n = n

    def run(self, fn, items):
        for i, pair in enumerate(super().run(fn, items)):
            if i == self.n:
                raise KeyboardInterrupt
            yield pair


def test_interrupted_execute_counts_reused_and_new_replays(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(sys, "argv", ["/somewhere/bin/sia-not-on-path", "evaluate", "a b.yaml"])
    cfg = parse_config({**SWEEP, "experiments": 2})
    out = tmp_path / "res"
    with pytest.raises(KeyboardInterrupt):
        ev.run_sweep(cfg, out, _CtrlC(1), progress=False, log_mlflow=False, make_plots=False)
    first = capsys.readouterr().err.strip()
    assert first == (f"interrupted: 1 of 4 replays are kept in {out}; resume with: "
                     "/somewhere/bin/sia-not-on-path evaluate 'a b.yaml'")
    with pytest.raises(KeyboardInterrupt):  # resumes: 1 reused, 2 more stored
        ev.run_sweep(cfg, out, _CtrlC(2), progress=False, log_mlflow=False, make_plots=False)
    assert capsys.readouterr().err.startswith(f"interrupted: 3 of 4 replays are kept in {out};")
    assert len(list(out.glob("exp-*/*.done.json"))) == 3


def test_resume_command_names_the_program_as_it_was_run(tmp_path):
    assert resume_command(["/x/pipelines/cli/__main__.py", "evaluate", "c.yaml"]) == \
        "python -m sia.pipelines.cli evaluate c.yaml"
    assert resume_command(["./bin/other", "--out", "my dir"]) == "./bin/other --out 'my dir'"
    assert resume_command([]) == "the same command"


@pytest.mark.parametrize("stuck", [True, False])
def test_an_interrupted_command_does_not_wait_forever_for_a_stuck_thread(stuck):
    # a non-daemon thread that never ends (as a process pool's manager thread that missed its
    # killed workers): the interpreter's exit would join it forever; after an interrupt the
    # CLI ends the process with 130 instead, and leaves a clean process to its usual exit
    code = ("import sys, threading\n"
            "from sia.pipelines.cli import exit_if_threads_stuck\n"
            f"if {stuck}:\n"
            "    threading.Thread(target=threading.Event().wait).start()\n"
            "print('before', flush=True)\n"
            "exit_if_threads_stuck(130)\n"
            "print('returned')\n"
            "sys.exit(0)\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    if stuck:
        assert proc.returncode == 130 and proc.stdout == "before\n", proc
    else:
        assert proc.returncode == 0 and proc.stdout == "before\nreturned\n", proc
