"""The click classes of auditkit's commands, through click's public extension points (``parse_args``, ``invoke``,
``format_options``, ``resolve_command``, ``list_commands``): generated options handed on as dicts, help in panels
(the mechanism the command line names narrows its panel to that mechanism's parameters), arguments with help, an
unknown command with the close ones, and a bare ``auditkit`` that prints the help with exit status 2."""
from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from typing import Any

import click
from click.core import ParameterSource

from auditkit.cli.errors import UnknownCommand
from auditkit.cli.mechanism_flags import MechanismOption
from auditkit.cli.options import Checked, GroupedOption, HelpArgument
from auditkit.validation import Integer, Number

__all__ = ["AuditkitCommand", "AuditkitGroup"]

_ARGS = "auditkit.args"  # ctx.meta key: the words a command parsed, which its --help (handled mid-parse) reads


class AuditkitCommand(click.Command):
    """A command whose ``generated`` options (functions returning ``GroupedOption`` lists, called when the app is
    built, after the plugins are loaded) reach its callback as one dict per group (``groups``)."""

    def __init__(self, *args: Any, groups: Sequence[str] = (),
                 generated: Sequence[Callable[[], list[GroupedOption]]] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.groups, self.generated = tuple(groups), tuple(generated)

    def with_generated(self) -> AuditkitCommand:
        """A copy of this command with its generated options added. ``ValueError`` names a generated option whose
        flag is one of the command's own (a plugin's ``--rounds``, say), since one flag cannot mean two things."""
        own = {"--help"} | {flag for param in self.params for flag in (*param.opts, *param.secondary_opts)}
        extra = [option for make in self.generated for option in make()]
        for option in extra:
            clash = [flag for flag in option.opts if flag in own]
            if clash:
                raise ValueError(f"{option.source} is also an option of `auditkit {self.name}` ({clash[0]}); rename "
                                 "the parameter")
        built = copy.copy(self)
        built.params, built.generated = [*self.params, *extra], ()
        return built

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGS] = tuple(args)
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        for group in self.groups:
            ctx.params[group] = {}
        for param in self.params:
            if isinstance(param, GroupedOption):
                value = ctx.params.pop(param.name or "")
                if value is not None:
                    ctx.params[param.group][param.key] = value
        return super().invoke(ctx)

    def format_arguments(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """Nothing: click 8.5's own "Positional arguments" section would repeat the "Arguments" panel that
        :meth:`format_options` writes (on every click version)."""

    def format_options(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        mechanism = self._named_mechanism(ctx)
        sections: dict[str, list[tuple[str, str]]] = {"Arguments": [], "Options": []}
        for param in self.get_params(ctx):
            if isinstance(param, MechanismOption) and mechanism is not None:
                param = param.for_mechanism(mechanism)
                if param is None:
                    continue  # another mechanism's parameter
            if isinstance(param, HelpArgument):
                sections["Arguments"].append((param.human_readable_name, param.help or ""))
                continue
            record = param.get_help_record(ctx)
            if record is not None and isinstance(param.type, Checked) and isinstance(param.type.constraint,
                                                                                    Integer | Number):
                record = (record[0], f"{record[1]}  [{param.type.constraint.allowed}]".strip())
            if record is not None:
                sections.setdefault(param.panel if isinstance(param, GroupedOption) else "Options", []).append(record)
        for title, rows in sections.items():
            if rows:
                with formatter.section(title):
                    formatter.write_dl(rows)

    def _named_mechanism(self, ctx: click.Context) -> str | None:
        """The mechanism the command line names (``MECHANISM`` or ``--mechanism NAME``; None if none is given), from
        the words the command got, parsed again leniently (the help is handled before the other parameters)."""
        args = ctx.meta.get(_ARGS)
        if args is None or not any(param.name == "mechanism" for param in self.params):
            return None
        try:
            probe = self.make_context(ctx.info_name, list(args), parent=ctx.parent, resilient_parsing=True)
        except click.ClickException:
            return None
        if probe.get_parameter_source("mechanism") is not ParameterSource.COMMANDLINE:
            return None  # attack's default "none" is not a choice the user made
        named = probe.params.get("mechanism")
        return named if isinstance(named, str) else None


class AuditkitGroup(click.Group):
    """The app: commands listed in the order they were added, an unknown command named with the close ones, and a
    bare ``auditkit`` that prints the help with exit status 2 (as click 8.2 and later do; 8.1 exits 0)."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(self.commands)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args and not ctx.resilient_parsing:
            click.echo(ctx.get_help(), color=ctx.color)
            ctx.exit(2)
        return super().parse_args(ctx, args)

    def resolve_command(self, ctx: click.Context,
                        args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        name = args[0] if args else None
        if name and not name.startswith("-") and self.get_command(ctx, name) is None and not ctx.resilient_parsing:
            raise UnknownCommand(name, self.list_commands(ctx), ctx)
        return super().resolve_command(ctx, args)
