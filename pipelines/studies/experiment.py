"""Experiment configs for `sia evaluate` (DESIGN.md 7, SIA 6.1): schema, parsing, validation.

A config is a YAML mapping. Every mistake is a :class:`ConfigError` naming
the file and the key (``trace.path``, ``policies[2].options`` ...). Keys::

    name: figure13                 # default: the file's stem
    seed: 0                        # every random draw of the sweep derives from it
    trace:                         # exactly one of path / synthetic
      path: builtin:philly         # the Philly trace shipped in the package, or a file
                                   # path (relative to the config file)
      format: auto                 # as `sia ... --format` (auto, philly, helios, generic, ...)
      clean: true                  # drop bad rows and count them (else stop at the first)
      map: {submit_time: submitted}  # generic reader column mapping
      pool_from: null
      arrival: null                # a Slurm export: eligible (null: the default) or submit
      time_unit: s
      quotas: null                 # a pool,quota_gpus file: the recorded quotas
      synthetic: base              # instead of path: a synthetic variant ...
      days: 10                     # ... over this many days (also: keep a trace's first days)
    replay: {start_day: 28, end_day: 35}   # the replayed window (days since the trace start)
    warmup_days: 2                 # only jobs submitted after it count (default 2)
    grid:                          # what the sweep runs over (also read at the top level)
      experiments: 100             # experiments per group
      pools_per_experiment: 4      # an int, "all", or a list (one group each: Figure 14)
      quota_scale: 1.0             # a number or a list (one group each: Figure 18)
    min_jobs_per_pool: 20          # pools with fewer jobs in the window are never picked
    quotas: from_load              # from_load (SIA 6.1, per experiment) or recorded
    load_range: [0.6, 1.1]         # target load per pool for from_load
    locality: false                # or true (8-GPU servers, racks of 4, buddy placement), or
                                   # {topology: "gpus=8,rack=4", placement: "buddy,mcf",
                                   #  options: {preempt: true, preemptible_fraction: 0.3}}
                                   # (options: LocalityConfig fields, as sia replay --cells-option)
    tick_s: 300                    # the simulator's tick
    preemption:                    # fungible GPUs: which jobs may be preempted, at what cost
      preemptible_fraction: 0.3    # seeded share of jobs, on top of the trace's column (0)
      seed: 0                      # the draw's seed
      checkpoint_s: 1800           # an eviction loses the run's time since its last checkpoint
      restart_delay_s: 120         # ... plus this delay on its next run
                                   # (used by kueue and by sia with options {preempt: true})
    policies:                      # names from the scheduler registry, with options
      - fcfs
      - {name: sia, label: sia, options: {}}
      - {name: sia, label: sia-paper, alias: paper}  # learned predictors of another alias
    predictors:                    # for policies that take a forecaster (their needs: "sia" ...)
      train: registry              # registry (load by alias) or on_the_fly
      alias: champion
      windows_min: [5, 60, 720]
      load_method: sliding_max
      train_days: 14               # on_the_fly: the period before the replay
      val_days: 7
      warmup_days: 1

:func:`load_config` reads a file (schema checked first, every error at once:
:mod:`sia.pipelines.studies.study_schema`); :func:`parse_config` validates a mapping.
"""

from __future__ import annotations

import hashlib
import json
import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from sia.data.errors import ConfigError
from sia.scheduler.regions.defaults import PLAN_TIME_S

LABEL_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.+-]*$")
DEFAULT_WINDOWS_MIN = (5, 60, 720)


@dataclass(frozen=True)
class TraceSpec:
    """Where the jobs come from: a trace path (with reader options) or a synthetic variant."""

    path: str | None = None
    synthetic: str | None = None
    format: str = "auto"
    clean: bool = False
    map: dict[str, str] = field(default_factory=dict)
    pool_from: str | None = None
    time_unit: str = "s"
    quotas: str | None = None
    days: float | None = None
    seed: int | None = None  # synthetic seed; default: the config's seed
    #: optional contract columns read as absent (an ablation: what a trace's time limits or
    #: users are worth to the predictors and to SIA's lending)
    ignore_columns: tuple[str, ...] = ()
    #: when a Slurm export's jobs arrive: ``eligible`` or ``submit`` (None: the reader's
    #: default, eligible); left out of the config's digest and replay keys when None
    arrival: str | None = None

    def key(self) -> dict[str, Any]:
        """Return the spec as the dict that keys replays and predictors (``arrival`` only
        when set, so a config without it keeps the keys it had before the key existed)."""
        d = asdict(self)
        if d["arrival"] is None:
            d.pop("arrival")
        return d


