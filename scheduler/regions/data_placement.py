"""Slow-path data placement (MAST's Tetris): a MIP choosing which regions keep each pool's data.

Given each pool's *predicted* GPU demand ``d_p`` (GPUs, e.g. the mean of the
load forecast over the next planning period) and each region's supply
``S_r`` (GPUs), the MIP chooses

* ``x[p, r]`` in {0, 1}: region r keeps a copy of pool p's data;
* ``y[p, r]`` in [0, 1]: the share of pool p's demand served in region r,
  with ``y[p, r] <= x[p, r]`` and ``sum_r y[p, r] = 1`` (a pool's demand is
  split across the regions holding its data).

The region's load is ``L_r = sum_p d_p y[p, r]`` and its demand-to-supply
ratio ``L_r / S_r``. With ``rho = sum d / sum S`` (the ratio every region
would have under perfect balance), the objective (minimised) is MAST's soft
balance, with overload penalised more than underload:

* ``over_weight * sum_r max(0, L_r/S_r - rho)`` (above the balanced ratio),
* ``under_weight * sum_r max(0, rho - L_r/S_r)`` (below it),
* ``overflow_weight * sum_r max(0, L_r/S_r - 1)`` (demand beyond supply),
* ``move_weight * (data copied to regions that did not hold it) / total data``,
* ``storage_weight * (data kept, all copies) / total data`` (drop unused copies),

subject to the storage limits ``sum_p size_p x[p, r] <= storage_r`` and to
every pool keeping at least one of its ``keep`` copies (by default its current
usable ones), so no pool's data is ever unreadable while new copies transfer.

Solved with OR-Tools' linear solver (SCIP by default, one thread:
deterministic) within a fixed amount of work (``node_limit`` branch-and-bound
nodes), so the same inputs give the same plan however loaded the machine is;
the time limit is only a wall-clock safety net, and :attr:`DataPlan.stopped_by`
says which limit stopped a solve. Warm-started from the previous plan or,
when it scores better, from :func:`greedy_plan`'s quick rebalancing of it.
A solve that proves the problem infeasible, or finds no solution in time,
keeps the previous plan and says so in :class:`DataPlan`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.linear_solver import pywraplp
from sia.scheduler.regions.model import RegionLayout, RegionsError, Replicas


@dataclass(frozen=True)
class PlacementWeights:
    """Objective weights (see the module docstring); overload should weigh more than underload."""

    over_weight: float = 2.0
    under_weight: float = 1.0
    overflow_weight: float = 4.0
    move_weight: float = 1.0
    storage_weight: float = 0.01

    def __post_init__(self) -> None:
        for name in ("over_weight", "under_weight", "overflow_weight", "move_weight", "storage_weight"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
                raise RegionsError(f"placement weights: {name} must be a finite number >= 0, got {v!r}")


#: default branch-and-bound nodes per plan (SCIP): the solver work a plan may use
NODE_LIMIT = 1000


@dataclass(frozen=True)
class DataPlan:
    """One data-placement decision.

    ``status``: ``optimal``, ``feasible`` (a limit hit with a solution; used),
    ``infeasible`` or ``timeout`` (no solution; the previous plan is kept,
    ``kept_previous`` is True and ``message`` says why). ``held`` [pool, region]
    bool, ``shares`` [pool, region] the demand split (rows sum to 1),
    ``objective`` of the returned plan (None when kept) and the solver's
    lower ``bound`` on it, ``moved`` data copied relative to the previous plan
    (size units), ``solve_s`` wall seconds. ``stopped_by``: ``""`` (solved to the gap or
    proved infeasible), ``"work"`` (the node limit: the same plan on any load) or
    ``"time"`` (the wall-clock safety net: the plan may depend on the load).
    """

    status: str
    held: np.ndarray
    shares: np.ndarray
    objective: float | None
    bound: float | None
    moved: float
    solve_s: float
    kept_previous: bool
    message: str
    stopped_by: str = ""

    @property
    def replicas(self) -> int:
        """Number of (pool, region) copies the plan keeps."""
        return int(self.held.sum())

    def region_load(self, demand: np.ndarray) -> np.ndarray:
        """Planned GPU demand per region (GPUs): ``demand @ shares``."""
        return np.asarray(demand, dtype=float) @ self.shares


def demand_vector(layout: RegionLayout, demand: Mapping[str, float] | Sequence[float] | np.ndarray) -> np.ndarray:
    """Predicted GPU demand per pool in the layout's order, or a one-line error naming the pool."""
    if isinstance(demand, Mapping):
        unknown = [k for k in demand if k not in layout.pool_index]
        if unknown:
            raise RegionsError(f"demand: pool {unknown[0]!r} is not in the layout")
        missing = [p.name for p in layout.pools if p.name not in demand]
        if missing:
            raise RegionsError(f"demand: no value for pool {missing[0]!r}")
        values = np.array([float(demand[p.name]) for p in layout.pools])
    else:
        values = np.asarray(demand, dtype=float)
        if values.shape != (layout.n_pools,):
            raise RegionsError(f"demand: shape {values.shape} is not (pools,) = ({layout.n_pools},)")
    bad = np.flatnonzero(~np.isfinite(values) | (values < 0))
    if bad.size:
        k = int(bad[0])
        raise RegionsError(f"demand for pool {layout.pools[k].name!r}: must be finite and >= 0, "
                           f"got {values[k]!r}")
    return values


