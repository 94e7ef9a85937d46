"""The summary: the privacy, attacks and utility tables, a row per setting, with each setting's headline verdict
and strongest certified bound."""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from auditkit.accounting.composition import FALLBACK_REASONS
from auditkit.attacks.headline import ClaimScope, claim_verdicts, distinguishing_test
from auditkit.attacks.verdicts import adjusted_p_value
from auditkit.reports.sections.text import (
    NOT_RUN, VERDICT_CLASSES, claim, interval, number, origin, p_value, parameters, percent, plural,
)
from auditkit.results.model import (Accounting, ClaimVerdict, ComposedRun, DecisiveTest, FinalMetrics, Headline,
                                    Identification, Inversion, Probe, Setting, StrongestBound)

PRIVACY_COLUMNS = ("setting", "claimed per round", "verdict on the one-round claim", "claimed over the rounds run",
                   "accountant", "verdict on the whole run's claim", "certified ε lower bound (one round, strongest test)")
NOT_TESTED = "not tested"
# what would test a whole-run claim no test judged
WHOLE_RUN_UNTESTED = "enable [canary] to test it"
ATTACK_COLUMNS = ("setting", "identification success ≤ the claim's bound", "probe SSIM clean → defended",
                  "inversion SSIM clean → defended", "inversion MSE clean → defended",
                  "inversion PSNR clean → defended")
UTILITY_COLUMNS = ("setting", "mechanism", "final test accuracy", "vs no mechanism", "uplink",
                   "compression vs float32", "uplink SNR (mean over rounds)")
PRIVACY_UTILITY_COLUMNS = ("setting", "claimed ε per round", "claimed ε over the rounds run",
                           "certified ε lower bound (strongest test)", "final test accuracy", "vs no mechanism",
                           "final test loss")


def _before_after(inversion: Inversion | Probe | None, key: str, spec: str = ".4g", unit: str = "") -> str:
    if inversion is None:
        return NOT_RUN
    clean = "no clean run" if inversion.clean is None else number(getattr(inversion.clean, key), spec, unit)
    return f"{clean} → {number(getattr(inversion.defended, key), spec, unit)}"


def _composed(accounting: Accounting | None, epsilon: float | None) -> str:
    """The claim composed over the rounds run (with its check against the run's client sampling), the refusal, or
    "-" when there is no claim to compose; then the paper's own FL claim when there is one, and the clients'
    DP-SGD claim about one example, labelled as such."""
    if accounting is None:
        return NOT_RUN
    composed, actual = accounting.composed, accounting.composed_actual
    parts = []
    if composed is not None:
        parts.append(f"{claim(composed.epsilon, composed.delta)} over {composed.rounds} rounds")
        if actual is not None:
            parts.append(f"realised noise: {claim(actual.epsilon, actual.delta)}")
    elif epsilon is not None and accounting.refusal:
        parts.append(f"refused: {accounting.refusal}")
    check = accounting.check
    if check is not None:
        parts.append(f"check {check.verdict}: recomputed from the run, ε = {number(check.independent_epsilon)}")
    paper = accounting.paper_claim
    if paper is not None:
        parts.append(f"paper's FL claim: {claim(paper.epsilon, paper.delta)}")
    example = accounting.example_level
    if example is not None:
        parts.append(f"example-level (DP-SGD): {claim(example.epsilon, example.delta)} over "
                     f"{example.steps} steps at q = {number(example.sample_rate)} ({example.accountant})")
    return "; ".join(parts) or "-"


def _accountant_of(run: ComposedRun, asked: str) -> str:
    """"opacus-rdp (asked for opacus-prv: PRV cannot evaluate ...)": the accountant that composed ``run``, and when it
    is not the one asked for (``run.requested``; ``asked``, the setting's, in a file from before it), why."""
    requested = run.requested or asked
    if run.accountant == requested:
        return run.accountant
    reasons = "; ".join(FALLBACK_REASONS[f] for f in run.fallbacks) or "the reason is not recorded"
    return f"{run.accountant} (asked for {requested}: {reasons})"


