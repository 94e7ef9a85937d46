"""Bad input as one line: ``error: ...`` on stderr, exit status 2, for the commands' own checks and click's usage
errors alike (on every click version the project declares)."""
from __future__ import annotations

from collections.abc import Callable
from difflib import get_close_matches
from typing import Any, NoReturn, TypeVar

import click
import torch

from auditkit.cli.terminal import error_console
from auditkit.folder import FolderError, target_of
from auditkit.config import ConfigError
from auditkit.data import DataNotFoundError
from auditkit.fl.simulation import TrainingDiverged
from auditkit.mechanisms import PluginCodeError, PluginError

__all__ = ["RENAMED_FLAGS", "UnknownCommand", "UsageFailure", "fail", "print_error", "resource_line", "run_guarded",
           "usage_error_line", "warn_unreproducible"]

T = TypeVar("T")
# (command, old flag) -> new flag: a command's own flags that were renamed (issue 40, docs/names.md); a mechanism
# parameter's old flag is found from its registry instead (``auditkit.cli.mechanism_flags.renamed_flag``)
RENAMED_FLAGS = {("account", "--backend"): "--accountant"}


class UsageFailure(Exception):
    """Bad user input: printed as one line, exit status 2."""


class UnknownCommand(click.UsageError):
    """A command name the app does not have, with the close ones."""

    def __init__(self, name: str, commands: list[str], ctx: click.Context | None = None) -> None:
        super().__init__(f"No such command {name!r}.", ctx)
        self.name, self.commands = name, commands
        self.possibilities = get_close_matches(name, commands)


def print_error(message: str) -> None:
    """``error: message`` on stderr, as one line."""
    error_console.print(f"error: {message}", markup=False, highlight=False, soft_wrap=True)


def fail(message: str) -> NoReturn:
    """``message`` as one error line, exit status 2."""
    print_error(message)
    raise click.exceptions.Exit(2)


def resource_line(err: BaseException) -> str:
    """A fault of the machine (disk full, a read-only file, memory) as one line naming the file where there is one."""
    if isinstance(err, MemoryError | torch.cuda.OutOfMemoryError):
        where = "GPU memory" if isinstance(err, torch.cuda.OutOfMemoryError) else "memory"
        return f"out of {where}: the run needs more than the machine has; lower clients, batch or model size"
    if isinstance(err, OSError) and err.strerror:
        return f"{target_of(err.filename)}: {err.strerror}" if err.filename else err.strerror
    return " ".join(str(err).split()) or type(err).__name__


def run_guarded(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``fn(*args, **kwargs)`` with user-input errors as one line and exit 2, faults of the machine (disk, memory) as
    one line and exit 1; anything else is a bug and keeps its traceback. Files finished before a fault are whole:
    every write is atomic (``auditkit.output_folder``)."""
    try:
        return fn(*args, **kwargs)
    except (UsageFailure, ConfigError, DataNotFoundError, PluginError, PluginCodeError, TrainingDiverged,
            FolderError) as err:
        fail(str(err))
    except (OSError, MemoryError, torch.cuda.OutOfMemoryError) as err:
        print_error(resource_line(err))
        raise click.exceptions.Exit(1) from None


def warn_unreproducible(names: list[str]) -> None:
    """One ``warning:`` line on stderr per mechanism whose output is not determined by its seeds."""
    for name in dict.fromkeys(names):
        error_console.print(
            f"warning: the output of mechanism {name!r} is not determined by its seeds (two encodes with the same seeds "
            "differed): results will not reproduce; draw its noise from "
            "auditkit.mechanisms.randomness.private_generator(self.private_seed, seed, purpose)",
            markup=False, highlight=False, soft_wrap=True)


def _sentence(message: str) -> str:
    """Click's message as a clause of one line: whitespace collapsed, lower-case start, no final full stop."""
    text = " ".join(message.split()).rstrip(".")
    return text[:1].lower() + text[1:]


def usage_error_line(err: click.ClickException, renamed: Callable[[str], str | None] = lambda flag: None) -> str:
    """Click's usage error as one line (without the ``error: `` prefix), naming the word at fault and, where there
    is one, the closest valid option or command; ``renamed(flag)`` says where a renamed flag went."""
    ctx = getattr(err, "ctx", None)
    if isinstance(err, UnknownCommand):
        hint = (f"did you mean {err.possibilities[0]}?" if err.possibilities
                else f"commands: {', '.join(err.commands)}")
        return f"no such command {err.name!r} ({hint})"
    if isinstance(err, click.NoSuchOption):
        moved = RENAMED_FLAGS.get((ctx.info_name if ctx else None, err.option_name)) or renamed(err.option_name)
        hint = (f"renamed: {moved}" if moved else f"did you mean {err.possibilities[0]}?" if err.possibilities
                else f"see `{ctx.command_path if ctx else 'auditkit'} --help`")
        return f"no such option: {err.option_name} ({hint})"
    if isinstance(err, click.MissingParameter) and ctx is not None:
        usage = ctx.get_usage().removeprefix("Usage:").strip()
        return f"{_sentence(err.format_message())} (usage: {' '.join(usage.split())})"
    return _sentence(err.format_message())
