"""Rejection-sampled universal quantization (RSUQ) and its layered form (LRSUQ), vectorised over sub-vectors.

RSUQ (Ling & Li; CEPAM 003 Definition 2, eqs. (5)-(6)): lattice alpha Z^n, cell P = alpha (-1/2, 1/2]^n,
Q_P(y) = alpha floor(y / alpha + 1/2), A inside P, shared dithers V_i iid Unif(P); the decoder outputs M + V_H of

    H = min{i : Q_P(x - V_i) + V_i - x in A},   M = Q_P(x - V_H),

and the error is Unif(A) whatever x (003 Prop. 3), acceptance p = vol(A) / vol(P). LRSUQ (003 Def. 4, eqs. (7)-(8);
Prop. 5): a shared latent U ~ vol(L_u), L_U a ball of radius r, run RSUQ at scale beta(U) = 2 r / alpha (the
tightest cube): Gaussian U ~ chi-square(n + 2), r = sigma sqrt(U) (003 Lemma 14); Laplace U ~ Gamma(n + 1, 1), l1
ball r = b U (003 Lemma 15); t_nu (JoPEQ eq. (10)) r = sqrt(s2 U / W), W ~ chi-square(nu) / nu. In cell units,
t = x / (alpha beta), V = alpha (1/2 - u): k = floor(t + u), accept iff ||k + 1/2 - u - t|| <= 1/2,
Y = beta (alpha k + V). Each iteration draws uniforms only for the rows still pending, in row order; the decoder
knows every H_j and replays the same draws, so the streams stay aligned at N n / p draws. Shared streams are NumPy
PCG64 keyed by derive_seed(seed, purpose) (``shared_stream``): faster uniforms than torch's CPU generator and an
exact gamma sampler. Derivations, acceptance rates and the stream layout: docs/guide/mechanism-internals.md (#rsuq).
"""

from __future__ import annotations

import abc
import math
from dataclasses import dataclass
from typing import ClassVar, NamedTuple

import numpy as np
import torch
from scipy import stats

from auditkit.mechanisms.randomness import derive_seed

__all__ = [
    "NORMS",
    "acceptance_probability",
    "iteration_cap",
    "shared_stream",
    "Target",
    "GaussianTarget",
    "LaplaceTarget",
    "StudentTTarget",
    "RSUQCode",
    "rsuq_encode",
    "rsuq_decode",
]

NORMS = ("l2", "l1")
MIN_ITERATIONS = 64  # at n = 3 a row is still pending after 64 dithers with probability (1 - pi/6)^64 = 2.5e-21


def acceptance_probability(n: int, norm: str) -> float:
    """p = vol(ball of radius r) / vol(cube of side 2r) for the l2 or l1 unit ball in n dimensions.

    l2: pi^(n/2) / (Gamma(n/2 + 1) 2^n), i.e. 1, pi/4, pi/6 for n = 1, 2, 3; l1: (2r)^n / n! over (2r)^n = 1/n!.
    """
    if n < 1 or norm not in NORMS:
        raise ValueError(f"need n >= 1 and norm in {NORMS}, got n={n}, norm={norm!r}")
    if n == 1:
        return 1.0
    if norm == "l1":
        return 1.0 / math.factorial(n)
    return math.exp(n / 2 * math.log(math.pi) - math.lgamma(n / 2 + 1) - n * math.log(2))


def iteration_cap(n: int, norm: str) -> int:
    """Most dithers tried per row: max(64, ceil(64 ln 2 / -ln(1 - p))), so a row fails with probability
    (1 - p)^cap <= 2^-64 (far smaller at n <= 3); exceeding it raises instead of looping on."""
    p = acceptance_probability(n, norm)
    if p == 1.0:
        return MIN_ITERATIONS
    return max(MIN_ITERATIONS, math.ceil(64 * math.log(2) / -math.log1p(-p)))


def shared_stream(seed: int, purpose: str) -> np.random.Generator:
    """The shared random stream keyed by (seed, purpose): PCG64 seeded with ``derive_seed(seed, purpose)``."""
    return np.random.Generator(np.random.PCG64(derive_seed(seed, purpose)))


@dataclass(frozen=True)
class Target(abc.ABC):
    """A target error density as an LRSUQ layer: the latent, the ball radius it sets, and the ball's norm."""

    n: int

    norm: ClassVar[str] = "l2"  # the ball L_U: "l2" or "l1"

    def __post_init__(self) -> None:
        if self.n < 1:
            raise ValueError(f"the sub-vector length n must be >= 1, got {self.n}")

    @abc.abstractmethod
    def radius(self, count: int, rng: np.random.Generator) -> torch.Tensor:
        """Radii r_1..r_count (float64) of the accept balls, each from a fresh latent drawn from ``rng``."""

    @abc.abstractmethod
    def radius_cdf(self, rho: np.ndarray) -> np.ndarray:
        """P(r < rho) for the radius of one row (used for the papers' rate bound)."""


