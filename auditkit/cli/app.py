"""The ``auditkit`` command line: the commands assembled into one click group, and the console script.

Every command validates all of its input before it starts work or writes a file; bad input prints one line
``error: ...`` on stderr and exits with status 2, click's own usage errors (an unknown option or command, a missing
argument, a value outside its type or choices) included. Plugins named with ``--plugin MODULE`` (any command), in a
config's ``plugins = [...]``, or installed under the entry-point group ``auditkit.mechanisms`` are loaded before the
commands are built, so their parameters get flags too (``auditkit.cli.mechanism_flags``). A plugin's code that
raises, or returns a value of the wrong type, is one ``error:`` line too: every command runs a plugin's mechanism
once through its claim, capabilities, encode and decode (``auditkit.mechanisms.preflight``) before it writes
anything, and every call into a plugin's mechanism code is bounded in time (``--plugin-timeout``, next to
``--plugin``: ``auditkit.cli.options.plugin_option``). Progress is rich's live display on a terminal and plain,
flushed lines elsewhere.
"""
from __future__ import annotations

import sys
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

__all__ = ["build_cli", "load_named_plugins", "main"]


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


def load_named_plugins(argv: list[str]) -> list[str]:
    """Load the plugins a command line names, before its flags are built (a plugin's parameters are flags, and click
    builds a command's parser before it parses): every ``--plugin MODULE`` (or ``--plugin=MODULE``) and the
    ``plugins`` of every TOML config file it names (an unreadable file is left for the command to report).
    ``PluginError`` names a plugin that fails."""
    named = [argv[i + 1] for i, word in enumerate(argv[:-1]) if word == "--plugin"]
    named += [word.split("=", 1)[1] for word in argv if word.startswith("--plugin=")]
    for word in argv:
        if word.endswith(".toml") and Path(word).is_file():
            try:
                listed = read_config(word).get("plugins", [])
            except ConfigError:
                continue  # the command reports it
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