def keep_set(replicas: Replicas, now: float) -> np.ndarray:
    """Copies a plan must keep one of, per pool: the usable ones at ``now`` (all held if none is)."""
    usable = replicas.usable(now)
    return np.where(usable.any(axis=1)[:, None], usable, replicas.held())


def plan_objective(layout: RegionLayout, demand: np.ndarray, held: np.ndarray, shares: np.ndarray,
                   previous: np.ndarray, weights: PlacementWeights) -> float:
    """The MIP objective of a given plan (for checks and for reporting a kept plan)."""
    ratio = (demand @ shares) / layout.gpus
    rho = demand.sum() / layout.gpus.sum()
    total = max(layout.sizes.sum(), 1e-12)
    moved = (layout.sizes[:, None] * (held & ~previous)).sum() / total
    stored = (layout.sizes[:, None] * held).sum() / total
    return float(weights.over_weight * np.maximum(0, ratio - rho).sum()
                 + weights.under_weight * np.maximum(0, rho - ratio).sum()
                 + weights.overflow_weight * np.maximum(0, ratio - 1).sum()
                 + weights.move_weight * moved + weights.storage_weight * stored)


def supply_shares(layout: RegionLayout, held: np.ndarray) -> np.ndarray:
    """Each pool's demand split over its held regions in proportion to their GPUs (rows sum to 1)."""
    w = held * layout.gpus[None, :].astype(float)
    return w / w.sum(axis=1, keepdims=True)


def balance_candidates(layout: RegionLayout, demand: np.ndarray, previous: np.ndarray) -> np.ndarray:
    """Where a copy may usefully go: held copies, plus every region below the balanced ratio
    for the pools held only in regions above it (bool [pool, region]).

    Under the previous plan (demand split in proportion to supply) a region
    above ``rho`` can only gain from shedding demand and one below it from
    taking some, so new copies of donor pools in receiving regions are the
    moves that improve the balance directly. It drops indirect moves
    (through a third region), so it is a size reduction, not an exact one.
    """
    d = demand_vector(layout, demand)
    prev = layout.check_plan(previous, "previous plan")
    ratio = d @ supply_shares(layout, prev) / layout.gpus
    rho = d.sum() / layout.gpus.sum()
    donor = ~(prev & (ratio <= rho)[None, :]).any(axis=1)
    return prev | (donor[:, None] & (ratio < rho)[None, :])


