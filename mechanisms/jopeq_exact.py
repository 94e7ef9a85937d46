"""``jopeq-exact``: JoPEQ's pipeline (Lang et al.) with the privacy noise realised exactly by LRSUQ.

JoPEQ (002 Section III-A): split h (length d) into M = ceil(d / L) sub-vectors of length L, scale by
zeta = (3 ||h|| / sqrt(M))^-1 (sent to the server) and quantize each zeta h_i with subtractive dithering plus
privacy-preserving noise, so that h~_i = h_i + (n_i + e_i) / zeta. Its Theorems III.1-III.2 ask for noise
whose characteristic function is the target's divided by the dither's, which does not exist (the dither's
has zeros); ``jopeq-exact`` instead quantizes zeta h_i with LRSUQ (``auditkit.mechanisms.rsuq``), whose error
n_i + e_i is exactly the target and independent of h:

* ``noise=laplace`` (L = 1): Laplace(b), b = sensitivity / eps (2 / eps by default), U ~ Gamma(2, 1),
  accept interval (-bU, bU);
* ``noise=t`` (L = 1 or 2): multivariate t_nu(0, s2 I_L) (002 eq. (10)), as the Gaussian scale mixture
  W ~ chi-square(nu)/nu, N(0, (s2 / W) I_L), in the ball form of 003 Lemma 14.

The server outputs h~ = Y / zeta with Y the LRSUQ output of the scaled sub-vectors; zeta travels as float32
and both sides use the rounded value (``auditkit.mechanisms.jopeq.jopeq_scaling``, clamped to the finite float32
range), so h~ - h = (target noise) / zeta exactly.
"""

from __future__ import annotations

import math

import numpy as np
import torch

from auditkit.mechanisms.base import Mechanism, as_update, choice, int_range, positive_float
from auditkit.mechanisms.capabilities import AuditSetting, LogDensity, SideValues, Tiling
from auditkit.mechanisms.cepam import FLOAT_SAMPLING_CAVEAT, TRUSTED_SERVER_CAVEAT, WITHOUT_SEED
from auditkit.mechanisms.guarantee import CLAIM_EXCEEDED, REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.jopeq import jopeq_audit_setting, jopeq_scaling, scale_side_values
from auditkit.mechanisms.lattice import from_blocks, to_blocks
from auditkit.mechanisms.registry import register
from auditkit.mechanisms.rsuq import LaplaceTarget, StudentTTarget, Target
from auditkit.mechanisms.rsuq_coding import RSUQMessage, decode_message, encode_message
from auditkit.mechanisms.tdist import T_NOISE_PARAMS, minimum_variance_t, t_blocks_logpdf, t_epsilon, t_scale_for_epsilon

__all__ = ["JoPEQExact"]

_ZETA_CAVEAT = (
    "zeta = sqrt(M) / (3 ||h||) is sent in clear, so ||h|| is revealed: neighbours with different norms are "
    "told apart through zeta alone, whatever the noise"
)
_UNIT_BALL_CAVEAT = (
    "the sensitivity assumes every scaled sub-vector zeta h_i lies in the unit ball, which the scaling does not "
    "enforce (||zeta h|| = sqrt(M) / 3); ``last_outside`` counts the sub-vectors of the latest encode outside it"
)
_PER_SUBVECTOR_CAVEAT = (
    "the claim is per sub-vector and per round: the M sub-vectors of one update have independent noise, so the "
    "privacy loss of the whole update can reach M times eps, and rounds compose further"
)


