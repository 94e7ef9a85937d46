"""The command line's mechanism parameters, generated from the registered mechanisms' ``Param`` specs.

Every command that takes a mechanism gets one flag per parameter name of any registered mechanism (built in or
plugin): ``--sigma``, ``--clip``, ``--range``, ... with the help of every mechanism that has the parameter and
its constraint. The values arrive as words and are parsed by the chosen mechanism's own spec (``Param.parse``), so
"--bits 4" is an int for one mechanism and an error naming what is allowed for another; a parameter the chosen
mechanism does not have is refused by name. Nothing here is typed twice: a new mechanism's parameters appear on
every command as soon as it is registered. The help of a command whose command line names a mechanism lists only
that mechanism's parameters (``params_for_help``); parsing always takes every flag.
"""
from __future__ import annotations

import copy
import inspect
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Annotated, Any

import click
import typer

from auditkit import mechanisms
from auditkit.mechanisms import Param

__all__ = [
    "PANEL",
    "MechanismFlag",
    "mechanism_flags",
    "panel_of",
    "params_for_help",
    "parse_mechanism_params",
    "renamed_flag",
    "with_mechanism_options",
]

PANEL = "Mechanism parameters (see `auditkit mechanisms NAME`)"
_PREFIX = "mechanism_param__"  # the keyword each flag arrives under in the command's callback


def panel_of(mechanism: str) -> str:
    """The help panel title of one mechanism's parameters."""
    return f"Parameters of mechanism {mechanism} (see `auditkit mechanisms {mechanism}`)"


def _described(spec: Param) -> str:
    """One mechanism's help of a parameter, with its constraint and default."""
    return f"{spec.help} ({spec.allowed}; default {spec.default!r})"


@dataclass(frozen=True)
class MechanismFlag:
    """One parameter name across every registered mechanism that declares it."""

    name: str
    specs: tuple[tuple[str, Param], ...]  # (mechanism name, its spec), by mechanism name

    @property
    def flag(self) -> str:
        return "--" + self.name.replace("_", "-")

    @property
    def metavar(self) -> str:
        kinds = {spec.type for _, spec in self.specs}
        if len(kinds) > 1:
            return "VALUE"
        kind = kinds.pop()
        choices = sorted({c for _, spec in self.specs for c in (spec.choices or ())})
        if kind is str and choices:
            return "[" + "|".join(choices) + "]"
        return {float: "FLOAT", int: "INTEGER"}.get(kind, "TEXT")

    @property
    def help(self) -> str:
        """Each mechanism's help and constraint, mechanisms with the same text grouped."""
        texts: dict[str, list[str]] = {}
        for name, spec in self.specs:
            texts.setdefault(_described(spec), []).append(name)
        return "; ".join(f"{', '.join(names)}: {text}" for text, names in texts.items())


def mechanism_flags() -> list[MechanismFlag]:
    """One flag per parameter name of any registered mechanism, sorted by name."""
    by_name: dict[str, list[tuple[str, Param]]] = {}
    for name in mechanisms.names():
        for spec in mechanisms.mechanism_class(name).params_spec:
            by_name.setdefault(spec.name, []).append((name, spec))
    return [MechanismFlag(name, tuple(specs)) for name, specs in sorted(by_name.items())]


def renamed_flag(flag: str) -> str | None:
    """Where a renamed mechanism parameter's old flag went (``auditkit.mechanisms.registry.RENAMED_PARAMS``), e.g.
    ``--bound`` -> "--support for dpsq, laplace-sq"; None for any other flag."""
    old = flag.lstrip("-").replace("-", "_")
    by_new: dict[str, list[str]] = {}
    for name, renamed in mechanisms.registry.RENAMED_PARAMS.items():
        if old in renamed:
            by_new.setdefault(renamed[old], []).append(name)
    return "; ".join(f"--{new.replace('_', '-')} for {', '.join(sorted(names))}"
                     for new, names in by_new.items()) or None


