"""Figures written beside the results (PNG, via matplotlib's Agg): reconstruction grids, defence curves and
the report's figures.

Inputs are plain arrays and the results documents' own numbers, never toolkit objects, so a figure can be
redrawn from saved results alone. Text is drawn as given: "$" never switches to mathtext (labels are
user-supplied).
"""
from __future__ import annotations

import math
import textwrap
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np

from auditkit.attacks.headline import ClaimScope
from auditkit.reports.figure_style import NEUTRAL_PALETTE, mechanism_styles, setting_styles, verdict_colour
from auditkit.reports.sections.membership import membership_settings
from auditkit.reports.sections.summary import claim_judged
from auditkit.reports.sections.utility import utility_points
from auditkit.results.model import CanaryView, IdentificationTest, ReconstructionSweep, ResultsDocument, Setting
from auditkit.results.reproduction import Reproduction, Row

FigureTarget = str | Path | BinaryIO
"""Where a figure is drawn: a file name, or a binary file opened for writing (``auditkit.folder``)."""


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    return plt


def _literal(text: str) -> str:
    """``text`` drawn as given: every "$" escaped, so user-supplied text never switches to mathtext."""
    return text.replace("$", r"\$")


_WITH_LEGEND = (9.0, 4.2)  # inches: 6 for the axes, the rest for the legend beside them


def _mechanism_styles(results: ResultsDocument) -> dict[str, dict[str, Any]]:
    """Mechanism name -> neutral colour, marker and line style (``figure_style``), for figures with one series per
    mechanism."""
    return mechanism_styles([s.mechanism.name for s in results.settings])


def _legend_outside(axis: Any, **options: Any) -> Any:
    """The legend to the right of the axes, never over the data (``_save`` keeps it in the image)."""
    return axis.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, fontsize=8, **options)


def _save(figure: Any, path: FigureTarget) -> FigureTarget:
    """Lay out, write as PNG, close; returns ``path``."""
    plt = _pyplot()
    figure.tight_layout()
    figure.savefig(path, dpi=110, format="png", bbox_inches="tight")  # labels past the axes stay in
    plt.close(figure)
    return path


def _as_hwc(image: np.ndarray) -> np.ndarray:
    """C x H x W in [0, 1] -> H x W (grey) or H x W x 3, clipped for display."""
    image = np.clip(np.asarray(image, dtype=np.float32), 0.0, 1.0)
    return image[0] if image.shape[0] == 1 else np.transpose(image, (1, 2, 0))


_TILE = 64  # pixels per image in a grid (a 28 x 28 digit is drawn at 64 x 64, nearest-neighbour)
_GRID_DPI = 100
_GRID_FONT = 10  # points: about 14 pixels at _GRID_DPI, readable at the report's width
_GRID_MIN_WIDTH = 420  # pixels: a grid of two images still has room for its title


def _mosaic(rows: Sequence[np.ndarray], caption_height: int, gap: int) -> np.ndarray:
    """One H x W x 3 image of every row's images side by side (N x C x h x w each, upscaled to ``_TILE``), a white
    band of ``caption_height`` pixels under every row and ``gap`` pixels between images."""
    n = len(rows[0])
    height = len(rows) * (_TILE + caption_height)
    width = n * _TILE + (n - 1) * gap
    canvas = np.ones((height, width, 3), dtype=np.float32)
    for r, images in enumerate(rows):
        top = r * (_TILE + caption_height)
        for c, image in enumerate(images):
            tile = _as_hwc(image)
            tile = np.repeat(tile[..., None], 3, axis=-1) if tile.ndim == 2 else tile
            rows_ix = np.arange(_TILE) * tile.shape[0] // _TILE
            cols_ix = np.arange(_TILE) * tile.shape[1] // _TILE
            left = c * (_TILE + gap)
            canvas[top:top + _TILE, left:left + _TILE] = tile[rows_ix][:, cols_ix]
    return canvas


