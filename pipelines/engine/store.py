"""The replay store: finished replays on disk, so an interrupted sweep resumes without redoing them.

(DESIGN.md 7.) :mod:`sia.pipelines.engine.execute` runs a sweep's specs into it.

Each replay is stored as two files side by side: ``LABEL.parquet`` (the
simulator's per-job result) and the completion marker ``LABEL.done.json``
(``{"key": ..., "rows": ..., ...}``). Both are written to a temporary name
and renamed into place, the Parquet first, so a crash leaves either no
marker (the replay is redone) or a complete pair. The marker's ``key`` is a
hash of everything the replay depends on (:func:`result_key`): a replay on
disk made with other settings is *stale*, never reused.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Literal

import polars as pl
from sia.pipelines.output import write_parquet, write_text

#: What :func:`replay_status` finds: a reusable replay, one made with other settings, or none.
Status = Literal["done", "stale", "missing"]


def result_key(*parts: Any) -> str:
    """Return a 20-hex-digit hash of ``parts`` (JSON with sorted keys; other objects as str)."""
    text = json.dumps(parts, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:20]


def atomic_write_text(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` through a temporary file (unique to this writer) renamed into
    place (:func:`sia.pipelines.output.write_text`)."""
    write_text(path, text)


def atomic_write_parquet(frame: pl.DataFrame, path: Path) -> None:
    """Write ``frame`` as Parquet to ``path`` through a temporary file (unique to this writer)
    renamed into place."""
    write_parquet(frame, path)


def replay_files(folder: Path, label: str) -> tuple[Path, Path]:
    """Return (``folder/LABEL.parquet``, its completion marker ``folder/LABEL.done.json``)."""
    return folder / f"{label}.parquet", folder / f"{label}.done.json"


def read_marker(marker: Path) -> dict[str, Any] | None:
    """Return the marker's content, or None when it is absent or unreadable."""
    try:
        saved = json.loads(marker.read_text())
    except (OSError, ValueError):
        return None
    return saved if isinstance(saved, dict) else None


def _parquet_rows(parquet: Path) -> int | None:
    try:
        return int(pl.scan_parquet(parquet).select(pl.len()).collect().item())
    except Exception:  # noqa: BLE001 - missing, truncated or not Parquet: not a finished replay
        return None


def replay_status(parquet: Path, marker: Path, key: str) -> Status:
    """Return ``"done"``, ``"stale"`` or ``"missing"`` for the replay stored at (parquet, marker).

    ``done``: the marker holds ``key`` and the Parquet reads with the row
    count the marker recorded. ``stale``: the same, but the marker holds
    another key (the replay was made with other settings). ``missing``:
    anything else (no marker, no Parquet, a truncated or unreadable file).
    """
    saved = read_marker(marker)
    if saved is None or "key" not in saved or not parquet.exists():
        return "missing"
    rows = _parquet_rows(parquet)
    if rows is None or saved.get("rows") != rows:
        return "missing"
    return "done" if saved["key"] == key else "stale"


def save_replay(parquet: Path, marker: Path, frame: pl.DataFrame, key: str,
                **meta: Any) -> Path:
    """Write ``frame`` to ``parquet``, then the marker (``key``, ``rows`` and ``meta``); return parquet.

    An old marker is removed first, so a crash mid-way never pairs the new
    Parquet with the old key.
    """
    parquet.parent.mkdir(parents=True, exist_ok=True)
    marker.unlink(missing_ok=True)
    atomic_write_parquet(frame, parquet)
    atomic_write_text(marker, json.dumps({"key": key, "rows": frame.height, **meta}))
    return parquet
