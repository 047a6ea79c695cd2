"""Regions, pools' home regions and data, and the replicas of each pool's data.

A :class:`RegionLayout` is the static part: each region's GPUs and optional
storage limit, each pool's home region and data size, and the transfer rate
(data size units per second) at which a new replica is copied. A
:class:`Replicas` is the changing part: for every (pool, region) the time in
seconds at which the region's copy of the pool's data becomes usable
(``inf``: the region holds no copy). A job may only run in a region whose
copy of its pool's data is usable. Copying a pool's data to a new region
takes ``size / transfer_rate`` seconds from the moment the plan is applied.

Everything is validated at construction with one-line errors naming the
region, pool and field at fault.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import numpy as np


class RegionsError(ValueError):
    """Invalid region layout, replica set or plan (the message names what and where)."""


@dataclass(frozen=True)
class Region:
    """A region (cluster) with ``gpus`` GPUs and an optional ``storage`` limit (data size units)."""

    name: str
    gpus: int
    storage: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise RegionsError(f"region name must be a non-empty string, got {self.name!r}")
        if isinstance(self.gpus, bool) or not isinstance(self.gpus, (int, np.integer)) or self.gpus < 1:
            raise RegionsError(f"region {self.name!r}: gpus must be an integer >= 1, got {self.gpus!r}")
        if self.storage is not None and not (_is_number(self.storage) and self.storage >= 0):
            raise RegionsError(f"region {self.name!r}: storage must be a finite number >= 0 or None, "
                               f"got {self.storage!r}")


@dataclass(frozen=True)
class PoolData:
    """A pool's data: its ``home`` region, its ``size`` (data size units) and current ``replicas``.

    ``replicas`` names the regions holding a usable copy now; empty means the
    home region only.
    """

    name: str
    home: str
    size: float
    replicas: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise RegionsError(f"pool name must be a non-empty string, got {self.name!r}")
        if not (_is_number(self.size) and self.size >= 0):
            raise RegionsError(f"pool {self.name!r}: size must be a finite number >= 0, got {self.size!r}")
        object.__setattr__(self, "replicas", tuple(self.replicas))

    @property
    def holders(self) -> tuple[str, ...]:
        """The regions holding the pool's data now (its home when no replicas are given)."""
        return self.replicas or (self.home,)


def _is_number(x: object) -> bool:
    return isinstance(x, (int, float, np.integer, np.floating)) and not isinstance(x, bool) \
        and math.isfinite(float(x))


class RegionLayout:
    """Regions, pools and the transfer rate, cross-checked; arrays indexed [pool, region]."""

    def __init__(self, regions: Sequence[Region], pools: Sequence[PoolData], transfer_rate: float) -> None:
        self.regions = tuple(regions)
        self.pools = tuple(pools)
        if not self.regions:
            raise RegionsError("regions: at least one region is needed")
        if not (_is_number(transfer_rate) and transfer_rate > 0):
            raise RegionsError(f"transfer_rate must be a finite number > 0 (size units per second), "
                               f"got {transfer_rate!r}")
        self.transfer_rate = float(transfer_rate)
        self.region_index = _index(r.name for r in self.regions)
        self.pool_index = _index((p.name for p in self.pools), kind="pool")
        known = ", ".join(self.region_index)
        for p in self.pools:
            if p.home not in self.region_index:
                raise RegionsError(f"pool {p.name!r}: home region {p.home!r} is not a region (known: {known})")
            for r in p.replicas:
                if r not in self.region_index:
                    raise RegionsError(f"pool {p.name!r}: replica region {r!r} is not a region (known: {known})")
        self.gpus = np.array([r.gpus for r in self.regions], dtype=np.int64)
        self.storage = np.array([np.inf if r.storage is None else float(r.storage) for r in self.regions])
        self.sizes = np.array([float(p.size) for p in self.pools])
        self.home = np.array([self.region_index[p.home] for p in self.pools], dtype=np.int64)

    @property
    def n_regions(self) -> int:
        return len(self.regions)

    @property
    def n_pools(self) -> int:
        return len(self.pools)

    def transfer_s(self) -> np.ndarray:
        """Seconds to copy each pool's data to a new region (size / transfer_rate), per pool."""
        return self.sizes / self.transfer_rate

    def initial_replicas(self) -> Replicas:
        """Every pool's current holders usable from time -inf (data already there)."""
        at = np.full((self.n_pools, self.n_regions), np.inf)
        for i, p in enumerate(self.pools):
            for r in p.holders:
                at[i, self.region_index[r]] = -np.inf
        return Replicas(at)

    def check_plan(self, held: np.ndarray, what: str = "plan") -> np.ndarray:
        """``held`` as a bool [pool, region] array, or a one-line error on a wrong shape or empty row."""
        held = np.asarray(held, dtype=bool)
        if held.shape != (self.n_pools, self.n_regions):
            raise RegionsError(f"{what}: shape {held.shape} is not (pools, regions) = "
                               f"({self.n_pools}, {self.n_regions})")
        empty = np.flatnonzero(~held.any(axis=1))
        if empty.size:
            raise RegionsError(f"{what}: pool {self.pools[empty[0]].name!r} holds no replica")
        return held


