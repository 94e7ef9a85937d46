"""The options several commands share, in one place: click decorators for the common ones, and ``GroupedOption``,
an option generated from a spec whose value the command receives inside one dict (a mechanism's ``--sigma`` in
``mechanism_params``, a paper claim's ``--clients`` in ``claim_words``, ``--dp-sgd-noise-multiplier`` in ``dp_sgd``).
"""
from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import click

from auditkit.config import PRESETS, TRAINING_BACKENDS
from auditkit.fl.spec import BNStats, ClientMode, DPSGDSpec, Optimizer, OptimizerState, Precision
from auditkit.config_bounds import RANGES, SIZES
from auditkit.data.catalog import DATASETS
from auditkit.data.factory import DatasetName
from auditkit.data.partition import PARTITION_SCHEMES
from auditkit.mechanisms.registry import DEFAULT_PLUGIN_TIMEOUT, set_plugin_timeout
from auditkit.models import NORMS, ModelName
from auditkit.validation import Choice, Constraint, ValidationError

__all__ = [
    "GroupedOption",
    "HelpArgument",
    "Checked",
    "choice",
    "config_options",
    "CONFIG_KEYS",
    "config_overrides",
    "dp_sgd_options",
    "flag_of",
    "mechanism_argument",
    "mechanism_option",
    "out_option",
    "path",
    "plugin_option",
    "ranged",
    "sized",
    "spec_options",
]

Decorator = Callable[[Callable[..., Any]], Callable[..., Any]]


class Checked(click.ParamType):
    """A flag's type from an ``auditkit.validation`` constraint (the one definition of what a value may be): the
    word is parsed and checked by it, and a refused word is its one-line message, "--rounds must be an integer in
    1..100000, got 0" (exit 2). ``where``: the name in the message (default: the flag)."""

    def __init__(self, constraint: Constraint, where: str | None = None) -> None:
        self.constraint, self.where = constraint, where
        self.name = {float: "float", int: "integer", bool: "boolean"}.get(constraint.type, "text")

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        where = self.where or (param.opts[0] if param is not None and param.opts else "value")
        try:
            if isinstance(value, str):
                return self.constraint.parse(value, where)
            return self.constraint.check(value, where)
        except ValidationError as err:
            raise click.UsageError(str(err), ctx) from None

    @property
    def choices(self) -> tuple[str, ...]:
        """The words of a closed vocabulary, else none."""
        return self.constraint.words if isinstance(self.constraint, Choice) else ()

    def get_metavar(self, param: click.Parameter, ctx: click.Context | None = None) -> str | None:
        return "[" + "|".join(self.choices) + "]" if self.choices else self.name.upper()

    def shell_complete(self, ctx: click.Context, param: click.Parameter, incomplete: str) -> list[Any]:
        from click.shell_completion import CompletionItem

        return [CompletionItem(word) for word in self.choices if word.startswith(incomplete)]


def choice(values: Iterable[str]) -> Checked:
    """A closed vocabulary (``auditkit.validation.Choice``): the word is checked, the help and the error list the
    values."""
    return Checked(Choice(tuple(values)))


def sized(key: str) -> Checked:
    """The range of config key ``key``'s size (``auditkit.config_bounds.SIZES``, the one definition): the flag's value
    is checked by it, and the help and the error show the range."""
    return Checked(SIZES[key])


def ranged(key: str) -> Checked:
    """A flag for config key ``key``, checked by its constraint (``auditkit.config_bounds.RANGES``)."""
    return Checked(RANGES[key])


def path(**kwargs: Any) -> click.Path:
    """A path argument, handed on as a ``pathlib.Path``."""
    return click.Path(path_type=Path, **kwargs)


class GroupedOption(click.Option):
    """An option generated from a spec: its value reaches the command as ``group[key]`` (given ones only) and its
    help is listed under ``panel``; ``source`` names where it comes from, for a clash with another option."""

    def __init__(self, param_decls: str | Sequence[str], *, group: str, key: str, panel: str, source: str,
                 **kwargs: Any) -> None:
        flags = [param_decls] if isinstance(param_decls, str) else list(param_decls)
        super().__init__([*flags, f"{group}__{key}"], default=None, show_default=False, **kwargs)
        self.group, self.key, self.panel, self.source = group, key, panel, source


class HelpArgument(click.Argument):
    """A positional argument with a help text, listed under "Arguments" in its command's help."""

    def __init__(self, param_decls: Sequence[str], help: str | None = None, **kwargs: Any) -> None:  # noqa: A002
        super().__init__(param_decls, **kwargs)
        self.help = help


def flag_of(name: str) -> str:
    """A parameter's command-line flag: ``sample_rate`` -> ``--sample-rate``."""
    return "--" + name.replace("_", "-")


