"""Declared output densities scored over many (output, candidate) pairs at once, against the closed forms
written out here."""
import math
import tracemalloc

import numpy as np
import pytest
import torch

from auditkit import mechanisms
from auditkit.mechanisms.densities import ClippedGaussian, ClippedLaplace, pair_log_densities

RNG = np.random.default_rng(5)
YS = RNG.normal(size=(40, 300)) * 0.3
XS = RNG.normal(size=(9, 300)) * np.array([0.01, 0.05, 0.1, 0.2, 1.0, 3.0, 0.02, 0.5, 2.0])[:, None]  # some clipped
ROWS = RNG.integers(0, 40, 200)
COLUMNS = RNG.integers(0, 9, 200)


def _clip(x, clip, p):
    return x / max(1.0, np.linalg.norm(x, ord=p) / clip)


def test_the_gaussian_pairs_are_the_closed_form_minus_squared_distance_over_two_sigma_squared():
    density = ClippedGaussian(0.7, 1.5, "l2")
    expected = [-((YS[t] - _clip(XS[j], 1.5, 2)) ** 2).sum() / (2 * 0.49) for t, j in zip(ROWS, COLUMNS)]
    assert pair_log_densities(density, YS, XS, ROWS, COLUMNS) == pytest.approx(expected, rel=1e-10, abs=1e-9)
    assert density(YS[:5], XS[4]) == pytest.approx([-((y - _clip(XS[4], 1.5, 2)) ** 2).sum() / 0.98 for y in YS[:5]])


def test_the_laplace_pairs_are_the_closed_form_minus_l1_distance_over_the_scale():
    density = ClippedLaplace(0.3, 2.0, "l1")
    expected = [-np.abs(YS[t] - _clip(XS[j], 2.0, 1)).sum() / 0.3 for t, j in zip(ROWS, COLUMNS)]
    assert pair_log_densities(density, YS, XS, ROWS, COLUMNS) == pytest.approx(expected, rel=1e-10)


@pytest.mark.parametrize("density", [ClippedGaussian(0.7, 1.5, "l2"), ClippedLaplace(0.3, 2.0, "l1")])
def test_scoring_a_group_of_outputs_allocates_no_copy_of_it(density):
    """A group of outputs of a large model is most of what the identification may hold: scoring half its rows
    against a block of 4 candidates allocates (numpy, traced) under a quarter of the group's bytes: the block's
    clipped copy, an eighth (a copy of the rows used, or of their squares, would be half)."""
    ys = np.random.default_rng(0).normal(size=(32, 100_000))
    xs = ys[:4] * 0.5
    rows = np.repeat(np.arange(0, 32, 2), 4)
    columns = np.tile(np.arange(4), 16)
    tracemalloc.start()
    try:
        scores = pair_log_densities(density, ys, xs, rows, columns)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < ys.nbytes / 4, f"{peak / ys.nbytes:.2f} of the outputs' bytes"
    assert scores == pytest.approx(pair_log_densities(lambda y, x: density(y, x), ys, xs, rows, columns), rel=1e-10)


def test_a_plain_function_of_a_plugin_is_called_once_per_candidate():
    calls = []

    def density(y, x):
        calls.append(len(y))
        return -np.abs(y - x).sum(axis=1)

    scores = pair_log_densities(density, YS, XS, ROWS, COLUMNS)
    assert scores == pytest.approx([-np.abs(YS[t] - XS[j]).sum() for t, j in zip(ROWS, COLUMNS)])
    assert len(calls) == len(np.unique(COLUMNS)) and sum(calls) == len(ROWS)


@pytest.mark.parametrize("name, params", [("gaussian", {"sigma": 0.4, "clip": 1.0}),
                                          ("cepam-gaussian", {"sigma": 0.4, "clip": 1.0, "n": 2}),
                                          ("laplace", {"scale": 0.4, "clip": 1.0}),
                                          ("cepam-laplace", {"scale": 0.4, "clip": 1.0}),
                                          ("jopeq-laplace", {"eps": 2.0, "bits": 2})])
def test_a_mechanisms_density_gives_the_same_values_one_call_at_a_time_and_in_pairs(name, params):
    """The likelihood-ratio statistic calls the density per input; the identification adversary scores pairs: both
    must rank candidates alike (differences equal up to rounding)."""
    density = mechanisms.create(name, **params).output_log_density()
    one_by_one = np.array([density(YS[t][None], XS[j])[0] for t, j in zip(ROWS, COLUMNS)])
    paired = pair_log_densities(density, YS, XS, ROWS, COLUMNS)
    # "up to a constant in x": compare the differences between candidates of one output
    same_output = [(a, b) for a in range(len(ROWS)) for b in range(a) if ROWS[a] == ROWS[b]]
    assert same_output
    for a, b in same_output:
        assert paired[a] - paired[b] == pytest.approx(one_by_one[a] - one_by_one[b], rel=1e-5, abs=1e-3)


def test_identification_picks_with_the_paired_scores_reach_the_bayes_rate_of_two_gaussians():
    """Two candidates at distance D under N(0, sigma^2 I): the likelihood pick succeeds with Phi(D / (2 sigma)).
    500 trials, 4 sigma of the binomial's spread."""
    from scipy import stats

    from auditkit.attacks import identify

    pool = torch.zeros(2, 50, dtype=torch.float64)
    pool[1, 0] = 0.8  # D = 0.8, sigma = 0.5: Phi(0.8) = 0.788
    gaussian = mechanisms.create("gaussian", sigma=0.5, clip=10.0, private_seed=2)
    result = identify(gaussian, pool, candidates=2, trials=500, seed=1)[0]
    expected = stats.norm.cdf(0.8)
    assert abs(result.rate - expected) < 4 * math.sqrt(expected * (1 - expected) / 500)
