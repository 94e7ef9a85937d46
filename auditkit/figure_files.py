"""Drawing the figures the stages return (``auditkit.stages.base.GridFigure``) into an output folder: the app layer
renders, the stages compute (docs/guide/layout.md, "Layers")."""
from __future__ import annotations

import os
from pathlib import Path

from auditkit.reports.figures import image_grid
from auditkit.output_folder import Workspace
from auditkit.stages.base import GridFigure

__all__ = ["write_grid"]


def write_grid(figure: GridFigure, out: str | os.PathLike[str] | Workspace) -> Path:
    """``figure.path`` in ``out`` (a folder, or a held output folder's workspace), drawn by
    ``auditkit.reports.figures.image_grid`` and written atomically; a content-addressed figure already there (a clean
    reference another setting drew) is not drawn again."""
    with Workspace.of(out) as workspace:
        if figure.content_addressed and workspace.is_file(figure.path):
            return workspace.path / figure.path
        return workspace.write(figure.path, lambda file: image_grid(
            figure.rows, file, captions=figure.captions, title=figure.title))
