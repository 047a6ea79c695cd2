"""MLflow store setup (DESIGN.md 5.4): a local SQLite file by default, a server when asked.

The default tracking URI is ``sqlite:///<output root>/mlflow.db`` with
artifacts under ``<output root>/mlartifacts``, so nothing needs a server.
``MLFLOW_TRACKING_URI`` overrides it. An ``http(s)://`` server is probed
before MLflow is touched: it must accept a TCP connection *and* answer an
HTTP request within :data:`PROBE_TIMEOUT_S`, so an unreachable or silent
server is a clear :class:`SiaError` within seconds instead of MLflow's long
retries; every later MLflow HTTP call gets a timeout too
(:func:`apply_http_timeouts`). Experiment names come from the command
(``--experiment``), else ``MLFLOW_EXPERIMENT_NAME``, else the defaults below.
:class:`StoreSetup` opens the store in a background thread, so creating a
fresh SQLite store (MLflow's migrations) overlaps the caller's own work.
"""

from __future__ import annotations

import http.client
import logging
import os
import signal
import socket
import subprocess
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

from sia.data.errors import ConfigError, SiaError
from sia.data.paths import output_root

PREDICTOR_EXPERIMENT = "sia-predictors"
EVALUATION_EXPERIMENT = "sia-evaluations"
TRACKING_ENV = "MLFLOW_TRACKING_URI"
EXPERIMENT_ENV = "MLFLOW_EXPERIMENT_NAME"
PROBE_TIMEOUT_S = 3.0
#: every MLflow HTTP request after the probe: seconds per request and retries (unless the
#: user set MLflow's own variables)
HTTP_TIMEOUT_S = 10
HTTP_RETRIES = 1
#: the total time an MLflow step may take against a server (seconds; ``$SIA_MLFLOW_DEADLINE_S``
#: overrides): a server that answers one byte a second, which no per-read timeout catches,
#: fails there, and the command ends within 15 s of its start of the step (issue 36)
DEADLINE_S = 10.0
DEADLINE_ENV = "SIA_MLFLOW_DEADLINE_S"


class TrackingError(SiaError):
    """The MLflow tracking store cannot be used (unreachable server, bad URI)."""


def default_tracking_uri(root: Path | None = None) -> str:
    """Return ``sqlite:///<root>/mlflow.db`` (absolute path; root defaults to the output root)."""
    root = (root or output_root()).resolve()
    return f"sqlite:///{root / 'mlflow.db'}"


def artifact_location(root: Path | None = None) -> str:
    """Return the artifact folder URI used for experiments created in a local store."""
    return (Path(root or output_root()).resolve() / "mlartifacts").as_uri()


def tracking_uri(root: Path | None = None) -> str:
    """Return the tracking URI in force: ``$MLFLOW_TRACKING_URI`` or the default SQLite file."""
    return os.environ.get(TRACKING_ENV) or default_tracking_uri(root)


def check_reachable(uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> None:
    """Raise TrackingError unless an http(s) tracking server connects and answers in time.

    The server must accept a TCP connection and answer an HTTP request (any
    status: even an error page proves it answers) within ``timeout_s`` each.
    Local URIs (sqlite, file paths) are not probed.
    """
    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return
    host = parsed.hostname
    if not host:
        raise TrackingError(f"{TRACKING_ENV}={uri!r} has no host name")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    fix = (f"start it, fix {TRACKING_ENV}, or unset {TRACKING_ENV} to use the local store "
           f"{default_tracking_uri()}")
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise TrackingError(f"MLflow tracking server {uri} is unreachable "
                            f"({exc.__class__.__name__}: {exc}); {fix}") from None
    try:
        with urllib.request.urlopen(uri.rstrip("/") + "/health", timeout=timeout_s):
            pass
    except urllib.error.HTTPError:
        pass  # it answered
    except (OSError, ValueError, http.client.HTTPException) as exc:  # timeouts, resets, TLS
        # errors, bytes that are not HTTP (BadStatusLine)
        raise TrackingError(f"MLflow tracking server {uri} accepted the connection but did not "
                            f"answer an HTTP request within {timeout_s:g} s "
                            f"({exc.__class__.__name__}: {exc}); {fix}") from None


def apply_http_timeouts() -> None:
    """Give every later MLflow HTTP call a timeout and few retries (MLflow's own variables,
    unless the user set them): a server that stops answering mid-run fails in about a
    minute, not after MLflow's default 2 min x 7 retries."""
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_TIMEOUT", str(HTTP_TIMEOUT_S))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", str(HTTP_RETRIES))
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_BACKOFF_FACTOR", "1")


