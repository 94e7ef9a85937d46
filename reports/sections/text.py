"""The formatters every section shares (numbers, percentages, claims, p-values, intervals, parameters) and the
verdicts' badge classes; it imports no section."""
from __future__ import annotations

import math
from auditkit.results.model import MechanismEntry, RocSummary
from auditkit.results.types import JsonObject

NOT_RUN = "not run"
VERDICT_CLASSES = {"consistent": "consistent", "violated": "violated", "vacuous claim": "vacuous",
                   "no claim": "none", "inconclusive": "inconclusive", "claim holds only cell-locally": "violated"}


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


def interval(low: float, high: float) -> str:
    return f"[{number(low, '.2f')}, {number(high, '.2f')}]"


def roc_text(summary: RocSummary | None) -> str:
    """"AUROC 0.760 [0.759, 0.761]; TPR at 1 % FPR 9.03 % [8.97, 9.08]; at 0.1 % FPR ..." (intervals at the
    summary's confidence, TPRs in %); "-" when not recorded."""
    if summary is None:
        return "-"
    parts = [f"AUROC {number(summary.auc, '.3f')} [{number(summary.auc_low, '.3f')}, "
             f"{number(summary.auc_high, '.3f')}]"]
    for i, point in enumerate(summary.tpr_at):
        parts.append(f"{'TPR at' if i == 0 else 'at'} {number(100 * point.target_fpr, 'g')} % FPR "
                     f"{percent(point.tpr)} [{number(100 * point.tpr_low, '.2f')}, "
                     f"{number(100 * point.tpr_high, '.2f')}]")
    return "; ".join(parts)


def rough(value: float) -> str:
    """A magnitude to two significant digits, as a reader says it: 3,500; 2.5; 0.031."""
    rounded = float(f"{value:.2g}")
    return f"{rounded:,.0f}" if rounded >= 100 else f"{rounded:g}"


def parameters(params: JsonObject, clip_norm: str | None = None) -> str:
    """``sigma=0.8, clip=1.0 (l2)``: the clip with the norm it is measured in; floats to 4 significant digits."""
    shown = {key: number(value) if isinstance(value, float) else value for key, value in params.items()}
    items = [f"{key}={value}" + (f" ({clip_norm})" if key == "clip" and clip_norm else "")
             for key, value in shown.items()]
    if clip_norm and "clip" not in params:
        items.append(f"clip norm {clip_norm}")
    return ", ".join(items) or "no parameters"


def plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def origin(mechanism: MechanismEntry) -> str:
    """"" for a built-in mechanism, else the plugin that registered it."""
    return "" if mechanism.origin == "built-in" else mechanism.origin
