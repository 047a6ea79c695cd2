"""Pool quotas: derived from load (SIA 6.1), read from a file, or from Helios' GPU numbers."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
from sia.data.errors import ConfigError, TraceError
from sia.data.paths import check_regular
from sia.data.schema import POOL_SCHEMA, check_pools

_MAX_QUOTA = 2**31 - 1  # quota_gpus is Int32


def trace_span_s(jobs: pl.DataFrame) -> float:
    """Return the span of a job table in seconds: last submission minus first submission.

    Falls back to (last end - first submission) when all jobs are submitted at
    the same instant, so the span is > 0 for any non-empty table.
    """
    if jobs.height == 0:
        raise TraceError("cannot derive quotas from an empty job table")
    first = float(jobs["submit_time"].min())
    span = float(jobs["submit_time"].max()) - first
    if span <= 0:
        span = float((jobs["submit_time"] + jobs["duration"]).max()) - first
    return span


def quotas_from_load(jobs: pl.DataFrame, load_range: tuple[float, float] = (0.6, 1.1),
                     seed: int = 0, span_s: float | None = None) -> pl.DataFrame:
    """Return a pools table whose quotas give each pool a drawn target load (SIA 6.1).

    One target load per pool is drawn uniformly in ``load_range`` with a
    ``numpy`` generator seeded by ``seed``, in sorted pool order (so the draw
    for a pool does not depend on the row order of the trace). The quota is
    ``max(ceil(gpu_seconds / (span_s * load)), widest job of the pool)`` where
    ``gpu_seconds`` is the pool's sum of ``duration * num_gpus``.

    ``span_s`` defaults to the trace's submission span (last submission minus
    first, over all pools: :func:`trace_span_s`). The submission span is the
    period over which load is *offered*: a load of 1 means the pool receives,
    while the trace runs, as much work per second as it has GPUs. The drain
    tail after the last submission (max(submit + duration)) is not offered
    load and would dilute it, most for traces with multi-day jobs. One span
    for all pools keeps the pools' loads comparable.

    Columns: ``pool``, ``quota_gpus`` (Int32), ``target_load`` (Float64).
    """
    lo, hi = (float(x) for x in load_range)
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo <= hi):
        raise ConfigError(f"--load-range must be two numbers 0 < low <= high, not {load_range}")
    span = trace_span_s(jobs) if span_s is None else float(span_s)
    if span <= 0:
        raise ConfigError(f"span_s must be > 0 seconds, not {span}")
    per_pool = (
        jobs.group_by("pool")
        .agg(
            (pl.col("duration") * pl.col("num_gpus")).sum().alias("gpu_seconds"),
            pl.col("num_gpus").max().alias("widest"),
        )
        .sort("pool")
    )
    loads = np.random.default_rng(seed).uniform(lo, hi, size=per_pool.height)
    # GPUs needed at the target load; a span of a few ulps overflows the division to inf
    need = [gs / (span * load) for gs, load in zip(per_pool["gpu_seconds"], loads, strict=True)]
    quotas = [max(math.ceil(x), int(w)) if x <= _MAX_QUOTA else _MAX_QUOTA + 1
              for x, w in zip(need, per_pool["widest"], strict=True)]
    too_big = [p for p, q in zip(per_pool["pool"], quotas, strict=True) if q > _MAX_QUOTA]
    if too_big:
        raise TraceError(
            f"quotas from load: pool {too_big[0]!r} would need more than {_MAX_QUOTA:,} GPUs "
            f"(trace span {span:g} s is too short for its GPU-seconds); give quotas with "
            "--quotas or use a longer trace"
        )
    return pl.DataFrame(
        {"pool": per_pool["pool"], "quota_gpus": quotas, "target_load": loads},
        schema={"pool": pl.String, "quota_gpus": pl.Int32, "target_load": pl.Float64},
    )


def _read_table(path: Path) -> pl.DataFrame:
    if not path.exists():
        raise ConfigError(f"quota file {path} does not exist")
    check_regular(path, "quota file")
    try:
        if path.suffix.lower() == ".parquet":
            return pl.read_parquet(path, glob=False)
        return pl.read_csv(path, infer_schema=False, glob=False)
    except (pl.exceptions.PolarsError, OSError) as exc:
        kind = "Parquet" if path.suffix.lower() == ".parquet" else "CSV"
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise TraceError(f"{path}: cannot read as {kind}: {first}") from exc


def read_quota_file(path: Path | str) -> pl.DataFrame:
    """Return a pools table (``pool``, ``quota_gpus``) read from a CSV or Parquet file.

    The file must have columns ``pool`` and ``quota_gpus`` (other columns are
    kept); every quota must be a whole number >= 1. Errors name the file, the
    1-based data row and the column.
    """
    path = Path(path)
    df = _read_table(path)
    for column in POOL_SCHEMA:
        if column not in df.columns:
            raise TraceError(
                f"{path}: missing column {column!r}; a quota file has columns 'pool,quota_gpus' "
                f"(found {', '.join(repr(c) for c in df.columns)})"
            )
    raw = df["quota_gpus"]
    text = raw.cast(pl.String).str.strip_chars()
    num = text.cast(pl.Float64, strict=False)
    bad = num.is_null() | ~num.is_finite() | (num != num.round(0)) | (num < 1) | (num > _MAX_QUOTA)
    bad = bad.fill_null(True)
    if bad.any():
        i = int(bad.arg_true()[0])
        raise TraceError(
            f"{path}: row {i + 1}, column 'quota_gpus': {raw[i]!r} is not a whole number of GPUs "
            f"from 1 to {_MAX_QUOTA:,}"
        )
    pools_col = df["pool"].cast(pl.String).str.strip_chars()
    missing = pools_col.is_null() | (pools_col == "")
    if missing.any():
        i = int(missing.arg_true()[0])
        raise TraceError(f"{path}: row {i + 1}, column 'pool': value is missing")
    out = df.with_columns(pools_col.alias("pool"), num.round(0).cast(pl.Int32).alias("quota_gpus"))
    out = out.select(["pool", "quota_gpus"] + [c for c in out.columns if c not in POOL_SCHEMA])
    check_pools(out, where=str(path))
    return out.sort("pool")


def read_helios_gpu_numbers(path: Path | str, how: str = "max") -> pl.DataFrame:
    """Return a pools table from Helios' ``cluster_gpu_number.csv`` (GPUs per VC per day).

    The file has a ``date`` column, one column per VC (GPUs that VC had that
    day) and a ``total`` column (ignored). A VC's quota is, with ``how="max"``
    (default), the most GPUs it had on any day: the VC's capacity, which fits
    every job it ran; ``how="last"`` takes the last day's value and
    ``how="median"`` the median over the days it had GPUs. VCs that never had
    a GPU are left out. Columns: ``pool``, ``quota_gpus``.
    """
    path = Path(path)
    if how not in ("max", "last", "median"):
        raise ConfigError(f"how must be 'max', 'last' or 'median', not {how!r}")
    df = _read_table(path)
    if "date" not in df.columns:
        raise TraceError(
            f"{path}: no 'date' column; a Helios cluster_gpu_number.csv has columns "
            f"'date,<vc>...,total'"
        )
    vcs = [c for c in df.columns if c not in ("date", "total")]
    if not vcs:
        raise TraceError(f"{path}: no VC columns besides 'date' and 'total'")
    quotas: dict[str, int] = {}
    for vc in vcs:
        text = df[vc].cast(pl.String).str.strip_chars()
        num = text.cast(pl.Float64, strict=False)
        bad = (num.is_null() & text.is_not_null() & (text != "")) | (num < 0)
        if bad.fill_null(False).any():
            i = int(bad.fill_null(False).arg_true()[0])
            raise TraceError(
                f"{path}: row {i + 1}, column {vc!r}: {df[vc][i]!r} is not a GPU count >= 0"
            )
        num = num.drop_nulls()
        if how == "max":
            value = num.max()
        elif how == "last":
            value = num[-1] if num.len() else None
        else:
            value = num.filter(num > 0).median()
        if value is not None and value >= 1:
            quotas[vc] = int(round(float(value)))
    return pl.DataFrame(
        {"pool": list(quotas), "quota_gpus": list(quotas.values())},
        schema=POOL_SCHEMA,
    ).sort("pool")
