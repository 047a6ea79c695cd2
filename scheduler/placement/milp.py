"""TetriSched-style placement with plan-ahead: STRL ``sum`` of ``max`` of ``nCk`` compiled to a MILP.

The core (:func:`solve_strl`) is TetriSched's Algorithm 1 restricted to what
the placement layer needs: the global expression is a SUM over jobs of a MAX
over *options*; an option is an ``nCk`` leaf on one equivalence set with a
start slot, a duration in slots, the resources it consumes and a value. It
compiles to

* an indicator ``I_j`` per job and a binary ``x_jo`` per option with
  ``sum_o x_jo <= I_j`` (MAX: at most one option),
* demand folded into supply constraints: for every resource r and slot t in
  the plan-ahead window, ``sum of demand_o(r) x_jo over options running at t
  <= capacity_r(t)``,
* objective: maximise ``sum v_o x_jo`` (SUM),

and is solved by OR-Tools CP-SAT under a time limit (all data are integers),
warm-started from a hint (the previous plan), reporting objective, bound and gap.

The locality placer (:class:`MilpPlacer`) builds the options: time is cut
into slots of ``slot_s`` over ``[now, now + horizon_s)``; servers are grouped
into equivalence sets by which pool's dedicated cells they hold (none, or
pool p). The resources of a set are its fully free aligned cells of every
level at every slot (GPUs become free at ``busy_until``). A gang of level L
consumes ``2**(L - l)`` cells of each level l <= L: for power-of-two cells
these counts are exactly the condition for the gangs to pack, so the plan is
feasible cell by cell. A job's options are every (start slot, set); its value
falls with the wait and with the cost class of the set (the shared
:class:`~sia.scheduler.placement.costs.CostModel`'s dedicated-cell terms), so
"wait for the preferred cells" and "fall back now" compete inside one MAX.
Only options starting in slot 0 are launched; the rest are kept as the plan
that warm-starts the next call.
"""

from __future__ import annotations

import math
import time
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from ortools.sat.python import cp_model
from sia.scheduler.placement.costs import CostModel, pack_gangs
from sia.scheduler.placement.protocol import ClusterState, PlacementRequest, PlacementResult


@dataclass(frozen=True)
class Option:
    """One ``nCk`` leaf: start slot, duration in slots, resources consumed, value."""

    start: int
    duration: int
    demand: Mapping[Hashable, int]
    value: int


@dataclass
class StrlSolution:
    """Chosen option index per job (None: not scheduled), objective, bound, gap, status, seconds."""

    choice: list[int | None]
    objective: float
    bound: float
    gap: float
    status: str
    solve_s: float
    stats: dict = field(default_factory=dict)


def solve_strl(
    jobs: Sequence[Sequence[Option]],
    capacity: Mapping[Hashable, Sequence[int]],
    n_slots: int,
    *,
    time_limit_s: float = 1.0,
    hint: Mapping[int, int] | None = None,
    seed: int = 0,
    workers: int = 1,
    deterministic: bool = False,
) -> StrlSolution:
    """Compile SUM_j MAX_o nCk(option) to a MILP and solve it with CP-SAT.

    ``capacity[r][t]`` is what resource r has at slot t (0 <= t < n_slots).
    ``hint`` maps job index -> option index (the warm start). Raises
    RuntimeError if no solution is found within the time limit.
    """
    model = cp_model.CpModel()
    used: dict[tuple[Hashable, int], list] = {}
    objective = []
    xs: list[list] = []
    for j, options in enumerate(jobs):
        ind = model.new_bool_var(f"I_{j}")
        row = []
        for o, opt in enumerate(options):
            x = model.new_bool_var(f"x_{j}_{o}")
            row.append(x)
            objective.append(opt.value * x)
            for t in range(max(0, opt.start), min(n_slots, opt.start + opt.duration)):
                for r, amount in opt.demand.items():
                    used.setdefault((r, t), []).append(amount * x)
        model.add(sum(row) <= ind)
        xs.append(row)
    n_supply = 0
    for (r, t), terms in used.items():
        cap = capacity.get(r)
        limit = int(cap[t]) if cap is not None else 0
        model.add(sum(terms) <= limit)
        n_supply += 1
    model.maximize(sum(objective))
    if hint:
        for j, o in hint.items():
            for k, x in enumerate(xs[j]):
                model.add_hint(x, k == o)
    solver = cp_model.CpSolver()
    if deterministic:  # CP-SAT's own work measure: same answer on any machine (one worker)
        solver.parameters.max_deterministic_time = max(1e-3, float(time_limit_s))
        solver.parameters.num_workers = 1
    else:
        solver.parameters.max_time_in_seconds = max(1e-3, float(time_limit_s))
        solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    t0 = time.perf_counter()
    status = solver.solve(model)
    solve_s = time.perf_counter() - t0
    name = solver.status_name(status)
    if status not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        raise RuntimeError(f"MILP: no solution within {time_limit_s:.3f} s (status {name})")
    choice: list[int | None] = []
    for row in xs:
        picked = [k for k, x in enumerate(row) if solver.boolean_value(x)]
        choice.append(picked[0] if picked else None)
    obj = float(solver.objective_value)
    bound = float(solver.best_objective_bound)
    gap = abs(bound - obj) / max(1.0, abs(obj))
    stats = {"variables": sum(len(r) for r in xs) + len(xs), "supply_constraints": n_supply,
             "deterministic_time": float(solver.response_proto.deterministic_time)}
    return StrlSolution(choice, obj, bound, gap, name, solve_s, stats)


