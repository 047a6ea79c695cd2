"""The anticipatory oracle: the MILP of SIA Figure 19 (Appendix A), and a policy that replays it.

Given every job's submit time s_j, duration d_j, width n_j and a cut-off start
time m_j (its start under the no-sharing FCFS baseline), choose one start time
per job in [s_j, m_j] so that the cluster's GPUs (the sum of the quotas) are
never over-committed, minimising the total queueing delay (plus, optionally,
beta times the fairness multipliers of constraint (13)). Because every job
starts no later than under FCFS and runs exactly its duration, no job ends
later than under FCFS.

Size reductions of Appendix A, and how the plan stays exactly feasible:

* start variables exist only for s_j <= t <= m_j (variables only where the
  job can be active);
* *duration-scaled time steps*: job j's candidate start times are its submit
  time s_j, its cut-off m_j, and the points of a grid of step
  ``step_s * 2**k`` strictly between them, with k the largest integer such
  that the step is at most ``d_j / slots_per_duration`` (so a 10-hour job gets
  about as many candidates per unit of its own duration as a 10-minute one).
  Rounding s_j up and m_j down to the job's grid is what keeps the
  no-slowdown guarantee: every candidate lies in [s_j, m_j];
* *exact capacity accounting*: the load of a set of jobs only rises at a
  start, so checking the capacity at every candidate start time (the union of
  all jobs' candidates) checks it at every instant. Candidate (j, t) counts
  against the check point u iff t <= u < t + d_j (half-open intervals, as the
  simulator runs them). Check points where even the largest possible load
  fits are dropped; jobs with a single candidate are constants.

The FCFS schedule is always a feasible solution (each job's m_j is a
candidate and the FCFS loads fit each pool's quota); it, or a given warm
start, is the solver's starting solution where the backend takes one, and if
the solver finds nothing within the time limit the result falls back to it
and says so. Every returned plan is re-checked
exactly (:func:`check_plan`) at full time resolution.

How large it gets (measured on this 2-core machine with
``benchmarks/bench_oracle.py`` and the Figure 5 run; step 300 s, 4 slots per
duration). The 3-day base workload (4 pools x 8 GPUs, ~350 jobs) gives
~12k binaries, ~1.1k capacity rows and ~170k nonzeros, built in < 0.1 s;
8 pools (~700 jobs): ~27k binaries, ~460k nonzeros. Solve times vary
enormously with the seed: HiGHS (2 threads, no warm start) proved optimality
in 8-25 s for seed 0 of base, higher-load and more-queues, but found *no*
solution in 300 s for 5 of the 9 Figure 5 instances. Hence the warm start
(see :class:`OraclePolicy`): with it the oracle never returns a plan worse than
SIA_VC's (beta = 0), but its gap is often far from 0 (weak bounds): on
such instances the oracle is "the best plan found", not a proven optimum.
Instances of a few dozen jobs solve to optimality in well under a second.
The 2-day base workload, seed 0 (255 jobs, 19k binaries, 243k nonzeros;
2026-11-24, ``benchmarks/bench_oracle.py --cases base:2``): HiGHS stopped by
a 60 s wall clock found no plan (FCFS fallback, 2845 h of queueing); CP-SAT
on one worker, warm-started from SIA_VC (129 h) and stopped after 20
deterministic seconds, returns a 73.6 h plan with a reported gap of 0.415,
the same plan in two runs under different machine loads.

Reproducibility: CP-SAT stops on ``work_limit`` (deterministic seconds, a
count of its own work), never on the wall clock unless ``time_limit_s`` (a
safety bound) runs out first, which ``OracleResult.reproducible`` reports.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from sia.data.errors import ConfigError
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.needs import PolicyNeeds
from sia.scheduler.core.view import SimView, Start, TraceArrays
from sia.scheduler.policies.siavc.vst import fcfs_baseline_starts

_EPS = 1e-6  # seconds of float slack when comparing times


@dataclass
class OracleResult:
    """The oracle's plan and how good it is.

    - ``start_s``: float64 [n], the planned start time of each job (s).
    - ``objective_s``: total queueing delay of the plan, sum(start - submit), seconds (exact).
    - ``solver_objective``: the solver's objective (delay plus beta * fairness term), seconds.
    - ``best_bound``: the solver's proven lower bound on ``solver_objective``.
    - ``gap``: relative gap (objective - bound) / max(objective, 1); 0 when proven optimal.
    - ``status``: "optimal", "feasible" (time limit hit with a solution),
      "fallback-warm-start" (no solution in time: the warm start's feasible
      starts are returned) or "fallback-fcfs" (no solution and no warm start:
      the FCFS starts are returned).
    - ``fallback``: True when the solver found nothing and the plan is the warm start or FCFS.
    - ``fcfs_delay_s``: total queueing delay of the cut-off (FCFS) schedule, seconds.
    - ``stats``: model size and timings (variables, rows, nonzeros, build/solve seconds).
    - ``reproducible``: False when the wall-clock limit stopped the solver (the same
      call may then return another plan); True when a proof of optimality or a
      deterministic work limit did.
    """

    start_s: np.ndarray
    objective_s: float
    solver_objective: float
    best_bound: float
    gap: float
    status: str
    fallback: bool
    fcfs_delay_s: float
    stats: dict[str, float] = field(default_factory=dict)
    reproducible: bool = True


def job_step_s(duration_s: np.ndarray, step_s: float, slots_per_duration: float) -> np.ndarray:
    """Return float64 [n]: each job's candidate-start grid step (s), a power-of-two multiple of ``step_s``.

    The step is the largest ``step_s * 2**k`` (k >= 0) not above
    ``duration / slots_per_duration``; jobs shorter than that get ``step_s``.
    """
    ratio = np.asarray(duration_s, dtype=np.float64) / (step_s * slots_per_duration)
    k = np.floor(np.log2(np.maximum(ratio, 1.0)))
    return step_s * np.exp2(k)


def candidate_starts(submit: float, cutoff: float, step: float) -> np.ndarray:
    """Return the sorted candidate start times (s) of one job: s, the grid points in (s, m), and m."""
    if cutoff <= submit + _EPS:
        return np.array([submit])
    first = math.floor(submit / step) + 1
    last = math.ceil(cutoff / step) - 1
    grid = np.arange(first, last + 1, dtype=np.float64) * step if last >= first else np.empty(0)
    grid = grid[(grid > submit) & (grid < cutoff)]
    return np.concatenate([[submit], grid, [cutoff]])


def check_plan(
    submit_s: np.ndarray,
    duration_s: np.ndarray,
    num_gpus: np.ndarray,
    capacity: int,
    start_s: np.ndarray,
    cutoff_s: np.ndarray | None = None,
) -> list[str]:
    """Return the violations of a plan (empty when it is feasible), checked at full resolution.

    Checks every job starts at or after its submit time, at or before its
    cut-off (when given), and that at no instant the running jobs (each on
    ``[start, start + duration)``) hold more than ``capacity`` GPUs.
    """
    submit_s, duration_s = np.asarray(submit_s, float), np.asarray(duration_s, float)
    start_s, num_gpus = np.asarray(start_s, float), np.asarray(num_gpus, np.int64)
    problems = []
    early = np.flatnonzero(start_s < submit_s - _EPS)
    if early.size:
        problems.append(f"{early.size} job(s) start before they arrive, e.g. position {early[0]}")
    if cutoff_s is not None:
        late = np.flatnonzero(start_s > np.asarray(cutoff_s, float) + _EPS)
        if late.size:
            problems.append(f"{late.size} job(s) start after their cut-off, e.g. position {late[0]}")
    # Sweep: at equal times ends (-gpus) come before starts (+gpus).
    times = np.concatenate([start_s + duration_s, start_s])
    delta = np.concatenate([-num_gpus, num_gpus])
    kind = np.concatenate([np.zeros_like(num_gpus), np.ones_like(num_gpus)])
    order = np.lexsort((kind, times))
    load = np.cumsum(delta[order])
    if load.size and load.max() > capacity:
        i = int(np.argmax(load))
        problems.append(f"{int(load[i])} GPUs in use at t={times[order][i]:.3f}s > capacity {capacity}")
    return problems


@dataclass
class _Model:
    """The MILP in arrays: one binary per candidate of a job with a choice (``var_cands``).

    - ``cost``: each variable's queueing delay (s); ``one_job``: its job (constraint (9)).
    - ``cap_rows`` / ``cap_vars`` / ``cap_coef`` / ``cap_rhs``: the capacity rows (12), one
      entry per (row, variable) with the job's GPUs, and each row's GPUs left by fixed jobs.
    - ``fair``: the fairness rows (13) or None; ``hint``: 0/1 per variable, the starting plan.
    """

    cost: np.ndarray
    one_job: np.ndarray
    cap_rows: np.ndarray
    cap_vars: np.ndarray
    cap_coef: np.ndarray
    cap_rhs: np.ndarray
    fair: dict | None
    hint: np.ndarray


@dataclass
class _Candidates:
    """Every job's candidate starts laid end to end (job, time), with each job's first
    position and count; ``var_of`` maps a candidate to its variable (-1: a fixed job)."""

    job: np.ndarray
    time: np.ndarray
    first: np.ndarray
    counts: np.ndarray
    var_cands: np.ndarray
    var_of: np.ndarray


@dataclass
class _Solved:
    """What a backend returns: the 0/1 solution (None if it found none), objective, bound,
    status ("optimal", "feasible" or "none") and whether its stop is reproducible."""

    sol: np.ndarray | None
    objective: float
    bound: float
    status: str
    reproducible: bool


def _check_options(step_s: float, slots_per_duration: float, beta: float, solver: str,
                   work_limit: float | None) -> None:
    """Raise a one-line ConfigError naming the first bad oracle option."""
    if not step_s > 0 or not slots_per_duration > 0:
        raise ConfigError(f"oracle: step_s and slots_per_duration must be > 0, got {step_s}, "
                          f"{slots_per_duration}")
    if beta < 0:
        raise ConfigError(f"oracle: beta must be >= 0, got {beta}")
    if solver not in ("cp-sat", "highs", "scip"):
        raise ConfigError(f"oracle: solver must be 'highs', 'cp-sat' or 'scip', got {solver!r}")
    if work_limit is not None and not work_limit > 0:
        raise ConfigError(f"oracle: work_limit must be > 0 (CP-SAT deterministic seconds) or "
                          f"null, got {work_limit}")


def _candidates(submit: np.ndarray, cutoff: np.ndarray, dur: np.ndarray, step_s: float,
                slots_per_duration: float, warm: np.ndarray | None) -> _Candidates:
    """Each job's candidate starts on its duration-scaled grid (plus its warm start)."""
    steps = job_step_s(dur, step_s, slots_per_duration)
    cands = [candidate_starts(float(submit[j]), float(cutoff[j]), float(steps[j]))
             for j in range(submit.shape[0])]
    if warm is not None:
        cands = [np.unique(np.append(c, warm[j])) for j, c in enumerate(cands)]
    counts = np.array([c.shape[0] for c in cands], dtype=np.int64)
    job = np.repeat(np.arange(submit.shape[0]), counts)
    var_cands = np.flatnonzero(counts[job] > 1)  # candidates of jobs that have a choice
    var_of = np.full(job.shape[0], -1, dtype=np.int64)
    var_of[var_cands] = np.arange(var_cands.shape[0])
    first = np.concatenate([[0], np.cumsum(counts)[:-1]]).astype(np.int64)
    return _Candidates(job, np.concatenate(cands), first, counts, var_cands, var_of)


