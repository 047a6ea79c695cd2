"""The service's durable event log: SQLite in WAL mode (DESIGN.md 6.7).

Every accepted request's events are committed in one transaction before the service
answers, so an acknowledged event survives a crash (``synchronous=FULL``: also a power loss;
``NORMAL``: a crash of the process only, faster). On start the service replays the log
(:meth:`sia.service.core.ServiceCore.restore`) and decides again exactly what it had decided.
The log also records how the service was started (``meta``: pools, policy, predictors, mode,
tick), and refuses to be replayed under another setup, which would decide differently.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from sia.data.errors import SiaError

#: The log's file in the state directory.
LOG_NAME = "events.db"
SYNC_MODES = ("FULL", "NORMAL")


class StoreError(SiaError):
    """The log cannot be used: another setup's log, or a disk problem (the API answers 503)."""


class EventLog:
    """Append-only event log in ``state_dir/events.db``."""

    def __init__(self, state_dir: Path, *, synchronous: str = "FULL",
                 max_mb: float | None = None):
        if synchronous.upper() not in SYNC_MODES:
            raise SiaError(f"--sync must be one of {', '.join(SYNC_MODES)}, not {synchronous!r}")
        state_dir = Path(state_dir)
        try:
            state_dir.mkdir(parents=True, exist_ok=True)
            self.path = state_dir / LOG_NAME
            self._db = sqlite3.connect(self.path, check_same_thread=False, isolation_level=None)
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute(f"PRAGMA synchronous={synchronous.upper()}")
            if max_mb is not None:  # a cap on the log: past it, writes fail as on a full disk
                page = int(self._db.execute("PRAGMA page_size").fetchone()[0])
                self._db.execute(f"PRAGMA max_page_count={max(2, int(max_mb * 2**20 / page))}")
            self._db.execute("CREATE TABLE IF NOT EXISTS events (seq INTEGER PRIMARY KEY, "
                             "id TEXT NOT NULL UNIQUE, body TEXT NOT NULL)")
            self._db.execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, "
                             "value TEXT NOT NULL)")
        except (OSError, sqlite3.Error) as exc:
            raise StoreError(f"--state {state_dir}: cannot open the event log ({exc})") from None

    def check_setup(self, setup: dict[str, Any]) -> None:
        """Record the service's setup in a new log; StoreError when the log was written under
        another one (naming the first key that differs)."""
        rows = dict(self._db.execute("SELECT key, value FROM meta").fetchall())
        if not rows:
            with self._tx():
                self._db.executemany("INSERT INTO meta VALUES (?, ?)",
                                     [(k, json.dumps(v, sort_keys=True)) for k, v in
                                      setup.items()])
            return
        for key, value in setup.items():
            if rows.get(key) != json.dumps(value, sort_keys=True):
                raise StoreError(f"--state {self.path.parent}: its log was written with another "
                                 f"{key} ({rows.get(key)}, now {json.dumps(value)}); use a new "
                                 "state directory or the same setup")

    def _tx(self) -> Any:
        return _Transaction(self._db)

    def append(self, rows: list[tuple[str, str]]) -> None:
        """Commit events, given as (id, JSON text) rows, in one transaction; StoreError (and
        nothing written) when the disk refuses."""
        try:
            with self._tx():
                self._db.executemany("INSERT INTO events (id, body) VALUES (?, ?)", rows)
        except sqlite3.Error as exc:
            raise StoreError(f"the event log could not be written ({exc}); nothing was "
                             "accepted") from None

    def read(self) -> list[dict[str, Any]]:
        """Every logged event, in the order it was accepted."""
        return [json.loads(b) for (b,) in
                self._db.execute("SELECT body FROM events ORDER BY seq").fetchall()]

    def __len__(self) -> int:
        return int(self._db.execute("SELECT COUNT(*) FROM events").fetchone()[0])

    def close(self) -> None:
        self._db.close()


class _Transaction:
    def __init__(self, db: sqlite3.Connection):
        self.db = db

    def __enter__(self) -> None:
        self.db.execute("BEGIN IMMEDIATE")

    def __exit__(self, kind: Any, exc: Any, tb: Any) -> None:
        if kind is None:
            try:
                self.db.execute("COMMIT")
                return
            except sqlite3.Error:
                self._rollback()
                raise
        self._rollback()

    def _rollback(self) -> None:
        # SQLite may have rolled back already (a full disk does): keep the first error
        if self.db.in_transaction:
            self.db.execute("ROLLBACK")
