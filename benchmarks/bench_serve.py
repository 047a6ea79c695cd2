"""Benchmark: `sia serve` on loopback (a real server process, a bounded load generator).

Starts `sia serve` on a pool file of ``--pools`` pools (1 GPU each) with ``--policy`` (FCFS by
default: the figures are the service's own costs; ``--policy sia --alias A`` for learned SIA)
and measures:

1. single-event requests: ``--singles`` submit events, one per POST, from a closed-loop
   generator of ``--connections`` kept-alive connections, each with one request in flight
   (so at most that many requests wait at once); and the same over one connection;
2. batches: ``--batched`` submit events in batches of ``--batch`` (events/s);
3. the decision: one clock event that decides with every pool's queue full (s);
4. ``GET /decisions`` with ``--pools`` pools and ``--pending`` pending jobs: ``--reads``
   requests, p50 / p99 (ms).

Every submit is committed to the SQLite log before its answer (``--sync`` FULL or NORMAL).
The generator writes HTTP/1.1 by hand on asyncio streams (about 50 us of CPU per request,
where httpx took about 1 ms of the same 2 cores); the CPU per request of the server and of
the generator come from /proc (Linux). Each figure is the median of ``--repeat`` runs, each
on a new server.

    .venv/bin/python benchmarks/bench_serve.py [--pools 1000] [--connections 32] [--sync FULL]

Measured (2 shared cores, FCFS, 1,000 pools, 10,000 pending; median of 3 runs; load average
6-7 from other jobs; "before" is the code before group commit, run with this script):

| version | sync | single events, 32 conn. | server / generator CPU per request | 1 conn. | batches |
|---|---|---|---|---|---|
| before | FULL | 605 events/s | 1,108 / 119 us | 206 events/s | 17,605 events/s |
| after | FULL | 1,571 events/s | 230 / 53 us | 274 events/s | 18,745 events/s |
| before | NORMAL | 986 events/s | 1,022 / 107 us | 912 events/s | 22,967 events/s |
| after | NORMAL | 2,631 events/s | 183 / 43 us | 818 events/s | 20,440 events/s |

The load moves the rates a lot; the CPU per request less (docs/guide/serve.md, "Measured").
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import statistics
import tempfile
import time
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import polars as pl
from sia.service.process import ServerProcess

TOKEN = "bench-token-0123456789abcdef"


def _request(host: str, body: bytes) -> bytes:
    return (f"POST /events HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {TOKEN}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
            ).encode() + body


async def _connection(host: str, port: int, todo: list[bytes], lat: list[float]) -> None:
    """One kept-alive connection: send the next request once the last one was answered."""
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while todo:
            request = todo.pop()
            t0 = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            length = 0
            for line in head.split(b"\r\n")[1:]:
                if line[:15].lower() == b"content-length:":
                    length = int(line[15:])
            body = await reader.readexactly(length)
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"the service answered {head.split(b' ', 2)[1]!r}: {body!r}")
            lat.append(time.perf_counter() - t0)
    finally:
        writer.close()


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system, s) process ``pid`` used so far (Linux /proc; NaN elsewhere)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return math.nan
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def single_events(url: str, events: list[dict], connections: int, pid: int
                  ) -> dict[str, float]:
    """POST ``events`` one per request over ``connections`` connections (closed loop):
    events/s, latency p50 / p99 (ms), and the CPU (us) per request of the server (process
    ``pid``) and of this generator."""
    parts = urlsplit(url)
    todo = [_request(parts.netloc, json.dumps(e).encode()) for e in reversed(events)]
    lat: list[float] = []

    async def run() -> None:
        await asyncio.gather(*(_connection(parts.hostname, parts.port, todo, lat)
                               for _ in range(connections)))

    t0, server0, own0 = time.perf_counter(), cpu_seconds(pid), time.process_time()
    asyncio.run(run())
    dt = time.perf_counter() - t0
    n = len(events)
    lat.sort()
    return {"rate": n / dt, "p50": statistics.median(lat) * 1e3,
            "p99": lat[min(n - 1, int(0.99 * n))] * 1e3,
            "server_us": (cpu_seconds(pid) - server0) / n * 1e6,
            "client_us": (time.process_time() - own0) / n * 1e6}


class Load:
    """The benchmark's events: submits spread over the pools, with unique ids."""

    def __init__(self, pools: list[str]):
        self.pools, self.n = pools, 0

    def submits(self, k: int, t0: float) -> list[dict]:
        out = []
        for i in range(k):
            n = self.n + i
            out.append({"id": f"s{n}", "type": "submit", "time": t0 + i * 1e-3, "job": f"j{n}",
                        "pool": self.pools[n % len(self.pools)], "gpus": 1})
        self.n += k
        return out


