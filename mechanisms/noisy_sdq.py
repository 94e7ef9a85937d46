"""Separate baselines: privacy noise added by the client, then an independent SDQ (FL+Gaussian+SDQ,
FL+Laplace+SDQ of CEPAM; FL+t-dist+SDQ(L = 2) of JoPEQ).

x -> y = clip(x) + noise (the noise mechanism, private stream) -> SDQ of y (shared dither, independent of
x and of the noise) -> x_hat = y + e. Without overload the total error is noise + e, e ~ Unif(Delta P0)
independent of both (JoPEQ Theorem II.5), so its variance is the sum of the two. The quantizer only
post-processes y with randomness independent of x, so the noise mechanism's guarantee carries over
unchanged (overloads included); it adds no privacy of its own, since the server knows the dither.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, ClassVar

import dp_accounting
import numpy as np
import torch
from scipy.special import log_ndtr

from auditkit.mechanisms.additive import Gaussian, Laplace, _AdditiveNoise, clipped_input
from auditkit.mechanisms.base import Mechanism, zero_or_above
from auditkit.mechanisms.capabilities import AuditSetting, LogDensity, Tiling, rescaled_clip
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.laplace_uniform import laplace_uniform_logpdf
from auditkit.mechanisms.message import Message
from auditkit.mechanisms.registry import register
from auditkit.mechanisms.sdq import SDQ, HexagonalSDQ, _FiniteSDQ
from auditkit.mechanisms.tdist import TDist

__all__ = ["GaussianSDQ", "LaplaceSDQ", "TDistSDQ", "gaussian_uniform_logpdf"]


def gaussian_uniform_logpdf(z: np.ndarray, sigma: float, width: float) -> np.ndarray:
    """ln of the density of N(0, sigma^2) + Unif(-w/2, w/2) at z, up to -ln w: ln[Phi(a) - Phi(b)] with
    a = (w/2 - |z|)/sigma > b = (-w/2 - |z|)/sigma (symmetry puts both in the lower tail, where
    ``log_ndtr`` is accurate), written ln Phi(a) + ln(1 - exp(ln Phi(b) - ln Phi(a)))."""
    z = np.abs(z)
    log_a = log_ndtr((width / 2 - z) / sigma)
    log_b = log_ndtr((-width / 2 - z) / sigma)
    return log_a + np.log(-np.expm1(log_b - log_a))

_QUANTIZER_PARAMS = ("bits", "support", "compat")


class _NoisySDQ(Mechanism):
    """``noise_class``'s perturbation followed by ``quantizer_class``'s SDQ; parameters are the union."""

    noise_class: ClassVar[type[_AdditiveNoise]]
    quantizer_class: ClassVar[type[_FiniteSDQ]]

    def __init__(self, **params: Any) -> None:
        super().__init__(**params)
        noise_names = {p.name for p in self.noise_class.params_spec}
        self.noise = self.noise_class(
            private_seed=self.private_seed, **{k: v for k, v in self.params.items() if k in noise_names}
        )
        self.quantizer = self.quantizer_class(**self._quantizer_params())

    def _quantizer_params(self) -> dict[str, Any]:
        return {k: self.params[k] for k in _QUANTIZER_PARAMS}

    @property
    def last_overloads(self) -> int | None:
        """Overloads of the latest encode (also in the message header)."""
        return self.quantizer.last_overloads

    def encode(self, x: torch.Tensor, seed: int) -> Message:
        return self.quantizer.encode(self.noise.perturb(x, seed), seed)

    def decode(self, enc: Message, seed: int) -> torch.Tensor:
        return self.quantizer.decode(enc, seed)

    def _pinned(self) -> dict[str, Any]:
        """Derived parameters that depend on clip, kept at this instance's values when the clip is rescaled."""
        return {}

    def tiling(self) -> Tiling:
        p = 2 if self.clip_norm == "l2" else 1
        block = max(self.noise.tiling().block, self.quantizer.lattice.dimension)
        return Tiling(
            block=block, for_copies=rescaled_clip(self, p, **self._pinned()),
            why=f"noise and shared dither iid per block of {block}, overloads per block; the {self.clip_norm} "
                f"clip of B copies is rescaled to B^(1/{p}) clip",
        )  # fmt: skip

    def audit_setting(self) -> AuditSetting:
        return self.noise.audit_setting()

    def dp_event(self) -> dp_accounting.DpEvent:
        """The noise's event: the quantizer is post-processing."""
        return self.noise.dp_event()

    def guarantee(self) -> PrivacyGuarantee:
        claim = self.noise.guarantee()
        return dataclasses.replace(
            claim,
            caveats=(
                *claim.caveats,
                f"the {self.quantizer.name} step after the noise is post-processing with a dither independent of x: "
                "it keeps the noise's guarantee and adds none (the server knows the dither)",
            ),
        )


