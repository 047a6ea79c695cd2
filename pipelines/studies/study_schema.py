"""The one config schema of every study (`sia evaluate`, `sia figure5`, `sia figure16`), in pydantic.

A study config is a YAML mapping: common keys (``name``, ``seed``,
``tick_s``, ``policies`` ...), the study's own keys, and a ``grid:`` section
holding what the study sweeps over (evaluate: ``experiments``,
``pools_per_experiment``, ``quota_scale``; figure5: ``workloads``,
``seeds``; figure16: ``variants``, ``seeds``, ``chain_variants``,
``allocators``). Grid keys written at the top level, as configs did before
``grid:`` existed, are still read.

:func:`load_study` reads a file strictly: UTF-8 only, duplicate keys
rejected, NaN and infinite numbers rejected, ``--set key=value`` overrides
applied, and every schema error reported at once, each naming the file and
the key, as one :class:`ConfigError` line. The study's own parser then
checks meaning (known policies, files that exist, locality support).
:func:`json_schema` is what `sia schema` writes for editors.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError
from sia.data.errors import ConfigError

STUDIES = ("evaluate", "figure5", "figure16")
T = TypeVar("T")
NON_FINITE = "NaN or infinite number; give a finite value"

PosFloat = Annotated[float, Field(gt=0)]
NonNegFloat = Annotated[float, Field(ge=0)]
PosInt = Annotated[int, Field(ge=1)]
NonNegInt = Annotated[int, Field(ge=0)]
#: hard limits on sizes no study can use (issue 36): a seed CP-SAT and numpy both take, a name
#: that fits in a file name, a number of days of a calendar (a year 9999 trace spans 2.9 M days,
#: none of the studies replays one), a quota scale below a million
MAX_SEED = 2**31 - 1
MAX_NAME = 200
MAX_TEXT = 10_000
MAX_DAYS = 100_000.0
MAX_QUOTA_SCALE = 1e6
MAX_COUNT = 10**7
Seed = Annotated[int, Field(ge=0, le=MAX_SEED)]
Name = Annotated[str, Field(max_length=MAX_NAME)]
Text = Annotated[str, Field(max_length=MAX_TEXT)]
Days = Annotated[float, Field(gt=0, le=MAX_DAYS)]
NonNegDays = Annotated[float, Field(ge=0, le=MAX_DAYS)]
Count = Annotated[int, Field(ge=1, le=MAX_COUNT)]
QuotaScale = Annotated[float, Field(gt=0, le=MAX_QUOTA_SCALE)]
#: the scheduler's tick: at least a second (a tick of 1e-9 s is billions of events a day)
Tick = Annotated[float, Field(ge=1, le=86_400)]
#: A policy, locality or preemption option's value: a scalar or a list of scalars (the options
#: are constructor arguments; a mapping there is a mistake, e.g. a mis-indented YAML block)
Scalar = bool | int | float | str | None
OptionValue = Scalar | list[Scalar]
Options = dict[str, OptionValue]


def _key(what: str, **constraints: Any) -> Any:
    """An optional config key (unset: the study's default, which ``what`` names) described by
    ``what`` in the config reference and the JSON schema."""
    return Field(None, description=what, **constraints)


class _Strict(BaseModel):
    """Unknown keys are errors; numbers must be finite; ints are not silently made of bools."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=False)


# ----------------------------------------------------------------------------- evaluate
class TraceSection(_Strict):
    """Where the jobs come from: exactly one of ``path`` (with reader options) or ``synthetic``."""

    path: str | None = _key(
        "The trace to read: a file, folder or glob (relative to the config file, else to the "
        "current folder), or `builtin:philly` for the Philly trace shipped in the package. "
        "No default: give this or `synthetic`.")
    synthetic: str | None = _key(
        "Instead of `path`: a synthetic workload variant (`base`, `higher-load`, "
        "`more-queues`, `fewer-queues`, `more-wide-jobs` ...; `sia generate --help` lists "
        "them), generated over `days` days with `seed`. No default: give this or `path`.")
    format: str | None = _key(
        "The trace's format, as `sia ingest --format`: `auto` (default: from the header), "
        "`philly`, `philly-joblog`, `helios`, `pai`, `sacct`, `generic` or `canonical`.")
    clean: bool | None = _key(
        "true: drop bad rows (missing or non-numeric values, duration <= 0, zero GPUs, "
        "duplicates ...) and count them in the report; false (default): stop at the first.")
    map: dict[str, str] | None = _key(
        "Generic traces: contract column -> your column, e.g. `{submit_time: submitted, "
        "num_gpus: gpus}` (as `--map`). Default: none (the contract's names).")
    pool_from: str | None = _key(
        "Where the pool comes from: a column name, `const:NAME` (one pool) or `file-stem` "
        "(each file of a folder is a pool); for a Slurm export `account`, `user` or a field. "
        "Default: the `pool` column (a Slurm export's Partition).")
    arrival: Literal["eligible", "submit"] | None = _key(
        "Slurm sacct exports only: when a job arrives, as `--arrival`. `eligible` (default): "
        "at its `Eligible` time when the export has that field (a job held by a dependency, "
        "a begin time or a hold arrives when Slurm could first run it); `submit`: at its "
        "`Submit` time, Eligible ignored (the report counts the jobs it would have held).")
    time_unit: str | None = _key(
        "Generic traces: submission times, durations and limits as numbers in `s` (default) "
        "or `ms`, or `datetime` / `datetime:FORMAT` for date-time submissions.")
    quotas: str | None = _key(
        "A CSV/Parquet of `pool,quota_gpus` (or a Helios cluster_gpu_number.csv): the "
        "recorded quotas that `quotas: recorded` uses. Default: the trace's own, if any.")
    days: Days | None = _key(
        "Days of a synthetic workload (default 3), or of a trace: keep only its first `days` "
        "days (default: all).")
    seed: Seed | None = _key(
        "The synthetic workload's seed. Default: the config's `seed`.")
    ignore_columns: list[str] | None = _key(
        "Optional contract columns read as absent (`tag`, `user`, `time_limit`, `state`, "
        "`hold_time`): "
        "an ablation of what they are worth to the predictors and to SIA. Default: none.")


class ReplaySection(_Strict):
    """The replayed window, days since the trace start."""

    start_day: NonNegDays | Literal["after_training"] | None = _key(
        "First day of the replayed window (days since the trace's first submission), or "
        "`after_training`: the first day after `predictors.train: on_the_fly`'s warm-up, "
        "training and validation days (any trace, no day to work out). "
        "Default: the trace's start. Needed by `predictors.train: on_the_fly`.")
    end_day: Days | None = _key(
        "End of the replayed window (days since the trace start, exclusive); after "
        "`start_day`. Default: the trace's last submission.")


class LocalitySection(_Strict):
    """Buddy cells: server/rack shape, placement chain, LocalityConfig options."""

    topology: str | None = _key(
        "The cluster's shape, as `sia replay --topology`: GPUs per server and servers per "
        "rack. Default: `gpus=8,rack=4`.")
    placement: str | None = _key(
        "The placement chain, as `--placement`: `buddy`, then fallback solvers tried in order "
        "(`mcf`, `hungarian`, `milp`), e.g. `buddy,mcf`. Default: `buddy`.")
    options: Options | None = _key(
        "LocalityConfig options, as `sia replay --cells-option`: preemption (`preempt`, "
        "`preemptible_fraction`, `lost_work_s`, `restart_delay_s`, `seed`), migration "
        "(`migrate`) and allocator switches (`adopt_loans`, `strict_buddies` ...). "
        "Default: none (LocalityConfig's defaults).")


class PolicyEntry(_Strict):
    """A policy with its registry ``name``, display ``label``, options and predictors."""

    name: Name = Field(description=(
        "The policy's registry name (`fcfs`, `sia`, `sia-perfect`, `maxmin`, `hived`, "
        "`kueue` ...; `sia replay --help` lists them). Required."))
    label: Name | None = _key(
        "Its name in tables, plots, runs and file names (letters, digits, `-_.+`; `fcfs` is "
        "kept for the baseline). Default: `name`.")
    options: Options | None = _key(
        "The policy's constructor options, e.g. `{risk: 0.01}`; a list as `risk` sweeps it "
        "(one policy per value, labelled `LABEL+riskVALUE`). Default: none.")
    forecaster: Literal["learned", "none"] | None = _key(
        "`learned`: the policy gets the learned predictors of `predictors:`; `none`: it gets "
        "none. Default: `learned` for a policy that takes a forecaster (SIA), else `none`.")
    alias: Name | None = _key(
        "The MLflow registry alias of this policy's learned predictors (letters, digits, "
        "`-`, `_`), to compare predictor versions. Default: `predictors.alias`.")
    regions: Literal["home", "static", "history", "perfect", "forecast", "static+idle",
                     "history+idle", "perfect+idle", "forecast+idle", "reservations-history",
                     "reservations-perfect", "reservations-forecast"] | None = _key(
        "With a `regions:` section, how this policy schedules across regions: `home` (each "
        "job in its home region), `static` (global, data where the file puts it), "
        "`history` / `perfect` / `forecast` (global, data placed from last period's demand, "
        "the trace's future or the forecasters; `+idle`: guests on any idle GPU) or "
        "`reservations-*` (quotas split into per-region shares). Default: one cluster.")


class RegionsSection(_Strict):
    """Global scheduling across regions: a pool -> region ``file`` or the trace's ``column``
    naming each job's region (exactly one), the placement MIP's limit."""

    file: str | None = _key(
        "A regions file (YAML): each pool's home region, data size and replicas, and the "
        "regions' GPUs. No default: give this or `column`.")
    column: str | None = _key(
        "Instead of `file`: the trace's column naming each job's region (each pool's home is "
        "the one region its jobs name). No default: give this or `file`.")
    plan_time_s: PosFloat | None = _key(
        "Wall-clock safety net of each data-placement or reservation plan (the MIP), in "
        "seconds; plans stop on a fixed amount of solver work first, so they do not depend on "
        "the machine's load unless this net stops them (the plan then says so). Default: 60.")


class PredictorsSection(_Strict):
    """Where learned predictors come from: the registry (by alias) or trained before the replay."""

    train: Literal["registry", "on_the_fly"] | None = _key(
        "`registry` (default): load the registered predictors by `alias` (trained with "
        "`sia train`); `on_the_fly`: train them on the days before `replay.start_day`.")
    alias: Name | None = _key(
        "The MLflow registry alias to load (or, on the fly, to register as). Default: "
        "`champion` from the registry, `eval-NAME` on the fly.")
    windows_min: list[PosInt] | None = _key(
        "The predictors' look-ahead windows, in minutes (a model per window is loaded or "
        "trained). Default: `[5, 60, 720]`.")
    load_method: Literal["sliding_max", "calibrated"] | None = _key(
        "How the policies estimate each pool's new load: `sliding_max` (default, the "
        "paper's: the largest load of the last `load_windows` windows) or `calibrated` (the "
        "registered NewLoadEstimate models).")
    load_windows: PosInt | None = _key(
        "How many past windows the sliding max of the new load reads. Default: 3.")
    train_days: Days | None = _key(
        "On the fly: days of training data before the validation days. Default: 14.")
    val_days: Days | None = _key(
        "On the fly: days of validation data just before `replay.start_day`. Default: 7.")
    warmup_days: NonNegDays | None = _key(
        "On the fly: days before the training days that are not trained on (the features' "
        "history builds up in them). Default: 1.")
    duration_quantile: Annotated[float, Field(ge=0, le=1)] | None = _key(
        "On the fly: the quantile of similar jobs' durations JobDuration bins, in [0, 1]. "
        "Default: 0.5 (the paper's median).")
    duration_target_under: Annotated[float, Field(ge=0, le=1)] | None = _key(
        "On the fly: instead of `duration_quantile`, calibrate the quantile on the training "
        "days to this share of under-predicted durations, in [0, 1]. Default: none.")
    max_fit_rows: Annotated[int, Field(ge=0)] | None = _key(
        "On the fly: at most this many rows per WillJobsArrive booster fit; above it a fit "
        "keeps every row with an arrival and a weighted sample of the others (with many pools "
        "the 5-minute rows grow as pools x days). 0: every row. Default: `sia train`'s "
        "(`--max-fit-rows`).")


PoolsPerExperiment = PosInt | Literal["all"]


class EvaluateGrid(_Strict):
    """What `sia evaluate` sweeps: experiments per group, and groups of pool count x quota scale."""

    experiments: Count | None = _key(
        "Experiments per group (each draws its own pools and loads from `seed`). Default: 1.")
    pools_per_experiment: PoolsPerExperiment | list[PoolsPerExperiment] | None = _key(
        "Pools drawn per experiment: a number, `all` (default), or a list of them (one "
        "group each, as Figure 14).")
    quota_scale: QuotaScale | list[QuotaScale] | None = _key(
        "Every quota multiplied by this (at least the pool's widest job): a number (default "
        "1) or a list (one group each, as Figure 18).")


class EvaluateStudy(EvaluateGrid):
    """`sia evaluate`: experiments sharing pools of a trace, every policy against FCFS."""

    study: Literal["evaluate"] | None = _key(
        "Which study the config is for; an error when it names another. Optional.")
    name: Name | None = _key(
        "The sweep's name: run names, the output folder `out/NAME` (letters, digits, `-_.`). "
        "Default: the config file's name without its extension.")
    description: Text | None = _key(
        "Free text about the sweep, for the reader; not used by the run. Default: none.")
    seed: Seed | None = _key(
        "Every random draw of the sweep (pools, loads, synthetic workloads) derives from it. "
        "Default: 0.")
    trace: TraceSection = Field(description=(
        "Where the jobs come from: a trace file or a synthetic workload. Required."))
    replay: ReplaySection | None = _key(
        "The replayed window of the trace, in days. Default: the whole trace.")
    warmup_days: NonNegDays | None = _key(
        "Days at the start of the replay window whose jobs run but are not scored (only jobs "
        "submitted after it count). Default: 2.")
    min_jobs_per_pool: PosInt | None = _key(
        "Pools with fewer jobs in the replay window are never drawn. Default: 1.")
    quotas: Literal["from_load", "recorded"] | None = _key(
        "`from_load` (default, SIA 6.1): per experiment, each pool's quota from a target "
        "load drawn in `load_range`; `recorded`: the trace's quotas (`trace.quotas`).")
    load_range: tuple[PosFloat, PosFloat] | None = _key(
        "`[LOW, HIGH]`: with `quotas: from_load`, each pool's target load is drawn uniformly "
        "in it and quota = GPU-seconds / (span x load). Default: `[0.6, 1.1]`.")
    locality: bool | LocalitySection | None = _key(
        "false (default): fungible GPUs; true: 8-GPU servers in racks of 4 with buddy "
        "placement; or a mapping of `topology`, `placement` and `options`.")
    tick_s: Tick | None = _key(
        "The scheduler's tick: how often policies decide, in seconds. Default: 300.")
    policies: list[str | PolicyEntry] = Field(min_length=1, description=(
        "The policies replayed in every experiment, each a registry name or a mapping "
        "(`name`, `label`, `options` ...); FCFS is always replayed as the baseline. Required."))
    predictors: PredictorsSection | None = _key(
        "Where the learned predictors come from, for the policies that take them. Default: "
        "the registry's `champion`.")
    grid: EvaluateGrid | None = _key(
        "What the sweep runs over: `experiments`, `pools_per_experiment`, `quota_scale` "
        "(also read at the top level). Default: each key's own default.")
    regions: RegionsSection | None = _key(
        "Global scheduling across regions, for the policies that set `regions`. Default: "
        "none (one cluster).")
    preemption: Options | None = _key(
        "Fungible GPUs only: which jobs may be preempted and the cost. Options "
        "`preemptible_fraction` (share of jobs drawn, default 0), `seed` (0), `checkpoint_s` "
        "(seconds between checkpoints, 1800; null: none) and `restart_delay_s` (120). "
        "Default: the simulator's (no preemptible jobs but the trace's).")


# ----------------------------------------------------------------------------- figure 5
class OracleSection(_Strict):
    """The oracle MILP's options."""

    step_s: PosFloat | None = _key(
        "The grid of candidate start times, in seconds (coarsened by powers of two for long "
        "jobs). Default: 300.")
    slots_per_duration: PosInt | None = _key(
        "About how many candidate starts per job duration (a job's step is at most its "
        "duration over this). Default: 4.")
    time_limit_s: PosFloat | None = _key(
        "Wall-clock limit of the solve, in seconds (a safety bound; a plan it stops is not "
        "reproducible). Default: 600.")
    work_limit: PosFloat | None = _key(
        "CP-SAT's limit in deterministic seconds (its own work count, reproducible whatever "
        "the machine's load). Default: 20.")
    solver: str | None = _key(
        "The MILP solver: `cp-sat` (default), `highs` or `scip`.")
    threads: PosInt | None = _key("The solver's threads. Default: 1.")
    beta: NonNegFloat | None = _key(
        "Weight of the fairness term (SIA's constraint 13) in the objective; 0 (default): "
        "total queueing delay only.")
    warm_start: bool | str | None = _key(
        "The solver's starting plan: `sia-vc` (default: SIA_VC's replay), `fcfs`, or null "
        "(none).")


class Figure5Grid(_Strict):
    """What `sia figure5` sweeps: synthetic workload variants x seeds."""

    workloads: list[str] | None = _key(
        "Synthetic workload variants. Default: `[base, more-queues, higher-load]`.",
        min_length=1)
    seeds: list[Seed] | None = _key(
        "Seeds of each workload. Default: `[0, 1, 2]`.", min_length=1)


class Figure5Study(Figure5Grid):
    """`sia figure5`: FCFS, SSF, gSSF, MaxMin, SIA_VC and the oracle on synthetic workloads."""

    study: Literal["figure5"] | None = _key(
        "Which study the config is for; an error when it names another. Optional.")
    description: Text | None = _key(
        "Free text about the study, for the reader; not used by the run. Default: none.")
    policies: list[str] | None = _key(
        "Registry policies replayed on every workload. Default: `[fcfs, ssf, gssf, maxmin, "
        "sia-vc, oracle]`.", min_length=1)
    days: Days | None = _key("Length of each synthetic workload, in days. Default: 3.")
    warmup_s: NonNegFloat | None = _key(
        "Seconds at the start whose jobs are not scored. Default: 0 (every job counts).")
    tick_s: Tick | None = _key(
        "The scheduler's tick: how often policies decide, in seconds. Default: 300.")
    oracle: OracleSection | None = _key(
        "The oracle MILP's options (SIA Figure 19). Default: the oracle's defaults.")
    grid: Figure5Grid | None = _key(
        "What the study sweeps: `workloads` and `seeds` (also read at the top level). "
        "Default: each key's own default.")


# ----------------------------------------------------------------------------- figure 16
class Figure16Grid(_Strict):
    """What `sia figure16` sweeps: variants x seeds, allocator settings, chains and their variants."""

    variants: list[str] | None = _key(
        "Synthetic workload variants (2 / 4 / 8 pools). Default: `[fewer-queues, base, "
        "more-queues]`.")
    seeds: list[Seed] | None = _key("Seeds of each variant. Default: `[0, 1, 2]`.")
    chain_variants: list[str] | None = _key(
        "Variants the placement chains are compared on. Default: `[base]`.")
    chains: list[str] | None = _key(
        "Placement chains compared on `chain_policy`, each as `--placement`. Default: "
        "`[buddy, \"buddy,mcf\", \"buddy,hungarian\", \"buddy,milp\"]`.")
    allocators: dict[str, Options | None] | None = _key(
        "Named allocator settings (LocalityConfig options over `locality`); every locality "
        "policy is replayed under each. Default: `adopt-loans` (`adopt_loans: true`) and "
        "`no-adopt` (`adopt_loans: false`).")


class Figure16Study(Figure16Grid):
    """`sia figure16`: SIA and HiveD* on buddy cells, allocators, placement chains."""

    study: Literal["figure16"] | None = _key(
        "Which study the config is for; an error when it names another. Optional.")
    description: Text | None = _key(
        "Free text about the study, for the reader; not used by the run. Default: none.")
    policies: list[str] | None = _key(
        "Registry policies replayed on buddy cells. Default: `[sia-perfect, hived]`.")
    no_locality_policies: list[str] | None = _key(
        "Policies also replayed on fungible GPUs, to show what the cells cost. Default: "
        "`[sia-perfect]`.")
    days: Days | None = _key("Length of each synthetic workload, in days. Default: 6.")
    warmup_s: NonNegFloat | None = _key(
        "Seconds at the start whose jobs are not scored. Default: 172800 (2 days).")
    tick_s: Tick | None = _key(
        "The scheduler's tick: how often policies decide, in seconds. Default: 300.")
    chain_policy: str | None = _key(
        "The policy the placement chains are compared on. Default: `sia-perfect`.")
    budget_s: PosFloat | None = _key(
        "Time budget of each fallback solver call of a chain, in seconds. Default: 0.5.")
    locality: Options | None = _key(
        "LocalityConfig options of every locality replay (`adopt_loans`, `pack`, "
        "`strict_buddies` ...). Default: none (LocalityConfig's defaults).")
    chain_locality: Options | None = _key(
        "LocalityConfig options over `locality` for the chain comparison only, e.g. "
        "`{spare_full_pools: false}`. Default: none.")
    preemption: Options | None = _key(
        "Adds `POLICY+preempt` rows with partial preemption: `policy` (default "
        "`sia-perfect`), `preemptible_fraction` (share of jobs), `lost_work_s` and "
        "`restart_delay_s` (seconds each preemption costs). Default: none (no such rows).")
    migration: bool | None = _key(
        "true: also `POLICY+preempt+migrate` rows (needs `preemption`): a gang blocked by "
        "fragmentation moves running preemptible jobs. Default: false.")
    learned_train_days: Days | None = _key(
        "Days of the independent workload the learned predictors (`sia-learned`) train on. "
        "Default: 40.")
    learned_seed_offset: Seed | None = _key(
        "That workload's seed is the replay's seed plus this. Default: 1000.")
    learned_options: Options | None = _key(
        "SiaPolicy options of the policies that take learned predictors, e.g. "
        "`{adapt_durations: true}`. Default: none.")
    pool_gpus: PosInt | None = _key(
        "GPUs per pool of the synthetic workloads (8: each pool's quota is one 8-GPU "
        "server). Default: 8.")
    grid: Figure16Grid | None = _key(
        "What the study sweeps: `variants`, `seeds`, `chain_variants`, `chains`, "
        "`allocators` (also read at the top level). Default: each key's own default.")


MODELS: dict[str, type[BaseModel]] = {
    "evaluate": EvaluateStudy, "figure5": Figure5Study, "figure16": Figure16Study}


# ----------------------------------------------------------------------------- reading
class _UniqueKeyLoader(yaml.SafeLoader):
    """A safe YAML loader that rejects a key given twice in one mapping."""


def _construct_mapping(loader: _UniqueKeyLoader, node: yaml.MappingNode, deep: bool = False):
    seen: dict[Any, int] = {}
    for key_node, _ in node.value:
        key = loader.construct_object(key_node, deep=True)
        line = key_node.start_mark.line + 1
        if not isinstance(key, str | int | float | bool) and key is not None:
            raise ConfigError(f"{loader.source}: line {line}: a key must be a name, not a "
                              f"{type(key).__name__} ({_snippet(key)}); write key: value")
        if key in seen:
            raise ConfigError(f"{loader.source}: line {line}: duplicate key {key!r} "
                              f"(first on line {seen[key]}); keep one")
        seen[key] = line
    return loader.construct_mapping_plain(node, deep=deep)


_UniqueKeyLoader.construct_mapping_plain = yaml.SafeLoader.construct_mapping
_UniqueKeyLoader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG,
                                 _construct_mapping)


