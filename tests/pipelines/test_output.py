"""Output folders and files (issue 36): one-line errors, no partial files, one writer at a time."""

from __future__ import annotations

import errno
import os

import polars as pl
import pytest
from sia.pipelines.output import (
    FolderLock,
    OutputError,
    check_dir,
    check_file,
    prepare_dir,
    write_parquet,
    write_text,
)


def _one_line(exc: pytest.ExceptionInfo, *words: str) -> str:
    msg = str(exc.value)
    assert "\n" not in msg, msg
    for w in words:
        assert w in msg, (w, msg)
    return msg


@pytest.mark.parametrize("where", ["file", "under_file", "long", "proc", "sys"])
def test_unusable_folders_are_one_line_errors_naming_the_option(tmp_path, where):
    (tmp_path / "f").write_text("x")
    path = {"file": tmp_path / "f", "under_file": tmp_path / "f" / "sub",
            "long": tmp_path / ("a" * 300), "proc": "/proc/sia-test/out",
            "sys": "/sys/sia-test"}[where]
    for check in (prepare_dir, check_dir):
        with pytest.raises(OutputError) as err:
            check(path, "--out")
        _one_line(err, "--out")
    assert not os.path.exists("/proc/sia-test")


def test_check_dir_creates_nothing_and_prepare_dir_creates_the_folder(tmp_path):
    target = tmp_path / "a" / "b"
    assert check_dir(target) == target and not (tmp_path / "a").exists()
    assert prepare_dir(target).is_dir()
    assert [p.name for p in target.iterdir()] == []  # the write probe is gone
    with pytest.raises(OutputError):
        check_file(tmp_path)  # a folder where a file is wanted


def test_a_failed_write_leaves_no_file_under_the_final_name(tmp_path, monkeypatch):
    tmp_path = prepare_dir(tmp_path / "o")  # beside nothing else (the store is in tmp_path)
    frame = pl.DataFrame({"x": list(range(1000))})
    path = tmp_path / "jobs.parquet"
    write_parquet(frame, path)
    old = path.read_bytes()

    def full_disk(self, file, *a, **k):
        with open(file, "wb") as f:
            f.write(b"PAR1" + b"\0" * 1000)  # a truncated file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    with pytest.raises(OutputError) as err:
        write_parquet(frame, path)
    _one_line(err, "No space left on device", "jobs.parquet")
    assert path.read_bytes() == old  # the earlier file is kept whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["jobs.parquet"]  # no temporary left
    monkeypatch.undo()
    new = tmp_path / "new.parquet"
    monkeypatch.setattr(pl.DataFrame, "write_parquet", full_disk)
    with pytest.raises(OutputError):
        write_parquet(frame, new)
    assert not new.exists()


def test_two_writers_never_share_a_temporary_name(tmp_path):
    tmp_path = prepare_dir(tmp_path / "o")
    for i in range(5):
        write_text(tmp_path / "s.json", str(i))
    assert (tmp_path / "s.json").read_text() == "4"
    assert [p.name for p in tmp_path.iterdir()] == ["s.json"]


def test_a_locked_folder_is_in_use_until_released(tmp_path):
    with FolderLock(tmp_path):
        with pytest.raises(OutputError) as err:
            with FolderLock(tmp_path):
                pass
        _one_line(err, "in use", str(os.getpid()))
    with FolderLock(tmp_path):  # released: usable again
        pass


def test_temporaries_of_dead_writers_are_removed_by_the_next_write(tmp_path):
    folder = prepare_dir(tmp_path / "o")
    dead = folder / ".s.json.999999999-abcd1234.tmp"  # no such process
    alive = folder / f".s.json.{os.getpid()}-abcd1234.tmp"  # a writer still at work
    old = folder / "s.json.tmp"  # the name older versions used
    for p in (dead, alive, old):
        p.write_text("partial")
    write_text(folder / "s.json", "{}")
    assert sorted(p.name for p in folder.iterdir()) == [alive.name, "s.json"]
