"""Output folders and files that fail as one line and never leave a partial file (issue 36).

Every command that writes results goes through here:

- :func:`prepare_dir` / :func:`prepare_file` check an ``--out`` before any work: a path under
  a file, a name longer than the file system allows, an existing file where a folder is
  wanted (or the reverse), a folder that cannot be created or written (``/proc``, ``/sys``, a
  read-only mount) are one :class:`OutputError` line naming the option and the path;
- :func:`atomic_path` / :func:`write_text` / :func:`write_parquet` write through a
  temporary name in the same folder (unique per process and call) renamed into place, so a
  full disk or a crash never leaves a truncated file under the final name;
- :class:`FolderLock` holds an exclusive lock on an output folder while a command writes it,
  so a second command on the same ``--out`` stops at once, saying the folder is in use.
"""

from __future__ import annotations

import errno
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sia.data.errors import SiaError

#: the lock file a command holds in the output folder it writes
LOCK_NAME = ".sia.lock"


class OutputError(SiaError):
    """An output path cannot be used (not a folder, not writable, in use, disk full)."""


def describe_os_error(exc: OSError) -> str:
    """Return an OS error as a short phrase (``No space left on device``), never multi-line."""
    text = exc.strerror or exc.__class__.__name__
    if exc.errno == errno.ENAMETOOLONG:
        text = "a name in the path is longer than the file system allows (255 bytes)"
    return " ".join(str(text).split())


def _check_names(path: Path, option: str) -> None:
    for part in path.parts:
        if len(os.fsencode(part)) > 255:
            raise OutputError(f"{option} {_short(path)}: the name {_short(Path(part))} is "
                              f"{len(os.fsencode(part))} bytes; file systems allow 255")


def _short(path: Path | str, limit: int = 120) -> str:
    """Return ``path`` as text cut to ``limit`` characters (a 100,000-character name stays one
    readable line)."""
    text = str(path)
    return text if len(text) <= limit else f"{text[:limit // 2]}...{text[-limit // 2:]}"


def _first_existing_file(path: Path) -> Path | None:
    """Return the first ancestor of ``path`` (or ``path``) that exists and is not a folder."""
    for parent in reversed((path, *path.parents)):
        try:
            if parent.exists() and not parent.is_dir():
                return parent
        except OSError:
            return None
    return None


def prepare_dir(path: Path | str, option: str = "--out") -> Path:
    """Create the output folder ``path`` (and its parents) and check it is writable; return it.

    One-line :class:`OutputError` naming ``option`` when the path or one of its parents is a
    file, a name is too long, or the folder cannot be created or written.
    """
    path = Path(path)
    _check_names(path, option)
    blocker = _first_existing_file(path)
    if blocker is not None:
        what = "exists and is not a folder" if blocker == path else f"is under a file ({_short(blocker)})"
        raise OutputError(f"{option} {_short(path)}: {what}; give a folder path")
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{option} {_short(path)}: cannot create the folder "
                          f"({describe_os_error(exc)}); choose another {option}") from None
    _check_writable(path, option)
    return path


def check_dir(path: Path | str, option: str = "--out") -> Path:
    """Check, without creating anything, that the folder ``path`` could be created and written:
    no name too long, no file on the way, and its nearest existing ancestor a writable folder.
    Return it. For commands that must not leave an empty ``--out`` behind when a later check
    fails; :func:`prepare_dir` creates it when the outputs are written."""
    path = Path(path)
    _check_names(path, option)
    blocker = _first_existing_file(path)
    if blocker is not None:
        what = "exists and is not a folder" if blocker == path else f"is under a file ({_short(blocker)})"
        raise OutputError(f"{option} {_short(path)}: {what}; give a folder path")
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None:
        _check_writable(existing, option, path)
    return path


def _check_writable(folder: Path, option: str, target: Path | None = None) -> None:
    """Raise OutputError unless a file can be created in ``folder`` (tried, not guessed: a
    read-only mount passes ``os.access`` for root); the message names ``target`` (the option's
    path, ``folder`` by default)."""
    probe = folder / f".sia-write-test-{os.getpid()}-{uuid.uuid4().hex[:8]}"
    try:
        with open(probe, "wb"):
            pass
        probe.unlink()
    except OSError as exc:
        where = "this folder" if target is None or target == folder else _short(folder)
        raise OutputError(f"{option} {_short(target or folder)}: cannot write in {where} "
                          f"({describe_os_error(exc)}); choose another {option}") from None


