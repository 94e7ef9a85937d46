"""``auditkit train``: FL training only, FedAvg with the mechanism in the loop."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from auditkit import mechanisms
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.configured import load, title
from auditkit.cli.errors import run_guarded
from auditkit.cli.mechanism_flags import GROUP, mechanism_options
from auditkit.cli.options import config_options, config_overrides
from auditkit.cli.outputs import check_output, overwrite_option, snr, write_document
from auditkit.cli.terminal import Reporter, console
from auditkit.stages.setting import build_mechanism
from auditkit.stages.train import Experiment, results_document
from auditkit.fl.threads import FairShare

__all__ = ["command"]


@click.command("train", cls=AuditkitCommand, groups=(GROUP, "dp_sgd"), generated=(mechanism_options,),
               help="Run FL training only (FedAvg with the mechanism in the loop): per-round table, results.json and "
                    "reports.")
@config_options
@overwrite_option
def command(config: Path | None, preset: str | None, out: Path, plugin: tuple[str, ...], overwrite: bool,
            mechanism_params: dict[str, str], **keys: Any) -> None:
    overrides = config_overrides(keys)
    run_guarded(_train, config, preset, out, overrides, mechanism_params, list(plugin), overwrite)


def _train(config_path: Path | None, preset: str | None, out: Path, overrides: dict[str, Any],
           words: dict[str, str], plugins: list[str], overwrite: bool) -> None:
    config = load(config_path, preset, overrides, words, plugins, settings=False)
    config.mechanism  # noqa: B018 -- one setting only; raises a ConfigError naming the fix otherwise
    mechanisms.preflight(build_mechanism(config))  # a plugin's bug: one line, before anything is written
    out = check_output(out, overwrite)
    FairShare(config.limits.threads).rebalance()  # [limits] threads / --threads pins the pools
    experiment = Experiment(config, kept_rows=0)  # the command reports rounds, not what a checkpoint saw
    reporter = Reporter(console)
    total = config.training.rounds
    rounds = reporter.bar("FL rounds", total)

    def on_round(record: Any) -> None:
        accuracy = f"test acc {100 * record.test_accuracy:.2f}%"
        reporter.report(rounds, f"round {record.round}/{total}: {accuracy}", advance=1, status=accuracy)

    with reporter:
        document = results_document(experiment.train(on_round, on_checkpoint=lambda observation: None),
                                    title(config, config_path, preset))
    setting = document["settings"][0]
    console.print(_round_table(setting))
    final = setting["training"]["final"]
    console.print(f"final test accuracy {100 * final['test_accuracy']:.2f}%  |  "
                  f"{final['bits_per_coordinate']:.3f} bits/coordinate (float32 = 32)  |  SNR "
                  f"{snr(final.get('snr_db'))} dB")
    console.print(f"claimed guarantee: {escape(setting['mechanism']['guarantee']['summary'])}", highlight=False)
    example = setting["accounting"].get("example_level")
    if example is not None:
        console.print(f"example-level claim (DP-SGD): (eps={example['epsilon']:.4g}, delta={example['delta']:.3g}) "
                      f"over {example['steps']} steps at q = {example['sample_rate']:.4g} (client "
                      f"{example['client']}) via {example['accountant']}", markup=False, highlight=False)
    write_document(document, out, overwrite=overwrite, command="auditkit train")


def _round_table(setting: dict[str, Any]) -> Table:
    table = Table(title="FedAvg rounds", show_lines=False)
    for column in ("round", "lr", "train loss", "test loss", "test acc", "bits/coord", "SNR (dB)"):
        table.add_column(column, justify="right")
    for r in setting["training"]["rounds"]:
        table.add_row(str(r["round"]), f"{r['lr']:.4g}", f"{r['train_loss']:.4f}", f"{r['test_loss']:.4f}",
                      f"{100 * r['test_accuracy']:.2f}%", f"{r['bits_per_coordinate']:.3f}", snr(r.get("snr_db")))
    return table
