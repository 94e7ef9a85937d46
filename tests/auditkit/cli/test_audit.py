"""`auditkit audit`'s own lines: what an interrupt kept, and how to go on."""
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest

from auditkit.cli.audit import _interrupted
from auditkit.output_folder import Mode
from auditkit.results import load_results, validate_results


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


DEVICE_TOML = """
seed = 3
device = "{device}"
[training]
model = "cnn"
clients = 3
rounds = 2
tau = 2
checkpoints = [1]
[[mechanisms]]
name = "gaussian"
sigma = 0.01
clip = 1.0
[inversion]
targets = 1
iterations = 3
[probe]
targets = 1
iterations = 3
[identification]
candidates = [2]
trials = 20
[distinguish]
trials = 500
"""


def test_audit_runs_a_tiny_config_on_device(tmp_path, device):
    """`auditkit audit` on a config with ``device = "cpu"`` / ``"cuda"`` (as a user runs it, a subprocess) trains,
    attacks and tests the setting and records the device its training ran on."""
    config = tmp_path / "audit.toml"
    config.write_text(DEVICE_TOML.format(device=device.type))
    out = tmp_path / "out"
    # cwd: not the repository root, whose unmapped ``auditkit/`` folder would shadow a non-editable install
    done = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", str(config), "--out", str(out)],
                          capture_output=True, text=True, timeout=300, check=False, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    document = load_results(out / "results.json")
    validate_results(document)
    (setting,) = document["settings"]
    assert [r["round"] for r in setting["training"]["rounds"]] == [1, 2]
    assert setting["inversion"]["view"] == "server" and setting["distinguish"]["verdict"]
    assert document["provenance"]["device"] == device.type
