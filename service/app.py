"""`sia serve`'s HTTP API (FastAPI): events in, decisions, forecasts, a report and metrics out.

Endpoints (JSON unless said):

* ``POST /events`` -- one event or ``{"events": [...]}`` (at most :data:`MAX_BATCH`), checked
  all or nothing, committed to the log, then applied; the answer holds the decisions they led
  to and ``next_time``, the next instant the service knows of. A retried id is acknowledged
  again (``duplicates``) and changes nothing; a conflict is a 409 naming the event.
* ``GET /decisions`` -- the starts decided at the current instant (``?since=N``: every
  decision from the N-th on), each dedicated or lent, with a loan's reason.
* ``GET /forecast`` -- per pool and window: the last forecast's arrival, load and the
  reservation it leads to now.
* ``GET /report`` -- what the service decided so far (and, in shadow mode, against what the
  cluster did).
* ``GET /metrics`` -- Prometheus text. ``GET /healthz`` -- liveness and the clock.

Writes need ``Authorization: Bearer TOKEN`` (compared in constant time); reads too with
``auth_reads``. Bodies are bounded (:data:`MAX_BODY_BYTES`); a bad field is a 422 naming it;
errors never carry a stack trace (it goes to the log).
"""

from __future__ import annotations

import hmac
import json
import logging
import math
import threading
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from pydantic import ValidationError
from sia.service.api_models import (
    MAX_BATCH,
    Batch,
    EventIn,
    answer_of,
    decision_dict,
    to_core_events,
)
from sia.service.core import EventError, NonDeterminism, ServiceCore
from sia.service.metrics import Metrics
from sia.service.store import EventLog, StoreError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

#: Largest request body (bytes): a full batch of events with long names fits.
MAX_BODY_BYTES = 8 * 1024 * 1024

log = logging.getLogger("sia.service")


class Service:
    """The core, its log and a lock: what the endpoints share."""

    def __init__(self, core: ServiceCore, events: EventLog, *, token: str | None,
                 auth_reads: bool = False):
        self.core, self.log = core, events
        self.token = None if token is None else token.encode()
        self.auth_reads = auth_reads
        self.lock = threading.Lock()
        self.metrics = Metrics()
        self.failed: str | None = None  # set when the core broke: writes get 503 from then on

    def recover(self) -> int:
        """Replay the log into the core; return how many events it held."""
        events = self.log.read()
        self.core.restore(to_core_events(events))
        return len(events)

    def authorized(self, header: str) -> bool:
        """True when ``header`` (the Authorization header) carries the token."""
        if self.token is None:
            return True
        scheme, _, value = header.partition(" ")
        if scheme.lower() != "bearer":
            return False
        return hmac.compare_digest(value.strip().encode(), self.token)

    def post(self, events: list[EventIn]) -> dict[str, Any]:
        core = self.core
        with self.lock:
            if self.failed:
                raise StoreError(f"the service stopped taking events: {self.failed}")
            fresh = core.check(to_core_events(events))
            wire = {e.id: e for e in events}
            if fresh:
                self.log.append([wire[e.id].model_dump(exclude_none=True) for e in fresh])
            clock = time.perf_counter()
            try:
                decided = core.apply(fresh)
            except Exception as exc:  # logged: the core and its log no longer agree
                self.failed = f"{type(exc).__name__} while applying events"
                raise
            if any(e.kind == "clock" for e in fresh):
                self.metrics.decide_seconds.observe(time.perf_counter() - clock)
            self.metrics.count_events(fresh, len(events) - len(fresh), decided)
            return answer_of(core, decided, len(fresh), len(events) - len(fresh))


