"""What a report says, as plain-text strings: the one view of a results document both renderers lay out.

Every string here is unescaped text (labels, parameters and plugin names are user-supplied); the markdown
renderer escapes it for markdown, the HTML template autoescapes it.
"""
from __future__ import annotations

import math
import dataclasses
from dataclasses import dataclass, field
from typing import Any

from auditkit.attacks.headline import canary_test, distinguishing_test
from auditkit.strict_json import dumps_strict

# the summary figures, in report order, with their captions
FIGURE_CAPTIONS = {
    "accuracy_vs_round": "Test accuracy (%) by round, one line per setting.",
    "ssim_vs_epsilon": "Inversion SSIM on the view each claim covers (the server's; the aggregate for noise the server "
                       "adds) (defended, solid; clean attack, dashed) against the "
                       "one-round claimed epsilon; settings without a finite claim or without inversion are left out.",
    "ssim_vs_error_std": "Inversion SSIM against the standard deviation of the error in the server's view, one line "
                         "per mechanism; dashed: the clean attack.",
    "lower_bound_vs_epsilon": "Each setting's strongest certified epsilon lower bound (over all its distinguishing "
                              "and adaptive tests, or its idealized one-run canary audit) against its claimed "
                              "one-round epsilon, coloured by the setting's headline "
                              "verdict; points above the line y = x refute the claim; dotted: the most a test with "
                              "these trials could certify (the cap). A claim refuted by computation (analytic) or by "
                              "the whole-run canary audit (hollow markers) can sit below the line: no per-round test "
                              "reached it, the accounting or the composed claim's test did.",
    "bits_vs_accuracy": "Uplink bits per coordinate against final test accuracy (%), one point per setting.",
    "identification_vs_epsilon": "Identification success (the informed adversary picks the target among M real "
                                 "candidates; 95 % Clopper-Pearson bars) against the claimed one-round epsilon, one "
                                 "series per mechanism and M; dashed, same colour: the success the claim allows (its "
                                 "reconstruction-robustness bound); dotted: guessing, 1/M. A point whose bar lies above "
                                 "its bound exceeds the claim.",
    "probe_ssim_vs_epsilon": "Inversion probe (the claim's worst case: single-example updates at the checkpoint "
                             "model) mean SSIM on the view the claim covers against the claimed one-round epsilon, one "
                             "line per mechanism; dashed: the same attack on the clean updates.",
    "reconstruction_vs_epsilon": "Where reconstruction begins: the probe's attack on the same clip-scaled updates, "
                                 "the mechanism recalibrated to each epsilon (one panel per mechanism); solid: mean "
                                 "SSIM of the defended reconstructions with its 95 % interval; dashed: the clean "
                                 "attack; dotted: the identification success the claim allows at that epsilon "
                                 "(its reconstruction-robustness bound, M candidates); grey bands: the audited claims.",
    "tradeoff_vs_claim": "One-run canary audit: the canary guesses' empirical trade-off (solid: the share of included "
                         "canaries scored above a threshold, TPR, against the share of excluded ones above it, FPR; "
                         "both axes logarithmic), one panel per setting and a line per view (views with the same "
                         "scores share one: \"aggregate = public\"), against the most the claim allows at each FPR "
                         "(dashed: 1 - f(FPR), f the claim's trade-off curve: for an FL run, the "
                         "whole run's composed claim). A solid line above its dashed one in the low-FPR corner is what "
                         "a refutation looks like; the verdict is the certified test of the table, not this picture "
                         "(the curve's points are not corrected for noise).",
}
PRIVACY_COLUMNS = ("setting", "claimed per round", "claimed over the rounds run", "verdict (worst over all tests)",
                   "certified ε lower bound (strongest test)")
ATTACK_COLUMNS = ("setting", "identification success ≤ the claim's bound", "probe SSIM clean → defended",
                  "inversion SSIM clean → defended", "inversion MSE clean → defended",
                  "inversion PSNR clean → defended")
UTILITY_COLUMNS = ("setting", "mechanism", "final test accuracy", "vs no mechanism", "uplink",
                   "compression vs float32", "uplink SNR (mean over rounds)")
IDENTIFICATION_COLUMNS = ("setting", "attack", "M", "success (95 % interval)", "the claim's bound", "p-value",
                          "verdict")
ADAPTIVE_COLUMNS = ("setting", "test", "claim", "certified ε lower bound", "verdict", "note")
CANARY_COLUMNS = ("setting", "claim judged (ε at δ, curve)", "view", "scores", "guesses k (rule)", "correct v",
                  "certified ε lower bound", "cap", "verdict")
ESTIMATE_COLUMNS = ("pair", "statistic", "certified ε lower bound", "cap", "p-value", "sampling")
VERDICT_CLASSES = {"consistent": "consistent", "violated": "violated", "vacuous claim": "vacuous",
                   "no claim": "none", "inconclusive": "inconclusive", "claim holds only cell-locally": "violated"}
NOT_RUN = "not run"
# each capability a mechanism may declare: its name in a report, and what its generic default means
CAPABILITIES = {
    "tiling": ("tiling", "no one call on tiled copies"),
    "batch_sampling": ("batch sampling", "no vectorised sampler of its own"),
    "side_values": ("side values", "one encode per input to read a side value"),
    "audit_setting": ("audit setting", "the generic 2-D pairs"),
    "output_log_density": ("output density", "no likelihood-ratio statistic"),
    "dp_event": ("dp_event", "the claim composed as a generic event"),
    "true_epsilon": ("true epsilon", "the realised noise's epsilon not computed"),
}
GENERIC = "generic default"
# "How to read this report": every term the tables and figures use, in the order a reader meets them
GLOSSARY = (
    ("claim", "the (ε, δ)-DP guarantee the mechanism states for one round of one client's update (its unit and "
              "neighbouring relation are in the claim details); \"claimed over the rounds run\" composes it over "
              "the rounds with the accountant named, and its check recomputes that from the run's own client "
              "sampling (violated: the accountant understates it)"),
    ("flags", "what the toolkit found about a claim without testing it: claim-exceeded (the noise really added has a "
              "larger ε than claimed), vacuous (it holds with no noise at all), no-privacy, trusted-server, "
              "reveals-norm, paper-compat (a paper's number reproduced its way)"),
    ("verdict", "violated: a test refuted the claim (decisive: Bonferroni-adjusted p below 1e-4; marginal: refuted "
                "at the audit's confidence, not far beyond; analytic: refuted by computing the ε of the noise really "
                "added, or by the accounting check); consistent: tests that could have refuted it did not; "
                "inconclusive: no test had the power to; vacuous claim: the claim bounds nothing the tests measure; "
                "no claim: the mechanism claims no privacy. A setting's headline verdict is the worst over all its "
                "tests"),
    ("decided by", "the test whose verdict is the headline (among equally bad ones, the smallest p-value), and the "
                   "number of tests the setting ran"),
    ("certified ε lower bound", "an ε that the mechanism is proven to exceed (unless a false alarm of the audit's "
                                "family-wise confidence): one-sided Clopper-Pearson bounds on a distinguishing "
                                "test's error rates on outputs held out from every choice; the summary shows the "
                                "strongest of the setting's tests and names it"),
    ("cap", "the largest bound a perfect test could certify with these trials: a bound at the cap means the two "
            "inputs were told apart every time, and more trials would raise it"),
    ("worst pair", "the neighbouring pair of inputs on which the distinguishing test was judged, chosen by the "
                   "worst-pair search on outputs not used for the bound"),
    ("adaptive test", "a distinguishing test aimed at a claim's blind spot (a side value sent in clear, an overloaded "
                      "quantizer, a protocol's later messages), judged in the same family"),
    ("identification, M, ReRo", "the informed adversary knows M real candidate examples (M - 1 besides the "
                                "target), sees the view the claim covers of the target's update (the server's, or "
                                "the aggregate with the other clients' updates known), and picks one; "
                                "reconstruction robustness (ReRo, Balle, Cherubin & Hayes 2022) bounds the success "
                                "of every such attack by what the claim allows; guessing succeeds with 1/M"),
    ("one-run canary audit", "m canaries, each included with probability 1/2, all in one run (Steinke, Nasr & "
                             "Jagielski 2023): the auditor guesses the inclusion of the k canaries it is surest of "
                             "and certifies ε from the v it got right (Steinke et al.'s binomial bound, or the "
                             "f-DP test of Mahloujifar, Melis & Chaudhuri 2025, which refutes the claim's whole "
                             "trade-off curve: the verdict; its ε bound is that of the refuted (ε, δ) curve, valid "
                             "for any mechanism, and beside it the ε of the least private refuted curve of the "
                             "claim's family, the paper's number, a bound only if the mechanism's curve is in "
                             "that family). k is fixed before the bits are read (\"claim\": the k that "
                             "would certify most at the claim; \"grid\": m, m/2, m/4, m/8 with Bonferroni). In an FL "
                             "run the canaries are canary clients (Andrew et al. 2024) and the claim judged is the "
                             "whole run's: composed over the rounds, amplified by client sampling"),
    ("trade-off curve (f-DP)", "f(α), the least type II error of any test between neighbouring inputs at type I "
                               "error α (Dong, Roth & Su 2022); μ-GDP for Gaussian noise, Laplace's own curve, the "
                               "privacy profile of a sampled composed run, or the (ε, δ) curve of a claim without "
                               "one; no attack can have TPR above 1 - f(FPR)"),
    ("view", "what an adversary observes: server (each decoded message), aggregate (the noisy sum of a round whose "
             "noise the server adds, all a server learns under secure aggregation; its informed adversary also "
             "knows the other clients' updates), public (the released models)"),
    ("probe", "the claim's worst case at a checkpoint model: clients holding one real example each, their update "
              "rescaled to the mechanism's clip and sent through it; the server inverts it (analytic attack)"),
    ("inversion", "gradient inversion of the view the claim covers (the server's; for noise the server adds, the "
                  "aggregate minus the other clients' updates, with the messages in clear beside it) of real FL "
                  "clients at a checkpoint round, beside the same "
                  "attack on their true updates (clean); scored against the images each client trained on, with "
                  "one assignment for clean and defended"),
    ("SSIM, MSE, PSNR", "structural similarity (scikit-image, data range 1; 1 = identical, about 0 = unrelated), "
                        "mean squared error of pixels in [0, 1], and peak signal-to-noise ratio 10 log10(1 / MSE) "
                        "in dB; clean → defended: the attack on the true update, then on what the server sees"),
    ("uplink SNR", "Var(u) / Var(u - û) in dB, u the update as the mechanism receives it (after its clipping) and "
                   "û what the server decodes; the mean over clients and rounds (JoPEQ's Sec. V definition, "
                   "measured on the clipped update)"),
    ("PPN", "privacy-preserving noise: JoPEQ's name for the noise added before its quantizer"),
    ("bits/coord, compression", "the measured size of the real messages per update coordinate; compression: "
                                "32 (float32) over it"),
)


