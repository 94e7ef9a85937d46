import math

import pytest

from auditkit.config import ConfigError, from_dict, load_config, load_preset


def test_quickstart_preset_is_the_documented_default():
    config = load_preset("quickstart")
    assert config.data.dataset == "mnist-5k"
    assert (config.training.model, config.training.clients, config.training.tau) == ("mlp", 10, 15)
    assert config.training.rounds == 20
    settings = config.settings()
    names = [s.name for s in settings]
    assert names[0] == "none" and names.count("jopeq-laplace") == 3 and len(names) == 11
    assert [s.target_eps for s in settings if s.name in ("gaussian", "cepam-gaussian")] == [1, 4, 16] * 2
    assert config.inversion.enabled and config.distinguish.enabled
    assert config.probe.enabled and config.probe.attack == "analytic" and config.probe.targets >= 16
    assert config.identification.candidates == (10, 100)


def test_cepam_preset_has_the_papers_settings_and_prefers_mnist(tmp_path, make_mnist):
    config = load_preset("cepam")
    t = config.training
    assert (t.clients, t.tau, t.batch_size, t.lr, t.momentum, t.lr_patience, t.client_weights) == (
        30, 15, 1, 0.01, 0.9, 10, "uniform")
    assert 60_000 * (1 - config.data.validation_fraction) == pytest.approx(50_000)
    assert config.data.dataset == "mnist-5k"  # no data folder: the embedded default
    assert [s.params.get("n") for s in config.settings() if s.name == "cepam-gaussian"] == [1, 2, 3]
    make_mnist(tmp_path, n_train=12, n_test=4)
    with_mnist = from_dict({**config.to_dict(), "data": {**config.to_dict()["data"], "data_dir": str(tmp_path),
                                                         "prefer": "mnist"}})
    assert with_mnist.data.dataset == "mnist" and with_mnist.data.prefer is None


def test_dpsq_and_msp_presets_have_the_papers_systems():
    dpsq = load_preset("dpsq")
    g = dpsq.tables["groups"]
    assert (g.sizes, g.bits, g.link_sigma, g.clients_per_round, g.bandwidth) == ((50, 50), (2, 4), (6.25e-4, 0.125), 10, 30)
    assert (dpsq.training.model, dpsq.training.clients, dpsq.training.rounds) == ("mlp200", 100, 20)
    grouped = [(s.label, s.protocol_options.get("fusion"), s.protocol_options.get("clusters"), s.params.get("range"))
               for s in dpsq.settings() if s.name == "dpsq"]
    assert grouped[0] == ("Alg. 1 range=literal", "mean", "random", "literal")
    assert grouped[-1] == ("Alg. 1 + FWO + CSO range=adaptive", "central-cell", "optimal", "adaptive")
    assert from_dict(dpsq.to_dict()) == dpsq  # groups, fusion and clusters round-trip
    msp = load_preset("msp")
    assert [s.name for s in msp.settings()] == ["none", "msp", *["mspdq"] * 4, "msp-laplace", "jopeq-laplace"]
    assert (msp.training.clients, msp.training.clients_per_round) == (100, 20)


@pytest.mark.parametrize(("groups", "mechanisms", "message"), [
    ({"sizes": [5, 4], "bits": [2, 4], "clients_per_round": 4}, [{"name": "dpsq"}],
     "groups.sizes must add up to training.clients = 10, got 9"),
    ({"sizes": [5, 5], "bits": [2], "clients_per_round": 4}, [{"name": "dpsq"}], "groups.bits .* one entry per group"),
    ({"sizes": [5, 5], "bits": [2, 4], "clients_per_round": 1}, [{"name": "dpsq"}], r"groups.clients_per_round must be an integer in \[2, 10\]"),
    ({"sizes": [5, 5], "bits": [2, 4], "clients_per_round": 4}, [{"name": "dpsq", "clusters": "optimal"}],
     "clusters = 'optimal' needs groups.bandwidth"),
    ({"sizes": [5, 5], "bits": [2, 4], "clients_per_round": 4}, [{"name": "dpsq", "fusion": "snr"}],
     r"mechanisms\[0\].fusion must be one of central-cell, oracle, bound, resolution, mean, got 'snr'"),
    (None, [{"name": "dpsq", "fusion": "mean"}], r"mechanisms\[0\].fusion needs a \[groups\] table"),
    (None, [{"name": "gaussian", "fusion": "mean"}], r"unknown parameter 'fusion' for mechanism 'gaussian'"),
    ({"sizes": [5, 5], "bits": [2, 4], "clients_per_round": 4, "speed": 3}, [{"name": "dpsq"}], "groups.speed"),
])
def test_groups_errors_name_the_key(groups, mechanisms, message):
    raw = {"training": {"clients": 10}, "mechanisms": mechanisms}
    if groups is not None:
        raw["groups"] = groups
    with pytest.raises(ConfigError, match=message):
        from_dict(raw)


