"""training.backend = "flower": the same training as the built-in simulator on Flower's Simulation Engine."""
import subprocess
import sys

import pytest
import torch

from auditkit.config import ConfigError, FlowerConfig, from_dict
from auditkit.stages.train import Experiment

pytestmark = [pytest.mark.flower, pytest.mark.usefixtures("flower_installed")]

ROUNDS = 3


def _config(mechanism: dict, backend: str, **training) -> dict:
    return {"seed": 5, "device": "cpu", "data": {"dataset": "digits"},
            "training": {"model": "linear", "clients": 6, "rounds": ROUNDS, "tau": 2, "batch_size": 4, "lr": 0.05,
                         "momentum": 0.9, "checkpoints": list(range(1, ROUNDS + 1)), "backend": backend, **training},
            "mechanism": mechanism}


@pytest.mark.parametrize("mechanism, training", [
    ({"name": "sdq", "bits": 4, "support": 0.25}, {"participation": "uniform", "clients_per_round": 4}),
    ({"name": "gaussian", "sigma": 0.02, "clip": 1.0}, {"participation": "replacement", "clients_per_round": 5}),
])
def test_flower_equals_builtin_round_by_round(mechanism, training):
    """Same config and seed: the same global model after every round (float tolerance; the clients' momentum lives
    in Flower's node state), the same bits per client, the same decoded server view. The Gaussian's noise is
    keyed by the shared seed and the client's private seed, so it agrees too; with replacement a client drawn
    twice is trained once and counted twice on both backends."""
    runs = {b: Experiment(from_dict(_config(mechanism, b, **training))).train().result
            for b in ("builtin", "flower")}
    builtin, flower = runs["builtin"], runs["flower"]
    assert [o.round for o in flower.observations] == list(range(1, ROUNDS + 1))
    for a, b in zip(builtin.observations, flower.observations, strict=True):
        assert a.clients == b.clients
        torch.testing.assert_close(b.views["peer"], a.views["peer"], rtol=0, atol=1e-6)
        torch.testing.assert_close(b.views["server"], a.views["server"], rtol=0, atol=1e-6)
        assert b.views["eavesdropper"] == a.views["eavesdropper"]  # the very bytes
    assert [r.bits for r in flower.rounds] == [r.bits for r in builtin.rounds]
    assert all(r.bits for r in flower.rounds)
    assert [r.test_accuracy for r in flower.rounds] == pytest.approx([r.test_accuracy for r in builtin.rounds],
                                                                      abs=1e-9)
    torch.testing.assert_close(flower.final_params, builtin.final_params, rtol=0, atol=1e-6)
    # the Gaussian's noise is not zero, so the agreement above is not a noiseless coincidence
    assert (builtin.observations[0].views["server"] != builtin.observations[0].ground_truth["updates"]).any()


def test_flower_clients_train_with_dp_sgd_as_the_builtin_clients_do():
    """With [dp_sgd] each Flower client draws the same keyed Poisson batches and noise as the built-in simulator (its
    own padding width instead of the round's largest, which the mask makes immaterial): the same global model after
    every round to float tolerance."""
    runs = {b: Experiment(from_dict({**_config({"name": "none"}, b, batch_size=3),
                                     "dp_sgd": {"noise_multiplier": 1.1, "max_grad_norm": 0.5}})).train().result
            for b in ("builtin", "flower")}
    builtin, flower = runs["builtin"], runs["flower"]
    for a, b in zip(builtin.observations, flower.observations, strict=True):
        torch.testing.assert_close(b.views["peer"], a.views["peer"], rtol=0, atol=1e-6)
    plain = Experiment(from_dict(_config({"name": "none"}, "builtin", batch_size=3))).train().result
    assert (plain.final_params - builtin.final_params).abs().max() > 1e-3  # DP-SGD changed the training


def test_unreachable_ray_address_is_one_line_naming_the_key():
    from auditkit.flower.backend import connect_ray

    with pytest.raises(ConfigError, match=r"^flower\.ray_address '127\.0\.0\.1:9' is not reachable") as err:
        connect_ray(FlowerConfig(ray_address="127.0.0.1:9"), timeout_s=2)
    assert "\n" not in str(err.value)
    with pytest.raises(ConfigError, match=r"^flower\.ray_address must be host:port"):
        connect_ray(FlowerConfig(ray_address="no-port-here"))


