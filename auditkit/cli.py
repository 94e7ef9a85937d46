"""The ``auditkit`` command line (Typer).

Every command validates all of its input before it starts work or writes a file; bad input prints one line
``error: ...`` on stderr and exits with status 2. Every command that takes a mechanism (``train``, ``audit``,
``account``, ``attack``, ``distinguish``) accepts every registered mechanism's parameters as flags generated from
their ``Param`` specs (``auditkit.mechanism_options``), built-in mechanisms and plugins alike: plugins named with
``--plugin MODULE`` (any command), in a config's ``plugins = [...]``, or installed under the entry-point group
``auditkit.mechanisms`` are loaded before the commands are built, so their parameters get flags too. Every
command that writes results writes ``results.json`` (schema ``auditkit/results`` v3), ``report.html`` and
``report.md``.
"""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

console = Console()
error_console = Console(stderr=True)


class UsageFailure(Exception):
    """Bad user input: printed as one line, exit status 2."""


def _fail(message: str) -> None:
    error_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


def _run_guarded(fn, *args, **kwargs):
    """Turn user-input errors into one line + exit 2; anything else is a bug and keeps its traceback."""
    from auditkit.config import ConfigError
    from auditkit.data import DataNotFoundError
    from auditkit.fl.simulation import TrainingDiverged
    from mechanisms import PluginError

    try:
        return fn(*args, **kwargs)
    except (UsageFailure, ConfigError, DataNotFoundError, PluginError, TrainingDiverged) as err:
        _fail(str(err))


# ------------------------------------------------------------------ shared options

