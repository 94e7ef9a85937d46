"""The ``auditkit`` command line (Typer).

Every command validates all of its input before it starts work or writes a file; bad input prints one line
``error: ...`` on stderr and exits with status 2. Every command that takes a mechanism (``train``, ``audit``,
``account``, ``attack``, ``distinguish``, ``canary``) accepts every registered mechanism's parameters as flags
generated from their ``Param`` specs (``auditkit.mechanism_options``), built-in mechanisms and plugins alike:
plugins named with ``--plugin MODULE`` (any command), in a config's ``plugins = [...]``, or installed under the
entry-point group ``auditkit.mechanisms`` are loaded before the commands are built, so their parameters get flags
too. Every command that writes results writes ``results.json`` (schema ``auditkit/results`` v3), ``report.html`` and
``report.md``.

A plugin's code that raises, or returns a value of the wrong type (``auditkit.mechanisms.PluginCodeError``), is one
``error:`` line too, naming the plugin, the method and the exception, exit status 2: every command runs a plugin's
mechanism once through its claim, capabilities, encode and decode (``auditkit.mechanisms.preflight``) before it writes
anything. ``audit``, ``distinguish`` and ``canary`` check that each mechanism's output is determined by its seeds
(``auditkit.mechanisms.reproducible``) and print a ``warning:`` line for one that is not.

Help texts render literally (no rich markup), and a command's ``--help`` lists only the parameters of the mechanism
its command line names. Click's own usage errors (an unknown option or command, a missing argument, a bad value)
are one ``error:`` line too. Progress is rich's live display on a terminal and plain, flushed lines elsewhere.
"""
from __future__ import annotations

import copy
import dataclasses
import importlib
import inspect
import re
import sys
import textwrap
import time
import types
import typing
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from difflib import get_close_matches
from pathlib import Path
from typing import Annotated, Any, NamedTuple, Self

import click
import typer
from click.core import ParameterSource
from rich.console import Console
from rich.markup import escape
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TaskID,
    TextColumn,
    TimeElapsedColumn,
)
from rich.table import Table
from typer.core import TyperCommand, TyperGroup

console = Console()
error_console = Console(stderr=True)


class UsageFailure(Exception):
    """Bad user input: printed as one line, exit status 2."""


def _fail(message: str) -> None:
    _print_error(message)
    raise typer.Exit(2)


def _run_guarded(fn, *args, **kwargs):
    """Turn user-input errors into one line + exit 2; anything else is a bug and keeps its traceback."""
    from auditkit.config import ConfigError
    from auditkit.data import DataNotFoundError
    from auditkit.fl.simulation import TrainingDiverged
    from auditkit.mechanisms import PluginCodeError, PluginError

    try:
        return fn(*args, **kwargs)
    except (UsageFailure, ConfigError, DataNotFoundError, PluginError, PluginCodeError, TrainingDiverged) as err:
        _fail(str(err))


def _warn_unreproducible(names: list[str]) -> None:
    """One ``warning:`` line on stderr per mechanism whose output is not determined by its seeds."""
    for name in dict.fromkeys(names):
        error_console.print(
            f"warning: the output of mechanism {name!r} is not determined by its seeds (two encodes with the same seeds "
            "differed): results will not reproduce; draw its noise from "
            "auditkit.mechanisms.randomness.private_generator(self.private_seed, seed, purpose)",
            markup=False, highlight=False, soft_wrap=True)


# ------------------------------------------------------------------ progress


class Reporter:
    """A command's progress. On a terminal: rich's live bars and spinners, as before. Elsewhere (a log file or a
    pipe, where a live display shows nothing until the command ends): plain lines, each stamped with the seconds
    since the command started and flushed as it happens. Every report carries both forms; only the one that fits
    the output is shown, so the commands need no branches of their own.
    """

    def __init__(self, out: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.clock, self.started = out, clock, clock()
        self.live = out.is_terminal
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}", markup=False), TimeElapsedColumn(), console=out,
        ) if self.live else None

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def elapsed(self) -> float:
        """Seconds since the reporter (the command) started."""
        return self.clock() - self.started

    def bar(self, description: str, total: int, *, visible: bool = True) -> TaskID | None:
        """A progress bar (a terminal only; None elsewhere)."""
        if self._progress is None:
            return None
        return self._progress.add_task(description, total=total, status="", visible=visible)

    def report(self, bar: TaskID | None, line: str | None = None, **changes: Any) -> None:
        """On a terminal, ``bar`` updated with ``changes`` (``Progress.update``'s arguments); elsewhere ``line``,
        if given."""
        if self._progress is not None and bar is not None:
            self._progress.update(bar, **changes)
        elif line is not None:
            self.line(line)

    def line(self, text: str) -> None:
        """One plain progress line, flushed at once (nothing on a terminal, where the live display shows it)."""
        if self.live:
            return
        self.out.print(f"[{self.elapsed():6.1f} s] {text}", markup=False, highlight=False, soft_wrap=True)
        self.out.file.flush()

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner with ``text`` while the block runs on a terminal; one line when it starts elsewhere."""
        if self.live:
            with self.out.status(text):
                yield
        else:
            self.line(text)
            yield


# ------------------------------------------------------------------ shared options

ConfigArg = Annotated[Path | None, typer.Argument(help="TOML config file (default: the quickstart preset).", show_default=False)]
PresetOpt = Annotated[str | None, typer.Option(help="Bundled preset: {choices:presets} (default: quickstart).")]
OutOpt = Annotated[Path, typer.Option(help="Output folder (results.json, report.html, report.md).")]
MechOpt = Annotated[str | None, typer.Option("--mechanism", "-m", help="Registered mechanism (see `auditkit mechanisms`).")]
PluginOpt = Annotated[list[str] | None, typer.Option(
    "--plugin", metavar="MODULE",
    help="Module that registers mechanisms of one's own (repeatable); see the tutorial 'Audit your own mechanism' (docs/tutorials/own-mechanism.md).",
    show_default=False)]


def _mechanism_params(name: str, words: dict[str, str]) -> dict[str, Any]:
    """The typed parameters of mechanism ``name`` from the command line's words (``UsageFailure`` if refused)."""
    from auditkit.mechanism_options import parse_mechanism_params

    try:
        return parse_mechanism_params(name, words)
    except ValueError as err:
        raise UsageFailure(str(err)) from None


def _write_reports(document: dict[str, Any], out: Path) -> list[Path]:
    """report.html and report.md beside results.json."""
    from auditkit.reports import render_report

    return render_report(document, out, results_dir=out)


def _print_written(paths) -> None:
    for path in paths:
        console.print(f"wrote {path}", markup=False, highlight=False)


# ------------------------------------------------------------------ train and audit (config-driven)


def _load(config_path: Path | None, preset: str | None, overrides: dict[str, Any], words: dict[str, str],
          plugins: list[str], *, settings: bool = True):
    """The validated config: a CONFIG file or a preset, with the command line's overrides and mechanism parameters
    on top. ``settings=False`` (``train``) takes a preset's data and training without its mechanism settings."""
    from auditkit.config import from_dict, load_config, merge, preset_dict, read_config

    if config_path is not None and preset is not None:
        raise UsageFailure("give either a CONFIG file or --preset, not both")
    if config_path is not None:
        load_config(config_path)  # validates the file on its own first, for a precise message
        raw = read_config(config_path)
    else:
        raw = preset_dict(preset or "quickstart", mechanisms=settings)
    if plugins:
        raw = {**raw, "plugins": sorted(set(raw.get("plugins", [])) | set(plugins))}
    name = overrides.pop("mechanism_name", None)
    if name is not None:
        # a mechanism named on the command line replaces the config's settings; it inherits the config's
        # parameters only from a single [mechanism] table of the same name
        same = isinstance(raw.get("mechanism"), dict) and raw["mechanism"].get("name") == name
        raw = {k: v for k, v in raw.items() if k != "mechanisms" and (k != "mechanism" or same)}
    elif words and "mechanisms" in raw:
        raise UsageFailure("this config lists several [[mechanisms]]: give --mechanism with the parameters")
    if name is not None or words:
        target = name or (raw.get("mechanism", {}) or {}).get("name", "none")
        overrides["mechanism"] = {"name": target, **_mechanism_params(target, words)}
    rounds = overrides.get("training", {}).get("rounds")
    if isinstance(rounds, int) and rounds >= 1:
        raw = _fit_checkpoints(raw, rounds)
    return from_dict(merge(raw, overrides))


def _fit_checkpoints(raw: dict[str, Any], rounds: int) -> dict[str, Any]:
    """With --rounds T, the config's checkpoints past T are dropped and T itself is kept if the
    config watched its own last round (so the final round stays observed)."""
    training = dict(raw.get("training", {}))
    checkpoints = training.get("checkpoints")
    if not isinstance(checkpoints, list) or not all(isinstance(c, int) for c in checkpoints):
        return raw  # malformed: let validation report it
    last = training.get("rounds")
    kept = [c for c in checkpoints if c <= rounds]
    if any(c > rounds for c in checkpoints) and last in checkpoints and rounds not in kept:
        kept.append(rounds)
    training["checkpoints"] = kept
    return {**raw, "training": training}


def _round_table(setting: dict[str, Any]) -> Table:
    table = Table(title="FedAvg rounds", show_lines=False)
    for column in ("round", "lr", "train loss", "test loss", "test acc", "bits/coord", "SNR (dB)"):
        table.add_column(column, justify="right")
    for r in setting["training"]["rounds"]:
        table.add_row(
            str(r["round"]), f"{r['lr']:.4g}", f"{r['train_loss']:.4f}", f"{r['test_loss']:.4f}",
            f"{100 * r['test_accuracy']:.2f}%", f"{r['bits_per_coordinate']:.3f}", _snr(r.get("snr_db")),
        )
    return table


