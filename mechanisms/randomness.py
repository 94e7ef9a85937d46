"""Keyed randomness: every random stream is named by the keys it serves, never by call order.

A stream is identified by a tuple of keys, e.g. ``(base_seed, client, round)`` for the per-message seed
and then ``(seed, "dither")`` for one purpose inside a message. ``derive_seed`` hashes the tuple with
SHA-256, so the seed is a pure function of the keys (counter-based: a stream's position in a run does not
matter, nothing carries over between calls) and distinct tuples give unrelated seeds unless SHA-256
collides. ``generator`` turns such a seed into a ``torch.Generator``.

Two kinds of stream:

* shared, keyed by ``(seed, purpose)``: the client and the server both know ``seed`` and regenerate the
  same values (subtractive dithers);
* private, keyed by ``("private", private_seed, seed)`` and the purpose: only the client knows
  ``private_seed`` (privacy noise); with ``private_seed=None`` a fresh 63-bit key is drawn from the OS
  for every call, so the noise is not reproducible at all.
"""

from __future__ import annotations

import hashlib
import secrets
from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from auditkit.mechanisms.base import Mechanism

__all__ = ["derive_seed", "generator", "private_generator", "reproducible", "shared_seed"]

# Domain separation: seeds derived here cannot coincide with hashes computed elsewhere for another use.
_DOMAIN = b"auditkit/mechanisms/derive_seed/v1"


def _encode_key(key: int | str) -> bytes:
    """Canonical, injective encoding of one key: type tag, 4-byte big-endian length, value bytes."""
    # bool is an int subclass; True == 1 would silently alias two different keys.
    if isinstance(key, bool) or not isinstance(key, (int, str)):
        raise TypeError(f"seed keys must be int or str, got {type(key).__name__}: {key!r}")
    if isinstance(key, int):
        body = key.to_bytes((key.bit_length() + 8) // 8, "big", signed=True)  # two's complement
        tag = b"i"
    else:
        body = key.encode("utf-8")
        tag = b"s"
    return tag + len(body).to_bytes(4, "big") + body


def derive_seed(*keys: int | str) -> int:
    """Seed in [0, 2**63) derived from ``keys`` by SHA-256.

    The keys (ints of any size, or strings) are encoded as type tag + length + bytes, concatenated after
    a fixed domain string, hashed, and the top 63 bits of the digest are returned. The encoding is
    injective, so ``derive_seed(1, 23)``, ``derive_seed(12, 3)`` and ``derive_seed("1", 23)`` differ.
    """
    if not keys:
        raise ValueError("derive_seed needs at least one key")
    digest = hashlib.sha256(_DOMAIN + b"".join(_encode_key(k) for k in keys)).digest()
    return int.from_bytes(digest[:8], "big") >> 1


def shared_seed(seed: int, client: int, round_: int) -> int:
    """The seed client ``client`` and the server share in round ``round_`` of a run keyed by ``seed`` (dithers,
    rejection draws): ``derive_seed(seed, "shared", client, round_)``."""
    return derive_seed(seed, "shared", client, round_)


def generator(seed: int, purpose: str, device: str | torch.device = "cpu") -> torch.Generator:
    """A fresh ``torch.Generator`` on ``device`` seeded with ``derive_seed(seed, purpose)``.

    CPU and CUDA generators produce different streams for the same seed: mechanisms draw shared
    randomness on the CPU so that encoder and decoder agree whatever device the update lives on.
    """
    g = torch.Generator(device=device)
    g.manual_seed(derive_seed(seed, purpose))
    return g


def private_generator(private_seed: int | None, seed: int, purpose: str) -> torch.Generator:
    """CPU generator for client-only randomness, keyed by ``(private_seed, seed, purpose)``.

    ``private_seed=None`` draws a new key from OS entropy on every call: repeated encodings of the same
    update with the same ``seed`` then get independent noise, which is what a privacy test needs.
    """
    key = secrets.randbits(63) if private_seed is None else private_seed
    return generator(derive_seed("private", key, seed), purpose)


# The reproducibility check's fixed seeds: any do, as long as both encodes share them.
_CHECK_SEED = derive_seed("auditkit/reproducibility-check", "seed")
_CHECK_PRIVATE_SEED = derive_seed("auditkit/reproducibility-check", "private_seed")


def reproducible(mechanism: Mechanism) -> bool:
    """Whether ``mechanism``'s output is determined by its seeds: two encodes of one input under the same ``seed``
    and ``private_seed`` give the same bytes (``to_bytes()``), and their decodes the same bits.

    A mechanism that draws its noise from torch's global generator (``torch.randn(n)`` without ``generator=``),
    NumPy's or Python's, or from a generator it keeps and advances between calls, fails it: its results differ
    from run to run (or with the order of its calls) however the run is seeded. Draw from
    ``private_generator(self.private_seed, seed, purpose)`` instead. The input is
    ``auditkit.mechanisms.registry.check_input(mechanism)`` (16 coordinates); a mechanism whose ``private_seed`` is None
    (fresh entropy on every call, by design) is checked as a copy with a fixed one. Costs two encodes and two
    decodes; the global generators' states are left as they were.
    """
    from auditkit.mechanisms.registry import check_input  # the registry imports this module

    checked = mechanism
    if mechanism.private_seed is None:
        checked = type(mechanism)(private_seed=_CHECK_PRIVATE_SEED, **mechanism.params)
    x = check_input(mechanism)
    with torch.random.fork_rng(devices=[]):  # a plugin drawing from the global generator must not move it
        first, second = checked.encode(x, _CHECK_SEED), checked.encode(x, _CHECK_SEED)
        if first.to_bytes() != second.to_bytes():
            return False
        return _bits(checked.decode(first, _CHECK_SEED)) == _bits(checked.decode(second, _CHECK_SEED))


def _bits(decoded: torch.Tensor) -> bytes:
    """The exact bits of a decoded update (NaN compares equal to itself here, unlike ``torch.equal``)."""
    return decoded.detach().cpu().contiguous().numpy().tobytes()
