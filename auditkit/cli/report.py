"""``auditkit report``: report.html / report.md rendered again from a results.json or reproduction.json."""
from __future__ import annotations

from pathlib import Path

import click

from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.errors import UsageFailure, run_guarded
from auditkit.cli.options import HelpArgument, choice, path, plugin_option
from auditkit.cli.terminal import print_written
from auditkit.output_folder import Mode, OutputFolder
from auditkit.reports import render_report
from auditkit.results import load_results
from auditkit.results import document_path

__all__ = ["REPORT_FORMATS", "command"]

REPORT_FORMATS = {"html": ("html",), "md": ("md",), "both": ("html", "md")}  # --format -> files written


@click.command("report", cls=AuditkitCommand,
               help="Re-render report.html / report.md from a results.json or reproduction.json, without recomputing "
                    "anything.")
@click.argument("results", cls=HelpArgument, type=path(), metavar="RESULTS",
                help="A results.json or reproduction.json written by any auditkit command, or the folder holding it.")
@click.option("--format", "fmt", type=choice(REPORT_FORMATS), default="both", show_default=True,
              help="Which reports to write.")
@click.option("--out", type=path(file_okay=False), default=None,
              help="Output folder (default: the results file's folder).")
@plugin_option
def command(results: Path, fmt: str, out: Path | None, plugin: tuple[str, ...]) -> None:
    run_guarded(_report, results, fmt, out)


def _report(results: Path, fmt: str, out: Path | None) -> None:
    try:
        results = document_path(results)  # a folder: the results.json or reproduction.json it holds
        # held like any output folder: an interrupted commit is finished before results.json is read
        with OutputFolder(out if out is not None else results.parent, Mode.RESUME).open("auditkit report") as target:
            document = load_results(results)
            written = render_report(document, target.path, formats=REPORT_FORMATS[fmt], results_dir=results.parent)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    print_written(written)
