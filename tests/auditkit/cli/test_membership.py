"""``auditkit membership`` from the command line (in-process through ``auditkit.cli.app.main``): a config's settings
each get the stage's section in results.json and the reports; bad flags are one line, exit 2, nothing written."""
import json

import pytest

from auditkit.cli import app, terminal
from auditkit.results import load_results

CONFIG = """
title = "membership cli"
[data]
dataset = "mnist-5k"
[training]
model = "linear"
clients = 4
rounds = 2
local_epochs = 1
batch_size = 64
checkpoints = [1]
[[mechanisms]]
name = "none"
[[mechanisms]]
name = "dp-fedavg"
noise_multiplier = 1.0
clip = 1.0
"""


@pytest.fixture
def run(capsys, monkeypatch):
    """``run(*args)``: (exit status, stdout, stderr) of ``auditkit membership ARGS``, at a given width."""

    def invoke(*args: str, width: int = 200) -> tuple[int, str, str]:
        monkeypatch.setattr(terminal.console, "width", width)
        with pytest.raises(SystemExit) as exit_:
            app.main(["membership", *args])
        captured = capsys.readouterr()
        return exit_.value.code, captured.out, captured.err

    return invoke


def test_every_setting_gets_the_section_the_table_and_the_reports(run, tmp_path):
    path = tmp_path / "audit.toml"
    path.write_text(CONFIG)
    out = tmp_path / "out"
    code, stdout, err = run(str(path), "--out", str(out), "--references", "2", "--records", "40",
                            "--population", "30", width=80)
    assert code == 0, err
    document = load_results(out / "results.json")
    assert document["command"] == "membership"
    assert document["config"]["membership"] == {"enabled": True, "level": "record", "references": 2,
                                                 "records": 40, "population": 30, "mislabelled": False,
                                                 "view": "public"}
    none, fedavg = document["settings"]
    assert none["training"] is None and none["membership"]["tested"] == 40
    assert [a["attack"] for a in fedavg["membership"]["attacks"]] == ["loss", "lira-offline", "lira-online", "rmia"]
    judged = fedavg["membership"]["attacks"][0]
    # 4 attacks x 2 settings share the Bonferroni family: each judged at 1 - 0.05 / 8
    assert judged["result"]["confidence"] == pytest.approx(1 - 0.05 / 8)
    assert fedavg["verdict"]["decided_by"]["kind"] == "membership"
    line = next(line for line in stdout.splitlines() if line.startswith("dp-fedavg") and "/ rmia:" in line)
    rmia = fedavg["membership"]["attacks"][3]
    assert f"AUC {rmia['auc']:.3f}" in line and line.endswith(rmia["result"]["verdict"])
    assert (out / "report.html").exists() and (out / "report.md").exists()
    json.loads((out / "results.json").read_text())  # strict JSON


@pytest.mark.parametrize(("args", "message"), [
    (["--references", "1"], "error: --references must be an integer in 2..1000, got 1"),
    (["--level", "cohort"], "error: --level must be one of record, client, got 'cohort'"),
    (["--level", "client", "--mislabelled"], "membership.mislabelled needs membership.level = 'record'"),
])
def test_bad_flags_are_one_line_exit_2_nothing_written(run, tmp_path, args, message):
    out = tmp_path / "out"
    code, _, err = run("--out", str(out), *args)
    assert code == 2 and message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()
