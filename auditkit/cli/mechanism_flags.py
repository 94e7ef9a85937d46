"""The command line's mechanism parameters, generated from the registered mechanisms' ``Param`` specs.

Every command that takes a mechanism gets one flag per parameter name of any registered mechanism (built in or
plugin): ``--sigma``, ``--clip``, ``--range``, ... with the help of every mechanism that has the parameter and
its constraint. The values arrive as words and are parsed by the chosen mechanism's own spec (``Param.parse``), so
"--bits 4" is an int for one mechanism and an error naming what is allowed for another; a parameter the chosen
mechanism does not have is refused by name. Nothing here is typed twice: a new mechanism's parameters appear on
every command as soon as it is registered. The help of a command whose command line names a mechanism lists only
that mechanism's parameters (``MechanismOption.for_mechanism``); parsing always takes every flag.
"""
from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from auditkit import mechanisms
from auditkit.cli.options import GroupedOption, flag_of
from auditkit.mechanisms import Param

__all__ = ["GROUP", "PANEL", "MechanismFlag", "MechanismOption", "mechanism_flags", "mechanism_options",
           "panel_of", "parse_mechanism_params", "renamed_flag"]

GROUP = "mechanism_params"  # the keyword a command receives the given flags under (name -> word)
PANEL = "Mechanism parameters (see `auditkit mechanisms NAME`)"


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
        return flag_of(self.name)

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

    @property
    def source(self) -> str:
        owners = ", ".join(f"{m} ({mechanisms.origin(m)})" for m, _ in self.specs)
        return f"mechanism parameter {self.name!r} of {owners}"


class MechanismOption(GroupedOption):
    """The option of one ``MechanismFlag``."""

    def __init__(self, flag: MechanismFlag) -> None:
        super().__init__(flag.flag, group=GROUP, key=flag.name, panel=PANEL, source=flag.source, type=str,
                         metavar=flag.metavar, help=flag.help)
        self.flag = flag

    def for_mechanism(self, mechanism: str) -> MechanismOption | None:
        """This option as the help shows it once the command line names ``mechanism``: its own help, metavar and
        panel; None if ``mechanism`` lacks the parameter; every mechanism's, in a panel saying why, if ``mechanism``
        is unknown. A copy: parsing keeps the option as it is."""
        try:
            specs = {spec.name: spec for spec in mechanisms.mechanism_class(mechanism).params_spec}
        except ValueError:  # unknown: the command itself reports it when run; its help still lists every flag
            shown = copy.copy(self)
            shown.panel = f"{PANEL} -- unknown mechanism {mechanism!r}, so all are listed"
            return shown
        if self.key not in specs:
            return None
        spec = specs[self.key]
        shown = copy.copy(self)
        shown.panel, shown.help = panel_of(mechanism), _described(spec)
        shown.metavar = MechanismFlag(spec.name, ((mechanism, spec),)).metavar
        return shown


def mechanism_flags() -> list[MechanismFlag]:
    """One flag per parameter name of any registered mechanism, sorted by name."""
    by_name: dict[str, list[tuple[str, Param]]] = {}
    for name in mechanisms.names():
        for spec in mechanisms.mechanism_class(name).params_spec:
            by_name.setdefault(spec.name, []).append((name, spec))
    return [MechanismFlag(name, tuple(specs)) for name, specs in sorted(by_name.items())]


def mechanism_options() -> list[MechanismOption]:
    """The options of every registered mechanism's parameters (plugins loaded so far included)."""
    return [MechanismOption(flag) for flag in mechanism_flags()]


def renamed_flag(flag: str) -> str | None:
    """Where a renamed mechanism parameter's old flag went (``auditkit.mechanisms.registry.RENAMED_PARAMS``), e.g.
    ``--bound`` -> "--support for dpsq, laplace-sq"; None for any other flag."""
    old = flag.lstrip("-").replace("-", "_")
    by_new: dict[str, list[str]] = {}
    for name, renamed in mechanisms.registry.RENAMED_PARAMS.items():
        if old in renamed:
            by_new.setdefault(renamed[old], []).append(name)
    return "; ".join(f"{flag_of(new)} for {', '.join(sorted(names))}" for new, names in by_new.items()) or None


def parse_mechanism_params(mechanism: str, words: dict[str, str]) -> dict[str, Any]:
    """The typed parameters of ``mechanism`` from command-line words (parameter name -> word).

    ``ValueError`` (one line) for an unknown mechanism, a parameter the mechanism does not have (naming its
    parameters), or a word its spec refuses (naming the parameter and what is allowed).
    """
    specs = {spec.name: spec for spec in mechanisms.mechanism_class(mechanism).params_spec}
    typed = {}
    for name, word in words.items():
        if name not in specs:
            valid = ", ".join(flag_of(n) for n in specs) or "none"
            raise ValueError(f"{flag_of(name)} is not a parameter of mechanism {mechanism!r}; its parameters: {valid}")
        typed[name] = specs[name].parse(word)
    return typed
