"""The command line's help and usage errors: help texts render literally, ``--help`` with a mechanism named lists
only its parameters, and click's usage errors are one ``error:`` line like the commands' own. The help is checked
through the click group (click's CliRunner, wide enough that no help line wraps); the usage errors through the
console script, as a user runs it (a real subprocess), since ``main`` formats them."""
import os
import subprocess
import sys

import click
import pytest
from click.testing import CliRunner

from auditkit.cli import app, train
from auditkit.cli.click_classes import AuditkitCommand, AuditkitGroup
from auditkit.output_folder import Mode

CLI = app.build_cli()
WIDE = {"COLUMNS": "250"}


def help_text(*args: str) -> str:
    result = CliRunner().invoke(CLI, [*args, "--help"], terminal_width=250, max_content_width=250)
    assert result.exit_code == 0, result.output
    return result.output


def option_line(text: str, flag: str) -> str:
    """The help's line of ``flag`` (its first column)."""
    return next(line for line in text.splitlines() if line.strip().startswith(flag + " "))


def auditkit(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *args], check=False, capture_output=True,
                          text=True, timeout=300, env={**os.environ, **WIDE})


# ------------------------------------------------------------------ literal help


def test_bracketed_parameter_help_is_shown_as_written():
    dpsq = help_text("distinguish", "dpsq")
    assert ("literal: levels on [-C, C] (paper); adaptive: on [min v, max v], sent as side information"
            in option_line(dpsq, "--range"))
    assert "C: the literal quantizer range is [-support, support]" in option_line(dpsq, "--support")
    msp = help_text("distinguish", "msp")
    assert "split factor eps_s: alpha[0] ~ U[eps_s w, (2 - eps_s) w]" in option_line(msp, "--eps-s")
    assert "paper004: Algorithm 1's U[eps_s w, (1 + m - eps_s) w]" in option_line(msp, "--compat")


def test_bracketed_command_and_option_help_is_shown_as_written():
    group = AuditkitGroup("probe-app")

    @group.command("probe", cls=AuditkitCommand)
    @click.option("--width", type=int, default=1, help="Cells of [lo, hi] per axis; [bold]not bold[/bold].")
    def probe(width: int) -> None:
        """Probe the range [lo, hi] once."""

    @group.command("other", cls=AuditkitCommand)
    def other() -> None:
        """Other [x, y] command."""

    listed = CliRunner().invoke(group, ["--help"], terminal_width=250)
    assert listed.exit_code == 0 and "Probe the range [lo, hi] once." in listed.output
    assert "Other [x, y] command." in listed.output
    command = CliRunner().invoke(group, ["probe", "--help"], terminal_width=250)
    assert command.exit_code == 0 and "Probe the range [lo, hi] once." in command.output
    assert "Cells of [lo, hi] per axis; [bold]not bold[/bold]." in command.output


# ------------------------------------------------------------------ help of one mechanism


@pytest.mark.parametrize("args", [
    ("distinguish", "gaussian"),
    ("account", "gaussian"),
    ("train", "--mechanism", "gaussian"),
    ("train", "-m", "gaussian"),
    ("train", "--mechanism=gaussian"),
    ("audit", "-m", "gaussian"),
    ("attack", "idlg", "--mechanism", "gaussian"),
    ("distinguish", "--trials", "5", "gaussian", "--sigma", "2"),
])
def test_help_with_a_mechanism_named_lists_only_its_parameters(args):
    text = help_text(*args)
    assert "Parameters of mechanism gaussian (see `auditkit mechanisms gaussian`)" in text
    assert "Mechanism parameters" not in text
    for flag in ("--sigma", "--clip", "--delta"):
        assert flag in text
    for flag in ("--bits", "--range", "--eps", "--scale"):
        assert flag + " " not in text
    # gaussian's own help, constraint and default, without the other mechanisms' texts
    assert option_line(text, "--clip").strip().split(None, 2) == [
        "--clip", "FLOAT", "l2 clipping norm of the update (a finite number > 0; default 1.0)"]
    assert "standard deviation of the noise per coordinate (a finite number > 0; default 0.1)" in option_line(
        text, "--sigma")


def test_help_with_a_mechanism_shows_its_own_choices_as_metavar():
    assert "[jopeq-code|none]" in option_line(help_text("distinguish", "sdq"), "--compat")
    assert "[jopeq-code|none|paper000|paper004]" in option_line(help_text("distinguish"), "--compat")


