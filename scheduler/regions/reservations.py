"""Global reservations (MAST's capacity placement): a pool's quota split into per-region shares.

A pool's quota ``Q_p`` (GPUs) is a global entitlement. A *share* ``s[p, r]``
is the part of it placed in region ``r``: the pool's jobs run there as
dedicated jobs within it. Two invariants hold at every instant:

* each pool's shares sum to its quota: ``sum_r s[p, r] = Q_p``;
* a region's supply, the sum of the shares placed in it, never exceeds its
  GPUs: ``sum_p s[p, r] <= G_r``.

Two parts:

* :func:`plan_reservations`, the slow path: one MIP (OR-Tools, warm start,
  a fixed amount of solver work) choosing replicas *and* shares together from each pool's
  predicted demand, MAST's soft balance (overload weighted above underload),
  storage limits, data moved and share churn. The solve stops on a count of
  solver work (SCIP branch-and-bound nodes, GLOP iterations), never on the
  machine's load, so the same inputs give the same plan; the wall-clock limit
  is only a safety net, and a plan says which limit stopped it. An infeasible
  or timed-out plan keeps the previous one and says so.
* :class:`ShareLedger`, the shares in force: a plan only sets a *target*;
  :meth:`ShareLedger.step` moves the shares towards it as fast as running
  jobs free them (a pool never gives up GPUs its dedicated jobs hold: no plan
  preempts) and only into regions whose copy of the pool's data is usable.
  A move is a min-cost circulation (OR-Tools): a pool's GPUs leave one region
  only as they arrive in another, and a region takes GPUs only as others
  leave it or it has GPUs no share holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from ortools.graph.python import min_cost_flow
from ortools.linear_solver import pywraplp
from sia.scheduler.regions.data_placement import (
    NODE_LIMIT,
    PlacementWeights,
    check_work_limits,
    demand_vector,
    limit_text,
    solve_within,
)
from sia.scheduler.regions.model import RegionLayout, RegionsError

#: default solver work per warm-start LP (module doc): GLOP simplex iterations (the MIP's
#: node limit is data placement's ``NODE_LIMIT``)
LP_ITERATION_LIMIT = 200_000


@dataclass(frozen=True)
class ReservationWeights(PlacementWeights):
    """The data-placement weights plus ``churn_weight``: per GPU of share moved, over the
    total quota (a plan that moves every share pays ``churn_weight``)."""

    churn_weight: float = 0.5

    def __post_init__(self) -> None:
        super().__post_init__()
        v = self.churn_weight
        if not (isinstance(v, (int, float)) and np.isfinite(v) and v >= 0):
            raise RegionsError(f"reservation weights: churn_weight must be a finite number >= 0, "
                               f"got {v!r}")


@dataclass(frozen=True)
class ReservationPlan:
    """One plan of replicas and shares.

    ``status``: ``optimal``, ``feasible`` (a limit hit with a solution; used),
    ``infeasible``, ``timeout`` or ``error`` (the previous plan is kept,
    ``kept_previous`` is True and ``message`` says why). ``held`` [pool, region]
    bool, ``shares`` [pool, region] int GPUs (rows sum to the quotas), ``objective``
    (None when kept), ``moved`` data copied relative to the previous plan (size
    units), ``churn`` GPUs of share moved relative to the previous shares,
    ``solve_s`` wall seconds. ``stopped_by``: which limit ended the solve, ``""`` (none:
    solved to the gap, or proved infeasible), ``"work"`` (the node limit: the plan is the
    same on any machine load) or ``"time"`` (the wall-clock safety net: the plan may
    depend on the load).
    """

    status: str
    held: np.ndarray
    shares: np.ndarray
    objective: float | None
    moved: float
    churn: int
    solve_s: float
    kept_previous: bool
    message: str
    stopped_by: str = ""

    def region_load(self, demand: np.ndarray, quota: np.ndarray,
                    fixed: np.ndarray | None = None) -> np.ndarray:
        """Planned GPU demand per region: each pool's demand split as its shares (GPUs), plus
        the ``fixed`` load per region (GPUs that stay where they are, default none)."""
        frac = self.shares / np.maximum(np.asarray(quota, dtype=float), 1.0)[:, None]
        load = np.asarray(demand, dtype=float) @ frac
        return load if fixed is None else load + np.asarray(fixed, dtype=float)


def home_shares(layout: RegionLayout, quota: np.ndarray) -> np.ndarray:
    """Every pool's whole quota in its home region (today's practice), int [pool, region]."""
    s = np.zeros((layout.n_pools, layout.n_regions), dtype=np.int64)
    s[np.arange(layout.n_pools), layout.home] = np.asarray(quota, dtype=np.int64)
    return s


def check_shares(layout: RegionLayout, quota: np.ndarray, shares: np.ndarray,
                 what: str = "shares") -> np.ndarray:
    """``shares`` as int [pool, region], or a one-line error: negative, a pool's shares not
    summing to its quota, or a region's supply above its GPUs."""
    s = np.asarray(shares)
    if s.shape != (layout.n_pools, layout.n_regions):
        raise RegionsError(f"{what}: shape {s.shape} is not (pools, regions) = "
                           f"({layout.n_pools}, {layout.n_regions})")
    s = s.astype(np.int64)
    if (s < 0).any():
        p, r = np.argwhere(s < 0)[0]
        raise RegionsError(f"{what}: pool {layout.pools[p].name!r} has a negative share in "
                           f"region {layout.regions[r].name!r}")
    rows = np.flatnonzero(s.sum(axis=1) != quota)
    if rows.size:
        p = int(rows[0])
        raise RegionsError(f"{what}: pool {layout.pools[p].name!r}'s shares sum to "
                           f"{int(s[p].sum())}, not its quota {int(quota[p])}")
    cols = np.flatnonzero(s.sum(axis=0) > layout.gpus)
    if cols.size:
        r = int(cols[0])
        raise RegionsError(f"{what}: region {layout.regions[r].name!r} gets {int(s[:, r].sum())} "
                           f"GPUs of shares but has {int(layout.gpus[r])}")
    return s


