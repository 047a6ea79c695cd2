"""Firmament-style placement by min-cost flow (OR-Tools ``SimpleMinCostFlow``).

The flow network (one unit of flow = one GPU)::

    RA(w, class) (supply w x its jobs) --cap w x jobs, cost U--> sink   (unscheduled)
    RA(w, class) --cap w x cells, cost c(class, EC) per GPU--> EC(w, features)
    EC(w, f)     --cap w x free cells of the target--> (server, level)  or server
                 (gangs wider than a server: --cap w--> aligned multi-server
                  cell --cap gpus per server--> each of its servers)
    (server, level) --cap GPUs in its free cells of that level--> server
    server       --cap free GPUs--> sink (supply -sum of widths)

Request aggregators RA group jobs of the same width and cost class
(opportunistic, or dedicated of pool p), as Firmament's network-aware policy
groups tasks by request. Jobs of one aggregator are interchangeable for the
flow, so the aggregator itself carries their supply (no node per job), with
one unscheduled arc per distinct unscheduled cost ``U`` (one per class unless
``priority_weight > 0``). Targets (servers, or multi-server cells) holding a
fully free aligned cell of the gang's level are grouped per width into
equivalence classes EC of identical cost features (free GPUs, dedicated
flags of the domain), which cost the same for every job class, so an
aggregator needs one arc per EC rather than one per target. A (server, level)
node exists only where several widths share a level (e.g. 3 and 4); there it
keeps them to the cells that exist. For power-of-two widths the optimum equals
that of per-job nodes and per-target aggregator arcs; for widths sharing a
level the per-width caps make the relaxation tighter (still a lower bound on
any whole-gang placement).
Costs (:class:`~sia.scheduler.placement.costs.CostModel`): best fit on free GPUs and
the dedicated-cell terms; ``U`` exceeds any placement cost, so the flow
places as many GPUs as fit, then as cheaply as possible.

Flow is fungible, so the gangs are re-formed after the solve: an EC that sends
``f`` units to a target gives it ``f // w`` gang slots; each class takes
first the slots its own flow paid for, then rounding leftovers in its ECs,
cheapest first; its jobs take the gangs in batch order (with
``priority_weight > 0`` the flow leaves out the latest jobs, whose
unscheduled arcs are the cheapest). Each server's gangs are packed into
aligned free cells, largest first (exact for power-of-two cells when cell
counts allow). Jobs lost to rounding or packing are retried in another round
on the updated state, while rounds still place jobs and the budget lasts.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Sequence

import numpy as np
from ortools.graph.python import min_cost_flow
from sia.scheduler.placement.costs import CostModel, class_unit_costs, domain_tables, pack_gangs
from sia.scheduler.placement.protocol import (
    WORK_S_PER_UNIT,
    ClusterState,
    PlacementRequest,
    PlacementResult,
)


class MinCostFlowPlacer:
    """Batch placement by min-cost flow over request aggregators (see the module docstring)."""

    name = "mcf"

    def __init__(
        self, cost: CostModel | None = None, max_rounds: int = 4, tie_break: int = 64, seed: int = 0
    ) -> None:
        self.cost = cost or CostModel()
        #: True (set by a chain with enforce_budget="work"): rounds stop at max_rounds or when
        #: a round places nothing, never on the wall clock
        self.deterministic = False
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
            if stats["rounds"] and not self.deterministic and time.perf_counter() - t0 > budget_s:
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
        stats["work_s"] = (sum(stats["arcs"]) * WORK_S_PER_UNIT["mcf_arc"]
                           + len(batch) * WORK_S_PER_UNIT["mcf_job"])
        return PlacementResult(
            self.name, placements, unplaced, elapsed_s=time.perf_counter() - t0,
            objective=stats["flow_costs"][0] if stats["flow_costs"] else None, stats=stats,
        )

    # ------------------------------------------------------------------
    def _round(self, todo, state, ranks, batch_size):
        """One min-cost flow round: (placed {job: GPUs}, lost {job: reason}, info)."""
        r = _Round(todo, state)
        r.group_classes()
        r.equivalence_classes()
        r.class_ecs(self.cost)
        r.number_nodes()
        r.build_arcs(self.cost, ranks, batch_size)
        info = r.solve(self.tie_break, self.seed)
        if info.get("failure"):
            return {}, {}, info
        r.gang_slots()
        got, lost = r.assign_gangs()
        return got, lost, info


class _Round:
    """The steps of one round of :class:`MinCostFlowPlacer` (see the module docstring), in order:
    request classes, target equivalence classes per width, each class's cheapest ECs, node
    numbering, arcs, the solve, gang slots per EC, and the jobs' gangs packed into cells."""

    def __init__(self, todo, state):
        self.todo, self.state = todo, state
        self.topo = state.topology

    def group_classes(self):
        """Group the jobs into aggregators RA(width, class), members in batch order."""
        todo, state, topo = self.todo, self.state, self.topo
        n = len(todo)
        widths = np.array([r.num_gpus for r in todo], dtype=np.int64)
        # class key: -1 opportunistic, else pool index of a dedicated job (-2: dedicated, unknown pool)
        cls = np.array(
            [(state.pool_index(r.pool) if state.pool_index(r.pool) >= 0 else -2) if r.dedicated else -1 for r in todo],
            dtype=np.int64,
        )
        groups: dict[tuple[int, int], list[int]] = defaultdict(list)
        for k in range(n):
            groups[(int(widths[k]), int(cls[k]))].append(k)  # members in batch order
        self.groups = groups
        self.ra_keys = sorted(groups)
        self.total_units = int(widths.sum())
        self.width_list = sorted({w for w, _ in self.ra_keys})
        self.level_of = {w: topo.level_for(w) for w in self.width_list}
        self.level_widths: dict[int, int] = defaultdict(int)
        for w in self.width_list:
            self.level_widths[self.level_of[w]] += 1

    def equivalence_classes(self):
        """Per width: target cells grouped into equivalence classes (ECs) of identical cost
        features, which give every job class the same unit cost."""
        state, topo, total_units = self.state, self.topo, self.total_units
        n_servers = topo.n_servers
        ecs = {}
        for w in self.width_list:
            lv = self.level_of[w]
            free_dom, any_ded, has_pool, dlev = domain_tables(state, lv)
            cells = state.free.reshape(-1, 1 << lv).all(axis=1)
            if lv <= topo.server_level:
                per_target = cells.reshape(n_servers, -1).sum(axis=1)
                targets = np.flatnonzero(per_target)
                dom = targets >> (dlev - topo.server_level)
                n_cells = per_target[targets].astype(np.int64)
            else:
                targets = np.flatnonzero(cells)
                dom = targets >> (dlev - lv)
                n_cells = np.ones(targets.size, dtype=np.int64)
            feats = np.empty((targets.size, 2 + has_pool.shape[1]), dtype=np.int64)
            feats[:, 0], feats[:, 1], feats[:, 2:] = free_dom[dom], any_ded[dom], has_pool[dom]
            keys, ec_of = np.unique(feats, axis=0, return_inverse=True)
            ec_of = ec_of.ravel()
            # Exact pruning inside an EC (its targets cost the same for every class):
            # the batch sends at most `total_units` GPUs, so it touches at most that many
            # targets; if the targets kept hold more cells than that, a gang sent to a
            # dropped target could move to an untouched kept one at the same cost.
            order = np.lexsort((targets, ec_of))
            ec_sorted = ec_of[order]
            firsts = np.searchsorted(ec_sorted, np.arange(keys.shape[0]))
            cum = np.cumsum(n_cells[order])
            before = np.where(firsts > 0, cum[np.maximum(firsts - 1, 0)], 0)
            within = cum - before[ec_sorted]  # cells held by the EC's targets up to this one
            prev = within - n_cells[order]
            keep = np.sort(order[prev <= total_units])
            targets, n_cells, ec_of = targets[keep], n_cells[keep], ec_of[keep]
            ec_cells = np.bincount(ec_of, weights=n_cells, minlength=keys.shape[0]).astype(np.int64)
            ecs[w] = {"lv": lv, "targets": targets, "n_cells": n_cells, "ec_of": ec_of, "keys": keys, "ec_cells": ec_cells}
        self.ecs = ecs

    def class_ecs(self, cost_model):
        """Per class: unit cost of each EC of its width; keep the cheapest ECs holding more
        than `total_units` cells (exact, by the same argument)."""
        ecs, total_units = self.ecs, self.total_units
        cls_ecs = []
        for w, c in self.ra_keys:
            e = ecs[w]
            keys = e["keys"]
            req = self.todo[self.groups[(w, c)][0]]
            unit = class_unit_costs(self.state, cost_model, req, keys[:, 0], keys[:, 1].astype(bool), keys[:, 2:].astype(bool))
            order = np.argsort(unit, kind="stable")
            enough = np.searchsorted(np.cumsum(e["ec_cells"][order]), total_units + 1)
            kept = order[: enough + 1]  # in unit-cost order
            cls_ecs.append((kept, unit[kept]))
        used_ec = {w: np.zeros(ecs[w]["keys"].shape[0], dtype=bool) for w in self.width_list}
        for (w, _c), (kept, _u) in zip(self.ra_keys, cls_ecs, strict=True):
            used_ec[w][kept] = True
        self.cls_ecs, self.used_ec = cls_ecs, used_ec

    def number_nodes(self):
        """Node numbering: the class aggregator RA(w, class) is itself the supply node (jobs of
        a class are interchangeable), then servers, multi-server cells, (server, level) nodes
        for levels shared by several widths, ECs."""
        topo, level_of, width_list = self.topo, self.level_of, self.width_list
        n_servers = topo.n_servers
        self.sink = 0
        self.ra0 = 1
        self.srv0 = self.ra0 + len(self.ra_keys)
        next_node = self.srv0 + n_servers
        multi_cell0: dict[int, int] = {}
        for lv in sorted({level_of[w] for w in width_list if level_of[w] > topo.server_level}):
            multi_cell0[lv] = next_node
            next_node += topo.n_cells(lv)
        # one node per (server, level) shared by the widths of that level, so they
        # cannot together use more cells than exist (one width: its arcs cap that)
        level_node0: dict[int, int] = {}
        for lv in sorted({level_of[w] for w in width_list if level_of[w] <= topo.server_level}):
            if self.level_widths[lv] > 1:
                level_node0[lv] = next_node
                next_node += n_servers
        ec0: dict[int, int] = {}
        for w in width_list:
            ec0[w] = next_node
            next_node += self.ecs[w]["keys"].shape[0]
        self.multi_cell0, self.level_node0, self.ec0, self.next_node = multi_cell0, level_node0, ec0, next_node

    def build_arcs(self, cost_model, ranks, batch_size):
        """The arcs (tail, head, capacity, unit cost) and each aggregator's supply."""
        topo, state, ecs, ec0 = self.topo, self.state, self.ecs, self.ec0
        gps, n_servers, sink, ra0, srv0 = topo.gpus_per_server, topo.n_servers, self.sink, self.ra0, self.srv0
        tails, heads, caps, costs = [], [], [], []

        def add(t, h, c, u):
            tails.append(np.asarray(t, dtype=np.int64).ravel())
            heads.append(np.asarray(h, dtype=np.int64).ravel())
            caps.append(np.asarray(c, dtype=np.int64).ravel())
            costs.append(np.asarray(u, dtype=np.int64).ravel())

        def n_arcs():
            return sum(a.size for a in tails)

        unsched = np.array(
            [cost_model.unscheduled_unit_cost(topo, ranks[r.job_id], batch_size) for r in self.todo], dtype=np.int64
        )
        # unscheduled arcs RA -> sink: one per distinct unscheduled cost in the class,
        # capacity w x its jobs (one arc per class unless priority_weight > 0)
        self.ra_supply = np.zeros(len(self.ra_keys), dtype=np.int64)
        for g, key in enumerate(self.ra_keys):
            members = np.asarray(self.groups[key], dtype=np.int64)
            self.ra_supply[g] = key[0] * members.size
            values, counts = np.unique(unsched[members], return_counts=True)
            add(np.full(values.size, ra0 + g), np.full(values.size, sink), counts * key[0], values)
        self.noisy_lo = n_arcs()
        self.ra_arc_start = []
        for g, (w, _c) in enumerate(self.ra_keys):
            kept, unit = self.cls_ecs[g]
            self.ra_arc_start.append(n_arcs())
            add(np.full(kept.size, ra0 + g), ec0[w] + kept, ecs[w]["ec_cells"][kept] * w, unit)
        self.ec_arc_start = {}
        for w in self.width_list:
            e = ecs[w]
            sel = np.flatnonzero(self.used_ec[w][e["ec_of"]])
            e["sel"] = sel
            lv = e["lv"]
            tgt = e["targets"][sel]
            if lv > topo.server_level:
                head_t = self.multi_cell0[lv] + tgt
            elif lv in self.level_node0:
                head_t = self.level_node0[lv] + tgt
            else:
                head_t = srv0 + tgt
            self.ec_arc_start[w] = n_arcs()
            add(ec0[w] + e["ec_of"][sel], head_t, e["n_cells"][sel] * w, np.zeros(sel.size))
        self.noisy_hi = n_arcs()
        for lv, base in self.level_node0.items():
            per_server = state.free.reshape(-1, 1 << lv).all(axis=1).reshape(n_servers, -1).sum(axis=1)
            has = np.flatnonzero(per_server)
            add(base + has, srv0 + has, per_server[has] << lv, np.zeros(has.size))
        for lv, base in self.multi_cell0.items():
            k = 1 << (lv - topo.server_level)
            cells_idx = np.arange(topo.n_cells(lv))
            add(np.repeat(base + cells_idx, k), srv0 + np.arange(n_servers), np.full(n_servers, gps), np.zeros(n_servers))
        server_free = state.free.reshape(n_servers, gps).sum(axis=1)
        add(srv0 + np.arange(n_servers), np.full(n_servers, sink), server_free, np.zeros(n_servers))
        self.tail = np.concatenate(tails)
        self.head = np.concatenate(heads)
        self.cap = np.concatenate(caps)
        self.cost = np.concatenate(costs)

    def solve(self, tie_break, seed):
        """Solve the flow; return info (flow cost, graph size, solve time, or a failure)."""
        tail, cost, total_units = self.tail, self.cost, self.total_units
        # Break ties between equal-cost flows with a small seeded perturbation on the
        # aggregator -> EC and EC -> target arcs: costs are scaled by K = 2 x units x P
        # and each of the two arcs on a path gets a term < P per unit, which changes no
        # optimum of the true costs but makes a fractional split of a gang between
        # equally good servers (a degenerate optimum) unlikely.
        scale = 2 * total_units * tie_break
        if tie_break > 1 and int(cost.max(initial=0)) * scale * total_units < 2**62:
            noise = np.zeros(cost.size, dtype=np.int64)
            noise[self.noisy_lo:self.noisy_hi] = np.random.default_rng(seed).integers(
                0, tie_break, self.noisy_hi - self.noisy_lo
            )
            solve_cost = cost * scale + noise
        else:
            scale, solve_cost = 1, cost
        smcf = min_cost_flow.SimpleMinCostFlow()
        smcf.add_arcs_with_capacity_and_unit_cost(tail, self.head, self.cap, solve_cost)
        supplies = np.zeros(self.next_node, dtype=np.int64)
        supplies[self.ra0 : self.ra0 + len(self.ra_keys)] = self.ra_supply
        supplies[self.sink] = -total_units
        smcf.set_nodes_supplies(np.arange(self.next_node, dtype=np.int64), supplies)
        ts = time.perf_counter()
        status = smcf.solve()
        solve_s = time.perf_counter() - ts
        info = {"flow_costs": None, "arcs": int(tail.size), "nodes": int(self.next_node), "solve_s": solve_s}
        if status != smcf.OPTIMAL:
            info["failure"] = f"min-cost flow solver status {status}"
            return info
        info["flow_costs"] = int(smcf.optimal_cost()) // scale
        self.all_flows = smcf.flows(np.arange(tail.size, dtype=np.int64))
        return info

    def gang_slots(self):
        """Per EC: gang slots on its targets (flow // w; gangs lost to a split flow go to
        targets with room left)."""
        self.slot_lists: dict[tuple[int, int], list[int]] = {}
        for w in self.width_list:
            e = self.ecs[w]
            sel = e["sel"]
            start = self.ec_arc_start[w]
            f = self.all_flows[start : start + sel.size]
            ec_sel = e["ec_of"][sel]
            tgt = e["targets"][sel]
            slots = f // w
            room = e["n_cells"][sel] - slots
            for ec in np.unique(ec_sel):
                idx = np.flatnonzero(ec_sel == ec)
                extra = int(f[idx].sum()) // w - int(slots[idx].sum())
                for t in idx:
                    if extra <= 0:
                        break
                    add_k = min(extra, int(room[t]))
                    slots[t] += add_k
                    extra -= add_k
                self.slot_lists[(w, int(ec))] = np.repeat(tgt[idx], slots[idx]).tolist()

    def assign_gangs(self):
        """Per class: its gangs take slots of its ECs, cheapest first; its jobs take the gangs
        in batch order (with priority_weight > 0 the flow leaves out the latest jobs, whose
        unscheduled arcs are the cheapest); then each server's gangs are packed into cells.
        Returns (placed {job: GPUs}, lost {job: reason})."""
        topo, ra_keys, todo = self.topo, self.ra_keys, self.todo
        taken: dict[tuple[int, int], int] = defaultdict(int)
        got: dict[str, tuple[int, ...]] = {}
        lost: dict[str, str] = {}
        per_domain: dict[tuple[int, int], list[tuple[str, int]]] = defaultdict(list)
        chosen: list[list[int]] = [[] for _ in ra_keys]
        want = []
        for g, key in enumerate(ra_keys):
            f = self.all_flows[self.ra_arc_start[g] : self.ra_arc_start[g] + self.cls_ecs[g][0].size]
            want.append((f, int(f.sum()) // key[0]))
        # first every class takes the slots its own flow paid for, then (rounding
        # leftovers) any slot left in its ECs, cheapest first
        for from_flow in (True, False):
            for g, key in enumerate(ra_keys):
                w = key[0]
                f, gangs = want[g]
                for ec, fe in zip(self.cls_ecs[g][0].tolist(), f.tolist(), strict=True):
                    need = gangs - len(chosen[g])
                    if need <= 0:
                        break
                    slots_e = self.slot_lists.get((w, ec), [])
                    k = min(need, fe // w if from_flow else need, len(slots_e) - taken[(w, ec)])
                    if k > 0:
                        chosen[g].extend(slots_e[taken[(w, ec)] : taken[(w, ec)] + k])
                        taken[(w, ec)] += k
        for g, key in enumerate(ra_keys):
            w = key[0]
            lv = self.level_of[w]
            members = self.groups[key]
            for k, tgt in zip(members, chosen[g], strict=False):
                per_domain[(lv if lv > topo.server_level else -1, int(tgt))].append((todo[k].job_id, w))
            for k in members[len(chosen[g]):]:
                lost[todo[k].job_id] = "no free cell of the gang's size left for it in the flow"
        free = self.state.free.copy()
        gps = topo.gpus_per_server
        for (lv, tgt), gangs in per_domain.items():
            span = gps if lv == -1 else 1 << lv
            placed, failed = pack_gangs(free, topo, gangs, gpu_range=(tgt * span, (tgt + 1) * span))
            got.update(placed)
            for job_id in failed:
                lost[job_id] = "gang did not fit its server's aligned free cells after flow extraction"
        return got, lost