@pytest.mark.parametrize("args", [("distinguish",), ("account",), ("train",), ("audit",), ("attack", "idlg")])
def test_help_without_a_mechanism_lists_every_mechanism_parameter(args):
    text = help_text(*args)
    assert "Mechanism parameters (see `auditkit mechanisms NAME`)" in text
    assert "Parameters of mechanism" not in text
    assert all(flag in text for flag in ("--sigma", "--clip", "--bits", "--range", "--consensus-rounds"))
    assert "cepam-gaussian, cepam-laplace: lattice scale alpha" in option_line(text, "--alpha")


def test_help_with_an_unknown_mechanism_lists_every_parameter_and_says_why():
    text = help_text("distinguish", "gausian")
    assert "Mechanism parameters (see `auditkit mechanisms NAME`) -- unknown mechanism 'gausian', so all are " \
           "listed" in text
    assert "--sigma" in text and "--bits" in text


def test_help_is_shown_even_with_another_mechanism_flag_and_running_still_refuses_it():
    text = help_text("distinguish", "gaussian", "--bits", "4")
    assert "Parameters of mechanism gaussian" in text and "--bits " not in text
    refused = auditkit("distinguish", "gaussian", "--bits", "4")
    assert refused.returncode == 2
    assert refused.stderr.splitlines() == [
        "error: --bits is not a parameter of mechanism 'gaussian'; its parameters: --sigma, --clip, --delta"]


# ------------------------------------------------------------------ usage errors


@pytest.mark.parametrize(("args", "line"), [
    (["train", "--sigmaa", "1"], "error: no such option: --sigmaa (did you mean --sigma?)"),
    (["train", "--zzzzzz", "1"], "error: no such option: --zzzzzz (see `auditkit train --help`)"),
    (["distinguish", "dpsq", "--bound", "3"],
     "error: no such option: --bound (renamed: --support for dpsq, laplace-sq)"),
    (["distinguish", "msp", "--split", "paper004"], "error: no such option: --split (renamed: --compat for msp, mspdq)"),
    (["account", "gaussian", "--backend", "opacus-rdp"], "error: no such option: --backend (renamed: --accountant)"),
    (["account", "gaussian", "--backend=opacus-rdp"], "error: no such option: --backend (renamed: --accountant)"),
    (["distinguish"], "error: missing argument 'MECHANISM' (usage: auditkit distinguish [OPTIONS] MECHANISM)"),
    (["train", "--rounds", "abc"], "error: --rounds must be an integer in 1..100000, got 'abc'"),
    (["audti"], "error: no such command 'audti' (did you mean audit?)"),
    (["xyz"], ("error: no such command 'xyz' (commands: mechanisms, train, audit, report, account, attack, "
               "distinguish, canary, membership, reproduce, version)")),
    (["distinguish", "gaussian", "extra"], "error: got unexpected extra argument (extra)"),
])
def test_usage_errors_are_one_error_line_and_exit_2(args, line):
    result = auditkit(*args)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [line]
    assert result.stdout == ""


@pytest.mark.parametrize("args", [["--help"], ["train", "--help"], ["distinguish", "gaussian", "--help"]])
def test_help_exits_0_on_stdout(args):
    result = auditkit(*args)
    assert result.returncode == 0 and result.stderr == ""
    assert result.stdout.split()[:2] == ["Usage:", "auditkit"]


def test_bare_command_still_prints_the_help_and_exits_2():
    result = auditkit()
    assert result.returncode == 2 and result.stderr == ""
    assert "Usage: auditkit [OPTIONS] COMMAND" in result.stdout and "distinguish" in result.stdout


def test_main_passes_on_exit_codes_and_interrupts(monkeypatch, capsys):
    def exits(*args, **kwargs):
        raise click.exceptions.Exit(3)

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(train, "_train", exits)
    with pytest.raises(SystemExit) as exit_3:
        app.main(["train"])
    assert exit_3.value.code == 3
    monkeypatch.setattr(train, "_train", interrupted)
    with pytest.raises(SystemExit) as exit_130:
        app.main(["train"])
    assert exit_130.value.code == 130
    assert capsys.readouterr().err.strip() == "error: interrupted"
    with pytest.raises(SystemExit) as done:
        app.main(["version"])
    assert done.value.code == 0
    from auditkit import __version__

    assert capsys.readouterr().out.strip() == __version__


