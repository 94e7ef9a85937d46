"""MVU, the minimum variance unbiased mechanism (Chaudhuri, Guo & Rabbat, UAI 2022; JoPEQ 002's Fig. 3 baseline).

Per coordinate v (private coins): clamp to [-clip, clip], t = (v + clip) / (2 clip); round t unbiased to a level
x_i = i / (k_in - 1), k_in = 2^input_bits; send j ~ P[i, .] among k_out = 2^bits; decode -clip + 2 clip a_j.
The design (P, a) (``mvu_design``, cached per (eps, bits, input_bits)) satisfies

    sum_j P[i, j] = 1,   P[i, j] <= e^eps P[i', j]  (eps-LDP),   sum_j P[i, j] a_j = x_i  (unbiased),

minimising max_i sum_j P[i, j] (a_j - x_i)^2: in closed form at bits = 1 (span s = coth(eps / 2)), else an LP per
alphabet (scipy HiGHS; LDP rows as m_j <= P[i, j] <= e^eps m_j, mirror symmetry halves the rows) inside a search
over symmetric alphabets. P is then rounded to counts C / 2^53 drawn with a power-of-two ``randint`` (no modulo
bias), so ``true_epsilon`` = max_j ln(max_i C[i, j] / min_i C[i, j]) is exact and checked <= eps. Each coordinate
is eps-LDP (the index's law is a mixture of rows of P); d coordinates compose to d * eps. The solver's steps, the
exactness argument and how close the designs get: docs/guide/mechanism-internals.md (#mvu).
"""

from __future__ import annotations

import functools
import math
import struct
import time
from dataclasses import dataclass
from typing import Any, Self

import numpy as np
import torch
from scipy import sparse
from scipy.optimize import linprog, minimize, minimize_scalar

from auditkit.mechanisms.base import Mechanism, Param, as_update, int_range, positive_float
from auditkit.mechanisms.bitstream import decode_categorical, encode_categorical
from auditkit.mechanisms.capabilities import AuditSetting, Tiling
from auditkit.mechanisms.guarantee import CLAIM_EXCEEDED, REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.message import MAX_LENGTH, Message
from auditkit.mechanisms.randomness import private_generator
from auditkit.mechanisms.registry import register
from auditkit.validation import Integer, Number

__all__ = [
    "MVU",
    "MVUDesign",
    "MVUMessage",
    "compute_mvu_design",
    "mvu_design",
    "COUNT_TOTAL",
    "EPS_RANGE",
    "MAX_BITS",
    "MAX_INPUT_BITS",
]

COUNT_TOTAL = 2**53  # the channel's probabilities are integer counts over this total
MAX_BITS = 4  # output bits per coordinate (k_out = 16 at most)
MAX_INPUT_BITS = 6  # rounding levels 2^input_bits (k_in = 64 at most)
EPS_RANGE = (0.01, 20.0)  # beyond: alphabets of ~2/eps (eps -> 0) or probabilities ~e^-eps (eps large) strain the LP
_LP_OPTIONS = {"presolve": False}  # the LPs are small and dense in structure: presolve costs more than it saves
_SEARCH_GRID = (1.01, 1.04, 1.1, 1.2, 1.35, 1.55, 1.8, 2.2)  # spans, in units of coth(eps / 2)
_BUDGET_MS = 450.0  # nominal LP time of one design (the LP-solve budget is fixed from the LP size, not timed)