def _coverage(c: _Candidates, dur: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (check points s, entry candidate, entry row): candidate (j, t) covers check
    point u iff t <= u < t + d_j; the check points are every candidate start."""
    points = np.unique(c.time)
    lo = np.searchsorted(points, c.time, side="left")
    hi = np.searchsorted(points, c.time + dur[c.job], side="left")
    span = hi - lo
    ent_cand = np.repeat(np.arange(c.time.shape[0]), span)
    ent_row = np.arange(ent_cand.shape[0]) - np.repeat(np.cumsum(span) - span, span) + lo[ent_cand]
    return points, ent_cand, ent_row


def _capacity_rows(c: _Candidates, ent_cand: np.ndarray, ent_row: np.ndarray, n_rows: int,
                   gpus: np.ndarray, capacity: int) -> tuple[np.ndarray, ...]:
    """Return (rows, variables, coefficients, right-hand sides) of constraint (12), without the
    rows where even the largest possible load (each job counted once) fits."""
    ent_job = c.job[ent_cand]
    key = np.unique(ent_job * n_rows + ent_row)
    max_load = np.bincount(key % n_rows, weights=gpus[key // n_rows], minlength=n_rows)
    fixed = c.var_of[ent_cand] < 0
    fixed_load = np.bincount(ent_row[fixed], weights=gpus[ent_job[fixed]], minlength=n_rows)
    has_var = np.bincount(ent_row[~fixed], minlength=n_rows) > 0
    kept = np.flatnonzero(has_var & (max_load > capacity))
    row_map = np.full(n_rows, -1, dtype=np.int64)
    row_map[kept] = np.arange(kept.shape[0])
    use = ~fixed & (row_map[ent_row] >= 0)
    return (row_map[ent_row[use]], c.var_of[ent_cand[use]], gpus[ent_job[use]],
            capacity - fixed_load[kept])


def _fairness_rows(c: _Candidates, ent_cand: np.ndarray, ent_row: np.ndarray,
                   points: np.ndarray, end_s: float, gpus: np.ndarray, pool: np.ndarray,
                   quotas: np.ndarray) -> dict:
    """Constraint (13) per (pool, check point) with variables: c_i * alpha_t >= load; alpha_t
    is bounded below by the fixed jobs' load share everywhere, and weighted by the time (s)
    until the next check point (the last one until ``end_s``)."""
    n_rows = points.shape[0]
    ent_job = c.job[ent_cand]
    fixed = c.var_of[ent_cand] < 0
    e_pool = pool[ent_job]
    pool_fixed = np.zeros((quotas.shape[0], n_rows))
    np.add.at(pool_fixed, (e_pool[fixed], ent_row[fixed]), gpus[ent_job[fixed]])
    ukeys, frow = np.unique(e_pool[~fixed] * n_rows + ent_row[~fixed], return_inverse=True)
    return dict(
        weight=np.diff(np.concatenate([points, [max(points[-1], end_s)]])),
        alpha_lb=(pool_fixed / np.maximum(quotas, 1)[:, None]).max(axis=0),
        n_rows=ukeys.shape[0], rows=frow, vars=c.var_of[ent_cand[~fixed]],
        coef=gpus[ent_job[~fixed]], point=ukeys % n_rows, pool=ukeys // n_rows,
        rhs_fixed=pool_fixed[ukeys // n_rows, ukeys % n_rows],
    )


def _build_model(submit: np.ndarray, dur: np.ndarray, gpus: np.ndarray, pool: np.ndarray,
                 quotas: np.ndarray, cutoff: np.ndarray, c: _Candidates, beta: float,
                 start_plan: np.ndarray) -> tuple[_Model, dict[str, float]]:
    """Return the MILP over candidates ``c`` (hinting ``start_plan``, a plan made of
    candidates) and its size."""
    capacity = int(quotas.sum())
    points, ent_cand, ent_row = _coverage(c, dur)
    cap_rows, cap_vars, cap_coef, cap_rhs = _capacity_rows(c, ent_cand, ent_row,
                                                           points.shape[0], gpus, capacity)
    fair = None
    if beta > 0:
        fair = _fairness_rows(c, ent_cand, ent_row, points, float((cutoff + dur).max()), gpus,
                              pool, quotas)
    pick = np.flatnonzero(c.time == start_plan[c.job])
    hint = np.zeros(c.var_cands.shape[0], dtype=np.int64)
    hint[c.var_of[pick[c.var_of[pick] >= 0]]] = 1
    model = _Model((c.time - submit[c.job])[c.var_cands], c.job[c.var_cands], cap_rows, cap_vars,
                   cap_coef, cap_rhs, fair, hint)
    stats = dict(jobs=float(submit.shape[0]), variables=float(c.var_cands.shape[0]),
                 capacity_rows=float(cap_rhs.shape[0]), nonzeros=float(cap_vars.shape[0]),
                 check_points=float(points.shape[0]))
    return model, stats


def solve_oracle(
    submit_s: np.ndarray,
    duration_s: np.ndarray,
    num_gpus: np.ndarray,
    pool_idx: np.ndarray,
    quotas: np.ndarray,
    cutoff_s: np.ndarray,
    *,
    step_s: float = 300.0,
    slots_per_duration: float = 4.0,
    beta: float = 0.0,
    time_limit_s: float = 600.0,
    work_limit: float | None = 20.0,
    solver: str = "highs",
    threads: int = 1,
    seed: int = 0,
    warm_start_s: np.ndarray | None = None,
) -> OracleResult:
    """Solve the Figure 19 MILP; return an :class:`OracleResult` (start times in seconds).

    ``cutoff_s`` are the latest allowed starts m_j (the FCFS baseline starts,
    see :func:`sia.scheduler.policies.siavc.vst.fcfs_baseline_starts`); capacity is
    ``sum(quotas)`` GPUs. ``beta > 0`` adds constraint (13) with one
    fairness multiplier alpha_t >= pool i's load / c_i per check point t,
    weighted in the objective by the time (s) until the next check point.
    ``solver`` is "highs" (the HiGHS MIP solver bundled with OR-Tools), "scip"
    or "cp-sat" (alpha then in steps of 1/1000).

    Limits and reproducibility: CP-SAT stops after ``work_limit`` deterministic
    seconds (its own work count, independent of the machine's load; with
    ``threads`` > 1 its workers interleave deterministically), so a run is
    reproducible for a seed; ``time_limit_s`` (wall clock) is a safety bound
    for every backend. A result stopped by the wall clock (any backend without
    a proof of optimality in time, or CP-SAT with ``work_limit`` None or too
    large) has ``reproducible`` False: the same call may give another plan.

    ``warm_start_s`` (optional, e.g. SIA_VC's starts) adds each job's given
    start to its candidates and is the solver's starting solution when it is a
    feasible plan within [s_j, m_j] (else the FCFS plan is); the HiGHS backend
    cannot take a starting solution (OR-Tools 9.15's wrapper crashes on
    hints), so use "cp-sat" or "scip" with a warm start. Raises ConfigError
    on bad options and RuntimeError if the solver's plan fails the exact
    feasibility check (a bug).
    """
    _check_options(step_s, slots_per_duration, beta, solver, work_limit)
    t0 = time.perf_counter()
    submit = np.asarray(submit_s, dtype=np.float64)
    dur = np.asarray(duration_s, dtype=np.float64)
    gpus = np.asarray(num_gpus, dtype=np.int64)
    pool = np.asarray(pool_idx, dtype=np.int64)
    quotas = np.asarray(quotas, dtype=np.int64)
    cutoff = np.maximum(np.asarray(cutoff_s, dtype=np.float64), submit)
    if submit.shape[0] == 0:
        return OracleResult(np.empty(0), 0.0, 0.0, 0.0, 0.0, "optimal", False, 0.0)
    warm = _feasible_warm_start(warm_start_s, submit, dur, gpus, int(quotas.sum()), cutoff)
    cands = _candidates(submit, cutoff, dur, step_s, slots_per_duration, warm)
    model, stats = _build_model(submit, dur, gpus, pool, quotas, cutoff, cands, beta,
                                cutoff if warm is None else warm)
    stats.update(build_s=time.perf_counter() - t0, warm_start=float(warm is not None))
    t1 = time.perf_counter()
    limits = dict(time_limit_s=time_limit_s, work_limit=work_limit, threads=threads, seed=seed)
    if solver == "cp-sat":
        solved = _solve_cpsat(model, beta, quotas, **limits)
    else:
        solved = _solve_mip(solver, model, beta, quotas, **limits)
    stats["solve_s"] = time.perf_counter() - t1
    return _result(solved, cands, submit, dur, gpus, int(quotas.sum()), cutoff, warm, beta, stats)


def _feasible_warm_start(warm_start_s: np.ndarray | None, submit: np.ndarray, dur: np.ndarray,
                         gpus: np.ndarray, capacity: int, cutoff: np.ndarray) -> np.ndarray | None:
    """Return the warm start clipped to [s_j, m_j] if it is a feasible plan, else None."""
    if warm_start_s is None:
        return None
    warm = np.asarray(warm_start_s, dtype=np.float64)
    if warm.shape != submit.shape or check_plan(submit, dur, gpus, capacity, warm, cutoff):
        return None  # not a feasible plan: ignore it, hint FCFS
    return np.clip(warm, submit, cutoff)


def _result(solved: _Solved, c: _Candidates, submit: np.ndarray, dur: np.ndarray,
            gpus: np.ndarray, capacity: int, cutoff: np.ndarray, warm: np.ndarray | None,
            beta: float, stats: dict[str, float]) -> OracleResult:
    """Turn a backend's answer into the plan (or the fallback), checked at full resolution."""
    start = cutoff.copy()
    status, obj, bound = solved.status, solved.objective, solved.bound
    fallback = solved.sol is None
    if fallback and warm is not None:
        start = warm.copy()
        status, obj, bound = "fallback-warm-start", float((warm - submit).sum()), float("nan")
    elif fallback:
        status, obj, bound = "fallback-fcfs", float((cutoff - submit).sum()), float("nan")
    else:
        chosen = c.var_cands[solved.sol > 0.5]
        start[c.job[chosen]] = c.time[chosen]
        one = c.counts == 1
        start[one] = c.time[c.first[one]]
    if (not fallback and warm is not None and beta == 0
            and float((warm - submit).sum()) < float((start - submit).sum())):
        start = warm.copy()  # the solver did not even reach its starting solution
        stats["kept_warm_start"] = 1.0
    problems = check_plan(submit, dur, gpus, capacity, start, cutoff)
    if problems:
        raise RuntimeError("oracle: the solver's plan is infeasible: " + "; ".join(problems))
    gap = 0.0 if status == "optimal" else (
        float("nan") if fallback else max(0.0, (obj - bound) / max(abs(obj), 1.0)))
    return OracleResult(start, float((start - submit).sum()), float(obj), float(bound), gap,
                        status, fallback, float((cutoff - submit).sum()), stats,
                        reproducible=solved.reproducible)


def _groups(keys: np.ndarray, n: int | None = None) -> list[np.ndarray]:
    """Return the positions of ``keys`` grouped by value (ascending), as index arrays; with
    ``n``, exactly one group per value 0..n-1 (empty where absent)."""
    order = np.argsort(keys, kind="stable")
    if n is None:
        return [g for g in np.split(order, np.flatnonzero(np.diff(keys[order])) + 1) if g.size]
    splits = np.searchsorted(keys[order], np.arange(n + 1))
    return [order[splits[r]:splits[r + 1]] for r in range(n)]


def _solve_cpsat(m: _Model, beta: float, quotas: np.ndarray, *, time_limit_s: float,
                 work_limit: float | None, threads: int, seed: int) -> _Solved:
    """Solve with CP-SAT under ``work_limit`` deterministic seconds (and the wall-clock cap)."""
    from ortools.sat.python import cp_model

    md = cp_model.CpModel()
    x = [md.new_bool_var(f"x{i}") for i in range(m.cost.shape[0])]
    for grp in _groups(m.one_job):
        md.add_exactly_one(x[i] for i in grp.tolist())
    for r, sl in enumerate(_groups(m.cap_rows, m.cap_rhs.shape[0])):
        md.add(cp_model.LinearExpr.weighted_sum([x[v] for v in m.cap_vars[sl].tolist()],
                                                m.cap_coef[sl].tolist()) <= int(m.cap_rhs[r]))
    obj = cp_model.LinearExpr.weighted_sum(x, m.cost.tolist())
    if m.fair is not None:
        obj = obj + _cpsat_fairness(md, x, m.fair, beta, quotas)
    md.minimize(obj)
    for i, h in enumerate(m.hint.tolist()):
        md.add_hint(x[i], h)
    s = cp_model.CpSolver()
    s.parameters.max_time_in_seconds = float(time_limit_s)
    if work_limit is not None:
        s.parameters.max_deterministic_time = float(work_limit)
    s.parameters.num_workers = int(threads)
    s.parameters.interleave_search = int(threads) > 1  # deterministic for any worker count
    s.parameters.random_seed = int(seed) % 2**31  # CP-SAT takes an int32; seeds reach 2^32
    st = s.solve(md)
    reproducible = st == cp_model.OPTIMAL or (
        work_limit is not None and s.wall_time < 0.98 * float(time_limit_s))
    if st not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return _Solved(None, float("nan"), float("nan"), "none", reproducible)
    sol = np.array([s.value(v) for v in x], dtype=np.int64)
    return _Solved(sol, s.objective_value, s.best_objective_bound,
                   "optimal" if st == cp_model.OPTIMAL else "feasible", reproducible)


def _cpsat_fairness(md, x, fair: dict, beta: float, quotas: np.ndarray):
    """Add constraint (13) to CP-SAT model ``md`` (alpha in steps of 1/1000); return its
    objective term."""
    from ortools.sat.python import cp_model

    scale = 1000
    alpha = []
    for t in range(fair["weight"].shape[0]):
        lb = math.ceil(fair["alpha_lb"][t] * scale - 1e-9)
        alpha.append(md.new_int_var(lb, max(lb, int(scale * quotas.sum())), f"a{t}"))
    cvals = quotas[fair["pool"]]
    for r, sl in enumerate(_groups(fair["rows"], fair["n_rows"])):
        expr = cp_model.LinearExpr.weighted_sum(
            [x[v] for v in fair["vars"][sl].tolist()], (scale * fair["coef"][sl]).tolist())
        md.add(expr + int(scale * fair["rhs_fixed"][r])
               <= int(cvals[r]) * alpha[int(fair["point"][r])])
    return cp_model.LinearExpr.weighted_sum(alpha, (beta * fair["weight"] / scale).tolist())


def _solve_mip(backend: str, m: _Model, beta: float, quotas: np.ndarray, *,
               time_limit_s: float, work_limit: float | None, threads: int,
               seed: int) -> _Solved:
    """Solve with a MIP solver through OR-Tools' linear solver wrapper (HiGHS or SCIP).

    Only the wall clock limits these backends (``work_limit`` is CP-SAT's), so a
    result is reproducible only when the solver proves optimality in time.
    HiGHS is used through OR-Tools' bundled copy: the separate ``highspy``
    wheel and OR-Tools cannot be loaded into one process (clashing HiGHS symbols).
    """
    from ortools.linear_solver import pywraplp

    s = pywraplp.Solver.CreateSolver("HIGHS" if backend == "highs" else "SCIP")
    if s is None:  # pragma: no cover - depends on the OR-Tools build
        raise ConfigError(f"oracle: OR-Tools has no {backend} backend in this build")
    s.SetTimeLimit(int(max(time_limit_s, 0.001) * 1000))
    s.SetNumThreads(int(threads))
    if backend == "scip":  # OR-Tools' HiGHS wrapper takes no parameter string
        s.SetSolverSpecificParametersAsString(f"randomization/randomseedshift = {int(seed)}")
    x = [s.BoolVar(f"x{i}") for i in range(m.cost.shape[0])]
    for grp in _groups(m.one_job):
        ct = s.Constraint(1.0, 1.0)
        for i in grp.tolist():
            ct.SetCoefficient(x[i], 1.0)
    for r, sl in enumerate(_groups(m.cap_rows, m.cap_rhs.shape[0])):
        ct = s.Constraint(-s.infinity(), float(m.cap_rhs[r]))
        for v, c in zip(m.cap_vars[sl].tolist(), m.cap_coef[sl].tolist(), strict=True):
            ct.SetCoefficient(x[v], float(c))
    objective = s.Objective()
    for i, c in enumerate(m.cost.tolist()):
        objective.SetCoefficient(x[i], c)
    if m.fair is not None:
        _mip_fairness(s, x, objective, m.fair, beta, quotas)
    objective.SetMinimization()
    if backend != "highs":  # OR-Tools 9.15's HiGHS wrapper crashes on SetHint
        s.SetHint(x, [float(v) for v in m.hint.tolist()])
    st = s.Solve()
    reproducible = st == pywraplp.Solver.OPTIMAL
    if st not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        return _Solved(None, float("nan"), float("nan"), "none", reproducible)
    sol = np.rint([v.solution_value() for v in x]).astype(np.int64)
    return _Solved(sol, objective.Value(), objective.BestBound(),
                   "optimal" if reproducible else "feasible", reproducible)


def _mip_fairness(s, x, objective, fair: dict, beta: float, quotas: np.ndarray) -> None:
    """Add constraint (13) and its objective term to the pywraplp solver ``s``."""
    alpha = [s.NumVar(float(lb), s.infinity(), f"a{t}")
             for t, lb in enumerate(fair["alpha_lb"].tolist())]
    cvals = quotas[fair["pool"]].astype(float)
    for r, sl in enumerate(_groups(fair["rows"], fair["n_rows"])):
        ct = s.Constraint(-s.infinity(), float(-fair["rhs_fixed"][r]))
        for v, c in zip(fair["vars"][sl].tolist(), fair["coef"][sl].tolist(), strict=True):
            ct.SetCoefficient(x[v], float(c))
        ct.SetCoefficient(alpha[int(fair["point"][r])], -float(cvals[r]))
    for t, w in enumerate((beta * fair["weight"]).tolist()):
        objective.SetCoefficient(alpha[t], w)


class OraclePolicy:
    """Replays the oracle MILP's plan (perfect information: true durations and future arrivals).

    ``reset`` computes the FCFS cut-offs (the same forward pass as the
    simulator's FCFS) and solves :func:`solve_oracle` once for the whole
    trace, warm-started (by default) from a SIA_VC replay of the same trace:
    SIA_VC's starts are added as candidates and given as the starting
    solution, so even a time-limited solve is at least as good as SIA_VC on
    total queueing delay (CP-SAT, the default solver, takes the hint). CP-SAT
    stops after ``work_limit`` deterministic seconds on one worker, so the plan
    is the same for a seed however loaded the machine is (``time_limit_s``, wall
    clock, is only a safety bound; ``result.reproducible`` says which one
    stopped it). ``decide`` starts every pending job whose planned start has
    come, and ``next_wakeup`` asks the simulator to call back at the next
    planned start. A job is opportunistic when its pool's dedicated use plus
    its width would exceed the quota. ``result`` holds the :class:`OracleResult`, and
    :meth:`facts` reports it.

    On buddy cells the plan is the count-level one (the MILP knows no cells):
    ``decide`` returns intents, the simulator's placer stage places them, and
    a start it refuses (the gang fits by count but no cell is free) goes back
    to the policy (:meth:`refused`) and is asked for again, ahead of later
    planned starts, at every following decision until it gets a cell. So on
    cells no job starts before its planned start, and one may start after it.
    """

    name = "oracle"
    perfect_information = True
    uses_ticks = False
    needs = PolicyNeeds(seed=True, locality=True)  # on cells, the simulator places its starts

    def __init__(self, *, step_s: float = 300.0, slots_per_duration: float = 4.0,
                 beta: float = 0.0, time_limit_s: float = 600.0,
                 work_limit: float | None = 20.0, solver: str = "cp-sat", threads: int = 1,
                 seed: int = 0, warm_start: str | None = "sia-vc"):
        if warm_start not in (None, "sia-vc", "fcfs"):
            raise ConfigError(f"oracle: warm_start must be 'sia-vc', 'fcfs' or null, got {warm_start!r}")
        self.options = dict(step_s=step_s, slots_per_duration=slots_per_duration, beta=beta,
                            time_limit_s=time_limit_s, work_limit=work_limit, solver=solver,
                            threads=threads, seed=seed)
        self.warm_start = warm_start
        self.result: OracleResult | None = None

    def reset(self, trace: TraceArrays, cluster: Cluster) -> None:
        """Compute the FCFS cut-offs and solve the MILP for ``trace``."""
        cutoff = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                      trace.quota)
        warm = None
        if self.warm_start == "sia-vc":
            from sia.scheduler.core.simulator import run_trace
            from sia.scheduler.policies.siavc.policy import SiaVCPolicy

            warm = run_trace(trace, Cluster(trace.quota), SiaVCPolicy()).start_time.copy()
        self.result = solve_oracle(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                   trace.quota, cutoff, warm_start_s=warm, **self.options)
        self._plan = self.result.start_s
        order = np.argsort(self._plan, kind="stable")
        self._order = order.tolist()
        self._times = self._plan[order].tolist()
        self._next = 0  # position in _order of the first job not asked for yet
        self._retry: list[tuple[float, int]] = []  # refused starts: (planned start, job), sorted
        self._gpus = trace.num_gpus.tolist()
        self._pool = trace.pool.tolist()
        self._quota = trace.quota.tolist()

    def facts(self) -> dict[str, Any]:
        """Return the solver's outcome of the last replay (JSON-ready; {} before any):
        ``oracle_status``, ``oracle_gap``, ``oracle_delay_h`` and ``fcfs_delay_h`` (total
        queueing delay, hours) and ``oracle_reproducible`` (False when a wall-clock limit
        stopped the solver)."""
        res = self.result
        if res is None:
            return {}
        return {"oracle_status": res.status, "oracle_gap": res.gap,
                "oracle_delay_h": res.objective_s / 3600, "fcfs_delay_h": res.fcfs_delay_s / 3600,
                "oracle_reproducible": res.reproducible}

    def decide(self, view: SimView) -> list[Start]:
        """Start every job whose planned start time is now (or passed): the starts the placer
        refused earlier first, in plan order, then the newly due ones."""
        now = view.now
        ded: dict[int, int] = {}
        retry, self._retry = self._retry, []
        due = [j for _, j in retry]
        times, order = self._times, self._order
        while self._next < len(order) and times[self._next] <= now:
            due.append(order[self._next])
            self._next += 1
        starts: list[Start] = []
        for j in due:
            p, g = self._pool[j], self._gpus[j]
            used = ded.get(p, view.used_dedicated_of(p))
            if used + g <= self._quota[p]:
                ded[p] = used + g
                starts.append(Start(j, False))
            else:
                ded[p] = used
                starts.append(Start(j, True))
        return starts

    def refused(self, jobs: list[int]) -> None:
        """Keep starts the placer refused (no cell) to ask for again at the next decision."""
        self._retry = sorted(self._retry + [(self._plan[j], j) for j in jobs])

    def next_wakeup(self, now: float) -> float | None:
        """Return the next planned start time after ``now`` (s), or None when all have been asked
        for (a refused start waits for the next arrival or completion, which frees cells)."""
        i = self._next
        return self._times[i] if i < len(self._times) and self._times[i] > now else None