def test_mechanism_settings_sweeps_and_labels():
    config = from_dict({"mechanisms": [
        {"name": "none"},
        {"name": "jopeq-laplace", "label": "JoPEQ", "bits": 2, "sweep": {"eps": [1.0, 3.0], "support": [0.5, 1.0]}},
    ]})
    settings = config.settings()
    assert len(settings) == 5 and all(not s.sweep for s in settings)
    assert [s.display for s in settings[1:3]] == ["JoPEQ eps=1, support=0.5", "JoPEQ eps=1, support=1"]
    assert settings[4].params == {"bits": 2, "eps": 3.0, "support": 1.0}
    assert from_dict(config.to_dict()) == config
    assert config.with_setting(settings[2]).mechanism == settings[2]
    with pytest.raises(ConfigError, match="holds 5 mechanism settings; `auditkit train` runs one"):
        config.mechanism  # noqa: B018


@pytest.mark.parametrize(("raw", "message"), [
    ({"training": {"clientz": 3}}, "config key 'training.clientz' is not allowed; allowed keys in [training]:"),
    ({"bogus": 1}, "config key 'bogus' is not allowed; allowed keys in the top level:"),
    ({"training": {"clients": 0}}, "training.clients must be an integer in 1..100000, got 0"),
    ({"training": {"tau": 0}}, "training.tau must be an integer in 1..10000, got 0"),
    ({"training": {"clients": 2.5}}, "training.clients must be an integer, got 2.5"),
    ({"training": {"model": "resnet"}}, "training.model must be a seed model (linear, mlp, cnn, cifar_cnn, lenet, mlp200), "
                                        "'torchvision:NAME' (a classification model of torchvision.models.list_models()) "
                                        "or a factory 'path/to/file.py:fn', 'package.module:fn' or 'entry:NAME', got "
                                        "'resnet'"),
    ({"training": {"model": "torchvision:resnet99"}}, "training.model must be a seed model"),
    ({"training": {"model": "my_models.py"}}, "training.model must be a seed model"),
    ({"training": {"model": "no_such_dir/my_models.py:make_net"}},
     "training.model: factory 'no_such_dir/my_models.py:make_net' failed to load: no such file"),
    ({"training": {"norm": "layer"}}, "training.norm must be one of batch, group, got 'layer'"),
    ({"training": {"small_stem": 1}}, "training.small_stem must be true or false, got 1"),
    ({"training": {"model": "torchvision:vgg11", "small_stem": True}},
     "training.small_stem applies to the ResNet family (torchvision:resnet*, torchvision:resnext*, "
     "torchvision:wide_resnet*), not training.model 'torchvision:vgg11'"),
    ({"training": {"model": "cnn", "small_stem": True}}, "training.small_stem applies to the ResNet family"),
    ({"training": {"lr": math.nan}}, "training.lr must be a finite number, got nan"),
    ({"data": {"dataset": "imagenet"}}, "data.dataset must be one of mnist-5k, digits, mnist, fashion-mnist, svhn, cifar10, "
                                       "cifar100, imagefolder or a factory 'path/to/file.py:fn', 'package.module:fn' or "
                                       "'entry:NAME', got 'imagenet'"),
    ({"data": {"dataset": "no_such_dir/my_data.py:make_data"}},
     "data.dataset: factory 'no_such_dir/my_data.py:make_data' failed to load: no such file"),
    ({"device": "tpu"}, "device must be one of auto, cpu, cuda, cuda:N"),
    ({"training": {"checkpoints": [1, 99], "rounds": 10}}, "training.checkpoints must be a list of integers in 1..10, got [1, 99]"),
    ({"training": {"participation": "uniform"}}, "training.clients_per_round (participation 'uniform') must be an integer in 1..10"),
    ({"training": {"participation": "replacement"}},
     "training.clients_per_round (participation 'replacement') must be an integer in 1..100000, got None"),
    ({"mechanism": {"name": "nope"}}, "mechanism: unknown mechanism 'nope'"),
    ({"mechanism": {"name": "gaussian", "sigma": -1.0}}, "mechanism: sigma"),
    ({"mechanisms": [{"name": "gaussian"}, {"name": "nope"}]}, "mechanisms[1]: unknown mechanism 'nope'"),
    ({"mechanisms": [{"name": "gaussian", "sweep": {"rate": [1, 2]}}]},
     "mechanisms[0]: unknown parameter 'rate' for mechanism 'gaussian'"),
    ({"mechanisms": [{"name": "gaussian", "sigma": 1.0, "sweep": {"sigma": [1, 2]}}]},
     "mechanisms[0].sweep.sigma is also set as a fixed parameter"),
    ({"mechanisms": [{"name": "gaussian", "sweep": {"sigma": []}}]}, "mechanisms[0].sweep.sigma must be a non-empty list"),
    ({"mechanisms": [{"name": "gaussian", "sweep": {"sigma": [0.1, -1.0]}}]}, "mechanisms[0]: sigma"),
    ({"mechanisms": []}, "config key 'mechanisms' must be a non-empty array of tables"),
    ({"mechanism": {"name": "none"}, "mechanisms": [{"name": "none"}]}, "either a [mechanism] table or [[mechanisms]]"),
    ({"inversion": {"attack": "gan"}}, "inversion.attack must be one of dlg, idlg, inverting_gradients, analytic"),
    ({"inversion": {"round": 7}}, "inversion.round must be one of the checkpoints [1], got 7"),
    ({"inversion": {"restarts": 0}}, "inversion.restarts must be an integer in 1..1000, got 0"),
    ({"distinguish": {"trials": 10}}, "distinguish.trials must be an integer in 100..10000000, got 10"),
    ({"distinguish": {"confidence": 1.0}}, "distinguish.confidence must be a number in (0, 1), got 1.0"),
    ({"data": {"prefer": "imagenet"}}, "data.prefer must be one of mnist-5k, digits, mnist, fashion-mnist, svhn, cifar10, "
                                      "cifar100, imagefolder or a factory 'path/to/file.py:fn', 'package.module:fn' or "
                                      "'entry:NAME', got 'imagenet'"),
    ({"data": {"image_size": 4}}, "data.image_size must be an integer in 8..512, got 4"),
    ({"data": {"image_size": 1024}}, "data.image_size must be an integer in 8..512, got 1024"),
    ({"data": {"image_size": 32.5}}, "data.image_size must be an integer, got 32.5"),
    ({"data": {"test_fraction": 0}}, "data.test_fraction must be a number in (0, 1), got 0"),
    ({"data": {"test_fraction": 1.0}}, "data.test_fraction must be a number in (0, 1), got 1.0"),
    ({"data": {"test_fraction": "half"}}, "data.test_fraction must be a finite number, got 'half'"),
    ({"data": {"shards_per_client": 0}}, "data.shards_per_client must be an integer in 1..10000, got 0"),
    ({"data": {"shards_per_client": True}}, "data.shards_per_client must be an integer, got True"),
    # renamed keys and mechanism parameters (docs/names.md) name the new one
    ({"inversion": {"clients": 2}}, "config key 'inversion.clients' was renamed to 'inversion.targets'"),
    ({"probe": {"clients": 2}}, "config key 'probe.clients' was renamed to 'probe.targets'"),
    ({"accounting": {"backend": "opacus-rdp"}}, "config key 'accounting.backend' was renamed to 'accounting.accountant'"),
    ({"mechanism": {"name": "dpsq", "bound": 10.0}}, "mechanism.bound was renamed to support (mechanism 'dpsq')"),
    ({"mechanisms": [{"name": "none"}, {"name": "mspdq", "w_max": 1.0}]},
     "mechanisms[1].w_max was renamed to support (mechanism 'mspdq')"),
    ({"mechanisms": [{"name": "msp", "sweep": {"split": ["paper004"]}}]},
     "mechanisms[0].sweep.split was renamed to compat (mechanism 'msp')"),
    ({"mechanism": {"name": "jopeq-exact", "target": "t"}},
     "mechanism.target was renamed to noise (mechanism 'jopeq-exact')"),
])
def test_bad_values_name_the_key_and_the_allowed_values(raw, message):
    with pytest.raises(ConfigError) as err:
        from_dict(raw)
    assert message in str(err.value)
    assert "\n" not in str(err.value)