def params_for_help(params: list[click.Parameter], mechanism: str) -> list[click.Parameter]:
    """``params`` (a command's click parameters) as its help shows them once the command line names ``mechanism``:
    the generated flags narrowed to that mechanism's parameters, each with its own help, metavar and default, in a
    panel titled with its name. An unknown mechanism keeps every flag, in a panel that says so. The parameters are
    copies; the command's own (which parsing uses) are left as they are.
    """
    try:
        specs = {spec.name: spec for spec in mechanisms.mechanism_class(mechanism).params_spec}
    except ValueError:  # unknown: the command itself reports it when run; its help still lists every flag
        specs, panel = None, f"{PANEL} -- unknown mechanism {mechanism!r}, so all are listed"
    else:
        panel = panel_of(mechanism)
    shown = []
    for param in params:
        name = param.name or ""
        if not name.startswith(_PREFIX):
            shown.append(param)
            continue
        spec = None if specs is None else specs.get(name[len(_PREFIX):])
        if specs is not None and spec is None:
            continue  # another mechanism's parameter
        narrowed = copy.copy(param)
        narrowed.rich_help_panel = panel  # type: ignore[attr-defined]
        if spec is not None:
            narrowed.help = _described(spec)  # type: ignore[attr-defined]
            narrowed.metavar = MechanismFlag(spec.name, ((mechanism, spec),)).metavar
        shown.append(narrowed)
    return shown


def parse_mechanism_params(mechanism: str, words: dict[str, str]) -> dict[str, Any]:
    """The typed parameters of ``mechanism`` from command-line words (parameter name -> word).

    ``ValueError`` (one line) for an unknown mechanism, a parameter the mechanism does not have (naming its
    parameters), or a word its spec refuses (naming the parameter and what is allowed).
    """
    specs = {spec.name: spec for spec in mechanisms.mechanism_class(mechanism).params_spec}
    typed = {}
    for name, word in words.items():
        if name not in specs:
            valid = ", ".join(f"--{n.replace('_', '-')}" for n in specs) or "none"
            raise ValueError(f"--{name.replace('_', '-')} is not a parameter of mechanism {mechanism!r}; "
                             f"its parameters: {valid}")
        typed[name] = specs[name].parse(word)
    return typed


def with_mechanism_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with one optional ``--NAME`` flag per mechanism parameter added to its signature (for Typer);
    the given flags reach ``command`` as ``mechanism_params`` (name -> word), the others are left out.

    A mechanism parameter named as one of the command's own options (a plugin's ``rounds``, say;
    ``own_option_names``) is a ``ValueError`` naming the mechanism and its origin, since one flag cannot mean two
    things.
    """
    flags = mechanism_flags()
    signature = inspect.signature(command, eval_str=True)
    own = [p for p in signature.parameters.values() if p.name != "mechanism_params"]
    reserved = own_option_names(own)
    for flag in flags:
        if flag.name in reserved:
            owners = ", ".join(f"{m} ({mechanisms.origin(m)})" for m, _ in flag.specs)
            raise ValueError(f"mechanism parameter {flag.name!r} of {owners} is also an option of this command "
                             f"({flag.flag}); rename the parameter")
    extra = [
        inspect.Parameter(
            _PREFIX + flag.name, inspect.Parameter.KEYWORD_ONLY, default=None,
            annotation=Annotated[str | None, typer.Option(flag.flag, help=flag.help, metavar=flag.metavar,
                                                             rich_help_panel=PANEL, show_default=False)],
        )
        for flag in flags
    ]

    def wrapper(**kwargs: Any) -> Any:
        words = {key[len(_PREFIX):]: kwargs.pop(key) for key in list(kwargs) if key.startswith(_PREFIX)}
        return command(**kwargs, mechanism_params={k: v for k, v in words.items() if v is not None})

    wrapper.__name__ = command.__name__
    wrapper.__doc__ = command.__doc__
    parameters = [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in own] + extra
    wrapper.__signature__ = inspect.Signature(parameters)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in parameters}
    return wrapper


def own_option_names(parameters: Iterable[inspect.Parameter]) -> set[str]:
    """Every name a command's own ``parameters`` take on the command line, as Typer builds them: each parameter's
    name and each of its long flags (``--no-search`` as ``no_search``; a short ``-m`` cannot clash with a
    mechanism's ``--m``), and ``help``."""
    def own(**kwargs: Any) -> None:
        """The command's own parameters alone."""

    own.__signature__ = inspect.Signature(  # type: ignore[attr-defined]
        [p.replace(kind=inspect.Parameter.KEYWORD_ONLY) for p in parameters])
    probe = typer.Typer(add_completion=False)
    probe.command()(own)
    command = typer.main.get_command(probe)
    names = {"help"}
    for param in command.params:
        names.add(param.name)
        names.update(o[2:].replace("-", "_") for o in (*param.opts, *param.secondary_opts) if o.startswith("--"))
    return names