@dataclass(frozen=True)
class PolicySpec:
    """One policy of the sweep: registry ``name``, display/file ``label``, options, forecaster."""

    name: str
    label: str
    options: dict[str, Any] = field(default_factory=dict)
    forecaster: str = "none"  # "learned" or "none"
    #: the registry alias of this policy's learned predictors (None: ``predictors.alias``)
    alias: str | None = None
    #: on the config's regions: home, static, history or perfect (None: one cluster)
    regions: str | None = None


@dataclass(frozen=True)
class PredictorSpec:
    """Where SIA's learned predictors come from (registry alias, or trained before the replay)."""

    train: str = "registry"  # "registry" | "on_the_fly"
    alias: str | None = None
    windows_min: tuple[int, ...] = DEFAULT_WINDOWS_MIN
    load_method: str = "sliding_max"
    load_windows: int = 3
    train_days: float = 14.0
    val_days: float = 7.0
    warmup_days: float = 1.0
    duration_quantile: float = 0.5  # JobDuration bins this quantile (0.5: the paper's median)
    duration_target_under: float | None = None  # or: calibrate it to this under-prediction rate
    max_fit_rows: int | None = None  # WillJobsArrive's rows per fit (None: default; 0: every row)


@dataclass(frozen=True)
class ExperimentConfig:
    """A validated experiment config (see the module doc for the keys)."""

    name: str
    source: str  # the file it came from ("<dict>" when parsed from memory)
    seed: int
    trace: TraceSpec
    replay_start_day: float | None
    replay_end_day: float | None
    warmup_days: float
    experiments: int
    pools_per_experiment: tuple[int | str, ...]
    min_jobs_per_pool: int
    quotas: str
    load_range: tuple[float, float]
    quota_scale: tuple[float, ...]
    locality: dict[str, Any] | None  # {topology, placement[, options]} for cells; None: fungible
    tick_s: float
    policies: tuple[PolicySpec, ...]
    predictors: PredictorSpec
    #: the ``regions:`` section: {file: RegionsFile, plan_time_s} (None: no regions)
    regions: dict[str, Any] | None = None
    #: the ``preemption:`` section's options (PreemptionConfig; None: the simulator's default)
    preemption: dict[str, Any] | None = None

    def preemption_config(self) -> Any:
        """Return the replays' PreemptionConfig (None when the config sets none)."""
        if self.preemption is None:
            return None
        from sia.pipelines.engine.sched import PreemptionConfig

        return PreemptionConfig.from_options(self.preemption)

    def needs_predictors(self) -> bool:
        """Return True when some policy uses the learned forecaster."""
        return any(p.forecaster == "learned" for p in self.policies)

    def to_dict(self) -> dict[str, Any]:
        """Return the config as a JSON-ready dict (what is logged and hashed)."""
        d = asdict(self)
        d.pop("source")
        _drop_unset_regions(d)
        return json.loads(json.dumps(d, default=list))

    def to_params(self) -> dict[str, str]:
        """Return the config as flat MLflow params (values as short strings)."""
        flat: dict[str, str] = {}

        def walk(prefix: str, value: Any) -> None:
            if isinstance(value, dict) and value:
                for k, v in value.items():
                    walk(f"{prefix}.{k}" if prefix else str(k), v)
            else:
                flat[prefix] = json.dumps(value)[:500] if not isinstance(value, str) else value

        d = self.to_dict()
        d["policies"] = ",".join(p["label"] for p in d["policies"])
        walk("", d)
        return flat

    def digest(self) -> str:
        """Return a short hash of the config (what a finished replay is checked against)."""
        return hashlib.sha256(json.dumps(self.to_dict(), sort_keys=True).encode()).hexdigest()[:16]


def _drop_unset_regions(d: dict[str, Any]) -> None:
    """Leave regions, preemption and trace.arrival out of a config without them (its digest
    and params stay as before)."""
    if d.get("preemption") is None:  # a config without it keeps its digest
        d.pop("preemption", None)
    if d["trace"].get("arrival") is None:  # so does a config without trace.arrival
        d["trace"].pop("arrival", None)
    if d.get("regions") is None:
        d.pop("regions", None)
    else:
        file = d["regions"]["file"]
        d["regions"] = {**d["regions"], "file": None if file is None else file["source"]}
        if d["regions"].get("column") is None:  # a file config's digest stays as before
            d["regions"].pop("column", None)
    for p in d["policies"]:
        if p.get("regions") is None:
            p.pop("regions", None)


_TOP_KEYS = {
    "name", "seed", "trace", "replay", "warmup_days", "experiments", "pools_per_experiment",
    "min_jobs_per_pool", "quotas", "load_range", "quota_scale", "locality", "tick_s",
    "policies", "predictors", "description", "regions", "preemption",
}
_TRACE_KEYS = {"path", "synthetic", "format", "clean", "map", "pool_from", "arrival", "time_unit",
               "quotas", "days", "seed", "ignore_columns"}