def _snr(value: float | None) -> str:
    """An SNR in dB as the tables show it: "-" when not measured, "inf" for a lossless uplink."""
    from auditkit.reports.content import number

    return number(value, ".2f")


def _title(config, config_path: Path | None, preset: str | None) -> str:
    return config.title or (config_path.stem if config_path is not None else (preset or "quickstart"))


def _train(config_path, preset, out, overrides, words, plugins) -> None:
    from auditkit import mechanisms
    from auditkit.results import prepare_output
    from auditkit.stages.train import Experiment, build_mechanism, results_document

    config = _load(config_path, preset, overrides, words, plugins, settings=False)
    config.mechanism  # noqa: B018 -- one setting only; raises a ConfigError naming the fix otherwise
    mechanisms.preflight(build_mechanism(config))  # a plugin's bug: one line, before anything is written
    out = prepare_output(out)
    experiment = Experiment(config)
    reporter = Reporter(console)
    total = config.training.rounds
    rounds = reporter.bar("FL rounds", total)

    def on_round(record) -> None:
        accuracy = f"test acc {100 * record.test_accuracy:.2f}%"
        reporter.report(rounds, f"round {record.round}/{total}: {accuracy}", advance=1, status=accuracy)

    from auditkit import results

    with reporter:
        document = results_document(experiment.train(on_round), _title(config, config_path, preset))
        written = [results.write_results(document, out), *_write_reports(document, out)]
    setting = document["settings"][0]
    console.print(_round_table(setting))
    final = setting["training"]["final"]
    console.print(
        f"final test accuracy {100 * final['test_accuracy']:.2f}%  |  "
        f"{final['bits_per_coordinate']:.3f} bits/coordinate (float32 = 32)  |  SNR {_snr(final.get('snr_db'))} dB"
    )
    console.print(f"claimed guarantee: {escape(setting['mechanism']['guarantee']['summary'])}", highlight=False)
    example = setting["accounting"].get("example_level")
    if example is not None:
        console.print(f"example-level claim (DP-SGD): (eps={example['epsilon']:.4g}, delta={example['delta']:.3g}) "
                      f"over {example['steps']} steps at q = {example['sample_rate']:.4g} (client "
                      f"{example['client']}) via {example['backend']}", markup=False, highlight=False)
    _print_written(written)


def _audit_recorded(recorded: Path, config_path, preset, out, overrides, words, resume: bool) -> None:
    """``auditkit audit --recorded DIR``: the recording's app tables over the audit tables of CONFIG / --preset."""
    from auditkit.config import load_config, merge, preset_dict, read_config
    from auditkit.flower.recording import RecordingError, load_recording
    from auditkit.stages.recorded import recorded_config

    given = [f"--{k.replace('_', '-')}" for table in ("data", "training") for k, v in overrides[table].items()
             if v is not None]
    given += [table_option_flag(table, k) for table in OPTION_TABLES for k, v in overrides[table].items()
              if v is not None]
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
    raw = merge(raw, {"distinguish": overrides["distinguish"]})  # --confidence
    config = recorded_config(recording, {**raw, "device": overrides["device"] or raw.get("device", "auto")})
    _audit(config_path, preset, out, overrides, words, [], resume, config=config, recording=recording,
           title=config.title if config_path or preset else f"recorded Flower app ({recorded.name})")


def _audit(config_path, preset, out, overrides, words, plugins, resume: bool, *, config=None, recording=None,
           title: str | None = None) -> None:
    from auditkit.audit import Audit

    if config is None:
        config = _load(config_path, preset, overrides, words, plugins)
    try:
        audit = Audit(config, out=out, resume=resume, title=title or _title(config, config_path, preset),
                      recorded=recording)
    except ValueError as err:  # a mechanism or attack setting refused while planning
        raise UsageFailure(str(err)) from None
    _warn_unreproducible([plan.setting.name for plan in audit.unreproducible])
    reporter = Reporter(console)
    on_event = AuditProgress(reporter, audit.stage_count, config.training.rounds)
    try:
        with reporter:
            document = audit.run(on_event)
            on_event.finish()
    except KeyboardInterrupt:
        error_console.print(f"interrupted: the finished stages are kept in {audit.out / 'stages'}; "
                            "run the same command with --resume to finish", markup=False, highlight=False)
        raise typer.Exit(130) from None
    _print_audit_summary(document)
    _print_written(audit.out / name for name in ("results.json", "report.html", "report.md"))


class AuditProgress:
    """``Audit.run``'s event callback. On a terminal: the stage bar and the current setting's round bar. Elsewhere:
    a line per stage event (a finished stage with its own duration); rounds only move the terminal's bar."""

    def __init__(self, reporter: Reporter, stage_count: int, rounds: int) -> None:
        self.reporter, self.stage_count, self.rounds = reporter, stage_count, rounds
        self.stages = reporter.bar("audit stages", stage_count)
        self.training = reporter.bar("FL rounds", rounds, visible=False)
        self.started: dict[tuple[str, str], float] = {}  # (setting id, stage) -> elapsed seconds at its start

    def __call__(self, kind: str, **info: Any) -> None:
        plan = info["setting"]
        where = f"{plan.id} {plan.label}"
        if kind == "round":
            record = info["record"]
            accuracy = f"test acc {100 * record.test_accuracy:.2f}%"
            self.reporter.report(self.training, None, completed=record.round, visible=True,
                                 status=f"{plan.label}: {accuracy}")
            return
        stage, status = info["stage"], info["status"]
        if stage == "train" and status != "resumed":
            self.reporter.report(self.training, completed=0, visible=status == "start")
        line = f"{where}: {stage} {status}"
        if status == "start":
            self.started[(plan.id, stage)] = self.reporter.elapsed()
            self.reporter.report(self.stages, line, status=f"{where}: {stage}")
            return
        began = self.started.pop((plan.id, stage), None)
        if began is not None:
            line += f" ({self.reporter.elapsed() - began:.1f} s)"
        self.reporter.report(self.stages, line, advance=1, status=f"{where}: {stage} {status}")

    def finish(self) -> None:
        """Every stage done (the bar full)."""
        self.reporter.report(self.stages, completed=self.stage_count, status="done")


AUDIT_TABLE_MIN_WIDTH = 140  # columns the audit's summary table needs; below, one line per setting


def _audit_rows(document: dict[str, Any]) -> list[tuple[str, ...]]:
    """Per setting: label, test accuracy, SNR, claim, headline verdict, its strongest certified bound and the test
    that certified it, identification, probe SSIM."""
    from auditkit.reports.content import certified_bound, number, test_name

    rows = []
    for s in document["settings"]:
        claim, probe, ident, headline = s["mechanism"]["guarantee"], s["probe"], s["identification"], s["verdict"]
        flags = f" [{', '.join(claim['flags'])}]" if claim["flags"] else ""
        bound = certified_bound(s)
        identified = "-" if ident is None else "; ".join(
            f"M={t['candidates']}: {t['rate']:.2f} {'>' if t['verdict'] == 'violated' else '<='} {t['bound']:.2f}"
            for t in ident["tests"])
        rows.append((
            s["label"], f"{100 * s['training']['final']['test_accuracy']:.2f}%", _snr(s["training"]["final"].get("snr_db")),
            ("none" if claim["epsilon"] is None else f"{claim['epsilon']:.4g}") + flags,
            "-" if headline is None else headline["verdict"] + (
                f" ({headline['evidence']})" if headline.get("evidence") else ""),
            "-" if bound is None else f"{number(bound['epsilon_lower_bound'])} ({test_name(bound['test'])})",
            identified,
            "-" if probe is None else f"{probe['clean']['ssim_mean']:.3f} -> {probe['defended']['ssim_mean']:.3f}",
        ))
    return rows


_AUDIT_COLUMNS = ("setting", "test acc", "SNR (dB)", "claimed eps (1 round)", "verdict (all tests)",
                  "strongest certified eps >= (test)", "identified (M): rate <= bound", "probe SSIM clean -> defended")


def _print_audit_summary(document: dict[str, Any]) -> None:
    """The audit's summary: a table at wide widths, a block of lines per setting at narrow ones (a log file)."""
    rows = _audit_rows(document)
    if console.width >= AUDIT_TABLE_MIN_WIDTH:
        table = Table(title=f"audit: {escape(document['title'])}")
        for column in _AUDIT_COLUMNS:
            table.add_column(column)
        for row in rows:
            table.add_row(*map(escape, row))
        console.print(table)
        return
    console.print(f"audit: {document['title']}", markup=False, highlight=False)
    for label, accuracy, snr, claimed, verdict, bound, identified, probe in rows:
        console.print(f"{label}: {verdict}; claim eps {claimed}; certified eps >= {bound}\n"
                      f"    test acc {accuracy}, SNR {snr} dB; identified {identified}; probe SSIM {probe}",
                      markup=False, highlight=False, soft_wrap=True)


# the commands that take train's audit-only options, as its refusal names them
_TAKEN_BY = {
    "--resume": "`auditkit audit` only",
    "--recorded": "`auditkit audit` only",
    "--confidence": "`auditkit audit`, `auditkit distinguish` and `auditkit reproduce`",
}


OPTION_TABLES = ("dp_sgd",)
"""Config tables each key of which is a flag of ``train`` and ``audit``, ``--TABLE-KEY`` (``dp_sgd.noise_multiplier``:
``--dp-sgd-noise-multiplier``), generated from the table's dataclass in ``auditkit.config`` (``with_table_options``)."""
_TABLE_PREFIX = "table_option__"  # the keyword each table option arrives under: table_option__TABLE__KEY


def table_option_flag(table: str, key: str) -> str:
    """The flag of config key ``table.key`` (``OPTION_TABLES``): ``--dp-sgd-noise-multiplier``."""
    return "--" + f"{table}_{key}".replace("_", "-")


