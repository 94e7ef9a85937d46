"""``auditkit canary``: the idealized one-run canary audit (m canaries, each an independent call of the mechanism on
the claim's pair, one guess game, a certified bound judged against the claim)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from auditkit import mechanisms, results
from auditkit.attacks.one_run import BOUNDS, GUESS_RULES
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.configured import mechanism_params
from auditkit.cli.errors import UsageFailure, run_guarded, warn_unreproducible
from auditkit.cli.mechanism_flags import GROUP, mechanism_options
from auditkit.cli.options import Checked, choice, mechanism_argument, out_option, plugin_option, ranged
from auditkit.cli.outputs import check_output, overwrite_option, roc_line, write_document
from auditkit.cli.terminal import Reporter, console
from auditkit.stages.idealized_canary import (STATISTICS, canary_pairs, claim_at_delta, idealized_canary_audit,
                                             searched_dict)
from auditkit.validation import Integer

__all__ = ["CANARY_TABLE_MIN_WIDTH", "command"]


@click.command(
    "canary", cls=AuditkitCommand, groups=(GROUP,), generated=(mechanism_options,),
    help="One-run canary audit, idealized: m canaries, each an independent call of the mechanism on the claim's pair, "
         "one guess game, a certified bound judged against the claim.\n\n"
         "Canary i is included with probability 1/2 (its output a call on x1, else on x0) and scored by the "
         "log-likelihood ratio of the declared output density (else the projection on x1 - x0); the k/2 highest "
         "scores are guessed in, the k/2 lowest out. The one-run bound (--bound) turns the correct guesses into a "
         "certified lower bound and the verdict. Beside it, the independent-calls bound: the classical two-sample "
         "test, valid here because every canary is its own call (not in a training run), never the verdict.")
@mechanism_argument
@click.option("--canaries", type=Checked(Integer(low=2)), default=100_000, show_default=True,
              help="Canaries m: each one independent call of the mechanism, included (x1) or not (x0) with "
                   "probability 1/2.")
@click.option("--bound", type=choice(BOUNDS), default="fdp", show_default=True,
              help="fdp: Mahloujifar, Melis & Chaudhuri 2025, against the claim's trade-off curve; steinke: Steinke, "
                   "Nasr & Jagielski 2023, against its (eps, delta).")
@click.option("--guesses", default="claim", show_default=True,
              help="How many canaries k are guessed on, fixed before the bits are read: claim (the k the claim's own "
                   "curve makes best), grid (m, m/2, m/4, m/8, Bonferroni) or an integer.")
@click.option("--confidence", type=ranged("distinguish.confidence"), default=0.95,
              show_default=True, help="Confidence of the bounds.")
@click.option("--bound-delta", type=ranged("accounting.composition_delta"), default=None,
              help="delta of the bounds (default: the claim's delta).")
@click.option("--pair", default=None,
              help="The neighbouring pair of the claim's audit setting, by label (default: the first, axis).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seeds the inclusion bits and every mechanism call.")
@out_option(None, "Also write results.json and the reports into this folder.")
@overwrite_option
@plugin_option
def command(mechanism: str, bound_delta: float | None, plugin: tuple[str, ...], mechanism_params: dict[str, str],
            **options: Any) -> None:
    run_guarded(_canary, mechanism, mechanism_params, delta=bound_delta, **options)


def _parse_guesses(word: str, canaries: int) -> str | int:
    """``--guesses``: a rule of ``auditkit.attacks.one_run.GUESS_RULES`` or an integer k in 1..m."""
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


def _canary(mechanism: str, words: dict[str, str], *, canaries: int, bound: str, guesses: str, confidence: float,
            delta: float | None, pair: str | None, seed: int, out: Path | None, overwrite: bool) -> None:
    params = mechanism_params(mechanism, words)
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
            out = check_output(out, overwrite)
        reproducible = mechanisms.reproducible(configured)
        if not reproducible:
            warn_unreproducible([configured.name])
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
    say(f"statistic: {STATISTICS[audit.statistic]}; sampling: {audit.sampling}")
    refutes = ("refutes no curve of the claim's family" if independent.refuted_curve is None else
               f"refutes {independent.refuted_curve}, eps {independent.curve_epsilon:.3f} if the mechanism's curve is "
               "in that family")
    say(f"{independent.label}: FPR <= {independent.fpr_upper:.4g}, FNR <= {independent.fnr_upper:.4g} at score > "
        f"{independent.threshold:.4g}: {refutes}; for any mechanism eps >= {independent.epsilon_lower_bound:.3f}; "
        "valid only because every canary is its own call of the mechanism, so never the verdict")
    searched = audit.searched
    say(f"{independent.label}, threshold searched: in at score >= {searched.threshold:.4g}, chosen on half the "
        f"canaries and certified on the other half: {searched.false_positives:,} of {searched.non_members:,} excluded "
        f"and {searched.true_positives:,} of {searched.members:,} included are in; for any mechanism eps >= "
        f"{searched.epsilon_lower_bound:.3f} (cap {searched.max_certifiable:.2f}); never the verdict")
    say(f"ROC of the canary scores (included canaries the positives): {roc_line(audit.roc_summary)}")
    say(f"meaning: {_canary_meaning(audit)}")
    console.print(f"verdict: [bold]{result.verdict}[/bold]", highlight=False)
    if out is not None:
        view = results.canary_view("output", STATISTICS[audit.statistic], result, audit.scores, audit.inserted,
                                   audit.curve)
        claim = configured.guarantee()
        section = results.canary_entry(
            kind="idealized", canaries=canaries, bound=bound, confidence=confidence, seconds=audit.seconds,
            claim={"epsilon": claim.epsilon, "delta": claim.delta,
                   "curve": None if audit.curve is None else audit.curve.label, "rounds": 1,
                   "note": f"one round: every canary is one call of {configured.name} on the pair {audit.pair}"},
            views=[view],
            details={"pair": audit.pair, "statistic": STATISTICS[audit.statistic], "sampling": audit.sampling,
                     "seed": seed, "refuted_curve": audit.refuted_curve, "independent": independent.to_dict(),
                     "searched": searched_dict(audit.searched)})
        entry = results.setting("s00", configured.name, configured, reproducible=reproducible, canary=section)
        config = {"mechanism": {"name": mechanism, **params}, "canaries": canaries, "bound": bound,
                  "guesses": guesses, "confidence": confidence, "bound_delta": delta, "pair": pair, "seed": seed}
        provenance = results.provenance(seed=seed, device="cpu", settings=[entry])
        write_document(results.document("canary", f"canary {configured.name}", config, provenance, [entry]), out,
                       overwrite=overwrite, command="auditkit canary")


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
