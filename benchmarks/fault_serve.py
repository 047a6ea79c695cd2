"""Fault runs of `sia serve` (a real server process on loopback); prints a table of outcomes.

1. kill -9 in the middle of a drive run, then a restart on the same state and port: the
   events acknowledged before the kill are all in the log, and the starts of the whole run
   equal an uninterrupted replay's (MaxMin on a synthetic workload of ``--days`` days).
   And kill -9 while ``--connections`` clients post single events at once (their requests
   share log commits): every acknowledged event is in the log after the restart.
2. a full disk (the log capped with ``--max-log-mb``, which fails as a full disk does): 503
   with a one-line reason, nothing of the refused batch logged, the log intact after a restart.
3. a bad token: 401.
4. ``--fuzz`` fuzzed bodies (mutated events, wrong types, garbage bytes): no 5xx.

    .venv/bin/python benchmarks/fault_serve.py [--days 2] [--fuzz 1000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sqlite3
import tempfile
from pathlib import Path

import httpx
from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import simulate
from sia.scheduler.registry import make_policy
from sia.service.client import Client
from sia.service.drive import drive_trace, first_difference
from sia.service.process import ServerProcess

TOKEN = "fault-token-0123456789abcdef"


def _server(tmp: Path, name: str, pools_file: Path, policy: str, *extra: str) -> ServerProcess:
    return ServerProcess(tmp / name, [str(pools_file), "--policy", policy, "--token-file",
                                      str(tmp / "token"), "--log-level", "warning", *extra])


def kill9_run(tmp: Path, days: float, pools_file: Path, jobs, pools) -> tuple[str, str]:
    res = simulate(jobs, pools, make_policy("maxmin"))
    replay = dict(zip(res["job_id"], res["start_time"], strict=True))
    server = _server(tmp, "kill9", pools_file, "maxmin")
    client = Client(server.url, TOKEN, retries=8)
    acked = {"events": 0, "at_kill": 0, "logged_after": 0, "steps": 0}

    def send(events):
        answer = client.post_events(events)
        acked["events"] += answer["accepted"] + answer["duplicates"]
        return answer

    def on_step(clock: float) -> None:
        acked["steps"] += 1
        if acked["steps"] == 150:
            acked["at_kill"] = acked["events"]
            server.restart()
            acked["logged_after"] = _logged(server.state)

    try:
        got = drive_trace(jobs, send, lookahead_s=6 * 3600.0, on_step=on_step)
    finally:
        client.close()
        server.stop()
    diff = first_difference(got.starts, replay)
    ok = diff is None and acked["logged_after"] >= acked["at_kill"] > 0
    return ("kill -9 mid-run + restart",
            f"{'ok' if ok else 'FAILED'}: {acked['at_kill']} events acked before the kill, "
            f"{acked['logged_after']} in the log after it; {len(got.starts)} starts, "
            + ("identical to the replay" if diff is None else diff))


def concurrent_kill9_run(tmp: Path, pools_file: Path, pool: str, connections: int
                        ) -> tuple[str, str]:
    """``connections`` clients post single submits at once; kill -9 after 300 answers."""
    server = _server(tmp, "kill9-concurrent", pools_file, "fcfs")
    acked: list[str] = []
    sent = iter(range(10**9))

    async def client(http: httpx.AsyncClient) -> None:
        while server.proc.poll() is None:
            i = next(sent)
            ev = {"id": f"c{i}", "type": "submit", "time": 1.0 + i * 1e-3, "job": f"cj{i}",
                  "pool": pool, "gpus": 1}
            try:
                r = await http.post("/events", json=ev)
            except httpx.TransportError:
                return
            if r.status_code == 200:
                acked.append(ev["id"])
            if len(acked) >= 300 and server.proc.poll() is None:
                server.kill9()

    async def run() -> None:
        limits = httpx.Limits(max_connections=connections)
        async with httpx.AsyncClient(base_url=server.url, limits=limits, timeout=30,
                                     headers={"Authorization": f"Bearer {TOKEN}"}) as http:
            await asyncio.gather(*(client(http) for _ in range(connections)))

    try:
        asyncio.run(run())
        server.start(server.port)
        health = httpx.get(server.url + "/healthz").json()
        db = sqlite3.connect(server.state / "events.db")
        logged = {i for (i,) in db.execute("SELECT id FROM events")}
        db.close()
    finally:
        server.stop()
    lost = [i for i in acked if i not in logged]
    ok = not lost and health["jobs"] == len(logged)
    return (f"kill -9 amid {connections} concurrent clients",
            f"{'ok' if ok else 'FAILED'}: {len(acked)} single events acked before the kill, "
            f"{len(lost)} of them missing from the log after it ({len(logged)} logged, "
            f"{health['jobs']} jobs after the restart)")


def _logged(state: Path) -> int:
    db = sqlite3.connect(state / "events.db")
    try:
        return int(db.execute("SELECT COUNT(*) FROM events").fetchone()[0])
    finally:
        db.close()


def full_disk_run(tmp: Path, pools_file: Path, pool: str) -> tuple[str, str]:
    server = _server(tmp, "full", pools_file, "fcfs", "--max-log-mb", "0.05")
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}"})
    try:
        status, sent, message = 200, 0, ""
        while status == 200 and sent < 100_000:
            evs = [{"id": f"d{sent + i}", "type": "submit", "time": 1.0 + sent + i,
                    "job": f"dj{sent + i}", "pool": pool, "gpus": 1} for i in range(50)]
            r = http.post("/events", json={"events": evs})
            status = r.status_code
            if status == 200:
                sent += 50
            else:
                message = r.json().get("error", r.text)
        logged = _logged(server.state)
        health = http.get("/healthz").json()
        server.restart()
        after = httpx.get(server.url + "/healthz").json()
        db = sqlite3.connect(server.state / "events.db")
        integrity = db.execute("PRAGMA integrity_check").fetchone()[0]
        db.close()
    finally:
        http.close()
        server.stop()
    ok = status == 503 and logged == sent and after["jobs"] == sent and integrity == "ok"
    return ("full disk (log capped)",
            f"{'ok' if ok else 'FAILED'}: {status} after {sent} events ({message[:90]}); "
            f"{logged} logged, {after['jobs']} jobs after a restart (before: {health['jobs']}), "
            f"integrity_check {integrity}")


def fuzz_run(tmp: Path, pools_file: Path, pool: str, n: int, seed: int) -> tuple[str, str]:
    rng = random.Random(seed)
    server = _server(tmp, "fuzz", pools_file, "fcfs")
    http = httpx.Client(base_url=server.url, headers={"Authorization": f"Bearer {TOKEN}",
                                                      "Content-Type": "application/json"})
    junk = [None, True, -1, 0, 2**70, 1e308, -1e308, "", "x" * 300, [], {}, [1, 2], {"a": 1},
            "NaN", "1e999", 3.5, "submit"]
    statuses: dict[int, int] = {}
    try:
        r = http.get("/healthz", headers={"Authorization": "Bearer wrong"})
        bad = http.post("/events", json={"id": "t", "type": "clock", "time": 1.0},
                        headers={"Authorization": "Bearer not-the-token-at-all"})
        token_row = ("bad token", f"{'ok' if bad.status_code == 401 else 'FAILED'}: POST "
                     f"answered {bad.status_code}; GET /healthz {r.status_code} (reads open)")
        for i in range(n):
            ev = {"id": f"f{i}", "type": rng.choice(["submit", "start", "finish", "quota",
                                                     "clock"]),
                  "time": rng.uniform(0, 1e6), "job": f"fj{rng.randrange(50)}", "pool": pool,
                  "gpus": rng.randrange(1, 4)}
            for _ in range(rng.randrange(1, 4)):
                key = rng.choice(list(ev) + ["tag", "user", "time_limit", "preemptible", "zz"])
                if rng.random() < 0.3:
                    ev.pop(key, None)
                else:
                    ev[key] = rng.choice(junk)
            kind = rng.random()
            if kind < 0.1:
                body = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200)))
            elif kind < 0.3:
                body = json.dumps({"events": [ev, dict(ev, id=f"g{i}")]}).encode()
            else:
                body = json.dumps(ev).encode()
            s = http.post("/events", content=body).status_code
            statuses[s] = statuses.get(s, 0) + 1
    finally:
        http.close()
        server.stop()
    five = sum(v for k, v in statuses.items() if k >= 500)
    return token_row, ("fuzzed bodies", f"{'ok' if five == 0 else 'FAILED'}: {n} bodies, "
                       f"statuses {dict(sorted(statuses.items()))}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--days", type=float, default=2.0)
    ap.add_argument("--fuzz", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--connections", type=int, default=32)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        (tmp / "token").write_text(TOKEN)
        jobs, pools = generate_workload("base", seed=args.seed, days=args.days)
        pools_file = tmp / "pools.csv"
        pools.write_csv(pools_file)
        pool = str(pools["pool"][0])
        rows = [kill9_run(tmp, args.days, pools_file, jobs, pools),
                concurrent_kill9_run(tmp, pools_file, pool, args.connections),
                full_disk_run(tmp, pools_file, pool)]
        rows += list(fuzz_run(tmp, pools_file, pool, args.fuzz, args.seed))
    print(f"sia serve fault runs ({jobs.height} jobs in the kill -9 run)")
    w = max(len(r[0]) for r in rows)
    for what, outcome in rows:
        print(f"{what.ljust(w)}  {outcome}")


if __name__ == "__main__":
    main()
