"""The ``auditkit`` command line as a Click command tree for the documentation (``mkdocs-click``).

``command`` is the click command ``auditkit`` runs (``auditkit.cli.click_command()``: the Typer app, its help
texts' choice lists filled in), with what a Markdown table needs:
each command's arguments described in its text, ``|`` written as an HTML entity, and the generated mechanism
flags left out (every command that takes a mechanism has them all; the CLI reference lists them once, from
``auditkit.mechanism_options.mechanism_flags``). Importing this module builds the app, so the CLI itself never
imports it.
"""
from __future__ import annotations

import copy

import click

from auditkit.cli import click_command
from auditkit.mechanism_options import PANEL

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
            name = (param.metavar or param.name or "").upper()
            text = " ".join((getattr(param, "help", None) or "").split())
            optional = "" if param.required else " (optional)"
            lines.append(f"- `{name}`{optional}: {text}" if text else f"- `{name}`{optional}")
    return "\n".join(["**Arguments:**", "", *lines]) if lines else ""


def documented(command: click.Command) -> click.Command:
    """A copy of ``command`` (and of its subcommands) as the reference shows it."""
    shown = copy.copy(command)
    shown.params = []
    for param in command.params:
        if getattr(param, "rich_help_panel", None) == PANEL:
            continue  # a generated mechanism flag: listed once, on its own
        param = copy.copy(param)
        if isinstance(param, click.Option):
            param.help = _cell(param.help)
        shown.params.append(param)
    arguments = _arguments(command)
    help_text = " ".join((command.help or "").split("\n\n")[0].split()) if command.help else ""
    rest = "\n\n".join(command.help.split("\n\n")[1:]) if command.help else ""
    shown.help = "\n\n".join(part for part in (help_text, rest, arguments) if part) or None
    if isinstance(command, click.Group):
        shown.commands = {name: documented(sub) for name, sub in command.commands.items()}
    return shown


command = documented(click_command())
"""The whole ``auditkit`` command tree, as documented."""
