"""Adaptive tests: the claims' blind spots, each a named distinguishing test registered for the mechanisms it targets.

A black-box audit (``auditkit.attacks.audit_mechanism``) tests a claim where the claim itself says it holds. An adaptive
test looks where the claim does not look: a side value sent in clear, a protocol's later messages, a domain the
claim assumes but nothing enforces. Each test builds neighbouring pairs, observes what a threat-model view sees
(the mechanism's output, or a batched view of it), certifies an epsilon lower bound per view with
``auditkit.attacks.distinguish`` (held-out Clopper-Pearson), shares its ``confidence`` over its views by Bonferroni, and
judges the worst bound against the mechanism's ``guarantee()`` (``auditkit.attacks.verdicts.verdict``).

Tests register for the mechanisms they target, by name, with ``@adaptive_test("name", ...)``: the built-in ones
live in ``auditkit.attacks.targeted`` (one module per mechanism family), and a plugin registers its own the same way::

    from auditkit import attacks

    @attacks.adaptive_test("my-mech")
    def my_side_channel(m, *, trials, confidence, seed):
        return attacks.run_views("my-side-channel", m, "what the claim says", [(label, view, x0, x1, True)],
                                 trials=trials, confidence=confidence, seed=seed, findings={}, note="...")

The decorator gives every test one calling convention, ``test(mechanism, *, trials=DEFAULT_TRIALS,
confidence=0.95, seed=0)``: it checks the arguments, accepts a mechanism's name or instance, refuses one the test
does not target, and calls the function with the configured mechanism.

``adaptive_tests_for(name)`` lists the tests the audit runs for a mechanism, in registration order.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from auditkit import mechanisms
from auditkit.attacks.bulk_sampling import BatchedMechanism, resolve_mechanism
from auditkit.attacks.distinguish import EpsilonEstimate, distinguish
from auditkit.attacks.verdicts import bonferroni_confidence, verdict
from auditkit.mechanisms import Mechanism, capability

__all__ = [
    "DEFAULT_TRIALS",
    "AdaptiveTest",
    "AdaptiveTestResult",
    "adaptive_test",
    "adaptive_tests_for",
    "check_test_inputs",
    "message_side_channel",
    "registered_adaptive_tests",
    "resolve_for",
    "run_views",
]

DEFAULT_TRIALS = 10_000  # per view or pair: 2,500 held-out outputs per side, cap ~6.5 at 95%


@dataclass(frozen=True)
class AdaptiveTestResult:
    """One adaptive test: the claim it tests, what it observed, the bounds, the verdict.

    test:          the test's name; mechanism: the mechanism's name and params.
    claim:         what the test checks, in words; stated_claim: the mechanism's claim as it states it
                   (``PrivacyGuarantee.summary``); claimed_epsilon: its epsilon (None: no claim).
    estimates:     one ``EpsilonEstimate`` per view or pair (labels in ``estimate.pair.label``).
    judged:        for each estimate, whether the verdict rests on it (False: reported only, e.g. a pair
                   outside the claim's domain).
    worst:         the judged estimate with the largest bound; verdict: ``verdict(worst, guarantee)``.
    confidence:    family-wise over the estimates (each at ``per_test_confidence``, Bonferroni).
    findings:      measured side facts (overload rates, zeta values, a reported-only bound).
    note:          how to read the result.
    """

    test: str
    mechanism: str
    params: dict[str, Any]
    claim: str
    stated_claim: str
    claimed_epsilon: float | None
    estimates: tuple[EpsilonEstimate, ...]
    judged: tuple[bool, ...]
    worst: EpsilonEstimate
    verdict: str
    confidence: float
    per_test_confidence: float
    findings: dict[str, float] = field(default_factory=dict)
    note: str = ""

    @property
    def epsilon_lower_bound(self) -> float:
        """The worst judged bound."""
        return self.worst.epsilon_lower_bound

    @property
    def statistic(self) -> str:
        """The statistic of the worst judged estimate."""
        return self.worst.statistic

    @property
    def p_value(self) -> float | None:
        """The worst judged estimate's p-value of the claim (None without a claim)."""
        return self.worst.p_value

    def to_dict(self) -> dict[str, Any]:
        return {
            "test": self.test,
            "mechanism": self.mechanism,
            "params": dict(self.params),
            "claim": self.claim,
            "stated_claim": self.stated_claim,
            "claimed_epsilon": self.claimed_epsilon,
            "epsilon_lower_bound": self.epsilon_lower_bound,
            "max_certifiable": self.worst.max_certifiable,
            "statistic": self.statistic,
            "worst": self.worst.pair.label,
            "verdict": self.verdict,
            "p_value": self.p_value,
            "confidence": self.confidence,
            "per_test_confidence": self.per_test_confidence,
            "findings": dict(self.findings),
            "note": self.note,
            "estimates": [{**e.to_dict(), "judged": j} for e, j in zip(self.estimates, self.judged, strict=True)],
        }


AdaptiveTest = Callable[..., AdaptiveTestResult]
"""test(mechanism, *, trials, confidence, seed) -> AdaptiveTestResult."""

_REGISTRY: dict[str, list[AdaptiveTest]] = {}


def adaptive_test(*mechanism_names: str) -> Callable[[AdaptiveTest], AdaptiveTest]:
    """Decorator registering an adaptive test for the mechanisms named (registered or not yet: a plugin may
    register its test before or after its mechanism), with the calling convention of the module docstring."""
    if not mechanism_names or not all(isinstance(n, str) and n for n in mechanism_names):
        raise ValueError(f"adaptive_test needs one or more mechanism names, got {mechanism_names!r}")

    def register(test: AdaptiveTest) -> AdaptiveTest:
        @functools.wraps(test)
        def run(mechanism: str | Mechanism, *, trials: int = DEFAULT_TRIALS, confidence: float = 0.95,
                seed: int = 0) -> AdaptiveTestResult:
            check_test_inputs(trials, confidence)
            configured = resolve_for(mechanism, mechanism_names, test.__name__, seed)
            return test(configured, trials=trials, confidence=confidence, seed=seed)

        for name in mechanism_names:
            _REGISTRY.setdefault(name, []).append(run)
        return run

    return register


def registered_adaptive_tests() -> dict[str, tuple[AdaptiveTest, ...]]:
    """Mechanism name -> its adaptive tests, for every name a test is registered for."""
    return {name: tuple(tests) for name, tests in _REGISTRY.items()}


def adaptive_tests_for(mechanism_name: str) -> list[AdaptiveTest]:
    """The adaptive tests registered for a registered mechanism, in registration order (empty when none)."""
    if mechanism_name not in mechanisms.names():
        raise ValueError(
            f"mechanism_name must be a registered mechanism ({', '.join(mechanisms.names())}), got {mechanism_name!r}"
        )
    return list(_REGISTRY.get(mechanism_name, ()))


def resolve_for(mechanism: str | Mechanism, names: Sequence[str], test: str, seed: int) -> Mechanism:
    """The mechanism a test runs on (a name is created as ``auditkit.attacks.bulk_sampling.resolve_mechanism`` does);
    ``ValueError`` unless it is one of the ``names`` the test targets."""
    resolved = resolve_mechanism(mechanism, seed=seed)
    if getattr(resolved, "name", None) not in names:
        raise ValueError(f"mechanism must be one of {', '.join(names)} for {test}, got {getattr(resolved, 'name', resolved)!r}")
    return resolved


def check_test_inputs(trials: int, confidence: float) -> None:
    """``ValueError`` naming the argument unless trials >= 20 and confidence in (0, 1)."""
    if isinstance(trials, bool) or not isinstance(trials, int) or trials < 20:
        raise ValueError(f"trials must be an integer >= 20, got {trials!r}")
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be in (0, 1), got {confidence!r}")


def message_side_channel(mechanism: Mechanism) -> BatchedMechanism:
    """The ``message`` view as a batched callable: for each row x_i, the side value (``Message.side_value``, e.g.
    JoPEQ's zeta or CEPAM 000's ||x||) parsed from the bytes of ``mechanism.encode(x_i, derive_seed(seed, i))``
    (what the server and an eavesdropper read), shape (B, 1); from the mechanism's own ``side_values`` where it
    declares them (the same values without an encode per row)."""
    batch = capability(mechanism, "side_values")
    if batch is not None:
        def declared(x: torch.Tensor, seed: int) -> torch.Tensor:
            return torch.as_tensor(batch.sample(x, seed), dtype=torch.float64).view(-1, 1)

        declared.__name__ = f"{mechanism.name} side value"
        return declared

    def observe(x: torch.Tensor, seed: int) -> torch.Tensor:
        values = []
        for i, row in enumerate(x):
            message = mechanism.encode(row, mechanisms.derive_seed(seed, i))
            value = type(message).from_bytes(message.to_bytes()).side_value
            if value is None:
                raise ValueError(f"the message of {mechanism.name} carries no side value ({type(message).__name__})")
            values.append(value)
        return torch.tensor(values, dtype=torch.float64).view(-1, 1)

    observe.__name__ = f"{mechanism.name} side value"
    return observe


def run_views(
    test: str,
    mechanism: Mechanism,
    claim: str,
    runs: list[tuple[str, Mechanism | BatchedMechanism, torch.Tensor, torch.Tensor, bool]],
    *,
    trials: int,
    confidence: float,
    seed: int,
    findings: dict[str, float],
    note: str,
) -> AdaptiveTestResult:
    """The result of adaptive test ``test`` on ``mechanism``: distinguish every run (label, observed mechanism
    or batched view, x0, x1, judged) with ``trials`` outputs at the Bonferroni confidence over the runs; the
    verdict is the worst judged bound against ``mechanism.guarantee()``. ``claim`` says in words which claim the
    runs test; ``findings`` are measured side facts; ``note`` says how to read the result."""
    guarantee = mechanism.guarantee()
    per_test = bonferroni_confidence(confidence, len(runs))
    delta = guarantee.delta if guarantee.epsilon is not None else 0.0
    estimates = tuple(
        distinguish(
            observed, x0, x1, trials=trials, confidence=per_test, delta=delta,
            claimed_eps=guarantee.epsilon, label=label, seed=mechanisms.derive_seed(seed, test, label),
        )
        for label, observed, x0, x1, _ in runs
    )  # fmt: skip
    judged = tuple(run[4] for run in runs)
    worst = max((e for e, j in zip(estimates, judged, strict=True) if j), key=lambda e: e.epsilon_lower_bound)
    return AdaptiveTestResult(
        test=test,
        mechanism=mechanism.name,
        params=dict(mechanism.params),
        claim=claim,
        stated_claim=guarantee.summary(),
        claimed_epsilon=guarantee.epsilon,
        estimates=estimates,
        judged=judged,
        worst=worst,
        verdict=verdict(worst, guarantee),
        confidence=confidence,
        per_test_confidence=per_test,
        findings=findings,
        note=note,
    )
