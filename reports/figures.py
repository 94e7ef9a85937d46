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
from typing import Any

import numpy as np

# marker and colour of each verdict in the lower-bound figure
_VERDICT_STYLES = {"consistent": ("o", "tab:green"), "violated": ("X", "tab:red"),
                   "vacuous claim": ("s", "tab:orange"), "inconclusive": ("D", "tab:gray")}
_OTHER_VERDICT = ("^", "black")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    return plt


def _literal(text: str) -> str:
    """``text`` drawn as given: every "$" escaped, so user-supplied text never switches to mathtext."""
    return text.replace("$", r"\$")


def _save(figure: Any, path: str | Path) -> Path:
    """Lay out, write as PNG, close; returns ``path``."""
    plt = _pyplot()
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110, format="png", bbox_inches="tight")  # labels past the axes stay in
    plt.close(figure)
    return path


def _as_hwc(image: np.ndarray) -> np.ndarray:
    """C x H x W in [0, 1] -> H x W (grey) or H x W x 3, clipped for display."""
    image = np.clip(np.asarray(image, dtype=np.float32), 0.0, 1.0)
    return image[0] if image.shape[0] == 1 else np.transpose(image, (1, 2, 0))


def image_grid(
    rows: Mapping[str, np.ndarray], path: str | Path, *, captions: Mapping[str, Sequence[str]] | None = None,
    title: str = "",
) -> Path:
    """A grid with one row per entry of ``rows`` (name -> N x C x H x W array in [0, 1]), N columns.

    ``captions`` optionally gives a short text under each image of a row (e.g. its SSIM). Returns ``path``.
    """
    if not rows:
        raise ValueError("rows must name at least one row of images")
    counts = {name: len(images) for name, images in rows.items()}
    if len(set(counts.values())) != 1:
        raise ValueError(f"rows must all hold the same number of images, got {counts}")
    plt = _pyplot()
    n = next(iter(counts.values()))
    figure, axes = plt.subplots(len(rows), n, figsize=(1.3 * n + 1.6, 1.5 * len(rows) + 0.4), squeeze=False)
    for r, (name, images) in enumerate(rows.items()):
        for c in range(n):
            axis = axes[r][c]
            image = _as_hwc(images[c])
            axis.imshow(image, cmap="gray" if image.ndim == 2 else None, vmin=0.0, vmax=1.0)
            axis.set_xticks([])
            axis.set_yticks([])
            if captions is not None and name in captions:
                axis.set_xlabel(_literal(captions[name][c]), fontsize=7)
        axes[r][0].set_ylabel(_literal(name), fontsize=8, rotation=0, ha="right", va="center")
    if title:
        width = figure.get_size_inches()[0]
        figure.suptitle(textwrap.fill(_literal(title), width=max(30, int(width * 13))), fontsize=8)
    return _save(figure, path)


def defence_curves(
    series: Mapping[str, Sequence[tuple[float, float]]], path: str | Path, *, xlabel: str, ylabel: str,
    title: str = "", reference: float | None = None, reference_label: str = "", log_x: bool = False,
) -> Path:
    """One line per series (name -> [(x, y), ...]) on shared axes; an optional horizontal reference line
    (e.g. the clean attack's score). Returns ``path``."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.0, 4.0))
    for name, points in series.items():
        xs, ys = zip(*points) if points else ((), ())
        axis.plot(xs, ys, marker="o", label=_literal(name))
    if reference is not None:
        axis.axhline(reference, color="black", linestyle="--", linewidth=1, label=_literal(reference_label) or None)
    if log_x:
        axis.set_xscale("log")
    axis.set_xlabel(_literal(xlabel))
    axis.set_ylabel(_literal(ylabel))
    if title:
        axis.set_title(_literal(title), fontsize=9)
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _finite(*values: float | None) -> bool:
    """Whether every value is a finite number."""
    return all(v is not None and math.isfinite(v) for v in values)


def _note(axis: Any, text: str) -> None:
    """A centred note on otherwise empty axes."""
    axis.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, color="dimgray", wrap=True,
              transform=axis.transAxes)


def _trained(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The settings that trained (and recorded at least one round)."""
    return [s for s in results["settings"] if s["training"] is not None and s["training"]["rounds"]]


