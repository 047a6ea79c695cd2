"""Registered predictor names, logging + registering them, and loading them by name and alias.

One registered model per predictor and window:

- ``sia-will-jobs-arrive-<k>m``: :class:`~sia.models.will_arrive.WillJobsArrive`
  as data (JSON parameters with its method, threshold and features, and the
  XGBoost booster in UBJ when the classifier won model selection); the
  pyfunc returns the 0/1 decision.
- ``sia-new-load-estimate-<k>m``: the
  :class:`~sia.models.new_load.NewLoadEstimate` as data (JSON parameters and,
  for the quantile method, an XGBoost booster; :mod:`sia.models.serving`);
  predict maps a frame with ``sliding_max`` (and, for the quantile method,
  the Table 9 features) to the estimate in GPUs.
- ``sia-job-duration``: a pyfunc holding the history rule (min count,
  fallback bin, quantile); predict maps the history statistic to a bin.

The alias (default ``champion``) marks the version in use; the scheduler's
loader asks for ``models:/<name>@<alias>``.
"""

from __future__ import annotations

import contextlib
import io
import logging
import tempfile
import warnings
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from sia.data.errors import SiaError
from sia.models.job_duration import DEFAULT_QUANTILE, N_BINS

DEFAULT_ALIAS = "champion"
WILL_ARRIVE_PREFIX = "sia-will-jobs-arrive"
NEW_LOAD_PREFIX = "sia-new-load-estimate"
JOB_DURATION_NAME = "sia-job-duration"
#: the run's artifact folder holding the logged predictors
MODELS_ARTIFACT_PATH = "models"


class RegistryError(SiaError):
    """A registered model or alias is missing or unusable."""


def will_arrive_name(k_min: int) -> str:
    """Return the registered name of WillJobsArrive for window ``k_min`` minutes."""
    return f"{WILL_ARRIVE_PREFIX}-{int(k_min)}m"


def new_load_name(k_min: int) -> str:
    """Return the registered name of NewLoadEstimate for window ``k_min`` minutes."""
    return f"{NEW_LOAD_PREFIX}-{int(k_min)}m"


def pip_requirements() -> list[str]:
    """Return the pinned requirements of a registered sia predictor (sia-sched and what it loads)."""
    return _requirements("sia-sched", "xgboost", "numpy", "pandas", "polars", "scikit-learn",
                         "mlflow")


def _requirements(*packages: str) -> list[str]:
    """Return pinned pip requirements of installed ``packages`` (skips MLflow's slow inference)."""
    from importlib.metadata import PackageNotFoundError, version

    out = []
    for p in packages:
        try:
            out.append(f"{p}=={version(p)}")
        except PackageNotFoundError:
            out.append(p)
    return out


@contextmanager
def quiet_mlflow():
    """Silence MLflow's info logging, its advisory warnings and what it prints on stderr
    (``Registered model ... already exists``) while logging models."""
    logger = logging.getLogger("mlflow")
    level = logger.level
    logger.setLevel(logging.ERROR)
    with warnings.catch_warnings(), contextlib.redirect_stderr(io.StringIO()):
        warnings.simplefilter("ignore")
        try:
            yield
        finally:
            logger.setLevel(level)


@dataclass
class Registration:
    """One predictor to log and register: under ``artifact_name`` in the run, as ``name``."""

    predictor: Any  # a sia.models.serving.Servable
    artifact_name: str
    name: str
    example: pd.DataFrame  # inputs for the signature
    tags: dict[str, str] = field(default_factory=dict)
    description: str | None = None  # the model version's, shown in the MLflow UI


def will_arrive_registration(model: Any, example: pd.DataFrame) -> Registration:
    """Return the :class:`Registration` of a fitted WillJobsArrive (tags: method, threshold)."""
    k_min = int(model.window_min)
    return Registration(model, f"will_jobs_arrive_{k_min}m", will_arrive_name(k_min), example,
                        {"method": model.method_, "threshold": repr(float(model.threshold_))},
                        description=model.describe())


def new_load_registration(model: Any) -> Registration:
    """Return the :class:`Registration` of a fitted NewLoadEstimate."""
    k = int(model.window_min)
    cols = list(model.feature_names_in_)
    example = pd.DataFrame(np.zeros((3, len(cols))), columns=cols)
    example["sliding_max"] = [0.0, 1.0, 4.0]
    return Registration(model, f"new_load_estimate_{k}m", new_load_name(k), example)


