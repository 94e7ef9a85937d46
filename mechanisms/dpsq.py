"""The differentially private stochastic quantizer Q_{b, eps1} (``dpsq``) and its LaplaceSQ baseline
(``laplace-sq``), from "Privacy-Preserving Quantized Federated Learning with Diverse Precision" (Nguyen,
Hashemi, Perrins, Vorobyov, Love, Kim; paper 001), Section II.

Grid (Sec. II-B): 2^b levels q_j = lo + (j - 1) Delta, j = 1..2^b, Delta = (hi - lo) / (2^b - 1). An input a
(clamped to [lo, hi]) lies in the cell [q_i, q_{i+1}) (a = hi belongs to the last cell). The paper's device
l1-clips its update to C and quantizes on [-C, C]: here ``support`` is C, the literal range [-support, support], and
``clip`` the l1 clipping norm (0: the same C, as in the paper).

* ``dpsq`` (Lemma 3, eq. 6): binary randomized response inside the cell: the nearer endpoint with probability
  e^eps1 / (e^eps1 + 1), the farther with 1 / (e^eps1 + 1) (a tie counts the lower level as nearer).
  Distortion eq. (7). The ratio bound e^eps1 of eq. (5b) holds for two inputs in the SAME cell only: inputs in
  different cells (b >= 2) have different output supports, so the worst case over the range is eps = infinity.
* ``laplace-sq`` (eq. 3): unbiased stochastic rounding on the same grid, P(q_i) = (q_{i+1} - a) / Delta
  (QSGD, the paper's [31]), then Laplace(rho / eps1) per coordinate (Lemma 2); its distortion is the
  rounding error plus 2 rho^2 / eps1^2 (Remark 1), unbounded as eps1 -> 0.

Both act coordinate by coordinate with independent client-private randomness (``private_seed``, ``seed``).
The paper's per-update claim is d * eps1 by sequential composition over the d coordinates (Lemma 1, eq. 10).
"""

from __future__ import annotations

import math
import struct
from typing import Self

import numpy as np
import torch
from scipy.special import expit

from auditkit.mechanisms.additive import clip_l1, laplace_noise
from auditkit.mechanisms.base import Mechanism, as_update, choice, int_range, positive_float, zero_or_above
from auditkit.mechanisms.capabilities import AuditSetting, Tiling, rescaled_clip
from auditkit.mechanisms.bitstream import decode_categorical, encode_categorical
from auditkit.mechanisms.guarantee import REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.message import MAX_LENGTH, FloatMessage, Message
from auditkit.mechanisms.randomness import private_generator
from auditkit.mechanisms.registry import register

__all__ = [
    "DPSQ",
    "LaplaceSQ",
    "DPSQMessage",
    "dpsq_distortion",
    "dpsq_cell_mean_distortion",
    "dpsq_max_distortion",
    "dpsq_expected_distortion",
    "laplace_sq_expected_distortion",
]


def _step(bits: int, low: float, high: float) -> float:
    """Delta = (high - low) / (2^b - 1): the spacing of 2^b levels with both range ends as levels."""
    return (high - low) / (2**bits - 1)


def dpsq_distortion(x_dist: float | np.ndarray, step: float, eps: float) -> float | np.ndarray:
    """E|Q_{b,eps1}(a) - a|^2 for an input at distance x from its nearest level (eq. 7):

        E = (e^eps1 x^2 + (Delta - x)^2) / (e^eps1 + 1),   x in [0, Delta / 2].

    Written with the probabilities expit(eps1) = e^eps1/(e^eps1 + 1) and expit(-eps1) so that no e^eps1 overflows.
    """
    x = np.asarray(x_dist, dtype=np.float64)
    return expit(eps) * x**2 + expit(-eps) * (step - x) ** 2


def dpsq_cell_mean_distortion(step: float, eps: float) -> float:
    """Mean of eq. (7) for a uniform in one cell, x ~ U[0, Delta/2]:

        (2 / Delta) int_0^{Delta/2} E(x) dx = Delta^2 (e^eps1 + 7) / (12 (e^eps1 + 1)).
    """
    return float(step**2 * (expit(eps) + 7 * expit(-eps)) / 12)