# --- the design -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, eq=False)
class MVUDesign:
    """The channel and alphabet of one (eps, bits, input_bits), on the unit scale [0, 1].

    counts:   (k_in, k_out) int64, rows summing to ``COUNT_TOTAL``: P[i, j] = counts[i, j] / 2^53 exactly.
    alphabet: (k_out,) float64, the decoded value a_j of index j (on [0, 1]'s scale; outside [0, 1]).
    lp_worst_variance: the LP optimum (before the exactness post-processing) at the chosen alphabet.
    lp_solves: LPs solved by the design; seconds: its wall time (information only).
    """

    eps: float
    bits: int
    input_bits: int
    counts: np.ndarray
    alphabet: np.ndarray
    lp_worst_variance: float
    lp_solves: int
    seconds: float = 0.0

    @property
    def levels(self) -> np.ndarray:
        """x_i = i / (k_in - 1), the rounding levels."""
        return np.arange(2**self.input_bits) / (2**self.input_bits - 1)

    @property
    def probabilities(self) -> np.ndarray:
        """P = counts / 2^53 (exact in float64: counts <= 2^53 and the division is by a power of two)."""
        return self.counts / COUNT_TOTAL

    @property
    def variances(self) -> np.ndarray:
        """sum_j P[i, j] (a_j - x_i)^2 for each level i."""
        return (self.probabilities * (self.alphabet[None, :] - self.levels[:, None]) ** 2).sum(axis=1)

    @property
    def worst_variance(self) -> float:
        """max_i of ``variances`` (unit scale; times (2 clip)^2 on [-clip, clip])."""
        return float(self.variances.max())

    @property
    def mean_variance(self) -> float:
        """The mean of ``variances`` over the levels (the reference code's objective)."""
        return float(self.variances.mean())

    @property
    def bias(self) -> float:
        """max_i |sum_j P[i, j] a_j - x_i|."""
        return float(np.abs(self.probabilities @ self.alphabet - self.levels).max())

    @property
    def epsilon(self) -> float:
        """max_j ln(max_i P[i, j] / min_i P[i, j]) of the channel used (the integer ratio rounded once to float64,
        then its logarithm)."""
        high, low = self.counts.max(axis=0), self.counts.min(axis=0)
        if (low <= 0).any():
            return math.inf
        return max(math.log(int(top) / int(bottom)) for top, bottom in zip(high, low, strict=True))

    @functools.cached_property
    def thresholds(self) -> torch.Tensor:
        """The cumulative counts of every row, row i offset by i 2^53, as one sorted int64 tensor: index j of
        level i is ``searchsorted(thresholds, i 2^53 + u, right=True) - i k_out`` for u uniform in [0, 2^53)."""
        cumulative = np.cumsum(self.counts, axis=1) + COUNT_TOTAL * np.arange(self.counts.shape[0])[:, None]
        return torch.from_numpy(cumulative.ravel().astype(np.int64))


def _check_design_args(eps: float, bits: int, input_bits: int) -> None:
    Number(*EPS_RANGE).check(eps, "eps")
    Integer(1, MAX_BITS).check(bits, "bits")
    Integer(1, MAX_INPUT_BITS).check(input_bits, "input_bits")