@dataclass(frozen=True)
class GaussianTarget(Target):
    """N(0, sigma^2 I_n): U ~ chi-square(n + 2) = 2 Gamma((n + 2)/2), r = sigma sqrt(U) (003 Lemma 14)."""

    sigma: float

    def radius(self, count: int, rng: np.random.Generator) -> torch.Tensor:
        return torch.from_numpy(self.sigma * np.sqrt(2 * rng.standard_gamma((self.n + 2) / 2, count)))

    def radius_cdf(self, rho: np.ndarray) -> np.ndarray:
        return stats.chi2.cdf((np.asarray(rho) / self.sigma) ** 2, self.n + 2)


@dataclass(frozen=True)
class LaplaceTarget(Target):
    """iid Laplace(scale) coordinates: U ~ Gamma(n + 1, 1), l1 ball of radius r = scale U (003 Lemma 15)."""

    scale: float
    norm: ClassVar[str] = "l1"

    def radius(self, count: int, rng: np.random.Generator) -> torch.Tensor:
        return torch.from_numpy(self.scale * rng.standard_gamma(self.n + 1, count))

    def radius_cdf(self, rho: np.ndarray) -> np.ndarray:
        return stats.gamma.cdf(np.asarray(rho) / self.scale, self.n + 1)


@dataclass(frozen=True)
class StudentTTarget(Target):
    """Multivariate t_nu(0, s2 I_n): W ~ chi-square(nu)/nu, U ~ chi-square(n + 2), r = sqrt(s2 U / W).

    Given W the error is N(0, (s2 / W) I_n) in the ball form of ``GaussianTarget``; mixing over W gives the
    t density. U / W = (n + 2) F with F ~ F(n + 2, nu), which gives ``radius_cdf``.
    """

    nu: float
    s2: float

    def radius(self, count: int, rng: np.random.Generator) -> torch.Tensor:
        w = 2 * rng.standard_gamma(self.nu / 2, count) / self.nu
        u = 2 * rng.standard_gamma((self.n + 2) / 2, count)
        return torch.from_numpy(np.sqrt(self.s2 * u / w))

    def radius_cdf(self, rho: np.ndarray) -> np.ndarray:
        return stats.f.cdf(np.asarray(rho) ** 2 / (self.s2 * (self.n + 2)), self.n + 2, self.nu)


class RSUQCode(NamedTuple):
    """What the encoder produced, per row: H (int64, 1-based), the index k = M / alpha (int64, N x n),
    and the output the decoder will reconstruct, Y = beta (alpha k + V_H) (float64, N x n)."""

    iterations: torch.Tensor
    indices: torch.Tensor
    output: torch.Tensor


def _beta(radius: torch.Tensor, rows: int, norm: str, alpha: float) -> np.ndarray:
    """beta(U) = 2 r / alpha per row, so that beta P = (-r, r]^n is the cube around the ball; validates."""
    if radius.shape != (rows,) or radius.dtype != torch.float64:
        raise ValueError(f"need {rows} float64 radii, got dtype {radius.dtype} and shape {tuple(radius.shape)}")
    r = radius.numpy()
    if r.size and not (np.isfinite(r).all() and r.min() > 0):
        raise ValueError("radii must be finite and > 0")
    if norm not in NORMS:
        raise ValueError(f"norm must be one of {NORMS}, got {norm!r}")
    if not (math.isfinite(alpha) and alpha > 0):
        raise ValueError(f"alpha must be a finite number > 0, got {alpha!r}")
    return 2 * r / alpha


def _as_index(k: np.ndarray) -> torch.Tensor:
    return torch.from_numpy(k.astype(np.int64))


def _output(beta: np.ndarray, k: np.ndarray, u: np.ndarray, alpha: float) -> np.ndarray:
    """Y = beta (M + V) with M = alpha k and V = alpha (1/2 - u) (003 Algorithm 3, step 7); overwrites u."""
    y = np.subtract(0.5, u, out=u)
    y *= alpha  # V
    y += alpha * k  # M + V
    y *= beta[:, None]
    return y


