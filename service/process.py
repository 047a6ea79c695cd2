"""`sia serve` as a child process: start it on a state directory, wait for its address,
kill -9 it and start it again on the same port (the tests, benchmarks and fault script)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path


class ServerProcess:
    """One `sia serve` process: ``args`` are its arguments after ``serve`` (without
    ``--state`` and ``--port``); its output goes to ``STATE/../serve.log``."""

    def __init__(self, state: Path, args: list[str], *, port: int = 0, timeout_s: float = 180):
        self.state, self.args, self.timeout_s = Path(state), list(args), timeout_s
        self.state.mkdir(parents=True, exist_ok=True)
        self.log_path = self.state.parent / f"{self.state.name}-serve.log"
        self.proc: subprocess.Popen | None = None
        self.start(port)

    def start(self, port: int) -> None:
        """Start the server on ``port`` (0: a free one) and wait until it listens."""
        address = self.state / "address"
        if address.exists():
            address.unlink()
        cmd = [sys.executable, "-m", "sia.pipelines.cli", "serve", *self.args,
               "--state", str(self.state), "--port", str(port)]
        with open(self.log_path, "a") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.timeout_s
        while not address.exists():
            if self.proc.poll() is not None:
                raise RuntimeError(f"sia serve exited: {self.log_path.read_text()[-2000:]}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"sia serve did not listen within {self.timeout_s} s")
            time.sleep(0.05)
        self.url = address.read_text().strip()
        self.port = int(self.url.rsplit(":", 1)[1])

    def kill9(self) -> None:
        """SIGKILL the server (no cleanup runs) and reap it."""
        if self.proc is not None and self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def restart(self) -> None:
        """kill -9, then start again on the same state and port."""
        self.kill9()
        self.start(self.port)

    def stop(self) -> None:
        """Terminate the server (kill it after 10 s)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