class _DeadlinePassed(BaseException):
    """Raised by the alarm inside MLflow's code: a BaseException, so no ``except Exception``
    on the way (MLflow's retries, requests') swallows it; :func:`deadline` turns it into a
    TrackingError."""


def deadline_s() -> float:
    """Return the deadline of one MLflow step in seconds (``$SIA_MLFLOW_DEADLINE_S``, else
    :data:`DEADLINE_S`)."""
    text = os.environ.get(DEADLINE_ENV, "")
    try:
        value = float(text) if text.strip() else DEADLINE_S
    except ValueError:
        raise ConfigError(f"{DEADLINE_ENV}={text!r}: give a number of seconds") from None
    if not value > 0:
        raise ConfigError(f"{DEADLINE_ENV}={text!r}: give a positive number of seconds")
    return value


def is_remote(uri: str) -> bool:
    """Return True for a tracking server (http/https), the stores that can be slow."""
    return urlparse(uri).scheme in ("http", "https")


#: a step that uploads or downloads files (models, per-job tables, plots) gets this many times
#: the deadline: a healthy server on a slow link needs more than for a few small requests
UPLOAD_FACTOR = 6


@contextmanager
def deadline(what: str, uri: str | None = None, seconds: float | None = None, *,
             uploads: bool = False) -> Iterator[None]:
    """Give the MLflow calls of the block a *total* deadline against a server: past
    ``seconds`` (:func:`deadline_s`, times :data:`UPLOAD_FACTOR` for a step that moves
    files) they stop with a one-line TrackingError naming ``what``.

    MLflow's own timeouts are per read, so a server that sends a byte a second holds a command
    for ever. The deadline is an interval timer (SIGALRM), in force only for http(s) stores
    and in the main thread. Deadlines nest: an inner step gets at most what the outer one has
    left, and the outer one's clock goes on after it. Local stores are not limited.
    """
    uri = uri or tracking_uri()
    if (not is_remote(uri) or not hasattr(signal, "setitimer")
            or threading.current_thread() is not threading.main_thread()):
        yield
        return
    limit = (deadline_s() if seconds is None else seconds) * (UPLOAD_FACTOR if uploads else 1)
    outer_left = signal.getitimer(signal.ITIMER_REAL)[0]
    if outer_left > 0:
        limit = min(limit, outer_left)
    started = time.monotonic()

    def on_alarm(signum, frame):
        raise _DeadlinePassed

    previous = signal.signal(signal.SIGALRM, on_alarm)
    signal.setitimer(signal.ITIMER_REAL, limit, 1.0)  # again each second if swallowed
    try:
        yield
    except _DeadlinePassed:
        raise TrackingError(f"MLflow tracking server {uri} did not finish {what} within "
                            f"{limit:.3g} s (it answers too slowly); fix or unset {TRACKING_ENV}, "
                            f"or raise {DEADLINE_ENV}") from None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        if outer_left > 0:  # the outer step's clock goes on
            signal.setitimer(signal.ITIMER_REAL,
                             max(1e-3, outer_left - (time.monotonic() - started)), 1.0)


