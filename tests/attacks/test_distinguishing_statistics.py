"""Statistics and threshold search: composite ranks, the best cut, the classifier where projection fails."""

import numpy as np
import pytest

from attacks.distinguishing_statistics import best_threshold, dense_ranks, fit_scorer
from attacks.epsilon_bounds import max_certifiable


def test_dense_ranks_order_ties_by_the_secondary_key():
    rng = np.random.default_rng(0)
    primary = rng.integers(0, 5, size=2000).astype(float)
    secondary = rng.normal(size=2000)
    secondary[:10] = secondary[10:20]  # some full ties
    primary[:10] = primary[10:20]
    ranks = dense_ranks(primary, secondary)
    keys = sorted(set(zip(primary, secondary)))
    expected = {key: r for r, key in enumerate(keys)}
    assert ranks.tolist() == [expected[key] for key in zip(primary, secondary)]


def test_best_threshold_of_a_perfect_split_reaches_the_cap():
    ranks0, ranks1 = np.arange(500), np.arange(500, 1000)
    choice = best_threshold(ranks0, ranks1, alpha_each=0.025, delta=0.0)
    assert choice.rank == 499
    assert choice.bound == pytest.approx(max_certifiable(1000))


def test_best_threshold_of_identical_samples_is_no_evidence():
    ranks = np.arange(1000)
    assert best_threshold(ranks[::2], ranks[1::2], alpha_each=0.025, delta=0.0).bound < 0.05


def test_classifier_sees_a_variance_difference_the_projection_cannot():
    rng = np.random.default_rng(1)
    y0, y1 = rng.normal(size=(20_000, 2)), rng.normal(size=(20_000, 2)) * [1.0, 3.0]  # x1 - x0 along e1
    x0, x1 = np.zeros(2), np.array([1e-9, 0.0])
    results = {}
    for name in ("projection", "classifier"):
        scorer = fit_scorer(name, y0[:10_000], y1[:10_000], x0, x1, log_density=None, seed=0)
        scores = scorer(np.concatenate([y0[10_000:], y1[10_000:]]))
        ranks = dense_ranks(scores, scores)
        results[name] = best_threshold(ranks[:10_000], ranks[10_000:], alpha_each=0.025, delta=0.0).bound
    assert results["classifier"] > 1.0 > results["projection"] + 0.5


def test_llr_needs_a_density_and_unknown_statistics_are_refused():
    y, x = np.zeros((4, 1)), np.zeros(1)
    assert fit_scorer("llr", y, y, x, x, log_density=None, seed=0) is None
    with pytest.raises(ValueError, match="statistics"):
        fit_scorer("mmd", y, y, x, x, log_density=None, seed=0)
