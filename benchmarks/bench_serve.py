"""Benchmark: `sia serve` on loopback (a real server process, a bounded load generator).

Starts `sia serve` on a pool file of ``--pools`` pools (1 GPU each) with ``--policy`` (FCFS by
default: the figures are the service's own costs; ``--policy sia --alias A`` for learned SIA)
and measures, with one kept-alive HTTP connection:

1. single-event requests: ``--singles`` submit events, one per POST (events/s);
2. batches: ``--batched`` submit events in batches of ``--batch`` (events/s);
3. the decision: one clock event that decides with every pool's queue full (s);
4. ``GET /decisions`` with ``--pools`` pools and ``--pending`` pending jobs: ``--reads``
   requests, p50 / p99 (ms).

Every submit goes to the SQLite log before the answer (``--sync`` FULL or NORMAL).

    .venv/bin/python benchmarks/bench_serve.py [--pools 1000] [--pending 10000] [--sync FULL]
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import httpx
import polars as pl
from sia.service.process import ServerProcess

TOKEN = "bench-token-0123456789abcdef"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=2000)
    ap.add_argument("--batched", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--sync", default="FULL")
    ap.add_argument("--policy", default="fcfs")
    ap.add_argument("--alias", default=None)
    args = ap.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        names = [f"pool{i:04d}" for i in range(args.pools)]
        pools_file = tmp / "pools.csv"
        pl.DataFrame({"pool": names, "quota_gpus": [1] * args.pools}).write_csv(pools_file)
        (tmp / "token").write_text(TOKEN)
        extra = ["--alias", args.alias] if args.alias else []
        server = ServerProcess(tmp / "state", [str(pools_file), "--policy", args.policy,
                                               "--token-file", str(tmp / "token"), "--sync",
                                               args.sync, "--log-level", "warning", *extra])
        http = httpx.Client(base_url=server.url, timeout=600,
                            headers={"Authorization": f"Bearer {TOKEN}"})
        rows = []
        try:
            seq = iter(range(10**9))

            def submit(t: float) -> dict:
                i = next(seq)
                return {"id": f"s{i}", "type": "submit", "time": t, "job": f"j{i}",
                        "pool": names[i % args.pools], "gpus": 1}

            # 1. one event per request (times spread so that nothing is decided yet)
            t0 = time.perf_counter()
            for k in range(args.singles):
                r = http.post("/events", json=submit(1000.0 + k * 1e-3))
                r.raise_for_status()
            dt = time.perf_counter() - t0
            rows.append(("single-event POSTs", f"{args.singles} events",
                         f"{args.singles / dt:,.0f} events/s", f"{dt / args.singles * 1e3:.2f} ms"))
            # 2. batches
            t0 = time.perf_counter()
            sent = 0
            while sent < args.batched:
                n = min(args.batch, args.batched - sent)
                evs = [submit(2000.0 + (sent + i) * 1e-3) for i in range(n)]
                http.post("/events", json={"events": evs}).raise_for_status()
                sent += n
            dt = time.perf_counter() - t0
            rows.append((f"batches of {args.batch}", f"{args.batched} events",
                         f"{args.batched / dt:,.0f} events/s",
                         f"{dt / max(1, args.batched // args.batch) * 1e3:.1f} ms/batch"))
            # 3. decide with every queue full: the submits so far are all pending but one per
            # pool; top up to --pending pending jobs first
            total = args.singles + args.batched
            want = args.pending + args.pools
            if want > total:
                evs = [submit(3000.0 + i * 1e-3) for i in range(want - total)]
                for lo in range(0, len(evs), args.batch):
                    http.post("/events", json={"events": evs[lo:lo + args.batch]}
                              ).raise_for_status()
            t0 = time.perf_counter()
            answer = http.post("/events", json={"id": "clock-1", "type": "clock",
                                                "time": 4000.0}).json()
            dt = time.perf_counter() - t0
            state = http.get("/metrics").text
            pending = sum(float(line.rsplit(" ", 1)[1]) for line in state.splitlines()
                          if line.startswith("sia_pool_pending_jobs{"))
            rows.append(("clock: decide every instant", f"{len(answer['decisions'])} starts, "
                         f"{pending:.0f} pending", f"{dt:.2f} s", "(incl. the log's first re-run)"))
            # 4. GET /decisions with the queues full
            lat = []
            for _ in range(args.reads):
                t0 = time.perf_counter()
                http.get("/decisions").raise_for_status()
                lat.append(time.perf_counter() - t0)
            lat.sort()
            p99 = lat[min(len(lat) - 1, int(0.99 * len(lat)))]
            rows.append((f"GET /decisions ({args.pools} pools)", f"{args.reads} requests",
                         f"p50 {statistics.median(lat) * 1e3:.1f} ms",
                         f"p99 {p99 * 1e3:.1f} ms"))
        finally:
            http.close()
            server.stop()
    print(f"sia serve on loopback: policy {args.policy}, sync {args.sync}, {args.pools} pools")
    widths = [max(len(str(r[i])) for r in rows + [("what", "load", "rate", "latency")])
              for i in range(4)]
    for r in [("what", "load", "rate", "latency"), *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)))


if __name__ == "__main__":
    main()
