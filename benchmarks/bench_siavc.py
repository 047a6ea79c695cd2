"""SIA_VC replay cost on prefixes of the Philly trace, and its slowdowns vs FCFS (must be 0).

Reads the Philly per-VC trace (bad rows dropped), derives quotas from load on
the whole trace (SIA 6.1, seed 0), keeps the first N jobs by submit time and
replays FCFS and SIA_VC on them. Prints per prefix: wall and CPU seconds of
the SIA_VC replay, decisions, guard re-runs (early starts tried) and how many
failed, opportunistic starts, and the jobs ending > 1 s later than under FCFS.

    .venv/bin/python benchmarks/bench_siavc.py [--prefixes 1000,5000,20000]

The whole trace is ``--prefixes 82182`` (target 120 s on this 2-core machine).
Measured 2026-11-22 (session 3), CPU s by prefix: 1,000: 0.55; 5,000: 1.8;
10,000: 5.1; 20,000: 15.4; 40,000: 42.2; all 82,182: 90.7, with 0 jobs slowed
(session 2: 0.6 / 2.5 / 6.9 / 21.3 / 58 / 126; session 1: over 600 for all).
"""

from __future__ import annotations

import argparse
import time

from sia.data.quotas import quotas_from_load
from sia.data.readers import read_philly
from sia.scheduler.core.simulator import simulate
from sia.scheduler.policies.siavc.policy import SiaVCPolicy
from sia.scheduler.registry import make_policy

PHILLY = "builtin:philly"  # the trace shipped in the package (sia.data.datasets)


def main() -> None:
    """Run the benchmark and print its table."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--trace", default=PHILLY)
    ap.add_argument("--prefixes", default="1000,5000,20000")
    args = ap.parse_args()
    jobs, _ = read_philly(args.trace, on_bad_rows="drop")
    pools = quotas_from_load(jobs, seed=0)
    jobs = jobs.sort("submit_time", maintain_order=True)
    print(f"{'jobs':>7} {'wall s':>8} {'cpu s':>8} {'decisions':>9} {'guards':>8} "
          f"{'failed':>8} {'opport.':>7} {'slowed':>6}")
    for n in (int(x) for x in args.prefixes.split(",")):
        part = jobs.head(n)
        pol = SiaVCPolicy()
        t, c = time.perf_counter(), time.process_time()
        res = simulate(part, pools, pol)
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        fcfs = simulate(part, pools, make_policy("fcfs"))
        slowed = int(((res["end_time"] - fcfs["end_time"]) > 1.0).sum())
        st = pol.stats
        print(f"{n:>7} {wall:>8.2f} {cpu:>8.2f} {st['calls']:>9} {st['early_starts']:>8} "
              f"{st['checks_failed']:>8} {int(res['opportunistic'].sum()):>7} {slowed:>6}",
              flush=True)


if __name__ == "__main__":
    main()
