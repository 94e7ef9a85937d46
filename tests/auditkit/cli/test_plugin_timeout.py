"""``--plugin-timeout SECONDS`` (every command that takes ``--plugin``): a plugin whose encode never returns stops the
command with one line naming it, exit 2, nothing written; a bad value is one usage line; the bound holds for the
command only. The stuck plugin runs in a real subprocess, whose own timeout fails the test should the bound not hold."""
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from auditkit import mechanisms
from auditkit.cli import app
from auditkit.mechanisms import registry

STUCK = '''
from auditkit import mechanisms
from auditkit.mechanisms import FloatMessage, Mechanism, PrivacyGuarantee


@mechanisms.register
class Stuck(Mechanism):
    name = "stuck"
    summary = "an encode that never returns"
    message_type = FloatMessage
    params_spec = ()

    def encode(self, x, seed):
        while True:
            pass

    def decode(self, enc, seed):
        return enc.to_tensor()

    def guarantee(self):
        return PrivacyGuarantee(1.0, 1e-5, "replace-one")
'''


def auditkit(*args, cwd):
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *map(str, args)], capture_output=True, text=True,
                          check=False, cwd=cwd, timeout=180, env={**os.environ, "COLUMNS": "200"})


@pytest.mark.parametrize("command", [["mechanisms", "stuck"], ["distinguish", "stuck", "--out", "out"]])
def test_an_encode_that_never_returns_ends_with_one_line_and_nothing_written(tmp_path, command):
    (tmp_path / "stuck.py").write_text(STUCK)
    result = auditkit(*command, "--plugin", "stuck.py", "--plugin-timeout", "1", cwd=tmp_path)
    assert result.returncode == 2, result.stderr
    assert result.stderr.splitlines() == [
        "error: plugin 'stuck.py': stuck.encode() did not return within 1 s (raise --plugin-timeout; 0 lifts the "
        "bound)"]
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("value, line", [
    ("-1", "error: invalid value for '--plugin-timeout': must be a finite number of seconds >= 0 (0: no bound), "
           "got -1"),
    ("nan", "error: invalid value for '--plugin-timeout': must be a finite number of seconds >= 0 (0: no bound), "
            "got nan"),
    ("soon", "error: invalid value for '--plugin-timeout': 'soon' is not a valid float"),
])
def test_a_bound_that_is_not_a_number_of_seconds_is_one_usage_line(capsys, value, line):
    with pytest.raises(SystemExit) as done:
        app.main(["mechanisms", "gaussian", "--plugin-timeout", value])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines() == [line]


def test_the_bound_holds_for_the_command_and_is_restored_after(monkeypatch):
    seen = []
    monkeypatch.setattr(mechanisms, "preflight", lambda mechanism: seen.append(registry.plugin_timeout()))
    before = registry.plugin_timeout()
    cli = app.build_cli()
    for args, bound in ((["--plugin-timeout", "2.5"], 2.5), (["--plugin-timeout", "0"], None), ([], 600.0)):
        result = CliRunner().invoke(cli, ["mechanisms", "gaussian", *args])
        assert result.exit_code == 0, result.output
        assert seen.pop() == bound and registry.plugin_timeout() == before


@pytest.mark.parametrize("command", ["mechanisms", "train", "audit", "report", "account", "attack", "distinguish",
                                     "canary"])
def test_every_command_with_plugin_has_the_bound_next_to_it(command):
    text = CliRunner().invoke(app.build_cli(), [command, "--help"], terminal_width=250).output
    assert "--plugin MODULE" in text and "--plugin-timeout SECONDS" in text and "[default: 600.0]" in text
