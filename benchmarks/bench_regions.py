"""Global scheduling across regions: one scan pass and the data-placement MIP (prints a table).

Run: ``.venv/bin/python benchmarks/bench_regions.py [--quick] [--reps N] [--mip-limit S]``

Scan pass: 100,000 pending jobs over 30 regions (``--quick``: 10,000 over
10), with and without the negative cache, on the same seeded instance:
regions of 25-250 eight-GPU servers with one or two of two hardware types,
busy to 85-98% (random jobs committed first, so free GPUs are scattered),
1,000 pools whose data sits in their home region plus 0-2 other regions,
jobs of SIA A.1's widths (1/2/4/8 GPUs, 0.7/0.1/0.15/0.05) plus 5% of 16-64
GPUs, half of those up to 8 GPUs asking for one server, four priorities
and random credits. The two passes must decide alike (checked).

Reservations (issue 35): the same instance with quotas (each region's GPUs dealt to its
home pools by demand, at least 8 each) planned as replicas and shares together
(:func:`~sia.scheduler.regions.reservations.plan_reservations`, every pool's widest job 8
GPUs); the table gives the worst region's demand-to-supply over the balanced one before
(home shares) and after, the GPUs of share moved and the data copied; with every region a
candidate and with :func:`~sia.scheduler.regions.reservations.share_candidates` (k=3).
``--only-plans`` skips the scan pass. The plans stop on solver work (1,000 SCIP nodes,
200,000 GLOP iterations per warm-start LP) with ``--mip-limit`` as the wall-clock safety
net; the ``stop`` column says which limit ended each (``time``: the plan may depend on the
machine's load). Measured (``--only-plans --mip-limit 55``, shared 2-core machine, another
job running): with every region a candidate the warm start's LP does not finish, and SCIP
keeps its hint, the previous shares (57.6 s, feasible, worst region 4.36 -> 4.36, stop
``time``); with share_candidates (3,957 columns) a feasible plan in 55.6 s, worst region
4.36 -> 1.02 of the balanced ratio, stop ``time``. So at 1,000 x 30 the safety net, not the
work limit, still ends the solve: these plans are not yet load-independent.

Data placement: 1,000 pools over 30 regions (``--quick``: 200 over 10) with
uneven supply and demand (homes drawn with weights falling 3:1 across the
regions, lognormal demand scaled to 80% of the supply, lognormal sizes,
storage limits 1.5x the larger of the home data and an even share), solved
with all regions as candidates and with :func:`balance_candidates`, under
the time limit; the table gives status, objective, the solver's bound, the
worst demand-to-supply ratio before and after, copies added and data moved.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from sia.scheduler.regions.data_placement import (
    PlacementWeights,
    balance_candidates,
    plan_data_placement,
)
from sia.scheduler.regions.global_scan import JobRequest, scan_pass
from sia.scheduler.regions.model import PoolData, Region, RegionLayout
from sia.scheduler.regions.reservations import home_shares, plan_reservations, share_candidates
from sia.scheduler.regions.server_region import ServerRegion

HARDWARE = ("v100", "a100")


def scan_instance(n_jobs: int, n_regions: int, n_pools: int, seed: int):
    """Region specs, data holders [pool, region], homes and the pending jobs (seeded)."""
    rng = np.random.default_rng(seed)
    servers = rng.integers(25, 251, n_regions)
    kinds = rng.integers(0, 3, n_regions)  # 0: v100, 1: a100, 2: both
    hw = [frozenset(HARDWARE) if k == 2 else frozenset({HARDWARE[k]}) for k in kinds]
    busy = rng.uniform(0.85, 0.98, n_regions)
    home = rng.integers(0, n_regions, n_pools)
    held = np.zeros((n_pools, n_regions), dtype=bool)
    held[np.arange(n_pools), home] = True
    for p in range(n_pools):
        held[p, rng.choice(n_regions, rng.integers(0, 3), replace=False)] = True
    widths = np.where(rng.random(n_jobs) < 0.05, rng.choice([16, 32, 64], n_jobs),
                      rng.choice([1, 2, 4, 8], n_jobs, p=[0.7, 0.1, 0.15, 0.05]))
    one_server = (widths <= 8) & (rng.random(n_jobs) < 0.5)
    pools = rng.integers(0, n_pools, n_jobs)
    hws = rng.integers(0, 2, n_jobs)
    prio = rng.integers(0, 4, n_jobs)
    credit = rng.random(n_jobs)
    jobs = [JobRequest(f"j{k}", f"p{pools[k]}", int(widths[k]), HARDWARE[hws[k]],
                       "server" if one_server[k] else "any", int(prio[k]), float(credit[k]))
            for k in range(n_jobs)]
    return (servers, hw, busy), held, home, jobs


def make_regions(spec, seed: int) -> list[ServerRegion]:
    """Fresh regions, made busy by committing random 1-8 GPU jobs until each reaches its target."""
    servers, hw, busy = spec
    rng = np.random.default_rng(seed + 1)
    regions = []
    for r, (n, kinds, frac) in enumerate(zip(servers, hw, busy, strict=True)):
        reg = ServerRegion(f"r{r}", int(n), 8, kinds)
        target = int(frac * reg.total_gpus)
        while reg.total_gpus - reg.free_gpus() < target:
            plan = reg.try_plan(JobRequest("busy", "-", int(rng.choice([1, 2, 4, 8])), locality="server"))
            if plan is None:
                break
            reg.commit(plan)
        regions.append(reg)
    return regions


def bench_scan(n_jobs: int, n_regions: int, reps: int, cache: str, chunk: int, seed: int = 1) -> None:
    spec, held, home, jobs = scan_instance(n_jobs, n_regions, 1000, seed)
    pools = {f"p{k}": k for k in range(held.shape[0])}
    decisions = {}
    for use_cache in {"both": (True, False), "on": (True,), "off": (False,)}[cache]:
        times = []
        for _ in range(reps):
            regions = make_regions(spec, seed)
            res = scan_pass(jobs, regions, held, pools, home, use_cache=use_cache, chunk=chunk)
            times.append(res.seconds)
        decisions[use_cache] = res.region
        label = "scan+cache" if use_cache else "scan"
        print(f"{label:<12} {n_jobs:>8} {n_regions:>7} {reps:>4} {np.median(times):>9.3f} {min(times):>9.3f} "
              f"{res.attempts:>9} {res.cache_hits:>9} {res.hit_rate:>6.1%} {res.placed:>7}")
    if len(decisions) < 2:
        return
    same = np.array_equal(decisions[True], decisions[False])
    print(f"{'':<12} decisions with and without the cache identical: {same}")
    if not same:
        raise SystemExit("the negative cache changed the decisions")


def placement_instance(n_pools: int, n_regions: int, seed: int):
    """Layout and predicted demand with uneven homes, lognormal sizes and demand (seeded)."""
    rng = np.random.default_rng(seed)
    gpus = rng.integers(100, 2001, n_regions)
    weight = np.linspace(3.0, 1.0, n_regions)
    home = rng.choice(n_regions, n_pools, p=weight / weight.sum())
    sizes = rng.lognormal(0.0, 1.0, n_pools)
    demand = rng.lognormal(0.0, 1.0, n_pools)
    demand *= 0.8 * gpus.sum() / demand.sum()
    at_home = np.bincount(home, weights=sizes, minlength=n_regions)
    storage = 1.5 * np.maximum(at_home, sizes.sum() / n_regions)
    regions = [Region(f"r{r}", int(gpus[r]), float(storage[r])) for r in range(n_regions)]
    pools = [PoolData(f"p{p}", f"r{home[p]}", float(sizes[p])) for p in range(n_pools)]
    return RegionLayout(regions, pools, transfer_rate=1.0), demand


def bench_placement(n_pools: int, n_regions: int, limit_s: float, seed: int = 2) -> None:
    lay, demand = placement_instance(n_pools, n_regions, seed)
    prev = lay.initial_replicas().held()
    before = (np.bincount(lay.home, weights=demand, minlength=n_regions) / lay.gpus).max()
    for name, cand in (("mip-all", None), ("mip-cand", balance_candidates(lay, demand, prev))):
        t0 = time.perf_counter()
        plan = plan_data_placement(lay, demand, prev, candidates=cand, weights=PlacementWeights(),
                                   time_limit_s=limit_s, mip_gap=1e-3)
        wall = time.perf_counter() - t0
        ratio = plan.region_load(demand) / lay.gpus
        gap = (plan.objective - plan.bound) / max(abs(plan.objective), 1e-12) if plan.objective else float("nan")
        obj = f"{plan.objective:.4f}" if plan.objective is not None else "-"
        n_cand = n_pools * n_regions if cand is None else int(cand.sum())
        print(f"{name:<9} {n_pools:>6} {n_regions:>7} {n_cand:>6} {wall:>7.1f} {plan.status:<10} {obj:>8} "
              f"{gap:>7.2%} {before:>6.2f} {ratio.max():>6.2f} {plan.replicas - int(prev.sum()):>6} "
              f"{plan.moved:>8.1f}")


def bench_reservations(n_pools: int, n_regions: int, limit_s: float, seed: int = 2) -> None:
    """The replicas-and-shares plan on the data-placement instance: quotas from the homes'
    GPUs (each region's GPUs dealt to its pools by demand), every pool's widest job 8 GPUs."""
    lay, demand = placement_instance(n_pools, n_regions, seed)
    quota = np.zeros(n_pools, dtype=np.int64)
    for r in range(n_regions):
        pools = np.flatnonzero(lay.home == r)
        if pools.size:  # the region's GPUs split by the pools' demand, at least 8 each
            w = demand[pools] / demand[pools].sum()
            q = np.maximum(8, np.floor(w * (lay.gpus[r] - 8 * pools.size)).astype(np.int64) + 8)
            quota[pools] = q
    gpus = np.maximum(lay.gpus, np.bincount(lay.home, weights=quota, minlength=n_regions)
                      .astype(np.int64))
    regions = [Region(r.name, int(gpus[k]), r.storage) for k, r in enumerate(lay.regions)]
    lay = RegionLayout(regions, lay.pools, lay.transfer_rate)
    demand = demand * quota.sum() / gpus.sum()
    prev = lay.initial_replicas().held()
    shares = home_shares(lay, quota)
    before = (demand @ (shares / quota[:, None]) / lay.gpus).max() / (demand.sum() / gpus.sum())
    widest = np.full(n_pools, 8.0)
    for name, cand in (("resv-all", None),
                       ("resv-cand", share_candidates(lay, quota, demand, shares, k=3))):
        t0 = time.perf_counter()
        plan = plan_reservations(lay, quota, demand, prev, shares, candidates=cand,
                                 min_share=widest, time_limit_s=limit_s, mip_gap=1e-3)
        wall = time.perf_counter() - t0
        after = (plan.region_load(demand, quota) / lay.gpus).max() / (demand.sum() / gpus.sum())
        obj = f"{plan.objective:.4f}" if plan.objective is not None else "-"
        n_cand = n_pools * n_regions if cand is None else int(cand.sum())
        print(f"{name:<9} {n_pools:>6} {n_regions:>7} {n_cand:>6} {wall:>7.1f} {plan.status:<10} "
              f"{obj:>8} {before:>10.2f} {after:>9.2f} {plan.churn:>7} {plan.moved:>8.1f} "
              f"{plan.stopped_by or '-':>7}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--quick", action="store_true", help="smaller sizes (smoke run)")
    ap.add_argument("--mip-limit", type=float, default=30.0, help="MIP time limit in seconds (whole call)")
    ap.add_argument("--skip-mip", action="store_true", help="scan pass only")
    ap.add_argument("--only-plans", action="store_true", help="the two MIPs only (no scan pass)")
    ap.add_argument("--cache", choices=("both", "on", "off"), default="both", help="scan with/without the cache")
    ap.add_argument("--chunk", type=int, default=2048,
                    help="jobs checked against the cache at once (more than the jobs: per-job checks only)")
    args = ap.parse_args()
    n_jobs, n_regions = (10_000, 10) if args.quick else (100_000, 30)
    print(f"{'pass':<12} {'jobs':>8} {'regions':>7} {'reps':>4} {'p50_s':>9} {'min_s':>9} "
          f"{'attempts':>9} {'hits':>9} {'hit%':>6} {'placed':>7}")
    if not args.only_plans:
        bench_scan(n_jobs, n_regions, args.reps, args.cache, args.chunk)
    if args.skip_mip:
        return
    n_pools, n_regions = (200, 10) if args.quick else (1000, 30)
    print(f"\n{'mip':<9} {'pools':>6} {'regions':>7} {'x_vars':>6} {'wall_s':>7} {'status':<10} {'obj':>8} "
          f"{'gap':>7} {'max_d/s':>6} {'after':>6} {'+copies':>6} {'moved':>8}")
    bench_placement(n_pools, n_regions, args.mip_limit)
    print(f"\n{'plan':<9} {'pools':>6} {'regions':>7} {'x_vars':>6} {'wall_s':>7} {'status':<10} "
          f"{'obj':>8} {'worst/bal':>10} {'after':>9} {'churn':>7} {'moved':>8} {'stop':>7}")
    bench_reservations(n_pools, n_regions, args.mip_limit)


if __name__ == "__main__":
    main()
