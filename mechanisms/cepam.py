"""CEPAM (Ling et al.; 000 and 003): clip the update, split it into sub-vectors, quantize them with LRSUQ.

Pipeline (003 Algorithms 1-3). Pre-processing, by ``compat``:

* ``none`` (003, default): clip, x <- x / max(1, ||x|| / clip) -- in l2 for ``cepam-gaussian`` (003 Algorithm 1
  step 12) and in l1 for ``cepam-laplace`` (the norm the Laplace bound needs; see ``CEPAMLaplace``);
* ``paper000`` (000 Algorithm 2): normalise, x <- clip x / ||x||_2, and send ||x|| as float32 side information;
  the server multiplies its output by ||x|| / clip.

Then x is zero-padded to N = ceil(m / n) contiguous sub-vectors of length n, each quantized by LRSUQ
(``auditkit.mechanisms.rsuq``) with the shared latent U and dithers of its own, and sent as (H, M)
(``auditkit.mechanisms.rsuq_coding``). The server outputs Y = beta(U) (M + V_H) per sub-vector and drops the padding.
With ``compat=none`` the error x_hat - clip(x) is exactly the target -- N(0, sigma^2 I) or iid Laplace(b) --
whatever x is (003 Lemma 11 with Lemma 14 / Lemma 15); with ``paper000`` it is ||x|| / clip times the target.
"""

from __future__ import annotations

import abc
import math

import dp_accounting
import numpy as np
import torch

from auditkit.mechanisms.additive import analytic_gaussian_epsilon, clip_l1, clip_l2
from auditkit.mechanisms.base import Mechanism, as_update, choice, int_range, open_unit_interval, positive_float
from auditkit.mechanisms.capabilities import AuditSetting, LogDensity, Tiling, refused, rescaled_clip
from auditkit.mechanisms.densities import ClippedGaussian, ClippedLaplace
from auditkit.mechanisms.guarantee import REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.lattice import from_blocks, to_blocks
from auditkit.mechanisms.registry import register
from auditkit.mechanisms.rsuq import GaussianTarget, LaplaceTarget, Target
from auditkit.mechanisms.rsuq_coding import RateReport, RSUQMessage, bits_bound, decode_message, encode_message, message_rate

__all__ = ["CEPAMGaussian", "CEPAMLaplace"]

TRUSTED_SERVER_CAVEAT = (
    "the server regenerates the latent U and the dithers from the shared seed: given U a sub-vector's error "
    "is uniform on a ball of known radius (and the rejected dithers depend on x), so no DP claim holds against "
    "the server itself (CEPAM's trusted-aggregator model, 003 Section III-D)"
)
FLOAT_SAMPLING_CAVEAT = (
    "the latent and the dithers are sampled in floating point from NumPy's PCG64 generator: neither an exact "
    "nor a cryptographic sampler"
)
WITHOUT_SEED = "observers of the decoded update without the shared seed (other clients, the released model)"
_PER_ROUND_CAVEAT = (
    "one round, one client's update: composition over rounds, the subsampling of local steps and the "
    "averaging over clients (003 Theorems 12 and 13) are not included"
)
_PAPER000_CAVEAT = (
    "compat=paper000: x is normalised to clip * x / ||x|| and ||x|| is sent in clear (float32); the decoded "
    "update is ||x|| / clip times the noisy normalised one, so the noise scales with ||x|| and ||x|| is "
    "revealed: the claim covers the normalised update only, not x (000 Algorithm 2)"
)
_COMPAT = ("none", "paper000")
_CODED_RANGE_COPIES = 2**12  # copies per tiled call: the clip is also the coding range of M
# The coder's range of M grows with clip / radius; the radius is the noise scale times a latent U with
# P(U < u) ~ u^2 / 2 near 0. Keeping the tiled clip below this many noise scales keeps u >= 1.4e-5 typical,
# so tiled calls code like single ones, even for weak noise on a large clip (scale 0.007 on an l1 clip of 50).
_CODED_RANGE_NOISE_SCALES = 6e4


