"""Name -> mechanism class. A mechanism module decorates its class with ``@register``; importing the
module (one line in ``mechanisms/__init__.py``) makes it available to ``create``, the CLI and reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

from mechanisms.base import Mechanism, Param

__all__ = ["MechanismInfo", "register", "names", "create", "describe"]

_REGISTRY: dict[str, type[Mechanism]] = {}

M = TypeVar("M", bound=type[Mechanism])


@dataclass(frozen=True)
class MechanismInfo:
    """What the CLI lists about a mechanism.

    name:      registry name.
    summary:   one line.
    params:    the parameter specs (name, type, default, help, allowed, choices).
    guarantee: ``PrivacyGuarantee.summary()`` of the default configuration.
    """

    name: str
    summary: str
    params: tuple[Param, ...]
    guarantee: str


def register(cls: M) -> M:
    """Class decorator adding a ``Mechanism`` subclass under ``cls.name``."""
    if cls.name in _REGISTRY:
        raise ValueError(f"mechanism {cls.name!r} is already registered by {_REGISTRY[cls.name].__name__}")
    for p in cls.params_spec:  # a default that fails its own constraint is a bug in the mechanism
        p.validate(p.default)
    _REGISTRY[cls.name] = cls
    return cls


def names() -> list[str]:
    """Sorted names of all registered mechanisms."""
    return sorted(_REGISTRY)


def _lookup(name: str) -> type[Mechanism]:
    try:
        return _REGISTRY[name]
    except KeyError:
        raise ValueError(f"unknown mechanism {name!r}; valid: {', '.join(names())}") from None


def create(name: str, **params: Any) -> Mechanism:
    """Instantiate mechanism ``name``; ``ValueError`` on an unknown name, parameter or invalid value."""
    return _lookup(name)(**params)


def describe(name: str) -> MechanismInfo:
    """Name, summary, parameters and default-configuration guarantee of mechanism ``name``."""
    cls = _lookup(name)
    return MechanismInfo(cls.name, cls.summary, cls.params_spec, cls().guarantee().summary())