def number(value: float | None, spec: str = ".4g", unit: str = "") -> str:
    """``value`` formatted with ``spec`` (4 significant digits by default) and ``unit``; None and NaN -> "-",
    infinities -> "inf" / "-inf"."""
    if value is None or math.isnan(value):
        return "-"
    if math.isinf(value):
        return ("inf" if value > 0 else "-inf") + unit
    return f"{value:{spec}}{unit}"


def percent(fraction: float | None) -> str:
    """A fraction in [0, 1] as a percentage with its unit."""
    return number(None if fraction is None else 100 * fraction, ".2f", " %")


def epsilon(value: float | None) -> str:
    """``ε = 1.45`` (or "no claim" without an epsilon)."""
    return "no claim" if value is None else f"ε = {number(value)}"


def claim(epsilon_value: float | None, delta: float) -> str:
    """``ε = 1.45, δ = 1e-05`` (or "no claim" without an epsilon)."""
    return "no claim" if epsilon_value is None else f"{epsilon(epsilon_value)}, δ = {number(delta)}"


def p_value(value: float | None) -> str:
    """``p = 0.0031`` (or "" without a p-value)."""
    return "" if value is None else f"p = {number(value, '.2g')}"


def _params(params: dict[str, Any], clip_norm: str | None = None) -> str:
    """``sigma=0.8, clip=1.0 (l2)``: the clip with the norm it is measured in; floats to 4 significant digits."""
    shown = {key: number(value) if isinstance(value, float) else value for key, value in params.items()}
    items = [f"{key}={value}" + (f" ({clip_norm})" if key == "clip" and clip_norm else "")
             for key, value in shown.items()]
    if clip_norm and "clip" not in params:
        items.append(f"clip norm {clip_norm}")
    return ", ".join(items) or "no parameters"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _before_after(inversion: dict[str, Any] | None, key: str, spec: str = ".4g", unit: str = "") -> str:
    if inversion is None:
        return NOT_RUN
    clean = "no clean run" if inversion["clean"] is None else number(inversion["clean"][key], spec, unit)
    return f"{clean} → {number(inversion['defended'][key], spec, unit)}"


def _origin(mechanism: dict[str, Any]) -> str:
    """"" for a built-in mechanism, else the plugin that registered it."""
    return "" if mechanism["origin"] == "built-in" else mechanism["origin"]


def _composed(accounting: dict[str, Any] | None, epsilon: float | None) -> str:
    """The claim composed over the rounds run (with its check against the run's client sampling), the refusal, or
    "-" when there is no claim to compose; then the paper's own FL claim when there is one, and the clients'
    DP-SGD claim about one example, labelled as such."""
    if accounting is None:
        return NOT_RUN
    composed, actual = accounting["composed"], accounting["composed_actual"]
    parts = []
    if composed is not None:
        parts.append(f"{claim(composed['epsilon'], composed['delta'])} over {composed['rounds']} rounds "
                     f"({composed['backend']})")
        if actual is not None:
            parts.append(f"realised noise: {claim(actual['epsilon'], actual['delta'])}")
    elif epsilon is not None and accounting["refusal"]:
        parts.append(f"refused: {accounting['refusal']}")
    check = accounting.get("check")
    if check is not None:
        parts.append(f"check {check['verdict']}: recomputed from the run, ε = {number(check['independent_epsilon'])}")
    paper = accounting.get("paper_claim")
    if paper is not None:
        parts.append(f"paper's FL claim: {claim(paper['epsilon'], paper['delta'])}")
    example = accounting.get("example_level")
    if example is not None:
        parts.append(f"example-level (DP-SGD): {claim(example['epsilon'], example['delta'])} over "
                     f"{example['steps']} steps at q = {number(example['sample_rate'])} ({example['backend']})")
    return "; ".join(parts) or "-"


def _bits(final: dict[str, Any]) -> str:
    """Bits per coordinate per round, with the uploads per round when a protocol sends more than one."""
    text = number(final["bits_per_coordinate"], unit=" bits/coord")
    uploads = final.get("uploads_per_round", 1.0)
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


def headline(setting: dict[str, Any]) -> Verdict:
    """The setting's headline verdict ("not run" when no test ran)."""
    found = setting["verdict"]
    if found is None:
        return Verdict(NOT_RUN, "none", "", "")
    return Verdict(found["verdict"], VERDICT_CLASSES.get(found["verdict"], "other"), found.get("evidence") or "",
                   _decided_by(found))


def certified_bound(setting: dict[str, Any]) -> dict[str, Any] | None:
    """The setting's strongest certified bound: the headline's ``bound``, or (a file from before it) the black-box
    distinguishing test's; None without a distinguishing stage."""
    found, test = setting["verdict"], setting["distinguish"]
    if found is not None and found.get("bound") is not None:
        return found["bound"]
    if test is None:
        return None
    return {"epsilon_lower_bound": test["epsilon_lower_bound"], "test": distinguishing_test(test),
            "max_certifiable": test["max_certifiable"], "confidence": test["confidence"]}


def test_name(test: dict[str, Any]) -> str:
    """"jopeq-scale-side-channel" for an adaptive test; "black-box test (worst pair: axis)"."""
    if test["kind"] == "adaptive":
        return test["test"]
    if test["kind"] == "distinguishing":
        return f"black-box test (worst pair: {test['pair']})"
    return test["name"]


def _bound_text(bound: dict[str, Any] | None) -> tuple[str, str]:
    """("≥ 6.98", "jopeq-scale-side-channel; 95 % family-wise; cap 9.46"), or NOT_RUN."""
    if bound is None:
        return NOT_RUN, ""
    return (f"≥ {number(bound['epsilon_lower_bound'])}",
            f"{test_name(bound['test'])}; {number(100 * bound['confidence'], 'g', ' %')} family-wise; "
            f"cap {number(bound['max_certifiable'])}")


@dataclass(frozen=True)
class PrivacyRow:
    """One setting's line of the privacy table: its claim, the verdict and the strongest certified bound."""

    label: str
    origin: str
    claim: str
    flags: list[str]
    composed: str
    verdict: Verdict
    bound: str
    bound_note: str
    view: str = ""


VIEW_NOTES = {"aggregate": "tested on the aggregate view: the noisy sum, other clients' updates known"}


def privacy_row(setting: dict[str, Any]) -> PrivacyRow:
    guarantee = setting["mechanism"]["guarantee"]
    bound, note = _bound_text(certified_bound(setting))
    return PrivacyRow(label=setting["label"], origin=_origin(setting["mechanism"]),
                      claim=claim(guarantee["epsilon"], guarantee["delta"]),
                      flags=list(guarantee["flags"]), composed=_composed(setting["accounting"], guarantee["epsilon"]),
                      verdict=headline(setting), bound=bound, bound_note=note,
                      view=VIEW_NOTES.get(setting["mechanism"].get("view", "server"), ""))


@dataclass(frozen=True)
class AttackRow:
    """One setting's line of the attacks table: identification, probe and inversion scores."""

    label: str
    identification: str
    probe_ssim: str
    ssim: str
    mse: str
    psnr: str


def attack_row(setting: dict[str, Any]) -> AttackRow:
    return AttackRow(label=setting["label"], identification=_identification_cell(setting["identification"]),
                     probe_ssim=_before_after(setting["probe"], "ssim_mean"),
                     ssim=_before_after(setting["inversion"], "ssim_mean"),
                     mse=_before_after(setting["inversion"], "mse_mean"),
                     psnr=_before_after(setting["inversion"], "psnr_mean", ".4g", " dB"))


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