def experiment_name(name: str | None = None, default: str = PREDICTOR_EXPERIMENT) -> str:
    """Return the experiment to log into: ``name`` (``--experiment``), else
    ``$MLFLOW_EXPERIMENT_NAME``, else ``default``."""
    chosen = name if name is not None else (os.environ.get(EXPERIMENT_ENV) or default)
    if not chosen.strip():
        raise ConfigError("--experiment must be a non-empty name")
    return chosen.strip()


def setup_tracking(root: Path | None = None, experiment: str = PREDICTOR_EXPERIMENT) -> str:
    """Point MLflow at the store in force, create ``experiment`` if needed, and return the URI.

    A local SQLite store gets its folder created and its artifacts under the
    output root.
    """
    uri = tracking_uri(root)
    check_store(uri)
    with deadline("opening the store", uri):
        return _open_store(uri, root, experiment)


def check_store(uri: str) -> None:
    """Raise TrackingError before MLflow is touched when the store of ``uri`` cannot be used: a
    server that does not answer HTTP (:func:`check_reachable`), a local SQLite store in a
    folder that does not exist (named by ``$MLFLOW_TRACKING_URI``: the default store's folder
    is created) or that cannot be written."""
    check_reachable(uri)
    if not uri.startswith("sqlite:///"):
        return
    name = uri.removeprefix("sqlite:///").split("?", 1)[0]
    if not name or name == ":memory:" or name.startswith("file:"):
        return
    path = Path(name)
    if not path.parent.is_dir():
        if os.environ.get(TRACKING_ENV) != uri:  # the default store: its folder is created
            return
        raise TrackingError(f"{TRACKING_ENV}={uri}: the folder {path.parent} does not exist; "
                            "create it, or fix the path")
    if path.exists() and not os.access(path, os.W_OK):
        raise TrackingError(f"{TRACKING_ENV}={uri}: the store {path} is read-only; give a "
                            "writable store (or copy it)")
    if not os.access(path.parent, os.W_OK):
        raise TrackingError(f"{TRACKING_ENV}={uri}: the folder {path.parent} is not writable "
                            "(SQLite writes its journal there); give a writable store")


def _open_store(uri: str, root: Path | None, experiment: str) -> str:
    """Set MLflow's URIs to ``uri`` and make ``experiment`` the active one; return ``uri``."""
    apply_http_timeouts()
    import mlflow

    # creating a fresh store logs its schema migrations at INFO: not the user's concern
    for name in ("mlflow.store.db.utils", "alembic"):
        logging.getLogger(name).setLevel(logging.WARNING)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        with _local_store_lock(uri):
            exp = mlflow.get_experiment_by_name(experiment)
            if exp is None:
                location = artifact_location(root) if uri.startswith("sqlite:") else None
                mlflow.create_experiment(experiment, artifact_location=location)
        mlflow.set_experiment(experiment)
    except Exception as exc:  # MLflow raises many kinds; the user needs one line
        text = " ".join(str(exc).split())
        raise TrackingError(f"cannot use MLflow store {uri}: {text[:300]}") from exc
    return uri


@contextmanager
def _local_store_lock(uri: str) -> Iterator[None]:
    """Hold an exclusive lock on a local SQLite store's file (created, with its folder, when
    missing) while the block runs; other URIs are not locked.

    MLflow creates a fresh store's tables on first use, and two processes
    doing that together fail (``table experiments already exists``,
    ``duplicate column name``); two that both find the experiment missing
    race to create it. Opening the store under this lock makes processes
    started together (two ``sia train`` on a fresh machine) take turns. The
    lock is ``flock`` on the database file, which on a local file system does
    not interact with SQLite's own (POSIX record) locks. An in-memory or
    ``file:`` URI database, a system without ``fcntl``, or a file system that
    refuses the lock (NFS may, on a file opened read-only) is not locked.
    """
    name = uri.removeprefix("sqlite:///").split("?", 1)[0] if uri.startswith("sqlite:///") else ""
    if not name or name == ":memory:" or name.startswith("file:"):
        yield
        return
    path = Path(name)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        import fcntl
    except ImportError:  # not POSIX
        yield
        return
    # a missing store is created empty, which SQLite takes as a fresh database; an existing
    # one is opened for writing when it may be (NFS locks need that), else only read (a
    # registry shared read-only still opens)
    if not path.exists():
        mode = "ab"
    else:
        mode = "r+b" if os.access(path, os.W_OK) else "rb"
    with open(path, mode) as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX)
        except OSError:  # the file system refuses: open the store unlocked, as before
            yield
            return
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


