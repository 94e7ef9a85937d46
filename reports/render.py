"""``render_report``: a document's figures and reports (a results document or a reproduction, by its
``command``), written all or nothing."""
from __future__ import annotations

import functools
import shutil
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from auditkit.reports import figures
from auditkit.reports.membership_figure import membership_roc
from auditkit.reports.utility_figure import privacy_utility
from auditkit.reports.html import render_html
from auditkit.reports.markdown import render_markdown
from auditkit.output_folder import Batch
from auditkit.reports.sections.reconstructions import grid_paths
from auditkit.reports.sections.reproduction import reproduction_figure
from auditkit.results import Reproduction, ResultsDocument, as_dict, as_model, file_name
from auditkit.strict_json import dumps_strict

# the summary figures, drawn into out/figures/<name>.png when they have data (figures.has_data)
FIGURES: dict[str, Callable[[ResultsDocument, Path], Path]] = {
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


def _check_reconstructions(results: ResultsDocument, results_dir: Path) -> None:
    """Every reconstruction grid the results name (a grid, a clean reference) must be a file in ``results_dir``."""
    for i, setting in enumerate(results.settings):
        for section in ("inversion", "probe"):
            found = getattr(setting, section)
            for field in ("figure", "clean_figure"):
                figure = None if found is None else getattr(found, field)
                if figure is not None and not (results_dir / figure).is_file():
                    raise ValueError(f"results.settings[{i}].{section}.{field}: {figure} is not a file in "
                                     f"{results_dir}")


def _copy_grids(document: ResultsDocument | Reproduction, results_dir: Path, out: Path, staging: Batch) -> None:
    """The reconstruction grids copied from ``results_dir`` into ``out`` at the same relative paths (with the
    reports, in ``staging``), so a report rendered elsewhere links only files of its own folder."""
    if isinstance(document, Reproduction) or results_dir.resolve() == out.resolve():
        return
    for grid in grid_paths(document.settings):
        staging.write(out / grid, functools.partial(shutil.copyfile, results_dir / grid))


def _drawn(results: ResultsDocument | Reproduction) -> dict[str, Callable[[Path], Path]]:
    """The figures of a document, name -> a function drawing it into a path: a results document's summary figures
    that have data (``FIGURES``), or one figure per table of a reproduction (``figures.reproduction_table``)."""
    if isinstance(results, Reproduction):
        return {reproduction_figure(i): functools.partial(figures.reproduction_table, results, i)
                for i in range(len(results.tables))}
    return {name: functools.partial(draw, results) for name, draw in FIGURES.items() if figures.has_data(name, results)}


def render_report(
    results: dict[str, Any] | ResultsDocument | Reproduction, out: str | Path, formats: Iterable[str] = FORMATS, *,
    results_dir: str | Path | None = None, with_results: bool = False,
) -> list[Path]:
    """Validate ``results`` (any command's document: a results document, or a reproduction, which is laid out
    by its own template), draw its figures into ``out/figures/*.png`` and write ``out/report.html`` and / or
    ``out/report.md``, and with ``with_results`` the document itself (``out/results.json``, or reproduction.json); returns
    the paths written. Reconstruction grids are read from ``results_dir``, the folder of ``results.json`` (default:
    ``out``), and copied into ``out`` where it is another folder: the report stands alone. The files are replaced
    together, or none is (``auditkit.output_folder.Batch``)."""
    formats = tuple(formats)
    document = as_model(results)
    unknown = sorted(set(formats) - set(FORMATS))
    if unknown:
        raise ValueError(f"unknown report format {unknown[0]!r}; choose from {', '.join(FORMATS)}")
    out = Path(out)
    results_dir = out if results_dir is None else Path(results_dir)
    if isinstance(document, ResultsDocument):
        _check_reconstructions(document, results_dir)
    (out / "figures").mkdir(parents=True, exist_ok=True)
    staging = Batch(out)
    try:
        if with_results:
            written = results if isinstance(results, dict) else as_dict(document)
            staging.write_text(out / file_name(written), dumps_strict(written, indent=2) + "\n")
        _copy_grids(document, results_dir, out, staging)
        drawn = {name: staging.write(out / "figures" / f"{name}.png", draw)
                 for name, draw in _drawn(document).items()}
        if "md" in formats:
            links = {name: f"figures/{name}.png" for name in drawn}
            staging.write_text(out / "report.md", render_markdown(document, links))
        if "html" in formats:
            staging.write_text(out / "report.html", render_html(document, drawn, results_dir))
    except BaseException:
        staging.discard()
        raise
    return staging.commit()
