"""Locality options from the command line and YAML configs: ``--topology``, ``--placement``, ``--cells-option``."""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import fields, replace
from typing import Any, get_origin, get_type_hints

from sia.data.errors import ConfigError
from sia.scheduler.locality.config import SOLVERS, LocalityConfig
from sia.scheduler.locality.topology import Topology


def parse_placement(spec: str, *, option: str = "--placement") -> tuple[tuple[str, ...], float | None]:
    """Parse ``buddy``, ``buddy,mcf`` or ``buddy,hungarian,budget=0.2`` into (chain, budget_s or None)."""
    chain: list[str] = []
    budget = None
    for part in (spec or "").split(","):
        part = part.strip().lower()
        if not part:
            continue
        if part.startswith("budget="):
            try:
                budget = float(part.split("=", 1)[1])
            except ValueError:
                raise ConfigError(f"{option}: {part!r} is not budget=<seconds>") from None
            continue
        if part not in SOLVERS:
            raise ConfigError(f"{option}: unknown stage {part!r}; known: {', '.join(SOLVERS)}")
        chain.append(part)
    if not chain:
        raise ConfigError(f"{option}: empty; expected e.g. buddy or buddy,mcf")
    if chain[0] != "buddy":
        chain.insert(0, "buddy")
    return tuple(chain), budget


#: LocalityConfig fields set by ``--topology`` / ``--placement`` (not by cells options)
SHAPE_FIELDS = ("gpus_per_server", "servers_per_rack", "chain", "budget_s")


_TRUE = ("true", "1", "yes")


_FALSE = ("false", "0", "no")


def cells_option_types() -> dict[str, type]:
    """Return {LocalityConfig field: bool, int, float or tuple} for the fields cells options may set."""
    hints = get_type_hints(LocalityConfig)
    out = {}
    for f in fields(LocalityConfig):
        if f.name not in SHAPE_FIELDS:
            t = hints[f.name]
            out[f.name] = tuple if get_origin(t) is tuple else t
    return out


def _cells_value(kind: type, value: Any) -> Any:
    """Return ``value`` (text from the CLI or a YAML value) as ``kind``; ValueError says what was expected."""
    text = value.strip() if isinstance(value, str) else None
    if kind is bool:
        if isinstance(value, bool):
            return value
        if text is not None and text.lower() in _TRUE + _FALSE:
            return text.lower() in _TRUE
        raise ValueError("expected true/false/1/0/yes/no")
    if kind is int:
        if isinstance(value, int) and not isinstance(value, bool):
            out = value
        elif text is not None and re.fullmatch(r"[+-]?\d+", text):
            out = int(text)
        else:
            raise ValueError("expected an integer")
        if out < 0:
            raise ValueError("expected an integer >= 0")
        return out
    if kind is float:
        if isinstance(value, int | float) and not isinstance(value, bool):
            out = float(value)
        else:
            try:
                out = float(text) if text is not None else math.nan
            except ValueError:
                out = math.nan
        if not math.isfinite(out):
            raise ValueError("expected a finite number")
        return out
    if kind is tuple:
        if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
            return tuple(v.strip() for v in value)
        if text is not None:
            return tuple(p.strip() for p in text.split(",") if p.strip())
        raise ValueError("expected comma-separated names or a list of names")
    raise ValueError(f"unsupported option type {kind!r}")  # a new LocalityConfig field type


def parse_cells_options(options: Mapping[str, Any] | Sequence[str] | None, *,
                        option: str = "--cells-option") -> dict[str, Any]:
    """Return {LocalityConfig field: typed value} from ``KEY=VALUE`` texts or a mapping.

    The one parser of cells options: ``sia replay --cells-option KEY=VALUE``
    (repeatable: a sequence of texts) and evaluation configs'
    ``locality: {options: {...}}`` (a mapping of YAML values). Any field
    except :data:`SHAPE_FIELDS`; values by the field's type (bool:
    true/false/1/0/yes/no; int; float; tuple of names: comma-separated or a
    list). A mistake is a ConfigError naming ``option`` and the bad key or
    value (``--cells-option 'preempt=maybe': ...``, ``locality.options.seed: ...``).
    """
    if not options:
        return {}
    types = cells_option_types()
    if isinstance(options, Mapping):
        items = [(str(k), v, f"{option}.{k}") for k, v in options.items()]
    elif isinstance(options, str):
        raise ConfigError(f"{option}: expected a list of KEY=VALUE, got the text {options!r}")
    else:
        items = []
        for text in options:
            key, eq, value = str(text).partition("=")
            if not eq or not key.strip():
                raise ConfigError(f"{option} {text!r}: expected KEY=VALUE, e.g. preempt=true")
            items.append((key.strip().lower(), value, f"{option} {text!r}"))
    out: dict[str, Any] = {}
    for key, value, where in items:
        if key in SHAPE_FIELDS:
            raise ConfigError(f"{where}: {key} is set by the topology / placement "
                              "(--topology gpus=8,rack=4, --placement buddy,mcf,budget=0.5)")
        if key not in types:
            raise ConfigError(f"{where}: unknown key {key!r}; valid keys: {', '.join(sorted(types))}")
        if key in out:
            raise ConfigError(f"{where}: {key} is given twice")
        try:
            out[key] = _cells_value(types[key], value)
        except ValueError as exc:
            raise ConfigError(f"{where}: {exc}, got {value!r}") from None
        try:  # LocalityConfig's own checks (ranges, names), one key at a time to name it
            replace(LocalityConfig(), **{key: out[key]})
        except ConfigError as exc:
            raise ConfigError(f"{where}: {exc}") from None
    return out


