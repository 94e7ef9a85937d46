"""A resumed audit recomputes the stages that read a user's file that changed, and says which and why (issue 54):
the stage keys hold the digests of the model factory's source and the modules it imports from the user's folder, of
an image folder and of data files (``auditkit.stages.pipeline.user_inputs``). The distinguishing stage reads only the
mechanism and is resumed.

Tiny audits (one setting, 3 clients, 2 rounds, 5 inversion iterations, 1,000 trials) keep each run to seconds.
"""
import json
import os
import subprocess
import sys

import numpy as np
from PIL import Image

from auditkit.audit import run_audit
from auditkit.config import from_dict, load_config
from auditkit.input_fingerprint import CACHE_NAME

NET = """from torch import nn


def make_net(input_shape, num_classes):
    c, h, w = input_shape
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, {width}), nn.{act}(), nn.Linear({width}, num_classes))
"""
TOML = """seed = 3
device = "cpu"
[data]
dataset = "digits"
[training]
model = "net.py:make_net"
clients = 3
rounds = 2
tau = 2
checkpoints = [1]
[[mechanisms]]
name = "gaussian"
sigma = 0.5
[inversion]
enabled = false
[probe]
enabled = false
[identification]
enabled = false
[distinguish]
trials = 1000
"""
TRAINED = ("train", "account", "inversion", "probe")  # the stages that train or read the training


def _config(model, **data):
    return {"seed": 3, "device": "cpu", "data": {"dataset": "digits", **data},
            "training": {"model": model, "clients": 3, "rounds": 2, "tau": 2, "checkpoints": [1]},
            "mechanisms": [{"name": "gaussian", "sigma": 0.5}],
            "inversion": {"targets": 2, "iterations": 5}, "probe": {"targets": 2, "iterations": 5},
            "identification": {"candidates": [2], "trials": 20}, "distinguish": {"trials": 1000}}


def _audit(raw, out, **kwargs):
    """Run the audit; (its document, each stage's last status, each stage's notes)."""
    status, notes = {}, {}

    def on_event(kind, **info):
        if kind == "stage":
            status[info["stage"]] = info["status"]
        elif kind == "note":
            notes.setdefault(info["stage"], []).append(info["text"])

    return run_audit(from_dict(raw), out=out, on_event=on_event, **kwargs), status, notes


def test_an_edited_model_factory_recomputes_the_trained_stages_and_equals_a_fresh_run(tmp_path):
    net = tmp_path / "net.py"
    net.write_text(NET.format(width=16, act="ReLU"))
    raw, out = _config(f"{net}:make_net"), tmp_path / "out"
    first, _, _ = _audit(raw, out)
    for width, act in ((16, "Tanh"), (32, "Tanh")):  # the activation (same parameter count), then the width
        net.write_text(NET.format(width=width, act=act))
        resumed, status, notes = _audit(raw, out, resume=True)
        assert status == {**{stage: "done" for stage in TRAINED}, "distinguish": "resumed"}
        assert notes == {stage: [f"recomputing {stage}: the model factory {net}:make_net changed"]
                         for stage in TRAINED}
        fresh, _, _ = _audit(raw, tmp_path / f"fresh-{width}")
        assert resumed == fresh
        assert (out / "results.json").read_bytes() == (tmp_path / f"fresh-{width}" / "results.json").read_bytes()
        assert resumed["settings"][0]["training"] != first["settings"][0]["training"]
        first = resumed


def _image(path, seed):
    pixels = np.random.default_rng(seed).integers(0, 256, (8, 8, 3), dtype=np.uint8)
    Image.fromarray(pixels).save(path)  # BMP: the size is the dimensions', whatever the pixels


def test_an_image_changed_in_place_recomputes_the_trained_stages(tmp_path):
    (tmp_path / "net.py").write_text(NET.format(width=16, act="ReLU"))
    root = tmp_path / "images"
    for j, label in enumerate(("cat", "dog")):
        (root / label).mkdir(parents=True)
        for i in range(6):
            _image(root / label / f"{i}.bmp", seed=10 * j + i)
            os.utime(root / label / f"{i}.bmp", (1e9, 1e9))  # settled: their digests are cached
    raw = _config(f"{tmp_path / 'net.py'}:make_net", dataset="imagefolder", data_dir=str(root), image_size=8)
    out = tmp_path / "out"
    _audit(raw, out)
    cached = json.loads((out / "stages" / CACHE_NAME).read_text())["files"]
    assert sorted(cached) == sorted(str(p) for p in root.rglob("*.bmp"))
    _, status, notes = _audit(raw, out, resume=True)  # nothing changed: nothing recomputed
    assert set(status.values()) == {"resumed"} and notes == {}

    size = (root / "dog" / "3.bmp").stat().st_size
    _image(root / "dog" / "3.bmp", seed=999)
    assert (root / "dog" / "3.bmp").stat().st_size == size  # only the content digest tells
    _, status, notes = _audit(raw, out, resume=True)
    assert status == {**{stage: "done" for stage in TRAINED}, "distinguish": "resumed"}
    assert notes["train"] == [f"recomputing train: the image folder {root} changed"]


def test_a_module_the_factory_imports_from_the_users_folder_recomputes_on_resume(tmp_path, monkeypatch):
    """The resume through the command line, as a user runs it after the edit: a fresh process, which imports the
    edited module (this one imported the first version)."""
    (tmp_path / "user_widths.py").write_text("WIDTH = 16\n")
    (tmp_path / "net.py").write_text(NET.format(width="user_widths.WIDTH", act="ReLU").replace(
        "from torch import nn\n", "from torch import nn\n\nimport user_widths\n"))
    (tmp_path / "c.toml").write_text(TOML)
    monkeypatch.syspath_prepend(str(tmp_path))
    try:
        run_audit(load_config(tmp_path / "c.toml"), out=tmp_path / "o")
    finally:
        sys.modules.pop("user_widths", None)  # the first run imported it
    (tmp_path / "user_widths.py").write_text("WIDTH = 32\n")
    done = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", str(tmp_path / "c.toml"), "--out",
                           str(tmp_path / "o"), "--resume"], env={**os.environ, "PYTHONPATH": str(tmp_path)},
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    spec = f"{tmp_path / 'net.py'}:make_net"
    assert f"recomputing train: user_widths, a module the model factory {spec} imports changed" in done.stdout
    assert "train done" in done.stdout and "account done" in done.stdout and "distinguish resumed" in done.stdout
