"""``auditkit audit --recorded DIR`` on recordings that are not ours to trust (issue 39), as a user runs it: a malformed
recording is one ``error:`` line, exit 2, nothing written; a recording that names plugins never makes auditkit
import them, and audits once the user passes their own with ``--plugin``. No Flower needed: the recordings are
written with ``auditkit.flower.recording``'s writers."""
import json
import os
import subprocess
import sys

import pytest
import torch

from auditkit.cli import app
from auditkit.flower.recording import write_manifest, write_server_round, write_truth

P = 7850  # the linear model on the digits (28 x 28): 784 x 10 + 10
APP = {"seed": 1, "data": {"dataset": "digits"}, "training": {"model": "linear", "clients": 4, "tau": 2,
                                                               "batch_size": 1, "lr": 0.1},
       "mechanism": {"name": "sdq", "bits": 6, "support": 0.5}}
AUDIT = """
[inversion]
targets = 2
iterations = 5
[probe]
targets = 2
iterations = 5
sweep = false
[identification]
candidates = [4]
trials = 20
[distinguish]
trials = 1000
"""
PLUGIN = '''
import pathlib
pathlib.Path(__file__).with_name("IMPORTED").write_text("imported")
import numpy as np
from auditkit import mechanisms
from auditkit.mechanisms import FloatMessage, Mechanism, PrivacyGuarantee
from auditkit.mechanisms.base import as_update


@mechanisms.register
class Clear(Mechanism):
    name = "in-clear"
    summary = "sends the update as it is"
    message_type = FloatMessage
    params_spec = ()

    def encode(self, x, seed):
        return FloatMessage(as_update(x).numpy().astype(np.float32))

    def decode(self, enc, seed):
        return enc.to_tensor()

    def guarantee(self):
        return PrivacyGuarantee(None, 0.0, None)
'''


def write_recording(root, config=APP, size=P):
    write_manifest(root, config, [{"round": 1, "clients": [0, 1], "bits": [900, 900], "lr": 0.1,
                                   "test_accuracy": "NaN", "coordinates": size}])
    server = 0.01 * torch.randn(2, size, generator=torch.Generator().manual_seed(0))
    write_server_round(root, 1, clients=[0, 1], global_before=torch.zeros(size), server=server, lr=0.1)
    for client in (0, 1):
        write_truth(root, 1, client, update=server[client], images=torch.rand(2, 1, 28, 28))
    return root


def edit_manifest(root, edit):
    manifest = json.loads((root / "recording.json").read_text())
    edit(manifest)
    (root / "recording.json").write_text(json.dumps(manifest))


def edit_server(root, edit):
    view = torch.load(root / "server" / "round-0001.pt", weights_only=True)
    edit(view)
    torch.save(view, root / "server" / "round-0001.pt")


def copy_as(root, name):
    (root / "server" / name).write_bytes((root / "server" / "round-0001.pt").read_bytes())


