"""JoPEQ's claims (paper 002), callable without building a mechanism, with the true epsilon beside them.

JoPEQ claims eps-LDP because the privacy-preserving noise (PPN) plus the dithered quantizer's error
is *exactly* the target noise (Laplace, Theorem III.2; multivariate t, Theorem III.1). The PPN that
would make this exact does not exist for the paper's settings; the reference code moment-matches it
instead (equal variance, lighter tails), so the realised noise has a larger epsilon. These functions
return the claim as the paper states it, flagged "claim-exceeded" when the realised noise's epsilon
(`true_epsilon`, from the density of PPN + dither error, see ``auditkit.mechanisms.jopeq``) is larger.

    accounting.jopeq_laplace(eps=4, bits=1, compat="jopeq-code")   # claims 4; true eps 4.619
"""
from __future__ import annotations

from auditkit import mechanisms
from auditkit.mechanisms.guarantee import PrivacyGuarantee


def jopeq_laplace(
    *, eps: float, bits: int = 1, support: float = 0.0, compat: str = "none"
) -> PrivacyGuarantee:
    """JoPEQ-Laplace's per-coordinate eps-LDP claim (Theorem III.2, b = 2/eps, scaled shift <= 2)."""
    return mechanisms.create("jopeq-laplace", eps=eps, bits=bits, support=support, compat=compat).guarantee()


def jopeq_t(
    *, eps: float, nu: float = 0, s2: float = 0, sensitivity: float = 2.0, bits: int = 1, support: float = 0.0,
    compat: str = "none",
) -> PrivacyGuarantee:
    """JoPEQ-t's per-pair eps-LDP claim (Theorem III.1 with eq. (11); nu = s2 = 0: minimum variance)."""
    return mechanisms.create(
        "jopeq-t", eps=eps, nu=nu, s2=s2, sensitivity=sensitivity, bits=bits, support=support, compat=compat
    ).guarantee()


def true_epsilon(name: str, **params: object) -> float:
    """The epsilon of the noise a JoPEQ (or t-dist) mechanism really adds, for the claim's own shift.

    ``jopeq-laplace``: exactly 2/b' for the moment-matched PPN scale b'. ``jopeq-t``: a numerical lower
    bound over the hexagon's dither. ``jopeq-exact``: its target's epsilon. ``t-dist``: eq. (11) at the
    configured (nu, s2).
    """
    actual = mechanisms.capability(mechanisms.create(name, **params), "true_epsilon")
    if actual is None:
        with_one = [n for n in mechanisms.names() if mechanisms.capability(mechanisms.create(n), "true_epsilon") is not None]
        raise ValueError(f"name must be a mechanism with a realised-noise epsilon ({', '.join(with_one)}), got {name!r}")
    return float(actual)
