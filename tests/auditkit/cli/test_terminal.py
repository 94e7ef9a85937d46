"""Progress when the output is not a terminal (a log file, a pipe): plain lines stamped with the elapsed time,
flushed as they happen; on a terminal rich's live bars as before, without those lines."""
import io
import re
import subprocess
import sys
from types import SimpleNamespace

from rich.console import Console

from auditkit.cli.terminal import AuditProgress, Reporter


class Clock:
    """A clock the test sets."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class FlushCounting(io.StringIO):
    def __init__(self) -> None:
        super().__init__()
        self.flushed: list[str] = []  # the text written by each flush

    def flush(self) -> None:
        self.flushed.append(self.getvalue())
        super().flush()


def plain_reporter() -> tuple[Reporter, FlushCounting, Clock]:
    out, clock = FlushCounting(), Clock()
    return Reporter(Console(file=out, width=60), clock=clock), out, clock


def test_plain_lines_carry_the_elapsed_time_and_are_flushed_as_written():
    reporter, out, clock = plain_reporter()
    assert not reporter.live and reporter.bar("FL rounds", 2) is None
    clock.now += 1.25
    reporter.report(None, "round 1/2: test acc 45.12%", advance=1, status="test acc 45.12%")
    assert out.flushed[-1] == "[   1.2 s] round 1/2: test acc 45.12%\n"
    clock.now += 3600
    with reporter.status("distinguishing gaussian: 6 tests, 200,000 outputs per pair"):
        assert out.flushed[-1].endswith(
            "[3601.2 s] distinguishing gaussian: 6 tests, 200,000 outputs per pair\n")  # one line, not wrapped at 60
    reporter.report(None, completed=2)  # a bar-only update prints nothing
    assert out.getvalue().count("\n") == 2


def test_audit_events_become_one_line_each_with_the_stage_duration():
    reporter, out, clock = plain_reporter()
    progress = AuditProgress(reporter, stage_count=3, rounds=2)
    plan = SimpleNamespace(id="s02", label="gaussian target_eps=1")

    def at(seconds, kind, **info):
        clock.now = 100.0 + seconds
        progress(kind, setting=plan, **info)

    at(0.0, "stage", stage="train", status="start")
    at(2.0, "round", record=SimpleNamespace(round=1, test_accuracy=0.4512))
    at(4.5, "round", record=SimpleNamespace(round=2, test_accuracy=0.5))
    at(4.6, "stage", stage="train", status="done")
    at(4.6, "stage", stage="account", status="resumed")
    at(8.4, "stage", stage="probe", status="start")
    at(12.3, "stage", stage="probe", status="done", peak=3 * 2**30 + 2**29)
    progress.finish()
    assert out.getvalue().splitlines() == [
        "[   0.0 s] s02 gaussian target_eps=1: train start",  # rounds move the terminal's bar only: a line per stage
        "[   4.6 s] s02 gaussian target_eps=1: train done (4.6 s)",
        "[   4.6 s] s02 gaussian target_eps=1: account resumed",
        "[   8.4 s] s02 gaussian target_eps=1: probe start",
        "[  12.3 s] s02 gaussian target_eps=1: probe done (3.9 s, peak 3.5 GiB)",  # the stage's own peak memory
    ]


def test_a_terminal_gets_the_live_bars_and_no_plain_lines():
    out = io.StringIO()
    reporter = Reporter(Console(file=out, width=100, force_terminal=True))
    assert reporter.live
    progress = AuditProgress(reporter, stage_count=2, rounds=2)
    plan = SimpleNamespace(id="s00", label="none")
    with reporter:
        progress("stage", setting=plan, stage="train", status="start")
        progress("round", setting=plan, record=SimpleNamespace(round=1, test_accuracy=0.25))
        progress("stage", setting=plan, stage="train", status="done")
        progress.finish()
    shown = out.getvalue()
    assert "audit stages" in shown and "2/2" in shown  # the stage bar, full
    assert not re.search(r"\[\s*\d+\.\d s\]", shown)  # no plain "[   0.0 s] ..." line
    assert "train start" not in shown


def test_train_prints_a_line_per_round_when_output_is_not_a_terminal(tmp_path):
    result = subprocess.run(
        [sys.executable, "-m", "auditkit.cli", "train", "--rounds", "2", "--clients", "2", "--tau", "1", "--dataset",
         "digits", "--model", "linear", "--mechanism", "none", "--out", str(tmp_path / "out")],
        check=False, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert re.fullmatch(r"\[ {0,3}\d+\.\d s\] round 1/2: test acc \d+\.\d\d%", lines[0]), lines[0]
    assert re.fullmatch(r"\[ {0,3}\d+\.\d s\] round 2/2: test acc \d+\.\d\d%", lines[1]), lines[1]
    assert "FedAvg rounds" in lines[2]  # then the table, as before
