"""Membership-inference scores and ROC utilities (issue 42): closed form, exact small cases, soundness, bad input.

Closed form (the Gaussian mean estimator). n records x_i in [-1, 1]^d; the mechanism releases
M = (1/n) sum_i x_i + N(0, sigma^2 I_d). In the game the n - 1 other records are known and the n-th is either the
target x_t (member) or a known filler x_0 = 0 (non-member). Then M - S/n (S the known sum) is N(x_t / n, sigma^2 I)
or N(0, sigma^2 I). By Neyman-Pearson the optimal test thresholds the log-likelihood ratio
<M - S/n, x_t> / (n sigma^2) - ||x_t||^2 / (2 n^2 sigma^2), i.e. the projection T = <M - S/n, x_t> / (||x_t|| sigma),
which is N(mu, 1) for a member and N(0, 1) otherwise, mu = ||x_t|| / (n sigma). A threshold with FPR
alpha = 1 - Phi(t) has TPR = 1 - Phi(t - mu) = Phi(Phi^-1(alpha) + mu), and
AUC = P[N(mu, 1) > N(0, 1)] = P[N(mu, 2) > 0] = Phi(mu / sqrt 2).

Tolerances: the empirical TPR at empirical FPR <= alpha has variance about TPR(1 - TPR) / n1 + slope^2 alpha(1 - alpha)
/ n0, slope = dTPR/dFPR = phi(z + mu) / phi(z), z = Phi^-1(alpha) (delta method on the non-members' quantile); the
AUC's variance is Hanley & McNeil's (1982). Checks are at 4 standard deviations; with mu 20% off the curve moves by
more than 10 of them at every checked point (asserted below), so a wrong mu fails.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from auditkit.attacks.membership import (
    auc,
    lira_scores,
    log_roc_points,
    logit_scaled_confidence,
    loss_scores,
    rmia_scores,
    roc_curve,
    roc_epsilon_lower_bound,
    tpr_at_fpr,
    true_label_probability,
)

MU = 2.0


def _optimal_tpr(fpr: float, mu: float) -> float:
    return float(stats.norm.cdf(stats.norm.ppf(fpr) + mu))


def _tpr_sd(fpr: float, mu: float, n1: int, n0: int) -> float:
    z = stats.norm.ppf(fpr)
    tpr, slope = _optimal_tpr(fpr, mu), stats.norm.pdf(z + mu) / stats.norm.pdf(z)
    return math.sqrt(tpr * (1 - tpr) / n1 + slope**2 * fpr * (1 - fpr) / n0)


def _auc_sd(a: float, n1: int, n0: int) -> float:
    q1, q2 = a / (2 - a), 2 * a * a / (1 + a)
    return math.sqrt((a * (1 - a) + (n1 - 1) * (q1 - a * a) + (n0 - 1) * (q2 - a * a)) / (n1 * n0))


def _gaussian_mean_game(trials: int, seed: int, n: int = 100, d: int = 16) -> tuple[np.ndarray, np.ndarray, float]:
    """Released means of the game (module docstring), projected: (T, members, mu)."""
    rng = np.random.default_rng(seed)
    target = rng.choice([-1.0, 1.0], size=d)  # ||x_t|| = sqrt d
    sigma = math.sqrt(d) / (n * MU)
    others = rng.uniform(-1, 1, size=(n - 1, d))
    members = rng.random(trials) < 0.5
    released = (others.sum(0) + members[:, None] * target) / n + sigma * rng.standard_normal((trials, d))
    projection = (released - others.sum(0) / n) @ target / (np.linalg.norm(target) * sigma)
    return projection, members, np.linalg.norm(target) / (n * sigma)


def test_optimal_test_reproduces_the_gaussian_shift_roc():
    scores, members, mu = _gaussian_mean_game(40_000, seed=1)
    assert mu == pytest.approx(MU)
    n1, n0 = int(members.sum()), int((~members).sum())
    for fpr in (0.01, 0.1):
        got, sd = tpr_at_fpr(scores, members, fpr), _tpr_sd(fpr, mu, n1, n0)
        assert got.fpr <= fpr
        assert abs(got.tpr - _optimal_tpr(fpr, mu)) < 4 * sd
        assert abs(_optimal_tpr(fpr, 0.8 * mu) - _optimal_tpr(fpr, mu)) > 10 * sd  # the check has the power
        assert got.tpr_low <= got.tpr <= got.tpr_high
    expected_auc, auc_sd = stats.norm.cdf(mu / math.sqrt(2)), _auc_sd(stats.norm.cdf(mu / math.sqrt(2)), n1, n0)
    assert abs(auc(scores, members) - expected_auc) < 4 * auc_sd
    assert abs(stats.norm.cdf(0.8 * mu / math.sqrt(2)) - expected_auc) > 10 * auc_sd
    points = log_roc_points(scores, members)
    at = np.searchsorted(points["fpr"], 0.1)
    assert points["tpr"][at] == pytest.approx(tpr_at_fpr(scores, members, points["fpr"][at]).tpr)


def _two_class_logits(phi: np.ndarray) -> np.ndarray:
    """Logits (..., 2) whose logit-scaled confidence for label 0 is ``phi`` exactly."""
    return np.stack([phi, np.zeros_like(phi)], axis=-1)


def test_lira_online_reaches_the_optimal_roc():
    """Per record i the statistic is a_i + mu b + N(0, 1) (a_i a record's "difficulty", unknown to a global
    threshold); the optimal test knows a_i and has the closed-form ROC. LiRA learns a_i and the spreads from 64
    references (32 IN, 32 OUT per record) and must come within the closed form's tolerance plus a small estimation
    loss (0.03 in TPR), far from what a global threshold on the statistic reaches."""
    rng = np.random.default_rng(7)
    n, r = 20_000, 64
    difficulty = rng.normal(0, 3, size=n)
    reference_in = np.argsort(rng.random((r, n)), axis=0) < r // 2  # exactly half IN per record
    reference_phi = difficulty + MU * reference_in + rng.standard_normal((r, n))
    members = rng.random(n) < 0.5
    target_phi = difficulty + MU * members + rng.standard_normal(n)
    labels = np.zeros(n, dtype=int)
    scores = lira_scores(_two_class_logits(target_phi), labels, _two_class_logits(reference_phi), reference_in,
                         online=True)
    n1, n0 = int(members.sum()), int((~members).sum())
    for fpr in (0.01, 0.1):
        got = tpr_at_fpr(scores, members, fpr).tpr
        assert abs(got - _optimal_tpr(fpr, MU)) < 4 * _tpr_sd(fpr, MU, n1, n0) + 0.03
        assert tpr_at_fpr(target_phi, members, fpr).tpr < _optimal_tpr(fpr, MU) - 0.2  # the global threshold
    fixed = lira_scores(_two_class_logits(target_phi), labels, _two_class_logits(reference_phi), reference_in,
                        online=True, fixed_variance=True)
    assert abs(tpr_at_fpr(fixed, members, 0.01).tpr - _optimal_tpr(0.01, MU)) < 4 * _tpr_sd(0.01, MU, n1, n0) + 0.03


def test_logit_scaled_confidence_and_loss_by_hand():
    logits = np.array([[2.0, 0.0, 0.0], [2.0, 0.0, 0.0], [1000.0, 0.0, -5.0]])
    labels = np.array([0, 1, 0])
    phi = logit_scaled_confidence(logits, labels)
    assert phi[0] == pytest.approx(2 - math.log(2), abs=1e-14)
    assert phi[1] == pytest.approx(-math.log(math.exp(2) + 1), abs=1e-14)
    assert phi[2] == pytest.approx(1000 - math.log1p(math.exp(-5)), abs=1e-12)  # p_y rounds to 1; phi does not
    p = true_label_probability(logits[:2], labels[:2])
    assert np.log(p / (1 - p)) == pytest.approx(phi[:2], abs=1e-12)
    assert loss_scores(np.zeros((1, 4)), np.array([2]))[0] == pytest.approx(-math.log(4))
    stacked = np.stack([logits, logits + 1.0])  # (R, N, C) with labels (N,): shift-invariant
    assert logit_scaled_confidence(stacked, labels) == pytest.approx(np.stack([phi, phi]))


def test_lira_with_known_means_by_hand():
    # one record, references' phi: IN 1, 3 (mean 2, sd 1), OUT -1, 1 (mean 0, sd 1); target phi 2
    ref_phi = np.array([1.0, 3.0, -1.0, 1.0])[:, None]
    reference_in = np.array([True, True, False, False])[:, None]
    args = (_two_class_logits(np.array([2.0])), np.array([0]), _two_class_logits(ref_phi), reference_in)
    assert lira_scores(*args, online=True)[0] == pytest.approx(2.0)  # log N(2; 2, 1) - log N(2; 0, 1) = 0 + 2
    assert lira_scores(*args, online=False)[0] == pytest.approx(-math.log(stats.norm.sf(2.0)))
    assert lira_scores(*args, online=False, offline_score="density")[0] == pytest.approx(0.5 * math.log(2 * math.pi)
                                                                                        + 2.0)
    # the density score is two-sided: a very low phi ranks as "member" too, the one-sided score does not
    low = (_two_class_logits(np.array([-2.0])),) + args[1:]
    assert lira_scores(*low, online=False, offline_score="density")[0] == pytest.approx(lira_scores(
        *args, online=False, offline_score="density")[0])
    assert lira_scores(*low, online=False)[0] < 0.05
    # median centre: IN 1, 2, 6 (median 2, mean 3, sd sqrt(14/3)); OUT 0, 0, 3 (median 0, mean 1, sd sqrt 2)
    ref_phi = np.array([1.0, 2.0, 6.0, 0.0, 0.0, 3.0])[:, None]
    reference_in = np.array([True, True, True, False, False, False])[:, None]
    args = (_two_class_logits(np.array([2.0])), np.array([0]), _two_class_logits(ref_phi), reference_in)
    expected = stats.norm.logpdf(2, 2, math.sqrt(14 / 3)) - stats.norm.logpdf(2, 0, math.sqrt(2))
    assert lira_scores(*args, online=True, center="median")[0] == pytest.approx(expected)
    # fixed variance: two records pool their within-record squares
    ref_phi = np.array([[1.0, 10.0], [3.0, 14.0], [-1.0, 5.0], [1.0, 5.0]])  # IN sd 1 and 2, OUT sd 1 and 0
    reference_in = np.array([[True, True], [True, True], [False, False], [False, False]])
    target = _two_class_logits(np.array([2.0, 12.0]))
    got = lira_scores(target, np.array([0, 0]), _two_class_logits(ref_phi), reference_in, fixed_variance=True)
    s_in, s_out = math.sqrt((1 + 1 + 4 + 4) / 4), math.sqrt((1 + 1) / 4)
    assert got == pytest.approx([stats.norm.logpdf(2, 2, s_in) - stats.norm.logpdf(2, 0, s_out),
                                 stats.norm.logpdf(12, 12, s_in) - stats.norm.logpdf(12, 5, s_out)])


def _prob_logits(p) -> np.ndarray:
    """Two-class logits whose softmax probability of class 0 is p."""
    p = np.asarray(p, dtype=float)
    return np.stack([np.log(p), np.log1p(-p)], axis=-1)


def test_rmia_counts_by_hand():
    # target p_x 0.62; references IN 0.9, OUT 0.3; population p_z 0.2, 0.5, 0.7, 0.9 in the target, 0.5 in both refs
    target, labels = _prob_logits([0.62]), np.array([0])
    refs, reference_in = _prob_logits([[0.9], [0.3]]), np.array([[True], [False]])
    pop, pop_labels = _prob_logits([0.2, 0.5, 0.7, 0.9]), np.zeros(4, dtype=int)
    pop_refs = _prob_logits(np.full((2, 4), 0.5))

    def score(**kw):
        return rmia_scores(target, labels, refs, reference_in, pop, pop_labels, pop_refs, **kw)[0]

    # online: Pr(x) = 0.6, ratio_x = 1.033; Pr(z) = 0.5, ratio_z = 0.4, 1, 1.4, 1.8
    assert score(offline_a=None) == 0.5
    assert score(offline_a=None, gamma=0.5) == 1.0  # ratio_z <= 2.07
    assert score(offline_a=None, gamma=1.2) == 0.25  # ratio_z <= 0.86
    assert score(offline_a=None, gamma=3.0) == 0.0  # ratio_z <= 0.34
    # offline a = 0.5: Pr(x) = (1.5 * 0.3 + 0.5) / 2 = 0.475, ratio_x = 1.305; Pr(z) = 0.625: 0.32, 0.8, 1.12, 1.44
    assert score(offline_a=0.5) == 0.75
    # a tie LR = 1 counts (the paper's >=): z identical to x, same references
    tie = rmia_scores(target, labels, refs, reference_in, target, labels, refs, offline_a=None)
    assert tie[0] == 1.0


def test_rmia_tie_break_orders_within_a_level_and_never_crosses_one():
    """Five records over a population of two: the counts give levels 0, 1/2, 1/2, 1, 1; the tie-break orders the
    tied records by their ratio and keeps every level's records between that level and the next."""
    p_x = np.array([0.05, 0.45, 0.40, 0.95, 0.99])
    target, labels = _prob_logits(p_x), np.zeros(5, dtype=int)
    refs, reference_in = _prob_logits(np.full((2, 5), 0.5)), np.array([[True] * 5, [False] * 5])
    pop, pop_labels = _prob_logits([0.3, 0.6]), np.zeros(2, dtype=int)
    pop_refs = _prob_logits(np.full((2, 2), 0.5))
    args = (target, labels, refs, reference_in, pop, pop_labels, pop_refs)
    plain = rmia_scores(*args, offline_a=None)
    broken = rmia_scores(*args, offline_a=None, tie_break=True)
    assert plain.tolist() == [0.0, 0.5, 0.5, 1.0, 1.0]
    assert np.all(np.floor(broken * 2) / 2 == plain) and np.all(broken - plain < 0.5)
    assert broken.argsort().tolist() == p_x.argsort().tolist()