def _accountant(accounting: Accounting | None) -> str:
    """The accountant of the claim composed over the rounds run, and of the realised noise's where there is one
    (``_accountant_of``); "-" without a composed claim."""
    if accounting is None or accounting.composed is None:
        return NOT_RUN if accounting is None else "-"
    text = _accountant_of(accounting.composed, accounting.accountant)
    actual = accounting.composed_actual
    if actual is None:
        return text
    # the realised noise is composed at delta 0 by its own request (auditkit.accounting.report), not the setting's
    return f"{text}; realised noise: {_accountant_of(actual, actual.requested or actual.accountant)}"


def _bits(final: FinalMetrics) -> str:
    """Bits per coordinate per round, with the uploads per round when a protocol sends more than one."""
    text = number(final.bits_per_coordinate, unit=" bits/coord")
    uploads = 1.0 if final.uploads_per_round is None else final.uploads_per_round
    return text if uploads <= 1 else f"{text} ({number(uploads)} uploads/round)"


def _snr(value: float | None) -> str:
    """The uplink SNR in dB; "-" where the protocol has no decoded update per client (or an older file)."""
    if value is None:
        return "-"
    return "∞ (lossless)" if value == float("inf") else number(value, unit=" dB")


@dataclass(frozen=True)
class Verdict:
    """A setting's headline verdict as the tables show it: the words, their badge classes, the deciding test."""

    text: str
    css: str
    evidence: str
    decided_by: str


def headline(setting: Setting) -> Verdict:
    """The setting's headline verdict ("not run" when no test ran)."""
    found = setting.verdict
    if found is None:
        return Verdict(NOT_RUN, "none", "", "")
    return Verdict(found.verdict, VERDICT_CLASSES.get(found.verdict, "other"), found.evidence or "",
                   _decided_by(found))


def claims_judged(setting: Setting) -> list[ClaimVerdict]:
    """The verdict on each claim the setting states (the headline's ``claims``; a file from before them: computed
    from its sections by ``claim_verdicts``, as the audit would have); [] without a headline or a claim."""
    found = setting.verdict
    if found is None:
        return []
    if found.claims is not None:
        return found.claims
    data = setting.model_dump()
    return [ClaimVerdict.model_validate(c) for c in claim_verdicts(
        data["distinguish"], data["identification"], data["mechanism"], data["accounting"], data["canary"],
        data["membership"])]


def claim_judged(setting: Setting, claim_scope: ClaimScope) -> ClaimVerdict | None:
    """The verdict on the setting's claim of ``claim_scope``; None when it states no such claim."""
    return next((c for c in claims_judged(setting) if c.scope == claim_scope), None)


def scoped(setting: Setting, claim_scope: ClaimScope) -> Verdict:
    """The verdict on the setting's one-round or whole-run claim as the tables show it: "not tested" (with what
    would test it) for a stated claim no test judged; for one round without tests or a claim, the headline ("not
    run", "no claim"); for the whole run, "not run" beside a composed claim when no test ran, else "-"."""
    found = claim_judged(setting, claim_scope)
    if found is None:  # no test ran, no claim, or no claim over the run composed
        if claim_scope == ClaimScope.ONE_ROUND:
            return headline(setting)
        accounting = setting.accounting
        composed = accounting is not None and accounting.composed is not None
        return Verdict(NOT_RUN, "none", "", "") if composed else Verdict("-", "none", "", "")
    if found.verdict is None:
        why = WHOLE_RUN_UNTESTED if claim_scope == ClaimScope.WHOLE_RUN else "no test of this claim ran"
        return Verdict(NOT_TESTED, "untested", "", why)
    p = ""
    if found.p_value is not None:
        p = f", {p_value(found.p_value)}"
        if found.evidence and setting.verdict.family:
            p += (f", {number(adjusted_p_value(found.p_value, setting.verdict.family), '.2g')} adjusted over the "
                  f"audit's {plural(setting.verdict.family, 'test')}")
    return Verdict(found.verdict, VERDICT_CLASSES.get(found.verdict, "other"), found.evidence or "",
                   f"decided by: {found.decided_by.name}{p}; {plural(found.tests, 'test')}")


def adjusted(headline: Headline) -> str:
    """"p = 3e-09, 4.2e-08 adjusted over the audit's 14 tests" for a graded refutation; the p-value alone
    otherwise (and in a file from before ``evidence``)."""
    if headline.p_value is None:
        return ""
    if not headline.evidence:
        return p_value(headline.p_value)
    return (f"{p_value(headline.p_value)}, {number(headline.adjusted_p_value, '.2g')} adjusted over the "
            f"audit's {plural(headline.family, 'test')}")


