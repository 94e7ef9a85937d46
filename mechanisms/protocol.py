"""Round protocols: how one FL round's updates reach the server, as a registered extension of a mechanism.

Most mechanisms need none: each client encodes its update, the server decodes and averages
(``auditkit.fl.aggregation.UplinkProtocol``, the FL core's default). A mechanism whose round is something else
(MSP-FL's splitting and consensus rounds, DP-SQ's device groups with clusters and SNR fusion) names its protocol in
its class attribute ``protocol``; the protocol is a class registered with ``@register_protocol``, written beside
the mechanism (``auditkit.mechanisms.msp_consensus``, ``auditkit.mechanisms.dpsq_groups``) or in a plugin. The
training loop knows only this interface: it calls ``build`` and then ``communicate`` every round.

A protocol class declares

* ``name``: its name in results (``training.protocol``);
* ``options``: ``Param`` specs of the keys a mechanism setting of the config may carry for it (DP-SQ's
  ``fusion``, ``clusters``); the config validates them with the specs, the FL core never reads them;
* ``table``: the name of its own top-level config table (DP-SQ's ``[groups]``), or None; then also
  ``table_type``, a frozen dataclass of the table's keys (typed ``int``, ``float``, ``str``, ``bool``, tuples of
  them, or ``| None``; the config checks the types, as for every table) and ``check_table(table, clients)``,
  which checks the parsed table against the run's K ``clients`` (``ValueError`` naming the key);
* ``check_options(options, table)`` (optional): a setting's options checked against the parsed table (None when
  the config has none), ``ValueError`` naming the option;
* ``check_participation(participation, sample_rate)`` (optional): refuses, with a ``ValueError``, a client
  participation (``[training]``'s) the protocol's claim does not cover, before anything runs;
* ``build(mechanism, context) -> RoundProtocol | None``: the protocol of one run; None when this run needs no
  protocol of its own (e.g. its table is absent): the plain uplink then runs.
"""
from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import torch

from auditkit.mechanisms.base import Param

__all__ = [
    "ProtocolContext",
    "informed_aggregate",
    "RoundOutcome",
    "RoundProtocol",
    "SelectsClients",
    "SendsUploads",
    "selects_clients",
    "protocol_class",
    "protocol_names",
    "protocol_tables",
    "register_protocol",
]


@dataclass
class RoundOutcome:
    """What a protocol returns for one round."""

    aggregate: torch.Tensor  # (P,) the global update the server applies
    bits: list[int]  # uplink bits per selected client (the real serialised size)
    views: dict[str, object] = field(default_factory=dict)  # threat-model view -> what it saw
    stats: dict[str, float] = field(default_factory=dict)  # mechanism statistics (e.g. overloads)


class RoundProtocol(Protocol):
    """One round of client -> server communication, named by ``name`` in results.

    A protocol whose release does not depend on anyone taking part (central noise added by the server) sets
    ``releases_empty_rounds = True``: the training loop then calls ``communicate`` with no clients (``updates`` of
    shape (0, P)) in a round that sampled nobody, instead of skipping the round.

    ``global_params`` is the model the clients started the round from (w_i = global_params + updates[i]);
    protocols that act on models rather than updates (MSP-FL's splitting) need it. A protocol that also
    decides who takes part (DP-SQ's per-group clusters) has a ``select_clients(round_) -> list[int]``
    method, which the training loop then calls instead of its own participation rule.
    """

    name: str

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor,
    ) -> RoundOutcome: ...


@runtime_checkable
class SelectsClients(Protocol):
    """The capability of a round protocol that decides who takes part (DP-SQ's per-group clusters): the training
    loop calls ``select_clients(round_)`` instead of its own participation rule (``selects_clients``)."""

    def select_clients(self, round_: int) -> list[int]: ...


@runtime_checkable
class SendsUploads(Protocol):
    """The capability of a round protocol that carries one encoded upload per client (``auditkit.fl.aggregation``'s
    uplink): each client ``encode``s its update, the server ``receive``s the payloads (what the Flower backend runs)."""

    def encode(self, update: torch.Tensor, client: int, round_: int) -> Any: ...

    def receive(self, payloads: Any, clients: list[int], weights: torch.Tensor, round_: int, *, like: torch.Tensor) -> Any: ...


def selects_clients(protocol: Any) -> bool:
    """Whether ``protocol``, a round protocol or its registered class, chooses who takes part (``SelectsClients``)."""
    if isinstance(protocol, type):
        return issubclass(protocol, SelectsClients)
    return isinstance(protocol, SelectsClients)


@dataclass(frozen=True)
class ProtocolContext:
    """What ``build`` gets besides the mechanism: the run's seed and client count K, the setting's options for
    the protocol (validated by its ``options`` specs), its parsed config table (None: the config has none), and
    who takes part in a round (``participation``, ``auditkit.fl.sampling.PARTICIPATION``, with the Poisson
    ``sample_rate`` q, or ``clients_per_round``)."""

    seed: int
    clients: int
    options: Mapping[str, Any] = field(default_factory=dict)
    table: Any = None
    participation: str = "full"
    sample_rate: float | None = None
    clients_per_round: int | None = None


def informed_aggregate(noisy_sum: torch.Tensor, clipped: torch.Tensor) -> torch.Tensor:
    """The view ``"aggregate-informed"`` of a round that releases a noisy sum: row k is the sum minus every other
    client's clipped update, clip(Delta_k) + noise, what an adversary who knows the other summands learns of
    client k (the worst case of an add/remove-one claim). ``clipped``: (S, P), each update as the sum carries it."""
    return noisy_sum - (clipped.sum(0) - clipped)


P = TypeVar("P", bound=type)
_PROTOCOLS: dict[str, type] = {}


def register_protocol(cls: P) -> P:
    """Class decorator adding a round protocol under ``cls.name`` (see the module docstring for what it declares)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise ValueError(f"protocol class {cls.__qualname__} must set a non-empty string `name`")
    if name in _PROTOCOLS and _PROTOCOLS[name] is not cls:
        taken = _PROTOCOLS[name]
        raise ValueError(f"round protocol {name!r} is already registered by {taken.__module__}.{taken.__qualname__}")
    options = getattr(cls, "options", ())
    if not all(isinstance(p, Param) for p in options):
        raise ValueError(f"round protocol {name!r}: options must be mechanisms.Param specs")
    if not callable(getattr(cls, "build", None)):
        raise ValueError(f"round protocol {name!r} must define build(mechanism, context)")
    if getattr(cls, "table", None) is not None and not (
        dataclasses.is_dataclass(getattr(cls, "table_type", None)) and callable(getattr(cls, "check_table", None))
    ):
        raise ValueError(f"round protocol {name!r} declares table {cls.table!r} but no table_type dataclass and "
                         "check_table(table, clients)")
    _PROTOCOLS[name] = cls
    return cls


def protocol_class(name: str) -> type:
    """The registered protocol ``name``."""
    try:
        return _PROTOCOLS[name]
    except KeyError:
        raise ValueError(f"unknown round protocol {name!r}; registered: {', '.join(protocol_names())}") from None


def protocol_names() -> list[str]:
    """Sorted names of the registered round protocols."""
    return sorted(_PROTOCOLS)


def protocol_tables() -> dict[str, type]:
    """Config table name -> the registered protocol that owns it."""
    return {cls.table: cls for cls in _PROTOCOLS.values() if getattr(cls, "table", None) is not None}

