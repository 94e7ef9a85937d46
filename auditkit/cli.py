"""The ``auditkit`` command line (Typer).

Every command validates all of its input before it starts work or writes a file; bad input
prints one line ``error: ...`` on stderr and exits with status 2.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated, Any, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

app = typer.Typer(
    name="auditkit",
    help="Attack and audit privacy + compression mechanisms in federated learning.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
console = Console()
error_console = Console(stderr=True)

# The mechanism-parameter vocabulary shared by the API, config keys and report columns.


class UsageFailure(Exception):
    """Bad user input: printed as one line, exit status 2."""


def _fail(message: str) -> None:
    error_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)
    raise typer.Exit(2)


# ------------------------------------------------------------------ shared options

ConfigArg = Annotated[Optional[Path], typer.Argument(help="TOML config file (default: the quickstart preset).", show_default=False)]
PresetOpt = Annotated[Optional[str], typer.Option(help="Bundled preset: quickstart (default), cepam, jopeq, dpsq or msp.")]
OutOpt = Annotated[Path, typer.Option(help="Output folder.")]
MechOpt = Annotated[Optional[str], typer.Option("--mechanism", "-m", help="Registered mechanism (see `auditkit mechanisms`).")]
IntOpt = Annotated[Optional[int], typer.Option()]
FloatOpt = Annotated[Optional[float], typer.Option()]
StrOpt = Annotated[Optional[str], typer.Option()]


def _load(config_path: Optional[Path], preset: Optional[str], overrides: dict[str, Any], *, settings: bool = True):
    """The validated config: a CONFIG file or a preset, with the command line's overrides on top.
    ``settings=False`` (``train``) takes a preset's data and training without its mechanism settings."""
    from auditkit.config import from_dict, load_config, merge, preset_dict
    import tomllib

    if config_path is not None and preset is not None:
        raise UsageFailure("give either a CONFIG file or --preset, not both")
    if config_path is not None:
        load_config(config_path)  # validates the file on its own first, for a precise message
        raw = tomllib.loads(config_path.read_text(encoding="utf-8"))
    else:
        raw = preset_dict(preset or "quickstart", mechanisms=settings)
    mechanism = {k: v for k, v in overrides.pop("mechanism", {}).items() if v is not None}
    if mechanism:
        overrides["mechanism"] = mechanism
    if mechanism.get("name") is not None:
        # a mechanism named on the command line replaces the config's settings; it inherits the config's
        # parameters only from a single [mechanism] table of the same name
        same = raw.get("mechanism", {}).get("name") == mechanism["name"]
        raw = {k: v for k, v in raw.items() if k != "mechanisms" and (k != "mechanism" or same)}
    elif "mechanisms" in raw and mechanism:
        raise UsageFailure("this config lists several [[mechanisms]]: give --mechanism with the parameters")
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


def _overrides(
    *, seed, device, dataset, data_dir, download, partition, model, clients, rounds, tau,
    batch_size, lr, mechanism, mech_params,
) -> dict[str, Any]:
    return {
        "seed": seed,
        "device": device,
        "data": {"dataset": dataset, "data_dir": None if data_dir is None else str(data_dir),
                 "download": download or None, "partition": partition},
        "training": {"model": model, "clients": clients, "rounds": rounds, "tau": tau,
                     "batch_size": batch_size, "lr": lr},
        "mechanism": {"name": mechanism, **{k: v for k, v in mech_params.items() if v is not None}},
    }


def _run_guarded(fn, *args, **kwargs):
    """Turn user-input errors into one line + exit 2; anything else is a bug and keeps its traceback."""
    from auditkit.config import ConfigError
    from auditkit.data import DataNotFoundError

    try:
        return fn(*args, **kwargs)
    except (UsageFailure, ConfigError, DataNotFoundError) as err:
        _fail(str(err))


def _training_progress(total: int) -> tuple[Progress, Any]:
    progress = Progress(
        TextColumn("[bold]FL rounds"), BarColumn(), MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console, transient=False,
    )
    task = progress.add_task("rounds", total=total, status="")
    return progress, task


