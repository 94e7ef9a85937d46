"""Closed-form claims of the additive-noise mechanisms, callable without building a mechanism.

* Gaussian (Balle & Wang 2018, analytic Gaussian mechanism): N(0, sigma^2 I) on an update clipped to
  l2 norm `clip` is (eps, delta)-DP for replace-one neighbours (sensitivity 2 clip), eps the least
  with Phi(D/2s - eps s/D) - e^eps Phi(-D/2s - eps s/D) <= delta, D = 2 clip, s = sigma.
* Laplace (Dwork, McSherry, Nissim & Smith 2006): iid Laplace(b) on an l1-clipped update is
  (2 clip / b)-DP.
* Multivariate t (JoPEQ Theorem II.8 after Fukuchi et al. 2017, eq. (11) with the exponent corrected
  to (nu + d)/2): t_nu(0, s2 I_d) with raw l2 sensitivity D is eps-LDP with
      e^eps = [(1 + c^2/nu) / (1 + (c - Delta)^2/nu)]^((nu + d)/2),
      Delta = D / sqrt(s2),  c = (Delta + sqrt(Delta^2 + 4 nu)) / 2.

    from auditkit import accounting
    accounting.gaussian(sigma=1.0, clip=0.5, delta=1e-5).epsilon     # 4.38 (sensitivity 1)
    accounting.t_mechanism(nu=5, s2=1e-4, sensitivity=2).epsilon     # the pair's own eq. (11) eps
    accounting.solve_t(eps=4.0)                                      # minimum-variance (nu, s2)
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from auditkit import mechanisms
from auditkit.accounting.report import claim_solver
from auditkit.mechanisms.guarantee import CLAIM_EXCEEDED, REPLACE_ONE, PrivacyGuarantee
from auditkit.mechanisms.tdist import minimum_variance_t, t_epsilon, t_scale_for_epsilon
from auditkit.validation import Integer, Number


_positive = Number(low=0, low_open=True).check  # (value, name) -> the value as a float


def gaussian(*, sigma: float, clip: float = 1.0, delta: float = 1e-5) -> PrivacyGuarantee:
    """The one-round claim of the ``gaussian`` mechanism (analytic Gaussian, sensitivity 2 clip)."""
    return mechanisms.create("gaussian", sigma=sigma, clip=clip, delta=delta).guarantee()


def laplace(*, scale: float, clip: float = 1.0) -> PrivacyGuarantee:
    """The one-round claim of the ``laplace`` mechanism: eps = 2 clip / scale, delta = 0 (l1 clip)."""
    return mechanisms.create("laplace", scale=scale, clip=clip).guarantee()


def t_mechanism(
    *, nu: float, s2: float, sensitivity: float = 2.0, dimension: int = 2, eps: float | None = None
) -> PrivacyGuarantee:
    """eps-LDP of t_nu(0, s2 I_dimension) noise for l2 sensitivity `sensitivity` (eq. (11), corrected).

    With `eps` given, that is the claim checked: the guarantee states `eps` and carries the flag
    "claim-exceeded" when the pair's own eq. (11) epsilon is larger (the JoPEQ code sets (nu, s2)
    by hand and keeps the claim).
    """
    nu, s2 = _positive(nu, "nu"), _positive(s2, "s2")
    sensitivity = _positive(sensitivity, "sensitivity")
    Integer(low=1).check(dimension, "dimension")
    actual = t_epsilon(nu, s2, sensitivity, dimension)
    claimed = actual if eps is None else _positive(eps, "eps")
    return PrivacyGuarantee(
        epsilon=claimed,
        delta=0.0,
        relation=REPLACE_ONE,
        unit=f"one {dimension}-coordinate block",
        sensitivity=f"l2 shift <= {sensitivity:g} (Delta = {sensitivity / math.sqrt(s2):.4g})",
        assumptions=(f"t noise nu = {nu:g}, s2 = {s2:g}: eq. (11) gives eps = {actual:.6g}",),
        caveats=(
            "JoPEQ prints the exponent (nu + d)^2; the density's exponent is (nu + d)/2, used here",
            "one block only: M independent blocks of one update can lose up to M times as much",
        ),
        flags={CLAIM_EXCEEDED} if actual > claimed * (1 + 1e-9) else set(),
    )


def solve_t(
    *, eps: float, sensitivity: float = 2.0, dimension: int = 2, nu: float | None = None
) -> tuple[float, float]:
    """(nu, s2) meeting eq. (11) with equality at `eps`: the pair of least per-coordinate variance
    nu s2 / (nu - 2) when `nu` is None, else the s2 for the given nu."""
    eps, sensitivity = _positive(eps, "eps"), _positive(sensitivity, "sensitivity")
    if nu is None:
        return minimum_variance_t(eps, sensitivity, dimension)
    nu = _positive(nu, "nu")
    return nu, t_scale_for_epsilon(eps, nu, sensitivity, dimension)



@claim_solver("t-noise", help="the minimum-variance (nu, s2) of a multivariate t mechanism at --target-eps (eq. 11)")
def solve_t_noise(mechanism: str, params: Mapping[str, Any], target_eps: float, target_delta: float | None,
                  fl: Mapping[str, Any]) -> str:
    """``solve_t`` at the mechanism's sensitivity (and its nu, when set)."""
    nu, s2 = solve_t(eps=target_eps, sensitivity=params.get("sensitivity", 2.0), nu=params.get("nu") or None)
    return (f"nu = {nu:.6g}, s2 = {s2:.6g}  (eq. (11) = {target_eps:g}; "
            f"per-coordinate variance nu s2/(nu - 2) = {nu * s2 / (nu - 2):.6g})")