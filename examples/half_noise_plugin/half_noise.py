"""An example auditkit plugin with a deliberate bug: it adds HALF the noise its claim assumes.

Two mechanisms, written as a user writes a mechanism of their own:

* ``half-noise-laplace``: clips the update to l1 norm ``clip``, claims (2 clip / scale)-DP like the Laplace
  mechanism, but adds Laplace(scale / 2): its true epsilon is twice the claim;
* ``half-noise-gaussian``: clips to l2 norm ``clip``, claims the analytic Gaussian epsilon of ``sigma``, but adds
  N(0, (sigma / 2)^2): at sigma = 2, clip = 0.5 it claims 1.99 and is really 4.38-DP.

Each declares what an audit needs to know (``auditkit.mechanisms.capabilities``): how it can be sampled in bulk, where its
claim is tested, its output density (as the author believes it to be: a wrong model only weakens a test), its
one-round ``dp_accounting`` event, and -- because the bug is deliberate -- the epsilon of the noise it really adds
(``true_epsilon``), which makes it a known-exceeded claim in ``auditkit.attacks.soundness``. Load it with ``--plugin examples/half_noise_plugin/half_noise.py``, with
``plugins = ["half_noise.py"]`` in a config beside it, or install this folder (``pip install
examples/half_noise_plugin``): its ``pyproject.toml`` registers the module under the entry-point group
``auditkit.mechanisms``.
"""

from __future__ import annotations

import abc

import dp_accounting
import numpy as np
import torch

from auditkit import mechanisms
from auditkit.mechanisms import AuditSetting, FloatMessage, LogDensity, Mechanism, PrivacyGuarantee, Tiling
from auditkit.mechanisms.additive import analytic_gaussian_epsilon, clip_l1, clip_l2, clipped_input, laplace_noise
from auditkit.mechanisms.base import as_update, open_unit_interval, positive_float
from auditkit.mechanisms.capabilities import rescaled_clip
from auditkit.mechanisms.guarantee import REPLACE_ONE
from auditkit.mechanisms.randomness import private_generator


class _HalfNoise(Mechanism):
    """Clip, add noise of half the claimed scale (the bug), send float32."""

    message_type = FloatMessage

    @abc.abstractmethod
    def _clip(self, x: torch.Tensor) -> torch.Tensor: ...

    @abc.abstractmethod
    def _noise(self, n: int, gen: torch.Generator) -> torch.Tensor: ...

    def encode(self, x: torch.Tensor, seed: int) -> FloatMessage:
        clipped = self._clip(as_update(x))
        noisy = clipped + self._noise(clipped.numel(), private_generator(self.private_seed, seed, "noise"))
        return FloatMessage(noisy.numpy().astype(np.float32))

    def decode(self, enc: FloatMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        return enc.to_tensor()

    def tiling(self) -> Tiling:
        p = 2 if self.clip_norm == "l2" else 1
        return Tiling(block=1, for_copies=rescaled_clip(self, p),
                      why=f"iid noise per coordinate; the {self.clip_norm} clip of B copies is rescaled to B^(1/{p}) clip")

    def audit_setting(self) -> AuditSetting:
        return AuditSetting.clipped(self.params["clip"], self.clip_norm)


@mechanisms.register
class HalfNoiseLaplace(_HalfNoise):
    name = "half-noise-laplace"
    summary = "example plugin (buggy): l1 clip + Laplace noise of HALF the scale its claim assumes"
    clip_norm = "l1"
    params_spec = (
        positive_float("scale", 1.0, "Laplace scale b the claim assumes (the bug: b / 2 is added)"),
        positive_float("clip", 0.5, "l1 clipping norm of the update"),
    )
    reference_params = {"scale": 1.0, "clip": 0.5}  # claims eps = 1; really 2

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        return clip_l1(x, self.params["clip"])

    def _noise(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return laplace_noise(n, self.params["scale"] / 2, gen)  # BUG: the claim assumes scale, not scale / 2

    def output_log_density(self) -> LogDensity:
        scale, clip = self.params["scale"], self.params["clip"]
        return lambda y, x: -np.abs(y - clipped_input(x, clip, "l1")).sum(axis=1) / scale

    def dp_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.LaplaceDpEvent(self.params["scale"] / self.params["clip"])

    def true_epsilon(self) -> float:
        """The noise really added: Laplace(scale / 2) for the shift 2 clip, so eps = 4 clip / scale."""
        return 4 * self.params["clip"] / self.params["scale"]

    def guarantee(self) -> PrivacyGuarantee:
        clip, scale = self.params["clip"], self.params["scale"]
        return PrivacyGuarantee(epsilon=2 * clip / scale, delta=0.0, relation=REPLACE_ONE,
                                sensitivity=f"l1 clip {clip}",
                                assumptions=(f"Laplace noise of scale {scale:g} on an update of l1 norm <= {clip:g}",))


@mechanisms.register
class HalfNoiseGaussian(_HalfNoise):
    name = "half-noise-gaussian"
    summary = "example plugin (buggy): l2 clip + Gaussian noise of HALF the sigma its claim assumes"
    clip_norm = "l2"
    params_spec = (
        positive_float("sigma", 2.0, "noise std the claim assumes (the bug: sigma / 2 is added)"),
        positive_float("clip", 0.5, "l2 clipping norm of the update"),
        open_unit_interval("delta", 1e-5, "delta at which the epsilon of the claim is stated"),
    )
    reference_params = {"sigma": 2.0, "clip": 0.5}  # claims eps = 1.99; really 4.38

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        return clip_l2(x, self.params["clip"])

    def _noise(self, n: int, gen: torch.Generator) -> torch.Tensor:
        return self.params["sigma"] / 2 * torch.randn(n, generator=gen, dtype=torch.float64)  # BUG: sigma / 2

    def output_log_density(self) -> LogDensity:
        sigma, clip = self.params["sigma"], self.params["clip"]
        return lambda y, x: -((y - clipped_input(x, clip, "l2")) ** 2).sum(axis=1) / (2 * sigma**2)

    def dp_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.GaussianDpEvent(self.params["sigma"] / self.params["clip"])

    def true_epsilon(self) -> float:
        """The noise really added: N(0, (sigma / 2)^2), the analytic Gaussian epsilon of sigma / 2."""
        return analytic_gaussian_epsilon(2 * self.params["clip"], self.params["sigma"] / 2, self.params["delta"])

    def guarantee(self) -> PrivacyGuarantee:
        clip, sigma, delta = self.params["clip"], self.params["sigma"], self.params["delta"]
        return PrivacyGuarantee(epsilon=analytic_gaussian_epsilon(2 * clip, sigma, delta), delta=delta,
                                relation=REPLACE_ONE, sensitivity=f"l2 clip {clip}",
                                assumptions=(f"N(0, {sigma:g}^2) noise on an update of l2 norm <= {clip:g}",))