def dpsq_max_distortion(step: float, eps: float) -> float:
    """Supremum of eq. (7) over a cell: E(x) is convex in x, so the maximum is at x = 0 or x = Delta/2:

        sup_x E = Delta^2 max(1 / (e^eps1 + 1), 1/4)   (1/(e^eps1 + 1) wins for eps1 < ln 3).
    """
    return step**2 * max(float(expit(-eps)), 0.25)


def dpsq_expected_distortion(bits: int, eps: float, low: float, high: float) -> float:
    """Expected distortion per coordinate of Q_{b,eps1} on the grid of [low, high] for a ~ U[low, high]
    (Sec. V-A, Fig. 2a): the 2^b - 1 cells are congruent, so the mean over the range is the cell mean
    Delta^2 (e^eps1 + 7) / (12 (e^eps1 + 1)) with Delta = (high - low) / (2^b - 1).
    """
    return dpsq_cell_mean_distortion(_step(bits, low, high), eps)


def laplace_sq_expected_distortion(bits: int, eps: float, rho: float, low: float, high: float) -> float:
    """Expected distortion per coordinate of LaplaceSQ (eq. 3, Remark 1) for a ~ U[low, high], grid on [low, high]:

        E|L(a) - a|^2 = E|Q_b(a) - a|^2 + 2 rho^2 / eps1^2 = Delta^2 / 6 + 2 rho^2 / eps1^2,

    the rounding error of unbiased stochastic rounding at x from q_i being x (Delta - x), whose mean over a
    cell is Delta^2 / 6, and the Laplace(rho / eps1) variance 2 (rho / eps1)^2 (independent of the rounding).
    """
    return _step(bits, low, high) ** 2 / 6 + 2 * (rho / eps) ** 2


class DPSQMessage(Message):
    """Level indices of one update on the grid of [lo, hi] with 2^bits levels.

    Layout (little-endian): tag (uint8 = 30) | length n (uint32) | bits b (uint8, 1..16) | lo (float32) |
    hi (float32) | the n indices in [0, 2^b) as a ``auditkit.mechanisms.bitstream`` categorical stream (entropy-coded
    with the empirical frequency table, or fixed-width b bits each, whichever is smaller).
    """

    TAG = 30
    _HEADER = struct.Struct("<BIBff")

    def __init__(self, indices: np.ndarray, bits: int, lo: float, hi: float) -> None:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.ndim != 1 or indices.size > MAX_LENGTH:
            raise ValueError(f"DPSQMessage needs a 1-D array of at most {MAX_LENGTH} indices")
        if not 1 <= bits <= 16:
            raise ValueError(f"DPSQMessage: bits must be in 1..16, got {bits}")
        if not all(math.isfinite(v) and float(np.float32(v)) == v for v in (lo, hi)) or lo > hi:
            raise ValueError(f"DPSQMessage: lo <= hi must be finite float32 values, got {lo!r}, {hi!r}")
        if indices.size and (indices.min() < 0 or indices.max() >= 2**bits):
            raise ValueError(f"DPSQMessage: indices must lie in [0, {2**bits})")
        self.indices = indices
        self.bits = bits
        self.lo = lo
        self.hi = hi

    def __len__(self) -> int:
        return self.indices.size

    def _serialize(self) -> bytes:
        header = self._HEADER.pack(self.TAG, self.indices.size, self.bits, self.lo, self.hi)
        return header + encode_categorical(self.indices, 2**self.bits)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, n, bits, lo, hi = cls._check_tag(data, cls._HEADER)
        if not 1 <= bits <= 16:
            raise ValueError(f"DPSQMessage: bits must be in 1..16, got {bits}")
        indices = decode_categorical(data[cls._HEADER.size :], n)
        message = cls(indices, bits, lo, hi)  # re-validates the range and the indices
        message._wire = bytes(data)
        return message


