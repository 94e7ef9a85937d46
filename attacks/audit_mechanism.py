"""Audit one mechanism: distinguish over its neighbouring pairs, keep the worst, judge it against the claim.

``audit_mechanism(m, trials=N)`` runs ``auditkit.attacks.distinguish`` on every pair of ``setting_pairs(audit_setting(m))``
(or the given pairs), each at the Bonferroni confidence 1 - (1 - confidence)/tests, so that the largest bound
over the pairs -- the worst pair, which is what the claim must survive -- holds at ``confidence`` jointly
(``auditkit.attacks.verdicts``). ``tests`` may be raised above the number of pairs when the audit is part of a larger
report whose tests share one family-wise level.

``search=True`` spends the same budget (N outputs per pair) on a worst-pair search instead
(``auditkit.attacks.pair_search``): every pair chooses its test on a share of its outputs, the most promising one is
tested once on the rest of the budget, and that single held-out test counts as one test of the family. The
bound is then typically much higher (e.g. the half-noise example plugin, true eps 4.38, at 10^5 outputs per
pair: see ``benchmarks/bench_tightness.py``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from auditkit import mechanisms
from auditkit.attacks.audit_settings import audit_setting, setting_pairs
from auditkit.attacks.bulk_sampling import BatchedMechanism, resolve_mechanism
from auditkit.attacks.distinguish import SELECTION, EpsilonEstimate, distinguish
from auditkit.attacks.distinguishing_statistics import STATISTICS
from auditkit.attacks.neighbouring_pairs import NeighbouringPair
from auditkit.attacks.pair_search import PairSearch, Relation, search_worst_pair
from auditkit.attacks.verdicts import bonferroni_confidence, verdict
from auditkit.mechanisms import LogDensity, Mechanism, PrivacyGuarantee

__all__ = ["MechanismAudit", "audit_mechanism"]


@dataclass(frozen=True)
class MechanismAudit:
    """The pairs tried on one mechanism, the worst of them, and the verdict against the claim.

    confidence is family-wise over ``tests`` tests; each estimate carries its own per-test confidence. With the
    worst-pair search, ``estimates`` holds the one certified estimate and ``search`` every candidate.
    """

    mechanism: str
    params: dict[str, Any]
    claim: PrivacyGuarantee | None
    claimed_epsilon: float | None
    estimates: tuple[EpsilonEstimate, ...]
    worst: EpsilonEstimate
    verdict: str
    confidence: float
    per_test_confidence: float
    tests: int
    audit_setting: str
    search: PairSearch | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "claim": None if self.claim is None else self.claim.to_dict(),
            "claimed_epsilon": self.claimed_epsilon,
            "epsilon_lower_bound": self.worst.epsilon_lower_bound,
            "max_certifiable": self.worst.max_certifiable,
            "worst_pair": self.worst.pair.label,
            "verdict": self.verdict,
            "confidence": self.confidence,
            "per_test_confidence": self.per_test_confidence,
            "tests": self.tests,
            "audit_setting": self.audit_setting,
            "estimates": [e.to_dict() for e in self.estimates],
            "search": None if self.search is None else self.search.to_dict(),
        }


def audit_mechanism(
    mechanism: str | Mechanism | BatchedMechanism,
    *,
    trials: int,
    confidence: float = 0.95,
    delta: float | None = None,
    claimed_eps: float | None = None,
    pairs: Sequence[NeighbouringPair] | None = None,
    tests: int | None = None,
    statistics: Sequence[str] = STATISTICS,
    log_density: LogDensity | None = None,
    random_directions: int = 2,
    search: bool = False,
    proposals: int = 0,
    selection: float = SELECTION,
    seed: int = 0,
) -> MechanismAudit:
    """Distinguish ``mechanism`` on every pair with ``trials`` outputs each (module docstring).

    mechanism: a registered name (its defaults), a ``Mechanism`` (pairs from ``audit_setting``; the claim from
               ``guarantee()`` unless ``claimed_eps`` is given) or a batched callable (``pairs`` required).
    delta:     the delta of the bounds; default the claim's delta (0 without a claim).
    tests:     the size of the test family for the Bonferroni correction (default: the number of pairs, or 1
               with ``search``).
    search:    the worst-pair search (module docstring); selection: the share of outputs that chooses each test.
    proposals: pairs the search proposes near the best within the setting's relation (default 0; not for a
               ``same_norm`` setting, whose pairs are not a ball's).
    """
    resolved = resolve_mechanism(mechanism, seed=seed)
    if isinstance(resolved, Mechanism):
        claim: PrivacyGuarantee | None = resolved.guarantee()
        setting = audit_setting(resolved)
        name, params, note = resolved.name, dict(resolved.params), setting.note
        relation = None if setting.same_norm else Relation(setting.norm, setting.radius, setting.block)
        if pairs is None:
            pairs = setting_pairs(setting, random_directions=random_directions, seed=seed)
    else:
        if pairs is None:
            raise ValueError("pairs: auditing a callable needs its neighbouring pairs (attacks.neighbouring_pairs)")
        claim, name, params, note = None, getattr(resolved, "__name__", "callable"), {}, "pairs given"
        relation = None
    pairs = list(pairs)
    if not pairs:
        raise ValueError("pairs must hold at least one NeighbouringPair")
    judged_tests = 1 if search else len(pairs)
    tests = judged_tests if tests is None else tests
    if isinstance(tests, bool) or not isinstance(tests, int) or tests < judged_tests:
        what = "1 (one held-out test with search)" if search else f"the number of pairs ({len(pairs)})"
        raise ValueError(f"tests must be an integer >= {what}, got {tests!r}")
    claimed = claimed_eps if claimed_eps is not None else (None if claim is None else claim.epsilon)
    if delta is None:
        delta = claim.delta if claim is not None and claim.epsilon is not None else 0.0
    per_test = bonferroni_confidence(confidence, tests)

    if search:
        found = search_worst_pair(resolved, pairs, trials=trials, confidence=per_test, delta=delta,
                                  claimed_eps=claimed, statistics=statistics, log_density=log_density,
                                  selection=selection, relation=relation, proposals=proposals, seed=seed)
        judged = verdict(found.estimate, claim if claimed_eps is None and claim is not None else claimed)
        return MechanismAudit(name, params, claim, claimed, (found.estimate,), found.estimate, judged, confidence,
                              per_test, tests, note, found)
    estimates = tuple(
        distinguish(
            resolved,
            pair.x0,
            pair.x1,
            trials=trials,
            confidence=per_test,
            delta=delta,
            claimed_eps=claimed,
            statistics=statistics,
            log_density=log_density,
            selection=selection,
            label=pair.label,
            seed=mechanisms.derive_seed(seed, "pair", i),
        )
        for i, pair in enumerate(pairs)
    )
    worst = max(estimates, key=lambda e: e.epsilon_lower_bound)
    judged = verdict(worst, claim if claimed_eps is None and claim is not None else claimed)
    return MechanismAudit(name, params, claim, claimed, estimates, worst, judged, confidence, per_test, tests, note)
