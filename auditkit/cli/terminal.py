"""What a command prints: the consoles, progress (rich's live display on a terminal, plain flushed lines
elsewhere) and the list of files written."""
from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Self

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from auditkit.fl.memory import size

__all__ = ["AuditProgress", "Reporter", "console", "error_console", "print_written"]

console = Console()
error_console = Console(stderr=True)


def print_written(paths: Iterable[Path]) -> None:
    """One ``wrote PATH`` line per file written."""
    for path in paths:
        console.print(f"wrote {path}", markup=False, highlight=False, soft_wrap=True)


class Reporter:
    """A command's progress. On a terminal: rich's live bars and spinners, as before. Elsewhere (a log file or a
    pipe, where a live display shows nothing until the command ends): plain lines, each stamped with the seconds
    since the command started and flushed as it happens. Every report carries both forms; only the one that fits
    the output is shown, so the commands need no branches of their own.
    """

    def __init__(self, out: Console, clock: Callable[[], float] = time.monotonic) -> None:
        self.out, self.clock, self.started = out, clock, clock()
        self.live = out.is_terminal
        self._progress = Progress(
            TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
            TextColumn("{task.fields[status]}", markup=False), TimeElapsedColumn(), console=out,
        ) if self.live else None

    def __enter__(self) -> Self:
        if self._progress is not None:
            self._progress.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._progress is not None:
            self._progress.stop()

    def elapsed(self) -> float:
        """Seconds since the reporter (the command) started."""
        return self.clock() - self.started

    def bar(self, description: str, total: int, *, visible: bool = True) -> TaskID | None:
        """A progress bar (a terminal only; None elsewhere)."""
        if self._progress is None:
            return None
        return self._progress.add_task(description, total=total, status="", visible=visible)

    def report(self, bar: TaskID | None, line: str | None = None, **changes: Any) -> None:
        """On a terminal, ``bar`` updated with ``changes`` (``Progress.update``'s arguments); elsewhere ``line``,
        if given."""
        if self._progress is not None and bar is not None:
            self._progress.update(bar, **changes)
        elif line is not None:
            self.line(line)

    def line(self, text: str) -> None:
        """One plain progress line, flushed at once (nothing on a terminal, where the live display shows it)."""
        if self.live:
            return
        self.out.print(f"[{self.elapsed():6.1f} s] {text}", markup=False, highlight=False, soft_wrap=True)
        self.out.file.flush()

    def note(self, text: str) -> None:
        """A line that must be seen: above the live bars on a terminal, a plain line elsewhere."""
        if self._progress is not None:
            self._progress.console.print(text, markup=False, highlight=False, soft_wrap=True)
        else:
            self.line(text)

    @contextmanager
    def status(self, text: str) -> Iterator[None]:
        """A spinner with ``text`` while the block runs on a terminal; one line when it starts elsewhere."""
        if self.live:
            with self.out.status(text):
                yield
        else:
            self.line(text)
            yield


class AuditProgress:
    """``Audit.run``'s event callback. On a terminal: the stage bar and the current setting's round bar. Elsewhere:
    a line per stage event (a finished stage with its own duration); rounds only move the terminal's bar."""

    def __init__(self, reporter: Reporter, stage_count: int, rounds: int) -> None:
        self.reporter, self.stage_count, self.rounds = reporter, stage_count, rounds
        self.stages = reporter.bar("audit stages", stage_count)
        self.training = reporter.bar("FL rounds", rounds, visible=False)
        self.started: dict[tuple[str, str], float] = {}  # (setting id, stage) -> elapsed seconds at its start

    def __call__(self, kind: str, **info: Any) -> None:
        plan = info["setting"]
        where = f"{plan.id} {plan.label}"
        if kind == "note":
            self.reporter.note(f"{where}: {info['text']}")
            return
        if kind == "round":
            record = info["record"]
            accuracy = f"test acc {100 * record.test_accuracy:.2f}%"
            self.reporter.report(self.training, None, completed=record.round, visible=True,
                                 status=f"{plan.label}: {accuracy}")
            return
        stage, status = info["stage"], info["status"]
        if stage == "train" and status != "resumed":
            self.reporter.report(self.training, completed=0, visible=status == "start")
        line = f"{where}: {stage} {status}"
        if status == "start":
            self.started[(plan.id, stage)] = self.reporter.elapsed()
            self.reporter.report(self.stages, line, status=f"{where}: {stage}")
            return
        began = self.started.pop((plan.id, stage), None)
        if began is not None:
            peak = info.get("peak")
            line += f" ({self.reporter.elapsed() - began:.1f} s" + (f", peak {size(peak)})" if peak else ")")
        self.reporter.report(self.stages, line, advance=1, status=f"{where}: {stage} {status}")

    def finish(self) -> None:
        """Every stage done (the bar full)."""
        self.reporter.report(self.stages, completed=self.stage_count, status="done")
