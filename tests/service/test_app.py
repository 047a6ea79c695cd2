"""The ASGI app in-process: the log line of every request, POST /events' own refusals, and
the group commit's counters at /metrics."""

from __future__ import annotations

import json
import logging

import pytest
from sia.data.schema import make_pools
from sia.scheduler.registry import make_policy
from sia.service.app import Service, create_app
from sia.service.core import ServiceCore
from sia.service.store import EventLog

TOKEN = "test-token-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {TOKEN}"}

pytestmark = pytest.mark.filterwarnings("ignore:Using `httpx` with `starlette.testclient`")


@pytest.fixture
def client(tmp_path):
    from fastapi.testclient import TestClient

    core = ServiceCore(make_pools({"a": 2}), lambda: make_policy("fcfs"))
    with TestClient(create_app(Service(core, EventLog(tmp_path), token=TOKEN))) as c:
        yield c


def test_one_structured_log_line_per_request(client, caplog):
    batch = {"events": [{"id": "s1", "type": "submit", "time": 1.0, "job": "j1", "pool": "a",
                         "gpus": 1}, {"id": "c1", "type": "clock", "time": 1.0}]}
    with caplog.at_level(logging.INFO, logger="sia.service"):
        assert client.post("/events", json=batch, headers=AUTH).status_code == 200
        assert client.get("/decisions").status_code == 200
        assert client.post("/events", json={"id": "x"}, headers=AUTH).status_code == 422
    lines = [json.loads(r.getMessage()) for r in caplog.records if r.name == "sia.service"]
    assert [(x["method"], x["path"], x["status"], x["events"]) for x in lines] == [
        ("POST", "/events", 200, 2), ("GET", "/decisions", 200, 0), ("POST", "/events", 422, 0)]
    assert all(x["ms"] >= 0 for x in lines)


def test_events_refusals_name_the_problem(client):
    r = client.get("/events")
    assert r.status_code == 405 and r.headers["allow"] == "POST"
    r = client.post("/events", json={"id": "s1", "type": "clock", "time": 1.0})
    assert r.status_code == 401 and r.headers["www-authenticate"] == "Bearer"
    r = client.post("/events", content=b"{", headers=AUTH)
    assert r.status_code == 422 and r.json()["error"].startswith("body is not JSON")
    r = client.post("/events", json={"events": [{"id": "s", "type": "submit", "time": 1.0,
                                                 "job": "j", "pool": "a", "gpus": "x"}]},
                    headers=AUTH)
    assert r.status_code == 422 and r.json()["error"].startswith("events.0.gpus: ")
    r = client.post("/events", content=b" " * (8 * 1024 * 1024 + 1), headers=AUTH)
    assert r.status_code == 413


def test_metrics_count_log_commits_and_the_requests_they_answered(client):
    for i in range(3):
        ev = {"id": f"s{i}", "type": "submit", "time": 1.0 + i, "job": f"j{i}", "pool": "a",
              "gpus": 1}
        assert client.post("/events", json=ev, headers=AUTH).status_code == 200
    client.post("/events", json={"id": "s0", "type": "submit", "time": 1.0, "job": "j0",
                                 "pool": "a", "gpus": 1}, headers=AUTH)  # a retry: no commit
    text = client.get("/metrics").text
    assert "sia_log_commits_total 3" in text
    assert "sia_log_committed_requests_total 3" in text


def test_a_single_event_that_names_events_in_a_value_is_one_event():
    """The body is read as a batch only when it has an ``events`` key, not when the word is
    one of its values."""
    from sia.service.ingest import parse_events

    one = json.dumps({"id": "events", "type": "submit", "time": 1.0, "job": "events",
                      "pool": "a", "gpus": 1}).encode()
    assert [e.job for e in parse_events(one)] == ["events"]
    batch = json.dumps({"events": [{"id": "c", "type": "clock", "time": 1.0}]}).encode()
    assert [e.id for e in parse_events(batch)] == ["c"]
    assert parse_events(b'{"events": [], "id": "x"}') == (422, "id: Extra inputs are not "
                                                                "permitted")
    assert parse_events(b'{"id": "x", "type": "clock", "time": 1e999}') == (
        422, "time: Input should be a finite number")
