"""``render_report``: a document's figures and reports (a results document or a reproduction, by its
``command``), written all or nothing, inside the folder given and without following a link in it."""
from __future__ import annotations

import io
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from auditkit.folder import Folder, Kind
from auditkit.output_folder import Batch, Workspace
from auditkit.reports import figures
from auditkit.reports.figures import FigureTarget
from auditkit.reports.html import render_html
from auditkit.reports.markdown import render_markdown
from auditkit.reports.membership_figure import membership_roc
from auditkit.reports.sections.reconstructions import grid_paths
from auditkit.reports.sections.reproduction import reproduction_figure
from auditkit.reports.utility_figure import privacy_utility
from auditkit.results import Reproduction, ResultsDocument, as_dict, as_model, file_name
from auditkit.strict_json import dumps_strict

# the summary figures, drawn into out/figures/<name>.png when they have data (figures.has_data)
FIGURES: dict[str, Callable[[ResultsDocument, FigureTarget], FigureTarget]] = {
    "accuracy_vs_round": figures.accuracy_vs_round,
    "privacy_utility": privacy_utility,
    "ssim_vs_epsilon": figures.ssim_vs_epsilon,
    "ssim_vs_error_std": figures.ssim_vs_error_std,
    "lower_bound_vs_epsilon": figures.lower_bound_vs_epsilon,
    "bits_vs_accuracy": figures.bits_vs_accuracy,
    "identification_vs_epsilon": figures.identification_vs_epsilon,
    "probe_ssim_vs_epsilon": figures.probe_ssim_vs_epsilon,
    "reconstruction_vs_epsilon": figures.reconstruction_vs_epsilon,
    "tradeoff_vs_claim": figures.tradeoff_vs_claim,
    "membership_roc": membership_roc,
}
FORMATS = ("html", "md")
MAX_GRID_BYTES = 64 * 2**20  # a reconstruction grid larger than this is not one auditkit drew


def _grids(results: ResultsDocument | Reproduction, source: Folder) -> dict[str, bytes]:
    """Every reconstruction grid the results name (a grid, a clean reference), read from ``source`` (the folder of
    results.json) without following a link; ValueError naming the one that is not a file there."""
    if isinstance(results, Reproduction):
        return {}
    for i, setting in enumerate(results.settings):
        for section in ("inversion", "probe"):
            found = getattr(setting, section)
            for field in ("figure", "clean_figure"):
                figure = None if found is None else getattr(found, field)
                if figure is not None and source.expect(figure, Kind.FILE) is not Kind.FILE:
                    raise ValueError(f"results.settings[{i}].{section}.{field}: {figure} is not a file in "
                                     f"{source.path}")
    return {grid: source.read_bytes(grid, max_bytes=MAX_GRID_BYTES) for grid in grid_paths(results.settings)}


def _drawn(results: ResultsDocument | Reproduction) -> dict[str, bytes]:
    """The figures of a document as PNG images by name: a results document's summary figures that have data
    (``FIGURES``), or one figure per table of a reproduction (``figures.reproduction_table``)."""
    if isinstance(results, Reproduction):
        draws: dict[str, Callable[[FigureTarget], object]] = {
            reproduction_figure(i): lambda file, i=i: figures.reproduction_table(results, i, file)
            for i in range(len(results.tables))}
    else:
        draws = {name: lambda file, draw=draw: draw(results, file)
                 for name, draw in FIGURES.items() if figures.has_data(name, results)}
    drawn = {}
    for name, draw in draws.items():
        image = io.BytesIO()
        draw(image)
        drawn[name] = image.getvalue()
    return drawn


@contextmanager
def _source(results_dir: str | os.PathLike[str] | None, out: Workspace) -> Iterator[Folder]:
    if results_dir is None or Path(results_dir).resolve() == out.path.resolve():
        yield out.folder
    else:
        with Folder.open(results_dir) as folder:
            yield folder


def render_report(
    results: dict[str, Any] | ResultsDocument | Reproduction, out: str | os.PathLike[str] | Workspace,
    formats: Iterable[str] = FORMATS, *, results_dir: str | os.PathLike[str] | None = None,
    with_results: bool = False,
) -> list[Path]:
    """Validate ``results`` (any command's document: a results document, or a reproduction, which is laid out
    by its own template), draw its figures into ``out/figures/*.png`` and write ``out/report.html`` and / or
    ``out/report.md``, and with ``with_results`` the document itself (``out/results.json``, or reproduction.json);
    returns the paths written. Reconstruction grids are read from ``results_dir``, the folder of ``results.json``
    (default: ``out``), and copied into ``out`` where it is another folder: the report stands alone. The files are
    replaced together, or none is (``auditkit.output_folder.Batch``); only files auditkit wrote in ``out`` are
    replaced, and no link in either folder is followed (``auditkit.folder``)."""
    formats = tuple(formats)
    document = as_model(results)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown report format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
    with Workspace.of(out) as workspace, _source(results_dir, workspace) as source:
        grids = _grids(document, source)
        drawn = _drawn(document)
        staging = workspace.batch()
        try:
            _stage(staging, results, document, formats, with_results, grids if source is not workspace.folder
                   else {}, drawn)
            if "html" in formats:
                staging.write_text("report.html", render_html(document, drawn, grids))
        except BaseException:
            staging.discard()
            raise
        return staging.commit()


def _stage(staging: Batch, results: dict[str, Any] | ResultsDocument | Reproduction,
           document: ResultsDocument | Reproduction, formats: tuple[str, ...], with_results: bool,
           copied: dict[str, bytes], drawn: dict[str, bytes]) -> None:
    """The document (``with_results``), the grids copied from another folder, the figures and report.md, staged."""
    if with_results:
        written = results if isinstance(results, dict) else as_dict(document)
        staging.write_text(file_name(written), dumps_strict(written, indent=2) + "\n")
    for grid, data in copied.items():
        staging.write_bytes(grid, data)
    for name, data in drawn.items():
        staging.write_bytes(f"figures/{name}.png", data)
    if "md" in formats:
        staging.write_text("report.md", render_markdown(document, {name: f"figures/{name}.png" for name in drawn}))
