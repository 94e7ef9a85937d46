"""The whole run's claim as a trade-off curve: a one-round ``dp_accounting`` event composed over T rounds, as f-DP.

A one-run canary audit refutes the composed claim's curve (``auditkit.mechanisms.tradeoff``), not just its (eps,
delta) pair. ``composed_tradeoff(event, rounds, relation)`` gives the sharpest curve this module can state exactly:

* unsampled Gaussian rounds: (mu sqrt T)-GDP, exact (Dong, Roth & Su 2022, Cor. 3.3), mu = 1 / z under
  ADD_OR_REMOVE_ONE (2 / z under REPLACE_ONE, the rewriting of ``auditkit.accounting.composition``);
* one unsampled Laplace round: its exact curve; Laplace rounds over T > 1, and Poisson-sampled Gaussian or Laplace
  rounds (DP-FedAvg's client sampling): dp_accounting's privacy-loss distribution (pessimistic, connect-the-dots)
  composed T times, its privacy profile delta(eps) turned into a curve (``ProfileTradeOff``, Prop. 2.12);
* anything else: None, and the caller falls back to the (eps, delta) curve of ``compose``'s number.

The CLT limit of the sampled Gaussian, mu = q sqrt(T (e^(1/z^2) - 1)) (Dong, Roth & Su Cor. 5.4), is not used: it is
optimistic in the tails a one-run audit probes (z = 1, q = 0.1, T = 100: mu 1.31, eps 6.0 at delta 1e-5, where the
privacy-loss distribution gives 7.05), so a true claim could be "refuted".

Each curve's ``scaled(s)`` divides the noise multiplier by s (the family the bound is searched in).
"""
from __future__ import annotations

import functools
import math

import dp_accounting
import numpy as np
from dp_accounting import NeighboringRelation
from dp_accounting.pld import privacy_loss_distribution as pld_lib

from auditkit.accounting.composition import _as_add_or_remove, _flat_sampling
from auditkit.mechanisms.tradeoff import GaussianTradeOff, LaplaceTradeOff, ProfileTradeOff, TradeOff

__all__ = ["composed_tradeoff"]

PLD_DISCRETIZATION = 1e-3  # dp_accounting's value discretization interval: 0.05-0.2 s per composed profile
PROFILE_POINTS = 1000  # eps grid of the profile


def composed_tradeoff(event: dp_accounting.DpEvent, rounds: int, relation: NeighboringRelation) -> TradeOff | None:
    """The curve of ``rounds`` rounds of ``event`` under ``relation`` (module docstring); None when not stated."""
    event = _flat_sampling(event)
    rate = 1.0
    if isinstance(event, dp_accounting.PoissonSampledDpEvent):
        if relation is not NeighboringRelation.ADD_OR_REMOVE_ONE:
            return None  # the accountants compose sampled rounds under add/remove only
        rate, event = event.sampling_probability, event.event
    else:
        event = _as_add_or_remove(event, relation)
    if isinstance(event, dp_accounting.GaussianDpEvent):
        z = event.noise_multiplier
        if z <= 0:
            return None
        if rate == 1.0:
            return GaussianTradeOff(math.sqrt(rounds) / z)
        return _profile("gaussian", z, rate, rounds)
    if isinstance(event, dp_accounting.LaplaceDpEvent):
        b = event.noise_multiplier
        if b <= 0:
            return None
        if rate == 1.0 and rounds == 1:
            return LaplaceTradeOff(1.0 / b)
        return _profile("laplace", b, rate, rounds)
    return None


@functools.lru_cache(maxsize=256)
def _profile(noise: str, multiplier: float, rate: float, rounds: int) -> ProfileTradeOff:
    """The composed privacy-loss distribution of ``rounds`` add/remove rounds (noise multiplier, Poisson rate), as
    a curve; ``scaled(s)`` rebuilds it at multiplier / s."""
    build = pld_lib.from_gaussian_mechanism if noise == "gaussian" else pld_lib.from_laplace_mechanism
    pld = build(multiplier, sensitivity=1.0, sampling_prob=rate,
                value_discretization_interval=PLD_DISCRETIZATION).self_compose(rounds)
    top = pld.get_epsilon_for_delta(1e-12)
    top = 60.0 if not math.isfinite(top) else min(60.0, 1.5 * top + 0.5)
    # dense where claims live, coarser above: a sparser grid only loses privacy the curve could have claimed
    epsilons = np.unique(np.concatenate([np.linspace(0.0, min(top, 4.0), PROFILE_POINTS // 2),
                                         np.geomspace(min(top, 4.0), top, PROFILE_POINTS // 2)]))
    deltas = np.asarray(pld.get_delta_for_epsilon(epsilons), dtype=float)
    sampled = "" if rate == 1.0 else f", Poisson q = {rate:.4g}"
    name = f"{noise.capitalize()} z = {multiplier:.4g}{sampled}, composed (PLD)"
    return ProfileTradeOff(epsilons, deltas, name,
                           family=lambda s: _profile(noise, multiplier / s, rate, rounds),
                           epsilon_at=lambda delta: float(pld.get_epsilon_for_delta(delta)))
