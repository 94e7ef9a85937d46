"""The other JSON auditkit writes is strict JSON too (RFC 8259: non-finite numbers as the strings "NaN",
"Infinity", "-Infinity") and follows the umask: a Flower app's recording.json (reproduction.json: tests/auditkit/reproduction/test_document.py)."""
import json
import math
import stat

import torch

from auditkit.flower.recording import load_recording, write_manifest, write_server_round


def strict_loads(text):
    """json.loads refusing NaN / Infinity / -Infinity, as RFC 8259 (and JavaScript's JSON.parse) does."""
    def refuse(constant):
        raise ValueError(f"not strict JSON: {constant}")

    return json.loads(text, parse_constant=refuse)


def mode(path):
    return stat.S_IMODE(path.stat().st_mode)


CONFIG = {"seed": 1, "mechanism": {"name": "none", "label": "NaN"}, "training": {"checkpoints": [1]}}


def test_a_recording_is_strict_json_and_reads_back_its_non_finite_metrics(umask, tmp_path):
    # as AuditStrategy writes a round before its evaluation: the test metrics are NaN until reported
    rounds = [{"round": 1, "clients": [0, 1], "bits": [64, 64], "lr": 0.1, "train_loss": math.inf,
               "test_loss": math.nan, "test_accuracy": -math.inf, "coordinates": 5}]
    with umask(0o022):
        write_manifest(tmp_path, CONFIG, rounds)
        write_server_round(tmp_path, 1, clients=[0, 1], global_before=torch.ones(5), server=torch.zeros(2, 5), lr=0.1)
    manifest = tmp_path / "recording.json"
    raw = strict_loads(manifest.read_text(encoding="utf-8"))
    assert raw["rounds"][0]["test_loss"] == "NaN" and raw["rounds"][0]["train_loss"] == "Infinity"
    assert mode(manifest) == 0o644 and mode(tmp_path / "server" / "round-0001.pt") == 0o644
    recording = load_recording(tmp_path)
    (read,) = recording.rounds
    assert math.isnan(read["test_loss"]) and read["train_loss"] == math.inf and read["test_accuracy"] == -math.inf
    assert {k: v for k, v in read.items() if "loss" not in k and k != "test_accuracy"} == {
        "round": 1, "clients": [0, 1], "bits": [64, 64], "lr": 0.1, "coordinates": 5}
    assert recording.config == CONFIG  # the user's label "NaN" is not a number


def test_a_recording_written_before_with_bare_nan_still_loads(tmp_path):
    write_server_round(tmp_path, 1, clients=[0], global_before=torch.ones(2), server=torch.zeros(1, 2), lr=0.1)
    (tmp_path / "recording.json").write_text(json.dumps(
        {"format": "auditkit-flower-recording", "version": 1, "config": CONFIG,
         "rounds": [{"round": 1, "clients": [0], "bits": [8], "test_loss": math.nan}]}, allow_nan=True))
    assert math.isnan(load_recording(tmp_path).rounds[0]["test_loss"])
