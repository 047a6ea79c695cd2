"""The Philly trace embedded in the package: byte-faithful to the CSV, read the same way."""

from __future__ import annotations

import hashlib
from pathlib import Path

import polars as pl
import pytest
from sia.data import datasets
from sia.data.datasets import (
    builtin_file,
    is_builtin,
    load_philly,
    read_builtin_rows,
    write_philly_parquet,
)
from sia.data.errors import ConfigError, TraceError
from sia.data.readers import detect_format, read_philly, read_trace

#: sha256 of ../shared/traces/philly/philly.csv, the file the Parquet was made from.
PHILLY_CSV_SHA256 = "ebffb3dd1589bdf4e7bcd74496201c5ded1d557d498ee14f560463f37ec353da"
SHARED_CSV = Path(__file__).resolve().parents[3] / "shared" / "traces" / "philly" / "philly.csv"


def _as_csv_text(rows: pl.DataFrame) -> str:
    """Return the CSV text the stored rows stand for (header, one line per row, final blank)."""
    body = "".join(",".join(r) + "\n" for r in rows.iter_rows())
    return ",".join(rows.columns) + "\n" + body + "\n"


def test_embedded_rows_are_the_csv_byte_for_byte():
    rows = read_builtin_rows("builtin:philly")
    assert tuple(rows.columns) == datasets.PHILLY_COLUMNS
    assert all(dt == pl.String for dt in rows.dtypes) and rows.null_count().sum_horizontal()[0] == 0
    assert rows.height == 82_247
    assert hashlib.sha256(_as_csv_text(rows).encode()).hexdigest() == PHILLY_CSV_SHA256


def test_embedded_file_is_small_and_licensed():
    path = builtin_file("builtin:philly")
    assert path.stat().st_size < 1_000_000
    notice = (path.parent / "NOTICE").read_text()
    assert "CC-BY-4.0" in notice and "Microsoft" in notice


def test_load_philly_reports_the_65_duplicates():
    jobs, report = load_philly()
    assert report.source == "builtin:philly"
    assert report.rows_read == 82_247 and report.dropped == {"exact_duplicate": 65}
    assert jobs.height == report.rows_kept == 82_182 and report.pools == 15
    with pytest.raises(TraceError, match=r"builtin:philly: row 3136: exact duplicate of row 3135 "
                                         r"\(65 duplicate rows in all\).*--clean"):
        load_philly(clean=False)


def test_builtin_path_resolution():
    assert is_builtin("builtin:philly") and not is_builtin("philly.csv") and not is_builtin(None)
    assert detect_format("builtin:philly") == "philly"
    with pytest.raises(TraceError, match="no such built-in dataset.*builtin:philly"):
        read_trace("builtin:nope")
    with pytest.raises(ConfigError, match="builtin:philly is a philly trace"):
        read_trace("builtin:philly", "generic")
    with pytest.raises(ConfigError, match="neither --map"):
        read_trace("builtin:philly", mapping={"pool": "cluster"})
    assert read_trace("builtin:philly", "philly", on_bad_rows="drop")[0].height == 82_182


@pytest.mark.skipif(not SHARED_CSV.exists(), reason="the shared CSV is not beside the repository")
def test_embedded_reads_as_the_csv(tmp_path):
    jobs_csv, rep_csv = read_philly(SHARED_CSV, on_bad_rows="drop")
    jobs_emb, rep_emb = read_trace("builtin:philly", on_bad_rows="drop")
    assert jobs_csv.equals(jobs_emb)
    a, b = rep_csv.to_dict(), rep_emb.to_dict()
    assert a.pop("source") != b.pop("source") and a == b
    # and the Parquet is what write_philly_parquet makes of the CSV
    out = write_philly_parquet(SHARED_CSV, tmp_path / "philly.parquet")
    assert pl.read_parquet(out).equals(read_builtin_rows())
