"""``auditkit audit``: every mechanism setting of a config trained, accounted, attacked and tested; or what a Flower
app recorded (``--recorded``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from auditkit.audit import Audit
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.configured import load, title
from auditkit.cli.errors import UsageFailure, fail, run_guarded, warn_unreproducible
from auditkit.cli.mechanism_flags import GROUP, mechanism_options
from auditkit.cli import options
from auditkit.cli.options import config_options, config_overrides, flag_of, path, ranged
from auditkit.cli.outputs import overwrite_option, print_swap, snr
from auditkit.cli.terminal import AuditProgress, Reporter, console, error_console, print_written
from auditkit.config import AuditConfig, load_config, merge, preset_dict, read_config
from auditkit.flower.recording import RecordingError, load_recording
from auditkit.output_folder import Mode
from auditkit.attacks.headline import ClaimScope
from auditkit.reports.sections.summary import certified_bound, scoped, test_name
from auditkit.reports.sections.text import number
from auditkit.results.model import Setting
from auditkit.stages.identification import above_bound
from auditkit.stages.recorded import DATA_PLACES, recorded_config, unused_data_places

__all__ = ["AUDIT_TABLE_MIN_WIDTH", "CONFIG_KEYS", "command"]

CONFIG_KEYS = {**options.CONFIG_KEYS, "confidence": "distinguish.confidence"}
"""The config key each of the command's options sets (``auditkit.cli.options.CONFIG_KEYS`` and --confidence)."""
AUDIT_TABLE_MIN_WIDTH = 140  # columns the audit's summary table needs; below, one line per setting


@click.command(
    "audit", cls=AuditkitCommand, groups=(GROUP, "dp_sgd"), generated=(mechanism_options,),
    help="Audit every mechanism setting of a config: FL training, accounting, gradient inversion of the server view, "
         "distinguishing tests; results.json, report.html and report.md in --out (default: the quickstart preset on "
         "the embedded MNIST digits, mnist-5k). Finished stages are kept; --resume skips them. An --out holding an "
         "earlier run needs --resume or --overwrite.")
@config_options
@click.option("--recorded", type=path(file_okay=False), default=None,
              help="Audit what a Flower app recorded (auditkit.flower.AuditStrategy's record_dir) instead of "
                   "training; the data set, training and mechanism come from the recording, where the data lives "
                   "from --data-dir / --download or CONFIG (never from the recording).")
@click.option("--resume", is_flag=True, default=False,
              help="Continue the audit in --out: keep its finished stages (same inputs and code), run only the rest.")
@overwrite_option
@click.option("--confidence", type=ranged("distinguish.confidence"), default=None,
              help="Family-wise confidence of every verdict, Bonferroni over all the audit's tests (default: the "
                   "config's [distinguish] confidence, 0.95).")
def command(config: Path | None, preset: str | None, out: Path, plugin: tuple[str, ...], recorded: Path | None,
            resume: bool, overwrite: bool, confidence: float | None, mechanism_params: dict[str, str],
            **keys: Any) -> None:
    overrides = config_overrides({**keys, "confidence": confidence}, CONFIG_KEYS)
    if resume and overwrite:
        fail("give either --resume (continue the audit in --out) or --overwrite (replace it), not both")
    mode = Mode.RESUME if resume else Mode.OVERWRITE if overwrite else Mode.NEW
    if recorded is not None:
        run_guarded(_audit_recorded, recorded, config, preset, out, overrides, mechanism_params, list(plugin), mode)
    else:
        run_guarded(_audit_config, config, preset, out, overrides, mechanism_params, list(plugin), mode)


def _audit_config(config_path: Path | None, preset: str | None, out: Path, overrides: dict[str, Any],
                  words: dict[str, str], plugins: list[str], mode: Mode) -> None:
    config = load(config_path, preset, overrides, words, plugins)
    _audit(config, out, mode, title(config, config_path, preset))


def _audit_recorded(recorded: Path, config_path: Path | None, preset: str | None, out: Path,
                    overrides: dict[str, Any], words: dict[str, str], plugins: list[str], mode: Mode) -> None:
    """The recording's app tables over the audit tables of CONFIG / --preset. The plugins are the command line's
    (--plugin) and CONFIG's, never the recording's: a recording is data, and auditkit imports no code it names. Where
    the data lives and whether to download it are CONFIG's and --data-dir / --download, never the recording's; a
    recording that names them gets one ``note:`` line saying they are not used."""
    places = {k: overrides["data"][k] for k in DATA_PLACES if overrides["data"][k] is not None}
    given = [flag_of(k) for table in ("data", "training") for k, v in overrides[table].items()
             if v is not None and not (table == "data" and k in places)]
    given += [flag_of(f"dp_sgd_{k}") for k in overrides["dp_sgd"]]
    given += ["--mechanism"] * (overrides["mechanism_name"] is not None) + ["--seed"] * (overrides["seed"] is not None)
    if given or words:
        raise UsageFailure(f"--recorded takes the data, training, mechanism and seed from the recording; leave out "
                           f"{', '.join(given) or 'the mechanism parameters'}")
    if config_path is not None and preset is not None:
        raise UsageFailure("give either a CONFIG file or --preset, not both")
    try:
        recording = load_recording(recorded)
    except RecordingError as err:
        raise UsageFailure(str(err)) from None
    if config_path is not None:
        load_config(config_path)
    raw = read_config(config_path) if config_path is not None else preset_dict(preset or "quickstart")
    raw = merge(raw, {"distinguish": overrides["distinguish"], "data": places})  # --confidence, --data-dir, --download
    unused = unused_data_places(recording)
    if unused:
        # the recording's own values, cut where a hostile one would flood the terminal
        shown = " and ".join(f"data.{k} = {_cut(repr(v))}" for k, v in unused.items())
        error_console.print(f"note: the recording's {shown} {'is' if len(unused) == 1 else 'are'} not used: a recording "
                            "never chooses where data lives or downloads it (give --data-dir, --download or your "
                            "CONFIG's [data])", markup=False, highlight=False, soft_wrap=True)
    try:
        config = recorded_config(recording, {**raw, "device": overrides["device"] or raw.get("device", "auto")},
                                 plugins)
        _audit(config, out, mode, config.title if config_path or preset else f"recorded Flower app ({recorded.name})",
               recording=recording)
    except RecordingError as err:  # a file of the recording that does not fit (read and checked before any stage)
        raise UsageFailure(str(err)) from None


