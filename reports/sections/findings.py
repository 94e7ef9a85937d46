"""The findings that open a report: claims refuted (with the evidence), consistent, absent or unresolved; the
whole run's claim; utility; where reconstruction from one update begins."""
from __future__ import annotations

from dataclasses import dataclass, field
from auditkit.attacks.headline import canary_test
from auditkit.reports.sections.canary import judged_claim
from auditkit.reports.sections.membership import attack_name, membership_claim, membership_finding, membership_settings
from auditkit.attacks.headline import ClaimScope, scope
from auditkit.reports.sections.summary import adjusted, certified_bound, claim_judged
from auditkit.reports.sections.utility import RunScale, unusable, utility_findings
from auditkit.reports.sections.text import claim, epsilon, number, plural, rough
from auditkit.results.model import (Canary, CanaryView, ClaimVerdict, DecisiveTest, Probe, ReconstructionSweep,
                                    ResultsDocument, Setting)


@dataclass(frozen=True)
class Findings:
    """The report's opening, part by part (``sections``: the non-empty ones, in report order)."""

    refuted: list[str]
    consistent: list[str]
    no_claim: list[str]
    unresolved: list[str]
    utility: list[str]
    reconstruction: list[str]
    whole_run: list[str] = field(default_factory=list)
    membership: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any((self.refuted, self.consistent, self.no_claim, self.unresolved, self.utility, self.reconstruction,
                    self.whole_run, self.membership))

    def sections(self) -> list[tuple[str, str, list[str]]]:
        """(heading, badge class, items) of each non-empty part, in report order."""
        parts = (("claims refuted", "violated", self.refuted),
                 ("claims consistent with every test", "consistent", self.consistent),
                 ("no privacy claim", "none", self.no_claim),
                 ("nothing concluded", "inconclusive", self.unresolved),
                 ("the whole run's claim, tested by canary clients", "other", self.whole_run),
                 ("membership inference against the final model", "other", self.membership),
                 ("utility: accuracy against the run without a mechanism", "other", self.utility),
                 ("what one reconstruction attack achieved (not a guarantee)", "other", self.reconstruction))
        return [part for part in parts if part[2]]


def findings(settings: list[Setting], classes: int | None = None, scale: RunScale | None = None,
             client_mode: str | None = None) -> Findings:
    """Refuted, consistent, no-claim and unresolved settings (by their headline verdict), each with its evidence;
    utility against the run without a mechanism (``sections.utility``; ``scale``: the run's coordinates, clients
    and classes, or ``classes`` alone for the chance level); the reconstruction sweep."""
    scale = RunScale(None, None, classes) if scale is None else scale
    refuted, consistent, no_claim, unresolved = [], [], [], []
    for s in settings:
        headline = s.verdict
        if headline is None:
            continue
        decided_scope = scope(headline.decided_by.model_dump())
        judged = claim_judged(s, decided_scope)
        claimed = (claim(s.mechanism.guarantee.epsilon, s.mechanism.guarantee.delta) if judged is None
                   else claim_words(judged))
        other = _other_claim(s, decided_scope)
        p = f" ({adjusted(headline)})" if headline.p_value is not None else ""
        if headline.verdict in ("violated", "claim holds only cell-locally"):
            strength = f" ({headline.evidence} refutation)" if headline.evidence else ""
            also = _analytic(s) if headline.evidence != "analytic" else ""
            refuted.append(f"{s.label}: {headline.verdict}{strength}: {claimed}; {_evidence(s)}{p}"
                           + (f". Also by computation: {also}" if also else "") + f"{other}.")
        elif headline.verdict == "consistent":
            bound = certified_bound(s)
            strongest = "" if bound is None else f"; strongest certified ε ≥ {number(bound.epsilon_lower_bound)}"
            poor = unusable(s, settings, scale)
            consistent.append(f"{s.label}: {claimed}: {plural(judged.tests if judged else headline.tests, 'test')}, "
                              f"none refuted it{strongest}{other}" + (f"; but {poor}" if poor else "") + ".")
        elif headline.verdict == "no claim":
            leaked = _leaked(s)
            no_claim.append(f"{s.label}: makes no privacy claim" + (f"; measured: {leaked}" if leaked else "") + ".")
        else:
            unresolved.append(f"{s.label} ({claimed}): {headline.verdict}: {_why_unresolved(s)}{other}.")
    return Findings(refuted, consistent, no_claim, unresolved, utility_findings(settings, scale),
                    _reconstruction(settings, client_mode),
                    _whole_run(settings), [membership_finding(s) for s in membership_settings(settings)])


