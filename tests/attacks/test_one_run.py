"""One-run bounds: the f-DP recursion against reference values and Steinke et al., its soundness and power on the
idealized game (m independent canaries, scores N(mu b_i, 1)), and the guess rules."""
import numpy as np
import pytest

from auditkit.attacks.epsilon_bounds import one_run_epsilon_lower_bound
from auditkit.attacks.one_run import (
    best_after_seeing,
    claim_guesses,
    count_correct,
    expected_correct,
    fdp_refuted,
    fdp_scale_lower_bound,
    guess_grid,
    one_run_bound,
)
from auditkit.mechanisms.tradeoff import EpsDeltaTradeOff, GaussianTradeOff


def draw(mu: float, m: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    inserted = rng.random(m) < 0.5
    return rng.standard_normal(m) + mu * inserted, inserted


def test_fdp_bound_reference_values():
    # the authors' recursion (PrivacyGuard audit_rh_with_cap) at m = 10^6, 95 %: refuted GDP curve's eps at 1e-5
    gdp = GaussianTradeOff(1.0)
    s = fdp_scale_lower_bound(gdp, 1634, 1674, 10**6, confidence=0.95)
    assert gdp.scaled(s).epsilon(1e-5) == pytest.approx(3.550, abs=1e-3)
    s = fdp_scale_lower_bound(gdp, 10**5, 10**5, 10**6, confidence=0.95)
    assert gdp.scaled(s).epsilon(1e-5) == pytest.approx(15.34, abs=1e-2)


def test_pure_dp_curve_agrees_with_steinke():
    # with the (eps, 0) curve the f-DP recursion and Steinke's binomial bound certify the same eps
    s = fdp_scale_lower_bound(EpsDeltaTradeOff(1.0, 0.0), 3620, 5000, 10**5, confidence=0.95)
    assert s == pytest.approx(one_run_epsilon_lower_bound(3620, 5000, 10**5, confidence=0.95), abs=0.01)


def test_true_curve_is_not_refuted_and_a_false_one_is():
    true, false = GaussianTradeOff(1.0), GaussianTradeOff(0.5)
    m, k = 10_000, 400
    refuted_true = refuted_false = 0
    for seed in range(200):
        v = count_correct(*draw(1.0, m, seed), k)
        refuted_true += fdp_refuted(true, v, k, m, confidence=0.95)
        refuted_false += fdp_refuted(false, v, k, m, confidence=0.95)
    # at most 5 % false refutations are allowed; the bound is conservative (0 of 1,000 in the plan's run)
    assert refuted_true <= 10
    assert refuted_false >= 190  # a claim of mu = 0.5 for a mu = 1 game is caught nearly always


def test_count_correct_top_and_bottom():
    scores = np.array([0.1, 5.0, -3.0, 2.0, -1.0, 0.0])
    inserted = np.array([True, True, False, False, True, False])
    # k = 4: "in" for 5.0 (right) and 2.0 (wrong); "out" for -3.0 (right) and -1.0 (wrong)
    assert count_correct(scores, inserted, 4) == 2
    assert count_correct(scores, inserted, 2) == 2


def test_expected_correct_matches_monte_carlo():
    mu, m, k = 1.0, 20_000, 1000
    counts = [count_correct(*draw(mu, m, seed), k) for seed in range(100)]
    expected = expected_correct(GaussianTradeOff(mu), k, m)
    assert abs(np.mean(counts) - expected) < 4 * np.std(counts) / np.sqrt(len(counts)) + 1


def test_guess_rules():
    assert guess_grid(1000) == [1000, 500, 250, 125]
    assert guess_grid(39) == [39]
    k = claim_guesses(GaussianTradeOff(1.0), 10**6, delta=1e-5)
    assert 1000 <= k <= 2500  # the plan's search found k* ~ 1,500-1,600 at mu = 1, m = 10^6


def test_one_run_bound_verdicts():
    scores, inserted = draw(1.0, 20_000, 7)
    right = one_run_bound(scores, inserted, curve=GaussianTradeOff(1.0), delta=1e-5)
    assert right.verdict == "consistent" and right.guess_rule == "claim" and len(right.grid) == 1
    assert 0 < right.epsilon_lower_bound < right.claimed_epsilon < right.max_certifiable
    wrong = one_run_bound(scores, inserted, curve=GaussianTradeOff(0.4), delta=1e-5)
    assert wrong.verdict == "violated" and wrong.epsilon_lower_bound > wrong.claimed_epsilon
    steinke = one_run_bound(scores, inserted, curve=GaussianTradeOff(0.4), bound="steinke", delta=1e-5)
    assert steinke.epsilon_lower_bound < wrong.curve_epsilon  # the refuted GDP curve's eps: f-DP is the sharper
    assert wrong.refuted_curve.startswith("GDP μ = ") and wrong.curve_epsilon > wrong.epsilon_lower_bound
    none = one_run_bound(scores, inserted, curve=None, delta=1e-5)
    assert none.verdict == "no claim" and none.guess_rule == "grid" and none.grid == (20_000, 10_000, 5_000, 2_500)
    few = one_run_bound(scores[:30], inserted[:30], curve=GaussianTradeOff(2.0), guesses=30, delta=1e-5)
    assert few.verdict == "inconclusive"  # 30 canaries cannot certify eps 10


def test_best_after_seeing_reads_the_bits():
    scores, inserted = draw(1.0, 20_000, 3)
    ks = [200, 400, 800, 1600, 3200]
    best, k = best_after_seeing(scores, inserted, GaussianTradeOff(1.0), ks, delta=1e-5)
    fixed = one_run_bound(scores, inserted, curve=GaussianTradeOff(1.0), guesses=k, delta=1e-5)
    assert k in ks and best == pytest.approx(fixed.curve_epsilon)


@pytest.mark.parametrize("kwargs, message", [
    (dict(bound="both"), "bound must be one of fdp, steinke"),
    (dict(guesses="all"), "guesses must be one of claim, grid"),
    (dict(guesses=0), "guesses must be one of claim, grid or an integer in 1..100"),
    (dict(confidence=1.0), "confidence must be in"),
])
def test_bad_arguments(kwargs, message):
    scores, inserted = draw(1.0, 100, 0)
    with pytest.raises(ValueError, match=message):
        one_run_bound(scores, inserted, curve=GaussianTradeOff(1.0), **kwargs)
    with pytest.raises(ValueError, match="finite"):
        one_run_bound(np.full(10, np.nan), inserted[:10], curve=None)
    with pytest.raises(ValueError, match="delta = 1e-05 is below what the claim's curve"):
        one_run_bound(scores, inserted, curve=EpsDeltaTradeOff(1.0, 1e-3), delta=1e-5)
