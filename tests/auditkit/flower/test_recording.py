"""The recording format (no Flower needed): written whole, read back, refused with one line when it is not one."""
import json

import pytest
import torch

from auditkit.flower.recording import (RecordingError, load_recording, write_manifest, write_server_round,
                                       write_truth)


def test_written_recording_reads_back(tmp_path):
    config = {"seed": 1, "mechanism": {"name": "none"}, "training": {"checkpoints": [2]}}
    rounds = [{"round": 1, "clients": [0], "bits": [64]}, {"round": 2, "clients": [1, 0], "bits": [64, 64]}]
    write_manifest(tmp_path, config, rounds)
    server = torch.randn(2, 5)
    write_server_round(tmp_path, 2, clients=[1, 0], global_before=torch.ones(5), server=server, lr=0.1)
    write_truth(tmp_path, 2, 1, update=server[0] + 1, images=torch.zeros(3, 1, 4, 4))
    recording = load_recording(tmp_path)
    assert recording.config == config and recording.rounds == rounds and recording.recorded_rounds == [2]
    saved = recording.server_round(2)
    assert saved["clients"] == [1, 0] and saved["lr"] == 0.1
    torch.testing.assert_close(saved["server"], server)
    torch.testing.assert_close(recording.truth(2, 1)["update"], server[0] + 1)
    assert recording.truth(2, 0) is None  # a client that wrote no ground truth
    assert "aggregate" not in saved  # an uplink round released no noisy sum
    assert not list(tmp_path.rglob(".*tmp*"))  # no temporary file left behind
    with pytest.raises(RecordingError, match=r"holds no server view of round 1 \(recorded rounds: \[2\]\)"):
        recording.server_round(1)
    # a round that released a noisy sum (Flower's central-DP wrappers) keeps it as the aggregate view
    write_server_round(tmp_path, 3, clients=[0], global_before=torch.ones(5), server=server[:1], lr=0.1,
                       aggregate=server[0] * 2)
    torch.testing.assert_close(recording.server_round(3)["aggregate"], server[0] * 2)


@pytest.mark.parametrize("content, message", [
    (None, "holds no recording.json"),
    ("{not json", "recording.json is not valid JSON"),
    (json.dumps({"format": "something-else"}), "recording.json is not an auditkit-flower-recording file"),
    (json.dumps({"format": "auditkit-flower-recording", "version": 9}), "recording version 9 is not the supported 1"),
    (json.dumps({"format": "auditkit-flower-recording", "version": 1, "config": {}, "rounds": []}),
     "holds no recorded round"),
])
def test_what_is_not_a_recording_is_refused_in_one_line(tmp_path, content, message):
    if content is not None:
        (tmp_path / "recording.json").write_text(content)
    with pytest.raises(RecordingError, match=message) as err:
        load_recording(tmp_path)
    assert "\n" not in str(err.value)
