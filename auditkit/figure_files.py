"""Drawing the figures the stages return (``auditkit.stages.base.GridFigure``) into an output folder: the app layer
renders, the stages compute (docs/guide/layout.md, "Layers")."""
from __future__ import annotations

from pathlib import Path

from auditkit.reports.figures import image_grid
from auditkit.output_folder import replace_atomically
from auditkit.stages.base import GridFigure

__all__ = ["write_grid"]


def write_grid(figure: GridFigure, out: str | Path) -> Path:
    """``out / figure.path``, drawn by ``auditkit.reports.figures.image_grid`` and written atomically; a
    content-addressed figure already there (a clean reference another setting drew) is not drawn again."""
    path = Path(out) / figure.path
    if figure.content_addressed and path.is_file():
        return path
    return replace_atomically(path, lambda tmp: image_grid(
        figure.rows, tmp, captions=figure.captions, title=figure.title))
