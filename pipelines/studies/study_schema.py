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


class _Strict(BaseModel):
    """Unknown keys are errors; numbers must be finite; ints are not silently made of bools."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, strict=False)


# ----------------------------------------------------------------------------- evaluate
class TraceSection(_Strict):
    """Where the jobs come from: exactly one of ``path`` (with reader options) or ``synthetic``."""

    path: str | None = None
    synthetic: str | None = None
    format: str | None = None
    clean: bool | None = None
    map: dict[str, str] | None = None
    pool_from: str | None = None
    time_unit: str | None = None
    quotas: str | None = None
    days: Days | None = None
    seed: Seed | None = None
    ignore_columns: list[str] | None = None


class ReplaySection(_Strict):
    """The replayed window, days since the trace start."""

    start_day: NonNegDays | None = None
    end_day: Days | None = None


class LocalitySection(_Strict):
    """Buddy cells: server/rack shape, placement chain, LocalityConfig options."""

    topology: str | None = None
    placement: str | None = None
    options: Options | None = None


class PolicyEntry(_Strict):
    """A policy with its registry ``name``, display ``label``, options and predictors."""

    name: Name
    label: Name | None = None
    options: Options | None = None
    forecaster: Literal["learned", "none"] | None = None
    alias: Name | None = None
    regions: Literal["home", "static", "history", "perfect", "forecast", "static+idle",
                     "history+idle", "perfect+idle", "forecast+idle", "reservations-history",
                     "reservations-perfect", "reservations-forecast"] | None = None


class RegionsSection(_Strict):
    """Global scheduling across regions: a pool -> region ``file`` or the trace's ``column``
    naming each job's region (exactly one), the placement MIP's limit."""

    file: str | None = None
    column: str | None = None
    plan_time_s: PosFloat | None = None


class PredictorsSection(_Strict):
    """Where learned predictors come from: the registry (by alias) or trained before the replay."""

    train: Literal["registry", "on_the_fly"] | None = None
    alias: Name | None = None
    windows_min: list[PosInt] | None = None
    load_method: Literal["sliding_max", "calibrated"] | None = None
    load_windows: PosInt | None = None
    train_days: Days | None = None
    val_days: Days | None = None
    warmup_days: NonNegDays | None = None
    duration_quantile: Annotated[float, Field(ge=0, le=1)] | None = None
    duration_target_under: Annotated[float, Field(ge=0, le=1)] | None = None


PoolsPerExperiment = PosInt | Literal["all"]


class EvaluateGrid(_Strict):
    """What `sia evaluate` sweeps: experiments per group, and groups of pool count x quota scale."""

    experiments: Count | None = None
    pools_per_experiment: PoolsPerExperiment | list[PoolsPerExperiment] | None = None
    quota_scale: QuotaScale | list[QuotaScale] | None = None


class EvaluateStudy(EvaluateGrid):
    """`sia evaluate`: experiments sharing pools of a trace, every policy against FCFS."""

    study: Literal["evaluate"] | None = None
    name: Name | None = None
    description: Text | None = None
    seed: Seed | None = None
    trace: TraceSection
    replay: ReplaySection | None = None
    warmup_days: NonNegDays | None = None
    min_jobs_per_pool: PosInt | None = None
    quotas: Literal["from_load", "recorded"] | None = None
    load_range: tuple[PosFloat, PosFloat] | None = None
    locality: bool | LocalitySection | None = None
    tick_s: Tick | None = None
    policies: list[str | PolicyEntry] = Field(min_length=1)
    predictors: PredictorsSection | None = None
    grid: EvaluateGrid | None = None
    regions: RegionsSection | None = None
    preemption: Options | None = None  # fungible GPUs: PreemptionConfig's options


# ----------------------------------------------------------------------------- figure 5
class OracleSection(_Strict):
    """The oracle MILP's options."""

    step_s: PosFloat | None = None
    slots_per_duration: PosInt | None = None
    time_limit_s: PosFloat | None = None
    work_limit: PosFloat | None = None
    solver: str | None = None
    threads: PosInt | None = None
    beta: NonNegFloat | None = None
    warm_start: bool | str | None = None


class Figure5Grid(_Strict):
    """What `sia figure5` sweeps: synthetic workload variants x seeds."""

    workloads: list[str] | None = Field(default=None, min_length=1)
    seeds: list[Seed] | None = Field(default=None, min_length=1)


class Figure5Study(Figure5Grid):
    """`sia figure5`: FCFS, SSF, gSSF, MaxMin, SIA_VC and the oracle on synthetic workloads."""

    study: Literal["figure5"] | None = None
    description: Text | None = None
    policies: list[str] | None = Field(default=None, min_length=1)
    days: Days | None = None
    warmup_s: NonNegFloat | None = None
    tick_s: Tick | None = None
    oracle: OracleSection | None = None
    grid: Figure5Grid | None = None


# ----------------------------------------------------------------------------- figure 16
class Figure16Grid(_Strict):
    """What `sia figure16` sweeps: variants x seeds, allocator settings, chains and their variants."""

    variants: list[str] | None = None
    seeds: list[Seed] | None = None
    chain_variants: list[str] | None = None
    chains: list[str] | None = None
    allocators: dict[str, Options | None] | None = None


class Figure16Study(Figure16Grid):
    """`sia figure16`: SIA and HiveD* on buddy cells, allocators, placement chains."""

    study: Literal["figure16"] | None = None
    description: Text | None = None
    policies: list[str] | None = None
    no_locality_policies: list[str] | None = None
    days: Days | None = None
    warmup_s: NonNegFloat | None = None
    tick_s: Tick | None = None
    chain_policy: str | None = None
    budget_s: PosFloat | None = None
    locality: Options | None = None
    chain_locality: Options | None = None
    preemption: Options | None = None
    migration: bool | None = None
    learned_train_days: Days | None = None
    learned_seed_offset: Seed | None = None
    learned_options: Options | None = None
    pool_gpus: PosInt | None = None
    grid: Figure16Grid | None = None


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