def rsuq_encode(
    x: torch.Tensor, radius: torch.Tensor, seed: int, *, norm: str, purpose: str, alpha: float = 1.0
) -> RSUQCode:
    """LRSUQ encoder (003 Algorithm 2) for all rows of ``x`` (N x n, float64) at once.

    Row j is quantized at scale beta_j = 2 radius_j / alpha and accepted when its error lies in the ``norm``
    ball of radius ``radius_j``; the dithers come from ``shared_stream(seed, purpose)`` as described in
    docs/guide/mechanism-internals.md#rsuq. Raises ``RuntimeError`` if a row is still pending after
    ``iteration_cap`` dithers.
    """
    if x.ndim != 2 or x.dtype != torch.float64:
        raise ValueError(f"need float64 rows (N x n), got dtype {x.dtype} and shape {tuple(x.shape)}")
    count, n = x.shape
    beta = _beta(radius, count, norm, alpha)
    t = x.numpy() / beta[:, None]
    t /= alpha
    rng = shared_stream(seed, purpose)
    draws = np.empty(count * n)
    iterations = np.ones(count, dtype=np.int64)
    if n == 1:  # the accept interval is the whole cell: plain subtractive dithering
        u = rng.random(out=draws).reshape(count, 1)
        k = np.floor(t + u)
        return RSUQCode(torch.from_numpy(iterations), _as_index(k), torch.from_numpy(_output(beta, k, u, alpha)))
    bound = 0.25 if norm == "l2" else 0.5  # squared l2 radius, or l1 radius, of the ball in cell units
    accepted_rows, accepted_k, accepted_u = [], [], []
    pending = np.arange(count)
    for i in range(1, iteration_cap(n, norm) + 1):
        u = rng.random(out=draws[: pending.size * n]).reshape(pending.size, n)
        d = t + u
        k = np.floor(d)
        np.subtract(k, d, out=d)
        d += 0.5  # k + 1/2 - u - t: the error in cell units
        size = np.einsum("ij,ij->i", d, d) if norm == "l2" else np.abs(d).sum(axis=1)
        accept = size <= bound
        accepted_rows.append(np.compress(accept, pending))
        accepted_k.append(np.compress(accept, k, axis=0))
        accepted_u.append(np.compress(accept, u, axis=0))  # a copy: ``draws`` is refilled next time
        iterations[accepted_rows[-1]] = i
        reject = ~accept
        pending, t = np.compress(reject, pending), np.compress(reject, t, axis=0)
        if not pending.size:
            break
    if pending.size:
        raise RuntimeError(f"RSUQ: {pending.size} rows not accepted after {iteration_cap(n, norm)} dithers")
    # Back to row order: one gather through the inverse of the acceptance order.
    position = np.empty(count, dtype=np.int64)
    position[np.concatenate(accepted_rows)] = np.arange(count)
    k = np.take(np.concatenate(accepted_k), position, axis=0)
    u = np.take(np.concatenate(accepted_u), position, axis=0)
    return RSUQCode(torch.from_numpy(iterations), _as_index(k), torch.from_numpy(_output(beta, k, u, alpha)))


def rsuq_decode(
    iterations: torch.Tensor,
    indices: torch.Tensor,
    radius: torch.Tensor,
    seed: int,
    *,
    norm: str,
    purpose: str,
    alpha: float = 1.0,
) -> torch.Tensor:
    """LRSUQ decoder (003 Algorithm 3): Y_j = beta_j (alpha k_j + V_{j,H_j}) for every row, float64 N x n.

    Replays the encoder's draws: iteration i draws n uniforms for each row with H_j >= i, in row order,
    and keeps those of the rows with H_j = i. ``ValueError`` if an H is outside 1..``iteration_cap``.
    """
    count, n = indices.shape
    beta = _beta(radius, count, norm, alpha)
    h = iterations.numpy()
    if h.shape != (count,) or (count and (h.min() < 1 or h.max() > iteration_cap(n, norm))):
        raise ValueError(f"need one iteration count per row, each in 1..{iteration_cap(n, norm)}")
    rng = shared_stream(seed, purpose)
    if count == 0 or h.max() == 1:  # every row took its first dither
        u = rng.random(count * n).reshape(count, n)
    else:
        draws = np.empty(count * n)
        u = np.empty((count, n))
        pending = np.arange(count)
        for i in range(1, int(h.max()) + 1):
            drawn = rng.random(out=draws[: pending.size * n]).reshape(pending.size, n)
            done = h[pending] == i
            u[np.compress(done, pending)] = np.compress(done, drawn, axis=0)
            pending = np.compress(~done, pending)
    return torch.from_numpy(_output(beta, indices.numpy().astype(np.float64), u, alpha))
