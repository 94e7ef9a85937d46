import json

import pytest
import torch

from auditkit import mechanisms, results
from auditkit.accounting.dp_sgd import example_level_claim
from auditkit.config import ConfigError, from_dict
from auditkit.stages.inversion import RecordedView
from auditkit.stages.train import Experiment, audit_experiment, results_document, train_stage
from auditkit.results import write_results

SMALL = {"training": {"clients": 3, "rounds": 2, "tau": 3, "checkpoints": [2]}}


def test_results_document_reports_real_bits_and_the_claim():
    config = from_dict({**SMALL, "mechanism": {"name": "sdq", "bits": 4, "support": 0.5}})
    run = Experiment(config).train()
    document = results_document(run, "small")
    assert document["schema"] == "auditkit/results" and document["schema_version"] == 6
    assert (document["command"], document["title"]) == ("train", "small")
    assert document["provenance"]["model"] == {"name": "cnn", "num_params": 6422}
    assert document["provenance"]["code"].startswith("sha256:") and document["provenance"]["plugins"] == []
    (setting,) = document["settings"]
    assert setting["inversion"] is None and setting["distinguish"] is None
    training = setting["training"]
    assert training["protocol"] == "uplink" and training["checkpoints"] == [2]
    rounds = training["rounds"]
    assert [r["round"] for r in rounds] == [1, 2]
    for r, record in zip(rounds, run.result.rounds):
        assert len(record.bits) == 3
        assert r["bits_per_coordinate"] == pytest.approx(sum(record.bits) / (3 * 6422))
    final = training["final"]
    assert 0 < final["bits_per_coordinate"] <= 4 + 0.05  # never above fixed-length 4 bits + header
    assert final["compression_vs_float32"] == pytest.approx(32 / final["bits_per_coordinate"])
    assert final["uplink_bits_total"] == sum(sum(r.bits) for r in run.result.rounds)
    mechanism = setting["mechanism"]
    assert mechanism["guarantee"]["flags"] and mechanism["params"]["bits"] == 4 and mechanism["origin"] == "built-in"
    assert mechanism["capabilities"]["tiling"] == "declared" and mechanism["capabilities"]["true_epsilon"] == (
        "generic default")
    assert setting["accounting"]["refusal"].startswith("the mechanism claims no privacy")
    assert json.loads(json.dumps(document)) == document  # plain JSON


def test_the_train_stage_keeps_the_inversion_targets_rows_as_a_run_keeping_every_observation_sees_them():
    """The stage takes its view of the inversion round as the round ends: the same tensors as from the whole
    observation kept to the end; its memory check counts the targets' rows, not the round's."""
    config = from_dict({"training": {"clients": 4, "rounds": 3, "tau": 2, "checkpoints": [1, 3]},
                        "mechanism": {"name": "gaussian", "sigma": 0.5, "clip": 1.0}, "inversion": {"targets": 2}})
    stage = train_stage(config)
    experiment = Experiment(config)
    run = experiment.train()
    (observed,) = [o for o in run.result.observations if o.round == config.checkpoint_round]
    whole = RecordedView.from_observation(observed, experiment.simulation.data.train.x.cpu(), 2, run.protocol,
                                          config.training.client_mode).to_tensors()
    view = stage.tensors["view"]
    assert view.keys() == whole.keys() and view["clients"] == whole["clients"] == [0, 1]
    for key in ("server", "truth", "global_before", "images_used"):
        assert torch.equal(view[key], whole[key])
    assert torch.equal(stage.tensors["probe"]["weights"], observed.global_before)
    assert stage.result["training"] == results.training_entry(run.result, run.protocol)
    checkpoints = audit_experiment(config).memory.parts["checkpoints"]
    assert checkpoints < experiment.memory.parts["checkpoints"] and checkpoints >= 2 * 3 * 2 * 4 * run.result.num_params