CASES = {  # the cases, then the rest of what a recording can get wrong
    "wrong parameter count": (
        lambda r: edit_server(r, lambda v: v.update(global_before=torch.zeros(650), server=torch.zeros(2, 650))),
        "server/round-0001.pt: global_before holds 650 values, but the config's model (linear on digits) has 7850 "
        "parameters: the recording is of another model or data"),
    "round-abc.pt": (lambda r: copy_as(r, "round-abc.pt"),
                     "server/round-abc.pt is not named as a recorded round (server/round-NNNN.pt, e.g. round-0001.pt)"),
    "bits a string": (lambda r: edit_manifest(r, lambda m: m["rounds"][0].update(bits="900")),
                      "recording.json: rounds[0].bits must be a list of integers >= 0, got '900'"),
    "round entry a list": (lambda r: edit_manifest(r, lambda m: m.update(rounds=[[1, [0, 1], [900, 900]]])),
                           "recording.json: rounds[0] must be an object, got list"),
    "not JSON": (lambda r: (r / "recording.json").write_text('{"format": '),
                 "recording.json is not valid JSON (Expecting value at line 1, column 12)"),
    "not an object": (lambda r: (r / "recording.json").write_text("[]"),
                      "recording.json must hold a JSON object, got an array"),
    "deeply nested": (lambda r: (r / "recording.json").write_text("[" * 100_000 + "]" * 100_000),
                      "recording.json is nested deeper than the 100-level limit"),
    "not a torch file": (lambda r: (r / "server" / "round-0001.pt").write_text("not a tensor"),
                         "server/round-0001.pt is not a whole torch file (torch.save writes a zip archive, and this "
                         "is not one)"),
    "truncated": (lambda r: (r / "server" / "round-0001.pt").write_bytes(
        (r / "server" / "round-0001.pt").read_bytes()[:1000]),
                  "server/round-0001.pt is not a whole torch file (torch.save writes a zip archive, and this is not "
                  "one)"),
    "wrong dtype": (lambda r: edit_server(r, lambda v: v.update(server=v["server"].half())),
                    "server/round-0001.pt: server must be a dense float32 tensor of 2 dimensions, got torch.float16 "
                    "of shape (2, 7850)"),
    "wrong shape": (lambda r: edit_server(r, lambda v: v.update(server=v["server"].T.contiguous())),
                    "server/round-0001.pt: server must hold one row of 7850 values (global_before's) per client (2), "
                    "got shape (7850, 2)"),
    "training not a table": (lambda r: edit_manifest(r, lambda m: m["config"].update(training="linear")),
                             "recording.json: config.training must be an object, got 'linear'"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_recording_is_one_error_line_and_nothing_is_written(tmp_path, capsys, case):
    damage, message = CASES[case]
    root, out = write_recording(tmp_path / "rec"), tmp_path / "out"
    damage(root)
    with pytest.raises(SystemExit) as done:
        app.main(["audit", "--recorded", str(root), "--out", str(out)])
    assert done.value.code == 2
    assert capsys.readouterr().err.splitlines() == [f"error: --recorded {str(root)!r}: {message}"]
    assert not out.exists()


def auditkit(*args, cwd):
    return subprocess.run([sys.executable, "-m", "auditkit.cli", *map(str, args)], capture_output=True, text=True,
                          check=False, cwd=cwd, timeout=600, env={**os.environ, "COLUMNS": "200"})


def test_a_recording_naming_a_plugin_never_imports_it_and_audits_with_the_users_own(tmp_path):
    """Before, the recording's config loaded the plugin file it named (here the app's copy, which leaves a marker)."""
    app_dir, mine = tmp_path / "app", tmp_path / "mine"
    app_dir.mkdir(), mine.mkdir()
    (app_dir / "clear.py").write_text(PLUGIN)
    (mine / "clear.py").write_text(PLUGIN)
    (mine / "audit.toml").write_text(AUDIT)
    root = write_recording(tmp_path / "rec", {**APP, "plugins": [str(app_dir / "clear.py")],
                                              "mechanism": {"name": "in-clear"}})
    refused = auditkit("audit", "audit.toml", "--recorded", root, "--out", tmp_path / "out", cwd=mine)
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.splitlines() == [
        f"error: the recording {str(root)!r} names plugin (clear.py) and auditkit never imports code a recording "
        "names; if you trust it, pass --plugin clear.py"]
    assert not (app_dir / "IMPORTED").exists() and not (mine / "IMPORTED").exists()
    assert not (tmp_path / "out").exists()
    audited = auditkit("audit", "audit.toml", "--recorded", root, "--plugin", "clear.py", "--out", tmp_path / "out",
                       cwd=mine)
    assert audited.returncode == 0, audited.stderr
    assert (mine / "IMPORTED").exists() and not (app_dir / "IMPORTED").exists()  # the user's copy, not the app's
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["settings"][0]["mechanism"]["name"] == "in-clear"
    assert document["provenance"]["plugins"] == ["clear.py"]


def test_a_recording_never_chooses_where_data_lives_or_downloads(tmp_path):
    """Its data table was the config's: data_dir made a folder outside --out and, with prefer and download, MNIST was
    fetched into it without --download. A proxy that refuses every connection makes any download fail at once."""
    outside, mine = tmp_path / "elsewhere" / "data", tmp_path / "mine"
    mine.mkdir()
    (mine / "audit.toml").write_text(AUDIT)
    root = write_recording(tmp_path / "rec", {**APP, "data": {"dataset": "digits", "prefer": "mnist",
                                                              "data_dir": str(outside), "download": True}})
    env = {**os.environ, "COLUMNS": "200", **{k: "http://127.0.0.1:9" for k in ("HTTP_PROXY", "HTTPS_PROXY",
                                                                                  "http_proxy", "https_proxy")}}
    audited = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", "audit.toml", "--recorded", str(root),
                              "--out", str(tmp_path / "out")], capture_output=True, text=True, check=False, cwd=mine,
                             timeout=600, env=env)
    assert audited.returncode == 0, audited.stderr
    assert audited.stderr.splitlines() == [
        f"note: the recording's data.data_dir = {str(outside)!r} and data.download = True are not used: a recording "
        "never chooses where data lives or downloads it (give --data-dir, --download or your CONFIG's [data])"]
    assert not outside.exists() and not outside.parent.exists()
    document = json.loads((tmp_path / "out" / "results.json").read_text())
    assert document["provenance"]["data"]["dataset"] == "digits"
    # the user's --data-dir is used (and nothing downloaded without --download): MNIST is not there
    refused = auditkit("audit", "audit.toml", "--recorded", root, "--data-dir", mine, "--out", tmp_path / "out2",
                       cwd=mine)
    assert refused.returncode == 2 and refused.stderr.splitlines()[-1].startswith(
        f"error: --recorded {str(root)!r}: data.data_dir: MNIST not found in {str(mine)!r}: put "), refused.stderr
    assert not (tmp_path / "out2").exists() and not outside.parent.exists() and sorted(mine.iterdir()) == [
        mine / "audit.toml"]
