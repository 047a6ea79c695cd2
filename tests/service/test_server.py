"""`sia serve` as a real server on a loopback port: parity over HTTP, kill -9 and restart,
auth, 4xx paths, idempotent retries."""

from __future__ import annotations

import json
import math
from pathlib import Path

import httpx
import polars as pl
import pytest
from sia.data.synthetic import generate_workload
from sia.scheduler.core.simulator import simulate
from sia.scheduler.registry import make_policy, policy_options
from sia.service.api_models import MAX_BATCH
from sia.service.client import Client
from sia.service.drive import drive_trace, first_difference
from sia.service.process import ServerProcess

TOKEN = "test-token-0123456789abcdef"


def Server(tmp: Path, pools: pl.DataFrame, policy: str) -> ServerProcess:
    """`sia serve` on a pool file with ``policy`` and the test token."""
    pools_file, token_file = tmp / "pools.csv", tmp / "token.txt"
    pools.write_csv(pools_file)
    token_file.write_text(TOKEN + "\n")
    return ServerProcess(tmp / "state", [str(pools_file), "--policy", policy, "--token-file",
                                         str(token_file), "--log-level", "warning"])


@pytest.fixture(scope="module")
def workload() -> tuple[pl.DataFrame, pl.DataFrame]:
    return generate_workload("base", seed=1, days=1.0)


@pytest.fixture(scope="module")
def fcfs_server(tmp_path_factory, workload):
    server = Server(tmp_path_factory.mktemp("fcfs"), workload[1], "fcfs")
    yield server
    server.stop()


def _post(url: str, body, token: str | None = TOKEN, raw: bytes | None = None) -> httpx.Response:
    headers = {"Content-Type": "application/json"}
    if token is not None:
        headers["Authorization"] = f"Bearer {token}"
    content = raw if raw is not None else json.dumps(body).encode()
    return httpx.post(url + "/events", content=content, headers=headers, timeout=30)


def test_parity_over_http_through_a_kill_9_and_restart(tmp_path, workload):
    """Drive MaxMin (it lends idle GPUs) over HTTP, kill -9 the server half-way and restart it
    on the same state: every start is the replay's (learned SIA's parity: test_core.py and
    the Philly run in docs/guide/serve.md)."""
    jobs, pools = workload
    name = "maxmin"
    res = simulate(jobs, pools, make_policy(name, **policy_options(name, seed=0)))
    replay = dict(zip(res["job_id"], res["start_time"], strict=True))
    server = Server(tmp_path, pools, name)
    client = Client(server.url, TOKEN)
    steps = {"n": 0, "restarted": False}

    def on_step(clock: float) -> None:
        steps["n"] += 1
        if steps["n"] == 60:
            before = client.get("/healthz")
            decisions = client.get("/decisions", since=0)["decisions"]
            server.restart()
            after = client.get("/healthz")
            assert after["jobs"] == before["jobs"] and after["clock"] == before["clock"]
            assert client.get("/decisions", since=0)["decisions"] == decisions
            steps["restarted"] = True

    try:
        got = drive_trace(jobs, client.post_events, on_step=on_step)
        assert steps["restarted"]
        assert first_difference(got.starts, replay) is None
        assert got.lent
    finally:
        client.close()
        server.stop()


def test_writes_need_the_token(fcfs_server):
    url = fcfs_server.url
    ev = {"id": "auth-1", "type": "clock", "time": 1.0}
    for token in (None, "wrong-token-0123456789", TOKEN[:-1]):
        r = _post(url, ev, token=token)
        assert r.status_code == 401
        assert r.json() == {"error": "missing or wrong bearer token"}
    r = httpx.post(url + "/events", json=ev, headers={"Authorization": f"Basic {TOKEN}"})
    assert r.status_code == 401
    assert httpx.get(url + "/healthz").status_code == 200  # reads are open by default
    assert httpx.get(url + "/decisions").status_code == 200


