"""Oracle MILP: size, solve time and plan quality, before and after, on the same instances.

For synthetic SIA workloads (4 pools x 8 GPUs unless the variant says
otherwise) of growing length, builds the Figure 19 MILP with the Appendix A
reductions and solves it under each setting; prints jobs, variables,
capacity rows, nonzeros, build and solve seconds, status, gap, whether the
run is reproducible, and the total queueing delay of the plan vs SIA_VC's
and FCFS's (hours).

The settings compared, in one run on one machine:

* ``before``: HiGHS, 2 threads, stopped by the wall clock (``--time-limit``),
  FCFS as the only known plan (what the bench measured before: on the 2-day
  base workload it found no solution and fell back to FCFS);
* ``wall``: CP-SAT with SIA_VC's starts as warm start, stopped by the wall
  clock only (not reproducible: the plan depends on the machine's load);
* ``after``: the oracle policy's defaults: CP-SAT on one worker, warm-started
  from SIA_VC, stopped after ``--work-limit`` deterministic seconds
  (reproducible for a seed), ``--time-limit`` being only a safety bound.

    .venv/bin/python benchmarks/bench_oracle.py [--settings before,after]
        [--time-limit 60] [--work-limit 20] [--cases base:1,base:2] [--seed 0]
"""

from __future__ import annotations

import argparse
import time

from sia.data.synthetic import generate_workload
from sia.scheduler.core.cluster import Cluster
from sia.scheduler.core.simulator import build_trace, run_trace
from sia.scheduler.policies.oracle import solve_oracle
from sia.scheduler.policies.siavc.policy import SiaVCPolicy
from sia.scheduler.policies.siavc.vst import fcfs_baseline_starts


def _setting(name: str, args: argparse.Namespace, vc_starts) -> dict:
    """The solve_oracle options of one compared setting."""
    if name == "before":
        return dict(solver="highs", threads=2, time_limit_s=args.time_limit, work_limit=None)
    if name == "wall":
        return dict(solver="cp-sat", threads=1, time_limit_s=args.time_limit, work_limit=None,
                    warm_start_s=vc_starts)
    if name == "after":
        return dict(solver="cp-sat", threads=1, time_limit_s=args.safety_limit,
                    work_limit=args.work_limit, warm_start_s=vc_starts)
    raise SystemExit(f"--settings: unknown setting {name!r} (before, wall, after)")


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--settings", default="before,after")
    ap.add_argument("--time-limit", type=float, default=60.0, help="wall-clock limit, s")
    ap.add_argument("--work-limit", type=float, default=20.0, help="CP-SAT deterministic s")
    ap.add_argument("--safety-limit", type=float, default=600.0, help="'after' wall cap, s")
    ap.add_argument("--cases", default="base:1,base:2")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--step", type=float, default=300.0)
    ap.add_argument("--slots", type=float, default=4.0)
    args = ap.parse_args()
    head = (f"{'case':<10}{'setting':<8}{'jobs':>5}{'vars':>7}{'rows':>6}{'nnz':>8}"
            f"{'build s':>8}{'solve s':>8}  {'status':<20}{'gap':>7}{'repro':>6}"
            f"{'delay h':>9}{'VC h':>8}{'FCFS h':>8}")
    print(head)
    print("-" * len(head))
    for case in args.cases.split(","):
        variant, days = case.split(":")
        jobs, pools = generate_workload(variant, args.seed, days=float(days))
        trace, _ = build_trace(jobs, pools)
        cutoff = fcfs_baseline_starts(trace.submit, trace.duration, trace.num_gpus, trace.pool,
                                      trace.quota)
        vc = run_trace(trace, Cluster(trace.quota), SiaVCPolicy()).start_time.copy()
        vc_h = float((vc - trace.submit).sum()) / 3600
        for name in args.settings.split(","):
            t = time.perf_counter()
            r = solve_oracle(trace.submit, trace.duration, trace.num_gpus, trace.pool, trace.quota,
                             cutoff, step_s=args.step, slots_per_duration=args.slots,
                             seed=args.seed, **_setting(name, args, vc))
            s = r.stats
            s.setdefault("solve_s", time.perf_counter() - t)
            print(f"{case:<10}{name:<8}{int(s['jobs']):>5}{int(s['variables']):>7}"
                  f"{int(s['capacity_rows']):>6}{int(s['nonzeros']):>8}{s['build_s']:>8.2f}"
                  f"{s['solve_s']:>8.1f}  {r.status:<20}{r.gap:>7.3f}"
                  f"{'yes' if r.reproducible else 'no':>6}{r.objective_s / 3600:>9.1f}"
                  f"{vc_h:>8.1f}{r.fcfs_delay_s / 3600:>8.1f}", flush=True)


if __name__ == "__main__":
    main()
