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