def image_grid(
    rows: Mapping[str, np.ndarray], path: FigureTarget, *, captions: Mapping[str, Sequence[str]] | None = None,
    title: str = "",
) -> FigureTarget:
    """A grid with one row per entry of ``rows`` (name -> N x C x H x W array in [0, 1]), N columns.

    ``captions`` optionally gives a short text under each image of a row (e.g. its SSIM). The images are laid
    out in one array and drawn with one ``imshow`` (a grid of axes per image costs seconds), at ``_TILE``
    pixels each, with text at ``_GRID_FONT`` points. Returns ``path``."""
    if not rows:
        raise ValueError("rows must name at least one row of images")
    counts = {name: len(images) for name, images in rows.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"rows must all hold the same number of images, got {counts}")
    plt = _pyplot()
    names = list(rows)
    n = counts[names[0]]
    captions = captions or {}
    caption_height = 22 if captions else 8
    gap = 6 if not captions else 10
    mosaic = _mosaic([rows[name] for name in names], caption_height, gap)
    label_width = 24 + 9 * max(len(name) for name in names)  # pixels for the row names (about 8 per character)
    width = max(label_width + mosaic.shape[1] + 12, _GRID_MIN_WIDTH)  # room for a readable title
    title_lines = textwrap.wrap(_literal(title), width=(width - 16) // 8) if title else []
    title_height = 10 + 18 * len(title_lines)
    height = title_height + mosaic.shape[0] + 4
    figure = plt.figure(figsize=(width / _GRID_DPI, height / _GRID_DPI), dpi=_GRID_DPI)
    axis = figure.add_axes((label_width / width, 4 / height, mosaic.shape[1] / width, mosaic.shape[0] / height))
    axis.imshow(mosaic, interpolation="nearest", aspect="equal")
    axis.set_axis_off()
    for r, name in enumerate(names):
        top = r * (_TILE + caption_height)
        axis.text(-8, top + _TILE / 2, _literal(name), ha="right", va="center", fontsize=_GRID_FONT, clip_on=False)
        for c, text in enumerate(captions.get(name, ())[:n]):
            axis.text(c * (_TILE + gap) + _TILE / 2, top + _TILE + 2, _literal(text), ha="center", va="top",
                      fontsize=_GRID_FONT - 1, clip_on=False)
    if title_lines:
        figure.text(8 / width, 1 - 6 / height, "\n".join(title_lines), ha="left", va="top", fontsize=_GRID_FONT)
    figure.savefig(path, dpi=_GRID_DPI, format="png")
    plt.close(figure)
    return path


def _finite(*values: float | None) -> bool:
    """Whether every value is a finite number."""
    return all(v is not None and math.isfinite(v) for v in values)


def _note(axis: Any, text: str) -> None:
    """A centred note on otherwise empty axes."""
    axis.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, color="dimgray", wrap=True,
              transform=axis.transAxes)


