"""The example factories ``examples/my_models.py`` and ``examples/my_data.py`` in a config beside them: loaded by
path, the model built for the digits' 1x8x8 shape, refused by DP-SGD until norm = "group"."""
import shutil
import sys
from pathlib import Path

import pytest

from auditkit.config import ConfigError, load_config
from auditkit.data import load_dataset
from auditkit.models import build_model

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture
def folder(tmp_path):
    for name in ("my_models.py", "my_data.py"):
        shutil.copy(EXAMPLES / name, tmp_path / name)
    yield tmp_path
    for name in ("my_models", "my_data"):
        sys.modules.pop(name, None)


def test_the_example_factories_run_from_a_config_beside_them(folder):
    path = folder / "audit.toml"
    path.write_text('[data]\ndataset = "my_data.py:make_data"\n[training]\nmodel = "my_models.py:make_net"\n'
                    'clients = 4\n[dp_sgd]\nnoise_multiplier = 1.0\n')
    config = load_config(path)
    data = load_dataset(config.data.dataset)
    assert data.input_shape == (1, 8, 8) and data.num_classes == 10 and len(data.train) + len(data.test) == 1797
    assert 0 <= float(data.train.x.min()) and float(data.train.x.max()) <= 1
    with pytest.raises(ConfigError, match=r"layer '1' \(BatchNorm2d\) mixes the examples of a batch"):
        build_model(config.training, data.input_shape, data.num_classes, dp_sgd=True)
    path.write_text(path.read_text().replace('clients = 4\n', 'clients = 4\nnorm = "group"\n'))
    model = build_model(load_config(path).training, data.input_shape, data.num_classes, dp_sgd=True)
    assert model(data.train.x[:5]).shape == (5, 10)