def test_roc_curve_auc_and_tpr_at_fpr_by_hand():
    scores = np.array([0.9, 0.8, 0.8, 0.7, 0.6, 0.5, 0.4, 0.3])
    members = np.array([True, True, False, True, False, True, False, False])
    fpr, tpr, thresholds = roc_curve(scores, members)
    assert thresholds[0] == np.inf and fpr[0] == tpr[0] == 0
    assert fpr == pytest.approx([0, 0, 0.25, 0.25, 0.5, 0.5, 0.75, 1.0])
    assert tpr == pytest.approx([0, 0.25, 0.5, 0.75, 0.75, 1.0, 1.0, 1.0])
    # pairs (member, non-member): 16; member wins 12, the 0.8 tie counts 1/2
    trapezoids = float(np.sum(np.diff(fpr) * (tpr[1:] + tpr[:-1]) / 2))
    assert auc(scores, members) == pytest.approx(12.5 / 16) == pytest.approx(trapezoids)
    got = tpr_at_fpr(scores, members, 0.25)  # the largest TPR at FPR <= 0.25: threshold 0.7, TPR 0.75
    assert (got.threshold, got.fpr, got.tpr, got.true_positives, got.false_positives) == (0.7, 0.25, 0.75, 3, 1)
    assert got.tpr_low == pytest.approx(stats.beta.ppf(0.025, 3, 2))
    assert got.tpr_high == pytest.approx(stats.beta.ppf(0.975, 4, 1))
    assert tpr_at_fpr(scores, members, 0.1).tpr == 0.25  # below one false positive: above every non-member


