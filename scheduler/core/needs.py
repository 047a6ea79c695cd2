"""What a policy needs from the replay around it, declared on its class (DESIGN.md 6.1).

Every policy class sets a class attribute ``needs``; the registry
(:mod:`sia.scheduler.registry`) reads it, checks a replay against it before
the replay starts, and the pipelines ask the registry instead of keeping
lists of policy names::

    class MyPolicy:
        name = "mine"
        needs = PolicyNeeds(forecaster="forecaster", seed=True, locality=True,
                            locality_requires={"strict_buddies": False})

        def __init__(self, forecaster=None, seed: int = 0): ...

A class without ``needs`` gets :data:`NO_NEEDS`: no forecaster, no seed, no
locality (a new policy says what it supports; it is never assumed).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class PolicyNeeds:
    """What a policy takes and supports.

    - ``forecaster``: the keyword under which the constructor takes the
      forecaster the pipelines build (the learned predictors), e.g.
      ``"forecaster"`` or ``"base"``; None when the policy takes none.
    - ``seed``: the constructor takes ``seed=`` and the pipelines pass the
      experiment's seed (policies that draw random numbers, or record it).
    - ``locality``: the policy may replay on buddy cells: it places its starts
      itself (``cluster.try_place``) or leaves them to the simulator's placer
      stage and takes its refusals (``refused(jobs)``, see
      :class:`~sia.scheduler.core.view.Policy`).
    - ``locality_requires``: LocalityConfig options the policy always replays
      with on cells (they override the replay's own), e.g. HiveD*'s
      ``{"strict_buddies": False}``.
    """

    forecaster: str | None = None
    seed: bool = False
    locality: bool = False
    locality_requires: Mapping[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.locality_requires and not self.locality:
            raise ValueError("locality_requires needs locality=True")
        object.__setattr__(self, "locality_requires",
                           MappingProxyType(dict(self.locality_requires)))


#: The needs of a policy class that declares none.
NO_NEEDS = PolicyNeeds()


def needs_of(policy: Any) -> PolicyNeeds:
    """Return the :class:`PolicyNeeds` declared by a policy class or instance (:data:`NO_NEEDS`
    when it declares none)."""
    needs = getattr(policy, "needs", None)
    return needs if isinstance(needs, PolicyNeeds) else NO_NEEDS
