"""Additive-noise baselines: clip the update, add Gaussian or Laplace noise on the client, send float32.

The noise comes from the private stream (``private_seed``, ``seed``, "noise"): the server cannot remove
it. Both claims are per round for one client's whole update under replace-one neighbours.
"""

from __future__ import annotations

import abc
import math

import dp_accounting
import numpy as np
import torch
from scipy.optimize import brentq
from scipy.special import log_ndtr

from auditkit.mechanisms.base import Mechanism, as_update, open_unit_interval, positive_float
from auditkit.mechanisms.capabilities import AuditSetting, LogDensity, Tiling, rescaled_clip
from auditkit.mechanisms.densities import ClippedGaussian, ClippedLaplace
from auditkit.mechanisms.guarantee import REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.message import FloatMessage
from auditkit.mechanisms.randomness import private_generator
from auditkit.mechanisms.registry import register
from auditkit.mechanisms.tradeoff import GaussianTradeOff, LaplaceTradeOff

__all__ = ["Gaussian", "Laplace", "analytic_gaussian_epsilon", "clip_l1", "clip_l2", "clipped_input", "laplace_noise"]

_FLOAT_NOISE_CAVEAT = (
    "noise is sampled in floating point from torch's CPU generator (Mersenne Twister): neither an exact "
    "sampler nor a cryptographic one (see Mironov 2012 on floating-point attacks)"
)
_PER_ROUND_CAVEAT = "one round only: composition over rounds and sampling amplification are not included"
_PRIVATE_NOISE = "the server does not know private_seed (None: OS entropy), so it cannot regenerate the noise"


def clip_l2(x: torch.Tensor, clip: float) -> torch.Tensor:
    """x / max(1, ||x||_2 / clip): the nearest point of the l2 ball of radius ``clip``."""
    return x / max(1.0, torch.linalg.vector_norm(x, 2).item() / clip)


def clip_l1(x: torch.Tensor, clip: float) -> torch.Tensor:
    """x / max(1, ||x||_1 / clip): rescaled into the l1 ball of radius ``clip``."""
    return x / max(1.0, torch.linalg.vector_norm(x, 1).item() / clip)


def laplace_noise(n: int, scale: float, gen: torch.Generator) -> torch.Tensor:
    """n iid Laplace(0, scale) values (float64) drawn from ``gen`` as scale * (E1 - E2), E1, E2 iid Exp(1)."""
    exponentials = torch.empty(2, n, dtype=torch.float64).exponential_(generator=gen)
    return scale * (exponentials[0] - exponentials[1])


def analytic_gaussian_epsilon(sensitivity: float, sigma: float, delta: float) -> float:
    """Smallest eps such that adding N(0, sigma^2 I) to a query of l2 sensitivity D is (eps, delta)-DP.

    Analytic Gaussian mechanism (Balle & Wang, ICML 2018, Theorem 8): the mechanism is (eps, delta)-DP
    iff  Phi(D/(2 sigma) - eps sigma/D) - e^eps Phi(-D/(2 sigma) - eps sigma/D) <= delta.
    The left side decreases in eps; its root is found by Brent's method on its logarithm, written as
    log Phi(a) + log(1 - exp(eps + log Phi(b) - log Phi(a))) so that e^eps never overflows.
    Returns 0.0 when the condition already holds at eps = 0.
    """
    mu = sensitivity / sigma

    def log_delta(eps: float) -> float:
        log_pa = log_ndtr(mu / 2 - eps / mu)
        log_pb = log_ndtr(-mu / 2 - eps / mu)
        # The exponent is < 0 mathematically; the cap keeps rounding from reaching log(0).
        return log_pa + math.log(-math.expm1(min(eps + log_pb - log_pa, -1e-300)))

    target = math.log(delta)
    if log_delta(0.0) <= target:
        return 0.0
    high = 1.0
    while log_delta(high) > target:
        high *= 2.0
    return brentq(lambda eps: log_delta(eps) - target, 0.0, high, xtol=1e-12, rtol=1e-12)


def clipped_input(x: np.ndarray, clip: float, norm: str) -> np.ndarray:
    """The NumPy input x clipped as the mechanisms clip it (``clip_l2`` or ``clip_l1``), for output densities."""
    return (clip_l2 if norm == "l2" else clip_l1)(torch.from_numpy(x), clip).numpy()


