"""Firmament-style placement by min-cost flow (OR-Tools ``SimpleMinCostFlow``).

The flow network (one unit of flow = one GPU)::

    job j (supply w_j) --cap w_j, cost 0--------> request aggregator RA(w, class)
    job j             --cap w_j, cost U_j-------> unscheduled node U_j --cap w_j--> sink
    RA(w, class)      --cap w x free cells, cost c(class, domain) per GPU--> (server, level)
    (server, level)   --cap GPUs in its free cells of that level-----------> server
                      (gangs wider than a server: RA --cap w--> aligned multi-server cell
                       --cap gpus per server--> each of its servers)
    server            --cap free GPUs------------> sink (supply -sum w_j)

Request aggregators group jobs of the same width and cost class (opportunistic,
or dedicated of pool p), as Firmament's network-aware policy groups tasks by
request; their arcs reach only servers (or multi-server cells) that have a
fully free aligned cell of the gang's level, with capacity ``w x`` that count.
Costs (:class:`~sia.scheduler.placement.CostModel`): best fit on free GPUs and
the dedicated-cell terms; ``U_j`` exceeds any placement cost, so the flow
places as many GPUs as fit, then as cheaply as possible.

Flow is fungible, so the gangs are re-formed after the solve: an aggregator
that sends ``f`` units to a server gives it ``f // w`` gangs (jobs taken in
batch order), and each server's gangs are packed into aligned free cells,
largest first (exact for power-of-two cells when cell counts allow). Jobs lost
to rounding or packing are retried in another round on the updated state,
while rounds still place jobs and the budget lasts.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from ortools.graph.python import min_cost_flow
from sia.scheduler.placement import (
    ClusterState,
    CostModel,
    PlacementRequest,
    PlacementResult,
    class_unit_costs,
    domain_tables,
    pack_gangs,
)


class MinCostFlowPlacer:
    """Batch placement by min-cost flow over request aggregators (see the module docstring)."""

    name = "mcf"

    def __init__(
        self, cost: CostModel | None = None, max_rounds: int = 4, tie_break: int = 64, seed: int = 0
    ) -> None:
        self.cost = cost or CostModel()
        self.max_rounds = max_rounds
        self.tie_break = tie_break
        self.seed = seed

    def place(
        self, batch: Sequence[PlacementRequest], state: ClusterState, budget_s: float
    ) -> PlacementResult:
        """Place ``batch`` on ``state``; stats report rounds, flow costs and graph sizes."""
        t0 = time.perf_counter()
        topo = state.topology
        placements: dict[str, tuple[int, ...]] = {}
        unplaced: dict[str, str] = {}
        ranks = {r.job_id: k for k, r in enumerate(batch)}
        todo = []
        for r in batch:
            try:
                topo.level_for(r.num_gpus)
                todo.append(r)
            except ValueError as err:
                unplaced[r.job_id] = str(err)
        free = state.free.copy()
        stats: dict = {"rounds": 0, "flow_costs": [], "arcs": [], "nodes": [], "solve_s": []}
        lost_reason: dict[str, str] = {}
        while todo and stats["rounds"] < self.max_rounds:
            if stats["rounds"] and time.perf_counter() - t0 > budget_s:
                break
            stats["rounds"] += 1
            round_state = ClusterState(topo, free, state.dedicated_pool, state.pools, state.now)
            got, lost, info = self._round(todo, round_state, ranks, len(batch))
            for key in ("flow_costs", "arcs", "nodes", "solve_s"):
                stats[key].append(info[key])
            if info.get("failure"):
                return PlacementResult.failed(
                    self.name, batch, info["failure"], elapsed_s=time.perf_counter() - t0, stats=stats
                )
            for job_id, gpus in got.items():
                placements[job_id] = gpus
                level = topo.level_for(len(gpus))
                first = (gpus[0] >> level) << level
                free[first : first + (1 << level)] = False
            lost_reason.update(lost)
            todo = [r for r in todo if r.job_id not in got]
            if not got:
                break
        for r in todo:
            unplaced[r.job_id] = lost_reason.get(r.job_id, "no free cell of the gang's size")
        return PlacementResult(
            self.name, placements, unplaced, elapsed_s=time.perf_counter() - t0,
            objective=stats["flow_costs"][0] if stats["flow_costs"] else None, stats=stats,
        )

    # ------------------------------------------------------------------
    def _round(self, todo, state, ranks, batch_size):
        topo = state.topology
        gps = topo.gpus_per_server
        n_servers = topo.n_servers
        n = len(todo)
        widths = np.array([r.num_gpus for r in todo], dtype=np.int64)
        levels = np.array([topo.level_for(int(w)) for w in widths], dtype=np.int64)
        # class key: -1 opportunistic, else pool index of a dedicated job (-2: dedicated, unknown pool)
        cls = np.array(
            [(state.pool_index(r.pool) if state.pool_index(r.pool) >= 0 else -2) if r.dedicated else -1 for r in todo],
            dtype=np.int64,
        )
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for k in range(n):
            groups[(int(widths[k]), int(cls[k]))].append(k)  # members in batch order
        # node numbering: jobs of one (width, class) are interchangeable for the flow,
        # so the class's aggregator is itself the supply node (no node per job)
        sink = 0
        ra0 = 1
        ra_keys = sorted(groups)
        srv0 = ra0 + len(ra_keys)
        next_node = srv0 + n_servers
        multi_cell0: dict[int, int] = {}
        for lv in sorted({int(lv) for lv in levels if lv > topo.server_level}):
            multi_cell0[lv] = next_node
            next_node += topo.n_cells(lv)
        # one node per (server, level) shared by every aggregator of that level, so
        # aggregators of different classes cannot together use more cells than exist
        level_node0: dict[int, int] = {}
        for lv in sorted({int(lv) for lv in levels if lv <= topo.server_level}):
            level_node0[lv] = next_node
            next_node += n_servers
        tails, heads, caps, costs = [], [], [], []

        def add(t, h, c, u):
            tails.append(np.asarray(t, dtype=np.int64).ravel())
            heads.append(np.asarray(h, dtype=np.int64).ravel())
            caps.append(np.asarray(c, dtype=np.int64).ravel())
            costs.append(np.asarray(u, dtype=np.int64).ravel())

        unsched = np.array(
            [self.cost.unscheduled_unit_cost(topo, ranks[r.job_id], batch_size) for r in todo], dtype=np.int64
        )
        # unscheduled arcs RA -> sink: one per distinct unscheduled cost in the class,
        # capacity w x its jobs (one arc per class unless priority_weight > 0)
        ra_supply = np.zeros(len(ra_keys), dtype=np.int64)
        for g, key in enumerate(ra_keys):
            members = np.asarray(groups[key], dtype=np.int64)
            ra_supply[g] = key[0] * members.size
            values, counts = np.unique(unsched[members], return_counts=True)
            add(np.full(values.size, ra0 + g), np.full(values.size, sink), counts * key[0], values)
        # RA -> servers / multi-server cells
        total_units = int(widths.sum())
        ra_arc_ranges = []
        for g, (w, c) in enumerate(ra_keys):
            lv = topo.level_for(w)
            req = todo[groups[(w, c)][0]]
            free_dom, any_ded, has_pool, dlev = domain_tables(state, lv)
            cells = state.free.reshape(-1, 1 << lv).all(axis=1)
            if lv <= topo.server_level:
                per_target = cells.reshape(n_servers, -1).sum(axis=1)
                targets = np.flatnonzero(per_target)
                dom = targets >> (dlev - topo.server_level)
                cap = per_target[targets] * w
                heads_g = level_node0[lv] + targets
            else:
                targets = np.flatnonzero(cells)
                dom = targets >> (dlev - lv)
                cap = np.full(targets.size, w)
                heads_g = multi_cell0[lv] + targets
            unit = class_unit_costs(state, self.cost, req, free_dom[dom], any_ded[dom], has_pool[dom])
            # Exact pruning: the batch uses at most `units` GPUs, which touch at most
            # `units` cells of this level; so if the cheapest targets kept hold more
            # cells than that, any gang sent to a dearer target could move to an
            # untouched kept cell at no higher cost. The optimum is unchanged.
            n_cells_t = cap // w
            order = np.argsort(unit, kind="stable")
            enough = np.searchsorted(np.cumsum(n_cells_t[order]), total_units + 1)
            keep = np.sort(order[: enough + 1])
            targets, heads_g, cap, unit = targets[keep], heads_g[keep], cap[keep], unit[keep]
            start = sum(a.size for a in tails)
            add(np.full(targets.size, ra0 + g), heads_g, cap, unit)
            ra_arc_ranges.append((start, targets))
        for lv, base in level_node0.items():
            per_server = state.free.reshape(-1, 1 << lv).all(axis=1).reshape(n_servers, -1).sum(axis=1)
            has = np.flatnonzero(per_server)
            add(base + has, srv0 + has, per_server[has] << lv, np.zeros(has.size))
        for lv, base in multi_cell0.items():
            k = 1 << (lv - topo.server_level)
            cells_idx = np.arange(topo.n_cells(lv))
            add(np.repeat(base + cells_idx, k), srv0 + np.arange(n_servers), np.full(n_servers, gps), np.zeros(n_servers))
        server_free = state.free.reshape(n_servers, gps).sum(axis=1)
        add(srv0 + np.arange(n_servers), np.full(n_servers, sink), server_free, np.zeros(n_servers))

        tail = np.concatenate(tails)
        head = np.concatenate(heads)
        cap = np.concatenate(caps)
        cost = np.concatenate(costs)
        # Break ties between equal-cost flows with a small seeded perturbation on the
        # aggregator arcs: costs are scaled by K = units x P and get a term < P per
        # unit, which changes no optimum of the true costs but makes a fractional
        # split of a gang between equally good servers (a degenerate optimum) unlikely.
        units = int(widths.sum())
        scale = units * self.tie_break
        if self.tie_break > 1 and int(cost.max(initial=0)) * scale * units < 2**62:
            ra_lo = ra_arc_ranges[0][0]  # the aggregator arcs are contiguous
            ra_hi = ra_lo + sum(t.size for _, t in ra_arc_ranges)
            noise = np.zeros(cost.size, dtype=np.int64)
            noise[ra_lo:ra_hi] = np.random.default_rng(self.seed).integers(0, self.tie_break, ra_hi - ra_lo)
            solve_cost = cost * scale + noise
        else:
            scale, solve_cost = 1, cost
        smcf = min_cost_flow.SimpleMinCostFlow()
        smcf.add_arcs_with_capacity_and_unit_cost(tail, head, cap, solve_cost)
        supplies = np.zeros(next_node, dtype=np.int64)
        supplies[ra0 : ra0 + len(ra_keys)] = ra_supply
        supplies[sink] = -int(widths.sum())
        smcf.set_nodes_supplies(np.arange(next_node, dtype=np.int64), supplies)
        ts = time.perf_counter()
        status = smcf.solve()
        solve_s = time.perf_counter() - ts
        info = {"flow_costs": None, "arcs": int(tail.size), "nodes": int(next_node), "solve_s": solve_s}
        if status != smcf.OPTIMAL:
            info["failure"] = f"min-cost flow solver status {status}"
            return {}, {}, info
        info["flow_costs"] = int(smcf.optimal_cost()) // scale
        # ---- extraction: gangs per aggregator target, jobs in batch order
        got: dict[str, tuple[int, ...]] = {}
        lost: dict[str, str] = {}
        per_domain: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
        for g, key in enumerate(ra_keys):
            w = key[0]
            start, targets = ra_arc_ranges[g]
            flows = smcf.flows(np.arange(start, start + targets.size, dtype=np.int64))
            lv = topo.level_for(w)
            slots = flows // w
            # gangs the aggregator carries in total; a split flow loses some to rounding,
            # so give those to targets that still have free cells, cheapest first
            extra = int(flows.sum()) // w - int(slots.sum())
            room = cap[start : start + targets.size] // w - slots
            order = np.argsort(cost[start : start + targets.size], kind="stable")
            for t in order:
                if extra <= 0:
                    break
                add_k = min(extra, int(room[t]))
                slots[t] += add_k
                extra -= add_k
            # the class's gangs go to its jobs in batch order: with priority_weight > 0
            # the flow leaves out the cheapest unscheduled arcs, i.e. the latest jobs
            members = groups[key]
            slot_targets = np.repeat(targets[order], slots[order])
            for k, tgt in zip(members, slot_targets, strict=False):
                per_domain[(lv if lv > topo.server_level else -1, int(tgt))].append((todo[k].job_id, w))
            for k in members[len(slot_targets):]:
                lost[todo[k].job_id] = "no free cell of the gang's size left for it in the flow"
        free = state.free.copy()
        for (lv, tgt), gangs in per_domain.items():
            span = gps if lv == -1 else 1 << lv
            placed, failed = pack_gangs(free, topo, gangs, gpu_range=(tgt * span, (tgt + 1) * span))
            got.update(placed)
            for job_id in failed:
                lost[job_id] = "gang did not fit its server's aligned free cells after flow extraction"
        return got, lost, info
