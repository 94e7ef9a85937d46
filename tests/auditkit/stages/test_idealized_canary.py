"""The idealized canary audit's pieces: the independent-calls bound against closed forms, the game's bits and
scores, the pair and the claim's delta."""
import numpy as np
import pytest
import torch
from scipy.special import ndtri

from auditkit import mechanisms
from auditkit.attacks.epsilon_bounds import epsilon_lower_bound
from auditkit.mechanisms.randomness import derive_seed, generator
from auditkit.mechanisms.tradeoff import GaussianTradeOff
from auditkit.stages.idealized_canary import (claim_at_delta, idealized_canary_audit, independent_calls_bound,
                                             searched_threshold_bound)


def counts(fp: int, negatives: int, fn: int, positives: int) -> tuple[np.ndarray, np.ndarray]:
    """Scores +1 / -1 with the given errors at threshold 0, and the bits."""
    inserted = np.r_[np.ones(positives, bool), np.zeros(negatives, bool)]
    scores = np.r_[-np.ones(fn), np.ones(positives - fn), np.ones(fp), -np.ones(negatives - fp)]
    return scores, inserted


def test_independent_bound_on_a_gdp_claim_is_the_closed_form_mu():
    scores, inserted = counts(3100, 10_000, 3050, 10_000)
    bound = independent_calls_bound(scores, inserted, threshold=0.0, curve=GaussianTradeOff(1.0), confidence=0.95,
                                    delta=1e-5)
    assert (bound.false_positives, bound.false_negatives) == (3100, 3050)
    mu = ndtri(1 - bound.fpr_upper) - ndtri(bound.fnr_upper)  # Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub)
    assert bound.scale_lower_bound == pytest.approx(mu, rel=2e-4)
    assert bound.curve_epsilon == pytest.approx(GaussianTradeOff(mu).epsilon(1e-5), rel=1e-3)
    # for any mechanism only the (eps, delta) region's ln((1 - delta - FNR) / FPR)
    assert bound.epsilon_lower_bound == pytest.approx(np.log((1 - 1e-5 - bound.fnr_upper) / bound.fpr_upper))
    assert bound.claim_refuted is False and bound.refuted_curve.startswith("GDP μ = ")


def test_independent_bound_without_a_claim_is_the_hypothesis_test_bound():
    scores, inserted = counts(40, 5000, 900, 5000)
    bound = independent_calls_bound(scores, inserted, threshold=0.0, curve=None, confidence=0.95, delta=1e-5)
    expected = epsilon_lower_bound(40, 5000, 900, 5000, confidence=0.95, delta=1e-5)
    assert bound.epsilon_lower_bound == pytest.approx(expected, rel=2e-4) and bound.claim_refuted is None


def test_the_game_draws_keyed_bits_and_scores_each_canary_by_its_own_call():
    gaussian = mechanisms.create("gaussian", clip=0.5, sigma=1.0, private_seed=7)
    audit = idealized_canary_audit(gaussian, canaries=4000, seed=3, pair="zero-vs-axis")
    bits = (torch.rand(4000, generator=generator(derive_seed(3, "canary"), "inclusion")) < 0.5).numpy()
    assert np.array_equal(audit.inserted, bits) and audit.pair == "zero-vs-axis" and audit.statistic == "llr"
    # LLR of 0.5-GDP-separated outputs (shift 0.5, sigma 1): mean +-mu^2 / 2 = +-0.125
    assert audit.scores[bits].mean() == pytest.approx(0.125, abs=0.03)
    assert audit.scores[~bits].mean() == pytest.approx(-0.125, abs=0.03)
    assert "scores" not in audit.to_dict() and audit.to_dict()["result"]["canaries"] == 4000
    assert audit.verdict == audit.result.verdict == "consistent"  # the pair shifts by 0.5: mu 0.5 < the claim's 1


def test_a_mechanism_without_a_density_is_scored_by_projection():
    audit = idealized_canary_audit("none", canaries=200, seed=0)
    assert audit.statistic == "projection" and audit.curve is None and audit.verdict == "no claim"
    assert set(np.unique(audit.scores)) == {-2.0, 2.0}  # <+-e1, 2 e1>: the pair (-e1, e1) of the unit ball
    assert audit.independent.false_positives == audit.independent.false_negatives == 0


def test_claim_at_delta_defaults_to_the_claims_delta_and_refuses_a_delta_without_finite_eps():
    gaussian = mechanisms.create("gaussian", clip=0.5, sigma=1.0)
    curve, delta, claimed = claim_at_delta(gaussian, None)
    assert delta == 1e-5 and claimed == pytest.approx(4.377, abs=1e-3) and curve.label == "GDP μ = 1"
    with pytest.raises(ValueError, match="no finite epsilon at delta 0"):
        claim_at_delta(gaussian, 0.0)
    assert claim_at_delta(mechanisms.create("laplace", clip=0.5, scale=1.0), None)[1:] == (0.0, pytest.approx(1.0))
    assert claim_at_delta(mechanisms.create("none"), None) == (None, 0.0, None)


def test_the_searched_threshold_certifies_more_in_the_tails_and_nothing_without_signal():
    """1-GDP at m = 10^4: the symmetric threshold certifies ln((1 - delta - FNR) / FPR), about 0.74, for any
    mechanism; a threshold searched on half the canaries and certified on the other half reaches the tail of the
    ROC and certifies more than twice that (2.17 here). The halves come from a keyed stream: the same seed, the same bound.
    Without a signal (scores independent of the bits) it certifies 0 in at least 190 of 200 seeds (at most 5 %
    expected above 0 at 95 %, and the 99.9 % quantile of Binomial(200, 0.05) is 21)."""
    audit = idealized_canary_audit(mechanisms.create("gaussian", clip=0.5, sigma=1.0, private_seed=7),
                                   canaries=10_000, seed=0)
    assert audit.searched.epsilon_lower_bound > 2 * audit.independent.epsilon_lower_bound
    assert abs(audit.searched.members + audit.searched.non_members - 5_000) <= 1  # the certifying half
    again = searched_threshold_bound(audit.scores, audit.inserted, confidence=0.95, delta=1e-5, seed=0)
    assert again == audit.searched
    above = 0
    for seed in range(200):
        rng = np.random.default_rng(seed)
        scores, bits = rng.standard_normal(2000), rng.random(2000) < 0.5
        above += searched_threshold_bound(scores, bits, confidence=0.95, delta=1e-5, seed=seed).epsilon_lower_bound > 0
    assert above <= 21
