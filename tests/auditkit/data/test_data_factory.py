"""``auditkit.data.factory``: a user's dataset factory through ``load_dataset``, a pair of torch Datasets
materialised, anything else one line naming data.dataset."""
import sys

import pytest
import torch

from auditkit.data import Dataset, dataset_available, load_dataset
from auditkit.factories import FactoryError

DATA = '''
import torch
from torch.utils.data import TensorDataset
from auditkit.data import Dataset, Split


def pair():
    g = torch.Generator().manual_seed(0)
    train = TensorDataset(torch.rand(12, 1, 8, 8, generator=g), torch.arange(12) % 3)
    test = [(torch.rand(1, 8, 8, generator=g), i % 3) for i in range(6)]
    return train, test


def ready():
    split = Split(torch.zeros(4, 1, 8, 8), torch.tensor([0, 1, 0, 1]))
    return Dataset("mine", split, split, 2, (1, 8, 8))


def three():
    return 1, 2, 3


def uint8_images():
    return [(torch.zeros(1, 8, 8, dtype=torch.uint8), 0)], [(torch.zeros(1, 8, 8), 0)]


def float_labels():
    return [(torch.zeros(1, 8, 8), 0.5)], [(torch.zeros(1, 8, 8), 0)]
'''


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "user_data.py"
    path.write_text(DATA)
    yield path
    sys.modules.pop("user_data", None)


def test_a_pair_of_torch_datasets_is_materialised(data_file):
    spec = f"{data_file}:pair"
    dataset = load_dataset(spec)
    assert isinstance(dataset, Dataset) and dataset.name == spec and dataset_available(spec, None)
    assert dataset.train.x.shape == (12, 1, 8, 8) and dataset.test.x.shape == (6, 1, 8, 8)
    assert dataset.train.x.dtype == torch.float32 and dataset.train.y.dtype == torch.int64
    assert dataset.num_classes == 3 and dataset.input_shape == (1, 8, 8)
    assert dataset.train.y.tolist() == [i % 3 for i in range(12)]


def test_a_dataset_returned_as_is(data_file):
    assert load_dataset(f"{data_file}:ready").name == "mine"


@pytest.mark.parametrize("fn, message", [
    ("three", r"^data.dataset: factory '.*:three' must return an auditkit.data.Dataset or a pair \(train, test\) of "
              r"torch Datasets, got tuple$"),
    ("uint8_images", r"^data.dataset: factory '.*:uint8_images''s train set: item 0's image must be a float C x H x W "
                     r"tensor, got torch.uint8 \(1, 8, 8\)$"),
    ("float_labels", r"item 0's label must be an int class label >= 0, got 0.5$"),
    ("absent", r"^data.dataset: factory '.*:absent' failed to load: user_data has no function 'absent'$"),
])
def test_anything_else_is_one_line_naming_data_dataset(data_file, fn, message):
    with pytest.raises(FactoryError, match=message):
        load_dataset(f"{data_file}:{fn}")
