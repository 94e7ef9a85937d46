"""What the commands write: results.json with report.html and report.md beside it, into an output folder held for
the writing (``auditkit.output_folder``), each path printed; numbers as the reports show them."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from auditkit.attacks.roc import RocSummary
from auditkit.cli.terminal import print_written
from auditkit.output_folder import Mode, OutputFolder
from auditkit.reports import render_report
from auditkit.results import validate_results
from auditkit.reports.sections.text import number, roc_text
from auditkit.results.model import RocSummary as RocSummaryEntry

__all__ = ["check_output", "overwrite_option", "roc_line", "snr", "write_document"]

overwrite_option = click.option(
    "--overwrite", is_flag=True, default=False,
    help="Replace the earlier run in --out, once this one has finished (until then it is kept whole).")


def _mode(overwrite: bool) -> Mode:
    return Mode.OVERWRITE if overwrite else Mode.NEW


def check_output(out: Path, overwrite: bool) -> Path:
    """Refuse, before any work, an ``out`` that is a file, in use, or holding an earlier run without --overwrite."""
    return OutputFolder.check(out, _mode(overwrite))


def write_document(document: dict[str, Any], out: Path, *, overwrite: bool, command: str,
                   write_first: Callable[[Path], list[Path]] = lambda folder: []) -> None:
    """Hold ``out``; ``write_first(folder)`` (files the command writes itself), then results.json and the reports
    replaced together; with ``overwrite`` all of it replaces the earlier run only now. A ``wrote PATH`` line for
    each file."""
    validate_results(document)  # an invalid document writes nothing, not even the folder
    folder = OutputFolder(out, _mode(overwrite))
    with folder.open(command):
        written = [*write_first(folder.work),
                   *render_report(document, folder.work, results_dir=folder.work, with_results=True)]
        folder.swap_in()
    print_written(dict.fromkeys(folder.path / path.relative_to(folder.work) for path in written))


def snr(value: float | None) -> str:
    """An SNR in dB as the tables show it: "-" when not measured, "inf" for a lossless uplink."""
    return number(value, ".2f")


def roc_line(summary: RocSummary | None) -> str:
    """An ``auditkit.attacks.roc.RocSummary`` as the reports show it: "AUROC 0.760 [0.759, 0.761]; TPR at 1 % FPR
    ..." and the intervals' level."""
    if summary is None:
        return "-"
    shown = roc_text(RocSummaryEntry.model_validate(summary.to_dict()))
    return f"{shown} ({number(100 * summary.confidence, 'g')} % intervals: DeLong, Clopper-Pearson)"
