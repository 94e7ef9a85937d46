"""Laplace mechanisms with data-dependent noise, floors and clamps, as auditkit plugin mechanisms.

Each clips the update to l1 norm ``clip`` and claims eps-DP for the Laplace scale b = 2 clip / eps (replace-one:
neighbours are 2 clip apart in l1; Dwork, McSherry, Nissim & Smith, TCC 2006), y = x + Lap(b)^d:

* correct: ``cat-laplace`` (the mechanism itself); ``cat-laplace-clamped-output`` clamps the OUTPUT to [-R, R] and
  ``cat-laplace-rounded`` rounds it to a grid, both after the noise: post-processing keeps eps (Dwork & Roth 2014,
  Prop. 2.1), though the output then has atoms (at +-R, and on the grid);
* broken, the noise depends on the data (Nissim, Raskhodnikova & Smith, STOC 2007, on why a data-dependent noise
  scale leaks): ``cat-laplace-skip-zero`` sends an all-zero update without noise (an atom at 0 for x = 0, none for
  x != 0); ``cat-laplace-norm-scaled`` scales the noise by ||x||_1 / clip (no noise as x -> 0); ``cat-laplace-atom``
  releases 0 exactly with probability ``atom`` when x_1 > 0 (an atom of mass 0.3 on one side only);
* broken, a floor on the noise: ``cat-laplace-clamped-noise`` clamps the NOISE to [-t, t] (truncated noise: outputs
  beyond x0 + t are impossible from x0, possible from x1).

All of them are infinite-eps except the correct ones (a set of outputs has probability 0 under one input of a
pair and a positive probability under the other). The audit setting is the l1 ball of radius ``clip`` in one
coordinate: the pairs -clip vs +clip ("axis"), 0 vs clip ("zero-vs-axis"), and inputs beyond the clip.
"""

from __future__ import annotations

import abc
import math

import numpy as np
import torch

from auditkit import mechanisms
from auditkit.mechanisms import AuditSetting, BatchSampling, FloatMessage, LogDensity, Mechanism, PrivacyGuarantee
from auditkit.mechanisms.additive import clipped_input, laplace_noise
from auditkit.mechanisms.base import as_update, open_unit_interval, positive_float
from auditkit.mechanisms.guarantee import REPLACE_ONE
from auditkit.mechanisms.randomness import private_generator

_CLAIM_PARAMS = (
    positive_float("epsilon", 1.0, "the epsilon claimed: the Laplace scale is b = 2 clip / epsilon"),
    positive_float("clip", 0.5, "l1 clipping norm of the update"),
)