class _ChannelLP:
    """The LP of one (eps, k_in, k_out) for a symmetric alphabet (docs/guide/mechanism-internals.md#mvu).
    Variables: P[i, j] for the first h = k_in / 2 rows (row-major), one m per mirror pair of columns
    (j, k_out - 1 - j), and T."""

    def __init__(self, eps: float, k_in: int, k_out: int) -> None:
        self.k_in, self.k_out, self.h = k_in, k_out, k_in // 2
        self.x = np.arange(k_in) / (k_in - 1)
        self.nv = self.h * k_out
        self.n = self.nv + k_out // 2 + 1
        self.rows = np.repeat(np.arange(self.h), k_out)
        self.cols = np.tile(np.arange(k_out), self.h)
        v = np.arange(self.nv)
        pair = self.nv + np.minimum(self.cols, k_out - 1 - self.cols)
        e = math.exp(eps)
        # P[v] - e^eps m <= 0 and m - P[v] <= 0: every entry of a column within [m, e^eps m]. The mirror rows
        # put P[i, j] into column k_out - 1 - j as well, whose bound m is the same variable.
        self.a_ldp = sparse.csr_matrix(
            (np.concatenate([np.ones(self.nv), np.full(self.nv, -e), -np.ones(self.nv), np.ones(self.nv)]),
             (np.concatenate([v, v, self.nv + v, self.nv + v]), np.concatenate([v, pair, v, pair]))),
            shape=(2 * self.nv, self.n),
        )  # fmt: skip
        self.solves = 0

    def solve(self, alphabet: np.ndarray, worst: float | None = None) -> tuple[float, np.ndarray | None]:
        """min T (worst=None) or, with T <= worst, the smallest summed variance; (T, full P) or (inf, None)."""
        self.solves += 1
        h, nv, n = self.h, self.nv, self.n
        cost = (alphabet[self.cols] - self.x[self.rows]) ** 2
        v = np.arange(nv)
        a_var = sparse.csr_matrix(
            (np.concatenate([cost, -np.ones(h)]), (np.concatenate([self.rows, np.arange(h)]),
                                                    np.concatenate([v, np.full(h, n - 1)]))),
            shape=(h, n),
        )  # fmt: skip
        a_eq = sparse.csr_matrix(
            (np.concatenate([np.ones(nv), alphabet[self.cols]]),
             (np.concatenate([self.rows, h + self.rows]), np.concatenate([v, v]))),
            shape=(2 * h, n),
        )  # fmt: skip
        c = np.zeros(n)
        bounds = [(0.0, None)] * (n - 1) + [(None, worst)]
        if worst is None:
            c[-1] = 1.0
        else:
            c[:nv] = cost
        result = linprog(
            c, A_ub=sparse.vstack([self.a_ldp, a_var]).tocsc(), b_ub=np.zeros(2 * nv + h), A_eq=a_eq.tocsc(),
            b_eq=np.concatenate([np.ones(h), self.x[:h]]), bounds=bounds, method="highs", options=_LP_OPTIONS,
        )  # fmt: skip
        if result.status != 0:
            return math.inf, None
        half = np.clip(result.x[:nv].reshape(h, self.k_out), 0.0, None)
        return float(result.x[-1]), np.vstack([half, half[::-1, ::-1]])


def _symmetric(half: np.ndarray) -> np.ndarray:
    """The sorted symmetric alphabet with lower values ``half``: {a} and {1 - a}."""
    return np.sort(np.concatenate([half, 1.0 - half[::-1]]))


def _search_alphabet(lp: _ChannelLP, eps: float) -> tuple[float, np.ndarray]:
    """Steps (i) and (ii) of docs/guide/mechanism-internals.md#mvu: the best (worst-case variance, alphabet) found."""
    k_in, k_out = lp.k_in, lp.k_out
    s_min = 1.0 / math.tanh(eps / 2)
    shape = np.arange(k_out) / (k_out - 1) - 0.5

    def span_value(log_ratio: float) -> float:
        return lp.solve(0.5 + s_min * math.exp(log_ratio) * shape)[0]

    grid = np.log(_SEARCH_GRID)
    values = [span_value(g) for g in grid]
    best = int(np.argmin(values))
    low, high = grid[max(best - 1, 0)], grid[min(best + 1, len(grid) - 1)]
    refined = minimize_scalar(span_value, bounds=(low, high), method="bounded", options={"xatol": 2e-3, "maxiter": 8})
    log_ratio, value = (refined.x, refined.fun) if refined.fun < values[best] else (grid[best], values[best])
    alphabet = 0.5 + s_min * math.exp(log_ratio) * shape

    size = k_in * k_out
    budget = int(_BUDGET_MS / (3.0 + 0.027 * size)) - lp.solves  # ~3 ms + 27 us per P entry and LP
    dim = k_out // 2
    if budget >= 4 * (dim + 1):  # enough for Nelder-Mead to move beyond its initial simplex
        start = alphabet[:dim]
        step = 0.3 * (alphabet[1] - alphabet[0])
        simplex = np.vstack([start] + [start + step * row for row in np.eye(dim)])
        result = minimize(
            lambda half: lp.solve(_symmetric(half))[0], start, method="Nelder-Mead",
            options={"initial_simplex": simplex, "maxfev": budget, "xatol": 1e-7, "fatol": 1e-10},
        )  # fmt: skip
        if result.fun < value:
            value, alphabet = float(result.fun), _symmetric(result.x)
    return value, alphabet


