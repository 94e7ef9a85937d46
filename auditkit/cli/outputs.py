"""What the commands write: results.json with report.html and report.md beside it, each path printed; numbers as the
reports show them."""
from __future__ import annotations

from pathlib import Path
from typing import Any

from auditkit import results
from auditkit.cli.terminal import print_written
from auditkit.reports import render_report
from auditkit.reports.content import number

__all__ = ["snr", "write_document", "write_reports"]


def write_reports(document: dict[str, Any], out: Path) -> list[Path]:
    """report.html and report.md beside results.json."""
    return render_report(document, out, results_dir=out)


def write_document(document: dict[str, Any], out: Path, *written: Path) -> None:
    """results.json and the reports into ``out``, then a ``wrote PATH`` line for each (``written`` first: files the
    command wrote itself)."""
    print_written([*written, results.write_results(document, out), *write_reports(document, out)])


def snr(value: float | None) -> str:
    """An SNR in dB as the tables show it: "-" when not measured, "inf" for a lossless uplink."""
    return number(value, ".2f")