def _with_options(wrapper: Callable[..., Any], command: Callable[..., Any], extra: list[inspect.Parameter],
                  keyword: str) -> Callable[..., Any]:
    """``wrapper`` signed as ``command``'s own options (less ``keyword``, which ``wrapper`` fills) plus the generated
    ``extra`` ones, with ``mechanism_params`` last where ``command`` takes it (``with_mechanism_options`` wraps it)."""
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name not in (keyword, "mechanism_params")]
    wrapper.__name__, wrapper.__doc__ = command.__name__, command.__doc__
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + extra
    if "mechanism_params" in signature.parameters:
        parameters.append(signature.parameters["mechanism_params"].replace(kind=inspect.Parameter.KEYWORD_ONLY))
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def with_table_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with one ``--TABLE-KEY`` option per key of each table of ``OPTION_TABLES``, typed by the key's
    dataclass field and explained by its ``metadata["help"]``; the given ones arrive as ``table_options``
    ({table: {key: value}}, each value then validated with the config)."""
    from auditkit.config import AuditConfig

    tables = typing.get_type_hints(AuditConfig)
    extra = []
    for table in OPTION_TABLES:
        hints = typing.get_type_hints(tables[table])
        for field in dataclasses.fields(tables[table]):
            kind = hints[field.name]
            if isinstance(kind, types.UnionType):  # X | None: the flag's type is X
                kind = next(k for k in typing.get_args(kind) if k is not type(None))
            extra.append(inspect.Parameter(
                f"{_TABLE_PREFIX}{table}__{field.name}", inspect.Parameter.KEYWORD_ONLY, default=None,
                annotation=Annotated[kind | None, typer.Option(
                    table_option_flag(table, field.name), help=f"{field.metadata['help']} (config: [{table}] "
                    f"{field.name})", rich_help_panel=f"Config table [{table}]", show_default=False)]))

    def wrapper(**kwargs: Any) -> Any:
        given: dict[str, dict[str, Any]] = {}
        for key in [k for k in kwargs if k.startswith(_TABLE_PREFIX)]:
            table, name = key[len(_TABLE_PREFIX):].split("__")
            given.setdefault(table, {})[name] = kwargs.pop(key)
        return command(**kwargs, table_options=given)

    return _with_options(wrapper, command, extra, "table_options")


def _config_command(command: str):
    """``train`` or ``audit``: a config (file or preset) with the command line's options on top (and, through
    ``with_table_options``, the keys of ``OPTION_TABLES``)."""

    def run(
        config: ConfigArg = None,
        preset: PresetOpt = None,
        out: OutOpt = Path("auditkit-out"),
        mechanism: MechOpt = None,
        plugin: PluginOpt = None,
        seed: Annotated[int | None, typer.Option(help="Seeds the data split, the training and the mechanisms.")] = None,
        device: Annotated[str | None, typer.Option(help="auto | cpu | cuda | cuda:N")] = None,
        dataset: Annotated[str | None, typer.Option(help="{choices:datasets} (mnist-5k: 5,000 real MNIST digits, embedded like digits; the others load from --data-dir)")] = None,
        data_dir: Annotated[Path | None, typer.Option(help="Folder holding MNIST / CIFAR-10.")] = None,
        download: Annotated[bool, typer.Option("--download", help="Download MNIST / CIFAR-10 into --data-dir.")] = False,
        partition: Annotated[str | None, typer.Option(help="{choices:partitions}")] = None,
        model: Annotated[str | None, typer.Option(help="{choices:models}")] = None,
        clients: Annotated[int | None, typer.Option(help="Number of clients K.")] = None,
        rounds: Annotated[int | None, typer.Option(help="FL rounds T (checkpoints past T are dropped).")] = None,
        tau: Annotated[int | None, typer.Option(help="Local steps per round.")] = None,
        batch_size: Annotated[int | None, typer.Option(help="Samples per local step (1 = CEPAM).")] = None,
        lr: Annotated[float | None, typer.Option(help="Client learning rate.")] = None,
        backend: Annotated[str | None, typer.Option(
            help="Where FL training runs: {choices:training_backends} (builtin: the batched simulator in this "
                 "process; flower: Flower's Simulation Engine on Ray, pip install 'auditkit[flower]', resources in "
                 "the config's [flower]).")] = None,
        recorded: Annotated[Path | None, typer.Option(
            help="audit: audit what a Flower app recorded (auditkit.flower.AuditStrategy's record_dir) instead of "
                 "training; the data, training and mechanism come from the recording.")] = None,
        resume: Annotated[bool, typer.Option("--resume", help="audit: keep the finished stages found in --out "
                                             "(same inputs and code) and run only the rest.")] = False,
        confidence: Annotated[float | None, typer.Option(
            help="audit: family-wise confidence of every verdict, Bonferroni over all the audit's tests (default: "
                 "the config's [distinguish] confidence, 0.95).")] = None,
        table_options: dict[str, dict[str, Any]] | None = None,
        mechanism_params: dict[str, str] | None = None,
    ) -> None:
        overrides = {
            "seed": seed,
            "device": device,
            "data": {"dataset": dataset, "data_dir": None if data_dir is None else str(data_dir),
                     "download": download or None, "partition": partition},
            "training": {"model": model, "clients": clients, "rounds": rounds, "tau": tau,
                         "batch_size": batch_size, "lr": lr, "backend": backend},
            "distinguish": {"confidence": confidence},
            "mechanism_name": mechanism,
            **{table: (table_options or {}).get(table, {}) for table in OPTION_TABLES},
        }
        words, plugins = mechanism_params or {}, list(plugin or [])
        if recorded is not None and command == "audit":
            _run_guarded(_audit_recorded, recorded, config, preset, out, overrides, words, resume)
        elif command == "audit":
            _run_guarded(_audit, config, preset, out, overrides, words, plugins, resume)
        elif resume or recorded is not None or confidence is not None:
            given = "--resume" if resume else "--recorded" if recorded is not None else "--confidence"
            _fail(f"{given} applies to {_TAKEN_BY[given]} (train judges nothing)")
        else:
            _run_guarded(_train, config, preset, out, overrides, words, plugins)

    run.__name__ = command
    return run


# ------------------------------------------------------------------ mechanisms


def list_mechanisms(
    name: Annotated[str | None, typer.Argument(help="Show one mechanism's parameters and full claim.")] = None,
    plugin: PluginOpt = None,
) -> None:
    """List every registered mechanism with its claimed guarantee and rate (or one mechanism in detail)."""
    _run_guarded(_mechanisms_table if name is None else _mechanism_detail, *(() if name is None else (name,)))


# The 8-column table needs ~280 columns unwrapped; its rows wrap to ~4 lines each at 160 columns, 5 at 150 and
# 6 at 140, where the compact list (at most 3 lines each at 80 columns) reads better.
WIDE_TABLE_MIN_WIDTH = 160


class _MechanismRow(NamedTuple):
    """One registered mechanism as the list shows it (numbers already formatted)."""

    name: str
    origin: str
    summary: str
    eps: str
    delta: str
    actual: str
    unit: str
    flags: str
    bits: str


def _mechanism_row(name: str) -> _MechanismRow:
    from auditkit import mechanisms

    mechanism = mechanisms.create(name)
    mechanisms.preflight(mechanism)  # a plugin's bug: one line naming it (PluginCodeError)
    info = mechanisms.describe(name)
    claim = mechanism.guarantee()
    actual = mechanisms.capability(mechanism, "true_epsilon")
    return _MechanismRow(
        name=info.name, origin=info.origin, summary=info.summary,
        eps="no privacy" if claim.epsilon is None else f"{claim.epsilon:.4g}",
        delta="-" if claim.epsilon is None else f"{claim.delta:.3g}",
        actual="-" if actual is None else f"{actual:.4g}",
        unit=claim.unit if claim.epsilon is not None else "-",
        flags=", ".join(sorted(claim.flags)) or "-", bits=f"{info.bits_per_coordinate:.2f}",
    )


def _mechanisms_table() -> None:
    from auditkit import mechanisms

    rows = [_mechanism_row(name) for name in mechanisms.names()]
    wide = console.width >= WIDE_TABLE_MIN_WIDTH
    if wide:
        _print_mechanisms_wide(rows)
    else:
        _print_mechanisms_compact(rows, console.width)
    console.print(
        "claimed eps: the mechanism's own one-round claim (`auditkit account NAME` composes it over rounds "
        "and checks it); eps as implemented: the epsilon of the noise the code really adds, where it is "
        "computed (flag claim-exceeded when larger); bits/coord: measured message size for a 10,000-coordinate "
        "update of l2 norm 1 (float32 = 32). `auditkit mechanisms NAME` lists the parameters"
        + ("." if wide else f" and the unit of privacy (the full table needs {WIDE_TABLE_MIN_WIDTH}+ columns).")
        + (" Mechanisms marked 'plugin' are registered by the module named."
           if any(row.origin != "built-in" for row in rows) else "")
    )


def _print_mechanisms_compact(rows: list[_MechanismRow], width: int) -> None:
    """A narrow terminal's list: a line of numbers per mechanism, its description (and flags) wrapped below."""
    headers = ("name", "claimed eps", "delta", "eps as implemented", "bits/coord")
    cells = [(row.name, row.eps, row.delta, row.actual, row.bits) for row in rows]
    widths = [max(len(header), *(len(values[i]) for values in cells)) for i, header in enumerate(headers)]

    def line(values: tuple[str, ...]) -> str:
        return "  ".join(v.ljust(w) if i == 0 else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))

    console.print("Registered mechanisms (default parameters)", style="bold", markup=False, highlight=False)
    console.print(line(headers), style="bold", markup=False, highlight=False)
    for row, values in zip(rows, cells):
        console.print(line(values), markup=False, highlight=False)
        detail = row.summary + ("" if row.flags == "-" else f" [flags: {row.flags}]") + (
            "" if row.origin == "built-in" else f" (plugin {row.origin})")
        console.print(textwrap.fill(detail, width=width, initial_indent="    ", subsequent_indent="    "),
                      markup=False, highlight=False, soft_wrap=True)


