"""Trade-off functions: a claim stated as f-DP (Dong, Roth & Su 2022, "Gaussian differential privacy").

A trade-off function f(alpha) is the least type II error of any test between the outputs on two neighbouring
inputs at type I error alpha; a mechanism is f-DP when every neighbouring pair is at least that hard to tell
apart. One-run audits (``auditkit.attacks.one_run``) refute a claim's curve, which is much sharper than its
(eps, delta) pair: a Gaussian mechanism is (eps, delta)-DP for a whole curve of pairs, but mu-GDP is one point.

Every curve here is symmetric (f = f^-1), and offers

* ``beta(alpha)``: f(alpha);
* ``inverse_blow_up(y)``: inf{alpha : 1 - f(alpha) >= y} = f(1 - y) for a symmetric f, the function the f-DP
  one-run recursion of Mahloujifar, Melis & Chaudhuri (ICML 2025) evaluates;
* ``scaled(s)``: the curve's family, s > 1 less private, ``scaled(1)`` the curve itself (a bound is the largest
  s whose curve the counts refute);
* ``epsilon(delta)``: the smallest eps with the curve inside the (eps, delta)-DP region (how a bound is reported);
* ``generic`` (optional, default false): true for the (eps, delta) curve any claim supports, which says nothing of
  the mechanism's own shape (a one-run audit then guesses on its grid and reports no family bound).

A mechanism declares its one-round curve with the ``tradeoff()`` capability (``auditkit.mechanisms.capabilities``);
without one, its claim's (eps, delta) curve stands in (``EpsDeltaTradeOff``).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from collections.abc import Callable
from typing import Protocol, runtime_checkable

import numpy as np
from scipy import optimize
from scipy.special import log_ndtr, ndtr, ndtri

__all__ = [
    "EpsDeltaTradeOff",
    "GaussianTradeOff",
    "LaplaceTradeOff",
    "ProfileTradeOff",
    "TradeOff",
    "gdp_delta",
]


@runtime_checkable
class TradeOff(Protocol):
    """What the one-run bounds read of a symmetric trade-off function (module docstring)."""

    @property
    def label(self) -> str: ...
    def beta(self, alpha: np.ndarray) -> np.ndarray: ...
    def inverse_blow_up(self, y: float) -> float: ...
    def scaled(self, s: float) -> TradeOff: ...
    def epsilon(self, delta: float) -> float: ...


def gdp_delta(epsilon: float, mu: float) -> float:
    """delta(eps) of mu-GDP (Dong, Roth & Su 2022, Cor. 2.13): Phi(-eps/mu + mu/2) - e^eps Phi(-eps/mu - mu/2),
    in log space so that large eps does not overflow."""
    if mu == 0:
        return 0.0
    if math.isinf(mu):
        return 1.0
    a = float(log_ndtr(-epsilon / mu + mu / 2))
    b = epsilon + float(log_ndtr(-epsilon / mu - mu / 2))
    return math.exp(a) * -math.expm1(b - a) if b < a else 0.0


def _symmetric_inverse_blow_up(curve: TradeOff, y: float) -> float:
    """inf{a : 1 - f(a) >= y} = f(1 - y) for a symmetric f (0 for y <= 0)."""
    return 0.0 if y <= 0 else float(curve.beta(np.array([1 - y]))[0])


def _smallest_epsilon(delta_of: Callable[[float], float], delta: float) -> float:
    """The smallest eps >= 0 with delta_of(eps) <= delta (delta_of decreasing), by bracketing and brentq."""
    if delta_of(0.0) <= delta:
        return 0.0
    high = 1.0
    while delta_of(high) > delta:
        high *= 2
        if high > 1e4:
            return math.inf
    return float(optimize.brentq(lambda e: delta_of(e) - delta, 0.0, high, xtol=1e-10))


@dataclass(frozen=True)
class GaussianTradeOff:
    """mu-GDP: G_mu(alpha) = Phi(Phi^-1(1 - alpha) - mu) (Dong, Roth & Su 2022, Def. 2.7), N(0, 1) vs N(mu, 1).
    The Gaussian mechanism with sensitivity Delta and noise sigma is (Delta / sigma)-GDP, and T of them compose to
    (mu sqrt T)-GDP exactly (their Cor. 3.3)."""

    mu: float

    @property
    def label(self) -> str:
        return f"GDP μ = {self.mu:.4g}"

    def beta(self, alpha: np.ndarray) -> np.ndarray:
        return ndtr(ndtri(1 - np.asarray(alpha, dtype=float)) - self.mu)

    def inverse_blow_up(self, y: float) -> float:
        if y <= 0 or y >= 1:
            return float(y >= 1)
        return float(ndtr(ndtri(y) - self.mu))

    def scaled(self, s: float) -> GaussianTradeOff:
        return GaussianTradeOff(self.mu * s)

    def epsilon(self, delta: float) -> float:
        return _smallest_epsilon(lambda e: gdp_delta(e, self.mu), delta)


@dataclass(frozen=True)
class LaplaceTradeOff:
    """The Laplace mechanism's exact curve, Lap(0, 1) vs Lap(eps, 1) (Dong, Roth & Su 2022, the f_eps of their
    Sec. 2.3; derivation in ``auditkit.accounting.rero.laplace_rero_bound``):
    f(a) = 1 - e^eps a (a < e^-eps / 2), e^-eps / (4 a) (up to 1/2), e^-eps (1 - a) (a > 1/2).
    Valid for the l1-clipped multivariate mechanism: a difference spread over coordinates is at least as private
    (checked by exact privacy-loss computation, ``laplace_rero_bound``)."""

    eps: float

    @property
    def label(self) -> str:
        return f"Laplace ε = {self.eps:.4g}"

    def beta(self, alpha: np.ndarray) -> np.ndarray:
        a = np.asarray(alpha, dtype=float)
        low = np.exp(-self.eps) / 2
        with np.errstate(divide="ignore"):
            middle = np.exp(-self.eps) / (4 * np.maximum(a, 1e-300))
        return np.where(a < low, 1 - np.exp(self.eps) * a, np.where(a <= 0.5, middle, np.exp(-self.eps) * (1 - a)))

    def inverse_blow_up(self, y: float) -> float:
        return _symmetric_inverse_blow_up(self, y)

    def scaled(self, s: float) -> LaplaceTradeOff:
        return LaplaceTradeOff(self.eps * s)

    def epsilon(self, delta: float) -> float:
        """delta(e) = max over a of 1 - f(a) - e^e a = 1 - e^((e - eps) / 2) for e <= eps (the maximum sits on the
        middle piece, at a = e^(-(e + eps) / 2) / 2), so eps(delta) = eps + 2 ln(1 - delta)."""
        return max(0.0, self.eps + 2 * math.log1p(-delta)) if delta < 1 else 0.0


@dataclass(frozen=True)
class EpsDeltaTradeOff:
    """(eps, delta)-DP as a curve: f(a) = max(0, 1 - delta - e^eps a, e^-eps (1 - delta - a)) (Dong, Roth & Su
    2022, Prop. 2.5; Kairouz, Oh & Viswanath 2015). What any claim supports without a curve of its own."""

    eps: float
    delta: float
    generic = True  # any claim's pair: no shape of the mechanism's own

    @property
    def label(self) -> str:
        return f"(ε, δ) = ({self.eps:.4g}, {self.delta:.3g})"

    def beta(self, alpha: np.ndarray) -> np.ndarray:
        a = np.asarray(alpha, dtype=float)
        return np.maximum(0.0, np.maximum(1 - self.delta - np.exp(self.eps) * a,
                                          np.exp(-self.eps) * (1 - self.delta - a)))

    def inverse_blow_up(self, y: float) -> float:
        return max(0.0, 1 - self.delta - math.exp(self.eps) * (1 - y), math.exp(-self.eps) * (y - self.delta))

    def scaled(self, s: float) -> EpsDeltaTradeOff:
        return EpsDeltaTradeOff(self.eps * s, self.delta)

    def epsilon(self, delta: float) -> float:
        """eps at delta >= the curve's own; below it no eps will do (f(0) = 1 - delta' < 1 - delta)."""
        return self.eps if delta >= self.delta else math.inf


@dataclass(frozen=True)
class ProfileTradeOff:
    """The curve of a privacy profile delta(eps) given on a grid of eps (Dong, Roth & Su 2022, Prop. 2.12):
    f(a) = max over the grid of max(0, 1 - delta_i - e^eps_i a, e^-eps_i (1 - delta_i - a)). A finite grid gives a
    curve below the true one (more private claims are never invented), so a refutation of it stays sound.
    ``family``: how ``scaled(s)`` rebuilds the profile (``auditkit.accounting.composed_tradeoff``)."""

    epsilons: np.ndarray = field(repr=False)
    deltas: np.ndarray = field(repr=False)
    name: str = "privacy profile"
    family: Callable[[float], ProfileTradeOff] | None = field(default=None, repr=False, compare=False)
    scale_step: float = 2 ** (1 / 8)  # the family is searched on s = step^j: each member costs a composition
    epsilon_at: Callable[[float], float] | None = field(default=None, repr=False, compare=False)

    @property
    def label(self) -> str:
        return self.name

    def beta(self, alpha: np.ndarray) -> np.ndarray:
        a = np.atleast_1d(np.asarray(alpha, dtype=float))[:, None]
        e, d = self.epsilons[None, :], self.deltas[None, :]
        pieces = np.maximum(1 - d - np.exp(e) * a, np.exp(-e) * (1 - d - a))
        return np.maximum(0.0, pieces.max(axis=1))

    def inverse_blow_up(self, y: float) -> float:
        return _symmetric_inverse_blow_up(self, y)

    def scaled(self, s: float) -> ProfileTradeOff:
        if self.family is None:
            raise ValueError(f"the curve {self.name!r} has no family to scale")
        return self.family(s)

    def epsilon(self, delta: float) -> float:
        """The profile's own eps at delta where given (``epsilon_at``), else the first grid eps with delta_i <= delta."""
        if self.epsilon_at is not None:
            return float(self.epsilon_at(delta))
        below = np.nonzero(self.deltas <= delta)[0]
        return math.inf if len(below) == 0 else float(self.epsilons[below[0]])
