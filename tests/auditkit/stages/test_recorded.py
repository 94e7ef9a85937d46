"""``auditkit.stages.recorded`` on recordings that are not ours to trust (issue 39): the plugins a recording names are
never imported (the user's own are, when given), and views that do not fit the config's model are one line before
any stage runs."""
import sys

import pytest
import torch

from auditkit.config import AuditConfig, ConfigError
from auditkit.flower.recording import RecordingError, load_recording, write_manifest, write_server_round, write_truth
from auditkit.mechanisms import registry
from auditkit.stages.recorded import _same_plugin, check_recording, recorded_config

P = 7850  # the linear model on the digits (upsampled to 28 x 28): 784 x 10 + 10
APP = {"seed": 1, "data": {"dataset": "digits"}, "training": {"model": "linear", "clients": 4, "tau": 2,
                                                               "batch_size": 1, "lr": 0.1},
       "mechanism": {"name": "none"}}
PLUGIN = '''
from pathlib import Path
Path({marker!r}).write_text("imported")
import numpy as np
from auditkit import mechanisms
from auditkit.mechanisms import FloatMessage, Mechanism, PrivacyGuarantee
from auditkit.mechanisms.base import as_update


@mechanisms.register
class Mine(Mechanism):
    name = {name!r}
    summary = "sends the update"
    message_type = FloatMessage
    params_spec = ()

    def encode(self, x, seed):
        return FloatMessage(as_update(x).numpy().astype(np.float32))

    def decode(self, enc, seed):
        return enc.to_tensor()

    def guarantee(self):
        return PrivacyGuarantee(None, 0.0, None)
'''


def write_recording(root, config=APP, size=P, images=(2, 1, 28, 28)):
    write_manifest(root, config, [{"round": 1, "clients": [0, 1], "bits": [64, 64]}])
    server = torch.randn(2, size, generator=torch.Generator().manual_seed(0))
    write_server_round(root, 1, clients=[0, 1], global_before=torch.zeros(size), server=server, lr=0.1)
    for client in (0, 1):
        write_truth(root, 1, client, update=server[client], images=torch.zeros(*images))
    return load_recording(root)


@pytest.fixture
def plugin_file(tmp_path):
    """A plugin file that leaves a marker when imported; its mechanism is removed from the registry after."""
    path, marker = tmp_path / "my_mech.py", tmp_path / "IMPORTED"
    path.write_text(PLUGIN.format(marker=str(marker), name="recorded-mine"))
    yield path, marker
    registry._REGISTRY.pop("recorded-mine", None)
    registry._ORIGIN.pop("recorded-mine", None)
    sys.modules.pop("my_mech", None)


def test_plugins_a_recording_names_are_never_imported(tmp_path, plugin_file):
    """They were: the recording's config went through from_dict, which loads its plugins."""
    path, marker = plugin_file
    recording = write_recording(tmp_path / "rec", {**APP, "plugins": [str(path)],
                                                   "mechanism": {"name": "recorded-mine"}})
    with pytest.raises(RecordingError) as err:
        recorded_config(recording, {})
    assert str(err.value) == (f"the recording {str(tmp_path / 'rec')!r} names plugin (my_mech.py) and auditkit never "
                              "imports code a recording names; if you trust it, pass --plugin my_mech.py")
    assert not marker.exists() and "recorded-mine" not in registry._REGISTRY


def test_the_users_own_plugin_of_the_same_name_is_loaded_from_where_the_user_said(tmp_path, plugin_file):
    """The recording's path is never read (it does not exist here); the --plugin path given is what is imported."""
    path, marker = plugin_file
    recording = write_recording(tmp_path / "rec", {**APP, "plugins": ["/app/elsewhere/my_mech.py"],
                                                   "mechanism": {"name": "recorded-mine"}})
    config = recorded_config(recording, {}, [str(path)])
    assert isinstance(config, AuditConfig) and config.plugins == (str(path),) and marker.exists()
    assert config.mechanism.name == "recorded-mine"