_POLICY_KEYS = {"name", "label", "options", "forecaster", "alias", "regions"}
_PRED_KEYS = {"train", "alias", "windows_min", "load_method", "load_windows", "train_days",
              "val_days", "warmup_days", "duration_quantile", "duration_target_under",
              "max_fit_rows"}


class _Where:
    """Builds error messages that name the file and the key."""

    def __init__(self, source: str):
        self.source = source

    def error(self, key: str, msg: str) -> ConfigError:
        return ConfigError(f"{self.source}: {key}: {msg}")

    def unknown(self, section: dict, allowed: set[str], prefix: str) -> None:
        extra = sorted(set(section) - allowed)
        if extra:
            key = f"{prefix}{extra[0]}"
            raise self.error(key, f"unknown key; allowed here: {', '.join(sorted(allowed))}")

    def number(self, value: Any, key: str, *, lo: float | None = None, lo_open: bool = False,
               integer: bool = False, hi: float | None = None) -> float | int:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
        if integer:
            ok = ok and float(value).is_integer()
        if not ok:
            raise self.error(key, f"expected {'an integer' if integer else 'a number'}, "
                                  f"got {value!r}")
        if lo is not None and (value <= lo if lo_open else value < lo):
            raise self.error(key, f"must be {'>' if lo_open else '>='} {lo:g}, got {value!r}")
        if hi is not None and value > hi:
            raise self.error(key, f"must be <= {hi:g}, got {value!r}")
        return int(value) if integer else float(value)

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.error(key, f"expected true or false, got {value!r}")
        return value

    def string(self, value: Any, key: str, choices: tuple[str, ...] | None = None) -> str:
        if not isinstance(value, str) or not value:
            raise self.error(key, f"expected a non-empty string, got {value!r}")
        if choices is not None and value not in choices:
            raise self.error(key, f"{value!r} is not one of {', '.join(choices)}")
        return value


def load_config(path: Path | str, overrides: list[str] | None = None) -> ExperimentConfig:
    """Read and validate the YAML experiment config at ``path`` (``overrides``: `--set KEY=VALUE`
    items); raise ConfigError on mistakes (schema errors all at once: :mod:`sia.pipelines.studies.study_schema`)."""
    # pydantic and yaml are imported only when a config is read (not for `sia --help`)
    from sia.pipelines.studies.study_schema import load_study

    path = Path(path)
    return load_study(path, "evaluate", lambda raw: parse_config(
        raw, source=str(path), base_dir=path.parent, default_name=path.stem), overrides)


def parse_config(raw: Any, *, source: str = "<dict>", base_dir: Path | None = None,
                 default_name: str = "experiment") -> ExperimentConfig:
    """Validate a config mapping and return the :class:`ExperimentConfig`.

    Relative trace and quota paths are resolved against ``base_dir`` (the
    config file's folder) when they exist there, else against the current
    directory; a path found in neither is an error naming the key.
    """
    w = _Where(source)
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping of keys, "
                          f"got {type(raw).__name__}")
    w.unknown(raw, _TOP_KEYS, "")
    name = w.string(raw.get("name", default_name), "name")
    if not LABEL_RE.match(name):
        raise w.error("name", f"{name!r}: use letters, digits, '-', '_', '.'")
    seed = w.number(raw.get("seed", 0), "seed", lo=0, integer=True)

    trace = _parse_trace(raw.get("trace"), w, base_dir)

    start, end, warmup = _parse_replay_window(raw, w)
    experiments = w.number(raw.get("experiments", 1), "experiments", lo=1, integer=True)
    ppe = _parse_pools_per_experiment(raw.get("pools_per_experiment", "all"), w)
    min_jobs = w.number(raw.get("min_jobs_per_pool", 1), "min_jobs_per_pool", lo=1, integer=True)
    quotas, load_range, scales = _parse_quotas(raw, w)
    locality = _locality(w, raw.get("locality", False))
    tick_s = w.number(raw.get("tick_s", 300.0), "tick_s", lo=0, lo_open=True)

    policies = _parse_policies(raw.get("policies"), w, locality)
    preemption = _parse_preemption(raw.get("preemption"), w, locality)
    regions = _parse_regions(raw.get("regions"), policies, w, base_dir)
    predictors = _parse_predictors(raw.get("predictors", {}) or {}, w, name)
    if start == AFTER_TRAINING:
        start = _after_training(predictors, end, warmup, w)
    if predictors.train == "on_the_fly" and any(p.forecaster == "learned" for p in policies):
        need = predictors.train_days + predictors.val_days + predictors.warmup_days
        if start is None:
            raise w.error("replay.start_day", "predictors.train: on_the_fly trains on the period "
                                              "before the replay: set replay.start_day")
        if need > start:
            raise w.error("predictors", f"on_the_fly training needs warmup_days + train_days + "
                                        f"val_days = {need:g} days before replay.start_day "
                                        f"({start:g}); shorten them or start the replay later")
    return ExperimentConfig(
        name=name, source=source, seed=seed, trace=trace, replay_start_day=start,
        replay_end_day=end, warmup_days=warmup, experiments=experiments,
        pools_per_experiment=ppe, min_jobs_per_pool=min_jobs, quotas=quotas,
        load_range=load_range, quota_scale=scales, locality=locality, tick_s=tick_s,
        policies=policies, predictors=predictors, regions=regions, preemption=preemption,
    )


