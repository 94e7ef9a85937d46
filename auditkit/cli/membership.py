"""``auditkit membership``: membership inference against the final global model of every mechanism setting of a
config, reference runs beside it, each attack's certified bound judged against the whole run's claim."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from auditkit import results
from auditkit.attacks.membership_game import MEMBERSHIP_LEVELS
from auditkit.audit import plan_audit
from auditkit.cli import options
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.configured import load, title
from auditkit.cli.errors import run_guarded
from auditkit.cli.mechanism_flags import GROUP, mechanism_options
from auditkit.cli.options import choice, config_options, config_overrides, ranged, sized
from auditkit.cli.outputs import check_output, overwrite_option, write_document
from auditkit.cli.terminal import Reporter, console
from auditkit.config import MEMBERSHIP_VIEWS, AuditConfig
from auditkit.reports.sections.text import number
from auditkit.stages.distinguish import attacks_confidence
from auditkit.stages.membership import membership_family, membership_stage
from auditkit.stages.setting import build_mechanism, resolve_device
from auditkit.fl.threads import FairShare

__all__ = ["CONFIG_KEYS", "MEMBERSHIP_TABLE_MIN_WIDTH", "command"]

CONFIG_KEYS = {**options.CONFIG_KEYS, "confidence": "distinguish.confidence",
               **{name: f"membership.{name}" for name in ("level", "references", "records", "population", "mislabelled",
                                                           "view")}}
"""The config key each of the command's options sets."""


@click.command(
    "membership", cls=AuditkitCommand, groups=(GROUP, "dp_sgd"), generated=(mechanism_options,),
    help="Membership inference against the final global model of every mechanism setting of a config (default: the "
         "quickstart preset): a target FL run and reference runs of the same config on re-drawn memberships, trained "
         "together; the loss attack, LiRA (offline, online) and RMIA; TPR at 0.1 % and 1 % FPR, and each attack's "
         "certified bound on the target run judged against the whole run's claim. results.json, report.html and "
         "report.md in --out. The config's [membership] table, with these flags on top.")
@config_options
@click.option("--level", type=choice(MEMBERSHIP_LEVELS), default=None,
              help="record: a training record in its client's data or not; client: a client in the federation or "
                   "not (default: the config's, record).")
@click.option("--view", type=choice(MEMBERSHIP_VIEWS), default=None,
              help="The model attacked: public, each run's final global model; server (record level, full "
                   "participation), each client's last update as the server decodes it (default: the config's, "
                   "public).")
@click.option("--references", type=sized("membership.references"), default=None,
              help="Reference runs beside the target run (default: the config's, 8).")
@click.option("--records", type=sized("membership.records"), default=None,
              help="Training records tested at record level (default: the config's, 500).")
@click.option("--population", type=sized("membership.population"), default=None,
              help="Held-out test records RMIA compares with (default: the config's, 1000).")
@click.option("--mislabelled", is_flag=True, default=False,
              help="Give the records tested a wrong label (records a model can only fit by memorising them, the "
                   "canaries of DP audits).")
@click.option("--confidence", type=ranged("distinguish.confidence"), default=None,
              help="Family-wise confidence of the verdicts, Bonferroni over every attack of every setting (default: "
                   "the config's [distinguish] confidence, 0.95).")
@overwrite_option
def command(config: Path | None, preset: str | None, out: Path, plugin: tuple[str, ...], overwrite: bool,
            mechanism_params: dict[str, str], **keys: Any) -> None:
    overrides = config_overrides(keys, CONFIG_KEYS)
    overrides["membership"]["enabled"] = True
    run_guarded(_membership, config, preset, out, overrides, mechanism_params, list(plugin), overwrite)


def _membership(config_path: Path | None, preset: str | None, out: Path, overrides: dict[str, Any],
                words: dict[str, str], plugins: list[str], overwrite: bool) -> None:
    config = load(config_path, preset, overrides, words, plugins)
    plans = plan_audit(config)  # every setting built and checked before anything runs
    out = check_output(out, overwrite)
    FairShare(config.limits.threads).rebalance()  # [limits] threads / --threads pins the pools
    built = {plan.id: build_mechanism(plan.config) for plan in plans}
    family = sum(membership_family(built[plan.id], plan.config) for plan in plans)
    entries = []
    reporter = Reporter(console)
    with reporter:
        runs = config.membership.references + 1
        bar = reporter.bar("membership", len(plans) * runs * config.training.rounds)
        for plan in plans:
            def on_round(run: int, record: Any, label: str = plan.label) -> None:
                reporter.report(bar, f"{label}: run {run} round {record.round}", advance=1,
                                status=f"{label}: run {run}")

            reporter.line(f"{plan.label}: {runs} runs of {config.training.rounds} rounds")
            section = membership_stage(plan.config, built[plan.id],
                                       per_test_confidence=attacks_confidence(plan.config.distinguish.confidence,
                                                                              family),
                                       on_round=on_round)
            entries.append(results.setting(plan.id, plan.label, built[plan.id], sweep=plan.sweep,
                                           membership=section))
    document = results.document("membership", title(config, config_path, preset), config.to_dict(),
                                results.provenance(seed=config.seed, device=str(resolve_device(config.device)),
                                                   settings=entries), entries)
    _print_summary(document, config)
    write_document(document, out, overwrite=overwrite, command="auditkit membership")


MEMBERSHIP_TABLE_MIN_WIDTH = 120  # columns the table needs; below, one line per attack
_COLUMNS = ("setting", "attack", "AUC", "TPR @ 0.1% FPR", "TPR @ 1% FPR", "certified eps >=", "whole-run claim eps",
            "verdict")


def _rows(document: dict[str, Any]) -> list[tuple[str, ...]]:
    rows = []
    for s in document["settings"]:
        m = s["membership"]
        for attack in m["attacks"]:
            at = {point["target_fpr"]: point for point in attack["tpr_at"]}
            rows.append((s["label"], attack["attack"], f"{attack['auc']:.3f}",
                         *(f"{100 * at[f]['tpr']:.2f}%" for f in (0.001, 0.01)),
                         number(attack["result"]["epsilon_lower_bound"]), number(m["claim"]["epsilon"]),
                         attack["result"]["verdict"]))
    return rows


def _print_summary(document: dict[str, Any], config: AuditConfig) -> None:
    """A table at wide widths, a line per attack at narrow ones (a log file)."""
    heading = f"membership inference ({config.membership.level} level): {document['title']}"
    rows = _rows(document)
    if console.width >= MEMBERSHIP_TABLE_MIN_WIDTH:
        table = Table(title=escape(heading))
        for column in _COLUMNS:
            table.add_column(column, no_wrap=True)
        for row in rows:
            table.add_row(*map(escape, row))
        console.print(table)
        return
    console.print(heading, markup=False, highlight=False)
    for label, attack, auc, low, one, bound, claim, verdict in rows:
        console.print(f"{label} / {attack}: AUC {auc}, TPR {low} at 0.1% FPR, {one} at 1% FPR; certified eps >= "
                      f"{bound} (whole-run claim {claim}): {verdict}", markup=False, highlight=False, soft_wrap=True)