def _print_mechanisms_wide(rows: list[_MechanismRow]) -> None:
    """A wide terminal's table: every column, the description wrapped in its cell."""
    table = Table(title="Registered mechanisms (default parameters)")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("what it does")
    table.add_column("claimed eps", justify="right")
    table.add_column("delta", justify="right")
    table.add_column("eps as implemented", justify="right")
    table.add_column("unit of privacy")
    table.add_column("flags")
    table.add_column("bits/coord", justify="right")
    for row in rows:
        shown = escape(row.name) + ("" if row.origin == "built-in" else f"\n[dim]plugin {escape(row.origin)}[/dim]")
        table.add_row(shown, escape(row.summary), row.eps, row.delta, row.actual, escape(row.unit),
                      escape(row.flags), row.bits)
    console.print(table)


def _mechanism_detail(name: str) -> None:
    from auditkit import mechanisms

    try:
        mechanism = mechanisms.create(name)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    mechanisms.preflight(mechanism)  # a plugin's bug: one line naming it (PluginCodeError)
    info = mechanisms.describe(name)
    claim = mechanism.guarantee()
    console.print(f"[bold]{escape(info.name)}[/bold]: {escape(info.summary)}")
    if info.origin != "built-in":
        console.print(f"registered by plugin {info.origin}", markup=False, highlight=False)
    table = Table(title="parameters (CLI flag = --name with dashes; config key = name)")
    for column in ("name", "default", "allowed", "meaning"):
        table.add_column(column)
    for p in info.params:
        table.add_row(p.name, repr(p.default), escape(p.allowed), escape(p.help))
    console.print(table)
    console.print(f"claim (defaults): {escape(claim.summary())}", highlight=False)
    console.print(f"  unit: {claim.unit}; threat model: {claim.threat_model}", highlight=False, markup=False)
    for line in claim.assumptions:
        console.print(f"  assumes: {line}", highlight=False, markup=False)
    for line in claim.caveats:
        console.print(f"  caveat: {line}", highlight=False, markup=False)
    declared = [c for c in mechanisms.capabilities.CAPABILITIES if mechanisms.declared(mechanism, c)]
    generic = [c for c in mechanisms.capabilities.CAPABILITIES if c not in declared]
    console.print(f"audit capabilities declared: {', '.join(declared) or 'none'}; generic defaults: "
                  f"{', '.join(generic) or 'none'}", highlight=False, markup=False)
    console.print(f"bits/coord (reference update): {info.bits_per_coordinate:.3f}")


# ------------------------------------------------------------------ report


REPORT_FORMATS = {"html": ("html",), "md": ("md",), "both": ("html", "md")}  # --format -> files written


def report_command(
    results: Annotated[Path, typer.Argument(help="A results.json or reproduction.json written by any auditkit "
                                            "command, or the folder holding it.")],
    format: Annotated[str, typer.Option("--format", help="{choices:report_formats}")] = "both",
    out: Annotated[Path | None, typer.Option(help="Output folder (default: the results file's folder).")] = None,
    plugin: PluginOpt = None,
) -> None:
    """Re-render report.html / report.md from a results.json or reproduction.json, without recomputing anything."""
    _run_guarded(_report, results, format, out)


def _report(results: Path, fmt: str, out: Path | None) -> None:
    from auditkit.results import prepare_output
    from auditkit.reports import load_results, render_report
    from auditkit.reports.results_schema import document_path

    if fmt not in REPORT_FORMATS:
        raise UsageFailure(f"--format must be one of {', '.join(REPORT_FORMATS)}; got {fmt!r}")
    try:
        results = document_path(results)  # a folder: the results.json or reproduction.json it holds
        document = load_results(results)
        target = prepare_output(out if out is not None else results.parent)
        written = render_report(document, target, formats=REPORT_FORMATS[fmt], results_dir=results.parent)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    _print_written(written)


# ------------------------------------------------------------------ account

def account_command(
    mechanism: Annotated[str, typer.Argument(help="Registered mechanism (see `auditkit mechanisms`).")],
    rounds: Annotated[int, typer.Option(help="FL rounds T to compose over.")] = 1,
    composition_delta: Annotated[float, typer.Option(help="delta at which the composed epsilon is stated.")] = 1e-5,
    backend: Annotated[str, typer.Option(help="Composition backend: {choices:composition_backends} (Opacus composes "
                                         "Gaussian rounds only).")] = "opacus-prv",
    solve: Annotated[str | None, typer.Option(help="Solve for a parameter instead: {choices:solvers}.")] = None,
    target_eps: Annotated[float | None, typer.Option(help="Target epsilon for --solve.")] = None,
    target_delta: Annotated[float | None, typer.Option(help="Target delta for --solve.")] = None,
    out: Annotated[Path | None, typer.Option(help="Also write results.json and the reports into this folder.")] = None,
    plugin: PluginOpt = None,
    claim_words: dict[str, str] | None = None,
    participation_words: dict[str, str] | None = None,
    mechanism_params: dict[str, str] | None = None,
) -> None:
    """Print a mechanism's claimed guarantee: one round, the paper's FL claim, and T rounds composed (amplified by
    client sampling where the claim covers it: --participation poisson --sample-rate q)."""
    options = {"rounds": rounds, "composition_delta": composition_delta, "backend": backend, "solve": solve,
               "target_eps": target_eps, "target_delta": target_delta, "out": out, "claim_words": claim_words or {},
               "participation_words": participation_words or {}}
    _run_guarded(_account, mechanism, mechanism_params or {}, **options)


def _composition_backends() -> tuple[str, ...]:
    from auditkit.accounting.composition import BACKENDS

    return BACKENDS


def _solvers() -> dict[str, Any]:
    from auditkit import accounting

    return accounting.solvers()


CLAIM_PANEL = "FL settings of a paper's record-level claim"
PARTICIPATION_PANEL = "Client sampling (amplifies a claim that covers it)"


def with_spec_options(specs: Callable[[], list[Any]], keyword: str, panel: str) -> Callable[[Callable], Callable]:
    """Decorator giving ``command`` one ``--NAME`` option per ``Param`` spec ``specs()`` returns, in help panel
    ``panel``; the words given arrive as the dict ``keyword`` (name -> word, parsed later by the spec)."""
    prefix = keyword + "__"

    def decorate(command: Callable[..., Any]) -> Callable[..., Any]:
        extra = [
            inspect.Parameter(
                prefix + spec.name, inspect.Parameter.KEYWORD_ONLY, default=None,
                annotation=Annotated[str | None, typer.Option(
                    "--" + spec.name.replace("_", "-"), rich_help_panel=panel, show_default=False,
                    help=f"{spec.help} ({spec.allowed}" + ("" if spec.default is None else f"; default {spec.default!r}")
                    + ")", metavar="[" + "|".join(spec.choices) + "]" if spec.choices else {float: "FLOAT", int: "INTEGER"}[spec.type])],
            )
            for spec in specs()
        ]

        def wrapper(**kwargs: Any) -> Any:
            words = {key[len(prefix):]: kwargs.pop(key) for key in list(kwargs) if key.startswith(prefix)}
            return command(**kwargs, **{keyword: {k: v for k, v in words.items() if v is not None}})

        return _with_options(wrapper, command, extra, keyword)

    return decorate


def _claim_option_specs() -> list[Any]:
    from auditkit import accounting

    return accounting.claim_options()


def _participation_specs() -> list[Any]:
    from auditkit.fl.sampling import ACCOUNTED_PARTICIPATION_OPTIONS

    return list(ACCOUNTED_PARTICIPATION_OPTIONS)


with_claim_options = with_spec_options(_claim_option_specs, "claim_words", CLAIM_PANEL)
with_participation_options = with_spec_options(_participation_specs, "participation_words", PARTICIPATION_PANEL)


def _spec_values(specs: list[Any], words: dict[str, str]) -> dict[str, Any]:
    """The options given on the command line typed by their ``specs``; the others at their defaults (if any)."""
    values = {}
    for spec in specs:
        if spec.name in words:
            try:
                values[spec.name] = spec.parse(words[spec.name])
            except ValueError as err:
                raise UsageFailure(str(err)) from None
        elif spec.default is not None:
            values[spec.name] = spec.default
    return values


def _account(mechanism: str, words: dict[str, str], **options) -> None:
    try:
        _account_unguarded(mechanism, _mechanism_params(mechanism, words), **options)
    except UsageFailure:
        raise
    except ValueError as err:  # the accountants validate their inputs with one-line ValueErrors
        raise UsageFailure(str(err)) from None


def _as_flags(message: str, specs: list[Any]) -> str:
    """``message`` with the specs' names written as the command-line flags that set them (sample_rate ->
    --sample-rate)."""
    for spec in specs:
        message = re.sub(rf"\b{spec.name}\b", "--" + spec.name.replace("_", "-"), message)
    return message


def _claim_settings(words: dict[str, str]) -> dict[str, Any]:
    """The paper-claim FL settings given on the command line, typed by their specs; the others at their defaults
    where they have one."""
    return _spec_values(_claim_option_specs(), words)


def _solve(solve: str, mechanism: str, params: dict[str, Any], *, target_eps, target_delta, fl) -> None:
    solvers = _solvers()
    if solve not in solvers:
        raise UsageFailure(f"--solve must be one of {', '.join(solvers)}, got {solve!r}")
    if target_eps is None or not target_eps > 0:
        raise UsageFailure(f"--solve {solve} needs --target-eps > 0, got {target_eps}")
    if target_delta is not None and not 0 < target_delta < 1:
        raise UsageFailure(f"--target-delta must be in (0, 1), got {target_delta}")
    solver = solvers[solve]
    if solver.mechanisms and mechanism not in solver.mechanisms:
        raise UsageFailure(f"--solve {solve} applies to {', '.join(solver.mechanisms)}, not {mechanism}")
    console.print(solver.solve(mechanism, params, target_eps, target_delta, fl), highlight=False)