def test_an_interrupted_audit_exits_130_and_says_how_to_resume(monkeypatch, capsys, tmp_path):
    from auditkit.cli import audit

    class Interrupted:
        stage_count = 5
        unreproducible = []
        mode = Mode.NEW
        finished = 2

        def __init__(self, config, *, out, **kwargs):
            self.out = self.work = out

        def run(self, on_event):
            raise KeyboardInterrupt

    monkeypatch.setattr(audit, "Audit", Interrupted)
    with pytest.raises(SystemExit) as interrupted:
        app.main(["audit", "--out", str(tmp_path)])
    assert interrupted.value.code == 130
    said = "".join(capsys.readouterr().err.split())  # the console wraps it at its width
    assert said == "".join(f"interrupted: 2 finished stages kept in {tmp_path / 'stages'}; run the same "
                           "command with --resume to go on".split())


def test_choice_lists_come_from_the_tuples_the_code_checks():
    from auditkit import accounting, attacks
    from auditkit.accounting.composition import ACCOUNTANTS
    from auditkit.config import PRESETS
    from auditkit.models import NORMS

    def choices(command, name):
        param = next(p for p in CLI.commands[command].params if p.name == name)
        return list(param.type.choices)

    assert choices("attack", "attack") == list(attacks.INVERSION_ATTACKS)  # analytic included
    assert choices("account", "accountant") == list(ACCOUNTANTS)
    assert choices("account", "solve") == list(accounting.solvers())
    assert choices("audit", "preset") == choices("train", "preset") == list(PRESETS)
    assert choices("audit", "norm") == choices("train", "norm") == list(NORMS)
    attack = " ".join(help_text("attack").split())
    assert "The inversion attack: " + " | ".join(attacks.INVERSION_ATTACKS) in attack
    account = " ".join(help_text("account").split())
    assert "[" + "|".join(ACCOUNTANTS) + "]" in account
    assert all(f"{name}: {solver.help}" in account for name, solver in accounting.solvers().items())


@pytest.mark.parametrize(("args", "line"), [
    (["audit", "--preset", "fast"], "error: --preset must be one of "),
    (["account", "gaussian", "--accountant", "opacus"], "error: --accountant must be one of "),
    (["canary", "gaussian", "--confidence", "1.5"], "error: --confidence must be a number in (0, 1), got 1.5"),
    (["report", "x.json", "--format", "pdf"], "error: --format must be one of "),
    (["audit", "--model", "resnet"], "error: --model must be a seed model (linear, mlp, cnn, "),
    (["train", "--norm", "layer"], "error: --norm must be one of batch, group, got 'layer'"),
])
def test_a_value_outside_its_choices_or_range_is_one_line(args, line):
    result = auditkit(*args)
    assert result.returncode == 2 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith(line), result.stderr


def test_the_paper_claim_options_are_generated_from_the_registered_claims():
    from auditkit import accounting

    account = help_text("account")
    for spec in accounting.claim_options():
        assert "--" + spec.name.replace("_", "-") in account
    assert "FL settings of a paper's record-level claim" in account


# ------------------------------------------------------------------ only the CONFIG argument is read (issue 54)

MARKED_PLUGIN = '''
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")
import numpy as np
from auditkit import mechanisms
from auditkit.mechanisms import FloatMessage, Mechanism, PrivacyGuarantee
from auditkit.mechanisms.base import as_update, positive_float


@mechanisms.register
class Marked(Mechanism):
    name = "marked-mine"
    summary = "sends the update"
    message_type = FloatMessage
    params_spec = (positive_float("marked_level", 1.0, "a parameter only this plugin has"),)

    def encode(self, x, seed):
        return FloatMessage(as_update(x).numpy().astype(np.float32))

    def decode(self, enc, seed):
        return enc.to_tensor()

    def guarantee(self):
        return PrivacyGuarantee(None, 0.0, None)
'''


@pytest.fixture
def marked_config(tmp_path):
    """x.toml naming a plugin file beside it that writes IMPORTED when imported (unregistered after the test)."""
    from auditkit.mechanisms import registry

    (tmp_path / "marked_plugin.py").write_text(MARKED_PLUGIN)
    (tmp_path / "x.toml").write_text('plugins = ["marked_plugin.py"]\n')
    yield tmp_path / "x.toml", tmp_path / "IMPORTED"
    registry._REGISTRY.pop("marked-mine", None)
    registry._ORIGIN.pop("marked-mine", None)
    sys.modules.pop("marked_plugin", None)