def baseline(settings: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The audit's run without a mechanism (``none``) that trained, against which utility is read; None if none."""
    return next((s for s in settings if s["mechanism"]["name"] == "none" and s["training"] is not None), None)


def _versus(setting: dict[str, Any], reference: dict[str, Any] | None) -> str:
    """The accuracy difference to the run without a mechanism, in percentage points."""
    if setting["training"] is None or reference is None or reference is setting:
        return "-"
    difference = 100 * (setting["training"]["final"]["test_accuracy"] - reference["training"]["final"]["test_accuracy"])
    return f"{difference:+.2f} points"


def utility_row(setting: dict[str, Any], reference: dict[str, Any] | None = None) -> UtilityRow:
    """The utility table's cells for one setting, each number with its unit; "not run" without training."""
    mechanism, training = setting["mechanism"], setting["training"]
    final = None if training is None else training["final"]
    return UtilityRow(
        label=setting["label"], mechanism=mechanism["name"],
        params=_params(mechanism["params"], mechanism["clip_norm"]), origin=_origin(mechanism),
        accuracy=NOT_RUN if final is None else percent(final["test_accuracy"]),
        versus=_versus(setting, reference),
        bits=NOT_RUN if final is None else _bits(final),
        compression=NOT_RUN if final is None else
        "-" if final["compression_vs_float32"] is None else number(final["compression_vs_float32"], unit="x"),
        snr=NOT_RUN if final is None else _snr(final.get("snr_db")),
    )


def summary_tables(settings: list[dict[str, Any]]) -> list[tuple[str, str, tuple[str, ...], list[Any]]]:
    """The summary's tables, (id, heading, columns, rows), leaving out a table where no setting has anything but
    "not run" (an account document has no attacks; an attack document trained nothing)."""
    reference = baseline(settings)
    tables = [("summary-privacy", "Privacy: claims and verdicts", PRIVACY_COLUMNS, [privacy_row(s) for s in settings]),
              ("summary-attacks", "Attacks: what the adversary recovered", ATTACK_COLUMNS,
               [attack_row(s) for s in settings]),
              ("summary-utility", "Utility and cost", UTILITY_COLUMNS,
               [utility_row(s, reference) for s in settings])]
    return [table for table in tables if any(_filled(row) for row in table[3])]


def _filled(row: Any) -> bool:
    """Whether a summary row holds anything but its label, its mechanism and "not run" / "-" cells."""
    skip = {"label", "mechanism", "params", "origin", "flags"}
    values = [getattr(row, f.name) for f in dataclasses.fields(row) if f.name not in skip]
    return any(v not in (NOT_RUN, "-", "") and not (isinstance(v, Verdict) and v.text == NOT_RUN) for v in values)


def _adjusted(headline: dict[str, Any]) -> str:
    """"p = 3e-09, 4.2e-08 adjusted over the audit's 14 tests" for a graded refutation; the p-value alone
    otherwise (and in a file from before ``evidence``)."""
    if headline["p_value"] is None:
        return ""
    if not headline.get("evidence"):
        return p_value(headline["p_value"])
    return (f"{p_value(headline['p_value'])}, {number(headline['adjusted_p_value'], '.2g')} adjusted over the "
            f"audit's {_plural(headline['family'], 'test')}")


def _decided_by(headline: dict[str, Any]) -> str:
    """"decided by: identification among 10 candidates, p = 3e-09, 4.2e-08 adjusted over the audit's 14 tests;
    12 tests" (for no claim: what the tests were for)."""
    if headline["verdict"] == "no claim":
        return f"nothing to refute; {_plural(headline['tests'], 'test')} measured what it leaks"
    p = f", {_adjusted(headline)}" if headline["p_value"] is not None else ""
    return f"decided by: {headline['decided_by']['name']}{p}; {_plural(headline['tests'], 'test')}"


def interval(low: float, high: float) -> str:
    return f"[{number(low, '.2f')}, {number(high, '.2f')}]"


def _identification_cell(identification: dict[str, Any] | None) -> str:
    """"M=10: 0.31 [0.27, 0.36] ≤ 0.42; M=100: ..." (NOT_RUN without the test)."""
    if identification is None:
        return NOT_RUN
    parts = []
    for t in identification["tests"]:
        relation = ">" if t["rate"] > t["bound"] else "≤"
        parts.append(f"M={t['candidates']}: {number(t['rate'], '.2f')} {interval(*t['interval'])} {relation} "
                     f"{number(t['bound'])}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Findings:
    """The report's opening: claims refuted (with the evidence), claims consistent, mechanisms without a claim (and
    what they leaked), settings where nothing could be concluded (and why), utility against the run without a
    mechanism, and where reconstruction from one update begins."""

    refuted: list[str]
    consistent: list[str]
    no_claim: list[str]
    unresolved: list[str]
    utility: list[str]
    reconstruction: list[str]
    whole_run: list[str] = field(default_factory=list)

    def __bool__(self) -> bool:
        return any((self.refuted, self.consistent, self.no_claim, self.unresolved, self.utility, self.reconstruction,
                    self.whole_run))

    def sections(self) -> list[tuple[str, str, list[str]]]:
        """(heading, badge class, items) of each non-empty part, in report order."""
        parts = (("claims refuted", "violated", self.refuted),
                 ("claims consistent with every test", "consistent", self.consistent),
                 ("no privacy claim", "none", self.no_claim),
                 ("nothing concluded", "inconclusive", self.unresolved),
                 ("the whole run's claim, tested by canary clients", "other", self.whole_run),
                 ("utility: accuracy against the run without a mechanism", "other", self.utility),
                 ("where reconstruction from one update begins", "other", self.reconstruction))
        return [part for part in parts if part[2]]


def _analytic(setting: dict[str, Any]) -> str:
    """"the noise it really adds is ε = 16.5 per round, not 10 (claim-exceeded): it adds less noise than its
    claim assumes", the accounting check's reason when it is violated, or "" when no computation refutes the
    claim."""
    mechanism, accounting = setting["mechanism"], setting["accounting"]
    actual, claimed = mechanism.get("true_epsilon"), mechanism["guarantee"]["epsilon"]
    found = []
    if actual is not None and claimed is not None and "claim-exceeded" in mechanism["guarantee"]["flags"]:
        found.append(f"the noise it really adds is ε = {number(actual)} per round, not {number(claimed)} (computed "
                     "from the noise's law; flag claim-exceeded): the mechanism adds less noise than its claim "
                     "assumes")
    check = None if accounting is None else accounting.get("check")
    if check is not None and check["verdict"] == "violated":
        found.append(f"accounting check: {check['reason']}")
    return "; ".join(found)


def _evidence(setting: dict[str, Any]) -> str:
    """The deciding test's evidence, in words."""
    headline, test, ident = setting["verdict"], setting["distinguish"], setting["identification"]
    decided = headline["decided_by"]
    kind = decided["kind"]
    if headline.get("evidence") == "analytic":
        bound = certified_bound(setting)
        reach = "" if bound is None else (f"; the strongest test certified ε ≥ {number(bound['epsilon_lower_bound'])} "
                                          f"(cap {number(bound['max_certifiable'])} at these trials)")
        return _analytic(setting) + reach
    if kind == "identification" and ident is not None:
        m = decided["candidates"]
        t = next(t for t in ident["tests"] if t["candidates"] == m)
        return (f"the informed adversary identified the target among {m} candidates in {t['successes']} of "
                f"{t['trials']} trials ({number(t['rate'], '.2f')}, lower limit {number(t['lower'])}) while "
                f"the claim allows at most {number(t['bound'])} ({t['bound_form']})")
    if kind == "distinguishing" and test is not None:
        return (f"certified ε ≥ {number(test['epsilon_lower_bound'])} against the claimed "
                f"{number(test['claimed_epsilon'])} ({test['worst_pair']})")
    if kind == "canary" and setting.get("canary"):
        canary = setting["canary"]
        worst = next(v for v in canary["views"] if _canary_name(canary, v) == decided["name"])
        r = worst["result"]
        return (f"{r['correct']:,} of {r['guesses']:,} guesses on {r['canaries']:,} canaries were right: certified "
                f"ε ≥ {number(r['epsilon_lower_bound'])} ({r['bound']}) against {_judged(canary['claim'])}")
    if kind == "adaptive" and test is not None:
        a = next((a for a in test["adaptive"] if a["test"] == decided["test"]), None)
        if a is not None:
            return (f"{a['test']}: certified ε ≥ {number(a['epsilon_lower_bound'])} against "
                    f"{epsilon(a['claimed_epsilon'])} ({a['claim']})")
    return decided["name"]


def _why_unresolved(setting: dict[str, Any]) -> str:
    headline, test = setting["verdict"], setting["distinguish"]
    if headline["verdict"] == "vacuous claim":
        return "the claim bounds nothing these tests measure"
    if test is not None and test["claimed_epsilon"] is not None and test["max_certifiable"] <= test["claimed_epsilon"]:
        return (f"claim ε {number(test['claimed_epsilon'])} exceeds what {test['trials']:,} trials can certify "
                f"({number(test['max_certifiable'])}), and the identification bound allows "
                f"{'certain identification' if _bound_is_one(setting) else 'more than these trials can exceed'}")
    return f"no test could refute the claim ({headline['decided_by']['name']})"


def _bound_is_one(setting: dict[str, Any]) -> bool:
    ident = setting["identification"]
    return ident is None or all(t["bound"] >= 1 for t in ident["tests"])


def _leaked(setting: dict[str, Any]) -> str:
    """What the tests measured of a mechanism that claims nothing: its certified bound, identification."""
    parts = []
    bound = certified_bound(setting)
    if bound is not None:
        perfect = " (a perfect test: the cap at these trials)" if bound["epsilon_lower_bound"] >= 0.999 * bound[
            "max_certifiable"] else ""
        parts.append(f"certified ε ≥ {number(bound['epsilon_lower_bound'])}{perfect}")
    probe = setting["probe"]
    if probe is not None:
        parts.append(f"probe SSIM {number(probe['defended']['ssim_mean'], '.2f')} (clean "
                     f"{number(probe['clean']['ssim_mean'], '.2f')})")
    return "; ".join(parts)


def _utility(settings: list[dict[str, Any]], classes: int | None) -> list[str]:
    """One line per trained setting: its final accuracy against the run without a mechanism."""
    trained = [s for s in settings if s["training"] is not None]
    if len(trained) < 2:
        return []
    reference = baseline(settings)
    chance = None if classes is None else 1 / classes
    lines = []
    if reference is None:
        lines.append("no run without a mechanism in this audit: accuracies below are absolute"
                     + ("" if chance is None else f" (chance: {percent(chance)})"))
    else:
        lines.append(f"{reference['label']} (no mechanism): {percent(reference['training']['final']['test_accuracy'])}"
                     + ("" if chance is None else f"; chance is {percent(chance)}"))
    for s in trained:
        if s is reference:
            continue
        accuracy = s["training"]["final"]["test_accuracy"]
        near = chance is not None and accuracy < 1.5 * chance
        lines.append(f"{s['label']}: {percent(accuracy)}"
                     + ("" if reference is None else f" ({_versus(s, reference)})")
                     + ("; near chance: the model learns almost nothing" if near else ""))
    return lines


def rough(value: float) -> str:
    """A magnitude to two significant digits, as a reader says it: 3,500; 2.5; 0.031."""
    rounded = float(f"{value:.2g}")
    return f"{rounded:,.0f}" if rounded >= 100 else f"{rounded:g}"


def _reconstruction(settings: list[dict[str, Any]]) -> list[str]:
    """One line per swept mechanism: where mean SSIM reaches the sweep's level, against the audited claims."""
    lines = []
    for group, (sweep, members) in sweep_groups(settings).items():
        claims = sorted({s["mechanism"]["guarantee"]["epsilon"] for s in members
                         if s["mechanism"]["guarantee"]["epsilon"] is not None})
        audited = f"ε {number(claims[0])}" + (f" to {number(claims[-1])}" if len(claims) > 1 else "")
        crossing, top = sweep["crossing_eps"], sweep["points"][-1]
        if crossing is None:
            lines.append(f"{group}: no reconstruction from one update up to ε = {rough(top['eps'])} (mean SSIM "
                         f"{number(top['ssim'], '.2f')} there" + (f"; {sweep['stopped']}" if sweep.get("stopped")
                                                                  else "") + f"); the audited claims are {audited}.")
            continue
        where = (f"reconstruction from one update starts near ε ≈ {rough(crossing)} (mean SSIM reaches "
                 f"{number(sweep['level'])})")
        matches = "" if sweep.get("reaches_clean_eps") is None else (
            f", and matches the clean attack's ({number(sweep['clean_ssim'], '.2f')}) near ε ≈ "
            f"{rough(sweep['reaches_clean_eps'])}")
        if crossing <= claims[-1]:
            reached = max((s for s in members if s["probe"] is not None),
                          key=lambda s: s["mechanism"]["guarantee"]["epsilon"])
            lines.append(f"{group}: {where}{matches}, inside the audited claims ({audited}): at ε "
                         f"{number(reached['mechanism']['guarantee']['epsilon'])} the probe reconstructs with mean "
                         f"SSIM {number(reached['probe']['defended']['ssim_mean'], '.2f')}.")
            continue
        best = max(members, key=lambda s: s["mechanism"]["guarantee"]["epsilon"] or 0)
        ident = best["identification"]
        leak = ""
        if ident is not None and ident["tests"]:
            t = ident["tests"][0]
            leak = (f"; below the start the leakage is identification (success {number(t['rate'], '.2f')} among "
                    f"{t['candidates']} at ε {number(best['mechanism']['guarantee']['epsilon'])}, guessing "
                    f"{number(1 / t['candidates'], '.2f')})")
        lines.append(f"{group}: {where}, {rough(crossing / claims[-1])} times the largest audited claim ({audited})"
                     f"{matches}{leak}.")
    return lines


def sweep_groups(settings: list[dict[str, Any]]) -> dict[str, tuple[dict[str, Any], list[dict[str, Any]]]]:
    """The reconstruction sweeps, one per distinct sweep (settings that differ only in the swept epsilon share
    it): group label -> (the sweep, the settings that share it), in setting order."""
    groups: dict[str, tuple[dict[str, Any], list[dict[str, Any]]]] = {}
    for s in settings:
        sweep = (s["probe"] or {}).get("sweep")
        if sweep is None:
            continue
        label = sweep["group"]
        if label not in groups:
            groups[label] = (sweep, [])
        groups[label][1].append(s)
    return groups


def class_count(results: dict[str, Any]) -> int | None:
    """How many classes the data has (for the chance level), where the provenance records it."""
    data = results["provenance"]["data"]
    return None if data is None else data.get("classes")


def findings(settings: list[dict[str, Any]], classes: int | None = None) -> Findings:
    """Refuted, consistent, no-claim and unresolved settings (by their headline verdict), each with its evidence;
    utility against the run without a mechanism (``classes``: for the chance level); the reconstruction sweep."""
    refuted, consistent, no_claim, unresolved = [], [], [], []
    for s in settings:
        headline = s["verdict"]
        if headline is None:
            continue
        claimed = claim(s["mechanism"]["guarantee"]["epsilon"], s["mechanism"]["guarantee"]["delta"])
        p = f" ({_adjusted(headline)})" if headline["p_value"] is not None else ""
        if headline["verdict"] in ("violated", "claim holds only cell-locally"):
            strength = f" ({headline['evidence']} refutation)" if headline.get("evidence") else ""
            also = _analytic(s) if headline.get("evidence") != "analytic" else ""
            refuted.append(f"{s['label']}: {headline['verdict']}{strength}: claim {claimed}; {_evidence(s)}{p}"
                           + (f". Also by computation: {also}" if also else "") + ".")
        elif headline["verdict"] == "consistent":
            bound = certified_bound(s)
            strongest = "" if bound is None else f"; strongest certified ε ≥ {number(bound['epsilon_lower_bound'])}"
            consistent.append(f"{s['label']} ({claimed}): {_plural(headline['tests'], 'test')}, none refuted it"
                              f"{strongest}.")
        elif headline["verdict"] == "no claim":
            leaked = _leaked(s)
            no_claim.append(f"{s['label']}: makes no privacy claim" + (f"; measured: {leaked}" if leaked else "") + ".")
        else:
            unresolved.append(f"{s['label']} ({claimed}): {headline['verdict']}: {_why_unresolved(s)}.")
    return Findings(refuted, consistent, no_claim, unresolved, _utility(settings, classes), _reconstruction(settings),
                    _whole_run(settings))


def _whole_run(settings: list[dict[str, Any]]) -> list[str]:
    """One line per setting whose canary clients tested the whole run's claim: the claim and each view's bound."""
    lines = []
    for s in settings:
        canary = s.get("canary")
        if not canary or canary["kind"] != "fl":
            continue
        views = "; ".join(f"{v['view']} view: ε ≥ {number(v['result']['epsilon_lower_bound'])}, {v['result']['verdict']}"
                          for v in canary["views"])
        lines.append(f"{s['label']}: {_judged(canary['claim'])}, {canary['canaries']:,} canary clients: {views}.")
    return lines


def _judged(claim_: dict[str, Any]) -> str:
    """The claim a canary audit judged, in words: ε at δ on its curve, over how many rounds."""
    if claim_["epsilon"] is None:
        return "no claim"
    accountant = claim_.get("accountant_epsilon")
    said = ("" if accountant is None or abs(accountant - claim_["epsilon"]) < 5e-4 * max(1.0, accountant)
            else f" (the accountant's {number(accountant)})")
    curve = f", {claim_['curve']}" if claim_["curve"] else ", its (ε, δ) curve"
    rounds = "" if claim_["rounds"] == 1 else f", {claim_['rounds']} rounds"
    return f"{epsilon(claim_['epsilon'])}{said} at δ = {number(claim_['delta'])}{curve}{rounds}"


def _canary_name(canary: dict[str, Any], view: dict[str, Any]) -> str:
    return canary_test(canary, view)["name"]


def canary_rows(settings: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], str]]:
    """Every judged view of every setting's one-run canary audit: (cells, verdict class)."""
    rows = []
    for s in settings:
        canary = s.get("canary")
        for view in (canary or {}).get("views", []):
            r = view["result"]
            judged = _judged(canary["claim"])
            rule = r["guess_rule"] + ("" if r["guess_rule"] != "grid" else
                                      f" ({len(r['grid'])} k, {number(100 * r['per_test_confidence'], '.4g')} % each)")
            bound = f"≥ {number(r['epsilon_lower_bound'])} ({r['bound']})"
            if r.get("refuted_curve") and r.get("curve_epsilon") is not None:
                bound += f"; refutes {r['refuted_curve']} (its ε {number(r['curve_epsilon'])})"
            rows.append(((s["label"], judged, view["view"], view["scoring"], f"{r['guesses']:,} ({rule})",
                          f"{r['correct']:,} of {r['guesses']:,} (m = {r['canaries']:,})", bound,
                          _canary_cap(r), r["verdict"]), VERDICT_CLASSES.get(r["verdict"], "other")))
    return rows