def job_duration_registration(config: dict[str, Any], model: Any = None) -> Registration:
    """Return the :class:`Registration` of JobDuration: ``model``, or the history rule of
    ``config`` (``min_count``, ``fallback_bin``, ``quantile``)."""
    from sia.features.duration_features import DURATION_FEATURES
    from sia.models.job_duration import JobDuration

    if model is None:
        model = JobDuration.rule(min_count=int(config.get("min_count", 3)),
                                 fallback_bin=int(config.get("fallback_bin", N_BINS - 1)),
                                 quantile=float(config.get("quantile", DEFAULT_QUANTILE)))
    cols = list(getattr(model, "feature_names_in_", DURATION_FEATURES))  # limits: more columns
    example = pd.DataFrame(np.full((2, len(cols)), np.nan), columns=cols)
    example.loc[:, "pool_count"] = [0.0, 50.0]
    example.loc[:, "pool_median_s"] = [np.nan, 600.0]
    return Registration(model, "job_duration", JOB_DURATION_NAME, example)


def log_predictors(items: list[Registration], alias: str | None = DEFAULT_ALIAS,
                   artifact_path: str = MODELS_ARTIFACT_PATH) -> dict[str, str]:
    """Log ``items`` in the active run (one of their own if none) and register each one,
    moving ``alias`` to it (no alias moves when ``alias`` is None).

    Each predictor becomes a models-from-code pyfunc stored as data
    (:mod:`sia.models.serving`): saved locally, then uploaded in *one* call
    under ``<artifact_path>/<artifact_name>``, and registered as a new
    version of its name (the registered model created when missing). Returns
    {registered name: version}.
    """
    import mlflow
    import mlflow.pyfunc
    from mlflow import MlflowClient
    from mlflow.models import infer_signature
    from sia.models import serving

    if mlflow.active_run() is None:  # registered on its own: a run of its own to hold it
        with mlflow.start_run(run_name="register " + ", ".join(i.name for i in items)):
            return log_predictors(items, alias, artifact_path)
    run = mlflow.active_run()
    client = MlflowClient()
    entry = Path(serving.__file__).with_name("pyfunc_entry.py")  # the models-from-code file
    kinds: list[str] = []
    folders: list[str] = []
    taken = {Path(a.path).name for a in client.list_artifacts(run.info.run_id, artifact_path)}
    with tempfile.TemporaryDirectory() as tmp, quiet_mlflow():
        root = Path(tmp)
        requirements = pip_requirements()
        for item in items:
            # a second predictor of the same name in one run gets its own folder
            folder, n = item.artifact_name, 1
            while folder in taken:
                n += 1
                folder = f"{item.artifact_name}-{n}"
            taken.add(folder)
            folders.append(folder)
            params, boosters = item.predictor.to_artifacts()
            kinds.append(params["kind"])
            signature = infer_signature(item.example, item.predictor.serve(item.example))
            artifacts = serving.write_artifacts(root / "_data" / folder, params, boosters)
            mlflow.pyfunc.save_model(str(root / "models" / folder),
                                     python_model=str(entry), artifacts=artifacts,
                                     signature=signature, pip_requirements=requirements)
        mlflow.log_artifacts(str(root / "models"), artifact_path=artifact_path)
    base = run.info.artifact_uri.rstrip("/")
    versions = {}
    for item, folder, kind in zip(items, folders, kinds, strict=True):
        _ensure_registered_model(client, item.name)
        mv = client.create_model_version(
            item.name, f"{base}/{artifact_path}/{folder}", run_id=run.info.run_id,
            tags={"kind": kind, **item.tags}, description=item.description)
        if alias:  # None: a new version that no alias points at (synthetic training)
            client.set_registered_model_alias(item.name, alias, mv.version)
        versions[item.name] = str(mv.version)
    return versions


def _ensure_registered_model(client: Any, name: str) -> None:
    """Create the registered model ``name`` unless it exists (without MLflow's messages)."""
    from mlflow.exceptions import MlflowException

    try:
        client.get_registered_model(name)
    except MlflowException:
        client.create_registered_model(name)


def log_will_arrive(model: Any, example: pd.DataFrame, alias: str = DEFAULT_ALIAS) -> str:
    """Register a fitted :class:`~sia.models.will_arrive.WillJobsArrive` as data; return the version.

    Stored as JSON parameters (method, threshold, features, the tail's
    selection table) and the XGBoost booster (UBJ) when the classifier won;
    the pyfunc returns the 0/1 decision the scheduler uses. ``example`` is a
    frame of feature rows for the signature.
    """
    item = will_arrive_registration(model, example)
    return log_predictors([item], alias)[item.name]


