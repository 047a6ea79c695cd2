"""Shared fixtures: the embedded Philly trace, MLflow stores, hypothesis profiles."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# No per-example deadline anywhere (timing is never what a test checks, and the
# machine may be shared). Under CI the examples are derandomized, so a run is
# reproducible: exploring new examples is the job of local runs.
settings.register_profile("default", deadline=None)
settings.register_profile("ci", deadline=None, derandomize=True,
                          suppress_health_check=[HealthCheck.too_slow])
settings.load_profile("ci" if os.environ.get("CI") else "default")


def pytest_configure(config):
    """At the start of a parallel run (the xdist controller, ``-n 2``), compile the numba
    kernels into their on-disk cache once, in a process beside the workers
    (tests/warm_numba.py): on a fresh clone both workers otherwise compiled the same kernels
    at about the same time. A worker that needs a kernel first compiles it itself, as before."""
    if (hasattr(config, "workerinput") or not getattr(config.option, "numprocesses", None)
            or config.option.collectonly):
        return
    script = Path(__file__).with_name("warm_numba.py")
    config._sia_warm_numba = subprocess.Popen(  # noqa: S603 - our own script
        [sys.executable, str(script)], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def pytest_unconfigure(config):
    """Stop the numba warm-up if the run ended first (a run of a few tests)."""
    proc = getattr(config, "_sia_warm_numba", None)
    if proc is not None and proc.poll() is None:
        proc.terminate()
        proc.wait()


#: The real Philly per-VC trace shipped in the package (sia.data.datasets): tests need
#: nothing beside the repository.
PHILLY = "builtin:philly"


@pytest.fixture(scope="session")
def philly_path() -> str:
    """The trace path of the real Philly per-VC trace embedded in the package."""
    return PHILLY


@pytest.fixture(scope="session")
def _mlflow_template_db(tmp_path_factory) -> Path:
    """An MLflow SQLite store created (schema migrated) once per test process.

    Creating a fresh store runs MLflow's migrations, which takes seconds; tests
    copy this file instead so each still gets its own empty store.
    """
    import mlflow

    path = tmp_path_factory.mktemp("mlflow-template") / "mlflow.db"
    mlflow.MlflowClient(tracking_uri=f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def mlflow_uri(tmp_path, _mlflow_template_db, monkeypatch) -> str:
    """A fresh, empty MLflow SQLite store in tmp_path, set as MLFLOW_TRACKING_URI.

    Also points the output root (SIA_OUTPUT) into tmp_path, so artifacts do too.
    """
    import shutil

    from mlflow.tracking import fluent
    from mlflow.tracking._model_registry import utils as registry_utils
    from mlflow.tracking._tracking_service import utils as tracking_utils

    db = tmp_path / "mlflow.db"
    shutil.copyfile(_mlflow_template_db, db)
    uri = f"sqlite:///{db}"
    # nothing an earlier test of this process chose survives into the fresh store: MLflow keeps
    # the URIs set by mlflow.set_tracking_uri / set_registry_uri (which win over the variable)
    # and the active experiment (whose id the fresh store may not hold) in globals
    # (MLflow's private globals: raising=False, so a release that renames them still runs)
    monkeypatch.setattr(tracking_utils, "_tracking_uri", None, raising=False)
    monkeypatch.setattr(registry_utils, "_registry_uri", None, raising=False)
    monkeypatch.setattr(fluent, "_active_experiment_id", None, raising=False)
    for name in ("MLFLOW_EXPERIMENT_ID", "MLFLOW_EXPERIMENT_NAME", "MLFLOW_REGISTRY_URI"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    monkeypatch.setenv("SIA_OUTPUT", str(tmp_path / "out"))  # artifacts stay in tmp_path
    return uri


class ProbePolicy:
    """FCFS that also asks ``ask(view)`` at every decision and records the answers (``records``)."""

    name = "probe"

    def __init__(self, ask):
        from sia.scheduler.registry import make_policy

        self.inner = make_policy("fcfs")
        self.ask = ask
        self.records = []

    def reset(self, trace, cluster):
        self.inner.reset(trace, cluster)

    def decide(self, view):
        self.records.append(self.ask(view))
        return self.inner.decide(view)


@pytest.fixture(scope="session")
def probe_policy():
    """The :class:`ProbePolicy` class: a replay that lets a test ask a forecaster what it sees."""
    return ProbePolicy


class FungibleOnlyPolicy:
    """A policy that declares no needs, so no locality (every registered policy now supports
    buddy cells): FCFS per pool in arrival order, dedicated starts without a placement."""

    name = "fungible-only"
    uses_ticks = False

    def reset(self, trace, cluster):
        self._gpus = trace.num_gpus.tolist()
        self._quota = trace.quota.tolist()

    def decide(self, view):
        from sia.scheduler.core.view import Start

        starts = []
        for p in range(view.n_pools):
            free = self._quota[p] - view.used_dedicated_of(p)
            for j in view.pending(p):
                if self._gpus[j] > free:
                    break
                free -= self._gpus[j]
                starts.append(Start(j, False))
        return starts


@pytest.fixture
def fungible_only(monkeypatch) -> str:
    """Register :class:`FungibleOnlyPolicy` as ``fungible-only`` (undone after the test), for
    tests of how a replay on cells refuses a policy without locality; return its name."""
    import sys
    import types

    from sia.scheduler.registry import POLICIES

    mod = types.ModuleType("_sia_test_fungible_only")
    mod.FungibleOnlyPolicy = FungibleOnlyPolicy
    monkeypatch.setitem(sys.modules, mod.__name__, mod)
    monkeypatch.setitem(POLICIES, "fungible-only", f"{mod.__name__}:FungibleOnlyPolicy")
    return "fungible-only"


@pytest.fixture
def scip_parameters(monkeypatch) -> list[str]:
    """The solver-specific parameter strings OR-Tools is handed during the test (the real
    call still runs)."""
    from ortools.linear_solver import pywraplp

    sent: list[str] = []
    orig = pywraplp.Solver.SetSolverSpecificParametersAsString

    def spy(self, text):
        sent.append(text)
        return orig(self, text)

    monkeypatch.setattr(pywraplp.Solver, "SetSolverSpecificParametersAsString", spy)
    return sent
