"""What one replay is (:class:`ReplaySpec`) and what it gives back (:class:`ReplayOutcome`).

A spec names everything the replay's result depends on: the workload (a
reference a worker can rebuild, or the frames themselves), the policy and its
options, the predictors of a policy that takes a forecaster, the locality
(None: fungible GPUs), the tick and the duration speedup. Its :attr:`key`
hashes exactly those, so a stored replay is reused only for the same spec
(:mod:`sia.pipelines.engine.store`). Specs are plain frozen data: they pickle
to process pools and Dask workers.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import polars as pl
from sia.pipelines.engine.store import replay_files, result_key
from sia.scheduler.regions.defaults import PLAN_TIME_S


# ----------------------------------------------------------------------------- workloads
@dataclass(frozen=True)
class SyntheticWorkload:
    """A synthetic SIA workload (:func:`sia.data.synthetic.generate_workload`), rebuilt where it runs."""

    variant: str
    seed: int
    days: float
    pool_gpus: int = 8

    @property
    def key(self) -> tuple:
        """What the jobs and quotas depend on."""
        return ("synthetic", self.variant, self.seed, self.days, self.pool_gpus)

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Return (jobs, pools[pool, quota_gpus]), generated once per process."""
        return _synthetic(self.variant, self.seed, self.days, self.pool_gpus)


@functools.lru_cache(maxsize=4)
def _synthetic(variant: str, seed: int, days: float, pool_gpus: int
               ) -> tuple[pl.DataFrame, pl.DataFrame]:
    from sia.data.synthetic import generate_workload

    jobs, pools = generate_workload(variant, seed, days=days, pool_gpus=pool_gpus)
    return jobs, pools.select("pool", "quota_gpus")


@dataclass(frozen=True, eq=False)
class FrameWorkload:
    """Jobs and pools held in memory (a trace's window, an experiment's pools and quotas).

    ``key`` describes where they came from (trace, window, pools, quotas):
    the planner that cut them knows, the frames are not hashed.
    """

    jobs: pl.DataFrame
    pools: pl.DataFrame
    key: Any
    #: the jobs submitted before ``jobs`` (a trace's window: the trace before it), or None. A
    #: learned forecaster starts the replay with the ones finished by then
    #: (:meth:`sia.models.forecaster.LearnedForecaster.prime`), as a running cluster would.
    prior: pl.DataFrame | None = None

    @property
    def prior_key(self) -> tuple | None:
        """What the prior history is, for replay keys (its size and last submission)."""
        if self.prior is None:
            return None
        last = self.prior["submit_time"].max() if self.prior.height else None
        return ("prior", self.prior.height, last)

    def frames(self) -> tuple[pl.DataFrame, pl.DataFrame]:
        """Return (jobs, pools[pool, quota_gpus])."""
        return self.jobs, self.pools.select("pool", "quota_gpus")


Workload = SyntheticWorkload | FrameWorkload


