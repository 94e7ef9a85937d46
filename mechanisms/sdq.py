"""Subtractive dithered quantization on a finite range: ``sdq`` (scalar, Z) and ``sdq-hex`` (the hexagonal A2).

Both are compression baselines without privacy. The lattice arithmetic (nearest point, dither, the finite
coset range, overloads) is in ``auditkit.mechanisms.lattice``; this module adds the parameters, the shared dither
stream (seed, "dither") and the messages.
"""

from __future__ import annotations

import struct
from typing import ClassVar, Self

import numpy as np
import torch

from auditkit.mechanisms.base import Mechanism, as_update, choice, int_range, positive_float
from auditkit.mechanisms.bitstream import decode_categorical, encode_categorical
from auditkit.mechanisms.capabilities import AuditSetting, Tiling
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.lattice import HexagonalLattice, IntegerLattice, Lattice, from_blocks, sdq_decode, sdq_encode, to_blocks
from auditkit.mechanisms.message import MAX_LENGTH, Message
from auditkit.mechanisms.randomness import generator
from auditkit.mechanisms.registry import register

__all__ = ["SDQ", "HexagonalSDQ", "SDQMessage", "LatticeSDQMessage"]


class SDQMessage(Message):
    """Quantizer indices of one update.

    Layout (little-endian): tag (uint8 = 2) | length n (uint32) | levels K (uint32) | overloads (uint32) |
    the n indices in [0, K) as a ``auditkit.mechanisms.bitstream`` categorical stream (entropy-coded with the
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


class LatticeSDQMessage(Message):
    """Finite-range lattice indices of one update split into blocks of ``dimension`` coordinates.

    Layout (little-endian): tag (uint8 = 20) | length n (uint32, coordinates) | dimension L (uint8) |
    levels K (uint32) | overloads (uint32, blocks) | ceil(n / L) block symbols as a ``auditkit.mechanisms.bitstream``
    categorical stream over the alphabet K^L. A block's indices (j_1, ..., j_L) in {0..K-1}^L are coded as
    ONE symbol j_1 K^(L-1) + ... + j_L, so the entropy coder sees their joint frequencies (the basis
    coordinates of a hexagonal lattice are correlated). K^L must not exceed 2^32.
    """

    TAG = 20
    _HEADER = struct.Struct("<BIBII")

    def __init__(self, indices: np.ndarray, length: int, levels: int, overloads: int) -> None:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.ndim != 2 or not 1 <= indices.shape[1] < 256:
            raise ValueError("LatticeSDQMessage needs a 2-D array of blocks with 1..255 columns")
        blocks, dimension = indices.shape
        if not 0 <= length <= MAX_LENGTH or blocks != -(-length // dimension):
            raise ValueError(f"LatticeSDQMessage: {blocks} blocks of {dimension} do not hold {length} coordinates")
        if not 1 <= levels < 2**32 or levels**dimension > 2**32:
            raise ValueError(f"LatticeSDQMessage: need 1 <= levels^dimension <= 2**32, got {levels}^{dimension}")
        if indices.size and (indices.min() < 0 or indices.max() >= levels):
            raise ValueError(f"LatticeSDQMessage: indices must lie in [0, {levels})")
        if not 0 <= overloads <= blocks:
            raise ValueError(f"LatticeSDQMessage: overloads must be in 0..{blocks}, got {overloads}")
        self.indices = indices
        self.length = length
        self.levels = levels
        self.overloads = overloads

    @property
    def dimension(self) -> int:
        return self.indices.shape[1]

    def __len__(self) -> int:
        return self.length

    def _serialize(self) -> bytes:
        header = self._HEADER.pack(self.TAG, self.length, self.dimension, self.levels, self.overloads)
        weights = self.levels ** np.arange(self.dimension - 1, -1, -1, dtype=np.int64)
        return header + encode_categorical(self.indices @ weights, self.levels**self.dimension)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, length, dimension, levels, overloads = cls._check_tag(data, cls._HEADER)
        if dimension == 0 or levels == 0 or levels**dimension > 2**32:
            raise ValueError(f"LatticeSDQMessage: invalid dimension {dimension} or levels {levels}")
        symbols = decode_categorical(data[cls._HEADER.size :], -(-length // dimension))
        if symbols.size and symbols.max() >= levels**dimension:
            raise ValueError(f"LatticeSDQMessage: block symbol outside the alphabet {levels}^{dimension}")
        weights = levels ** np.arange(dimension - 1, -1, -1, dtype=np.int64)
        indices = (symbols[:, None] // weights) % levels
        message = cls(indices, length, levels, overloads)
        message._wire = bytes(data)
        return message


class _FiniteSDQ(Mechanism):
    """SDQ on ``lattice`` with K levels per basis coordinate and step Delta = 2 support / K.

    K = 2^bits (``compat="none"``) or 2^bits + 1 (``compat="jopeq-code"``, the JoPEQ reference code's
    mid-tread quantizer, where 0 is a level). The points are Delta G (j - (K-1)/2), j in {0..K-1}^L (see
    ``auditkit.mechanisms.lattice``); for L = 1 they tile [-support, support). The dither V ~ Unif(Delta P0) comes
    from the shared stream (seed, "dither"); without overload the error x_hat - x is Unif(Delta P0),
    independent of x (Zamir & Feder 1992; JoPEQ Theorem II.5).

    The block-level methods (``block_dither``, ``quantize``, ``reconstruct``) are what JoPEQ builds on.
    """

    lattice: ClassVar[Lattice]

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        extra_level = 1 if self.params["compat"] == "jopeq-code" else 0
        self.levels: int = 2 ** self.params["bits"] + extra_level
        self.step: float = 2 * self.params["support"] / self.levels
        self.last_overloads: int | None = None  # overloads of the latest encode, for callers of m(x, seed)

    @property
    def error_covariance(self) -> torch.Tensor:
        """Delta^2 Cov(P0): the covariance of the error of one block without overload."""
        return self.step**2 * self.lattice.covariance

    def block_dither(self, blocks: int, seed: int) -> torch.Tensor:
        """The shared dither V ~ Unif(Delta P0) (blocks x L, float64) that encoder and decoder both draw."""
        return self.step * self.lattice.dither(blocks, generator(seed, "dither"))

    def quantize(self, y: torch.Tensor, seed: int) -> tuple[torch.Tensor, int]:
        """Indices of Q(y - V) for the blocks ``y`` (blocks x L, float64) and the number of overloaded blocks."""
        return sdq_encode(self.lattice, y, self.block_dither(y.shape[0], seed), self.step, self.levels)

    def reconstruct(self, indices: torch.Tensor, seed: int) -> torch.Tensor:
        """Q(y - V) + V (blocks x L, float64) from the indices of ``quantize``."""
        return sdq_decode(self.lattice, indices, self.block_dither(indices.shape[0], seed), self.step, self.levels)

    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee.no_privacy(
            "compression baseline: with the shared dither the server recovers x up to an error inside one "
            "quantizer cell; quantization alone gives no differential privacy",
        )

    def tiling(self) -> Tiling:
        block = self.lattice.dimension
        return Tiling(block=block, why=f"shared dither iid per block of {block}, overloads counted per block")


_COMPAT = choice("compat", ("none", "jopeq-code"), "none", "jopeq-code: the reference code's 2^R + 1 levels")
_SUPPORT = positive_float("support", 1.0, "range radius gamma: levels cover [-support, support]")


@register
class SDQ(_FiniteSDQ):
    """Scalar SDQ (the lattice Z) with K levels covering [-support, support).

    Level j (j = 0 .. K-1) sits at c_j = -support + Delta (j + 1/2); with K odd the middle level is 0
    (the JoPEQ code: Delta = 2 gamma / (2^R + 1), outputs clamped to +-(gamma - Delta/2)).
    Encoder: V ~ Unif[-Delta/2, Delta/2) per coordinate; send j, the index of Q(x - V), clamped to 0..K-1.
    Decoder: x_hat = c_j + V. When x - V lies in [-support, support) the error is Unif(-Delta/2, Delta/2]
    and independent of x (Schuchman 1964; Gray & Stockham, IEEE Trans. IT 1993); otherwise the index is
    clamped to an end level (an overload, counted in the message header) and the error depends on x.
    """

    name = "sdq"
    summary = "scalar subtractive dithered quantization, entropy-coded indices (compression, no privacy)"
    params_spec = (
        int_range("bits", 1, 16, 8, "bit rate R: 2^R levels (2^R + 1 with compat=jopeq-code)"),
        _SUPPORT,
        _COMPAT,
    )
    message_type = SDQMessage
    lattice = IntegerLattice(1)

    def audit_setting(self) -> AuditSetting:
        support, step = self.params["support"], self.step
        boundary = -support + round(support / step) * step  # the cell boundary nearest 0
        return AuditSetting(
            1, support, "l2", support / 2, 1, quantizer_step=step, quantizer_offset=boundary,
            note="no claim: pairs in one cell and across a cell boundary",
        )  # fmt: skip

    def dither(self, n: int, seed: int) -> torch.Tensor:
        """The shared dither V ~ Unif[-Delta/2, Delta/2)^n (float64, 1-D) of ``n`` coordinates."""
        return self.block_dither(n, seed).view(-1)

    def encode(self, x: torch.Tensor, seed: int) -> SDQMessage:
        indices, overloads = self.quantize(as_update(x).view(-1, 1), seed)
        self.last_overloads = overloads
        return SDQMessage(indices.view(-1).numpy(), self.levels, overloads)

    def decode(self, enc: SDQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if enc.levels != self.levels:
            raise ValueError(f"message has {enc.levels} levels, this sdq configuration uses {self.levels}")
        return self.reconstruct(torch.from_numpy(enc.indices).view(-1, 1), seed).view(-1).to(torch.float32)


@register
class HexagonalSDQ(_FiniteSDQ):
    """SDQ on the hexagonal lattice A2 (JoPEQ's L = 2), contiguous pairs of coordinates, K^2 points.

    The update is cut into pairs (the last one zero-padded); each pair is quantized to the nearest point of
    Delta A2 (``HexagonalLattice``: the generator of the JoPEQ reference code, whose range Delta G (j - o)
    with K = 2^R + 1 is exactly the code's point set) with a dither uniform over the Voronoi hexagon. The
    code rounds in the basis instead (a parallelogram cell); the nearest point gives the hexagon, whose
    per-coordinate error variance (5/54) Delta^2 is 17% below the parallelogram's (1/9) Delta^2 at the same
    rate. The range is the parallelogram Delta G [-(K-1)/2, (K-1)/2]^2, whose inscribed disc has radius
    support - Delta/2; as |V| <= 2 Delta/3 and |Q(y) - y| <= 2 Delta/3 (the hexagon's circumradius), an
    input of norm <= support - 11 Delta/6 never overloads. Rate: ceil(log2 K^2)/2 bits per coordinate at fixed
    width (R for K = 2^R), less after entropy coding (one symbol per pair, see ``LatticeSDQMessage``).
    """

    name = "sdq-hex"
    summary = "subtractive dithered quantization on the hexagonal lattice A2 (pairs), entropy-coded (no privacy)"
    params_spec = (
        int_range("bits", 1, 12, 8, "bit rate R per coordinate: 2^R levels per basis coordinate (2^R + 1 with compat)"),
        positive_float("support", 1.0, "range radius gamma: the range contains the disc of radius ~gamma"),
        _COMPAT,
    )
    message_type = LatticeSDQMessage
    lattice = HexagonalLattice()

    def audit_setting(self) -> AuditSetting:
        return AuditSetting(2, self.params["support"], "l2", self.params["support"] / 2, 2, note="no claim")

    def encode(self, x: torch.Tensor, seed: int) -> LatticeSDQMessage:
        x = as_update(x)
        indices, overloads = self.quantize(to_blocks(x, 2), seed)
        self.last_overloads = overloads
        return LatticeSDQMessage(indices.numpy(), x.numel(), self.levels, overloads)

    def decode(self, enc: LatticeSDQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if (enc.dimension, enc.levels) != (2, self.levels):
            raise ValueError(
                f"message has {enc.levels} levels in dimension {enc.dimension}, "
                f"this sdq-hex configuration uses {self.levels} in dimension 2"
            )
        blocks = self.reconstruct(torch.from_numpy(enc.indices), seed)
        return from_blocks(blocks, len(enc)).to(torch.float32)
