"""What happens between the clients' local updates and the new global model.

A round's communication is a `RoundProtocol` (``auditkit.mechanisms.protocol``): it receives the selected clients'
true updates (client side) and returns what the server computes from the messages it actually received, the bits
those messages cost, and what each adversary saw. The training loop knows nothing else, so a mechanism with its
own protocol, registered beside it, replaces the protocol without touching the loop.

`UplinkProtocol` is the common case: each client encodes its update with the mechanism (``encode``), the
real bytes are sent, the server decodes them and combines the decoded updates with an
`Aggregator` (FedAvg's weighted mean by default) (``receive``). The two halves
are separate methods so that a backend whose clients live elsewhere (``auditkit.flower``) runs the same
code on each side of the wire.
"""
from __future__ import annotations

from typing import Any, Protocol

import torch

from auditkit.mechanisms.message import Message
from auditkit.mechanisms.protocol import ProtocolContext, RoundOutcome, RoundProtocol, protocol_class
from auditkit import mechanisms
from auditkit.mechanisms.randomness import derive_seed, shared_seed
from auditkit.mechanisms import View


class Aggregator(Protocol):
    """Combines the server's decoded updates into one global update."""

    def aggregate(self, updates: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        """updates: (S, P) decoded client updates; weights: (S,) client weights p_k."""
        ...


class FedAvg:
    """FedAvg's weighted mean sum_k p_k x_k / sum_k p_k over the clients heard this round."""

    def aggregate(self, updates: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        w = weights.to(updates.dtype) / weights.sum()
        return w @ updates


class UplinkProtocol:
    """Encode on each client, send the real bytes, decode at the server, aggregate.

    Args:
        mechanism: a registered mechanism (``encode``/``decode`` with a shared seed).
        seed: the experiment's base seed; client k in round t uses ``shared_seed(seed, k, t)``.
        aggregator: how decoded updates are combined (default FedAvg).
    """

    name = "uplink"  # the protocol's name in results

    def __init__(self, mechanism, seed: int, aggregator: Aggregator | None = None) -> None:
        self.mechanism = mechanism
        self.seed = seed
        self.aggregator = aggregator or FedAvg()

    def received(self, updates: torch.Tensor, clients: list[int]) -> torch.Tensor:
        """The clients' updates (S, P) as the mechanism receives them, after its clipping (the SNR's signal)."""
        return torch.stack([self.mechanism.clip_update(u.detach().cpu()) for u in updates]).to(updates.dtype)

    def encode(self, update: torch.Tensor, client: int, round_: int) -> bytes:
        """Client side: the bytes client ``client`` sends in round ``round_`` for its true ``update`` (P,)."""
        return self.mechanism.encode(update.detach().cpu(), shared_seed(self.seed, client, round_)).to_bytes()

    def decode(self, message: Message | bytes, client: int, round_: int) -> torch.Tensor:
        """Server side: the update client ``client`` sent in round ``round_``, decoded under their shared seed."""
        if isinstance(message, bytes):
            message = Message.from_bytes(message)
        return self.mechanism.decode(message, shared_seed(self.seed, client, round_))

    def receive(self, payloads: list[bytes], clients: list[int], weights: torch.Tensor, round_: int,
                *, like: torch.Tensor) -> RoundOutcome:
        """Server side: decode each client's bytes under its shared seed and aggregate; ``like`` gives the
        device and dtype of the decoded updates."""
        decoded_updates = torch.empty(len(payloads), like.shape[-1], device=like.device, dtype=like.dtype)
        overloads = 0
        for k, (payload, client) in enumerate(zip(payloads, clients, strict=True)):  # one message at a time
            message = Message.from_bytes(payload)  # the server sees only the bytes
            overloads += int(getattr(message, "overloads", 0))
            decoded_updates[k] = self.decode(message, client, round_)
        return RoundOutcome(
            aggregate=self.aggregator.aggregate(decoded_updates, weights.to(like.device)),
            bits=[8 * len(p) for p in payloads],
            views={View.SERVER: decoded_updates, View.EAVESDROPPER: list(payloads)},
            stats={"overloads": float(overloads)},
        )

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor | None = None,
    ) -> RoundOutcome:
        payloads = [self.encode(update, client, round_) for update, client in zip(updates, clients)]
        return self.receive(payloads, clients, weights, round_, like=updates)


def client_mechanism(name: str, seed: int, params: dict[str, Any]) -> mechanisms.Mechanism:
    """The registered mechanism ``name`` with ``params``, its client-private randomness keyed by the run's ``seed``
    (``derive_seed(seed, "client-private")``): the one keying of every run, auditkit's own and a Flower app's, so
    that the same seed sends the same bits."""
    return mechanisms.create(name, private_seed=derive_seed(seed, "client-private"), **params)


def build_protocol(mechanism, context: ProtocolContext) -> RoundProtocol:
    """The round protocol of a run of ``mechanism``: the registered protocol its class names (``protocol``,
    ``auditkit.mechanisms.protocol``) built for ``context``, or one encoded upload per client (``UplinkProtocol``)
    where it names none or its protocol declines this run (``build`` returned None)."""
    if mechanism.protocol is not None:
        built = protocol_class(mechanism.protocol).build(mechanism, context)
        if built is not None:
            return built
    return UplinkProtocol(mechanism, context.seed)