def test_a_plugin_of_the_users_config_counts_as_given(tmp_path, plugin_file):
    path, marker = plugin_file
    recording = write_recording(tmp_path / "rec", {**APP, "plugins": ["app_plugins.my_mech"],
                                                   "mechanism": {"name": "recorded-mine"}})
    assert recorded_config(recording, {"plugins": [str(path)]}).plugins == (str(path),)


def test_only_the_plugins_not_given_are_asked_for(tmp_path):
    recording = write_recording(tmp_path / "rec", {**APP, "plugins": ["a.py", "pkg.b", "C:\\app\\c.py"]})
    with pytest.raises(RecordingError, match=r"names plugins \(a\.py, pkg\.b, c\.py\) and auditkit never imports code "
                                             r"a recording names; if you trust them, pass --plugin pkg\.b --plugin "
                                             r"c\.py$"):
        recorded_config(recording, {}, ["./plugins/a.py"])


@pytest.mark.parametrize("named, given, same", [
    ("/home/app/my_mech.py", "my_mech.py", True),
    ("my_mech.py", "my_mech", True),
    ("pkg.my_mech", "src/my_mech.py", True),
    ("pkg.my_mech", "pkg.my_mech", True),
    ("pkg.my_mech", "other.my_mech", False),  # two modules: neither is a file of that name
    ("evil.py", "my_mech.py", False),
])
def test_a_plugin_is_compared_by_the_module_it_is_imported_as(named, given, same):
    assert _same_plugin(named, given) is same


@pytest.mark.parametrize("config, message", [
    ({**APP, "plugins": "my_mech.py"},
     "recording.json: config.plugins must be a list of module names or .py files, got 'my_mech.py'"),
    ({**APP, "training": [1, 2]}, "recording.json: config.training must be an object, got [1, 2]"),
])
def test_an_app_table_of_the_wrong_type_is_one_line(tmp_path, config, message):
    recording = write_recording(tmp_path, config)
    with pytest.raises(RecordingError) as err:
        recorded_config(recording, {})
    assert str(err.value) == f"--recorded {str(tmp_path)!r}: {message}"


def test_a_recording_that_fits_the_model_passes_the_check(tmp_path):
    recording = write_recording(tmp_path)
    check_recording(recording, recorded_config(recording, {}))


@pytest.mark.parametrize("size, images, message", [
    (650, (2, 1, 28, 28), "server/round-0001.pt: global_before holds 650 values, but the config's model (linear on "
                          "digits) has 7850 parameters: the recording is of another model or data"),
    (P, (2, 1, 8, 8), "truth/round-0001-client-0.pt: images must be of shape (N, 1, 28, 28) (linear on digits), got "
                      "(2, 1, 8, 8)"),
])
def test_views_that_do_not_fit_the_config_are_one_line_before_any_stage(tmp_path, size, images, message):
    """A wrong parameter count was a RuntimeError traceback in the inversion stage, after the train stage ran."""
    recording = write_recording(tmp_path, size=size, images=images)
    with pytest.raises(RecordingError) as err:
        check_recording(recording, recorded_config(recording, {}))
    assert str(err.value) == f"--recorded {str(tmp_path)!r}: {message}"


def test_ground_truth_of_another_size_or_count_is_one_line(tmp_path):
    recording = write_recording(tmp_path)
    config = recorded_config(recording, {})
    write_truth(tmp_path, 1, 1, update=torch.zeros(P - 1), images=torch.zeros(2, 1, 28, 28))
    with pytest.raises(RecordingError, match=r"truth/round-0001-client-1\.pt: update holds 7849 values, but the "
                                             r"config's model \(linear on digits\) has 7850 parameters$"):
        check_recording(recording, config)
    write_truth(tmp_path, 1, 1, update=torch.zeros(P), images=torch.zeros(3, 1, 28, 28))
    with pytest.raises(RecordingError, match=r"truth/round-0001-client-1\.pt: images must hold as many images as "
                                             r"every other client's of round 1 \(2\), got 3$"):
        check_recording(recording, config)


