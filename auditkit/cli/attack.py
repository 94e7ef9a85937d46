"""``auditkit attack``: gradient inversion of single-image clients' updates, clean and as the server sees them after
the mechanism; or the default defence curve (``--curve``)."""
from __future__ import annotations

from pathlib import Path
from typing import Any

import click
from rich.markup import escape
from rich.table import Table

from auditkit import attacks, mechanisms
from auditkit.attacks.gradient_inversion import INVERSION_ATTACKS
from auditkit.attacks.metrics import SCORINGS
from auditkit.cli.click_classes import AuditkitCommand
from auditkit.cli.configured import mechanism_params
from auditkit.cli.errors import UsageFailure, run_guarded
from auditkit.cli.mechanism_flags import GROUP, mechanism_options
from auditkit.cli.options import Checked, HelpArgument, choice, out_option, plugin_option
from auditkit.cli.outputs import check_output, overwrite_option, write_document
from auditkit.cli.terminal import Reporter, console
from auditkit.figure_files import write_grid
from auditkit.models import ModelName
from auditkit.stages import inversion

__all__ = ["command"]


@click.command("attack", cls=AuditkitCommand, groups=(GROUP,), generated=(mechanism_options,),
               help="Invert single-image clients' gradients, clean and as the server sees them after the mechanism."
                    "\n\nWrites results.json, report.html, report.md and figures/inversion.png (ground truth / clean / "
                    "defended) into --out; with --curve, one setting per point of the defence curve (SSIM against the "
                    "error's std in the report).")
@click.argument("attack", cls=HelpArgument, type=choice(INVERSION_ATTACKS), metavar="ATTACK",
                help="The inversion attack: " + " | ".join(INVERSION_ATTACKS) + ".")
@click.option("--mechanism", "-m", default="none", show_default=True,
              help="Mechanism the server view passes through.")
@click.option("--images", type=int, default=8, show_default=True,
              help="Images attacked (one single-image client each).")
@click.option("--source", type=choice(inversion.SOURCES), default="patches", show_default=True,
              help="patches: natural RGB 32x32; digits: embedded 1x28x28.")
@click.option("--model", type=Checked(ModelName()), default="lenet", show_default=True, metavar="NAME",
              help="Attacked model (lenet: DLG's sigmoid LeNet; any seed model, torchvision:NAME or a factory "
                   "my_models.py:make_net).")
@click.option("--label-given", is_flag=True, default=False,
              help="Hand the attacker the true labels (JoPEQ's evaluation).")
@click.option("--iterations", type=int, default=None,
              help="Optimiser steps (default: the attack's preset).")
@click.option("--restarts", type=int, default=None, help="Restarts (default: the preset's).")
@click.option("--scoring", type=choice(SCORINGS), default="standard", show_default=True,
              help="jopeq-code: score as JoPEQ's code, uint8 SSIM/MSE.")
@click.option("--curve", is_flag=True, default=False,
              help="Sweep the default defence curve instead (gaussian, laplace, sdq, jopeq-laplace, jopeq-exact).")
@click.option("--device", default=None, help="cpu | cuda | cuda:N (default: cpu).")
@click.option("--seed", type=int, default=0, show_default=True,
              help="Seeds the model, the images, the dummies and the mechanism.")
@out_option("auditkit-attack")
@overwrite_option
@plugin_option
def command(attack: str, mechanism: str, iterations: int | None, restarts: int | None, device: str | None,
            plugin: tuple[str, ...], mechanism_params: dict[str, str], **options: Any) -> None:
    given = {"iterations": iterations, "restarts": restarts, "device": device}
    settings = {k: v for k, v in given.items() if v is not None}
    run_guarded(_attack, attack, mechanism, mechanism_params, settings=settings, **options)


def _attack(attack: str, mechanism: str, words: dict[str, str], *, settings: dict[str, Any], images: int,
            source: str, model: str, label_given: bool, scoring: str, curve: bool, seed: int, out: Path,
            overwrite: bool) -> None:
    params = mechanism_params(mechanism, words)
    try:  # everything the run depends on is checked before the first (slow) attack
        attacks.preset_settings(attack)
        mechanisms.preflight(mechanisms.create(mechanism, **params))  # a plugin's bug: PluginCodeError, one line
        targets = inversion.load_targets(source, images, seed=seed)
        net = inversion.attacked_model(model, targets.input_shape, seed=seed)  # it takes the images (one line if not)
        inversion.check_attack_layers(attack, net, 10, where="attack", model_name=model, labels_given=label_given)
        out = check_output(out, overwrite)
    except ValueError as err:
        raise UsageFailure(str(err)) from None
    config = {"attack": attack, "mechanism": {"name": mechanism, **params}, "images": images, "source": source,
              "model": model, "label_given": label_given, "scoring": scoring, "curve": curve, "seed": seed,
              "settings": settings}
    if curve:
        _attack_curve(attack, settings=settings, images=images, source=source, model=model, seed=seed, out=out,
                      overwrite=overwrite, config=config)
        return
    with Reporter(console).status(f"{attack}: attacking {images} images, clean and after {mechanism}"):
        try:
            run = inversion.run_inversion(
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
    write_document(inversion.attack_document(run, config=config, title=f"{attack} against {mechanism}"), out,
                   overwrite=overwrite, command="auditkit attack",
                   write_first=lambda folder: [write_grid(inversion.inversion_figure(run), folder)])


def _attack_curve(attack: str, *, settings: dict[str, Any], images: int, source: str, model: str, seed: int,
                  out: Path, overwrite: bool, config: dict[str, Any]) -> None:
    total = sum(len(points) for points in inversion.DEFAULT_CURVE.values())
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
        curve = inversion.defence_curve(attack, model=model, images=images, source=source, seed=seed,
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
    write_document(inversion.curve_document(curve, config=config, title=f"{attack} defence curve"), out,
                   overwrite=overwrite, command="auditkit attack")
