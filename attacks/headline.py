"""A setting's headline: the worst verdict over all its tests, the test that decided it (as data: its ``kind``
and what it was run on) and the strongest bound they certified, computed from the setting's sections of a
results document (plain data, so a report or an upgraded old document derives it the same way as the audit
that wrote it)."""
from __future__ import annotations

import enum
from typing import Any, NamedTuple

from auditkit.attacks.verdicts import NO_CLAIM, VIOLATED, Evidence, Verdict, adjusted_p_value, evidence

__all__ = ["SEVERITY", "ClaimScope", "TestKind", "canary_test", "claim_verdicts", "decided_by", "distinguishing_test",
           "membership_test", "overall_verdict", "strongest_bound"]

# The headline's order: a refutation outranks everything; a test that could refute and did not outranks one
# that could not; "vacuous claim" and "no claim" say least.
SEVERITY = (VIOLATED, Verdict.CELL_LOCAL_ONLY, Verdict.CONSISTENT, Verdict.INCONCLUSIVE, Verdict.VACUOUS, NO_CLAIM)


class TestKind(enum.StrEnum):
    """What decided a headline: a statistical test, a refutation by computation, or a mechanism without a claim."""

    DISTINGUISHING = "distinguishing"
    ADAPTIVE = "adaptive"
    IDENTIFICATION = "identification"
    CANARY = "canary"  # a judged view of a one-run canary audit
    MEMBERSHIP = "membership"  # an attack of the membership stage, its one-run bound on the target run
    ANALYTIC = "analytic"  # refuted by computation: the declared true epsilon, or the accounting's check
    NO_CLAIM = "no claim"


def decided_by(kind: TestKind, name: str, *, pair: str | None = None, test: str | None = None,
               candidates: int | None = None, view: str | None = None, whole_run: bool = False) -> dict[str, Any]:
    """A headline's decisive test: its ``kind``, its display ``name``, and what identifies it among its kind —
    the distinguishing test's worst ``pair``, the adaptive ``test``, the identification test's M ``candidates``,
    the canary audit's judged ``view`` (null for the idealized game) and whether it judged the ``whole_run``'s
    composed claim rather than the one-round claim."""
    return {"kind": kind, "name": name, "pair": pair, "test": test, "candidates": candidates, "view": view,
            "whole_run": whole_run}


def canary_test(canary: dict[str, Any], view: dict[str, Any]) -> dict[str, Any]:
    """A judged view of a one-run canary audit as a decisive test: the idealized game (``auditkit canary``,
    the one-round claim) or an FL run's view against the whole run's claim."""
    if canary["kind"] == "idealized":
        return decided_by(TestKind.CANARY, f"one-run canary audit (idealized, {view['result']['bound']})")
    return decided_by(TestKind.CANARY, f"one-run canary audit ({view['view']} view) against the whole run's claim",
                      view=view["view"], whole_run=True)


def membership_test(membership: dict[str, Any], attack: dict[str, Any]) -> dict[str, Any]:
    """An attack of the membership stage as a decisive test: its one-run bound against the whole run's claim."""
    return decided_by(TestKind.MEMBERSHIP, f"membership inference ({attack['attack']}, {membership['level']} level, "
                      f"{membership['view']} view) against the whole run's claim", test=attack["attack"],
                      view=membership["view"], whole_run=True)


def distinguishing_test(distinguish: dict[str, Any]) -> dict[str, Any]:
    pair = distinguish["worst_pair"]
    return decided_by(TestKind.DISTINGUISHING, f"distinguishing test (worst pair: {pair})", pair=pair)


def _adaptive(adaptive: dict[str, Any]) -> dict[str, Any]:
    return decided_by(TestKind.ADAPTIVE, f"adaptive test {adaptive['test']}", test=adaptive["test"])


class ClaimScope(enum.StrEnum):
    """Which claim a test judges: the mechanism's claim about one round (one release), or the claim composed over
    the whole run (the rounds run, amplified by client sampling where the run samples)."""

    ONE_ROUND = "one round"
    WHOLE_RUN = "whole run"


def scope(decisive: dict[str, Any]) -> ClaimScope:
    """The claim a decisive test (``decided_by``) judged."""
    return ClaimScope.WHOLE_RUN if decisive["whole_run"] else ClaimScope.ONE_ROUND


class _Test(NamedTuple):
    decisive: dict[str, Any]
    verdict: str
    p_value: float | None


