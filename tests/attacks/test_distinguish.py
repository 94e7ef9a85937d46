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

import pytest
import torch

from auditkit import mechanisms
from auditkit.attacks.distinguish import distinguish
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
