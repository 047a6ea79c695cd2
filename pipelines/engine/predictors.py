"""The one way the pipelines get learned predictors for a replay (DESIGN.md 5.4).

From the MLflow registry: :func:`resolve_registry` checks, before any
replay, that every model an alias names is there, records the exact
versions (they key the replays and are logged on the evaluation's run) and
keeps the models as data (:class:`~sia.pipelines.engine.spec.ModelPayload`:
JSON parameters and XGBoost boosters, no pickled code); :func:`load_forecaster`
builds the forecaster where the replay runs from that payload
(:meth:`~sia.models.forecaster.LearnedForecaster.from_bytes`), so a worker
never opens the store, which a Dask worker on another machine cannot see.
A reference without a payload is read from the store
(:meth:`~sia.models.forecaster.LearnedForecaster.from_registry`);
:func:`with_payload` reads it on the planning side.
Figure 16's ``sia-learned`` instead trains its predictors on an independent
synthetic workload (:class:`SyntheticTrainedPredictors`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from sia.pipelines.engine.spec import (
    ModelPayload,
    Predictors,
    RegistryPredictors,
    SyntheticTrainedPredictors,
)


def registry_names(windows_min: tuple[int, ...], load_method: str) -> list[str]:
    """Return the registered model names a forecaster of these windows loads."""
    from sia.models.registry import JOB_DURATION_NAME, new_load_name, will_arrive_name

    names = [will_arrive_name(int(k)) for k in windows_min] + [JOB_DURATION_NAME]
    if load_method != "sliding_max":
        names += [new_load_name(int(k)) for k in windows_min]
    return names


def resolve_registry(alias: str, windows_min: tuple[int, ...], *, load_method: str = "sliding_max",
                     load_windows: int = 3, tracking_uri: str | None = None,
                     hint: str = "", where: str = "alias") -> RegistryPredictors:
    """Return the :class:`RegistryPredictors` of ``alias`` with the versions it points at now.

    Loads the forecaster once (so a model that is missing or cannot be read
    fails here, before any replay). A missing model is a one-line
    :class:`~sia.models.registry.RegistryError` naming the alias and the
    store (after ``where``: the option or key that named it), followed by
    ``hint`` (what to do).
    """
    from sia.models.registry import RegistryError, version_of
    from sia.pipelines.tracking import check_reachable
    from sia.pipelines.tracking import tracking_uri as uri_in_force

    uri = tracking_uri or uri_in_force()
    check_reachable(uri)
    ref = RegistryPredictors(alias=alias, windows_min=tuple(int(k) for k in windows_min),
                             load_method=load_method, load_windows=int(load_windows),
                             tracking_uri=uri)
    from sia.pipelines.tracking import deadline

    try:
        with deadline(f"loading the models of alias {alias}", uri, uploads=True):
            fc = load_forecaster(ref)
            versions = tuple((n, str(version_of(n, alias).version))
                             for n in registry_names(ref.windows_min, load_method))
    except RegistryError as exc:
        first = str(exc).splitlines()[0]
        if not first.startswith("no "):  # there but unreadable: the message says what to do
            raise RegistryError(f"{where} {alias}: {first} (MLflow store {uri})") from None
        what = first.split(" in the MLflow store")[0].removeprefix("no ")
        raise RegistryError(f"{where} {alias}: no {what} in the MLflow store {uri}{hint}") from None
    return replace(ref, versions=versions, payload=ModelPayload(*fc.to_bytes()))


def in_sample_warning(period: Mapping[str, Any] | None, source: str, alias: str,
                      replay_start_day: float | None, fix: str) -> str | None:
    """Return a warning when a replay scores predictors on the days they learned from; None
    otherwise.

    ``period`` is :func:`sia.models.registry.training_period` of the alias;
    the warning is given when it was trained on this trace (``source``: the
    same resolved path, :func:`sia.data.paths.trace_identity`, or the same
    built-in or synthetic name) and the replay starts before its validation
    period ended. ``fix`` says what to do, with ``{day}`` for that end.
    """
    from sia.data.paths import trace_identity

    if not period:
        return None
    # the same trace: by its resolved path (runs logged before that was recorded: as written)
    if period.get("trace_id"):
        if period["trace_id"] != trace_identity(source):
            return None
    elif period.get("trace") != source:
        return None
    start = 0.0 if replay_start_day is None else float(replay_start_day)
    end = float(period["val_end_day"])
    if start >= end - 1e-9:
        return None
    return (f"alias {alias} was trained on days {period['train_start_day']:g}-"
            f"{period['train_end_day']:g} of this trace and validated on days "
            f"{period['train_end_day']:g}-{end:g}; this replay starts on day {start:g}, so it "
            f"scores the predictors on days they were fit or chosen on: "
            + fix.format(day=end))


def with_payload(ref: RegistryPredictors) -> RegistryPredictors:
    """Return ``ref`` holding its models as data (read from its store now when it does not yet)."""
    if ref.payload is not None:
        return ref
    return replace(ref, payload=ModelPayload(*load_forecaster(ref).to_bytes()))


def load_forecaster(ref: Predictors) -> Any:
    """Return a fresh forecaster for ``ref``: from its payload when it has one, else from the
    registry (models are decoded or read once per process)."""
    if isinstance(ref, SyntheticTrainedPredictors):
        return _train_on_synthetic(ref)
    from sia.models.forecaster import LearnedForecaster

    if ref.payload is not None:
        # keyed by content: the same models are decoded once per process
        return LearnedForecaster.from_bytes(ref.payload.document, ref.payload.boosters,
                                            cache_key=("payload", ref.payload.digest))
    return LearnedForecaster.from_registry(ref.windows_min, ref.alias, load_method=ref.load_method,
                                           load_windows=ref.load_windows,
                                           tracking_uri=ref.tracking_uri)


def _train_on_synthetic(ref: SyntheticTrainedPredictors) -> Any:
    """Return a LearnedForecaster trained on ``ref.workload``'s FCFS replay (default TrainConfig,
    single-threaded XGBoost, as the registry loads them)."""
    from sia.models.forecaster import LearnedForecaster
    from sia.pipelines.inputs import fcfs_schedule
    from sia.pipelines.train import TrainConfig, train_predictors

    jobs, pools = ref.workload.frames()
    tc = TrainConfig(ablation=False)
    res = train_predictors(fcfs_schedule(jobs, pools), tc)
    return LearnedForecaster({r.k_min: r.model for r in res.windows},
                             load_windows=tc.load_windows,
                             duration_config={"fallback_bin": tc.duration_fallback_bin,
                                              "min_count": tc.history_min_count})


#: the model-version tags that say which trace a predictor learned from (issue 36)
TRACE_TAG, TRACE_ID_TAG, TRACE_HASH_TAG = "trace", "trace_id", "trace_hash"


def trace_hash(source: str) -> str:
    """Return a 12-hex-digit hash of the trace ``source`` names
    (:func:`sia.data.paths.trace_identity`: a file by its resolved path, ``builtin:philly`` and
    ``synthetic:base seed=0`` as written)."""
    import hashlib

    from sia.data.paths import trace_identity

    return hashlib.sha256(trace_identity(source).encode()).hexdigest()[:12]


def trace_tags(source: str) -> dict[str, str]:
    """Return the tags that record the trace ``source`` on a run or a model version: its
    readable name, its resolved identity and that identity's hash."""
    from sia.data.paths import trace_identity

    return {TRACE_TAG: source[:5000], TRACE_ID_TAG: trace_identity(source)[:5000],
            TRACE_HASH_TAG: trace_hash(source)}