def in_folder(*args: str, cwd) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *args], check=False, capture_output=True, text=True,
                          timeout=300, cwd=cwd, env={**os.environ, **WIDE})


@pytest.mark.parametrize("args", [
    ("report", "x.toml"),  # RESULTS, not a config
    ("audit", "--out", "x.toml"),  # an option's value
    ("version", "x.toml"),
])
def test_a_toml_word_that_is_not_the_config_argument_is_never_imported(marked_config, args):
    """Every command imported the plugins of every command-line word ending in .toml that was a file."""
    config, marker = marked_config
    result = in_folder(*args, cwd=config.parent)
    assert result.returncode == 2, result.stderr  # each refuses x.toml as what it is there
    assert len(result.stderr.splitlines()) == 1 and result.stderr.startswith("error: ")
    assert not marker.exists()


def test_the_config_argument_is_read_and_its_plugins_loaded(marked_config):
    config, marker = marked_config
    result = in_folder("audit", "x.toml", "--help", cwd=config.parent)
    assert result.returncode == 0, result.stderr
    assert marker.exists() and "--marked-level" in result.stdout  # its parameter got a flag


@pytest.mark.parametrize("args", [
    ["audit", "--recorded", "{x}"], ["audit", "--data-dir", "{x}"], ["audit", "--out={x}"], ["train", "--out", "{x}"],
    ["audit", "--sigma", "{x}"],  # a generated flag: its value
    ["membership", "--level", "{x}"], ["distinguish", "gaussian", "{x}"], ["canary", "{x}"], ["attack", "{x}"],
    ["account", "{x}"], ["mechanisms", "{x}"], ["reproduce", "{x}"], ["report", "results.json", "--out", "{x}"],
    ["{x}"], ["--plugin", "{x}", "audit"], ["audit", "--preset", "{x}"], ["audti", "{x}"],
])
def test_no_other_word_loads_a_plugin(marked_config, args):
    config, marker = marked_config
    assert app.load_named_plugins([word.format(x=config) for word in args]) == []
    assert not marker.exists()


@pytest.mark.parametrize("args", [
    ["audit", "{x}"], ["train", "{x}"], ["membership", "{x}"], ["audit", "--sigma", "0.5", "{x}"],
    ["audit", "--sigma=0.5", "{x}"], ["audit", "-m", "gaussian", "{x}"], ["audit", "-mgaussian", "{x}"],
    ["audit", "--resume", "--out", "o", "{x}"], ["audit", "--recorded", "rec", "{x}"], ["audit", "--", "{x}"],
    ["membership", "--mislabelled", "{x}", "--records", "10"],
])
def test_the_config_argument_loads_its_plugins_wherever_it_stands(marked_config, args):
    config, marker = marked_config
    assert app.load_named_plugins([word.format(x=config) for word in args]) == [str(config.parent / "marked_plugin.py")]
    assert marker.exists()


@pytest.mark.parametrize("args", [
    ["audit", "x.toml"], ["audit", "--out", "x.toml"], ["audit", "--sigma", "x.toml"], ["audit", "--sigma", "1", "c"],
    ["audit", "--sigma=1", "c"], ["audit", "-m", "gaussian", "c"], ["audit", "-mgaussian", "c"],
    ["audit", "--download", "c", "--clip", "2"], ["audit", "--", "c"], ["audit", "--recorded", "r", "--resume", "c"],
    ["train", "--plugin", "p", "--plugin=q", "c"], ["membership", "--mislabelled", "c"], ["audit", "--help", "c"],
    ["audit", "--dp-sgd-noise-multiplier", "1", "c"], ["audit", "--plugin-timeout", "3", "c"],
])
def test_the_config_found_is_the_one_click_parses(args):
    """named_words, reading the command line before the generated flags exist, finds the CONFIG that click, with
    every flag, parses."""
    found = app.named_words(args)
    command = CLI.commands[args[0]]
    parsed = command.make_context(args[0], args[1:], resilient_parsing=True)
    config = parsed.params["config"]
    assert found.config == (None if config is None else str(config))
    assert found.plugins == tuple(parsed.params.get("plugin", ()))


def test_a_commands_arguments_are_listed_once_in_its_help(capsys):
    """click 8.5 writes a "Positional arguments" section of its own; the help keeps one, auditkit's "Arguments"."""
    with pytest.raises(SystemExit):
        app.main(["train", "--help"])
    shown = capsys.readouterr().out
    assert shown.count("[CONFIG]  TOML config file") == 1 and "Positional arguments" not in shown
