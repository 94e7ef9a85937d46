import json

import pytest

from auditkit.config import ConfigError, from_dict
from auditkit.pipeline import Experiment, prepare_output, results_document, write_atomic

SMALL = {"training": {"clients": 3, "rounds": 2, "tau": 3, "checkpoints": [2]}}


def test_results_document_reports_real_bits_and_the_claim():
    config = from_dict({**SMALL, "mechanism": {"name": "sdq", "bits": 4, "support": 0.5}})
    document = results_document(Experiment(config).train(), "train")
    assert document["schema"] == "auditkit/results" and document["schema_version"] == 1
    assert document["model"] == {"name": "cnn", "num_params": 6422}
    rounds = document["rounds"]
    assert [r["round"] for r in rounds] == [1, 2]
    for r in rounds:
        assert len(r["bits"]) == 3
        assert r["bits_per_coordinate"] == pytest.approx(sum(r["bits"]) / (3 * 6422))
    final = document["final"]
    assert 0 < final["bits_per_coordinate"] <= 4 + 0.05  # never above fixed-length 4 bits + header
    assert final["compression_vs_float32"] == pytest.approx(32 / final["bits_per_coordinate"])
    assert final["uplink_bits_total"] == sum(sum(r["bits"]) for r in rounds)
    assert document["mechanism"]["guarantee"]["flags"] and document["mechanism"]["params"]["bits"] == 4
    assert document["observations"] == [{"round": 2, "clients": [0, 1, 2],
                                         "views": ["eavesdropper", "peer", "server", "public"]}]
    assert document["accounting"]["refusal"].startswith("sdq claims no privacy")
    assert json.loads(json.dumps(document)) == document  # plain JSON


def test_results_document_composes_the_claim_over_the_rounds_run():
    config = from_dict({**SMALL, "mechanism": {"name": "gaussian", "sigma": 2.0, "clip": 0.5}})
    accounting = results_document(Experiment(config).train(), "train")["accounting"]
    assert accounting["rounds"] == 2 and accounting["delta"] == 1e-5
    composed = accounting["composed"]
    assert composed["backend"] == "opacus-prv" and composed["rounds"] == 2
    assert 1.99 < composed["epsilon"] < 2 * 1.99  # more than one round's eps, less than basic composition


def test_data_problems_surface_before_training(tmp_path):
    config = from_dict({"data": {"dataset": "mnist", "data_dir": str(tmp_path / "absent")}})
    with pytest.raises(FileNotFoundError, match="MNIST not found"):
        Experiment(config)
    too_many = from_dict({"training": {"clients": 5000}})
    with pytest.raises(ConfigError, match="training.clients must be at most the 1294 training samples"):
        Experiment(too_many)


def test_out_must_be_a_folder(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ConfigError, match="is a file"):
        prepare_output(tmp_path / "f")


def test_atomic_write_keeps_the_old_file_when_interrupted(tmp_path, monkeypatch):
    path = tmp_path / "results.json"
    write_atomic(path, "old")

    def interrupted(*args):
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_atomic(path, "new")
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left behind
