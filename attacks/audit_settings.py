"""Where each registered mechanism's claim is tested: the input dimension, ball, sensitivity and pair options.

``audit_setting(m)`` reads the claim's unit and sensitivity off the configured mechanism (exact class match)
and returns the ``AuditSetting`` whose ``pairs()`` are the candidates ``attacks.audit_mechanism`` tries:

| mechanism | d | ball (norm, radius) | sensitivity | block | options |
|---|---|---|---|---|---|
| gaussian, gaussian+sdq, t-dist, t-dist+sdq | 2 | l2, clip | 2 clip | 2 | beyond-clip |
| laplace, laplace+sdq, msp-laplace | 2 | l1, clip | 2 clip | 2 | beyond-clip |
| cepam-gaussian (compat none) | max(2, n) | l2, clip | 2 clip | d | beyond-clip |
| cepam-laplace (compat none) | 2 | l1, clip | 2 clip | 2 | beyond-clip |
| cepam-* compat=paper000 | as above | l2, clip | 2 clip | d - 1 | same norm (the claim covers the normalised update) |
| jopeq-laplace, jopeq-t, jopeq-exact | 9 L | l2, 1 | the claim's shift, at most 2 | L | same norm |
| none | 2 | l2, 1 | 2 | 2 | (no claim) |
| sdq, sdq-hex | 1, 2 | l2, support/2 | support | d | quantizer pairs (sdq) |
| dpsq (b >= 2), laplace-sq (rho < 2C) | 1 | l1, Delta/4 | Delta/2 | 1 | the central cell only (cell-local claim) |
| dpsq (b = 1), laplace-sq (rho >= 2C) | 1 | l1, clip | 2 clip | 1 | beyond-clip (the claim covers the range) |

JoPEQ: the claim is per scaled block zeta h_i in the unit ball, zeta = sqrt(M) / (3 ||h||). With M = 9 blocks
and ||h|| = 1, zeta = 1 exactly and a block of norm 1 is on the unit sphere, so the pair -v, +v (||v|| = s/2,
the rest of the norm filled into block 2) differs by the claimed shift s in one scaled block at the same
zeta. Pairs with different norms would be told apart through zeta alone (the adaptive side-channel test).
A shift above 2 cannot occur in the unit ball, so the pairs stop at 2.
DP-SQ: the claim is eps1 per coordinate for two values of one quantizer cell (dpsq.md). The pairs -Delta/4 vs
+Delta/4 and 0 vs Delta/4 lie in the central cell [-Delta/2, Delta/2) on both sides of its midpoint (the nearer
levels differ: the ratio is exactly e^eps1); pairs across cells are the adaptive test ``dpsq_cross_cell``.
msp-laplace: Proposition 1 covers alpha_0 = clip_l1(w) + Laplace, the Laplace setting; msp and mspdq claim
nothing (their split alpha_0 is audited with the generic setting; the transcript is the adaptive test
``msp_transcript``).
A mechanism without an entry gets the generic setting: d = 2, l2 ball of radius ``clip`` (1 if it has none),
sensitivity 2 radius.
"""

from __future__ import annotations

from dataclasses import dataclass

from attacks.neighbouring_pairs import NeighbouringPair, neighbouring_pairs
from mechanisms.additive import Gaussian, Laplace
from mechanisms.base import Mechanism
from mechanisms.cepam import CEPAMGaussian, CEPAMLaplace
from mechanisms.dpsq import DPSQ, LaplaceSQ
from mechanisms.identity import Identity
from mechanisms.jopeq import JoPEQLaplace, JoPEQT
from mechanisms.jopeq_exact import JoPEQExact
from mechanisms.msp import MSPLaplace
from mechanisms.noisy_sdq import GaussianSDQ, LaplaceSDQ, TDistSDQ
from mechanisms.sdq import SDQ, HexagonalSDQ
from mechanisms.tdist import TDist

__all__ = ["REFERENCE_PARAMS", "AuditSetting", "audit_setting"]

_JOPEQ_BLOCKS = 9  # M = 9 blocks with ||h|| = 1 give zeta = sqrt(9) / 3 = 1

REFERENCE_PARAMS: dict[str, dict[str, float | int]] = {
    "gaussian": {"sigma": 1.0, "clip": 0.5},
    "gaussian+sdq": {"sigma": 1.0, "clip": 0.5, "support": 8.0},
    "cepam-gaussian": {"sigma": 1.0, "clip": 0.5, "n": 3},
    "laplace": {"scale": 1.0, "clip": 0.5},
    "laplace+sdq": {"scale": 1.0, "clip": 0.5, "support": 16.0},
    "cepam-laplace": {"scale": 1.0, "clip": 0.5},
    "dpsq": {"eps": 1.0},
    "laplace-sq": {"eps": 1.0},
    "msp-laplace": {"eps": 1.0},
}
"""Parameters at which a registered mechanism's claim is within reach of an audit (other mechanisms: their
defaults). The defaults of the mechanisms listed claim eps = 284 (Gaussian, sigma 0.1) or 20 (Laplace,
scale 0.1), beyond what even 10^6 trials can certify (11.8): here the shift 2 clip = 1 with sigma = 1 claims
4.38 at delta = 1e-5 and scale 1 claims 1; DP-SQ's default eps1 = 0.1 is raised to 1 so that a
cell-local excess would show; MSP+Lap's default eps_dp = 10 is lowered to 1, within reach. The quantizer supports keep overloads below 1e-6 per coordinate
(post-processing either way). The defaults of the t and JoPEQ mechanisms claim eps = 4 and are kept."""