def spec_options(specs: Sequence[Any], group: str, panel: str) -> list[click.Option]:
    """One option per ``Param`` spec, its word parsed and checked by the spec's constraint (``Checked``)."""
    return [GroupedOption(flag_of(spec.name), group=group, key=spec.name, panel=panel, source=f"option {spec.name!r}",
                          type=Checked(spec.constraint, spec.name),
                          help=f"{spec.help} ({spec.allowed}"
                               + ("" if spec.default is None else f"; default {spec.default!r}") + ")")
            for spec in specs]


def dp_sgd_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """One ``--dp-sgd-KEY`` option per field of the config's ``[dp_sgd]`` table, typed by the field, explained by
    its ``metadata["help"]``; the given ones reach the command as ``dp_sgd`` (key -> value)."""
    hints = typing.get_type_hints(DPSGDSpec)
    for field in reversed(dataclasses.fields(DPSGDSpec)):
        kind = hints[field.name]
        if isinstance(kind, types.UnionType):  # X | None: the flag's type is X
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        command = click.option(flag_of(f"dp_sgd_{field.name}"), cls=GroupedOption, group="dp_sgd", key=field.name,
                               panel="Config table [dp_sgd]", source=f"config key dp_sgd.{field.name}", type=kind,
                               help=f"{field.metadata['help']} (config: [dp_sgd] {field.name})")(command)
    return command


def out_option(default: str | None, what: str = "Output folder (results.json, report.html, report.md).") -> Decorator:
    """``--out``: where the command writes (None: it writes nothing unless given)."""
    return click.option("--out", type=path(file_okay=False), default=default, show_default=default is not None,
                        help=what)


def _set_plugin_timeout(ctx: click.Context, param: click.Parameter, value: float) -> float:
    """--plugin-timeout: the registry's bound on a plugin's calls for this command, the one before restored after it
    (a command run in-process, by a test or a script, leaves no bound behind)."""
    try:
        previous = set_plugin_timeout(value)
    except ValueError:
        raise click.BadParameter(f"must be a finite number of seconds >= 0 (0: no bound), got {value:g}", ctx,
                                 param) from None
    ctx.call_on_close(lambda: set_plugin_timeout(previous))
    return value


def plugin_option(command: Callable[..., Any]) -> Callable[..., Any]:
    """``--plugin MODULE`` (repeatable; loaded by ``auditkit.cli.app.load_named_plugins`` before the command is built)
    and ``--plugin-timeout SECONDS``, the bound on each call into a plugin's mechanism code
    (``auditkit.mechanisms.registry.set_plugin_timeout``)."""
    command = click.option(
        "--plugin-timeout", type=float, default=DEFAULT_PLUGIN_TIMEOUT, show_default=True,
        metavar="SECONDS", expose_value=False, is_eager=True, callback=_set_plugin_timeout,
        help="Seconds one call into a plugin's mechanism code (its encode, decode, claim, ...) may run before the "
             "command stops with an error naming it; 0: no bound.")(command)
    return click.option(
        "--plugin", "plugin", metavar="MODULE", multiple=True,
        help="Module that registers mechanisms of one's own (repeatable); see the tutorial 'Audit your own mechanism' "
             "(docs/tutorials/own-mechanism.md).")(command)


mechanism_option = click.option("--mechanism", "-m", default=None,
                                 help="Registered mechanism (see `auditkit mechanisms`).")


def mechanism_argument(command: Callable[..., Any]) -> Callable[..., Any]:
    """``MECHANISM``: a registered mechanism (see ``auditkit mechanisms``)."""
    return click.argument("mechanism", cls=HelpArgument, metavar="MECHANISM",
                          help="Registered mechanism (see `auditkit mechanisms`).")(command)