def accuracy_vs_round(results: Mapping[str, Any], path: str | Path) -> Path:
    """Test accuracy (%) by round, one line per setting that trained, labelled with the setting's label.
    Returns ``path``."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    trained = _trained(results)
    if not trained:
        _note(axis, "no setting trained")
    for setting in trained:
        rounds = setting["training"]["rounds"]
        axis.plot([r["round"] for r in rounds], [100 * r["test_accuracy"] for r in rounds],
                  marker="o", markersize=3, label=_literal(setting["label"]))
    axis.set_xlabel("round")
    axis.set_ylabel("test accuracy (%)")
    if trained:
        axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _ssim_series(results: Mapping[str, Any]) -> dict[str, list[tuple[float, float, float | None]]]:
    """mechanism name -> [(claimed epsilon, defended SSIM, clean SSIM or None)] of the settings with a finite
    positive claim and an inversion result."""
    series: dict[str, list[tuple[float, float, float | None]]] = {}
    for setting in results["settings"]:
        epsilon, inversion = setting["mechanism"]["guarantee"]["epsilon"], setting["inversion"]
        if inversion is not None and _finite(epsilon) and epsilon > 0:
            clean = None if inversion["clean"] is None else inversion["clean"]["ssim_mean"]
            series.setdefault(setting["mechanism"]["name"], []).append(
                (epsilon, inversion["defended"]["ssim_mean"], clean))
    return series


def ssim_vs_epsilon(results: Mapping[str, Any], path: str | Path) -> Path:
    """Inversion SSIM against the one-round claimed epsilon (log x), one series per mechanism name: defended
    solid, clean attack dashed in the same colour (where a clean reference was run). Settings without a finite
    positive claim or without an inversion result are left out. Returns ``path``."""
    plt = _pyplot()
    series = _ssim_series(results)
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    for name, points in series.items():
        points = sorted(points, key=lambda point: point[0])
        line, = axis.plot([p[0] for p in points], [p[1] for p in points], marker="o",
                          label=_literal(f"{name} (defended)"))
        clean = [(p[0], p[2]) for p in points if p[2] is not None]
        if clean:
            axis.plot(*zip(*clean), linestyle="--", marker="x", color=line.get_color(),
                      label=_literal(f"{name} (clean attack)"))
    if series:
        axis.set_xscale("log")
        axis.margins(y=0.1)  # a clean attack near SSIM 1 stays clear of the frame
        axis.legend(fontsize=7)
    else:
        _note(axis, "no setting has both a finite claimed epsilon and an inversion result")
    axis.set_xlabel("claimed one-round epsilon")
    axis.set_ylabel("mean SSIM of the reconstructions")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _defence_points(results: Mapping[str, Any]) -> dict[str, list[tuple[float, float, float | None]]]:
    """mechanism name -> [(error std, defended SSIM, clean SSIM or None)], sorted by error std, of the settings
    whose inversion recorded a finite ``error_std`` (``auditkit attack --curve``)."""
    series: dict[str, list[tuple[float, float, float | None]]] = {}
    for setting in results["settings"]:
        inversion = setting["inversion"]
        if inversion is not None and _finite(inversion.get("error_std")):
            clean = None if inversion["clean"] is None else inversion["clean"]["ssim_mean"]
            series.setdefault(setting["mechanism"]["name"], []).append(
                (inversion["error_std"], inversion["defended"]["ssim_mean"], clean))
    return {name: sorted(points, key=lambda point: point[0]) for name, points in series.items()}


def ssim_vs_error_std(results: Mapping[str, Any], path: str | Path) -> Path:
    """Inversion SSIM against the standard deviation of the error in the server's view, one line per mechanism
    name (a defence curve: the axis on which mechanisms of different kinds compare). The clean attack is dashed:
    one black line when every setting shares its score (one clean run for the whole curve), else a dashed line
    per mechanism in its colour. The x axis is logarithmic when the errors span more than a decade.
    Returns ``path``."""
    plt = _pyplot()
    series = _defence_points(results)
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    cleans = {p[2] for points in series.values() for p in points if _finite(p[2])}
    for name, points in series.items():
        line, = axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=_literal(name))
        clean = [(p[0], p[2]) for p in points if p[2] is not None]
        if len(cleans) > 1 and clean:
            axis.plot(*zip(*clean), linestyle="--", color=line.get_color(), label=_literal(f"{name} (clean attack)"))
    if len(cleans) == 1:
        axis.axhline(next(iter(cleans)), color="black", linestyle="--", linewidth=1, label="clean attack")
    errors = [p[0] for points in series.values() for p in points]
    if errors and min(errors) > 0 and max(errors) > 10 * min(errors):
        axis.set_xscale("log")
    axis.margins(y=0.1)  # the clean line, near the top, stays clear of the frame
    if series:
        axis.legend(fontsize=7)
    else:
        _note(axis, "no setting recorded the error of the server's view")
    axis.set_xlabel("standard deviation of the error in the server's view")
    axis.set_ylabel("mean SSIM of the reconstructions")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _tested(results: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """The settings with a finite claim and a finite certified lower bound."""
    return [s for s in results["settings"] if s["distinguish"] is not None
            and _finite(s["distinguish"]["claimed_epsilon"], s["distinguish"]["epsilon_lower_bound"])]


def lower_bound_vs_epsilon(results: Mapping[str, Any], path: str | Path) -> Path:
    """Certified epsilon lower bound against the claimed epsilon, a point per setting with a finite claim and a
    distinguishing result, marked by verdict; the line y = x and the caps (``max_certifiable``) as dotted
    horizontal lines. The x axis is logarithmic when the claims span more than a decade (vague claims of 10^4
    sit beside tight ones); the y axis stops just above the largest cap, the most any test could certify.
    Returns ``path``."""
    plt = _pyplot()
    tested = _tested(results)
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    if not tested:
        _note(axis, "no setting has both a finite claimed epsilon and a distinguishing result")
    verdicts_drawn: set[str] = set()
    for setting in tested:
        test = setting["distinguish"]
        marker, colour = _VERDICT_STYLES.get(test["verdict"], _OTHER_VERDICT)
        axis.scatter([test["claimed_epsilon"]], [test["epsilon_lower_bound"]], marker=marker, color=colour,
                     s=50, zorder=3, label=None if test["verdict"] in verdicts_drawn else _literal(test["verdict"]))
        verdicts_drawn.add(test["verdict"])
        if len(tested) <= 4:  # more labels would overlap; the summary table names every point
            axis.annotate(_literal(setting["label"]), (test["claimed_epsilon"], test["epsilon_lower_bound"]),
                          fontsize=7, xytext=(4, 4), textcoords="offset points")
    caps = sorted({s["distinguish"]["max_certifiable"] for s in tested if _finite(s["distinguish"]["max_certifiable"])})
    for i, cap in enumerate(caps):
        axis.axhline(cap, color="black", linestyle=":", linewidth=1,
                     label="cap (a perfect test)" if i == 0 else None)
    if tested:
        claims = [s["distinguish"]["claimed_epsilon"] for s in tested]
        bounds = [s["distinguish"]["epsilon_lower_bound"] for s in tested]
        positive = [c for c in claims if c > 0]
        logarithmic = bool(positive) and max(positive) > 10 * min(positive)
        low = min(positive) / 2 if logarithmic else 0.0
        high = max(claims + caps) * (2 if logarithmic else 1.05)
        xs = np.geomspace(low, high, 200) if logarithmic else np.linspace(low, high, 2)
        axis.plot(xs, xs, color="gray", linewidth=1, label="y = x (the claim)")
        if logarithmic:
            axis.set_xscale("log")
        axis.set_xlim(low if logarithmic else 0.0, high)
        axis.set_ylim(0.0, 1.15 * max(caps + bounds + [1e-9]))
        axis.legend(fontsize=7)
    axis.set_xlabel("claimed epsilon (one round)")
    axis.set_ylabel("certified epsilon lower bound")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _bits_points(results: Mapping[str, Any]) -> list[tuple[str, float, float]]:
    """(label, final bits per coordinate, final test accuracy in %) of each setting that trained, where finite."""
    points = [(s["label"], s["training"]["final"]["bits_per_coordinate"], s["training"]["final"]["test_accuracy"])
              for s in results["settings"] if s["training"] is not None]
    return [(label, bits, 100 * accuracy) for label, bits, accuracy in points if _finite(bits, accuracy)]


def bits_vs_accuracy(results: Mapping[str, Any], path: str | Path) -> Path:
    """Final uplink bits per coordinate against final test accuracy (%), a point per setting that trained,
    annotated with its label. Returns ``path``."""
    plt = _pyplot()
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    points = _bits_points(results)
    if not points:
        _note(axis, "no setting has a finite rate and accuracy")
    for label, bits, accuracy in points:
        axis.scatter([bits], [accuracy], zorder=3)
        axis.annotate(_literal(label), (bits, accuracy), fontsize=7, xytext=(4, 4), textcoords="offset points")
    axis.set_xlabel("uplink bits per coordinate (float32 = 32)")
    axis.set_ylabel("final test accuracy (%)")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _identification_series(results: Mapping[str, Any]) -> dict[tuple[str, int], list[tuple[float, dict[str, Any]]]]:
    """(mechanism name, M) -> [(claimed epsilon, identification test)] of the settings with a finite positive
    claim and identification tests, sorted by epsilon."""
    series: dict[tuple[str, int], list[tuple[float, dict[str, Any]]]] = {}
    for setting in results["settings"]:
        epsilon, ident = setting["mechanism"]["guarantee"]["epsilon"], setting["identification"]
        if ident is not None and _finite(epsilon) and epsilon > 0:
            for test in ident["tests"]:
                series.setdefault((setting["mechanism"]["name"], test["candidates"]), []).append((epsilon, test))
    return {key: sorted(points, key=lambda p: p[0]) for key, points in series.items()}


def identification_vs_epsilon(results: Mapping[str, Any], path: str | Path) -> Path:
    """Identification success with its Clopper-Pearson interval against the claimed epsilon (log x), one series per
    (mechanism, M), the claim's bound dashed in the same colour and guessing (1/M) dotted. Returns ``path``."""
    plt = _pyplot()
    series = _identification_series(results)
    figure, axis = plt.subplots(figsize=(6.8, 4.2))
    markers = ("o", "s", "^", "D", "v")
    sizes = sorted({m for _, m in series})
    for (name, m), points in series.items():
        eps = [p[0] for p in points]
        rate = np.array([p[1]["rate"] for p in points])
        low = np.array([p[1]["interval"][0] for p in points])
        high = np.array([p[1]["interval"][1] for p in points])
        marker = markers[sizes.index(m) % len(markers)]
        bars = axis.errorbar(eps, rate, yerr=[rate - low, high - rate], marker=marker, capsize=3,
                             label=_literal(f"{name}, M = {m}"))
        axis.plot(eps, [p[1]["bound"] for p in points], linestyle="--", color=bars[0].get_color(), linewidth=1)
    for m in sizes:
        axis.axhline(1 / m, color="gray", linestyle=":", linewidth=1)
    if series:
        axis.set_xscale("log")
        axis.legend(fontsize=7)
        axis.set_ylim(-0.02, 1.05)
    else:
        _note(axis, "no setting has both a finite claimed epsilon and identification tests")
    axis.set_xlabel("claimed one-round epsilon")
    axis.set_ylabel("identification success (target among M)")
    axis.grid(alpha=0.3)
    return _save(figure, path)