def _tests(distinguish: dict[str, Any] | None, identification: dict[str, Any] | None,
           canary: dict[str, Any] | None = None, membership: dict[str, Any] | None = None) -> list[_Test]:
    """Every test a setting ran: distinguishing, adaptive, identification, each judged view of a one-run canary
    audit and each membership attack (those two without a p-value: judged at their Bonferroni share of the
    confidence)."""
    tests: list[_Test] = []
    if distinguish is not None:
        tests.append(_Test(distinguishing_test(distinguish), distinguish["verdict"], distinguish["p_value"]))
        tests += [_Test(_adaptive(a), a["verdict"], a.get("p_value")) for a in distinguish["adaptive"]]
    if identification is not None:
        tests += [_Test(decided_by(TestKind.IDENTIFICATION, f"identification among {t['candidates']} candidates",
                                   candidates=t["candidates"]), t["verdict"], t["p_value"])
                  for t in identification["tests"]]
    if canary is not None:
        tests += [_Test(canary_test(canary, view), view["result"]["verdict"], None) for view in canary["views"]]
    if membership is not None:
        tests += [_Test(membership_test(membership, attack), attack["result"]["verdict"], None)
                  for attack in membership["attacks"]]
    return tests


def strongest_bound(distinguish: dict[str, Any] | None, canary: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The largest epsilon lower bound any of a setting's distinguishing tests certified (the black-box test and
    the adaptive tests' judged bounds, all in the audit's one Bonferroni family): the bound, the test that
    certified it (as ``decided_by`` describes a test), its cap and the family-wise confidence. Without a distinguishing stage, the idealized canary
    audit's bound (``auditkit canary``: the same one-round claim); an FL canary audit's bounds are about the whole
    run's claim and stay in its own section. None when there is neither."""
    if distinguish is None:
        if canary is None or canary["kind"] != "idealized" or not canary["views"]:
            return None
        view = max(canary["views"], key=lambda v: v["result"]["epsilon_lower_bound"])
        return {"epsilon_lower_bound": view["result"]["epsilon_lower_bound"],
                "test": canary_test(canary, view),
                "max_certifiable": view["result"]["max_certifiable"], "confidence": canary["confidence"]}
    candidates = [(distinguish["epsilon_lower_bound"], distinguishing_test(distinguish),
                   distinguish["max_certifiable"])]
    candidates += [(a["epsilon_lower_bound"], _adaptive(a), a["max_certifiable"])
                   for a in distinguish["adaptive"]]
    bound, test, cap = max(candidates, key=lambda c: c[0])  # the first wins ties: the black-box test
    return {"epsilon_lower_bound": bound, "test": test, "max_certifiable": cap,
            "confidence": distinguish["confidence"]}


def _analytic_refutations(mechanism: dict[str, Any] | None, accounting: dict[str, Any] | None) -> list[_Test]:
    """The claim refuted by computation: the mechanism declares the epsilon of the noise it really adds
    (``true_epsilon``) and it is above the claimed one (flag "claim-exceeded"); the accounting's ``check`` found
    the composed claim below its recomputation from the run (``auditkit.accounting.check_sampling``)."""
    refutations = []
    if mechanism is not None:
        claimed, actual = mechanism["guarantee"]["epsilon"], mechanism.get("true_epsilon")
        if claimed is not None and actual is not None and "claim-exceeded" in mechanism["guarantee"]["flags"]:
            name = f"accounting: the noise it really adds is ε = {actual:.4g} per round"
            refutations.append(_Test(decided_by(TestKind.ANALYTIC, name), VIOLATED, None))
    check = None if accounting is None else accounting.get("check")
    if check is not None and check["verdict"] == VIOLATED:
        name = (f"accounting: the composed claim is below its recomputation from the run, "
                f"ε = {check['independent_epsilon']:.4g}")
        refutations.append(_Test(decided_by(TestKind.ANALYTIC, name, whole_run=True), VIOLATED, None))
    return refutations


def _judge(tests: list[_Test], statistical: int, family: int) -> dict[str, Any]:
    """The worst verdict over ``tests`` (the order of ``SEVERITY``), the test that decided it (among equals, the
    smallest p-value, a test with a p-value before one without), that p-value and its evidence grade over
    ``family``; ``statistical`` of the tests are statistical (the rest analytic refutations)."""
    rank = {v: i for i, v in enumerate(SEVERITY)}
    worst = min(rank.get(t.verdict, len(SEVERITY)) for t in tests)
    deciding = [t for t in tests if rank.get(t.verdict, len(SEVERITY)) == worst]
    decisive, verdict_, p = min(deciding, key=lambda t: (t.p_value is None, t.p_value or 0.0))
    graded = Evidence.ANALYTIC if decisive["kind"] == TestKind.ANALYTIC else evidence(verdict_, p, family)
    return {"verdict": Verdict(verdict_), "decided_by": decisive, "p_value": p, "tests": statistical,
            "family": family, "adjusted_p_value": None if p is None else adjusted_p_value(p, family),
            "evidence": graded}


