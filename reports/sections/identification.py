"""The identification table: each informed-adversary test, and each probe's reconstructions matched among M
candidates, against the claim's reconstruction-robustness bound."""
from __future__ import annotations

from auditkit.results.model import Setting
from auditkit.reports.sections.text import VERDICT_CLASSES, interval, number

IDENTIFICATION_COLUMNS = ("setting", "attack", "M", "success (95 % interval)", "the claim's bound", "p-value",
                          "verdict")


def identification_rows(settings: list[Setting]) -> list[tuple[tuple[str, ...], str]]:
    """Every identification test, and each probe's reconstructions matched among M candidates, with the
    claim's bound: (cells, verdict class)."""
    rows = []
    for s in settings:
        ident, probe = s.identification, s.probe
        for t in [] if ident is None else ident.tests:
            rows.append(((s.label, f"informed adversary ({ident.statistic}), {t.trials} trials",
                          str(t.candidates), f"{number(t.rate, '.3f')} {interval(*t.interval)}",
                          f"{number(t.bound)} ({t.bound_form})", number(t.p_value, ".2g"),
                          t.verdict), VERDICT_CLASSES.get(t.verdict, "other")))
        for m in [] if probe is None else probe.matched.defended:
            exceeds = "above the bound (reported, not judged)" if m.exceeds_bound else "reported, not judged"
            rows.append(((s.label, f"inversion probe ({probe.attack}): nearest of M to the reconstruction, "
                          f"{m.targets} clients", str(m.candidates),
                          f"{number(m.rate, '.3f')} {interval(*m.interval)}",
                          f"{number(m.bound)} ({m.bound_form})", "-", exceeds), "none"))
    return rows