def _exact_channel(p: np.ndarray, alphabet: np.ndarray, x: np.ndarray, eps: float) -> tuple[np.ndarray, np.ndarray]:
    """Steps (a)-(c) of docs/guide/mechanism-internals.md#mvu: integer counts (rows summing to 2^53) and the
    alphabet, with the LDP ratio <= e^eps exactly and P a = x to the count rounding."""
    k_out = p.shape[1]
    p = np.clip(p, 0.0, None)
    p = p / p.sum(axis=1, keepdims=True)
    lo, hi = int(np.argmin(alphabet)), int(np.argmax(alphabet))
    if not alphabet[lo] < x.min() <= x.max() < alphabet[hi]:
        raise ValueError("mvu design: the alphabet does not enclose the levels")  # cannot happen for an LDP design
    # (a) exact unbiasedness, row by row: mix towards the outermost output on the side of the deficit.
    mean = p @ alphabet
    for i in range(p.shape[0]):
        if mean[i] > x[i]:
            w, target = (mean[i] - x[i]) / (mean[i] - alphabet[lo]), lo
        elif mean[i] < x[i]:
            w, target = (x[i] - mean[i]) / (alphabet[hi] - mean[i]), hi
        else:
            continue
        p[i] *= 1 - w
        p[i, target] += w
    e, uniform = math.exp(eps), 1.0 / k_out
    for margin in (4.0, 64.0, 1024.0, 2.0**20):
        # (b) mix with the uniform channel: after (c) moves every entry by < 2 counts, a column within
        # [(1-lam) m + lam u, (1-lam) M + lam u] still has ratio <= e^eps if the margin covers those counts.
        high, low = p.max(axis=0), p.min(axis=0)
        excess = high - e * low + margin * (1 + e) / COUNT_TOTAL
        needed = np.where(excess > 0, excess / np.maximum(excess + (e - 1) * uniform - margin * (1 + e) / COUNT_TOTAL,
                                                          1e-300), 0.0)  # fmt: skip
        lam = float(needed.max())
        if not 0 <= lam < 0.5:
            break
        mixed = (1 - lam) * p + lam * uniform
        centre = float(alphabet.mean())
        scaled = centre + (alphabet - centre) / (1 - lam)
        counts = _integer_rows(mixed)
        if (counts.sum(axis=1) == COUNT_TOTAL).all() and (counts.min(axis=0) > 0).all() and all(
            int(c_high) <= e * int(c_low) and math.log(int(c_high) / int(c_low)) <= eps
            for c_high, c_low in zip(counts.max(axis=0), counts.min(axis=0), strict=True)
        ):
            return counts, scaled
    raise ValueError(f"mvu design: no exactly eps-LDP channel found at eps={eps!r}")  # pragma: no cover


def _integer_rows(p: np.ndarray) -> np.ndarray:
    """Step (c): integer counts with rows summing to 2^53 exactly, by largest remainder. A row of ``p`` sums to 1
    only to rounding, so the floors may miss the total by a few counts either way; they are made up on the entries
    with the largest remainders, or taken from those with the smallest: every entry moves by < 2 counts."""
    exact = p * COUNT_TOTAL
    counts = np.floor(exact).astype(np.int64)
    remainder = exact - counts
    for i in range(counts.shape[0]):
        deficit = COUNT_TOTAL - int(counts[i].sum())
        if deficit > 0:
            counts[i, np.argsort(-remainder[i], kind="stable")[:deficit]] += 1
        elif deficit < 0:
            counts[i, np.argsort(remainder[i], kind="stable")[:-deficit]] -= 1
    return counts