def test_results_document_composes_the_claim_over_the_rounds_run():
    config = from_dict({**SMALL, "mechanism": {"name": "gaussian", "sigma": 2.0, "clip": 0.5},
                        "accounting": {"composition_delta": 1e-6, "accountant": "dp_accounting-pld"}})
    accounting = results_document(Experiment(config).train(), "t")["settings"][0]["accounting"]
    assert accounting["rounds"] == 2 and accounting["composition_delta"] == 1e-6
    composed = accounting["composed"]
    assert composed["accountant"] == "dp_accounting-pld" and composed["rounds"] == 2 and composed["delta"] == 1e-6
    one_round = mechanisms.create("gaussian", sigma=2.0, clip=0.5, delta=1e-6).guarantee().epsilon
    assert one_round < composed["epsilon"] < 2 * one_round  # more than one round's eps, less than basic composition


def test_data_problems_surface_before_training(tmp_path):
    config = from_dict({"data": {"dataset": "mnist", "data_dir": str(tmp_path / "absent")}})
    with pytest.raises(FileNotFoundError, match="MNIST not found"):
        Experiment(config)
    too_many = from_dict({"training": {"clients": 5000}})
    with pytest.raises(ConfigError, match="training.clients must be at most the 3500 training samples"):
        Experiment(too_many)


def test_results_are_validated_before_they_are_written_and_written_atomically(tmp_path, monkeypatch):
    config = from_dict({**SMALL, "training": {**SMALL["training"], "rounds": 1, "checkpoints": [1]}})
    document = results_document(Experiment(config).train(), "t")
    path = tmp_path / "results.json"
    path.write_text("old")
    broken = {**document, "settings": [{**document["settings"][0], "training": {"rounds": "many"}}]}
    with pytest.raises(ValueError, match=r"results.settings\[0\].training.protocol is missing"):
        write_results(broken, tmp_path)
    assert path.read_text() == "old"  # an invalid document never reaches the disk

    def interrupted(*args, **fds):
        raise KeyboardInterrupt

    monkeypatch.setattr("os.replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        write_results(document, tmp_path)
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # no temporary file left behind


def test_dp_sgd_run_reports_the_example_level_claim_beside_the_client_level_one():
    """Three clients of the embedded data with DP-SGD (z 1.1, C 0.5, expected batch 4) under a Gaussian uplink:
    the accounting section keeps the client-level ``composed`` and adds ``example_level``, Opacus's PRV at the
    smallest client's q = 4 / n_k over 2 rounds x tau 3 = 6 steps; the provenance says how batches were drawn."""
    config = from_dict({**SMALL, "training": {**SMALL["training"], "batch_size": 4},
                        "mechanism": {"name": "gaussian", "sigma": 2.0, "clip": 0.5},
                        "dp_sgd": {"noise_multiplier": 1.1, "max_grad_norm": 0.5}})
    run = Experiment(config).train()
    document = results_document(run, "dp-sgd")
    accounting = document["settings"][0]["accounting"]
    assert accounting["composed"]["rounds"] == 2  # the client-level claim, unchanged
    sizes = run.data_summary["client_sizes"]
    expected = example_level_claim(1.1, 0.5, batch_size=4, client_sizes=sizes, rounds=2, tau=3, delta=1e-5)
    assert accounting["example_level"] == expected.to_dict()
    assert accounting["example_level"]["sample_rate"] == 4 / min(sizes) and accounting["example_level"]["steps"] == 6
    assert document["provenance"]["training"]["sampling"].startswith("DP-SGD: each of the tau = 3 local steps")
    assert document["config"]["dp_sgd"] == {"noise_multiplier": 1.1, "max_grad_norm": 0.5}
    plain = results_document(Experiment(from_dict({**SMALL, "mechanism": {"name": "none"}})).train(), "plain")
    assert "example_level" not in plain["settings"][0]["accounting"]


def test_dp_sgd_batch_larger_than_a_client_is_refused_once_the_data_are_split():
    config = from_dict({"training": {"clients": 70, "batch_size": 60}, "dp_sgd": {"noise_multiplier": 1.0}})
    with pytest.raises(ConfigError, match=r"^dp_sgd needs training.batch_size <= the smallest client's example count "
                                          r"\(50\); got 60$"):
        Experiment(config)
    Experiment(from_dict({"training": {"clients": 70, "batch_size": 60}}))  # without DP-SGD it samples with replacement
