"""The service's wire format: pydantic models of events and answers (`POST /events` ...).

An event is one JSON object: ``id`` (the client's idempotency key), ``type`` (submit, start,
finish, quota, clock), ``time`` (seconds on the events' clock) and, by type, ``job``, ``pool``,
``gpus`` and the trace contract's optional fields (``tag``, ``user``, ``time_limit`` in
seconds, ``preemptible``). A request body is one event or ``{"events": [...]}``.
"""

from __future__ import annotations

import math
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, model_validator

#: Longest id, job, pool, tag or user (characters).
MAX_NAME = 256
#: Most events in one request.
MAX_BATCH = 10_000
#: Most GPUs of one job or pool.
MAX_GPUS = 1_000_000

Name = Annotated[str, StringConstraints(min_length=1, max_length=MAX_NAME)]
#: The fields each type needs (beside id, type, time).
REQUIRED = {"submit": ("job", "pool", "gpus"), "start": ("job",), "finish": ("job",),
            "quota": ("pool", "gpus"), "clock": ()}


class EventIn(BaseModel):
    """One event as a client sends it (unknown fields are refused)."""

    model_config = ConfigDict(extra="forbid")

    id: Name
    type: Literal["submit", "start", "finish", "quota", "clock"]
    time: float = Field(allow_inf_nan=False, ge=-1e15, le=1e15)
    job: Name | None = None
    pool: Name | None = None
    gpus: int | None = Field(default=None, ge=0, le=MAX_GPUS)
    tag: Annotated[str, StringConstraints(max_length=MAX_NAME)] | None = None
    user: Annotated[str, StringConstraints(max_length=MAX_NAME)] | None = None
    time_limit: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    preemptible: bool = False

    @model_validator(mode="after")
    def _fields_of_type(self) -> EventIn:
        for key in REQUIRED[self.type]:
            if getattr(self, key) is None:
                raise ValueError(f"field {key!r} is required for a {self.type} event")
        if self.type == "submit" and self.gpus < 1:
            raise ValueError("field 'gpus' must be >= 1 for a submit event")
        return self


class Batch(BaseModel):
    """A batch of events, applied in order and all or nothing."""

    model_config = ConfigDict(extra="forbid")

    events: list[EventIn] = Field(max_length=MAX_BATCH)


def to_core_events(events: list[dict[str, Any]] | list[EventIn]) -> list[Any]:
    """Return the core's :class:`~sia.service.core.Event` of each wire event (validated here
    when given as dicts)."""
    from sia.service.core import Event

    out = []
    for e in events:
        m = e if isinstance(e, EventIn) else EventIn.model_validate(e)
        out.append(Event(id=m.id, kind=m.type, time=float(m.time), job=m.job, pool=m.pool,
                         gpus=m.gpus, tag=m.tag, user=m.user, time_limit=m.time_limit,
                         preemptible=m.preemptible))
    return out


def decision_dict(d: Any) -> dict[str, Any]:
    """A decision as JSON: time, job, pool, gpus, lent and, for a loan, why it was made."""
    out = {"time": d.time, "job": d.job, "pool": d.pool, "gpus": d.gpus, "lent": d.lent}
    if d.lent:
        out["reason"] = ("lent on GPUs its pool's quota does not cover: spare beyond every "
                         "pool's reservation"
                         + ("" if d.window is None else
                            f", predicted to end within the {round(d.window / 60)}-minute window"))
        out["window_s"] = d.window
    return out


def answer_of(core: Any, decided: list[Any], accepted: int, duplicates: int) -> dict[str, Any]:
    """The answer to ``POST /events``: counts, the clock, the next known instant, and the
    decisions these events led to."""
    clock = core.clock
    return {"accepted": accepted, "duplicates": duplicates,
            "clock": None if clock == -math.inf else clock,
            "next_time": core.next_time(), "rebuilds": core.rebuilds, "grows": core.grows,
            "decisions": [decision_dict(d) for d in decided]}
