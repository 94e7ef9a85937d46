"""The membership section's figure (issue 42): each attack's ROC on log-log axes against the claim's limit, one
panel per setting; drawn with ``auditkit.reports.figures``' helpers (Agg, "$" never mathtext)."""
from __future__ import annotations

import numpy as np

from auditkit.reports import figures
from auditkit.reports.figures import FigureTarget
from auditkit.reports.sections.membership import attack_name, membership_settings
from auditkit.results.model import ResultsDocument

# attacks in a neutral palette (verdict colours are for verdicts), told apart by marker and line style as well
ATTACK_STYLES = {
    "loss": {"color": "#8c6d31", "marker": "o", "linestyle": "-"},  # not dotted grey: that is chance's line
    "lira-offline": {"color": "#2b5c8a", "marker": "s", "linestyle": "-."},
    "lira-online": {"color": "#6a3d9a", "marker": "^", "linestyle": "-"},
    "rmia": {"color": "#111111", "marker": "D", "linestyle": "-"},
}
_OTHER_STYLE = {"color": "#5d6d7e", "marker": "v", "linestyle": "-"}
CLAIM_LABEL = "the claim allows at most"
PANELS = 6  # at most this many settings are drawn (the tables list them all)


def membership_roc(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """One panel per setting with membership results (at most ``PANELS``): each attack's pooled ROC, TPR against
    FPR on log-log axes from 1 / (non-members) to 1, a line per attack in its own style; the chance line TPR = FPR
    (grey, dotted); and dashed black the TPR the whole run's claim allows (``claim_tpr``), where there is a claim.
    Returns ``path``."""
    panels = membership_settings(results.settings, with_roc=True)[:PANELS]
    figure, axes = figures.panel_grid(len(panels), columns=2, size=(5.2, 4.2), margin=1.0,
                                      empty="no setting ran membership inference")
    for axis, setting in zip(axes.flat, panels):
        membership = setting.membership
        low = 1.0
        claim = None  # one claim per setting: every attack judges the same, at the same FPRs
        for attack in membership.attacks:
            fpr, tpr = attack.roc.fpr, attack.roc.tpr
            if not fpr:
                continue
            style = ATTACK_STYLES.get(attack.attack, _OTHER_STYLE)
            axis.plot(fpr, tpr, linewidth=1.5, markersize=4, markevery=max(1, len(fpr) // 8),
                      label=figures._literal(f"{attack_name(attack.attack)} (AUC {attack.auc:.3f})"), **style)
            if attack.claim_tpr and claim is None:
                claim = (fpr, attack.claim_tpr)
            low = min(low, fpr[0])
        if claim is not None:
            axis.plot(*claim, color="black", linestyle="--", linewidth=1.3, label=CLAIM_LABEL)
        xs = np.geomspace(low, 1.0, 50)
        axis.plot(xs, xs, color="gray", linewidth=0.9, linestyle=":", label="chance, TPR = FPR")
        axis.set_xscale("log")
        axis.set_yscale("log")  # the low-FPR corner is where membership inference is judged (Carlini et al. 2022)
        axis.set_xlim(low, 1.0)
        axis.set_ylim(low, 1.05)
        epsilon = membership.claim.epsilon
        judged = "no claim" if epsilon is None else f"whole run's claim ε {epsilon:.4g}"
        axis.set_title(figures._literal(f"{setting.label} ({membership.level} level; {judged})"), fontsize=9)
        axis.set_xlabel("FPR (non-members flagged)")
        axis.set_ylabel("TPR (members flagged)")
        axis.grid(alpha=0.3, which="both")
        axis.legend(fontsize=7, loc="lower right")
    return figures._save(figure, path)