def _snippet(value: Any, limit: int = 40) -> str:
    try:
        text = repr(value)
    except RecursionError:
        text = "..."
    return text if len(text) <= limit else text[:limit] + "..."


#: how deep a config may nest (mappings and lists); far beyond any real one
MAX_DEPTH = 50


def _check_structure(data: Any, source: str) -> None:
    """Raise ConfigError when ``data`` holds itself (a recursive YAML alias) or nests deeper
    than :data:`MAX_DEPTH`."""
    stack: list[tuple[Any, int, tuple[int, ...]]] = [(data, 0, ())]
    while stack:
        node, depth, ancestors = stack.pop()
        if not isinstance(node, dict | list):
            continue
        if id(node) in ancestors:
            raise ConfigError(f"{source}: a YAML alias refers to a mapping or list that holds it "
                              "(a recursive alias); write the value out")
        if depth > MAX_DEPTH:
            raise ConfigError(f"{source}: the config nests deeper than {MAX_DEPTH} levels")
        children = node.values() if isinstance(node, dict) else node
        for child in children:
            stack.append((child, depth + 1, (*ancestors, id(node))))


def load_yaml_text(text: str, source: str) -> Any:
    """Return the parsed YAML ``text`` (for ``source`` in messages): one-line ConfigError for
    invalid YAML, a key given twice or that is not a name, a recursive alias, or a number too
    long to read."""
    loader = _UniqueKeyLoader(text)
    loader.source = source
    try:
        data = loader.get_single_data()
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1}, column {mark.column + 1})" if mark else ""
        raise ConfigError(f"{source}: not valid YAML: {str(exc).splitlines()[0]}{where}") from None
    except (ValueError, TypeError, OverflowError) as exc:  # a 5,000-digit number, a bad key
        raise ConfigError(f"{source}: a value cannot be read "
                          f"({' '.join(str(exc).split())[:160]})") from None
    except RecursionError:
        raise ConfigError(f"{source}: the YAML nests too deeply to read") from None
    finally:
        loader.dispose()
    _check_structure(data, source)
    return data


