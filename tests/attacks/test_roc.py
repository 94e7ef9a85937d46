"""roc: DeLong's AUROC variance against its O(n0 n1) definition, the interval's coverage of a known AUROC, the TPR
at low FPR, the summary and bad input.

Coverage: scores N(0, 1) for the negatives and N(mu, 1) for the positives have AUROC Phi(mu / sqrt 2). Over 400
seeded repetitions the 95 % interval must cover it in a fraction within 3 binomial standard deviations
(sqrt(0.95 * 0.05 / 400) = 0.0109) of 0.95, i.e. in [0.917, 0.983]. Measured: 0.9525 (mu 1, 200 + 200) and 0.93
(mu 2, 60 + 300); with half DeLong's variance 0.845 and 0.838, with twice it 0.995 and 0.97: either error fails.
"""
import math

import numpy as np
import pytest
from scipy import stats

from auditkit.attacks.roc import (LOW_FPRS, auc, auc_interval, delong_variance, roc_curve, roc_summary,
                                  tpr_at_fpr)

REPETITIONS = 400
TOLERANCE = 3 * math.sqrt(0.95 * 0.05 / REPETITIONS)


def slow_delong(scores: np.ndarray, members: np.ndarray) -> tuple[float, float]:
    """DeLong et al. (1988) as written: psi(x, y) = 1, 1/2, 0 for x >, =, < y over every (positive, negative) pair;
    V10_i = mean_j psi(X_i, Y_j), V01_j = mean_i psi(X_i, Y_j); Var = S10 / m + S01 / n."""
    x, y = scores[members], scores[~members]
    psi = (x[:, None] > y[None, :]) + 0.5 * (x[:, None] == y[None, :])
    v10, v01 = psi.mean(axis=1), psi.mean(axis=0)
    area = psi.mean()
    s10 = ((v10 - area) ** 2).sum() / (len(x) - 1)
    s01 = ((v01 - area) ** 2).sum() / (len(y) - 1)
    return float(area), float(s10 / len(x) + s01 / len(y))


@pytest.mark.parametrize("seed, ties", [(0, False), (1, True), (2, True)])
def test_the_variance_equals_delongs_pairwise_formula(seed, ties):
    rng = np.random.default_rng(seed)
    members = rng.random(157) < 0.3
    scores = rng.standard_normal(157) + 0.8 * members
    if ties:  # a few levels: most pairs tie
        scores = np.round(scores * 2) / 2
    area, variance = slow_delong(scores, members)
    assert auc(scores, members) == pytest.approx(area, abs=1e-12)
    assert delong_variance(scores, members) == pytest.approx(variance, rel=1e-10)
    found, low, high = auc_interval(scores, members, confidence=0.9)
    half = stats.norm.ppf(0.95) * math.sqrt(variance)
    assert (found, low, high) == pytest.approx((area, max(0, area - half), min(1, area + half)), abs=1e-12)


@pytest.mark.parametrize("mu, n1, n0", [(1.0, 200, 200), (2.0, 60, 300)])
def test_the_95_percent_interval_covers_a_known_gaussian_auroc(mu, n1, n0):
    truth = stats.norm.cdf(mu / math.sqrt(2))
    members = np.arange(n1 + n0) < n1
    covered = 0
    for seed in range(REPETITIONS):
        rng = np.random.default_rng([seed, n1])
        scores = rng.standard_normal(n1 + n0) + mu * members
        _, low, high = auc_interval(scores, members, confidence=0.95)
        covered += low <= truth <= high
    assert abs(covered / REPETITIONS - 0.95) <= TOLERANCE, covered


def test_a_perfect_separation_collapses_the_interval_to_one():
    members = np.arange(10) >= 5
    assert auc_interval(np.arange(10.0), members) == (1.0, 1.0, 1.0)
    assert auc_interval(-np.arange(10.0), members) == (0.0, 0.0, 0.0)


def test_the_summary_is_the_interval_and_the_tpr_at_each_low_fpr():
    rng = np.random.default_rng(3)
    members = rng.random(20_000) < 0.5
    scores = rng.standard_normal(20_000) + members
    summary = roc_summary(scores, members, confidence=0.9)
    assert (summary.auc, summary.auc_low, summary.auc_high) == auc_interval(scores, members, confidence=0.9)
    assert summary.tpr_at == tuple(tpr_at_fpr(scores, members, f, confidence=0.9) for f in LOW_FPRS)
    assert (summary.positives, summary.negatives) == (members.sum(), (~members).sum())
    # an independent check of the TPR at 1 % FPR: the largest share of positives above a cut that leaves at most
    # 1 % of negatives at or above it
    negatives = np.sort(scores[~members])[::-1]
    allowed = math.floor(0.01 * len(negatives))
    cut = negatives[allowed]  # the (allowed + 1)-th highest negative: positives strictly above it
    point = summary.tpr_at[0]
    assert point.tpr == np.mean(scores[members] > cut) and point.false_positives == allowed
    assert point.tpr_low < point.tpr < point.tpr_high
    assert summary.to_dict()["tpr_at"][1] == dict(vars(summary.tpr_at[1]))


def test_the_roc_curve_runs_from_0_to_1():
    fpr, tpr, thresholds = roc_curve(np.array([0.1, 0.4, 0.35, 0.8]), np.array([False, False, True, True]))
    assert fpr.tolist() == [0, 0, 0.5, 0.5, 1] and tpr.tolist() == [0, 0.5, 0.5, 1, 1] and thresholds[0] == np.inf


@pytest.mark.parametrize("scores, members, kwargs, match", [
    ([0.1, 0.2, 0.3], [True, False, False], {}, "members: DeLong's variance needs >= 2 members"),
    ([0.1, 0.2], [True, True], {}, "members must contain both"),
    ([0.1, np.nan, 0.3, 0.4], [True, False, True, False], {}, "scores must not be NaN"),
    ([0.1, 0.2, 0.3, 0.4], [1, 0, 1, 0], {}, "members must be a boolean array"),
    ([0.1, 0.2, 0.3, 0.4], [True, False, True, False], {"confidence": 1.0}, r"confidence must be in \(0, 1\)"),
    ([0.1, 0.2, 0.3, 0.4], [True, False, True, False], {"fprs": (2.0,)}, r"fpr must be in \[0, 1\]"),
])
def test_bad_input_is_a_value_error_naming_the_parameter(scores, members, kwargs, match):
    with pytest.raises(ValueError, match=match):
        roc_summary(np.array(scores), np.array(members), **kwargs)
