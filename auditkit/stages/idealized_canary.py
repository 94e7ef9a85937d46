"""The idealized one-run canary audit (``auditkit canary``): m canaries, each one independent call of the mechanism on
the claim's neighbouring pair, judged by a one-run bound (``auditkit.attacks.one_run``).

The game. Canary i's bit b_i ~ Bernoulli(1/2) is drawn from its own keyed stream (``derive_seed(seed, "canary")``,
stream "inclusion"); canary i's output is one call of the mechanism on x1 when b_i = 1 and on x0 when b_i = 0, the
pair (x0, x1) of the claim's audit setting (``auditkit.attacks.audit_settings``: the first pair, "axis", unless
``pair`` names another). The outputs come from two bulk calls of the real mechanism (``bulk_sampler``: x1 for the
included canaries, x0 for the others), each row an independent call, scattered back to the canaries by their bits:
the same joint law as m separate calls. A canary's score is the log-likelihood ratio ln p(y | x1) - ln p(y | x0)
where the mechanism declares its output density (``output_log_density``), else the projection <y, x1 - x0>.

The claim. The mechanism's one-round trade-off curve (``tradeoff`` capability), else the (eps, delta) curve of its
claim (``EpsDeltaTradeOff``); none without a claim. The one-run bound (``one_run_bound``: f-DP or Steinke, k fixed
before the bits are read) gives the verdict.

The independent-calls bound. Here, and only here, the m calls are independent, so the classical two-sample test
applies as well: a threshold fixed before the data (the symmetric point of the pair: LLR 0, or the projection of the
pair's midpoint), one-sided Clopper-Pearson upper bounds on the false-positive rate among the excluded canaries and
the false-negative rate among the included (each at (1 - confidence) / 2), and the largest member of the claim
curve's family that the point (FPR_ub, FNR_ub) lies below (refuted: f(FPR_ub) > FNR_ub; for mu-GDP this is
mu >= Phi^-1(1 - FPR_ub) - Phi^-1(FNR_ub)). It is near-tight at m = 10^6 (the bound reaches the true eps within a
few percent at mu = 1), but it rests on the independence of the calls, which a real training run (canaries sharing
one run) does not have: it is reported beside the one-run bound, never as the verdict.

The searched two-sample bound (issue 43). The symmetric threshold spends the test where the pair is hardest to tell
apart; the (eps, delta) bound for any mechanism is largest in the tails. ``searched_threshold_bound`` splits the
excluded and the included canaries each in half by a keyed stream (seed, "canary", "threshold-split"), picks on one
half the threshold "in when score >= t" whose own bound is largest, both inequalities of the hypothesis test
(TPR <= e^eps FPR + delta and 1 - FPR <= e^eps (1 - TPR) + delta: both directions), and certifies that threshold on
the other half (``auditkit.attacks.membership.roc_epsilon_lower_bound``): the selection costs half the samples and
no confidence. Like the symmetric one it rests on independent calls, so it is never the verdict.
"""
from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import torch

from auditkit import mechanisms
from auditkit.attacks.audit_settings import audit_setting, setting_pairs
from auditkit.attacks.bulk_sampling import bulk_sampler
from auditkit.attacks.epsilon_bounds import clopper_pearson_upper
from auditkit.attacks.membership import RocBound, roc_epsilon_lower_bound
from auditkit.attacks.neighbouring_pairs import NeighbouringPair
from auditkit.attacks.one_run import BOUNDS, GUESS_RULES, OneRunBound, largest_refuted_scale, one_run_bound
from auditkit.attacks.roc import RocSummary, roc_summary
from auditkit.mechanisms.randomness import derive_seed, generator
from auditkit.mechanisms.tradeoff import EpsDeltaTradeOff, TradeOff
from auditkit.validation import Choice, Integer, Number

__all__ = [
    "INDEPENDENT_LABEL",
    "STATISTICS",
    "IdealizedCanaryAudit",
    "IndependentCallsBound",
    "canary_pairs",
    "claim_at_delta",
    "claim_curve",
    "idealized_canary_audit",
    "independent_calls_bound",
    "searched_dict",
    "searched_threshold_bound",
]