def _round_table(document: dict[str, Any]) -> Table:
    table = Table(title="FedAvg rounds", show_lines=False)
    for column in ("round", "lr", "train loss", "test loss", "test acc", "bits/coord"):
        table.add_column(column, justify="right")
    for r in document["rounds"]:
        table.add_row(
            str(r["round"]), f"{r['lr']:.4g}", f"{r['train_loss']:.4f}", f"{r['test_loss']:.4f}",
            f"{100 * r['test_accuracy']:.2f}%", f"{r['bits_per_coordinate']:.3f}",
        )
    return table


# ------------------------------------------------------------------ commands


@app.command("mechanisms")
def list_mechanisms(
    name: Annotated[Optional[str], typer.Argument(help="Show one mechanism's parameters and full claim.")] = None,
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
    for name in mechanisms.names():
        info = mechanisms.describe(name)
        claim = mechanisms.create(name).guarantee()
        eps = "no privacy" if claim.epsilon is None else f"{claim.epsilon:.4g}"
        delta = "-" if claim.epsilon is None else f"{claim.delta:.3g}"
        mechanism = mechanisms.create(name)
        actual = f"{mechanism.true_epsilon():.4g}" if hasattr(mechanism, "true_epsilon") else "-"
        table.add_row(info.name, info.summary, eps, delta, actual, claim.unit if claim.epsilon is not None else "-",
                      ", ".join(sorted(claim.flags)) or "-", f"{info.bits_per_coordinate:.2f}")
    console.print(table)
    console.print(
        "claimed eps: the mechanism's own one-round claim (`auditkit account NAME` composes it over rounds "
        "and checks it); eps as implemented: the epsilon of the noise the code really adds, where it is "
        "computed (flag claim-exceeded when larger); bits/coord: measured message size for a 10,000-coordinate update of l2 norm 1 "
        "(float32 = 32). `auditkit mechanisms NAME` lists the parameters."
    )


def _mechanism_detail(name: str) -> None:
    import mechanisms

    try:
        info = mechanisms.describe(name)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    claim = mechanisms.create(name).guarantee()
    console.print(f"[bold]{info.name}[/bold]: {escape(info.summary)}")
    table = Table(title="parameters")
    for column in ("name", "default", "meaning"):
        table.add_column(column)
    for p in info.params:
        table.add_row(p.name, repr(p.default), p.help)
    console.print(table)
    console.print(f"claim (defaults): {escape(claim.summary())}", highlight=False)
    console.print(f"  unit: {claim.unit}; threat model: {claim.threat_model}", highlight=False)
    for line in claim.assumptions:
        console.print(f"  assumes: {line}", highlight=False, markup=False)
    for line in claim.caveats:
        console.print(f"  caveat: {line}", highlight=False, markup=False)
    console.print(f"bits/coord (reference update): {info.bits_per_coordinate:.3f}")


def _train(config_path, preset, out, overrides) -> None:
    from auditkit.pipeline import Experiment, prepare_output, results_document, write_results

    config = _load(config_path, preset, overrides, settings=False)
    config.mechanism  # noqa: B018 -- one setting only; raises a ConfigError naming the fix otherwise
    out = prepare_output(out)
    experiment = Experiment(config)
    progress, task = _training_progress(config.training.rounds)

    def on_round(record) -> None:
        progress.update(task, advance=1, status=f"test acc {100 * record.test_accuracy:.2f}%")

    with progress:
        document = results_document(experiment.train(on_round), "train")
        write_results(document, out)
    console.print(_round_table(document))
    final = document["final"]
    console.print(
        f"final test accuracy {100 * final['test_accuracy']:.2f}%  |  "
        f"{final['bits_per_coordinate']:.3f} bits/coordinate (float32 = 32)"
    )
    console.print(f"claimed guarantee: {escape(document['mechanism']['guarantee_summary'])}", highlight=False)
    console.print(f"wrote {out / 'results.json'}")


def _audit(config_path, preset, out, overrides, resume: bool) -> None:
    from auditkit.audit import Audit

    config = _load(config_path, preset, overrides)
    title = config.title or (config_path.stem if config_path is not None else (preset or "quickstart"))
    try:
        audit = Audit(config, out=out, resume=resume, title=title)
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
    for name in ("results.json", "report.html", "report.md"):
        console.print(f"wrote {audit.out / name}", markup=False, highlight=False)


def _audit_table(document: dict[str, Any]) -> Table:
    table = Table(title=f"audit: {escape(document['title'])}")
    for column in ("setting", "test acc", "bits/coord", "claimed eps (1 round)", "certified eps >=", "verdict",
                   "SSIM clean -> defended"):
        table.add_column(column)
    for s in document["settings"]:
        claim, dist, inv = s["mechanism"]["guarantee"], s["distinguish"], s["inversion"]
        flags = f" [{', '.join(claim['flags'])}]" if claim["flags"] else ""
        table.add_row(
            escape(s["label"]), f"{100 * s['training']['final']['test_accuracy']:.2f}%",
            f"{s['training']['final']['bits_per_coordinate']:.3f}",
            escape(("none" if claim["epsilon"] is None else f"{claim['epsilon']:.4g}") + flags),
            "-" if dist is None else f"{dist['epsilon_lower_bound']:.3f} ({100 * dist['confidence']:g}%)",
            "-" if dist is None else dist["verdict"],
            "-" if inv is None else f"{inv['clean']['ssim_mean']:.3f} -> {inv['defended']['ssim_mean']:.3f}",
        )
    return table


def _command(command: str):
    def run(
        config: ConfigArg = None,
        preset: PresetOpt = None,
        out: OutOpt = Path("auditkit-out"),
        mechanism: MechOpt = None,
        seed: IntOpt = None,
        device: Annotated[Optional[str], typer.Option(help="auto | cpu | cuda | cuda:N")] = None,
        dataset: Annotated[Optional[str], typer.Option(help="digits (embedded) | mnist | cifar10")] = None,
        data_dir: Annotated[Optional[Path], typer.Option(help="Folder holding MNIST / CIFAR-10.")] = None,
        download: Annotated[bool, typer.Option("--download", help="Download MNIST / CIFAR-10 into --data-dir.")] = False,
        partition: Annotated[Optional[str], typer.Option(help="iid | dirichlet | shards")] = None,
        model: Annotated[Optional[str], typer.Option(help="linear | mlp | cnn | cifar_cnn | lenet | mlp200")] = None,
        clients: Annotated[Optional[int], typer.Option(help="Number of clients K.")] = None,
        rounds: Annotated[Optional[int], typer.Option(help="FL rounds T (checkpoints past T are dropped).")] = None,
        tau: Annotated[Optional[int], typer.Option(help="Local steps per round.")] = None,
        batch_size: Annotated[Optional[int], typer.Option(help="Samples per local step (1 = CEPAM).")] = None,
        lr: Annotated[Optional[float], typer.Option(help="Client learning rate.")] = None,
        clip: FloatOpt = None, sigma: FloatOpt = None, scale: FloatOpt = None, eps: FloatOpt = None,
        delta: FloatOpt = None, bits: IntOpt = None, n: IntOpt = None, nu: FloatOpt = None,
        s2: FloatOpt = None, alpha: FloatOpt = None, support: FloatOpt = None, compat: StrOpt = None,
        sensitivity: FloatOpt = None, target: StrOpt = None,
        clip_norm: StrOpt = None, rho: FloatOpt = None, eps_c: FloatOpt = None, eps_s: FloatOpt = None,
        gamma: FloatOpt = None, consensus_rounds: IntOpt = None, m_max: IntOpt = None, split: StrOpt = None,
        pi: FloatOpt = None, w_max: FloatOpt = None, start: StrOpt = None,
        range_: Annotated[Optional[str], typer.Option("--range", help="dpsq: literal | adaptive quantizer range.")] = None,
        resume: Annotated[bool, typer.Option("--resume", help="audit: keep the finished stages found in --out "
                                             "(same inputs) and run only the rest.")] = False,
    ) -> None:
        mech_params = dict(clip=clip, sigma=sigma, scale=scale, eps=eps, delta=delta, bits=bits, n=n,
                           nu=nu, s2=s2, alpha=alpha, support=support, compat=compat,
                           sensitivity=sensitivity, target=target, **dict(  # DP-SQ, MSP-FL
                               clip_norm=clip_norm, range=range_, rho=rho, eps_c=eps_c, eps_s=eps_s, gamma=gamma,
                               consensus_rounds=consensus_rounds, m_max=m_max, split=split, pi=pi, w_max=w_max,
                               start=start))
        overrides = _overrides(
            seed=seed, device=device, dataset=dataset, data_dir=data_dir, download=download,
            partition=partition, model=model, clients=clients, rounds=rounds, tau=tau,
            batch_size=batch_size, lr=lr, mechanism=mechanism, mech_params=mech_params,
        )
        if command == "audit":
            _run_guarded(_audit, config, preset, out, overrides, resume)
        elif resume:
            _fail("--resume applies to `auditkit audit` only")
        else:
            _run_guarded(_train, config, preset, out, overrides)

    return run


app.command(
    "train",
    help="Run FL training only (FedAvg with the mechanism in the loop): per-round table and results.json.",
)(_command("train"))
app.command(
    "audit",
    help="Audit every mechanism setting of a config: FL training, accounting, gradient inversion of the server "
    "view, distinguishing tests; results.json, report.html and report.md in --out (default: the quickstart "
    "preset on the embedded digits). Finished stages are kept; --resume skips them.",
)(_command("audit"))


@app.command("report")
def report_command(
    results: Annotated[Path, typer.Argument(help="A results.json written by `auditkit audit`.")],
    format: Annotated[str, typer.Option("--format", help="html | md | both")] = "both",
    out: Annotated[Optional[Path], typer.Option(help="Output folder (default: the results file's folder).")] = None,
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
    for path in written:
        console.print(f"wrote {path}", markup=False, highlight=False)


@app.command("account")
def account_command(
    mechanism: Annotated[str, typer.Argument(help="Registered mechanism (see `auditkit mechanisms`).")],
    rounds: Annotated[int, typer.Option(help="FL rounds T to compose over.")] = 1,
    delta: Annotated[float, typer.Option(help="delta at which the composed epsilon is stated.")] = 1e-5,
    backend: Annotated[str, typer.Option(help="Gaussian composition backend: opacus-prv | opacus-rdp | "
                                         "dp_accounting-pld | dp_accounting-rdp")] = "opacus-prv",
    tau: Annotated[Optional[int], typer.Option(help="Local steps (for the paper's record-level claim).")] = None,
    dataset_size: Annotated[Optional[int], typer.Option(help="Records per client n_k.")] = None,
    clients: Annotated[Optional[int], typer.Option(help="Clients K averaged per round.")] = None,
    eps_tilde: Annotated[Optional[float], typer.Option(help="CEPAM's base epsilon.")] = None,
    paper_compat: Annotated[str, typer.Option(help="none | paper003 (reproduce 003's printed numbers).")] = "none",
    solve: Annotated[Optional[str], typer.Option(help="Solve for a parameter instead: sigma (cepam-gaussian), "
                                                 "eps-tilde (cepam-*), t-noise (min-variance nu, s2).")] = None,
    target_eps: Annotated[Optional[float], typer.Option(help="Target epsilon for --solve.")] = None,
    target_delta: Annotated[Optional[float], typer.Option(help="Target delta for --solve.")] = None,
    clip: FloatOpt = None, sigma: FloatOpt = None, scale: FloatOpt = None, eps: FloatOpt = None,
    bits: IntOpt = None, n: IntOpt = None, nu: FloatOpt = None, s2: FloatOpt = None, alpha: FloatOpt = None,
    support: FloatOpt = None, compat: StrOpt = None, sensitivity: FloatOpt = None, target: StrOpt = None,
    clip_norm: StrOpt = None, rho: FloatOpt = None, eps_c: FloatOpt = None, eps_s: FloatOpt = None,
    gamma: FloatOpt = None, consensus_rounds: IntOpt = None, m_max: IntOpt = None, split: StrOpt = None,
    pi: FloatOpt = None, w_max: FloatOpt = None, start: StrOpt = None,
    range_: Annotated[Optional[str], typer.Option("--range", help="dpsq: literal | adaptive quantizer range.")] = None,
) -> None:
    """Print a mechanism's claimed guarantee: one round, the paper's FL claim, and T rounds composed."""
    params = dict(clip=clip, sigma=sigma, scale=scale, eps=eps, bits=bits, n=n, nu=nu, s2=s2, alpha=alpha,
                  support=support, compat=compat, sensitivity=sensitivity, target=target, **dict(  # DP-SQ, MSP-FL
                      clip_norm=clip_norm, range=range_, rho=rho, eps_c=eps_c, eps_s=eps_s, gamma=gamma,
                      consensus_rounds=consensus_rounds, m_max=m_max, split=split, pi=pi, w_max=w_max, start=start))
    _run_guarded(_account, mechanism, {k: v for k, v in params.items() if v is not None}, rounds=rounds,
                 delta=delta, backend=backend, tau=tau, dataset_size=dataset_size, clients=clients,
                 eps_tilde=eps_tilde, paper_compat=paper_compat, solve=solve, target_eps=target_eps,
                 target_delta=target_delta)


def _account(mechanism: str, params: dict[str, Any], **options) -> None:
    try:
        _account_unguarded(mechanism, params, **options)
    except ValueError as err:  # the accountants validate their inputs with one-line ValueErrors
        raise UsageFailure(str(err)) from None


SOLVABLE = {"sigma": "cepam-gaussian", "eps-tilde": "cepam-gaussian | cepam-laplace", "t-noise": "any t mechanism"}


def _solve(solve: str, mechanism: str, params: dict[str, Any], *, target_eps, target_delta, tau, dataset_size,
           clients, paper_compat) -> None:
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
                                   clients=clients, clip=params.get("clip", 1.0), compat=paper_compat)
    console.print("sigma = 0 (vacuous: the target delta holds with no noise at all)" if found == 0
                  else f"sigma = {found:.6g}  (003 Theorem 12, compat={paper_compat})")


def _account_unguarded(mechanism: str, params: dict[str, Any], *, rounds, delta, backend, tau, dataset_size,
                       clients, eps_tilde, paper_compat, solve, target_eps, target_delta) -> None:
    import warnings

    import mechanisms
    from auditkit import accounting

    if solve is not None:
        _solve(solve, mechanism, params, target_eps=target_eps, target_delta=target_delta, tau=tau,
               dataset_size=dataset_size, clients=clients, paper_compat=paper_compat)
        return
    configured = mechanisms.create(mechanism, **params)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        report = accounting.account(configured, rounds=rounds, delta=delta, backend=backend, tau=tau,
                                    dataset_size=dataset_size, clients=clients, eps_tilde=eps_tilde,
                                    compat=paper_compat)
    for title, claim in (("one round (mechanism)", report.per_round), ("paper's FL claim", report.paper_claim)):
        if claim is None:
            continue
        console.print(f"[bold]{title}:[/bold] {escape(claim.summary())}", highlight=False)
        console.print(f"  unit: {claim.unit}; threat model: {claim.threat_model}", highlight=False)
        if claim.flags:
            console.print(f"  flags: {', '.join(sorted(claim.flags))}", highlight=False)
        for line in claim.assumptions:
            console.print(f"  assumes: {line}", highlight=False, markup=False)
        for line in claim.caveats:
            console.print(f"  caveat: {line}", highlight=False, markup=False)
    if report.composed is not None:
        c = report.composed
        console.print(f"[bold]{rounds} rounds:[/bold] (eps={c.epsilon:.4g}, delta={c.delta:.3g}) "
                      f"via {c.backend} {escape(f'[{c.event}]')}", highlight=False)
    else:
        console.print(f"[bold]{rounds} rounds:[/bold] no number: {escape(report.refusal)}", highlight=False)
    if report.composed_actual is not None:
        c = report.composed_actual
        console.print(f"[bold]{rounds} rounds, as implemented:[/bold] (eps={c.epsilon:.4g}, delta={c.delta:.3g}) "
                      f"via {c.backend} {escape(f'[{c.event}]')}", highlight=False)


@app.command("attack")
def attack_command(
    attack: Annotated[str, typer.Argument(help="dlg | idlg | inverting_gradients")],
    mechanism: Annotated[str, typer.Option("--mechanism", "-m", help="Mechanism the server view passes through.")] = "none",
    images: Annotated[int, typer.Option(help="Images attacked (one single-image client each).")] = 8,
    source: Annotated[str, typer.Option(help="patches (natural RGB 32x32) | digits (embedded, 1x28x28)")] = "patches",
    model: Annotated[str, typer.Option(help="Attacked model (lenet: DLG's sigmoid LeNet).")] = "lenet",
    label_given: Annotated[bool, typer.Option("--label-given", help="Hand the attacker the true labels (JoPEQ's evaluation).")] = False,
    iterations: Annotated[Optional[int], typer.Option(help="Optimiser steps (default: the attack's preset).")] = None,
    restarts: Annotated[Optional[int], typer.Option(help="Restarts (default: the preset's).")] = None,
    metric_compat: Annotated[Optional[str], typer.Option(help="jopeq: score as JoPEQ's code (uint8 SSIM/MSE).")] = None,
    curve: Annotated[bool, typer.Option("--curve", help="Sweep the default defence curve instead "
                                        "(gaussian, laplace, sdq, jopeq-laplace, jopeq-exact).")] = False,
    device: Annotated[Optional[str], typer.Option(help="cpu | cuda | cuda:N (default: cpu).")] = None,
    seed: Annotated[int, typer.Option(help="Seeds the model, the images, the dummies and the mechanism.")] = 0,
    out: OutOpt = Path("auditkit-attack"),
    clip: FloatOpt = None, sigma: FloatOpt = None, scale: FloatOpt = None, eps: FloatOpt = None,
    delta: FloatOpt = None, bits: IntOpt = None, n: IntOpt = None, nu: FloatOpt = None,
    s2: FloatOpt = None, alpha: FloatOpt = None, support: FloatOpt = None, compat: StrOpt = None,
    sensitivity: FloatOpt = None, target: StrOpt = None,
) -> None:
    """Invert single-image clients' gradients, clean and as the server sees them after the mechanism.

    Writes inversion.json and inversion.png (ground truth / clean / defended) into --out; with --curve,
    curve.json and curve_ssim.png / curve_mse.png.
    """
    params = dict(clip=clip, sigma=sigma, scale=scale, eps=eps, delta=delta, bits=bits, n=n, nu=nu, s2=s2,
                  alpha=alpha, support=support, compat=compat, sensitivity=sensitivity, target=target)
    settings = {k: v for k, v in dict(iterations=iterations, restarts=restarts, device=device).items() if v is not None}
    _run_guarded(_attack, attack, mechanism, {k: v for k, v in params.items() if v is not None}, settings=settings,
                 images=images, source=source, model=model, label_given=label_given, metric_compat=metric_compat,
                 curve=curve, seed=seed, out=out)


def _attack(attack: str, mechanism: str, params: dict[str, Any], *, settings, images, source, model, label_given,
            metric_compat, curve, seed, out) -> None:
    import attacks
    import mechanisms
    from auditkit import inversion_audit
    from auditkit.pipeline import prepare_output

    try:  # everything the run depends on is checked before the first (slow) attack
        attacks.preset_settings(attack)
        mechanisms.create(mechanism, **params)
        inversion_audit.load_targets(source, images, seed=seed)
        out = prepare_output(out)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    if curve:
        _attack_curve(attack, settings=settings, images=images, source=source, model=model, seed=seed, out=out)
        return
    with console.status(f"{attack}: attacking {images} images, clean and after {mechanism}"):
        try:
            document = inversion_audit.run_inversion(
                attack, mechanism=mechanism, params=params, model=model, images=images, source=source, seed=seed,
                label_given=label_given, compat=metric_compat, settings=settings)
        except ValueError as err:
            raise UsageFailure(str(err)) from None
    table = Table(title=f"{attack} on {model}: {images} {source} images, server view")
    for column in ("run", "mean SSIM", "mean MSE", "mean PSNR (dB)", "label acc", "s/image"):
        table.add_column(column, justify="right")
    for name, run in (("clean", document["clean"]), (mechanism, document["defended"])):
        scores = run["scores"]
        accuracy = "-" if scores["label_accuracy"] is None else f"{100 * scores['label_accuracy']:.0f}%"
        table.add_row(name, f"{scores['ssim_mean']:.3f}", f"{scores['mse_mean']:.4f}", f"{scores['psnr_mean']:.2f}",
                      accuracy, f"{1 / run['images_per_second']:.2f}")
    console.print(table)
    console.print(f"claim: {escape(document['mechanism']['guarantee_summary'])}; "
                  f"SSIM: {document['clean']['scores']['ssim_variant']}", highlight=False)
    written = inversion_audit.write_inversion(document, out)
    console.print(f"wrote {', '.join(str(p) for p in written)}")


def _attack_curve(attack: str, *, settings, images, source, model, seed, out) -> None:
    from auditkit import inversion_audit

    total = sum(len(points) for points in inversion_audit.DEFAULT_CURVE.values())
    progress = Progress(TextColumn("[bold]defence curve"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[status]}"), TimeElapsedColumn(), console=console)
    task = progress.add_task("curve", total=total, status="clean attack")

    def on_point(name, params, point) -> None:
        progress.update(task, advance=1, status=f"{name} {params}: SSIM {point['ssim_mean']:.3f}")

    with progress:
        document = inversion_audit.defence_curve(attack, model=model, images=images, source=source, seed=seed,
                                                 settings=settings, on_point=on_point)
    table = Table(title=f"{attack} vs the server's view: mean over {images} images (clean SSIM "
                        f"{document['clean']['ssim_mean']:.3f})")
    for column in ("mechanism", "params", "error std", "bits/coord", "mean SSIM", "mean MSE"):
        table.add_column(column)
    for name, points in document["series"].items():
        for p in points:
            shown = ", ".join(f"{k}={v:g}" if isinstance(v, float) else f"{k}={v}" for k, v in p["params"].items())
            table.add_row(name, shown, f"{p['error_std']:.3g}", f"{p['bits_per_coordinate']:.2f}",
                          f"{p['ssim_mean']:.3f}", f"{p['mse_mean']:.4f}")
    console.print(table)
    written = inversion_audit.write_curve(document, out)
    console.print(f"wrote {', '.join(str(p) for p in written)}")


@app.command("distinguish")
def distinguish_command(
    mechanism: Annotated[str, typer.Argument(help="Registered mechanism (see `auditkit mechanisms`).")],
    trials: Annotated[int, typer.Option(help="Outputs per neighbouring pair, split evenly between its two inputs.")] = 200_000,
    confidence: Annotated[float, typer.Option(help="Family-wise confidence over every test run (Bonferroni).")] = 0.95,
    delta: Annotated[Optional[float], typer.Option("--bound-delta", help="delta of the lower bounds "
                                                  "(default: the claim's delta).")] = None,
    adaptive: Annotated[bool, typer.Option(help="Also run the mechanism's adaptive tests (side channels).")] = True,
    seed: Annotated[int, typer.Option(help="Seeds the pairs and every mechanism sample.")] = 0,
    out: Annotated[Optional[Path], typer.Option(help="Also write distinguish.json into this folder.")] = None,
    clip: FloatOpt = None, sigma: FloatOpt = None, scale: FloatOpt = None, eps: FloatOpt = None,
    bits: IntOpt = None, n: IntOpt = None, nu: FloatOpt = None, s2: FloatOpt = None, alpha: FloatOpt = None,
    support: FloatOpt = None, compat: StrOpt = None, sensitivity: FloatOpt = None, target: StrOpt = None,
) -> None:
    """Certify an epsilon lower bound by black-box distinguishing tests and judge the claim with it."""
    params = dict(clip=clip, sigma=sigma, scale=scale, eps=eps, bits=bits, n=n, nu=nu, s2=s2, alpha=alpha,
                  support=support, compat=compat, sensitivity=sensitivity, target=target)
    _run_guarded(_distinguish, mechanism, {k: v for k, v in params.items() if v is not None}, trials=trials,
                 confidence=confidence, delta=delta, adaptive=adaptive, seed=seed, out=out)


def _distinguish(mechanism: str, params: dict[str, Any], *, trials, confidence, delta, adaptive, seed, out) -> None:
    import mechanisms
    from auditkit.audit import distinguish_family, run_distinguish
    from auditkit.pipeline import prepare_output, write_atomic

    try:
        configured = mechanisms.create(mechanism, **params)
        if not 0 < confidence < 1:
            raise ValueError(f"confidence must be in (0, 1), got {confidence}")
        if out is not None:
            out = prepare_output(out)
        family = distinguish_family(configured, adaptive)
        with console.status(f"distinguishing {mechanism}: {family} tests x {trials:,} outputs"):
            audit, adaptive_results = run_distinguish(configured, trials=trials, confidence=confidence, delta=delta,
                                                      family=family, adaptive=adaptive, seed=seed)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    table = Table(title=f"{mechanism}: certified epsilon lower bounds ({100 * confidence:g}% family-wise over "
                        f"{family} tests, delta {audit.worst.delta:g})")
    for column in ("test", "pair / view", "statistic", "eps lower bound", "max certifiable"):
        table.add_column(column)
    for estimate in audit.estimates:
        table.add_row("black-box", estimate.pair.label, estimate.statistic, f"{estimate.epsilon_lower_bound:.3f}",
                      f"{estimate.max_certifiable:.2f}")
    for result in adaptive_results:
        for estimate, judged in zip(result.estimates, result.judged):
            table.add_row(result.test, estimate.pair.label + ("" if judged else " (reported only)"),
                          estimate.statistic, f"{estimate.epsilon_lower_bound:.3f}", f"{estimate.max_certifiable:.2f}")
    console.print(table)
    claim = configured.guarantee()
    console.print(f"claim: {escape(claim.summary())}", highlight=False)
    console.print(f"black-box verdict: [bold]{audit.verdict}[/bold] (worst pair {audit.worst.pair.label}, "
                  f"bound {audit.worst.epsilon_lower_bound:.3f})", highlight=False)
    for result in adaptive_results:
        console.print(f"{result.test}: [bold]{result.verdict}[/bold] (bound {result.epsilon_lower_bound:.3f})",
                      highlight=False)
    if out is not None:
        document = {"schema": "auditkit/distinguish", "schema_version": 1, "family_size": family,
                    "confidence": confidence, "audit": audit.to_dict(),
                    "adaptive": [r.to_dict() for r in adaptive_results]}
        path = out / "distinguish.json"
        write_atomic(path, json.dumps(document, indent=2, allow_nan=True) + "\n")
        console.print(f"wrote {path}")


@app.command("version")
def show_version() -> None:
    """Print the auditkit version."""
    from auditkit import __version__

    console.print(__version__)


def main() -> None:
    """Console-script entry point."""
    app()


if __name__ == "__main__":
    main()