def _quota_vector(layout: RegionLayout, quota: Any) -> np.ndarray:
    q = np.asarray(demand_vector(layout, quota)).astype(np.int64)
    if (q < 1).any():
        p = int(np.flatnonzero(q < 1)[0])
        raise RegionsError(f"quota of pool {layout.pools[p].name!r} must be >= 1 GPU")
    if q.sum() > layout.gpus.sum():
        raise RegionsError(f"quotas sum to {int(q.sum())} GPUs, more than the regions' "
                           f"{int(layout.gpus.sum())}")
    return q


def reservation_objective(layout: RegionLayout, demand: np.ndarray, quota: np.ndarray,
                          held: np.ndarray, shares: np.ndarray, prev_held: np.ndarray,
                          prev_shares: np.ndarray, weights: ReservationWeights,
                          fixed: np.ndarray | None = None,
                          bonus: np.ndarray | None = None) -> float:
    """The MIP's objective of a given plan (for checks and warm starts); ``bonus``
    [pool, region]: the foothold bonus of each copy held, subtracted."""
    fixed = np.zeros(layout.n_regions) if fixed is None else np.asarray(fixed, dtype=float)
    load = demand @ (shares / quota[:, None]) + fixed
    ratio = load / layout.gpus
    rho = (demand.sum() + fixed.sum()) / layout.gpus.sum()
    total = max(layout.sizes.sum(), 1e-12)
    moved = (layout.sizes[:, None] * (held & ~prev_held)).sum() / total
    stored = (layout.sizes[:, None] * held).sum() / total
    churn = np.abs(shares - prev_shares).sum() / (2.0 * quota.sum())
    return float(weights.over_weight * np.maximum(0, ratio - rho).sum()
                 + weights.under_weight * np.maximum(0, rho - ratio).sum()
                 + weights.overflow_weight * np.maximum(0, ratio - 1).sum()
                 + weights.move_weight * moved + weights.storage_weight * stored
                 + weights.churn_weight * churn
                 - (0.0 if bonus is None else float((bonus * held).sum())))


