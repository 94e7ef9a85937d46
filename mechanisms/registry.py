"""Name -> mechanism class. A mechanism module decorates its class with ``@register``; importing the
module (one line in ``mechanisms/__init__.py``) makes it available to ``create``, the CLI and reports."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, TypeVar

import torch

from mechanisms.base import Mechanism, Param

__all__ = ["MechanismInfo", "register", "names", "create", "describe", "reference_update"]

_REGISTRY: dict[str, type[Mechanism]] = {}

M = TypeVar("M", bound=type[Mechanism])


@dataclass(frozen=True)
class MechanismInfo:
    """What the CLI lists about a mechanism.

    name:      registry name.
    summary:   one line.
    params:    the parameter specs (name, type, default, help, allowed, choices).
    guarantee: ``PrivacyGuarantee.summary()`` of the default configuration.
    bits_per_coordinate: measured size of the default configuration's message for the
               ``reference_update()`` (float32 = 32).
    """

    name: str
    summary: str
    params: tuple[Param, ...]
    guarantee: str
    bits_per_coordinate: float


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


REFERENCE_DIMENSION = 10_000
REFERENCE_SEED = 12345


def reference_update(dimension: int = REFERENCE_DIMENSION) -> torch.Tensor:
    """The fixed update that rates are quoted for: iid Gaussian coordinates scaled to l2 norm 1
    (the default clip of the clipping mechanisms), drawn from a fixed seed."""
    x = torch.randn(dimension, generator=torch.Generator().manual_seed(REFERENCE_SEED), dtype=torch.float64)
    return (x / x.norm()).to(torch.float32)


def describe(name: str) -> MechanismInfo:
    """Name, summary, parameters, default-configuration guarantee and rate of mechanism ``name``."""
    cls = _lookup(name)
    mechanism = cls(private_seed=0)
    x = reference_update()
    bits = mechanism.encode(x, REFERENCE_SEED).num_bits / x.numel()
    return MechanismInfo(cls.name, cls.summary, cls.params_spec, mechanism.guarantee().summary(), bits)
