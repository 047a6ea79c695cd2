"""Speed and memory of the Table 9 feature table (`sia.features.table9.build_features`).

Each case runs in its own subprocess so that its peak memory (ru_maxrss, which
counts polars' and numpy's native allocations, unlike tracemalloc) is its own.
Times are wall-clock seconds of ``build_features`` alone (which includes the
point-in-time duration history) and, separately, of the duration history.

Cases:
- philly: the whole Philly per-VC trace (read with ``read_philly(on_bad_rows="drop")``),
  scheduled by the simulator's FCFS replay with quotas from load (SIA 6.1, seed 0).
- synth-J-P: J jobs over P pools and 30 days, generated with numpy (seed 0): Poisson-ish
  uniform submissions, log-uniform durations from 1 minute to 2 days, widths 1/2/4/8; the
  schedule is a stand-in, not a replay: start = submit + an exponential queueing delay
  (mean 10 min), end = start + duration (a 1-million-job event-loop replay would dominate
  the measurement and is not what is measured here).

Usage: .venv/bin/python benchmarks/bench_features.py [--quick]
"""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PHILLY = "builtin:philly"  # the trace shipped in the package (sia.data.datasets)
DAY = 86400.0


def _synthetic(n_jobs: int, n_pools: int, days: float = 30.0, seed: int = 0):
    import numpy as np
    import polars as pl

    rng = np.random.default_rng(seed)
    submit = np.sort(rng.uniform(0.0, days * DAY, n_jobs))
    duration = np.exp(rng.uniform(np.log(60.0), np.log(2 * DAY), n_jobs))
    start = submit + rng.exponential(600.0, n_jobs)
    pool = rng.integers(0, n_pools, n_jobs)
    gpus = rng.choice(np.array([1, 2, 4, 8], dtype=np.int32), n_jobs, p=[0.7, 0.1, 0.15, 0.05])
    tag = rng.integers(0, max(n_jobs // 20, 1), n_jobs)
    return pl.DataFrame({
        "job_id": pl.int_range(n_jobs, eager=True).cast(pl.String),
        "pool": pl.Series(pool).cast(pl.String).str.pad_start(4, "0"),
        "submit_time": submit,
        "duration": duration,
        "num_gpus": gpus,
        "tag": pl.Series(tag).cast(pl.String),
        "start_time": start,
        "end_time": start + duration,
    })


def _philly():
    import polars as pl
    from sia.data.quotas import quotas_from_load
    from sia.data.readers import read_philly
    from sia.features.schedule import with_schedule
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.registry import make_policy

    jobs, _ = read_philly(PHILLY, on_bad_rows="drop")
    pools = quotas_from_load(jobs, (0.6, 1.1), 0)
    t0 = time.perf_counter()
    result = simulate(jobs, pools, make_policy("fcfs"))
    replay_s = time.perf_counter() - t0
    sched = with_schedule(jobs, result)
    assert isinstance(sched, pl.DataFrame)
    return sched, replay_s


def run_case(name: str) -> dict:
    """Run one case in this process; return its measurements."""
    from sia.features.duration_history import point_in_time_history
    from sia.features.table9 import build_features

    replay_s = None
    if name == "philly":
        sched, replay_s = _philly()
    else:
        _, jobs, pools = name.split("-")
        sched = _synthetic(int(jobs), int(pools))
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    t0 = time.perf_counter()
    point_in_time_history(sched)
    hist_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    table = build_features(sched)
    build_s = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    # One tick of the live path: all pools and windows at a mid-trace t.
    from sia.features.live import LiveState, features_at

    grid = table["t"].unique().sort()
    t_mid = float(grid[grid.len() // 2])
    state = LiveState.from_schedule(sched, t_mid)
    t0 = time.perf_counter()
    for _ in range(20):
        features_at(state, t_mid)
    live_ms = (time.perf_counter() - t0) / 20 * 1000
    return {
        "case": name, "jobs": sched.height, "pools": sched["pool"].n_unique(),
        "rows": table.height, "replay_s": replay_s, "history_s": hist_s, "build_s": build_s,
        "rss_before_mb": rss_before, "peak_rss_mb": peak,
        "table_mb": table.estimated_size() / 2**20, "live_ms": live_ms,
    }


def _spawn(name: str) -> dict:
    out = subprocess.run([sys.executable, __file__, "--case", name], capture_output=True,
                         text=True, check=False)
    if out.returncode != 0:
        raise SystemExit(f"case {name} failed:\n{out.stderr}")
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    if "--case" in argv:
        print(json.dumps(run_case(argv[argv.index("--case") + 1])))
        return
    quick = "--quick" in argv
    cases = ["philly"]
    if quick:
        cases += ["synth-100000-200"]
    else:
        cases += ["synth-1000000-200"]
        cases += [f"synth-{j}-200" for j in (125_000, 250_000, 500_000)]  # growth with jobs
        cases += [f"synth-250000-{p}" for p in (25, 50, 100, 400)]  # growth with pools
    head = (f"{'case':<20}{'jobs':>9}{'pools':>6}{'rows':>10}{'replay s':>9}"
            f"{'hist s':>8}{'build s':>8}{'RSS0 MB':>9}{'peak MB':>9}{'table MB':>9}"
            f"{'live ms':>9}")
    print(head)
    print("-" * len(head))
    for name in cases:
        r = _spawn(name)
        replay = "-" if r["replay_s"] is None else f"{r['replay_s']:.2f}"
        print(f"{r['case']:<20}{r['jobs']:>9}{r['pools']:>6}{r['rows']:>10}{replay:>9}"
              f"{r['history_s']:>8.2f}{r['build_s']:>8.2f}{r['rss_before_mb']:>9.0f}"
              f"{r['peak_rss_mb']:>9.0f}{r['table_mb']:>9.0f}{r['live_ms']:>9.1f}", flush=True)
    print("build s = build_features (includes the duration history); hist s = the history alone; "
          "RSS0 = max RSS before building; peak = max RSS of the case's process "
          "(measured before the live step); live ms = one features_at call (all pools, 3 windows).")
    print(f"load average while measuring: {os.getloadavg()[0]:.1f} (2 cores)")


if __name__ == "__main__":
    main(sys.argv[1:])