def read_yaml(path: Path | str) -> Any:
    """Return the parsed YAML of the config file at ``path`` (None for an empty file).

    One-line ConfigError naming the file for a missing file, text that is
    not UTF-8, invalid YAML, or a key given twice in one mapping.
    """
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    data = path.read_bytes()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte 0x{data[exc.start]:02x} at offset "
                          f"{exc.start}); save the file as UTF-8") from None
    return load_yaml_text(text, str(path))


def apply_overrides(raw: Any, overrides: list[str] | None, source: str) -> Any:
    """Return ``raw`` with each ``KEY=VALUE`` of ``overrides`` set (`--set`).

    KEY is dotted (``predictors.alias``, ``grid.experiments``); VALUE is read
    as a YAML scalar or flow collection (``3``, ``true``, ``[2, 4]``, ``null``).
    Missing mappings on the way are created. ConfigError names the override.
    """
    if not overrides:
        return raw
    out = {} if raw is None else raw
    if not isinstance(out, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping of keys to take --set")
    for item in overrides:
        key, sep, text = item.partition("=")
        parts = key.strip().split(".")
        if not sep or not all(parts):
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE with a dotted KEY, e.g. "
                              "--set grid.experiments=3")
        try:
            value = load_yaml_text(text, f"--set {key}") if text.strip() else None
        except ConfigError as exc:
            raise ConfigError(f"--set {key}: value {text[:100]!r} is not a YAML value "
                              f"({str(exc).removeprefix(f'--set {key}: ')})") from None
        node = out
        for i, part in enumerate(parts[:-1]):
            child = node.setdefault(part, {})
            if child is None:
                child = node[part] = {}
            if not isinstance(child, dict):
                raise ConfigError(f"--set {key}: {'.'.join(parts[:i + 1])} is not a mapping "
                                  f"(it holds {child!r})")
            node = child
        node[parts[-1]] = value
    return out