def _one_bit(eps: float, k_in: int) -> tuple[float, np.ndarray, np.ndarray]:
    """bits = 1: the unbiased channel is q_i = P[i, 1] = 1/2 + (x_i - 1/2) / s with outputs 1/2 -+ s/2, and its
    variance s^2 q (1 - q) grows with s, so the smallest span s = coth(eps / 2) (ratio exactly e^eps at the ends)
    is optimal: (worst-case variance, P, alphabet) in closed form, no LP."""
    s = 1.0 / math.tanh(eps / 2)
    x = np.arange(k_in) / (k_in - 1)
    q = 0.5 + (x - 0.5) / s
    variance = s * s * q * (1 - q)
    return float(variance.max()), np.stack([1 - q, q], axis=1), np.array([0.5 - s / 2, 0.5 + s / 2])


def mvu_design(eps: float, bits: int, input_bits: int) -> MVUDesign:
    """The MVU channel and alphabet for (eps, bits, input_bits) (module docstring), computed once per
    configuration and cached (``compute_mvu_design`` computes it afresh).

    ``ValueError`` naming the parameter when eps is outside ``EPS_RANGE``, bits outside 1..``MAX_BITS`` or
    input_bits outside 1..``MAX_INPUT_BITS``.
    """
    _check_design_args(eps, bits, input_bits)  # before the cache, which would take True for 1
    return _cached_design(float(eps), int(bits), int(input_bits))


@functools.lru_cache(maxsize=64)
def _cached_design(eps: float, bits: int, input_bits: int) -> MVUDesign:
    return compute_mvu_design(eps, bits, input_bits)


def compute_mvu_design(eps: float, bits: int, input_bits: int) -> MVUDesign:
    """``mvu_design`` without the cache: a pure, deterministic function of its arguments."""
    _check_design_args(eps, bits, input_bits)
    start = time.perf_counter()
    eps = float(eps)
    lp = _ChannelLP(eps, 2**input_bits, 2**bits)
    if bits == 1:
        worst, p, alphabet = _one_bit(eps, lp.k_in)
    else:
        _, alphabet = _search_alphabet(lp, eps)
        worst, p = lp.solve(alphabet)
        if p is None:  # pragma: no cover - the search only returns alphabets whose LP solved
            raise ValueError(f"mvu design: no LP solution at eps={eps!r}, bits={bits}, input_bits={input_bits}")
        _, p_mean = lp.solve(alphabet, worst=worst * (1 + 1e-9) + 1e-15)  # (iii): the best mean among the worst
        p = p if p_mean is None else p_mean
    counts, alphabet = _exact_channel(p, alphabet, lp.x, eps)
    counts.setflags(write=False)
    alphabet.setflags(write=False)
    return MVUDesign(eps, bits, input_bits, counts, alphabet, worst, lp.solves, time.perf_counter() - start)


# --- the message ----------------------------------------------------------------------------------------------


