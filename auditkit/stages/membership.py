"""The ``membership`` stage: membership inference against the final global model of an FL run, judged against the
whole run's claim (issue 42).

The runs (``auditkit.stages.membership_runs``): a target run and R reference runs of the same config on re-drawn
memberships, trained together. Each attack of ``MEMBERSHIP_ATTACKS`` scores every candidate of a run from the run's
final model and the other runs' (``auditkit.attacks.membership``: loss, LiRA offline / online, RMIA online on the
held-out population). A client's score is the mean of its records' scores.

Two readings of the scores:

* the ROC, pooled over every run taken as the target in turn with the others as its references (Carlini et al.
  2022, Sec. V.A): AUC, TPR at FPR 0.1 % and 1 % with Clopper-Pearson intervals, log-log points. It describes the
  attack; its trials share runs, so it certifies nothing;
* the certified bound, on the target run alone: its candidates' memberships are independent fair coins and its
  references were trained without looking at them, so the one-run theorem (Steinke, Nasr & Jagielski 2023; f-DP:
  Mahloujifar et al. 2025; ``auditkit.attacks.one_run``) gives an epsilon lower bound at the attack's share of the
  audit's Bonferroni family, judged against the claim.

The view attacked is the final global model (``public``) or, for a local mechanism whose claim covers it, each
client's last message as the server decodes it (``server``). The claim judged is the whole run's
(``composed_claim_curve``) under the neighbouring relation the game changes: a client in or out is
ADD_OR_REMOVE_ONE; a record in or out of one client's data replaces that client's data, which a REPLACE_ONE claim
covers directly and an ADD_OR_REMOVE_ONE claim covers as a group of two (mu-GDP: 2 mu, Dong, Roth & Su 2022,
Thm. 2.14; otherwise the claim applied twice, P[M(D) in S] <= e^eps (e^eps P[M(D'') in S] + delta) + delta:
(2 eps, (1 + e^eps) delta)). A client in or out under a REPLACE_ONE claim is not covered: the attacks still run,
unjudged.
"""
from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from auditkit import mechanisms, results
from auditkit.attacks import membership as scores_of
from auditkit.attacks.membership_game import MEMBERSHIP_ATTACKS, MembershipAttack, MembershipLevel
from auditkit.attacks.one_run import one_run_bound
from auditkit.config import AuditConfig
from auditkit.fl.simulation import RoundRecord
from auditkit.mechanisms.guarantee import NeighboringRelation
from auditkit.mechanisms.views import View
from auditkit.mechanisms.tradeoff import EpsDeltaTradeOff, GaussianTradeOff
from auditkit.stages.canary import composed_claim_curve
from auditkit.stages.membership_runs import MembershipRuns, membership_runs

__all__ = ["TARGET_FPRS", "attack_scores", "membership_claim", "membership_family", "membership_stage"]

TARGET_FPRS = (0.001, 0.01)  # Carlini et al. 2022: judge an attack by its TPR at low FPR
ONE_RUN_BOUND, ONE_RUN_GUESSES = "fdp", "grid"
LIRA_PER_RECORD_VARIANCE = 64  # fewer references: one pooled variance (Carlini et al. 2022, Sec. VI.A, Fig. 9)


def membership_family(mechanism: mechanisms.Mechanism, config: AuditConfig) -> int:
    """How many tests the stage judges: one per attack, where enabled."""
    return len(MEMBERSHIP_ATTACKS) if config.membership.enabled else 0


def attack_scores(runs: MembershipRuns, target: int, attack: MembershipAttack) -> np.ndarray:
    """``attack``'s score of every candidate of run ``target``, the other runs its references (a client: the mean
    over its records)."""
    others = np.array([r for r in range(len(runs.members)) if r != target])
    logits, labels, inside = runs.logits[target], runs.labels, runs.record_members[others]
    if attack == MembershipAttack.LOSS:
        records = scores_of.loss_scores(logits, labels)
    elif attack in (MembershipAttack.LIRA_ONLINE, MembershipAttack.LIRA_OFFLINE):
        records = _lira(logits, labels, runs.logits[others], inside, online=attack == MembershipAttack.LIRA_ONLINE)
    else:
        records = _rmia(runs, target, others)
    if len(runs.owner) == runs.members.shape[1] and np.array_equal(runs.owner, np.arange(len(runs.owner))):
        return records
    return np.bincount(runs.owner, weights=records) / np.bincount(runs.owner)


def _rmia(runs: MembershipRuns, target: int, others: np.ndarray) -> np.ndarray:
    """RMIA's scores, each record against the population read in the same model as it (``MembershipRuns.group``)."""
    scores = np.empty(len(runs.labels))
    for g in np.unique(runs.group):
        at = runs.group == g
        scores[at] = scores_of.rmia_scores(runs.logits[target][at], runs.labels[at], runs.logits[others][:, at],
                                           runs.record_members[others][:, at], runs.population_logits[target, g],
                                           runs.population_labels, runs.population_logits[others, g],
                                           offline_a=None, tie_break=True)
    return scores


