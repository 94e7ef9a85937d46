"""Privacy over T rounds, through existing accountants (never a home-made sum).

* Gaussian events (optionally Poisson-subsampled): Opacus's RDP and PRV accountants, or Google's
  ``dp_accounting`` PLD / RDP accountants.
* Laplace events (optionally Poisson-subsampled): ``dp_accounting``'s PLD accountant; the result is
  never worse than basic composition T * eps, which is reported instead when it is smaller.

Every result names the backend that produced it. Events that no backend supports, such as
subsampling *with replacement* composed over rounds, raise `UnsupportedEvent` instead of
returning a number.
"""
from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

GAUSSIAN_BACKENDS = ("opacus-prv", "opacus-rdp", "dp_accounting-pld", "dp_accounting-rdp")
LAPLACE_BACKENDS = ("dp_accounting-pld",)


class UnsupportedEvent(ValueError):
    """No accountant here supports the event; the message says why and what would be supported."""


@dataclass(frozen=True)
class ComposedEpsilon:
    """epsilon after `rounds` compositions at `delta`, and where it came from."""

    epsilon: float
    delta: float
    rounds: int
    backend: str
    event: str


def _check(rounds: int, delta: float, sample_rate: float) -> None:
    if isinstance(rounds, bool) or not isinstance(rounds, int) or rounds < 1:
        raise ValueError(f"rounds must be an integer >= 1, got {rounds!r}")
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    if not 0 < sample_rate <= 1:
        raise ValueError(f"sample_rate must be in (0, 1], got {sample_rate!r}")


def gaussian_over_rounds(
    noise_multiplier: float,
    rounds: int,
    *,
    delta: float,
    sample_rate: float = 1.0,
    backend: str = "opacus-prv",
) -> ComposedEpsilon:
    """eps of `rounds` Gaussian mechanisms with std = noise_multiplier * sensitivity, each applied
    to a Poisson sample of rate `sample_rate` (1 = everyone, every round)."""
    _check(rounds, delta, sample_rate)
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    if delta == 0:
        raise UnsupportedEvent("a Gaussian mechanism has no finite epsilon at delta = 0; give delta > 0")
    event = f"Gaussian(noise_multiplier={noise_multiplier:g}) x {rounds}" + (
        f", Poisson-sampled at rate {sample_rate:g}" if sample_rate < 1 else "")
    if backend in ("opacus-prv", "opacus-rdp"):
        from opacus.accountants import PRVAccountant, RDPAccountant

        accountant = PRVAccountant() if backend == "opacus-prv" else RDPAccountant()
        accountant.history = [(noise_multiplier, sample_rate, rounds)]
        with warnings.catch_warnings():  # PRV's grid logs 0 where the mass is 0; harmless
            warnings.simplefilter("ignore", RuntimeWarning)
            try:
                epsilon = float(accountant.get_epsilon(delta))
            except (MemoryError, RuntimeError):  # PRV's grid grows as 1/noise_multiplier^2 and loses accuracy
                raise UnsupportedEvent(
                    f"{backend} cannot evaluate {event}: the noise is too small for its numerical grid; "
                    "try backend opacus-rdp"
                ) from None
    elif backend in ("dp_accounting-pld", "dp_accounting-rdp"):
        import dp_accounting

        single = dp_accounting.GaussianDpEvent(noise_multiplier)
        if sample_rate < 1:
            single = dp_accounting.PoissonSampledDpEvent(sample_rate, single)
        accountant = (dp_accounting.pld.PLDAccountant() if backend == "dp_accounting-pld"
                      else dp_accounting.rdp.RdpAccountant())
        accountant.compose(single, rounds)
        epsilon = float(accountant.get_epsilon(delta))
    else:
        raise ValueError(f"backend must be one of {', '.join(GAUSSIAN_BACKENDS)}; got {backend!r}")
    return ComposedEpsilon(epsilon, delta, rounds, backend, event)


# per-round eps above which the Laplace PLD is not built (its grid has 2 eps / 1e-4 points)
PLD_MAX_ROUND_EPSILON = 20.0


def laplace_over_rounds(
    noise_multiplier: float,
    rounds: int,
    *,
    delta: float = 0.0,
    sample_rate: float = 1.0,
) -> ComposedEpsilon:
    """eps of `rounds` Laplace mechanisms with scale = noise_multiplier * l1 sensitivity.

    The PLD accountant (``dp_accounting``) gives eps at delta > 0; basic composition gives
    T * eps_1 at any delta, with eps_1 = 1/noise_multiplier (or its Poisson-amplified value
    ln(1 + q(e^eps_1 - 1))). The smaller valid bound is returned, with its backend named.
    Above eps_1 = ``PLD_MAX_ROUND_EPSILON`` the PLD grid (2 eps_1 / 1e-4 points, gigabytes for the
    eps_1 ~ 1e4 of weak noise) is not built, and basic composition is the answer.
    """
    _check(rounds, delta, sample_rate)
    if not noise_multiplier > 0:
        raise ValueError(f"noise_multiplier must be > 0, got {noise_multiplier!r}")
    eps_one = 1.0 / noise_multiplier
    if sample_rate < 1:
        eps_one = math.log1p(sample_rate * math.expm1(eps_one))
    event = f"Laplace(noise_multiplier={noise_multiplier:g}) x {rounds}" + (
        f", Poisson-sampled at rate {sample_rate:g}" if sample_rate < 1 else "")
    basic = ComposedEpsilon(rounds * eps_one, delta, rounds, "basic composition", event)
    if delta == 0 or eps_one > PLD_MAX_ROUND_EPSILON:
        return basic
    import dp_accounting

    single = dp_accounting.LaplaceDpEvent(noise_multiplier)
    if sample_rate < 1:
        single = dp_accounting.PoissonSampledDpEvent(sample_rate, single)
    accountant = dp_accounting.pld.PLDAccountant()
    accountant.compose(single, rounds)
    pld = ComposedEpsilon(float(accountant.get_epsilon(delta)), delta, rounds, "dp_accounting-pld", event)
    return pld if pld.epsilon < basic.epsilon else basic


def refuse_sampling_with_replacement(rounds: int) -> None:
    """CEPAM's local steps sample records with replacement; no accountant composes that event."""
    raise UnsupportedEvent(
        f"no accountant supports subsampling with replacement composed over {rounds} rounds "
        "(Opacus and dp_accounting implement Poisson sampling and sampling without replacement); "
        "use Poisson sampling of local steps to get an accountable T-round guarantee"
    )
