"""Why global reservations stop short of balance: the hourly demand-to-supply, taken apart.

Run: ``.venv/bin/python benchmarks/bench_regions_diagnose.py [CONFIG] [--label LABEL]
[--sweep DIR] [--set KEY=VALUE ...]``

Replays one reservations policy of a `sia evaluate` config with regions (default:
``experiments/regions_philly.yaml``, ``reservations-perfect``; a learned label needs the
predictors its sweep ``DIR`` trained) and prints, hour by hour averaged over the replay,
the worst region's queued-plus-running demand over its GPUs against the balanced value
(``actual``: the region report's ``qr_worst_over_avg``, a job waiting in each queue for its
time there; ``wait where ran``: its whole wait in the region it ran in), and the same when
each pool's outstanding
demand (queued plus running GPUs, wherever it is) is spread over the regions

- ``in force``: in proportion to the shares in force at that hour (what routing could
  reach with those shares),
- ``target``: in proportion to the last plan's target shares (what the plan asked for,
  were the shares already moved),
- ``hourly best``: in proportion to shares chosen for that hour with its true outstanding
  demand (an hourly MIP with the plan's constraints: whole GPUs, each share 0 or at least
  the pool's widest job so far): what a plan can reach at all.

The gaps between the columns say where balance is lost: routing (actual vs in force),
shares that lag their target (in force vs target), the plan's demand estimate and period
(target vs hourly best), and the setup itself (hourly best vs 1). Also printed: the means
by the hour's balanced ratio, and each plan's predicted demand against the day's
outstanding demand.
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import polars as pl


def _spec(args: argparse.Namespace):  # noqa: ANN202 - a ReplaySpec
    from sia.pipelines.studies import evaluate as ev
    from sia.pipelines.studies.experiment import load_config

    cfg = load_config(args.config, args.set or None)
    chosen = tuple(p for p in cfg.policies if p.label == args.label)
    if not chosen:
        raise SystemExit(f"no policy labelled {args.label!r} in {args.config}")
    cfg = replace(cfg, policies=chosen)
    wl = ev.load_trace(cfg)
    jobs, experiments = ev.sweep_experiments(cfg, wl)
    predictors = None
    if cfg.needs_predictors():
        if args.sweep is None:
            raise SystemExit(f"{args.label} uses learned predictors: pass --sweep DIR")
        reg = replace(cfg, predictors=replace(cfg.predictors, train="registry"))
        predictors = ev.prepare_predictors(reg, wl, args.sweep, lambda m: None)
    from sia.pipelines.inputs import jobs_before

    prior = jobs_before(wl.jobs, cfg.replay_start_day)
    spec = next(s for s in ev.experiment_specs(cfg, experiments[0], jobs, predictors, prior)
                if s.where[-1] == args.label)
    return cfg, spec


def _steps(log: list[tuple[float, np.ndarray]], t: np.ndarray) -> np.ndarray:
    """The logged matrix in force at each time of ``t`` [time, pool, region]."""
    times = np.array([x[0] for x in log])
    idx = np.searchsorted(times, t, side="right") - 1
    mats = np.stack([x[1] for x in log])
    return mats[np.maximum(idx, 0)]


def _best_hour(o: np.ndarray, q: np.ndarray, w: np.ndarray, g: np.ndarray) -> float:
    """The smallest worst region ratio over shares for one hour's outstanding demand ``o``
    (whole GPUs, rows sum to ``q``, columns within ``g``, each share 0 or >= ``w``)."""
    from ortools.linear_solver import pywraplp

    m = pywraplp.Solver.CreateSolver("SCIP")
    n_p, n_r = len(q), len(g)
    s = [[m.IntVar(0, int(q[p]), "") for _ in range(n_r)] for p in range(n_p)]
    x = [[m.BoolVar("") for _ in range(n_r)] for p in range(n_p)]
    z = m.NumVar(0, m.infinity(), "z")
    for p in range(n_p):
        m.Add(sum(s[p]) == int(q[p]))
        for r in range(n_r):
            m.Add(s[p][r] <= int(q[p]) * x[p][r])
            m.Add(s[p][r] >= int(min(w[p], q[p])) * x[p][r])
    for r in range(n_r):
        m.Add(sum(s[p][r] for p in range(n_p)) <= int(g[r]))
        m.Add(sum(float(o[p] / q[p]) * s[p][r] for p in range(n_p)) <= float(g[r]) * z)
    m.Minimize(z)
    m.SetTimeLimit(2000)
    m.Solve()
    return float(z.solution_value())


def main() -> None:
    from sia.pipelines.engine.run import build_policy
    from sia.scheduler.core.simulator import simulate
    from sia.scheduler.regions.metrics import _active

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("config", nargs="?", type=Path,
                    default=Path(__file__).resolve().parents[1] / "experiments" / "regions_philly.yaml")
    ap.add_argument("--label", default="reservations-perfect")
    ap.add_argument("--sweep", type=Path, default=None)
    ap.add_argument("--set", action="append", default=[])
    ap.add_argument("--no-best", action="store_true", help="skip the hourly MIPs")
    ap.add_argument("--consolidate", default=None, help="override consolidate (off|swap|free)")
    ap.add_argument("--plan-demand", default=None,
                    help="what the plans balance: outstanding (default) or arrivals")
    args = ap.parse_args()
    cfg, spec = _spec(args)
    jobs, pools = spec.workload.frames()
    policy = build_policy(spec)
    if args.consolidate is not None:
        policy.consolidate = args.consolidate
    if args.plan_demand:
        policy.plan_demand = args.plan_demand
    targets: list[tuple[float, np.ndarray]] = []
    t0 = time.perf_counter()

    def hook_reset(orig):  # noqa: ANN001, ANN202
        def reset(trace, cluster):  # noqa: ANN001, ANN202
            orig(trace, cluster)
            led = policy._ledger
            set_target = led.set_target
            targets.append((0.0, led.target.copy()))

            def record(target):  # noqa: ANN001, ANN202
                set_target(target)
                targets.append((policy._now, led.target.copy()))
            led.set_target = record
        return reset

    policy.reset = hook_reset(policy.reset)
    result = simulate(jobs, pools, policy, tick_s=spec.tick_s)
    wall = time.perf_counter() - t0
    trace = policy._trace
    names = list(trace.pool_names)
    pidx = {n: i for i, n in enumerate(names)}
    lay = policy.layout
    g = lay.gpus.astype(float)
    q = trace.quota.astype(float)
    P, R = len(names), lay.n_regions
    pool = np.array([pidx[p] for p in result["pool"].to_list()])
    sub, start, end = (result[c].to_numpy() for c in ("submit_time", "start_time", "end_time"))
    gpus = result["num_gpus"].to_numpy().astype(float)
    row = {str(j): i for i, j in enumerate(trace.job_ids.tolist())}
    ran = policy.ran_in[[row[str(j)] for j in result["job_id"].to_list()]]
    t = np.arange(sub.min(), sub.max() + 3600.0, 3600.0)
    o = np.zeros((t.size, P, R))  # queued-plus-running GPUs per pool and region
    for p in range(P):
        for r in range(R):
            m = (pool == p) & (ran == r)
            o[:, p, r] = _active(sub[m], end[m], gpus[m], t)
    op = o.sum(axis=2)
    bal = op.sum(axis=1) / g.sum()
    busy = bal > 0
    widest = np.maximum.accumulate(np.stack([
        np.array([gpus[(pool == p) & (sub <= x)].max(initial=1.0) for p in range(P)])
        for x in t]), axis=0)

    def worst(load: np.ndarray) -> np.ndarray:  # [time, region] -> worst over balanced
        return (load / g).max(axis=1)[busy] / bal[busy]

    force = _steps(policy.share_log, t).astype(float)
    target = _steps(targets, t).astype(float)
    from sia.scheduler.regions.metrics import demand_over_time

    ran_df = pl.DataFrame(policy.job_regions(), schema={"job_id": pl.String, "region": pl.String})
    moved = demand_over_time(result.join(ran_df, on="job_id", how="left"),
                             {r.name: int(r.gpus) for r in lay.regions},
                             {p: lay.regions[lay.home[lay.pool_index[p]]].name for p in names},
                             queued_where_ran=True, moves=policy.facts()["queue_moves"])
    ratio = moved.pivot(on="region", index="period", values="ratio").sort("period")
    cols = {"actual": ratio.select([r.name for r in lay.regions]).to_numpy().max(axis=1)[busy]
            / bal[busy],
            "wait where ran": worst(o.sum(axis=1)),
            "in force": worst(np.einsum("tp,tpr->tr", op / q, force)),
            "target": worst(np.einsum("tp,tpr->tr", op / q, target))}
    if not args.no_best:
        best = np.array([_best_hour(op[i], q, widest[i], g) for i in np.flatnonzero(busy)])
        cols["hourly best"] = best / bal[busy]
    print(f"{args.config.name} {args.label} ({policy.plan_demand}): {len(sub)} jobs, replay {wall:.0f} s, "
          f"{busy.sum()} busy hours, {len(targets) - 1} plans")
    print("hourly worst/balanced, mean over busy hours:")
    print("  " + "  ".join(f"{k:>11}" for k in cols))
    print("  " + "  ".join(f"{v.mean():>11.3f}" for v in cols.values()))
    edges = [0, 0.5, 0.8, 1.0, 1.5, np.inf]
    b = bal[busy]
    print("by the hour's balanced ratio (hours, then the means):")
    for lo, hi in zip(edges[:-1], edges[1:], strict=True):
        m = (b >= lo) & (b < hi)
        if m.any():
            print(f"  [{lo:g}, {hi:g}) {m.sum():>5} " + "  ".join(f"{v[m].mean():>11.3f}"
                                                             for v in cols.values()))
    share = (o.sum(axis=1) / g)[busy]
    print("worst region (hours):", {lay.regions[r].name: int((share.argmax(axis=1) == r).sum())
                                   for r in range(R)})
    plans = policy.stats["plans"]
    print("plans: predicted demand / the day's mean outstanding demand, all pools (GPUs):")
    for pl_ in plans[:: max(1, len(plans) // 8)]:
        m = (t >= pl_["t"]) & (t < pl_["t"] + policy.period_s)
        print(f"  day {pl_['t'] / 86400:5.1f}: {sum(pl_['demand']):8.1f} / "
              f"{op[m].sum(axis=1).mean() if m.any() else float('nan'):8.1f}  "
              f"planned max {pl_['planned_max_ratio']:.2f}/{pl_['planned_avg_ratio']:.2f}")
    warm = sub >= sub.min() + cfg.warmup_days * 86400.0
    print(f"mean JCT after the warm-up: {(end - sub)[warm].mean() / 3600:.3f} h")
    lag = np.abs(force - target).sum(axis=(1, 2))[busy] / 2
    print(f"GPUs of share away from target: mean {lag.mean():.1f}, hours with any "
          f"{(lag > 0).mean():.1%}; share GPUs moved {policy._ledger.moved_gpus}")


if __name__ == "__main__":
    main()