def _parse_preemption(raw: Any, w: _Where, locality: dict[str, Any] | None
                      ) -> dict[str, Any] | None:
    """Return the ``preemption`` key's options, checked now (None when absent)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise w.error("preemption", "expected a mapping such as {preemptible_fraction: 0.3}")
    if locality is not None:
        raise w.error("preemption", "is for fungible GPUs; with locality use locality.options "
                                    "(preempt, preemptible_fraction, lost_work_s, "
                                    "restart_delay_s)")
    from sia.pipelines.engine.sched import PreemptionConfig

    try:
        PreemptionConfig.from_options(raw, where="preemption")
    except ConfigError as exc:
        raise ConfigError(f"{w.source}: {exc}") from None
    return dict(raw)


#: ``replay.start_day``'s keyword: the replay starts the day after on-the-fly training's days.
AFTER_TRAINING = "after_training"


def _parse_replay_window(raw: dict, w: _Where) -> tuple[float | str | None, float | None, float]:
    """Return (replay.start_day, replay.end_day, warmup_days) of a config mapping
    (``start_day`` may be :data:`AFTER_TRAINING`, resolved by :func:`_after_training`)."""
    replay = raw.get("replay", {}) or {}
    if not isinstance(replay, dict):
        raise w.error("replay", "expected a mapping with start_day / end_day")
    w.unknown(replay, {"start_day", "end_day"}, "replay.")
    start = replay.get("start_day")
    end = replay.get("end_day")
    if isinstance(start, str) and start != AFTER_TRAINING:
        raise w.error("replay.start_day", f"expected a number of days or {AFTER_TRAINING}, "
                                          f"got {start!r}")
    if start != AFTER_TRAINING:
        start = None if start is None else w.number(start, "replay.start_day", lo=0)
    end = None if end is None else w.number(end, "replay.end_day", lo=0, lo_open=True)
    warmup = w.number(raw.get("warmup_days", 2.0), "warmup_days", lo=0)
    if start != AFTER_TRAINING:
        _check_window(start, end, warmup, w)
    return start, end, warmup


def _check_window(start: float | None, end: float | None, warmup: float, w: _Where) -> None:
    """The replayed window's end after its start, with days left after the warm-up."""
    if start is not None and end is not None and end <= start:
        raise w.error("replay.end_day", f"must be after replay.start_day ({start:g}), got {end:g}")
    if start is not None and end is not None and warmup >= end - start:
        raise w.error("warmup_days", f"{warmup:g} days leaves nothing of the {end - start:g}-day "
                                     "replay window to evaluate")


def _after_training(predictors: Any, end: float | None, warmup: float, w: _Where) -> float:
    """``replay.start_day: after_training`` as a day: on-the-fly training's warm-up, training
    and validation days, counted from the trace's first submission."""
    if predictors.train != "on_the_fly":
        raise w.error("replay.start_day", f"{AFTER_TRAINING} needs predictors.train: on_the_fly "
                                          "(the days it trains on set the replay's start)")
    start = float(predictors.warmup_days + predictors.train_days + predictors.val_days)
    _check_window(start, end, warmup, w)
    return start


def _parse_pools_per_experiment(ppe_raw: Any, w: _Where) -> tuple[int | str, ...]:
    """Return pools_per_experiment: integers >= 1 or "all", one or a list without repeats."""
    ppe_list = ppe_raw if isinstance(ppe_raw, list) else [ppe_raw]
    if not ppe_list:
        raise w.error("pools_per_experiment", "the list is empty")
    ppe: list[int | str] = []
    for i, v in enumerate(ppe_list):
        key = "pools_per_experiment" + (f"[{i}]" if isinstance(ppe_raw, list) else "")
        if v == "all":
            ppe.append("all")
        else:
            if isinstance(v, str):
                raise w.error(key, f"expected an integer >= 1 or \"all\", got {v!r}")
            ppe.append(w.number(v, key, lo=1, integer=True))
    if len(set(ppe)) != len(ppe):
        raise w.error("pools_per_experiment", f"values repeat: {ppe}")
    return tuple(ppe)


