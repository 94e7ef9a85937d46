"""Verdicts of an empirical lower bound against an analytic claim, and family-wise error control.

``verdict(estimate, claim)``, in this order:

* "no claim": the mechanism makes no privacy claim (no epsilon);
* "vacuous claim": the claim says nothing (flags "no-privacy" or "vacuous");
* "violated": the certified lower bound exceeds the claimed epsilon (at the estimate's confidence);
* "inconclusive": the sample size cannot certify the claimed epsilon at all (``max_certifiable`` <= it);
* "consistent": otherwise -- the test could have refuted the claim and did not.

"claim holds only cell-locally" (``CELL_LOCAL_ONLY``) is the verdict of DP-SQ's adaptive test
(``auditkit.attacks.adaptive_tests.dpsq_cross_cell``): the claim's own in-cell pair is not violated, pairs across cells are.

A bound computed at delta refutes an (eps, delta_claim) claim only if delta_claim <= delta (an (eps,
delta_claim)-DP mechanism is (eps, delta)-DP for every delta >= delta_claim); ``verdict`` refuses the
comparison otherwise.

Family-wise error. An audit runs many tests; a correct mechanism must almost never be called violated by
any of them. Bonferroni: running each of m tests at confidence 1 - (1 - c)/m (``bonferroni_confidence``)
makes "some test says violated" a false alarm with probability <= 1 - c. Holm's step-down procedure on the
tests' p-values (``holm``) rejects the same "some test" event and more individual tests; for the single
question "is the claim violated?" the two coincide (Holm's first step is Bonferroni's test).

Strength of a refutation (``evidence``). A test's p-value is that of "the mechanism is (claimed eps, delta)-DP"
(``auditkit.attacks.epsilon_bounds.distinguishing_p_value``); in a family of m tests its Bonferroni-adjusted p-value is
min(1, m p), and a refuting verdict at family-wise confidence c means m p < 1 - c. It is "decisive" when the
adjusted p-value is below ``DECISIVE_P`` = 1e-4 (the claim would be refuted at 99.99% family-wise, e.g.
JoPEQ's side channel, a perfect test), "marginal" otherwise (refuted at c, not far beyond).
"""

from __future__ import annotations

import enum
from collections.abc import Sequence
from typing import Protocol

from auditkit.mechanisms import PrivacyGuarantee

__all__ = [
    "CELL_LOCAL_ONLY",
    "CONSISTENT",
    "INCONCLUSIVE",
    "NO_CLAIM",
    "VACUOUS",
    "VERDICTS",
    "VIOLATED",
    "CertifiedBound",
    "DECISIVE_P",
    "Evidence",
    "Verdict",
    "adjusted_p_value",
    "bonferroni_confidence",
    "evidence",
    "holm",
    "verdict",
]



class Verdict(enum.StrEnum):
    """The outcome of one test of a claim, and a setting's headline (the worst over its tests)."""

    CONSISTENT = "consistent"
    VIOLATED = "violated"
    VACUOUS = "vacuous claim"
    NO_CLAIM = "no claim"
    INCONCLUSIVE = "inconclusive"
    CELL_LOCAL_ONLY = "claim holds only cell-locally"


class Evidence(enum.StrEnum):
    """How strongly a refutation stands (``evidence``)."""

    DECISIVE = "decisive"
    MARGINAL = "marginal"
    ANALYTIC = "analytic"


CONSISTENT, VIOLATED, VACUOUS = Verdict.CONSISTENT, Verdict.VIOLATED, Verdict.VACUOUS
NO_CLAIM, INCONCLUSIVE, CELL_LOCAL_ONLY = Verdict.NO_CLAIM, Verdict.INCONCLUSIVE, Verdict.CELL_LOCAL_ONLY
VERDICTS = tuple(Verdict)

_VACUOUS_FLAGS = frozenset({"no-privacy", "vacuous"})
REFUTING = (VIOLATED, CELL_LOCAL_ONLY)  # the verdicts that say a claim is false
DECISIVE_P = 1e-4  # an adjusted p-value below this makes a refutation "decisive"


class CertifiedBound(Protocol):
    """What ``verdict`` reads: an ``auditkit.attacks.distinguish.EpsilonEstimate``, or any other certified bound with
    the same fields (e.g. a one-run canary audit's)."""

    @property
    def epsilon_lower_bound(self) -> float: ...
    @property
    def max_certifiable(self) -> float: ...
    @property
    def delta(self) -> float: ...
    @property
    def claimed_epsilon(self) -> float | None: ...


def verdict(estimate: CertifiedBound, claim: PrivacyGuarantee | float | None = None) -> str:
    """The verdict of the module docstring for ``estimate`` against ``claim``: a ``PrivacyGuarantee``, a
    claimed epsilon at the estimate's delta, or None for the estimate's own ``claimed_epsilon``."""
    if isinstance(claim, PrivacyGuarantee):
        if claim.epsilon is None:
            return NO_CLAIM
        if claim.flags & _VACUOUS_FLAGS:
            return VACUOUS
        if claim.delta > estimate.delta:
            raise ValueError(
                f"estimate.delta = {estimate.delta:g} is below the claim's delta {claim.delta:g}: "
                "the bound must be computed at delta >= the claim's"
            )
        claimed = claim.epsilon
    else:
        claimed = estimate.claimed_epsilon if claim is None else float(claim)
        if claimed is None:
            return NO_CLAIM
    if estimate.epsilon_lower_bound > claimed:
        return VIOLATED
    if estimate.max_certifiable <= claimed:
        return INCONCLUSIVE
    return CONSISTENT


def bonferroni_confidence(confidence: float, tests: int) -> float:
    """The per-test confidence 1 - (1 - confidence) / tests that keeps the family-wise level ``confidence``."""
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")
    if isinstance(tests, bool) or not isinstance(tests, int) or tests < 1:
        raise ValueError(f"tests must be an integer >= 1, got {tests!r}")
    return 1 - (1 - confidence) / tests


def adjusted_p_value(p_value: float, tests: int) -> float:
    """Bonferroni's adjusted p-value min(1, tests * p) of one test in a family of ``tests``."""
    if not 0 <= p_value <= 1:
        raise ValueError(f"p_value must be in [0, 1], got {p_value!r}")
    if isinstance(tests, bool) or not isinstance(tests, int) or tests < 1:
        raise ValueError(f"tests must be an integer >= 1, got {tests!r}")
    return min(1.0, tests * p_value)


def evidence(verdict_: str, p_value: float | None, tests: int) -> Evidence | None:
    """How strong a refutation is (module docstring): "decisive" when the adjusted p-value is below
    ``DECISIVE_P``, "marginal" otherwise; None for a verdict that refutes nothing or a test without a p-value."""
    if verdict_ not in REFUTING or p_value is None:
        return None
    return Evidence.DECISIVE if adjusted_p_value(p_value, tests) < DECISIVE_P else Evidence.MARGINAL


def holm(p_values: Sequence[float], alpha: float) -> list[bool]:
    """Holm's step-down procedure (Holm 1979): which null hypotheses ("the claim holds for this test") are
    rejected at family-wise level ``alpha``. Sort the m p-values; reject the k-th smallest while
    p_(k) <= alpha / (m - k + 1), stop at the first that is not."""
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must be in (0, 1), got {alpha!r}")
    if any(not 0 <= p <= 1 for p in p_values):
        raise ValueError("p_values must all be in [0, 1]")
    m = len(p_values)
    rejected = [False] * m
    for k, i in enumerate(sorted(range(m), key=lambda i: p_values[i])):
        if p_values[i] > alpha / (m - k):
            break
        rejected[i] = True
    return rejected