def config_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``train``'s and ``audit``'s config (a file or a preset) and the keys the command line may set on top."""
    options = [
        click.argument("config", cls=HelpArgument, type=path(dir_okay=False), required=False, metavar="[CONFIG]",
                       help="TOML config file (default: the quickstart preset)."),
        click.option("--preset", type=choice(PRESETS), default=None,
                     help="Bundled preset (default: quickstart)."),
        out_option("auditkit-out"),
        mechanism_option,
        plugin_option,
        click.option("--seed", type=sized("seed"), default=None,
                     help="Seeds the data split, the training and the mechanisms."),
        click.option("--device", default=None, help="auto | cpu | cuda | cuda:N"),
        click.option("--dataset", type=Checked(DatasetName(DATASETS)), default=None, metavar="NAME|FILE.py:FN",
                     help="mnist-5k: 5,000 real MNIST digits, embedded like digits; mnist and cifar10 load from "
                          "--data-dir; or a factory of your own (my_data.py:make_data, package.module:fn, "
                          "entry:NAME)."),
        click.option("--data-dir", type=path(file_okay=False), default=None, help="Folder holding MNIST / CIFAR-10."),
        click.option("--download", is_flag=True, default=False, help="Download MNIST / CIFAR-10 into --data-dir."),
        click.option("--partition", type=choice(PARTITION_SCHEMES), default=None,
                     help="How the training data is split over the clients."),
        click.option("--model", type=Checked(ModelName()), default=None, metavar="NAME",
                     help="The model the clients train: a seed model (cnn, lenet, ...), torchvision:NAME or a factory "
                          "(my_models.py:make_net, package.module:fn, entry:NAME)."),
        click.option("--small-stem", is_flag=True, default=False,
                     help="The ResNet family's 3x3 stride-1 stem without max-pool, for 32x32 inputs."),
        click.option("--norm", type=choice(NORMS), default=None,
                     help="group: every BatchNorm replaced by GroupNorm (as DP-SGD needs)."),
        click.option("--clients", type=sized("training.clients"), default=None, help="Number of clients K."),
        click.option("--rounds", type=sized("training.rounds"), default=None,
                     help="FL rounds T (checkpoints past T are dropped)."),
        click.option("--tau", type=sized("training.tau"), default=None, help="Local steps per round."),
        click.option("--batch-size", type=sized("training.batch_size"), default=None,
                     help="Samples per local step (1 = CEPAM)."),
        click.option("--lr", type=float, default=None, help="Client learning rate."),
        click.option("--local-epochs", type=sized("training.local_epochs"), default=None,
                     help="Passes over each client's data per round, in shuffled batches (instead of --tau steps)."),
        click.option("--optimizer", type=choice(Optimizer), default=None,
                     help="The clients' optimiser (sgd: with --momentum from the config; adam: PyTorch's Adam)."),
        click.option("--weight-decay", type=ranged("training.weight_decay"), default=None,
                     help="L2 weight decay of the clients' optimiser."),
        click.option("--optimizer-state", type=choice(OptimizerState), default=None,
                     help="kept: a client's momentum / Adam moments carry over to its next round; reset: a fresh "
                          "optimiser every round."),
        click.option("--server-lr", type=ranged("training.server_lr"), default=None,
                     help="The server's step: w <- w + server_lr * aggregate."),
        click.option("--client-mode", type=choice(ClientMode), default=None,
                     help="train: BatchNorm on the batch's statistics, dropout on; eval: on the received statistics."),
        click.option("--bn-stats", type=choice(BNStats), default=None,
                     help="BatchNorm running statistics: averaged by the server (in the clear) or kept local (FedBN)."),
        click.option("--precision", type=choice(Precision), default=None,
                     help="The clients' arithmetic: fp32, or bf16 autocast (parameters stay fp32)."),
        click.option("--client-chunk", type=sized("training.client_chunk"), default=None,
                     help="Clients trained as one batched program (default: as many as fit in memory)."),
        click.option("--backend", type=choice(TRAINING_BACKENDS), default=None,
                     help="Where FL training runs (builtin: the batched simulator in this process; flower: Flower's "
                          "Simulation Engine on Ray, pip install 'auditkit[flower]', resources in the config's "
                          "[flower])."),
        click.option("--max-memory", type=ranged("limits.max_memory_gib"), default=None,
                     metavar="GIB", help="The memory (GiB) a training run's estimate may need before it is refused "
                                         "(default: this machine's memory; auditkit.fl.memory)."),
        click.option("--threads", type=ranged("limits.threads"), default=None,
                     help="Threads of numba's pool (default: the CPUs other processes leave free, measured before "
                          "each stage); torch and BLAS compute with one thread whatever N, so N never changes a "
                          "result (auditkit.fl.threads)."),
        dp_sgd_options,
    ]
    for option in reversed(options):
        command = option(command)
    return command


CONFIG_KEYS: dict[str, str] = {
    "seed": "seed", "device": "device", "dataset": "data.dataset", "data_dir": "data.data_dir",
    "download": "data.download", "partition": "data.partition", "model": "training.model",
    "small_stem": "training.small_stem", "norm": "training.norm",
    "clients": "training.clients", "rounds": "training.rounds", "tau": "training.tau",
    "batch_size": "training.batch_size", "lr": "training.lr", "backend": "training.backend",
    **{name: f"training.{name}" for name in ("local_epochs", "optimizer", "weight_decay", "optimizer_state",
                                             "server_lr", "client_mode", "bn_stats", "precision", "client_chunk")},
    "max_memory": "limits.max_memory_gib", "threads": "limits.threads",
}
"""The config key each option of ``config_options`` sets (parameter name -> dotted key); ``dp_sgd_options`` set
``dp_sgd.KEY``."""


def config_overrides(params: dict[str, object], keys: dict[str, str] = CONFIG_KEYS) -> dict[str, Any]:
    """The config fragment the options of ``keys`` set (unset ones None, so they leave the config's value), with
    ``dp_sgd`` and ``mechanism_name``; the parameters read are removed from ``params``."""
    overrides: dict[str, Any] = {"dp_sgd": params.pop("dp_sgd"), "mechanism_name": params.pop("mechanism")}
    for name, key in keys.items():
        value = params.pop(name)
        if isinstance(value, Path):
            value = str(value)
        section, _, leaf = key.rpartition(".")
        (overrides.setdefault(section, {}) if section else overrides)[leaf] = None if value is False else value
    return overrides