def plan_reservations(
    layout: RegionLayout,
    quota: Any,
    demand: Any,
    prev_held: np.ndarray,
    prev_shares: np.ndarray,
    keep: np.ndarray | None = None,
    *,
    candidates: np.ndarray | None = None,
    min_share: Any = None,
    fixed_load: Any = None,
    foothold: Any = None, foothold_share: Any = None,
    weights: ReservationWeights | None = None,
    time_limit_s: float = 60.0,
    mip_gap: float = 1e-4, solver: str = "SCIP",
    lp_warm_start: bool = True,
    node_limit: int = NODE_LIMIT, lp_iteration_limit: int = LP_ITERATION_LIMIT,
) -> ReservationPlan:
    """Solve the replicas-and-shares MIP; returns a :class:`ReservationPlan`.

    Variables: ``x[p, r]`` bool (region r keeps a copy of pool p's data) and
    ``s[p, r]`` in [0, Q_p] (GPUs of p's quota placed in r), with ``s <= Q_p x``,
    ``sum_r s[p, r] = Q_p`` and ``sum_p s[p, r] <= G_r``. A pool's predicted
    demand ``d_p`` (GPUs) is served where its shares are, in proportion:
    ``L_r = F_r + sum_p d_p s[p, r] / Q_p``, where ``fixed_load`` ``F`` [region] (GPUs,
    default 0) is load that no share moves (jobs already running there). The objective is
    :mod:`~sia.scheduler.regions.data_placement`'s soft balance of ``L_r / G_r``
    (over ``rho = (sum d + sum F) / sum G``, weighted above under), its data-moved and
    storage terms, plus ``churn_weight * sum |s - prev_shares| / (2 sum Q)``.
    Storage limits hold; with ``keep`` [pool, region] bool, every pool keeps one of those
    copies (by default none is forced: the copies are where the shares are, and the simulator
    keeps a copy while a share in force is still there). ``candidates`` limits where copies may be (previous copies
    always may). ``min_share`` [pool] GPUs (default 1): a region holding a copy holds at
    least that much of the pool's share (``s >= min_share x``), so a pool's widest job fits
    in every region its shares are in (pass the widest job seen so far; at most the
    quota). The LP shares are rounded to whole GPUs keeping every row sum and region limit
    (a flow rounding, so the rounding never breaks a constraint). ``prev_held`` and
    ``prev_shares`` are the plan kept when the solve fails. Footholds: :func:`_foothold`.

    Warm start (``lp_warm_start``): the LP relaxation (GLOP), its copies fixed where it
    places a whole minimum share (each pool's largest share at least), the shares solved
    again as an LP on those copies plus the previous shares' regions (there the minimum
    share stays relaxed, so a few GPUs may stay behind below it); that plan is the MIP's hint,
    used when the MIP ends at a limit with a worse plan or none (without it, or when it
    fails, the hint is the previous plan).

    Limits: the solve stops on a fixed amount of work, so the same inputs give the same
    plan however loaded the machine is: ``node_limit`` branch-and-bound nodes (SCIP's
    ``limits/totalnodes``; only SCIP takes it) and ``lp_iteration_limit`` simplex
    iterations per warm-start LP. ``time_limit_s`` (wall clock, the whole call) is only a
    safety net; the plan's ``stopped_by`` and ``message`` say which limit ended the solve.
    """
    weights = weights or ReservationWeights()
    pb, mip = _problem(layout, quota, demand, prev_held, prev_shares, keep, candidates,
                       min_share, weights, time_limit_s, solver, fixed_load, foothold,
                       foothold_share)
    check_work_limits("plan_reservations", node_limit=node_limit,
                      lp_iteration_limit=lp_iteration_limit)
    # each LP of the warm start may use a third of the time limit (the safety net)
    warm, lp_timed_out = _lp_and_fix(layout, pb.q, pb.d, pb.prev, pb.s0, pb.keep, pb.allowed, pb.low,
                                     weights, time_limit_s / 3, lp_iteration_limit, pb.fixed,
                                     pb.bonus) \
        if lp_warm_start else (None, False)
    x, s = _build(mip, layout, pb.q, pb.d, pb.prev, pb.s0, pb.keep, pb.allowed, pb.low, weights,
                  fixed=pb.fixed, bonus=pb.bonus)
    hint = (pb.prev & (pb.s0 > 0), pb.s0) if warm is None else warm
    code, by = _solve_from_hint(mip, x, s, hint, mip_gap, time_limit_s, pb.t0, node_limit, solver)
    by = "time" if lp_timed_out else by
    why = limit_text(by, time_limit_s, node_limit)
    best = None
    if code in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        status = "optimal" if code == pywraplp.Solver.OPTIMAL else "feasible"
        msg = "" if status == "optimal" else f"{why} reached; best plan found is used"
        best = pb.plan(status, *_solution(x, s, pb.prev), msg, by)
    if warm is not None and (best is None or best.status != "optimal"):
        lp = pb.plan("feasible", warm[0], warm[1], f"{why} reached; the "
                     "LP-and-fix plan (the warm start) is used", by)
        if best is None or lp.objective < best.objective - 1e-9:
            best = lp
    return best if best is not None else pb.kept(code, why, by, solver)


