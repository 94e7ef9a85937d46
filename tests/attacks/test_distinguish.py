"""distinguish: tightness on Laplace and Gaussian, soundness over seeds, power against weakened mechanisms,
the estimate's record, bad input.

Tightness (the figures of issue 6, at the full trial counts; ~2 s and ~4 s): ``laplace`` with eps = 1
(scale 1, clip 0.5: replacing the update moves it by 1) certifies >= 0.8 from 10^6 trials; the Gaussian
mechanism with sigma = 1 and shift 1 (analytic eps 4.38 at delta = 1e-5) certifies >= 3 from 10^6 trials
per side. Soundness: ``laplace`` is tight (a tail threshold test has TPR = e^eps FPR exactly), so it is the
hardest case for a false alarm; over 10 seeds at the Bonferroni confidence 1 - 0.05/10 none may exceed the
claim. Power: a callable whose noise is half the claimed scale has twice the eps and must be "violated".
"""

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.attacks.distinguish import choose_test, distinguish
from auditkit.attacks.roc import auc, roc_curve
from auditkit.attacks.verdicts import CONSISTENT, VIOLATED, bonferroni_confidence, verdict
from auditkit.mechanisms.additive import Laplace, laplace_noise


def test_laplace_eps_1_certifies_at_least_0_8_with_a_million_trials():
    m = mechanisms.create("laplace", scale=1.0, clip=0.5, private_seed=0)
    estimate = distinguish(m, [-0.5], [0.5], trials=1_000_000)
    assert 0.8 <= estimate.epsilon_lower_bound <= 1.0
    assert estimate.claimed_epsilon == 1.0 and verdict(estimate, m.guarantee()) == CONSISTENT
    assert estimate.sampling.startswith("tiled") and "rescaled to B^(1/1) clip" in estimate.sampling


def test_gaussian_sigma_1_certifies_at_least_3_with_a_million_trials_per_side():
    m = mechanisms.create("gaussian", sigma=1.0, clip=0.5, delta=1e-5, private_seed=0)
    estimate = distinguish(m, [-0.5], [0.5], trials=2_000_000, delta=1e-5, statistics=("projection",))
    assert 3.0 <= estimate.epsilon_lower_bound <= m.guarantee().epsilon == pytest.approx(4.38, abs=0.01)


def test_a_tight_mechanism_is_never_violated_over_seeds():
    m = mechanisms.create("laplace", scale=1.0, clip=0.5, private_seed=1)
    confidence = bonferroni_confidence(0.95, 10)
    for seed in range(10):
        estimate = distinguish(m, [-0.5], [0.5], trials=100_000, confidence=confidence, seed=seed)
        assert verdict(estimate) != VIOLATED, seed
        assert estimate.epsilon_lower_bound > 0.5


def test_halving_the_noise_is_violated():
    def weakened(x, seed):  # claims Laplace(1) (eps 1 for the shift 1), adds Laplace(1/2)
        gen = torch.Generator().manual_seed(seed)
        return x + laplace_noise(x.numel(), 0.5, gen).view(x.shape)

    estimate = distinguish(weakened, [-0.5], [0.5], trials=100_000, claimed_eps=1.0)
    assert verdict(estimate) == VIOLATED and estimate.epsilon_lower_bound > 1.5
    assert estimate.p_value < 1e-6 and estimate.sampling.startswith("batched callable")


def test_skipping_the_clip_is_violated_on_inputs_beyond_it():
    class NoClip(Laplace):
        def _clip(self, x):
            return x

    m = NoClip(scale=1.0, clip=0.5, private_seed=0)
    estimate = distinguish(m, [-2.0], [2.0], trials=20_000, label="beyond-clip")
    assert estimate.sampling.startswith("per call")
    assert verdict(estimate, m.guarantee()) == VIOLATED


def test_identical_inputs_give_no_evidence_and_a_perfect_test_reaches_the_cap():
    same = distinguish("laplace", [0.1, 0.2], [0.1, 0.2], trials=20_000)
    assert same.epsilon_lower_bound < 0.2
    exact = distinguish("none", [0.0, 0.0], [1.0, 0.0], trials=2_000)
    assert exact.epsilon_lower_bound == exact.max_certifiable and exact.fp == exact.fn == 0
    assert exact.claimed_epsilon is None and verdict(exact) == "no claim"


def test_estimate_records_the_test_and_serialises():
    estimate = distinguish("t-dist", [-1.0, 0.0], [1.0, 0.0], trials=20_000, seed=3, label="axis")
    assert estimate.n0 == estimate.n1 == 8_000 and estimate.trials == 20_000  # 20% of each side chooses the test
    assert estimate.statistic in estimate.selection_bounds and set(estimate.selection_bounds) == {
        "projection",
        "llr",
        "classifier",
        "atoms",
        "histogram",
    }
    assert estimate.pair.label == "axis" and estimate.claimed_epsilon == pytest.approx(4.0)
    assert estimate.confidence == 0.95 and estimate.samples_per_second > 0
    record = json.loads(json.dumps(estimate.to_dict()))
    assert record["pair"]["x1"] == [1.0, 0.0] and record["statistic"] == estimate.statistic
    again = distinguish("t-dist", [-1.0, 0.0], [1.0, 0.0], trials=20_000, seed=3, label="axis")
    assert again.epsilon_lower_bound == estimate.epsilon_lower_bound  # reproducible from the seed