def _canary_cap(result: dict[str, Any]) -> str:
    """The cap of a canary view: the certified bound's, and for f-DP the refuted curve's (what the verdict reads)."""
    cap = number(result["max_certifiable"])
    curve = result.get("curve_max_certifiable")
    return cap if curve is None else f"{cap} (curve's ε {number(curve)})"


def canary_heading(settings: list[dict[str, Any]]) -> tuple[str, str]:
    """The canary section's heading and its one-paragraph explanation (FL runs: the whole run's claim)."""
    kinds = {s["canary"]["kind"] for s in settings if s.get("canary")}
    if kinds == {"idealized"}:
        return ("One-run canary audit", "Each canary is one call of the mechanism on the claim's neighbouring pair, "
                "included with probability 1/2; the bound certifies the one-round claim from the k guesses of one "
                "run. A bound above the claimed ε refutes it.")
    return ("Whole run: canary clients against the composed claim",
            "Canary clients (each included with probability 1/2 and sampled like every client) took part in a run of "
            "their own, trained like the audited one; each view's scores give a one-run bound judged against the "
            "claim users cite, the whole run's: composed over the rounds and amplified by client sampling where the "
            "claim covers it. The per-round tests above judge one round's claim; these judge the run's.")


def identification_rows(settings: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], str]]:
    """Every identification test, and each probe's reconstructions matched among M candidates, with the
    claim's bound: (cells, verdict class)."""
    rows = []
    for s in settings:
        ident, probe = s["identification"], s["probe"]
        for t in (ident or {}).get("tests", []):
            rows.append(((s["label"], f"informed adversary ({ident['scoring']}), {t['trials']} trials",
                          str(t["candidates"]), f"{number(t['rate'], '.3f')} {interval(*t['interval'])}",
                          f"{number(t['bound'])} ({t['bound_form']})", number(t["p_value"], ".2g"),
                          t["verdict"]), VERDICT_CLASSES.get(t["verdict"], "other")))
        for m in (probe or {}).get("matched", {}).get("defended", []):
            exceeds = "above the bound (reported, not judged)" if m["exceeds_bound"] else "reported, not judged"
            rows.append(((s["label"], f"inversion probe ({probe['attack']}): nearest of M to the reconstruction, "
                          f"{m['clients']} clients", str(m["candidates"]),
                          f"{number(m['rate'], '.3f')} {interval(*m['interval'])}",
                          f"{number(m['bound'])} ({m['bound_form']})", "-", exceeds), "none"))
    return rows