def test_the_imagefolder_and_partition_keys_default_and_round_trip(tmp_path):
    default = from_dict({}).data
    assert (default.test_fraction, default.image_size, default.shards_per_client) == (0.2, 32, 2)
    (tmp_path / "a").mkdir()
    config = from_dict({"data": {"dataset": "imagefolder", "data_dir": str(tmp_path), "test_fraction": 0.25,
                                 "image_size": 64.0, "partition": "shards", "shards_per_client": 3}})
    assert (config.data.test_fraction, config.data.image_size, config.data.shards_per_client) == (0.25, 64, 3)
    assert isinstance(config.data.image_size, int) and from_dict(config.to_dict()) == config


def test_toml_file_round_trips(tmp_path):
    path = tmp_path / "c.toml"
    path.write_text('seed = 3\n[training]\nclients = 4\nrounds = 2\ncheckpoints = [1]\n'
                    '[mechanism]\nname = "gaussian"\nsigma = 0.5\n')
    config = load_config(path)
    assert (config.seed, config.training.clients, config.mechanism.params) == (3, 4, {"sigma": 0.5})
    assert from_dict(config.to_dict()) == config


def test_model_forms_and_options_are_accepted_and_factory_files_are_relative_to_the_config(tmp_path):
    config = from_dict({"training": {"model": "torchvision:resnet18", "small_stem": True, "norm": "group"}})
    assert (config.training.model, config.training.small_stem, config.training.norm) == ("torchvision:resnet18", True,
                                                                                         "group")
    assert from_dict(config.to_dict()) == config
    assert from_dict({}).training.small_stem is False and from_dict({}).training.norm == "batch"
    assert from_dict({"training": {"model": "entry:my-net"}, "data": {"dataset": "my_pkg.data:make"}}).data.dataset \
        == "my_pkg.data:make"  # parsed, not imported: neither exists
    (tmp_path / "cfg").mkdir()
    for name in ("my_models.py", "my_data.py"):
        (tmp_path / "cfg" / name).write_text("raise RuntimeError('imported while checking the config')\n")
    path = tmp_path / "cfg" / "c.toml"
    path.write_text('[training]\nmodel = "my_models.py:make_net"\n[data]\ndataset = "my_data.py:make_data"\n')
    config = load_config(path)  # the files exist beside the config, and are not imported by the check
    assert config.training.model == f"{tmp_path / 'cfg' / 'my_models.py'}:make_net"
    assert config.data.dataset == f"{tmp_path / 'cfg' / 'my_data.py'}:make_data"


