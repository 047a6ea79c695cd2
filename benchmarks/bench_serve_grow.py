"""Benchmark: `sia serve` fed one job at a time, growing its arrays vs rebuilding them.

A live cluster submits jobs one by one, each at its own instant. The service used to rebuild
its trace arrays and re-run its whole event log on a fresh policy at every such arrival
(quadratic in the history); it now grows the arrays, the loop and the policy in place
(:mod:`sia.service.core`). This drives a synthetic workload (``--workload``, ``--seed``,
``--days``; default the base workload, seed 1, 16 days: 1,909 jobs) through the service with
the driver of `sia shadow` (:func:`sia.service.drive.drive_trace`) and prints, per way of
sending the submissions (``--lookahead``: seconds ahead of the clock; inf = all first, 0 = each
at its own instant) and per path (``grow``: this code; ``rebuild``: growing switched off, i.e.
the code before), the wall time, the rebuilds and the grows, and whether every start equals
`sia replay`'s.

In-process (a :class:`~sia.service.core.ServiceCore`, no HTTP) by default; ``--http`` also
drives a real `sia serve` process on loopback (one ``POST /events`` per instant, the grow path).
``--policy`` is fcfs or maxmin (no predictors needed), or sia with ``--alias A`` (the
registered predictors, as `sia serve --alias A`).

    .venv/bin/python benchmarks/bench_serve_grow.py [--policy maxmin] [--lookahead inf,3600,0]
        [--paths grow,rebuild] [--http]

Measured: see docs/guide/serve.md ("Growing the arrays").
"""

from __future__ import annotations

import argparse
import math
import tempfile
import time
from pathlib import Path

import polars as pl
from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import simulate
from sia.service.api_models import answer_of  # noqa: F401 -- imported before any timing
from sia.service.core import ServiceCore
from sia.service.drive import core_sender, drive_trace, first_difference

TOKEN = "bench-token-0123456789abcdef"


def _make(policy: str, alias: str | None, pools: pl.DataFrame, prior: pl.DataFrame | None):
    """``make_policy()`` as `sia serve` builds it (the replay engine's build_policy)."""
    from sia.pipelines.service_inputs import policy_factory, resolve_predictors

    predictors, options = resolve_predictors(policy, alias, "5,60,720")
    return policy_factory(policy, pools, prior, predictors=predictors, options=options)


def _workload(args) -> tuple[pl.DataFrame, pl.DataFrame, pl.DataFrame | None, str]:
    """(jobs, pools, prior history, label): a synthetic workload, or with ``--trace`` a trace's
    replay window cut as `sia serve` / `sia replay` cut it."""
    if args.trace is None:
        jobs, pools = generate_workload(args.workload, seed=args.seed, days=args.days)
        return jobs, pools, None, f"{args.workload} seed {args.seed}, {args.days:g} days"
    from sia.pipelines.service_inputs import serve_inputs

    got = serve_inputs(Path(args.trace), clean=args.clean,
                       replay_start_day=args.replay_start_day,
                       replay_end_day=args.replay_end_day)
    return (got.jobs, got.pools, got.prior,
            f"{args.trace} days {args.replay_start_day:g}-{args.replay_end_day:g}")


def _in_process(jobs, pools, make, lookahead: float, path: str, replay: dict) -> dict:
    core = ServiceCore(pools, make)
    if path == "rebuild":
        core._grow = lambda: False  # the code before: every new job rebuilds and re-runs
    t0 = time.perf_counter()
    got = drive_trace(jobs, core_sender(core), lookahead_s=lookahead)
    wall = time.perf_counter() - t0
    return {"wall": wall, "rebuilds": core.rebuilds, "grows": core.grows,
            "requests": got.requests, "same": first_difference(got.starts, replay) is None,
            "lent": len(got.lent)}


def _over_http(jobs, args, lookahead: float, replay: dict) -> dict:
    from sia.service.client import Client
    from sia.service.process import ServerProcess

    with tempfile.TemporaryDirectory() as tmp:
        token = Path(tmp) / "token"
        token.write_text(TOKEN)
        extra = ["--alias", args.alias] if args.alias else []
        server = ServerProcess(Path(tmp) / "state", [
            "--synthetic", args.workload, "--seed", str(args.seed), "--days", str(args.days),
            "--policy", args.policy, "--token-file", str(token), "--sync", args.sync,
            "--log-level", "warning", *extra])
        client = Client(server.url, TOKEN)
        try:
            t0 = time.perf_counter()
            got = drive_trace(jobs, client.post_events, lookahead_s=lookahead)
            wall = time.perf_counter() - t0
        finally:
            client.close()
            server.stop()
    return {"wall": wall, "rebuilds": got.rebuilds, "grows": got.grows, "requests": got.requests,
            "same": first_difference(got.starts, replay) is None, "lent": len(got.lent)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workload", default="base")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--days", type=float, default=16.0)
    ap.add_argument("--trace", default=None, help="a trace instead (e.g. builtin:philly)")
    ap.add_argument("--clean", action="store_true")
    ap.add_argument("--replay-start-day", type=float, default=None)
    ap.add_argument("--replay-end-day", type=float, default=None)
    ap.add_argument("--policy", default="maxmin")
    ap.add_argument("--alias", default=None)
    ap.add_argument("--lookahead", default="inf,3600,0",
                    help="seconds ahead of the clock, comma-separated (inf: all first)")
    ap.add_argument("--paths", default="grow,rebuild")
    ap.add_argument("--http", action="store_true", help="also over HTTP (grow path)")
    ap.add_argument("--sync", default="NORMAL")
    args = ap.parse_args()
    jobs, pools, prior, label = _workload(args)
    make = _make(args.policy, args.alias, pools, prior)
    t0 = time.perf_counter()
    res = simulate(jobs, pools, make())
    replay_s = time.perf_counter() - t0
    replay = dict(zip(res["job_id"], res["start_time"], strict=True))
    print(f"{args.policy} on {label}: "
          f"{jobs.height} jobs, {jobs['submit_time'].n_unique()} submission instants; "
          f"sia replay {replay_s:.2f} s")
    print("| where | path | submissions sent | rebuilds | grows | requests | wall time | "
          "starts = replay |")
    print("|---|---|---|---|---|---|---|---|")
    for la in (float(x) for x in args.lookahead.split(",")):
        shown = "all first" if math.isinf(la) else f"{la:g} s ahead"
        runs = [("in-process", p,
                 lambda p=p, la=la: _in_process(jobs, pools, make, la, p, replay))
                for p in args.paths.split(",")]
        if args.http and args.trace is None:
            runs.append(("HTTP", "grow", lambda la=la: _over_http(jobs, args, la, replay)))
        for where, path, run in runs:
            r = run()
            grows = "-" if r["grows"] is None else r["grows"]
            print(f"| {where} | {path} | {shown} | {r['rebuilds']} | {grows} | "
                  f"{r['requests']} | {r['wall']:.2f} s | {r['same']} |", flush=True)


if __name__ == "__main__":
    main()
