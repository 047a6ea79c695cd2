"""A workload's regions from a file: each pool's home region, its data and the transfer rate.

The file (YAML) maps pools to regions; a region's GPUs are the quotas of the
pools homed there, so the file never repeats them::

    transfer_rate: 0.001      # data size units per second (default 1)
    period_h: 24              # hours between data-placement plans (default 24)
    reservations_period_h: 6  # hours between global-reservation plans (default 6)
    regions:                  # optional: storage limits (data size units)
      east: {storage: 40}
    pools:
      vc1: east               # home region only (data size 1)
      vc2: {home: west, size: 5.0, replicas: [east]}

Errors are one line naming the file and the key, e.g.
``split.yaml: pools.vc2.size: must be a number >= 0, got 'big'``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NoReturn

import yaml
from sia.scheduler.regions.global_policy import layout_for_pools
from sia.scheduler.regions.model import RegionLayout, RegionsError

_TOP = {"transfer_rate", "period_h", "reservations_period_h", "regions", "pools"}
#: Hours between global-reservation plans when the file does not say: chosen on Philly's
#: training days 35-56 (perfect plans: hourly worst/balanced 1.216 daily, 1.153 every 6 h;
#: docs/results/regions.md), never on the replay's.
RESERVATIONS_PERIOD_H = 6.0


@dataclass(frozen=True)
class RegionsFile:
    """What a regions file says: ``homes`` (pool, region), ``sizes`` (pool, size), ``replicas``
    (pool, regions), ``storage`` (region, limit), ``transfer_rate``, ``period_s`` (seconds
    between data-placement plans), ``reservations_period_s`` (seconds between
    global-reservation plans) and ``source`` (the file, for errors). Plain tuples: hashable,
    picklable."""

    homes: tuple[tuple[str, str], ...]
    sizes: tuple[tuple[str, float], ...] = ()
    replicas: tuple[tuple[str, tuple[str, ...]], ...] = ()
    storage: tuple[tuple[str, float], ...] = ()
    transfer_rate: float = 1.0
    period_s: float = 86400.0
    source: str = "regions"
    reservations_period_s: float = 3600.0 * RESERVATIONS_PERIOD_H

    @property
    def key(self) -> tuple:
        """What a replay's result depends on (not where the file was)."""
        return (self.homes, self.sizes, self.replicas, self.storage, self.transfer_rate,
                self.period_s, self.reservations_period_s)

    def layout(self, quotas: Mapping[str, int]) -> RegionLayout:
        """The layout for the workload's pools (``quotas``: pool -> GPUs): pools of the file
        that the workload does not have are left out; a workload pool without a home is an
        error naming the file."""
        keep = set(quotas)
        homes = {p: r for p, r in self.homes if p in keep}
        return layout_for_pools(
            homes, quotas, sizes={p: s for p, s in self.sizes if p in keep},
            replicas={p: rs for p, rs in self.replicas if p in keep},
            storage=dict(self.storage), transfer_rate=self.transfer_rate, source=self.source)


