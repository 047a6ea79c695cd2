"""Where the replays of a sweep run: in-process, a local process pool, or a Dask cluster.

Every executor has one method, :meth:`Executor.run`, which calls a
module-level function on each item and yields ``(item, result)`` as results
come in (any order). A failing item raises :class:`ExecutorError` naming it.
:func:`make_executor` picks one from the command-line options.
"""

from __future__ import annotations

import multiprocessing
import re
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from typing import Any, Protocol

from sia.data.errors import ConfigError, SiaError


def _watch_parent() -> None:
    """Pool worker initializer: ignore SIGINT and SIGTERM, and exit at once when the parent
    process dies.

    Ctrl-C (or a SIGTERM to the process group) reaches every process; the parent alone
    handles it (it stops the pool and says what was kept), so workers print no traceback.
    A parent killed outright (SIGKILL, OOM) cannot stop its pool: a daemon
    thread waits on the sentinel of ``multiprocessing.parent_process()``
    (a pipe that reaches EOF when the parent is gone) and ends the worker.
    """
    import os
    import signal
    import threading

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    if hasattr(signal, "pthread_sigmask"):  # born with SIGINT blocked (see _no_sigint)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})
    parent = multiprocessing.parent_process()
    if parent is None:
        return

    def wait_then_exit() -> None:
        parent.join()  # returns only when the parent is gone
        os._exit(1)

    threading.Thread(target=wait_then_exit, name="sia-parent-watch", daemon=True).start()


@contextmanager
def _no_sigint() -> Iterator[None]:
    """Block SIGINT in this thread meanwhile (a Ctrl-C stays pending, delivered after).

    The pool spawns its workers inside ``submit``; a worker inherits the
    blocked mask, so a Ctrl-C during its start-up (before :func:`_watch_parent`
    ignores SIGINT) cannot end it with a traceback.
    """
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    old = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)


class ExecutorError(SiaError):
    """A replay failed on a worker (the message names the item and the cause)."""


class Executor(Protocol):
    """Runs ``fn(item)`` for each item and yields ``(item, result)`` as they finish."""

    description: str

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """Yield ``(item, fn(item))`` for every item, in completion order."""
        ...

    def close(self) -> None:
        """Release the workers (or the cluster connection)."""
        ...


def _fail(item: Any, exc: BaseException) -> ExecutorError | SiaError:
    if isinstance(exc, SiaError):
        return type(exc)(f"{_label(item)}: {exc}")
    return ExecutorError(f"{_label(item)} failed: {type(exc).__name__}: {exc}")


def _label(item: Any) -> str:
    return str(getattr(item, "name", None) or item)


class InlineExecutor:
    """Runs every item in this process, one after the other (``--workers 1``)."""

    description = "in-process"

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """Yield ``(item, fn(item))`` in input order."""
        for item in items:
            try:
                result = fn(item)
            except Exception as exc:  # noqa: BLE001 - re-raised with the item's name
                raise _fail(item, exc) from exc
            yield item, result

    def close(self) -> None:
        """Nothing to release."""


