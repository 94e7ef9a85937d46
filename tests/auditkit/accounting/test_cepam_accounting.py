"""003 Theorem 12 / 13 reproduced at the verification values of the spec (tau 15, K 30, gamma 1, n_k 1666)."""
import math

import pytest

from auditkit import accounting

SETTING = dict(tau=15, dataset_size=1666, clients=30, clip=1.0)


def test_amplified_epsilon_from_eps_tilde_5_9():
    assert accounting.amplified_epsilon(5.9, tau=15, dataset_size=1666) == pytest.approx(1.450187, abs=1e-6)
    assert accounting.base_epsilon(1.450187, tau=15, dataset_size=1666) == pytest.approx(5.9, abs=1e-5)


@pytest.mark.parametrize(("sigma", "delta"), [
    (0.1, 9.688740e-3), (1.0, 9.018e-3), (2.0, 1.600e-3), (3.0, 1.365e-4), (5.0, 3.674e-6),
])
def test_theorem_12_delta(sigma, delta):
    g = accounting.cepam_gaussian(sigma=sigma, eps_tilde=5.9, **SETTING)
    assert g.delta == pytest.approx(delta, rel=1e-3)
    assert g.epsilon == pytest.approx(1.450187, abs=1e-6)
    assert ("vacuous" in g.flags) == (sigma == 0.1)


def test_delta_saturates_at_the_no_noise_floor():
    floor = accounting.delta_floor(5.9, tau=15, dataset_size=1666)
    assert floor == pytest.approx(9.68874e-3, rel=1e-5)
    assert accounting.gaussian_delta(1e-9, 5.9, **SETTING) == pytest.approx(floor, rel=1e-9)
    assert accounting.solve_sigma(eps=1.450187, delta=0.0097, **SETTING) == 0.0  # vacuous target: no noise needed


def test_solve_sigma_inverts_the_delta():
    sigma = accounting.solve_sigma(eps=1.45, delta=1e-5, **SETTING)
    eps_tilde = accounting.base_epsilon(1.45, tau=15, dataset_size=1666)
    assert accounting.gaussian_delta(sigma, eps_tilde, **SETTING) == pytest.approx(1e-5, rel=1e-6)
    assert 3 < sigma < 6


def test_paper003_numbers_only_with_the_paper003_formula():
    printed = accounting.cepam_gaussian(sigma=0.001, eps_tilde=5.9, formula="paper003", **SETTING)
    assert printed.delta == pytest.approx(2.4647e-2, rel=1e-4) and "paper-compat" in printed.flags
    as_written = accounting.cepam_gaussian(sigma=0.001, eps_tilde=5.9, **SETTING)
    assert as_written.delta < 9.69e-3  # the formula's maximum is the floor; 003's 2.48e-2 exceeds it


@pytest.mark.parametrize(("delta", "sigmas"), [
    (0.01, [0.137493, 0.086438, 0.060247, 0.043060, 0.030686, 0.021344, 0.014079, 0.008304, 0.003636]),
    (0.015, [0.085675, 0.044468, 0.023616, 0.010111, 0.000517]),
])
def test_paper003_sigma_lists(delta, sigmas):
    solved = [accounting.solve_sigma(eps=e, delta=delta, formula="paper003", **SETTING) for e in range(1, len(sigmas) + 1)]
    assert solved == pytest.approx(sigmas, abs=1.5e-6)


def test_theorem_13_laplace():
    assert accounting.cepam_laplace(scale=0.1, tau=15, dataset_size=1666, eps_tilde=5000).epsilon == pytest.approx(
        4995.29, abs=0.01)
    minimal = accounting.cepam_laplace(scale=0.1, tau=15, dataset_size=1666)
    assert minimal.epsilon == pytest.approx(295.29, abs=0.01) and minimal.delta == 0
    assert any("l1" in c for c in minimal.caveats)
    with pytest.raises(ValueError, match="eps_tilde must be >= 2 tau gamma / b = 300"):
        accounting.cepam_laplace(scale=0.1, tau=15, dataset_size=1666, eps_tilde=10)


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(tau=0), "tau must be an integer >= 1, got 0"),
    (dict(dataset_size=0), "dataset_size must be an integer >= 1, got 0"),
    (dict(clients=0), "clients must be an integer >= 1, got 0"),
    (dict(sigma=-1.0), "sigma must be a finite number > 0"),
    (dict(sigma=math.nan), "sigma must be a finite number > 0"),
    (dict(eps_tilde=0.0), "eps_tilde must be a finite number > 0"),
])
def test_bad_input(kwargs, message):
    args = dict(sigma=0.1, eps_tilde=5.9, **SETTING)
    args.update(kwargs)
    with pytest.raises(ValueError, match=message):
        accounting.cepam_gaussian(**args)
    with pytest.raises(ValueError, match="delta must be in"):
        accounting.solve_sigma(eps=1.0, delta=1.5, **SETTING)
