"""What the audit's stages share: the figure data a stage returns (a stage does not render: the app layer draws it,
``auditkit.figure_files``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

__all__ = ["GridFigure"]


@dataclass(frozen=True)
class GridFigure:
    """A grid of images to draw at ``path`` (relative to the output folder): one row of images per name in
    ``rows`` (arrays of shape (N, C, H, W)), each image's caption under it, and the figure's title."""

    path: str
    rows: Mapping[str, np.ndarray]
    captions: Mapping[str, Sequence[str]] = field(default_factory=dict)
    title: str = ""