class _AdditiveNoise(Mechanism):
    """Clip, add private noise, send the result as float32 (32 bits per coordinate + 5-byte header).

    Audit: coordinates are independent given the clipped update, so B copies tile in one call on a copy whose
    clip is rescaled to B^(1/p) clip (``rescaled_clip``); the claim is tested at replace-one pairs 2 clip apart in
    the clip ball (and beyond it).
    """

    message_type = FloatMessage
    clip_norm = "l2"

    def tiling(self) -> Tiling:
        p = 2 if self.clip_norm == "l2" else 1
        return Tiling(
            block=1, for_copies=rescaled_clip(self, p),
            why=f"iid noise per coordinate; the {self.clip_norm} clip of B copies is rescaled to B^(1/{p}) clip",
        )  # fmt: skip

    def audit_setting(self) -> AuditSetting:
        return AuditSetting.clipped(self.params["clip"], self.clip_norm)

    @abc.abstractmethod
    def _clip(self, x: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def _noise(self, n: int, gen: torch.Generator) -> torch.Tensor: ...

    def perturb(self, x: torch.Tensor, seed: int) -> torch.Tensor:
        """The clipped update plus the private noise, in float64 (what ``encode`` rounds to float32)."""
        clipped = self._clip(as_update(x))
        return clipped + self._noise(clipped.numel(), private_generator(self.private_seed, seed, "noise"))

    def encode(self, x: torch.Tensor, seed: int) -> FloatMessage:
        return FloatMessage(self.perturb(x, seed).numpy().astype(np.float32))

    def decode(self, enc: FloatMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        return enc.to_tensor()


@register
class Gaussian(_AdditiveNoise):
    """Gaussian mechanism: x <- x / max(1, ||x||_2 / clip), send x + N(0, sigma^2 I).

    Replacing one client's update moves the clipped update by at most 2 * clip in l2, so one round is
    (eps, delta)-DP with eps = ``analytic_gaussian_epsilon(2 * clip, sigma, delta)`` (Balle & Wang 2018).
    """

    name = "gaussian"
    noise_param = "sigma"
    summary = "l2 clipping + Gaussian noise added by the client (DP baseline)"
    reference_params = {"sigma": 1.0, "clip": 0.5}  # shift 2 clip = 1 with sigma 1: eps 4.38 at delta 1e-5
    params_spec = (
        positive_float("sigma", 0.1, "standard deviation of the noise per coordinate"),
        positive_float("clip", 1.0, "l2 clipping norm of the update"),
        open_unit_interval("delta", 1e-5, "delta at which the epsilon of the guarantee is stated"),
    )

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        return clip_l2(x, self.params["clip"])

    def _noise(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return self.params["sigma"] * torch.randn(n, generator=gen, dtype=torch.float64)

    def tradeoff(self) -> GaussianTradeOff:
        """mu-GDP with mu = 2 clip / sigma: replacing the update moves it by <= 2 clip in l2 (Dong, Roth & Su 2022,
        Thm. 2.7), the curve of which the analytic (eps, delta) claim is one point."""
        return GaussianTradeOff(2 * self.params["clip"] / self.params["sigma"])

    def output_log_density(self) -> LogDensity:
        """y - clip(x) ~ N(0, sigma^2 I): ln p = -||y - clip(x)||^2 / (2 sigma^2) + const."""
        return ClippedGaussian(self.params["sigma"], self.params["clip"], "l2")

    def dp_event(self) -> dp_accounting.DpEvent:
        """GaussianDpEvent(sigma / clip) under REPLACE_ONE (dp_accounting: replacing moves the input by 2 clip)."""
        return dp_accounting.GaussianDpEvent(self.params["sigma"] / self.params["clip"])

    def guarantee(self) -> PrivacyGuarantee:
        clip, sigma, delta = self.params["clip"], self.params["sigma"], self.params["delta"]
        return PrivacyGuarantee(
            epsilon=analytic_gaussian_epsilon(2 * clip, sigma, delta),
            delta=delta,
            relation=REPLACE_ONE,
            sensitivity=f"l2 clip {clip}",
            assumptions=(
                f"the whole update is clipped to l2 norm {clip:g}, so replacing it moves the input by <= {2 * clip:g}",
                _PRIVATE_NOISE,
            ),
            caveats=(_PER_ROUND_CAVEAT, _FLOAT_NOISE_CAVEAT),
        )


@register
class Laplace(_AdditiveNoise):
    """Laplace mechanism: x <- x / max(1, ||x||_1 / clip), send x + iid Laplace(scale) noise.

    Replacing one client's update moves the clipped update by at most 2 * clip in l1, so one round is
    eps-DP with eps = 2 * clip / scale (Dwork, McSherry, Nissim & Smith 2006); the noise is drawn by
    ``laplace_noise``. The clip is l1 (not l2) because l1 is the norm the Laplace
    bound needs: an l2 clip would leave the l1 sensitivity up to sqrt(dimension) times larger.
    """

    name = "laplace"
    noise_param = "scale"
    summary = "l1 clipping + Laplace noise added by the client (pure DP baseline)"
    clip_norm = "l1"
    reference_params = {"scale": 1.0, "clip": 0.5}  # eps = 2 clip / scale = 1
    params_spec = (
        positive_float("scale", 0.1, "Laplace scale b of the noise per coordinate (variance 2 b^2)"),
        positive_float("clip", 1.0, "l1 clipping norm of the update"),
    )

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        return clip_l1(x, self.params["clip"])

    def _noise(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return laplace_noise(n, self.params["scale"], gen)

    def tradeoff(self) -> LaplaceTradeOff:
        """The Laplace curve of eps = 2 clip / scale (Dong, Roth & Su 2022; valid over the l1 ball, see
        ``auditkit.mechanisms.tradeoff.LaplaceTradeOff``)."""
        return LaplaceTradeOff(2 * self.params["clip"] / self.params["scale"])

    def output_log_density(self) -> LogDensity:
        """y - clip(x) iid Laplace(b): ln p = -||y - clip(x)||_1 / b + const."""
        return ClippedLaplace(self.params["scale"], self.params["clip"], "l1")

    def dp_event(self) -> dp_accounting.DpEvent:
        """LaplaceDpEvent(scale / clip) under REPLACE_ONE (replacing moves the input by 2 clip in l1)."""
        return dp_accounting.LaplaceDpEvent(self.params["scale"] / self.params["clip"])

    def guarantee(self) -> PrivacyGuarantee:
        clip, scale = self.params["clip"], self.params["scale"]
        return PrivacyGuarantee(
            epsilon=2 * clip / scale,
            delta=0.0,
            relation=REPLACE_ONE,
            sensitivity=f"l1 clip {clip}",
            assumptions=(
                f"the whole update is clipped to l1 norm {clip:g}, so replacing it moves the input by <= {2 * clip:g}",
                _PRIVATE_NOISE,
            ),
            caveats=(_PER_ROUND_CAVEAT, _FLOAT_NOISE_CAVEAT),
        )
