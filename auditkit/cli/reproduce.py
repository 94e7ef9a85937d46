"""``auditkit reproduce``: a paper's own settings run over seeds, each reported number beside ours with a verdict per
row."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from auditkit import reproduction
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.errors import UsageFailure, run_guarded
from auditkit.cli.options import HelpArgument, choice, out_option, path
from auditkit.cli.outputs import check_output, overwrite_option, print_swap
from auditkit.cli.terminal import Reporter, console, print_written
from auditkit.output_folder import Swap
from auditkit.reports.sections.reproduction import ours
from auditkit.reproduction.paper import BUDGETS
from auditkit.results.reproduction import Row

__all__ = ["command"]


@click.command("reproduce", cls=AuditkitCommand,
               help="Run a paper's own settings over seeds; each reported number beside ours, with a verdict per row.")
@click.argument("paper", cls=HelpArgument, type=choice(reproduction.paper_ids()), required=False, metavar="[PAPER]",
                help="The paper: " + " | ".join(reproduction.paper_ids()) + " (see --list).")
@click.option("--list", "list_", is_flag=True, default=False,
              help="Show each paper's tables and figures, then exit.")
@click.option("--budget", type=choice(BUDGETS), default="quick", show_default=True,
              help="quick: fewer rounds and seeds, stated in the report.")
@click.option("--seeds", type=int, default=None, help="Seeds per setting (default: the budget's).")
@click.option("--data-dir", type=path(file_okay=False), default=None,
              help="Folder holding the paper's data for torchvision (e.g. DIR/MNIST/raw/); default: the embedded "
                   "mnist-5k.")
@click.option("--confidence", type=float, default=0.95, show_default=True,
              help="Confidence of the Student-t intervals over seeds that each row's verdict reads.")
@out_option("auditkit-reproduce")
@overwrite_option
def command(paper: str | None, list_: bool, budget: str, seeds: int | None, data_dir: Path | None,
            confidence: float, out: Path, overwrite: bool) -> None:
    run_guarded(_reproduce, paper, list_, budget, seeds, data_dir, out, confidence, overwrite)


def _reproduce(paper: str | None, list_: bool, budget: str, seeds: int | None, data_dir: Path | None,
               out: Path, confidence: float, overwrite: bool) -> None:
    if list_:
        for paper_id in ([paper] if paper else reproduction.paper_ids()):
            try:
                found = reproduction.load_paper(paper_id)
            except ValueError as err:
                raise UsageFailure(str(err)) from None
            table = Table(title=f"{found.id}: {escape(found.title)}")
            for column in ("table / figure", "caption", "rows"):
                table.add_column(column)
            for table_id, caption, rows in reproduction.describe(found):
                table.add_row(escape(table_id), escape(caption), str(rows))
            console.print(table)
        return
    if paper is None:
        raise UsageFailure(f"PAPER is required: one of {', '.join(reproduction.paper_ids())} (or --list)")
    try:
        plan = reproduction.check_reproduction_inputs(paper, budget, seeds,
                                                      None if data_dir is None else str(data_dir), confidence)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    check_output(out, overwrite)
    total = len(plan.settings) * len(plan.seeds)
    reporter = Reporter(console)
    runs = reporter.bar(f"reproduce {paper} ({budget})", total)
    done = 0

    def on_run(key: str, seed: int, entry: dict[str, Any]) -> None:
        nonlocal done
        done += 1
        if "test_accuracy" in entry:
            status = f"test acc {100 * entry['test_accuracy']:.2f}%"
        elif "ssim" in entry:
            status = f"SSIM {entry['ssim']:.3f}"
        else:
            status = f"log10 distortion {entry['distortion']:.2f}"
        reporter.report(runs, f"reproduce {paper} ({budget}) run {done}/{total}: seed {seed}: {status}",
                        advance=1, status=f"seed {seed}: {status}")

    swapped: list[Swap | None] = []
    with reporter:
        document = reproduction.reproduce(paper, budget=budget, seeds=seeds,
                                          data_dir=None if data_dir is None else str(data_dir), out=out,
                                          confidence=confidence, overwrite=overwrite, on_run=on_run,
                                          on_swap=swapped.append)
    summary = Table(title=f"reproduction: {paper} ({budget})")
    for column in ("table", "method", "column", "paper", f"ours [{100 * confidence:g}%]", "verdict"):
        summary.add_column(column)
    for t in document["tables"]:
        for row in t["rows"]:
            column = row["column"] if row["x"] is None else f"{row['column']} {t['x_label']} = {row['x']:g}".strip()
            summary.add_row(escape(t["id"]), escape(row["method"]), escape(column), escape(row["paper"] or "(plot)"),
                            ours(Row.model_validate(row)), row["verdict"])
    console.print(summary)
    print_written(out / name for name in ("reproduction.json", "report.html", "report.md"))
    print_swap(out, swapped[0] if swapped else None)
