"""What the endpoints share: the core, its durable log, a lock, the metrics, and the group
commit that applies write requests and logs them (:mod:`sia.service.writer`).

A write request is checked and applied in arrival order, as if alone; its events are logged
with those of the other requests of its group in one transaction, and nobody is answered
before that transaction is committed. Reads take the lock, so they see either the state before
a group or after its commit (never a group applied but not yet logged).
"""

from __future__ import annotations

import hmac
import logging
import threading
import time
from typing import Any, NamedTuple

from sia.service.api_models import EventIn, answer_of, to_core_events
from sia.service.core import EventError, ServiceCore
from sia.service.metrics import Metrics
from sia.service.store import EventLog, StoreError
from sia.service.writer import GroupCommit

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
        self.writer = GroupCommit(self.post_group)

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

    def post_group(self, requests: list[list[EventIn]]) -> list[Any]:
        """Check and apply each request's events in arrival order, then commit every event
        they added in one transaction (one fsync for the group). Return, per request, its
        answer or the exception it is refused with. When the commit fails, every request of
        the group is refused (StoreError) and the core goes back to what the log holds."""
        with self.lock:
            if self.failed:
                return [StoreError(f"the service stopped taking events: {self.failed}")
                        ] * len(requests)
            rows: list[tuple[str, str]] = []
            done = [self._apply(events, rows) for events in requests]
            if rows:
                try:
                    self.log.append(rows)
                except StoreError as exc:
                    self._roll_back()
                    return [exc] * len(requests)
                self.metrics.commits += 1
                self.metrics.committed_requests += len(requests)
            out = []
            for result in done:
                if isinstance(result, _Applied):
                    self.metrics.count_events(result.fresh, result.duplicates, result.decided)
                    if result.decide_s is not None:
                        self.metrics.decide_seconds.observe(result.decide_s)
                    result = result.answer
                elif isinstance(result, EventError):
                    self.metrics.rejected += 1
                out.append(result)
            return out

    def _apply(self, events: list[EventIn], rows: list[tuple[str, str]]) -> Any:
        """Check and apply one request (its new events go to ``rows``, for the log): an
        :class:`_Applied`, or the exception that refuses it."""
        if self.failed:
            return StoreError(f"the service stopped taking events: {self.failed}")
        core = self.core
        try:
            fresh = core.check(to_core_events(events))
        except EventError as exc:
            return exc
        if fresh:
            wire = {e.id: e for e in events}
            rows.extend((e.id, wire[e.id].model_dump_json(exclude_none=True)) for e in fresh)
        clock = time.perf_counter()
        try:
            decided = core.apply(fresh)
        except Exception as exc:  # logged: the core and its log no longer agree
            self.failed = f"{type(exc).__name__} while applying events"
            return exc
        deciding = any(e.kind == "clock" for e in fresh)
        duplicates = len(events) - len(fresh)
        return _Applied(fresh, duplicates, decided,
                        time.perf_counter() - clock if deciding else None,
                        answer_of(core, decided, len(fresh), duplicates))

    def _roll_back(self) -> None:
        """After a failed commit: a fresh core that holds exactly what the log holds (the
        re-run of a restart); the service stops taking events if even that fails."""
        try:
            self.core = self.core.fresh()
            self.recover()
        except Exception:  # noqa: BLE001 -- logged; writes get 503 from now on
            log.exception("re-reading the event log after a failed commit failed")
            self.failed = "the event log could not be re-read after a failed write"


class _Applied(NamedTuple):
    """One request applied but not yet committed: what the metrics and the answer need."""

    fresh: list[Any]
    duplicates: int
    decided: list[Any]
    decide_s: float | None
    answer: dict[str, Any]
