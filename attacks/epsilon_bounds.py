"""Certified epsilon lower bounds: Clopper-Pearson rates, the hypothesis-test inequality, caps, one-run audits.

Hypothesis-test inequality (Kairouz, Oh & Viswanath, ICML 2015, Thm. 2.1; Jagielski, Ullman & Oprea, NeurIPS 2020):
for an (eps, delta)-DP M and a test with FPR = P[M(x0) in S], FNR = P[M(x1) not in S],

    eps >= max{ ln[(1 - delta - FPR) / FNR],  ln[(1 - delta - FNR) / FPR] },

with FPR and FNR replaced by one-sided Clopper-Pearson upper bounds at levels 1 - w (1 - confidence) and
1 - (1 - w)(1 - confidence) (a union bound; w = ``fp_share`` fixed before the counts are seen); below 0 reads 0.
One run (Steinke, Nasr & Jagielski, NeurIPS 2023, main theorem with its delta extension; ``p_value_DP_audit``),
q = e^eps / (1 + e^eps), m canaries, r guesses, V correct:

    P[V >= v] <= P[Binomial(r, q) >= v] + 2 m delta max_{1 <= i <= v} P[v - i <= Binomial(r, q) < v] / i.

Derivation, the caps of ``max_certifiable`` and worked numbers: docs/methodology/distinguishing.md
(#the-certified-bound).
"""

from __future__ import annotations

import math

import numpy as np
from scipy import special, stats

__all__ = [
    "clopper_pearson_upper",
    "distinguishing_p_value",
    "epsilon_lower_bound",
    "epsilon_lower_bounds",
    "max_certifiable",
    "one_run_epsilon_lower_bound",
    "one_run_p_value",
]

# (a, b, alpha) -> the 1 - alpha quantile of Beta(a, b): special.betainccinv (not in SciPy 1.11) is the quantile
# stats.beta.isf computes, without its argument checks, ten times faster
_BETA_UPPER_QUANTILE = getattr(special, "betainccinv", None) or (lambda a, b, alpha: stats.beta.isf(alpha, a, b))
_P_VALUE_FLOOR = 1e-20  # p-values below this are reported as this
_EPS_TOLERANCE = 1e-7  # absolute precision of the bisections over eps


def _check_confidence(confidence: float) -> None:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def _check_delta(delta: float) -> None:
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")


def _check_count(name: str, k: int, n: int) -> None:
    if not 0 <= k <= n or n < 1:
        raise ValueError(f"{name} must be an integer count in 0..n with n >= 1, got {k} of {n}")


def clopper_pearson_upper(k: int | np.ndarray, n: int | np.ndarray, alpha: float) -> float | np.ndarray:
    """One-sided Clopper-Pearson upper bound on a binomial rate: the u with P[Binomial(n, u) <= k] = alpha,
    i.e. the 1 - alpha quantile of Beta(k + 1, n - k); 1 when k = n. P[rate <= u] >= 1 - alpha.

    Vectorised over ``k`` and ``n``; ``alpha`` in (0, 1).
    """
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    k_arr, n_arr = np.asarray(k, dtype=np.float64), np.asarray(n, dtype=np.float64)
    if np.any(n_arr < 1) or np.any(k_arr < 0) or np.any(k_arr > n_arr):
        raise ValueError("clopper_pearson_upper needs counts 0 <= k <= n with n >= 1")
    full = k_arr >= n_arr
    upper = np.where(full, 1.0, _BETA_UPPER_QUANTILE(k_arr + 1, np.where(full, 1.0, n_arr - k_arr), alpha))
    return float(upper) if upper.ndim == 0 else upper


def epsilon_lower_bounds(
    fp: np.ndarray, n_neg: float, fn: np.ndarray, n_pos: float, *, alpha_fp: float, alpha_fn: float, delta: float
) -> np.ndarray:
    """The hypothesis-test bound (module docstring) for arrays of counts, FPR bounded at level 1 - ``alpha_fp``
    and FNR at 1 - ``alpha_fn``.

    ``fp``: false positives among ``n_neg`` outputs of M(x0); ``fn``: false negatives among ``n_pos`` of M(x1).
    Counts may be fractional (a predicted count: the Beta quantile is defined for them).
    """
    fpr = clopper_pearson_upper(np.asarray(fp), n_neg, alpha_fp)
    fnr = clopper_pearson_upper(np.asarray(fn), n_pos, alpha_fn)
    with np.errstate(divide="ignore"):  # 1 - delta - rate <= 0 gives ln 0 = -inf: no bound from that side
        first = np.log(np.maximum(1 - delta - fpr, 0.0)) - np.log(fnr)
        second = np.log(np.maximum(1 - delta - fnr, 0.0)) - np.log(fpr)
    return np.maximum(np.maximum(first, second), 0.0)


def _check_share(fp_share: float) -> None:
    if not 0 < fp_share < 1:
        raise ValueError(f"fp_share must be in (0, 1), got {fp_share!r}")


def epsilon_lower_bound(
    fp: int, n_neg: int, fn: int, n_pos: int, *, confidence: float, delta: float, fp_share: float = 0.5
) -> float:
    """eps >= max{ln[(1 - delta - FPR_ub)/FNR_ub], ln[(1 - delta - FNR_ub)/FPR_ub]}, at least 0.

    FPR_ub, FNR_ub: one-sided Clopper-Pearson upper bounds on fp / n_neg at level 1 - fp_share (1 - confidence)
    and on fn / n_pos at 1 - (1 - fp_share)(1 - confidence), so the bound holds with probability
    >= ``confidence`` (module docstring); ``fp_share`` must not depend on these counts.
    """
    _check_confidence(confidence)
    _check_delta(delta)
    _check_share(fp_share)
    _check_count("fp", fp, n_neg)
    _check_count("fn", fn, n_pos)
    alpha = 1 - confidence
    return float(epsilon_lower_bounds(fp, n_neg, fn, n_pos, alpha_fp=fp_share * alpha,
                                      alpha_fn=(1 - fp_share) * alpha, delta=delta))