def test_resources_beyond_the_machine_are_refused_before_ray_starts():
    from auditkit.flower.backend import connect_ray

    with pytest.raises(ConfigError, match=r"^flower\.num_cpus = 4096 is more than the \d+ CPUs of this machine"):
        connect_ray(FlowerConfig(num_cpus=4096))
    with pytest.raises(ConfigError, match=r"^flower\.num_gpus = 64 is more than the \d+ GPUs of this machine"):
        connect_ray(FlowerConfig(num_gpus=64))


def test_a_consensus_mechanism_is_refused_on_flower(tmp_path):
    from auditkit.audit import Audit

    config = from_dict(_config({"name": "msp"}, "flower"))
    with pytest.raises(ConfigError, match=r"runs the 'consensus' protocol \(use training.backend = 'builtin'\)"):
        Experiment(config)
    # in an audit, a later setting is checked before the first one trains
    raw = _config({"name": "none"}, "flower")
    del raw["mechanism"]
    mixed = from_dict({**raw, "mechanisms": [{"name": "none"}, {"name": "msp"}]})
    with pytest.raises(ConfigError, match=r"runs the 'consensus' protocol"):
        Audit(mixed, out=tmp_path / "out")
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("flower_table, message", [
    ("num_cpus = 4096", "error: flower.num_cpus = 4096 is more than the"),
    ('ray_address = "127.0.0.1:9"', "error: flower.ray_address '127.0.0.1:9' is not reachable"),
])
def test_cli_bad_flower_settings_exit_2_and_write_nothing(tmp_path, flower_table, message):
    config = tmp_path / "flower.toml"
    config.write_text('[data]\ndataset = "digits"\n[training]\nmodel = "linear"\nclients = 3\nrounds = 1\n'
                      f'tau = 1\n[mechanism]\nname = "none"\n[flower]\n{flower_table}\n')
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "train", str(config), "--backend", "flower",
                             "--out", str(out)], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(message), result.stderr
    assert not out.exists()


@pytest.mark.parametrize("flower, message", [
    ({"num_cpus": 0}, r"^flower\.num_cpus \(CPUs per client\) must be a finite number > 0, got 0"),
    ({"num_gpus": -1}, r"^flower\.num_gpus \(GPUs per client, fractions allowed\) must be a finite number >= 0"),
    ({"ray_address": " "}, r"^flower\.ray_address must be host:port or ray://host:port"),
])
def test_flower_table_errors_name_the_key(flower, message):
    with pytest.raises(ConfigError, match=message):
        from_dict({"training": {"backend": "flower"}, "flower": flower})
    config = from_dict({"training": {"backend": "flower"}})
    assert config.to_dict()["flower"] == {"num_cpus": 1.0, "num_gpus": 0.0, "ray_address": None}


def test_flower_carries_batchnorm_statistics_as_the_builtin_simulator_does(tmp_path):
    """A BatchNorm model (examples/my_models.py) in train mode: the server's averaged running statistics travel to
    the clients and back beside the model; the Flower run equals the built-in one round by round, test accuracy
    included (evaluated with the statistics). (``bn_stats = "local"``, each node keeping its own, passed the same
    comparison when written; one Flower run per test keeps the suite's time.)"""
    import shutil
    from pathlib import Path

    shutil.copy(Path(__file__).resolve().parents[3] / "examples" / "my_models.py", tmp_path / "my_models.py")
    model = f"{tmp_path / 'my_models.py'}:make_net"
    runs = {b: Experiment(from_dict(_config({"name": "gaussian", "sigma": 0.01, "clip": 10.0}, b, model=model,
                                            bn_stats="averaged", batch_size=8))).train()
            for b in ("builtin", "flower")}
    builtin, flower = runs["builtin"].result, runs["flower"].result
    for a, b in zip(builtin.observations, flower.observations, strict=True):
        torch.testing.assert_close(b.views["peer"], a.views["peer"], rtol=0, atol=1e-5)
        for name, value in a.global_buffers.items():
            torch.testing.assert_close(b.global_buffers[name], value, rtol=0, atol=1e-5)
    assert [r.test_accuracy for r in flower.rounds] == pytest.approx([r.test_accuracy for r in builtin.rounds],
                                                                      abs=1e-9)
    assert builtin.observations[-1].global_buffers["1.running_mean"].abs().sum() > 0  # the statistics moved
