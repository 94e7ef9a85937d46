"""What a report says, as plain-text strings: the one view of a results document both renderers lay out.

Every string here is unescaped text (labels, parameters and plugin names are user-supplied); the markdown
renderer escapes it for markdown, the HTML template autoescapes it.
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

# the summary figures, in report order, with their captions
FIGURE_CAPTIONS = {
    "accuracy_vs_round": "Test accuracy (%) by round, one line per setting.",
    "ssim_vs_epsilon": "Inversion SSIM on the server's view (defended, solid; clean attack, dashed) against the "
                       "one-round claimed epsilon; settings without a finite claim or without inversion are left out.",
    "ssim_vs_error_std": "Inversion SSIM against the standard deviation of the error in the server's view, one line "
                         "per mechanism; dashed: the clean attack.",
    "lower_bound_vs_epsilon": "Certified epsilon lower bound against the claimed epsilon, marked by verdict; "
                              "points above the line y = x violate the claim; dotted: the most a test with these "
                              "trials could certify (the cap).",
    "bits_vs_accuracy": "Uplink bits per coordinate against final test accuracy (%), one point per setting.",
    "identification_vs_epsilon": "Identification success (the informed adversary picks the target among M real "
                                 "candidates; 95 % Clopper-Pearson bars) against the claimed one-round epsilon, one "
                                 "series per mechanism and M; dashed, same colour: the success the claim allows (its "
                                 "reconstruction-robustness bound); dotted: guessing, 1/M. A point whose bar lies above "
                                 "its bound exceeds the claim.",
    "probe_ssim_vs_epsilon": "Inversion probe (the claim's worst case: single-example updates at the checkpoint "
                             "model) mean SSIM on the server's view against the claimed one-round epsilon, one "
                             "line per mechanism; dashed: the same attack on the clean updates.",
}
SUMMARY_COLUMNS = (
    "setting", "mechanism", "final test accuracy", "uplink", "compression vs float32", "uplink SNR (mean over rounds)",
    "claimed per round",
    "claimed over the rounds run", "verdict (worst over all tests)", "certified ε lower bound",
    "identification success ≤ the claim's bound", "probe SSIM clean → defended", "inversion SSIM clean → defended",
    "inversion MSE (pixels in [0, 1]) clean → defended", "inversion PSNR clean → defended",
)
IDENTIFICATION_COLUMNS = ("setting", "attack", "M", "success (95 % interval)", "the claim's bound", "p-value",
                          "verdict")
ADAPTIVE_COLUMNS = ("setting", "test", "claim", "certified ε lower bound", "verdict", "note")
ESTIMATE_COLUMNS = ("pair", "statistic", "certified ε lower bound", "cap", "p-value", "sampling")
VERDICT_CLASSES = {"consistent": "consistent", "violated": "violated", "vacuous claim": "vacuous",
                   "inconclusive": "inconclusive", "claim holds only cell-locally": "violated"}
NOT_RUN = "not run"
# each capability a mechanism may declare: its name in a report, and what its generic default means
CAPABILITIES = {
    "tiling": ("tiling", "no one call on tiled copies"),
    "batch_sampling": ("batch sampling", "no vectorised sampler of its own"),
    "audit_setting": ("audit setting", "the generic 2-D pairs"),
    "output_log_density": ("output density", "no likelihood-ratio statistic"),
    "dp_event": ("dp_event", "the claim composed as a generic event"),
    "true_epsilon": ("true epsilon", "the realised noise's epsilon not computed"),
}
GENERIC = "generic default"


def number(value: float | None, spec: str = ".3g", unit: str = "") -> str:
    """``value`` formatted with ``spec`` and ``unit``; None and NaN -> "-", infinities -> "inf" / "-inf"."""
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
    return "no claim" if value is None else f"ε = {number(value, '.4g')}"


def claim(epsilon_value: float | None, delta: float) -> str:
    """``ε = 1.45, δ = 1e-05`` (or "no claim" without an epsilon)."""
    return "no claim" if epsilon_value is None else f"{epsilon(epsilon_value)}, δ = {number(delta)}"


def p_value(value: float | None) -> str:
    """``p = 0.0031`` (or "" without a p-value)."""
    return "" if value is None else f"p = {number(value, '.2g')}"


def _params(params: dict[str, Any], clip_norm: str | None = None) -> str:
    """``sigma=0.8, clip=1.0 (l2)``: the clip with the norm it is measured in."""
    shown = {key: f"{value:.4g}" if isinstance(value, float) and len(repr(value)) > 8 else value  # calibrated
             for key, value in params.items()}
    items = [f"{key}={value}" + (f" ({clip_norm})" if key == "clip" and clip_norm else "")
             for key, value in shown.items()]
    if clip_norm and "clip" not in params:
        items.append(f"clip norm {clip_norm}")
    return ", ".join(items) or "no parameters"


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def _before_after(inversion: dict[str, Any] | None, key: str, spec: str, unit: str = "") -> str:
    if inversion is None:
        return NOT_RUN
    clean = "no clean run" if inversion["clean"] is None else number(inversion["clean"][key], spec, unit)
    return f"{clean} → {number(inversion['defended'][key], spec, unit)}"


def _origin(mechanism: dict[str, Any]) -> str:
    """"" for a built-in mechanism, else the plugin that registered it."""
    return "" if mechanism["origin"] == "built-in" else mechanism["origin"]


@dataclass(frozen=True)
class SummaryRow:
    """One setting's line of the summary table."""

    label: str
    mechanism: str
    params: str
    origin: str
    accuracy: str
    bits: str
    compression: str
    snr: str
    claim: str
    flags: list[str]
    composed: str
    lower_bound: str
    cap: str
    p_value: str
    verdict: str
    verdict_class: str
    evidence: str
    decided_by: str
    identification: str
    probe_ssim: str
    ssim: str
    mse: str
    psnr: str