class MVUMessage(Message):
    """The channel indices of one update and the configuration they decode under.

    Layout (little-endian): tag (uint8 = 77) | length n (uint32) | bits b (uint8, 1..4) | input_bits (uint8, 1..6)
    | eps (float32, finite, > 0) | clip (float32, finite, > 0) | the n indices in [0, 2^b) as a
    ``auditkit.mechanisms.bitstream`` categorical stream (entropy-coded with the empirical frequencies, or fixed-width b
    bits each, whichever is smaller). 15 header bytes; the stream is at most 1 + ceil(n b / 8) bytes.
    """

    TAG = 77  # "M"
    _HEADER = struct.Struct("<BIBBff")

    def __init__(self, indices: np.ndarray, bits: int, input_bits: int, eps: float, clip: float) -> None:
        indices = np.asarray(indices)
        integral = indices.size == 0 or np.issubdtype(indices.dtype, np.integer)
        if indices.ndim != 1 or indices.size > MAX_LENGTH or not integral:
            raise ValueError(f"MVUMessage needs a 1-D integer array of at most {MAX_LENGTH} indices")
        if not 1 <= bits <= MAX_BITS:
            raise ValueError(f"MVUMessage: bits must be in 1..{MAX_BITS}, got {bits}")
        if not 1 <= input_bits <= MAX_INPUT_BITS:
            raise ValueError(f"MVUMessage: input_bits must be in 1..{MAX_INPUT_BITS}, got {input_bits}")
        for label, value in (("eps", eps), ("clip", clip)):
            if not (math.isfinite(value) and value > 0 and float(np.float32(value)) == value):
                raise ValueError(f"MVUMessage: {label} must be a finite float32 > 0, got {value!r}")
        indices = indices.astype(np.int64)
        if indices.size and (indices.min() < 0 or indices.max() >= 2**bits):
            raise ValueError(f"MVUMessage: indices must lie in [0, {2**bits})")
        self.indices = indices
        self.bits = bits
        self.input_bits = input_bits
        self.eps = eps
        self.clip = clip

    def __len__(self) -> int:
        return self.indices.size

    def _serialize(self) -> bytes:
        header = self._HEADER.pack(self.TAG, self.indices.size, self.bits, self.input_bits, self.eps, self.clip)
        return header + encode_categorical(self.indices, 2**self.bits)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, n, bits, input_bits, eps, clip = cls._check_tag(data, cls._HEADER)
        if not 1 <= bits <= MAX_BITS:
            raise ValueError(f"MVUMessage: bits must be in 1..{MAX_BITS}, got {bits}")
        indices = decode_categorical(data[cls._HEADER.size :], n)
        message = cls(indices, bits, input_bits, eps, clip)  # re-validates the fields and the index range
        message._wire = bytes(data)
        return message


# --- the mechanism --------------------------------------------------------------------------------------------

_PER_UPDATE = (
    "per-coordinate claim: the whole d-coordinate update is d*eps-DP by sequential composition over its "
    "coordinates"
)
_NO_ROUNDS = "one round only: composition over rounds and sampling amplification are not included"
_PRIVATE_COINS = (
    "the server does not know private_seed (None: OS entropy), so it cannot regenerate the rounding or the channel "
    "coins"
)
_TORCH_COINS = (
    "the coins come from torch's CPU generator (Mersenne Twister), which is not a cryptographic generator; the "
    "rounding coin is a floating-point uniform (harmless: the claim holds for any rounding probabilities) and the "
    "channel index an integer uniform in [0, 2^53), so the channel probabilities are exactly the design's counts"
)


def _eps_param() -> Param:
    low, high = EPS_RANGE
    return Param("eps", 4.0, "eps: the LDP epsilon of each coordinate (the channel's ratio bound)", Number(low, high))