INDEPENDENT_LABEL = "independent calls (two-sample test)"
STATISTICS = {
    "llr": "log-likelihood ratio ln p(y | x1) - ln p(y | x0) (the declared output density)",
    "projection": "projection <y, x1 - x0> (no output density declared)",
}


@dataclass(frozen=True)
class IndependentCallsBound:
    """The two-sample test on the canaries as independent calls (module docstring).

    threshold: "in" when score > threshold; false_positives of negatives (excluded canaries), false_negatives of
    positives (included); fpr_upper, fnr_upper: their Clopper-Pearson upper bounds, each at (1 - confidence) / 2.
    family: the curve whose family is searched (the claim's, or (1, delta)-DP without a claim); scale_lower_bound:
    the largest s with ``family.scaled(s)`` refuted (0: none), refuted_curve its label (None: none), curve_epsilon
    its eps at ``delta`` (an eps bound only for a mechanism whose curve is in the family); epsilon_lower_bound: the
    largest eps whose (eps, ``delta``) curve the point refutes, certified for any mechanism; max_certifiable: the
    same with no error; claim_refuted: the claim's curve itself refuted (None: no claim).
    """

    label: str
    threshold: float
    false_positives: int
    negatives: int
    false_negatives: int
    positives: int
    fpr_upper: float
    fnr_upper: float
    confidence: float
    delta: float
    family: str
    refuted_curve: str | None
    scale_lower_bound: float
    epsilon_lower_bound: float
    max_certifiable: float
    claim_refuted: bool | None
    curve_epsilon: float

    def to_dict(self) -> dict[str, Any]:
        return dict(vars(self))


@dataclass(frozen=True)
class IdealizedCanaryAudit:
    """What ``idealized_canary_audit`` found. ``result`` (the one-run bound) holds the verdict; ``independent`` is
    reported beside it; ``refuted_curve``: the least private curve of the claim's family (or of (eps, delta)-DP
    without a claim) the f-DP bound refutes (None for Steinke, or when it refutes none). ``roc_summary``: the
    scores' AUROC and TPR at low FPRs with intervals (included canaries the positives). ``roc_summary``,
    ``scores`` and ``inserted`` (one per canary) are not in ``to_dict`` (the results' canary view holds the ROC)."""

    mechanism: str
    pair: str
    statistic: str
    sampling: str
    curve: TradeOff | None
    claimed_epsilon: float | None
    claimed_delta: float
    result: OneRunBound
    refuted_curve: str | None
    independent: IndependentCallsBound
    searched: RocBound
    roc_summary: RocSummary
    seconds: float
    seed: int
    scores: np.ndarray = field(repr=False, compare=False)
    inserted: np.ndarray = field(repr=False, compare=False)

    @property
    def verdict(self) -> str:
        return self.result.verdict

    def to_dict(self) -> dict[str, Any]:
        return {"mechanism": self.mechanism, "pair": self.pair, "statistic": self.statistic, "sampling": self.sampling,
                "curve": None if self.curve is None else self.curve.label, "claimed_epsilon": self.claimed_epsilon,
                "claimed_delta": self.claimed_delta, "result": self.result.to_dict(),
                "refuted_curve": self.refuted_curve,
                "independent": self.independent.to_dict(), "searched": searched_dict(self.searched),
                "seconds": self.seconds, "seed": self.seed}


def claim_curve(mechanism: mechanisms.Mechanism) -> TradeOff | None:
    """The claim as a trade-off curve: the declared ``tradeoff()``, else the claim's (eps, delta) curve; None
    without a claim."""
    declared = mechanisms.capability(mechanism, "tradeoff")
    if declared is not None:
        return declared
    claim = mechanism.guarantee()
    if claim.epsilon is None or not math.isfinite(claim.epsilon):
        return None
    return EpsDeltaTradeOff(float(claim.epsilon), float(claim.delta))


