"""Built-in datasets shipped inside the package, in the style of ``sklearn.datasets``.

The real Philly per-VC trace (Microsoft, CC-BY-4.0; attribution in
``data/builtin/NOTICE``) is stored as ``data/builtin/philly.parquet``: the
CSV's rows in the CSV's order, every cell the CSV's own text (zstd, ~0.6 MB).
Reading it goes through the same Philly reader as the CSV, so job ids (the
1-based data row numbers), the 65 exact duplicate rows (an error naming both
rows, or dropped and counted with ``--clean``) and the result are the CSV's.

Everywhere a trace path is accepted (``sia ingest / features / train /
replay``, ``trace.path`` in an experiment config) ``builtin:philly`` names it.

Example::

    from sia.data.datasets import load_philly
    jobs, report = load_philly()          # duplicates dropped and counted
    report.dropped                        # {'exact_duplicate': 65}
"""

from __future__ import annotations

from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING

import polars as pl
from sia.data.errors import TraceError

if TYPE_CHECKING:
    from sia.data.schema import CleaningReport

#: A trace path starting with this names a built-in dataset.
BUILTIN_PREFIX = "builtin:"
#: Built-in dataset -> (file inside ``sia.data/builtin``, its reader format).
BUILTIN = {"philly": ("philly.parquet", "philly")}
#: The Philly CSV's columns, all stored as the CSV's text.
PHILLY_COLUMNS = ("timestamp", "duration", "num_gpus", "gpu_time", "cluster")
PHILLY_ATTRIBUTION = (
    "Philly per-VC GPU job trace (Microsoft, msr-fiddle/philly-traces), CC-BY-4.0; "
    "Jeon et al., USENIX ATC 2019. See sia/data/builtin/NOTICE."
)


def is_builtin(trace: str | Path | None) -> bool:
    """Return True when ``trace`` names a built-in dataset (``builtin:NAME``)."""
    return trace is not None and str(trace).startswith(BUILTIN_PREFIX)


def builtin_name(trace: str | Path) -> str:
    """Return the dataset name of ``builtin:NAME``; a TraceError for an unknown name."""
    name = str(trace)[len(BUILTIN_PREFIX):]
    if name not in BUILTIN:
        known = ", ".join(BUILTIN_PREFIX + n for n in BUILTIN)
        raise TraceError(f"{trace}: no such built-in dataset (known: {known})")
    return name


def builtin_format(trace: str | Path) -> str:
    """Return the reader format ('philly') of the built-in dataset ``trace`` names."""
    return BUILTIN[builtin_name(trace)][1]


def builtin_file(trace: str | Path = "builtin:philly") -> Path:
    """Return the file system path of the built-in dataset's file (inside the package)."""
    fname = BUILTIN[builtin_name(trace)][0]
    res = resources.files("sia.data").joinpath("builtin", fname)
    path = Path(str(res))
    if not path.is_file():
        raise TraceError(f"{trace}: the packaged file {path} is missing (a broken install?)")
    return path


def read_builtin_rows(trace: str | Path = "builtin:philly") -> pl.DataFrame:
    """Return the built-in dataset's raw rows: the source file's columns, as stored.

    For ``builtin:philly`` these are the CSV's rows in its order with every
    cell as the CSV's text (String columns), what ``pl.read_csv(...,
    infer_schema=False)`` gives on the CSV.
    """
    path = builtin_file(trace)
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise TraceError(f"{trace}: cannot read the packaged {path.name}: {exc}") from exc


def load_philly(*, clean: bool = True) -> tuple[pl.DataFrame, CleaningReport]:
    """Return (jobs, report): the embedded Philly trace as a canonical job table.

    Read by :func:`sia.data.readers.read_philly` exactly as the CSV is: with
    ``clean`` (the default) the 65 exact duplicate rows are dropped and
    counted in ``report.dropped['exact_duplicate']``; without it the first
    duplicate is a :class:`~sia.data.errors.TraceError` naming both rows.
    ``report`` is a :class:`~sia.data.schema.CleaningReport`.
    """
    from sia.data.readers import read_philly

    return read_philly(BUILTIN_PREFIX + "philly", on_bad_rows="drop" if clean else "raise")


def write_philly_parquet(csv_path: str | Path, out: str | Path) -> Path:
    """Write the Philly CSV at ``csv_path`` as the embedded Parquet at ``out``; return ``out``.

    How ``data/builtin/philly.parquet`` was made (from
    ``../shared/traces/philly/philly.csv``): every cell kept as the CSV's
    text, rows in file order (trailing blank lines are not rows), zstd level 19.
    """
    df = pl.read_csv(csv_path, infer_schema=False)
    # the CSV ends with a blank line, which polars reads as an all-null row: not a data row
    blank = pl.all_horizontal([pl.col(c).is_null() for c in df.columns])
    last = df.with_row_index("_i").filter(~blank)["_i"].max()
    df = df.head(0 if last is None else int(last) + 1)
    if tuple(df.columns) != PHILLY_COLUMNS:
        raise TraceError(f"{csv_path}: expected the columns {', '.join(PHILLY_COLUMNS)}, "
                         f"got {', '.join(df.columns)}")
    out = Path(out)
    df.write_parquet(out, compression="zstd", compression_level=19, statistics=False)
    return out
