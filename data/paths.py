"""Where generated files go: one output root, ignored by git."""

from __future__ import annotations

import os
from pathlib import Path

OUTPUT_ROOT_ENV = "SIA_OUTPUT"
DEFAULT_OUTPUT_ROOT = "out"


def output_root() -> Path:
    """Return the output root: ``$SIA_OUTPUT`` when set, else ``./out``.

    Canonical Parquet, feature tables, results and the MLflow store all live
    under it, never in the source tree.
    """
    return Path(os.environ.get(OUTPUT_ROOT_ENV, DEFAULT_OUTPUT_ROOT))


def trace_identity(source: str) -> str:
    """Return what names a trace across commands run from different folders: a file or folder
    that exists, by its resolved path (absolute, links followed); a glob by its folder's
    resolved path and its pattern; anything else (``builtin:philly``, ``synthetic:base
    seed=0``) as it is written."""
    path = Path(source).expanduser()
    try:
        if any(ch in source for ch in "*?["):  # a glob: its folder resolved, its pattern kept
            return str(path.parent.resolve() / path.name) if path.parent.exists() else source
        return str(path.resolve()) if path.exists() else source
    except (OSError, RuntimeError):  # an unreadable path, a symlink loop
        return source
