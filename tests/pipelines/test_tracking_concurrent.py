"""Several processes opening one fresh local MLflow store at once all get it.

MLflow creates a SQLite store's tables on first use; two processes doing so
at the same moment race (``table experiments already exists``), and two that
both find the experiment missing race to create it. ``sia`` opens a local
store under a lock on the database file, so commands started together (two
``sia train`` on a fresh machine, a sweep training on the fly beside another)
all run.
"""

from __future__ import annotations

import multiprocessing as mp
from pathlib import Path

N_PROCS = 4  # without the lock, 4 processes failed in each of 2 tries out of 2


def _open(uri: str, root: str, barrier, out) -> None:
    import os
    from pathlib import Path

    os.environ["MLFLOW_TRACKING_URI"] = uri
    import mlflow  # noqa: F401  (imported before the barrier: the opens start together)
    from sia.pipelines.tracking import setup_tracking

    barrier.wait()
    try:
        setup_tracking(Path(root), experiment="race")
        out.put("ok")
    except Exception as exc:  # reported to the parent, which names it
        out.put(f"{type(exc).__name__}: {str(exc).splitlines()[0]}")


def test_processes_opening_a_fresh_store_together_all_succeed(tmp_path, monkeypatch):
    # the children import this module by its name under --import-mode=importlib
    # (tests.pipelines....): its root must be on their path also when pytest is started as
    # a script (`python -m pytest` adds the working folder; `pytest` does not)
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    # forkserver with MLflow preloaded: the children import it once, in the server, instead
    # of four times (about 5 s of CPU each); each is still its own process with its own
    # connections, started together at the barrier
    ctx = mp.get_context("forkserver")
    ctx.set_forkserver_preload(["mlflow", "sia.pipelines.tracking"])
    uri = f"sqlite:///{tmp_path / 'store' / 'mlflow.db'}"
    (tmp_path / "store").mkdir()  # a store named in a missing folder is an error (issue 36)
    barrier, out = ctx.Barrier(N_PROCS), ctx.Queue()
    procs = [ctx.Process(target=_open, args=(uri, str(tmp_path), barrier, out))
             for _ in range(N_PROCS)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    got = [out.get(timeout=5) for _ in procs]
    assert got == ["ok"] * N_PROCS, got

    import mlflow

    mlflow.set_tracking_uri(uri)
    assert [e.name for e in mlflow.search_experiments() if e.name == "race"] == ["race"]


def test_the_lock_only_reads_an_existing_store(tmp_path, monkeypatch):
    """The lock creates a missing store file, opens an existing one for writing when it may
    and else only for reading (a registry shared read-only still opens); other URIs, an
    in-memory database and SQLite ``file:`` URIs are not locked (no stray files)."""
    import builtins

    from sia.pipelines import tracking

    opened: list[tuple[str, str]] = []

    def spy(path, mode="r", *args, **kwargs):
        opened.append((str(path), mode))
        return builtins.open(path, mode, *args, **kwargs)

    monkeypatch.setattr(tracking, "open", spy, raising=False)
    db = tmp_path / "store" / "mlflow.db"
    with tracking._local_store_lock(f"sqlite:///{db}"):
        pass
    assert opened == [(str(db), "ab")] and db.exists()
    with tracking._local_store_lock(f"sqlite:///{db}?timeout=5"):
        pass
    assert opened[1:] == [(str(db), "r+b")]  # writable: opened for writing (NFS locks need it)
    monkeypatch.setattr(tracking.os, "access", lambda path, how: False)  # a read-only file
    with tracking._local_store_lock(f"sqlite:///{db}"):
        pass
    assert opened[2:] == [(str(db), "rb")]
    monkeypatch.chdir(tmp_path)
    for uri in ("http://127.0.0.1:5000", "sqlite:///:memory:", "sqlite:///file:reg.db?mode=ro"):
        with tracking._local_store_lock(uri):
            pass
    assert len(opened) == 3
    assert not (tmp_path / ":memory:").exists() and not (tmp_path / "file:reg.db").exists()