ConfigArg = Annotated[Optional[Path], typer.Argument(help="TOML config file (default: the quickstart preset).", show_default=False)]
PresetOpt = Annotated[Optional[str], typer.Option(help="Bundled preset: quickstart (default), cepam, jopeq, dpsq or msp.")]
OutOpt = Annotated[Path, typer.Option(help="Output folder (results.json, report.html, report.md).")]
MechOpt = Annotated[Optional[str], typer.Option("--mechanism", "-m", help="Registered mechanism (see `auditkit mechanisms`).")]
PluginOpt = Annotated[Optional[list[str]], typer.Option(
    "--plugin", metavar="MODULE",
    help="Module that registers mechanisms of one's own (repeatable); see README, 'Audit your own mechanism'.",
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
    from reports import render_report

    return render_report(document, out, results_dir=out)


def _print_written(paths) -> None:
    for path in paths:
        console.print(f"wrote {path}", markup=False, highlight=False)


# ------------------------------------------------------------------ train and audit (config-driven)


def _load(config_path: Optional[Path], preset: Optional[str], overrides: dict[str, Any], words: dict[str, str],
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


def _training_progress(total: int) -> tuple[Progress, Any]:
    progress = Progress(
        TextColumn("[bold]FL rounds"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console, transient=False,
    )
    task = progress.add_task("rounds", total=total, status="")
    return progress, task


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


def _snr(value: Optional[float]) -> str:
    """An SNR in dB as the tables show it: "-" when not measured, "inf" for a lossless uplink."""
    from reports.content import number

    return number(value, ".2f")


def _title(config, config_path: Optional[Path], preset: Optional[str]) -> str:
    return config.title or (config_path.stem if config_path is not None else (preset or "quickstart"))


def _train(config_path, preset, out, overrides, words, plugins) -> None:
    from auditkit.pipeline import Experiment, prepare_output, results_document

    config = _load(config_path, preset, overrides, words, plugins, settings=False)
    config.mechanism  # noqa: B018 -- one setting only; raises a ConfigError naming the fix otherwise
    out = prepare_output(out)
    experiment = Experiment(config)
    progress, task = _training_progress(config.training.rounds)

    def on_round(record) -> None:
        progress.update(task, advance=1, status=f"test acc {100 * record.test_accuracy:.2f}%")

    from auditkit import results

    with progress:
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
    _print_written(written)


def _audit_recorded(recorded: Path, config_path, preset, out, overrides, words, resume: bool) -> None:
    """``auditkit audit --recorded DIR``: the recording's app tables over the audit tables of CONFIG / --preset."""
    from auditkit.config import load_config, merge, preset_dict, read_config
    from auditkit.flower.recording import RecordingError, load_recording
    from auditkit.recorded_audit import recorded_config

    given = [f"--{k.replace('_', '-')}" for table in ("data", "training") for k, v in overrides[table].items()
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
           title: Optional[str] = None) -> None:
    from auditkit.audit import Audit

    if config is None:
        config = _load(config_path, preset, overrides, words, plugins)
    try:
        audit = Audit(config, out=out, resume=resume, title=title or _title(config, config_path, preset),
                      recorded=recording)
    except ValueError as err:  # a mechanism or attack setting refused while planning
        raise UsageFailure(str(err)) from None
    rounds = config.training.rounds
    progress = Progress(
        TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}", markup=False), TimeElapsedColumn(), console=console,
    )
    stages = progress.add_task("audit stages", total=audit.stage_count, status="")
    training = progress.add_task("FL rounds", total=rounds, status="", visible=False)

    def on_event(kind: str, **info) -> None:
        label = info["setting"].label
        if kind == "round":
            progress.update(training, completed=info["record"].round, visible=True,
                            status=f"{label}: test acc {100 * info['record'].test_accuracy:.2f}%")
            return
        stage, status = info["stage"], info["status"]
        if stage == "train" and status != "resumed":
            progress.update(training, completed=0, visible=status == "start")
        if status == "start":
            progress.update(stages, status=f"{info['setting'].id} {label}: {stage}")
        else:
            progress.update(stages, advance=1, status=f"{info['setting'].id} {label}: {stage} {status}")

    try:
        with progress:
            document = audit.run(on_event)
            progress.update(stages, completed=audit.stage_count, status="done")
    except KeyboardInterrupt:
        error_console.print(f"interrupted: the finished stages are kept in {audit.out / 'stages'}; "
                            "run the same command with --resume to finish", markup=False, highlight=False)
        raise typer.Exit(130) from None
    console.print(_audit_table(document))
    _print_written(audit.out / name for name in ("results.json", "report.html", "report.md"))


def _audit_table(document: dict[str, Any]) -> Table:
    table = Table(title=f"audit: {escape(document['title'])}")
    for column in ("setting", "test acc", "SNR (dB)", "claimed eps (1 round)", "verdict (all tests)", "certified eps >=",
                   "identified (M): rate <= bound", "probe SSIM clean -> defended"):
        table.add_column(column)
    for s in document["settings"]:
        claim, dist, probe, ident = s["mechanism"]["guarantee"], s["distinguish"], s["probe"], s["identification"]
        flags = f" [{', '.join(claim['flags'])}]" if claim["flags"] else ""
        headline = s["verdict"]
        identified = "-" if ident is None else "; ".join(
            f"M={t['candidates']}: {t['rate']:.2f} {'>' if t['verdict'] == 'violated' else '<='} {t['bound']:.2f}"
            for t in ident["tests"])
        table.add_row(
            escape(s["label"]), f"{100 * s['training']['final']['test_accuracy']:.2f}%",
            _snr(s["training"]["final"].get("snr_db")),
            escape(("none" if claim["epsilon"] is None else f"{claim['epsilon']:.4g}") + flags),
            "-" if headline is None else headline["verdict"] + (
                f" ({headline['evidence']})" if headline.get("evidence") else ""),
            "-" if dist is None else f"{dist['epsilon_lower_bound']:.3f} ({100 * dist['confidence']:g}%)",
            identified,
            "-" if probe is None else f"{probe['clean']['ssim_mean']:.3f} -> {probe['defended']['ssim_mean']:.3f}",
        )
    return table


def _config_command(command: str):
    """``train`` or ``audit``: a config (file or preset) with the command line's options on top."""

    def run(
        config: ConfigArg = None,
        preset: PresetOpt = None,
        out: OutOpt = Path("auditkit-out"),
        mechanism: MechOpt = None,
        plugin: PluginOpt = None,
        seed: Annotated[Optional[int], typer.Option(help="Seeds the data split, the training and the mechanisms.")] = None,
        device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda | cuda:N")] = None,
        dataset: Annotated[Optional[str], typer.Option(help="mnist-5k (embedded, 5,000 real MNIST digits) | digits (embedded) | mnist | cifar10")] = None,
        data_dir: Annotated[Optional[Path], typer.Option(help="Folder holding MNIST / CIFAR-10.")] = None,
        download: Annotated[bool, typer.Option("--download", help="Download MNIST / CIFAR-10 into --data-dir.")] = False,
        partition: Annotated[Optional[str], typer.Option(help="iid | dirichlet | shards")] = None,
        model: Annotated[Optional[str], typer.Option(help="linear | mlp | cnn | cifar_cnn | lenet | mlp200")] = None,
        clients: Annotated[Optional[int], typer.Option(help="Number of clients K.")] = None,
        rounds: Annotated[Optional[int], typer.Option(help="FL rounds T (checkpoints past T are dropped).")] = None,
        tau: Annotated[Optional[int], typer.Option(help="Local steps per round.")] = None,
        batch_size: Annotated[Optional[int], typer.Option(help="Samples per local step (1 = CEPAM).")] = None,
        lr: Annotated[Optional[float], typer.Option(help="Client learning rate.")] = None,
        backend: Annotated[Optional[str], typer.Option(
            help="Where FL training runs: builtin (the batched simulator in this process) | flower (Flower's "
                 "Simulation Engine on Ray; pip install 'auditkit[flower]'; resources in the config's [flower]).")] = None,
        recorded: Annotated[Optional[Path], typer.Option(
            help="audit: audit what a Flower app recorded (auditkit.flower.AuditStrategy's record_dir) instead of "
                 "training; the data, training and mechanism come from the recording.")] = None,
        resume: Annotated[bool, typer.Option("--resume", help="audit: keep the finished stages found in --out "
                                             "(same inputs and code) and run only the rest.")] = False,
        confidence: Annotated[Optional[float], typer.Option(
            help="audit: family-wise confidence of every verdict, Bonferroni over all the audit's tests (default: "
                 "the config's [distinguish] confidence, 0.95).")] = None,
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
        }
        words, plugins = mechanism_params or {}, list(plugin or [])
        if recorded is not None and command == "audit":
            _run_guarded(_audit_recorded, recorded, config, preset, out, overrides, words, resume)
        elif command == "audit":
            _run_guarded(_audit, config, preset, out, overrides, words, plugins, resume)
        elif resume or recorded is not None or confidence is not None:
            given = "--resume" if resume else "--recorded" if recorded is not None else "--confidence"
            _fail(f"{given} applies to `auditkit audit` only (train judges nothing)")
        else:
            _run_guarded(_train, config, preset, out, overrides, words, plugins)

    run.__name__ = command
    return run


# ------------------------------------------------------------------ mechanisms


def list_mechanisms(
    name: Annotated[Optional[str], typer.Argument(help="Show one mechanism's parameters and full claim.")] = None,
    plugin: PluginOpt = None,
) -> None:
    """List every registered mechanism with its claimed guarantee and rate (or one mechanism in detail)."""
    _run_guarded(_mechanisms_table if name is None else _mechanism_detail, *(() if name is None else (name,)))


def _mechanisms_table() -> None:
    import mechanisms

    table = Table(title="Registered mechanisms (default parameters)")
    table.add_column("name", style="bold", no_wrap=True)
    table.add_column("what it does")
    table.add_column("claimed eps", justify="right")
    table.add_column("delta", justify="right")
    table.add_column("eps as implemented", justify="right")
    table.add_column("unit of privacy")
    table.add_column("flags")
    table.add_column("bits/coord", justify="right")
    plugins = False
    for name in mechanisms.names():
        info = mechanisms.describe(name)
        mechanism = mechanisms.create(name)
        claim = mechanism.guarantee()
        eps = "no privacy" if claim.epsilon is None else f"{claim.epsilon:.4g}"
        delta = "-" if claim.epsilon is None else f"{claim.delta:.3g}"
        actual = mechanisms.capability(mechanism, "true_epsilon")
        shown = escape(info.name) + ("" if info.origin == "built-in" else f"\n[dim]plugin {escape(info.origin)}[/dim]")
        plugins = plugins or info.origin != "built-in"
        table.add_row(shown, escape(info.summary), eps, delta, "-" if actual is None else f"{actual:.4g}",
                      claim.unit if claim.epsilon is not None else "-", ", ".join(sorted(claim.flags)) or "-",
                      f"{info.bits_per_coordinate:.2f}")
    console.print(table)
    console.print(
        "claimed eps: the mechanism's own one-round claim (`auditkit account NAME` composes it over rounds "
        "and checks it); eps as implemented: the epsilon of the noise the code really adds, where it is "
        "computed (flag claim-exceeded when larger); bits/coord: measured message size for a 10,000-coordinate "
        "update of l2 norm 1 (float32 = 32). `auditkit mechanisms NAME` lists the parameters."
        + (" Mechanisms marked 'plugin' are registered by the module named." if plugins else "")
    )


def _mechanism_detail(name: str) -> None:
    import mechanisms

    try:
        info = mechanisms.describe(name)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    mechanism = mechanisms.create(name)
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


def report_command(
    results: Annotated[Path, typer.Argument(help="A results.json written by any auditkit command.")],
    format: Annotated[str, typer.Option("--format", help="html | md | both")] = "both",
    out: Annotated[Optional[Path], typer.Option(help="Output folder (default: the results file's folder).")] = None,
    plugin: PluginOpt = None,
) -> None:
    """Re-render report.html / report.md from a results.json, without recomputing anything."""
    _run_guarded(_report, results, format, out)


def _report(results: Path, fmt: str, out: Optional[Path]) -> None:
    from auditkit.pipeline import prepare_output
    from reports import load_results, render_report

    formats = {"html": ("html",), "md": ("md",), "both": ("html", "md")}
    if fmt not in formats:
        raise UsageFailure(f"--format must be one of html, md, both; got {fmt!r}")
    try:
        document = load_results(results)
        target = prepare_output(out if out is not None else results.parent)
        written = render_report(document, target, formats=formats[fmt], results_dir=results.parent)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    _print_written(written)


# ------------------------------------------------------------------ account

SOLVABLE = {"sigma": "cepam-gaussian", "eps-tilde": "cepam-gaussian | cepam-laplace", "t-noise": "any t mechanism"}


def account_command(
    mechanism: Annotated[str, typer.Argument(help="Registered mechanism (see `auditkit mechanisms`).")],
    rounds: Annotated[int, typer.Option(help="FL rounds T to compose over.")] = 1,
    composition_delta: Annotated[float, typer.Option(help="delta at which the composed epsilon is stated.")] = 1e-5,
    backend: Annotated[str, typer.Option(help="Composition backend: opacus-prv | opacus-rdp | dp_accounting-pld | "
                                         "dp_accounting-rdp (Opacus composes Gaussian rounds only).")] = "opacus-prv",
    tau: Annotated[Optional[int], typer.Option(help="Local steps (for the paper's record-level claim).")] = None,
    dataset_size: Annotated[Optional[int], typer.Option(help="Records per client n_k.")] = None,
    clients: Annotated[Optional[int], typer.Option(help="Clients K averaged per round.")] = None,
    eps_tilde: Annotated[Optional[float], typer.Option(help="CEPAM's base epsilon.")] = None,
    formula: Annotated[str, typer.Option(help="How the paper's claim is evaluated: exact | paper003 (the swapped "
                                         "arguments that reproduce 003's printed numbers).")] = "exact",
    solve: Annotated[Optional[str], typer.Option(help="Solve for a parameter instead: sigma (cepam-gaussian), "
                                                 "eps-tilde (cepam-*), t-noise (min-variance nu, s2).")] = None,
    target_eps: Annotated[Optional[float], typer.Option(help="Target epsilon for --solve.")] = None,
    target_delta: Annotated[Optional[float], typer.Option(help="Target delta for --solve.")] = None,
    out: Annotated[Optional[Path], typer.Option(help="Also write results.json and the reports into this folder.")] = None,
    plugin: PluginOpt = None,
    mechanism_params: dict[str, str] | None = None,
) -> None:
    """Print a mechanism's claimed guarantee: one round, the paper's FL claim, and T rounds composed."""
    options = dict(rounds=rounds, composition_delta=composition_delta, backend=backend, tau=tau,
                   dataset_size=dataset_size, clients=clients, eps_tilde=eps_tilde, formula=formula, solve=solve,
                   target_eps=target_eps, target_delta=target_delta, out=out)
    _run_guarded(_account, mechanism, mechanism_params or {}, **options)


def _account(mechanism: str, words: dict[str, str], **options) -> None:
    try:
        _account_unguarded(mechanism, _mechanism_params(mechanism, words), **options)
    except UsageFailure:
        raise
    except ValueError as err:  # the accountants validate their inputs with one-line ValueErrors
        raise UsageFailure(str(err)) from None


def _solve(solve: str, mechanism: str, params: dict[str, Any], *, target_eps, target_delta, tau, dataset_size,
           clients, formula) -> None:
    from auditkit import accounting

    if solve not in SOLVABLE:
        raise UsageFailure(f"--solve must be one of {', '.join(SOLVABLE)}, got {solve!r}")
    if target_eps is None or not target_eps > 0:
        raise UsageFailure(f"--solve {solve} needs --target-eps > 0, got {target_eps}")
    if target_delta is not None and not 0 < target_delta < 1:
        raise UsageFailure(f"--target-delta must be in (0, 1), got {target_delta}")
    if solve == "t-noise":
        nu, s2 = accounting.solve_t(eps=target_eps, sensitivity=params.get("sensitivity", 2.0),
                                    nu=params.get("nu") or None)
        console.print(f"nu = {nu:.6g}, s2 = {s2:.6g}  (eq. (11) = {target_eps:g}; "
                      f"per-coordinate variance nu s2/(nu - 2) = {nu * s2 / (nu - 2):.6g})")
        return
    if not mechanism.startswith("cepam-"):
        raise UsageFailure(f"--solve {solve} applies to {SOLVABLE[solve]}, not {mechanism}")
    if tau is None or dataset_size is None:
        raise UsageFailure(f"--solve {solve} needs --tau and --dataset-size")
    if solve == "eps-tilde":
        found = accounting.base_epsilon(target_eps, tau=tau, dataset_size=dataset_size)
        console.print(f"eps_tilde = {found:.6g}  (amplifies to eps = {target_eps:g}; 003 Lemma 9)")
        return
    if mechanism != "cepam-gaussian" or target_delta is None or clients is None:
        raise UsageFailure("--solve sigma is for cepam-gaussian and needs --target-delta and --clients too")
    found = accounting.solve_sigma(eps=target_eps, delta=target_delta, tau=tau, dataset_size=dataset_size,
                                   clients=clients, clip=params.get("clip", 1.0), formula=formula)
    console.print("sigma = 0 (vacuous: the target delta holds with no noise at all)" if found == 0
                  else f"sigma = {found:.6g}  (003 Theorem 12, formula {formula})")


def _account_unguarded(mechanism: str, params: dict[str, Any], *, rounds, composition_delta, backend, tau,
                       dataset_size, clients, eps_tilde, formula, solve, target_eps, target_delta, out) -> None:
    import mechanisms
    from auditkit import accounting, results
    from auditkit.accounting.cepam import FORMULAS
    from auditkit.accounting.composition import BACKENDS
    from auditkit.pipeline import prepare_output

    if formula not in FORMULAS:
        raise UsageFailure(f"--formula must be one of {', '.join(FORMULAS)}, got {formula!r}")
    if solve is not None:
        _solve(solve, mechanism, params, target_eps=target_eps, target_delta=target_delta, tau=tau,
               dataset_size=dataset_size, clients=clients, formula=formula)
        return
    if backend not in BACKENDS:
        raise UsageFailure(f"--backend must be one of {', '.join(BACKENDS)}, got {backend!r}")
    configured = mechanisms.create(mechanism, **params)
    out = None if out is None else prepare_output(out)
    fl = accounting.FLSetting(tau=tau, dataset_size=dataset_size, clients=clients, eps_tilde=eps_tilde,
                              formula=formula)
    entry = results.accounting_entry(configured, rounds, composition_delta=composition_delta, backend=backend, fl=fl)
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
    for label, composed in ((f"{rounds} rounds", entry["composed"]),
                            (f"{rounds} rounds, as implemented", entry["composed_actual"])):
        if composed is not None:
            console.print(f"[bold]{label}:[/bold] (eps={composed['epsilon']:.4g}, delta={composed['delta']:.3g}) "
                          f"via {composed['backend']} {escape('[' + composed['event'] + ']')}", highlight=False)
        elif label == f"{rounds} rounds":
            console.print(f"[bold]{label}:[/bold] no number: {escape(entry['refusal'])}", highlight=False)
    if out is not None:
        setting = results.setting("s00", configured.name, configured, accounting=entry)
        config = {"mechanism": {"name": mechanism, **params}, "rounds": rounds, "composition_delta": composition_delta,
                  "backend": backend, "fl": {"tau": tau, "dataset_size": dataset_size, "clients": clients,
                                             "eps_tilde": eps_tilde, "formula": formula}}
        provenance = results.provenance(seed=0, device="cpu", settings=[setting])
        document = results.document("account", f"account {configured.name}", config, provenance, [setting])
        _print_written([results.write_results(document, out), *_write_reports(document, out)])


# ------------------------------------------------------------------ attack


def attack_command(
    attack: Annotated[str, typer.Argument(help="dlg | idlg | inverting_gradients")],
    mechanism: Annotated[str, typer.Option("--mechanism", "-m", help="Mechanism the server view passes through.")] = "none",
    images: Annotated[int, typer.Option(help="Images attacked (one single-image client each).")] = 8,
    source: Annotated[str, typer.Option(help="patches (natural RGB 32x32) | digits (embedded, 1x28x28)")] = "patches",
    model: Annotated[str, typer.Option(help="Attacked model (lenet: DLG's sigmoid LeNet).")] = "lenet",
    label_given: Annotated[bool, typer.Option("--label-given", help="Hand the attacker the true labels (JoPEQ's evaluation).")] = False,
    iterations: Annotated[Optional[int], typer.Option(help="Optimiser steps (default: the attack's preset).")] = None,
    restarts: Annotated[Optional[int], typer.Option(help="Restarts (default: the preset's).")] = None,
    scoring: Annotated[str, typer.Option(help="standard | jopeq-code (score as JoPEQ's code: uint8 SSIM/MSE).")] = "standard",
    curve: Annotated[bool, typer.Option("--curve", help="Sweep the default defence curve instead "
                                        "(gaussian, laplace, sdq, jopeq-laplace, jopeq-exact).")] = False,
    device: Annotated[Optional[str], typer.Option(help="cpu | cuda | cuda:N (default: cpu).")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the model, the images, the dummies and the mechanism.")] = 0,
    out: OutOpt = Path("auditkit-attack"),
    plugin: PluginOpt = None,
    mechanism_params: dict[str, str] | None = None,
) -> None:
    """Invert single-image clients' gradients, clean and as the server sees them after the mechanism.

    Writes results.json, report.html, report.md and figures/inversion.png (ground truth / clean / defended) into
    --out; with --curve, one setting per point of the defence curve (SSIM against the error's std in the report).
    """
    settings = {k: v for k, v in dict(iterations=iterations, restarts=restarts, device=device).items() if v is not None}
    _run_guarded(_attack, attack, mechanism, mechanism_params or {}, settings=settings, images=images, source=source,
                 model=model, label_given=label_given, scoring=scoring, curve=curve, seed=seed, out=out)


def _attack(attack: str, mechanism: str, words: dict[str, str], *, settings, images, source, model, label_given,
            scoring, curve, seed, out) -> None:
    import attacks
    import mechanisms
    from attacks.metrics import SCORINGS
    from auditkit import inversion_audit
    from auditkit.pipeline import prepare_output

    params = _mechanism_params(mechanism, words)
    try:  # everything the run depends on is checked before the first (slow) attack
        attacks.preset_settings(attack)
        mechanisms.create(mechanism, **params)
        if scoring not in SCORINGS:
            raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
        inversion_audit.load_targets(source, images, seed=seed)
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
    with console.status(f"{attack}: attacking {images} images, clean and after {mechanism}"):
        try:
            run = inversion_audit.run_inversion(
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
    document, written = inversion_audit.write_inversion(run, out, config=config, title=f"{attack} against {mechanism}")
    _print_written([*written, *_write_reports(document, out)])


def _attack_curve(attack: str, *, settings, images, source, model, seed, out, config) -> None:
    from auditkit import inversion_audit

    total = sum(len(points) for points in inversion_audit.DEFAULT_CURVE.values())
    progress = Progress(TextColumn("[bold]defence curve"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console)
    task = progress.add_task("curve", total=total, status="clean attack")

    def on_point(name, params, run) -> None:
        progress.update(task, advance=1, status=f"{name} {params}: SSIM {run['defended']['scores']['ssim_mean']:.3f}")

    with progress:
        curve = inversion_audit.defence_curve(attack, model=model, images=images, source=source, seed=seed,
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
    document, written = inversion_audit.write_curve(curve, out, config=config, title=f"{attack} defence curve")
    _print_written([*written, *_write_reports(document, out)])


# ------------------------------------------------------------------ distinguish


def distinguish_command(
    mechanism: Annotated[str, typer.Argument(help="Registered mechanism (see `auditkit mechanisms`).")],
    trials: Annotated[int, typer.Option(help="Outputs per neighbouring pair, split evenly between its two inputs.")] = 200_000,
    confidence: Annotated[float, typer.Option(help="Family-wise confidence over every test run (Bonferroni).")] = 0.95,
    bound_delta: Annotated[Optional[float], typer.Option("--bound-delta", help="delta of the lower bounds "
                                                        "(default: the claim's delta).")] = None,
    adaptive: Annotated[bool, typer.Option(help="Also run the mechanism's adaptive tests (side channels).")] = True,
    search: Annotated[bool, typer.Option(help="Worst-pair search: the pairs share their budget and one held-out "
                                         "test on the most promising pair is judged (else every pair is).")] = True,
    seed: Annotated[int, typer.Option(help="Seeds the pairs and every mechanism sample.")] = 0,
    out: Annotated[Optional[Path], typer.Option(help="Also write results.json and the reports into this folder.")] = None,
    plugin: PluginOpt = None,
    mechanism_params: dict[str, str] | None = None,
) -> None:
    """Certify an epsilon lower bound by black-box distinguishing tests and judge the claim with it."""
    _run_guarded(_distinguish, mechanism, mechanism_params or {}, trials=trials, confidence=confidence,
                 delta=bound_delta, adaptive=adaptive, search=search, seed=seed, out=out)


def _distinguish(mechanism: str, words: dict[str, str], *, trials, confidence, delta, adaptive, search, seed,
                 out) -> None:
    import mechanisms
    from auditkit import results
    from auditkit.audit import distinguish_family, run_distinguish
    from auditkit.pipeline import prepare_output

    params = _mechanism_params(mechanism, words)
    try:
        configured = mechanisms.create(mechanism, private_seed=mechanisms.derive_seed("distinguish-private", seed),
                                       **params)
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        if out is not None:
            out = prepare_output(out)
        family = distinguish_family(configured, adaptive, search)
        with console.status(f"distinguishing {mechanism}: {family} tests, {trials:,} outputs per pair"):
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
            audit, adaptive_results, trials=trials, confidence=confidence, tests=family))
        config = {"mechanism": {"name": mechanism, **params}, "trials": trials, "confidence": confidence,
                  "bound_delta": delta, "adaptive": adaptive, "search": search, "seed": seed}
        provenance = results.provenance(seed=seed, device="cpu", settings=[entry])
        document = results.document("distinguish", f"distinguish {configured.name}", config, provenance, [entry])
        _print_written([results.write_results(document, out), *_write_reports(document, out)])


# ------------------------------------------------------------------ version and the app


# ------------------------------------------------------------------ reproduce

def reproduce_command(
    paper: Annotated[Optional[str], typer.Argument(help="cepam, jopeq, dpsq or msp (see --list).", show_default=False)] = None,
    list_: Annotated[bool, typer.Option("--list", help="Show each paper's tables and figures, then exit.")] = False,
    budget: Annotated[str, typer.Option(help="quick (fewer rounds and seeds, stated in the report) or paper.")] = "quick",
    seeds: Annotated[Optional[int], typer.Option(help="Seeds per setting (default: the budget's).", show_default=False)] = None,
    data_dir: Annotated[Optional[Path], typer.Option(
        "--data-dir", help="Folder holding the paper's data for torchvision (e.g. DIR/MNIST/raw/); default: the "
        "embedded mnist-5k.", show_default=False)] = None,
    confidence: Annotated[float, typer.Option(help="Confidence of the Student-t intervals over seeds that each "
                                              "row's verdict reads.")] = 0.95,
    out: OutOpt = Path("auditkit-reproduce"),
) -> None:
    """Run a paper's own settings over seeds; each reported number beside ours, with a verdict per row."""
    _run_guarded(_reproduce, paper, list_, budget, seeds, data_dir, out, confidence)


def _reproduce(paper: Optional[str], list_: bool, budget: str, seeds: Optional[int], data_dir: Optional[Path],
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
    from auditkit.pipeline import prepare_output

    prepare_output(out)
    total = len(plan.settings) * len(plan.seeds)
    progress = Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}", markup=False), TimeElapsedColumn(), console=console)
    task = progress.add_task(f"reproduce {paper} ({budget})", total=total, status="")

    def on_run(key: str, seed: int, entry: dict[str, Any]) -> None:
        if "test_accuracy" in entry:
            status = f"test acc {100 * entry['test_accuracy']:.2f}%"
        elif "ssim" in entry:
            status = f"SSIM {entry['ssim']:.3f}"
        else:
            status = f"log10 distortion {entry['distortion']:.2f}"
        progress.update(task, advance=1, status=f"seed {seed}: {status}")

    with progress:
        document = reproduction.reproduce(paper, budget=budget, seeds=seeds,
                                          data_dir=None if data_dir is None else str(data_dir), out=out,
                                          confidence=confidence, on_run=on_run)
    summary = Table(title=f"reproduction: {paper} ({budget})")
    for column in ("table", "method", "column", "paper", f"ours [{100 * confidence:g}%]", "verdict"):
        summary.add_column(column)
    from reports.reproduction_report import ours_text

    for t in document["tables"]:
        for row in t["rows"]:
            column = row["column"] if row["x"] is None else f"{row['column']} {t['x_label']} = {row['x']:g}".strip()
            summary.add_row(escape(t["id"]), escape(row["method"]), escape(column), escape(row["paper"] or "(plot)"),
                            ours_text(row), row["verdict"])
    console.print(summary)
    _print_written(out / name for name in ("reproduction.json", "report.html", "report.md"))


def show_version() -> None:
    """Print the auditkit version."""
    from auditkit import __version__

    console.print(__version__)


# each command's own option names: a mechanism parameter may not take one of them
_OWN_OPTIONS = {
    "train": ("config", "preset", "out", "mechanism", "plugin", "seed", "device", "dataset", "data_dir", "download",
              "partition", "model", "clients", "rounds", "tau", "batch_size", "lr", "resume", "confidence", "help"),
    "account": ("rounds", "composition_delta", "backend", "tau", "dataset_size", "clients", "eps_tilde", "formula",
                "solve", "target_eps", "target_delta", "out", "plugin", "help"),
    "attack": ("mechanism", "images", "source", "model", "label_given", "iterations", "restarts", "scoring", "curve",
               "device", "seed", "out", "plugin", "help"),
    "distinguish": ("trials", "confidence", "bound_delta", "adaptive", "no_adaptive", "search", "no_search", "seed", "out",
                    "plugin", "help"),
}


def build_app() -> typer.Typer:
    """The Typer app, its mechanism flags generated from every mechanism registered at this point."""
    from auditkit.mechanism_options import with_mechanism_options

    app = typer.Typer(
        name="auditkit",
        help="Attack and audit privacy + compression mechanisms in federated learning.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
    )
    app.command("mechanisms")(list_mechanisms)
    app.command(
        "train",
        help="Run FL training only (FedAvg with the mechanism in the loop): per-round table, results.json and reports.",
    )(with_mechanism_options(_config_command("train"), _OWN_OPTIONS["train"]))
    app.command(
        "audit",
        help="Audit every mechanism setting of a config: FL training, accounting, gradient inversion of the server "
        "view, distinguishing tests; results.json, report.html and report.md in --out (default: the quickstart "
        "preset on the embedded MNIST digits, mnist-5k). Finished stages are kept; --resume skips them.",
    )(with_mechanism_options(_config_command("audit"), _OWN_OPTIONS["train"]))
    app.command("report")(report_command)
    app.command("account")(with_mechanism_options(account_command, _OWN_OPTIONS["account"]))
    app.command("attack")(with_mechanism_options(attack_command, _OWN_OPTIONS["attack"]))
    app.command("distinguish")(with_mechanism_options(distinguish_command, _OWN_OPTIONS["distinguish"]))
    app.command("reproduce")(reproduce_command)
    app.command("version")(show_version)
    return app


def preload_plugins(argv: list[str]) -> list[str]:
    """Load the plugins a command line names, before its flags are built: every ``--plugin MODULE`` (or
    ``--plugin=MODULE``) and the ``plugins`` of every TOML config file it names (an unreadable file is left for
    the command to report). ``PluginError`` names a plugin that fails."""
    import mechanisms

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
    """Console-script entry point: load the plugins the command line names, build the app, run it."""
    from mechanisms import PluginError

    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        preload_plugins(argv)
        app = build_app()
    except (PluginError, ValueError) as err:
        error_console.print(f"error: {err}", markup=False, highlight=False, soft_wrap=True)
        raise SystemExit(2) from None
    app(args=argv, prog_name="auditkit")


if __name__ == "__main__":
    main()