def _decided_by(headline: Headline) -> str:
    """"decided by: identification among 10 candidates, p = 3e-09, 4.2e-08 adjusted over the audit's 14 tests;
    12 tests" (for no claim: what the tests were for)."""
    if headline.verdict == "no claim":
        return f"nothing to refute; {plural(headline.tests, 'test')} measured what it leaks"
    p = f", {adjusted(headline)}" if headline.p_value is not None else ""
    return f"decided by: {headline.decided_by.name}{p}; {plural(headline.tests, 'test')}"


def certified_bound(setting: Setting) -> StrongestBound | None:
    """The setting's strongest certified bound: the headline's ``bound``, or (a file from before it) the black-box
    distinguishing test's; None without a distinguishing stage."""
    found, test = setting.verdict, setting.distinguish
    if found is not None and found.bound is not None:
        return found.bound
    if test is None:
        return None
    decisive = DecisiveTest.model_validate(distinguishing_test({"worst_pair": test.worst_pair}))
    return StrongestBound(epsilon_lower_bound=test.epsilon_lower_bound, test=decisive,
                          max_certifiable=test.max_certifiable, confidence=test.confidence)


def test_name(test: DecisiveTest) -> str:
    """"jopeq-scale-side-channel" for an adaptive test; "black-box test (worst pair: axis)"."""
    if test.kind == "adaptive":
        return test.test
    if test.kind == "distinguishing":
        return f"black-box test (worst pair: {test.pair})"
    return test.name


def _bound_text(bound: StrongestBound | None) -> tuple[str, str]:
    """("≥ 6.98", "jopeq-scale-side-channel; 95 % family-wise; cap 9.46"), or NOT_RUN."""
    if bound is None:
        return NOT_RUN, ""
    return (f"≥ {number(bound.epsilon_lower_bound)}",
            f"{test_name(bound.test)}; {number(100 * bound.confidence, 'g', ' %')} family-wise; "
            f"cap {number(bound.max_certifiable)}")


@dataclass(frozen=True)
class PrivacyRow:
    """One setting's line of the privacy table: its claim, the verdict and the strongest certified bound."""

    label: str
    origin: str
    claim: str
    flags: list[str]
    composed: str
    one_round: Verdict
    accountant: str
    whole_run: Verdict
    bound: str
    bound_note: str
    view: str = ""


VIEW_NOTES = {"aggregate": "tested on the aggregate view: the noisy sum, other clients' updates known"}


def privacy_row(setting: Setting) -> PrivacyRow:
    guarantee = setting.mechanism.guarantee
    bound, note = _bound_text(certified_bound(setting))
    return PrivacyRow(label=setting.label, origin=origin(setting.mechanism),
                      claim=claim(guarantee.epsilon, guarantee.delta),
                      flags=list(guarantee.flags), composed=_composed(setting.accounting, guarantee.epsilon),
                      one_round=scoped(setting, ClaimScope.ONE_ROUND), accountant=_accountant(setting.accounting),
                      whole_run=scoped(setting, ClaimScope.WHOLE_RUN), bound=bound, bound_note=note,
                      view=VIEW_NOTES.get(setting.mechanism.view or "server", ""))


def _identification_cell(identification: Identification | None) -> str:
    """"M=10: 0.31 [0.27, 0.36] ≤ 0.42; M=100: ..." (NOT_RUN without the test)."""
    if identification is None:
        return NOT_RUN
    parts = []
    for t in identification.tests:
        relation = ">" if t.rate > t.bound else "≤"
        parts.append(f"M={t.candidates}: {number(t.rate, '.2f')} {interval(*t.interval)} {relation} "
                     f"{number(t.bound)}")
    return "; ".join(parts)


@dataclass(frozen=True)
class AttackRow:
    """One setting's line of the attacks table: identification, probe and inversion scores."""

    label: str
    identification: str
    probe_ssim: str
    ssim: str
    mse: str
    psnr: str


def attack_row(setting: Setting) -> AttackRow:
    return AttackRow(label=setting.label, identification=_identification_cell(setting.identification),
                     probe_ssim=_before_after(setting.probe, "ssim_mean"),
                     ssim=_before_after(setting.inversion, "ssim_mean"),
                     mse=_before_after(setting.inversion, "mse_mean"),
                     psnr=_before_after(setting.inversion, "psnr_mean", ".4g", " dB"))