MODEL_FACTORY = '''
from pathlib import Path
from torch import nn
Path({marker!r}).write_text("imported")


def make_net(input_shape, num_classes):
    c, h, w = input_shape
    return nn.Sequential(nn.Flatten(), nn.Linear(c * h * w, num_classes))
'''


@pytest.fixture
def model_factory(tmp_path):
    """A model factory file (the linear model, 7,850 parameters on 1x28x28) that leaves a marker when imported."""
    path, marker = tmp_path / "own" / "rec_models.py", tmp_path / "IMPORTED"
    path.parent.mkdir()
    path.write_text(MODEL_FACTORY.format(marker=str(marker)))
    yield path, marker
    sys.modules.pop("rec_models", None)


def test_a_factory_a_recording_names_is_refused_unless_the_users_config_names_it(tmp_path, model_factory):
    path, marker = model_factory
    app = {**APP, "training": {**APP["training"], "model": "/app/elsewhere/rec_models.py:make_net"}}
    recording = write_recording(tmp_path / "rec", app)
    with pytest.raises(RecordingError) as err:
        recorded_config(recording, {})
    assert str(err.value) == (f"the recording {str(tmp_path / 'rec')!r} names the factory training.model = "
                              "'rec_models.py:make_net' and auditkit never imports code a recording names; if you "
                              "trust it, name the same factory as training.model in your CONFIG")
    with pytest.raises(RecordingError, match="names the factory training.model"):  # another function of the file
        recorded_config(recording, {"training": {"model": f"{path}:other_net"}})
    assert not marker.exists()
    # the user's own file of that name is what runs, from where the user said
    config = recorded_config(recording, {"training": {"model": f"{path}:make_net"}})
    assert config.training.model == f"{path}:make_net" and config.training.clients == 4
    check_recording(recording, config)  # builds the user's model: 7,850 parameters, as recorded
    assert marker.exists()


def test_a_dataset_factory_a_recording_names_is_refused_too(tmp_path):
    recording = write_recording(tmp_path / "rec", {**APP, "data": {"dataset": "app_data:make_data"}})
    with pytest.raises(RecordingError, match=r"names the factory data.dataset = 'app_data:make_data' and auditkit "
                                             r"never imports code a recording names"):
        recorded_config(recording, {"data": {"dataset": "digits"}})


HOSTILE_DATA = {"dataset": "digits", "prefer": "mnist", "download": True}  # + data_dir: a folder outside


def test_a_recording_never_sets_where_data_lives_or_downloads(tmp_path):
    """Its data_dir and download were the config's: with data.prefer, the audit made the folder and downloaded MNIST
    into it."""
    outside = tmp_path / "elsewhere" / "data"
    recording = write_recording(tmp_path / "rec", {**APP, "data": {**HOSTILE_DATA, "data_dir": str(outside)}})
    config = recorded_config(recording, {})
    assert (config.data.dataset, config.data.data_dir, config.data.download) == ("digits", None, False)
    check_recording(recording, config)  # loads the data: the embedded digits, nothing fetched
    assert not outside.exists() and not outside.parent.exists()
    from auditkit.stages.recorded import unused_data_places

    assert unused_data_places(recording) == {"data_dir": str(outside), "download": True}
    assert unused_data_places(write_recording(tmp_path / "plain")) == {}


def test_the_users_data_dir_and_download_are_the_ones_used(tmp_path):
    outside, mine = tmp_path / "elsewhere", tmp_path / "mine"
    mine.mkdir()
    recording = write_recording(tmp_path / "rec", {**APP, "data": {**HOSTILE_DATA, "data_dir": str(outside)}})
    with pytest.raises(ConfigError) as err:  # the user's folder, and no download unless the user asks
        recorded_config(recording, {"data": {"data_dir": str(mine)}})
    assert f"data.data_dir: MNIST not found in {str(mine)!r}" in str(err.value)
    config = recorded_config(recording, {"data": {"data_dir": str(mine), "download": True}})
    assert (config.data.dataset, config.data.data_dir, config.data.download) == ("mnist", str(mine), True)
    assert not outside.exists() and list(mine.iterdir()) == []