# How the generic audit setting's note (``auditkit.attacks.audit_settings``) says where its norm came from: from the claim's
# sensitivity or the mechanism's clip norm (its pairs are neighbours the claim covers), or assumed.
_GENERIC_SETTING = "generic default: the mechanism declares no audit setting: "
_NORM_ASSUMED = "names no norm: l2 assumed"
_CLAIMS_NEIGHBOURS = ("the norm of the claim's sensitivity", "the claim's l-infinity sensitivity",
                      "the mechanism's clip norm")
_REFUTING = ("violated", "claim holds only cell-locally")


def notes(settings: list[dict[str, Any]]) -> list[str]:
    """The notes under the summary, per setting:

    * a mechanism whose output is not determined by its seeds (``mechanism.reproducible`` false): its results will
      not reproduce;
    * a distinguishing test that ran on a generic default, by its verdict: the generic neighbouring pairs (the
      mechanism declares no audit setting) weaken a "consistent" verdict (a worse pair may exist), while a
      refutation found on them stands when they are neighbours within the claim's sensitivity (the generic
      setting takes the claim's norm where its sensitivity names one), and holds only if the claim's neighbours
      include them where the norm was assumed; outputs drawn one call at a time (the generic sampling) are exact,
      and weaken no verdict.
    """
    found = []
    for setting in settings:
        label = setting["label"]
        if setting["mechanism"].get("reproducible") is False:
            found.append(f"{label}: the mechanism's output is not determined by its seeds (two encodes under the same "
                         "seeds differed): these results will not reproduce, and a rerun may reach another verdict. "
                         "Its noise should be drawn from auditkit.mechanisms.randomness.private_generator(private_seed, seed, "
                         "purpose).")
        test = setting["distinguish"]
        if test is None:  # tiling and the audit setting matter to that test alone
            continue
        verdict, claim_ = test["verdict"], setting["mechanism"]["guarantee"]
        parts = []
        where = test.get("setting") or ""
        if setting["mechanism"]["capabilities"].get("audit_setting") == GENERIC and verdict in (*_REFUTING,
                                                                                                  "consistent"):
            pairs = where.removeprefix(_GENERIC_SETTING) if where.startswith(_GENERIC_SETTING) else (
                "the generic 2-D pairs")
            said = f"the generic neighbouring pairs ({pairs}), as the mechanism declares no audit setting"
            if verdict == "consistent":
                parts.append(f"ran on {said}. This weakens the verdict \"consistent\": these pairs may miss the "
                             "mechanism's worst case (a worse pair may exist)")
            elif any(marker in where for marker in _CLAIMS_NEIGHBOURS):
                parts.append(f"ran on {said}. The verdict \"{verdict}\" stands: these pairs are neighbours within "
                             "the claim's sensitivity, and one pair the claim covers on which it fails refutes it")
            else:
                sensitivity = claim_["sensitivity"] or "not stated"
                why = (f"its sensitivity ({sensitivity}) names no norm, so the l2 ball was assumed"
                       if _NORM_ASSUMED in where else f"the claim's sensitivity reads \"{sensitivity}\"")
                parts.append(f"ran on {said}. The verdict \"{verdict}\" holds only if the claim's neighbours "
                             f"include these pairs: {why}")
        sampling = test.get("sampling") or ""
        if sampling.startswith("per call"):
            parts.append(f"drew its outputs per call, {sampling.removeprefix('per call: ')}: exact, only slower "
                         "than a declared tiling or batch sampler, so this weakens no verdict")
        if parts:
            found.append(f"{label}: the distinguishing test " + "; it ".join(parts) + ".")
    return found


@dataclass(frozen=True)
class AdaptiveRow:
    """One adaptive distinguishing test of one setting."""

    label: str
    test: str
    claim: str
    lower_bound: str
    cap: str
    verdict: str
    verdict_class: str
    note: str


def _stated(claim: str) -> str:
    """The mechanism's own claim after what an adaptive test checks (none recorded in an upgraded version 4 file
    that lacked it)."""
    return f"; stated claim: {claim}" if claim else ""


def adaptive_rows(settings: list[dict[str, Any]]) -> list[AdaptiveRow]:
    """Every adaptive test of every setting that ran the distinguishing stage, in setting order."""
    return [
        AdaptiveRow(
            label=setting["label"],
            test=test["test"],
            claim=f"{test['claim']}{_stated(test['stated_claim'])} ({epsilon(test['claimed_epsilon'])})",
            lower_bound=f"≥ {number(test['epsilon_lower_bound'])}",
            cap=f"cap {number(test['max_certifiable'])}" + (
                f", {p_value(test['p_value'])}" if test.get("p_value") is not None else ""),
            verdict=test["verdict"],
            verdict_class=VERDICT_CLASSES.get(test["verdict"], "other"),
            note=test["note"],
        )
        for setting in settings if setting["distinguish"] is not None
        for test in setting["distinguish"]["adaptive"]
    ]


@dataclass(frozen=True)
class Reconstruction:
    """A setting's reconstruction grid (path relative to the results folder) and its caption."""

    path: str
    caption: str


def _where(inversion: dict[str, Any]) -> str:
    """Which view was attacked: an FL round's, or ``auditkit attack``'s single-image gradients."""
    if inversion["round"] is None:
        return f"on the {inversion['view']}'s view of single-image gradients"
    return f"on the {inversion['view']}'s view at round {inversion['round']}"


def reconstructions(settings: list[dict[str, Any]]) -> list[Reconstruction]:
    """One grid per setting whose inversion stage drew one."""
    grids = []
    for s in settings:
        inversion = s["inversion"]
        if inversion is None or inversion["figure"] is None:
            continue
        rows = ["ground truth", *(["clean"] if inversion["clean"] is not None else []), "defended",
                *(view["name"] for view in inversion.get("views", []))]
        grids.append(Reconstruction(path=inversion["figure"], caption=f"{s['label']}: {inversion['attack']} "
                                    f"{_where(inversion)} (rows: {', '.join(rows)})."))
    for s in settings:
        probe = s["probe"]
        if probe is not None:
            grids.append(Reconstruction(path=probe["figure"], caption=(
                f"{s['label']}: inversion probe ({probe['attack']}, {probe['clients']} clients with "
                f"{_plural(probe['batch_size'], 'example')} each, {_plural(probe['local_steps'], 'step')}, round "
                f"{probe['round']}; rows: the client's example, the clean reconstruction, the defended one, and, "
                f"where drawn, the candidate the identification adversary picked from the server's view).")))
    return grids


@dataclass(frozen=True)
class Details:
    """A setting's claim in full, and how each stage was run."""

    label: str
    summary: str
    facts: list[tuple[str, str]]
    assumptions: list[str]
    caveats: list[str]
    estimates: list[tuple[str, ...]]
    estimates_heading: str = "Every pair's estimate"


def capabilities(mechanism: dict[str, Any]) -> str:
    """Which capabilities the mechanism declares, and which generic defaults stood in (and what each means)."""
    named = {key: CAPABILITIES.get(key, (key.replace("_", " "), "")) for key in mechanism["capabilities"]}
    by_value: dict[str, list[str]] = {}
    for key, value in mechanism["capabilities"].items():
        name, meaning = named[key]
        by_value.setdefault(value, []).append(f"{name} ({meaning})" if value == GENERIC and meaning else name)
    if set(by_value) == {"unknown"}:
        return "unknown (these results were written before auditkit recorded them, as schema v2)"
    parts = [f"{heading}: {', '.join(by_value[value])}" for value, heading in
             (("declared", "declared by the mechanism"), (GENERIC, "generic defaults used"), ("unknown", "unknown"))
             if value in by_value]
    return "; ".join(parts)


def _guarantee_text(guarantee: dict[str, Any]) -> str:
    """A claim in one line: its summary, unit, scope, threat model, assumptions and caveats."""
    text = (f"{guarantee['summary']} (unit: {guarantee['unit']}; scope: {guarantee['scope']}; "
            f"threat model: {guarantee['threat_model']})")
    for heading, items in (("assumes", guarantee["assumptions"]), ("caveats", guarantee["caveats"])):
        if items:
            text += f"; {heading}: {'; '.join(items)}"
    return text


def _accounting_facts(accounting: dict[str, Any] | None) -> list[tuple[str, str]]:
    if accounting is None:
        return [("accounting", NOT_RUN)]
    runs = "; ".join(f"{run['backend']}: {run['event']}" for run in
                     (accounting["composed"], accounting["composed_actual"]) if run is not None)
    how = runs or (f"refused: {accounting['refusal']}" if accounting["refusal"] else "-")
    facts = [("accounting", f"backend asked for: {accounting['backend']}, {accounting['rounds']} rounds at "
                            f"δ = {number(accounting['composition_delta'])}; {how}")]
    if accounting.get("check") is not None:
        facts.append(("accounting check", f"{accounting['check']['verdict']}: {accounting['check']['reason']}"))
    if accounting.get("paper_claim") is not None:
        facts.append(("paper's claim", _guarantee_text(accounting["paper_claim"])))
    example = accounting.get("example_level")
    if example is not None:
        facts.append(("example-level (DP-SGD)", (
            f"z = {number(example['noise_multiplier'])}, C = {number(example['max_grad_norm'])}, expected batch "
            f"{example['batch_size']}; {example['backend']}: {example['event']}; worst client {example['client']} "
            f"({example['client_examples']} examples); {example['note']}")))
    return facts


