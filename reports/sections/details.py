"""The claim details of each setting: the claim in full, the capabilities the mechanism declares, how each
stage ran, every neighbouring pair's estimate."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from auditkit.reports.sections.reconstructions import attacked_view
from auditkit.reports.sections.text import NOT_RUN, claim, number, origin, parameters, percent, plural, roc_text
from auditkit.attacks.budget import BudgetTrend
from auditkit.results.model import (Accounting, AttackBudget, Canary, Distinguish, Guarantee, Identification,
                                    Inversion, MechanismEntry, Probe, Refinement, Setting)

ESTIMATE_COLUMNS = ("pair", "statistic", "certified ε lower bound", "cap", "p-value", "sampling")
SEARCH_HEADING = ("Worst-pair search: every pair's bound predicted on its selection outputs (not certified); the "
                  "chosen pair's held-out test is the certified one")
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


def details(setting: Setting) -> Details:
    """The claim details block of one setting."""
    mechanism = setting.mechanism
    guarantee = mechanism.guarantee
    facts = [
        ("mechanism", f"{mechanism.name} ({parameters(mechanism.params, mechanism.clip_norm)})"),
        ("origin", "built-in" if not origin(mechanism) else f"plugin: {mechanism.origin}"),
        ("sweep", parameters(setting.sweep) if setting.sweep else "not swept"),
        ("capabilities", capabilities(mechanism)),
        ("claim", claim(guarantee.epsilon, guarantee.delta)),
        ("flags", ", ".join(guarantee.flags) or "none"),
        *((key.replace("_", " "), getattr(guarantee, key) or "-") for key in
          ("relation", "unit", "scope", "threat_model", "sensitivity")),
        *_stage_facts(setting),
    ]
    return Details(label=setting.label, summary=guarantee.summary, facts=facts,
                   assumptions=list(guarantee.assumptions), caveats=list(guarantee.caveats),
                   estimates=_estimates(setting.distinguish),
                   estimates_heading=SEARCH_HEADING if setting.distinguish is not None and setting.distinguish.search
                   else "Every pair's estimate")


def capabilities(mechanism: MechanismEntry) -> str:
    """Which capabilities the mechanism declares, and which generic defaults stood in (and what each means)."""
    declared = declared_capabilities(mechanism)
    named = {key: CAPABILITIES.get(key, (key.replace("_", " "), "")) for key in declared}
    by_value: dict[str, list[str]] = {}
    for key, value in declared.items():
        name, meaning = named[key]
        by_value.setdefault(value, []).append(f"{name} ({meaning})" if value == GENERIC and meaning else name)
    if set(by_value) == {"unknown"}:
        return "unknown (these results were written before auditkit recorded them, as schema v2)"
    parts = [f"{heading}: {', '.join(by_value[value])}" for value, heading in
             (("declared", "declared by the mechanism"), (GENERIC, "generic defaults used"), ("unknown", "unknown"))
             if value in by_value]
    return "; ".join(parts)


def _guarantee_text(guarantee: Guarantee) -> str:
    """A claim in one line: its summary, unit, scope, threat model, assumptions and caveats."""
    text = (f"{guarantee.summary} (unit: {guarantee.unit}; scope: {guarantee.scope}; "
            f"threat model: {guarantee.threat_model})")
    for heading, items in (("assumes", guarantee.assumptions), ("caveats", guarantee.caveats)):
        if items:
            text += f"; {heading}: {'; '.join(items)}"
    return text


def _stage_facts(setting: Setting) -> list[tuple[str, str]]:
    """How the training, accounting, distinguishing and inversion stages were run."""
    training = setting.training
    facts = [("training", NOT_RUN if training is None else
              f"protocol {training.protocol}, {plural(len(training.rounds), 'round')}, checkpoints at "
              f"{', '.join(map(str, training.checkpoints)) or 'none'}")]
    return [*facts, *_accounting_facts(setting.accounting), *_distinguish_facts(setting.distinguish),
            *_inversion_facts(setting.inversion), *_probe_facts(setting.probe),
            *_identification_facts(setting.identification), *_canary_facts(setting.canary)]


def _accounting_facts(accounting: Accounting | None) -> list[tuple[str, str]]:
    if accounting is None:
        return [("accounting", NOT_RUN)]
    runs = "; ".join(f"{run.accountant}: {run.event}" for run in
                     (accounting.composed, accounting.composed_actual) if run is not None)
    how = runs or (f"refused: {accounting.refusal}" if accounting.refusal else "-")
    facts = [("accounting", f"accountant asked for: {accounting.accountant}, {accounting.rounds} rounds at "
                            f"δ = {number(accounting.composition_delta)}; {how}")]
    if accounting.check is not None:
        facts.append(("accounting check", f"{accounting.check.verdict}: {accounting.check.reason}"))
    if accounting.paper_claim is not None:
        facts.append(("paper's claim", _guarantee_text(accounting.paper_claim)))
    example = accounting.example_level
    if example is not None:
        facts.append(("example-level (DP-SGD)", (
            f"z = {number(example.noise_multiplier)}, C = {number(example.max_grad_norm)}, expected batch "
            f"{example.batch_size}; {example.accountant}: {example.event}; worst client {example.client} "
            f"({example.client_examples} examples); {example.note}")))
    return facts


def _distinguish_facts(test: Distinguish | None) -> list[tuple[str, str]]:
    if test is None:
        return [("distinguishing", NOT_RUN)]
    if test.p_value is not None:
        p = (f"{number(test.p_value, '.2g')}, of \"the mechanism is ({number(test.claimed_epsilon)}, "
             f"{number(test.delta)})-DP as claimed\" on the worst pair ({test.worst_pair})")
    else:
        p = "none (no claim to test)" if test.claimed_epsilon is None else "not computed"
    return [
        ("distinguishing", f"{test.trials:,} trials per pair, {test.tests} tests (Bonferroni), worst pair "
                           f"{test.worst_pair}, statistic {test.statistic}, "
                           f"claim {claim(test.claimed_epsilon, test.delta)}"),
        ("audit setting", test.audit_setting or "not recorded"),
        ("sampling", test.sampling or "not recorded"),
        ("p-value", p),
        *([] if test.roc_summary is None else [(
            "held-out ROC", f"{roc_text(test.roc_summary)} (the worst pair's test on its held-out outputs, "
                            f"M(x1)'s the positives; {number(100 * test.roc_summary.confidence, 'g')} % intervals: "
                            "DeLong for the AUROC, Clopper-Pearson for the TPR)")]),
    ]


def _inversion_facts(inversion: Inversion | None) -> list[tuple[str, str]]:
    """How the inversion ran (at an FL round, or on ``auditkit attack``'s single-image gradients), the label
    accuracy, the server view's error and rate, and each further view of a transcript."""
    if inversion is None:
        return [("inversion", NOT_RUN)]
    parts = [f"{inversion.attack} {attacked_view(inversion)}"]
    if inversion.targets is not None:
        parts.append(f"clients {', '.join(map(str, inversion.targets))}")
    if inversion.images is not None or inversion.source is not None:
        shown = (inversion.images, inversion.source)
        parts.append(" ".join(str(value) for value in shown if value is not None) + " images")
    if inversion.label_given is not None:
        parts.append("true labels given to the attacker" if inversion.label_given else
                     "labels inferred by the attack")
    parts.append(f"model {inversion.model}")
    text = f"{', '.join(parts)}; observation: {inversion.observation}; SSIM: {inversion.ssim_variant}"
    if inversion.normalisation is not None:
        text += f"; BatchNorm on the {inversion.normalisation}"
    facts = [("inversion", text + ("; no clean reference run" if inversion.clean is None else ""))]
    accuracies = [(name, scores.label_accuracy) for name, scores in
                  (("clean", inversion.clean), ("defended", inversion.defended)) if scores is not None]
    if any(value is not None for _, value in accuracies):
        facts.append(("label accuracy", " → ".join(f"{name} {percent(value)}" for name, value in accuracies)))
    seen = [*([f"error std {number(inversion.error_std)}"] if inversion.error_std is not None else []),
            *([number(inversion.bits_per_coordinate, unit=" bits/coord")] if inversion.bits_per_coordinate is not None
              else [])]
    if seen:
        facts.append(("server's view", ", ".join(seen)))
    if inversion.budget is not None:
        facts.append(("inversion budget", budget_text(inversion.budget, "clients")))
    for view in inversion.views or []:  # a transcript's weaker estimates, attacked the same way
        scores = view.defended
        facts.append((f"inversion of {view.name}", f"{view.observation}: mean SSIM "
                      f"{number(scores.ssim_mean)}, MSE {number(scores.mse_mean)}"))
    return facts


TREND_TEXT = {
    BudgetTrend.RISING: "still rising at the end: a larger budget (more iterations or restarts) would likely "
                        "reconstruct more",
    BudgetTrend.FLAT: "flat over the second half: a larger budget is unlikely to change this result",
    BudgetTrend.NOT_MEASURED: "not measured (no iterations to halve, or the attack stopped before half of them)",
}


def budget_text(budget: AttackBudget, targets: str) -> str:
    """The attack's budget, what it cost, and what the second half of its iterations bought (``BudgetTrend``)."""
    shape = [f"{budget.iterations:,} iterations" if budget.iterations is not None else None,
             f"{budget.restarts} restart(s)" if budget.restarts is not None else None, f"{budget.targets} {targets}"]
    text = (" x ".join(part for part in shape if part)
            + f" (about {number(budget.estimated_seconds, '.3g')} s a run on one CPU core, estimated)")
    if budget.ssim_at_half is None:
        return f"{text}; trend {TREND_TEXT[budget.trend]}"
    return (f"{text}; defended mean SSIM {number(budget.ssim_at_half)} after half the iterations, "
            f"{number(budget.ssim)} at the end (clean {number(budget.clean_ssim_at_half)} → "
            f"{number(budget.clean_ssim)}): {TREND_TEXT[budget.trend]}")


def _probe_facts(probe: Probe | None) -> list[tuple[str, str]]:
    if probe is None:
        return [("inversion probe", NOT_RUN)]
    labels = " → ".join(f"{name} {percent(getattr(probe, name).label_accuracy)}" for name in ("clean", "defended"))
    return [("inversion probe", f"{probe.attack} at round {probe.round}, model {probe.model}, "
                                f"{probe.targets} clients; observation: {probe.observation}; "
                                f"{number(probe.bits_per_coordinate, unit=' bits/coord')}; SSIM: "
                                f"{probe.ssim_variant}"
                                + (f"; BatchNorm on the {probe.normalisation}" if probe.normalisation else "")),
            ("probe label accuracy", labels),
            *([("probe budget", budget_text(probe.budget, "probe clients"))] if probe.budget is not None else [])]


def _identification_facts(ident: Identification | None) -> list[tuple[str, str]]:
    if ident is None:
        return [("identification", "not run (or no claim to bound it)")]
    return [("identification", f"statistic: {ident.statistic}; candidates drawn from a pool of {ident.pool} real "
                               f"examples; each test at {number(100 * ident.per_test_confidence, '.4g')} % "
                               f"(Bonferroni); {ident.note}")]


def _canary_facts(canary: Canary | None) -> list[tuple[str, str]]:
    if canary is None:
        return []
    details = ", ".join(f"{key.replace('_', ' ')} {_fact_value(value)}" for key, value in canary.details.items())
    return [("one-run canary audit", f"{canary.kind}, {canary.canaries:,} canaries, {canary.bound} bound at "
                                     f"{number(100 * canary.confidence, '.4g')} % family-wise; "
                                     f"{canary.claim.note}; {number(canary.seconds, '.3g')} s"
                                     + (f"; {details}" if details else ""))]


def declared_capabilities(mechanism: MechanismEntry) -> dict[str, str]:
    """Each capability the document records -> its state, in document order (absent ones left out)."""
    return {key: state.value for key, state in mechanism.capabilities if state is not None}


def _fact_value(value: Any) -> str:
    """A detail's value in a fact line: numbers to 4 significant digits, dicts as key value pairs."""
    if isinstance(value, float):
        return number(value)
    if isinstance(value, dict):
        return "(" + ", ".join(f"{k.replace('_', ' ')} {_fact_value(v)}" for k, v in value.items()) + ")"
    return str(value)


def _estimates(test: Distinguish | None) -> list[tuple[str, ...]]:
    """Every neighbouring pair's estimate of the distinguishing test, when it recorded them; a pair sampled as the
    test's ``sampling`` fact says "as above". With the worst-pair search, every candidate's predicted bound,
    the chosen one's row holding the certified estimate."""
    rows = [(e.pair, e.statistic, f"≥ {number(e.epsilon_lower_bound)}", number(e.max_certifiable),
             number(e.p_value, ".2g"), "as above" if e.sampling == test.sampling else e.sampling)
            for e in ([] if test is None else test.estimates or [])]
    search = None if test is None else test.search
    if not search:
        return rows
    candidates = [(c.pair if c.parent is None else f"{c.pair} (proposed near {c.parent})", c.statistic,
                   f"predicted {number(c.predicted_bound)} (not certified)", "-", "-",
                   f"{c.selection_trials:,} selection outputs") for c in search.candidates]
    chosen = rows[0]
    candidates[search.chosen] = (f"{chosen[0]} (chosen)", _refined(search.refinement, chosen[1]), *chosen[2:])
    return candidates


def _refined(refinement: Refinement | None, statistic: str) -> str:
    """The chosen pair's statistic, and which of its two refined tests went on to the held-out test."""
    if refinement is None:
        return statistic
    if refinement.kept_candidate_test:
        return (f"{statistic}: its candidate's test, re-thresholded on fresh outputs (predicted "
                f"{number(refinement.kept_bound)}), over the refit {refinement.refit_statistic} "
                f"({number(refinement.refit_bound)})")
    return (f"{statistic}: refit on all its selection outputs (predicted {number(refinement.refit_bound)}), over its "
            f"candidate's test re-thresholded ({number(refinement.kept_bound)})")