@dataclass(frozen=True)
class UtilityRow:
    """One setting's line of the utility and cost table."""

    label: str
    mechanism: str
    params: str
    origin: str
    accuracy: str
    versus: str
    bits: str
    compression: str
    snr: str


def baseline(settings: list[Setting]) -> Setting | None:
    """The audit's run without a mechanism (``none``) that trained, against which utility is read; None if none."""
    return next((s for s in settings if s.mechanism.name == "none" and s.training is not None), None)


def versus(setting: Setting, reference: Setting | None) -> str:
    """The accuracy difference to the run without a mechanism, in percentage points."""
    if setting.training is None or reference is None or reference is setting:
        return "-"
    difference = 100 * (setting.training.final.test_accuracy - reference.training.final.test_accuracy)
    return f"{difference:+.2f} points"


def utility_row(setting: Setting, reference: Setting | None = None) -> UtilityRow:
    """The utility table's cells for one setting, each number with its unit; "not run" without training."""
    mechanism, training = setting.mechanism, setting.training
    final = None if training is None else training.final
    return UtilityRow(
        label=setting.label, mechanism=mechanism.name,
        params=parameters(mechanism.params, mechanism.clip_norm), origin=origin(mechanism),
        accuracy=NOT_RUN if final is None else percent(final.test_accuracy),
        versus=versus(setting, reference),
        bits=NOT_RUN if final is None else _bits(final),
        compression=NOT_RUN if final is None else
        "-" if final.compression_vs_float32 is None else number(final.compression_vs_float32, unit="x"),
        snr=NOT_RUN if final is None else _snr(final.snr_db),
    )


@dataclass(frozen=True)
class PrivacyUtilityRow:
    """One setting's line of the privacy against utility table: the epsilons beside the accuracy and loss."""

    label: str
    claimed: str
    composed: str
    certified: str
    accuracy: str
    versus: str
    loss: str


def privacy_utility_row(setting: Setting, reference: Setting | None = None) -> PrivacyUtilityRow:
    """The one-round claim, the claim composed over the rounds run ("-" where none is composed), the strongest
    certified lower bound, and the final test accuracy and loss; "not run" without training."""
    epsilon_value = setting.mechanism.guarantee.epsilon
    accounting = setting.accounting
    composed = None if accounting is None else accounting.composed
    bound = certified_bound(setting)
    final = None if setting.training is None else setting.training.final
    return PrivacyUtilityRow(
        label=setting.label, claimed="no claim" if epsilon_value is None else number(epsilon_value),
        composed="-" if composed is None else f"{number(composed.epsilon)} over {composed.rounds} rounds",
        certified=NOT_RUN if bound is None else f"≥ {number(bound.epsilon_lower_bound)}",
        accuracy=NOT_RUN if final is None else percent(final.test_accuracy),
        versus=versus(setting, reference),
        loss=NOT_RUN if final is None else number(final.test_loss))


def summary_tables(settings: list[Setting]) -> list[tuple[str, str, tuple[str, ...], list[Any]]]:
    """The summary's tables, (id, heading, columns, rows), leaving out a table where no setting has anything but
    "not run" (an account document has no attacks; an attack document trained nothing)."""
    reference = baseline(settings)
    tables = [("summary-privacy", "Privacy: claims and verdicts", PRIVACY_COLUMNS, [privacy_row(s) for s in settings]),
              ("summary-attacks", "Attacks: what the adversary recovered", ATTACK_COLUMNS,
               [attack_row(s) for s in settings]),
              ("summary-utility", "Utility and cost", UTILITY_COLUMNS,
               [utility_row(s, reference) for s in settings]),
              ("summary-privacy-utility", "Privacy against utility", PRIVACY_UTILITY_COLUMNS,
               [privacy_utility_row(s, reference) for s in settings if s.training is not None])]
    return [table for table in tables if any(_filled(row) for row in table[3])]


def _filled(row: Any) -> bool:
    """Whether a summary row holds anything but its label, its mechanism and "not run" / "-" cells."""
    skip = {"label", "mechanism", "params", "origin", "flags"}
    values = [getattr(row, f.name) for f in dataclasses.fields(row) if f.name not in skip]
    return any(v not in (NOT_RUN, "-", "") and not (isinstance(v, Verdict) and v.text in (NOT_RUN, "-"))
               for v in values)