class StoreSetup:
    """The MLflow store opened in a background thread while the caller computes.

    The probe of a server runs at once (a silent server fails before any
    work); importing MLflow and creating a fresh SQLite store (its schema
    migrations take seconds) run in the thread. A server's store is opened at once instead,
    under :func:`deadline` (no migrations to overlap; a server that trickles fails before any
    work). :meth:`uri` waits for it and
    re-raises its error. Use MLflow only after :meth:`uri` returned.
    """

    def __init__(self, root: Path | None = None, experiment: str = PREDICTOR_EXPERIMENT):
        uri = tracking_uri(root)
        check_store(uri)
        self._uri = uri
        self._future: Future[str] = Future()
        self._started = time.monotonic()
        if is_remote(uri):  # a server has no migrations to overlap: opened now, in the
            # main thread under the deadline, so a server that trickles fails before any work
            with deadline("opening the store", uri):
                self._future.set_result(_open_store(uri, root, experiment))
            return

        def open_it() -> None:
            try:
                self._future.set_result(_open_store(uri, root, experiment))
            except BaseException as exc:  # noqa: BLE001 - handed to uri()
                self._future.set_exception(exc)

        # a daemon thread: a server that never finishes answering cannot hold the exit
        threading.Thread(target=open_it, name="mlflow-store", daemon=True).start()

    def uri(self) -> str:
        """Return the tracking URI once the store is ready (TrackingError if it cannot be used,
        or when a server has not finished opening it by the deadline)."""
        from concurrent.futures import TimeoutError as FutureTimeout

        timeout = None
        if is_remote(self._uri):
            timeout = max(0.0, deadline_s() - (time.monotonic() - self._started))
        try:
            return self._future.result(timeout=timeout)
        except FutureTimeout:
            raise TrackingError(f"MLflow tracking server {self._uri} did not finish opening the "
                                f"store within {deadline_s():g} s (it answers too slowly); fix "
                                f"or unset {TRACKING_ENV}, or raise {DEADLINE_ENV}") from None


def git_commit() -> str | None:
    """Return the git commit of the installed sources (with ``-dirty`` when they have
    uncommitted changes), or None outside a git checkout."""
    here = Path(__file__).resolve().parent
    try:
        head = subprocess.run(["git", "-C", str(here), "rev-parse", "HEAD"], capture_output=True,
                              text=True, timeout=5, check=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", str(here), "status", "--porcelain",
                                "--untracked-files=no"], capture_output=True, text=True,
                               timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return None
    return head + ("-dirty" if dirty else "") if head else None


def package_version() -> str:
    """Return the installed sia-sched version ("unknown" when it is not installed)."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("sia-sched")
    except PackageNotFoundError:
        return "unknown"


def ui_command(uri: str) -> str:
    """Return the shell command that opens the MLflow UI on ``uri``.

    When the running Python's own ``mlflow`` script is not what the shell
    finds (a virtual environment that is not activated, as after ``make
    demo``), the command names that script's path (relative when below the
    current directory), so it runs as printed.
    """
    import shutil
    import sys

    script = Path(sys.executable).parent / "mlflow"
    exe = "mlflow"
    found = shutil.which("mlflow")
    if script.exists() and (found is None or Path(found).resolve() != script.resolve()):
        try:
            exe = str(script.relative_to(Path.cwd()))
        except ValueError:
            exe = str(script)
    return f"{exe} ui --backend-store-uri {uri}"