@dataclass(frozen=True)
class AuditSetting:
    """Arguments of ``neighbouring_pairs`` for one mechanism, and a line saying why."""

    dimension: int
    sensitivity: float
    norm: str
    radius: float
    block: int
    same_norm: bool = False
    beyond_clip: bool = False
    quantizer_step: float | None = None
    quantizer_offset: float = 0.0
    note: str = ""

    def pairs(self, *, random_directions: int = 2, seed: int = 0) -> list[NeighbouringPair]:
        return neighbouring_pairs(
            self.dimension,
            sensitivity=self.sensitivity,
            norm=self.norm,
            radius=self.radius,
            block=self.block,
            random_directions=random_directions,
            same_norm=self.same_norm,
            beyond_clip=self.beyond_clip,
            quantizer_step=self.quantizer_step,
            quantizer_offset=self.quantizer_offset,
            seed=seed,
        )


def _clipped(clip: float, norm: str, dimension: int = 2) -> AuditSetting:
    return AuditSetting(
        dimension, 2 * clip, norm, clip, dimension, beyond_clip=True,
        note=f"replace-one within the {norm} ball of radius clip {clip:g}: shift 2 clip",
    )  # fmt: skip


def _cepam(m: CEPAMGaussian | CEPAMLaplace, norm: str, dimension: int) -> AuditSetting:
    clip = m.params["clip"]
    if m.params["compat"] == "none":
        return _clipped(clip, norm, dimension)
    return AuditSetting(
        dimension + 1, 2 * clip, "l2", clip, dimension, same_norm=True,
        note="compat=paper000: the claim covers the normalised update, so the pairs share ||x|| = clip",
    )  # fmt: skip


def _jopeq(block: int, sensitivity: float) -> AuditSetting:
    return AuditSetting(
        _JOPEQ_BLOCKS * block, sensitivity, "l2", 1.0, block, same_norm=True,
        note=f"{_JOPEQ_BLOCKS} blocks of {block} with ||h|| = 1: zeta = 1, one scaled block moves by {sensitivity:g}",
    )  # fmt: skip


def audit_setting(mechanism: Mechanism) -> AuditSetting:
    """The setting of the module docstring's table for the configured ``mechanism``."""
    p, kind = mechanism.params, type(mechanism)
    if kind in (Gaussian, GaussianSDQ, TDist, TDistSDQ):
        return _clipped(p["clip"], "l2")
    if kind in (Laplace, LaplaceSDQ, MSPLaplace):
        return _clipped(p["clip"], "l1")
    if kind is CEPAMGaussian:
        return _cepam(mechanism, "l2", max(2, p["n"]))
    if kind is CEPAMLaplace:
        return _cepam(mechanism, "l1", 2)
    if kind is JoPEQLaplace:
        return _jopeq(1, 2.0)
    if kind is JoPEQT:
        return _jopeq(2, min(p["sensitivity"], 2.0))
    if kind is JoPEQExact:
        return _jopeq(p["n"], min(p["sensitivity"], 2.0))
    if kind is DPSQ and p["bits"] >= 2 or kind is LaplaceSQ and mechanism.rho < 2 * p["clip"]:
        step = mechanism.cell_step
        return AuditSetting(
            1, step / 2, "l1", step / 4, 1,
            note="cell-local claim: one coordinate, both values in the central cell (cross-cell: adaptive test)",
        )  # fmt: skip
    if kind in (DPSQ, LaplaceSQ):
        return _clipped(p["clip"], "l1", 1)
    if kind is Identity:
        return AuditSetting(2, 2.0, "l2", 1.0, 2, note="no claim: any pair is told apart")
    if kind is SDQ:
        support, step = p["support"], mechanism.step
        boundary = -support + round(support / step) * step  # the cell boundary nearest 0
        return AuditSetting(
            1, support, "l2", support / 2, 1, quantizer_step=step, quantizer_offset=boundary,
            note="no claim: pairs in one cell and across a cell boundary",
        )  # fmt: skip
    if kind is HexagonalSDQ:
        return AuditSetting(2, p["support"], "l2", p["support"] / 2, 2, note="no claim")
    clip = float(p.get("clip", 1.0))
    return AuditSetting(2, 2 * clip, "l2", clip, 2, note="generic setting: no audit setting registered")