def _account_unguarded(mechanism: str, params: dict[str, Any], *, rounds, composition_delta, backend, solve,
                       target_eps, target_delta, out, claim_words, participation_words) -> None:
    from auditkit import accounting, mechanisms
    from auditkit import results
    from auditkit.results import prepare_output

    fl = _claim_settings(claim_words)
    sampling = _spec_values(_participation_specs(), participation_words)
    if solve is not None:
        _solve(solve, mechanism, params, target_eps=target_eps, target_delta=target_delta, fl=fl)
        return
    backends = _composition_backends()
    if backend not in backends:
        raise UsageFailure(f"--backend must be one of {', '.join(backends)}, got {backend!r}")
    configured = mechanisms.create(mechanism, **params)
    mechanisms.preflight(configured)  # a plugin's bug: one line naming it (PluginCodeError), nothing written
    try:
        accounting.client_sampling(configured, sampling["participation"], sampling.get("sample_rate"))
    except ValueError as err:  # before anything is written
        raise UsageFailure(_as_flags(str(err), _participation_specs())) from None
    out = None if out is None else prepare_output(out)
    entry = results.accounting_entry(configured, rounds, composition_delta=composition_delta, backend=backend, fl=fl,
                                     participation=sampling["participation"], sample_rate=sampling.get("sample_rate"))
    per_round = configured.guarantee()
    paper = entry["paper_claim"]
    for title, claim in (("one round (mechanism)", per_round.to_dict()), ("paper's FL claim", paper)):
        if claim is None:
            continue
        console.print(f"[bold]{title}:[/bold] {escape(claim['summary'])}", highlight=False)
        console.print(f"  unit: {claim['unit']}; threat model: {claim['threat_model']}", highlight=False, markup=False)
        if claim["flags"]:
            console.print(f"  flags: {', '.join(claim['flags'])}", highlight=False)
        for line in claim["assumptions"]:
            console.print(f"  assumes: {line}", highlight=False, markup=False)
        for line in claim["caveats"]:
            console.print(f"  caveat: {line}", highlight=False, markup=False)
    console.print(f"[bold]client sampling:[/bold] {escape(entry['sampling']['note'])}", highlight=False)
    for label, composed in ((f"{rounds} rounds", entry["composed"]),
                            (f"{rounds} rounds, as implemented", entry["composed_actual"])):
        if composed is not None:
            console.print(f"[bold]{label}:[/bold] (eps={composed['epsilon']:.4g}, delta={composed['delta']:.3g}) "
                          f"via {composed['backend']} {escape('[' + composed['event'] + ']')}", highlight=False)
        elif label == f"{rounds} rounds":
            console.print(f"[bold]{label}:[/bold] no number: {escape(entry['refusal'])}", highlight=False)
    if entry["check"] is not None:
        console.print(f"[bold]check:[/bold] {entry['check']['verdict']}: {escape(entry['check']['reason'])}",
                      highlight=False)
    if out is not None:
        setting = results.setting("s00", configured.name, configured, accounting=entry)
        config = {"mechanism": {"name": mechanism, **params}, "rounds": rounds, "composition_delta": composition_delta,
                  "backend": backend, "fl": fl, **sampling}
        provenance = results.provenance(seed=0, device="cpu", settings=[setting])
        document = results.document("account", f"account {configured.name}", config, provenance, [setting])
        _print_written([results.write_results(document, out), *_write_reports(document, out)])


# ------------------------------------------------------------------ attack


