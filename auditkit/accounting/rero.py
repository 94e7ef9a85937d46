"""Reconstruction robustness (ReRo): how often can ANY attack name the input among M candidates?

An attacker sees one output of a mechanism whose input is drawn from a prior over candidates and must
identify it. Balle, Cherubin & Hayes (S&P 2022) call a mechanism (eta, gamma)-ReRo when every attack's
success probability is at most gamma; the prior's own success probability (the best guess without seeing
the output) is kappa, which is 1/M for a uniform prior over M candidates and exact identification.

Kaissis, Hayes, Ziller & Rueckert (2023, "Bounding data reconstruction attacks with the hypothesis testing
interpretation of differential privacy") show that an f-DP mechanism is ReRo with

    gamma = 1 - f(kappa),

f the trade-off function (the least type II error of a test between neighbouring inputs at type I error
alpha). This module evaluates that bound for the trade-off functions of the toolkit's claims:

* ``rero_bound``          (eps, delta)-DP:  f(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a));
* ``gdp_rero_bound``      mu-GDP:           f(a) = Phi(Phi^-1(1 - a) - mu);
* ``laplace_rero_bound``  the Laplace mechanism's own trade-off function (Dong, Roth & Su 2022);
* ``gaussian_rero_bound`` the prior-specific bound of Hayes, Mahloujifar & Balle (NeurIPS 2023) for a
  uniform prior over M points under the Gaussian mechanism (tighter than 1 - f(1/M));
* ``claim_rero_bound``    the tightest of these that a one-round ``dp_accounting`` event and its claimed
  (eps, delta) support, with the name of the bound used.

    from auditkit import accounting
    accounting.gdp_rero_bound(mu=1.0, kappa=0.1)          # 0.389
    accounting.gaussian_rero_bound(mu=1.0, candidates=10)  # 0.253: uniform prior over 10 candidates
"""
from __future__ import annotations

import math

import dp_accounting
from scipy.integrate import quad
from scipy.special import log_ndtr, ndtr, ndtri

from auditkit.validation import Integer, Number

__all__ = [
    "GAUSSIAN_M_POINT",
    "GENERIC_DP",
    "LAPLACE_F_DP",
    "MU_GDP",
    "NO_CLAIM",
    "claim_rero_bound",
    "gaussian_rero_bound",
    "gdp_rero_bound",
    "laplace_rero_bound",
    "rero_bound",
]

GAUSSIAN_M_POINT = "gaussian M-point (Hayes et al. 2023)"
MU_GDP = "mu-GDP"
LAPLACE_F_DP = "Laplace f-DP (Kaissis et al. 2023)"
GENERIC_DP = "(eps, delta)-DP"
NO_CLAIM = "no claim"


# --- argument checks -------------------------------------------------------------------------------------------


_NON_NEGATIVE = Number(low=0, finite=False)  # +inf allowed: the bound is then 1
_KAPPA = Number(0, 1, low_open=True)  # the prior's own success probability, e.g. 1/M
_DELTA = Number(0, 1)
_CANDIDATES = Integer(low=2)  # the number M of equally likely inputs


# --- the bounds ------------------------------------------------------------------------------------------------


def rero_bound(*, eps: float, delta: float, kappa: float) -> float:
    """ReRo bound of any (eps, delta)-DP mechanism: gamma = 1 - f_{eps,delta}(kappa), i.e.

        gamma = min(1, delta + e^eps kappa, 1 - e^-eps (1 - delta - kappa)),

    with f_{eps,delta}(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a)) the trade-off function of
    (eps, delta)-DP (Dong, Roth & Su 2022, Prop. 2.5) and gamma = 1 - f(kappa) the ReRo bound of Kaissis,
    Hayes, Ziller & Rueckert 2023 (Balle, Cherubin & Hayes 2022 for ReRo itself).

    ``eps`` >= 0 (inf allowed); e^eps is never formed when eps + ln(kappa) >= 0 (the bound is then 1), so
    eps = 1e4 does not overflow. ``delta`` in [0, 1]; ``kappa`` in (0, 1].
    """
    eps, delta = _NON_NEGATIVE.check(eps, "eps"), _DELTA.check(delta, "delta")
    kappa = _KAPPA.check(kappa, "kappa")
    log_growth = eps + math.log(kappa)  # ln(e^eps kappa)
    first = 1.0 if log_growth >= 0 else delta + math.exp(log_growth)
    second = 1.0 - math.exp(-eps) * (1.0 - delta - kappa)  # exp(-inf) = 0
    return min(1.0, first, second)


