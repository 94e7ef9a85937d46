"""The privacy-utility figure (issue 44): final test accuracy and loss against the claimed one-round epsilon and
against the strongest certified epsilon lower bound, a line per mechanism, the run without a mechanism as the
ceiling; drawn with ``auditkit.reports.figures``' helpers (Agg, "$" never mathtext)."""
from __future__ import annotations

import math

from auditkit.reports import figures
from auditkit.reports.figures import FigureTarget
from auditkit.reports.figure_style import CEILING_COLOUR, mechanism_styles
from auditkit.reports.sections.summary import baseline
from auditkit.reports.sections.utility import UtilityPoint, run_scale, utility_points
from auditkit.results.model import ResultsDocument

AXES = (("claimed", "claimed one-round ε"), ("certified", "certified ε lower bound (strongest test)"))
METRICS = (("accuracy", "final test accuracy (%)"), ("loss", "final test loss"))


def placed_points(results: ResultsDocument) -> dict[str, list[UtilityPoint]]:
    """Mechanism -> its trained settings with a finite claimed epsilon (the only ones an epsilon axis can place),
    in order of claimed epsilon; mechanisms without one (none, quantizers) are left out."""
    series: dict[str, list[UtilityPoint]] = {}
    for point in utility_points(results.settings):
        if point.claimed is not None:
            series.setdefault(point.mechanism, []).append(point)
    return {name: sorted(points, key=lambda p: p.claimed) for name, points in series.items()}


def unplaced(results: ResultsDocument) -> list[str]:
    """The trained mechanisms without a finite claim, other than the ceiling's (named in the legend)."""
    placed = placed_points(results)
    return list(dict.fromkeys(p.mechanism for p in utility_points(results.settings)
                              if p.mechanism not in placed and p.mechanism != "none"))


def _value(point: UtilityPoint, metric: str) -> float:
    return _value_of(point.accuracy, point.loss, metric)


def privacy_utility(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Four panels: final test accuracy (%, top) and loss (bottom) against the claimed one-round epsilon (left)
    and the strongest certified epsilon lower bound (right), both x axes logarithmic; a line per mechanism in its
    neutral colour, marker and line style (``figure_style.mechanism_styles``); solid black the run without a
    mechanism (the ceiling); dotted grey chance (1 / classes) on the accuracy panels. Returns ``path``."""
    series = placed_points(results)
    styles = mechanism_styles(list(series))
    reference = baseline(results.settings)
    chance = run_scale(results).chance
    missing = unplaced(results)
    figure, axes = figures.panel_grid(4, columns=2, size=(5.4, 3.9), margin=0.4,
                                      empty="no trained setting has a finite claim")
    for row, (metric, ylabel) in enumerate(METRICS):
        for column, (kind, xlabel) in enumerate(AXES):
            axis = axes[row][column]
            for name, points in series.items():
                shown = [(getattr(p, kind), _value(p, metric)) for p in points if getattr(p, kind) is not None
                         and getattr(p, kind) > 0 and math.isfinite(_value(p, metric))]
                shown.sort()
                if shown:
                    axis.plot(*zip(*shown), linewidth=1.4, markersize=6, label=figures._literal(name), **styles[name])
            if reference is not None:
                ceiling = reference.training.final
                axis.axhline(_value_of(ceiling.test_accuracy, ceiling.test_loss, metric), color=CEILING_COLOUR,
                             linewidth=1.2, label=figures._literal(f"no mechanism ({reference.label})"))
            if metric == "accuracy" and chance is not None:
                axis.axhline(100 * chance, color="gray", linewidth=0.9, linestyle=":", label="chance, 1 / classes")
            axis.set_xscale("log")
            axis.xaxis.set_major_formatter(lambda x, _: f"{x:g}")  # 0.5, 1, 2: not 5 x 10^-1
            axis.tick_params(axis="x", which="minor", labelbottom=False)
            if metric == "loss":
                axis.set_yscale("log")  # a noisy model's loss can be a hundred times the ceiling's
            else:
                axis.set_ylim(0, 100)  # the ceiling and chance stay inside the frame
            axis.set_xlabel(xlabel)
            axis.set_ylabel(ylabel)
            axis.grid(alpha=0.3, which="both")
            if row == 0 and column == 0:
                axis.legend(fontsize=7, loc="best", title=_left_out(missing), title_fontsize=7)
    return figures._save(figure, path)


def _value_of(accuracy: float, loss: float, metric: str) -> float:
    return 100 * accuracy if metric == "accuracy" else loss


def _left_out(missing: list[str]) -> str | None:
    """The legend's note of the mechanisms no epsilon axis can place."""
    return None if not missing else figures._literal(f"not placed (no finite claim): {', '.join(missing)}")
