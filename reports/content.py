"""What a report says, as plain-text strings: the one view of a results document both renderers lay out.

Every string here is unescaped text (labels and parameters are user-supplied); the markdown renderer escapes
it for markdown, the HTML template autoescapes it.
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
    "lower_bound_vs_epsilon": "Certified epsilon lower bound against the claimed epsilon, marked by verdict; "
                              "points above the line y = x violate the claim; dotted: the most a test with these "
                              "trials could certify (the cap).",
    "bits_vs_accuracy": "Uplink bits per coordinate against final test accuracy (%), one point per setting.",
}
SUMMARY_COLUMNS = (
    "setting", "mechanism", "final test accuracy", "uplink", "compression vs float32", "claimed per round",
    "claimed over the rounds run", "certified ε lower bound", "verdict", "inversion SSIM clean → defended",
    "inversion MSE (pixels in [0, 1]) clean → defended", "inversion PSNR clean → defended",
)
ADAPTIVE_COLUMNS = ("setting", "test", "claim", "certified ε lower bound", "verdict", "note")
VERDICT_CLASSES = {"consistent": "consistent", "violated": "violated", "vacuous claim": "vacuous",
                   "inconclusive": "inconclusive", "claim holds only cell-locally": "violated"}
NOT_RUN = "not run"


def number(value: float | None, spec: str = ".3g", unit: str = "") -> str:
    """``value`` formatted with ``spec`` and ``unit``; None and NaN -> "-", infinities -> "inf" / "-inf"."""
    if value is None or math.isnan(value):
        return "-"
    if math.isinf(value):
        return ("inf" if value > 0 else "-inf") + unit
    return f"{value:{spec}}{unit}"


def percent(fraction: float) -> str:
    """A fraction in [0, 1] as a percentage with its unit."""
    return number(100 * fraction, ".2f", " %")


def epsilon(value: float | None) -> str:
    """``ε = 1.45`` (or "no claim" without an epsilon)."""
    return "no claim" if value is None else f"ε = {number(value, '.4g')}"


def claim(epsilon_value: float | None, delta: float) -> str:
    """``ε = 1.45, δ = 1e-05`` (or "no claim" without an epsilon)."""
    return "no claim" if epsilon_value is None else f"{epsilon(epsilon_value)}, δ = {number(delta)}"


def _params(params: dict[str, Any]) -> str:
    return ", ".join(f"{key}={value}" for key, value in params.items()) or "no parameters"


def _before_after(scores: dict[str, Any] | None, key: str, spec: str, unit: str = "") -> str:
    if scores is None:
        return NOT_RUN
    return f"{number(scores['clean'][key], spec, unit)} → {number(scores['defended'][key], spec, unit)}"


@dataclass(frozen=True)
class SummaryRow:
    """One setting's line of the summary table."""

    label: str
    mechanism: str
    params: str
    accuracy: str
    bits: str
    compression: str
    claim: str
    flags: list[str]
    composed: str
    lower_bound: str
    cap: str
    verdict: str
    verdict_class: str
    ssim: str
    mse: str
    psnr: str


def _composed(accounting: dict[str, Any], epsilon: float | None) -> str:
    """The claim composed over the rounds run, the refusal, or "-" when there is no claim to compose."""
    composed, actual = accounting["composed"], accounting["composed_actual"]
    if composed is None:
        return f"refused: {accounting['refusal']}" if epsilon is not None and accounting["refusal"] else "-"
    text = f"{claim(composed['epsilon'], composed['delta'])} over {accounting['rounds']} rounds ({composed['backend']})"
    if actual is not None:
        text += f"; realised noise: {claim(actual['epsilon'], actual['delta'])}"
    return text


def _bits(final: dict[str, Any]) -> str:
    """Bits per coordinate per round, with the uploads per round when a protocol sends more than one."""
    text = number(final["bits_per_coordinate"], ".3g", " bits/coord")
    uploads = final.get("uploads_per_round", 1.0)
    return text if uploads <= 1 else f"{text} ({number(uploads, '.3g')} uploads/round)"


def summary_row(setting: dict[str, Any]) -> SummaryRow:
    """The summary table's cells for one setting, each number with its unit."""
    mechanism, final, test = setting["mechanism"], setting["training"]["final"], setting["distinguish"]
    guarantee = mechanism["guarantee"]
    ratio = final["compression_vs_float32"]
    return SummaryRow(
        label=setting["label"],
        mechanism=mechanism["name"],
        params=_params(mechanism["params"]),
        accuracy=percent(final["test_accuracy"]),
        bits=_bits(final),
        compression="-" if ratio is None else number(ratio, ".1f", "x"),
        claim=claim(guarantee["epsilon"], guarantee["delta"]),
        flags=list(guarantee["flags"]),
        composed=_composed(setting["accounting"], guarantee["epsilon"]),
        lower_bound=NOT_RUN if test is None else
        f"≥ {number(test['epsilon_lower_bound'])} ({number(100 * test['confidence'], 'g', ' %')} conf.)",
        cap="" if test is None else f"cap {number(test['max_certifiable'])}",
        verdict=NOT_RUN if test is None else test["verdict"],
        verdict_class="none" if test is None else VERDICT_CLASSES.get(test["verdict"], "other"),
        ssim=_before_after(setting["inversion"], "ssim_mean", ".3g"),
        mse=_before_after(setting["inversion"], "mse_mean", ".3g"),
        psnr=_before_after(setting["inversion"], "psnr_mean", ".1f", " dB"),
    )


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
            cap=f"cap {number(test['max_certifiable'])}",
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