def test_missing_and_invalid_files(tmp_path):
    with pytest.raises(ConfigError, match="does not exist"):
        load_config(tmp_path / "absent.toml")
    bad = tmp_path / "bad.toml"
    bad.write_text("seed = = 1")
    with pytest.raises(ConfigError, match="is not valid TOML"):
        load_config(bad)


def test_unknown_preset():
    with pytest.raises(ConfigError, match="unknown preset 'fast'; valid: quickstart, cepam, dpsq, jopeq, msp"):
        load_preset("fast")


def test_accounting_and_plugins_round_trip_and_are_validated(tmp_path):
    config = from_dict({"accounting": {"composition_delta": 1e-6, "accountant": "dp_accounting-rdp"}})
    assert config.accounting.accountant == "dp_accounting-rdp" and from_dict(config.to_dict()) == config
    assert config.to_dict()["plugins"] == []
    with pytest.raises(ConfigError, match="accounting.accountant must be one of opacus-prv, opacus-rdp"):
        from_dict({"accounting": {"accountant": "moments"}})
    with pytest.raises(ConfigError, match=r"accounting.composition_delta must be a number in \[0, 1\), got 1.0"):
        from_dict({"accounting": {"composition_delta": 1.0}})
    with pytest.raises(ConfigError, match="plugin 'no_such_plugin_module' failed to load: No module named"):
        from_dict({"plugins": ["no_such_plugin_module"]})
    plugin = tmp_path / "mine.py"
    plugin.write_text("from auditkit import mechanisms\nfrom auditkit.mechanisms.additive import Laplace\n\n@mechanisms.register\n"
                      "class Mine(Laplace):\n    name = 'config-plugin-mechanism'\n")
    (tmp_path / "c.toml").write_text('plugins = ["mine.py"]\n[mechanism]\nname = "config-plugin-mechanism"\n'
                                     "scale = 2.0\n")
    loaded = load_config(tmp_path / "c.toml")  # the .py path is relative to the config file
    assert loaded.plugins == (str(plugin),) and loaded.mechanism.params == {"scale": 2.0}