def learned_from(ref: RegistryPredictors) -> dict[str, str] | None:
    """Return the trace the models of ``ref`` learned from: ``{"trace", "trace_hash"}`` from the
    first version's tags (or, for versions registered before they carried them, its training
    run's tags); None when neither says (a model registered by hand)."""
    from mlflow import MlflowClient
    from mlflow.exceptions import MlflowException
    from sia.pipelines.tracking import deadline

    if not ref.versions:
        return None
    name, version = ref.versions[0]
    try:
        with deadline("reading a model version's tags", ref.tracking_uri):
            client = MlflowClient(tracking_uri=ref.tracking_uri, registry_uri=ref.tracking_uri)
            mv = client.get_model_version(name, version)
            tags = dict(mv.tags or {})
            if TRACE_HASH_TAG not in tags and mv.run_id:
                run_tags = client.get_run(mv.run_id).data.tags
                if TRACE_TAG in run_tags:
                    tags = {TRACE_TAG: run_tags[TRACE_TAG],
                            TRACE_HASH_TAG: trace_hash(run_tags.get(TRACE_ID_TAG)
                                                       or run_tags[TRACE_TAG])}
    except MlflowException:
        return None
    if TRACE_HASH_TAG not in tags:
        return None
    return {"trace": tags.get(TRACE_TAG, "?"), "trace_hash": tags[TRACE_HASH_TAG]}


def trace_mismatch(learned: Mapping[str, str] | None, source: str, alias: str) -> str | None:
    """Return one line naming both traces when predictors that ``learned`` from one trace serve
    the replay of another (``source``); None when they match or nothing is recorded."""
    if not learned:
        return None
    served = trace_hash(source)
    if learned["trace_hash"] == served:
        return None
    return (f"alias {alias} learned from {learned['trace']} (trace {learned['trace_hash']}) "
            f"but serves {source} (trace {served}): its predictions describe another trace's "
            f"pools; train on this one (`sia train {source} --alias NAME`) and use that alias")