class _CEPAM(Mechanism):
    """Shared pipeline; subclasses give the target, the clipping norm and the guarantee."""

    message_type = RSUQMessage

    @property
    @abc.abstractmethod
    def target(self) -> Target:
        """The LRSUQ target of one sub-vector."""

    @abc.abstractmethod
    def _clip(self, x: torch.Tensor) -> torch.Tensor: ...

    def _preprocess(self, x: torch.Tensor) -> tuple[torch.Tensor, float | None]:
        """The vector that is quantized (every |entry| <= clip) and the float32 side value, if any."""
        clip = self.params["clip"]
        if self.params["compat"] == "none":
            return self._clip(x), None
        norm = float(np.float32(torch.linalg.vector_norm(x).item()))
        if not math.isfinite(norm):
            raise ValueError("compat=paper000: ||x|| does not fit the float32 side information")
        return (x * (clip / norm) if norm > 0 else torch.zeros_like(x)), norm

    def encode(self, x: torch.Tensor, seed: int) -> RSUQMessage:
        x = as_update(x)
        quantized, side = self._preprocess(x)
        rows = to_blocks(quantized, self.target.n)
        return encode_message(
            rows, x.numel(), self.target, seed, bound=self.params["clip"], alpha=self.params["alpha"], side=side
        )[0]

    def decode(self, enc: RSUQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if (enc.side is None) != (self.params["compat"] == "none"):
            raise ValueError(f"message side information does not match compat={self.params['compat']}")
        rows = decode_message(enc, self.target, seed, bound=self.params["clip"], alpha=self.params["alpha"])
        y = from_blocks(rows, enc.length)
        if enc.side is not None:
            y = y * (enc.side / self.params["clip"])
        return y.to(torch.float32)

    def rate(self, x: torch.Tensor, seed: int) -> RateReport:
        """Measured bits of ``encode(x, seed)`` beside its fixed-length size, the papers' bound and the
        empirical entropy of M (``auditkit.mechanisms.rsuq_coding.RateReport``)."""
        return message_rate(
            self.encode(x, seed), self.target, seed, bound=self.params["clip"], alpha=self.params["alpha"]
        )

    def bits_bound(self, m: int) -> float:
        """The papers' bound N (H(Geom(p)) + E[ceil(log2 |M(U)|)]) in bits for an m-coordinate update,
        with the range of M set by |x_i| <= clip (003 Section V-B)."""
        return bits_bound(self.target, -(-m // self.target.n), self.params["clip"])

    # --- audit capabilities (mechanisms.capabilities) -------------------------------------------------------------

    @property
    def _normalises(self) -> bool:
        return self.params["compat"] == "paper000"

    @property
    def _audit_norm(self) -> str:
        """The norm of the ball the claim covers: the clip's, or l2 for 000's normalisation."""
        return "l2" if self._normalises else self.clip_norm

    def tiling(self) -> Tiling:
        """Sub-vectors are quantized with their own dithers and latent, so copies of whole sub-vectors tile on a
        copy with the clip rescaled (000's normalisation by B^(1/2) as well: the normalised copies and the side
        value ||x|| / clip are unchanged); the clip is also the coding range, hence ``max_copies``."""
        p = 2 if self._audit_norm == "l2" else 1
        noise = self.target_scale
        within = int((_CODED_RANGE_NOISE_SCALES * noise / self.params["clip"]) ** p)
        return Tiling(
            block=self.target.n, max_copies=max(1, min(_CODED_RANGE_COPIES, within)),
            for_copies=rescaled_clip(self, p),
            why=f"LRSUQ per sub-vector of {self.target.n} with its own latent and dithers; the {self._audit_norm} "
                f"clip of B copies is rescaled to B^(1/{p}) clip",
        )  # fmt: skip

    def audit_setting(self) -> AuditSetting:
        clip, dimension = self.params["clip"], max(2, self.target.n)
        if not self._normalises:
            return AuditSetting.clipped(clip, self.clip_norm, dimension)
        return AuditSetting(
            dimension + 1, 2 * clip, "l2", clip, dimension, same_norm=True,
            note="compat=paper000: the claim covers the normalised update, so the pairs share ||x|| = clip",
        )  # fmt: skip

    def dp_event(self) -> dp_accounting.DpEvent:
        if self._normalises:
            return refused("compat=paper000 scales the noise with ||x||: no per-round bound to compose")
        return self._noise_event()

    @abc.abstractmethod
    def _noise_event(self) -> dp_accounting.DpEvent: ...

    @property
    @abc.abstractmethod
    def target_scale(self) -> float:
        """The target noise's scale (sigma or b)."""

    def _guarantee(self, epsilon: float, delta: float, sensitivity: str, assumption: str) -> PrivacyGuarantee:
        caveats = [TRUSTED_SERVER_CAVEAT, _PER_ROUND_CAVEAT, FLOAT_SAMPLING_CAVEAT]
        flags = {"trusted-server"}
        if self.params["compat"] == "paper000":
            caveats.insert(0, _PAPER000_CAVEAT)
            flags |= {"paper-compat", "unsupported", "reveals-norm"}
        return PrivacyGuarantee(
            epsilon=epsilon,
            delta=delta,
            relation=REPLACE_ONE,
            threat_model=WITHOUT_SEED,
            sensitivity=sensitivity,
            assumptions=(assumption, "the shared seed is known only to the client and the server"),
            caveats=caveats,
            flags=flags,
        )


_COMMON_PARAMS = (
    positive_float("alpha", 1.0, "lattice scale alpha of alpha*Z^n: only relabels M (003 uses 1e-5, 000 uses 1)"),
    choice("compat", _COMPAT, "none", "paper000: normalise to clip*x/||x|| and send ||x|| (000) instead of clipping"),
)


@register
class CEPAMGaussian(_CEPAM):
    """CEPAM-Gaussian: LRSUQ with U ~ chi-square(n + 2) and the l2 ball of radius sigma sqrt(U) (003 Theorem 12).

    The error of every sub-vector is N(0, sigma^2 I_n) (003 Lemma 14), so the decoded update is the clipped
    update plus N(0, sigma^2 I_m): replacing the update moves the clipped one by at most 2 clip in l2, and
    one round is (eps, delta)-DP with eps = ``analytic_gaussian_epsilon(2 clip, sigma, delta)`` (Balle & Wang
    2018) for an observer without the shared seed. Acceptance p = vol(B^n) / 2^n (pi/4 at n = 2, pi/6 at
    n = 3); the dithering cost grows as 1/p, so n is limited to 8 (p = 0.016).
    """

    name = "cepam-gaussian"
    noise_param = "sigma"
    summary = "CEPAM: l2 clipping + layered RSUQ whose error is exactly N(0, sigma^2) (joint DP + compression)"
    clip_norm = "l2"
    reference_params = {"sigma": 1.0, "clip": 0.5, "n": 3}
    params_spec = (
        positive_float("sigma", 0.1, "standard deviation of the error per coordinate"),
        int_range("n", 1, 8, 1, "sub-vector (lattice) dimension; the papers use 1, 2, 3"),
        positive_float("clip", 1.0, "l2 clipping norm gamma (compat=paper000: the normalised norm)"),
        *_COMMON_PARAMS,
        open_unit_interval("delta", 1e-5, "delta at which the epsilon of the guarantee is stated"),
    )

    @property
    def target(self) -> GaussianTarget:
        return GaussianTarget(self.params["n"], self.params["sigma"])

    @property
    def target_scale(self) -> float:
        return self.params["sigma"]

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        return clip_l2(x, self.params["clip"])

    def output_log_density(self) -> LogDensity | None:
        """compat=none: y - clip(x) ~ N(0, sigma^2 I) exactly (003 Lemma 14); paper000: the noise scales with
        ||x|| (no density declared)."""
        if self._normalises:
            return None
        return ClippedGaussian(self.params["sigma"], self.params["clip"], "l2")

    def _noise_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.GaussianDpEvent(self.params["sigma"] / self.params["clip"])

    def guarantee(self) -> PrivacyGuarantee:
        clip, sigma, delta = self.params["clip"], self.params["sigma"], self.params["delta"]
        return self._guarantee(
            analytic_gaussian_epsilon(2 * clip, sigma, delta),
            delta,
            f"l2 clip {clip:g}",
            f"the whole update is clipped to l2 norm {clip:g}, so replacing it moves the input by <= {2 * clip:g}",
        )


@register
class CEPAMLaplace(_CEPAM):
    """CEPAM-Laplace: LRSUQ with U ~ Gamma(2, 1) and the interval (-b U, b U) (003 Theorem 13), n = 1.

    Every coordinate's error is Laplace(b) (003 Lemma 15). The update is clipped in l1, x <- x / max(1,
    ||x||_1 / clip): replacing it moves the clipped update by at most 2 clip in l1, and one round is
    eps-DP with eps = 2 clip / b (Dwork et al. 2006). 003 clips in l2 instead, which bounds the l1
    sensitivity only by 2 clip sqrt(m) (accounting.md); clipping in l1 keeps the stated eps exact.
    With ``compat=paper000`` the normalisation is 000's (l2).
    """

    name = "cepam-laplace"
    noise_param = "scale"
    summary = "CEPAM: l1 clipping + layered RSUQ whose error is exactly Laplace(b) (joint pure DP + compression)"
    clip_norm = "l1"
    reference_params = {"scale": 1.0, "clip": 0.5}
    params_spec = (
        positive_float("scale", 0.1, "Laplace scale b of the error per coordinate (variance 2 b^2)"),
        positive_float("clip", 1.0, "l1 clipping norm (compat=paper000: the normalised l2 norm)"),
        *_COMMON_PARAMS,
    )

    @property
    def target(self) -> LaplaceTarget:
        return LaplaceTarget(1, self.params["scale"])

    @property
    def target_scale(self) -> float:
        return self.params["scale"]

    def _clip(self, x: torch.Tensor) -> torch.Tensor:
        return clip_l1(x, self.params["clip"])

    def output_log_density(self) -> LogDensity | None:
        """compat=none: y - clip(x) iid Laplace(b) exactly (003 Lemma 15); paper000: none declared."""
        if self._normalises:
            return None
        return ClippedLaplace(self.params["scale"], self.params["clip"], "l1")

    def _noise_event(self) -> dp_accounting.DpEvent:
        return dp_accounting.LaplaceDpEvent(self.params["scale"] / self.params["clip"])

    def guarantee(self) -> PrivacyGuarantee:
        clip, scale = self.params["clip"], self.params["scale"]
        return self._guarantee(
            2 * clip / scale,
            0.0,
            f"l1 clip {clip:g}",
            f"the whole update is clipped to l1 norm {clip:g}, so replacing it moves the input by <= {2 * clip:g}",
        )