@register
class GaussianSDQ(_NoisySDQ):
    """``gaussian`` (l2 clip, N(0, sigma^2 I)) then ``sdq``: error N(0, sigma^2) + Unif(-Delta/2, Delta/2)."""

    name = "gaussian+sdq"
    summary = "l2 clipping + Gaussian noise, then independent scalar SDQ (separate baseline)"
    params_spec = Gaussian.params_spec + SDQ.params_spec
    noise_class = Gaussian
    quantizer_class = SDQ
    message_type = SDQ.message_type
    clip_norm = "l2"
    reference_params = {"sigma": 1.0, "clip": 0.5, "support": 8.0}  # no overload beyond 1e-6 per coordinate

    def output_log_density(self) -> LogDensity:
        """Per coordinate y - clip(x) ~ N(0, sigma^2) + Unif(+-Delta/2) without overload."""
        sigma, clip, step = self.params["sigma"], self.params["clip"], self.quantizer.step
        return lambda y, x: gaussian_uniform_logpdf(y - clipped_input(x, clip, "l2"), sigma, step).sum(axis=1)


@register
class LaplaceSDQ(_NoisySDQ):
    """``laplace`` (l1 clip, iid Laplace(scale)) then ``sdq``: error Laplace(scale) + Unif(-Delta/2, Delta/2)."""

    name = "laplace+sdq"
    summary = "l1 clipping + Laplace noise, then independent scalar SDQ (separate baseline)"
    params_spec = Laplace.params_spec + SDQ.params_spec
    noise_class = Laplace
    quantizer_class = SDQ
    message_type = SDQ.message_type
    clip_norm = "l1"
    reference_params = {"scale": 1.0, "clip": 0.5, "support": 16.0}  # no overload beyond 1e-6 per coordinate

    def output_log_density(self) -> LogDensity:
        """Per coordinate y - clip(x) ~ Laplace(b) + Unif(+-Delta/2) without overload."""
        scale, clip, step = self.params["scale"], self.params["clip"], self.quantizer.step
        return lambda y, x: laplace_uniform_logpdf(y - clipped_input(x, clip, "l1"), scale, step).sum(axis=1)


@register
class TDistSDQ(_NoisySDQ):
    """``t-dist`` (l2 clip, bivariate t per pair) then ``sdq-hex`` on the same pairs: error
    t_nu(0, s2 I) + Unif(Delta hexagon) per pair, per-coordinate variance nu s2/(nu - 2) + (5/54) Delta^2.

    support = 0 means 1.5 sqrt(clip^2 + nu s2/(nu - 2)): the JoPEQ code's 1.5 sqrt(1 + nu s2/(nu - 2)),
    whose 1 is the radius of the (scaled) input, with the clip as that radius.
    """

    name = "t-dist+sdq"
    summary = "l2 clipping + bivariate t noise, then independent hexagonal-lattice SDQ (separate baseline, L = 2)"
    params_spec = (
        *TDist.params_spec,
        HexagonalSDQ.params_spec[0],
        zero_or_above("support", 0, "range radius gamma of the pairs; 0: 1.5 sqrt(clip^2 + nu s2/(nu - 2))"),
        HexagonalSDQ.params_spec[2],
    )
    noise_class = TDist
    quantizer_class = HexagonalSDQ
    message_type = HexagonalSDQ.message_type
    clip_norm = "l2"

    def _pinned(self) -> dict[str, Any]:
        return {"nu": self.noise.nu, "s2": self.noise.s2, "support": self.quantizer.params["support"]}

    def _quantizer_params(self) -> dict[str, Any]:
        params = super()._quantizer_params()
        params["support"] = params["support"] or 1.5 * math.sqrt(self.params["clip"] ** 2 + self.noise.variance)
        return params
