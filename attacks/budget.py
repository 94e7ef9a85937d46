"""What an inversion attack's budget bought, and whether a larger one would buy more.

An optimisation attack (``auditkit.attacks.gradient_inversion``) is as strong as its iterations and restarts; a
defence that holds against a small budget may not hold against a larger one. Besides its final reconstructions
the attack keeps those after half its iterations (``InversionResult.halfway``), so the audit compares the mean
SSIM against the ground truth at half and at the whole budget: the same attack, the same starts, no extra run.

* ``rising``: the mean SSIM rose by ``RISING_SSIM`` or more over the second half: a larger budget (more
  iterations, more restarts) would likely reconstruct more;
* ``flat``: it moved less: the attack has converged at this budget, a larger one is unlikely to change the result;
* ``not measured``: the attack has no iterations to halve (the analytic attack) or stopped before half of them.
"""
from __future__ import annotations

import enum
from typing import Any

__all__ = ["BudgetTrend", "RISING_SSIM", "budget_entry", "trend"]

RISING_SSIM = 0.02  # the rise in mean SSIM over the second half of the iterations that counts as still rising


class BudgetTrend(enum.StrEnum):
    """Whether the mean SSIM was still rising at the end of the budget (module docstring)."""

    RISING = "rising"
    FLAT = "flat"
    NOT_MEASURED = "not measured"


def trend(at_half: float | None, at_end: float) -> BudgetTrend:
    """``rising`` when the mean SSIM rose by ``RISING_SSIM`` or more from half the budget to its end."""
    if at_half is None:
        return BudgetTrend.NOT_MEASURED
    return BudgetTrend.RISING if at_end - at_half >= RISING_SSIM else BudgetTrend.FLAT


def budget_entry(settings: dict[str, Any], *, targets: int, estimated_seconds: float,
                 clean: tuple[float | None, float], defended: tuple[float | None, float]) -> dict[str, Any]:
    """The ``budget`` of an inversion section: the attack's ``settings`` (iterations, restarts), the ``targets``
    attacked, the ``estimated_seconds`` of one run on a CPU core (a deterministic estimate, not a timing: the
    results stay the same bytes run after run), and the mean SSIM (at half the budget, at its end) of the clean and
    the defended run, with the defended run's trend."""
    iterations = settings.get("iterations", settings.get("feature_iterations"))
    return {"iterations": iterations, "restarts": settings.get("restarts"), "targets": targets,
            "estimated_seconds": estimated_seconds,
            "clean_ssim_at_half": clean[0], "clean_ssim": clean[1], "ssim_at_half": defended[0],
            "ssim": defended[1], "trend": trend(*defended)}