def one_run(args: argparse.Namespace, tmp: Path, pools_file: Path, names: list[str]
            ) -> dict[str, float]:
    """One server, every measurement: the figures by name."""
    extra = ["--alias", args.alias] if args.alias else []
    server = ServerProcess(tmp, [str(pools_file), "--policy", args.policy, "--token-file",
                                 str(tmp.parent / "token"), "--sync", args.sync,
                                 "--log-level", "warning", *extra])
    http = httpx.Client(base_url=server.url, timeout=600,
                        headers={"Authorization": f"Bearer {TOKEN}"})
    load, out = Load(names), {}
    try:
        # 1. one event per request (times spread so that nothing is decided yet)
        pid = server.proc.pid
        many = single_events(server.url, load.submits(args.singles, 1000.0), args.connections,
                             pid)
        out.update({f"singles_{k}": v for k, v in many.items()})
        one = single_events(server.url, load.submits(args.singles // 4, 1500.0), 1, pid)
        out.update({f"single1_{k}": v for k, v in one.items()})
        # 2. batches (bodies encoded first: the generator's JSON is not the service's cost)
        bodies = [json.dumps({"events": load.submits(min(args.batch, args.batched - lo),
                                                     2000.0 + lo * 1e-3)}).encode()
                  for lo in range(0, args.batched, args.batch)]
        t0, server0 = time.perf_counter(), cpu_seconds(pid)
        for body in bodies:
            http.post("/events", content=body,
                      headers={"Content-Type": "application/json"}).raise_for_status()
        out["batches"] = args.batched / (time.perf_counter() - t0)
        out["batch_server_us"] = (cpu_seconds(pid) - server0) / args.batched * 1e6
        # 3. decide with every queue full: top up to --pending pending jobs first
        want = args.pending + args.pools - load.n
        for lo in range(0, max(0, want), args.batch):
            evs = load.submits(min(args.batch, want - lo), 3000.0 + lo * 1e-3)
            http.post("/events", json={"events": evs}).raise_for_status()
        t0 = time.perf_counter()
        answer = http.post("/events", json={"id": "clock-1", "type": "clock",
                                            "time": 4000.0}).json()
        out["decide_s"] = time.perf_counter() - t0
        out["starts"] = len(answer["decisions"])
        # 4. GET /decisions with the queues full
        lat = []
        for _ in range(args.reads):
            t0 = time.perf_counter()
            http.get("/decisions").raise_for_status()
            lat.append(time.perf_counter() - t0)
        lat.sort()
        out["read_p50"] = statistics.median(lat) * 1e3
        out["read_p99"] = lat[min(len(lat) - 1, int(0.99 * len(lat)))] * 1e3
    finally:
        http.close()
        server.stop()
    return out


def table(args: argparse.Namespace, runs: list[dict[str, float]]) -> list[tuple[str, ...]]:
    """The rows to print: the median of each figure over the runs."""
    def med(key: str) -> float:
        return statistics.median(r[key] for r in runs)

    each = ", ".join(f"{r['singles_rate']:,.0f}" for r in runs)
    cpu = (f"CPU/request: server {med('singles_server_us'):.0f} us, generator "
           f"{med('singles_client_us'):.0f} us")
    return [
        (f"single-event POSTs, {args.connections} connections", f"{args.singles} events",
         f"{med('singles_rate'):,.0f} events/s ({each})",
         f"p50 {med('singles_p50'):.1f} / p99 {med('singles_p99'):.1f} ms; {cpu}"),
        ("single-event POSTs, 1 connection", f"{args.singles // 4} events",
         f"{med('single1_rate'):,.0f} events/s",
         f"p50 {med('single1_p50'):.2f} / p99 {med('single1_p99'):.1f} ms"),
        (f"batches of {args.batch}", f"{args.batched} events", f"{med('batches'):,.0f} events/s",
         f"server CPU {med('batch_server_us'):.1f} us/event"),
        ("clock: decide every instant", f"{med('starts'):.0f} starts", f"{med('decide_s'):.2f} s",
         ""),
        (f"GET /decisions ({args.pools} pools)", f"{args.reads} requests",
         f"p50 {med('read_p50'):.1f} ms", f"p99 {med('read_p99'):.1f} ms"),
    ]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pools", type=int, default=1000)
    ap.add_argument("--pending", type=int, default=10_000)
    ap.add_argument("--singles", type=int, default=4000)
    ap.add_argument("--connections", type=int, default=32)
    ap.add_argument("--batched", type=int, default=20_000)
    ap.add_argument("--batch", type=int, default=2000)
    ap.add_argument("--reads", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
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
        runs = [one_run(args, tmp / f"state{k}", pools_file, names) for k in range(args.repeat)]
    print(f"sia serve on loopback: policy {args.policy}, sync {args.sync}, {args.pools} pools, "
          f"median of {args.repeat} runs")
    rows = table(args, runs)
    head = ("what", "load", "rate", "latency")
    widths = [max(len(str(r[i])) for r in [*rows, head]) for i in range(4)]
    for r in [head, *rows]:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())


if __name__ == "__main__":
    main()