class MilpPlacer:
    """Plan-ahead placement over ``[now, now + horizon_s)`` (see the module docstring).

    ``wait_weight``: value lost per GPU per slot of waiting, in cost-model units.
    """

    name = "milp"

    def __init__(
        self,
        cost: CostModel | None = None,
        horizon_s: float = 3600.0,
        slot_s: float = 300.0,
        wait_weight: int = 4,
        seed: int = 0,
    ) -> None:
        if horizon_s <= 0 or slot_s <= 0 or slot_s > horizon_s:
            raise ValueError("MilpPlacer needs 0 < slot_s <= horizon_s")
        #: True (set by a chain with enforce_budget="work"): the whole budget is CP-SAT
        #: deterministic time (model building is not charged), one worker
        self.deterministic = False
        self.cost = cost or CostModel()
        self.horizon_s = horizon_s
        self.slot_s = slot_s
        self.n_slots = int(math.ceil(horizon_s / slot_s))
        self.wait_weight = wait_weight
        self.seed = seed
        self.plan: dict[str, tuple[float, int]] = {}  # job -> (absolute start s, set tag)

    def _sets(self, state: ClusterState) -> np.ndarray:
        """Equivalence-set tag per server: the smallest pool index with dedicated cells there, or -1."""
        topo = state.topology
        ded = state.dedicated_pool.reshape(topo.n_servers, topo.gpus_per_server)
        marked = np.where(ded >= 0, ded, np.iinfo(np.int32).max).min(axis=1)
        return np.where(marked == np.iinfo(np.int32).max, -1, marked).astype(np.int64)

    def _class_cost(self, req: PlacementRequest, tag: int, state: ClusterState) -> int:
        if req.dedicated:
            return 0 if tag >= 0 and tag == state.pool_index(req.pool) else self.cost.far_from_pool_penalty
        return self.cost.near_dedicated_penalty if tag >= 0 else 0

    def place(
        self, batch: Sequence[PlacementRequest], state: ClusterState, budget_s: float
    ) -> PlacementResult:
        """Plan the batch ahead and launch what starts now; stats report solve time, gap, hints."""
        t0 = time.perf_counter()
        tags = self._sets(state)
        set_tags = sorted(set(tags.tolist()))
        capacity = self._capacity(state, tags, set_tags)
        unplaced: dict[str, str] = {}
        jobs, meta, reqs = self._options(batch, state, capacity, set_tags, unplaced)
        hint = self._hints(reqs, meta, state)
        build_s = time.perf_counter() - t0
        try:
            limit = budget_s if self.deterministic else max(1e-3, budget_s - build_s)
            sol = solve_strl(jobs, capacity, self.n_slots, time_limit_s=limit, hint=hint,
                             seed=self.seed, deterministic=self.deterministic)
        except RuntimeError as err:
            return PlacementResult.failed(self.name, batch, str(err), elapsed_s=time.perf_counter() - t0)
        placements = self._launch(reqs, meta, sol, state, tags, unplaced)
        stats = {
            "solve_s": sol.solve_s, "build_s": build_s, "gap": sol.gap, "bound": sol.bound,
            "status": sol.status, "hinted": len(hint), "sets": len(set_tags), **sol.stats,
            "work_s": sol.stats["deterministic_time"],
        }
        return PlacementResult(
            self.name, placements, unplaced, elapsed_s=time.perf_counter() - t0,
            objective=sol.objective, stats=stats,
        )

    def _capacity(self, state: ClusterState, tags: np.ndarray, set_tags: list[int]
                  ) -> dict[tuple[int, int], np.ndarray]:
        """Free cells per (equivalence set, level) at each slot of the plan-ahead window."""
        topo = state.topology
        gps = topo.gpus_per_server
        T = self.n_slots
        # free mask at each slot
        if state.busy_until is not None:
            times = state.now + self.slot_s * np.arange(T)
            free_t = state.free[None, :] | (state.busy_until[None, :] <= times[:, None])
        else:
            free_t = np.repeat(state.free[None, :], T, axis=0)
        capacity: dict[tuple[int, int], np.ndarray] = {}
        for lv in topo.levels:
            cells = free_t.reshape(T, -1, 1 << lv).all(axis=2)  # [T, n_cells]
            if lv <= topo.server_level:
                cell_tag = np.repeat(tags, gps >> lv)
                cell_ok = np.ones_like(cell_tag, dtype=bool)
            else:
                k = 1 << (lv - topo.server_level)
                grouped = tags.reshape(-1, k)
                cell_tag = grouped[:, 0]
                cell_ok = (grouped == grouped[:, :1]).all(axis=1)
            for tag in set_tags:
                sel = (cell_tag == tag) & cell_ok
                capacity[(tag, lv)] = cells[:, sel].sum(axis=1)
        return capacity

    def _options(self, batch, state, capacity, set_tags, unplaced):
        """Each placeable job's options (start slot x equivalence set) as (options, their
        (slot, set) pairs, the requests); jobs without any go to ``unplaced``."""
        topo = state.topology
        T = self.n_slots
        jobs: list[list[Option]] = []
        meta: list[list[tuple[int, int]]] = []
        reqs: list[PlacementRequest] = []
        max_class = self.cost.near_dedicated_penalty + self.cost.far_from_pool_penalty
        for req in batch:
            try:
                level = topo.level_for(req.num_gpus)
            except ValueError as err:
                unplaced[req.job_id] = str(err)
                continue
            w = req.num_gpus
            dur = T if req.duration_s is None else max(1, int(math.ceil(req.duration_s / self.slot_s)))
            base = w * (max_class + self.wait_weight * T + 1)
            options, info = [], []
            for tag in set_tags:
                if not capacity[(tag, level)].any():
                    continue
                class_cost = self._class_cost(req, tag, state)
                for s in range(T):
                    if capacity[(tag, level)][s] == 0:
                        continue
                    demand = {(tag, lv): 1 << (level - lv) for lv in range(level + 1)}
                    value = base - w * (class_cost + self.wait_weight * s)
                    options.append(Option(s, dur, demand, value))
                    info.append((s, tag))
            if not options:
                unplaced[req.job_id] = f"no {1 << level}-GPU cell frees up within the plan-ahead window"
                continue
            jobs.append(options)
            meta.append(info)
            reqs.append(req)
        return jobs, meta, reqs

    def _hints(self, reqs, meta, state) -> dict[int, int]:
        """The previous plan's choice per job, as a solver hint (job position -> option)."""
        hint: dict[int, int] = {}
        for j, req in enumerate(reqs):
            prev = self.plan.get(req.job_id)
            if prev is None:
                continue
            slot = int(round((prev[0] - state.now) / self.slot_s))
            for o, (s, tag) in enumerate(meta[j]):
                if s == max(0, slot) and tag == prev[1]:
                    hint[j] = o
                    break
        return hint

    def _launch(self, reqs, meta, sol, state, tags, unplaced) -> dict[str, tuple[int, ...]]:
        """Launch the slot-0 choices packed per equivalence set, remember the rest as the
        plan; return the placements (the others go to ``unplaced`` with a reason)."""
        placements: dict[str, tuple[int, ...]] = {}
        free = state.free.copy()
        now_by_tag: dict[int, list[tuple[str, int]]] = {}
        new_plan: dict[str, tuple[float, int]] = {}
        for j, req in enumerate(reqs):
            o = sol.choice[j]
            if o is None:
                unplaced[req.job_id] = "no room for it in the plan-ahead window"
                continue
            s, tag = meta[j][o]
            if s == 0:
                now_by_tag.setdefault(tag, []).append((req.job_id, req.num_gpus))
            else:
                new_plan[req.job_id] = (state.now + s * self.slot_s, tag)
                unplaced[req.job_id] = f"planned to start in {s * self.slot_s:.0f} s; it waits for those cells"
        for tag, gangs in now_by_tag.items():
            placed, failed = pack_gangs(free, state.topology, gangs, tags == tag)
            placements.update(placed)
            for job_id in failed:
                unplaced[job_id] = "planned cells could not be packed (bug: cell counts should guarantee it)"
        self.plan = new_plan
        return placements
