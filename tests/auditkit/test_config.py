import math

import pytest

from auditkit.config import ConfigError, from_dict, load_config, load_preset


def test_quickstart_preset_is_the_documented_default():
    config = load_preset("quickstart")
    assert config.data.dataset == "digits"
    assert (config.training.model, config.training.clients, config.training.tau) == ("cnn", 10, 15)
    assert config.training.rounds == 60
    assert config.mechanism.name == "none"


def test_cepam_preset_has_the_papers_settings():
    config = load_preset("cepam-mnist")
    t = config.training
    assert (config.data.dataset, t.clients, t.tau, t.batch_size, t.lr, t.momentum, t.lr_patience) == (
        "mnist", 30, 15, 1, 0.01, 0.9, 10)
    assert 60_000 * (1 - config.data.validation_fraction) == pytest.approx(50_000)


@pytest.mark.parametrize(("raw", "message"), [
    ({"training": {"clientz": 3}}, "config key 'training.clientz' is not allowed; allowed keys in [training]:"),
    ({"bogus": 1}, "config key 'bogus' is not allowed; allowed keys in the top level:"),
    ({"training": {"clients": 0}}, "training.clients must be an integer >= 1, got 0"),
    ({"training": {"tau": 0}}, "training.tau must be an integer >= 1, got 0"),
    ({"training": {"clients": 2.5}}, "training.clients must be an integer, got 2.5"),
    ({"training": {"model": "resnet"}}, "training.model must be one of linear, mlp, cnn"),
    ({"training": {"lr": math.nan}}, "training.lr must be a finite number, got nan"),
    ({"data": {"dataset": "svhn"}}, "data.dataset must be one of digits, mnist, cifar10; got 'svhn'"),
    ({"device": "tpu"}, "device must be one of auto, cpu, cuda, cuda:N"),
    ({"training": {"checkpoints": [1, 99], "rounds": 10}}, "training.checkpoints must be rounds in [1, 10], got 99"),
    ({"training": {"participation": "uniform"}}, "training.clients_per_round must be an integer in [1, 10]"),
    ({"mechanism": {"name": "nope"}}, "mechanism: unknown mechanism 'nope'"),
    ({"mechanism": {"name": "gaussian", "sigma": -1.0}}, "mechanism: sigma"),
])
def test_bad_values_name_the_key_and_the_allowed_values(raw, message):
    with pytest.raises(ConfigError) as err:
        from_dict(raw)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_toml_file_round_trips(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('seed = 3\n[training]\nclients = 4\nrounds = 2\ncheckpoints = [1]\n'
                    '[mechanism]\nname = "gaussian"\nsigma = 0.5\n')
    config = load_config(path)
    assert (config.seed, config.training.clients, config.mechanism.params) == (3, 4, {"sigma": 0.5})
    assert from_dict(config.to_dict()) == config


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = = 1")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'fast'; valid: quickstart, cepam-mnist"):
        load_preset("fast")
