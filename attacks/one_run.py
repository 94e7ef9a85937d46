"""One-run audit bounds: m canaries, each included with probability 1/2, one run, k guesses, v of them right.

At confidence 1 - tau:

* ``steinke`` (Steinke, Nasr & Jagielski, NeurIPS 2023, Thm. 3.1 with its delta extension): correct guesses are
  dominated by Binomial(k, e^eps / (1 + e^eps)) plus 2 m delta max_i P[v-i <= B < v] / i;
* ``fdp`` (Mahloujifar, Melis & Chaudhuri, ICML 2025, Alg. 2 and Thm. 9 as in the authors' code): f is refuted
  when the recursion

      r = tau v / m ;  h = tau (k - v) / m
      for i = v-1 down to 0:  h' = max(h, f^-1_blow-up(r));  r = min(r + i / (k - i) (h' - h), 1);  h = h'

  ends with r + h > k / m; monotone in ``scaled(s)``, so the family's bound is the largest s refuted.

k (the k/2 highest scores guessed "in", the k/2 lowest "out") is fixed before the bits are read: ``"claim"``,
``"grid"`` (Bonferroni) or an integer; the paper's best-k-after-seeing (``best_after_seeing``) reads the bits and
is only for reproducing its Table 1. See docs/methodology/one-run.md (#bounds-in-detail).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import optimize

from auditkit.attacks.epsilon_bounds import one_run_epsilon_lower_bound
from auditkit.attacks.membership import log_roc_points
from auditkit.attacks.verdicts import CONSISTENT, INCONCLUSIVE, NO_CLAIM, VIOLATED, bonferroni_confidence
from auditkit.mechanisms import EpsDeltaTradeOff, TradeOff

__all__ = [
    "BOUNDS",
    "GUESS_RULES",
    "MIN_GRID_GUESSES",
    "OneRunBound",
    "best_after_seeing",
    "claim_guesses",
    "claim_roc",
    "count_correct",
    "empirical_roc",
    "expected_correct",
    "fdp_refuted",
    "curve_family_bound",
    "epsilon_delta_lower_bound",
    "fdp_scale_lower_bound",
    "largest_refuted_scale",
    "guess_grid",
    "one_run_bound",
]

BOUNDS = ("fdp", "steinke")
GUESS_RULES = ("claim", "grid")
MIN_GRID_GUESSES = 20
MAX_SCALE = 16.0  # the family is searched up to 16 times the claim (a bound there is reported as at least that)
MAX_EPSILON = 64.0  # the (eps, delta) family is searched up to this eps
_SCALE_TOLERANCE = 1e-4


def fdp_refuted(curve: TradeOff, correct: int, guesses: int, canaries: int, *, confidence: float) -> bool:
    """Whether ``correct`` right guesses of ``guesses`` on ``canaries`` refute ``curve`` at ``confidence``
    (Mahloujifar, Melis & Chaudhuri 2025; the recursion of the module docstring)."""
    _check_counts(correct, guesses, canaries)
    tau = 1 - confidence
    r = tau * correct / canaries
    h = tau * (guesses - correct) / canaries
    for i in range(correct - 1, -1, -1):
        h_new = max(h, curve.inverse_blow_up(r))
        if h_new == h:
            break  # a fixed point: nothing changes any more
        r = min(r + i / (guesses - i) * (h_new - h), 1.0)
        h = h_new
    return r + h > guesses / canaries


def fdp_scale_lower_bound(curve: TradeOff, correct: int, guesses: int, canaries: int, *,
                          confidence: float) -> float:
    """The largest s with ``curve.scaled(s)`` refuted (0 when none, ``MAX_SCALE`` at most): to 1e-4 relative, or,
    for a curve that is costly to scale (a ``scale_step`` attribute, e.g. a composed privacy-loss distribution),
    the largest refuted s on the grid step^j, a lower bound whose curves are computed once and cached."""
    def refuted(s: float) -> bool:
        return fdp_refuted(curve.scaled(s), correct, guesses, canaries, confidence=confidence)

    return largest_refuted_scale(refuted, getattr(curve, "scale_step", None))


def largest_refuted_scale(refuted: Callable[[float], bool], step: float | None = None) -> float:
    """The largest s in [1 / MAX_SCALE, MAX_SCALE] with ``refuted(s)`` (monotone: refuted below, not above), to
    1e-4 relative, or on the grid step^j when ``step`` is given; 0 when none."""
    if step is not None:
        return _grid_scale_lower_bound(refuted, step)
    low = 1.0 / MAX_SCALE
    if not refuted(low):
        return 0.0
    high = 1.0
    while refuted(high):
        low, high = high, 2 * high
        if high > MAX_SCALE:
            return MAX_SCALE
    while high - low > _SCALE_TOLERANCE * high:
        middle = math.sqrt(low * high)
        low, high = (middle, high) if refuted(middle) else (low, middle)
    return low


def _grid_scale_lower_bound(refuted: Callable[[float], bool], step: float) -> float:
    """The largest s = step^j (|j| <= log MAX_SCALE / log step) refuted, by bisection on j; 0 when none."""
    top = int(math.floor(math.log(MAX_SCALE) / math.log(step)))
    if not refuted(step**-top):
        return 0.0
    low, high = -top, 0  # refuted(step^low) holds
    while refuted(step**high):
        low, high = high, min(top, max(1, 2 * high))
        if low == top:
            return step**top
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if refuted(step**middle) else (low, middle)
    return step**low


def count_correct(scores: np.ndarray, inserted: np.ndarray, guesses: int) -> int:
    """Correct guesses of the rule "the k/2 highest scores are in, the k/2 lowest out" (k = ``guesses``); ties are
    broken by index, which is independent of the bits (they are drawn independently per canary)."""
    order = np.argsort(np.asarray(scores), kind="stable")
    bits = np.asarray(inserted, dtype=bool)[order]
    low, high = guesses // 2, guesses - guesses // 2
    return int((~bits[:low]).sum() + bits[len(bits) - high:].sum())


def expected_correct(curve: TradeOff, guesses: int, canaries: int) -> float:
    """The correct guesses the top/bottom rule expects when the scores are exactly as distinguishable as ``curve``
    allows (m large): a threshold with type I error alpha keeps m/2 (1 - f(alpha) + alpha) canaries per side, of
    which m/2 (1 - f(alpha)) are right, so 1 - f(alpha) + alpha = k / m and v = m (1 - f(alpha))."""
    share = min(guesses / canaries, 1.0)
    gap = lambda a: 1 - float(curve.beta(np.array([a]))[0]) + a - share  # noqa: E731
    alpha = optimize.brentq(gap, 0.0, share, xtol=1e-15) if gap(0.0) < 0 else 0.0
    return canaries * (share - alpha)


def guess_grid(canaries: int) -> list[int]:
    """k = m, m/2, m/4, m/8 while at least ``MIN_GRID_GUESSES`` (just [m] for fewer canaries)."""
    grid = [canaries]
    while len(grid) < 4 and grid[-1] // 2 >= MIN_GRID_GUESSES:
        grid.append(grid[-1] // 2)
    return grid


def _bound_at(bound: str, correct: int, guesses: int, canaries: int, confidence: float, delta: float) -> float:
    """The certified eps for the counts, sound for any mechanism: Steinke's, or the largest eps whose (eps,
    ``delta``) curve the f-DP recursion refutes (the mechanism is then not (eps, delta)-DP)."""
    if bound == "steinke":
        return one_run_epsilon_lower_bound(correct, guesses, canaries, confidence=confidence, delta=delta)
    return epsilon_delta_lower_bound(correct, guesses, canaries, confidence=confidence, delta=delta)


def epsilon_delta_lower_bound(correct: int, guesses: int, canaries: int, *, confidence: float,
                              delta: float) -> float:
    """The largest eps (to 1e-4) whose (eps, ``delta``)-DP curve ``fdp_refuted`` refutes; 0 when none (at most
    ``MAX_EPSILON``)."""
    def refuted(eps: float) -> bool:
        return fdp_refuted(EpsDeltaTradeOff(eps, delta), correct, guesses, canaries, confidence=confidence)

    if not refuted(0.0):
        return 0.0
    low, high = 0.0, 1.0
    while refuted(high):
        low, high = high, 2 * high
        if high > MAX_EPSILON:
            return low
    while high - low > 1e-4:
        middle = (low + high) / 2
        low, high = (middle, high) if refuted(middle) else (low, middle)
    return low


def curve_family_bound(curve: TradeOff, correct: int, guesses: int, canaries: int, *, confidence: float,
                       delta: float) -> tuple[str, float] | None:
    """The least private member of ``curve``'s family the counts refute, as (its label, its eps at ``delta``): the
    number Mahloujifar et al.'s Table 1 reports. It bounds the mechanism's eps only if the mechanism's true curve
    lies in that family (a Gaussian mechanism and GDP); None when no member is refuted."""
    s = fdp_scale_lower_bound(curve, correct, guesses, canaries, confidence=confidence)
    if s == 0:
        return None
    refuted = curve.scaled(s)
    return refuted.label, refuted.epsilon(delta)


def claim_guesses(curve: TradeOff, canaries: int, *, bound: str = "fdp", confidence: float = 0.95,
                  delta: float = 0.0) -> int:
    """k* (even, >= 2): the k of a log grid of 40 that maximises the bound at ``expected_correct`` counts (f-DP:
    the refuted member of the claim's family, the test's power against the claim itself)."""
    candidates = sorted({max(2, int(k) // 2 * 2) for k in np.logspace(1, math.log10(canaries), 40)} | {canaries // 2 * 2})
    candidates = [k for k in candidates if 2 <= k <= canaries] or [canaries]
    def value(k: int) -> float:
        v = min(k, int(round(expected_correct(curve, k, canaries))))
        if bound == "steinke":
            return _bound_at(bound, v, k, canaries, confidence, delta)
        return fdp_scale_lower_bound(curve, v, k, canaries, confidence=confidence)  # the claim's family

    return max(candidates, key=value)


@dataclass(frozen=True)
class OneRunBound:
    """A one-run bound and its verdict (fields read by ``auditkit.attacks.verdicts``).

    canaries (m), guesses (k), correct (v): the counts the bound uses; guess_rule: how k was fixed (``GUESS_RULES``
    or "fixed"), grid: the k tried (one unless "grid"); per_test_confidence: Bonferroni over the grid.
    epsilon_lower_bound: eps certified at ``delta`` for any mechanism (Steinke's, or the refuted (eps, delta)
    curve's for f-DP); max_certifiable: the same if all k guesses were right.
    curve: the claim's curve label, claimed_epsilon: the claim's eps at ``delta``; refuted_curve, curve_epsilon:
    the least private curve of the claim's family the counts refute and its eps at ``delta`` (f-DP; the number of
    Mahloujifar et al.'s Table 1, a bound on eps only for a mechanism whose curve is in that family);
    curve_max_certifiable: the same with all k right (a claim below it can be refuted: "consistent" is possible
    even where ``max_certifiable`` is below the claimed eps).
    verdict: consistent / violated / inconclusive / no claim; for f-DP "violated" means the claim's curve itself
    is refuted, which a bound below the claimed eps does not contradict (the curve is sharper than its eps).
    """

    bound: str
    canaries: int
    guesses: int
    correct: int
    confidence: float
    per_test_confidence: float
    delta: float
    epsilon_lower_bound: float
    max_certifiable: float
    claimed_epsilon: float | None
    curve: str | None
    verdict: str
    guess_rule: str
    grid: tuple[int, ...]
    refuted_curve: str | None = None
    curve_epsilon: float | None = None
    curve_max_certifiable: float | None = None

    def to_dict(self) -> dict[str, Any]:
        out = dict(vars(self))
        out["grid"] = list(self.grid)
        return out


def one_run_bound(
    scores: np.ndarray,
    inserted: np.ndarray,
    *,
    curve: TradeOff | None,
    claimed_epsilon: float | None = None,
    bound: str = "fdp",
    guesses: str | int = "claim",
    confidence: float = 0.95,
    delta: float = 0.0,
) -> OneRunBound:
    """The one-run bound of ``scores`` (higher: more likely in) and the inclusion bits ``inserted`` (module
    docstring), judged against the claim's ``curve`` (None: no claim; the bound is then stated in the (eps, delta)
    family). ``claimed_epsilon``: the claim's eps at ``delta`` (default the curve's). ``guesses``: a rule of
    ``GUESS_RULES`` or a fixed k."""
    scores, inserted = np.asarray(scores, dtype=float), np.asarray(inserted, dtype=bool)
    m = len(scores)
    if m < 2 or inserted.shape != scores.shape:
        raise ValueError(f"scores and inserted must be two arrays of the same length >= 2, got {scores.shape} and "
                         f"{inserted.shape}")
    if not np.all(np.isfinite(scores)):
        raise ValueError("scores must be finite")
    if bound not in BOUNDS:
        raise ValueError(f"bound must be one of {', '.join(BOUNDS)}, got {bound!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if curve is not None and not math.isfinite(curve.epsilon(delta)):
        raise ValueError(f"delta = {delta:g} is below what the claim's curve ({curve.label}) allows: the bound must be "
                         "computed at delta >= the claim's")
    if claimed_epsilon is None and curve is not None:
        claimed_epsilon = curve.epsilon(delta)
    if isinstance(guesses, str):
        if guesses not in GUESS_RULES:
            raise ValueError(f"guesses must be one of {', '.join(GUESS_RULES)} or an integer in 2..{m}, got {guesses!r}")
        # the claim rule needs a curve of the mechanism's own: the (eps, delta) curve's worst case spreads its
        # advantage over every canary, so its k* is m, blind to a mechanism whose leakage sits in the tail
        rule = "claim" if guesses == "claim" and _has_shape(curve) else "grid"
        grid = guess_grid(m) if rule == "grid" else [claim_guesses(curve, m, bound=bound, confidence=confidence,
                                                                   delta=delta)]
    else:
        if isinstance(guesses, bool) or not isinstance(guesses, int | np.integer) or not 1 <= guesses <= m:
            raise ValueError(f"guesses must be one of {', '.join(GUESS_RULES)} or an integer in 1..{m}, got {guesses!r}")
        rule, grid = "fixed", [int(guesses)]
    per_test = bonferroni_confidence(confidence, len(grid))
    correct = {k: count_correct(scores, inserted, k) for k in grid}
    bounds = {k: _bound_at(bound, correct[k], k, m, per_test, delta) for k in grid}
    best = max(grid, key=lambda k: (bounds[k], k))
    top = max(grid)  # all k right certifies most at the largest k: the cap
    cap = _bound_at(bound, top, top, m, per_test, delta)
    verdict = _verdict(bound, curve, claimed_epsilon, correct, grid, m, per_test, bounds, cap)
    refuted, curve_cap = None, None
    if bound == "fdp" and _has_shape(curve):
        perfect = curve_family_bound(curve, top, top, m, confidence=per_test, delta=delta)
        curve_cap = None if perfect is None else perfect[1]
        found = [(k, curve_family_bound(curve, correct[k], k, m, confidence=per_test, delta=delta)) for k in grid]
        found = [(k, f) for k, f in found if f is not None]
        if found:
            best, refuted = max(found, key=lambda item: (item[1][1], item[0]))
    return OneRunBound(bound, m, best, correct[best], confidence, per_test, delta, bounds[best], cap, claimed_epsilon,
                       None if curve is None else curve.label, verdict, rule, tuple(grid),
                       None if refuted is None else refuted[0], None if refuted is None else refuted[1], curve_cap)


def _verdict(bound: str, curve: TradeOff | None, claimed: float | None, correct: dict[int, int], grid: list[int],
             m: int, confidence: float, bounds: dict[int, float], cap: float) -> str:
    """``auditkit.attacks.verdicts.verdict``'s rule, with the f-DP refutation read off the claim curve itself (not
    off epsilons, which round): violated when some k refutes it, inconclusive when not even k right guesses could."""
    if curve is None or claimed is None:
        return NO_CLAIM
    if bound == "fdp":
        if any(fdp_refuted(curve, correct[k], k, m, confidence=confidence) for k in grid):
            return VIOLATED
        return CONSISTENT if any(fdp_refuted(curve, k, k, m, confidence=confidence) for k in grid) else INCONCLUSIVE
    if max(bounds.values()) > claimed:
        return VIOLATED
    return INCONCLUSIVE if cap <= claimed else CONSISTENT


def best_after_seeing(scores: np.ndarray, inserted: np.ndarray, curve: TradeOff, ks: list[int], *,
                      bound: str = "fdp", confidence: float = 0.95, delta: float = 0.0) -> tuple[float, int]:
    """The paper's protocol (Table 1): the largest bound over ``ks`` on this draw, uncorrected, and its k; for f-DP
    the eps of the least private refuted curve of ``curve``'s family, as the table reports it. It reads the
    inclusion bits to choose k: not a certified bound (module docstring)."""
    def value(k: int) -> float:
        correct = count_correct(scores, inserted, k)
        if bound == "steinke":
            return _bound_at(bound, correct, k, len(scores), confidence, delta)
        found = curve_family_bound(curve, correct, k, len(scores), confidence=confidence, delta=delta)
        return 0.0 if found is None else found[1]

    return max((value(k), k) for k in ks)


ROC_POINTS = 60  # points of a stored ROC curve (log-spaced in the false-positive rate)


def empirical_roc(scores: np.ndarray, inserted: np.ndarray, points: int = ROC_POINTS) -> dict[str, list[float]]:
    """The canary guesses' empirical trade-off: for thresholds "in when score >= t", the false-positive rate among
    the excluded canaries and the true-positive rate among the included, at ``points`` FPRs log-spaced from
    1 / (number excluded) to 1 (each point the largest TPR at an FPR at most that):
    ``auditkit.attacks.membership.log_roc_points`` as lists."""
    roc = log_roc_points(scores, inserted, points)
    return {"fpr": [float(f) for f in roc["fpr"]], "tpr": [float(t) for t in roc["tpr"]]}


def claim_roc(curve: TradeOff, fprs: list[float]) -> list[float]:
    """The largest true-positive rate the claim's curve allows at each false-positive rate: 1 - f(alpha)."""
    return [float(1 - b) for b in curve.beta(np.asarray(fprs, dtype=float))] if fprs else []


def _has_shape(curve: TradeOff | None) -> bool:
    """Whether ``curve`` is a curve of the mechanism's own, not the generic (eps, delta) curve any claim supports
    (its ``generic`` attribute): only such a curve informs the claim rule and has a family worth reporting."""
    return curve is not None and not getattr(curve, "generic", False)


def _check_counts(correct: int, guesses: int, canaries: int) -> None:
    if not 0 <= correct <= guesses <= canaries or canaries < 1:
        raise ValueError(f"need 0 <= correct <= guesses <= canaries and canaries >= 1, got {correct}, {guesses}, "
                         f"{canaries}")