def gdp_rero_bound(*, mu: float, kappa: float) -> float:
    """ReRo bound of any mu-GDP mechanism: gamma = 1 - G_mu(kappa) = Phi(Phi^-1(kappa) + mu).

    G_mu(a) = Phi(Phi^-1(1 - a) - mu) is the trade-off function of N(0, 1) vs N(mu, 1) (Dong, Roth & Su
    2022); 1 - G_mu(kappa) is the ReRo bound of Kaissis et al. 2023 (their Gaussian case). ``mu`` >= 0
    (inf allowed), ``kappa`` in (0, 1]. mu = 0 gives kappa: the output carries no information.
    """
    mu, kappa = _NON_NEGATIVE.check(mu, "mu"), _KAPPA.check(kappa, "kappa")
    if mu == 0:
        return kappa  # exactly, not Phi(Phi^-1(kappa)) with its rounding
    return float(ndtr(ndtri(kappa) + mu))  # kappa = 1: ndtri = inf, the bound is 1


def laplace_rero_bound(*, eps: float, kappa: float) -> float:
    """ReRo bound of the Laplace mechanism with eps = sensitivity / scale: gamma = 1 - f_eps(kappa), where

        f_eps(a) = 1 - e^eps a           for a < e^-eps / 2,
                   e^-eps / (4 a)        for e^-eps / 2 <= a <= 1/2,
                   e^-eps (1 - a)        for a > 1/2,

    the trade-off function of Lap(0, 1) vs Lap(eps, 1) (Dong, Roth & Su 2022; the ReRo form is in Kaissis et
    al. 2023). Derivation: the likelihood ratio is monotone, so the optimal tests reject for x >= t; t >= eps
    gives a = e^-t / 2, beta = 1 - e^eps a; 0 <= t <= eps gives beta = e^(t - eps) / 2 = e^-eps / (4 a);
    t <= 0 gives a = 1 - e^t / 2, beta = e^-eps (1 - a). So

        gamma = e^eps kappa (kappa < e^-eps/2),  1 - e^-eps / (4 kappa) (up to 1/2),  1 - e^-eps (1 - kappa).

    The outer pieces coincide with the pure eps-DP bound ``rero_bound(eps=eps, delta=0, kappa=kappa)``; the
    middle piece is strictly smaller except at its ends. For M = 2 (kappa = 1/2) the bound is
    1 - e^-eps / 2, while the best two-point attack (maximum likelihood on antipodal candidates) succeeds with
    probability 1 - e^(-eps/2) / 2 only: the bound holds but is not attained by a two-point prior.

    Multivariate Laplace with an l1 sensitivity: a neighbouring pair whose difference is spread over several
    coordinates (shifts s_1 + ... + s_k = eps, each in units of the scale) has trade-off function
    f_{s_1} (x) ... (x) f_{s_k}. We checked by exact computation of the privacy-loss distribution (quadrature,
    tests/auditkit/accounting/test_rero.py) that f_a (x) f_b >= f_{a+b} for a grid of a, b (equality only on
    the outer, pure-DP pieces), so by induction every spread pair is at least as private as the 1-D pair, and
    this bound is valid for the toolkit's l1-clipped Laplace mechanism (eps = 2 clip / scale).

    ``eps`` >= 0 (inf allowed), ``kappa`` in (0, 1]. eps = 0 gives kappa.
    """
    eps, kappa = _NON_NEGATIVE.check(eps, "eps"), _KAPPA.check(kappa, "kappa")
    if math.isinf(eps):
        return 1.0
    if kappa > 0.5:
        return 1.0 - math.exp(-eps) * (1.0 - kappa)
    if math.log(2.0 * kappa) < -eps:  # kappa < e^-eps / 2, so e^eps kappa < 1/2: no overflow
        return math.exp(eps + math.log(kappa))
    return 1.0 - math.exp(-eps) / (4.0 * kappa)


