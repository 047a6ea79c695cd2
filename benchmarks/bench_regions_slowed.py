"""Which mechanism slows jobs under global reservations, against FCFS with home quotas.

Run: ``.venv/bin/python benchmarks/bench_regions_slowed.py [CONFIG] [--label L] [--sweep DIR]
[--lend-moves N|none] [--lend-probe estimate|sia] [--consolidate off|swap|free]
[--foothold off|backlog] [--waits] [--jobs-out FILE.csv] [--set KEY=VALUE ...]``

Replays FCFS (the baseline: every pool's jobs in arrival order on its whole quota, as on
home regions) and one reservations label of a ``sia evaluate`` config with regions (default
``experiments/regions_philly.yaml``, ``learned-reservations``; a learned label needs the
predictors its sweep ``DIR`` trained, as in ``bench_regions_diagnose.py``), with a
:class:`~sia.scheduler.regions.slowed.SlowedProbe` attached. Prints the mean JCT and the %
of jobs slowed (jobs after the warm-up, late by more than a second, as the region report
counts them), then the slowed jobs by root mechanism and group ((a) SIA's own loans, (b) the
lending route, (c) the split of quotas into shares, (d) a queue that lost its share or
copy; :mod:`sia.scheduler.regions.slowed`), directly or through cascades, with their
slowdown in job-hours. With ``--waits``, the same replay also prints
``bench_regions_waits.py``'s split of the waiting job-hours (sampled hourly).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np


def _policy(args: argparse.Namespace):  # noqa: ANN202 - (config, spec, fcfs results)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_regions_diagnose import _spec
    from sia.pipelines.engine.run import build_policy
    from sia.scheduler.core.simulator import simulate

    base = argparse.Namespace(config=args.config, label="fcfs", sweep=None, set=args.set)
    _, spec = _spec(base)
    jobs, pools = spec.workload.frames()
    fcfs = simulate(jobs, pools, build_policy(spec), tick_s=spec.tick_s)
    cfg, spec = _spec(argparse.Namespace(config=args.config, label=args.label,
                                         sweep=args.sweep, set=args.set))
    return cfg, spec, fcfs


def _table(rows: list[dict], late_h: dict[str, float], n_all: int) -> None:
    from sia.scheduler.regions.slowed import GROUP, MECHANISMS

    count, hours = Counter(), defaultdict(float)
    direct = Counter()
    for r in rows:
        count[r["mechanism"]] += 1
        hours[r["mechanism"]] += late_h[r["job"]]
        direct[r["mechanism"]] += r["depth"] == 0
    n = max(len(rows), 1)
    print(f"\n{'mechanism':<12} grp  slowed  % of slowed  % of jobs  direct  cascade  "
          f"late job-h")
    for m in MECHANISMS:
        if count[m]:
            print(f"{m:<12} ({GROUP[m]})  {count[m]:>6}  {100 * count[m] / n:10.1f}%  "
                  f"{100 * count[m] / n_all:8.3f}%  {direct[m]:>6}  {count[m] - direct[m]:>7}"
                  f"  {hours[m]:10.1f}")
    groups = Counter()
    for m, c in count.items():
        groups[GROUP[m]] += c
    print("by group: " + ", ".join(f"({g}) {groups[g]} = {100 * groups[g] / n_all:.3f}% of jobs"
                                   for g in sorted(groups)))
    miss = Counter((r["mechanism"], r["loan_miss"]) for r in rows if r["mechanism"].startswith("loan"))
    print("loans by miss: " + ", ".join(f"{m} {k} {c}" for (m, k), c in sorted(
        miss.items(), key=lambda x: str(x[0]))))
    roots = {r["root"]: (r["loans"], r["loan_gpus"]) for r in rows
             if r["mechanism"].startswith("loan")}
    if roots:  # a wait on loans is on all those running, not only the one classify names
        print(f"loan roots: {len(roots)}; loans running in their region at their baseline "
              f"start: max {max(n for n, _ in roots.values())}, holding at most "
              f"{max(g for _, g in roots.values())} GPUs")
    kinds = Counter(r["kind"] for r in rows)
    print("direct kinds: " + ", ".join(f"{k} {c}" for k, c in kinds.most_common()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[1] / "experiments" / "regions_philly.yaml")
    ap.add_argument("--label", default="learned-reservations")
    ap.add_argument("--sweep", type=Path, default=None)
    ap.add_argument("--lend-moves", default=None, help="override lend_moves (none: no limit)")
    ap.add_argument("--lend-probe", default=None, help="override lend_probe")
    ap.add_argument("--consolidate", choices=["off", "swap", "free"], default=None,
                    help="override consolidate (ReservationRegionPolicy)")
    ap.add_argument("--foothold", choices=["off", "backlog"], default=None,
                    help="override foothold (ReservationRegionPolicy)")
    ap.add_argument("--waits", action="store_true",
                    help="also print bench_regions_waits.py's split of the waiting job-hours")
    ap.add_argument("--jobs-out", type=Path, default=None, help="per slowed job CSV")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    from sia.pipelines.engine.run import build_policy
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.regions.slowed import SlowedProbe

    cfg, spec, fcfs = _policy(args)
    ids = fcfs["job_id"].to_list()
    base_start = dict(zip(ids, fcfs["start_time"].to_numpy().tolist(), strict=True))
    base_end = dict(zip(ids, fcfs["end_time"].to_numpy().tolist(), strict=True))
    jobs, pools = spec.workload.frames()
    policy = build_policy(spec)
    if args.lend_moves is not None:
        policy.lend_moves = None if args.lend_moves == "none" else int(args.lend_moves)
    if args.lend_probe is not None:
        policy.lend_probe = args.lend_probe
    if args.consolidate is not None:
        policy.consolidate = args.consolidate
    if args.foothold is not None:
        policy.foothold = args.foothold
    probe = SlowedProbe(policy, base_start)
    if args.waits:
        from bench_regions_waits import attach_sampler

        snaps = attach_sampler(policy)
    t0 = time.perf_counter()
    res = simulate(jobs, pools, policy, tick_s=spec.tick_s)
    secs = time.perf_counter() - t0
    sub, end = res["submit_time"].to_numpy(), res["end_time"].to_numpy()
    rid = res["job_id"].to_list()
    warm = sub >= sub.min() + cfg.warmup_days * 86400.0
    bend = np.array([base_end[j] for j in rid])
    late = warm & (end > bend + 1.0)
    index = {str(j): i for i, j in enumerate(policy._trace.job_ids)}
    slowed = np.array([index[str(j)] for j in np.asarray(rid, dtype=object)[late]], dtype=np.int64)
    late_h = {str(j): float(e - b) / 3600 for j, e, b in zip(np.asarray(rid, dtype=object)[late],
                                                                end[late], bend[late], strict=True)}
    rows = probe.report(slowed)
    n_all = int(warm.sum())
    print(f"{args.label}: mean JCT {(end - sub)[warm].mean() / 3600:.3f} h, slowed vs FCFS "
          f"{len(rows)} of {n_all} jobs ({100 * len(rows) / n_all:.2f}%), replay {secs:.0f} s, "
          f"lend_moves {policy.lend_moves}, lend_probe {policy.lend_probe}, consolidate "
          f"{policy.consolidate} ({policy.stats['consolidations']}), foothold "
          f"{policy.foothold} ({sum(x.get('footholds', 0) for x in policy.stats['plans'])} "
          f"new copies with a bonus, {len(policy.stats['plans'])} plans), lending moves "
          f"{int(policy.lent_moves.sum())}, queue moves {len(policy.queue_moves)}")
    _table(rows, late_h, n_all)
    if args.waits:
        from bench_regions_waits import report, waits_of

        report(args.label, *waits_of(res, policy, cfg.warmup_days, snaps), secs)
    if args.jobs_out is not None:
        import polars as pl

        pl.DataFrame([dict(r, late_h=late_h[r["job"]]) for r in rows]).write_csv(args.jobs_out)
        print(f"per job: {args.jobs_out}")


if __name__ == "__main__":
    main()
