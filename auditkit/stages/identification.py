"""What a claim allows a reconstruction attack, and whether the measured attack stays within it.

A DP claim bounds the success of *every* reconstruction attack (reconstruction robustness: Balle, Cherubin &
Hayes 2022; Kaissis, Hayes, Ziller & Rueckert 2023): with a uniform prior over M candidates, an f-DP mechanism
lets no attack identify the target with probability above 1 - f(1/M). :func:`claim_bound` takes the tightest
form the mechanism's one-round claim supports (``auditkit.accounting.rero``: the Gaussian M-point bound, mu-GDP,
the Laplace trade-off, or the generic (eps, delta) form); :func:`identification_tests` runs the informed
adversary's identification attack (``auditkit.attacks.identify``) and judges each success rate against that bound:

* "violated": the success rate's one-sided Clopper-Pearson lower limit, at the audit's Bonferroni per-test
  confidence, is above the bound (the attack did better than the claim allows);
* "vacuous claim": the bound is 1 (or there is no claim): nothing could exceed it;
* "inconclusive": even a perfect record over these trials could not rise above the bound;
* "consistent": otherwise.

The probe observes one round, so the bound is the one-round claim's (the adversary of a later round also holds
the earlier rounds' messages; the composed bound is looser, so the one-round test is the sharper check of the
per-round claim).
"""
from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from auditkit import attacks
from auditkit import mechanisms
from auditkit.attacks.verdicts import CONSISTENT, INCONCLUSIVE, VACUOUS, VIOLATED
from auditkit.attacks.identification import SCORING_BYTES, CandidateUpdates, candidate_updates
from auditkit.accounting.rero import claim_rero_bound, rero_bound
from auditkit.mechanisms import capability

__all__ = ["above_bound", "claim_bound", "identification_tests", "matched_entry"]

OBSERVED_ROUNDS_NOTE = ("one round observed (the probe round): the bound is the one-round claim's; an adversary "
                        "of several rounds is bounded by the composed claim, which is looser")


WHOLE_UPDATE = "client update"  # ``PrivacyGuarantee.unit`` of a claim about one client's whole update


def above_bound(test: dict[str, Any]) -> bool:
    """Whether an identification test's observed success rate lies above the claim's bound (what a summary's
    sign shows; the verdict also weighs the trials: a rate above its bound can still be consistent)."""
    return test["rate"] > test["bound"]


def claim_bound(mechanism: mechanisms.Mechanism, candidates: int, dimension: int) -> tuple[float, str]:
    """The tightest ReRo bound the mechanism's one-round claim implies for a uniform prior over ``candidates``
    updates of ``dimension`` coordinates, and the form used; (1.0, "no claim") without a claim.

    Candidate updates differ in every coordinate. A claim about a part of the update (``unit``: a scaled
    coordinate, a block) covers the whole update only composed over its k = ceil(dimension / block) parts
    (block: the claim's ``audit_setting().block``, else 1: the most parts, the loosest bound), by basic
    composition (k eps, k delta), and the generic (eps, delta) form is used."""
    guarantee = mechanism.guarantee()
    if guarantee.epsilon is None or guarantee.flags & {"no-privacy", "vacuous"}:
        return 1.0, "no claim"
    if guarantee.unit != WHOLE_UPDATE:
        setting = capability(mechanism, "audit_setting")
        parts = -(-dimension // (setting.block if setting is not None else 1))
        eps, delta = parts * guarantee.epsilon, min(1.0, parts * guarantee.delta)
        bound = rero_bound(eps=eps, delta=delta, kappa=1 / candidates)
        return bound, f"(eps, delta) per {guarantee.unit}, composed over the update's {parts} parts: eps {eps:.4g}"
    try:
        event = capability(mechanism, "dp_event")
    except Exception:  # a refused or failing event: the (eps, delta) form needs none
        event = None
    return claim_rero_bound(event, candidates=candidates, eps=guarantee.epsilon, delta=guarantee.delta)


def _verdict(result: attacks.IdentificationResult, bound: float, confidence: float) -> str:
    if bound >= 1.0:
        return VACUOUS
    if result.exceeds(bound, confidence):
        return VIOLATED
    if not result.can_exceed(bound, confidence):
        return INCONCLUSIVE
    return CONSISTENT


def identification_tests(mechanism: mechanisms.Mechanism, pool: torch.Tensor | CandidateUpdates, *,
                         candidates: Sequence[int], trials: int, per_test_confidence: float, confidence: float,
                         seed: int, memory_bytes: int = SCORING_BYTES) -> dict[str, Any]:
    """The ``identification`` section of a setting: one test per M in ``candidates`` on the candidate updates
    ``pool`` (P x d, held or computed block by block), each judged at ``per_test_confidence`` against the claim's
    bound; intervals are two-sided at ``confidence``; ``memory_bytes``: what the trials' outputs may hold."""
    found = attacks.identify(mechanism, pool, candidates=list(candidates), trials=trials, confidence=confidence,
                             seed=seed, memory_bytes=memory_bytes)
    tests = []
    for result in found:
        bound, form = claim_bound(mechanism, result.candidates, candidate_updates(pool).dimension)
        tests.append({
            "candidates": result.candidates, "trials": result.trials, "successes": result.successes,
            "rate": result.rate, "interval": list(result.interval), "kappa": result.kappa,
            "lower": result.lower(per_test_confidence), "bound": bound, "bound_form": form,
            "p_value": result.p_value(bound), "verdict": _verdict(result, bound, per_test_confidence),
        })
    return {"statistic": found[0].statistic, "pool": len(pool), "confidence": confidence,
            "per_test_confidence": per_test_confidence, "observed_rounds": 1, "note": OBSERVED_ROUNDS_NOTE,
            "tests": tests}


def matched_entry(mechanism: mechanisms.Mechanism, wins: dict[int, int], targets: int, confidence: float,
                  dimension: int) -> list[dict[str, Any]]:
    """Per M: how many of the probe's ``targets`` reconstructions matched their own example among M candidates, with
    the interval and the claim's bound (reported beside the identification test, not judged: N is small)."""
    rows = []
    for m, k in sorted(wins.items()):
        bound, form = claim_bound(mechanism, m, dimension)
        low, high = attacks.identification.clopper_pearson(k, targets, confidence)
        rows.append({"candidates": m, "successes": k, "targets": targets, "rate": k / targets,
                     "interval": [low, high], "bound": bound, "bound_form": form,
                     "kappa": 1 / m, "exceeds_bound": bool(low > bound and not math.isclose(low, bound))})
    return rows