def log_new_load(model: Any, alias: str = DEFAULT_ALIAS) -> str:
    """Register a fitted NewLoadEstimate as ``sia-new-load-estimate-<k>m``, set ``alias``; return the version.

    ``model`` is a :class:`~sia.models.new_load.NewLoadEstimate`; it is
    stored as data (:mod:`sia.models.serving`), and the pyfunc
    returns its estimate (GPUs) from ``sliding_max`` (+ the Table 9 features
    for the quantile method).
    """
    item = new_load_registration(model)
    return log_predictors([item], alias)[item.name]


def log_job_duration(config: dict[str, Any], alias: str = DEFAULT_ALIAS,
                     model: Any = None) -> str:
    """Register JobDuration (``sia-job-duration``) and set ``alias``; return the version.

    ``model`` is the fitted :class:`~sia.models.job_duration.JobDuration`
    (learned, or the history rule); without it, the history rule of
    ``config`` (``min_count``, ``fallback_bin``, ``quantile``). Stored as
    JSON parameters and an XGBoost booster (:mod:`sia.models.serving`); the
    pyfunc returns P(duration <= 5 / 60 / 720 min) from the feature columns
    of :mod:`sia.features.duration_features`.
    """
    item = job_duration_registration(config, model)
    return log_predictors([item], alias)[item.name]


def point_alias(alias: str, versions: dict[str, str]) -> bool:
    """Point ``alias`` of each registered model in ``versions`` (name -> version) back at that
    version; False (nothing changed after the first failure) when one of them is gone from the
    store. A training reused later must be scored with its own models, not with whatever a
    later training registered under the same alias."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    client = MlflowClient()
    try:
        for name, version in versions.items():
            client.get_model_version(name, str(version))
    except MlflowException:
        return False
    for name, version in versions.items():
        client.set_registered_model_alias(name, alias, str(version))
    return True


def version_of(name: str, alias: str):
    """Return the MLflow ModelVersion of ``name`` under ``alias``; RegistryError when missing."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    try:
        return MlflowClient().get_model_version_by_alias(name, alias)
    except MlflowException as exc:
        raise RegistryError(
            f"no registered model {name!r} with alias {alias!r} in the MLflow store "
            f"({exc.message if hasattr(exc, 'message') else exc}); train one with `sia train` "
            "or pass another --alias"
        ) from None


def training_period(name: str, alias: str) -> dict[str, Any] | None:
    """Return where the version of ``name`` under ``alias`` was trained, from its training
    run: ``{"trace", "trace_id", "train_start_day", "train_end_day", "val_end_day"}`` (days
    since the trace start, as ``sia train`` logs them; ``trace_id`` None for runs logged before
    it was recorded); None when the version has no run or the run
    does not say (a model registered by hand). RegistryError when the alias is missing."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException

    version = version_of(name, alias)
    if not version.run_id:
        return None
    try:
        run = MlflowClient().get_run(version.run_id)
    except MlflowException:
        return None
    params, tags = run.data.params, run.data.tags
    try:
        return {"trace": tags.get("trace"), "trace_id": tags.get("trace_id"),
                "train_start_day": float(params["split_train_start_day"]),
                "train_end_day": float(params["split_train_end_day"]),
                "val_end_day": float(params["split_val_end_day"])}
    except (KeyError, ValueError):
        return None


def load_will_arrive(k_min: int, alias: str = DEFAULT_ALIAS) -> Any:
    """Return the registered :class:`~sia.models.will_arrive.WillJobsArrive` for ``k_min`` under ``alias``.

    Its ``registry_version_`` is the model version. Raises RegistryError when missing.
    """
    from sia.models.serving import load_servable

    model, version = load_servable(will_arrive_name(k_min), alias)
    model.registry_version_ = version
    return model


def load_new_load(k_min: int, alias: str = DEFAULT_ALIAS) -> Any:
    """Return the registered :class:`~sia.models.new_load.NewLoadEstimate` for ``k_min`` under ``alias``."""
    from sia.models.serving import load_servable

    return load_servable(new_load_name(k_min), alias)[0]


def load_job_duration_model(alias: str = DEFAULT_ALIAS) -> Any:
    """Return the registered :class:`~sia.models.job_duration.JobDuration` under ``alias``."""
    from sia.models.serving import load_servable

    return load_servable(JOB_DURATION_NAME, alias)[0]


def load_job_duration(alias: str = DEFAULT_ALIAS) -> dict[str, Any]:
    """Return the history rule's config (``min_count``, ``fallback_bin``, ``quantile``) of the registered JobDuration."""
    model = load_job_duration_model(alias)
    return {"min_count": int(model.history_min_count), "fallback_bin": int(model.fallback_bin),
            "quantile": float(model.history_quantile)}