def claim_words(judged: ClaimVerdict) -> str:
    """"the one-round claim ε = 4, δ = 1e-05" or "the whole run's claim ε = 25.52, δ = 1e-05 over 20 rounds"."""
    if judged.scope == ClaimScope.ONE_ROUND:
        return f"the one-round claim {claim(judged.epsilon, judged.delta)}"
    return f"the whole run's claim {claim(judged.epsilon, judged.delta)} over {plural(judged.rounds, 'round')}"


def _other_claim(setting: Setting, decided: ClaimScope) -> str:
    """"; the whole run's claim ε = 25.52, δ = 1e-05 over 20 rounds: not tested" — the verdict on the claim the
    headline's deciding test did not judge, so no reader takes one claim's verdict for the other's; "" when the
    setting states no other claim."""
    other = ClaimScope.WHOLE_RUN if decided == ClaimScope.ONE_ROUND else ClaimScope.ONE_ROUND
    judged = claim_judged(setting, other)
    if judged is None:
        return ""
    return f"; {claim_words(judged)}: {judged.verdict or 'not tested'}"


def client_mode(results: ResultsDocument) -> str | None:
    """The mode the clients' model ran in ("train" or "eval"), where the config records it."""
    training = results.config.get("training")
    return training.get("client_mode") if isinstance(training, dict) else None


def _analytic(setting: Setting) -> str:
    """"the noise it really adds is ε = 16.5 per round, not 10 (claim-exceeded): it adds less noise than its
    claim assumes", the accounting check's reason when it is violated, or "" when no computation refutes the
    claim."""
    mechanism, accounting = setting.mechanism, setting.accounting
    actual, claimed = mechanism.true_epsilon, mechanism.guarantee.epsilon
    found = []
    if actual is not None and claimed is not None and "claim-exceeded" in mechanism.guarantee.flags:
        found.append(f"the noise it really adds is ε = {number(actual)} per round, not {number(claimed)} (computed "
                     "from the noise's law; flag claim-exceeded): the mechanism adds less noise than its claim "
                     "assumes")
    check = None if accounting is None else accounting.check
    if check is not None and check.verdict == "violated":
        found.append(f"accounting check: {check.reason}")
    return "; ".join(found)