def _cut(text: str, limit: int = 300) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _audit(config: AuditConfig, out: Path, mode: Mode, shown_title: str, *, recording: Any = None) -> None:
    """Plan and run the audit (``mode``: how --out is used, ``auditkit.output_folder.Mode``)."""
    try:
        audit = Audit(config, out=out, resume=mode is Mode.RESUME, overwrite=mode is Mode.OVERWRITE,
                      title=shown_title, recorded=recording)
    except ValueError as err:  # a mechanism or attack setting refused while planning
        raise UsageFailure(str(err)) from None
    warn_unreproducible([plan.setting.name for plan in audit.unreproducible])
    reporter = Reporter(console)
    on_event = AuditProgress(reporter, audit.stage_count, config.training.rounds)
    try:
        with reporter:
            document = audit.run(on_event)
            on_event.finish()
    except KeyboardInterrupt:
        error_console.print(_interrupted(audit), markup=False, highlight=False, soft_wrap=True)
        raise click.exceptions.Exit(130) from None
    _print_summary(document)
    print_written(audit.out / name for name in ("results.json", "report.html", "report.md"))
    print_swap(audit.out, audit.swap)


def _interrupted(audit: Audit) -> str:
    """What an interrupted audit kept, and how to go on, as one line."""
    if audit.finished == 0:
        kept = "interrupted before any stage finished"
    else:
        kept = f"interrupted: {audit.finished} finished stage{'s' * (audit.finished != 1)} kept in {audit.work / 'stages'}"
    if audit.mode is Mode.OVERWRITE:
        return f"{kept}; the earlier run in {audit.out} is untouched; run the same command (with --overwrite) to go on"
    return f"{kept}; run the same command with --resume to go on" if audit.finished else kept


def _verdicts(setting: Setting) -> str:
    """"consistent (one round); not tested (whole run)": the verdict on each claim, named by the claim it judged."""
    parts = []
    for claim_scope in ClaimScope:
        found = scoped(setting, claim_scope)
        if found.text == "no claim":  # nothing was claimed, so no claim was judged
            return found.text
        if found.text != "-":
            evidence = f", {found.evidence}" if found.evidence else ""
            parts.append(f"{found.text}{evidence} ({claim_scope})")
    return "; ".join(parts)


def _rows(document: dict[str, Any]) -> list[tuple[str, ...]]:
    """Per setting: label, test accuracy, SNR, claim, the verdict on each claim, the strongest certified bound and
    the test that certified it, identification, probe SSIM."""
    rows = []
    for s in document["settings"]:
        claim, probe, ident, headline = s["mechanism"]["guarantee"], s["probe"], s["identification"], s["verdict"]
        flags = f" [{', '.join(claim['flags'])}]" if claim["flags"] else ""
        bound = certified_bound(Setting.model_validate(s))
        identified = "-" if ident is None else "; ".join(
            f"M={t['candidates']}: {t['rate']:.2f} {'>' if above_bound(t) else '<='} {t['bound']:.2f}"
            for t in ident["tests"])
        rows.append((
            s["label"], f"{100 * s['training']['final']['test_accuracy']:.2f}%",
            snr(s["training"]["final"].get("snr_db")),
            ("none" if claim["epsilon"] is None else f"{claim['epsilon']:.4g}") + flags,
            "-" if headline is None else _verdicts(Setting.model_validate(s)),
            "-" if bound is None else f"{number(bound.epsilon_lower_bound)} ({test_name(bound.test)})",
            identified,
            "-" if probe is None else f"{probe['clean']['ssim_mean']:.3f} -> {probe['defended']['ssim_mean']:.3f}",
        ))
    return rows


_COLUMNS = ("setting", "test acc", "SNR (dB)", "claimed eps (1 round)", "verdict (claim judged)",
            "strongest certified eps >= (test)", "identified (M): rate <= bound", "probe SSIM clean -> defended")


def _print_summary(document: dict[str, Any]) -> None:
    """The audit's summary: a table at wide widths, a block of lines per setting at narrow ones (a log file)."""
    rows = _rows(document)
    if console.width >= AUDIT_TABLE_MIN_WIDTH:
        table = Table(title=f"audit: {escape(document['title'])}")
        for column in _COLUMNS:
            table.add_column(column)
        for row in rows:
            table.add_row(*map(escape, row))
        console.print(table)
        return
    console.print(f"audit: {document['title']}", markup=False, highlight=False)
    for label, accuracy, ratio, claimed, verdict, bound, identified, probe in rows:
        console.print(f"{label}: {verdict}; claim eps {claimed}; certified eps >= {bound}\n"
                      f"    test acc {accuracy}, SNR {ratio} dB; identified {identified}; probe SSIM {probe}",
                      markup=False, highlight=False, soft_wrap=True)