@register
class JoPEQExact(Mechanism):
    """JoPEQ with LRSUQ: the scaled sub-vectors' error is exactly Laplace(b) or t_nu(0, s2 I_L).

    Parameters as ``jopeq-laplace`` / ``jopeq-t``: ``eps`` is the claim per scaled sub-vector and
    ``sensitivity`` the l2 shift it covers (2: the unit ball's diameter, the rigorous value; 002's appendix
    suggests sqrt 2, its code's table implies 1). Laplace (L = 1): b = sensitivity / eps, eps-LDP by 002
    Theorem II.7. t: eq. (11) with Delta = sensitivity / sqrt(s2) in dimension L (``auditkit.mechanisms.tdist``);
    nu = s2 = 0 picks the minimum-variance pair for eps, a given nu with s2 = 0 solves s2, a given pair is
    used as it is (flag "claim-exceeded" when its own eps is larger than the claim). Unlike the moment-matched
    mechanisms, the noise law is exactly the target, so the claim is exact -- for observers without the
    shared seed only: LRSUQ's decoder must know the latent scale, so the server sees a uniform error on a
    ball of known radius, not JoPEQ's private noise.
    """

    name = "jopeq-exact"
    summary = "JoPEQ scaling + layered RSUQ whose error is exactly Laplace or multivariate t (no moment matching)"
    params_spec = (
        choice("noise", ("laplace", "t"), "laplace", "noise law of a scaled sub-vector: laplace (L = 1) or t"),
        int_range("n", 1, 2, 1, "sub-vector length L (laplace needs 1)"),
        *T_NOISE_PARAMS,
        positive_float("sensitivity", 2.0, "l2 shift of a scaled sub-vector that eps covers (2: the unit ball)"),
    )
    message_type = RSUQMessage

    def __init__(self, **params: object) -> None:
        super().__init__(**params)
        p = self.params
        if p["noise"] == "laplace" and p["n"] != 1:
            raise ValueError("noise=laplace needs n=1 (the Laplace claim is for scalar sub-vectors)")
        if p["noise"] == "laplace":
            self.target: Target = LaplaceTarget(1, p["sensitivity"] / p["eps"])
        else:
            if p["nu"] == 0 and p["s2"] != 0:
                raise ValueError(f"s2 = {p['s2']} needs nu as well (nu > 2); or leave both 0 (minimum variance)")
            if p["nu"] == 0:
                nu, s2 = minimum_variance_t(p["eps"], p["sensitivity"], p["n"])
            else:
                nu, s2 = p["nu"], p["s2"] or t_scale_for_epsilon(p["eps"], p["nu"], p["sensitivity"], p["n"])
            self.target = StudentTTarget(p["n"], nu, s2)
        self.last_outside: int | None = None  # scaled sub-vectors of the latest encode outside the unit ball

    def true_epsilon(self) -> float:
        """The eps of the realised noise of one scaled sub-vector for the shift ``sensitivity``: D / b for
        Laplace(b), eq. (11) for the t target (exact, since LRSUQ's error is exactly the target)."""
        if isinstance(self.target, LaplaceTarget):
            return self.params["sensitivity"] / self.target.scale
        return t_epsilon(self.target.nu, self.target.s2, self.params["sensitivity"], self.target.n)

    def tiling(self) -> Tiling:
        """zeta is unchanged by tiling and every sub-vector has its own latent and dithers; the coding range
        sqrt(M) / 3 grows with the copies, which changes how M is coded, not the decoded value."""
        return Tiling(block=self.target.n, max_copies=2**12,
                      why="zeta unchanged by tiling; LRSUQ per sub-vector with its own latent and dithers")

    def audit_setting(self) -> AuditSetting:
        return jopeq_audit_setting(self.target.n, self.params["sensitivity"])

    def side_values(self) -> SideValues:
        """zeta of each row, as ``encode`` computes it and sends it (float32) in the RSUQ message."""
        return scale_side_values(self.target.n)

    def output_log_density(self) -> LogDensity:
        """z = zeta (y - x) is exactly Laplace(b) or t_nu(0, s2 I_n) per sub-vector, plus the Jacobian d ln zeta."""
        target = self.target

        def log_density(y: np.ndarray, x: np.ndarray) -> np.ndarray:
            zeta = jopeq_scaling(torch.from_numpy(x), -(-x.size // target.n))
            z = zeta * (y - x)
            if isinstance(target, LaplaceTarget):
                core = -np.abs(z).sum(axis=1) / target.scale
            else:
                core = t_blocks_logpdf(z, target.nu, target.s2, target.n)
            return core + x.size * math.log(zeta)

        return log_density

    def _bound(self, rows: int) -> float:
        """|zeta h_i| <= ||zeta h|| = sqrt(M) / 3: the range of every scaled coordinate."""
        return math.sqrt(rows) / 3

    def encode(self, x: torch.Tensor, seed: int) -> RSUQMessage:
        h = as_update(x)
        blocks = to_blocks(h, self.target.n)
        zeta = jopeq_scaling(h, blocks.shape[0])
        scaled = zeta * blocks
        self.last_outside = int((torch.linalg.vector_norm(scaled, dim=1) > 1).sum())
        bound = self._bound(blocks.shape[0])
        return encode_message(scaled, h.numel(), self.target, seed, bound=bound, alpha=1.0, side=zeta)[0]

    def decode(self, enc: RSUQMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        if enc.side is None or not 0 < enc.side < math.inf:
            raise ValueError("jopeq-exact message without a finite positive zeta")
        rows = decode_message(enc, self.target, seed, bound=self._bound(enc.rows), alpha=1.0)
        return (from_blocks(rows, enc.length) / enc.side).to(torch.float32)

    def guarantee(self) -> PrivacyGuarantee:
        n, eps, sensitivity, actual = self.target.n, self.params["eps"], self.params["sensitivity"], self.true_epsilon()
        if isinstance(self.target, LaplaceTarget):
            noise = f"Laplace(b = {self.target.scale:.4g}) per coordinate"
        else:
            noise = f"t_nu(0, s2 I_{n}) with nu = {self.target.nu:.4g}, s2 = {self.target.s2:.4g}"
        return PrivacyGuarantee(
            epsilon=eps,
            delta=0.0,
            relation=REPLACE_ONE,
            unit=f"one scaled sub-vector zeta h_i of length {n} (local DP)",
            threat_model=WITHOUT_SEED,
            sensitivity=f"scaled sub-vector shift <= {sensitivity:g} (l2)",
            assumptions=(
                "every scaled sub-vector zeta h_i lies in the unit ball",
                "the shared seed is known only to the client and the server",
            ),
            caveats=(
                f"the error of a scaled sub-vector is exactly {noise}; its eps for the shift {sensitivity:g} is "
                f"{actual:.4g}",
                TRUSTED_SERVER_CAVEAT,
                _ZETA_CAVEAT,
                _UNIT_BALL_CAVEAT,
                _PER_SUBVECTOR_CAVEAT,
                FLOAT_SAMPLING_CAVEAT,
            ),
            flags={"trusted-server", "reveals-norm"} | ({CLAIM_EXCEEDED} if actual > eps * (1 + 1e-9) else set()),
        )