def _composed(accounting: dict[str, Any] | None, epsilon: float | None) -> str:
    """The claim composed over the rounds run, the refusal, or "-" when there is no claim to compose; then the
    paper's own FL claim when there is one."""
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
    paper = accounting.get("paper_claim")
    if paper is not None:
        parts.append(f"paper's FL claim: {claim(paper['epsilon'], paper['delta'])}")
    return "; ".join(parts) or "-"


def _bits(final: dict[str, Any]) -> str:
    """Bits per coordinate per round, with the uploads per round when a protocol sends more than one."""
    text = number(final["bits_per_coordinate"], ".3g", " bits/coord")
    uploads = final.get("uploads_per_round", 1.0)
    return text if uploads <= 1 else f"{text} ({number(uploads, '.3g')} uploads/round)"


def _snr(value: float | None) -> str:
    """JoPEQ's uplink SNR in dB; "-" where the protocol has no decoded update per client (or an older file)."""
    if value is None:
        return "-"
    return "∞ (lossless)" if value == float("inf") else number(value, ".2f", " dB")


def summary_row(setting: dict[str, Any]) -> SummaryRow:
    """The summary table's cells for one setting, each number with its unit; "not run" for a stage not run."""
    mechanism, training, test = setting["mechanism"], setting["training"], setting["distinguish"]
    guarantee, headline = mechanism["guarantee"], setting["verdict"]
    final = None if training is None else training["final"]
    return SummaryRow(
        label=setting["label"],
        mechanism=mechanism["name"],
        params=_params(mechanism["params"], mechanism["clip_norm"]),
        origin=_origin(mechanism),
        accuracy=NOT_RUN if final is None else percent(final["test_accuracy"]),
        bits=NOT_RUN if final is None else _bits(final),
        compression=NOT_RUN if final is None else
        "-" if final["compression_vs_float32"] is None else number(final["compression_vs_float32"], ".1f", "x"),
        snr=NOT_RUN if final is None else _snr(final.get("snr_db")),
        claim=claim(guarantee["epsilon"], guarantee["delta"]),
        flags=list(guarantee["flags"]),
        composed=_composed(setting["accounting"], guarantee["epsilon"]),
        lower_bound=NOT_RUN if test is None else
        f"≥ {number(test['epsilon_lower_bound'])} ({number(100 * test['confidence'], 'g', ' %')} conf.)",
        cap="" if test is None else f"cap {number(test['max_certifiable'])}",
        p_value="" if test is None else p_value(test["p_value"]),
        verdict=NOT_RUN if headline is None else headline["verdict"],
        verdict_class="none" if headline is None else VERDICT_CLASSES.get(headline["verdict"], "other"),
        evidence="" if headline is None else headline.get("evidence") or "",
        decided_by="" if headline is None else _decided_by(headline),
        identification=_identification_cell(setting["identification"]),
        probe_ssim=_before_after(setting["probe"], "ssim_mean", ".3g"),
        ssim=_before_after(setting["inversion"], "ssim_mean", ".3g"),
        mse=_before_after(setting["inversion"], "mse_mean", ".3g"),
        psnr=_before_after(setting["inversion"], "psnr_mean", ".1f", " dB"),
    )


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
    12 tests"."""
    p = f", {_adjusted(headline)}" if headline["p_value"] is not None else ""
    return f"decided by: {headline['decided_by']}{p}; {_plural(headline['tests'], 'test')}"


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
                     f"{number(t['bound'], '.3g')}")
    return "; ".join(parts)


