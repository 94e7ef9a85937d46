"""Epsilon lower bounds: the caps of auditing.md, Clopper-Pearson, coverage, the one-run bound, bad input.

Coverage checks draw counts from the tight case of the inequality (TPR = e^eps FPR exactly, as a Laplace
threshold test in the tail has) with fixed seeds: a valid 95% bound exceeds the true eps in at most 5% of
repetitions; with 2,000 repetitions the observed rate has standard deviation <= 0.5%, so the threshold 6.5%
is 3 standard deviations above the worst valid case.
"""

import math

import numpy as np
import pytest
from scipy import stats

from auditkit.attacks.epsilon_bounds import (
    clopper_pearson_upper,
    distinguishing_p_value,
    epsilon_lower_bound,
    max_certifiable,
    one_run_epsilon_lower_bound,
    one_run_p_value,
)


@pytest.mark.parametrize(
    ("trials", "cap"), [(100, 2.57), (1_000, 4.91), (10_000, 7.21), (100_000, 9.51), (1_000_000, 11.82)]
)
def test_perfect_test_caps_match_the_auditing_table(trials, cap):
    assert round(max_certifiable(trials, confidence=0.95, delta=1e-5), 2) == cap


@pytest.mark.parametrize(("canaries", "cap"), [(1_000, 5.78), (10_000, 7.83)])
def test_one_run_bound_with_every_guess_right_matches_the_auditing_table(canaries, cap):
    bound = one_run_epsilon_lower_bound(canaries, canaries, canaries, confidence=0.95, delta=1e-5)
    assert round(bound, 2) == cap


def test_clopper_pearson_upper_is_the_binomial_tail_inversion():
    assert clopper_pearson_upper(0, 50, 0.025) == pytest.approx(1 - 0.025 ** (1 / 50))
    assert clopper_pearson_upper(50, 50, 0.025) == 1.0
    u = clopper_pearson_upper(7, 200, 0.05)
    assert stats.binom.cdf(7, 200, u) == pytest.approx(0.05, rel=1e-8)
    np.testing.assert_allclose(
        clopper_pearson_upper(np.array([0, 7]), 200, 0.05), [clopper_pearson_upper(0, 200, 0.05), u]
    )


def test_bound_is_symmetric_in_the_two_error_types_and_shrinks_with_delta():
    a = epsilon_lower_bound(3, 1000, 400, 1000, confidence=0.95, delta=0.0)
    b = epsilon_lower_bound(400, 1000, 3, 1000, confidence=0.95, delta=0.0)
    assert a == pytest.approx(b) and a > 0
    assert epsilon_lower_bound(3, 1000, 400, 1000, confidence=0.95, delta=0.1) < a
    assert epsilon_lower_bound(500, 1000, 500, 1000, confidence=0.95, delta=0.0) == 0.0  # coin flip: no bound


def test_bound_covers_the_true_epsilon_in_the_tight_case():
    rng = np.random.default_rng(0)
    eps, n, fpr = 1.0, 5_000, 0.05
    tpr = math.exp(eps) * fpr
    fp = rng.binomial(n, fpr, size=2000)
    fn = rng.binomial(n, 1 - tpr, size=2000)
    bounds = [epsilon_lower_bound(int(a), n, int(b), n, confidence=0.95, delta=0.0) for a, b in zip(fp, fn)]
    assert np.mean(np.array(bounds) > eps) <= 0.065
    assert np.median(bounds) > 0.7  # and it is not vacuous


def test_p_value_agrees_with_the_bound():
    counts = (40, 5_000, 4_000, 5_000)
    p = distinguishing_p_value(*counts, epsilon=2.8, delta=0.0)
    assert 0.001 < p < 0.1
    assert epsilon_lower_bound(*counts, confidence=1 - p * 1.01, delta=0.0) > 2.8
    assert epsilon_lower_bound(*counts, confidence=1 - p * 0.99, delta=0.0) <= 2.8
    assert distinguishing_p_value(2_500, 5_000, 2_500, 5_000, epsilon=0.5, delta=0.0) == 1.0


def test_one_run_bound_covers_randomized_response():
    rng = np.random.default_rng(1)
    eps, guesses = 2.0, 200
    correct = rng.binomial(guesses, math.exp(eps) / (1 + math.exp(eps)), size=2000)
    bounds = {int(v): one_run_epsilon_lower_bound(int(v), guesses, 1000, confidence=0.95) for v in np.unique(correct)}
    assert np.mean([bounds[int(v)] > eps for v in correct]) <= 0.065


def test_one_run_bound_is_monotone_and_zero_without_evidence():
    assert one_run_epsilon_lower_bound(0, 100, 1000) == 0.0
    assert one_run_epsilon_lower_bound(50, 100, 1000) == 0.0  # chance level
    bounds = [one_run_epsilon_lower_bound(v, 100, 1000, delta=1e-5) for v in (80, 90, 100)]
    assert bounds == sorted(bounds) and bounds[0] > 0
    assert one_run_p_value(100, 100, 1000, epsilon=0.0, delta=0.0) == pytest.approx(2.0**-100)


@pytest.mark.parametrize(
    ("call", "match"),
    [
        (lambda: max_certifiable(1, confidence=0.95), "trials"),
        (lambda: max_certifiable(1000, confidence=1.0), "confidence"),
        (lambda: max_certifiable(1000, confidence=0.0), "confidence"),
        (lambda: max_certifiable(1000, delta=1.0), "delta"),
        (lambda: epsilon_lower_bound(0, 10, 0, 10, confidence=0.95, delta=-0.1), "delta"),
        (lambda: epsilon_lower_bound(11, 10, 0, 10, confidence=0.95, delta=0.0), "fp"),
        (lambda: epsilon_lower_bound(0, 10, 0, 0, confidence=0.95, delta=0.0), "fn"),
        (lambda: clopper_pearson_upper(0, 10, 1.5), "alpha"),
        (lambda: one_run_epsilon_lower_bound(11, 10, 100), "correct"),
        (lambda: one_run_epsilon_lower_bound(5, 10, 100, confidence=1.2), "confidence"),
        (lambda: distinguishing_p_value(0, 10, 0, 10, epsilon=-1.0, delta=0.0), "epsilon"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()


def test_clopper_pearson_is_the_beta_quantile_on_every_scipy(monkeypatch):
    """The fast quantile (``special.betainccinv`` where SciPy has it) and the fallback (``stats.beta.isf``, SciPy
    1.11) give the same upper bounds, fractional counts included."""
    from scipy import stats as scipy_stats

    from auditkit.attacks import epsilon_bounds

    k = np.r_[np.arange(0, 100), 3.7, 41.25]
    expected = scipy_stats.beta.isf(0.01, k + 1, 100 - k)
    assert np.allclose(epsilon_bounds.clopper_pearson_upper(k, 100, 0.01), expected, rtol=1e-12, atol=0)
    monkeypatch.setattr(epsilon_bounds, "_BETA_UPPER_QUANTILE", lambda a, b, alpha: scipy_stats.beta.isf(alpha, a, b))
    assert np.allclose(epsilon_bounds.clopper_pearson_upper(k, 100, 0.01), expected, rtol=1e-12, atol=0)