@pytest.mark.parametrize("body, status, words", [
    ({"id": "b1", "type": "submit", "time": 1.0, "pool": "q1", "gpus": 1}, 422,
     "field 'job' is required"),
    ({"id": "b2", "type": "submit", "time": 1.0, "job": "x", "pool": "q1", "gpus": "two"}, 422,
     "gpus"),
    ({"id": "b3", "type": "submit", "time": "soon", "job": "x", "pool": "q1", "gpus": 1}, 422,
     "time"),
    ({"id": "b4", "type": "explode", "time": 1.0}, 422, "type"),
    ({"id": "b5", "type": "clock", "time": 1.0, "extra": 1}, 422, "extra"),
    ({"events": [{"id": "b6", "type": "clock", "time": 1.0}, {"id": "", "type": "clock",
                                                             "time": 2.0}]}, 422, "events.1.id"),
    ({"id": "b7", "type": "submit", "time": 1.0, "job": "x", "pool": "nowhere", "gpus": 1},
     422, "unknown pool 'nowhere'"),
    ({"id": "b8", "type": "finish", "time": 1.0, "job": "ghost"}, 409, "unknown job 'ghost'"),
    ({"id": "b9", "type": "submit", "time": math.inf, "job": "x", "pool": "q1", "gpus": 1}, 422,
     "time"),
])
def test_bad_events_are_4xx_naming_the_field_or_event(fcfs_server, body, status, words):
    raw = json.dumps(body).replace("Infinity", "1e999").encode()
    r = _post(fcfs_server.url, None, raw=raw)
    assert r.status_code == status, r.text
    assert set(r.json()) == {"error"}
    assert words in r.json()["error"]
    assert "Traceback" not in r.text


def test_bodies_and_batches_are_bounded(fcfs_server):
    url = fcfs_server.url
    r = _post(url, None, raw=b"{not json")
    assert r.status_code == 422 and "not JSON" in r.json()["error"]
    many = {"events": [{"id": f"m{i}", "type": "clock", "time": 1.0}
                       for i in range(MAX_BATCH + 1)]}
    r = _post(url, many)
    assert r.status_code == 413 and f"at most {MAX_BATCH}" in r.json()["error"]
    r = _post(url, None, raw=b'{"id": "' + b"x" * (9 * 1024 * 1024) + b'"}')
    assert r.status_code == 413


def test_retries_are_idempotent_and_conflicts_change_nothing(fcfs_server):
    url = fcfs_server.url
    batch = {"events": [
        {"id": "r-s1", "type": "submit", "time": 100.0, "job": "rj1", "pool": "q1", "gpus": 1},
        {"id": "r-c1", "type": "clock", "time": 100.0}]}
    first = _post(url, batch)
    assert first.status_code == 200, first.text
    assert first.json()["accepted"] == 2
    assert [d["job"] for d in first.json()["decisions"]] == ["rj1"]
    again = _post(url, batch)
    assert again.status_code == 200
    assert again.json()["accepted"] == 0 and again.json()["duplicates"] == 2
    assert again.json()["decisions"] == []
    clash = {"id": "r-s1", "type": "submit", "time": 200.0, "job": "rj2", "pool": "q1",
             "gpus": 1}
    r = _post(url, clash)
    assert r.status_code == 409 and "id 'r-s1'" in r.json()["error"]
    late = {"id": "r-s2", "type": "submit", "time": 50.0, "job": "rj3", "pool": "q1", "gpus": 1}
    r = _post(url, late)
    assert r.status_code == 409 and "not after the service's clock" in r.json()["error"]
    health = httpx.get(url + "/healthz").json()
    assert health["jobs"] == 1 and health["clock"] == 100.0
    assert httpx.get(url + "/decisions", params={"since": 0}).json()["next"] == 1
    metrics = httpx.get(url + "/metrics").text
    assert 'sia_events_total{type="submit"} 1' in metrics
    assert "sia_events_duplicate_total 2" in metrics


@pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")
def test_auth_reads_asks_the_token_of_reads_but_not_of_healthz(tmp_path):
    from fastapi.testclient import TestClient
    from sia.data.schema import make_pools
    from sia.service.app import Service, create_app
    from sia.service.core import ServiceCore
    from sia.service.store import EventLog

    core = ServiceCore(make_pools({"a": 2}), lambda: make_policy("fcfs"))
    service = Service(core, EventLog(tmp_path), token=TOKEN, auth_reads=True)
    with TestClient(create_app(service)) as client:
        for path in ("/decisions", "/forecast", "/report", "/metrics"):
            assert client.get(path).status_code == 401
            ok = client.get(path, headers={"Authorization": f"Bearer {TOKEN}"})
            assert ok.status_code == 200, path
        assert client.get("/healthz").status_code == 200