def _lira(logits: np.ndarray, labels: np.ndarray, references: np.ndarray, inside: np.ndarray, *,
          online: bool) -> np.ndarray:
    """LiRA's scores; a record with too few OUT references (online: or IN ones) to fit (one with a pooled variance,
    two with its own) gets the score of no evidence, the likelihood ratio 1 (online) or the p-value 1/2 (offline):
    with R references a record misses a side with probability about 2^(1-R)."""
    fixed = len(references) < LIRA_PER_RECORD_VARIANCE
    need = 1 if fixed else 2
    fitted = ((~inside).sum(axis=0) >= need) & ((inside.sum(axis=0) >= need) if online else True)
    scores = np.full(len(labels), 0.0 if online else math.log(2.0))
    if fitted.any():
        scores[fitted] = scores_of.lira_scores(logits[fitted], labels[fitted], references[:, fitted],
                                               inside[:, fitted], online=online, fixed_variance=fixed)
    return scores


def membership_claim(mechanism: mechanisms.Mechanism, config: AuditConfig) -> tuple[Any, dict[str, Any]]:
    """The whole run's claim for the game's neighbouring relation (module docstring): (curve or None, the claim
    dict of the results' membership section)."""
    curve, claim = composed_claim_curve(mechanism, config)
    relation = mechanism.guarantee().relation
    level = MembershipLevel(config.membership.level)
    if curve is None:
        return None, claim
    if not math.isfinite(curve.epsilon(claim["delta"])):
        return None, _unjudged(claim, f"the claim ({curve.label}) bounds no finite ε at δ = {claim['delta']:.3g}")
    if config.membership.view == View.SERVER and not (mechanism.view == View.SERVER and mechanism.protocol is None):
        return None, _unjudged(claim, f"{mechanism.name}'s claim does not cover the server's view of each client's "
                                      f"update (its view is {mechanism.view!r}); use membership.view = 'public'")
    if level == MembershipLevel.CLIENT and relation is not NeighboringRelation.ADD_OR_REMOVE_ONE:
        return None, _unjudged(claim, f"a client in or out of the federation is not a neighbouring pair of "
                                      f"{mechanism.name}'s claim ({relation.name}); use membership.level = 'record'")
    if level == MembershipLevel.RECORD and relation is NeighboringRelation.ADD_OR_REMOVE_ONE:
        delta = claim["delta"]
        if isinstance(curve, GaussianTradeOff):
            curve = GaussianTradeOff(2 * curve.mu)
        else:
            eps = curve.epsilon(delta)
            delta = (1 + math.exp(eps)) * delta
            curve = EpsDeltaTradeOff(2 * eps, delta)
        stated = curve.epsilon(delta)
        note = (f"{claim['note']}; a record in or out replaces one client's data: a group of two under "
                f"{relation.name} ({curve.label}: ε = {stated:.4g} at δ = {delta:.3g})")
        claim = {**claim, "epsilon": stated, "delta": delta, "curve": curve.label, "note": note}
    return curve, claim


def _unjudged(claim: dict[str, Any], why: str) -> dict[str, Any]:
    return {**claim, "epsilon": None, "curve": None, "note": f"not judged: {why}"}


def membership_stage(config: AuditConfig, mechanism: mechanisms.Mechanism, *, per_test_confidence: float,
                     on_round: Callable[[int, RoundRecord], None] | None = None) -> dict[str, Any]:
    """The stage for one setting: the runs, each attack's pooled ROC and the target run's one-run bound against the
    claim; the results' ``membership`` section (``auditkit.results.membership_entry``)."""
    start = time.perf_counter()
    m = config.membership
    curve, claim = membership_claim(mechanism, config)
    runs = membership_runs(config, on_round=on_round)
    judged = []
    for attack in MEMBERSHIP_ATTACKS:
        per_run = [attack_scores(runs, target, attack) for target in range(len(runs.members))]
        pooled, members = np.concatenate(per_run), runs.members.reshape(-1)
        bound = one_run_bound(per_run[0], runs.members[0], curve=curve, claimed_epsilon=claim["epsilon"],
                              bound=ONE_RUN_BOUND, guesses=ONE_RUN_GUESSES, confidence=per_test_confidence,
                              delta=claim["delta"])
        at = [scores_of.tpr_at_fpr(pooled, members, fpr, confidence=config.distinguish.confidence)
              for fpr in TARGET_FPRS]
        judged.append(results.membership_attack(attack, bound, pooled, members, at, curve,
                                                auc=scores_of.auc(pooled, members)))
    details = {"test_accuracy": runs.test_accuracy.tolist(), "training_seconds": runs.seconds,
               "trials": int(runs.members.size)}
    return results.membership_entry(level=m.level, view=m.view, references=m.references,
                                    tested=int(runs.members.shape[1]),
                                    population=m.population, confidence=config.distinguish.confidence, claim=claim,
                                    attacks=judged, seconds=time.perf_counter() - start, details=details)
