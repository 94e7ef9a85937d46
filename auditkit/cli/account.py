"""``auditkit account``: a mechanism's claimed guarantee for one round, as its paper states it for FL, and composed
over T rounds (amplified by client sampling where the claim covers it); or a parameter solved for a target."""
from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
from rich.markup import escape

from auditkit import accounting, mechanisms, results
from auditkit.accounting.composition import ACCOUNTANTS
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.configured import mechanism_params
from auditkit.cli.errors import UsageFailure, run_guarded
from auditkit.cli.mechanism_flags import GROUP, mechanism_options
from auditkit.cli.options import (Checked, choice, flag_of, mechanism_argument, out_option, plugin_option, ranged,
                                  spec_options)
from auditkit.cli.outputs import check_output, overwrite_option, write_document
from auditkit.cli.terminal import console
from auditkit.fl.sampling import ACCOUNTED_PARTICIPATION_OPTIONS
from auditkit.mechanisms import Param
from auditkit.validation import Integer

__all__ = ["CLAIM_PANEL", "PARTICIPATION_PANEL", "command"]

CLAIM_PANEL = "FL settings of a paper's record-level claim"
PARTICIPATION_PANEL = "Client sampling (amplifies a claim that covers it)"
CLAIM_GROUP, PARTICIPATION_GROUP = "claim_words", "participation_words"


def _claim_options() -> list[Any]:
    return spec_options(accounting.claim_options(), CLAIM_GROUP, CLAIM_PANEL)


def _participation_options() -> list[Any]:
    return spec_options(ACCOUNTED_PARTICIPATION_OPTIONS, PARTICIPATION_GROUP, PARTICIPATION_PANEL)


@click.command("account", cls=AuditkitCommand, groups=(GROUP, CLAIM_GROUP, PARTICIPATION_GROUP),
               generated=(_claim_options, _participation_options, mechanism_options),
               help="Print a mechanism's claimed guarantee: one round, the paper's FL claim, and T rounds composed "
                    "(amplified by client sampling where the claim covers it: --participation poisson --sample-rate "
                    "q).")
@mechanism_argument
@click.option("--rounds", type=Checked(Integer(low=1)), default=1, show_default=True, help="FL rounds T to compose over.")
@click.option("--composition-delta", type=ranged("accounting.composition_delta"), default=1e-5,
              show_default=True, help="delta at which the composed epsilon is stated.")
@click.option("--accountant", type=choice(ACCOUNTANTS), default="opacus-prv", show_default=True,
              help="Accountant that composes the rounds (Opacus composes Gaussian rounds only).")
@click.option("--solve", type=choice(accounting.solvers()), default=None,
              help="Solve for a parameter instead: " + "; ".join(
                  f"{name}: {solver.help}" for name, solver in accounting.solvers().items()) + ".")
@click.option("--target-eps", type=float, default=None, help="Target epsilon for --solve.")
@click.option("--target-delta", type=float, default=None, help="Target delta for --solve.")
@out_option(None, "Also write results.json and the reports into this folder.")
@overwrite_option
@plugin_option
def command(mechanism: str, plugin: tuple[str, ...], mechanism_params: dict[str, str], **options: Any) -> None:
    run_guarded(_account, mechanism, mechanism_params, **options)


def _account(mechanism: str, words: dict[str, str], **options: Any) -> None:
    try:
        _account_unguarded(mechanism, mechanism_params(mechanism, words), **options)
    except UsageFailure:
        raise
    except ValueError as err:  # the accountants validate their inputs with one-line ValueErrors
        raise UsageFailure(str(err)) from None


def _spec_values(specs: list[Param] | tuple[Param, ...], words: dict[str, str]) -> dict[str, Any]:
    """The options given on the command line (typed by their specs' constraints, ``options.Checked``); the others at
    their defaults (if any)."""
    return {spec.name: words.get(spec.name, spec.default) for spec in specs
            if spec.name in words or spec.default is not None}


