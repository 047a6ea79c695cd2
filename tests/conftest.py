"""Shared fixtures: paths to the shared traces."""

from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PHILLY = ROOT.parent / "shared" / "traces" / "philly" / "philly.csv"


@pytest.fixture(scope="session")
def philly_path() -> Path:
    """Path of the real Philly per-VC trace (never copied into the project)."""
    if not PHILLY.exists():
        pytest.fail(f"the Philly trace is missing at {PHILLY}; ../shared must sit beside the project")
    return PHILLY