@dataclass(frozen=True)
class Findings:
    """The report's opening: claims refuted (with the evidence), claims consistent, settings where nothing could
    be concluded (and why)."""

    refuted: list[str]
    consistent: list[str]
    unresolved: list[str]

    def __bool__(self) -> bool:
        return bool(self.refuted or self.consistent or self.unresolved)


def _evidence(setting: dict[str, Any]) -> str:
    """The deciding test's evidence, in words."""
    headline, test, ident = setting["verdict"], setting["distinguish"], setting["identification"]
    decided = headline["decided_by"]
    if decided.startswith("identification") and ident is not None:
        m = int(decided.split()[2])
        t = next(t for t in ident["tests"] if t["candidates"] == m)
        return (f"the informed adversary identified the target among {m} candidates in {t['successes']} of "
                f"{t['trials']} trials ({number(t['rate'], '.2f')}, lower limit {number(t['lower'], '.3f')}) while "
                f"the claim allows at most {number(t['bound'], '.3g')} ({t['bound_form']})")
    if decided.startswith("distinguishing") and test is not None:
        return (f"certified ε ≥ {number(test['epsilon_lower_bound'])} against the claimed "
                f"{number(test['claimed_epsilon'], '.4g')} ({test['worst_pair']})")
    if decided.startswith("adaptive") and test is not None:
        name = decided.removeprefix("adaptive test ")
        a = next((a for a in test["adaptive"] if a["test"] == name), None)
        if a is not None:
            return (f"{a['test']}: certified ε ≥ {number(a['epsilon_lower_bound'])} against "
                    f"{epsilon(a['claimed_epsilon'])} ({a['claim']})")
    return decided


def _why_unresolved(setting: dict[str, Any]) -> str:
    headline, test = setting["verdict"], setting["distinguish"]
    guarantee = setting["mechanism"]["guarantee"]
    if headline["verdict"] == "vacuous claim" or guarantee["epsilon"] is None:
        return "no privacy claim to test"
    if test is not None and test["claimed_epsilon"] is not None and test["max_certifiable"] <= test["claimed_epsilon"]:
        return (f"claim ε {number(test['claimed_epsilon'], '.3g')} exceeds what {test['trials']:,} trials can certify "
                f"({number(test['max_certifiable'], '.2g')}), and the identification bound allows "
                f"{'certain identification' if _bound_is_one(setting) else 'more than these trials can exceed'}")
    return f"no test could refute the claim ({headline['decided_by']})"


def _bound_is_one(setting: dict[str, Any]) -> bool:
    ident = setting["identification"]
    return ident is None or all(t["bound"] >= 1 for t in ident["tests"])


def findings(settings: list[dict[str, Any]]) -> Findings:
    """Refuted, consistent and unresolved settings (by their headline verdict), each with its evidence."""
    refuted, consistent, unresolved = [], [], []
    for s in settings:
        headline = s["verdict"]
        if headline is None:
            continue
        claimed = claim(s["mechanism"]["guarantee"]["epsilon"], s["mechanism"]["guarantee"]["delta"])
        p = f" ({_adjusted(headline)})" if headline["p_value"] is not None else ""
        if headline["verdict"] in ("violated", "claim holds only cell-locally"):
            strength = f" ({headline['evidence']} refutation)" if headline.get("evidence") else ""
            refuted.append(f"{s['label']}: {headline['verdict']}{strength}: claim {claimed}; {_evidence(s)}{p}.")
        elif headline["verdict"] == "consistent":
            consistent.append(f"{s['label']} ({claimed}): {_plural(headline['tests'], 'test')}, none refuted it.")
        else:
            unresolved.append(f"{s['label']} ({claimed}): {headline['verdict']}: {_why_unresolved(s)}.")
    return Findings(refuted, consistent, unresolved)


def identification_rows(settings: list[dict[str, Any]]) -> list[tuple[tuple[str, ...], str]]:
    """Every identification test, and each probe's reconstructions matched among M candidates, with the
    claim's bound: (cells, verdict class)."""
    rows = []
    for s in settings:
        ident, probe = s["identification"], s["probe"]
        for t in (ident or {}).get("tests", []):
            rows.append(((s["label"], f"informed adversary ({ident['scoring']}), {t['trials']} trials",
                          str(t["candidates"]), f"{number(t['rate'], '.3f')} {interval(*t['interval'])}",
                          f"{number(t['bound'], '.3g')} ({t['bound_form']})", number(t["p_value"], ".2g"),
                          t["verdict"]), VERDICT_CLASSES.get(t["verdict"], "other")))
        for m in (probe or {}).get("matched", {}).get("defended", []):
            exceeds = "above the bound (reported, not judged)" if m["exceeds_bound"] else "reported, not judged"
            rows.append(((s["label"], f"inversion probe ({probe['attack']}): nearest of M to the reconstruction, "
                          f"{m['clients']} clients", str(m["candidates"]),
                          f"{number(m['rate'], '.3f')} {interval(*m['interval'])}",
                          f"{number(m['bound'], '.3g')} ({m['bound_form']})", "-", exceeds), "none"))
    return rows