def _parse_quotas(raw: dict, w: _Where) -> tuple[str, tuple[float, float], tuple[float, ...]]:
    """Return (quotas, load_range, quota_scale) of a config mapping."""
    quotas = w.string(raw.get("quotas", "from_load"), "quotas", ("from_load", "recorded"))
    lr = raw.get("load_range", [0.6, 1.1])
    if not isinstance(lr, list | tuple) or len(lr) != 2:
        raise w.error("load_range", f"expected [LOW, HIGH], got {lr!r}")
    lo = w.number(lr[0], "load_range[0]", lo=0, lo_open=True)
    hi = w.number(lr[1], "load_range[1]", lo=0, lo_open=True)
    if hi < lo:
        raise w.error("load_range", f"LOW {lo:g} > HIGH {hi:g}")
    qs_raw = raw.get("quota_scale", 1.0)
    qs_list = qs_raw if isinstance(qs_raw, list) else [qs_raw]
    if not qs_list:
        raise w.error("quota_scale", "the list is empty")
    scales = tuple(
        w.number(v, "quota_scale" + (f"[{i}]" if isinstance(qs_raw, list) else ""),
                 lo=0, lo_open=True)
        for i, v in enumerate(qs_list)
    )
    if len(set(scales)) != len(scales):
        raise w.error("quota_scale", f"values repeat: {list(scales)}")
    return quotas, (lo, hi), scales


def _parse_regions(raw: Any, policies: tuple[PolicySpec, ...], w: _Where,
                   base_dir: Path | None) -> dict[str, Any] | None:
    """Return the ``regions:`` section ({file: RegionsFile, column, plan_time_s}) read and
    checked now (the file's own errors name it and its key), or None; policies that ask for
    regions need it. With ``column`` (a column of the trace naming each job's region) the
    file is None until the sweep has read the trace (:func:`with_trace_regions`)."""
    asked = [i for i, p in enumerate(policies) if p.regions is not None]
    if raw is None:
        if asked:
            raise w.error(f"policies[{asked[0]}].regions", "needs the top-level regions: section "
                                                           "(regions.file: a pool -> region file)")
        return None
    if not isinstance(raw, dict):
        raise w.error("regions", f"expected a mapping with file (and plan_time_s), got {raw!r}")
    w.unknown(raw, {"file", "column", "plan_time_s"}, "regions.")
    plan_s = w.number(raw.get("plan_time_s", PLAN_TIME_S), "regions.plan_time_s", lo=0, lo_open=True)
    if ("file" in raw) == ("column" in raw):
        raise w.error("regions", "give exactly one of file (a pool -> region file) and column "
                                 "(the trace's column naming each job's region)")
    if "column" in raw:
        column = raw["column"]
        if not isinstance(column, str) or not column.strip():
            raise w.error("regions.column", f"must be a column name, got {column!r}")
        return {"file": None, "column": column.strip(), "plan_time_s": float(plan_s)}
    from sia.pipelines.engine.sched import read_regions_file
    from sia.scheduler.regions.model import RegionsError

    path = _resolve_path(raw.get("file"), "regions.file", w, base_dir)
    try:
        file = read_regions_file(path)
    except RegionsError as exc:
        raise w.error("regions.file", str(exc)) from None
    return {"file": file, "column": None, "plan_time_s": float(plan_s)}


def with_trace_regions(cfg: ExperimentConfig, jobs: Any, source: str) -> ExperimentConfig:
    """Return ``cfg`` with its ``regions.column`` read from the trace's ``jobs`` (each pool's
    home: the one region its jobs name), or ``cfg`` itself when it needs no such read."""
    regions = cfg.regions
    if regions is None or regions.get("column") is None or regions.get("file") is not None:
        return cfg
    from sia.scheduler.regions.config import regions_from_jobs
    from sia.scheduler.regions.model import RegionsError

    try:
        file = regions_from_jobs(jobs, source, regions["column"])
    except RegionsError as exc:  # a column the trace lacks, a pool in two regions: the config's
        raise ConfigError(f"{cfg.source}: regions.column: {exc}") from None
    return replace(cfg, regions={**regions, "file": file})


def _time_unit(value: Any, w: _Where) -> str:
    """Return ``trace.time_unit`` checked (one of the units, or ``datetime:FORMAT``)."""
    from sia.data.formats import time_unit_problem

    text = w.string(value, "trace.time_unit")
    problem = time_unit_problem(text)
    if problem:
        raise w.error("trace.time_unit", problem)
    return text


