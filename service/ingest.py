"""`POST /events` as a plain ASGI handler: read the body (bounded), validate it with the
pydantic models, hand it to the group commit, answer in JSON.

It sits in front of the FastAPI app (:class:`sia.service.app.Guard` routes to it) because the
write path is the hot one: FastAPI's per-request layers (its middlewares, routing, the
request object, the dependency solver) cost more than the validation and the log together.
The wire format, the checks and the error messages are the same; reads stay on FastAPI.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from pydantic import ValidationError
from sia.service.api_models import MAX_BATCH, Batch, EventIn
from sia.service.core import EventError, NonDeterminism
from sia.service.service import Service
from sia.service.store import StoreError

#: Largest request body (bytes): a full batch of events with long names fits.
MAX_BODY_BYTES = 8 * 1024 * 1024

log = logging.getLogger("sia.service")
_encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode
_JSON = (b"content-type", b"application/json")


async def send_json(send: Any, status: int, data: Any,
                    headers: tuple[tuple[bytes, bytes], ...] = ()) -> int:
    """Answer ``data`` as JSON with ``status``; return the status."""
    body = _encode(data).encode()
    await send({"type": "http.response.start", "status": status,
                "headers": [_JSON, (b"content-length", str(len(body)).encode()), *headers]})
    await send({"type": "http.response.body", "body": body})
    return status


async def send_error(send: Any, status: int, message: str,
                     headers: tuple[tuple[bytes, bytes], ...] = ()) -> int:
    """Answer ``{"error": message}`` with ``status``; return the status."""
    return await send_json(send, status, {"error": message}, headers)


async def read_body(scope: Any, receive: Any) -> bytes | None:
    """The request's body, or None when it is over :data:`MAX_BODY_BYTES` (read no
    further)."""
    for key, value in scope.get("headers", ()):
        if key == b"content-length" and value.isdigit() and int(value) > MAX_BODY_BYTES:
            return None
    chunks, total = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client hung up
            return b""
        chunk = message.get("body", b"")
        total += len(chunk)
        if total > MAX_BODY_BYTES:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def parse_events(body: bytes) -> list[EventIn] | tuple[int, str]:
    """The events of a body (one event or ``{"events": [...]}``), or the refusal
    (status, one line naming the first bad field). Parsed and checked by pydantic in one pass
    from the bytes: as a batch when the body names ``"events"`` anywhere and has that key,
    else as one event."""
    try:
        if b'"events"' in body:
            try:
                return Batch.model_validate_json(body).events
            except ValidationError as exc:
                if not any(e["type"] == "missing" and tuple(e["loc"]) == ("events",)
                           for e in exc.errors()):
                    raise
        return [EventIn.model_validate_json(body)]
    except ValidationError as exc:
        errors = exc.errors()
        first = errors[0] if errors else {}
        if first.get("type") == "json_invalid":
            return 422, f"body is not JSON: {first.get('ctx', {}).get('error', first['msg'])}"
        if first.get("type") == "too_long" and tuple(first.get("loc", ())) == ("events",):
            got_n = first.get("ctx", {}).get("actual_length", "more")
            return 413, f"events: at most {MAX_BATCH} per request, got {got_n}"
        return 422, first_problem(errors)


def first_problem(errors: list[dict[str, Any]]) -> str:
    """One line naming the first bad field (``events.3.gpus: ...``)."""
    if not errors:
        return "invalid request"
    e = errors[0]
    loc = ".".join(str(x) for x in e.get("loc", ()) if x not in ("body",))
    msg = str(e.get("msg", "invalid")).removeprefix("Value error, ")
    return f"{loc or 'body'}: {msg}"


async def post_events(service: Service, scope: Any, receive: Any, send: Any) -> tuple[int, int]:
    """Serve one ``POST /events``; return (status, events in the request)."""
    body = await read_body(scope, receive)
    if body is None:
        return await send_error(send, 413, f"request body over {MAX_BODY_BYTES} bytes"), 0
    events = parse_events(body)
    if isinstance(events, tuple):
        return await send_error(send, *events), 0
    try:
        answer = await service.writer.submit(events)
    except EventError as exc:
        return await send_error(send, exc.status, str(exc)), len(events)
    except StoreError as exc:
        return await send_error(send, 503, str(exc)), len(events)
    except NonDeterminism as exc:
        log.error("%s", exc)
        return await send_error(
            send, 500, "internal error: the event log re-run disagreed (see the log)"), len(events)
    return await send_json(send, 200, answer), len(events)
