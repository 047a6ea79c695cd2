"""Placement latency: min-cost flow, Hungarian and the plan-ahead MILP (prints a table).

Run: ``.venv/bin/python benchmarks/bench_placement.py [--quick] [--grow] [--reps N]``

``--grow`` adds MCF rows at 25,000 servers and 20,000-40,000 jobs to show how
the cost grows; the MCF notes give rounds, arcs and nodes of the first round's
network and its OR-Tools solve time, and the placed cost with the flow's lower
bound (the first round's optimum), so a rounding loss is visible.

Instances are seeded: a fraction of GPUs busy (random whole cells, so free
space is fragmented the way buddy allocation leaves it), a third of the
servers holding some pool's dedicated cells, and a batch of pending gangs of
1/2/4/8 GPUs (SIA A.1's mix 0.7/0.1/0.15/0.05), half of them dedicated.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sia.scheduler.locality.topology import Topology
from sia.scheduler.placement.costs import CostModel, placement_cost
from sia.scheduler.placement.hungarian import HungarianPlacer
from sia.scheduler.placement.mcf import MinCostFlowPlacer
from sia.scheduler.placement.milp import MilpPlacer
from sia.scheduler.placement.protocol import ClusterState, PlacementRequest

POOLS = ("p0", "p1", "p2", "p3")


def make_state(n_servers: int, busy_frac: float, seed: int) -> ClusterState:
    """A fragmented cluster of ``n_servers`` 8-GPU servers (4 per rack)."""
    rng = np.random.default_rng(seed)
    topo = Topology(racks=max(1, n_servers // 4), servers_per_rack=4, gpus_per_server=8)
    free = np.ones(topo.n_gpus, dtype=bool)
    # occupy random aligned cells of 1/2/4/8 GPUs until busy_frac is reached
    target = int(busy_frac * topo.n_gpus)
    used = 0
    sizes = rng.choice([1, 2, 4, 8], size=topo.n_gpus, p=[0.4, 0.2, 0.2, 0.2])
    starts = rng.integers(0, topo.n_gpus, size=topo.n_gpus)
    for size, start in zip(sizes, starts, strict=True):
        if used >= target:
            break
        first = (int(start) // size) * size
        if free[first : first + size].all():
            free[first : first + size] = False
            used += size
    ded_server = np.where(rng.random(topo.n_servers) < 1 / 3, rng.integers(0, len(POOLS), topo.n_servers), -1)
    ded = np.repeat(ded_server, topo.gpus_per_server)
    busy_until = np.where(free, 0.0, rng.uniform(0, 7200, topo.n_gpus))
    return ClusterState(topo, free, ded, POOLS, 0.0, busy_until)


def make_batch(n_jobs: int, seed: int) -> list[PlacementRequest]:
    """Pending gangs with SIA A.1's widths; durations log-uniform 5 min .. 4 h."""
    rng = np.random.default_rng(seed + 1)
    widths = rng.choice([1, 2, 4, 8], size=n_jobs, p=[0.7, 0.1, 0.15, 0.05])
    pools = rng.integers(0, len(POOLS), n_jobs)
    dedicated = rng.random(n_jobs) < 0.5
    durations = np.exp(rng.uniform(np.log(300), np.log(14400), n_jobs))
    return [
        PlacementRequest(f"j{k}", int(widths[k]), POOLS[pools[k]], bool(dedicated[k]), float(durations[k]))
        for k in range(n_jobs)
    ]


def time_calls(solver, batch, state, budget, reps, want_result=False):
    times, placed, extra, res = [], 0, {}, None
    for _ in range(reps):
        t0 = time.perf_counter()
        res = solver.place(batch, state, budget)
        times.append(time.perf_counter() - t0)
        placed = len(res.placements)
        extra = res.stats
    if want_result:
        return np.array(times), placed, extra, res
    return np.array(times), placed, extra


def row(name, servers, jobs, times, placed, note=""):
    p50, p99 = np.percentile(times, 50), np.percentile(times, 99)
    print(f"{name:<10} {servers:>7} {servers * 8:>7} {jobs:>7} {len(times):>5} {p50:>9.3f} {p99:>9.3f} {placed:>7}  {note}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    ap.add_argument("--grow", action="store_true", help="add larger MCF sizes (growth)")
    args = ap.parse_args()
    print(f"{'solver':<10} {'servers':>7} {'GPUs':>7} {'jobs':>7} {'reps':>5} {'p50_s':>9} {'p99_s':>9} {'placed':>7}  notes")
    sizes = [(s, j) for s in ([100, 1000] if args.quick else [100, 1000, 12500]) for j in (1000, 10000)]
    if args.grow:
        sizes += [(12500, 20000), (12500, 40000), (25000, 10000), (25000, 20000), (25000, 40000)]
    for servers, jobs in sizes:
        state = make_state(servers, 0.5, seed=servers)
        batch = make_batch(jobs, seed=jobs)
        times, placed, stats, res = time_calls(MinCostFlowPlacer(), batch, state, 60.0, args.reps, want_result=True)
        note = (f"rounds={stats['rounds']} arcs={stats['arcs'][0]} nodes={stats['nodes'][0]} "
                f"solve={stats['solve_s'][0]:.3f}s cost={placement_cost(res.placements, batch, state, CostModel())} "
                f"bound={stats['flow_costs'][0]}")
        row("mcf", servers, jobs, times, placed, note)
    for gpus in (256, 1024):
        servers = gpus // 8
        state = make_state(servers, 0.0, seed=gpus)
        for jobs in (gpus // 2, gpus):
            batch = make_batch(jobs, seed=gpus + jobs)
            times, placed, stats = time_calls(HungarianPlacer(), batch, state, 60.0, args.reps)
            shapes = ",".join(f"L{lv}:{v['shape'][0]}x{v['shape'][1]}" for lv, v in sorted(stats["levels"].items()))
            row("hungarian", servers, jobs, times, placed, shapes)
    state = make_state(100, 0.5, seed=7)
    batch = make_batch(50, seed=50)
    for budget in (1.0, 5.0):
        placer = MilpPlacer(horizon_s=3600, slot_s=300)
        times, placed, stats = time_calls(placer, batch, state, budget, max(2, args.reps // 2))
        note = (f"budget={budget}s solve={stats['solve_s']:.3f}s status={stats['status']} gap={stats['gap']:.4f} "
                f"vars={stats['variables']} hinted={stats['hinted']}")
        row("milp", 100, 50, times, placed, note)


if __name__ == "__main__":
    main()
