"""The multivariate t mechanism (JoPEQ Theorem II.8, from Fukuchi, Tran, Cuturi & Sakuma 2017) and ``t-dist``.

Adding t ~ t_nu(0, Sigma) in d dimensions to f(x) is eps-LDP with (JoPEQ eq. (11), exponent corrected:
the paper prints (nu + d)^2, the density's exponent is (nu + d)/2)

    e^eps = [(1 + c^2/nu) / (1 + (c - Delta)^2/nu)]^((nu + d)/2),  c = (Delta + sqrt(Delta^2 + 4 nu))/2,

Delta = max ||Sigma^(-1/2)(f(x) - f(y))||. With Sigma = s2 I and raw l2 sensitivity D, Delta = D/sqrt(s2).
It is the supremum over z of (nu + d)/2 * ln[(1 + |z - Delta|^2/nu)/(1 + |z|^2/nu)], reached on the line
of the shift at z = Delta - c. The noise of a block has per-coordinate variance nu s2 / (nu - 2).

Parameters shared by every t mechanism (``t-dist``, ``t-dist+sdq``, ``jopeq-t``): ``eps`` (the claim),
``nu`` and ``s2``. Given eps, (nu, s2) is underdetermined: ``nu = 0`` picks the pair of least variance
(``minimum_variance_t``), a given nu with ``s2 = 0`` solves s2 from eq. (11), and a given pair is used as
it is (as the JoPEQ reference code does), the claim staying ``eps``; the guarantee then carries the flag
"claim-exceeded" when the pair's own epsilon is larger.
"""

from __future__ import annotations

import functools
import math

import numpy as np
import torch
from scipy.optimize import brentq, minimize_scalar
from scipy.special import gammaincinv

from auditkit.mechanisms.additive import (
    _FLOAT_NOISE_CAVEAT,
    _PER_ROUND_CAVEAT,
    _PRIVATE_NOISE,
    _AdditiveNoise,
    clip_l2,
    clipped_input,
)
from auditkit.mechanisms.base import positive_float, zero_or_above
from auditkit.mechanisms.capabilities import LogDensity, Tiling, rescaled_clip
from auditkit.mechanisms.guarantee import CLAIM_EXCEEDED, REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.registry import register

__all__ = [
    "TDist",
    "t_epsilon",
    "t_scale_for_epsilon",
    "minimum_variance_t",
    "resolve_t_noise",
    "sample_t",
    "t_blocks_logpdf",
    "t_claim",
    "T_NOISE_PARAMS",
]

_NU_MAX = 1e4  # search bound for nu: the variance-optimal nu stays below 10 for eps in [0.1, 20]

T_NOISE_PARAMS = (
    positive_float("eps", 4.0, "claimed epsilon of the multivariate t mechanism per block (eq. 11)"),
    zero_or_above("nu", 2, "t degrees of freedom; 0: the minimum-variance pair (nu, s2) for eps"),
    zero_or_above("s2", 0, "t scale Sigma = s2 I; 0: solved from eps and nu by eq. (11)"),
)


def t_epsilon(nu: float, s2: float, sensitivity: float, dimension: int = 2) -> float:
    """Eq. (11): the eps of t_nu(0, s2 I_d) noise for raw l2 sensitivity ``sensitivity`` (Delta = D/sqrt(s2))."""
    delta = sensitivity / math.sqrt(s2)
    c = (delta + math.sqrt(delta * delta + 4 * nu)) / 2
    return (nu + dimension) / 2 * (math.log1p(c * c / nu) - math.log1p((c - delta) ** 2 / nu))


def t_scale_for_epsilon(eps: float, nu: float, sensitivity: float, dimension: int = 2) -> float:
    """The s2 with ``t_epsilon(nu, s2, sensitivity) = eps`` (eq. (11) increases in Delta = D/sqrt(s2)).

    ln Delta is searched in [ln 1e-12, ln 1e150] by Brent's method; ``ValueError`` for an eps outside what
    that range reaches.
    """

    def excess(log_delta: float) -> float:
        return t_epsilon(nu, (sensitivity / math.exp(log_delta)) ** 2, sensitivity, dimension) - eps

    low, high = math.log(1e-12), math.log(1e150)
    if not excess(low) < 0 < excess(high):
        raise ValueError(f"eps = {eps:g} is out of reach of the t mechanism with nu = {nu:g} (Delta in [1e-12, 1e150])")
    return (sensitivity / math.exp(brentq(excess, low, high, xtol=1e-15, rtol=1e-15))) ** 2


@functools.lru_cache(maxsize=256)
def minimum_variance_t(eps: float, sensitivity: float, dimension: int = 2) -> tuple[float, float]:
    """The (nu, s2) of least per-coordinate variance nu s2 / (nu - 2) among those with eq. (11) = eps.

    s2(nu) from ``t_scale_for_epsilon``, then a bounded scalar minimisation over nu in (2, 1e4). The
    objective is flat at its minimum: nu is determined to ~1e-3 only, the variance to ~1e-9.
    """

    def variance(nu: float) -> float:
        return nu * t_scale_for_epsilon(eps, nu, sensitivity, dimension) / (nu - 2)

    nu = float(minimize_scalar(variance, bounds=(2 + 1e-6, _NU_MAX), method="bounded", options={"xatol": 1e-9}).x)
    return nu, t_scale_for_epsilon(eps, nu, sensitivity, dimension)