def _resolve_path(value: Any, key: str, w: _Where, base_dir: Path | None) -> str:
    text = w.string(value, key)
    from sia.data.datasets import builtin_name, is_builtin
    from sia.data.errors import TraceError

    if is_builtin(text):  # a dataset shipped in the package, e.g. builtin:philly
        try:
            builtin_name(text)
        except TraceError as exc:
            raise w.error(key, str(exc)) from None
        return text
    p = Path(text).expanduser()
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = ([base_dir / p] if base_dir is not None else []) + [Path.cwd() / p]
    if any(ch in text for ch in "*?["):  # a glob: the generic reader resolves it
        return str(candidates[0])
    for c in candidates:
        if c.exists():
            return str(c.resolve())
    tried = " or ".join(str(c) for c in candidates)
    raise w.error(key, f"{text}: no such file or folder (looked at {tried})")


def _parse_trace(raw: Any, w: _Where, base_dir: Path | None) -> TraceSpec:
    if raw is None:
        raise w.error("trace", "missing: give trace.path (a trace file) or trace.synthetic "
                               "(a synthetic variant)")
    if not isinstance(raw, dict):
        raise w.error("trace", f"expected a mapping with path or synthetic, got {raw!r}")
    w.unknown(raw, _TRACE_KEYS, "trace.")
    has_path, has_syn = raw.get("path") is not None, raw.get("synthetic") is not None
    if has_path == has_syn:
        raise w.error("trace", "give exactly one of trace.path and trace.synthetic")
    from sia.data.readers import FORMATS
    from sia.data.synthetic import VARIANTS

    synthetic = None
    path = None
    if has_syn:
        synthetic = w.string(raw["synthetic"], "trace.synthetic", tuple(VARIANTS))
        for k in ("format", "map", "pool_from", "arrival", "time_unit", "clean"):
            if k in raw:
                raise w.error(f"trace.{k}", "applies to trace.path only, not to a synthetic trace")
    else:
        path = _resolve_path(raw["path"], "trace.path", w, base_dir)
    mapping = raw.get("map", {}) or {}
    if not isinstance(mapping, dict) or not all(isinstance(k, str) and isinstance(v, str)
                                                for k, v in mapping.items()):
        raise w.error("trace.map", f"expected a mapping CONTRACT_COLUMN: YOUR_COLUMN, got {mapping!r}")
    days = raw.get("days")
    seed = raw.get("seed")
    from sia.pipelines.inputs import IGNORABLE_COLUMNS

    ignore = raw.get("ignore_columns") or []
    if not isinstance(ignore, list):
        raise w.error("trace.ignore_columns", f"expected a list of column names, got {ignore!r}")
    ignore = tuple(w.string(c, "trace.ignore_columns", IGNORABLE_COLUMNS) for c in ignore)
    return TraceSpec(
        path=path,
        synthetic=synthetic,
        format=w.string(raw.get("format", "auto"), "trace.format", tuple(FORMATS)),
        clean=w.boolean(raw.get("clean", False), "trace.clean"),
        map=dict(mapping),
        pool_from=None if raw.get("pool_from") is None else w.string(raw["pool_from"],
                                                                      "trace.pool_from"),
        time_unit=_time_unit(raw.get("time_unit", "s"), w),
        quotas=None if raw.get("quotas") is None else _resolve_path(raw["quotas"], "trace.quotas",
                                                                    w, base_dir),
        days=None if days is None else w.number(days, "trace.days", lo=0, lo_open=True),
        seed=None if seed is None else w.number(seed, "trace.seed", lo=0, integer=True),
        ignore_columns=ignore,
        arrival=_arrival(raw, w),
    )


def _arrival(raw: dict, w: _Where) -> str | None:
    """Return ``trace.arrival`` (None when unset): ``eligible`` or ``submit``, for a trace
    read as a Slurm sacct export (``trace.format`` auto or sacct)."""
    from sia.data.formats import ARRIVALS

    if raw.get("arrival") is None:
        return None
    arrival = w.string(raw["arrival"], "trace.arrival", ARRIVALS)
    fmt = raw.get("format", "auto")
    if fmt not in ("auto", "sacct"):
        raise w.error("trace.arrival", f"applies to a Slurm sacct export only, and trace.format "
                                       f"is {fmt}: it would be ignored; drop it")
    return arrival


#: A policy swept over SIA's risk budget is labelled ``<label>+risk<value>`` (e.g. sia+risk0.01).
RISK_LABEL_RE = re.compile(r"^(?P<base>.+)\+risk(?P<risk>[0-9.eE+-]+)$")


def risk_label(label: str, risk: float) -> str:
    """Return the label of ``label``'s policy at risk budget ``risk`` (``sia+risk0.01``)."""
    return f"{label}+risk{risk:g}"


def risk_of_label(label: str) -> tuple[str, float] | None:
    """Return (base label, risk budget) of a label made by :func:`risk_label`, else None."""
    m = RISK_LABEL_RE.match(label)
    if m is None:
        return None
    try:
        return m["base"], float(m["risk"])
    except ValueError:
        return None