def test_llr_with_a_user_density_on_a_callable():
    def gaussian(x, seed):
        return x + torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

    def log_density(y, x):
        return -((y - x) ** 2).sum(axis=1) / 2

    estimate = distinguish(gaussian, [0.0], [1.0], trials=20_000, statistics=("llr",), log_density=log_density)
    assert estimate.statistic == "llr" and 0.5 < estimate.epsilon_lower_bound < 4.38


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"trials": 10}, "trials"),
        ({"trials": 1000.0}, "trials"),
        ({"trials": 1000, "confidence": 1.0}, "confidence"),
        ({"trials": 1000, "delta": 1.0}, "delta"),
        ({"trials": 1000, "delta": -1e-3}, "delta"),
        ({"trials": 1000, "claimed_eps": -1.0}, "claimed_eps"),
        ({"trials": 1000, "statistics": ("mmd",)}, "statistics"),
        ({"trials": 1000, "statistics": ()}, "statistics"),
        ({"trials": 1000, "x1": [1.0, 2.0]}, "same shape"),
        ({"trials": 1000, "x0": [[0.0]]}, "x0"),
        ({"trials": 1000, "x1": [math.nan]}, "x1"),
        ({"trials": 1000, "mechanism": "nope"}, "unknown mechanism"),
        ({"trials": 1000, "mechanism": "none", "statistics": ("llr",)}, "llr"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(kwargs, match):
    args = {"mechanism": "laplace", "x0": [0.0], "x1": [1.0], **kwargs}
    with pytest.raises(ValueError, match=match):
        distinguish(args.pop("mechanism"), args.pop("x0"), args.pop("x1"), **args)


def _lexicographic_auc(h0: np.ndarray, h1: np.ndarray, scores0: np.ndarray, scores1: np.ndarray) -> float:
    """P[key1 > key0] + P[key1 = key0] / 2 over every pair, the key (score, projection) compared as a tuple."""
    keys0 = list(zip(scores0.tolist(), h0[:, 0].tolist()))
    keys1 = list(zip(scores1.tolist(), h1[:, 0].tolist()))
    wins = sum((k1 > k0) + 0.5 * (k1 == k0) for k1 in keys1 for k0 in keys0)
    return wins / (len(keys0) * len(keys1))


def test_the_held_out_roc_orders_outputs_as_the_test_does():
    # Laplace(1) on -0.5 / 0.5: the likelihood ratio is constant beyond the pair, so most outputs tie on the score
    # and only the projection orders them
    rng = np.random.default_rng(5)
    x0, x1 = np.array([-0.5]), np.array([0.5])

    def log_density(y, x):
        return -np.abs(y - x).sum(axis=1)

    y0, y1 = x0 + rng.laplace(size=(2_000, 1)), x1 + rng.laplace(size=(2_000, 1))
    h0, h1 = x0 + rng.laplace(size=(300, 1)), x1 + rng.laplace(size=(250, 1))
    test = choose_test(y0, y1, x0, x1, held_out=(300, 250), confidence=0.95, delta=0.0, statistics=("llr",),
                       log_density=log_density)
    summary = test.held_out_roc(h0, h1)
    scores0, scores1 = test.scorer(h0), test.scorer(h1)
    assert np.mean(np.abs(scores1) == 1.0) > 0.5  # ties on the score are most of the outputs
    assert summary.auc == pytest.approx(_lexicographic_auc(h0, h1, scores0, scores1), abs=1e-12)
    # the tie-break counts (the tails are memoryless, so it moves the AUROC either way, by chance)
    assert abs(summary.auc - auc(np.r_[scores0, scores1], np.arange(550) >= 300)) > 1e-3
    # the test's own operating point lies on the held-out ROC of the key
    key = np.empty(550)
    key[np.lexsort((np.r_[h0[:, 0], h1[:, 0]], np.r_[scores0, scores1]))] = np.arange(550)
    fpr, tpr, _ = roc_curve(key, np.arange(550) >= 300)
    said0, said1 = test.says_x1(h0).mean(), test.says_x1(h1).mean()
    assert np.any(np.isclose(fpr, said0) & np.isclose(tpr, said1))
    assert (summary.positives, summary.negatives) == (250, 300)


def test_the_estimate_reports_the_held_out_auroc_and_low_fpr_tpr():
    # shift 1, sigma 1: AUROC Phi(1 / sqrt 2) = 0.7602, TPR at FPR f: 1 - Phi(z_{1-f} - 1)
    m = mechanisms.create("gaussian", sigma=1.0, clip=0.5, delta=1e-5, private_seed=0)
    estimate = distinguish(m, [-0.5], [0.5], trials=200_000, delta=1e-5, statistics=("projection",))
    summary = estimate.roc_summary
    assert (summary.negatives, summary.positives) == (estimate.n0, estimate.n1)
    assert summary.auc_low <= stats.norm.cdf(1 / math.sqrt(2)) <= summary.auc_high
    assert summary.auc_high - summary.auc_low < 0.01
    for point in summary.tpr_at:
        truth = stats.norm.sf(stats.norm.isf(point.target_fpr) - 1)
        assert point.fpr <= point.target_fpr and abs(point.tpr - truth) < 3 * (point.tpr_high - point.tpr_low)
    record = json.loads(json.dumps(estimate.to_dict()))
    assert record["roc_summary"]["auc"] == summary.auc and len(record["roc_summary"]["tpr_at"]) == 2
