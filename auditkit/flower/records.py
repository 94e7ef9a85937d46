"""How auditkit's data travels in Flower's records: model vectors as ``ArrayRecord``s, a mechanism's message as
bytes in a ``ConfigRecord``, and the ground truth a simulation keeps beside the message.

Keys (one meaning each, in every message auditkit builds or reads):

* ``"arrays"``, ``"config"``, ``"metrics"``: Flower's own conventions (its strategies read them);
* ``PAYLOAD``: a ``ConfigRecord`` with ``payload`` (the mechanism's real bytes), ``client`` and ``round`` (which
  shared seed encoded it);
* ``TRUTH``: what no adversary sees, used to score attacks: in a user's app the images a client trained on, an
  ``ArrayRecord`` the client side strips before the message leaves (the mods); in a simulated client's reply (the
  backend) its true update as float32 bytes in a ``ConfigRecord`` (:func:`truth_record`), so that the reply keeps
  the single ``ArrayRecord`` Flower's strategies and ``fixedclipping_mod`` require, and the simulated server hands
  it to the harness and never to the protocol;
* ``BUFFERS``: the model's buffers (BatchNorm running statistics) as float64 bytes in a ``ConfigRecord``, in the
  model's ``named_buffers`` order: the server's averaged ones to the clients (``bn_stats = averaged``), each
  client's own back in its reply (read by the harness, stripped before a strategy sees the reply).
"""
from __future__ import annotations

import numpy as np
import torch
from flwr.app import Array, ArrayRecord, ConfigRecord

__all__ = ["BUFFERS", "PAYLOAD", "TRUTH", "buffers_record", "flat_record", "flatten_record", "payload_record", "read_payload", "read_truth",
           "read_buffers", "truth_record", "unflatten_like"]

PAYLOAD = "auditkit.payload"
TRUTH = "auditkit.truth"
BUFFERS = "auditkit.buffers"


def flat_record(flat: torch.Tensor) -> ArrayRecord:
    """One flat float32 vector as an ``ArrayRecord`` holding the single array ``flat``."""
    return ArrayRecord({"flat": Array(flat.detach().cpu().to(torch.float32).numpy())})


def flatten_record(record: ArrayRecord) -> torch.Tensor:
    """Every array of ``record``, in its order, concatenated into one float32 vector (a model's state as the
    flat update vector mechanisms encode)."""
    arrays = record.to_numpy_ndarrays()
    if not arrays:
        return torch.zeros(0)
    return torch.from_numpy(np.concatenate([np.asarray(a, dtype=np.float32).reshape(-1) for a in arrays]))


def unflatten_like(flat: torch.Tensor, like: ArrayRecord) -> ArrayRecord:
    """``flat`` cut into arrays of ``like``'s names, shapes and dtypes (the inverse of :func:`flatten_record`)."""
    out, start = {}, 0
    values = flat.detach().cpu().numpy()
    for name, array in like.items():
        reference = array.numpy()
        size = reference.size
        out[name] = Array(values[start:start + size].reshape(reference.shape).astype(reference.dtype))
        start += size
    if start != values.size:
        raise ValueError(f"a flat vector of {values.size} values does not fit a record of {start} values")
    return ArrayRecord(out)


def payload_record(payload: bytes, client: int, round_: int) -> ConfigRecord:
    """The ``PAYLOAD`` record of a client's encoded update."""
    return ConfigRecord({"payload": payload, "client": int(client), "round": int(round_)})


def read_payload(record: ConfigRecord) -> tuple[bytes, int, int]:
    """``(payload, client, round)`` of a ``PAYLOAD`` record."""
    return bytes(record["payload"]), int(record["client"]), int(record["round"])


def truth_record(update: torch.Tensor) -> ConfigRecord:
    """A simulated client's ``TRUTH`` record: its true update as float32 bytes."""
    return ConfigRecord({"update": update.detach().cpu().to(torch.float32).numpy().tobytes()})


def read_truth(record: ConfigRecord) -> torch.Tensor:
    """The true update of a :func:`truth_record` (float32)."""
    return torch.from_numpy(np.frombuffer(bytes(record["update"]), dtype=np.float32).copy())


def buffers_record(buffers: dict[str, torch.Tensor]) -> ConfigRecord:
    """A model's buffers as one float64 vector's bytes (a count such as ``num_batches_tracked`` is exact in it)."""
    flat = torch.cat([b.detach().cpu().to(torch.float64).reshape(-1) for b in buffers.values()])
    return ConfigRecord({"buffers": flat.numpy().tobytes()})


def read_buffers(record: ConfigRecord, like: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The buffers of a :func:`buffers_record`, shaped and typed as ``like`` (the model's ``named_buffers``)."""
    flat = torch.from_numpy(np.frombuffer(bytes(record["buffers"]), dtype=np.float64).copy())
    pieces = torch.split(flat, [b.numel() for b in like.values()])
    return {name: piece.reshape(b.shape).to(b.dtype) for (name, b), piece in zip(like.items(), pieces)}
