"""``auditkit report``: report.html / report.md rendered again from a results.json or reproduction.json."""
from __future__ import annotations

from pathlib import Path

import click

from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.errors import UsageFailure, run_guarded
from auditkit.cli.options import HelpArgument, choice, path, plugin_option
from auditkit.cli.terminal import console
from auditkit.output_folder import Mode, NotWritable, OutputFolder
from auditkit.reports import render_report
from auditkit.results import document_path, load_results

__all__ = ["REPORT_FORMATS", "command"]

REPORT_FORMATS = {"html": ("html",), "md": ("md",), "both": ("html", "md")}  # --format -> files written


@click.command("report", cls=AuditkitCommand,
               help="Re-render report.html / report.md from a results.json or reproduction.json, without recomputing "
                    "anything. Without --out the report is written into the results' own folder (it says so first); "
                    "only files auditkit wrote there are replaced, and no link in either folder is followed.")
@click.argument("results", cls=HelpArgument, type=path(), metavar="RESULTS",
                help="A results.json or reproduction.json written by any auditkit command, or the folder holding it.")
@click.option("--format", "fmt", type=choice(REPORT_FORMATS), default="both", show_default=True,
              help="Which reports to write.")
@click.option("--out", type=path(file_okay=False), default=None,
              help="Output folder (default: the results file's folder). A folder of someone else's (a colleague's "
                   "audit, a downloaded artifact) is best rendered into a folder of your own.")
@plugin_option
def command(results: Path, fmt: str, out: Path | None, plugin: tuple[str, ...]) -> None:
    run_guarded(_report, results, fmt, out)


def _report(results: Path, fmt: str, out: Path | None) -> None:
    try:
        results = document_path(results)  # a folder: the results.json or reproduction.json it holds
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    if out is None:
        console.print(f"writing the report into {results.parent} (the folder of {results.name}); --out DIR writes it "
                      "into another folder", markup=False, highlight=False, soft_wrap=True)
    target = OutputFolder(out if out is not None else results.parent, Mode.RESUME,
                          flag="--out" if out is not None else "RESULTS",
                          writes=tuple(f"report.{suffix}" for suffix in REPORT_FORMATS[fmt]))
    try:
        # held like any output folder: an interrupted commit is finished before results.json is read
        with target.open("auditkit report") as held:
            before = {name for name in held.work.files if held.work.is_file(name)}
            document = load_results(results)
            written = render_report(document, held.work, formats=REPORT_FORMATS[fmt], results_dir=results.parent)
    except NotWritable as err:
        raise UsageFailure(f"{err}; pass --out DIR to write the report into a folder of your own" if out is None
                           else str(err)) from None
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    for written_path in written:
        verb = "replaced" if written_path.relative_to(target.path).as_posix() in before else "wrote"
        console.print(f"{verb} {written_path}", markup=False, highlight=False, soft_wrap=True)