def _cells(a: torch.Tensor, lo: float, hi: float, levels: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Cell index i in 0..levels-2 of each a in [lo, hi] (a = hi in the last cell) and the position
    (a - q_i) / Delta in [0, 1] inside it. A degenerate range lo = hi puts every input at q_0."""
    step = (hi - lo) / (levels - 1)
    if step == 0:
        zeros = torch.zeros_like(a)
        return zeros.to(torch.int64), zeros
    t = (a - lo) / step
    cell = torch.floor(t).clamp(0, levels - 2)
    return cell.to(torch.int64), (t - cell).clamp(0.0, 1.0)


def _outward_float32(lo: float, hi: float) -> tuple[float, float]:
    """[lo, hi] widened to float32 ends, so the range sent in the message still contains every value."""
    lo32, hi32 = np.float32(lo), np.float32(hi)
    # Compare as Python floats: NumPy would compare a float32 with a Python float in float32 (NEP 50).
    if float(lo32) > lo:
        lo32 = np.nextafter(lo32, np.float32(-np.inf))
    if float(hi32) < hi:
        hi32 = np.nextafter(hi32, np.float32(np.inf))
    if not (np.isfinite(lo32) and np.isfinite(hi32)):
        raise ValueError(f"the range [{lo:g}, {hi:g}] of the update does not fit float32")
    return float(lo32), float(hi32)


_BITS = int_range("bits", 1, 16, 4, "b: 2^b quantization levels on the range")
_EPS = positive_float("eps", 0.1, "eps1: the per-coordinate privacy parameter")
_SUPPORT = positive_float("support", 10.0, "C: the literal quantizer range is [-support, support]")
_CLIP = zero_or_above("clip", 0, "l1 clipping norm of the update; 0: C, the support (the paper clips to C)")
_CLIP_NORM = choice(
    "clip_norm", ("l1", "none"), "l1", "l1: rescale the update into the l1 ball of radius clip (paper); none: do not"
)
_PER_UPDATE = (
    "per-coordinate claim: the whole d-coordinate update is d*eps1-DP by sequential composition over its "
    "coordinates (paper Lemma 1, eq. 10)"
)
_NO_ROUNDS = "one round only: the paper does no accounting across rounds (composition, sampling amplification)"
_PRIVATE_COINS = "the server does not know private_seed (None: OS entropy), so it cannot regenerate the coins"
_TORCH_COINS = (
    "the coins are drawn in floating point from torch's CPU generator (Mersenne Twister): neither an exact "
    "sampler nor a cryptographic one"
)


class _GridQuantizer(Mechanism):
    """Clip, then quantize each coordinate on the 2^b-level grid of [-C, C]; the subclasses pick the rounding.

    Audit: the coins are iid per coordinate and B copies have one copy's grid, so copies tile, the l1 clip
    rescaled to B clip for B copies (``rescaled_clip``). Its round protocol is DP-SQ's device groups
    (``auditkit.mechanisms.dpsq_groups``, with a ``[groups]`` table): group m creates the mechanism with ``bits`` = b_m.
    """

    protocol = "device-groups"
    reference_params = {"eps": 1.0}  # the default eps1 = 0.1 raised to 1, so that a cell-local excess would show

    @property
    def clip_norm(self) -> str | None:  # type: ignore[override]
        return None if self.params["clip_norm"] == "none" else "l1"

    @property
    def levels(self) -> int:
        return 2 ** self.params["bits"]

    @property
    def l1_clip(self) -> float:
        """The l1 clipping norm in force: ``clip``, or the support C when it is 0."""
        return self.params["clip"] or self.params["support"]

    @property
    def range_bound(self) -> float:
        """C: the literal quantizer range is [-C, C]."""
        return self.params["support"]

    @property
    def cell_step(self) -> float:
        """Delta = 2C / (2^b - 1): the cell width of the literal range [-C, C]."""
        return _step(self.params["bits"], -self.params["support"], self.params["support"])

    @property
    def added_noise_variance(self) -> float:
        """Per-coordinate variance of noise added after the rounding (0: none)."""
        return 0.0

    def clip_update(self, x: torch.Tensor) -> torch.Tensor:
        """The float64 vector that is quantized: l1-rescaled into radius ``clip`` (clip_norm="l1") or not, then
        clamped to the literal range [-C, C] (a no-op after the l1 rescaling when clip <= C, up to rounding)."""
        x = as_update(x)
        if self.params["clip_norm"] == "l1":
            x = clip_l1(x, self.l1_clip)
        return x.clamp(-self.params["support"], self.params["support"])

    def tiling(self) -> Tiling:
        """Copies tile with block 1: the coins are iid per coordinate, and the grid is the same for B copies as for
        one -- the literal [-C, C] is fixed, and the adaptive [min v, max v] of B copies laid end to end is the
        range of one copy (the l1 clip of B copies rescaled to B clip scales every copy as one call would)."""
        grid = "fixed grid" if self.params.get("range", "literal") == "literal" else "the range [min v, max v] of B copies is one copy's"
        if self.params["clip_norm"] == "none":
            return Tiling(block=1, why=f"{grid}; per-coordinate clamp and private coins iid per coordinate")
        return Tiling(
            block=1, for_copies=rescaled_clip(self, 1, clip=self.l1_clip),
            why=f"{grid}; private coins iid per coordinate; the l1 clip of B copies is rescaled to B clip",
        )  # fmt: skip

    def _cell_local_setting(self) -> AuditSetting:
        step = self.cell_step
        return AuditSetting(
            1, step / 2, "l1", step / 4, 1,
            note="cell-local claim: one coordinate, both values in the central cell (cross-cell: adaptive test)",
        )  # fmt: skip


@register
class DPSQ(_GridQuantizer):
    """Q_{b,eps1} (paper eq. 6): per coordinate, binary randomized response between the two ends of its cell.

    range="literal" (paper): the grid of [-C, C]. range="adaptive": the grid of [min v, max v] of the clipped
    update v (widened to float32 and sent in the message) -- side information outside the claim; it exists
    because with the literal range and a small update every coordinate falls in the central cell, where the
    output is a +-Delta/2 coin nearly independent of the input at the paper's eps1 = 1e-6.
    """

    name = "dpsq"
    summary = "DP stochastic quantizer: randomized response between the ends of each coordinate's cell (paper 001)"
    params_spec = (
        _BITS,
        _EPS,
        _SUPPORT,
        _CLIP,
        _CLIP_NORM,
        choice(
            "range", ("literal", "adaptive"), "literal",
            "literal: levels on [-C, C] (paper); adaptive: on [min v, max v], sent as side information",
        ),
    )  # fmt: skip
    message_type = DPSQMessage

    def clip_update(self, x: torch.Tensor) -> torch.Tensor:
        """The float64 vector that is quantized; with range="adaptive" it is not clamped (the range covers it)."""
        if self.params["range"] == "literal":
            return super().clip_update(x)
        x = as_update(x)
        return clip_l1(x, self.l1_clip) if self.params["clip_norm"] == "l1" else x

    def audit_setting(self) -> AuditSetting:
        """b >= 2: the claim is eps1 per coordinate for two values of one cell (dpsq.md); the pairs -Delta/4 vs
        +Delta/4 and 0 vs Delta/4 lie in the central cell [-Delta/2, Delta/2) on both sides of its midpoint (the
        nearer levels differ: the ratio is exactly e^eps1); pairs across cells are the adaptive test
        ``dpsq_cross_cell``. b = 1: one cell, the claim covers the whole range."""
        if self.params["bits"] >= 2:
            return self._cell_local_setting()
        return AuditSetting.clipped(self.params["support"], "l1", 1)

    @property
    def near_probability(self) -> float:
        """e^eps1 / (e^eps1 + 1): the probability of the nearer level (eq. 6a)."""
        return float(expit(self.params["eps"]))

    def _range(self, v: torch.Tensor) -> tuple[float, float]:
        if self.params["range"] == "literal":
            return -self.params["support"], self.params["support"]
        if v.numel() == 0:
            return 0.0, 0.0
        return _outward_float32(v.min().item(), v.max().item())

    def encode(self, x: torch.Tensor, seed: int) -> DPSQMessage:
        v = self.clip_update(x)
        lo, hi = self._range(v)
        cell, position = _cells(v, lo, hi, self.levels)
        upper_is_nearer = position > 0.5  # a tie (position 1/2) counts the lower level as nearer
        coins = torch.rand(v.numel(), generator=private_generator(self.private_seed, seed, "quantizer"),
                           dtype=torch.float64)  # fmt: skip
        keep_nearer = coins < self.near_probability
        indices = cell + (upper_is_nearer == keep_nearer).to(torch.int64)
        # The adaptive ends are float32 already; the literal ones are sent rounded and checked by decode.
        return DPSQMessage(indices.numpy(), self.params["bits"], float(np.float32(lo)), float(np.float32(hi)))

    def decode(self, enc: DPSQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if enc.bits != self.params["bits"]:
            raise ValueError(f"message has {enc.bits} bits, this dpsq configuration uses {self.params['bits']}")
        if self.params["range"] == "literal":
            lo, hi = -self.params["support"], self.params["support"]
            if (enc.lo, enc.hi) != (float(np.float32(lo)), float(np.float32(hi))):
                raise ValueError(f"message range [{enc.lo:g}, {enc.hi:g}] is not this configuration's [{lo:g}, {hi:g}]")
        else:
            lo, hi = enc.lo, enc.hi
        step = (hi - lo) / (self.levels - 1)
        return (lo + step * torch.from_numpy(enc.indices).to(torch.float64)).to(torch.float32)

    def guarantee(self) -> PrivacyGuarantee:
        bits, eps, support = self.params["bits"], self.params["eps"], self.params["support"]
        adaptive = self.params["range"] == "adaptive"
        caveats = [_PER_UPDATE, _NO_ROUNDS, _TORCH_COINS]
        flags: set[str] = set()
        if bits >= 2:
            unit = "one coordinate whose two values lie in the same quantizer cell"
            flags |= {"cell-local", "cross-cell-infinite"}
            caveats.insert(0, (
                "inputs in different cells have different output supports (each reaches only the two ends of its "
                "own cell), so the worst-case eps over the whole range is infinite for b >= 2; the ratio bound "
                "e^eps1 of paper eq. (5b) holds only for two inputs in the same cell"
            ))  # fmt: skip
        else:
            unit = "one coordinate (any two values in the range)"
        if adaptive:
            sensitivity = "randomized response in one cell of the data-dependent range [min v, max v]"
            flags.add("side-information")
            caveats.insert(0, (
                "range=adaptive: the range ends min v and max v of the clipped update are sent in clear (float32) "
                "and are not covered by the claim; the cells, and so which inputs count as neighbours, depend "
                "on the data"
            ))  # fmt: skip
        else:
            sensitivity = (
                f"randomized response in one cell, Delta = 2C/(2^b - 1) = {self.cell_step:.4g} "
                f"on [-{support:g}, {support:g}]"
            )
        return PrivacyGuarantee(
            epsilon=eps,
            delta=0.0,
            relation=REPLACE_ONE,
            unit=unit,
            scope="one round",
            sensitivity=sensitivity,
            assumptions=(
                f"nearer level with probability e^eps1/(e^eps1 + 1) = {self.near_probability:.6g}, independent "
                "across coordinates (paper eq. 6)",
                _PRIVATE_COINS,
            ),
            caveats=tuple(caveats),
            flags=flags,
        )


@register
class LaplaceSQ(_GridQuantizer):
    """LaplaceSQ (paper eq. 3): unbiased stochastic rounding on the 2^b-level grid of [-C, C], then
    Laplace(rho / eps1) noise per coordinate; sends the float32 values.

    rho = 0 means the range width 2C: any two values of a coordinate round to levels at most 2C apart, so
    each coordinate is eps1-DP over the whole range (Lemma 2). A smaller rho (e.g. Delta, which matches the
    cell-local notion of ``dpsq``) claims eps1 only for values whose levels are at most rho apart; over the
    whole range the per-coordinate eps is eps1 * 2C / rho (attained by -C against C).
    """

    name = "laplace-sq"
    summary = "LaplaceSQ: unbiased stochastic rounding on 2^b levels + Laplace(rho/eps1) noise (paper 001 baseline)"
    params_spec = (
        _BITS,
        _EPS,
        _SUPPORT,
        _CLIP,
        _CLIP_NORM,
        zero_or_above("rho", 0, "Laplace sensitivity rho; 0: the range width 2C (DP on the whole range)"),
    )
    message_type = FloatMessage

    @property
    def rho(self) -> float:
        """The sensitivity the noise is calibrated to: the ``rho`` parameter, or 2C when it is 0."""
        return self.params["rho"] or 2 * self.params["support"]

    @property
    def noise_scale(self) -> float:
        """Laplace scale rho / eps1 (variance 2 rho^2 / eps1^2)."""
        return self.rho / self.params["eps"]

    @property
    def added_noise_variance(self) -> float:
        """The Laplace noise's variance 2 (rho / eps1)^2 per coordinate."""
        return 2 * self.noise_scale**2

    def whole_range_epsilon(self) -> float:
        """Per-coordinate eps over the whole range [-C, C]: eps1 * max(1, 2C / rho)."""
        return self.params["eps"] * max(1.0, 2 * self.params["support"] / self.rho)

    def audit_setting(self) -> AuditSetting:
        """rho < 2C: the claim is cell-local (levels at most rho apart), tested in the central cell as ``dpsq``'s;
        rho >= 2C: the claim covers the whole range [-C, C]."""
        if self.rho < 2 * self.params["support"]:
            return self._cell_local_setting()
        return AuditSetting.clipped(self.params["support"], "l1", 1)

    def encode(self, x: torch.Tensor, seed: int) -> FloatMessage:
        v = self.clip_update(x)
        clip = self.params["support"]
        cell, position = _cells(v, -clip, clip, self.levels)
        coins = torch.rand(v.numel(), generator=private_generator(self.private_seed, seed, "rounding"),
                           dtype=torch.float64)  # fmt: skip
        indices = cell + (coins < position).to(torch.int64)  # upper level with probability (a - q_i) / Delta
        rounded = -clip + self.cell_step * indices.to(torch.float64)
        noise = laplace_noise(v.numel(), self.noise_scale, private_generator(self.private_seed, seed, "noise"))
        return FloatMessage((rounded + noise).numpy().astype(np.float32))

    def decode(self, enc: FloatMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        return enc.to_tensor()

    def guarantee(self) -> PrivacyGuarantee:
        eps, clip, rho = self.params["eps"], self.params["support"], self.rho
        caveats = [_PER_UPDATE, _NO_ROUNDS, _TORCH_COINS]
        flags: set[str] = set()
        if rho >= 2 * clip:
            unit = "one coordinate (any two values in [-C, C])"
        else:
            unit = "one coordinate whose two values round only to levels at most rho apart"
            flags.add("cell-local")
            caveats.insert(0, (
                f"rho = {rho:g} < 2C = {2 * clip:g}: over the whole range [-C, C] each coordinate is only "
                f"eps1 * 2C / rho = {self.whole_range_epsilon():.4g}-DP (levels -C and C are 2C apart)"
            ))  # fmt: skip
        return PrivacyGuarantee(
            epsilon=eps,
            delta=0.0,
            relation=REPLACE_ONE,
            unit=unit,
            scope="one round",
            sensitivity=f"rho = {rho:g} per coordinate, Laplace scale rho/eps1 = {self.noise_scale:.4g}",
            assumptions=(
                "the stochastic rounding and the Laplace noise are independent of each other and across coordinates",
                _PRIVATE_COINS,
            ),
            caveats=tuple(caveats),
            flags=flags,
        )
