"""Where generated files go: one output root, ignored by git."""

from __future__ import annotations

import os
import stat
from pathlib import Path

from sia.data.errors import TraceError

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
        if is_glob(source):  # a glob: its folder resolved, its pattern kept
            return str(path.parent.resolve() / path.name) if path.parent.exists() else source
        return str(path.resolve()) if path.exists() else source
    except (OSError, RuntimeError):  # an unreadable path, a symlink loop
        return source


GLOB_CHARS = "*?["


def is_glob(text: str) -> bool:
    """Return whether a trace path is a glob: it holds ``*``, ``?`` or ``[`` and names no file
    or folder as written (a file literally named ``jobs[1].csv`` is that file, issue 36)."""
    if not any(ch in text for ch in GLOB_CHARS):
        return False
    try:
        return not Path(text).expanduser().exists()
    except (OSError, ValueError):
        return True


def check_regular(path: Path | str, what: str = "trace") -> None:
    """Raise TraceError when ``path`` exists but is neither a regular file nor a folder (a FIFO,
    a socket, a device): reading one would wait forever or never end (issue 36)."""
    try:
        mode = os.stat(path).st_mode
    except (OSError, ValueError):
        return  # missing or unreadable: the reader names it
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        kind = ("a FIFO (named pipe)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
                else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")
        raise TraceError(f"{path}: {kind}, not a regular file; give the {what} as a file "
                         "(copy the stream into one first)")