def _distinguish_facts(test: dict[str, Any] | None) -> list[tuple[str, str]]:
    if test is None:
        return [("distinguishing", NOT_RUN)]
    if test["p_value"] is not None:
        p = (f"{number(test['p_value'], '.2g')}, of \"the mechanism is ({number(test['claimed_epsilon'])}, "
             f"{number(test['delta'])})-DP as claimed\" on the worst pair ({test['worst_pair']})")
    else:
        p = "none (no claim to test)" if test["claimed_epsilon"] is None else "not computed"
    return [
        ("distinguishing", f"{test['trials']:,} trials per pair, {test['tests']} tests (Bonferroni), worst pair "
                           f"{test['worst_pair']}, statistic {test['statistic']}, "
                           f"claim {claim(test['claimed_epsilon'], test['delta'])}"),
        ("distinguishing setting", test["setting"] or "not recorded"),
        ("sampling", test["sampling"] or "not recorded"),
        ("p-value", p),
    ]


def _inversion_facts(inversion: dict[str, Any] | None) -> list[tuple[str, str]]:
    """How the inversion ran (at an FL round, or on ``auditkit attack``'s single-image gradients), the label
    accuracy, the server view's error and rate, and each further view of a transcript."""
    if inversion is None:
        return [("inversion", NOT_RUN)]
    parts = [f"{inversion['attack']} {_where(inversion)}"]
    if inversion["clients"] is not None:
        parts.append(f"clients {', '.join(map(str, inversion['clients']))}")
    if "images" in inversion or "source" in inversion:
        parts.append(" ".join(str(inversion[key]) for key in ("images", "source") if key in inversion) + " images")
    if "label_given" in inversion:
        parts.append("true labels given to the attacker" if inversion["label_given"] else
                     "labels inferred by the attack")
    parts.append(f"model {inversion['model']}")
    text = f"{', '.join(parts)}; observation: {inversion['observation']}; SSIM: {inversion['ssim_variant']}"
    facts = [("inversion", text + ("; no clean reference run" if inversion["clean"] is None else ""))]
    accuracies = [(name, scores.get("label_accuracy")) for name, scores in
                  (("clean", inversion["clean"]), ("defended", inversion["defended"])) if scores is not None]
    if any(value is not None for _, value in accuracies):
        facts.append(("label accuracy", " → ".join(f"{name} {percent(value)}" for name, value in accuracies)))
    seen = [*([f"error std {number(inversion['error_std'])}"] if "error_std" in inversion else []),
            *([number(inversion["bits_per_coordinate"], unit=" bits/coord")] if "bits_per_coordinate" in inversion
              else [])]
    if seen:
        facts.append(("server's view", ", ".join(seen)))
    for view in inversion.get("views", []):  # a transcript's weaker estimates, attacked the same way
        scores = view["defended"]
        facts.append((f"inversion of {view['name']}", f"{view['observation']}: mean SSIM "
                      f"{number(scores['ssim_mean'])}, MSE {number(scores['mse_mean'])}"))
    return facts


def _stage_facts(setting: dict[str, Any]) -> list[tuple[str, str]]:
    """How the training, accounting, distinguishing and inversion stages were run."""
    training = setting["training"]
    facts = [("training", NOT_RUN if training is None else
              f"protocol {training['protocol']}, {_plural(len(training['rounds']), 'round')}, checkpoints at "
              f"{', '.join(map(str, training['checkpoints'])) or 'none'}")]
    return [*facts, *_accounting_facts(setting["accounting"]), *_distinguish_facts(setting["distinguish"]),
            *_inversion_facts(setting["inversion"]), *_probe_facts(setting["probe"]),
            *_identification_facts(setting["identification"]), *_canary_facts(setting.get("canary"))]


def _canary_facts(canary: dict[str, Any] | None) -> list[tuple[str, str]]:
    if canary is None:
        return []
    details = ", ".join(f"{key.replace('_', ' ')} {_fact_value(value)}" for key, value in canary["details"].items())
    return [("one-run canary audit", f"{canary['kind']}, {canary['canaries']:,} canaries, {canary['bound']} bound at "
                                     f"{number(100 * canary['confidence'], '.4g')} % family-wise; "
                                     f"{canary['claim']['note']}; {number(canary['seconds'], '.3g')} s"
                                     + (f"; {details}" if details else ""))]


def _fact_value(value: Any) -> str:
    """A detail's value in a fact line: numbers to 4 significant digits, dicts as key value pairs."""
    if isinstance(value, float):
        return number(value)
    if isinstance(value, dict):
        return "(" + ", ".join(f"{k.replace('_', ' ')} {_fact_value(v)}" for k, v in value.items()) + ")"
    return str(value)


def _probe_facts(probe: dict[str, Any] | None) -> list[tuple[str, str]]:
    if probe is None:
        return [("inversion probe", NOT_RUN)]
    labels = " → ".join(f"{name} {percent(probe[name].get('label_accuracy'))}" for name in ("clean", "defended"))
    return [("inversion probe", f"{probe['attack']} at round {probe['round']}, model {probe['model']}, "
                                f"{probe['clients']} clients; observation: {probe['observation']}; "
                                f"{number(probe['bits_per_coordinate'], unit=' bits/coord')}; SSIM: "
                                f"{probe['ssim_variant']}"),
            ("probe label accuracy", labels)]


def _identification_facts(ident: dict[str, Any] | None) -> list[tuple[str, str]]:
    if ident is None:
        return [("identification", "not run (or no claim to bound it)")]
    return [("identification", f"scoring: {ident['scoring']}; candidates drawn from a pool of {ident['pool']} real "
                               f"examples; each test at {number(100 * ident['per_test_confidence'], '.4g')} % "
                               f"(Bonferroni); {ident['note']}")]


SEARCH_HEADING = ("Worst-pair search: every pair's bound predicted on its selection outputs (not certified); the "
                  "chosen pair's held-out test is the certified one")


def _estimates(test: dict[str, Any] | None) -> list[tuple[str, ...]]:
    """Every neighbouring pair's estimate of the distinguishing test, when it recorded them; a pair sampled as the
    test's ``sampling`` fact says "as above". With the worst-pair search, every candidate's predicted bound,
    the chosen one's row holding the certified estimate."""
    rows = [(e["pair"], e["statistic"], f"≥ {number(e['epsilon_lower_bound'])}", number(e["max_certifiable"]),
             number(e["p_value"], ".2g"), "as above" if e["sampling"] == test["sampling"] else e["sampling"])
            for e in (test or {}).get("estimates", [])]
    search = (test or {}).get("search")
    if not search:
        return rows
    candidates = [(c["pair"], c["statistic"], f"predicted {number(c['predicted_bound'])} (not certified)", "-", "-",
                   f"{c['selection_trials']:,} selection outputs") for c in search["candidates"]]
    chosen = rows[0]
    candidates[search["chosen"]] = (f"{chosen[0]} (chosen)", *chosen[1:])
    return candidates


def details(setting: dict[str, Any]) -> Details:
    """The claim details block of one setting."""
    mechanism = setting["mechanism"]
    guarantee = mechanism["guarantee"]
    facts = [
        ("mechanism", f"{mechanism['name']} ({_params(mechanism['params'], mechanism['clip_norm'])})"),
        ("origin", "built-in" if not _origin(mechanism) else f"plugin: {mechanism['origin']}"),
        ("sweep", _params(setting["sweep"]) if setting["sweep"] else "not swept"),
        ("capabilities", capabilities(mechanism)),
        ("claim", claim(guarantee["epsilon"], guarantee["delta"])),
        ("flags", ", ".join(guarantee["flags"]) or "none"),
        *((key.replace("_", " "), guarantee[key] or "-") for key in
          ("relation", "unit", "scope", "threat_model", "sensitivity")),
        *_stage_facts(setting),
    ]
    return Details(label=setting["label"], summary=guarantee["summary"], facts=facts,
                   assumptions=list(guarantee["assumptions"]), caveats=list(guarantee["caveats"]),
                   estimates=_estimates(setting["distinguish"]),
                   estimates_heading=SEARCH_HEADING if (setting["distinguish"] or {}).get("search")
                   else "Every pair's estimate")


def _same(values: list[Any]) -> Any:
    """The value every item shares, or None when they differ (or there are none)."""
    return values[0] if values and all(v == values[0] for v in values) else None


def _context(results: dict[str, Any]) -> list[str]:
    """Clauses on the data, model and FL training, each only where the provenance records it."""
    p = results["provenance"]
    data, model, training = p["data"], p["model"], p["training"]
    clauses = []
    if data is not None:
        split = data["partition"] + (f" split over {training['clients']} clients" if training is not None else " split")
        clauses.append(f"on the {data['dataset']} dataset ({split}; {data['train']:,} training, "
                       f"{data['validation']:,} validation and {data['test']:,} test examples)")
    if model is not None:
        clauses.append(f"model {model['name']} ({model['num_params']:,} parameters)")
    if training is not None:
        clauses.append(f"{training['rounds']} FedAvg rounds of τ = {training['tau']} local steps "
                       f"(batch size {training['batch_size']}, learning rate {number(training['lr'], 'g')}, "
                       f"participation: {training['participation']})")
    return clauses