def max_certifiable(trials: int, *, confidence: float = 0.95, delta: float = 0.0) -> float:
    """The bound of a perfect test (fp = fn = 0) with ``trials`` outputs split evenly between x0 and x1:
    the largest eps that many trials can ever certify. 4.91 for 1,000 and 7.21 for 10^4 (delta 1e-5, 95%)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 2:
        raise ValueError(f"trials must be an integer >= 2, got {trials!r}")
    n_neg = trials // 2
    return epsilon_lower_bound(0, n_neg, 0, trials - n_neg, confidence=confidence, delta=delta)


def distinguishing_p_value(
    fp: int, n_neg: int, fn: int, n_pos: int, *, epsilon: float, delta: float, fp_share: float = 0.5
) -> float:
    """p-value of the hypothesis "M is (epsilon, delta)-DP" given a held-out test's counts: the smallest
    1 - confidence at which ``epsilon_lower_bound`` (with the same ``fp_share``) exceeds ``epsilon`` (bisection
    on log10 of it; values below 1e-20 are reported as 1e-20). For Holm's procedure over several tests
    (``auditkit.attacks.verdicts.holm``)."""
    _check_delta(delta)
    _check_share(fp_share)
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")

    _check_count("fp", fp, n_neg)
    _check_count("fn", fn, n_pos)

    def exceeds(log_alpha: float) -> bool:  # the bound at confidence 1 - 10^log_alpha exceeds epsilon
        alpha = 10.0**log_alpha
        bound = epsilon_lower_bounds(fp, n_neg, fn, n_pos, alpha_fp=fp_share * alpha, alpha_fn=(1 - fp_share) * alpha,
                                     delta=delta)
        return float(bound) > epsilon

    low, high = math.log10(_P_VALUE_FLOOR), 0.0
    if exceeds(low):
        return _P_VALUE_FLOOR
    if not exceeds(high):
        return 1.0
    for _ in range(60):  # exceeds(low) is False, exceeds(high) is True
        middle = (low + high) / 2
        low, high = (low, middle) if exceeds(middle) else (middle, high)
    return 10.0**high


def one_run_p_value(correct: int, guesses: int, canaries: int, *, epsilon: float, delta: float) -> float:
    """P-value of "M is (epsilon, delta)-DP" after ``correct`` right guesses out of ``guesses`` on ``canaries``
    canaries (Steinke, Nasr & Jagielski 2023; formula in the module docstring), capped at 1."""
    q = 1.0 / (1.0 + math.exp(-epsilon))
    tail = float(stats.binom.sf(correct - 1, guesses, q))
    if correct == 0 or delta == 0:
        return min(1.0, tail)
    return min(1.0, tail + 2 * canaries * delta * _worst_window(correct, guesses, q))


_WINDOW = 4096  # the first i of max_i P[v - i <= B < v] / i evaluated (then x4 while the rest might still win)


def _worst_window(correct: int, guesses: int, q: float) -> float:
    """max over 1 <= i <= v of S(i) / i, S(i) = P[v - i <= Binomial(r, q) < v], exactly but without evaluating
    every i: S(i) <= S(v) = P[B < v], so no i > n beats the maximum over 1..n once S(v) / (n + 1) is below it
    (10^6 canaries: v ~ 7 10^5 terms otherwise, per bisection step)."""
    below_all = float(stats.binom.cdf(correct - 1, guesses, q))
    width = min(correct, _WINDOW)
    while True:
        below = stats.binom.pmf(np.arange(correct - 1, correct - 1 - width, -1), guesses, q)  # P[B = v - i]
        worst = float(np.max(np.cumsum(below) / np.arange(1, width + 1)))
        if width == correct or below_all * (1 + 1e-9) / (width + 1) <= worst:
            return worst
        width = min(correct, 4 * width)


def one_run_epsilon_lower_bound(
    correct: int, guesses: int, canaries: int, *, confidence: float = 0.95, delta: float = 0.0
) -> float:
    """The largest eps at which ``one_run_p_value`` is below 1 - ``confidence`` (0 if none), by bisection
    to 1e-7. All guesses right on m = 1,000 canaries gives 5.78, on 10,000 gives 7.83 (delta 1e-5, 95%)."""
    for name, value in (("correct", correct), ("guesses", guesses), ("canaries", canaries)):
        if isinstance(value, bool) or not isinstance(value, int | np.integer):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if not 0 <= correct <= guesses <= canaries or canaries < 1:
        raise ValueError(
            f"need 0 <= correct <= guesses <= canaries and canaries >= 1, got {correct}, {guesses}, {canaries}"
        )
    _check_confidence(confidence)
    _check_delta(delta)
    alpha = 1 - confidence

    def rejected(eps: float) -> bool:
        return one_run_p_value(correct, guesses, canaries, epsilon=eps, delta=delta) < alpha

    if not rejected(0.0):
        return 0.0
    low, high = 0.0, 1.0
    while rejected(high):
        low, high = high, 2 * high
    while high - low > _EPS_TOLERANCE:
        middle = (low + high) / 2
        low, high = (middle, high) if rejected(middle) else (low, middle)
    return low