def check_file(path: Path | str, option: str = "--out") -> Path:
    """Check, without creating anything, that the file ``path`` could be written: return it.

    One-line OutputError when it names a folder, sits under a file, has a name too long, or its
    folder could not be created or written (:func:`check_dir`).
    """
    path = Path(path)
    _check_names(path, option)
    if path.is_dir():
        raise OutputError(f"{option} {_short(path)}: is a folder; give a file name")
    check_dir(path.parent, option)
    return path


def _tmp_name(path: Path) -> Path:
    # unique per process and call: two writers never share a temporary file
    return path.with_name(f".{path.name}.{os.getpid()}-{uuid.uuid4().hex[:8]}.tmp")


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it to ``path`` when the block succeeds,
    remove it when it fails. An OSError (disk full, permissions) becomes an OutputError naming
    ``path``; whatever ``path`` held before is kept on failure."""
    path = Path(path)
    tmp = _tmp_name(path)
    try:
        yield tmp
        os.replace(tmp, path)
        remove_stale_temporaries(path)
    except OSError as exc:
        _remove(tmp)
        raise OutputError(f"cannot write {_short(path)} ({describe_os_error(exc)}); nothing was "
                          "written under that name") from None
    except BaseException:
        _remove(tmp)
        raise


def remove_stale_temporaries(path: Path) -> None:
    """Remove the temporary files of ``path`` left by writers that died mid-write (their
    process is gone), and the single ``<name>.tmp`` older versions used."""
    prefix = f".{path.name}."
    try:
        names = [p for p in path.parent.iterdir()
                 if (p.name.startswith(prefix) and p.name.endswith(".tmp"))
                 or p.name == f"{path.name}.tmp"]
    except OSError:
        return
    for tmp in names:
        pid = tmp.name[len(prefix):].split("-", 1)[0]
        if tmp.name == f"{path.name}.tmp" or (pid.isdigit() and not _alive(int(pid))):
            _remove(tmp)


def _alive(pid: int) -> bool:
    """Return True when a process ``pid`` exists (ours, or one we may not signal)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError, OSError):
        return True
    return True


def _remove(path: Path) -> None:
    try:
        path.unlink(missing_ok=True)
    except OSError:
        pass


def write_text(path: Path | str, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` atomically; return ``path``."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)


def write_parquet(frame: Any, path: Path | str) -> Path:
    """Write the polars ``frame`` as Parquet to ``path`` atomically (its folder created);
    return ``path``."""
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as tmp:
        frame.write_parquet(tmp)
    return Path(path)


class FolderLock:
    """An exclusive lock on an output folder while a command writes it (``with FolderLock(d):``).

    The lock is ``flock`` on ``<folder>/.sia.lock`` (released by the kernel when the process
    ends, even killed), so a stale lock never blocks. A second command on the folder raises
    OutputError at once, naming the process holding it. Systems without ``fcntl`` are not
    locked.
    """

    def __init__(self, folder: Path | str, option: str = "--out"):
        self.folder = Path(folder)
        self.option = option
        self._handle: Any = None

    def __enter__(self) -> FolderLock:
        try:
            import fcntl
        except ImportError:  # not POSIX
            return self
        lock = self.folder / LOCK_NAME
        try:
            handle = open(lock, "a+")  # noqa: SIM115 - held until __exit__
        except OSError as exc:
            raise OutputError(f"{self.option} {_short(self.folder)}: cannot create its lock file "
                              f"({describe_os_error(exc)})") from None
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            handle.seek(0)
            holder = handle.read().strip()
            handle.close()
            raise OutputError(f"{self.option} {_short(self.folder)}: the folder is in use by "
                              f"another sia command{f' (pid {holder})' if holder else ''}; "
                              f"wait for it to end or choose another {self.option}") from None
        except OSError:  # the file system refuses locks (some NFS): go on unlocked
            handle.close()
            return self
        handle.seek(0)
        handle.truncate()
        handle.write(str(os.getpid()))
        handle.flush()
        self._handle = handle
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._handle is not None:
            import fcntl

            try:
                self._handle.seek(0)
                self._handle.truncate()
                fcntl.flock(self._handle, fcntl.LOCK_UN)
            finally:
                self._handle.close()
                self._handle = None


def write_csv(frame: Any, path: Path | str) -> Path:
    """Write the polars ``frame`` as CSV to ``path`` atomically; return ``path``."""
    with atomic_path(path) as tmp:
        frame.write_csv(tmp)
    return Path(path)


def save_figure(fig: Any, path: Path | str, **kwargs: Any) -> Path:
    """Save the matplotlib ``fig`` to ``path`` atomically (the format from its suffix);
    return ``path``."""
    path = Path(path)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format=path.suffix.lstrip(".") or "png", **kwargs)
    return path
