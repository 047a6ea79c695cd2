"""The placement chain: solvers tried in order, each with a time (or deterministic work) budget."""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sia.scheduler.placement.protocol import (
    ClusterState,
    InvalidPlacement,
    PlacementRequest,
    PlacementResult,
    PlacementSolver,
    validate_placement,
)


# ---------------------------------------------------------------------------- chain
@dataclass
class Attempt:
    """One solver's turn in a chain: what it placed, how long it took, why it stopped."""

    solver: str
    placed: list[str]
    elapsed_s: float
    failure: str | None = None
    timed_out: bool = False


class PlacementChain:
    """Try solvers in order; each gets ``budget_s`` per call and the jobs the previous ones left.

    An answer that fails :func:`validate_placement`, fails as a whole, or
    is over budget counts as that solver's failure, and its jobs fall through
    to the next solver. ``enforce_budget``: True checks the wall-clock time
    of each call (``clock`` returns seconds, injectable for tests); False
    checks nothing; ``"work"`` checks each answer's deterministic work
    estimate ``stats["work_s"]`` (seconds; see :data:`WORK_S_PER_UNIT`) and
    switches solvers with a ``deterministic`` attribute to deterministic
    limits (CP-SAT's ``max_deterministic_time``, no wall-clock round cut-off),
    so a replay's placements never depend on machine speed or load.
    """

    name = "chain"

    def __init__(
        self,
        solvers: Sequence[PlacementSolver],
        budget_s: float = 1.0,
        *,
        enforce_budget: bool | str = True,
        clock: Callable[[], float] = time.perf_counter,
    ) -> None:
        if not solvers:
            raise ValueError("a placement chain needs at least one solver")
        if enforce_budget not in (True, False, "work"):
            raise ValueError(f"enforce_budget must be True, False or 'work', not {enforce_budget!r}")
        self.solvers = list(solvers)
        if enforce_budget == "work":
            for solver in self.solvers:
                if hasattr(solver, "deterministic"):
                    solver.deterministic = True
        self.budget_s = budget_s
        self.enforce_budget = enforce_budget
        self.clock = clock

    def place(
        self, batch: Sequence[PlacementRequest], state: ClusterState, budget_s: float | None = None
    ) -> PlacementResult:
        """Place the batch; ``stats['attempts']`` lists each solver's :class:`Attempt`,
        ``stats['placed_by']`` maps job id -> solver name."""
        budget = self.budget_s if budget_s is None else budget_s
        start = self.clock()
        remaining = list(batch)
        placements: dict[str, tuple[int, ...]] = {}
        reasons: dict[str, list[str]] = {r.job_id: [] for r in batch}
        attempts: list[Attempt] = []
        placed_by: dict[str, str] = {}
        current = state
        for solver in self.solvers:
            if not remaining:
                break
            t0 = self.clock()
            try:
                res = solver.place(remaining, current, budget)
            except Exception as err:  # a solver crash is that solver's failure
                res = PlacementResult.failed(solver.name, remaining, f"error: {err!r}")
            elapsed = self.clock() - t0
            failure = res.failure
            timed_out = False
            if failure is None and self.enforce_budget == "work":
                work = res.stats.get("work_s")
                if work is None:
                    failure = "reports no deterministic work (stats['work_s'])"
                elif work > budget:
                    failure, timed_out = f"over work budget ({work:.3f} s > {budget:.3f} s)", True
            elif failure is None and self.enforce_budget and elapsed > budget:
                failure, timed_out = f"over budget ({elapsed:.3f} s > {budget:.3f} s)", True
            if failure is None:
                try:
                    validate_placement(res, remaining, current)
                except InvalidPlacement as err:
                    failure = f"invalid placement: {err}"
            if failure is not None:
                attempts.append(Attempt(solver.name, [], elapsed, failure, timed_out))
                for r in remaining:
                    reasons[r.job_id].append(f"{solver.name}: {failure}")
                continue
            attempts.append(Attempt(solver.name, sorted(res.placements), elapsed))
            for job_id, gpus in res.placements.items():
                placements[job_id] = tuple(gpus)
                placed_by[job_id] = solver.name
            for job_id, why in res.unplaced.items():
                reasons[job_id].append(f"{solver.name}: {why}")
            current = current.with_used(list(res.placements.values()))
            remaining = [r for r in remaining if r.job_id not in res.placements]
        unplaced = {r.job_id: "; ".join(reasons[r.job_id]) or "not tried" for r in remaining}
        all_failed = all(a.failure is not None for a in attempts) and bool(attempts)
        return PlacementResult(
            self.name,
            placements,
            unplaced,
            failure="every solver failed" if all_failed else None,
            elapsed_s=self.clock() - start,
            stats={"attempts": attempts, "placed_by": placed_by},
        )