def panel_grid(count: int, *, columns: int, size: tuple[float, float], margin: float, empty: str) -> tuple[Any, Any]:
    """A figure of ``count`` panels of ``size`` inches, at most ``columns`` a row (``margin`` inches more for the
    legends), the unused panels hidden and ``empty`` noted when there is none. Returns (figure, axes)."""
    plt = _pyplot()
    columns = max(1, min(columns, count))
    rows = max(1, -(-count // columns))
    figure, axes = plt.subplots(rows, columns, figsize=(size[0] * columns + margin, size[1] * rows), squeeze=False)
    for axis in axes.flat[max(1, count):]:
        axis.set_visible(False)
    if not count:
        _note(axes[0][0], empty)
    return figure, axes


def _trained(results: ResultsDocument) -> list[Setting]:
    """The settings that trained (and recorded at least one round)."""
    return [s for s in results.settings if s.training is not None and s.training.rounds]


def accuracy_vs_round(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Test accuracy (%) by round, one line per setting that trained, labelled with the setting's label.
    Returns ``path``."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=_WITH_LEGEND)
    trained = _trained(results)
    if not trained:
        _note(axis, "no setting trained")
    styles = setting_styles(results.settings)
    for setting in trained:
        rounds = setting.training.rounds
        axis.plot([r.round for r in rounds], [100 * r.test_accuracy for r in rounds], markersize=3,
                  label=_literal(setting.label), **styles[setting.id])
    axis.set_xlabel("round")
    axis.set_ylabel("test accuracy (%)")
    if trained:
        _legend_outside(axis)
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _ssim_series(results: ResultsDocument) -> dict[str, list[tuple[float, float, float | None]]]:
    """mechanism name -> [(claimed epsilon, defended SSIM, clean SSIM or None)] of the settings with a finite
    positive claim and an inversion result."""
    series: dict[str, list[tuple[float, float, float | None]]] = {}
    for setting in results.settings:
        epsilon, inversion = setting.mechanism.guarantee.epsilon, setting.inversion
        if inversion is not None and _finite(epsilon) and epsilon > 0:
            clean = None if inversion.clean is None else inversion.clean.ssim_mean
            series.setdefault(setting.mechanism.name, []).append(
                (epsilon, inversion.defended.ssim_mean, clean))
    return series


def ssim_vs_epsilon(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Inversion SSIM against the one-round claimed epsilon (log x), one series per mechanism name: defended
    solid, clean attack dashed in the same colour (where a clean reference was run). Settings without a finite
    positive claim or without an inversion result are left out. Returns ``path``."""
    plt = _pyplot()
    series = _ssim_series(results)
    figure, axis = plt.subplots(figsize=_WITH_LEGEND)
    styles = _mechanism_styles(results)
    for name, points in series.items():
        points = sorted(points, key=lambda point: point[0])
        colour, marker = styles[name]["color"], styles[name]["marker"]
        axis.plot([p[0] for p in points], [p[1] for p in points], marker=marker, color=colour,
                  label=_literal(f"{name} (defended)"))
        clean = [(p[0], p[2]) for p in points if p[2] is not None]
        if clean:
            axis.plot(*zip(*clean), linestyle="--", marker="x", color=colour,
                      label=_literal(f"{name} (clean attack)"))
    if series:
        axis.set_xscale("log")
        axis.margins(y=0.1)  # a clean attack near SSIM 1 stays clear of the frame
        _legend_outside(axis)
    else:
        _note(axis, "no setting has both a finite claimed epsilon and an inversion result")
    axis.set_xlabel("claimed one-round epsilon")
    axis.set_ylabel("mean SSIM of the reconstructions")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _defence_points(results: ResultsDocument) -> dict[str, list[tuple[float, float, float | None]]]:
    """mechanism name -> [(error std, defended SSIM, clean SSIM or None)], sorted by error std, of the settings
    whose inversion recorded a finite ``error_std`` (``auditkit attack --curve``)."""
    series: dict[str, list[tuple[float, float, float | None]]] = {}
    for setting in results.settings:
        inversion = setting.inversion
        if inversion is not None and _finite(inversion.error_std):
            clean = None if inversion.clean is None else inversion.clean.ssim_mean
            series.setdefault(setting.mechanism.name, []).append(
                (inversion.error_std, inversion.defended.ssim_mean, clean))
    return {name: sorted(points, key=lambda point: point[0]) for name, points in series.items()}


def ssim_vs_error_std(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Inversion SSIM against the standard deviation of the error in the server's view, one line per mechanism
    name (a defence curve: the axis on which mechanisms of different kinds compare). The clean attack is dashed:
    one black line when every setting shares its score (one clean run for the whole curve), else a dashed line
    per mechanism in its colour. The x axis is logarithmic when the errors span more than a decade.
    Returns ``path``."""
    plt = _pyplot()
    series = _defence_points(results)
    figure, axis = plt.subplots(figsize=_WITH_LEGEND)
    cleans = {p[2] for points in series.values() for p in points if _finite(p[2])}
    styles = _mechanism_styles(results)
    for name, points in series.items():
        colour = styles[name]["color"]
        axis.plot([p[0] for p in points], [p[1] for p in points], marker=styles[name]["marker"], color=colour,
                  label=_literal(name))
        clean = [(p[0], p[2]) for p in points if p[2] is not None]
        if len(cleans) > 1 and clean:
            axis.plot(*zip(*clean), linestyle="--", color=colour, label=_literal(f"{name} (clean attack)"))
    if len(cleans) == 1:
        axis.axhline(next(iter(cleans)), color="black", linestyle="--", linewidth=1, label="clean attack")
    errors = [p[0] for points in series.values() for p in points]
    if errors and min(errors) > 0 and max(errors) > 10 * min(errors):
        axis.set_xscale("log")
    axis.margins(y=0.1)  # the clean line, near the top, stays clear of the frame
    if series:
        _legend_outside(axis)
    else:
        _note(axis, "no setting recorded the error of the server's view")
    axis.set_xlabel("standard deviation of the error in the server's view")
    axis.set_ylabel("mean SSIM of the reconstructions")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _strongest(setting: Setting) -> tuple[float, float] | None:
    """(bound, cap) of the setting's strongest certified bound: its headline's ``bound``, or (a file from before
    it) its black-box test's; None without a distinguishing stage."""
    headline, test = setting.verdict, setting.distinguish
    if headline is not None and headline.bound is not None:
        return headline.bound.epsilon_lower_bound, headline.bound.max_certifiable
    return None if test is None else (test.epsilon_lower_bound, test.max_certifiable)


def _tested(results: ResultsDocument) -> list[tuple[Setting, float, float, float]]:
    """(setting, claimed epsilon, strongest certified bound, its cap) of the settings with a finite claim, a
    finite bound and a headline verdict."""
    tested = []
    for s in results.settings:
        found = _strongest(s)
        claimed = s.mechanism.guarantee.epsilon
        if found is not None and s.verdict is not None and _finite(claimed, found[0]):
            tested.append((s, claimed, *found))
    return tested


_HOLLOW = "(analytic)"  # refuted by computation, not by the tests this figure plots


def _verdict_style(setting: Setting) -> tuple[str, str]:
    """(legend label, colour) of the verdict on the setting's one-round claim (the claim this figure plots; a file
    from before claims were told apart: its headline), a refutation with its evidence; the colour is the verdict's
    badge colour (``figure_style.verdict_colour``), which no other figure uses."""
    judged = claim_judged(setting, ClaimScope.ONE_ROUND)
    found = setting.verdict if judged is None or judged.verdict is None else judged
    verdict, evidence = found.verdict, found.evidence
    return (f"{verdict} ({evidence})" if evidence else verdict), verdict_colour(verdict)


FLOOR_LABEL = "bound 0 (nothing certified), drawn at the floor"


def _bound_axes(claims: list[float], bounds: list[float], caps: list[float]) -> tuple[bool, float, float, float]:
    """(logarithmic, floor, low, high) of the bound figure: log-log when the positive claims span more than a
    decade (both linear otherwise, so y = x is a straight diagonal either way); on log axes a bound of 0 or below
    sits at ``floor``, half the smallest positive value drawn; [low, high] the x range."""
    positive = [c for c in claims if c > 0]
    logarithmic = bool(positive) and max(positive) > 10 * min(positive)
    if not logarithmic:
        return False, 0.0, 0.0, max(claims + caps) * 1.05
    floor = min(positive + [v for v in bounds + caps if v > 0]) / 2
    return True, floor, floor / 1.5, max(claims + caps) * 2


def lower_bound_vs_epsilon(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Each setting's strongest certified epsilon lower bound (over all its distinguishing and adaptive tests)
    against its claimed epsilon, coloured by the setting's headline verdict (the same verdict and colour as the
    summary's badge), one marker per mechanism; the line y = x and the caps (``max_certifiable``) as dotted
    horizontal lines. Both axes are logarithmic when the claims span more than a decade (``_bound_axes``), a bound
    of 0 drawn at the floor and said so in the legend; the y axis stops just above the largest cap, the most any
    test could certify. Returns ``path``."""
    plt = _pyplot()
    tested = _tested(results)
    figure, axis = plt.subplots(figsize=_WITH_LEGEND)
    if not tested:
        _note(axis, "no setting has both a finite claimed epsilon and a distinguishing result")
        axis.set_xlabel("claimed epsilon (one round)")
        axis.set_ylabel("strongest certified epsilon lower bound")
        return _save(figure, path)
    from matplotlib.lines import Line2D

    claims, bounds = [t[1] for t in tested], [t[2] for t in tested]
    caps = sorted({cap for *_, cap in tested if _finite(cap)})
    logarithmic, floor, low, high = _bound_axes(claims, bounds, caps)
    markers = {name: style["marker"] for name, style in _mechanism_styles(results).items()}
    verdicts: dict[str, str] = {}
    clipped = False
    for setting, claimed, bound, _ in tested:
        label, colour = _verdict_style(setting)
        marker = markers[setting.mechanism.name]
        # hollow: refuted by computation, not by these tests
        analytic = label.endswith(_HOLLOW)
        shown = bound if not logarithmic or bound > floor else floor
        clipped |= shown != bound
        axis.scatter([claimed], [shown], marker=marker, s=55, zorder=3, facecolors="white" if analytic else colour,
                     edgecolors=colour if analytic else "black", linewidths=1.5 if analytic else 0.5)
        verdicts.setdefault(label, colour)
    for cap in caps:
        axis.axhline(cap, color="black", linestyle=":", linewidth=1)
    axis.plot([low, high], [low, high], color="black", linewidth=0.8)  # y = x: straight on equal scales
    if logarithmic:
        axis.set_xscale("log")
        axis.set_yscale("log")
    axis.set_xlim(low, high)
    axis.set_ylim(low, 1.15 * max(caps + bounds + [floor, 1e-9]))
    handles = [Line2D([], [], linestyle="", marker="o", markerfacecolor="white" if v.endswith(_HOLLOW) else c,
                      markeredgecolor=c if v.endswith(_HOLLOW) else "black", label=_literal(v))
               for v, c in verdicts.items()]
    handles += [Line2D([], [], linestyle="", marker=markers[name], color="white", markeredgecolor="black",
                       label=_literal(name)) for name in dict.fromkeys(t[0].mechanism.name for t in tested)]
    handles += [Line2D([], [], color="black", linewidth=0.8, label="y = x (the claim)"),
                Line2D([], [], color="black", linestyle=":", linewidth=1, label="cap (a perfect test)")]
    if clipped:
        axis.axhline(floor, color="black", linestyle="-.", linewidth=0.8)
        handles.append(Line2D([], [], color="black", linestyle="-.", linewidth=0.8, label=FLOOR_LABEL))
    _legend_outside(axis, handles=handles)
    axis.set_xlabel("claimed epsilon (one round)")
    axis.set_ylabel("strongest certified epsilon lower bound")
    axis.grid(alpha=0.3, which="both" if logarithmic else "major")
    return _save(figure, path)


def _bits_points(results: ResultsDocument) -> list[tuple[Setting, float, float]]:
    """(setting, final bits per coordinate, final test accuracy in %) of each setting that trained, where finite."""
    points = [(s, s.training.final.bits_per_coordinate, s.training.final.test_accuracy)
              for s in results.settings if s.training is not None]
    return [(s, bits, 100 * accuracy) for s, bits, accuracy in points if _finite(bits, accuracy)]


def bits_vs_accuracy(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Final uplink bits per coordinate against final test accuracy (%), a point per setting that trained, each
    in its setting's style and named in the legend (labels beside points overlap where settings share a rate).
    The x axis is logarithmic when the rates span more than a decade. Returns ``path``."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=_WITH_LEGEND)
    points = _bits_points(results)
    if not points:
        _note(axis, "no setting has a finite rate and accuracy")
    styles = setting_styles(results.settings)
    for setting, bits, accuracy in points:
        style = styles[setting.id]
        axis.scatter([bits], [accuracy], zorder=3, s=45, color=style["color"], marker=style["marker"],
                     edgecolors="black", linewidths=0.5, label=_literal(setting.label))
    rates = [bits for _, bits, _ in points if bits > 0]
    if rates and max(rates) > 10 * min(rates):
        axis.set_xscale("log")
    if points:
        _legend_outside(axis)
    axis.set_xlabel("uplink bits per coordinate (float32 = 32)")
    axis.set_ylabel("final test accuracy (%)")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _identification_series(results: ResultsDocument) -> dict[tuple[str, int], list[tuple[float, IdentificationTest]]]:
    """(mechanism name, M) -> [(claimed epsilon, identification test)] of the settings with a finite positive
    claim and identification tests, sorted by epsilon."""
    series: dict[tuple[str, int], list[tuple[float, IdentificationTest]]] = {}
    for setting in results.settings:
        epsilon, ident = setting.mechanism.guarantee.epsilon, setting.identification
        if ident is not None and _finite(epsilon) and epsilon > 0:
            for test in ident.tests:
                series.setdefault((setting.mechanism.name, test.candidates), []).append((epsilon, test))
    return {key: sorted(points, key=lambda p: p[0]) for key, points in series.items()}


def identification_vs_epsilon(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Identification success with its Clopper-Pearson interval against the claimed epsilon (log x), one series per
    (mechanism, M), the claim's bound dashed in the same colour and guessing (1/M) dotted. Returns ``path``."""
    plt = _pyplot()
    series = _identification_series(results)
    figure, axis = plt.subplots(figsize=_WITH_LEGEND)
    markers = ("o", "s", "^", "D", "v")
    sizes = sorted({m for _, m in series})
    colours = {name: style["color"] for name, style in _mechanism_styles(results).items()}
    for (name, m), points in series.items():
        eps = [p[0] for p in points]
        rate = np.array([p[1].rate for p in points])
        low = np.array([p[1].interval[0] for p in points])
        high = np.array([p[1].interval[1] for p in points])
        marker = markers[sizes.index(m) % len(markers)]
        solid = "-" if sizes.index(m) == 0 else "-."
        axis.errorbar(eps, rate, yerr=[rate - low, high - rate], marker=marker, capsize=3, linestyle=solid,
                      color=colours[name], label=_literal(f"{name}, M = {m}"))
        axis.plot(eps, [p[1].bound for p in points], linestyle="--", color=colours[name], linewidth=1)
    for m in sizes:
        axis.axhline(1 / m, color="gray", linestyle=":", linewidth=1)
    if series:
        axis.set_xscale("log")
        _legend_outside(axis)
        axis.set_ylim(-0.02, 1.05)
    else:
        _note(axis, "no setting has both a finite claimed epsilon and identification tests")
    axis.set_xlabel("claimed one-round epsilon")
    axis.set_ylabel("identification success (target among M)")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _probe_series(results: ResultsDocument) -> dict[str, list[tuple[float, float, float]]]:
    """mechanism name -> [(claimed epsilon, defended probe SSIM, clean probe SSIM)] of the settings with a finite
    positive claim and a probe, sorted by epsilon."""
    series: dict[str, list[tuple[float, float, float]]] = {}
    for setting in results.settings:
        epsilon, probe = setting.mechanism.guarantee.epsilon, setting.probe
        if probe is not None and _finite(epsilon) and epsilon > 0:
            series.setdefault(setting.mechanism.name, []).append(
                (epsilon, probe.defended.ssim_mean, probe.clean.ssim_mean))
    return {name: sorted(points) for name, points in series.items()}


def probe_ssim_vs_epsilon(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """The inversion probe's mean SSIM against the claimed epsilon (log x), one line per mechanism, its clean
    attack dashed in the same colour. Returns ``path``."""
    plt = _pyplot()
    series = _probe_series(results)
    figure, axis = plt.subplots(figsize=_WITH_LEGEND)
    styles = _mechanism_styles(results)
    colours = {name: style["color"] for name, style in styles.items()}
    for name, points in series.items():
        axis.plot([p[0] for p in points], [p[1] for p in points], marker=styles[name]["marker"], color=colours[name],
                  label=_literal(name))
        axis.plot([p[0] for p in points], [p[2] for p in points], linestyle="--", color=colours[name],
                  label=_literal(f"{name} (clean attack)"))
    if series:
        axis.set_xscale("log")
        axis.set_ylim(-0.05, 1.05)
        _legend_outside(axis)
    else:
        _note(axis, "no setting has both a finite claimed epsilon and a probe result")
    axis.set_xlabel("claimed one-round epsilon")
    axis.set_ylabel("probe mean SSIM")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _sweeps(results: ResultsDocument) -> dict[str, tuple[ReconstructionSweep, list[float]]]:
    """Sweep group -> (its reconstruction sweep, the claimed epsilons of the settings that share it), in setting
    order."""
    groups: dict[str, tuple[ReconstructionSweep, list[float]]] = {}
    for setting in results.settings:
        sweep = None if setting.probe is None else setting.probe.sweep
        if sweep is None:
            continue
        groups.setdefault(sweep.group, (sweep, []))[1].append(setting.mechanism.guarantee.epsilon)
    return groups


_SWEEP = NEUTRAL_PALETTE[0]  # the defended SSIM and its band
_REROS = NEUTRAL_PALETTE[2:4] + NEUTRAL_PALETTE[5:7]  # the identification bounds, one per M (dotted)
_CROSSING = NEUTRAL_PALETTE[1]  # where the SSIM reaches the sweep's level (a star, black-edged)


def reconstruction_vs_epsilon(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """Where reconstruction begins, one panel per sweep (``auditkit.stages.probe.reconstruction_sweep``): the defended
    mean SSIM against epsilon (log x) with its interval as a band, the clean attack's mean SSIM dashed, the ReRo
    bound of the claim at each epsilon (identification among M) dotted, the audited claims as grey vertical lines
    and the crossing of the sweep's level marked. Returns ``path``."""
    plt = _pyplot()
    groups = _sweeps(results)
    panels = len(groups) + 1  # one more cell for the legend
    columns = 1 if panels == 1 else 2
    rows = -(-panels // columns)
    figure, axes = plt.subplots(rows, columns, figsize=(5.6 * columns, 3.9 * rows), squeeze=False)
    cells = [axis for row in axes for axis in row]
    if not groups:
        _note(cells[0], "no setting has a reconstruction sweep")
    for axis, (group, (sweep, claims)) in zip(cells, groups.items()):
        eps = [p.eps for p in sweep.points]
        if sweep.points:  # none where the clean attack stayed below the level (its note says so)
            axis.fill_between(eps, [p.ssim_interval[0] for p in sweep.points],
                              [p.ssim_interval[1] for p in sweep.points], color=_SWEEP, alpha=0.2, linewidth=0)
            axis.plot(eps, [p.ssim for p in sweep.points], color=_SWEEP, marker="o", markersize=4,
                      label="defended: mean SSIM, 95 % interval")
        axis.axhline(sweep.clean_ssim, color="black", linestyle="--", linewidth=1, label="clean attack")
        sizes = sorted({int(m) for p in sweep.points for m in p.rero_bound})
        for m, shade in zip(sizes, _REROS):
            axis.plot(eps, [p.rero_bound[str(m)] for p in sweep.points], color=shade, linestyle=":",
                      linewidth=1.5, label=f"identification the claim allows, M = {m} (ReRo bound)")
        for j, claimed in enumerate(sorted(c for c in set(claims) if c is not None)):
            axis.axvline(claimed, color="gray", alpha=0.5, linewidth=3, label="the audited claims" if j == 0 else None)
        if not sweep.points:
            _note(axis, textwrap.fill(_literal(sweep.stopped or "no point was run"), 60))
        if sweep.crossing_eps is not None:
            axis.plot([sweep.crossing_eps], [sweep.level], marker="*", markersize=13, color=_CROSSING,
                      linestyle="", markeredgecolor="black", label=f"mean SSIM reaches {sweep.level:g}", zorder=4)
        axis.set_xscale("log")
        axis.set_ylim(-0.05, 1.05)
        axis.set_title(textwrap.fill(_literal(group), 50), fontsize=10)
        axis.set_xlabel("claimed one-round epsilon (mechanism recalibrated)")
        axis.set_ylabel("mean SSIM; identification bound")
        axis.grid(alpha=0.3)
    legend_cell = cells[len(groups)] if groups else None
    for axis in cells[len(groups):]:
        axis.set_axis_off()
    if legend_cell is not None:
        handles: dict[str, Any] = {}
        for axis in cells[:len(groups)]:
            for handle, label in zip(*axis.get_legend_handles_labels()):
                handles.setdefault(label, handle)
        legend_cell.legend(list(handles.values()), list(handles), loc="center", fontsize=9, frameon=False)
    return _save(figure, path)


def _plottable(values: Sequence[float | None]) -> list[float]:
    """``values`` with None and infinities as NaN (a gap in a line, no point)."""
    return [v if _finite(v) else math.nan for v in values]


def _method_colours(rows: Sequence[Row]) -> dict[str, Any]:
    """Method label -> one neutral colour (``figure_style``: no verdict's hue), the same in every panel of a
    table's figure."""
    return {method: style["color"] for method, style in mechanism_styles([r.method for r in rows]).items()}


def _paper_star(axis: Any, x: Sequence[float], y: Sequence[float], colour: Any) -> None:
    """The paper's numbers: stars in the method's colour, edged in black so they stand out from our points."""
    axis.plot(x, y, linestyle="none", marker="*", markersize=12, color=colour, markeredgecolor="black",
              markeredgewidth=0.6, zorder=5)


def _against_x(axis: Any, rows: Sequence[Row], colours: Mapping[str, Any], x_label: str) -> None:
    """Ours against the figure's x, one line per method with its interval as a band; the paper's points."""
    for method in dict.fromkeys(r.method for r in rows):
        mine = sorted((r for r in rows if r.method == method), key=lambda r: r.x)
        xs = [r.x for r in mine]
        low = _plottable([r.mean if r.interval is None else r.interval[0] for r in mine])
        high = _plottable([r.mean if r.interval is None else r.interval[1] for r in mine])
        axis.plot(xs, _plottable([r.mean for r in mine]), marker="o", markersize=4, color=colours[method],
                  label=_literal(method))
        axis.fill_between(xs, low, high, color=colours[method], alpha=0.2)
        stars = [(r.x, r.paper_value) for r in mine if _finite(r.paper_value)]
        if stars:
            _paper_star(axis, *zip(*stars), colours[method])
    axis.set_xlabel(_literal(x_label or "x"))


def _per_round(axis: Any, document: Reproduction, rows: Sequence[Row],
               colours: Mapping[str, Any], metric: str) -> None:
    """Our mean curve per round over the seeds, one line per row; the paper's final number at the last round."""
    curve, scale = ("curve", 100.0) if metric == "test_accuracy" else ("snr_curve", 1.0)
    for row in rows:
        seeds = document.runs[row.setting].seeds
        mean = scale * np.mean([_plottable(seeds[str(s)][curve]) for s in document.budget.seeds], axis=0)
        axis.plot(np.arange(1, len(mean) + 1), mean, color=colours[row.method], label=_literal(row.method))
        if _finite(row.paper_value):
            _paper_star(axis, [len(mean)], [row.paper_value], colours[row.method])
    axis.set_xlabel("round")
    axis.xaxis.get_major_locator().set_params(integer=True)  # rounds are whole


def _means(axis: Any, rows: Sequence[Row], colours: Mapping[str, Any]) -> None:
    """Our mean per row with its interval as an error bar, the rows side by side; the paper's numbers."""
    for i, row in enumerate(rows):
        mean = row.mean if _finite(row.mean) else math.nan
        low, high = row.interval if row.interval is not None and _finite(*row.interval) else (mean, mean)
        axis.errorbar([i], [mean], yerr=[[mean - low], [high - mean]], marker="o", capsize=4,
                      color=colours[row.method], label=_literal(row.method))
        if _finite(row.paper_value):
            _paper_star(axis, [i], [row.paper_value], colours[row.method])
    axis.set_xticks(range(len(rows)), [_literal(r.method) for r in rows], rotation=20, ha="right", fontsize=7)


def reproduction_table(document: Reproduction, index: int, path: FigureTarget) -> FigureTarget:
    """The reproduction's ``index``-th table (a ``reproduction.json`` document), one panel per column of the
    paper's table: ours against the figure's x with the interval as a band (rows with ``x``), our mean curve per
    round (training tables), or our means with their intervals (the rest); the paper's numbers as stars in the
    method's colour; one legend of the methods beside the panels. Returns ``path``."""
    plt = _pyplot()
    from matplotlib.lines import Line2D

    table = document.tables[index]
    columns = list(dict.fromkeys(r.column for r in table.rows))
    colours = _method_colours(table.rows)
    figure, axes = plt.subplots(1, len(columns), figsize=(min(5 * len(columns), 15) + 3, 4), squeeze=False)
    by_x = any(r.x is not None for r in table.rows)
    for axis, column in zip(axes[0], columns, strict=True):
        rows = [r for r in table.rows if r.column == column]
        if by_x:
            _against_x(axis, rows, colours, table.x_label)
        elif table.kind == "train":
            _per_round(axis, document, rows, colours, table.metric)
        else:
            _means(axis, rows, colours)
        axis.set_title(_literal(f"{table.id}: {column}" if column else table.id), fontsize=10)
        axis.set_ylabel(_literal(table.metric.replace("_", " ")))
        axis.grid(alpha=0.3)
    handles = {label: handle for axis in axes[0] for handle, label in zip(*axis.get_legend_handles_labels())}
    handles["the paper's number"] = Line2D([], [], linestyle="none", marker="*", markersize=12, color="white",
                                           markeredgecolor="black")
    axes[0][-1].legend(list(handles.values()), list(handles), loc="upper left", bbox_to_anchor=(1.02, 1.0),
                       borderaxespad=0.0, fontsize=8)
    return _save(figure, path)


def _canary_panels(results: ResultsDocument) -> list[Setting]:
    """The settings whose one-run canary audit has at least one view with an empirical ROC."""
    return [s for s in results.settings
            if s.canary and any(v.roc.fpr for v in s.canary.views)]


_VIEW_COLOURS = dict(zip(("server", "aggregate", "public", "idealized"), NEUTRAL_PALETTE[:4]))
_CANARY_PANELS = 6  # at most this many settings are drawn (the table lists them all)


def tradeoff_vs_claim(results: ResultsDocument, path: FigureTarget) -> FigureTarget:
    """One panel per setting with a canary audit (at most six): each view's empirical TPR against FPR (log-log) of
    the canary scores, solid (views with the same ROC share a line: for FedAvg with central noise the final
    model's move is the sum of the aggregates over q K), and dashed black the TPR the claim's curve allows
    (1 - f(FPR)), with the diagonal TPR = FPR (guessing) in grey. Returns ``path``."""
    panels = _canary_panels(results)[:_CANARY_PANELS]
    figure, axes = panel_grid(len(panels), columns=3, size=(4.2, 3.6), margin=1.8,
                              empty="no setting ran a one-run canary audit")
    for axis, setting in zip(axes.flat, panels):
        canary = setting.canary
        low = 1.0
        lines: dict[tuple, list[CanaryView]] = {}  # views whose ROC is the same line share one
        for view in canary.views:
            if view.roc.fpr:
                lines.setdefault((tuple(view.roc.fpr), tuple(view.roc.tpr)), []).append(view)
        claim_drawn = False
        for (fpr, tpr), views in lines.items():
            colour = _VIEW_COLOURS.get(views[0].view, NEUTRAL_PALETTE[5])
            names = " = ".join(v.view for v in views)
            verdicts = ", ".join(dict.fromkeys(v.result.verdict for v in views))
            axis.plot(fpr, tpr, color=colour, linewidth=1.6, label=_literal(f"{names}: {verdicts}"))
            if views[0].claim_tpr and not claim_drawn:  # one claim per setting: every view judges the same
                axis.plot(fpr, views[0].claim_tpr, color="black", linestyle="--", linewidth=1.2)
                claim_drawn = True
            low = min(low, fpr[0])
        xs = np.geomspace(low, 1.0, 50)
        axis.plot(xs, xs, color="gray", linewidth=0.8, linestyle=":")
        axis.set_xscale("log")
        axis.set_yscale("log")  # the low-FPR corner is where one-run audits certify (Carlini et al. 2022)
        axis.set_xlim(low, 1.0)
        axis.set_ylim(low, 1.05)
        claim = canary.claim
        judged = "no claim" if claim.epsilon is None else f"claim ε {claim.epsilon:.3g}"
        axis.set_title(_literal(f"{setting.label} ({judged})"), fontsize=9)
        axis.set_xlabel("FPR (excluded canaries guessed in)")
        axis.set_ylabel("TPR (included canaries guessed in)")
        axis.grid(alpha=0.3)
        axis.legend(fontsize=7, loc="upper left")
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], color="black", linewidth=1.6, label="canary guesses (empirical)"),
               Line2D([], [], color="black", linestyle="--", linewidth=1.2, label="the claim's limit, 1 - f(FPR)"),
               Line2D([], [], color="gray", linestyle=":", linewidth=0.8, label="guessing, TPR = FPR")]
    figure.tight_layout()
    figure.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, 0.0), ncol=3, fontsize=8, frameon=False)
    return _save(figure, path)


# what each report figure plots: the report draws a figure only when this selects something
_PLOTTED: dict[str, Callable[[ResultsDocument], Any]] = {
    "accuracy_vs_round": _trained,
    "ssim_vs_epsilon": _ssim_series,
    "ssim_vs_error_std": _defence_points,
    "lower_bound_vs_epsilon": _tested,
    "bits_vs_accuracy": _bits_points,
    "identification_vs_epsilon": _identification_series,
    "probe_ssim_vs_epsilon": _probe_series,
    "reconstruction_vs_epsilon": _sweeps,
    "tradeoff_vs_claim": _canary_panels,
    "membership_roc": lambda results: membership_settings(results.settings, with_roc=True),
    "privacy_utility": lambda results: [p for p in utility_points(results.settings) if p.claimed is not None],
}


def has_data(name: str, results: ResultsDocument) -> bool:
    """Whether the report figure ``name`` would plot anything for ``results`` (figures without data are not
    drawn into a report). A curve against the error's std needs two points: one attack is one point, which the
    summary table already shows."""
    if name == "ssim_vs_error_std":
        return sum(map(len, _defence_points(results).values())) >= 2
    return bool(_PLOTTED[name](results))