def read_regions_file(path: str | Path) -> RegionsFile:
    """Read a regions file (module doc); a one-line RegionsError naming the file and key."""
    path = Path(path)
    try:
        raw = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise RegionsError(f"{path}: cannot read the regions file ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        raise RegionsError(f"{path}: not valid YAML ({str(exc).splitlines()[0]})") from None
    return regions_from_mapping(raw, str(path))


def regions_from_mapping(raw: Any, source: str) -> RegionsFile:
    """A :class:`RegionsFile` from parsed YAML (see :func:`read_regions_file`)."""
    def fail(key: str, why: str) -> NoReturn:
        raise RegionsError(f"{source}: {key}: {why}")

    def number(key: str, v: Any, low: float, strict: bool = False) -> float:
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) \
            and (v > low if strict else v >= low)
        if not ok:
            fail(key, f"must be a number {'>' if strict else '>='} {low:g}, got {v!r}")
        return float(v)

    if not isinstance(raw, Mapping):
        fail("(top level)", f"must be a mapping with keys {', '.join(sorted(_TOP))}")
    extra = sorted(set(raw) - _TOP)
    if extra:
        fail(extra[0], f"unknown key (known: {', '.join(sorted(_TOP))})")
    pools = raw.get("pools")
    if not isinstance(pools, Mapping) or not pools:
        fail("pools", "is required: a mapping of pool -> region (or {home, size, replicas})")
    rate = number("transfer_rate", raw.get("transfer_rate", 1.0), 0.0, strict=True)
    period_s = 3600.0 * number("period_h", raw.get("period_h", 24.0), 0.0, strict=True)
    resv_s = 3600.0 * number("reservations_period_h",
                             raw.get("reservations_period_h", RESERVATIONS_PERIOD_H), 0.0,
                             strict=True)
    storage = []
    regions = raw.get("regions") or {}
    if not isinstance(regions, Mapping):
        fail("regions", "must be a mapping of region -> {storage: number}")
    for name, spec in regions.items():
        if not isinstance(spec, Mapping) or set(spec) - {"storage"}:
            fail(f"regions.{name}", "must be {storage: number} (GPUs come from the pools' quotas)")
        if spec.get("storage") is not None:
            storage.append((str(name), number(f"regions.{name}.storage", spec["storage"], 0.0)))
    homes, sizes, replicas = [], [], []
    for name, spec in pools.items():
        key = f"pools.{name}"
        if isinstance(spec, str):
            spec = {"home": spec}
        if not isinstance(spec, Mapping):
            fail(key, f"must be a region name or {{home, size, replicas}}, got {spec!r}")
        bad = sorted(set(spec) - {"home", "size", "replicas"})
        if bad:
            fail(f"{key}.{bad[0]}", "unknown key (known: home, replicas, size)")
        home = spec.get("home")
        if not isinstance(home, str) or not home:
            fail(f"{key}.home", f"must be a region name, got {home!r}")
        homes.append((str(name), home))
        if "size" in spec:
            sizes.append((str(name), number(f"{key}.size", spec["size"], 0.0)))
        reps = spec.get("replicas", [])
        if isinstance(reps, str) or not isinstance(reps, Sequence) \
                or not all(isinstance(r, str) for r in reps):
            fail(f"{key}.replicas", f"must be a list of region names, got {reps!r}")
        if reps:
            replicas.append((str(name), tuple(reps)))
    known = {r for _, r in homes}
    home_of = dict(homes)
    for p, reps in replicas:
        for k, r in enumerate(reps):
            if r not in known:
                fail(f"pools.{p}.replicas[{k}]", f"{r!r} is not a region any pool is homed in "
                     f"(known: {', '.join(sorted(known))})")
    # a pool's home always holds its data
    replicas = [(p, reps if home_of[p] in reps else (home_of[p], *reps)) for p, reps in replicas]
    for r, _ in storage:
        if r not in known:
            fail(f"regions.{r}", f"no pool is homed in region {r!r}")
    return RegionsFile(tuple(homes), tuple(sizes), tuple(replicas), tuple(storage), rate,
                       period_s, source, resv_s)


def regions_from_jobs(jobs: Any, source: str, column: str = "region") -> RegionsFile:
    """A :class:`RegionsFile` from a trace's region column (``--map region=YOURS``): each
    pool's home is the one region its jobs name (data size 1, no replicas, transfer rate 1,
    daily data placement, as a file that gives only homes).

    A job without a region, or a pool whose jobs name two regions, is a one-line
    RegionsError naming ``source``, the pool and the job (by ``job_id``)."""
    import polars as pl

    if column not in jobs.columns:
        raise RegionsError(f"{source}: the trace has no {column!r} column (map one with "
                           f"--map {column}=YOUR_COLUMN, or give --regions FILE)")
    rows = jobs.select("job_id", "pool", pl.col(column).cast(pl.String).alias("_region"))
    missing = rows.filter(pl.col("_region").is_null() | (pl.col("_region").str.strip_chars() == ""))
    if missing.height:
        first = missing.row(0, named=True)
        raise RegionsError(f"{source}: column {column!r}: job {first['job_id']!r} (pool "
                           f"{first['pool']!r}) has no region ({missing.height} job(s) without)")
    per_pool = (rows.group_by("pool", maintain_order=True)
                .agg(pl.col("_region").unique(maintain_order=True)).sort("pool"))
    homes = []
    for pool, regions in per_pool.iter_rows():
        if len(regions) > 1:
            other = rows.filter((pl.col("pool") == pool) & (pl.col("_region") == regions[1]))
            raise RegionsError(
                f"{source}: column {column!r}: pool {pool!r} is in {len(regions)} regions "
                f"({', '.join(map(repr, regions[:3]))}{', ...' if len(regions) > 3 else ''}), "
                f"e.g. job {other['job_id'][0]!r} in {regions[1]!r}; a pool has one home region")
        homes.append((str(pool), str(regions[0])))
    return RegionsFile(tuple(homes), source=f"{source} (column {column!r})")