def _loc(loc: tuple) -> str:
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += ("." if out else "") + str(part)
    return out


def _non_finite(raw: Any, prefix: str = "") -> list[str]:
    """Return the keys holding NaN or an infinite number anywhere in ``raw``."""
    if isinstance(raw, float) and not math.isfinite(raw):
        return [prefix or "(top level)"]
    if isinstance(raw, dict):
        return [k for key, v in raw.items()
                for k in _non_finite(v, f"{prefix}.{key}" if prefix else str(key))]
    if isinstance(raw, list):
        return [k for i, v in enumerate(raw) for k in _non_finite(v, f"{prefix}[{i}]")]
    return []


_UNION_TAGS = ("str", "int", "float", "bool", "list", "dict", "tuple", "PolicyEntry",
               "LocalitySection")


def _message(err: dict) -> str:
    """Return pydantic's error in the words the study parsers use."""
    kind, ctx, value = err["type"], err.get("ctx") or {}, err.get("input")
    words = {
        "missing": "missing",
        "extra_forbidden": "unknown key",
        "int_type": f"expected an integer, got {value!r}",
        "int_parsing": f"expected an integer, got {value!r}",
        "int_from_float": f"expected an integer, got {value!r}",
        "float_type": f"expected a number, got {value!r}",
        "float_parsing": f"expected a number, got {value!r}",
        "finite_number": NON_FINITE,
        "bool_type": f"expected true or false, got {value!r}",
        "bool_parsing": f"expected true or false, got {value!r}",
        "string_type": f"expected text, got {value!r}",
        "dict_type": f"expected a mapping, got {value!r}",
        "model_type": f"expected a mapping, got {value!r}",
        "list_type": f"expected a list, got {value!r}",
        "tuple_type": f"expected a list, got {value!r}",
        "too_short": "the list is empty",
        "greater_than": f"must be > {ctx.get('gt')}, got {value!r}",
        "greater_than_equal": f"must be >= {ctx.get('ge')}, got {value!r}",
        "less_than_equal": f"must be <= {ctx.get('le')}, got {value!r}",
        "literal_error": f"{value!r} is not one of {ctx.get('expected', '')}",
    }
    return words.get(kind, err["msg"])


