"""Fixtures shared by the feature tests: small schedule builders."""

from __future__ import annotations

import polars as pl
import pytest


def schedule(rows: list[dict]) -> pl.DataFrame:
    """Return a schedule from dicts with pool, submit, start, end (seconds) and optional
    gpus/tag/user/id."""
    return pl.DataFrame(
        {
            "job_id": [r.get("id", f"j{i}") for i, r in enumerate(rows)],
            "pool": [r.get("pool", "p") for r in rows],
            "submit_time": [float(r["submit"]) for r in rows],
            "duration": [float(r["end"] - r["start"]) for r in rows],
            "num_gpus": [int(r.get("gpus", 1)) for r in rows],
            "tag": [r.get("tag") for r in rows],
            "user": [r.get("user") for r in rows],
            "preemptible": [False for _ in rows],
            "start_time": [float(r["start"]) for r in rows],
            "end_time": [float(r["end"]) for r in rows],
        },
        schema={
            "job_id": pl.String, "pool": pl.String, "submit_time": pl.Float64,
            "duration": pl.Float64, "num_gpus": pl.Int32, "tag": pl.String,
            "user": pl.String, "preemptible": pl.Boolean,
            "start_time": pl.Float64, "end_time": pl.Float64,
        },
    )


def row_at(table: pl.DataFrame, pool: str, t: float, k_min: int) -> dict:
    """Return the one row of ``table`` for (pool, t, k_min) as a dict."""
    sel = table.filter((pl.col("pool") == pool) & (pl.col("t") == t) & (pl.col("k_min") == k_min))
    assert sel.height == 1, f"expected one row for {(pool, t, k_min)}, got {sel.height}"
    return sel.row(0, named=True)


@pytest.fixture(scope="session")
def make_schedule():
    """The :func:`schedule` builder."""
    return schedule


@pytest.fixture(scope="session")
def pick_row():
    """The :func:`row_at` selector."""
    return row_at