def claim_at_delta(mechanism: mechanisms.Mechanism, delta: float | None) -> tuple[TradeOff | None, float, float | None]:
    """The claim's curve (``claim_curve``), the bounds' delta (``delta``, default the claim's, 0 without a claim) and
    the claim's eps at that delta; a ``ValueError`` for a delta outside [0, 1) or one the curve gives no finite eps
    at."""
    claim = mechanism.guarantee()
    curve = claim_curve(mechanism)
    if delta is None:
        delta = float(claim.delta) if curve is not None else 0.0
    if not 0 <= delta < 1:
        raise ValueError(f"delta must be in [0, 1), got {delta!r}")
    claimed_epsilon = None if curve is None else curve.epsilon(delta)
    if curve is not None and (not math.isfinite(claimed_epsilon) or (delta == 0 and claim.delta > 0)):
        # a claim with delta > 0 (mu-GDP, (eps, delta)) has no finite eps at delta 0 (numerically: an underflow)
        raise ValueError(f"the claim's curve {curve.label} gives no finite epsilon at delta {delta:g}: take a larger "
                         f"delta (the claim's is {claim.delta:g})")
    return curve, delta, claimed_epsilon


def canary_pairs(mechanism: mechanisms.Mechanism, *, seed: int = 0) -> list[NeighbouringPair]:
    """The neighbouring pairs of the claim's audit setting, the first ("axis") the default."""
    return setting_pairs(audit_setting(mechanism), seed=seed)


def independent_calls_bound(scores: np.ndarray, inserted: np.ndarray, *, threshold: float, curve: TradeOff | None,
                            confidence: float, delta: float) -> IndependentCallsBound:
    """The two-sample test of the module docstring on ``scores`` ("in" above ``threshold``) and the bits."""
    scores, inserted = np.asarray(scores, dtype=float), np.asarray(inserted, dtype=bool)
    positives, negatives = int(inserted.sum()), int((~inserted).sum())
    fp = int(np.count_nonzero(scores[~inserted] > threshold))
    fn = int(np.count_nonzero(scores[inserted] <= threshold))
    family = curve if curve is not None else EpsDeltaTradeOff(1.0, delta)
    alpha = (1 - confidence) / 2

    def certified(false_pos: int, false_neg: int) -> tuple[float, float, float, float, float]:
        if positives == 0 or negatives == 0:
            return 1.0, 1.0, 0.0, 0.0, 0.0
        fpr = float(clopper_pearson_upper(false_pos, negatives, alpha))
        fnr = float(clopper_pearson_upper(false_neg, positives, alpha))
        s = largest_refuted_scale(lambda s: float(family.scaled(s).beta(np.array([fpr]))[0]) > fnr)
        # (eps, delta)-DP forces FNR >= 1 - delta - e^eps FPR: the point refutes every eps below this
        any_mechanism = math.log(max(1 - delta - fnr, 0.0) / fpr) if 1 - delta - fnr > fpr else 0.0
        return fpr, fnr, s, (0.0 if s == 0 else family.scaled(s).epsilon(delta)), any_mechanism

    fpr_upper, fnr_upper, scale, curve_epsilon, epsilon = certified(fp, fn)
    cap = certified(0, 0)[4]
    refuted = None if curve is None else bool(float(curve.beta(np.array([fpr_upper]))[0]) > fnr_upper)
    return IndependentCallsBound(INDEPENDENT_LABEL, float(threshold), fp, negatives, fn, positives, fpr_upper,
                                 fnr_upper, confidence, delta, family.label,
                                 None if scale == 0 else family.scaled(scale).label, scale, epsilon, cap, refuted,
                                 curve_epsilon)


def searched_threshold_bound(scores: np.ndarray, inserted: np.ndarray, *, confidence: float, delta: float,
                             seed: int) -> RocBound:
    """The two-sample bound at a threshold searched on half the canaries and certified on the other half (module
    docstring), the halves drawn from the stream (seed, "canary", "threshold-split")."""
    rng = np.random.default_rng(derive_seed(seed, "canary", "threshold-split"))
    return roc_epsilon_lower_bound(scores, inserted, delta=delta, confidence=confidence, rng=rng)


def searched_dict(bound: RocBound) -> dict[str, Any]:
    """``bound`` as strict-JSON data: a threshold of +-inf (nothing or everything flagged) as null."""
    return {k: None if isinstance(v, float) and not math.isfinite(v) else v for k, v in vars(bound).items()}


