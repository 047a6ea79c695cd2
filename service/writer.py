"""Group commit of `POST /events`: concurrent write requests share one log transaction.

With ``synchronous=FULL`` every SQLite commit waits for an fsync (about 3 ms on the
development machine), so one commit per request caps a single writer at a few hundred
requests a second however cheap the rest is. :class:`GroupCommit` lets each request wait on a
future while one writer thread takes every request queued so far, applies them in the order
they arrived, and commits their events in one transaction. The requests that arrive during
that commit form the next group. Nothing is answered before its group's commit returned, so
an acknowledged event is still on disk; a lone request pays exactly what it paid before (no
timer holds it back to wait for company).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

#: A group closes once it holds this many events (a request is never split).
GROUP_EVENTS = 20_000

Commit = Callable[[list[Sequence[Any]]], list[Any]]


class GroupCommit:
    """Queue write requests and hand them to ``commit`` in groups, on one writer thread.

    ``commit(requests)`` gets each request's events, in arrival order, and returns one result
    per request: an answer, or the exception that request is refused with (raised to it).
    """

    def __init__(self, commit: Commit, *, group_events: int = GROUP_EVENTS):
        self._commit = commit
        self._group_events = group_events
        self._queue: list[tuple[Sequence[Any], asyncio.Future]] = []
        self._draining = False
        self._thread = ThreadPoolExecutor(max_workers=1, thread_name_prefix="sia-log")
        #: groups committed and the requests they held (for the metrics and the tests)
        self.groups = 0
        self.requests = 0

    async def submit(self, events: Sequence[Any]) -> Any:
        """Queue one request's events; return its result once its group is committed (or
        raise the exception it was refused with)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future = loop.create_future()
        self._queue.append((events, future))
        if not self._draining:
            self._draining = True
            loop.create_task(self._drain(loop))
        # a client that hangs up cancels the future, not its events: they are in the group
        # already, and _drain skips answering a cancelled future
        result = await future
        if isinstance(result, BaseException):
            raise result
        return result

    def _take(self) -> list[tuple[Sequence[Any], asyncio.Future]]:
        """The next group: queued requests, in order, up to :attr:`_group_events` events."""
        size, k = 0, 0
        for events, _ in self._queue:
            if k and size + len(events) > self._group_events:
                break
            size += len(events)
            k += 1
        group, self._queue = self._queue[:k], self._queue[k:]
        return group

    async def _drain(self, loop: asyncio.AbstractEventLoop) -> None:
        try:
            while self._queue:
                group = self._take()
                try:
                    results = await loop.run_in_executor(
                        self._thread, self._commit, [events for events, _ in group])
                except Exception as exc:  # the commit itself broke: every request learns it
                    results = [exc] * len(group)
                self.groups += 1
                self.requests += len(group)
                for (_, future), result in zip(group, results, strict=True):
                    if not future.done():
                        future.set_result(result)
        finally:
            self._draining = False

    def close(self) -> None:
        """Stop the writer thread (after the group it is committing)."""
        self._thread.shutdown(wait=True)
