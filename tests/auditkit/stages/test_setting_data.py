"""The configured data: an image folder loaded at the config's image size and seed, the partition made with the
configured parameter, and that parameter recorded in the results' data provenance and shown in the report."""
import numpy as np
import pytest
from PIL import Image

from auditkit.config import ConfigError, from_dict
from auditkit.reports.sections.intro import partition_text
from auditkit.results.model import Data
from auditkit.stages.setting import load_configured_dataset, prepare_data


def _summary(**data):
    config = from_dict({"data": {"dataset": "digits", **data}, "training": {"clients": 5}})
    return prepare_data(config)[3]


def test_the_partition_parameter_is_recorded_and_used():
    shards = _summary(partition="shards", shards_per_client=3)
    assert shards["partition"] == "shards" and shards["shards_per_client"] == 3 and "dirichlet_alpha" not in shards
    dirichlet = _summary(partition="dirichlet", dirichlet_alpha=0.3)
    assert dirichlet["dirichlet_alpha"] == 0.3 and "shards_per_client" not in dirichlet
    iid = _summary()
    assert "dirichlet_alpha" not in iid and "shards_per_client" not in iid
    for summary in (shards, dirichlet, iid):
        Data.model_validate(summary)  # the results' data provenance takes it as written


def test_shards_per_client_reaches_the_partition(monkeypatch):
    import auditkit.stages.setting as setting

    seen = {}

    def spy(labels, clients, scheme, **kwargs):
        seen.update(kwargs, scheme=scheme)
        return real(labels, clients, scheme, **kwargs)

    real = setting.partition
    monkeypatch.setattr(setting, "partition", spy)
    _summary(partition="shards", shards_per_client=4)
    assert seen["scheme"] == "shards" and seen["shards_per_client"] == 4


def test_shards_per_client_beyond_the_data_is_a_config_error():
    with pytest.raises(ConfigError, match=r"data.shards_per_client must be at most the \d+ training samples / "
                                          r"training.clients \(5\), got 1000"):
        _summary(partition="shards", shards_per_client=1000)


def test_the_report_names_the_partition_with_its_parameter():
    base = {"dataset": "digits", "source": "", "train": 10, "validation": 2, "test": 3, "client_sizes": [5, 5]}
    assert partition_text(Data.model_validate({**base, "partition": "iid"})) == "iid"
    assert partition_text(Data.model_validate({**base, "partition": "dirichlet", "dirichlet_alpha": 0.5})) == (
        "dirichlet (alpha = 0.5)")
    assert partition_text(Data.model_validate({**base, "partition": "shards", "shards_per_client": 2})) == (
        "shards (2 shards per client)")


def test_an_image_folder_runs_at_the_configured_size_split_by_the_config_seed(tmp_path):
    rng = np.random.default_rng(0)
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        for i in range(10):
            Image.fromarray(rng.integers(0, 256, (12, 12, 3), dtype=np.uint8)).save(tmp_path / name / f"{i}.png")

    def config(seed):
        return from_dict({"seed": seed, "data": {"dataset": "imagefolder", "data_dir": str(tmp_path),
                                                 "image_size": 16, "test_fraction": 0.3},
                          "training": {"clients": 2}})

    first, again, other = (load_configured_dataset(config(s)) for s in (1, 1, 2))
    assert first.input_shape == (3, 16, 16) and len(first.test) == 6
    assert (first.test.x == again.test.x).all() and not (first.test.x == other.test.x).all()
    data, shape, classes, summary = prepare_data(config(1))
    assert shape == (3, 16, 16) and classes == 2 and summary["test"] == 6 and summary["dataset"] == "imagefolder"
