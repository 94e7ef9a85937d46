"""`auditkit audit`'s own lines: what an interrupt kept, and how to go on."""
from pathlib import Path
from types import SimpleNamespace

import pytest

from auditkit.cli.audit import _interrupted
from auditkit.output_folder import Mode


@pytest.mark.parametrize(("mode", "finished", "line"), [
    (Mode.NEW, 0, "interrupted before any stage finished"),
    (Mode.NEW, 1, "interrupted: 1 finished stage kept in out/stages; run the same command with --resume to go on"),
    (Mode.RESUME, 7, "interrupted: 7 finished stages kept in out/stages; run the same command with --resume to go on"),
    (Mode.OVERWRITE, 0, "interrupted before any stage finished; the earlier run in out is untouched; run the same "
                        "command (with --overwrite) to go on"),
    (Mode.OVERWRITE, 3, "interrupted: 3 finished stages kept in out/.next/stages; the earlier run in out is untouched; "
                        "run the same command (with --overwrite) to go on"),
])
def test_the_interrupt_line_says_what_was_kept(mode, finished, line):
    work = Path("out") / ".next" if mode is Mode.OVERWRITE else Path("out")
    audit = SimpleNamespace(mode=mode, finished=finished, out=Path("out"), work=work)
    assert _interrupted(audit) == line
