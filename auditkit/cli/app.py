"""The ``auditkit`` command line: the commands assembled into one click group, and the console script.

Every command validates all of its input before it starts work or writes a file; bad input prints one line
``error: ...`` on stderr and exits with status 2, click's own usage errors (an unknown option or command, a missing
argument, a value outside its type or choices) included. Plugins named with ``--plugin MODULE``, in the
``plugins = [...]`` of the CONFIG argument of ``train``, ``audit`` or ``membership``, or installed under the
entry-point group ``auditkit.mechanisms`` are loaded before the commands are built, so their parameters get flags too
(``auditkit.cli.mechanism_flags``); no other word of a command line is read as configuration or code
(:func:`load_named_plugins`). A plugin's code that
raises, or returns a value of the wrong type, is one ``error:`` line too: every command runs a plugin's mechanism
once through its claim, capabilities, encode and decode (``auditkit.mechanisms.preflight``) before it writes
anything, and every call into a plugin's mechanism code is bounded in time (``--plugin-timeout``, next to
``--plugin``: ``auditkit.cli.options.plugin_option``). Progress is rich's live display on a terminal and plain,
flushed lines elsewhere.
"""
from __future__ import annotations

import itertools
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NoReturn

import click

from auditkit import __version__, mechanisms
from auditkit.cli import account, attack, audit, canary, distinguish, membership, report, reproduce, train
from auditkit.cli import mechanisms as mechanisms_command
from auditkit.cli.click_classes import AuditkitCommand, AuditkitGroup
from auditkit.cli.errors import print_error, usage_error_line
from auditkit.cli.mechanism_flags import renamed_flag
from auditkit.cli.terminal import console
from auditkit.config import ConfigError, read_config
from auditkit.fl.threads import FairShare
from auditkit.mechanisms import PluginError

__all__ = ["NamedWords", "build_cli", "load_named_plugins", "main", "named_words"]


@click.command("version", cls=AuditkitCommand, help="Print the auditkit version.")
def version() -> None:
    console.print(__version__)


COMMANDS: tuple[AuditkitCommand, ...] = (mechanisms_command.command, train.command, audit.command, report.command,
                                         account.command, attack.command, distinguish.command, canary.command,
                                         membership.command, reproduce.command, version)
"""Every command, in the order the help lists them."""


def build_cli() -> AuditkitGroup:
    """The command group, each command's generated flags made from every mechanism registered at this point."""
    cli = AuditkitGroup("auditkit", help="Attack and audit privacy + compression mechanisms in federated learning.",
                        context_settings={"max_content_width": 120})
    for command in COMMANDS:
        cli.add_command(command.with_generated())
    return cli


@dataclass(frozen=True)
class NamedWords:
    """What a command line names for :func:`load_named_plugins`: the ``--plugin`` modules and the CONFIG argument."""

    plugins: tuple[str, ...] = ()
    config: str | None = None