def test_roc_epsilon_lower_bound_is_sound_without_signal():
    """Scores independent of membership: the certified bound exceeds 0 (the true eps) with probability at most
    1 - confidence = 20% per seed; over 200 seeds the count of exceedances is checked against the 99.9% quantile
    of Binomial(200, 0.2)."""
    exceed = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        scores, members = rng.standard_normal(400), rng.random(400) < 0.5
        exceed += roc_epsilon_lower_bound(scores, members, delta=0.0, confidence=0.8, rng=rng).epsilon_lower_bound > 0
    assert exceed <= stats.binom.ppf(0.999, 200, 0.2)


def test_roc_epsilon_lower_bound_finds_a_strong_separation_and_is_reproducible():
    rng = np.random.default_rng(3)
    members = rng.random(2_000) < 0.5
    scores = rng.standard_normal(2_000) + 10 * members
    first = roc_epsilon_lower_bound(scores, members, delta=1e-5, rng=np.random.default_rng(11))
    again = roc_epsilon_lower_bound(scores, members, delta=1e-5, rng=np.random.default_rng(11))
    assert first == again
    assert first.epsilon_lower_bound > 0.95 * first.max_certifiable > 4.5  # 1,000 held out: the cap is 4.91
    assert first.epsilon_lower_bound <= first.max_certifiable
    assert first.members + first.non_members == 1_000


