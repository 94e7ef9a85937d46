"""The one-run canary audit's section: its heading and explanation, a row per judged view."""
from __future__ import annotations

from auditkit.attacks.roc import ROC_CONFIDENCE
from auditkit.results.model import CanaryClaim, OneRunResult, Setting
from auditkit.reports.sections.text import VERDICT_CLASSES, epsilon, number, roc_text

CANARY_COLUMNS = ("setting", "claim judged (ε at δ, curve)", "view", "scores", "guesses k (rule)", "correct v",
                  "certified ε lower bound", "cap",
                  f"ROC of the scores ({number(100 * ROC_CONFIDENCE, 'g')} % intervals)", "verdict")


def canary_heading(settings: list[Setting]) -> tuple[str, str]:
    """The canary section's heading and its one-paragraph explanation (FL runs: the whole run's claim)."""
    kinds = {s.canary.kind for s in settings if s.canary}
    if kinds == {"idealized"}:
        return ("One-run canary audit", "Each canary is one call of the mechanism on the claim's neighbouring pair, "
                "included with probability 1/2; the bound certifies the one-round claim from the k guesses of one "
                "run. A bound above the claimed ε refutes it.")
    return ("Whole run: canary clients against the composed claim",
            "Canary clients (each included with probability 1/2 and sampled like every client) took part in a run of "
            "their own, trained like the audited one; each view's scores give a one-run bound judged against the "
            "claim users cite, the whole run's: composed over the rounds and amplified by client sampling where the "
            "claim covers it. The per-round tests above judge one round's claim; these judge the run's.")


def canary_rows(settings: list[Setting]) -> list[tuple[tuple[str, ...], str]]:
    """Every judged view of every setting's one-run canary audit: (cells, verdict class)."""
    rows = []
    for s in settings:
        canary = s.canary
        for view in [] if canary is None else canary.views:
            r = view.result
            judged = judged_claim(canary.claim)
            rule = r.guess_rule + ("" if r.guess_rule != "grid" else
                                      f" ({len(r.grid)} k, {number(100 * r.per_test_confidence, '.4g')} % each)")
            bound = f"≥ {number(r.epsilon_lower_bound)} ({r.bound})"
            if r.refuted_curve and r.curve_epsilon is not None:
                bound += f"; refutes {r.refuted_curve} (its ε {number(r.curve_epsilon)})"
            rows.append(((s.label, judged, view.view, view.statistic, f"{r.guesses:,} ({rule})",
                          f"{r.correct:,} of {r.guesses:,} (m = {r.canaries:,})", bound,
                          _canary_cap(r), roc_text(view.roc_summary), r.verdict),
                         VERDICT_CLASSES.get(r.verdict, "other")))
    return rows


def _canary_cap(result: OneRunResult) -> str:
    """The cap of a canary view: the certified bound's, and for f-DP the refuted curve's (what the verdict reads)."""
    cap = number(result.max_certifiable)
    curve = result.curve_max_certifiable
    return cap if curve is None else f"{cap} (curve's ε {number(curve)})"


def judged_claim(claim_: CanaryClaim) -> str:
    """The claim a canary audit judged, in words: ε at δ on its curve, over how many rounds."""
    if claim_.epsilon is None:
        return "no claim"
    accountant = claim_.accountant_epsilon
    said = ("" if accountant is None or abs(accountant - claim_.epsilon) < 5e-4 * max(1.0, accountant)
            else f" (the accountant's {number(accountant)})")
    curve = f", {claim_.curve}" if claim_.curve else ", its (ε, δ) curve"
    rounds = "" if claim_.rounds == 1 else f", {claim_.rounds} rounds"
    return f"{epsilon(claim_.epsilon)}{said} at δ = {number(claim_.delta)}{curve}{rounds}"
