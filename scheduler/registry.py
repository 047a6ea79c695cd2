"""Policy registry: policy names -> "module:Class" strings, imported lazily, and their needs.

Adding a policy is its module plus one line in :data:`POLICIES` (or, from
outside, a call to :func:`register_policy`). The class says what it needs
(:class:`~sia.scheduler.core.needs.PolicyNeeds` in its ``needs`` attribute: a
forecaster and under which option, a seed, locality support and the
locality settings it requires); the pipelines ask :func:`policy_needs`,
:func:`policy_options` and :func:`check_policy` here instead of keeping
lists of policy names. Nothing is imported until a policy is asked for, so a
policy whose module is still being written breaks only its own name, with a
clear :class:`ConfigError`.
"""

from __future__ import annotations

import functools
import importlib
from typing import TYPE_CHECKING, Any

from sia.data.errors import ConfigError
from sia.scheduler.core.needs import PolicyNeeds, needs_of

if TYPE_CHECKING:  # numpy: `sia replay --help` reads POLICY_NAMES from here
    from sia.scheduler.core.view import Policy

#: name -> "module:Class"; the class is called with the options as keyword arguments.
POLICIES: dict[str, str] = {
    "fcfs": "sia.scheduler.policies.fcfs:FCFSPolicy",
    "ssf": "sia.scheduler.policies.ssf:SSFPolicy",
    "gssf": "sia.scheduler.policies.ssf:GlobalSSFPolicy",
    "maxmin": "sia.scheduler.policies.maxmin:MaxMinPolicy",
    "sia-vc": "sia.scheduler.policies.siavc.policy:SiaVCPolicy",
    "oracle": "sia.scheduler.policies.oracle:OraclePolicy",
    "sia": "sia.scheduler.policies.sia.policy:SiaPolicy",
    "sia-perfect": "sia.scheduler.policies.sia.policy:SiaPerfectPolicy",
    "sia-random": "sia.scheduler.policies.sia.policy:SiaRandomPolicy",
    "sia-random-both": "sia.scheduler.policies.sia.policy:SiaRandomBothPolicy",
    "sia-perfect-durations": "sia.scheduler.policies.sia.policy:SiaPerfectDurationsPolicy",
    "sia-perfect-arrivals": "sia.scheduler.policies.sia.policy:SiaPerfectArrivalsPolicy",
    "sia-learned": "sia.scheduler.policies.sia.policy:SiaLearnedPolicy",
    "hived": "sia.scheduler.policies.hived:HiveDPolicy",
    "themis": "sia.scheduler.policies.themis:ThemisPolicy",
    "kueue": "sia.scheduler.policies.kueue:KueuePolicy",
    "sia-preempt": "sia.scheduler.policies.sia.policy:SiaPreemptPolicy",
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


def policy_needs(name: str) -> PolicyNeeds:
    """Return what policy ``name`` declares it needs (its class's ``needs``), importing it now."""
    return needs_of(policy_class(name))


def policies_with(**wanted: bool) -> list[str]:
    """Return the registered names whose needs have these truth values, e.g. ``locality=True``
    or ``forecaster=True`` (a policy that takes a forecaster), in registration order.

    Names whose module cannot be imported are left out.
    """
    out = []
    for name in POLICIES:
        try:
            needs = policy_needs(name)
        except ConfigError:
            continue
        if all(bool(getattr(needs, k)) == v for k, v in wanted.items()):
            out.append(name)
    return out


def check_policy(name: str, *, locality: Any = None, forecaster: bool = False) -> PolicyNeeds:
    """Return policy ``name``'s needs after checking that a replay may give it what it will get.

    ``locality``: the replay's locality (a LocalityConfig or a config's
    locality spec; None or False: fungible GPUs); ``forecaster``: the
    pipeline will give it a forecaster. Raises a one-line ConfigError naming
    the policy and the option for an unknown policy, locality on a policy
    that does not support it, or a forecaster for a policy that takes none.
    """
    needs = policy_needs(name)
    if locality is not None and locality is not False and not needs.locality:
        raise locality_error(name)
    if forecaster and needs.forecaster is None:
        raise ConfigError(f"policy {name!r} takes no forecaster (learned predictors); the "
                          "policies that do: " + ", ".join(policies_with(forecaster=True)))
    return needs


def locality_error(name: str) -> ConfigError:
    """Return the one-line error for policy ``name`` asked to replay on cells without support."""
    return ConfigError(f"policy {name!r} does not support locality (buddy cells): replay it on "
                       "fungible GPUs, or use a policy that does: "
                       + ", ".join(policies_with(locality=True)))


def policy_options(name: str, options: dict[str, Any] | None = None, *, seed: int | None = None,
                   forecaster: Any = None) -> dict[str, Any]:
    """Return the keyword options to build policy ``name`` with: ``options``, plus ``seed``
    when the policy declares it takes one (and ``options`` sets none), plus ``forecaster``
    (when not None) under the option the policy declares for it.

    Raises ConfigError (see :func:`check_policy`) when ``forecaster`` is given
    to a policy that takes none.
    """
    needs = check_policy(name, forecaster=forecaster is not None)
    out = dict(options or {})
    if seed is not None and needs.seed:
        out.setdefault("seed", seed)
    if forecaster is not None:
        out[needs.forecaster] = forecaster
    return out


#: Constructor annotations whose values are checked before a policy is built (the rest are left
#: to the constructor): annotation text -> (accepted types, what to say)
_SIMPLE_TYPES: dict[str, tuple[tuple[type, ...], str]] = {
    "bool": ((bool,), "true or false"),
    "int": ((int,), "an integer"),
    "float": ((int, float), "a number"),
    "str": ((str,), "a string"),
}


def option_type_problems(name: str, options: dict[str, Any]) -> dict[str, str]:
    """Return {option: what is wrong} for the options of policy ``name`` whose value does not
    have the simple type its constructor parameter declares ({} when all are fine).

    Checked when the parameter declares ``bool``, ``int``, ``float`` or ``str`` (maybe
    ``| None``); the constructor would otherwise take the value as it is
    (``adaptation: "no"`` is a true value). Other parameters are left to the constructor.
    """
    params = _init_annotations(policy_class(name))
    problems = {}
    for key, value in options.items():
        parts = [t.strip() for t in params.get(key, "").split("|")]
        kinds = [t for t in parts if t != "None"]
        if len(kinds) != 1 or kinds[0] not in _SIMPLE_TYPES or (value is None and "None" in parts):
            continue
        types, what = _SIMPLE_TYPES[kinds[0]]
        if isinstance(value, bool) and bool not in types or not isinstance(value, types):
            problems[key] = f"must be {what}, not {value!r}"
    return problems


@functools.cache
def _init_annotations(cls: type) -> dict[str, str]:
    """Return the annotation text of each constructor parameter of ``cls``, following a
    subclass that takes ``**options`` to its base's parameters."""
    import inspect

    out: dict[str, str] = {}
    for klass in reversed(cls.__mro__):  # a subclass's own parameters win
        init = klass.__dict__.get("__init__")
        try:
            params = {} if init is None else inspect.signature(init).parameters
        except (TypeError, ValueError):
            continue
        out.update({k: p.annotation for k, p in params.items()
                    if p.kind is not inspect.Parameter.VAR_KEYWORD
                    and isinstance(p.annotation, str)})
    return out


def unknown_options(name: str, options: dict[str, Any]) -> dict[str, str]:
    """Return {option: what is wrong} for the options that policy ``name``'s constructor does
    not take (a typo names the closest option it does take; {} when all are known)."""
    import difflib

    known = _init_parameters(policy_class(name))
    out = {}
    for key in options:
        if key not in known:
            close = difflib.get_close_matches(key, sorted(known), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            out[key] = f"is not an option of policy {name!r}{hint}"
    return out


@functools.cache
def _init_parameters(cls: type) -> frozenset[str]:
    """Return the names of the constructor parameters of ``cls`` and its bases (a subclass that
    takes ``**options`` passes them to its base)."""
    import inspect

    names: set[str] = set()
    for klass in cls.__mro__:
        init = klass.__dict__.get("__init__")
        if klass is object or init is None:
            continue
        try:
            params = inspect.signature(init).parameters
        except (TypeError, ValueError):
            continue
        names.update(k for k, p in params.items() if k != "self" and p.kind not in (
            inspect.Parameter.VAR_KEYWORD, inspect.Parameter.VAR_POSITIONAL))
    return frozenset(names)


def make_policy(name: str, *, locality: Any = None, **options: Any) -> Policy:
    """Return a new policy instance for ``name`` built with ``options`` (e.g. ``seed=0``).

    ``locality`` is the replay's locality (None: fungible GPUs), checked
    against the policy's needs (:func:`check_policy`) before anything is
    built. Raises ConfigError for an unknown name, a module that cannot be
    imported, locality on a policy that does not support it, or options the
    policy does not accept.
    """
    check_policy(name, locality=locality)
    cls = policy_class(name)
    for key, problem in option_type_problems(name, options).items():
        raise ConfigError(f"policy {name!r}: option {key} {problem}")
    for key, problem in unknown_options(name, options).items():
        raise ConfigError(f"policy {name!r}: option {key!r} {problem}")
    try:
        return cls(**options)
    except TypeError as exc:
        raise ConfigError(f"policy {name!r}: bad options {sorted(options)}: {exc}") from exc