def greedy_plan(layout: RegionLayout, demand: np.ndarray, previous: np.ndarray,
                allowed: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A quick plan (held, shares) to warm-start the MIP; never drops a copy.

    Repeatedly shifts demand from the region most above its balanced load
    (``rho * S_r``, compared as ratios) to the one most below it: through the
    pool serving most there that the receiver already holds, else by copying
    the pool that can shift the most of the needed demand per unit of data
    (within the receiver's storage and ``allowed``). Stops when balanced or stuck.
    """
    held = previous.copy()
    shares = supply_shares(layout, held)
    supply = layout.gpus.astype(float)
    target = demand.sum() / supply.sum() * supply
    stored = (layout.sizes[:, None] * held).sum(axis=0)
    tol = 1e-9 * max(1.0, float(demand.sum()))
    for _ in range(4 * (layout.n_pools + layout.n_regions)):
        gap = demand @ shares - target
        a, b = int(np.argmax(gap / supply)), int(np.argmin(gap / supply))
        amount = min(gap[a], -gap[b])
        if amount <= tol:
            break
        served = demand * shares[:, a]
        movable = (served > tol) & allowed[:, b]
        if (movable & held[:, b]).any():
            p = int(np.argmax(np.where(movable & held[:, b], served, -1.0)))
        else:
            fits = movable & (layout.sizes <= layout.storage[b] - stored[b])
            if not fits.any():
                break
            useful = np.minimum(served, amount) / np.maximum(layout.sizes, 1e-12)
            p = int(np.argmax(np.where(fits, useful, -1.0)))
            held[p, b] = True
            stored[b] += layout.sizes[p]
        shift = min(amount, served[p]) / demand[p]
        shares[p, a] -= shift
        shares[p, b] += shift
    shares = np.clip(shares, 0.0, None) * held
    return held, shares / shares.sum(axis=1, keepdims=True)


def plan_data_placement(
    layout: RegionLayout,
    demand: Mapping[str, float] | Sequence[float] | np.ndarray,
    previous: np.ndarray | None = None,
    keep: np.ndarray | None = None,
    *,
    candidates: np.ndarray | None = None,
    weights: PlacementWeights | None = None,
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-4,
    solver: str = "SCIP",
    verbose: bool = False,
    node_limit: int = NODE_LIMIT,
) -> DataPlan:
    """Solve the data-placement MIP; returns a :class:`DataPlan` (see the module docstring).

    ``previous`` [pool, region] bool is the plan in force (default: the
    layout's current holders); it (or :func:`greedy_plan` from it) is the
    warm start, the reference for data moved, and what is kept when the
    solve fails. ``keep`` [pool, region]
    bool lists the copies a pool must keep at least one of (default:
    ``previous``). ``candidates`` [pool, region] bool limits where a copy may
    be kept (default: anywhere; :func:`balance_candidates` keeps the model
    small at scale); the previous copies are always candidates.
    ``node_limit`` (SCIP's ``limits/totalnodes``; SCIP only) is the work the solve may do;
    ``time_limit_s`` bounds the whole call, model building included
    (seconds; a safety net); ``mip_gap`` is the relative optimality gap at which the solver
    may stop; ``verbose`` prints the solver's log.
    """
    weights = weights or PlacementWeights()
    d = demand_vector(layout, demand)
    prev = layout.check_plan(layout.initial_replicas().held() if previous is None else previous, "previous plan")
    keep = prev if keep is None else layout.check_plan(keep, "keep set")
    if not (np.isfinite(time_limit_s) and time_limit_s > 0):
        raise RegionsError(f"time_limit_s must be > 0 seconds, got {time_limit_s!r}")
    check_work_limits("plan_data_placement", node_limit=node_limit)
    t0 = time.perf_counter()
    mip = pywraplp.Solver.CreateSolver(solver)
    if mip is None:
        raise RegionsError(f"solver {solver!r} is not available in this OR-Tools build (try SCIP or CBC)")
    mip.SetNumThreads(1)
    if verbose:
        mip.EnableOutput()
    allowed = np.ones((layout.n_pools, layout.n_regions), dtype=bool) if candidates is None else \
        layout.check_plan(candidates, "candidates") | prev
    x, y = _build_model(mip, layout, d, prev, keep, allowed, weights)
    _warm_start(mip, layout, d, prev, allowed, weights, x, y)
    code, by = solve_within(mip, mip_gap, time_limit_s, t0, node_limit, solver)
    solve_s = time.perf_counter() - t0
    limit = limit_text(by, time_limit_s, node_limit)

    if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        held, shares = _solution(layout, x, y)
        status = "optimal" if code == pywraplp.Solver.OPTIMAL else "feasible"
        msg = "" if status == "optimal" else f"{limit} reached; best plan found is used"
        return DataPlan(status, held, shares, plan_objective(layout, d, held, shares, prev, weights),
                        float(mip.Objective().BestBound()),
                        float((layout.sizes[:, None] * (held & ~prev)).sum()), solve_s, False, msg,
                        by)
    if code == pywraplp.Solver.INFEASIBLE:
        status, why = "infeasible", "no plan meets the storage limits while keeping a copy of every pool"
    elif code == pywraplp.Solver.NOT_SOLVED:
        status, why = "timeout", f"no plan found within the {limit}"
    else:
        status, why = "error", f"solver {solver} returned status {code}"
    return DataPlan(status, prev.copy(), supply_shares(layout, prev), None, None, 0.0, solve_s, True,
                    f"data placement {status}: {why}; the previous plan is kept", by)


def solve_within(mip: Any, mip_gap: float, time_limit_s: float, t0: float, node_limit: int,
                 solver: str) -> tuple[int, str]:
    """Solve ``mip`` within ``node_limit`` nodes (SCIP's ``limits/totalnodes``; other
    solvers take none) and, as a safety net, what is left at its start of ``time_limit_s``
    seconds from ``t0``. Return (its status code, NOT_SOLVED when no time is left; the
    limit that stopped it: ``""`` none, ``"work"`` the node limit, ``"time"`` the clock)."""
    params = pywraplp.MPSolverParameters()
    params.SetDoubleParam(pywraplp.MPSolverParameters.RELATIVE_MIP_GAP, mip_gap)
    scip = solver.upper() == "SCIP"
    if scip and not mip.SetSolverSpecificParametersAsString(f"limits/totalnodes = {int(node_limit)}\n"):
        raise RegionsError(f"SCIP refused the node limit {node_limit!r}")
    left_ms = int((time_limit_s - (time.perf_counter() - t0)) * 1000)
    if left_ms <= 0:
        return pywraplp.Solver.NOT_SOLVED, "time"
    mip.SetTimeLimit(max(1, left_ms))
    code = mip.Solve(params)
    if code not in (pywraplp.Solver.FEASIBLE, pywraplp.Solver.NOT_SOLVED):
        return code, ""
    # a limit stopped it: the node count says whether the work limit did
    return code, "work" if scip and mip.nodes() >= node_limit else "time"


def check_work_limits(where: str, **limits: Any) -> None:
    """A one-line RegionsError naming ``where`` and the limit when a work limit (keyword:
    value) is not a whole number >= 1."""
    for name, v in limits.items():
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
            raise RegionsError(f"{where}: {name} must be a whole number >= 1, got {v!r}")


def limit_text(by: str, time_limit_s: float, node_limit: int) -> str:
    """The limit that ended a solve, in words (for a plan's message)."""
    if by == "time":
        return f"wall-clock safety net {time_limit_s:g}s (the plan may depend on the machine's load)"
    return f"work limit {node_limit} nodes"


def _build_model(mip: Any, layout: RegionLayout, d: np.ndarray, prev: np.ndarray,
                 keep: np.ndarray, allowed: np.ndarray,
                 weights: PlacementWeights) -> tuple[list[dict[int, Any]], list[dict[int, Any]]]:
    """Add the variables, constraints and objective of the data-placement MIP to ``mip``.

    Returns, per pool, x (a copy kept in the region, bool) and y (the share of
    the pool's demand served there) by candidate region.
    """
    n_p, n_r = layout.n_pools, layout.n_regions
    supply = layout.gpus.astype(float)
    rho = d.sum() / supply.sum()
    total = max(layout.sizes.sum(), 1e-12)
    cols = [np.flatnonzero(allowed[p]) for p in range(n_p)]
    x = [{r: mip.BoolVar(f"x_{p}_{r}") for r in cols[p]} for p in range(n_p)]
    y = [{r: mip.NumVar(0.0, 1.0, f"y_{p}_{r}") for r in cols[p]} for p in range(n_p)]
    in_region: list[list[int]] = [[] for _ in range(n_r)]
    obj = mip.Objective()
    for p in range(n_p):
        size_w = layout.sizes[p] / total
        mip.Add(sum(y[p].values()) == 1)
        mip.Add(sum(x[p][r] for r in np.flatnonzero(keep[p] & allowed[p])) >= 1)
        for r in cols[p]:
            in_region[r].append(p)
            mip.Add(y[p][r] <= x[p][r])
            cost = weights.storage_weight * size_w + (0.0 if prev[p, r] else weights.move_weight * size_w)
            obj.SetCoefficient(x[p][r], cost)
    for r in range(n_r):
        if np.isfinite(layout.storage[r]):
            mip.Add(sum(layout.sizes[p] * x[p][r] for p in in_region[r] if layout.sizes[p] > 0)
                    <= layout.storage[r])
        load = sum(d[p] * y[p][r] for p in in_region[r] if d[p] > 0)
        over, under, flow = (mip.NumVar(0, mip.infinity(), f"{k}_{r}") for k in ("over", "under", "flow"))
        # ratio - rho = over - under and ratio - 1 <= flow, multiplied by the supply
        mip.Add(load - rho * supply[r] == supply[r] * (over - under))
        mip.Add(load - supply[r] <= supply[r] * flow)
        obj.SetCoefficient(over, weights.over_weight)
        obj.SetCoefficient(under, weights.under_weight)
        obj.SetCoefficient(flow, weights.overflow_weight)
    obj.SetMinimization()
    return x, y


def _warm_start(mip: Any, layout: RegionLayout, d: np.ndarray, prev: np.ndarray,
                allowed: np.ndarray, weights: PlacementWeights, x: list[dict[int, Any]],
                y: list[dict[int, Any]]) -> None:
    """Hint the previous plan, or the greedy one built from it when that scores better."""
    hint_held, hint_shares = prev, supply_shares(layout, prev)
    g_held, g_shares = greedy_plan(layout, d, prev, allowed)
    if plan_objective(layout, d, g_held, g_shares, prev, weights) < \
            plan_objective(layout, d, hint_held, hint_shares, prev, weights):
        hint_held, hint_shares = g_held, g_shares
    hint_vars, hint_vals = [], []
    for p, (xp, yp) in enumerate(zip(x, y, strict=True)):
        for r in xp:
            hint_vars += [xp[r], yp[r]]
            hint_vals += [float(hint_held[p, r]), float(hint_shares[p, r])]
    mip.SetHint(hint_vars, hint_vals)


def _solution(layout: RegionLayout, x: list[dict[int, Any]],
              y: list[dict[int, Any]]) -> tuple[np.ndarray, np.ndarray]:
    """Return (held, shares) [pool, region] of a solved model, the shares of each pool summing to 1."""
    held = np.zeros((layout.n_pools, layout.n_regions), dtype=bool)
    shares = np.zeros((layout.n_pools, layout.n_regions))
    for p, (xp, yp) in enumerate(zip(x, y, strict=True)):
        for r in xp:
            held[p, r] = xp[r].solution_value() > 0.5
            shares[p, r] = yp[r].solution_value()
    shares = np.where(held, np.clip(shares, 0.0, 1.0), 0.0)
    shares /= shares.sum(axis=1, keepdims=True)
    return held, shares
