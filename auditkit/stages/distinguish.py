"""The ``distinguish`` stage: black-box distinguishing tests on a mechanism's neighbouring pairs (a worst-pair
search by default) and its adaptive tests, every bound at the Bonferroni confidence of the audit's family
(``auditkit.attacks.audit_mechanism``). ``auditkit distinguish`` runs it alone."""
from __future__ import annotations

from typing import Any

from auditkit import attacks
from auditkit import mechanisms
from auditkit import results
from auditkit.config import AuditConfig
from auditkit.attacks.adaptive_tests import adaptive_tests_for
from auditkit.attacks.audit_settings import audit_setting, setting_pairs

__all__ = ["attacks_confidence", "distinguish_family", "distinguish_stage", "run_distinguish"]


def attacks_confidence(confidence: float, family: int) -> float:
    """The per-test confidence of a ``family``-test Bonferroni family at family-wise ``confidence``."""
    return attacks.bonferroni_confidence(confidence, max(family, 1))


def _distinguish_tests(mechanism: mechanisms.Mechanism, adaptive: bool, seed: int) -> tuple[list[Any], list[Any]]:
    """The neighbouring pairs and the adaptive tests the distinguish stage runs on ``mechanism``."""
    pairs = setting_pairs(audit_setting(mechanism), seed=seed)
    return pairs, (adaptive_tests_for(mechanism.name) if adaptive else [])


def distinguish_family(mechanism: mechanisms.Mechanism, adaptive: bool, search: bool = True) -> int:
    """How many tests ``run_distinguish`` judges on ``mechanism``: its pairs (one held-out test with the
    worst-pair search) plus its adaptive tests."""
    pairs, extra = _distinguish_tests(mechanism, adaptive, seed=0)
    return (1 if search else len(pairs)) + len(extra)


def run_distinguish(
    mechanism: mechanisms.Mechanism, *, trials: int, confidence: float, family: int, adaptive: bool, seed: int,
    delta: float | None = None, search: bool = True,
) -> tuple[Any, list[Any]]:
    """Black-box audit of ``mechanism`` on its neighbouring pairs (a worst-pair search with ``search``) plus its
    adaptive tests, each bound at the Bonferroni confidence of a ``family``-test family
    (``auditkit.attacks.audit_mechanism``); ``delta`` of the bounds defaults to the claim's."""
    pairs, extra = _distinguish_tests(mechanism, adaptive, seed)
    audit = attacks.audit_mechanism(mechanism, trials=trials, confidence=confidence, delta=delta, pairs=pairs,
                                    tests=family, search=search, seed=seed)
    per_test = attacks.bonferroni_confidence(confidence, family)
    return audit, [test(mechanism, trials=trials, confidence=per_test, seed=seed) for test in extra]


def distinguish_stage(mechanism: mechanisms.Mechanism, config: AuditConfig, family: int) -> dict[str, Any]:
    """The audit's distinguish stage for one setting: ``run_distinguish`` with ``[distinguish]``'s trials and
    confidence, every bound at its Bonferroni share of the ``family``-test audit; the results' section."""
    d = config.distinguish
    audit, adaptive = run_distinguish(mechanism, trials=d.trials, confidence=d.confidence, family=family,
                                      adaptive=d.adaptive, search=d.search, seed=config.seed)
    return results.distinguish_entry(audit, adaptive, trials=d.trials, confidence=d.confidence, tests=family)