def _problems(errors: list[dict]) -> dict[str, str]:
    """Return {key: message}, one per key (a union's alternatives give several errors per key:
    the first is kept)."""
    out: dict[str, str] = {}
    for err in errors:
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and (
            p in _UNION_TAGS or p.startswith(("list[", "dict[", "tuple[", "literal[",
                                               "function-", "constrained-")))))
        out.setdefault(_loc(loc) or "(top level)", _message(err))
    return out


#: keys holding lists of registry policy names, and of synthetic variants, per study
_POLICY_LISTS = {"evaluate": (), "figure5": ("policies",),
                 "figure16": ("policies", "no_locality_policies")}
_VARIANT_LISTS = {"evaluate": (), "figure5": ("workloads",),
                  "figure16": ("variants", "chain_variants")}


def _unknown_names(raw: dict[str, Any], study: str) -> dict[str, str]:
    """Return {key[i]: message} for every policy or workload variant name not known, so that
    all of them are reported with the schema's problems (the parsers stop at the first)."""
    from sia.data.synthetic import VARIANTS
    from sia.pipelines.engine.sched import POLICY_NAMES

    out = {}
    lists = [(k, POLICY_NAMES, "policy") for k in _POLICY_LISTS[study]]
    lists += [(k, VARIANTS, "variant") for k in _VARIANT_LISTS[study]]
    if study == "evaluate" and isinstance(raw.get("policies"), list):
        for i, item in enumerate(raw["policies"]):
            name = item.get("name") if isinstance(item, dict) else item
            if isinstance(name, str) and name.lower() not in POLICY_NAMES:
                out[f"policies[{i}].name"] = (f"unknown policy {name!r}; known: "
                                              + ", ".join(POLICY_NAMES))
    for key, known, what in lists:
        values = raw.get(key)
        for i, name in enumerate(values if isinstance(values, list) else []):
            if isinstance(name, str) and name not in known:
                out[f"{key}[{i}]"] = f"unknown {what} {name!r}; known: {', '.join(known)}"
    return out


