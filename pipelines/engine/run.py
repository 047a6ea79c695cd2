"""Run one :class:`~sia.pipelines.engine.spec.ReplaySpec` and score outcomes against a baseline.

:func:`run_replay` is the only place the pipelines build a policy and call
the simulator; :func:`score` the only place they compare a replay with its
baseline (:func:`sia.scheduler.core.metrics.compare`, DESIGN.md 6.5).
"""

from __future__ import annotations

import time
from typing import Any

import polars as pl
from sia.data.errors import ConfigError
from sia.pipelines.engine.predictors import load_forecaster
from sia.pipelines.engine.sched import (
    RESULT_COLUMNS,
    GlobalRegionPolicy,
    ReservationRegionPolicy,
    compare,
    config_for_policy,
    make_policy,
    policy_options,
    replay_maybe_cells,
    simulate,
)
from sia.pipelines.engine.spec import ReplayOutcome, ReplaySpec


def build_policy(spec: ReplaySpec) -> Any:
    """Return the spec's policy: its options, its seed if it takes one, and its forecaster
    (the spec's predictors, loaded or trained now, primed with the workload's prior jobs)
    under the option it declares. On regions: the global policy over one such policy per
    region (:func:`regional_policy`)."""
    if spec.regions is not None:
        return regional_policy(spec)
    return _single_policy(spec)


def regional_policy(spec: ReplaySpec) -> Any:
    """Return the spec's policy on regions: one inner policy per region (each with its own
    forecaster), home-region only or routed, with the spec's data placement mode; with the
    spec's locality every region on its own buddy cells (the config the inner policy replays
    with, as on one cluster)."""
    reg = spec.regions
    cells = None if spec.locality is None else config_for_policy(spec.locality, spec.policy)
    _, pools = spec.workload.frames()
    layout = reg.regions.layout(dict(zip(pools["pool"], pools["quota_gpus"], strict=True)))
    if reg.mode.startswith("reservations-"):
        if cells is not None:
            raise ConfigError(f"replay {spec.name}: global reservations ({reg.mode}) run on "
                              "fungible GPUs only; drop the locality options")
        return ReservationRegionPolicy(layout, lambda: _single_policy(spec),
                                       inner_name=spec.policy,
                                       placement=reg.mode.removeprefix("reservations-"),
                                       period_s=reg.regions.reservations_period_s,
                                       plan_time_s=reg.plan_time_s, neg_cache=reg.neg_cache)
    mode, _, guests = reg.mode.partition("+")
    routed = mode != "home"
    return GlobalRegionPolicy(layout, lambda: _single_policy(spec), inner_name=spec.policy,
                              route=routed, placement=mode if routed else "static",
                              guests=guests or "sia",
                              period_s=reg.regions.period_s, plan_time_s=reg.plan_time_s,
                              neg_cache=reg.neg_cache, locality=cells)


def _single_policy(spec: ReplaySpec) -> Any:
    fc = None if spec.predictors is None else load_forecaster(spec.predictors)
    prior = getattr(spec.workload, "prior", None)
    if prior is not None and callable(getattr(fc, "prime", None)):
        fc.prime(prior)
    options = policy_options(spec.policy, spec.options, seed=spec.seed, forecaster=fc)
    return make_policy(spec.policy, locality=spec.locality, **options)


def run_replay(spec: ReplaySpec, *, record_placements: bool = False) -> ReplayOutcome:
    """Replay ``spec``; return its :class:`ReplayOutcome` (result in ``RESULT_COLUMNS``).

    ``record_placements`` (on cells): the placement counters also say where each job ran
    (``placements``, ``gpus_per_server``, ``pad_gpus``, see
    :func:`~sia.scheduler.locality.replay.simulate_cells`); a report, not part of the key.
    """
    jobs, pools = spec.workload.frames()
    clock = time.perf_counter()
    policy = build_policy(spec)
    if spec.preemption is not None and spec.locality is not None:
        raise ConfigError(f"replay {spec.name}: preemption settings are for fungible GPUs; on "
                          "cells use the locality options preempt, preemptible_fraction, "
                          "lost_work_s and restart_delay_s")
    if spec.regions is not None:  # on cells, each region's own cell cluster places its starts
        result = simulate(jobs, pools, policy, tick_s=spec.tick_s, speedup=spec.speedup,
                          progress=spec.progress, preemption=spec.preemption)
        placement = policy.placement_summary(record_placements)
    elif spec.locality is None:
        result = simulate(jobs, pools, policy, tick_s=spec.tick_s, speedup=spec.speedup,
                          progress=spec.progress, preemption=spec.preemption)
        placement = None
    else:
        result, placement = replay_maybe_cells(jobs, pools, policy, spec.locality,
                                               tick_s=spec.tick_s, speedup=spec.speedup,
                                               progress=spec.progress,
                                               record_placements=record_placements)
    wall = time.perf_counter() - clock
    columns = list(RESULT_COLUMNS)
    if spec.regions is not None:  # where each job ran
        ran = pl.DataFrame(policy.job_regions(), schema={"job_id": pl.String, "region": pl.String})
        result = result.join(ran, on="job_id", how="left", maintain_order="left")
        columns.append("region")
    return ReplayOutcome(result.select(columns), placement, policy_facts(policy), wall)


def policy_facts(policy: Any) -> dict[str, Any]:
    """Return what a finished policy reports about its replay through its optional
    ``facts()`` method (JSON-ready, e.g. the oracle's solver status), or {} without one; for
    a policy that records its predictions as served (SIA), also ``loans``: each loan with
    the forecast it was lent against (:meth:`~sia.scheduler.core.served.ServedPredictions.loans`,
    for :mod:`sia.pipelines.studies.slowdown_report`)."""
    facts = getattr(policy, "facts", None)
    out = dict(facts()) if callable(facts) else {}
    loans = getattr(getattr(policy, "served", None), "loans", None)
    if callable(loans) and "served" in out:
        out["loans"] = loans()
    return out


def require_scored(n_jobs: int | None, where: str, warmup: str) -> None:
    """Raise ConfigError when a study scored no job at all (``where``: the config; ``warmup``:
    the warm-up setting to name), so a sweep of empty tables never exits as a success."""
    if not n_jobs:
        raise ConfigError(f"{where}: no job was scored: every replayed job was submitted during "
                          f"the warm-up ({warmup}) or the replay holds no job; shorten the "
                          "warm-up or replay more days (the tables written say '-')")


def score(outcome: ReplayOutcome | pl.DataFrame, baseline: ReplayOutcome | pl.DataFrame,
          warmup_s: float, pools: pl.DataFrame | None = None) -> tuple[pl.DataFrame, dict]:
    """Return (per-job metrics, summary) of ``outcome`` against ``baseline`` (both replays of
    the same jobs), counting jobs submitted ``warmup_s`` seconds after the first submission.

    ``pools`` (pool, quota_gpus) adds per-pool demand-to-supply ratios.
    """
    res = outcome.result if isinstance(outcome, ReplayOutcome) else outcome
    base = baseline.result if isinstance(baseline, ReplayOutcome) else baseline
    return compare(res, base, warmup_s=warmup_s, pools=pools)