def _probe_series(results: Mapping[str, Any]) -> dict[str, list[tuple[float, float, float]]]:
    """mechanism name -> [(claimed epsilon, defended probe SSIM, clean probe SSIM)] of the settings with a finite
    positive claim and a probe, sorted by epsilon."""
    series: dict[str, list[tuple[float, float, float]]] = {}
    for setting in results["settings"]:
        epsilon, probe = setting["mechanism"]["guarantee"]["epsilon"], setting["probe"]
        if probe is not None and _finite(epsilon) and epsilon > 0:
            series.setdefault(setting["mechanism"]["name"], []).append(
                (epsilon, probe["defended"]["ssim_mean"], probe["clean"]["ssim_mean"]))
    return {name: sorted(points) for name, points in series.items()}


def probe_ssim_vs_epsilon(results: Mapping[str, Any], path: str | Path) -> Path:
    """The inversion probe's mean SSIM against the claimed epsilon (log x), one line per mechanism, its clean
    attack dashed in the same colour. Returns ``path``."""
    plt = _pyplot()
    series = _probe_series(results)
    figure, axis = plt.subplots(figsize=(6.4, 4.0))
    for name, points in series.items():
        line, = axis.plot([p[0] for p in points], [p[1] for p in points], marker="o", label=_literal(name))
        axis.plot([p[0] for p in points], [p[2] for p in points], linestyle="--", color=line.get_color(),
                  label=_literal(f"{name} (clean attack)"))
    if series:
        axis.set_xscale("log")
        axis.set_ylim(-0.05, 1.05)
        axis.legend(fontsize=7)
    else:
        _note(axis, "no setting has both a finite claimed epsilon and a probe result")
    axis.set_xlabel("claimed one-round epsilon")
    axis.set_ylabel("probe mean SSIM")
    axis.grid(alpha=0.3)
    return _save(figure, path)


# what each report figure plots: the report draws a figure only when this selects something
_PLOTTED: dict[str, Callable[[Mapping[str, Any]], Any]] = {
    "accuracy_vs_round": _trained,
    "ssim_vs_epsilon": _ssim_series,
    "ssim_vs_error_std": _defence_points,
    "lower_bound_vs_epsilon": _tested,
    "bits_vs_accuracy": _bits_points,
    "identification_vs_epsilon": _identification_series,
    "probe_ssim_vs_epsilon": _probe_series,
}


def has_data(name: str, results: Mapping[str, Any]) -> bool:
    """Whether the report figure ``name`` would plot anything for ``results`` (figures without data are not
    drawn into a report). A curve against the error's std needs two points: one attack is one point, which the
    summary table already shows."""
    if name == "ssim_vs_error_std":
        return sum(map(len, _defence_points(results).values())) >= 2
    return bool(_PLOTTED[name](results))
