"""Policy registry: policy names -> "module:Class" strings, imported lazily.

Another engineer's policy plugs in by adding one line to :data:`POLICIES`
(or, from outside, by calling :func:`register_policy`). Nothing is imported
until :func:`make_policy` asks for it, so a policy whose module is still being
written breaks only its own name, with a clear :class:`ConfigError`.
"""

from __future__ import annotations

import importlib
from typing import Any

from sia.data.errors import ConfigError
from sia.scheduler.view import Policy

#: name -> "module:Class"; the class is called with the options as keyword arguments.
POLICIES: dict[str, str] = {
    "fcfs": "sia.scheduler.policies:FCFSPolicy",
    "ssf": "sia.scheduler.policies:SSFPolicy",
    "gssf": "sia.scheduler.policies:GlobalSSFPolicy",
    "maxmin": "sia.scheduler.policies:MaxMinPolicy",
    "sia-vc": "sia.scheduler.policy_siavc:SiaVCPolicy",
    "oracle": "sia.scheduler.oracle:OraclePolicy",
    "sia": "sia.scheduler.policy_sia:SiaPolicy",
    "sia-perfect": "sia.scheduler.policy_sia:sia_perfect",
    "sia-random": "sia.scheduler.policy_sia:sia_random",
    "sia-random-both": "sia.scheduler.policy_sia:sia_random_both",
    "sia-perfect-durations": "sia.scheduler.policy_sia:sia_perfect_durations",
    "sia-perfect-arrivals": "sia.scheduler.policy_sia:sia_perfect_arrivals",
    "hived": "sia.scheduler.policy_hived:HiveDPolicy",
    "themis": "sia.scheduler.policy_themis:ThemisPolicy",
}

#: The registered policy names, in registration order (a live view of POLICIES).
POLICY_NAMES = POLICIES.keys()


def register_policy(name: str, target: str) -> None:
    """Register policy ``name`` as ``"module:Class"`` (replaces an earlier entry)."""
    if ":" not in target:
        raise ConfigError(f"policy {name!r}: target {target!r} must look like 'module:Class'")
    POLICIES[name.lower()] = target


def policy_class(name: str) -> type:
    """Return the class registered under ``name`` (case-insensitive), importing it now."""
    key = name.strip().lower()
    target = POLICIES.get(key)
    names = ", ".join(POLICIES)
    if target is None:
        raise ConfigError(f"unknown policy {name!r}; known policies: {names}")
    module_name, _, cls_name = target.partition(":")
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(
            f"policy {name!r} is registered as {target} but its module cannot be imported "
            f"({exc}); known policies: {names}"
        ) from exc
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise ConfigError(
            f"policy {name!r} is registered as {target} but {module_name} has no {cls_name}; "
            f"known policies: {names}"
        )
    return cls


def make_policy(name: str, **options: Any) -> Policy:
    """Return a new policy instance for ``name`` built with ``options`` (e.g. ``seed=0``).

    Raises ConfigError for an unknown name, a module that cannot be imported,
    or options the policy does not accept.
    """
    cls = policy_class(name)
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"policy {name!r}: bad options {sorted(options)}: {exc}") from exc
