"""Floating-point and discrete noise: a Laplace sampler with a porous support, and the geometric mechanism.

* ``cat-laplace-coarse-uniform`` (broken): Mironov, "On Significance of the Least Significant Bits for Differential
  Privacy", CCS 2012, shows that the textbook sampler y = x + b s ln(u) (s a random sign, u uniform in (0, 1] as
  a double) has a porous support: the outputs reachable from x and from a neighbour x' differ, so an output tells
  them apart. His attack exploits 53-bit doubles; this is a coarsened version of the same effect, with u on the
  grid {1, ..., 2^bits} / 2^bits (bits = 12): each input has 2^(bits + 1) attainable outputs, and an output seen
  from x1 is almost never attainable from x0, so exact values repeat within an audit's budget. Infinite eps.
* ``cat-geometric`` (correct): the geometric (discrete Laplace) mechanism, Ghosh, Roughgarden & Sundararajan, "
  Universally Utility-Maximizing Privacy Mechanisms", STOC 2009: an integer input n in [-r, r] (x rounded to the
  nearest integer, then clamped), y = n + Z with P(Z = z) = (1 - a) / (1 + a) a^|z|, a = e^(-eps / (2r)); eps-DP
  for neighbours up to 2r apart. Every output is an atom, in the ratio e^(eps |n - n'| / (2r)) at most.
"""

from __future__ import annotations

import abc
import math

import numpy as np
import torch

from auditkit import mechanisms
from auditkit.mechanisms import AuditSetting, BatchSampling, FloatMessage, Mechanism, PrivacyGuarantee
from auditkit.mechanisms.base import as_update, int_range, positive_float
from auditkit.mechanisms.guarantee import REPLACE_ONE
from auditkit.mechanisms.randomness import private_generator


class _Float(Mechanism):
    """``_sample`` on B rows, shared by encode and the batch sampler; float32 message."""

    message_type = FloatMessage

    @abc.abstractmethod
    def _sample(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        """Rows x (B, d) float64 -> outputs (B, d) float64, one run of the mechanism per row."""

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


def coarse_laplace_noise(shape: tuple[int, ...], scale: float, bits: int, gen: torch.Generator) -> torch.Tensor:
    """b s ln(u) with s = +-1 and u = j / 2^bits, j uniform in {1, ..., 2^bits}: Laplace(b) on a coarse grid."""
    grid = 2**bits
    j = torch.randint(1, grid + 1, shape, generator=gen, dtype=torch.int64)
    sign = torch.randint(0, 2, shape, generator=gen, dtype=torch.int64) * 2 - 1
    return scale * sign.to(torch.float64) * torch.log(j.to(torch.float64) / grid)


@mechanisms.register
class LaplaceCoarseUniform(_Float):
    """y = clip(x) + b s ln(u), u on a grid of 2^bits points (Mironov 2012, coarsened: module docstring). Claims
    the Laplace mechanism's eps = 2 clip / b; its support is x + a finite set, different for x0 and x1: infinite."""

    name = "cat-laplace-coarse-uniform"
    summary = "catalogue (broken): Laplace from a uniform of few bits, a porous support (Mironov 2012, coarsened)"
    clip_norm = "l1"
    params_spec = (
        positive_float("epsilon", 1.0, "the epsilon claimed: the Laplace scale is b = 2 clip / epsilon"),
        positive_float("clip", 0.5, "l1 clipping norm of the update"),
        int_range("bits", 1, 52, 12, "bits of the uniform draw u"),
    )
    reference_params = {"epsilon": 1.0, "clip": 0.5, "bits": 12}

    def _sample(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        clip = self.params["clip"]
        clipped = x / torch.clamp(x.abs().sum(dim=1, keepdim=True) / clip, min=1.0)
        noise = coarse_laplace_noise(tuple(x.shape), 2 * clip / self.params["epsilon"], self.params["bits"], gen)
        return (clipped + noise).to(torch.float32).to(torch.float64)  # as the float32 message carries it

    def audit_setting(self) -> AuditSetting:
        return AuditSetting.clipped(self.params["clip"], "l1", dimension=1)

    def true_epsilon(self) -> float:
        return math.inf

    def guarantee(self) -> PrivacyGuarantee:
        clip, eps = self.params["clip"], self.params["epsilon"]
        return PrivacyGuarantee(epsilon=eps, delta=0.0, relation=REPLACE_ONE, sensitivity=f"l1 clip {clip}",
                                assumptions=(f"Laplace noise of scale {2 * clip / eps:g} per coordinate",))


def two_sided_geometric(shape: tuple[int, ...], alpha: float, gen: torch.Generator) -> torch.Tensor:
    """Z = G1 - G2, G iid geometric on {0, 1, ...} with P(G >= n) = alpha^n, drawn as floor(E / -ln alpha), E ~
    Exp(1): P(Z = z) = (1 - alpha) / (1 + alpha) alpha^|z|."""
    rate = -math.log(alpha)
    e = torch.empty(2, *shape, dtype=torch.float64).exponential_(generator=gen)
    g = torch.floor(e / rate)
    return g[0] - g[1]


@mechanisms.register
class Geometric(_Float):
    """The geometric mechanism (Ghosh et al. 2009; module docstring): n = clamp(round(x), -r, r), y = n + Z, Z
    two-sided geometric with alpha = e^(-eps / (2r)); eps-DP for replace-one within [-r, r]."""

    name = "cat-geometric"
    summary = "catalogue (correct): the geometric (discrete Laplace) mechanism on integer inputs"
    params_spec = (
        positive_float("epsilon", 1.0, "the epsilon claimed: alpha = exp(-epsilon / (2 range))"),
        int_range("range", 1, 10**6, 1, "r: the input is rounded to an integer and clamped to [-r, r]"),
    )
    reference_params = {"epsilon": 1.0, "range": 1}

    @property
    def alpha(self) -> float:
        return math.exp(-self.params["epsilon"] / (2 * self.params["range"]))

    def _sample(self, x: torch.Tensor, gen: torch.Generator) -> torch.Tensor:
        r = self.params["range"]
        n = torch.round(x).clamp(-r, r)
        return n + two_sided_geometric(tuple(x.shape), self.alpha, gen)

    def audit_setting(self) -> AuditSetting:
        r = self.params["range"]
        return AuditSetting(1, 2.0 * r, "l1", float(r), 1,
                            note=f"integers in [-{r}, {r}]: the pairs -r vs r and 0 vs r, both integer")

    def guarantee(self) -> PrivacyGuarantee:
        r, eps = self.params["range"], self.params["epsilon"]
        return PrivacyGuarantee(epsilon=eps, delta=0.0, relation=REPLACE_ONE,
                                sensitivity=f"l1 sensitivity {2 * r} (integers in [-{r}, {r}])",
                                assumptions=(f"two-sided geometric noise, alpha = {self.alpha:.4g}",))
