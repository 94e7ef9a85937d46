"""``auditkit distinguish``: black-box distinguishing tests that certify an epsilon lower bound, and the claim
judged with it."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from auditkit import mechanisms, results
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.configured import mechanism_params
from auditkit.cli.errors import UsageFailure, run_guarded, warn_unreproducible
from auditkit.cli.mechanism_flags import GROUP, mechanism_options
from auditkit.cli.options import mechanism_argument, out_option, plugin_option, ranged
from auditkit.cli.outputs import check_output, overwrite_option, roc_line, write_document
from auditkit.cli.terminal import Reporter, console
from auditkit.stages.distinguish import distinguish_family, run_distinguish

__all__ = ["command"]


@click.command("distinguish", cls=AuditkitCommand, groups=(GROUP,), generated=(mechanism_options,),
               help="Certify an epsilon lower bound by black-box distinguishing tests and judge the claim with it.")
@mechanism_argument
@click.option("--trials", type=int, default=200_000, show_default=True,
              help="Outputs per neighbouring pair, split evenly between its two inputs.")
@click.option("--confidence", type=ranged("distinguish.confidence"), default=0.95,
              show_default=True, help="Family-wise confidence over every test run (Bonferroni).")
@click.option("--bound-delta", type=float, default=None, help="delta of the lower bounds (default: the claim's delta).")
@click.option("--adaptive/--no-adaptive", default=True, show_default=True,
              help="Also run the mechanism's adaptive tests (side channels).")
@click.option("--search/--no-search", default=True, show_default=True,
              help="Worst-pair search: the pairs share their budget and one held-out test on the most promising pair "
                   "is judged (else every pair is).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the pairs and every mechanism sample.")
@out_option(None, "Also write results.json and the reports into this folder.")
@overwrite_option
@plugin_option
def command(mechanism: str, bound_delta: float | None, plugin: tuple[str, ...], mechanism_params: dict[str, str],
            **options: Any) -> None:
    run_guarded(_distinguish, mechanism, mechanism_params, delta=bound_delta, **options)


def _distinguish(mechanism: str, words: dict[str, str], *, trials: int, confidence: float, delta: float | None,
                 adaptive: bool, search: bool, seed: int, out: Path | None, overwrite: bool) -> None:
    params = mechanism_params(mechanism, words)
    try:
        configured = mechanisms.create(mechanism, private_seed=mechanisms.derive_seed("distinguish-private", seed),
                                       **params)
        mechanisms.preflight(configured)  # a plugin's bug: one line naming it (PluginCodeError), nothing written
        if out is not None:
            out = check_output(out, overwrite)
        family = distinguish_family(configured, adaptive, search)
        reproducible = mechanisms.reproducible(configured)
        if not reproducible:
            warn_unreproducible([configured.name])
        with Reporter(console).status(f"distinguishing {mechanism}: {family} tests, {trials:,} outputs per pair"):
            audit, adaptive_results = run_distinguish(configured, trials=trials, confidence=confidence, delta=delta,
                                                      family=family, adaptive=adaptive, search=search, seed=seed)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    table = Table(title=f"{escape(mechanism)}: certified epsilon lower bounds ({100 * confidence:g}% family-wise "
                        f"over {family} tests, delta {audit.worst.delta:g})")
    for column in ("test", "pair / view", "statistic", "eps lower bound", "max certifiable", "p-value"):
        table.add_column(column)

    def p(value: float | None) -> str:
        return "-" if value is None else f"{value:.3g}"

    if audit.search is not None:
        for i, candidate in enumerate(audit.search.candidates):
            if i != audit.search.chosen:
                near = "" if candidate.parent is None else f" (proposed near {candidate.parent})"
                table.add_row("pair search", escape(candidate.pair.label + near), candidate.statistic,
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
    console.print(f"where: {audit.audit_setting}; sampling: {audit.worst.sampling}", highlight=False, markup=False)
    console.print(f"black-box verdict: [bold]{audit.verdict}[/bold] (worst pair {escape(audit.worst.pair.label)}, "
                  f"bound {audit.worst.epsilon_lower_bound:.3f}, p-value {p(audit.worst.p_value)})", highlight=False)
    refinement = None if audit.search is None else audit.search.refinement
    if refinement is not None:
        kept = "its candidate's test re-thresholded on fresh outputs" if refinement.kept_candidate_test else \
            f"the {refinement.refit_statistic} refit on all its selection outputs"
        console.print(f"the chosen pair went on with {kept} (predicted: candidate's test {refinement.kept_bound:.3f}, "
                      f"refit {refinement.refit_bound:.3f})", highlight=False, markup=False)
    console.print(f"held-out ROC of the worst pair's test (M(x1)'s outputs the positives): "
                  f"{roc_line(audit.worst.roc_summary)}", highlight=False, markup=False)
    for result in adaptive_results:
        console.print(f"{result.test}: [bold]{result.verdict}[/bold] (bound {result.epsilon_lower_bound:.3f})",
                      highlight=False)
    if out is not None:
        entry = results.setting("s00", configured.name, configured, distinguish=results.distinguish_entry(
            audit, adaptive_results, trials=trials, confidence=confidence, tests=family), reproducible=reproducible)
        config = {"mechanism": {"name": mechanism, **params}, "trials": trials, "confidence": confidence,
                  "bound_delta": delta, "adaptive": adaptive, "search": search, "seed": seed}
        provenance = results.provenance(seed=seed, device="cpu", settings=[entry])
        write_document(results.document("distinguish", f"distinguish {configured.name}", config, provenance, [entry]), out,
                       overwrite=overwrite, command="auditkit distinguish")