def resolve_t_noise(eps: float, nu: float, s2: float, sensitivity: float) -> tuple[float, float]:
    """The (nu, s2) of a t mechanism from its ``eps``, ``nu``, ``s2`` parameters (0 = derive, see module doc)."""
    if nu == 0:
        if s2 != 0:
            raise ValueError(f"s2 = {s2} needs nu as well (nu > 2); or leave both 0 for the minimum-variance pair")
        return minimum_variance_t(eps, sensitivity)
    return nu, s2 if s2 != 0 else t_scale_for_epsilon(eps, nu, sensitivity)


def sample_t(blocks: int, dimension: int, nu: float, s2: float, gen: torch.Generator) -> torch.Tensor:
    """``blocks`` iid draws of t_nu(0, s2 I_dimension) (blocks x dimension, float64) from ``gen``.

    t = sqrt(s2) Z / sqrt(W / nu) with Z ~ N(0, I) and W ~ chi2_nu = 2 Gamma(nu/2), W drawn by inverse
    transform W = 2 P^-1(nu/2, U) (scipy's ``gammaincinv``) of a uniform U from ``gen``, moved off 0 by half
    its resolution (2^-54) so that W > 0.
    """
    z = torch.randn(blocks, dimension, generator=gen, dtype=torch.float64)
    u = torch.rand(blocks, generator=gen, dtype=torch.float64) + 2.0**-54
    w = 2 * torch.from_numpy(gammaincinv(nu / 2, u.numpy()))
    return z * math.sqrt(s2) / torch.sqrt(w / nu)[:, None]


def t_blocks_logpdf(z: np.ndarray, nu: float, s2: float, block: int) -> np.ndarray:
    """ln of the t_nu(0, s2 I) density, up to a constant, summed over contiguous blocks of ``block`` coordinates
    of each row of z (B, d): -(nu + k)/2 ln(1 + ||z_b||^2 / (nu s2)) per block of k coordinates (a shorter last
    block is the marginal of the same law: t of its own dimension)."""
    total = np.zeros(z.shape[0])
    for start in range(0, z.shape[1], block):
        part = z[:, start : start + block]
        total -= (nu + part.shape[1]) / 2 * np.log1p((part**2).sum(axis=1) / (nu * s2))
    return total


def t_claim(
    eps: float, actual: float, sensitivity: str, assumptions: tuple[str, ...], caveats: tuple[str, ...]
) -> PrivacyGuarantee:
    """The per-block pure-LDP claim ``eps`` of a t mechanism whose own epsilon is ``actual``."""
    return PrivacyGuarantee(
        epsilon=eps,
        delta=0.0,
        relation=REPLACE_ONE,
        unit="one 2-coordinate block of the update",
        sensitivity=sensitivity,
        assumptions=assumptions,
        caveats=(
            *caveats,
            "the claim covers one block; an update of M blocks has independent noise per block, so its "
            "privacy loss can reach M times the block's",
            _PER_ROUND_CAVEAT,
            _FLOAT_NOISE_CAVEAT,
        ),
        flags={CLAIM_EXCEEDED} if actual > eps * (1 + 1e-9) else set(),
    )


@register
class TDist(_AdditiveNoise):
    """Multivariate t mechanism (JoPEQ's FL+t-dist): clip the update to l2 norm ``clip``, cut it into
    contiguous pairs (the last zero-padded), add iid t_nu(0, s2 I_2) to each pair, send float32.

    A pair of the clipped update moves by at most D = 2 clip when the update is replaced, so each pair is
    eps-LDP with eps from eq. (11) at Delta = 2 clip / sqrt(s2) (``true_epsilon``); with the default
    nu = s2 = 0 the minimum-variance pair for ``eps`` is used and the two agree.
    """

    name = "t-dist"
    summary = "l2 clipping + bivariate t noise per coordinate pair, added by the client (LDP baseline)"
    params_spec = (*T_NOISE_PARAMS, positive_float("clip", 1.0, "l2 clipping norm of the update"))

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        p = self.params
        self.nu, self.s2 = resolve_t_noise(p["eps"], p["nu"], p["s2"], 2 * p["clip"])

    @property
    def variance(self) -> float:
        """Per-coordinate variance nu s2 / (nu - 2) of the noise."""
        return self.nu * self.s2 / (self.nu - 2)

    def true_epsilon(self) -> float:
        """Eq. (11) for this (nu, s2) and D = 2 clip: the exact per-block eps of the noise that is added."""
        return t_epsilon(self.nu, self.s2, 2 * self.params["clip"])

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        return clip_l2(x, self.params["clip"])

    def _noise(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return sample_t(-(-n // 2), 2, self.nu, self.s2, gen).reshape(-1)[:n]

    def tiling(self) -> Tiling:
        return Tiling(
            block=2, for_copies=rescaled_clip(self, 2, nu=self.nu, s2=self.s2),
            why="iid t noise per pair; the l2 clip of B copies is rescaled to sqrt(B) clip, (nu, s2) pinned",
        )  # fmt: skip

    def output_log_density(self) -> LogDensity:
        """Per pair z = y - clip(x) ~ t_nu(0, s2 I_2) (``t_blocks_logpdf``)."""
        clip = self.params["clip"]
        return lambda y, x: t_blocks_logpdf(y - clipped_input(x, clip, "l2"), self.nu, self.s2, 2)

    def guarantee(self) -> PrivacyGuarantee:
        clip, eps = self.params["clip"], self.params["eps"]
        return t_claim(
            eps,
            self.true_epsilon(),
            f"l2 clip {clip}",
            (
                f"the whole update is clipped to l2 norm {clip:g}, so replacing it moves a pair by <= {2 * clip:g}",
                _PRIVATE_NOISE,
            ),
            (f"t noise nu = {self.nu:.4g}, s2 = {self.s2:.4g}: eq. (11) gives eps = {self.true_epsilon():.4g}",),
        )