def _evidence(setting: Setting) -> str:
    """The deciding test's evidence, in words."""
    headline, test, ident = setting.verdict, setting.distinguish, setting.identification
    decided = headline.decided_by
    kind = decided.kind
    if headline.evidence == "analytic":
        bound = certified_bound(setting)
        reach = "" if bound is None else (f"; the strongest test certified ε ≥ {number(bound.epsilon_lower_bound)} "
                                          f"(cap {number(bound.max_certifiable)} at these trials)")
        return _analytic(setting) + reach
    if kind == "identification" and ident is not None:
        m = decided.candidates
        t = next(t for t in ident.tests if t.candidates == m)
        return (f"the informed adversary identified the target among {m} candidates in {t.successes} of "
                f"{t.trials} trials ({number(t.rate, '.2f')}, lower limit {number(t.lower)}) while "
                f"the claim allows at most {number(t.bound)} ({t.bound_form})")
    if kind == "distinguishing" and test is not None:
        return (f"certified ε ≥ {number(test.epsilon_lower_bound)} against the claimed "
                f"{number(test.claimed_epsilon)} ({test.worst_pair})")
    if kind == "canary" and setting.canary:
        canary = setting.canary
        worst = next(v for v in canary.views if _decides(canary, v, decided))
        r = worst.result
        return (f"{r.correct:,} of {r.guesses:,} guesses on {r.canaries:,} canaries were right: certified "
                f"ε ≥ {number(r.epsilon_lower_bound)} ({r.bound}) against {judged_claim(canary.claim)}")
    if kind == "membership" and setting.membership:
        attack = next((a for a in setting.membership.attacks if a.attack == decided.test), None)
        if attack is not None:
            r = attack.result
            return (f"membership inference ({attack_name(attack.attack)}, {setting.membership.level} level): "
                    f"{r.correct:,} of {r.guesses:,} guesses on the target run's {r.canaries:,} tested were "
                    f"right: certified ε ≥ {number(r.epsilon_lower_bound)} ({r.bound}) against the whole run's "
                    f"claim, {membership_claim(setting.membership.claim)}")
    if kind == "adaptive" and test is not None:
        a = next((a for a in test.adaptive if a.test == decided.test), None)
        if a is not None:
            return (f"{a.test}: certified ε ≥ {number(a.epsilon_lower_bound)} against "
                    f"{epsilon(a.claimed_epsilon)} ({a.claim})")
    return decided.name


def _decides(canary: Canary, view: CanaryView, decided: DecisiveTest) -> bool:
    """Whether ``view`` is the canary test that ``decided`` names (``canary_test`` reads the fields as a dict)."""
    test = canary_test({"kind": canary.kind}, {"view": view.view, "result": {"bound": view.result.bound}})
    return DecisiveTest.model_validate(test).model_dump() == decided.model_dump()


def _why_unresolved(setting: Setting) -> str:
    headline, test = setting.verdict, setting.distinguish
    if headline.verdict == "vacuous claim":
        return "the claim bounds nothing these tests measure"
    if test is not None and test.claimed_epsilon is not None and test.max_certifiable <= test.claimed_epsilon:
        return (f"claim ε {number(test.claimed_epsilon)} exceeds what {test.trials:,} trials can certify "
                f"({number(test.max_certifiable)}), and the identification bound allows "
                f"{'certain identification' if _bound_is_one(setting) else 'more than these trials can exceed'}")
    return f"no test could refute the claim ({headline.decided_by.name})"


def _bound_is_one(setting: Setting) -> bool:
    ident = setting.identification
    return ident is None or all(t.bound >= 1 for t in ident.tests)


def _leaked(setting: Setting) -> str:
    """What the tests measured of a mechanism that claims nothing: its certified bound, identification."""
    parts = []
    bound = certified_bound(setting)
    if bound is not None:
        perfect = (" (a perfect test: the cap at these trials)"
                   if bound.epsilon_lower_bound >= 0.999 * bound.max_certifiable else "")
        parts.append(f"certified ε ≥ {number(bound.epsilon_lower_bound)}{perfect}")
    probe = setting.probe
    if probe is not None:
        parts.append(f"probe SSIM {number(probe.defended.ssim_mean, '.2f')} (clean "
                     f"{number(probe.clean.ssim_mean, '.2f')})")
    return "; ".join(parts)


def _attacked(probe: Probe, client_mode: str | None) -> str:
    """"the analytic attack on the mlp at round 1: 16 targets, each a client's update of 1 step on 1 example, train
    mode" — what the sweep attacked, so its numbers are read as this attack's, not as a bound."""
    mode = "" if client_mode is None else f", {client_mode} mode"
    return (f"the {probe.attack} attack on the {probe.model} at round {probe.round}: {plural(probe.targets, 'target')}, "
            f"each a client's update of {plural(probe.local_steps, 'step')} on {plural(probe.batch_size, 'example')}"
            f"{mode}")


# what a sweep's numbers are, and are not, so no reader takes an attack's failure for a guarantee
_SCOPE = ("where this attack failed is not where privacy begins: another attack, model, batch size or round can "
          "reconstruct at a smaller ε; only the claim's bound on identification (Reconstruction against the claim) "
          "holds for every attack")