# ----------------------------------------------------------------------------- predictors
@dataclass(frozen=True, eq=False)
class ModelPayload:
    """Learned predictors as data (no pickled code), read once from the registry where the
    sweep is planned: :meth:`sia.models.forecaster.LearnedForecaster.to_bytes`'s JSON
    ``document`` and XGBoost ``boosters`` (UBJ bytes by model, then by name)."""

    document: str
    boosters: dict[str, dict[str, bytes]]

    @property
    def nbytes(self) -> int:
        """Size of the document and boosters in bytes."""
        return len(self.document) + sum(len(b) for bs in self.boosters.values()
                                        for b in bs.values())

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the content: names what a worker decoded (two stores may share a URI)."""
        h = hashlib.sha256(self.document.encode())
        for where in sorted(self.boosters):
            for name, raw in sorted(self.boosters[where].items()):
                h.update(f"\0{where}\0{name}\0{len(raw)}\0".encode())
                h.update(raw)
        return h.hexdigest()


@dataclass(frozen=True)
class RegistryPredictors:
    """Learned predictors registered in MLflow under ``alias``.

    ``versions`` ({registered model name: version}) are the ones the alias
    pointed at when the sweep was planned: they key the replay, so a
    retraining under the same alias redoes it. ``payload``: those models
    as data, read on the planning side
    (:func:`sia.pipelines.engine.predictors.resolve_registry`), so a worker
    builds the forecaster from it and never opens the store (which a Dask
    worker may not see); without it (None) the worker reads the store
    (:meth:`sia.models.forecaster.LearnedForecaster.from_registry`). The
    payload is not part of the key nor of equality.
    """

    alias: str
    windows_min: tuple[int, ...]
    load_method: str = "sliding_max"
    load_windows: int = 3
    tracking_uri: str | None = None
    versions: tuple[tuple[str, str], ...] = ()
    payload: ModelPayload | None = field(default=None, compare=False, repr=False)

    @property
    def key(self) -> tuple:
        """What the forecasts depend on (the store's URI is not: the versions are)."""
        return ("registry", self.alias, self.windows_min, self.load_method, self.load_windows,
                self.versions)


@dataclass(frozen=True)
class SyntheticTrainedPredictors:
    """Predictors trained where the replay runs, on an independent synthetic workload's FCFS
    replay (Figure 16's ``sia-learned``): ``workload`` is what they are trained on."""

    workload: SyntheticWorkload

    @property
    def key(self) -> tuple:
        """What the trained models depend on."""
        return ("trained", self.workload.days, self.workload.seed)


Predictors = RegistryPredictors | SyntheticTrainedPredictors


# ----------------------------------------------------------------------------- regions
#: How a replay on regions schedules: home region only, or globally with static data or with
#: data placement planned from history, from the trace's future (perfect) or from the region
#: policies' forecasters (the learned predictors for sia-learned).
REGION_MODES = ("home", "static", "history", "perfect", "forecast")
#: Global reservations (issue 35): each pool's quota split into per-region shares planned
#: with its data from history, the trace's future or the forecasters; jobs run as owners.
RESERVATION_MODES = ("reservations-history", "reservations-perfect", "reservations-forecast")
#: The global modes may take ``+idle``: guests on any idle GPU (not only SIA's spare ones).
REGION_CHOICES = REGION_MODES + tuple(f"{m}+idle" for m in REGION_MODES[1:]) + RESERVATION_MODES


@dataclass(frozen=True)
class RegionsSpec:
    """Global scheduling across regions (:mod:`sia.scheduler.regions.global_policy`):
    ``regions`` (a :class:`sia.scheduler.regions.config.RegionsFile`), ``mode`` (one of
    :data:`REGION_CHOICES`), the scan's negative cache and the data-placement MIP's time limit."""

    regions: Any
    mode: str = "static"
    neg_cache: bool = True
    plan_time_s: float = PLAN_TIME_S

    @property
    def key(self) -> tuple:
        """What the replay's result depends on (the cache changes no decision)."""
        return ("regions", self.regions.key, self.mode, self.plan_time_s)


# ----------------------------------------------------------------------------- the spec
@dataclass(frozen=True, eq=False)
class ReplaySpec:
    """One replay: ``policy`` (registry name) with ``options`` on ``workload``.

    - ``predictors``: for a policy that takes a forecaster (its declared
      needs), where its learned predictors come from; None otherwise;
    - ``seed``: passed to a policy that declares it takes one (unless
      ``options`` sets it);
    - ``locality``: a LocalityConfig (buddy cells) or None (fungible GPUs);
    - ``tick_s``: the scheduling tick; ``speedup``: job durations are divided by it;
    - ``where``: the replay's place in a store, folders then file label
      (``("exp-000", "sia")`` -> ``OUT/exp-000/sia.parquet``); ``title``: its name
      in progress lines and errors (default: ``where`` joined by '/');
    - ``progress``: show the simulator's progress bar (not part of the key);
    - ``regions``: a :class:`RegionsSpec` (None: one cluster, as before; part of the key
      only when given, so other replays keep their keys);
    - ``preemption``: a :class:`~sia.scheduler.core.simulator.PreemptionConfig` on fungible
      GPUs: which jobs are preemptible (the trace's column, a seeded fraction) and what an
      eviction costs (None: the simulator's default; part of the key only when given).
    """

    workload: Workload
    policy: str
    options: dict[str, Any] = field(default_factory=dict)
    predictors: Predictors | None = None
    seed: int | None = None
    locality: Any = None
    tick_s: float = 300.0
    speedup: float = 1.0
    where: tuple[str, ...] = ()
    title: str | None = None
    progress: bool = False
    regions: RegionsSpec | None = None
    preemption: Any = None

    @property
    def name(self) -> str:
        """How progress and errors name the replay: ``title``, else ``where`` joined by '/'."""
        return self.title or "/".join(self.where) or self.policy

    @property
    def key(self) -> str:
        """Hash of everything the result depends on (see the module doc)."""
        predictors = None if self.predictors is None else self.predictors.key
        prior = getattr(self.workload, "prior_key", None)
        if predictors is not None and prior is not None:  # what the forecaster starts with
            predictors = (predictors, prior)
        extra = () if self.regions is None else (self.regions.key,)
        if self.preemption is not None:
            extra += (("preemption", self.preemption.to_dict()),)
        return result_key("replay", self.workload.key, self.policy, self.options, predictors, self.seed,
                          locality_options(self.locality), self.tick_s, self.speedup, *extra)

    def files(self, out_dir: Path) -> tuple[Path, Path]:
        """Return (the replay's Parquet under ``out_dir``, its completion marker)."""
        *folders, label = self.where or (self.policy,)
        return replay_files(Path(out_dir).joinpath(*folders), label)


def locality_options(locality: Any) -> dict[str, Any] | None:
    """Return a LocalityConfig's fields that differ from their defaults, JSON-ready (None: fungible).

    Options left at their default are left out, so a new LocalityConfig
    option whose default keeps the old behaviour changes no key.
    """
    if locality is None:
        return None
    default = asdict(type(locality)())
    return {k: list(v) if isinstance(v, tuple) else v
            for k, v in asdict(locality).items() if v != default[k]}


@dataclass
class ReplayOutcome:
    """What a replay gave: the simulator's per-job ``result`` (times in seconds), the cell
    cluster's ``placement`` counters (None on fungible GPUs), the policy's ``facts`` (what it
    reports about itself, e.g. the oracle's solver status) and the replay's ``wall_s``
    (predictor loading or training and policy construction included)."""

    result: pl.DataFrame
    placement: dict[str, Any] | None = None
    facts: dict[str, Any] = field(default_factory=dict)
    wall_s: float = 0.0

    def meta(self) -> dict[str, Any]:
        """Return what the store keeps beside the result (JSON-ready)."""
        return {"wall_s": self.wall_s, "placement": self.placement, "facts": self.facts}
