"""How often waiting jobs move between regions under global reservations, and what it costs.

Run, on a finished sweep (counts its replays' ``queue_moves``):
``.venv/bin/python benchmarks/bench_regions_bounce.py --moves DIR``

or, replaying one reservations label with several limits on the lending route's moves
(``lend_moves`` of :class:`~sia.scheduler.regions.reserved_policy.ReservationRegionPolicy`;
``none``: no limit) and, with ``--probes estimate,sia``, both ways for the route to learn
what a region lends (``lend_probe``), against FCFS with home quotas:
``.venv/bin/python benchmarks/bench_regions_bounce.py [CONFIG] --label L [--sweep DIR]
[--limits none,1,2] [--probes estimate] [--set KEY=VALUE ...]``
(a learned label needs the predictors its sweep ``DIR`` trained, as in
``bench_regions_diagnose.py``).

Each row: mean JCT and % of jobs slowed against FCFS by more than a second (jobs after the
warm-up, as the region report counts them), queue moves, lending-route moves, jobs moved,
the most moves of one job and the jobs moved 4 times or more.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np


def move_counts(moves: list) -> Counter:
    """Queue moves per job id from a replay's ``queue_moves`` ([job, time, from, to] rows)."""
    return Counter(str(m[0]) for m in moves)


def _summary(per_job: Counter) -> str:
    top = max(per_job.values(), default=0)
    many = sum(1 for n in per_job.values() if n >= 4)
    return (f"moves {sum(per_job.values()):>7,}  jobs moved {len(per_job):>6,}  max/job "
            f"{top:>6,}  jobs >=4 moves {many:>5,}")


def from_sweep(out: Path) -> None:
    """Print the move counts of every reservations replay of a finished sweep."""
    for done in sorted(out.glob("exp-*/*.done.json")):
        facts = json.loads(done.read_text())
        moves = _find(facts, "queue_moves")
        if moves is None:
            continue
        per_job = move_counts(moves)
        name = done.name.removesuffix(".done.json")
        print(f"{done.parent.name}/{name:<28} {_summary(per_job)}")
        for job, n in per_job.most_common(3):
            print(f"    {job}: {n} moves")


def _find(obj, key: str):  # noqa: ANN001, ANN202 - the replay's facts, nested somewhere
    if isinstance(obj, dict):
        if key in obj:
            return obj[key]
        for v in obj.values():
            got = _find(v, key)
            if got is not None:
                return got
    return None


def _replays(args: argparse.Namespace) -> None:
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from bench_regions_diagnose import _spec
    from sia.pipelines.engine.run import build_policy
    from sia.scheduler.core.simulator import simulate

    base = argparse.Namespace(config=args.config, label="fcfs", sweep=None, set=args.set)
    cfg, spec = _spec(base)
    jobs, pools = spec.workload.frames()
    fcfs = simulate(jobs, pools, build_policy(spec), tick_s=spec.tick_s)
    fcfs_end = dict(zip(fcfs["job_id"].to_list(), fcfs["end_time"].to_numpy(), strict=True))
    _, spec = _spec(argparse.Namespace(config=args.config, label=args.label, sweep=args.sweep,
                                       set=args.set))
    print(f"{args.label}: lend_moves/probe   mean JCT h  slowed vs FCFS  lending moves  ...")
    for raw, probe in [(r, p.strip()) for r in args.limits.split(",")
                       for p in args.probes.split(",")]:
        limit = None if raw.strip() == "none" else int(raw)
        policy = build_policy(spec)
        policy.lend_moves = limit
        policy.lend_probe = probe
        t0 = time.perf_counter()
        res = simulate(jobs, pools, policy, tick_s=spec.tick_s)
        sub = res["submit_time"].to_numpy()
        warm = sub >= sub.min() + cfg.warmup_days * 86400.0
        end = res["end_time"].to_numpy()
        base_end = np.array([fcfs_end[j] for j in res["job_id"].to_list()])
        jct = (end - sub)[warm].mean() / 3600
        slowed = 100 * np.mean(end[warm] > base_end[warm] + 1.0)
        ids = policy._trace.job_ids
        per_job = move_counts([(ids[j],) for j, *_ in policy.queue_moves])
        print(f"  {raw.strip():>4}/{probe:<8}  {jct:10.3f}  {slowed:13.2f}%  "
              f"{int(policy.lent_moves.sum()):>13,}  {_summary(per_job)}  "
              f"({time.perf_counter() - t0:.0f} s)", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[1] / "experiments" / "regions_philly.yaml")
    ap.add_argument("--moves", type=Path, default=None, help="a finished sweep's folder")
    ap.add_argument("--label", default="learned-reservations")
    ap.add_argument("--sweep", type=Path, default=None)
    ap.add_argument("--limits", default="none,1,2")
    ap.add_argument("--probes", default="estimate", help="lend_probe values, comma-separated")
    ap.add_argument("--set", action="append", default=[])
    args = ap.parse_args()
    if args.moves is not None:
        from_sweep(args.moves)
    else:
        _replays(args)


if __name__ == "__main__":
    main()
