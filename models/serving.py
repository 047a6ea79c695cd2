"""Registered predictors stored as data: JSON parameters and XGBoost boosters, never pickled code.

Every registered predictor (WillJobsArrive per window, NewLoadEstimate per
window, JobDuration) is an MLflow *models-from-code* pyfunc: the model is the
small code file :mod:`sia.models.pyfunc_entry` plus artifacts,

- ``params.json``: the predictor's ``kind`` and its fitted parameters (JSON),
- ``booster_<name>.ubj``: each XGBoost booster in XGBoost's own format.

Loading one through ``mlflow.pyfunc.load_model`` runs that code file, which
rebuilds the predictor from the artifacts with the kind's ``from_artifacts``
and answers ``predict`` with the predictor's ``serve``: exactly what the
scheduler uses (thresholds applied, probabilities where the signature says
so). Nothing is unpickled. The scheduler's forecaster reads the same
artifacts directly (:func:`load_servable`), without the pyfunc machinery.

A predictor class takes part by offering ``to_artifacts() -> (params,
boosters)``, ``from_artifacts(params, boosters)`` (a classmethod) and
``serve(frame) -> ndarray``, and by a line in :data:`KINDS`.
"""

from __future__ import annotations

import importlib
import json
import os
import tempfile
from pathlib import Path
from typing import Any, Protocol

import numpy as np

# MLflow draws a progress bar for every artifact it downloads: loading a predictor is no
# long transfer, and the bars drown the commands' own progress lines.
os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")

#: kind -> "module:Class" whose ``from_artifacts`` rebuilds a predictor of that kind.
KINDS: dict[str, str] = {
    "will_arrive": "sia.models.will_arrive:WillJobsArrive",
    "new_load": "sia.models.new_load:NewLoadEstimate",
    "job_duration": "sia.models.job_duration:JobDuration",
}
PARAMS_FILE = "params.json"
_BOOSTER_PREFIX = "booster_"


class Servable(Protocol):
    """A predictor that can be stored as artifacts and serve a pandas frame."""

    def to_artifacts(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """Return (JSON-able params including ``kind``, boosters by name)."""
        ...

    def serve(self, frame: Any) -> np.ndarray:
        """Return what the scheduler uses for each row of ``frame``."""
        ...


def predictor_class(kind: str) -> type:
    """Return the class registered for ``kind`` (imported on demand)."""
    if kind not in KINDS:
        raise ValueError(f"unknown predictor kind {kind!r}; known: {sorted(KINDS)}")
    module, name = KINDS[kind].split(":")
    return getattr(importlib.import_module(module), name)


def write_artifacts(folder: Path, params: dict[str, Any], boosters: dict[str, Any]) -> dict[str, str]:
    """Write ``params`` (JSON) and ``boosters`` (UBJ) into ``folder``; return artifact name -> path."""
    if "kind" not in params:
        raise ValueError("predictor params must name their 'kind'")
    folder.mkdir(parents=True, exist_ok=True)
    out = {"params": str(folder / PARAMS_FILE)}
    (folder / PARAMS_FILE).write_text(json.dumps(params, indent=1, sort_keys=True))
    for name, booster in boosters.items():
        path = folder / f"{_BOOSTER_PREFIX}{name}.ubj"
        booster.save_model(str(path))
        out[f"{_BOOSTER_PREFIX}{name}"] = str(path)
    return out


def read_artifacts(paths: dict[str, str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """Return (params, boosters) from artifact name -> local path (as :func:`write_artifacts` wrote)."""
    import xgboost as xgb

    params = json.loads(Path(paths["params"]).read_text())
    boosters = {}
    for key, path in paths.items():
        if key.startswith(_BOOSTER_PREFIX):
            b = xgb.Booster()
            b.load_model(str(path))
            # a tick predicts a few rows: one thread avoids OpenMP start-up per call
            b.set_param({"nthread": 1})
            boosters[key.removeprefix(_BOOSTER_PREFIX)] = b
    return params, boosters


def build(paths: dict[str, str], what: str = "the stored model") -> Any:
    """Return the predictor rebuilt from its artifacts (the kind's ``from_artifacts``).

    Artifacts this version cannot read (parameters its estimator does not
    take, or lacks) raise :class:`~sia.models.registry.RegistryError` naming
    ``what`` and saying to retrain, not a TypeError.
    """
    from sia.models.registry import RegistryError

    params, boosters = read_artifacts(paths)
    try:
        return predictor_class(params["kind"]).from_artifacts(params, boosters)
    except (TypeError, KeyError) as exc:
        raise RegistryError(f"{what} was written by another version of sia-sched and cannot be "
                            f"read by this one ({exc}); retrain it with `sia train`") from None


def log_servable(predictor: Servable, *, artifact_name: str, registered_name: str,
                 example: Any, alias: str) -> str:
    """Log ``predictor`` in the active run as a models-from-code pyfunc, register it, set ``alias``.

    ``example`` is a pandas frame of inputs for the signature. Returns the
    registered version.
    """
    import mlflow.pyfunc
    from mlflow import MlflowClient
    from mlflow.models import infer_signature
    from sia.models.registry import pip_requirements, quiet_mlflow

    params, boosters = predictor.to_artifacts()
    signature = infer_signature(example, predictor.serve(example))
    entry = Path(__file__).with_name("pyfunc_entry.py")
    with tempfile.TemporaryDirectory() as tmp, quiet_mlflow():
        artifacts = write_artifacts(Path(tmp), params, boosters)
        info = mlflow.pyfunc.log_model(
            name=artifact_name, python_model=str(entry), artifacts=artifacts,
            signature=signature, registered_model_name=registered_name,
            pip_requirements=pip_requirements())
    version = str(info.registered_model_version)
    client = MlflowClient()
    client.set_model_version_tag(registered_name, version, "kind", params["kind"])
    client.set_registered_model_alias(registered_name, alias, version)
    return version


def load_servable(registered_name: str, alias: str) -> tuple[Any, str]:
    """Return (predictor, version) for ``models:/<registered_name>@<alias>``, read from its artifacts.

    Reads the JSON parameters and boosters directly (the forecaster's fast
    path); :func:`mlflow.pyfunc.load_model` on the same URI gives the same
    predictions. Raises :class:`~sia.models.registry.RegistryError` when missing.
    """
    import mlflow.artifacts
    from sia.models.registry import RegistryError, version_of

    mv = version_of(registered_name, alias)
    root = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{registered_name}@{alias}"))
    folder = root / "artifacts"
    if not (folder / PARAMS_FILE).exists():
        raise RegistryError(
            f"registered model {registered_name!r} version {mv.version} has no {PARAMS_FILE}: it "
            "was registered by an older sia-sched; retrain with `sia train`")
    paths = {"params": str(folder / PARAMS_FILE)}
    for f in folder.glob(f"{_BOOSTER_PREFIX}*.ubj"):
        paths[f.stem] = str(f)
    return build(paths, f"registered model {registered_name!r} version {mv.version} (alias "
                        f"{alias})"), str(mv.version)