@pytest.mark.parametrize(("call", "match"), [
    (lambda: logit_scaled_confidence(np.zeros((3,)), np.array([0])), "logits"),
    (lambda: logit_scaled_confidence(np.zeros((3, 2)), np.array([0, 2, 1])), "labels"),
    (lambda: loss_scores(np.zeros((3, 2)), np.array([0.0, 1.0, 0.0])), "labels"),
    (lambda: lira_scores(np.zeros((2, 2)), np.array([0, 0]), np.zeros((3, 2, 3)), np.ones((3, 2), bool)),
     "reference_logits"),
    (lambda: lira_scores(np.zeros((2, 2)), np.array([0, 0]), np.zeros((3, 2, 2)), np.ones((3, 2))),
     "reference_in"),
    (lambda: lira_scores(np.zeros((2, 2)), np.array([0, 0]), np.zeros((4, 2, 2)),
                         np.array([[1, 1], [1, 0], [0, 0], [0, 0]], bool)), "reference_in.*IN"),
    (lambda: lira_scores(np.zeros((1, 2)), np.array([0]), np.zeros((2, 1, 2)), np.ones((2, 1), bool), online=False),
     "reference_in.*OUT"),
    (lambda: lira_scores(np.zeros((1, 2)), np.array([0]), np.zeros((2, 1, 2)), np.ones((2, 1), bool),
                         offline_score="p"), "offline_score"),
    (lambda: rmia_scores(np.zeros((1, 2)), np.array([0]), np.zeros((2, 1, 2)), np.zeros((2, 1), bool),
                         np.zeros((3, 2)), np.zeros(3, int), np.zeros((2, 4, 2)), offline_a=None),
     "population_reference_logits"),
    (lambda: rmia_scores(np.zeros((1, 2)), np.array([0]), np.zeros((2, 1, 2)), np.zeros((2, 1), bool),
                         np.zeros((3, 2)), np.zeros(3, int), np.zeros((2, 3, 2)), offline_a=1.5), "offline_a"),
    (lambda: rmia_scores(np.zeros((1, 2)), np.array([0]), np.zeros((2, 1, 2)), np.zeros((2, 1), bool),
                         np.zeros((3, 2)), np.zeros(3, int), np.zeros((2, 3, 2)), offline_a=None, gamma=0), "gamma"),
    (lambda: roc_curve(np.zeros(3), np.array([1, 0, 1])), "members"),
    (lambda: auc(np.zeros(3), np.ones(3, bool)), "members"),
    (lambda: tpr_at_fpr(np.arange(4.0), np.array([1, 0, 1, 0], bool), 1.5), "fpr"),
    (lambda: roc_epsilon_lower_bound(np.arange(4.0), np.array([1, 0, 1, 0], bool), delta=0, rng=0), "rng"),
    (lambda: roc_epsilon_lower_bound(np.arange(4.0), np.array([1, 0, 1, 0], bool), delta=1.0,
                                     rng=np.random.default_rng()), "delta"),
    (lambda: log_roc_points(np.arange(4.0), np.array([1, 0, 1, 0], bool), points=1), "points"),
])
def test_bad_inputs_name_the_parameter(call, match):
    with pytest.raises(ValueError, match=match):
        call()