def reconstructions(settings: list[dict[str, Any]]) -> list[Reconstruction]:
    """One grid per setting that ran the inversion stage."""
    return [
        Reconstruction(
            path=s["inversion"]["figure"],
            caption=f"{s['label']}: {s['inversion']['attack']} on the {s['inversion']['view']}'s view at round "
                    f"{s['inversion']['round']} (rows: ground truth, clean, defended"
                    + "".join(f", {v['name']}" for v in s["inversion"].get("views", [])) + ").",
        )
        for s in settings if s["inversion"] is not None
    ]


@dataclass(frozen=True)
class Details:
    """A setting's claim in full, and how each stage was run."""

    label: str
    summary: str
    facts: list[tuple[str, str]]
    assumptions: list[str]
    caveats: list[str]


def _stage_facts(setting: dict[str, Any]) -> list[tuple[str, str]]:
    """How the accounting, distinguishing and inversion stages were run."""
    accounting, test, inversion = setting["accounting"], setting["distinguish"], setting["inversion"]
    facts = [("accounting", "; ".join(f"{run['backend']}: {run['event']}" for run in
                                      (accounting["composed"], accounting["composed_actual"]) if run is not None)
              or (f"refused: {accounting['refusal']}" if accounting["refusal"] else "-"))]
    facts.append(("distinguishing", NOT_RUN if test is None else
                  f"{test['trials']} trials per pair, {test['tests']} tests (Bonferroni), worst pair "
                  f"{test['worst_pair']}, statistic {test['statistic']}, "
                  f"claim {claim(test['claimed_epsilon'], test['delta'])}"))
    facts.append(("inversion", NOT_RUN if inversion is None else
                  f"{inversion['attack']} on the {inversion['view']}'s view at round {inversion['round']}, "
                  f"clients {', '.join(map(str, inversion['clients']))}, model {inversion['model']}; observation: "
                  f"{inversion['observation']}; SSIM: {inversion['ssim_variant']}"))
    for view in (inversion or {}).get("views", []):  # a transcript's weaker estimates, attacked the same way
        facts.append((f"inversion of {view['name']}", f"{view['observation']}: mean SSIM "
                      f"{number(view['defended']['ssim_mean'], '.3g')}, MSE {number(view['defended']['mse_mean'], '.3g')}"))
    return facts


def details(setting: dict[str, Any]) -> Details:
    """The claim details block of one setting."""
    guarantee = setting["mechanism"]["guarantee"]
    facts = [
        ("mechanism", f"{setting['mechanism']['name']} ({_params(setting['mechanism']['params'])})"),
        ("sweep", _params(setting["sweep"]) if setting["sweep"] else "not swept"),
        ("claim", claim(guarantee["epsilon"], guarantee["delta"])),
        ("flags", ", ".join(guarantee["flags"]) or "none"),
        *((key.replace("_", " "), guarantee[key]) for key in
          ("relation", "unit", "scope", "threat_model", "sensitivity")),
        *_stage_facts(setting),
    ]
    return Details(label=setting["label"], summary=guarantee["summary"], facts=facts,
                   assumptions=list(guarantee["assumptions"]), caveats=list(guarantee["caveats"]))


def intro(results: dict[str, Any]) -> str:
    """One paragraph: what was audited, on what, and how."""
    p = results["provenance"]
    data, model, training = p["data"], p["model"], p["training"]
    count = len(results["settings"])
    return (
        f"{count} mechanism setting{'s' if count != 1 else ''} audited with auditkit {p['auditkit_version']} "
        f"(command: {results['command']}) on the {data['dataset']} dataset ({data['partition']} split over "
        f"{training['clients']} clients; {data['train']:,} training, {data['validation']:,} validation and "
        f"{data['test']:,} test examples), model {model['name']} ({model['num_params']:,} parameters), "
        f"{training['rounds']} FedAvg rounds of τ = {training['tau']} local steps "
        f"(batch size {training['batch_size']}, learning rate {number(training['lr'], 'g')}, "
        f"participation: {training['participation']}), seed {p['seed']}, device {p['device']}."
    )


def provenance(results: dict[str, Any]) -> list[tuple[str, str]]:
    """The run's provenance, one (name, text) pair per fact; versions and threat models are separate tables."""
    p = results["provenance"]
    return [
        ("auditkit", p["auditkit_version"]),
        ("seed", str(p["seed"])),
        ("device", p["device"]),
        ("platform", p["platform"]),
        ("client sizes", ", ".join(f"{size:,}" for size in p["data"]["client_sizes"]) + " examples"),
        ("sampling", p["training"]["sampling"]),
        ("participation", p["training"]["participation"]),
        ("accountant backends", ", ".join(p["accountant_backends"]) or "none"),
        ("neighbouring relations", ", ".join(p["neighbouring_relations"]) or "none"),
    ]


def config_json(results: dict[str, Any]) -> str:
    """The config as pretty JSON."""
    return json.dumps(results["config"], indent=2, ensure_ascii=False, allow_nan=True)


def pairs(mapping: dict[str, Any]) -> list[tuple[str, str]]:
    """A name -> value map as (name, text) rows, in document order."""
    return [(str(key), str(value)) for key, value in mapping.items()]