@dataclass(frozen=True)
class _Problem:
    """The checked inputs of one :func:`plan_reservations` solve, and its start time."""

    layout: RegionLayout
    q: np.ndarray  # quotas, int [pool]
    d: np.ndarray  # predicted demand [pool]
    prev: np.ndarray  # previous copies, bool [pool, region]
    s0: np.ndarray  # previous shares, int [pool, region]
    keep: np.ndarray | None
    allowed: np.ndarray  # where copies may be, bool [pool, region]
    low: np.ndarray  # minimum share of a region holding a copy [pool, region]
    weights: ReservationWeights
    t0: float
    fixed: np.ndarray  # load per region that no share moves (GPUs)
    bonus: np.ndarray | None  # foothold bonus per copy [pool, region]

    def plan(self, status: str, held: np.ndarray, frac: np.ndarray, msg: str,
             stopped_by: str = "") -> ReservationPlan:
        """The plan of copies ``held`` and fractional shares ``frac`` (rounded to GPUs)."""
        shares = round_shares(frac, self.q, self.layout.gpus)
        return ReservationPlan(
            status, held, shares,
            reservation_objective(self.layout, self.d, self.q.astype(float), held, shares,
                                  self.prev, self.s0, self.weights, self.fixed, self.bonus),
            float((self.layout.sizes[:, None] * (held & ~self.prev)).sum()),
            int(np.abs(shares - self.s0).sum() // 2), time.perf_counter() - self.t0, False, msg,
            stopped_by if status != "optimal" else "")

    def kept(self, code: int, limit: str, stopped_by: str, solver: str) -> ReservationPlan:
        """The previous plan, kept because the solve ended with ``code`` and no plan
        (``limit``: the limit that stopped it, in words)."""
        if code == pywraplp.Solver.INFEASIBLE:
            status, why = "infeasible", "no plan meets the storage limits while keeping a copy of every pool"
            stopped_by = ""
        elif code == pywraplp.Solver.NOT_SOLVED:
            status, why = "timeout", f"no plan found within the {limit}"
        else:
            status, why = "error", f"solver {solver} returned status {code}"
        return ReservationPlan(status, self.prev.copy(), self.s0.copy(), None, 0.0, 0,
                               time.perf_counter() - self.t0, True,
                               f"reservation plan {status}: {why}; the previous plan is kept",
                               stopped_by)


def _problem(layout: RegionLayout, quota: Any, demand: Any, prev_held: np.ndarray,
             prev_shares: np.ndarray, keep: np.ndarray | None, candidates: np.ndarray | None,
             min_share: Any, weights: ReservationWeights, time_limit_s: float, solver: str,
             fixed_load: Any = None, foothold: Any = None, foothold_share: Any = None
             ) -> tuple[_Problem, Any]:
    """Return (the checked inputs of :func:`plan_reservations`, its MIP solver); a one-line
    RegionsError names what is wrong (a previous share where no copy is, the time limit, an
    unavailable solver, ...)."""
    q = _quota_vector(layout, quota)
    d = demand_vector(layout, demand)
    prev = layout.check_plan(prev_held, "previous plan")
    s0 = check_shares(layout, q, prev_shares, "previous shares")
    if (s0 > 0).any() and not prev[s0 > 0].all():
        p, r = np.argwhere((s0 > 0) & ~prev)[0]
        raise RegionsError(f"previous shares: pool {layout.pools[p].name!r} has a share in "
                           f"region {layout.regions[r].name!r}, which holds none of its data")
    keep = None if keep is None else layout.check_plan(keep, "keep set")
    low = np.ones(layout.n_pools) if min_share is None else \
        np.minimum(np.maximum(demand_vector(layout, min_share), 1.0), q)
    bonus, low = _foothold(layout, foothold, foothold_share, low)
    if not (np.isfinite(time_limit_s) and time_limit_s > 0):
        raise RegionsError(f"time_limit_s must be > 0 seconds, got {time_limit_s!r}")
    t0 = time.perf_counter()
    mip = pywraplp.Solver.CreateSolver(solver)
    if mip is None:
        raise RegionsError(f"solver {solver!r} is not available in this OR-Tools build (try SCIP or CBC)")
    mip.SetNumThreads(1)
    allowed = np.ones_like(prev) if candidates is None else \
        layout.check_plan(candidates, "candidates") | prev
    fixed = np.zeros(layout.n_regions) if fixed_load is None else \
        np.asarray(fixed_load, dtype=float).reshape(layout.n_regions)
    if not (np.isfinite(fixed).all() and (fixed >= 0).all()):
        raise RegionsError("fixed_load must be finite GPUs >= 0 per region")
    return _Problem(layout, q, d, prev, s0, keep, allowed, low, weights, t0, fixed, bonus), mip


def _foothold(layout: RegionLayout, foothold: Any, foothold_share: Any, low: np.ndarray
              ) -> tuple[np.ndarray | None, np.ndarray]:
    """The checked foothold bonus [pool, region] (None: no footholds) and the minimum share
    of a region holding a copy [pool, region]: ``foothold_share`` (at most ``low``) where the
    bonus is positive, else ``low`` (:func:`plan_reservations`).

    ``foothold`` [pool, region] (objective units, >= 0, default none) is a bonus subtracted
    from the objective when region r holds a copy of pool p (``x[p, r]`` = 1), and there the
    minimum share is ``foothold_share`` [pool] GPUs (default ``min_share``; at most it): a
    small share, with a copy, where the pool's short jobs can be lent GPUs
    (:class:`~sia.scheduler.regions.reserved_policy.ReservationRegionPolicy`'s ``foothold``).
    The bonus buys the copy only when it beats the copy's data-moved, storage and churn costs
    and what the share does to the balance."""
    low2 = np.repeat(low[:, None], layout.n_regions, axis=1)
    if foothold is None:
        return None, low2
    bonus = np.asarray(foothold, dtype=float)
    if bonus.shape != low2.shape or not (np.isfinite(bonus).all() and (bonus >= 0).all()):
        raise RegionsError("foothold: a finite bonus >= 0 per pool and region is needed, shape "
                           f"{low2.shape}")
    small = low if foothold_share is None else \
        np.minimum(np.maximum(demand_vector(layout, foothold_share), 1.0), low)
    return bonus, np.where(bonus > 0, small[:, None], low2)


def _solve_from_hint(mip: Any, x: list[dict], s: list[dict],
                     hint: tuple[np.ndarray, np.ndarray], mip_gap: float, time_limit_s: float,
                     t0: float, node_limit: int, solver: str) -> tuple[int, str]:
    """Solve ``mip`` from the hint (held, shares) within ``node_limit`` nodes (SCIP) and,
    as a safety net, what is left at its start of ``time_limit_s`` seconds from ``t0``;
    return (its status code, NOT_SOLVED when no time is left; the limit that stopped it:
    ``""``, ``"work"`` or ``"time"``)."""
    hint_held, hint_shares = hint
    hint_vars, hint_vals = [], []
    for p, row in enumerate(x):
        for r in row:
            hint_vars += [x[p][r], s[p][r]]
            hint_vals += [float(hint_held[p, r]), float(hint_shares[p, r])]
    mip.SetHint(hint_vars, hint_vals)
    return solve_within(mip, mip_gap, time_limit_s, t0, node_limit, solver)


def _solution(x: list[dict], s: list[dict], prev: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Return (copies held, fractional shares) of the solved MIP (no share without a copy)."""
    held = np.zeros_like(prev)
    frac = np.zeros(prev.shape)
    for p, row in enumerate(x):
        for r in row:
            held[p, r] = x[p][r].solution_value() > 0.5
            frac[p, r] = s[p][r].solution_value() if held[p, r] else 0.0
    return held, frac


def share_candidates(layout: RegionLayout, quota: Any, demand: Any, shares: np.ndarray,
                     k: int = 3) -> np.ndarray:
    """Where a pool's share may usefully go (bool [pool, region]): where it is now, plus, for a
    pool busier than the balanced ratio (demand over quota above ``rho``), ``k`` regions
    below ``rho`` under the current shares, and for a quieter pool ``k`` regions above it
    (balance comes from swapping the two kinds). The pools of a kind are dealt over the
    regions of the other side in turn, so every such region gets candidates. A size
    reduction for large plans (:func:`plan_reservations`' ``candidates``), not an exact one."""
    q = _quota_vector(layout, quota).astype(float)
    d = demand_vector(layout, demand)
    s = np.asarray(shares, dtype=float)
    ratio = d @ (s / q[:, None]) / layout.gpus
    rho = d.sum() / layout.gpus.sum()
    out = s > 0
    busy = d / q > rho
    for kind, side in ((busy, np.flatnonzero(ratio < rho)), (~busy, np.flatnonzero(ratio > rho))):
        if not side.size:
            continue
        pools = np.flatnonzero(kind)
        n = min(int(k), side.size)
        cols = (np.arange(pools.size)[:, None] * n + np.arange(n)[None, :]) % side.size
        out[pools[:, None], side[cols]] = True
    return out


def _lp_and_fix(layout: RegionLayout, q: np.ndarray, d: np.ndarray, prev: np.ndarray,
                s0: np.ndarray, keep: np.ndarray | None, allowed: np.ndarray, low: np.ndarray,
                weights: ReservationWeights, limit_s: float, iterations: int,
                fixed: np.ndarray | None = None, bonus: np.ndarray | None = None
                ) -> tuple[tuple[np.ndarray, np.ndarray] | None, bool]:
    """The warm start of :func:`plan_reservations` (its docstring): ((held, shares) or None,
    whether an LP hit the wall-clock safety net ``limit_s``)."""
    lp = pywraplp.Solver.CreateSolver("GLOP")
    if lp is None:
        return None, False
    x, s = _build(lp, layout, q, d, prev, s0, keep, allowed, low, weights, relax=True,
                  fixed=fixed, bonus=bonus)
    code, timed_out = _solve_lp(lp, limit_s, iterations)
    if code != pywraplp.Solver.OPTIMAL:
        return None, timed_out
    frac = np.zeros(prev.shape)
    for p in range(layout.n_pools):
        for r in s[p]:
            frac[p, r] = s[p][r].solution_value()
    # copies fixed where the LP puts a whole minimum share (each pool's largest at least);
    # the regions of the previous shares stay open as they were (fractional), so the
    # second LP can always fall back towards the previous plan
    fix = frac >= low - 1e-6
    fix[np.arange(layout.n_pools), np.argmax(frac, axis=1)] = True
    lp = pywraplp.Solver.CreateSolver("GLOP")
    x, s = _build(lp, layout, q, d, prev, s0, keep, fix | (s0 > 0), low, weights, relax=True,
                  fixed=fixed, bonus=bonus)
    for p in range(layout.n_pools):
        for r in x[p]:
            if fix[p, r]:
                x[p][r].SetLb(1.0)
    code, timed_out = _solve_lp(lp, limit_s, iterations)
    if code != pywraplp.Solver.OPTIMAL:
        return None, timed_out
    out = np.zeros(prev.shape)
    for p in range(layout.n_pools):
        for r in s[p]:
            out[p, r] = s[p][r].solution_value()
    held = fix | (out > 1e-6)
    return (held, np.where(held, out, 0.0)), False


def _solve_lp(lp: Any, limit_s: float, iterations: int) -> tuple[int, bool]:
    """Solve the GLOP model ``lp`` within ``iterations`` simplex iterations (the work
    limit) and ``limit_s`` wall seconds (the safety net); return (its status code, whether
    the safety net stopped it)."""
    if not lp.SetSolverSpecificParametersAsString(f"max_number_of_iterations: {int(iterations)}"):
        raise RegionsError(f"GLOP refused the iteration limit {iterations!r}")
    t0 = time.perf_counter()
    lp.SetTimeLimit(max(1, int(limit_s * 1000)))
    code = lp.Solve()
    return code, code != pywraplp.Solver.OPTIMAL and time.perf_counter() - t0 >= 0.95 * limit_s


def _build(mip: Any, layout: RegionLayout, q: np.ndarray, d: np.ndarray, prev: np.ndarray,
           s0: np.ndarray, keep: np.ndarray | None, allowed: np.ndarray, low: np.ndarray,
           weights: ReservationWeights, relax: bool = False, fixed: np.ndarray | None = None,
           bonus: np.ndarray | None = None
           ) -> tuple[list[dict[int, Any]], list[dict[int, Any]]]:
    """Variables, constraints and objective of :func:`plan_reservations`' MIP (``low``: the
    minimum share of a copy [pool, region]; ``bonus``: the foothold bonus of a copy)."""
    n_p, n_r = layout.n_pools, layout.n_regions
    supply = layout.gpus.astype(float)
    fixed = np.zeros(n_r) if fixed is None else fixed
    rho = (d.sum() + fixed.sum()) / supply.sum()
    total = max(layout.sizes.sum(), 1e-12)
    churn_w = weights.churn_weight / (2.0 * q.sum())
    x: list[dict[int, Any]] = []
    s: list[dict[int, Any]] = []
    in_region: list[list[int]] = [[] for _ in range(n_r)]
    obj = mip.Objective()
    for p in range(n_p):
        cols = np.flatnonzero(allowed[p]).tolist()
        qp = float(q[p])
        xp = {r: (mip.NumVar(0.0, 1.0, f"x_{p}_{r}") if relax else mip.BoolVar(f"x_{p}_{r}"))
              for r in cols}
        sp = {r: mip.NumVar(0.0, qp, f"s_{p}_{r}") for r in cols}
        x.append(xp)
        s.append(sp)
        mip.Add(sum(sp.values()) == qp)
        if keep is not None:
            mip.Add(sum(xp[r] for r in cols if keep[p, r]) >= 1)
        size_w = layout.sizes[p] / total
        for r in cols:
            in_region[r].append(p)
            mip.Add(sp[r] <= qp * xp[r])
            mip.Add(sp[r] >= float(low[p, r]) * xp[r])
            obj.SetCoefficient(xp[r], weights.storage_weight * size_w
                               + (0.0 if prev[p, r] else weights.move_weight * size_w)
                               - (0.0 if bonus is None else float(bonus[p, r])))
            if churn_w > 0:  # |s - s0| <= c
                c = mip.NumVar(0.0, qp, f"c_{p}_{r}")
                mip.Add(sp[r] - c <= float(s0[p, r]))
                mip.Add(sp[r] + c >= float(s0[p, r]))
                obj.SetCoefficient(c, churn_w)
    for r in range(n_r):
        pools = in_region[r]
        if pools:  # (an empty sum is a number, not a constraint)
            mip.Add(sum(s[p][r] for p in pools) <= supply[r])
        stored = [p for p in pools if layout.sizes[p] > 0]
        if np.isfinite(layout.storage[r]) and stored:
            mip.Add(sum(layout.sizes[p] * x[p][r] for p in stored) <= layout.storage[r])
        load = sum((d[p] / q[p]) * s[p][r] for p in pools if d[p] > 0) + float(fixed[r])
        over, under, flow = (mip.NumVar(0, mip.infinity(), f"{k}_{r}") for k in ("over", "under", "flow"))
        mip.Add(load - rho * supply[r] == supply[r] * (over - under))
        mip.Add(load - supply[r] <= supply[r] * flow)
        obj.SetCoefficient(over, weights.over_weight)
        obj.SetCoefficient(under, weights.under_weight)
        obj.SetCoefficient(flow, weights.overflow_weight)
    obj.SetMinimization()
    return x, s


def round_shares(frac: np.ndarray, quota: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """Whole-GPU shares from fractional ones: rows sum to ``quota``, columns stay within
    ``gpus``, each entry the floor or the ceiling of its fraction (int [pool, region]).

    The floors leave each pool a few GPUs to place and each region a few free; placing
    them is an integral flow (pools -> regions over the entries with a fractional part,
    capacity 1), which exists because the fractional shares are one; larger fractional
    parts are preferred."""
    frac = np.clip(np.asarray(frac, dtype=float), 0.0, None)
    quota = np.asarray(quota, dtype=np.int64)
    base = np.floor(frac + 1e-7).astype(np.int64)
    over = base.sum(axis=1) - quota
    for p in np.flatnonzero(over > 0):  # float noise above the quota: trim the largest entries
        for r in np.argsort(-base[p], kind="stable")[: int(over[p])]:
            base[p, r] -= 1
    need = quota - base.sum(axis=1)
    room = np.asarray(gpus, dtype=np.int64) - base.sum(axis=0)
    if not need.any():
        return base
    part = frac - base
    n_p, n_r = frac.shape
    pp, rr = np.nonzero(part > 1e-7)
    f = min_cost_flow.SimpleMinCostFlow()
    sink = n_p + n_r
    tails = np.concatenate([pp, n_p + np.arange(n_r)])
    heads = np.concatenate([n_p + rr, np.full(n_r, sink)])
    caps = np.concatenate([np.ones(pp.size, dtype=np.int64), np.maximum(room, 0)])
    costs = np.concatenate([-np.round(part[pp, rr] * 1000).astype(np.int64),
                            np.zeros(n_r, dtype=np.int64)])
    arcs = f.add_arcs_with_capacity_and_unit_cost(tails, heads, caps, costs)
    supplies = np.concatenate([need, np.zeros(n_r, dtype=np.int64), [-need.sum()]])
    f.set_nodes_supplies(np.arange(sink + 1), supplies)
    if f.solve() != f.OPTIMAL:
        raise RegionsError("round_shares: the fractional shares cannot be rounded (their rows "
                           "do not sum to the quotas or a region is over its GPUs)")
    flows = f.flows(arcs[: pp.size])
    out = base.copy()
    np.add.at(out, (pp, rr), flows)
    return out


class ShareLedger:
    """The shares in force and the plan's target, moved without preemption (module doc).

    ``quota`` int [pool], ``gpus`` int [region], ``shares`` the initial int [pool, region]
    (default: each pool's whole quota at its ``home``). :attr:`shares` only changes in
    :meth:`step` and always satisfies both invariants of the module doc.
    """

    def __init__(self, quota: np.ndarray, gpus: np.ndarray, shares: np.ndarray) -> None:
        self.quota = np.asarray(quota, dtype=np.int64)
        self.gpus = np.asarray(gpus, dtype=np.int64)
        self.shares = np.array(shares, dtype=np.int64)
        self._check(self.shares, "initial shares")
        self.target = self.shares.copy()
        self.moved_gpus = 0  # GPUs of share moved so far, summed over the pools that moved

    def _check(self, s: np.ndarray, what: str) -> None:
        if s.shape != (self.quota.size, self.gpus.size) or (s < 0).any() \
                or (s.sum(axis=1) != self.quota).any() or (s.sum(axis=0) > self.gpus).any():
            raise RegionsError(f"{what}: not shares (every pool's row must sum to its quota, "
                               f"every region's column stay within its GPUs)")

    def set_target(self, target: np.ndarray) -> None:
        """The plan's shares (int [pool, region], checked as the shares are)."""
        t = np.array(target, dtype=np.int64)
        self._check(t, "target shares")
        self.target = t

    @property
    def settled(self) -> bool:
        """True when the shares in force are the target."""
        return bool((self.shares == self.target).all())

    def step(self, used: np.ndarray, usable: np.ndarray) -> np.ndarray:
        """Move shares towards the target now; returns the regions whose shares changed (bool).

        ``used`` int [pool, region]: GPUs the pool's dedicated jobs hold there (never given
        up); ``usable`` bool [pool, region]: the pool's data is usable there (a share only
        grows where it is). The most GPUs that can move do (a min-cost circulation)."""
        s, t = self.shares, self.target
        release = np.maximum(s - np.maximum(t, used), 0)
        want = np.where(usable, np.maximum(t - s, 0), 0)
        n_p, n_r = s.shape
        if not release.any() or not want.any():
            return np.zeros(n_r, dtype=bool)
        free = self.gpus - s.sum(axis=0)
        # nodes: pools 0..P-1, regions P..P+R-1, source P+R, sink P+R+1
        src, sink = n_p + n_r, n_p + n_r + 1
        rp, rr = np.nonzero(release)
        wp, wr = np.nonzero(want)
        big = int(self.quota.sum()) + 1
        tails = np.concatenate([n_p + rr, wp, n_p + np.arange(n_r), np.full(n_r, src), [sink]])
        heads = np.concatenate([rp, n_p + wr, np.full(n_r, sink), n_p + np.arange(n_r), [src]])
        caps = np.concatenate([release[rp, rr], want[wp, wr], np.maximum(free, 0),
                               np.full(n_r, big), [big]])
        costs = np.concatenate([np.zeros(rp.size, dtype=np.int64), np.full(wp.size, -1),
                                np.zeros(2 * n_r + 1, dtype=np.int64)])
        f = min_cost_flow.SimpleMinCostFlow()
        f.add_arcs_with_capacity_and_unit_cost(tails, heads, caps.astype(np.int64), costs)
        if f.solve() != f.OPTIMAL:  # a circulation with zero supplies always exists
            raise RegionsError("share ledger: the share moves could not be solved")
        flows = f.flows(np.arange(rp.size + wp.size))
        out = np.zeros_like(s)
        out[rp, rr] = flows[: rp.size]
        inc = np.zeros_like(s)
        inc[wp, wr] = flows[rp.size:]
        if not out.any():
            return np.zeros(n_r, dtype=bool)
        new = s - out + inc
        self._check(new, "shares after a move")
        self.shares = new
        self.moved_gpus += int(inc.sum())
        return (out.any(axis=0) | inc.any(axis=0))

    def consolidate(self, p: int, a: int, g: int, used: np.ndarray, usable: np.ndarray,
                    partners: np.ndarray | None = None, idle: np.ndarray | None = None
                    ) -> np.ndarray | None:
        """Give pool ``p`` ``g`` GPUs of unused share in region ``a`` from its unused share in
        the other regions, now; returns the regions whose shares changed (bool), or None
        (nothing changed) when it cannot be done in full.

        The GPUs come, in each other region ``b`` (most unused share of ``p`` first), from
        GPUs of ``a`` outside every share, else by a swap: another pool ``q`` with unused share
        in ``a`` and a usable copy in ``b`` gives it up in ``a`` and gets as much in ``b``
        (``partners``: bool [pool], the pools that may; default all; ``idle``: int [region],
        the most GPUs partners may get in each region, e.g. its free GPUs, so that their new
        share is not on GPUs loans hold; default no limit).
        Only unused share moves (``used``: int [pool, region], never given up), so no job is
        preempted; rows keep their quotas and columns stay within the GPUs. The target is
        unchanged: :meth:`step` moves the shares back towards it as jobs free them."""
        s = self.shares.copy()
        unused = np.maximum(s - used, 0)
        need = g - int(unused[p, a])
        if need <= 0 or not usable[p, a]:
            return None
        spare = int(self.gpus[a] - s[:, a].sum())
        left = None if idle is None else np.array(idle, dtype=np.int64)
        for b in sorted((b for b in range(s.shape[1]) if b != a), key=lambda b: -unused[p, b]):
            while need > 0 and unused[p, b] > 0:
                x = min(need, int(unused[p, b]))
                if spare > 0:
                    y = min(x, spare)
                    spare -= y
                else:
                    cand = [(int(unused[q, a]), -q) for q in range(s.shape[0])
                            if q != p and unused[q, a] > 0 and usable[q, b]
                            and (partners is None or partners[q])]
                    if not cand or (left is not None and left[b] < 1):
                        break
                    q = -max(cand)[1]
                    y = min(x, int(unused[q, a]), int(left[b]) if left is not None else x)
                    if left is not None:
                        left[b] -= y
                    s[q, a] -= y
                    s[q, b] += y
                    unused[q, a] -= y
                s[p, b] -= y
                s[p, a] += y
                unused[p, b] -= y
                need -= y
        if need > 0:
            return None
        self._check(s, "shares after consolidating")
        changed = (s != self.shares).any(axis=0)
        self.moved_gpus += int(np.maximum(s - self.shares, 0).sum())
        self.shares = s
        return changed
