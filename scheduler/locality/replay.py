"""Replays on the cell-aware cluster: :func:`simulate_cells`, and the one entry point for fungible or cells."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import polars as pl
from sia.scheduler.locality.cell_cluster import cell_cluster_for
from sia.scheduler.locality.config import LocalityConfig, preemptible_mask
from sia.scheduler.locality.migration import MigratingPolicy


def simulate_cells(jobs: pl.DataFrame, pools: pl.DataFrame, policy, config: LocalityConfig, *,
                   tick_s: float = 300.0, speedup: float = 1.0, check_invariants: bool = False,
                   progress: bool = False, record_placements: bool = False
                   ) -> tuple[pl.DataFrame, dict]:
    """Replay ``jobs`` under ``policy`` on a cell-aware cluster; return (result table, placement summary).

    The result table is :func:`sia.scheduler.core.simulator.simulate`'s (times in
    seconds; ``end_time`` includes preemption costs); the summary is
    :meth:`PlacementStats.summary` plus ``adoptions`` (bindings over loans),
    ``preempted_jobs`` (jobs stopped other than by a migration) and
    ``migrated_jobs`` (jobs moved at least once, with ``migrate``); with ``record_placements`` also ``placements``
    ({job_id: GPU ids of its latest start}), ``gpus_per_server`` and
    ``pad_gpus`` (GPU ids pinned by padding).
    """
    from sia.scheduler.core.simulator import build_trace, result_table, run_trace

    trace, order = build_trace(jobs, pools, speedup)
    cfg = replace(config, debug=config.debug or check_invariants)
    cluster = cell_cluster_for(trace, cfg, preemptible_mask(jobs, order, cfg))
    if cfg.migrate:
        policy = MigratingPolicy(policy)
    state = run_trace(trace, cluster, policy, tick_s=tick_s, check_invariants=check_invariants,
                      progress=progress)
    summary = cluster.stats.summary()
    summary["adoptions"] = cluster.buddy.adoptions
    moved = np.zeros(trace.n_jobs, dtype=np.int64)
    for j, k in cluster.migrated.items():
        moved[j] = k
    summary["preempted_jobs"] = int((state.n_preempted - moved > 0).sum())
    summary["migrated_jobs"] = int((moved > 0).sum())
    if record_placements:
        ids = jobs["job_id"].to_list()
        summary["placements"] = {ids[int(order[j])]: tuple(g.tolist())
                                 for j, g in cluster.last_gpus.items()}
        summary["gpus_per_server"] = cluster.topology.gpus_per_server
        summary["pad_gpus"] = np.flatnonzero(cluster.owner == -2).tolist()
    return result_table(trace, order, state, jobs, cluster.preemptible), summary


def config_for_policy(config: LocalityConfig, policy: Any) -> LocalityConfig:
    """Return the LocalityConfig ``policy`` replays with on cells: ``config`` with the settings
    its needs require (:attr:`PolicyNeeds.locality_requires
    <sia.scheduler.core.needs.PolicyNeeds>`; HiveD* lets low-priority jobs use any free cell).

    ``policy`` is a registered name or a policy (class or instance). Raises a
    one-line ConfigError naming the policy when it does not support locality.
    """
    from sia.scheduler.core.needs import needs_of
    from sia.scheduler.core.simulator import policy_name
    from sia.scheduler.registry import check_policy, locality_error

    if isinstance(policy, str):
        needs = check_policy(policy, locality=config)
    else:
        needs = needs_of(policy)
        if not needs.locality:
            raise locality_error(policy_name(policy))
    return replace(config, **needs.locality_requires) if needs.locality_requires else config


def replay_maybe_cells(jobs: pl.DataFrame, pools: pl.DataFrame, policy,
                       locality: LocalityConfig | None, *, tick_s: float = 300.0,
                       speedup: float = 1.0, progress: bool = False,
                       check_invariants: bool = False, record_placements: bool = False
                       ) -> tuple[pl.DataFrame, dict | None]:
    """Replay on fungible GPUs (``locality`` None: :func:`~sia.scheduler.core.simulator.simulate`) or
    on cells with the config the policy replays with (:func:`config_for_policy`).

    Returns (the per-job result table (times in seconds), the cell cluster's placement
    counters, or None on fungible GPUs; on cells with ``record_placements`` also where each job
    ran, as :func:`simulate_cells`). For ``sia replay``'s ``--topology`` /
    ``--placement`` / ``--cells-option`` and evaluation configs (see :func:`options_from_cli`).
    """
    from sia.scheduler.core.simulator import simulate

    if locality is None:
        return simulate(jobs, pools, policy, tick_s=tick_s, speedup=speedup, progress=progress,
                        check_invariants=check_invariants), None
    cfg = config_for_policy(locality, policy)
    return simulate_cells(jobs, pools, policy, cfg, tick_s=tick_s, speedup=speedup,
                          progress=progress, check_invariants=check_invariants,
                          record_placements=record_placements)


def simulate_maybe_cells(jobs: pl.DataFrame, pools: pl.DataFrame, policy, locality: LocalityConfig | None,
                         *, tick_s: float = 300.0, speedup: float = 1.0,
                         progress: bool = False, check_invariants: bool = False) -> pl.DataFrame:
    """The per-job result table of :func:`replay_maybe_cells` (times in seconds)."""
    return replay_maybe_cells(jobs, pools, policy, locality, tick_s=tick_s, speedup=speedup,
                              progress=progress, check_invariants=check_invariants)[0]
