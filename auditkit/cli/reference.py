"""The ``auditkit`` command tree as the documentation shows it (``mkdocs-click`` reads ``command``).

``command`` is the click group ``auditkit`` runs (``auditkit.cli.app.build_cli()``), with what a Markdown table
needs: each command's arguments described in its text, ``|`` written as an HTML entity, and the generated mechanism
flags left out (every command that takes a mechanism has them all; the CLI reference lists them once, from
``auditkit.cli.mechanism_flags.mechanism_flags``). Importing this module builds the commands, so the command line
itself never imports it.
"""
from __future__ import annotations

import copy

import click

from auditkit.cli.app import build_cli
from auditkit.cli.click_classes import HelpArgument
from auditkit.cli.mechanism_flags import MechanismOption

__all__ = ["command", "documented"]

_PIPE = "&#x7C;"


def _cell(text: str | None) -> str | None:
    """``text`` as one Markdown table cell: one line, ``|`` as an entity."""
    return None if text is None else " ".join(text.split()).replace("|", _PIPE)


def _arguments(command: click.Command) -> str:
    """The command's positional arguments with their help, as Markdown lines (empty if it has none)."""
    lines = []
    for param in command.params:
        if isinstance(param, click.Argument):
            name = (param.metavar or param.name or "").strip("[]").upper()
            text = " ".join(((param.help or "") if isinstance(param, HelpArgument) else "").split())
            optional = "" if param.required else " (optional)"
            lines.append(f"- `{name}`{optional}: {text}" if text else f"- `{name}`{optional}")
    return "\n".join(["**Arguments:**", "", *lines]) if lines else ""


def documented(command: click.Command) -> click.Command:
    """A copy of ``command`` (and of its subcommands) as the reference shows it."""
    shown = copy.copy(command)
    shown.params = []
    for param in command.params:
        if isinstance(param, MechanismOption):
            continue  # listed once, on its own
        param = copy.copy(param)
        if isinstance(param, click.Option):
            param.help = _cell(param.help)
        shown.params.append(param)
    paragraphs = (command.help or "").split("\n\n")
    first = " ".join(paragraphs[0].split())
    shown.help = "\n\n".join(part for part in (first, *paragraphs[1:], _arguments(command)) if part) or None
    if isinstance(command, click.Group):
        shown.commands = {name: documented(sub) for name, sub in command.commands.items()}
    return shown


command = documented(build_cli())
"""The whole ``auditkit`` command tree, as documented."""
