"""MLflow store setup (DESIGN.md 5.4): a local SQLite file by default, a server when asked.

The default tracking URI is ``sqlite:///<output root>/mlflow.db`` with
artifacts under ``<output root>/mlartifacts``, so nothing needs a server.
``MLFLOW_TRACKING_URI`` overrides it. An ``http(s)://`` server is probed
with a short timeout before MLflow is touched, so an unreachable server is a
clear :class:`SiaError` within seconds instead of MLflow's long retries.
"""

from __future__ import annotations

import os
import socket
from pathlib import Path
from urllib.parse import urlparse

from sia.data.errors import SiaError
from sia.data.paths import output_root

PREDICTOR_EXPERIMENT = "sia-predictors"
EVALUATION_EXPERIMENT = "sia-evaluations"
TRACKING_ENV = "MLFLOW_TRACKING_URI"
PROBE_TIMEOUT_S = 3.0


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
    """Raise TrackingError unless an http(s) tracking server accepts a TCP connection in time.

    Local URIs (sqlite, file paths) are not probed.
    """
    parsed = urlparse(uri)
    if parsed.scheme not in ("http", "https"):
        return
    host = parsed.hostname
    if not host:
        raise TrackingError(f"{TRACKING_ENV}={uri!r} has no host name")
    port = parsed.port or (443 if parsed.scheme == "https" else 80)
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            pass
    except OSError as exc:
        raise TrackingError(
            f"MLflow tracking server {uri} is unreachable ({exc.__class__.__name__}: {exc}); "
            f"start it, fix {TRACKING_ENV}, or unset {TRACKING_ENV} to use the local store "
            f"{default_tracking_uri()}"
        ) from None


def setup_tracking(root: Path | None = None, experiment: str = PREDICTOR_EXPERIMENT) -> str:
    """Point MLflow at the store in force, create ``experiment`` if needed, and return the URI.

    A local SQLite store gets its folder created and its artifacts under the
    output root.
    """
    uri = tracking_uri(root)
    check_reachable(uri)
    import mlflow

    if uri.startswith("sqlite:///"):
        Path(uri.removeprefix("sqlite:///")).parent.mkdir(parents=True, exist_ok=True)
    mlflow.set_tracking_uri(uri)
    mlflow.set_registry_uri(uri)
    try:
        exp = mlflow.get_experiment_by_name(experiment)
        if exp is None:
            location = artifact_location(root) if uri.startswith("sqlite:") else None
            mlflow.create_experiment(experiment, artifact_location=location)
        mlflow.set_experiment(experiment)
    except Exception as exc:  # MLflow raises many kinds; the user needs one line
        raise TrackingError(f"cannot use MLflow store {uri}: {exc}") from exc
    return uri


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