def gaussian_rero_bound(*, mu: float, candidates: int) -> float:
    """Success of the optimal attack against the Gaussian mechanism for a uniform prior over M = ``candidates``
    inputs whose pairwise distances are all the sensitivity Delta, noise N(0, sigma^2 I), mu = Delta / sigma
    (Hayes, Mahloujifar & Balle, NeurIPS 2023, "Bounding training data reconstruction in DP-SGD"):

        gamma_M(mu) = integral phi(z - mu / sqrt 2) Phi(z)^(M - 1) dz.

    The candidates sit on a regular simplex of edge Delta, i.e. (Delta / sqrt 2) e_1, ..., (Delta / sqrt 2) e_M
    up to a rigid motion; the maximum-likelihood attack picks the largest coordinate of y / sigma, and the true
    one, mu / sqrt 2 + Z_j, beats M - 1 independent N(0, 1) values with the probability above. M = 2 gives
    Phi(mu / 2); mu = 0 gives 1/M. This is the prior-specific ReRo bound of Hayes et al. for M equally likely
    candidates (configurations with pairwise distances <= Delta do no better); it never exceeds
    ``gdp_rero_bound(mu=mu, kappa=1/M)``, which holds for every prior with kappa = 1/M.

    Computed by adaptive quadrature (scipy.integrate.quad) on unit pieces of [mu/sqrt2 - 12, mu/sqrt2 + 12]
    (outside it phi(z - mu/sqrt2) has mass < 4e-33), with Phi(z)^(M-1) = exp((M-1) log Phi(z)); absolute error
    below 1e-12. ``mu`` >= 0 (inf allowed: 1), ``candidates`` an integer >= 2.
    """
    mu, m = _NON_NEGATIVE.check(mu, "mu"), _CANDIDATES.check(candidates, "candidates")
    if math.isinf(mu):
        return 1.0
    if mu == 0:
        return 1.0 / m
    shift = mu / math.sqrt(2.0)

    def integrand(z: float) -> float:
        return math.exp(-0.5 * (z - shift) ** 2 + (m - 1) * float(log_ndtr(z))) / math.sqrt(2.0 * math.pi)

    total = 0.0
    for k in range(-12, 12):
        value, _ = quad(integrand, shift + k, shift + k + 1, epsabs=1e-15, epsrel=1e-13, limit=100)
        total += value
    return min(1.0, max(1.0 / m, total))


# --- a claim's bound -------------------------------------------------------------------------------------------


def _noise_multiplier(event: dp_accounting.DpEvent) -> float:
    nm = Number(finite=False).check(event.noise_multiplier, "the event's noise_multiplier")
    if nm < 0:
        raise ValueError(f"the event's noise_multiplier must be >= 0, got {nm!r}")
    return nm


def _two_over(nm: float) -> float:
    """2 / noise_multiplier: replace-one moves the input by 2 clip; 0 noise is no privacy (inf)."""
    return math.inf if nm == 0 else 2.0 / nm


def claim_rero_bound(
    event: dp_accounting.DpEvent, *, candidates: int, eps: float | None, delta: float
) -> tuple[float, str]:
    """The tightest ReRo bound for a uniform prior over M = ``candidates`` inputs (kappa = 1/M) that a one-round
    claim supports, and the name of the bound that gave it.

    ``event`` is the mechanism's one-round ``dp_accounting`` event under REPLACE_ONE neighbours (replacing
    one input moves it by at most 2 clip) and (``eps``, ``delta``) its claim. The minimum is taken over:

    * ``GaussianDpEvent(noise_multiplier = sigma / clip)``: mu = 2 / noise_multiplier, and
      ``gaussian_rero_bound(mu, M)`` ("gaussian M-point (Hayes et al. 2023)"), ``gdp_rero_bound(mu, 1/M)``
      ("mu-GDP") and ``rero_bound(eps, delta, 1/M)`` ("(eps, delta)-DP");
    * ``LaplaceDpEvent(noise_multiplier = scale / clip)``: eps_L = 2 / noise_multiplier, and
      ``laplace_rero_bound(eps_L, 1/M)`` ("Laplace f-DP (Kaissis et al. 2023)") and ``rero_bound(eps, delta,
      1/M)`` at the claim (delta = 0 for the toolkit's Laplace claim). The 1-D Laplace trade-off function is
      valid for l1-clipped multivariate Laplace (see ``laplace_rero_bound``), so there is no fallback;
    * any other event, including ``ComposedDpEvent`` and ``SelfComposedDpEvent`` (whose trade-off functions
      this module does not compose): the generic ``rero_bound(eps, delta, 1/M)`` at the claim only.

    The claim is taken at its word: a claim smaller than the event's own privacy gives a smaller (unsound)
    bound. Ties go to the first bound listed. ``eps`` None (no claim): (1.0, "no claim").
    """
    m = _CANDIDATES.check(candidates, "candidates")
    if eps is None:
        return 1.0, NO_CLAIM
    kappa = 1.0 / m
    options: list[tuple[float, str]] = []
    if isinstance(event, dp_accounting.GaussianDpEvent):
        mu = _two_over(_noise_multiplier(event))
        options += [(gaussian_rero_bound(mu=mu, candidates=m), GAUSSIAN_M_POINT),
                    (gdp_rero_bound(mu=mu, kappa=kappa), MU_GDP)]  # fmt: skip
    elif isinstance(event, dp_accounting.LaplaceDpEvent):
        eps_laplace = _two_over(_noise_multiplier(event))
        options.append((laplace_rero_bound(eps=eps_laplace, kappa=kappa), LAPLACE_F_DP))
    options.append((rero_bound(eps=eps, delta=delta, kappa=kappa), GENERIC_DP))
    best = options[0]
    for option in options[1:]:
        if option[0] < best[0]:
            best = option
    return best