def _expand_risk(raw: list, w: _Where) -> list:
    """Return the policy list with every ``options: {risk: [r1, r2, ...]}`` entry expanded into
    one entry per budget, labelled ``<label>+risk<r>`` (the frontier of `sia evaluate`)."""
    out = []
    for i, item in enumerate(raw):
        opts = item.get("options") if isinstance(item, dict) else None
        grid = opts.get("risk") if isinstance(opts, dict) else None
        if not isinstance(grid, list):
            out.append(item)
            continue
        key = f"policies[{i}].options.risk"
        if not grid or not all(isinstance(v, int | float) and not isinstance(v, bool)
                                for v in grid):
            raise w.error(key, f"expected a budget or a non-empty list of budgets in [0, 1], "
                               f"got {grid!r}")
        if len(set(grid)) != len(grid):
            raise w.error(key, f"a budget appears twice in {grid!r}")
        label = item.get("label", item.get("name"))
        for v in grid:
            out.append({**item, "label": risk_label(str(label), float(v)),
                        "options": {**opts, "risk": float(v)}})
    return out


def _parse_policies(raw: Any, w: _Where, locality: dict[str, Any] | None = None,
                    ) -> tuple[PolicySpec, ...]:
    """Return the policy specs, each checked against its declared needs (forecaster, locality).

    An entry whose ``options.risk`` is a list sweeps SIA's risk budget: one policy per value,
    labelled ``<label>+risk<value>`` (:func:`risk_label`)."""
    from sia.pipelines.engine.sched import (
        POLICY_NAMES,
        check_policy,
        option_type_problems,
        unknown_options,
    )

    if not isinstance(raw, list) or not raw:
        raise w.error("policies", "expected a non-empty list of policy names or "
                                  "{name, label, options} mappings")
    raw = _expand_risk(raw, w)
    out: list[PolicySpec] = []
    for i, item in enumerate(raw):
        key = f"policies[{i}]"
        if isinstance(item, str):
            item = {"name": item}
        if not isinstance(item, dict):
            raise w.error(key, f"expected a policy name or a mapping, got {item!r}")
        w.unknown(item, _POLICY_KEYS, f"{key}.")
        name = w.string(item.get("name"), f"{key}.name").lower()
        if name not in POLICY_NAMES:
            raise w.error(f"{key}.name", f"unknown policy {name!r}; known: "
                                         f"{', '.join(POLICY_NAMES)}")
        label = w.string(item.get("label", name), f"{key}.label")
        if not LABEL_RE.match(label):
            raise w.error(f"{key}.label", f"{label!r} is used as a file name: use letters, "
                                          "digits, '-', '_', '.', '+'")
        options = item.get("options", {}) or {}
        if not isinstance(options, dict) or not all(isinstance(k, str) for k in options):
            raise w.error(f"{key}.options", f"expected a mapping of option: value, got {options!r}")
        try:
            needs = check_policy(name)
        except ConfigError as exc:
            raise w.error(f"{key}.name", str(exc)) from None
        for opt in dict.fromkeys(o for o in ("forecaster", needs.forecaster) if o):
            if opt in options:
                raise w.error(f"{key}.options.{opt}", "the forecaster is built by the pipeline; "
                                                      "use predictors: and forecaster: learned")
        for opt, problem in {**option_type_problems(name, options),
                             **unknown_options(name, options)}.items():
            raise w.error(f"{key}.options.{opt}", problem)
        forecaster = w.string(item.get("forecaster", "learned" if needs.forecaster else "none"),
                              f"{key}.forecaster", ("learned", "none"))
        for option, kwargs in (("locality", {"locality": locality}),
                               (f"{key}.forecaster", {"forecaster": forecaster == "learned"})):
            try:
                check_policy(name, **kwargs)
            except ConfigError as exc:
                raise w.error(option, str(exc)) from None
        alias = item.get("alias")
        if alias is not None:
            alias = w.string(alias, f"{key}.alias")
            if forecaster != "learned":
                raise w.error(f"{key}.alias", "an alias names learned predictors: this policy "
                                              "takes none (forecaster: none)")
            if not re.match(r"^[A-Za-z0-9_-]+$", alias):
                raise w.error(f"{key}.alias", f"{alias!r}: an MLflow alias holds letters, "
                                              "digits, '-' and '_'")
        regions = item.get("regions")
        if regions is not None:
            from sia.pipelines.engine.spec import REGION_CHOICES

            regions = w.string(regions, f"{key}.regions", REGION_CHOICES)
        out.append(PolicySpec(name=name, label=label, options=dict(options),
                              forecaster=forecaster, alias=alias, regions=regions))
    labels = [p.label for p in out]
    dup = sorted({x for x in labels if labels.count(x) > 1})
    if dup:
        raise w.error("policies", f"label {dup[0]!r} appears twice; give one a distinct label:")
    if "fcfs" in labels and next(p for p in out if p.label == "fcfs").name != "fcfs":
        raise w.error("policies", "the label 'fcfs' is reserved for the FCFS baseline")
    return tuple(out)


