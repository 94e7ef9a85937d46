"""``sdq``: scalar subtractive dithered quantization on a finite range (the compression baseline)."""

from __future__ import annotations

import struct
from typing import Self

import numpy as np
import torch

from mechanisms.base import Mechanism, as_update, choice, int_range, positive_float
from mechanisms.bitstream import decode_categorical, encode_categorical
from mechanisms.guarantee import PrivacyGuarantee
from mechanisms.message import MAX_LENGTH, Message
from mechanisms.randomness import generator
from mechanisms.registry import register

__all__ = ["SDQ", "SDQMessage"]


class SDQMessage(Message):
    """Quantizer indices of one update.

    Layout (little-endian): tag (uint8 = 2) | length n (uint32) | levels K (uint32) | overloads (uint32) |
    the n indices in [0, K) as a ``mechanisms.bitstream`` categorical stream (entropy-coded with the
    empirical frequency table, or fixed-width ceil(log2 K) bits each, whichever is smaller).
    """

    TAG = 2
    _HEADER = struct.Struct("<BIII")

    def __init__(self, indices: np.ndarray, levels: int, overloads: int) -> None:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.ndim != 1 or indices.size > MAX_LENGTH:
            raise ValueError(f"SDQMessage needs a 1-D array of at most {MAX_LENGTH} indices")
        if not 1 <= levels < 2**32:
            raise ValueError(f"SDQMessage: levels must be in 1..2**32 - 1, got {levels}")
        if indices.size and (indices.min() < 0 or indices.max() >= levels):
            raise ValueError(f"SDQMessage: indices must lie in [0, {levels})")
        if not 0 <= overloads <= indices.size:
            raise ValueError(f"SDQMessage: overloads must be in 0..{indices.size}, got {overloads}")
        self.indices = indices
        self.levels = levels
        self.overloads = overloads

    def __len__(self) -> int:
        return self.indices.size

    def _serialize(self) -> bytes:
        header = self._HEADER.pack(self.TAG, self.indices.size, self.levels, self.overloads)
        return header + encode_categorical(self.indices, self.levels)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, n, levels, overloads = cls._check_tag(data, cls._HEADER)
        indices = decode_categorical(data[cls._HEADER.size :], n)
        message = cls(indices, levels, overloads)  # re-validates ranges against the header
        message._wire = bytes(data)
        return message


@register
class SDQ(Mechanism):
    """Scalar subtractive dithered quantization with K levels covering [-support, support).

    Levels: K = 2^bits (``compat="none"``) or K = 2^bits + 1 (``compat="jopeq-code"``, the JoPEQ
    reference code's mid-tread quantizer: delta = 2 gamma / (2^R + 1), outputs clamped to
    +-(gamma - delta / 2)). In both cases step = 2 * support / K and level j (j = 0 .. K-1) sits at
    c_j = -support + step * (j + 1/2), so the cells [c_j - step/2, c_j + step/2) tile [-support, support);
    with K odd the middle level is 0.

    Encoder: dither V ~ Unif[-step/2, step/2) per coordinate from the shared stream (seed, "dither");
    send j = floor((x - V + support) / step) clamped to 0 .. K-1, i.e. the index of Q(x - V).
    Decoder: x_hat = c_j + V = Q(x - V) + V (JoPEQ writes the same map as Q(x + d) - d with d = -V).
    When x - V lies in [-support, support) the error x_hat - x = Q(x - V) - (x - V) is Unif(-step/2, step/2]
    and independent of x (Schuchman 1964; Gray & Stockham, IEEE Trans. IT 1993). Otherwise the index is
    clamped to the end level (an overload) and the error is larger and depends on x; overloads are
    counted in the message header.
    """

    name = "sdq"
    summary = "scalar subtractive dithered quantization, entropy-coded indices (compression, no privacy)"
    params_spec = (
        int_range("bits", 1, 16, 8, "bit rate R: 2^R levels (2^R + 1 with compat=jopeq-code)"),
        positive_float("support", 1.0, "range radius gamma: levels cover [-support, support]"),
        choice("compat", ("none", "jopeq-code"), "none", "jopeq-code: the reference code's 2^R + 1 levels"),
    )
    message_type = SDQMessage

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        extra_level = 1 if self.params["compat"] == "jopeq-code" else 0
        self.levels: int = 2 ** self.params["bits"] + extra_level
        self.step: float = 2 * self.params["support"] / self.levels
        self.last_overloads: int | None = None  # overloads of the latest encode, for callers of m(x, seed)

    def dither(self, n: int, seed: int) -> torch.Tensor:
        """The shared dither V ~ Unif[-step/2, step/2)^n (float64) that encoder and decoder both draw."""
        u = torch.rand(n, generator=generator(seed, "dither"), dtype=torch.float64)
        return (u - 0.5) * self.step

    def encode(self, x: torch.Tensor, seed: int) -> SDQMessage:
        x = as_update(x)
        cell = torch.floor((x - self.dither(x.numel(), seed) + self.params["support"]) / self.step)
        overloads = int(((cell < 0) | (cell >= self.levels)).sum())
        indices = cell.clamp(0, self.levels - 1).to(torch.int64).numpy()
        self.last_overloads = overloads
        return SDQMessage(indices, self.levels, overloads)

    def decode(self, enc: SDQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if enc.levels != self.levels:
            raise ValueError(f"message has {enc.levels} levels, this sdq configuration uses {self.levels}")
        indices = torch.from_numpy(enc.indices).to(torch.float64)
        levels = -self.params["support"] + self.step * (indices + 0.5)
        return (levels + self.dither(len(enc), seed)).to(torch.float32)

    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee.no_privacy(
            "compression baseline: with the shared dither the server recovers x up to an error bounded by "
            "step/2 per coordinate; quantization alone gives no differential privacy",
        )