def notes(settings: list[dict[str, Any]]) -> list[str]:
    """One note per setting whose distinguishing test ran on a generic default (the audit setting, or sampling
    one call at a time), which weakens its verdict."""
    found = []
    for setting in settings:
        if setting["distinguish"] is None:  # tiling and the audit setting matter to that test alone
            continue
        capabilities = setting["mechanism"]["capabilities"]
        generic = []
        if capabilities.get("audit_setting") == GENERIC:
            generic.append("the audit setting (the pairs tried are the generic 2-D ones, not pairs the mechanism "
                           "declares for its claim: they may miss its worst case, or not be neighbours in the "
                           "claim's sense)")
        sampling = setting["distinguish"].get("sampling") or ""
        if sampling.startswith("per call"):
            generic.append(f"the sampling (the per-call fallback, slow: {sampling.removeprefix('per call: ')})")
        elif not sampling and capabilities.get("tiling") == GENERIC:
            generic.append("the sampling (outputs drawn one call at a time: the mechanism declares no tiling)")
        if generic:
            found.append(f"{setting['label']}: the distinguishing test ran on generic defaults for "
                         f"{' and '.join(generic)}. This weakens the verdict \"{setting['distinguish']['verdict']}\".")
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


def adaptive_rows(settings: list[dict[str, Any]]) -> list[AdaptiveRow]:
    """Every adaptive test of every setting that ran the distinguishing stage, in setting order."""
    return [
        AdaptiveRow(
            label=setting["label"],
            test=test["test"],
            claim=f"{test['claim']} ({epsilon(test['claimed_epsilon'])})",
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
    if accounting.get("paper_claim") is not None:
        facts.append(("paper's claim", _guarantee_text(accounting["paper_claim"])))
    return facts


def _distinguish_facts(test: dict[str, Any] | None) -> list[tuple[str, str]]:
    if test is None:
        return [("distinguishing", NOT_RUN)]
    if test["p_value"] is not None:
        p = (f"{number(test['p_value'], '.2g')}, of \"the mechanism is ({number(test['claimed_epsilon'], '.4g')}, "
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
    seen = [*([f"error std {number(inversion['error_std'], '.3g')}"] if "error_std" in inversion else []),
            *([number(inversion["bits_per_coordinate"], ".3g", " bits/coord")] if "bits_per_coordinate" in inversion
              else [])]
    if seen:
        facts.append(("server's view", ", ".join(seen)))
    for view in inversion.get("views", []):  # a transcript's weaker estimates, attacked the same way
        scores = view["defended"]
        facts.append((f"inversion of {view['name']}", f"{view['observation']}: mean SSIM "
                      f"{number(scores['ssim_mean'], '.3g')}, MSE {number(scores['mse_mean'], '.3g')}"))
    return facts


def _stage_facts(setting: dict[str, Any]) -> list[tuple[str, str]]:
    """How the training, accounting, distinguishing and inversion stages were run."""
    training = setting["training"]
    facts = [("training", NOT_RUN if training is None else
              f"protocol {training['protocol']}, {_plural(len(training['rounds']), 'round')}, checkpoints at "
              f"{', '.join(map(str, training['checkpoints'])) or 'none'}")]
    return [*facts, *_accounting_facts(setting["accounting"]), *_distinguish_facts(setting["distinguish"]),
            *_inversion_facts(setting["inversion"]), *_probe_facts(setting["probe"]),
            *_identification_facts(setting["identification"])]


def _probe_facts(probe: dict[str, Any] | None) -> list[tuple[str, str]]:
    if probe is None:
        return [("inversion probe", NOT_RUN)]
    labels = " → ".join(f"{name} {percent(probe[name].get('label_accuracy'))}" for name in ("clean", "defended"))
    return [("inversion probe", f"{probe['attack']} at round {probe['round']}, model {probe['model']}, "
                                f"{probe['clients']} clients; observation: {probe['observation']}; "
                                f"{number(probe['bits_per_coordinate'], '.3g', ' bits/coord')}; SSIM: "
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
    """The config as pretty JSON."""
    return json.dumps(results["config"], indent=2, ensure_ascii=False, allow_nan=True)


def pairs(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    """A name -> value map as (name, text) rows, in document order."""
    return [(str(key), str(value)) for key, value in mapping.items()]
