"""Trade-off curves: each checked against the optimal (likelihood-ratio threshold) test computed from the
distributions themselves, and their epsilons against the analytic Gaussian and the Laplace profile."""
import math

import numpy as np
import pytest
from scipy import stats

from auditkit.mechanisms.additive import analytic_gaussian_epsilon
from auditkit.mechanisms.tradeoff import (
    EpsDeltaTradeOff,
    GaussianTradeOff,
    LaplaceTradeOff,
    ProfileTradeOff,
    gdp_delta,
)

THRESHOLDS = np.linspace(-4, 6, 41)


@pytest.mark.parametrize("mu", [0.25, 0.5, 1.0, 2.0])
def test_gdp_curve_is_the_normal_shift_test(mu):
    # N(0,1) vs N(mu,1): the test "reject when x >= t" has alpha = P0[X >= t], beta = P1[X < t]
    alpha, beta = stats.norm.sf(THRESHOLDS), stats.norm.cdf(THRESHOLDS - mu)
    assert np.allclose(GaussianTradeOff(mu).beta(alpha), beta, atol=1e-9)


@pytest.mark.parametrize("eps", [0.3, 1.0, 3.0])
def test_laplace_curve_is_the_laplace_shift_test(eps):
    alpha, beta = stats.laplace.sf(THRESHOLDS), stats.laplace.cdf(THRESHOLDS, loc=eps)
    assert np.allclose(LaplaceTradeOff(eps).beta(alpha), beta, atol=1e-9)


@pytest.mark.parametrize("curve", [GaussianTradeOff(1.3), LaplaceTradeOff(1.7), EpsDeltaTradeOff(1.1, 1e-3)])
def test_inverse_blow_up_inverts_one_minus_f(curve):
    for a in [1e-6, 1e-3, 0.05, 0.2, 0.45]:
        y = 1 - float(curve.beta(np.array([a]))[0])
        # inf{a : 1 - f(a) >= y} is a itself where f is strictly decreasing
        assert curve.inverse_blow_up(y) == pytest.approx(a, rel=1e-6, abs=1e-12)


def test_gdp_epsilons_are_the_analytic_gaussian_and_table_1():
    # Mahloujifar et al. 2025, Table 1 "theoretical" column (truncated to 2 decimals): 9.99 / 4.37 / 1.99 / 0.92
    for mu, printed in [(2.0, 9.99), (1.0, 4.37), (0.5, 1.99), (0.25, 0.92)]:
        eps = GaussianTradeOff(mu).epsilon(1e-5)
        assert eps == pytest.approx(analytic_gaussian_epsilon(1.0, 1.0 / mu, 1e-5), abs=1e-7)
        assert math.floor(eps * 100) / 100 == printed


def test_laplace_epsilon_is_the_profile_of_its_curve():
    curve = LaplaceTradeOff(2.0)
    assert curve.epsilon(0.0) == 2.0
    alphas = np.logspace(-12, np.log10(0.5), 200_000)
    for delta in [1e-5, 0.01, 0.2]:
        eps = curve.epsilon(delta)
        # delta(eps) = max over alpha of 1 - f(alpha) - e^eps alpha, evaluated on a fine grid
        assert np.max(1 - curve.beta(alphas) - math.exp(eps) * alphas) == pytest.approx(delta, abs=1e-6)


def test_eps_delta_curve_has_no_epsilon_below_its_delta():
    curve = EpsDeltaTradeOff(1.0, 1e-3)
    assert curve.epsilon(1e-3) == 1.0 and curve.epsilon(0.1) == 1.0 and curve.epsilon(1e-4) == math.inf
    assert curve.scaled(2.0) == EpsDeltaTradeOff(2.0, 1e-3)


def test_profile_of_gdp_is_just_below_gdp():
    mu = 1.5
    epsilons = np.linspace(0, 20, 2001)
    profile = ProfileTradeOff(epsilons, np.array([gdp_delta(e, mu) for e in epsilons]))
    alphas = np.logspace(-8, np.log10(0.5), 60)
    exact, from_profile = GaussianTradeOff(mu).beta(alphas), profile.beta(alphas)
    assert np.all(from_profile <= exact + 1e-12)  # a finite grid never invents privacy
    assert np.max(exact - from_profile) < 2e-3
    assert profile.epsilon(1e-5) == pytest.approx(GaussianTradeOff(mu).epsilon(1e-5), abs=0.011)
    with pytest.raises(ValueError, match="no family"):
        profile.scaled(2.0)