def _attack_head(results: dict[str, Any], head: str) -> str:
    """What ``auditkit attack`` did: which attack, on how many images from which source, through which model."""
    inversions = [s["inversion"] for s in results["settings"] if s["inversion"] is not None]
    attack = _same([i["attack"] for i in inversions]) or "gradient inversion"
    images, source = _same([i.get("images") for i in inversions]), _same([i.get("source") for i in inversions])
    what = " ".join(str(x) for x in (images, source, "images") if x is not None)
    recorded = results["provenance"]["model"]
    model = (f"{recorded['name']} ({recorded['num_params']:,} parameters)" if recorded is not None else
             _same([i["model"] for i in inversions]) or "(as recorded per setting)")
    text = (f"{head}: {attack} inverts the gradients of {what}, each held by a single-image client (one local "
            f"step), through model {model}, once on the clean gradients and once on the server's view after the "
            f"mechanism")
    given = _same([i.get("label_given") for i in inversions])
    if given is not None:
        text += ", the attacker given the true labels" if given else ", the labels inferred by the attack"
    if len(inversions) > 1 and any("error_std" in i for i in inversions):
        text += "; a defence curve: each setting is one mechanism at one parameter value"
    return text


def _distinguish_head(results: dict[str, Any], head: str) -> str:
    """What ``auditkit distinguish`` did: the tests, their trials and confidence."""
    tests = [s["distinguish"] for s in results["settings"] if s["distinguish"] is not None]
    trials, count, confidence = (_same([t[key] for t in tests]) for key in ("trials", "tests", "confidence"))
    how = [text for value, text in ((trials, f"{trials or 0:,} outputs per neighbouring pair"),
                                    (count, f"{count} tests"),
                                    (confidence, f"{number(100 * (confidence or 0), 'g')} % family-wise confidence, "
                                                 f"Bonferroni")) if value is not None]
    return (f"{head} by black-box distinguishing tests on outputs sampled from the real implementation"
            + (f" ({', '.join(how)})" if how else "") + ": each certified lower bound on epsilon is set against "
            "the claim")


def _canary_head(results: dict[str, Any], head: str) -> str:
    """What ``auditkit canary`` did: the idealized one-run game, its canaries and bound."""
    runs = [s["canary"] for s in results["settings"] if s.get("canary")]
    canaries, bound = (_same([c[key] for c in runs]) for key in ("canaries", "bound"))
    return (f"{head}: the idealized one-run game, each canary one call of the mechanism on the claim's neighbouring "
            "pair" + ("" if canaries is None else f", {canaries:,} canaries")
            + ("" if bound is None else f", {bound} bound") + "; nothing was trained")


def _account_head(results: dict[str, Any], head: str) -> str:
    """What ``auditkit account`` did: the claims composed analytically, over how many rounds, how."""
    runs = [s["accounting"] for s in results["settings"] if s["accounting"] is not None]
    rounds, delta, backend = (_same([a[key] for a in runs]) for key in ("rounds", "composition_delta", "backend"))
    return (f"{head}: analytic accounting, each one-round claim composed"
            + ("" if rounds is None else f" over {_plural(rounds, 'round')}")
            + ("" if delta is None else f" at δ = {number(delta)}")
            + ("" if backend is None else f" (backend asked for: {backend})")
            + "; nothing was trained, attacked or tested")


def intro(results: dict[str, Any]) -> str:
    """One paragraph: what was run (each command's own account), on what, and how; provenance sections that are
    null are not mentioned."""
    p, command = results["provenance"], results["command"]
    what = _plural(len(results["settings"]), "mechanism setting")
    tool = f"auditkit {p['auditkit_version']} (command: {command})"
    clauses = _context(results)
    run = f"seed {p['seed']}, device {p['device']}."
    if command in ("train", "audit"):
        head = f"{what} {'trained and accounted' if command == 'train' else 'audited'} with {tool}"
        if clauses and p["data"] is not None:  # "... audited with auditkit 0.1.0 (command: audit) on the digits ..."
            head += " " + clauses.pop(0)
        return ", ".join([head, *clauses, run])
    if command == "attack":
        if p["model"] is not None:  # named with the attack
            clauses = [c for c in clauses if not c.startswith("model ")]
        head = _attack_head(results, f"{what} attacked with {tool}")
    elif command == "distinguish":
        head = _distinguish_head(results, f"{what} tested with {tool}")
    elif command == "canary":
        head = _canary_head(results, f"{what} audited in one run with {tool}")
    else:
        head = _account_head(results, f"{what} accounted with {tool}")
    return "; ".join([", ".join([head, *clauses]), run])


def provenance(results: dict[str, Any]) -> list[tuple[str, str]]:
    """The run's provenance, one (name, text) pair per fact; versions and threat models are separate tables."""
    p = results["provenance"]
    facts = [
        ("auditkit", p["auditkit_version"]),
        ("code", p["code"]),
        ("plugins", ", ".join(p["plugins"]) or "none"),
        ("seed", str(p["seed"])),
        ("device", p["device"]),
        ("platform", p["platform"]),
    ]
    if p["data"] is not None and p["data"].get("source"):
        facts.append(("data source", p["data"]["source"]))
    if p["data"] is not None:
        facts.append(("client sizes", ", ".join(f"{size:,}" for size in p["data"]["client_sizes"]) + " examples"))
    if p["training"] is not None:
        facts += [("sampling", p["training"]["sampling"]), ("participation", p["training"]["participation"])]
        if p["training"].get("backend"):
            facts.append(("training backend", p["training"]["backend"]))
    return facts + [
        ("accountant backends", ", ".join(p["accountant_backends"]) or "none"),
        ("neighbouring relations", ", ".join(p["neighbouring_relations"]) or "none"),
    ]


def config_json(results: dict[str, Any]) -> str:
    """The config as pretty, strict JSON: a non-finite number as results.json writes it ("Infinity", "-Infinity",
    "NaN"; ``auditkit.strict_json.dumps_strict``), so the config shown parses as JSON."""
    return dumps_strict(results["config"], indent=2, ensure_ascii=False)


