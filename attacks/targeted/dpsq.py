"""DP-SQ's adaptive test (paper 001): the claim holds only inside one quantizer cell.

``dpsq_cross_cell`` (``dpsq``, ``laplace-sq``). DP-SQ (paper 001) proves e^eps1 only for two inputs of one
quantizer cell and then applies it to the whole range [-C, C]. One coordinate: the ``in-cell`` pair -Delta/4
vs +Delta/4 (the claim's own unit, judged), Delta/2 -+ Delta/8 across the central cell's upper boundary,
and the range ends -C vs C. Q_{b,eps1} answers with an end of the input's cell, so inputs of different
cells have different output supports: a perfect test, bound = the cap, for b >= 2. LaplaceSQ with rho < 2C
(e.g. rho = Delta) has a finite whole-range epsilon eps1 2C / rho, which the range-ends pair approaches.
Verdict ``CELL_LOCAL_ONLY`` ("claim holds only cell-locally") when the in-cell pair is consistent and a
cross-cell pair violates eps1.
"""

from __future__ import annotations

import dataclasses

import torch

from auditkit.attacks.adaptive_tests import AdaptiveTestResult, adaptive_test, run_views
from auditkit.attacks.verdicts import CELL_LOCAL_ONLY, VIOLATED, verdict
from auditkit.mechanisms import Mechanism

__all__ = ["dpsq_cross_cell"]

DPSQ_FAMILY = ("dpsq", "laplace-sq")


def _dpsq_pairs(m: Mechanism) -> list[tuple[str, torch.Tensor, torch.Tensor, bool]]:
    """The in-cell pair (the claim's own unit) and two cross-cell pairs, one coordinate each (module docstring): x = -Delta/4 vs +Delta/4 in the central cell; Delta/2 -+ Delta/8 across its upper boundary; -C vs C."""
    clip, step = m.params["support"], m.cell_step
    one = lambda v: torch.tensor([v], dtype=torch.float64)  # noqa: E731
    if m.params["bits"] == 1:  # one cell: the whole range is the claim's domain
        return [("one cell: -C vs C (b = 1)", one(-clip), one(clip), True)]
    return [
        ("in-cell: -Delta/4 vs +Delta/4 (the claim's unit)", one(-step / 4), one(step / 4), True),
        ("cross-cell: Delta/2 -+ Delta/8, across one boundary", one(step / 2 - step / 8), one(step / 2 + step / 8), True),
        ("cross-cell: range ends -C vs C", one(-clip), one(clip), True),
    ]


@adaptive_test(*DPSQ_FAMILY)
def dpsq_cross_cell(m: Mechanism, *, trials: int, confidence: float, seed: int) -> AdaptiveTestResult:
    """DP-SQ's cell-local claim (module docstring): the in-cell pair and two cross-cell pairs of one
    coordinate, each with ``trials`` outputs of the real mechanism, Bonferroni over the three. The verdict is
    "claim holds only cell-locally" when the in-cell pair is consistent with eps1 and a cross-cell pair is not."""
    pairs = _dpsq_pairs(m)
    result = run_views(
        "dpsq-cross-cell",
        m,
        "eps1 per coordinate for two values of one quantizer cell; the paper applies it to the whole range",
        [(label, m, x0, x1, judged) for label, x0, x1, judged in pairs],
        trials=trials,
        confidence=confidence,
        seed=seed,
        findings={"cell_step": m.cell_step, "range_end": m.params["support"]},
        note=(
            "Q_{b,eps1} answers with one of the two ends of the input's cell: inputs of different cells have "
            "different output supports, so one output can tell them apart and the whole-range epsilon is "
            "infinite for b >= 2 (LaplaceSQ with rho < 2C: eps1 2C / rho). The bound of a perfect test is the "
            "sample-size cap; more trials raise it."
        ),
    )
    if len(result.estimates) > 1 and "cell-local" in m.guarantee().flags:
        in_cell = result.estimates[0]
        if verdict(in_cell, m.guarantee()) != VIOLATED and result.verdict == VIOLATED:
            result = dataclasses.replace(result, verdict=CELL_LOCAL_ONLY)
    return result