def _scores(mechanism: mechanisms.Mechanism, outputs: torch.Tensor, pair: NeighbouringPair,
            density: Any) -> np.ndarray:
    """Each output's score (module docstring), float64; +-inf of a log density clipped to +-1e300."""
    y = outputs.numpy()
    x0, x1 = pair.x0.numpy().astype(np.float64), pair.x1.numpy().astype(np.float64)
    if density is not None:
        with np.errstate(invalid="ignore"):
            llr = np.asarray(density(y, x1), dtype=np.float64) - np.asarray(density(y, x0), dtype=np.float64)
        return np.nan_to_num(llr, nan=0.0, posinf=1e300, neginf=-1e300)
    if y.shape[1] != x0.size:
        raise ValueError(f"mechanism {mechanism.name!r} returns outputs of dimension {y.shape[1]} for inputs of "
                         f"dimension {x0.size} and declares no output density (output_log_density): no score")
    return y @ (x1 - x0)


def idealized_canary_audit(
    mechanism: str | mechanisms.Mechanism,
    *,
    canaries: int,
    bound: str = "fdp",
    guesses: str | int = "claim",
    confidence: float = 0.95,
    delta: float | None = None,
    pair: str | None = None,
    seed: int = 0,
) -> IdealizedCanaryAudit:
    """The idealized one-run canary audit of ``mechanism`` (module docstring): ``canaries`` independent calls on the
    pair labelled ``pair`` (default the setting's first), judged by ``bound`` ("fdp" or "steinke") with ``guesses``
    ("claim", "grid" or a fixed k) at ``confidence``; ``delta`` of the bounds defaults to the claim's (0 without a
    claim). A registered name is created with ``private_seed = derive_seed("canary-private", seed)``."""
    if isinstance(mechanism, str):
        mechanism = mechanisms.create(mechanism, private_seed=derive_seed("canary-private", seed))
    canaries = Integer(low=2).check(canaries, "canaries")
    Choice(BOUNDS).check(bound, "bound")
    if isinstance(guesses, str) and guesses not in GUESS_RULES:
        raise ValueError(f"guesses must be one of {', '.join(GUESS_RULES)} or an integer in 1..{canaries}, "
                         f"got {guesses!r}")
    Number(0, 1, low_open=True, high_open=True).check(confidence, "confidence")
    claim = mechanism.guarantee()
    curve, delta, claimed_epsilon = claim_at_delta(mechanism, delta)
    pairs = canary_pairs(mechanism, seed=seed)
    labels = [p.label for p in pairs]
    chosen = pairs[0] if pair is None else next((p for p in pairs if p.label == pair), None)
    if chosen is None:
        raise ValueError(f"pair must be one of {', '.join(labels)} (the pairs of {mechanism.name}'s audit setting), "
                         f"got {pair!r}")

    started = time.perf_counter()
    inserted = (torch.rand(canaries, generator=generator(derive_seed(seed, "canary"), "inclusion")) < 0.5).numpy()
    sampler = bulk_sampler(mechanism, seed=derive_seed(seed, "canary", "outputs"))
    density = mechanisms.capability(mechanism, "output_log_density")
    scores = np.empty(canaries, dtype=np.float64)
    for bit, x in ((True, chosen.x1), (False, chosen.x0)):
        where = np.flatnonzero(inserted == bit)
        if len(where):
            scores[where] = _scores(mechanism, sampler(x, len(where), int(bit)), chosen, density)
    result = one_run_bound(scores, inserted, curve=curve, claimed_epsilon=claimed_epsilon, bound=bound,
                           guesses=guesses, confidence=confidence, delta=delta)
    refuted_curve = result.refuted_curve
    if density is not None:
        threshold = 0.0
    else:
        x0, x1 = chosen.x0.double(), chosen.x1.double()
        threshold = float(((x0 + x1) / 2) @ (x1 - x0))
    independent = independent_calls_bound(scores, inserted, threshold=threshold, curve=curve, confidence=confidence,
                                          delta=delta)
    searched = searched_threshold_bound(scores, inserted, confidence=confidence, delta=delta, seed=seed)
    summary = roc_summary(scores, inserted)  # >= 2 canaries in and out: the searched bound refused fewer
    seconds = time.perf_counter() - started
    return IdealizedCanaryAudit(mechanism.name, chosen.label, "llr" if density is not None else "projection",
                                sampler.description, curve, claimed_epsilon, float(claim.delta), result, refuted_curve,
                                independent, searched, summary, seconds, seed, scores, inserted)