def attack_command(
    attack: Annotated[str, typer.Argument(help="{choices:inversion_attacks}")],
    mechanism: Annotated[str, typer.Option("--mechanism", "-m", help="Mechanism the server view passes through.")] = "none",
    images: Annotated[int, typer.Option(help="Images attacked (one single-image client each).")] = 8,
    source: Annotated[str, typer.Option(help="{choices:target_sources} (patches: natural RGB 32x32; digits: embedded 1x28x28)")] = "patches",
    model: Annotated[str, typer.Option(help="Attacked model (lenet: DLG's sigmoid LeNet).")] = "lenet",
    label_given: Annotated[bool, typer.Option("--label-given", help="Hand the attacker the true labels (JoPEQ's evaluation).")] = False,
    iterations: Annotated[int | None, typer.Option(help="Optimiser steps (default: the attack's preset).")] = None,
    restarts: Annotated[int | None, typer.Option(help="Restarts (default: the preset's).")] = None,
    scoring: Annotated[str, typer.Option(help="{choices:scorings} (jopeq-code: score as JoPEQ's code, uint8 SSIM/MSE).")] = "standard",
    curve: Annotated[bool, typer.Option("--curve", help="Sweep the default defence curve instead "
                                        "(gaussian, laplace, sdq, jopeq-laplace, jopeq-exact).")] = False,
    device: Annotated[str | None, typer.Option(help="cpu | cuda | cuda:N (default: cpu).")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the model, the images, the dummies and the mechanism.")] = 0,
    out: OutOpt = Path("auditkit-attack"),
    plugin: PluginOpt = None,
    mechanism_params: dict[str, str] | None = None,
) -> None:
    """Invert single-image clients' gradients, clean and as the server sees them after the mechanism.

    Writes results.json, report.html, report.md and figures/inversion.png (ground truth / clean / defended) into
    --out; with --curve, one setting per point of the defence curve (SSIM against the error's std in the report).
    """
    given = {"iterations": iterations, "restarts": restarts, "device": device}
    settings = {k: v for k, v in given.items() if v is not None}
    _run_guarded(_attack, attack, mechanism, mechanism_params or {}, settings=settings, images=images, source=source,
                 model=model, label_given=label_given, scoring=scoring, curve=curve, seed=seed, out=out)


def _attack(attack: str, mechanism: str, words: dict[str, str], *, settings, images, source, model, label_given,
            scoring, curve, seed, out) -> None:
    from auditkit import attacks
    from auditkit import mechanisms
    from auditkit.attacks.metrics import SCORINGS
    from auditkit.stages import inversion as inversion_stage
    from auditkit.results import prepare_output

    params = _mechanism_params(mechanism, words)
    try:  # everything the run depends on is checked before the first (slow) attack
        attacks.preset_settings(attack)
        mechanisms.preflight(mechanisms.create(mechanism, **params))  # a plugin's bug: PluginCodeError, one line
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
        inversion_stage.load_targets(source, images, seed=seed)
        out = prepare_output(out)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    config = {"attack": attack, "mechanism": {"name": mechanism, **params}, "images": images, "source": source,
              "model": model, "label_given": label_given, "scoring": scoring, "curve": curve, "seed": seed,
              "settings": settings}
    if curve:
        _attack_curve(attack, settings=settings, images=images, source=source, model=model, seed=seed, out=out,
                      config=config)
        return
    with Reporter(console).status(f"{attack}: attacking {images} images, clean and after {mechanism}"):
        try:
            run = inversion_stage.run_inversion(
                attack, mechanism=mechanism, params=params, model=model, images=images, source=source, seed=seed,
                label_given=label_given, scoring=scoring, settings=settings)
        except ValueError as err:
            raise UsageFailure(str(err)) from None
    table = Table(title=f"{attack} on {model}: {images} {source} images, server view")
    for column in ("run", "mean SSIM", "mean MSE", "mean PSNR (dB)", "label acc", "s/image"):
        table.add_column(column, justify="right")
    for name, part in (("clean", run["clean"]), (mechanism, run["defended"])):
        scores = part["scores"]
        accuracy = "-" if scores["label_accuracy"] is None else f"{100 * scores['label_accuracy']:.0f}%"
        table.add_row(escape(name), f"{scores['ssim_mean']:.3f}", f"{scores['mse_mean']:.4f}",
                      f"{scores['psnr_mean']:.2f}", accuracy, f"{1 / part['images_per_second']:.2f}")
    console.print(table)
    console.print(f"claim: {escape(run['mechanism'].guarantee().summary())}; "
                  f"SSIM: {run['clean']['scores']['ssim_variant']}", highlight=False)
    document, written = inversion_stage.write_inversion(run, out, config=config, title=f"{attack} against {mechanism}")
    _print_written([*written, *_write_reports(document, out)])


def _attack_curve(attack: str, *, settings, images, source, model, seed, out, config) -> None:
    from auditkit.stages import inversion as inversion_stage

    total = sum(len(points) for points in inversion_stage.DEFAULT_CURVE.values())
    reporter = Reporter(console)
    points = reporter.bar("defence curve", total)
    reporter.report(points, "defence curve: clean attack", status="clean attack")
    done = 0

    def on_point(name, params, run) -> None:
        nonlocal done
        done += 1
        status = f"{name} {params}: SSIM {run['defended']['scores']['ssim_mean']:.3f}"
        reporter.report(points, f"point {done}/{total}: {status}", advance=1, status=status)

    with reporter:
        curve = inversion_stage.defence_curve(attack, model=model, images=images, source=source, seed=seed,
                                              settings=settings, on_point=on_point)
    clean = curve["clean"]["defended"]["scores"]
    table = Table(title=f"{attack} vs the server's view: mean over {images} images (clean SSIM "
                        f"{clean['ssim_mean']:.3f})")
    for column in ("mechanism", "params", "error std", "bits/coord", "mean SSIM", "mean MSE"):
        table.add_column(column)
    for run in curve["points"]:
        m = run["mechanism"]
        shown = ", ".join(f"{k}={m.params[k]:g}" if isinstance(m.params[k], float) else f"{k}={m.params[k]}"
                          for k in run["params_given"])
        table.add_row(m.name, shown, f"{run['distortion']['error_std']:.3g}", f"{run['bits_per_coordinate']:.2f}",
                      f"{run['defended']['scores']['ssim_mean']:.3f}", f"{run['defended']['scores']['mse_mean']:.4f}")
    console.print(table)
    document, written = inversion_stage.write_curve(curve, out, config=config, title=f"{attack} defence curve")
    _print_written([*written, *_write_reports(document, out)])


# ------------------------------------------------------------------ distinguish


def distinguish_command(
    mechanism: Annotated[str, typer.Argument(help="Registered mechanism (see `auditkit mechanisms`).")],
    trials: Annotated[int, typer.Option(help="Outputs per neighbouring pair, split evenly between its two inputs.")] = 200_000,
    confidence: Annotated[float, typer.Option(help="Family-wise confidence over every test run (Bonferroni).")] = 0.95,
    bound_delta: Annotated[float | None, typer.Option("--bound-delta", help="delta of the lower bounds "
                                                        "(default: the claim's delta).")] = None,
    adaptive: Annotated[bool, typer.Option(help="Also run the mechanism's adaptive tests (side channels).")] = True,
    search: Annotated[bool, typer.Option(help="Worst-pair search: the pairs share their budget and one held-out "
                                         "test on the most promising pair is judged (else every pair is).")] = True,
    seed: Annotated[int, typer.Option(help="Seeds the pairs and every mechanism sample.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Also write results.json and the reports into this folder.")] = None,
    plugin: PluginOpt = None,
    mechanism_params: dict[str, str] | None = None,
) -> None:
    """Certify an epsilon lower bound by black-box distinguishing tests and judge the claim with it."""
    _run_guarded(_distinguish, mechanism, mechanism_params or {}, trials=trials, confidence=confidence,
                 delta=bound_delta, adaptive=adaptive, search=search, seed=seed, out=out)


def _distinguish(mechanism: str, words: dict[str, str], *, trials, confidence, delta, adaptive, search, seed,
                 out) -> None:
    from auditkit import mechanisms
    from auditkit import results
    from auditkit.stages.distinguish import distinguish_family, run_distinguish
    from auditkit.results import prepare_output

    params = _mechanism_params(mechanism, words)
    try:
        configured = mechanisms.create(mechanism, private_seed=mechanisms.derive_seed("distinguish-private", seed),
                                       **params)
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        mechanisms.preflight(configured)  # a plugin's bug: one line naming it (PluginCodeError), nothing written
        if out is not None:
            out = prepare_output(out)
        family = distinguish_family(configured, adaptive, search)
        reproducible = mechanisms.reproducible(configured)
        if not reproducible:
            _warn_unreproducible([configured.name])
        with Reporter(console).status(f"distinguishing {mechanism}: {family} tests, {trials:,} outputs per pair"):
            audit, adaptive_results = run_distinguish(configured, trials=trials, confidence=confidence, delta=delta,
                                                      family=family, adaptive=adaptive, search=search, seed=seed)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    table = Table(title=f"{escape(mechanism)}: certified epsilon lower bounds ({100 * confidence:g}% family-wise "
                        f"over {family} tests, delta {audit.worst.delta:g})")
    for column in ("test", "pair / view", "statistic", "eps lower bound", "max certifiable", "p-value"):
        table.add_column(column)

    def p(value):
        return "-" if value is None else f"{value:.3g}"

    if audit.search is not None:
        for i, candidate in enumerate(audit.search.candidates):
            if i != audit.search.chosen:
                table.add_row("pair search", escape(candidate.pair.label), candidate.statistic,
                              f"predicted {candidate.predicted_bound:.3f} (not certified)", "-", "-")
    for estimate in audit.estimates:
        table.add_row("black-box", escape(estimate.pair.label) + (" (chosen)" if audit.search else ""),
                      estimate.statistic, f"{estimate.epsilon_lower_bound:.3f}", f"{estimate.max_certifiable:.2f}",
                      p(estimate.p_value))
    for result in adaptive_results:
        for estimate, judged in zip(result.estimates, result.judged):
            table.add_row(result.test, escape(estimate.pair.label + ("" if judged else " (reported only)")),
                          estimate.statistic, f"{estimate.epsilon_lower_bound:.3f}", f"{estimate.max_certifiable:.2f}",
                          p(estimate.p_value))
    console.print(table)
    console.print(f"claim: {escape(configured.guarantee().summary())}", highlight=False)
    console.print(f"where: {audit.setting}; sampling: {audit.worst.sampling}", highlight=False, markup=False)
    console.print(f"black-box verdict: [bold]{audit.verdict}[/bold] (worst pair {escape(audit.worst.pair.label)}, "
                  f"bound {audit.worst.epsilon_lower_bound:.3f}, p-value {p(audit.worst.p_value)})", highlight=False)
    for result in adaptive_results:
        console.print(f"{result.test}: [bold]{result.verdict}[/bold] (bound {result.epsilon_lower_bound:.3f})",
                      highlight=False)
    if out is not None:
        entry = results.setting("s00", configured.name, configured, distinguish=results.distinguish_entry(
            audit, adaptive_results, trials=trials, confidence=confidence, tests=family), reproducible=reproducible)
        config = {"mechanism": {"name": mechanism, **params}, "trials": trials, "confidence": confidence,
                  "bound_delta": delta, "adaptive": adaptive, "search": search, "seed": seed}
        provenance = results.provenance(seed=seed, device="cpu", settings=[entry])
        document = results.document("distinguish", f"distinguish {configured.name}", config, provenance, [entry])
        _print_written([results.write_results(document, out), *_write_reports(document, out)])


# ------------------------------------------------------------------ canary (one-run audit, idealized)


def canary_command(
    mechanism: Annotated[str, typer.Argument(help="Registered mechanism (see `auditkit mechanisms`).")],
    canaries: Annotated[int, typer.Option(help="Canaries m: each one independent call of the mechanism, "
                                          "included (x1) or not (x0) with probability 1/2.")] = 100_000,
    bound: Annotated[str, typer.Option(help="{choices:one_run_bounds} (fdp: Mahloujifar, Melis & Chaudhuri 2025, "
                                       "against the claim's trade-off curve; steinke: Steinke, Nasr & Jagielski "
                                       "2023, against its (eps, delta)).")] = "fdp",
    guesses: Annotated[str, typer.Option(help="How many canaries k are guessed on, fixed before the bits are read: "
                                         "claim (the k the claim's own curve makes best), grid (m, m/2, m/4, m/8, "
                                         "Bonferroni) or an integer.")] = "claim",
    confidence: Annotated[float, typer.Option(help="Confidence of the bounds.")] = 0.95,
    bound_delta: Annotated[float | None, typer.Option("--bound-delta", help="delta of the bounds "
                                                        "(default: the claim's delta).")] = None,
    pair: Annotated[str | None, typer.Option(help="The neighbouring pair of the claim's audit setting, by label "
                                             "(default: the first, axis).", show_default=False)] = None,
    seed: Annotated[int, typer.Option(help="Seeds the inclusion bits and every mechanism call.")] = 0,
    out: Annotated[Path | None, typer.Option(help="Also write results.json and the reports into this folder.")] = None,
    plugin: PluginOpt = None,
    mechanism_params: dict[str, str] | None = None,
) -> None:
    """One-run canary audit, idealized: m canaries, each an independent call of the mechanism on the claim's pair,
    one guess game, a certified bound judged against the claim.

    Canary i is included with probability 1/2 (its output a call on x1, else on x0) and scored by the log-likelihood
    ratio of the declared output density (else the projection on x1 - x0); the k/2 highest scores are guessed in,
    the k/2 lowest out. The one-run bound (--bound) turns the correct guesses into a certified lower bound and the
    verdict. Beside it, the independent-calls bound: the classical two-sample test, valid here because every canary
    is its own call (not in a training run), never the verdict.
    """
    _run_guarded(_canary, mechanism, mechanism_params or {}, canaries=canaries, bound=bound, guesses=guesses,
                 confidence=confidence, delta=bound_delta, pair=pair, seed=seed, out=out)


def _parse_guesses(word: str, canaries: int) -> str | int:
    """``--guesses``: a rule of ``auditkit.attacks.one_run.GUESS_RULES`` or an integer k in 1..m."""
    from auditkit.attacks.one_run import GUESS_RULES

    if word in GUESS_RULES:
        return word
    try:
        k = int(word)
    except ValueError:
        k = None
    if k is None or not 1 <= k <= canaries:
        raise UsageFailure(f"--guesses must be {', '.join(GUESS_RULES)} or an integer in 1..{canaries} (--canaries), "
                           f"got {word!r}")
    return k


CANARY_TABLE_MIN_WIDTH = 135  # columns the canary table needs on one row; below, one row per field


def _check_canary_options(mechanism: str, canaries: int, bound: str, confidence: float, delta: float | None) -> None:
    """The canary command's own options, each refused in one line naming it."""
    from auditkit.attacks.one_run import BOUNDS
    from auditkit.mechanisms.registry import renamed_param

    if canaries < 2:
        raise UsageFailure(f"--canaries must be an integer >= 2, got {canaries}")
    if bound not in BOUNDS:
        renamed = renamed_param(mechanism, "bound")
        hint = f" ({mechanism}'s --bound was renamed --{renamed})" if renamed else ""
        raise UsageFailure(f"--bound must be one of {', '.join(BOUNDS)}; got {bound!r}{hint}")
    if not 0 < confidence < 1:
        raise UsageFailure(f"--confidence must be in (0, 1), got {confidence}")
    if delta is not None and not 0 <= delta < 1:
        raise UsageFailure(f"--bound-delta must be in [0, 1), got {delta}")


def _canary(mechanism: str, words: dict[str, str], *, canaries, bound, guesses, confidence, delta, pair, seed,
            out) -> None:
    from auditkit import mechanisms
    from auditkit import results
    from auditkit.results import prepare_output
    from auditkit.stages.idealized_canary import SCORINGS, canary_pairs, claim_at_delta, idealized_canary_audit

    params = _mechanism_params(mechanism, words)
    _check_canary_options(mechanism, canaries, bound, confidence, delta)
    rule = _parse_guesses(guesses, canaries)
    try:
        configured = mechanisms.create(mechanism, private_seed=mechanisms.derive_seed("canary-private", seed),
                                       **params)
        mechanisms.preflight(configured)  # a plugin's bug: one line naming it (PluginCodeError), nothing written
        try:
            claim_at_delta(configured, delta)
        except ValueError as err:
            raise UsageFailure(f"--bound-delta: {err}") from None
        labels = [p.label for p in canary_pairs(configured, seed=seed)]
        if pair is not None and pair not in labels:
            raise UsageFailure(f"--pair must be one of {', '.join(labels)} (the pairs of {configured.name}'s audit "
                               f"setting); got {pair!r}")
        if out is not None:
            out = prepare_output(out)
        reproducible = mechanisms.reproducible(configured)
        if not reproducible:
            _warn_unreproducible([configured.name])
        with Reporter(console).status(f"canary audit of {mechanism}: {canaries:,} canaries, {bound} bound"):
            audit = idealized_canary_audit(configured, canaries=canaries, bound=bound, guesses=rule,
                                           confidence=confidence, delta=delta, pair=pair, seed=seed)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    result, independent = audit.result, audit.independent
    title = (f"{escape(mechanism)}: one-run canary audit, idealized ({100 * confidence:g}% confidence, "
             f"delta {result.delta:g}, pair {escape(audit.pair)})")
    cells = {"m": f"{canaries:,}", "guess rule": result.guess_rule, "k": f"{result.guesses:,}",
             "v": f"{result.correct:,}", f"{bound} bound": f"{result.epsilon_lower_bound:.3f}",
             "cap": f"{result.max_certifiable:.2f}" + ("" if result.curve_max_certifiable is None
                                                       else f" ({result.curve_max_certifiable:.2f})"),
             **({} if bound != "fdp" else {"curve's eps": "-" if result.curve_epsilon is None
                                           else f"{result.curve_epsilon:.3f}"}),
             "claim eps": "-" if result.claimed_epsilon is None else f"{result.claimed_epsilon:.3f}",
             "claim curve": "-" if audit.curve is None else escape(audit.curve.label), "verdict": result.verdict,
             "seconds": f"{audit.seconds:.2f}"}
    if console.width >= CANARY_TABLE_MIN_WIDTH:
        table = Table(title=title)
        for column in cells:
            table.add_column(column, no_wrap=True)
        table.add_row(*cells.values())
    else:  # one row per field: the wide table's numbers would be cut
        console.print(title, highlight=False)
        table = Table(show_header=False)
        table.add_column("field", no_wrap=True)
        table.add_column("value")
        for name, value in cells.items():
            table.add_row(name, value)
    console.print(table)

    def say(text: str) -> None:
        console.print(text, markup=False, highlight=False, soft_wrap=True)

    say(f"claim: {configured.guarantee().summary()}")
    say(f"scoring: {SCORINGS[audit.scoring]}; sampling: {audit.sampling}")
    refutes = ("refutes no curve of the claim's family" if independent.refuted_curve is None else
               f"refutes {independent.refuted_curve}, eps {independent.curve_epsilon:.3f} if the mechanism's curve is "
               "in that family")
    say(f"{independent.label}: FPR <= {independent.fpr_upper:.4g}, FNR <= {independent.fnr_upper:.4g} at score > "
        f"{independent.threshold:.4g}: {refutes}; for any mechanism eps >= {independent.epsilon_lower_bound:.3f}; "
        "valid only because every canary is its own call of the mechanism, so never the verdict")
    say(f"meaning: {_canary_meaning(audit)}")
    console.print(f"verdict: [bold]{result.verdict}[/bold]", highlight=False)
    if out is not None:
        view = results.canary_view("output", SCORINGS[audit.scoring], result, audit.scores, audit.inserted, audit.curve)
        claim = configured.guarantee()
        section = results.canary_entry(
            kind="idealized", canaries=canaries, bound=bound, confidence=confidence, seconds=audit.seconds,
            claim={"epsilon": claim.epsilon, "delta": claim.delta,
                   "curve": None if audit.curve is None else audit.curve.label, "rounds": 1,
                   "note": f"one round: every canary is one call of {configured.name} on the pair {audit.pair}"},
            views=[view],
            details={"pair": audit.pair, "scoring": SCORINGS[audit.scoring], "sampling": audit.sampling,
                     "seed": seed, "refuted_curve": audit.refuted_curve, "independent": independent.to_dict()})
        entry = results.setting("s00", configured.name, configured, reproducible=reproducible, canary=section)
        config = {"mechanism": {"name": mechanism, **params}, "canaries": canaries, "bound": bound,
                  "guesses": guesses, "confidence": confidence, "bound_delta": delta, "pair": pair, "seed": seed}
        provenance = results.provenance(seed=seed, device="cpu", settings=[entry])
        document = results.document("canary", f"canary {configured.name}", config, provenance, [entry])
        _print_written([results.write_results(document, out), *_write_reports(document, out)])


def _canary_meaning(audit: Any) -> str:
    """What the one-run bound of ``audit`` (an ``IdealizedCanaryAudit``) says, in one sentence."""
    result = audit.result
    level = f"{100 * result.confidence:g}%"
    counts = f"{result.correct:,} right of {result.guesses:,} guesses on {result.canaries:,} canaries"
    if result.bound == "steinke":
        return (f"at {level} confidence, no ({result.epsilon_lower_bound:.3f}, {result.delta:g})-DP mechanism gives "
                f"{counts} (Steinke, Nasr & Jagielski 2023): a certified eps lower bound for this pair")
    certified = (f"whatever the mechanism, no ({result.epsilon_lower_bound:.3f}, {result.delta:g})-DP mechanism "
                 f"gives them (the certified bound)")
    if result.refuted_curve is None or result.curve_epsilon is None:
        return f"at {level} confidence, {counts}: {certified}; they refute no curve of the claim's family"
    return (f"at {level} confidence, {counts} refute {result.refuted_curve} and every more private curve of its family "
            f"(Mahloujifar, Melis & Chaudhuri 2025; its eps at delta {result.delta:g}, {result.curve_epsilon:.3f}, is "
            f"the number of their Table 1, an eps bound if the mechanism's curve is in that family); {certified}")


# ------------------------------------------------------------------ version and the app


# ------------------------------------------------------------------ reproduce

def reproduce_command(
    paper: Annotated[str | None, typer.Argument(help="{choices:papers} (see --list).", show_default=False)] = None,
    list_: Annotated[bool, typer.Option("--list", help="Show each paper's tables and figures, then exit.")] = False,
    budget: Annotated[str, typer.Option(help="{choices:budgets} (quick: fewer rounds and seeds, stated in the report).")] = "quick",
    seeds: Annotated[int | None, typer.Option(help="Seeds per setting (default: the budget's).", show_default=False)] = None,
    data_dir: Annotated[Path | None, typer.Option(
        "--data-dir", help="Folder holding the paper's data for torchvision (e.g. DIR/MNIST/raw/); default: the "
        "embedded mnist-5k.", show_default=False)] = None,
    confidence: Annotated[float, typer.Option(help="Confidence of the Student-t intervals over seeds that each "
                                              "row's verdict reads.")] = 0.95,
    out: OutOpt = Path("auditkit-reproduce"),
) -> None:
    """Run a paper's own settings over seeds; each reported number beside ours, with a verdict per row."""
    _run_guarded(_reproduce, paper, list_, budget, seeds, data_dir, out, confidence)


def _reproduce(paper: str | None, list_: bool, budget: str, seeds: int | None, data_dir: Path | None,
               out: Path, confidence: float) -> None:
    from auditkit import reproduction

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
    from auditkit.results import prepare_output

    prepare_output(out)
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

    with reporter:
        document = reproduction.reproduce(paper, budget=budget, seeds=seeds,
                                          data_dir=None if data_dir is None else str(data_dir), out=out,
                                          confidence=confidence, on_run=on_run)
    summary = Table(title=f"reproduction: {paper} ({budget})")
    for column in ("table", "method", "column", "paper", f"ours [{100 * confidence:g}%]", "verdict"):
        summary.add_column(column)
    from auditkit.reports.content import ours

    for t in document["tables"]:
        for row in t["rows"]:
            column = row["column"] if row["x"] is None else f"{row['column']} {t['x_label']} = {row['x']:g}".strip()
            summary.add_row(escape(t["id"]), escape(row["method"]), escape(column), escape(row["paper"] or "(plot)"),
                            ours(row), row["verdict"])
    console.print(summary)
    _print_written(out / name for name in ("reproduction.json", "report.html", "report.md"))


def show_version() -> None:
    """Print the auditkit version."""
    from auditkit import __version__

    console.print(__version__)


# ------------------------------------------------------------------ help and usage errors

_ARGS = "auditkit.args"  # ctx.meta key: the words a command parsed, which its --help (handled mid-parse) reads


def _choice_sources() -> dict[str, Callable[[], Iterable[str]]]:
    """Where each choice list a help text names (``{choices:NAME}``) comes from: the one tuple the code checks
    against, imported only when a help is rendered."""
    def source(module: str, name: str) -> Callable[[], Iterable[str]]:
        return lambda: getattr(importlib.import_module(module), name)

    return {
        "presets": source("auditkit.config", "PRESETS"),
        "training_backends": source("auditkit.config", "TRAINING_BACKENDS"),
        "datasets": source("auditkit.data.catalog", "DATASETS"),
        "partitions": source("auditkit.data.partition", "PARTITION_SCHEMES"),
        "models": source("auditkit.models", "MODEL_NAMES"),
        "composition_backends": source("auditkit.accounting.composition", "BACKENDS"),
        "inversion_attacks": source("auditkit.attacks.gradient_inversion", "INVERSION_ATTACKS"),
        "scorings": source("auditkit.attacks.metrics", "SCORINGS"),
        "one_run_bounds": source("auditkit.attacks.one_run", "BOUNDS"),
        "target_sources": source("auditkit.stages.inversion", "SOURCES"),
        "report_formats": lambda: REPORT_FORMATS,
        "papers": lambda: importlib.import_module("auditkit.reproduction.paper").paper_ids(),
        "budgets": source("auditkit.reproduction.paper", "BUDGETS"),
        "solvers": lambda: [f"{name} ({solver.help})" for name, solver in _solvers().items()],
    }


_CHOICES = re.compile(r"\{choices:(\w+)\}")


def expand_choices(text: str | None) -> str | None:
    """``text`` with every ``{choices:NAME}`` replaced by that list's values, "a | b | c"."""
    if not text or "{choices:" not in text:
        return text
    sources = _choice_sources()
    return _CHOICES.sub(lambda m: " | ".join(sources[m.group(1)]()), text)


def click_command() -> click.Command:
    """The app as a click command, its help texts with their choice lists filled in (``expand_choices``): what
    the docs' CLI reference reads (``auditkit.cli_reference``)."""
    command = typer.main.get_command(build_app())
    commands = [command, *getattr(command, "commands", {}).values()]
    for each in commands:
        each.help = expand_choices(each.help)
        for param in each.params:
            param.help = expand_choices(getattr(param, "help", None))  # type: ignore[attr-defined]
    return command


def _literal_param(param: click.Parameter) -> click.Parameter:
    """A copy of ``param`` whose help and panel title render as written (typer reads help as rich markup, which
    would eat "[min v, max v]")."""
    shown = copy.copy(param)
    for field in ("help", "rich_help_panel"):
        text = expand_choices(getattr(shown, field, None))
        if text:
            setattr(shown, field, escape(text))
    return shown


def _literal_command(command: click.Command) -> click.Command:
    """A copy of ``command`` whose own help renders as written (its parameters are left as they are)."""
    shown = copy.copy(command)
    shown.help = None if command.help is None else escape(expand_choices(command.help))
    shown.short_help = None if command.short_help is None else escape(command.short_help)
    return shown


def _named_mechanism(command: click.Command, ctx: click.Context) -> str | None:
    """The mechanism the command line names (``NAME`` or ``--mechanism NAME``; None if none is given), from the
    words the command got, parsed again leniently (the help is handled before the other parameters)."""
    args = ctx.meta.get(_ARGS)
    if args is None or not any(param.name == "mechanism" for param in command.params):
        return None
    try:
        probe = command.make_context(ctx.info_name, list(args), parent=ctx.parent, resilient_parsing=True)
    except click.ClickException:
        return None
    if probe.get_parameter_source("mechanism") is not ParameterSource.COMMANDLINE:
        return None  # attack's default "none" is not a choice the user made
    named = probe.params.get("mechanism")
    return named if isinstance(named, str) else None


class HelpCommand(TyperCommand):
    """A command whose help renders literally and, when its command line names a mechanism, lists only that
    mechanism's parameters (parsing still takes every mechanism's flags)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGS] = tuple(args)
        return super().parse_args(ctx, args)

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        from auditkit.mechanism_options import params_for_help

        mechanism = _named_mechanism(self, ctx)
        params = self.params if mechanism is None else params_for_help(self.params, mechanism)
        shown = _literal_command(self)
        shown.params = [_literal_param(param) for param in params]
        TyperCommand.format_help(shown, ctx, formatter)


class UnknownCommand(click.UsageError):
    """A command name the app does not have, with the close ones."""

    def __init__(self, name: str, commands: list[str], ctx: click.Context | None = None) -> None:
        super().__init__(f"No such command {name!r}.", ctx)
        self.name, self.commands = name, commands
        self.possibilities = get_close_matches(name, commands)


class HelpGroup(TyperGroup):
    """The app's command group: its help renders literally; an unknown command is an ``UnknownCommand``."""

    def format_help(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        shown = _literal_command(self)
        shown.commands = {name: _literal_command(command) for name, command in self.commands.items()}
        shown.params = [_literal_param(param) for param in self.params]
        TyperGroup.format_help(shown, ctx, formatter)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None,
                                                                            list[str]]:
        name = args[0] if args else None
        if name and not name.startswith("-") and self.get_command(ctx, name) is None and not ctx.resilient_parsing:
            raise UnknownCommand(name, self.list_commands(ctx), ctx)
        return super().resolve_command(ctx, args)


def _sentence(message: str) -> str:
    """Click's message as a clause of one line: whitespace collapsed, lower-case start, no final full stop."""
    text = " ".join(message.split()).rstrip(".")
    return text[:1].lower() + text[1:]


def usage_error_line(err: click.ClickException) -> str:
    """Click's usage error as one line (without the ``error: `` prefix), naming the word at fault and, where there
    is one, the closest valid option or command."""
    ctx = getattr(err, "ctx", None)
    if isinstance(err, UnknownCommand):
        hint = (f"did you mean {err.possibilities[0]}?" if err.possibilities
                else f"commands: {', '.join(err.commands)}")
        return f"no such command {err.name!r} ({hint})"
    if isinstance(err, click.NoSuchOption):
        from auditkit.mechanism_options import renamed_flag

        renamed = renamed_flag(err.option_name)
        hint = (f"renamed: {renamed}" if renamed else f"did you mean {err.possibilities[0]}?" if err.possibilities
                else f"see `{ctx.command_path if ctx else 'auditkit'} --help`")
        return f"no such option: {err.option_name} ({hint})"
    if isinstance(err, click.MissingParameter) and ctx is not None:
        usage = ctx.get_usage().removeprefix("Usage:").strip()
        return f"{_sentence(err.format_message())} (usage: {' '.join(usage.split())})"
    return _sentence(err.format_message())


def build_app() -> typer.Typer:
    """The Typer app, its mechanism flags generated from every mechanism registered at this point."""
    from auditkit.mechanism_options import with_mechanism_options

    app = typer.Typer(
        name="auditkit",
        help="Attack and audit privacy + compression mechanisms in federated learning.",
        cls=HelpGroup,
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.command("mechanisms", cls=HelpCommand)(list_mechanisms)
    app.command(
        "train", cls=HelpCommand,
        help="Run FL training only (FedAvg with the mechanism in the loop): per-round table, results.json and reports.",
    )(with_mechanism_options(with_table_options(_config_command("train"))))
    app.command(
        "audit", cls=HelpCommand,
        help="Audit every mechanism setting of a config: FL training, accounting, gradient inversion of the server "
        "view, distinguishing tests; results.json, report.html and report.md in --out (default: the quickstart "
        "preset on the embedded MNIST digits, mnist-5k). Finished stages are kept; --resume skips them.",
    )(with_mechanism_options(with_table_options(_config_command("audit"))))
    app.command("report", cls=HelpCommand)(report_command)
    app.command("account", cls=HelpCommand)(
        with_mechanism_options(with_participation_options(with_claim_options(account_command))))
    app.command("attack", cls=HelpCommand)(with_mechanism_options(attack_command))
    app.command("distinguish", cls=HelpCommand)(
        with_mechanism_options(distinguish_command))
    app.command("canary", cls=HelpCommand)(with_mechanism_options(canary_command))
    app.command("reproduce", cls=HelpCommand)(reproduce_command)
    app.command("version", cls=HelpCommand)(show_version)
    return app


def preload_plugins(argv: list[str]) -> list[str]:
    """Load the plugins a command line names, before its flags are built: every ``--plugin MODULE`` (or
    ``--plugin=MODULE``) and the ``plugins`` of every TOML config file it names (an unreadable file is left for
    the command to report). ``PluginError`` names a plugin that fails."""
    from auditkit import mechanisms

    named = []
    for i, word in enumerate(argv):
        if word == "--plugin" and i + 1 < len(argv):
            named.append(argv[i + 1])
        elif word.startswith("--plugin="):
            named.append(word.split("=", 1)[1])
    from auditkit.config import ConfigError, read_config

    for word in argv:
        if word.endswith(".toml") and Path(word).is_file():
            try:
                listed = read_config(word).get("plugins", [])
            except ConfigError:
                continue  # the command reports it
            if isinstance(listed, list):
                named += [p for p in listed if isinstance(p, str)]
    mechanisms.load_plugins(named)
    mechanisms.names()  # installed plugins (entry points) too
    return named


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: load the plugins the command line names, build the app, run it; click's usage
    errors become one ``error:`` line (exit status 2), like the commands' own."""
    from click.exceptions import NoArgsIsHelpError

    from auditkit.mechanisms import PluginError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        preload_plugins(argv)
        app = build_app()
    except (PluginError, ValueError) as err:
        _print_error(str(err))
        raise SystemExit(2) from None
    try:
        # standalone_mode=False: click raises its errors instead of printing its box; typer.Exit(n) (including
        # the 130 of an interrupt) and --help (0) come back as the return value
        code = app(args=argv, prog_name="auditkit", standalone_mode=False)
    except NoArgsIsHelpError as err:  # bare `auditkit`: the help is already printed
        raise SystemExit(err.exit_code) from None
    except click.ClickException as err:
        _print_error(usage_error_line(err))
        raise SystemExit(err.exit_code) from None
    except click.Abort:
        _print_error("aborted")
        raise SystemExit(1) from None
    raise SystemExit(code if isinstance(code, int) else 0)


def _print_error(message: str) -> None:
    """``error: message`` on stderr, as one line."""
    error_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)


if __name__ == "__main__":
    main()
