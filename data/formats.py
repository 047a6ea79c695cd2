"""The trace formats and time units the readers know (names only: no heavy imports, for --help)."""

from __future__ import annotations

FORMATS = ("auto", "philly", "philly-joblog", "helios", "pai", "sacct", "generic", "canonical")
TIME_UNITS = ("s", "ms", "datetime")
#: ``datetime:FORMAT`` reads date-times with a strftime / chrono format, e.g. ``datetime:%m/%d/%Y %H:%M``.
DATETIME_FORMAT_PREFIX = "datetime:"


def time_unit_problem(unit: object) -> str | None:
    """Return what is wrong with a time unit (None when it is one of :data:`TIME_UNITS` or
    ``datetime:FORMAT`` with a format holding at least one ``%`` field)."""
    if unit in TIME_UNITS:
        return None
    if isinstance(unit, str) and unit.startswith(DATETIME_FORMAT_PREFIX) and "%" in unit:
        return None
    return (f"{unit!r} is not a time unit: choose one of {', '.join(TIME_UNITS)}, or "
            f"{DATETIME_FORMAT_PREFIX}FORMAT with a date-time format such as "
            f"'{DATETIME_FORMAT_PREFIX}%m/%d/%Y %H:%M'")

#: When a Slurm (sacct) job arrives: ``eligible`` (the default: its ``Eligible`` time, when
#: the export has the field) or ``submit`` (its ``Submit`` time, even when it has).
ARRIVALS = ("eligible", "submit")


def arrival_problem(arrival: object, option: str = "--arrival") -> str | None:
    """Return what is wrong with an arrival choice (None when it is one of :data:`ARRIVALS`),
    as a message starting with ``option``."""
    if arrival in ARRIVALS:
        return None
    return (f"{option} {arrival!r}: choose eligible (a Slurm job arrives when it could first "
            "run, its Eligible time; the default) or submit (at its Submit time)")
