"""The trace formats and time units the readers know (names only: no heavy imports, for --help)."""

from __future__ import annotations

FORMATS = ("auto", "philly", "philly-joblog", "helios", "pai", "generic", "canonical")
TIME_UNITS = ("s", "ms", "datetime")