@register
class MVU(Mechanism):
    """MVU (Chaudhuri, Guo & Rabbat, UAI 2022): per coordinate, clamp to [-clip, clip], unbiased rounding to
    2^input_bits levels, then an optimised eps-LDP channel to 2^bits indices decoded to an optimised alphabet
    (module docstring). Defaults eps = 4, bits = 1: the setting of JoPEQ's Fig. 3.
    """

    name = "mvu"
    summary = "MVU: unbiased rounding, then an optimised eps-LDP channel to 2^bits indices per coordinate (UAI 2022)"
    params_spec = (
        _eps_param(),
        int_range("bits", 1, MAX_BITS, 1, "b: output bits per coordinate, 2^b channel outputs"),
        int_range("input_bits", 1, MAX_INPUT_BITS, 3, "2^input_bits unbiased rounding levels before the channel"),
        positive_float("clip", 1.0, "per-coordinate range: each coordinate is clamped to [-clip, clip]"),
    )
    message_type = MVUMessage
    clip_norm = "linf"
    reference_params = {"eps": 1.0}  # eps 4 is beyond what 10^5 outputs certify; at eps 1 the ends are reachable

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        p = self.params
        self.design = mvu_design(p["eps"], p["bits"], p["input_bits"])
        clip = p["clip"]
        self.output_values = torch.from_numpy(-clip + 2 * clip * self.design.alphabet).to(torch.float32)
        """The decoded value of each index on [-clip, clip]: -clip + 2 clip a_j, float32."""

    @property
    def levels(self) -> int:
        """k_in = 2^input_bits."""
        return 2 ** self.params["input_bits"]

    @property
    def worst_variance(self) -> float:
        """The channel's worst-case variance per coordinate on [-clip, clip] (rounding error not included)."""
        return self.design.worst_variance * (2 * self.params["clip"]) ** 2

    def true_epsilon(self) -> float:
        """max_j ln(max_i P[i, j] / min_i P[i, j]) of the channel the encoder samples from (<= eps)."""
        return self.design.epsilon

    def tiling(self) -> Tiling:
        return Tiling(block=1, why="per-coordinate clamp, a fixed channel and private coins iid per coordinate")

    def audit_setting(self) -> AuditSetting:
        """One coordinate: the claim covers any two values in [-clip, clip] (in one dimension l1 = l-infinity), so
        the pairs are 2 clip apart; values beyond the clip are clamped onto its ends."""
        clip = self.params["clip"]
        return AuditSetting(1, 2 * clip, "l1", clip, 1, beyond_clip=True,
                            note=f"one coordinate, any two values in [-{clip:g}, {clip:g}]: shift 2 clip")

    def rounded_levels(self, x: torch.Tensor, seed: int) -> torch.Tensor:
        """Steps 1-2: the level index i of each coordinate after the clamp and the unbiased rounding (int64)."""
        clip = self.params["clip"]
        t = ((as_update(x).clamp(-clip, clip) + clip) / (2 * clip)).clamp(0.0, 1.0)
        scaled = t * (self.levels - 1)
        lower = torch.floor(scaled).clamp(max=self.levels - 2)
        coins = torch.rand(t.numel(), generator=private_generator(self.private_seed, seed, "rounding"),
                           dtype=torch.float64)  # fmt: skip
        return lower.to(torch.int64) + (coins < scaled - lower).to(torch.int64)

    def encode(self, x: torch.Tensor, seed: int) -> MVUMessage:
        level = self.rounded_levels(x, seed)
        u = torch.randint(0, COUNT_TOTAL, (level.numel(),), dtype=torch.int64,
                          generator=private_generator(self.private_seed, seed, "channel"))  # fmt: skip
        k_out = 2 ** self.params["bits"]
        index = torch.searchsorted(self.design.thresholds, level * COUNT_TOTAL + u, right=True) - level * k_out
        p = self.params
        return MVUMessage(index.numpy(), p["bits"], p["input_bits"], float(np.float32(p["eps"])),
                          float(np.float32(p["clip"])))  # fmt: skip

    def decode(self, enc: MVUMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        p = self.params
        expected = {"bits": p["bits"], "input_bits": p["input_bits"], "eps": float(np.float32(p["eps"])),
                    "clip": float(np.float32(p["clip"]))}  # fmt: skip
        for key, value in expected.items():
            if getattr(enc, key) != value:
                raise ValueError(f"message has {key}={getattr(enc, key)!r}, this mvu configuration has {key}={value!r}")
        return self.output_values[torch.from_numpy(enc.indices)]

    def guarantee(self) -> PrivacyGuarantee:
        eps, clip, actual = self.params["eps"], self.params["clip"], self.true_epsilon()
        return PrivacyGuarantee(
            epsilon=eps,
            delta=0.0,
            relation=REPLACE_ONE,
            unit="one coordinate (any two values in [-clip, clip])",
            scope="one round",
            sensitivity=f"l-infinity clip {clip:g}: each coordinate clamped to [-{clip:g}, {clip:g}]",
            assumptions=(
                f"every column of the {self.levels} x {2 ** self.params['bits']} channel has max/min ratio <= e^eps "
                f"(as implemented: eps = {actual:.6g}); the index law is a mixture of its rows",
                "the rounding and channel coins are independent across coordinates",
                _PRIVATE_COINS,
            ),
            caveats=(_PER_UPDATE, _NO_ROUNDS, _TORCH_COINS),
            flags={CLAIM_EXCEEDED} if actual > eps * (1 + 1e-9) else set(),
        )
