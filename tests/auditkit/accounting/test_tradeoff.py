"""The composed claim as a curve: exact GDP where it exists, the privacy-loss distribution otherwise, checked against
the accountants of ``compose`` (Opacus PRV) and against the CLT limit it must not use."""
import math

import dp_accounting
import numpy as np
import pytest

from auditkit.accounting import compose, composed_tradeoff
from auditkit.mechanisms.tradeoff import GaussianTradeOff, LaplaceTradeOff

ADD, REPLACE = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE, dp_accounting.NeighboringRelation.REPLACE_ONE


def test_unsampled_gaussian_rounds_are_exact_gdp():
    assert composed_tradeoff(dp_accounting.GaussianDpEvent(2.0), 4, ADD) == GaussianTradeOff(1.0)
    # replace-one moves the input by twice the clip: mu = 2 sqrt(T) / z
    assert composed_tradeoff(dp_accounting.GaussianDpEvent(2.0), 9, REPLACE) == GaussianTradeOff(3.0)


def test_one_laplace_round_is_its_exact_curve():
    assert composed_tradeoff(dp_accounting.LaplaceDpEvent(2.0), 1, REPLACE) == LaplaceTradeOff(1.0)
    assert composed_tradeoff(dp_accounting.LaplaceDpEvent(2.0), 1, ADD) == LaplaceTradeOff(0.5)


def test_sampled_gaussian_matches_the_accountants():
    event = dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.0))
    curve = composed_tradeoff(event, 100, ADD)
    assert curve.epsilon(1e-5) == pytest.approx(7.047, abs=0.01)
    assert curve.epsilon(1e-5) == pytest.approx(compose(event, 100, delta=1e-5, relation=ADD).epsilon, rel=0.01)
    # the CLT limit mu = q sqrt(T (e^(1/z^2) - 1)) claims MORE privacy in the tail a one-run audit probes
    clt = GaussianTradeOff(0.1 * math.sqrt(100 * (math.e - 1)))
    assert curve.beta(np.array([1e-4]))[0] < clt.beta(np.array([1e-4]))[0]


def test_profile_of_unsampled_rounds_agrees_with_exact_gdp():
    # five Laplace rounds have no closed form; five Gaussian rounds through the same path must give GDP back
    from auditkit.accounting.tradeoff import _profile

    profile = _profile("gaussian", 2.0, 1.0, 5)
    alphas = np.logspace(-6, np.log10(0.5), 30)
    assert np.max(np.abs(profile.beta(alphas) - GaussianTradeOff(math.sqrt(5) / 2).beta(alphas))) < 5e-3


def test_scaling_divides_the_noise_multiplier():
    event = dp_accounting.PoissonSampledDpEvent(0.5, dp_accounting.GaussianDpEvent(2.0))
    curve = composed_tradeoff(event, 5, ADD)
    doubled = composed_tradeoff(dp_accounting.PoissonSampledDpEvent(0.5, dp_accounting.GaussianDpEvent(1.0)), 5, ADD)
    assert curve.scaled(2.0).epsilon(1e-5) == pytest.approx(doubled.epsilon(1e-5), rel=1e-9)
    assert curve.scaled(2.0).epsilon(1e-5) > curve.epsilon(1e-5)


def test_events_without_a_curve():
    assert composed_tradeoff(dp_accounting.NonPrivateDpEvent(), 3, ADD) is None
    sampled = dp_accounting.PoissonSampledDpEvent(0.5, dp_accounting.GaussianDpEvent(1.0))
    assert composed_tradeoff(sampled, 3, REPLACE) is None  # sampled rounds compose under add/remove only