def named_words(argv: list[str]) -> NamedWords:
    """The ``--plugin`` values and the CONFIG argument of command line ``argv`` (the words after ``auditkit``), read
    by the parameters the command declares (``click.Command.get_params``: each option's ``opts``, ``is_flag``,
    ``count`` and ``nargs``, the arguments in order), before its generated flags exist.

    The rule, click's: words are read left to right; ``--`` makes every later word positional; an option of the
    command takes its ``nargs`` words (``--opt=value`` and ``-mVALUE`` attach the first), a flag none; any other word
    starting with ``-`` is a generated flag (a mechanism's or a paper claim's parameter, known only once the plugins
    are loaded) and, like every generated flag, takes one value: the next word, unless written ``--flag=value``. The
    positional words fill the command's arguments in order, and the word in the CONFIG argument's place (``train``,
    ``audit``, ``membership``: ``auditkit.cli.options.config_options``) is the config. A word that is an option's
    value (``--out x.toml``, ``--recorded x.toml``, ``--sigma x.toml``) is never the config, and a command without a
    CONFIG argument (``report x.toml``, ``version x.toml``) names none; a command unknown or not given names
    nothing."""
    command = next((c for c in COMMANDS if argv and c.name == argv[0]), None)
    if command is None:
        return NamedWords()
    options = {flag: param for param in command.get_params(click.Context(command))  # --help included
               if isinstance(param, click.Option) for flag in (*param.opts, *param.secondary_opts)}
    values: dict[str, list[str]] = {}
    positional: list[str] = []
    words = iter(argv[1:])
    for word in words:
        if word == "--":
            positional += list(words)
            break
        if word == "-" or not word.startswith("-"):
            positional.append(word)
            continue
        if word.startswith("--"):
            flag, eq, attached = word.partition("=")
            inline = [attached] if eq else []
        else:
            flag, attached = word[:2], word[2:]
            inline = [attached] if attached else []
        param = options.get(flag)
        takes = 1 if param is None else 0 if param.is_flag or param.count else param.nargs
        given = inline[:takes] + list(itertools.islice(words, max(takes - len(inline), 0)))
        if param is not None and param.name is not None:
            values.setdefault(param.name, []).extend(given)
    return NamedWords(plugins=tuple(values.get("plugin", [])), config=_argument_word(command, positional, "config"))


def _argument_word(command: click.Command, positional: list[str], name: str) -> str | None:
    """The positional word in argument ``name``'s place (click fills the arguments in order, each its ``nargs``
    words, -1 the rest); None if the command has no such argument or it is not given."""
    at = 0
    for param in command.params:
        if not isinstance(param, click.Argument):
            continue
        take = len(positional) - at if param.nargs == -1 else param.nargs
        if param.name == name:
            return positional[at] if param.nargs == 1 and at < len(positional) else None
        at += take
    return None


def load_named_plugins(argv: list[str]) -> list[str]:
    """Load the plugins a command line names, before its flags are built (a plugin's parameters are flags, and click
    builds a command's parser before it parses): its ``--plugin MODULE`` values and the ``plugins`` of its CONFIG
    argument, found by :func:`named_words`; no other word is read (a CONFIG that is not a readable config is left
    for the command to report). ``PluginError`` names a plugin that fails."""
    words = named_words(argv)
    named = list(words.plugins)
    if words.config is not None and Path(words.config).is_file():
        try:
            listed = read_config(words.config).get("plugins", [])
        except ConfigError:
            listed = []  # the command reports it
        if isinstance(listed, list):
            named += [p for p in listed if isinstance(p, str)]
    mechanisms.load_plugins(named)
    mechanisms.names()  # installed plugins (entry points) too
    return named


def main(argv: list[str] | None = None) -> NoReturn:
    """Console-script entry point: load the plugins the command line names, build the commands, run one; every usage
    error is one ``error:`` line with exit status 2, an interrupt exits 130."""
    argv = list(sys.argv[1:] if argv is None else argv)
    try:
        load_named_plugins(argv)
        cli = build_cli()
    except (PluginError, ValueError) as err:
        print_error(str(err))
        raise SystemExit(2) from None
    FairShare().rebalance()  # every command's pools sized to the CPUs others leave free (an audit: per stage)
    try:
        # standalone_mode=False: click raises its errors instead of printing its own block; an exit code (--help's
        # 0, a command's 2 or 130) comes back as the return value
        code = cli.main(args=argv, prog_name="auditkit", standalone_mode=False)
    except click.ClickException as err:
        print_error(usage_error_line(err, renamed_flag))
        raise SystemExit(err.exit_code) from None
    except click.Abort as err:  # click's form of Ctrl-C (and of end of input at a prompt)
        interrupted = isinstance(err.__cause__, KeyboardInterrupt)
        print_error("interrupted" if interrupted else "aborted")
        raise SystemExit(130 if interrupted else 1) from None
    raise SystemExit(code if isinstance(code, int) else 0)