def overall_verdict(distinguish: dict[str, Any] | None, identification: dict[str, Any] | None,
                    mechanism: dict[str, Any] | None = None,
                    accounting: dict[str, Any] | None = None,
                    canary: dict[str, Any] | None = None,
                    membership: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A setting's headline: the worst verdict over all its tests (``_judge``); None when no test ran.
    ``evidence`` grades a refutation by its Bonferroni-adjusted p-value over the audit's family
    (``auditkit.attacks.verdicts.evidence``), or "analytic" for a claim refuted by computation
    (``_analytic_refutations``: one more test that says "violated" without a p-value; a test that refutes
    statistically still decides). A mechanism without a claim is "no claim", whatever its tests measured. With the
    ``mechanism`` section, ``bound`` is the strongest certified epsilon lower bound (``strongest_bound``) and
    ``claims`` the verdict on each claim the setting states (``claim_verdicts``)."""
    tests = _tests(distinguish, identification, canary, membership)
    if not tests:
        return None
    statistical = len(tests)  # the analytic checks below are evidence, not tests of the family
    # every test was judged in one Bonferroni family: the audit's (distinguish "tests"), else these tests
    family = distinguish["tests"] if distinguish is not None else statistical
    headline = _judge(tests + _analytic_refutations(mechanism, accounting), statistical, family)
    if mechanism is not None and mechanism["guarantee"]["epsilon"] is None:
        no_claim = decided_by(TestKind.NO_CLAIM, "the mechanism (it makes no privacy claim)")
        headline.update(verdict=Verdict(NO_CLAIM), decided_by=no_claim, p_value=None, adjusted_p_value=None,
                        evidence=evidence(NO_CLAIM, None, family))
    if mechanism is not None:
        headline["bound"] = strongest_bound(distinguish, canary)
        headline["claims"] = claim_verdicts(distinguish, identification, mechanism, accounting, canary, membership)
    return headline


def claim_verdicts(distinguish: dict[str, Any] | None, identification: dict[str, Any] | None,
                   mechanism: dict[str, Any], accounting: dict[str, Any] | None = None,
                   canary: dict[str, Any] | None = None,
                   membership: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """The verdict on each claim the setting states, judged by the tests of that claim alone (``_judge`` over
    the tests whose ``scope`` it is, in the audit's one Bonferroni family): the one-round claim (the mechanism's
    epsilon) and the whole run's (the accounting's composed claim, where one was composed). A stated claim no
    test judged is "not tested" (``verdict`` null) unless a computation refuted it (``_analytic_refutations``); a
    mechanism without a claim states none."""
    if mechanism["guarantee"]["epsilon"] is None:
        return []
    tests = _tests(distinguish, identification, canary, membership)
    refutations = _analytic_refutations(mechanism, accounting)
    family = distinguish["tests"] if distinguish is not None else len(tests)
    composed = None if accounting is None else accounting.get("composed")
    stated = [(ClaimScope.ONE_ROUND, mechanism["guarantee"]["epsilon"], mechanism["guarantee"].get("delta"), None)]
    if composed is not None:
        stated.append((ClaimScope.WHOLE_RUN, composed["epsilon"], composed["delta"], composed["rounds"]))
    verdicts = []
    for claim_scope, epsilon, delta, rounds in stated:
        mine = [t for t in tests if scope(t.decisive) == claim_scope]
        computed = [t for t in refutations if scope(t.decisive) == claim_scope]
        entry = {"scope": claim_scope, "epsilon": epsilon, "delta": delta, "rounds": rounds}
        if not mine and not computed:
            verdicts.append({**entry, "verdict": None, "decided_by": None, "p_value": None, "tests": 0,
                             "evidence": None})
            continue
        judged = _judge(mine + computed, len(mine), family)
        verdicts.append({**entry, **{k: judged[k] for k in ("verdict", "decided_by", "p_value", "tests",
                                                            "evidence")}})
    return verdicts
