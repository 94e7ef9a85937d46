"""The adaptive tests' table: a row per adaptive distinguishing test of each setting."""
from __future__ import annotations

from dataclasses import dataclass
from auditkit.results.model import Setting
from auditkit.reports.sections.text import VERDICT_CLASSES, epsilon, number, p_value

ADAPTIVE_COLUMNS = ("setting", "test", "claim", "certified ε lower bound", "verdict", "note")


def _stated(claim: str) -> str:
    """The mechanism's own claim after what an adaptive test checks (none recorded in an upgraded version 4 file
    that lacked it)."""
    return f"; stated claim: {claim}" if claim else ""


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


def adaptive_rows(settings: list[Setting]) -> list[AdaptiveRow]:
    """Every adaptive test of every setting that ran the distinguishing stage, in setting order."""
    return [
        AdaptiveRow(
            label=setting.label,
            test=test.test,
            claim=f"{test.claim}{_stated(test.stated_claim)} ({epsilon(test.claimed_epsilon)})",
            lower_bound=f"≥ {number(test.epsilon_lower_bound)}",
            cap=f"cap {number(test.max_certifiable)}" + (
                f", {p_value(test.p_value)}" if test.p_value is not None else ""),
            verdict=test.verdict,
            verdict_class=VERDICT_CLASSES.get(test.verdict, "other"),
            note=test.note,
        )
        for setting in settings if setting.distinguish is not None
        for test in setting.distinguish.adaptive
    ]
