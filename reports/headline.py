"""A setting's headline: the worst verdict over all its tests and the strongest bound they certified, computed
from the setting's sections of a results document (plain data, so a report or an upgraded old document derives it
the same way as the audit that wrote it)."""
from __future__ import annotations

from typing import Any

__all__ = ["ANALYTIC", "canary_test_name", "overall_verdict", "strongest_bound"]

# The headline's order: a refutation outranks everything; a test that could refute and did not outranks one
# that could not; "vacuous claim" and "no claim" say least.
_SEVERITY = ("violated", "claim holds only cell-locally", "consistent", "inconclusive", "vacuous claim", "no claim")
ANALYTIC = "accounting"  # the name of an analytic refutation in ``decided_by``: "accounting: the noise ..."


def canary_test_name(canary: dict[str, Any], view: dict[str, Any]) -> str:
    """How a judged view of a one-run canary audit is named in a headline and a report."""
    if canary["kind"] == "idealized":
        return f"one-run canary audit (idealized, {view['result']['bound']})"
    return f"one-run canary audit ({view['view']} view) against the whole run's claim"


def _tests(distinguish: dict[str, Any] | None, identification: dict[str, Any] | None,
           canary: dict[str, Any] | None = None) -> list[tuple[str, str, float | None]]:
    """(name, verdict, p-value) of every test a setting ran: distinguishing, adaptive, identification, and each
    judged view of a one-run canary audit (no p-value: judged at its Bonferroni share of the confidence)."""
    tests: list[tuple[str, str, float | None]] = []
    if distinguish is not None:
        tests.append((f"distinguishing test (worst pair: {distinguish['worst_pair']})", distinguish["verdict"],
                      distinguish["p_value"]))
        tests += [(f"adaptive test {a['test']}", a["verdict"], a.get("p_value")) for a in distinguish["adaptive"]]
    if identification is not None:
        tests += [(f"identification among {t['candidates']} candidates", t["verdict"], t["p_value"])
                  for t in identification["tests"]]
    if canary is not None:
        tests += [(canary_test_name(canary, view), view["result"]["verdict"], None) for view in canary["views"]]
    return tests


def strongest_bound(distinguish: dict[str, Any] | None, canary: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """The largest epsilon lower bound any of a setting's distinguishing tests certified (the black-box test and
    the adaptive tests' judged bounds, all in the audit's one Bonferroni family): the bound, the test that
    certified it, its cap and the family-wise confidence. Without a distinguishing stage, the idealized canary
    audit's bound (``auditkit canary``: the same one-round claim); an FL canary audit's bounds are about the whole
    run's claim and stay in its own section. None when there is neither."""
    if distinguish is None:
        if canary is None or canary["kind"] != "idealized" or not canary["views"]:
            return None
        view = max(canary["views"], key=lambda v: v["result"]["epsilon_lower_bound"])
        return {"epsilon_lower_bound": view["result"]["epsilon_lower_bound"], "test": canary_test_name(canary, view),
                "max_certifiable": view["result"]["max_certifiable"], "confidence": canary["confidence"]}
    candidates = [(distinguish["epsilon_lower_bound"], f"distinguishing test (worst pair: {distinguish['worst_pair']})",
                   distinguish["max_certifiable"])]
    candidates += [(a["epsilon_lower_bound"], f"adaptive test {a['test']}", a["max_certifiable"])
                   for a in distinguish["adaptive"]]
    bound, test, cap = max(candidates, key=lambda c: c[0])  # the first wins ties: the black-box test
    return {"epsilon_lower_bound": bound, "test": test, "max_certifiable": cap,
            "confidence": distinguish["confidence"]}


def _analytic_refutations(mechanism: dict[str, Any] | None,
                          accounting: dict[str, Any] | None) -> list[tuple[str, str, None]]:
    """The claim refuted by computation: the mechanism declares the epsilon of the noise it really adds
    (``true_epsilon``) and it is above the claimed one (flag "claim-exceeded"); the accounting's ``check`` found
    the composed claim below its recomputation from the run (``auditkit.accounting.check_sampling``)."""
    refutations = []
    if mechanism is not None:
        claimed, actual = mechanism["guarantee"]["epsilon"], mechanism.get("true_epsilon")
        if claimed is not None and actual is not None and "claim-exceeded" in mechanism["guarantee"]["flags"]:
            refutations.append((f"{ANALYTIC}: the noise it really adds is ε = {actual:.4g} per round", "violated",
                                None))
    check = None if accounting is None else accounting.get("check")
    if check is not None and check["verdict"] == "violated":
        refutations.append((f"{ANALYTIC}: the composed claim is below its recomputation from the run, "
                            f"ε = {check['independent_epsilon']:.4g}", "violated", None))
    return refutations


def overall_verdict(distinguish: dict[str, Any] | None, identification: dict[str, Any] | None,
                    mechanism: dict[str, Any] | None = None,
                    accounting: dict[str, Any] | None = None,
                    canary: dict[str, Any] | None = None) -> dict[str, Any] | None:
    """A setting's headline: the worst verdict over all its tests (distinguishing, adaptive, identification; the
    order of ``_SEVERITY``; with a ``canary`` section also its judged views), the test that decided it (among equals, the smallest p-value; a test with a p-value
    before one without) and that p-value; None when no test ran. ``evidence`` grades a refutation by its
    Bonferroni-adjusted p-value over the audit's family (``auditkit.attacks.verdicts.evidence``: "decisive" below 1e-4,
    else "marginal"), or "analytic" for a claim refuted by computation.

    With the setting's ``mechanism`` section: a claim whose declared ``true_epsilon`` exceeds it (flag
    "claim-exceeded") is refuted analytically, as one more test that says "violated" without a p-value (a test
    that refutes it statistically still decides); so is, with its ``accounting`` section, a composed claim whose
    ``check`` is "violated"; a mechanism without a claim is "no claim", whatever its tests measured. ``bound`` is
    the strongest certified epsilon lower bound (``strongest_bound``)."""
    from auditkit.attacks.verdicts import NO_CLAIM, adjusted_p_value, evidence

    tests = _tests(distinguish, identification, canary)
    if not tests:
        return None
    statistical = len(tests)  # the analytic checks below are evidence, not tests of the family
    analytic = _analytic_refutations(mechanism, accounting)
    tests += analytic
    rank = {v: i for i, v in enumerate(_SEVERITY)}
    worst = min(rank.get(v, len(_SEVERITY)) for _, v, _ in tests)
    deciding = [t for t in tests if rank.get(t[1], len(_SEVERITY)) == worst]
    name, verdict_, p = min(deciding, key=lambda t: (t[2] is None, t[2] if t[2] is not None else 0.0))
    if mechanism is not None and mechanism["guarantee"]["epsilon"] is None:
        name, verdict_, p = "the mechanism (it makes no privacy claim)", NO_CLAIM, None
    # every test was judged in one Bonferroni family: the audit's (distinguish "tests"), else these tests
    family = distinguish["tests"] if distinguish is not None else statistical
    graded = "analytic" if any(name == a[0] for a in analytic) else evidence(verdict_, p, family)
    headline = {"verdict": verdict_, "decided_by": name, "p_value": p, "tests": statistical, "family": family,
                "adjusted_p_value": None if p is None else adjusted_p_value(p, family), "evidence": graded}
    if mechanism is not None:
        headline["bound"] = strongest_bound(distinguish, canary)
    return headline