class Guard:
    """ASGI middleware: the token check, the last resort against stack traces, the metrics
    and the log line of every request (plain ASGI: cheaper than a BaseHTTPMiddleware)."""

    def __init__(self, app: Any, service: Service):
        self.app, self.service = app, service

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        service, start = self.service, time.perf_counter()
        method, path = scope["method"], scope["path"]
        status = [0]  # 0: no answer started yet

        async def send_(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        write = method not in ("GET", "HEAD")
        if (write or service.auth_reads) and path != "/healthz" and not service.authorized(
                _header(scope, b"authorization")):
            response = _error(401, "missing or wrong bearer token")
            response.headers["WWW-Authenticate"] = "Bearer"
            await response(scope, receive, send_)
        else:
            try:
                await self.app(scope, receive, send_)
            except Exception:  # never a stack trace to a client; the log has it
                log.exception("request %s %s failed", method, path)
                if status[0] == 0:
                    await _error(500, "internal error (see the service's log)")(
                        scope, receive, send_)
        seconds = time.perf_counter() - start
        service.metrics.request(path, status[0], seconds)
        if log.isEnabledFor(logging.INFO):
            log.info(json.dumps({"method": method, "path": path, "status": status[0],
                                 "ms": round(seconds * 1000.0, 3)}))


def _header(scope: Any, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return ""


def create_app(service: Service) -> FastAPI:
    """Return the FastAPI app of ``service``."""
    app = FastAPI(title="sia serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    metrics = service.metrics

    app.add_middleware(Guard, service=service)

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, _first_problem(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))

    @app.post("/events")
    async def post_events(request: Request) -> JSONResponse:
        body = await _read_body(request)
        if body is None:
            return _error(413, f"request body over {MAX_BODY_BYTES} bytes")
        try:
            data = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            return _error(422, f"body is not JSON: {exc}")
        try:
            if isinstance(data, dict) and "events" in data:
                if isinstance(data["events"], list) and len(data["events"]) > MAX_BATCH:
                    return _error(413, f"events: at most {MAX_BATCH} per request, got "
                                       f"{len(data['events'])}")
                events = Batch.model_validate(data).events
            else:
                events = [EventIn.model_validate(data)]
        except ValidationError as exc:
            return _error(422, _first_problem(exc.errors()))
        try:
            answer = await run_in_threadpool(service.post, events)
        except EventError as exc:
            metrics.rejected += 1
            return _error(exc.status, str(exc))
        except StoreError as exc:
            return _error(503, str(exc))
        except NonDeterminism as exc:
            log.error("%s", exc)
            return _error(500, "internal error: the event log re-run disagreed (see the log)")
        return JSONResponse(answer)

    @app.get("/decisions")
    def decisions(since: int | None = None) -> dict[str, Any]:
        core = service.core
        start = time.perf_counter()
        with service.lock:
            all_ = core.decisions
            if since is None:
                k = len(all_)
                while k and all_[k - 1].time == core.clock:
                    k -= 1
            else:
                k = max(0, since)
            out = {"clock": _num(core.clock), "next_time": core.next_time(),
                   "decisions": [decision_dict(d) for d in all_[k:]], "next": len(all_)}
        metrics.decisions_seconds.observe(time.perf_counter() - start)
        return out

    @app.get("/forecast")
    def forecast() -> dict[str, Any]:
        with service.lock:
            return forecast_of(service.core)

    @app.get("/report")
    def report() -> dict[str, Any]:
        with service.lock:
            return report_of(service.core)

    @app.get("/metrics")
    def prometheus() -> PlainTextResponse:
        with service.lock:
            text = metrics.render(service.core)
        return PlainTextResponse(text, media_type="text/plain; version=0.0.4")

    @app.get("/healthz")
    def healthz() -> dict[str, Any]:
        core = service.core
        return {"status": "failed" if service.failed else "ok", "mode": core.mode,
                "clock": _num(core.clock), "jobs": len(core.jobs),
                "decisions": len(core.decisions)}

    return app


async def _read_body(request: Request) -> bytes | None:
    """The body, or None when it is over :data:`MAX_BODY_BYTES` (read no further)."""
    size = request.headers.get("content-length")
    if size is not None and size.isdigit() and int(size) > MAX_BODY_BYTES:
        return None
    chunks, total = [], 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
    return b"".join(chunks)


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


def _first_problem(errors: list[dict[str, Any]]) -> str:
    """One line naming the first bad field (``events.3.gpus: ...``)."""
    if not errors:
        return "invalid request"
    e = errors[0]
    loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body",))
    msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{loc or 'body'}: {msg}"


def _num(x: float) -> float | None:
    return None if x is None or x == -math.inf else float(x)


def forecast_of(core: ServiceCore) -> dict[str, Any]:
    """Per pool and window: the last forecast's WillJobsArrive and load (GPUs), and the
    reservation min(pending + load, unused quota) it gives with the pool's state now."""
    fc, policy = core.last_forecast, core.policy
    windows = list(getattr(policy, "windows_s", ()) or ())
    state = core.state()
    if fc is None or not windows:
        return {"clock": _num(core.clock), "time": None, "windows_s": windows, "pools": {},
                "note": "no forecast yet (the policy forecasts at ticks while jobs wait)"}
    pending = core.pending_gpus()
    pools = {}
    for p, name in enumerate(core._pool_names):
        s = state["pools"][name]
        unused = max(0, s["quota"] - s["used_dedicated"])
        rows = []
        for k, w in enumerate(windows):
            load = float(fc["load"][p, k])
            rows.append({"window_s": w, "arrival": bool(fc["arrive"][p, k]), "load_gpus": load,
                         "reservation_gpus": float(min(pending.get(name, 0) + load, unused))})
        pools[name] = rows
    return {"clock": _num(core.clock), "time": fc["time"], "windows_s": windows, "pools": pools}


def report_of(core: ServiceCore) -> dict[str, Any]:
    """What the service decided so far: starts, loans, waits (s); in shadow mode also what the
    cluster did with the same jobs."""
    ds = core.decisions
    waits = [d.time - core.jobs[d.job].submit for d in ds]
    out: dict[str, Any] = {"mode": core.mode, "clock": _num(core.clock), "jobs": len(core.jobs),
                           "starts": len(ds), "lent": sum(d.lent for d in ds),
                           "mean_wait_s": (sum(waits) / len(waits)) if waits else None,
                           "rebuilds": core.rebuilds}
    if core.mode == "shadow":
        both = [(d, core.jobs[d.job]) for d in ds if core.jobs[d.job].real_start is not None]
        earlier = [j.real_start - d.time for d, j in both if d.time < j.real_start]
        later = [d.time - j.real_start for d, j in both if d.time > j.real_start]
        real = [j.real_start - j.submit for j in core.jobs.values() if j.real_start is not None]
        out["cluster"] = {
            "starts": len(real),
            "mean_wait_s": (sum(real) / len(real)) if real else None,
            "compared": len(both),
            "sia_earlier": len(earlier), "sia_earlier_total_s": sum(earlier),
            "sia_later": len(later), "sia_later_total_s": sum(later),
        }
    return out
