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

import json
import logging
import math
import time
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse, PlainTextResponse
from sia.service.api_models import decision_dict
from sia.service.core import ServiceCore
from sia.service.ingest import MAX_BODY_BYTES, first_problem, post_events, send_error
from sia.service.service import Service
from starlette.exceptions import HTTPException as StarletteHTTPException

__all__ = ["MAX_BODY_BYTES", "Guard", "Service", "create_app", "forecast_of", "report_of"]

log = logging.getLogger("sia.service")


class Guard:
    """The ASGI app that uvicorn runs, in front of the FastAPI app: the token check, the
    last resort against stack traces, the metrics and the log line of every request, and
    ``POST /events`` itself (:mod:`sia.service.ingest`, the hot path, without FastAPI's
    per-request layers)."""

    def __init__(self, app: Any, service: Service):
        self.app, self.service = app, service

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        service, start = self.service, time.perf_counter()
        method, path = scope["method"], scope["path"]
        status, events = [0], 0  # 0: no answer started yet

        async def send_(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        write = method not in ("GET", "HEAD")
        try:
            if (write or service.auth_reads) and path != "/healthz" and not service.authorized(
                    _header(scope, b"authorization")):
                await send_error(send_, 401, "missing or wrong bearer token",
                                 ((b"www-authenticate", b"Bearer"),))
            elif path == "/events":
                if method == "POST":
                    _, events = await post_events(service, scope, receive, send_)
                else:
                    await send_error(send_, 405, "POST /events only", ((b"allow", b"POST"),))
            else:
                await self.app(scope, receive, send_)
        except Exception:  # never a stack trace to a client; the log has it
            log.exception("request %s %s failed", method, path)
            if status[0] == 0:
                await send_error(send_, 500, "internal error (see the service's log)")
        seconds = time.perf_counter() - start
        service.metrics.request(path, status[0], seconds)
        if log.isEnabledFor(logging.INFO):
            log.info(json.dumps({"method": method, "path": path, "status": status[0],
                                 "events": events, "ms": round(seconds * 1000.0, 3)}))


def _header(scope: Any, name: bytes) -> str:
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return ""


def create_app(service: Service) -> Guard:
    """Return the ASGI app of ``service``: :class:`Guard` in front of the FastAPI app of its
    reads."""
    app = FastAPI(title="sia serve", docs_url=None, redoc_url=None, openapi_url=None)
    app.state.service = service
    metrics = service.metrics
    _install_error_handlers(app)

    @app.get("/decisions")
    def decisions(since: int | None = None) -> dict[str, Any]:
        start = time.perf_counter()
        with service.lock:
            out = decisions_of(service.core, since)
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

    return Guard(app, service)


def _install_error_handlers(app: FastAPI) -> None:
    """Answer a bad field with a 422 naming it and any HTTP error with its status, as JSON
    ``{"error": ...}`` (never a stack trace)."""

    @app.exception_handler(RequestValidationError)
    async def invalid(request: Request, exc: RequestValidationError) -> JSONResponse:
        return _error(422, first_problem(exc.errors()))

    @app.exception_handler(StarletteHTTPException)
    async def http_error(request: Request, exc: StarletteHTTPException) -> JSONResponse:
        return _error(exc.status_code, str(exc.detail))


def decisions_of(core: ServiceCore, since: int | None) -> dict[str, Any]:
    """The decisions from index ``since`` on (None: those made at the current clock), with the
    clock, the next event time and the index to ask from next."""
    all_ = core.decisions
    if since is None:
        k = len(all_)
        while k and all_[k - 1].time == core.clock:
            k -= 1
    else:
        k = max(0, since)
    return {"clock": _num(core.clock), "next_time": core.next_time(),
            "decisions": [decision_dict(d) for d in all_[k:]], "next": len(all_)}


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


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
                           "rebuilds": core.rebuilds, "grows": core.grows}
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