class LocalExecutor:
    """A pool of ``workers`` local processes (spawned: polars and fork do not mix)."""

    def __init__(self, workers: int):
        if workers < 1:
            raise ConfigError(f"--workers must be >= 1, not {workers}")
        self.workers = workers
        self.description = f"local process pool, {workers} workers"
        self._pool: ProcessPoolExecutor | None = None

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """Yield ``(item, fn(item))`` as workers finish; at most 2 x workers items in flight."""
        if self._pool is None:
            self._pool = ProcessPoolExecutor(max_workers=self.workers,
                                             mp_context=multiprocessing.get_context("spawn"),
                                             initializer=_watch_parent)
        pending: dict[Any, Any] = {}
        it = iter(items)
        limit = 2 * self.workers

        def fill() -> None:
            while len(pending) < limit:
                try:
                    item = next(it)
                except StopIteration:
                    return
                with _no_sigint():
                    pending[self._pool.submit(fn, item)] = item

        try:
            fill()
            while pending:
                done, _ = wait(list(pending), return_when=FIRST_COMPLETED)
                for fut in done:
                    item = pending.pop(fut)
                    exc = fut.exception()
                    if exc is not None:
                        raise _fail(item, exc) from exc
                    yield item, fut.result()
                fill()
        except BaseException:
            # a failure, Ctrl-C or a caller that stops early (GeneratorExit): the
            # replays still running are abandoned, so end them now rather than
            # letting close() wait for them to finish
            self._kill()
            raise

    def _kill(self) -> None:
        """Cancel the queued items and terminate the workers (abandoning running items)."""
        pool, self._pool = self._pool, None
        if pool is None:
            return
        procs = list((getattr(pool, "_processes", None) or {}).values())
        # taken before shutdown(), which drops the pool's reference to it
        manager = getattr(pool, "_executor_manager_thread", None)
        pool.shutdown(wait=False, cancel_futures=True)
        for proc in procs:
            proc.kill()  # workers ignore SIGTERM (the parent handles it)
        for proc in procs:
            proc.join(timeout=5)
        # let the pool's manager thread see the dead workers and close its wake-up pipe now:
        # else, at exit, concurrent.futures' hook may write to that pipe while the thread
        # closes it (a race in CPython 3.11: "OSError: Bad file descriptor" on stderr)
        if manager is not None:
            manager.join(timeout=10)

    def close(self) -> None:
        """Shut the process pool down (after the items in flight finish)."""
        if self._pool is not None:
            self._pool.shutdown(cancel_futures=True)
            self._pool = None


class DaskExecutor:
    """Runs the items on a Dask cluster through :class:`dask.distributed.Client`.

    ``address`` is the scheduler's address (``tcp://host:8786``); a
    ``Client`` may be given instead (tests pass one on a ``LocalCluster``).
    Results come back to this process, so the workers need no shared disk.
    """

    def __init__(self, address: str | None = None, client: Any = None):
        from dask.distributed import Client

        if client is None:
            if not address:
                raise ConfigError("--dask needs the scheduler address, e.g. tcp://127.0.0.1:8786")
            check_dask_address(address)
            try:
                client = Client(address, timeout=10)
            except (OSError, TimeoutError, ValueError, TypeError) as exc:
                raise ConfigError(f"--dask {address}: cannot connect to the Dask scheduler "
                                  f"({type(exc).__name__}: {exc})") from None
            self._own = True
        else:
            self._own = False
        self.client = client
        self.description = f"Dask cluster at {client.scheduler.address}"

    def run(self, fn: Callable[[Any], Any], items: Iterable[Any]) -> Iterator[tuple[Any, Any]]:
        """Yield ``(item, fn(item))`` as the cluster finishes them."""
        from dask.distributed import as_completed

        items = list(items)
        if not items:
            return
        futures = [self.client.submit(fn, item, pure=False) for item in items]
        by_key = {f.key: item for f, item in zip(futures, items, strict=True)}
        for fut in as_completed(futures):
            item = by_key[fut.key]
            if fut.status == "error":
                exc = fut.exception()
                for other in futures:
                    other.cancel()
                raise _fail(item, exc) from exc
            yield item, fut.result()

    def close(self) -> None:
        """Close the client if this executor opened it."""
        if self._own:
            self.client.close()


_DASK_ADDRESS = re.compile(r"^(?:[a-z][a-z0-9+.-]*://)?(?:\[[0-9a-fA-F:.]+\]|[A-Za-z0-9_.-]+)"
                           r"(?::[0-9]{1,5})?(?:/\S*)?$")


def check_dask_address(address: str) -> None:
    """Raise ConfigError unless ``address`` looks like a Dask scheduler address
    (``tcp://host:port``, ``host:port``, ``inproc://...``)."""
    if not _DASK_ADDRESS.match(address.strip()) or len(address) > 1000:
        raise ConfigError(f"--dask {address[:100]!r}: not a scheduler address; give one like "
                          "tcp://127.0.0.1:8786")