def _parse_predictors(raw: Any, w: _Where, name: str) -> PredictorSpec:
    if not isinstance(raw, dict):
        raise w.error("predictors", f"expected a mapping, got {raw!r}")
    w.unknown(raw, _PRED_KEYS, "predictors.")
    train = w.string(raw.get("train", "registry"), "predictors.train", ("registry", "on_the_fly"))
    default_alias = "champion" if train == "registry" else f"eval-{name}"
    alias = w.string(raw.get("alias", default_alias), "predictors.alias")
    if not re.match(r"^[A-Za-z0-9_-]+$", alias):
        raise w.error("predictors.alias", f"{alias!r}: an MLflow alias holds letters, digits, "
                                          "'-' and '_'")
    wm = raw.get("windows_min", list(DEFAULT_WINDOWS_MIN))
    if not isinstance(wm, list) or not wm:
        raise w.error("predictors.windows_min", f"expected a list of minutes, got {wm!r}")
    windows = tuple(w.number(v, f"predictors.windows_min[{i}]", lo=0, lo_open=True, integer=True)
                    for i, v in enumerate(wm))
    return PredictorSpec(
        train=train,
        alias=alias,
        windows_min=windows,
        load_method=w.string(raw.get("load_method", "sliding_max"), "predictors.load_method",
                             ("sliding_max", "calibrated")),
        load_windows=w.number(raw.get("load_windows", 3), "predictors.load_windows", lo=1,
                              integer=True),
        train_days=w.number(raw.get("train_days", 14.0), "predictors.train_days", lo=0,
                            lo_open=True),
        val_days=w.number(raw.get("val_days", 7.0), "predictors.val_days", lo=0, lo_open=True),
        warmup_days=w.number(raw.get("warmup_days", 1.0), "predictors.warmup_days", lo=0),
        duration_quantile=w.number(raw.get("duration_quantile", 0.5),
                                   "predictors.duration_quantile", lo=0, hi=1),
        duration_target_under=(None if raw.get("duration_target_under") is None else
                               w.number(raw["duration_target_under"],
                                        "predictors.duration_target_under", lo=0, hi=1)),
        max_fit_rows=_max_fit_rows(w, raw.get("max_fit_rows")),
    )


def _max_fit_rows(w: Any, value: Any) -> int | None:
    """Return ``predictors.max_fit_rows`` checked: None (unset), 0 (every row) or >= 2."""
    if value is None:
        return None
    rows = w.number(value, "predictors.max_fit_rows", lo=0, integer=True)
    if rows == 1:
        raise w.error("predictors.max_fit_rows", "0 (every row) or at least 2, not 1")
    return int(rows)


def _locality(w: Any, value: Any) -> dict[str, Any] | None:
    """Return the ``locality`` key as {topology, placement[, options]} (None: fungible GPUs), checked now.

    ``options`` (LocalityConfig options such as ``preempt``, parsed by
    :func:`sia.scheduler.locality.parse_cells_options`) keeps only the values
    that differ from their defaults, JSON-ready, and is left out when none
    does, so replay keys change exactly when an option changes the replay.
    """
    from sia.pipelines.engine.sched import LocalityConfig, options_from_cli, parse_cells_options

    options: dict[str, Any] = {}
    if isinstance(value, dict):
        unknown = sorted(set(value) - {"topology", "placement", "options"})
        if unknown:
            raise w.error("locality", f"unknown key(s) {unknown}; use topology, placement and "
                                      "options")
        spec = {"topology": value.get("topology", "gpus=8,rack=4"),
                "placement": value.get("placement", "buddy")}
        for k, v in spec.items():
            if v is not None and not isinstance(v, str):
                raise w.error(f"locality.{k}", f"expected text such as 'gpus=8,rack=4', got {v!r}")
        raw = value.get("options")
        if raw is not None and not isinstance(raw, dict):
            raise w.error("locality.options", f"expected a mapping of LocalityConfig options "
                                              f"such as {{preempt: true}}, got {raw!r}")
        try:
            options = parse_cells_options(raw, option="locality.options")
        except ConfigError as exc:
            raise ConfigError(f"{w.source}: {exc}") from None
    elif w.boolean(value, "locality"):
        spec = {"topology": "gpus=8,rack=4", "placement": "buddy"}
    else:
        return None
    try:
        options_from_cli(spec["topology"], spec["placement"])
    except ConfigError as exc:
        raise w.error("locality", str(exc)) from None
    default = LocalityConfig()
    options = {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()
               if v != getattr(default, k)}
    if options:
        spec["options"] = options
    return spec