def _index(names: Iterable[str], kind: str = "region") -> dict[str, int]:
    out: dict[str, int] = {}
    for k, name in enumerate(names):
        if name in out:
            raise RegionsError(f"{kind} {name!r} is given twice (positions {out[name]} and {k})")
        out[name] = k
    return out


@dataclass(frozen=True)
class Replicas:
    """``usable_at[pool, region]``: seconds at which that copy is usable (``inf``: no copy)."""

    usable_at: np.ndarray

    def held(self) -> np.ndarray:
        """Bool [pool, region]: the region holds (or is receiving) a copy."""
        return self.usable_at < np.inf

    def usable(self, now: float) -> np.ndarray:
        """Bool [pool, region]: the copy exists and its transfer has finished by ``now`` (seconds)."""
        return self.usable_at <= now

    def apply(self, layout: RegionLayout, held: np.ndarray, now: float) -> tuple[Replicas, float]:
        """Adopt the plan ``held`` at time ``now``: returns the new replicas and the data moved.

        Kept copies keep their usable time (a transfer under way goes on), new
        ones become usable at ``now + size / transfer_rate``, dropped ones go.
        A plan that drops every usable copy of a pool while one exists is an
        error (the pool's data would be unreadable during the transfer).
        """
        held = layout.check_plan(held)
        had = self.held()
        usable = self.usable(now)
        lost = np.flatnonzero(usable.any(axis=1) & ~(usable & held).any(axis=1))
        if lost.size:
            raise RegionsError(f"plan drops every usable copy of pool {layout.pools[lost[0]].name!r}")
        new = held & ~had
        at = np.where(held, self.usable_at, np.inf)
        at = np.where(new, now + layout.transfer_s()[:, None], at)
        moved = float((layout.sizes[:, None] * new).sum())
        return Replicas(at), moved


def layout_from_mapping(config: Mapping[str, Any], source: str = "regions config") -> RegionLayout:
    """A :class:`RegionLayout` from a plain mapping (e.g. parsed YAML), errors naming the key.

    Shape: ``{"transfer_rate": float, "regions": {name: {"gpus": int, "storage":
    float?}}, "pools": {name: {"home": region, "size": float, "replicas":
    [region, ...]?}}}``. A wrong or unknown key is a one-line error such as
    ``site.yaml: regions.B: gpus must be an integer >= 1, got 0`` (``source`` names the file).
    """
    def fail(key: str, why: str) -> NoReturn:
        raise RegionsError(f"{source}: {key}: {why}")

    def section(key: str, value: object) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            fail(key or "(top level)", f"must be a mapping, got {type(value).__name__}")
        return value

    def fields(key: str, value: object, allowed: set[str], required: set[str]) -> Mapping[str, Any]:
        value = section(key, value)
        prefix = f"{key}." if key else ""
        extra = sorted(set(value) - allowed)
        if extra:
            fail(f"{prefix}{extra[0]}", f"unknown key (known: {', '.join(sorted(allowed))})")
        missing = sorted(required - set(value))
        if missing:
            fail(f"{prefix}{missing[0]}", "is required")
        return value

    top = fields("", config, {"transfer_rate", "regions", "pools"}, {"transfer_rate", "regions", "pools"})
    regions, pools = [], []
    for name, spec in section("regions", top["regions"]).items():
        spec = fields(f"regions.{name}", spec, {"gpus", "storage"}, {"gpus"})
        try:
            regions.append(Region(str(name), spec["gpus"], spec.get("storage")))
        except RegionsError as err:
            fail(f"regions.{name}", str(err).split(": ", 1)[-1])
    if not regions:
        fail("regions", "at least one region is needed")
    for name, spec in section("pools", top["pools"]).items():
        spec = fields(f"pools.{name}", spec, {"home", "size", "replicas"}, {"home", "size"})
        replicas = spec.get("replicas", ())
        if isinstance(replicas, str) or not isinstance(replicas, Sequence):
            fail(f"pools.{name}.replicas", f"must be a list of region names, got {replicas!r}")
        known = [r.name for r in regions]
        for key, region in [("home", spec["home"])] + [(f"replicas[{k}]", r) for k, r in enumerate(replicas)]:
            if region not in known:
                fail(f"pools.{name}.{key}", f"{region!r} is not a region (known: {', '.join(known)})")
        try:
            pools.append(PoolData(str(name), str(spec["home"]), spec["size"], tuple(replicas)))
        except RegionsError as err:
            fail(f"pools.{name}", str(err).split(": ", 1)[-1])
    try:
        return RegionLayout(regions, pools, top["transfer_rate"])
    except RegionsError as err:
        fail("transfer_rate", str(err).removeprefix("transfer_rate "))
