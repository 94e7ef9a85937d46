"""Figures written beside the results: reconstruction grids and defence curves (PNG, via matplotlib's Agg).

Inputs are plain arrays and the results documents' own lists, never toolkit objects, so a figure can be
redrawn from saved results alone.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
import textwrap
from pathlib import Path

import numpy as np


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")  # files only: never needs a display
    import matplotlib.pyplot as plt

    return plt


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
                axis.set_xlabel(captions[name][c], fontsize=7)
        axes[r][0].set_ylabel(name, fontsize=8, rotation=0, ha="right", va="center")
    if title:
        width = figure.get_size_inches()[0]
        figure.suptitle(textwrap.fill(title, width=max(30, int(width * 13))), fontsize=8)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path


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
        axis.plot(xs, ys, marker="o", label=name)
    if reference is not None:
        axis.axhline(reference, color="black", linestyle="--", linewidth=1, label=reference_label or None)
    if log_x:
        axis.set_xscale("log")
    axis.set_xlabel(xlabel)
    axis.set_ylabel(ylabel)
    if title:
        axis.set_title(title, fontsize=9)
    axis.legend(fontsize=7)
    axis.grid(alpha=0.3)
    figure.tight_layout()
    path = Path(path)
    figure.savefig(path, dpi=110)
    plt.close(figure)
    return path
