"""What the commands write: results.json with report.html and report.md beside it, into an output folder held for
the writing (``auditkit.output_folder``), each path printed; numbers as the reports show them."""
from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from auditkit.attacks.roc import RocSummary
from auditkit.cli.terminal import console, print_written
from auditkit.output_folder import Mode, OutputFolder, Swap, Workspace
from auditkit.reports import render_report
from auditkit.results import validate_results
from auditkit.reports.sections.text import number, roc_text
from auditkit.results.model import RocSummary as RocSummaryEntry

__all__ = ["check_output", "overwrite_option", "print_swap", "roc_line", "snr", "write_document"]

overwrite_option = click.option(
    "--overwrite", is_flag=True, default=False,
    help="Replace the earlier run in --out, once this one has finished (until then it is kept whole).")


def _mode(overwrite: bool) -> Mode:
    return Mode.OVERWRITE if overwrite else Mode.NEW


def check_output(out: Path, overwrite: bool) -> Path:
    """Refuse, before any work, an ``out`` that is a file, in use, or holding an earlier run without --overwrite."""
    return OutputFolder.check(out, _mode(overwrite))


def write_document(document: dict[str, Any], out: Path, *, overwrite: bool, command: str,
                   write_first: Callable[[Workspace], list[Path]] = lambda folder: []) -> None:
    """Hold ``out``; ``write_first(workspace)`` (files the command writes itself), then results.json and the reports
    replaced together; with ``overwrite`` all of it replaces the earlier run only now. A ``wrote PATH`` line for
    each file, and for an overwrite what it replaced and kept (``print_swap``)."""
    validate_results(document)  # an invalid document writes nothing, not even the folder
    folder = OutputFolder(out, _mode(overwrite))
    with folder.open(command):
        work = folder.work
        written = [*write_first(work), *render_report(document, work, results_dir=work.path, with_results=True)]
        names = [path.relative_to(work.path) for path in written]
        swap = folder.swap_in()
    print_written(dict.fromkeys(folder.path / name for name in names))
    print_swap(folder.path, swap)


def print_swap(out: Path, swap: Swap | None) -> None:
    """What an overwrite replaced in ``out``: one line of the earlier run's files it removed (the new run has none of
    that name) and one of the files auditkit did not write, kept; nothing when there was no earlier run."""
    if swap is None:
        return
    if swap.removed:
        console.print(f"removed {len(swap.removed)} file{'s' * (len(swap.removed) != 1)} of the earlier run in {out} "
                      f"that this run does not write: {_listed(swap.removed)}", markup=False, highlight=False,
                      soft_wrap=True)
    if swap.kept:
        console.print(f"kept {len(swap.kept)} file{'s' * (len(swap.kept) != 1)} in {out} that auditkit did not write: "
                      f"{_listed(swap.kept)}", markup=False, highlight=False, soft_wrap=True)


def _listed(names: tuple[str, ...], shown: int = 8) -> str:
    return ", ".join(names[:shown]) + (f" and {len(names) - shown} more" if len(names) > shown else "")


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