def test_the_config_offers_every_inversion_attack_the_attacks_package_has():
    from auditkit import attacks

    for attack in attacks.INVERSION_ATTACKS:
        assert from_dict({"inversion": {"attack": attack}}).inversion.attack == attack
    with pytest.raises(ConfigError, match="inversion.attack must be one of " + ", ".join(attacks.INVERSION_ATTACKS)):
        from_dict({"inversion": {"attack": "magic"}})
    assert from_dict({"inversion": {"attack": "analytic"}, "probe": {"attack": "idlg"}}).inversion.attack == "analytic"


def test_training_backend_is_builtin_or_flower():
    assert from_dict({}).training.backend == "builtin"
    assert "flower" not in from_dict({}).to_dict()  # the [flower] table is written only when it is used
    with pytest.raises(ConfigError, match=r"^training\.backend must be one of builtin, flower, got 'ray'$"):
        from_dict({"training": {"backend": "ray"}})
    with pytest.raises(ConfigError, match=r"config key 'flower.cpus' is not allowed; allowed keys in \[flower\]: "
                                          r"num_cpus, num_gpus, ray_address"):
        from_dict({"flower": {"cpus": 2}})



def test_dp_sgd_table_is_off_by_default_and_round_trips(tmp_path):
    off = from_dict({})
    assert not off.dp_sgd.enabled and "dp_sgd" not in off.to_dict()  # written only when DP-SGD is on
    assert not from_dict({"dp_sgd": {}}).dp_sgd.enabled
    path = tmp_path / "c.toml"
    path.write_text("[training]\nbatch_size = 8\n[dp_sgd]\nnoise_multiplier = 1.1\nmax_grad_norm = 0.5\n")
    config = load_config(path)
    assert (config.dp_sgd.enabled, config.dp_sgd.noise_multiplier, config.dp_sgd.max_grad_norm) == (True, 1.1, 0.5)
    assert config.to_dict()["dp_sgd"] == {"noise_multiplier": 1.1, "max_grad_norm": 0.5}
    assert from_dict(config.to_dict()) == config
    assert from_dict({"dp_sgd": {"noise_multiplier": 2}}).dp_sgd.max_grad_norm == 1.0


@pytest.mark.parametrize(("table", "message"), [
    ({"noise_multiplier": 0}, "dp_sgd.noise_multiplier must be a number in [1e-09, 1e+09], got 0.0"),
    ({"noise_multiplier": -1.5}, "dp_sgd.noise_multiplier must be a number in [1e-09, 1e+09], got -1.5"),
    ({"noise_multiplier": 1.0, "max_grad_norm": 0}, "dp_sgd.max_grad_norm must be a finite number > 0, got 0.0"),
    ({"noise_multiplier": "high"}, "dp_sgd.noise_multiplier must be a finite number, got 'high'"),
    ({"noise_multiplier": math.inf}, "dp_sgd.noise_multiplier must be a finite number, got inf"),
    ({"max_grad_norm": 0.5}, "dp_sgd.noise_multiplier must be given to turn DP-SGD on ([dp_sgd] sets max_grad_norm "
                             "without it)"),
    ({"noise_multiplier": 1.0, "clip": 1.0}, "config key 'dp_sgd.clip' is not allowed; allowed keys in [dp_sgd]: "
                                             "max_grad_norm, noise_multiplier"),
])
def test_dp_sgd_errors_are_one_line_naming_the_key(table, message):
    with pytest.raises(ConfigError) as err:
        from_dict({"dp_sgd": table})
    assert str(err.value) == message