def pairs(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    """A name -> value map as (name, text) rows, in document order."""
    return [(str(key), str(value)) for key, value in mapping.items()]


def footer(document: dict[str, Any]) -> str:
    """The line that closes every report: which auditkit wrote the document, in which schema, for which command."""
    return (f"written by auditkit {document['provenance']['auditkit_version']} as {document['schema']} version "
            f"{document['schema_version']} (command: {document['command']})")


# ---------------------------------------------------------------- a reproduction (command "reproduce")

# each verdict of a row or an ordering -> its badge class (the results report's colours: green, red, grey)
REPRODUCTION_CLASSES = {"reproduced": "consistent", "holds": "consistent", "not reproduced": "violated",
                        "reversed": "violated", "not comparable": "inconclusive", "unresolved": "inconclusive"}
REPRODUCTION_SUMMARY_COLUMNS = ("table / figure", "metric", "rows: the paper's number against ours",
                                "claimed orderings, pair by pair")
ORDERING_COLUMNS = ("claim", "column", "above", "below", "above − below", "verdict", "claimed gap")
# "How to read this report" of a reproduction, in the order a reader meets the terms
REPRODUCTION_GLOSSARY = (
    ("paper (line)", "the number as the paper prints it and the line of the seed text that states it; \"compared "
                     "as\": the same number in our unit with the half-width the verdict allows, the ± the paper "
                     "states or what its \"approximately\" or printed precision allows, whichever is wider"),
    ("ours", "the mean over seeds with its two-sided Student-t interval at the confidence in the column's heading; "
             "under it each seed's value and the setting (the configuration run, once per seed) it comes from"),
    ("ours − paper", "our mean minus the paper's number, in our unit; \"-\" where either is missing or infinite"),
    ("reproduced / not reproduced", "the paper's number, widened as above, meets our interval / misses it"),
    ("not comparable", "our run cannot be held to the paper's number: another dataset, fewer rounds than the "
                       "paper's, one seed (no interval), a setting the paper leaves unstated, a point it only "
                       "plots; the row's own reasons are in its \"why\", the whole run's under the intro"),
    ("holds / reversed / unresolved", "a claimed ordering \"A above B\", checked on our runs seed by seed (the same "
                                      "seed gives both settings the same data and initial model): the paired "
                                      "differences' interval is above 0 / below 0 / contains 0"),
    ("claimed gap", "the difference the paper claims between A and B, ± its tolerance: reproduced when it meets "
                    "the paired differences' interval"),
    ("setting", "one configuration (the paper's base overlaid with a row's), run once per seed; rows that share it "
                "share its runs, listed with what each seed measured under \"Settings run\""),
)
CURVES = ("curve", "snr_curve")  # per-round measurements: drawn in the table's figure, not tabulated


def _signed(value: float | None) -> str:
    """``+1.234`` (4 significant digits, with its sign); "-" for None and NaN."""
    return number(value, "+.4g")


def ours(row: dict[str, Any]) -> str:
    """Our mean with its interval, 4 significant digits: "70.12 [68.3, 71.94]" (the mean alone without one)."""
    if row["interval"] is None:
        return number(row["mean"])
    low, high = row["interval"]
    return f"{number(row['mean'])} [{number(low)}, {number(high)}]"


def confidence_heading(document: dict[str, Any]) -> str:
    """"ours [95 % interval]": the ours column's heading, with the document's confidence."""
    return f"ours [{number(100 * document['confidence'], 'g')} % interval]"


def _paper_column(table: dict[str, Any], item: dict[str, Any]) -> str:
    """A row's or a pair's column of the paper's table, and its point on the figure's x axis: "b = 6, eps1 = 0.1"."""
    if item["x"] is None:
        return item["column"]
    return f"{item['column']}, {table['x_label'] or 'x'} = {item['x']:g}".lstrip(", ")


def _counts(verdicts: list[str], order: tuple[str, ...]) -> list[tuple[str, str]]:
    """(text, badge class) per verdict present, in ``order``: ("3 reproduced", "consistent")."""
    return [(f"{verdicts.count(v)} {v}", REPRODUCTION_CLASSES[v]) for v in order if verdicts.count(v)]


def setting_labels(document: dict[str, Any]) -> dict[str, str]:
    """Each run's key -> "setting N", numbered in the document's order."""
    return {key: f"setting {i}" for i, key in enumerate(document["runs"], start=1)}


def reproduction_intro(document: dict[str, Any]) -> list[str]:
    """The reproduction's opening lines: the verdicts counted, the paper, the budget against the paper's, the data
    and the time, how a verdict is reached, and why no training row of this run can be held to the paper's."""
    b, paper = document["budget"], document["paper"]
    rows = [r["verdict"] for t in document["tables"] for r in t["rows"]]
    pairs = [p["verdict"] for o in document["orderings"] for p in o["pairs"]]
    counted = f"{_plural(len(rows), 'row')} of the paper's tables: " + ", ".join(
        text for text, _ in _counts(rows, ("reproduced", "not reproduced", "not comparable")))
    if pairs:
        counted += f"; {_plural(len(pairs), 'pair')} of its claimed orderings: " + ", ".join(
            text for text, _ in _counts(pairs, ("holds", "reversed", "unresolved")))
    return [
        counted + ".",
        f"Paper: {paper['title']} (sources: {', '.join(paper['sources'])}).",
        f"Budget: {b['name']}: {_plural(b['rounds'], 'round')}, {_plural(len(b['seeds']), 'seed')} (the paper: "
        f"{b['paper_rounds']} rounds, {b['paper_seeds']} seeds). {b['why']}",
        f"Data: {document['dataset']} (the paper's: {paper['data_note']}). Wall time {number(document['seconds'])} s.",
        f"Ours: the mean over seeds with its {number(100 * document['confidence'], 'g')} % Student-t interval. "
        "Verdict: reproduced when the paper's number (widened by the ± it states, or by what its 'approximately' "
        "or printed precision allows) meets our interval; not comparable when this run, or the row's setting, "
        "differs from the paper's, or when the paper only plots the point.",
        *(f"Not comparable, every training row: {reason}." for reason in document["not_comparable"]),
    ]


@dataclass(frozen=True)
class ReproducedRow:
    """One row of a paper's table as the report shows it: the paper's number, ours, the verdict and why."""

    method: str
    column: str
    paper: str
    compared: str
    line: str
    ours: str
    per_seed: str
    difference: str
    verdict: str
    css: str
    why: list[str]


@dataclass(frozen=True)
class PaperTable:
    """One table or figure of the paper: its rows, its note, and the figure we draw of it."""

    id: str
    heading: str
    metric: str
    note: str
    rows: list[ReproducedRow]
    figure: str
    figure_caption: str


def reproduction_figure(index: int) -> str:
    """The name of the figure of the document's ``index``-th table (``figures/<name>.png``)."""
    return f"reproduction-{index}"


def _figure_caption(table: dict[str, Any], document: dict[str, Any]) -> str:
    percent_ = f"{number(100 * document['confidence'], 'g')} %"
    if any(r["x"] is not None for r in table["rows"]):
        return (f"{table['id']}: ours against {table['x_label'] or 'x'}, the mean over seeds and its {percent_} band; "
                "the paper's numbers as stars.")
    if table["kind"] == "train":
        return (f"{table['id']}: our mean {table['metric'].replace('_', ' ')} per round (lines); the paper's final "
                "number as a star.")
    return f"{table['id']}: our means over seeds with their {percent_} intervals; the paper's numbers as stars."


def _why(document: dict[str, Any], table: dict[str, Any], row: dict[str, Any]) -> list[str]:
    """The row's own reasons; for a row not comparable without one, the reason that holds for it: the run's (every
    training row's, listed under the intro) or an interval the seeds' values do not give."""
    if row["why"] or row["verdict"] != "not comparable":
        return list(row["why"])
    if table["kind"] == "train" and document["not_comparable"]:
        return ["this run's reasons, for every training row (under the intro)"]
    return ["no interval: the seeds' values are not all finite"]


def _reproduced_row(document: dict[str, Any], table: dict[str, Any], row: dict[str, Any],
                    setting: str) -> ReproducedRow:
    compared = "" if row["paper_value"] is None else \
        f"compared as {number(row['paper_value'])} ± {number(row['paper_plus_minus'])}"
    return ReproducedRow(
        method=row["method"], column=_paper_column(table, row), paper=row["paper"] or "(plot)", compared=compared,
        line=f"l. {row['line']}", ours=ours(row),
        per_seed=f"per seed: {', '.join(number(v) for v in row['per_seed'])}; {setting}",
        difference=_signed(row["difference"]), verdict=row["verdict"], css=REPRODUCTION_CLASSES[row["verdict"]],
        why=_why(document, table, row))


def paper_tables(document: dict[str, Any]) -> list[PaperTable]:
    """Every table of the paper, in the document's order, with its figure's name and caption."""
    labels = setting_labels(document)
    tables = []
    for i, table in enumerate(document["tables"]):
        data = f"; data: {table['dataset']}" if table["dataset"] else ""
        rounds = "" if table["rounds"] is None else f"; {_plural(table['rounds'], 'round')} (this table's, whatever the budget)"
        tables.append(PaperTable(
            id=table["id"], heading=f"{table['id']}: {table['caption']}",
            metric=f"Metric: {table['metric_description']}{data}{rounds}.", note=table["note"],
            rows=[_reproduced_row(document, table, row, labels[row["setting"]]) for row in table["rows"]],
            figure=reproduction_figure(i), figure_caption=_figure_caption(table, document)))
    return tables


def reproduction_summary(document: dict[str, Any]) -> list[tuple[str, str, list[tuple[str, str]],
                                                                   list[tuple[str, str]]]]:
    """One line per table: (id and caption, metric, its rows' verdicts counted, its orderings' pairs' verdicts
    counted), each count with its badge class."""
    lines = []
    for table in document["tables"]:
        pairs = [p["verdict"] for o in document["orderings"] if o["table"] == table["id"] for p in o["pairs"]]
        lines.append((f"{table['id']}: {table['caption']}", table["metric"].replace("_", " "),
                      _counts([r["verdict"] for r in table["rows"]], ("reproduced", "not reproduced", "not comparable")),
                      _counts(pairs, ("holds", "reversed", "unresolved"))))
    return lines


@dataclass(frozen=True)
class OrderingRow:
    """One pair of a claimed ordering, checked on our paired seeds."""

    claim: str
    column: str
    above: str
    below: str
    difference: str
    verdict: str
    css: str
    gap: str
    gap_verdict: str
    gap_css: str


def ordering_rows(document: dict[str, Any]) -> list[OrderingRow]:
    """Every pair of every claimed ordering: above − below with its interval, the verdict, the claimed gap."""
    tables = {t["id"]: t for t in document["tables"]}
    rows = []
    for o in document["orderings"]:
        for p in o["pairs"]:
            difference = _signed(p["difference"])
            if p["interval"] is not None:
                difference += f" [{_signed(p['interval'][0])}, {_signed(p['interval'][1])}]"
            gap = p.get("gap")
            rows.append(OrderingRow(
                claim=o["id"], column=_paper_column(tables[o["table"]], p), above=p["above"], below=p["below"],
                difference=difference, verdict=p["verdict"], css=REPRODUCTION_CLASSES[p["verdict"]],
                gap="" if gap is None else f"claimed {number(gap['claimed'], 'g')} ± {number(gap['tolerance'], 'g')}",
                gap_verdict="" if gap is None else gap["verdict"],
                gap_css="" if gap is None else REPRODUCTION_CLASSES[gap["verdict"]]))
    return rows


def ordering_quotes(document: dict[str, Any]) -> list[str]:
    """Each claimed ordering as the paper words it: '003 Fig. 2 (003 Fig. 2, test_accuracy): "..."'."""
    return [f"{o['id']} ({o['table']}, {o['metric']}): “{o['quote']}”" for o in document["orderings"]]


@dataclass(frozen=True)
class SettingRun:
    """One setting of a reproduction: the rows that read it, what each seed measured, its config."""

    label: str
    kind: str
    rows: list[str]
    seeds: list[str]
    measured: list[tuple[str, ...]]
    config: str


def settings_run(document: dict[str, Any]) -> list[SettingRun]:
    """Every setting run, in the document's order: the rows that read it ("003 Table I: FL (MLP)"), one line per
    scalar measurement with a value per seed (per-round curves are drawn in the tables' figures), the config as
    strict JSON."""
    labels = setting_labels(document)
    readers: dict[str, list[str]] = {key: [] for key in document["runs"]}
    for table in document["tables"]:
        for row in table["rows"]:
            where = _paper_column(table, row)
            readers[row["setting"]].append(f"{table['id']}: {row['method']}" + (f" ({where})" if where else ""))
    runs = []
    for key, run in document["runs"].items():
        seeds = list(run["seeds"])
        names = [name for name in run["seeds"][seeds[0]] if name not in CURVES] if seeds else []
        measured = [(name.replace("_", " "), *(number(run["seeds"][s][name]) for s in seeds)) for name in names]
        runs.append(SettingRun(label=labels[key], kind=run["kind"], rows=readers[key],
                               seeds=[f"seed {s}" for s in seeds], measured=measured,
                               config=dumps_strict(run["config"], indent=2, ensure_ascii=False)))
    return runs


def reproduction_provenance(document: dict[str, Any]) -> list[tuple[str, str]]:
    """The reproduction's provenance, one (name, text) pair per fact; the versions are a separate table."""
    p = document["provenance"]
    return [("auditkit", p["auditkit_version"]), ("code", p["code"]), ("plugins", ", ".join(p["plugins"]) or "none"),
            ("platform", p["platform"]), ("paper", document["paper"]["id"]),
            ("seeds", ", ".join(map(str, document["budget"]["seeds"])))]