def check(raw: Any, study: str, source: str) -> tuple[dict[str, Any], dict[str, str]]:
    """Check ``raw`` against ``study``'s schema.

    Returns (the mapping with ``grid:`` keys lifted to the top level, for the
    study's parser; every problem found, {key: what}). A config that is not
    a mapping is a ConfigError at once.
    """
    if raw is None:
        raw = {}
    if not isinstance(raw, dict):
        raise ConfigError(f"{source}: the config must be a YAML mapping of keys, "
                          f"got {type(raw).__name__}")
    problems = dict.fromkeys(_non_finite(raw), NON_FINITE)
    given = raw.get("study")
    if given is not None and given != study:
        problems["study"] = f"this config is for `sia {given}`, not `sia {study}`"
    try:
        MODELS[study].model_validate(raw)
    except ValidationError as exc:
        for key, msg in _problems(exc.errors()).items():
            problems.setdefault(key, msg)
    grid = raw.get("grid")
    grid = grid if isinstance(grid, dict) else {}
    for key, msg in _unknown_names({**raw, **grid}, study).items():
        problems.setdefault(("grid." if key.split("[")[0] in grid else "") + key, msg)
    for key in grid:
        if key in raw:
            problems.setdefault(f"grid.{key}", f"{key} is given twice: at the top level and "
                                               "under grid:; keep one")
    out = {k: v for k, v in raw.items() if k not in ("grid", "study")}
    out.update(grid)
    return out, problems