def make_executor(workers: int | None = None, dask: str | None = None) -> Executor:
    """Return the executor for the CLI options: Dask when ``dask`` is set, else local.

    ``workers`` defaults to the machine's CPU count; 1 runs in-process.
    """
    if dask:
        return DaskExecutor(dask)
    if workers is None:
        workers = multiprocessing.cpu_count()
    if workers < 1:
        raise ConfigError(f"--workers must be >= 1, not {workers}")
    return InlineExecutor() if workers == 1 else LocalExecutor(workers)


class ProgressBar:
    """Progress over replays (a no-op when ``enabled`` is false).

    ``with ProgressBar(True, n, "on 2 processes") as advance: advance(name, wall_s)``
    after each replay; ``label`` is shown until the first replay finishes. On a terminal it
    is a rich progress bar. Written to a file or a pipe (a sweep under ``nohup``, CI, a
    scheduler's job log), a bar would show nothing until the end, so it prints a plain line
    instead every ``every`` of the replays (5% of them) and at least every ``interval_s``
    seconds when a replay finishes, and one for the last: done / total, time elapsed, time
    left at the rate so far, the replay just finished. ``console`` (a rich Console) and
    ``clock`` (seconds) are for tests.
    """

    def __init__(self, enabled: bool, total: int, label: str = "", *, console: Any = None,
                 interval_s: float = 60.0, clock: Callable[[], float] | None = None):
        self.enabled, self.total, self.label = enabled, total, label
        self.console, self.interval_s, self.clock = console, interval_s, clock
        self._p = None

    def __enter__(self) -> Callable[[str, float], None]:
        if not self.enabled or self.total == 0:
            return lambda name, wall: None
        from rich.console import Console

        console = self.console if self.console is not None else Console()
        if not console.is_terminal:
            return self._lines(console)
        from rich.progress import (
            BarColumn,
            MofNCompleteColumn,
            Progress,
            TextColumn,
            TimeElapsedColumn,
            TimeRemainingColumn,
        )

        self._p = Progress(TextColumn("[bold]replays[/]"), BarColumn(), MofNCompleteColumn(),
                           TimeElapsedColumn(), TimeRemainingColumn(),
                           TextColumn("{task.description}"), console=console)
        self._p.start()
        tid = self._p.add_task(self.label, total=self.total)

        def advance(name: str, wall: float) -> None:
            self._p.update(tid, advance=1, description=f"{name} ({wall:.1f} s)")

        return advance

    def _lines(self, console: Any) -> Callable[[str, float], None]:
        """The plain-line reporter (see the class docstring)."""
        import time

        clock = self.clock or time.monotonic
        total, every = self.total, max(1, self.total // 20)
        t0 = clock()
        state = {"done": 0, "said": t0}
        console.print(f"{self.label}: {total:,} to run", markup=False, highlight=False,
                      soft_wrap=True)

        def advance(name: str, wall: float) -> None:
            state["done"] += 1
            done, now = state["done"], clock()
            if done % every and done < total and now - state["said"] < self.interval_s:
                return
            state["said"] = now
            spent = now - t0
            left = spent / done * (total - done)
            console.print(f"replays: {done:,}/{total:,} ({100 * done / total:.0f}%), "
                          f"{_clock_span(spent)} elapsed, about {_clock_span(left)} left; "
                          f"last {name} ({wall:.1f} s)", markup=False, highlight=False,
                          soft_wrap=True)

        return advance

    def __exit__(self, *exc: Any) -> None:
        if self._p is not None:
            self._p.stop()


def _clock_span(seconds: float) -> str:
    """``seconds`` as h:mm:ss."""
    s = int(round(max(seconds, 0.0)))
    return f"{s // 3600}:{s % 3600 // 60:02d}:{s % 60:02d}"