def _reconstruction(settings: list[Setting], client_mode: str | None = None) -> list[str]:
    """One line per swept mechanism: what was attacked, where its mean SSIM reaches the sweep's level against the
    audited claims, and what that does not show."""
    lines = []
    for group, (sweep, members) in sweep_groups(settings).items():
        claims = sorted({s.mechanism.guarantee.epsilon for s in members
                         if s.mechanism.guarantee.epsilon is not None})
        audited = f"ε {number(claims[0])}" + (f" to {number(claims[-1])}" if len(claims) > 1 else "")
        attacked = _attacked(next(s.probe for s in members), client_mode)
        if not sweep.points:
            lines.append(f"{group}, {attacked}: the sweep was {sweep.stopped}; the audited claims are {audited}; "
                         f"{_SCOPE}.")
            continue
        crossing, top = sweep.crossing_eps, sweep.points[-1]
        if crossing is None:
            lines.append(f"{group}, {attacked}: mean SSIM stayed below {number(sweep.level)} up to ε = "
                         f"{rough(top.eps)} ({number(top.ssim, '.2f')} there" + (f"; {sweep.stopped}" if sweep.stopped
                                                                                 else "")
                         + f"); the audited claims are {audited}; {_SCOPE}.")
            continue
        where = f"this attack's mean SSIM reaches {number(sweep.level)} near ε ≈ {rough(crossing)}"
        matches = "" if sweep.reaches_clean_eps is None else (
            f", and matches the clean attack's ({number(sweep.clean_ssim, '.2f')}) near ε ≈ "
            f"{rough(sweep.reaches_clean_eps)}")
        if crossing <= claims[-1]:
            reached = max((s for s in members if s.probe is not None),
                          key=lambda s: s.mechanism.guarantee.epsilon)
            lines.append(f"{group}, {attacked}: {where}{matches}, inside the audited claims ({audited}): at ε "
                         f"{number(reached.mechanism.guarantee.epsilon)} it reconstructs with mean "
                         f"SSIM {number(reached.probe.defended.ssim_mean, '.2f')}.")
            continue
        best = max(members, key=lambda s: s.mechanism.guarantee.epsilon or 0)
        ident = best.identification
        leak = ""
        if ident is not None and ident.tests:
            t = ident.tests[0]
            leak = (f"; below it the updates still leak: identification succeeded {number(t.rate, '.2f')} among "
                    f"{t.candidates} at ε {number(best.mechanism.guarantee.epsilon)}, against guessing "
                    f"{number(1 / t.candidates, '.2f')}")
        lines.append(f"{group}, {attacked}: {where}, above the audited claims ({audited}){matches}{leak}; "
                     f"{_SCOPE}.")
    return lines


def sweep_groups(settings: list[Setting]) -> dict[str, tuple[ReconstructionSweep, list[Setting]]]:
    """The reconstruction sweeps, one per distinct sweep (settings that differ only in the swept epsilon share
    it): group label -> (the sweep, the settings that share it), in setting order."""
    groups: dict[str, tuple[ReconstructionSweep, list[Setting]]] = {}
    for s in settings:
        sweep = None if s.probe is None else s.probe.sweep
        if sweep is None:
            continue
        label = sweep.group
        if label not in groups:
            groups[label] = (sweep, [])
        groups[label][1].append(s)
    return groups


def _whole_run(settings: list[Setting]) -> list[str]:
    """One line per setting whose canary clients tested the whole run's claim: the claim and each view's bound."""
    lines = []
    for s in settings:
        canary = s.canary
        if not canary or canary.kind != "fl":
            continue
        views = "; ".join(f"{v.view} view: ε ≥ {number(v.result.epsilon_lower_bound)}, {v.result.verdict}"
                          for v in canary.views)
        lines.append(f"{s.label}: {judged_claim(canary.claim)}, {canary.canaries:,} canary clients: {views}.")
    return lines