def _as_flags(message: str, specs: tuple[Param, ...]) -> str:
    """``message`` with the specs' names written as the command-line flags that set them (sample_rate ->
    --sample-rate)."""
    for spec in specs:
        message = re.sub(rf"\b{spec.name}\b", flag_of(spec.name), message)
    return message


def _solve(solve: str, mechanism: str, params: dict[str, Any], *, target_eps: float | None,
           target_delta: float | None, fl: dict[str, Any]) -> None:
    if target_eps is None or not target_eps > 0:
        raise UsageFailure(f"--solve {solve} needs --target-eps > 0, got {target_eps}")
    if target_delta is not None and not 0 < target_delta < 1:
        raise UsageFailure(f"--target-delta must be in (0, 1), got {target_delta}")
    solver = accounting.solvers()[solve]
    if solver.mechanisms and mechanism not in solver.mechanisms:
        raise UsageFailure(f"--solve {solve} applies to {', '.join(solver.mechanisms)}, not {mechanism}")
    console.print(solver.solve(mechanism, params, target_eps, target_delta, fl), highlight=False)


def _account_unguarded(mechanism: str, params: dict[str, Any], *, rounds: int, composition_delta: float,
                       accountant: str, solve: str | None, target_eps: float | None, target_delta: float | None,
                       out: Path | None, overwrite: bool, claim_words: dict[str, str], participation_words: dict[str, str]) -> None:
    fl = _spec_values(accounting.claim_options(), claim_words)
    sampling = _spec_values(ACCOUNTED_PARTICIPATION_OPTIONS, participation_words)
    if solve is not None:
        _solve(solve, mechanism, params, target_eps=target_eps, target_delta=target_delta, fl=fl)
        return
    configured = mechanisms.create(mechanism, **params)
    mechanisms.preflight(configured)  # a plugin's bug: one line naming it (PluginCodeError), nothing written
    try:
        accounting.client_sampling(configured, sampling["participation"], sampling.get("sample_rate"))
    except ValueError as err:  # before anything is written
        raise UsageFailure(_as_flags(str(err), ACCOUNTED_PARTICIPATION_OPTIONS)) from None
    out = None if out is None else check_output(out, overwrite)
    entry = results.accounting_entry(configured, rounds, composition_delta=composition_delta, accountant=accountant,
                                     fl=fl, participation=sampling["participation"],
                                     sample_rate=sampling.get("sample_rate"))
    _print_claims(configured.guarantee().to_dict(), entry["paper_claim"])
    console.print(f"[bold]client sampling:[/bold] {escape(entry['sampling']['note'])}", highlight=False)
    for label, composed in ((f"{rounds} rounds", entry["composed"]),
                            (f"{rounds} rounds, as implemented", entry["composed_actual"])):
        if composed is not None:
            console.print(f"[bold]{label}:[/bold] (eps={composed['epsilon']:.4g}, delta={composed['delta']:.3g}) "
                          f"via {composed['accountant']} {escape('[' + composed['event'] + ']')}", highlight=False)
        elif label == f"{rounds} rounds":
            console.print(f"[bold]{label}:[/bold] no number: {escape(entry['refusal'])}", highlight=False)
    if entry["check"] is not None:
        console.print(f"[bold]check:[/bold] {entry['check']['verdict']}: {escape(entry['check']['reason'])}",
                      highlight=False)
    if out is not None:
        setting = results.setting("s00", configured.name, configured, accounting=entry)
        config = {"mechanism": {"name": mechanism, **params}, "rounds": rounds, "composition_delta": composition_delta,
                  "accountant": accountant, "fl": fl, **sampling}
        provenance = results.provenance(seed=0, device="cpu", settings=[setting])
        write_document(results.document("account", f"account {configured.name}", config, provenance, [setting]), out,
                       overwrite=overwrite, command="auditkit account")


def _print_claims(per_round: dict[str, Any], paper: dict[str, Any] | None) -> None:
    """The mechanism's one-round claim and the paper's FL claim, each with its unit, flags, assumptions, caveats."""
    for title, claim in (("one round (mechanism)", per_round), ("paper's FL claim", paper)):
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
