"""The replay store: atomic Parquet + completion marker, and when a stored replay counts as done."""

from __future__ import annotations

import json

import polars as pl
from hypothesis import given
from hypothesis import strategies as st
from sia.pipelines.engine.store import (
    atomic_write_parquet,
    replay_files,
    replay_status,
    result_key,
    save_replay,
)


def _frame(n: int = 5) -> pl.DataFrame:
    return pl.DataFrame({"job_id": [f"j{i}" for i in range(n)], "end_time": [float(i) for i in range(n)]})


def test_saved_replay_is_done_for_its_key_and_stale_for_another(tmp_path):
    parquet, marker = replay_files(tmp_path / "w" / "seed-0", "maxmin")
    assert replay_status(parquet, marker, "k1") == "missing"
    save_replay(parquet, marker, _frame(), "k1", wall_s=1.5)
    assert parquet.name == "maxmin.parquet" and marker.name == "maxmin.done.json"
    assert replay_status(parquet, marker, "k1") == "done"
    assert replay_status(parquet, marker, "k2") == "stale"
    saved = json.loads(marker.read_text())
    assert saved == {"key": "k1", "rows": 5, "wall_s": 1.5}
    assert pl.read_parquet(parquet).equals(_frame())
    assert not list(parquet.parent.glob("*.tmp"))
    # saving again under a new key replaces both files
    save_replay(parquet, marker, _frame(3), "k2")
    assert replay_status(parquet, marker, "k2") == "done"
    assert replay_status(parquet, marker, "k1") == "stale"


def test_incomplete_replays_are_missing(tmp_path):
    parquet, marker = replay_files(tmp_path, "fcfs")
    save_replay(parquet, marker, _frame(), "k")
    # the Parquet deleted: missing
    parquet.unlink()
    assert replay_status(parquet, marker, "k") == "missing"
    # a crash mid-write leaves only the temporary file: still missing
    parquet.with_name(parquet.name + ".tmp").write_bytes(b"PAR1 half a file")
    assert replay_status(parquet, marker, "k") == "missing"
    # a truncated Parquet under the final name (e.g. copied by hand) is not done either
    atomic_write_parquet(_frame(), parquet)
    assert replay_status(parquet, marker, "k") == "done"
    data = parquet.read_bytes()
    parquet.write_bytes(data[: len(data) // 2])
    assert replay_status(parquet, marker, "k") == "missing"
    # a Parquet whose row count differs from the marker's
    atomic_write_parquet(_frame(4), parquet)
    assert replay_status(parquet, marker, "k") == "missing"
    # no marker (crash between the Parquet's rename and the marker's) or a broken one
    atomic_write_parquet(_frame(), parquet)
    marker.write_text("{not json")
    assert replay_status(parquet, marker, "k") == "missing"
    marker.unlink()
    assert replay_status(parquet, marker, "k") == "missing"


def test_result_key_matches_the_evaluate_keys_on_disk():
    # the key format evaluate has always written (sha256 of sorted JSON, 20 hex digits)
    import hashlib

    want = hashlib.sha256(json.dumps([{"a": 1, "b": [2, 3]}, "x"], sort_keys=True)
                          .encode()).hexdigest()[:20]
    assert result_key({"b": [2, 3], "a": 1}, "x") == want


@given(st.dictionaries(st.text(max_size=5), st.integers() | st.floats(allow_nan=False)
                       | st.text(max_size=5), max_size=6),
       st.text(max_size=5), st.text(max_size=5))
def test_result_key_ignores_dict_order_and_sees_every_part(d, a, b):
    reordered = dict(reversed(list(d.items())))
    assert result_key(d, a) == result_key(reordered, a)
    assert len(result_key(d, a)) == 20
    if a != b:
        assert result_key(d, a) != result_key(d, b)
