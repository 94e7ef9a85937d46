"""The issue-41 example setup audited end to end at a reduced budget: a user's model file on an image folder
(``examples/my_model_imagefolder.toml``) with Dirichlet(0.5) clients, 2 local epochs of Adam, train-mode BatchNorm
kept local and DP-FedAvg. Every stage runs, and the results and report say what was trained, how and on what
device. (``examples/resnet18_cifar10/audit.toml``, ResNet-18's 11.2M parameters, takes minutes a stage on a CPU: it
is run by hand, not in the suite; its model is tested in tests/auditkit/models.)"""
import shutil
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import auditkit as toolkit
from auditkit.config import load_config

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _small(config, *, rounds: int, clients: int, canaries: int):
    """The config at a budget a test affords: fewer rounds, clients and attack iterations, the same setup."""
    t = replace(config.training, rounds=rounds, clients=clients, checkpoints=(rounds,), sample_rate=0.5)
    return replace(config, training=t,
                   inversion=replace(config.inversion, round=None, targets=1, iterations=3),
                   probe=replace(config.probe, targets=1, iterations=3),
                   identification=replace(config.identification, trials=50, candidates=(2,), pool=4),
                   distinguish=replace(config.distinguish, trials=2000),
                   canary=replace(config.canary, canaries=canaries))


def _check(document, out: Path, *, model: str, bn_stats: str, optimizer: str) -> None:
    (setting,) = document["settings"]
    for stage in ("training", "accounting", "inversion", "probe", "distinguish", "canary"):
        assert setting.get(stage) is not None, stage
    provenance = document["provenance"]
    training = provenance["training"]
    # a factory's file is named as the config resolved it: relative to the config's folder
    assert provenance["model"]["name"].endswith(model) and provenance["device"] == "cpu"
    assert provenance["data"]["partition"] == "dirichlet" and provenance["data"]["dirichlet_alpha"] == 0.5
    assert (training["local_epochs"], training["client_mode"], training["bn_stats"], training["optimizer"]) == (
        2, "train", bn_stats, optimizer)
    report = (out / "report.md").read_text()
    shown = provenance["model"]["name"].replace("_", "\\_")  # markdown escapes underscores
    assert f"model {shown} (" in report and "2 local epochs" in report and "dirichlet (alpha = 0.5)" in report
    assert "clients in train mode" in report and "**device**: cpu" in report
    assert (out / "report.html").is_file()


def test_a_users_model_file_on_an_image_folder(tmp_path):
    photos = tmp_path / "photos"
    subprocess.run([sys.executable, str(EXAMPLES / "write_image_folder.py"), str(photos), "--count", "240"],
                   check=True, capture_output=True)
    shutil.copy(EXAMPLES / "my_models.py", tmp_path / "my_models.py")
    shutil.copy(EXAMPLES / "my_model_imagefolder.toml", tmp_path / "audit.toml")
    config = load_config(tmp_path / "audit.toml")
    config = replace(config, data=replace(config.data, data_dir=str(photos)), device="cpu")
    document = toolkit.run_audit(_small(config, rounds=2, clients=10, canaries=20), out=tmp_path / "out")
    _check(document, tmp_path / "out", model="my_models.py:make_net", bn_stats="local", optimizer="adam")
    assert "kept by each client (FedBN)" in (tmp_path / "out" / "report.md").read_text()
    sys.modules.pop("my_models", None)

