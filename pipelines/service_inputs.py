"""What `sia serve` starts from, built exactly as `sia replay` builds it (the pipelines give
it to the service, :mod:`sia.service`, which imports only the scheduler and the data layer).

The pools (a pool file, or a trace's pools with their quotas as `sia replay` derives them,
cut to the replay window's pools), the history the learned forecaster is primed with (the
trace before ``--replay-start-day``), the predictors (the registry alias, resolved to exact
versions) and the policy (the replay engine's own :func:`~sia.pipelines.engine.run.build_policy`
on a spec with the same options), so the service's policy object is built by the same code
as the replay's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import polars as pl
from sia.data.errors import ConfigError
from sia.data.schema import POOL_SCHEMA


@dataclass
class ServeInputs:
    """The pools, the jobs of the window (None for a pool file), the prior history."""

    pools: pl.DataFrame
    jobs: pl.DataFrame | None
    prior: pl.DataFrame | None
    source: str


def read_pool_file(path: Path) -> pl.DataFrame | None:
    """The pools table of a pool file (CSV or Parquet with pool, quota_gpus and no job
    columns); None when ``path`` is not one (a trace)."""
    p = Path(path)
    if not p.is_file() or p.suffix.lower() not in (".csv", ".parquet"):
        return None
    try:
        head = (pl.read_parquet(p) if p.suffix.lower() == ".parquet"
                else pl.read_csv(p, infer_schema_length=1000))
    except Exception as exc:
        raise ConfigError(f"{p}: cannot be read ({type(exc).__name__}: {exc})") from None
    if "submit_time" in head.columns or not {"pool", "quota_gpus"} <= set(head.columns):
        return None
    for i, (pool, q) in enumerate(zip(head["pool"], head["quota_gpus"], strict=True), start=1):
        if pool is None or str(pool) == "":
            raise ConfigError(f"{p}: row {i}, column pool: empty pool name")
        if q is None or not float(q).is_integer() or int(q) < 1:
            raise ConfigError(f"{p}: row {i}, column quota_gpus: {q!r} is not a whole number "
                              ">= 1 of GPUs")
    if head["pool"].cast(pl.String).is_duplicated().any():
        raise ConfigError(f"{p}: column pool has duplicates")
    return pl.DataFrame({"pool": head["pool"].cast(pl.String),
                         "quota_gpus": head["quota_gpus"].cast(pl.Int32)}, schema=POOL_SCHEMA)


def serve_inputs(trace: Path | None, *, synthetic: str | None = None, fmt: str = "auto",
                 map_: list[str] | None = None, pool_from: str | None = None,
                 time_unit: str = "s", clean: bool = False, quotas: Path | None = None,
                 load_range: str = "0.6,1.1", seed: int = 0, days: float | None = None,
                 replay_start_day: float | None = None,
                 replay_end_day: float | None = None,
                 arrival: str | None = None) -> ServeInputs:
    """Return the service's inputs, as `sia replay` cuts them from the same options
    (``arrival``: when a Slurm export's jobs arrive, as ``--arrival``)."""
    from sia.pipelines import inputs

    if trace is not None and synthetic is None:
        pools = read_pool_file(trace)
        if pools is not None:
            if replay_start_day is not None or replay_end_day is not None:
                raise ConfigError("--replay-start-day / --replay-end-day need a trace, not a "
                                  "pool file")
            return ServeInputs(pools, None, None, str(trace))
    wl = inputs.workload_from_options(trace, synthetic, fmt, map_, pool_from, time_unit, clean,
                                      quotas, load_range, seed, days, arrival=arrival)
    jobs, pools = wl.jobs, wl.pools
    prior = inputs.jobs_before(jobs, replay_start_day)
    if replay_start_day is not None or replay_end_day is not None:
        jobs, _ = inputs.replay_window(jobs, replay_start_day, replay_end_day)
        pools = pools.filter(pl.col("pool").is_in(jobs["pool"].unique().implode()))
    return ServeInputs(pools.select("pool", "quota_gpus"), jobs, prior, str(wl.source))


def resolve_predictors(policy: str, alias: str | None, windows: str,
                       load_method: str = "sliding_max") -> tuple[Any, dict[str, Any]]:
    """The registry predictors of a policy that takes a forecaster (None for one that does
    not), and the options `sia replay` gives it; ConfigError for an alias given to a policy
    without a forecaster."""
    from sia.pipelines import inputs
    from sia.pipelines.engine.predictors import resolve_registry
    from sia.pipelines.engine.sched import policies_with, policy_needs

    needs = policy_needs(policy)
    if needs.forecaster is None:
        if alias:
            raise ConfigError(f"--alias applies to the policies that use the learned predictors "
                              f"({', '.join(policies_with(forecaster=True))}), not {policy!r}")
        return None, {}
    ks = inputs.parse_windows(windows)
    name = alias or "champion"
    ref = resolve_registry(name, ks, load_method=load_method, where="--alias",
                           hint=f"; run `sia train TRACE --alias {name}` first")
    return ref, {"windows_s": tuple(60.0 * k for k in ks)}


def policy_factory(policy: str, pools: pl.DataFrame, prior: pl.DataFrame | None, *,
                   predictors: Any, options: dict[str, Any], seed: int = 0,
                   tick_s: float = 300.0) -> Callable[[], Any]:
    """Return ``make_policy()``: a fresh policy built by the replay engine
    (:func:`~sia.pipelines.engine.run.build_policy`) exactly as a replay of the same policy,
    options, seed and predictors builds it, its forecaster primed with ``prior``."""
    from sia.pipelines.engine import FrameWorkload, ReplaySpec
    from sia.pipelines.engine.run import build_policy
    from sia.pipelines.engine.sched import check_policy

    name = policy.strip().lower()
    check_policy(name)
    empty = pl.DataFrame(schema={"job_id": pl.String})
    spec = ReplaySpec(FrameWorkload(empty, pools, ("serve", name), prior), name, dict(options),
                      predictors=predictors, seed=seed, tick_s=tick_s, title=name)
    return lambda: build_policy(spec)


def setup_record(policy: str, pools: pl.DataFrame, predictors: Any, options: dict[str, Any],
                 *, seed: int, tick_s: float, mode: str, prior: pl.DataFrame | None,
                 source: str) -> dict[str, Any]:
    """What decides the service's decisions, JSON-ready: a log is only replayed under the
    same record (``EventLog.check_setup`` in ``sia.service.store``)."""
    return {
        "policy": policy, "mode": mode, "seed": seed, "tick_s": tick_s,
        "pools": {str(p): int(q) for p, q in zip(pools["pool"], pools["quota_gpus"],
                                                  strict=True)},
        "predictors": None if predictors is None else
        {"alias": predictors.alias, "versions": [list(v) for v in predictors.versions]},
        "options": {k: list(v) if isinstance(v, tuple) else v for k, v in options.items()},
        "prior": None if prior is None else [prior.height,
                                             float(prior["submit_time"].max() or 0.0)],
        "source": source,
    }