def load_study(path: Path | str, study: str, parse: Callable[[dict[str, Any]], T],
               overrides: list[str] | None = None) -> T:
    """Read the YAML config at ``path`` for ``study``, apply ``overrides`` (`--set`), check it
    against the schema and return ``parse(mapping)`` (the study's own parser, ``grid:`` lifted).

    Every problem is reported at once in one ConfigError line naming the
    file and each key: the parser's first error (worded for its key) and
    then what the schema found elsewhere.
    """
    source = str(path)
    raw, problems = check(apply_overrides(read_yaml(path), overrides, source), study, source)
    if any(v == NON_FINITE for v in problems.values()):
        parse = _raise_problems  # the parser would read NaN / inf as numbers: name them first
    try:
        parsed = parse(raw)
    except _Problems:
        raise ConfigError(_listed(source, problems)) from None
    except ConfigError as exc:
        first = str(exc)
        if not first.startswith(source):  # a parser error that does not name the file or key
            if problems:  # the schema's problems do: they come first
                raise ConfigError(_listed(source, problems)) from None
            first = f"{source}: {first}"
        key = first.removeprefix(f"{source}: ").split(":", 1)[0]
        rest = {k: v for k, v in problems.items() if k != key and not key.startswith(k + "[")
                and not k.startswith(key + ".") and not k.startswith(key + "[")}
        if rest and first.startswith(source):
            first += "; also " + "; ".join(f"{k}: {v}" for k, v in rest.items())
        raise ConfigError(first) from None
    if problems:
        raise ConfigError(_listed(source, problems))
    return parsed


def _listed(source: str, problems: dict[str, str]) -> str:
    many = f"{len(problems)} problems: " if len(problems) > 1 else ""
    return f"{source}: {many}" + "; ".join(f"{k}: {v}" for k, v in problems.items())


def _raise_problems(raw: dict[str, Any]) -> Any:
    raise _Problems


class _Problems(Exception):
    """Raised instead of parsing when the schema's problems must come first."""


def json_schema(study: str | None = None) -> dict[str, Any]:
    """Return the JSON schema of ``study``'s config, or of any study (one of the three)."""
    if study is not None:
        if study not in MODELS:
            raise ConfigError(f"--study {study!r}: known studies: {', '.join(STUDIES)}")
        return MODELS[study].model_json_schema()
    from pydantic import TypeAdapter

    schema = TypeAdapter(EvaluateStudy | Figure5Study | Figure16Study).json_schema()
    schema["title"] = "sia study config (evaluate, figure5 or figure16)"
    return schema
