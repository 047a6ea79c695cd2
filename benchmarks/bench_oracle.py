"""Oracle MILP size and solve time: how large an instance it solves within how long.

For synthetic SIA workloads (4 pools x 8 GPUs unless the variant says
otherwise) of growing length, builds the Figure 19 MILP with the Appendix A
reductions and solves it under a time limit; prints jobs, variables,
capacity rows, nonzeros, build and solve seconds, status, gap, and the
total queueing delay of the plan vs FCFS (hours). Also times SIA_VC's replay
on the same instance for scale.

    .venv/bin/python benchmarks/bench_oracle.py [--solvers highs,cp-sat] [--time-limit 120]
        [--cases base:0.5,base:1,base:2,base:3,higher-load:3,more-queues:3] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import build_trace, simulate
from sia.scheduler.policies.oracle import solve_oracle
from sia.scheduler.policies.siavc.vst import fcfs_baseline_starts
from sia.scheduler.registry import make_policy


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--solvers", default="highs")
    ap.add_argument("--time-limit", type=float, default=120.0)
    ap.add_argument("--cases", default="base:0.5,base:1,base:2,base:3,higher-load:3,more-queues:3")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step", type=float, default=300.0)
    ap.add_argument("--slots", type=float, default=4.0)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    head = (f"{'case':<18}{'solver':<8}{'jobs':>6}{'vars':>8}{'rows':>7}{'nnz':>9}{'build s':>9}"
            f"{'solve s':>9}  {'status':<14}{'gap':>8}{'delay h':>9}{'FCFS h':>9}{'VC s':>7}")
    print(head)
    print("-" * len(head))
    for case in args.cases.split(","):
        variant, days = case.split(":")
        jobs, pools = generate_workload(variant, args.seed, days=float(days))
        trace, _ = build_trace(jobs, pools)
        cutoff = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                      trace.quota)
        t = time.perf_counter()
        simulate(jobs, pools, make_policy("sia-vc"))
        vc_s = time.perf_counter() - t
        for solver in args.solvers.split(","):
            r = solve_oracle(trace.submit, trace.duration, trace.num_gpus, trace.pool, trace.quota,
                             cutoff, step_s=args.step, slots_per_duration=args.slots,
                             time_limit_s=args.time_limit, solver=solver, threads=args.threads,
                             seed=args.seed)
            s = r.stats
            print(f"{case:<18}{solver:<8}{int(s['jobs']):>6}{int(s['variables']):>8}"
                  f"{int(s['capacity_rows']):>7}{int(s['nonzeros']):>9}{s['build_s']:>9.2f}"
                  f"{s.get('solve_s', 0):>9.1f}  {r.status:<14}{r.gap:>8.4f}"
                  f"{r.objective_s / 3600:>9.1f}{r.fcfs_delay_s / 3600:>9.1f}{vc_s:>7.2f}")


if __name__ == "__main__":
    main()
