"""Replay cost of locality: wall time of a replay on fungible GPUs vs on buddy cells (prints a table).

Run: ``.venv/bin/python benchmarks/bench_locality.py [--days D] [--variant V] [--seed S]``

For each policy (FCFS, MaxMin, HiveD*, SIA with perfect predictions) it
replays one synthetic workload on fungible GPUs (``simulate``) and on the
cell-aware cluster (buddy only, and buddy then Hungarian), best of
``--reps`` runs, and prints seconds per replay and microseconds per job.
"""

from __future__ import annotations

import argparse
import time

from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import simulate
from sia.scheduler.locality.config import LocalityConfig
from sia.scheduler.locality.replay import config_for_policy, simulate_cells
from sia.scheduler.registry import make_policy


def best_of(reps: int, fn) -> float:
    """Smallest wall time (s) of ``reps`` calls of ``fn``."""
    out = float("inf")
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        out = min(out, time.perf_counter() - t)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=6.0)
    ap.add_argument("--variant", default="more-queues")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reps", type=int, default=2)
    args = ap.parse_args()
    jobs, pools = generate_workload(args.variant, seed=args.seed, days=args.days)
    pools = pools.select("pool", "quota_gpus")
    n = jobs.height
    print(f"{args.variant}, seed {args.seed}, {args.days} days: {n} jobs, "
          f"{int(pools['quota_gpus'].sum())} GPUs")
    print(f"{'policy':<12} {'placement':<18} {'replay s':>9} {'us/job':>8}")
    for name in ("fcfs", "maxmin", "hived", "sia-perfect"):
        rows = [("fungible", lambda name=name: simulate(jobs, pools, make_policy(name)))]
        for chain in (("buddy",), ("buddy", "hungarian")):
            cfg = config_for_policy(LocalityConfig(chain=chain), name)
            rows.append(("+".join(chain), lambda name=name, cfg=cfg: simulate_cells(
                jobs, pools, make_policy(name), cfg)))
        for label, fn in rows:
            t = best_of(args.reps, fn)
            print(f"{name:<12} {label:<18} {t:>9.3f} {1e6 * t / n:>8.1f}")


if __name__ == "__main__":
    main()