def options_from_cli(topology: str | None, placement: str | None,
                     options: Mapping[str, Any] | Sequence[str] | None = None,
                     *, option: str = "--cells-option") -> LocalityConfig | None:
    """Return the LocalityConfig for ``sia replay --topology ... --placement ... --cells-option ...`` (None: no locality).

    ``topology`` is ``gpus=8,rack=4`` (server and rack shape; ``servers=`` /
    ``racks=`` are accepted and checked but the cluster size follows the
    quotas); ``placement`` a chain such as ``buddy,mcf,budget=0.5``;
    ``options`` the other LocalityConfig fields as ``KEY=VALUE`` texts or a
    mapping (see :func:`parse_cells_options`, whose errors name ``option``).
    Any of the three turns cells on; what is not given keeps its default.
    """
    extra = parse_cells_options(options, option=option)
    if topology is None and placement is None and not extra:
        return None
    kw: dict = {}
    if topology is not None:
        spec = topology if ("servers=" in topology or "racks=" in topology) else topology + ",racks=1"
        topo = parse_topology(spec, option="--topology")
        kw.update(gpus_per_server=topo.gpus_per_server, servers_per_rack=topo.servers_per_rack)
    if placement is not None:
        chain, budget = parse_placement(placement)
        kw["chain"] = chain
        if budget is not None:
            kw["budget_s"] = budget
    return LocalityConfig(**kw, **extra)


def parse_topology(spec: str, *, option: str = "--topology") -> Topology:
    """Parse ``servers=16,gpus=8,rack=4`` (or ``racks=4,...``) into a :class:`Topology`.

    Keys: ``servers`` (total servers) or ``racks``; ``gpus`` (GPUs per server,
    default 8); ``rack`` (servers per rack, default 4). Bad input raises
    ConfigError naming the option and the offending part.
    """
    values: dict[str, int] = {}
    if not spec or not spec.strip():
        raise ConfigError(f"{option}: empty topology; expected e.g. servers=16,gpus=8,rack=4")
    for part in spec.split(","):
        part = part.strip()
        if not part:
            continue
        key, sep, raw = part.partition("=")
        key = key.strip().lower()
        if not sep or key not in _TOPOLOGY_KEYS:
            raise ConfigError(
                f"{option}: cannot read {part!r}; expected key=value with keys "
                "servers, racks, gpus, rack (e.g. servers=16,gpus=8,rack=4)"
            )
        canonical = _TOPOLOGY_KEYS[key]
        if canonical in values:
            raise ConfigError(f"{option}: {key!r} given twice")
        try:
            number = int(raw.strip())
        except ValueError:
            raise ConfigError(f"{option}: {key}={raw.strip()!r} is not an integer") from None
        if number < 1:
            raise ConfigError(f"{option}: {key} must be >= 1, got {number}")
        values[canonical] = number
    gpus = values.get("gpus_per_server", 8)
    per_rack = values.get("servers_per_rack", 4)
    if "servers" in values and "racks" in values:
        if values["servers"] != values["racks"] * per_rack:
            raise ConfigError(
                f"{option}: servers={values['servers']} disagrees with racks={values['racks']} "
                f"x rack={per_rack}"
            )
    if "racks" in values:
        racks = values["racks"]
    elif "servers" in values:
        servers = values["servers"]
        if servers % per_rack:
            raise ConfigError(
                f"{option}: servers={servers} is not a whole number of racks of {per_rack}; "
                "change servers or rack"
            )
        racks = servers // per_rack
    else:
        raise ConfigError(f"{option}: give servers=N or racks=N (e.g. servers=16,gpus=8,rack=4)")
    try:
        return Topology(racks=racks, servers_per_rack=per_rack, gpus_per_server=gpus)
    except ConfigError as err:
        raise ConfigError(f"{option}: {err}") from None


_TOPOLOGY_KEYS = {
    "servers": "servers",
    "gpus": "gpus_per_server",
    "gpus_per_server": "gpus_per_server",
    "rack": "servers_per_rack",
    "servers_per_rack": "servers_per_rack",
    "racks": "racks",
}
