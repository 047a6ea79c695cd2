"""A tracking server that accepts the connection but never answers is a quick, clear error."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from sia.data.errors import SiaError
from sia.pipelines import inputs
from sia.pipelines.cli import main


@pytest.fixture
def silent_server():
    """A local socket that accepts connections and never sends a byte; yields its URI."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(8)
    held, stop = [], threading.Event()

    def accept():
        srv.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(srv.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{srv.getsockname()[1]}"
    stop.set()
    thread.join()
    for conn in held:
        conn.close()
    srv.close()


def test_setup_tracking_fails_quickly_on_a_silent_server(silent_server, tmp_path, monkeypatch):
    from sia.pipelines.tracking import setup_tracking

    monkeypatch.setenv("MLFLOW_TRACKING_URI", silent_server)
    clock = time.monotonic()
    with pytest.raises(SiaError, match="accepted the connection but did not answer"):
        setup_tracking(tmp_path)
    assert time.monotonic() - clock < 10


def test_sia_train_stops_before_any_work_on_a_silent_server(silent_server, tmp_path,
                                                            monkeypatch, capsys):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", silent_server)
    monkeypatch.setenv("SIA_OUTPUT", str(tmp_path))
    read = []
    monkeypatch.setattr(inputs, "workload_from_options",
                        lambda *a, **k: read.append(a) or pytest.fail("read the trace"))
    clock = time.monotonic()
    code = main(["train", "--synthetic", "base"])
    elapsed = time.monotonic() - clock
    err = capsys.readouterr().err
    assert code == 2 and elapsed < 10 and not read
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert len(lines) == 1 and silent_server in lines[0] and "did not answer" in lines[0]


def test_later_mlflow_calls_get_a_timeout(monkeypatch):
    from sia.pipelines.tracking import HTTP_TIMEOUT_S, apply_http_timeouts

    monkeypatch.delenv("MLFLOW_HTTP_REQUEST_TIMEOUT", raising=False)
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "5")  # the user's choice stays
    apply_http_timeouts()
    from mlflow.environment_variables import (
        MLFLOW_HTTP_REQUEST_MAX_RETRIES,
        MLFLOW_HTTP_REQUEST_TIMEOUT,
    )

    assert MLFLOW_HTTP_REQUEST_TIMEOUT.get() == HTTP_TIMEOUT_S
    assert MLFLOW_HTTP_REQUEST_MAX_RETRIES.get() == 5


def test_a_deadline_stops_a_step_that_takes_too_long_and_nests():
    """Issue 36: MLflow's timeouts are per read; the deadline is the step's total time."""
    from sia.pipelines.tracking import TrackingError, deadline

    server = "http://tracking.invalid:5000"
    clock = time.monotonic()
    with pytest.raises(TrackingError, match="did not finish the outer step within 0.4 s"):
        with deadline("the outer step", server, seconds=0.4):
            time.sleep(3)
    assert time.monotonic() - clock < 2
    # an inner step gets at most what the outer has left; the outer's clock goes on after it
    clock = time.monotonic()
    with pytest.raises(TrackingError, match="the outer step within 0.6 s"):
        with deadline("the outer step", server, seconds=0.6):
            with deadline("an inner step", server, seconds=5.0):
                time.sleep(0.1)
            time.sleep(3)
    assert time.monotonic() - clock < 2
    with pytest.raises(TrackingError, match="an inner step within 0.3 s"):
        with deadline("the outer step", server, seconds=0.3):
            with deadline("an inner step", server, seconds=5.0):
                time.sleep(3)
    # no deadline for a local store, and none left armed after a step
    with deadline("a local step", "sqlite:///x.db", seconds=0.1):
        time.sleep(0.3)
    import signal

    assert signal.getitimer(signal.ITIMER_REAL)[0] == 0


def test_a_tuned_training_gets_a_deadline_per_mlflow_step(monkeypatch):
    """With --tune the whole run cannot have one deadline (Optuna's trials take as long as
    they need), so each MLflow step has its own; without it the whole run has one."""
    from contextlib import nullcontext

    from sia.pipelines.tracking import TrackingError
    from sia.pipelines.train import _deadlines

    monkeypatch.setenv("SIA_MLFLOW_DEADLINE_S", "0.3")
    server = "http://tracking.invalid:5000"
    step, whole = _deadlines(server, tune=5)
    assert isinstance(whole, nullcontext)
    with whole:
        time.sleep(0.5)  # the trials: no deadline
        with pytest.raises(TrackingError, match="did not finish logging the tuning results"):
            with step("logging the tuning results"):
                time.sleep(3)
    step, whole = _deadlines(server, tune=0)
    assert isinstance(step("a step"), nullcontext)
    with pytest.raises(TrackingError, match="did not finish logging the training run"):
        with whole:
            time.sleep(3)