def test_dp_sgd_needs_a_composition_delta():
    with pytest.raises(ConfigError, match=r"^dp_sgd's example-level claim needs accounting.composition_delta > 0 "):
        from_dict({"dp_sgd": {"noise_multiplier": 1.0}, "accounting": {"composition_delta": 0}})
    assert from_dict({"accounting": {"composition_delta": 0}}).accounting.composition_delta == 0  # fine without it


def _jopeq(data: dict) -> dict:
    """The jopeq preset (``prefer = "mnist"``) with ``data`` on its [data] table."""
    from auditkit.config import merge, preset_dict

    return merge(preset_dict("jopeq"), {"data": data})


def test_a_data_dir_without_the_preferred_dataset_is_an_error_not_a_fallback(tmp_path):
    """Issue 39: ``--preset jopeq --data-dir DIR`` with no MNIST in DIR trained on the embedded digits silently."""
    with pytest.raises(ConfigError) as err:
        from_dict(_jopeq({"data_dir": str(tmp_path)}))
    assert str(err.value) == (
        f"data.data_dir: MNIST not found in '{tmp_path}': put train-images-idx3-ubyte, train-labels-idx1-ubyte, "
        f"t10k-images-idx3-ubyte, t10k-labels-idx1-ubyte in {tmp_path}/MNIST/raw/ (or pass --download on a machine "
        "with network access); or leave data_dir out to run on the embedded mnist-5k (data.prefer = 'mnist')")


def test_the_preferred_dataset_runs_from_a_data_dir_and_the_embedded_one_without(tmp_path, make_mnist):
    assert from_dict(_jopeq({})).data.dataset == "mnist-5k"  # no folder given: the preset's stated default
    make_mnist(tmp_path, n_train=12, n_test=4)
    assert from_dict(_jopeq({"data_dir": str(tmp_path)})).data.dataset == "mnist"


def test_a_dataset_named_with_files_is_kept_over_the_preference(tmp_path):
    """``--preset jopeq --dataset cifar10 --data-dir DIR`` (the preset's CIFAR-10 setting) keeps cifar10, whose own
    loader checks DIR; with ``download`` the preferred dataset is fetched into DIR, not replaced."""
    assert from_dict(_jopeq({"dataset": "cifar10", "data_dir": str(tmp_path)})).data.dataset == "cifar10"
    assert from_dict(_jopeq({"data_dir": str(tmp_path), "download": True})).data.dataset == "mnist"


def test_local_training_keys_are_checked_in_one_line():
    """The [training] keys of local training: closed vocabularies and ranges named with what is allowed."""
    t = from_dict({"training": {"local_epochs": 2, "optimizer": "adam", "weight_decay": 5e-4, "server_lr": 0.5,
                                "client_mode": "eval", "bn_stats": "local", "precision": "bf16",
                                "optimizer_state": "reset", "client_chunk": 8}}).training
    assert (t.local_epochs, t.optimizer, t.client_mode, t.bn_stats, t.precision) == (2, "adam", "eval", "local", "bf16")
    for key, value, message in [
        ("optimizer", "rmsprop", "training.optimizer must be one of sgd, adam, got 'rmsprop'"),
        ("client_mode", "test", "training.client_mode must be one of train, eval, got 'test'"),
        ("bn_stats", "mean", "training.bn_stats must be one of averaged, local, got 'mean'"),
        ("precision", "fp16", "training.precision must be one of fp32, bf16, got 'fp16'"),
        ("local_epochs", 0, "training.local_epochs must be an integer in 1..1000, got 0"),
        ("server_lr", 0, "training.server_lr must be a number in (0, 100], got 0.0"),
        ("weight_decay", -0.1, "training.weight_decay must be a number in [0, 1], got -0.1"),
    ]:
        with pytest.raises(ConfigError) as err:
            from_dict({"training": {key: value}})
        assert str(err.value) == message
    with pytest.raises(ConfigError, match=r"^training\.local_epochs cannot be combined with \[dp_sgd\]"):
        from_dict({"training": {"local_epochs": 1}, "dp_sgd": {"noise_multiplier": 1.0}})