class _Laplace(Mechanism):
    """Clip in l1, ``_release`` the clipped rows (B, d) with noise of scale b; float32 message."""

    message_type = FloatMessage
    clip_norm = "l1"
    params_spec = _CLAIM_PARAMS

    @property
    def scale(self) -> float:
        return 2 * self.params["clip"] / self.params["epsilon"]

    @abc.abstractmethod
    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Clipped rows x (B, d) float64 -> outputs (B, d) float64."""

    def _sample(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        norms = x.abs().sum(dim=1, keepdim=True)
        clipped = x / torch.clamp(norms / self.params["clip"], min=1.0)
        return self._release(clipped, gen).to(torch.float32).to(torch.float64)  # as the float32 message carries it

    def _noise(self, like: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return laplace_noise(like.numel(), self.scale, gen).reshape(like.shape)

    def encode(self, x: torch.Tensor, seed: int) -> FloatMessage:
        y = self._sample(as_update(x).unsqueeze(0), private_generator(self.private_seed, seed, "noise"))
        return FloatMessage(y[0].numpy().astype(np.float32))

    def decode(self, enc: FloatMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        return enc.to_tensor()

    def batch_sampling(self) -> BatchSampling:
        def sample(x: torch.Tensor, count: int, seed: int) -> torch.Tensor:
            return self._sample(as_update(x).expand(count, -1), private_generator(self.private_seed, seed, "noise"))

        return BatchSampling(sample, why="the same sampler as encode on B rows, every row with its own noise")

    def audit_setting(self) -> AuditSetting:
        return AuditSetting.clipped(self.params["clip"], "l1", dimension=1)

    def output_log_density(self) -> LogDensity:
        """The density the claim assumes (the Laplace mechanism's), as its author believes it to be."""
        scale, clip = self.scale, self.params["clip"]
        return lambda y, x: -np.abs(y - clipped_input(x, clip, "l1")).sum(axis=1) / scale

    def guarantee(self) -> PrivacyGuarantee:
        clip, eps = self.params["clip"], self.params["epsilon"]
        return PrivacyGuarantee(epsilon=eps, delta=0.0, relation=REPLACE_ONE, sensitivity=f"l1 clip {clip}",
                                assumptions=(f"Laplace noise of scale 2 clip / eps = {self.scale:g} per coordinate",))


class _Broken(_Laplace):
    def true_epsilon(self) -> float:
        """Infinite: some set of outputs has probability 0 under one input of a pair, > 0 under the other."""
        return math.inf


@mechanisms.register
class Laplace(_Laplace):
    """The Laplace mechanism (Dwork et al., TCC 2006): y = clip(x) + Lap(2 clip / eps)^d; eps-DP."""

    name = "cat-laplace"
    summary = "catalogue (correct): the Laplace mechanism"

    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return x + self._noise(x, gen)


@mechanisms.register
class LaplaceClampedOutput(_Laplace):
    """y = clamp(clip(x) + Lap(b), -R, R): the clamp after the noise is post-processing, so eps-DP (Dwork & Roth
    2014, Prop. 2.1). The atoms at +-R have probabilities in the ratio e^eps at most (exactly e^eps at the axis
    pair when R >= clip)."""

    name = "cat-laplace-clamped-output"
    summary = "catalogue (correct): Laplace, output clamped to [-R, R] after the noise"
    params_spec = (*_CLAIM_PARAMS, positive_float("output_clamp", 1.0, "R: the output is clamped to [-R, R]"))

    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return (x + self._noise(x, gen)).clamp(-self.params["output_clamp"], self.params["output_clamp"])


@mechanisms.register
class LaplaceRounded(_Laplace):
    """y = g round((clip(x) + Lap(b)) / g): rounding after the noise is post-processing, so eps-DP; every output
    is an atom on the grid g Z."""

    name = "cat-laplace-rounded"
    summary = "catalogue (correct): Laplace, output rounded to a grid after the noise"
    params_spec = (*_CLAIM_PARAMS, positive_float("grid", 0.5, "g: the output is rounded to the grid g Z"))

    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        return torch.round((x + self._noise(x, gen)) / self.params["grid"]) * self.params["grid"]


@mechanisms.register
class LaplaceSkipZero(_Broken):
    """Sends an all-zero (clipped) update as is, without noise -- a client with nothing to send. P(y = 0 | x = 0)
    = 1 and P(y = 0 | x != 0) = 0: infinite eps (the "zero-vs-axis" pair)."""

    name = "cat-laplace-skip-zero"
    summary = "catalogue (broken): Laplace that skips the noise on an all-zero update"

    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        silent = (x == 0).all(dim=1, keepdim=True)
        return torch.where(silent, x, x + self._noise(x, gen))


@mechanisms.register
class LaplaceNormScaled(_Broken):
    """Noise of scale b ||clip(x)||_1 / clip, proportional to the update's norm: no noise at x = 0 (an atom at 0,
    as in ``cat-laplace-skip-zero``) and vanishing noise as x -> 0, so the ratio of densities is unbounded near 0."""

    name = "cat-laplace-norm-scaled"
    summary = "catalogue (broken): Laplace whose noise scale is proportional to ||x||_1"

    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        factor = x.abs().sum(dim=1, keepdim=True) / self.params["clip"]
        return x + factor * self._noise(x, gen)


@mechanisms.register
class LaplaceAtom(_Broken):
    """When x_1 > 0, releases 0 exactly with probability ``atom`` (else x + Lap(b)); never when x_1 <= 0. The
    output 0 has probability ``atom`` from x = +clip e_1 and 0 from x = -clip e_1: infinite eps ("axis" pair)."""

    name = "cat-laplace-atom"
    summary = "catalogue (broken): Laplace that releases 0 exactly with probability 0.3 when x_1 > 0"
    params_spec = (*_CLAIM_PARAMS, open_unit_interval("atom", 0.3, "probability of the exact release when x_1 > 0"))

    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        noisy = x + self._noise(x, gen)
        coin = torch.rand(x.shape[0], 1, generator=gen, dtype=torch.float64) < self.params["atom"]
        return torch.where(coin & (x[:, :1] > 0), torch.zeros_like(x), noisy)


@mechanisms.register
class LaplaceClampedNoise(_Broken):
    """y = clip(x) + clamp(Lap(b), -t, t): truncated noise. From x0 = -clip e_1 no output exceeds -clip + t; from
    x1 = +clip e_1 one does with probability P(Lap(b) > t - 2 clip) = e^(-(t - 2 clip) / b) / 2 (t >= 2 clip)."""

    name = "cat-laplace-clamped-noise"
    summary = "catalogue (broken): Laplace noise clamped to [-t, t] (truncated noise)"
    params_spec = (*_CLAIM_PARAMS, positive_float("noise_bound", 2.0, "t: the noise is clamped to [-t, t]"))

    def _release(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        t = self.params["noise_bound"]
        return x + self._noise(x, gen).clamp(-t, t)
