"""CIFAR batches are read without running their pickles: a batch whose pickle calls a function (here one that would
write a file) is refused in one line and the function never runs; malformed batches are one line too; genuine
batches (Python 2 pickles of a numpy array, as CIFAR ships them) load as torchvision loads them."""
import pickle
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from torchvision.datasets import CIFAR10

from auditkit.data import DataNotFoundError, load_dataset
from auditkit.data.safe_pickle import load_cifar_batch


class Payload:
    """Unpickling runs code that creates ``marker``: what a hostile batch can do with plain ``pickle.load``."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self):
        return exec, (f"open({str(self.marker)!r}, 'w').close()",)


def genuine(n: int = 4, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    return {"batch_label": "b", "data": rng.integers(0, 256, size=(n, 3072), dtype=np.uint8),
            "labels": rng.integers(0, 10, size=n).tolist(), "filenames": ["x.png"] * n}


def write(path: Path, obj) -> Path:
    path.write_bytes(pickle.dumps(obj, protocol=2))
    return path


def test_a_batch_that_calls_a_function_is_refused_and_the_function_never_runs(tmp_path):
    marker = tmp_path / "ran"
    batch = write(tmp_path / "data_batch_1", {**genuine(), "extra": Payload(marker)})
    with pytest.raises(DataNotFoundError, match=r"is not a CIFAR python batch: it names __builtin__\.exec, "):
        load_cifar_batch(batch)
    assert not marker.exists()
    write(tmp_path / "control", Payload(marker))  # the payload is live: plain pickle runs it
    pickle.loads((tmp_path / "control").read_bytes())
    assert marker.exists()


@pytest.mark.parametrize(("obj", "says"), [
    ({"labels": [1]}, "it needs 'data', uint8 rows of 3072 bytes"),
    ({**genuine(), "data": np.zeros((4, 3072), dtype=np.float32)}, "it needs 'data', uint8 rows"),
    ({**genuine(), "data": np.zeros((4, 100), dtype=np.uint8)}, "it needs 'data', uint8 rows"),
    ({**genuine(), "labels": [1, 2]}, "it needs 'labels', one integer in 0..9 per row"),
    ({**genuine(), "labels": [0, 1, 2, 10]}, "it needs 'labels', one integer in 0..9 per row"),
    (["not", "a", "dict"], "it needs 'data'"),
])
def test_malformed_batches_are_one_line(tmp_path, obj, says):
    with pytest.raises(DataNotFoundError, match="is not a CIFAR python batch: " + says.replace(".", r"\.")):
        load_cifar_batch(write(tmp_path / "b", obj))


def test_truncated_and_non_pickle_files_are_one_line(tmp_path):
    whole = pickle.dumps(genuine(), protocol=2)
    for name, payload in (("truncated", whole[: len(whole) // 2]), ("text", b"hello")):
        (tmp_path / name).write_bytes(payload)
        with pytest.raises(DataNotFoundError, match="is not a CIFAR python batch"):
            load_cifar_batch(tmp_path / name)


class AnyChecksumCIFAR10(CIFAR10):
    """torchvision's CIFAR10 parser, its md5 checks off (these batches are not the published ones)."""

    train_list = [[name, None] for name, _ in CIFAR10.train_list]
    test_list = [[name, None] for name, _ in CIFAR10.test_list]
    meta = {**CIFAR10.meta, "md5": None}


def test_a_genuine_batch_loads_as_torchvision_loads_it(tmp_path):
    folder = tmp_path / CIFAR10.base_folder
    folder.mkdir()
    for i, (name, _) in enumerate(CIFAR10.train_list + CIFAR10.test_list):
        write(folder / name, genuine(n=3, seed=i))
    write(folder / CIFAR10.meta["filename"], {"label_names": [str(k) for k in range(10)]})
    ours = load_dataset("cifar10", data_dir=tmp_path)
    theirs = AnyChecksumCIFAR10(str(tmp_path), train=True)  # torchvision's own parser on the same files
    assert ours.train.y.tolist() == list(theirs.targets)
    np.testing.assert_array_equal((ours.train.x * 255).round().byte().permute(0, 2, 3, 1).numpy(), theirs.data)


def test_the_cli_names_the_bad_batch_in_one_line(tmp_path):
    folder = tmp_path / CIFAR10.base_folder
    folder.mkdir()
    marker = tmp_path / "ran"
    for name, _ in CIFAR10.train_list + CIFAR10.test_list:
        write(folder / name, genuine())
    write(folder / "data_batch_3", {**genuine(), "extra": Payload(marker)})
    write(folder / CIFAR10.meta["filename"], {"label_names": [str(k) for k in range(10)]})
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "train", "--dataset", "cifar10", "--data-dir",
                             str(tmp_path), "--model", "cifar_cnn", "--mechanism", "none", "--rounds", "1", "--out",
                             str(tmp_path / "out")], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    assert result.stderr.splitlines() == [f"error: {folder / 'data_batch_3'} is not a CIFAR python batch: it names "
                                          "__builtin__.exec, which a data file has no need of"]  # protocol 2 spells builtins so
    assert not marker.exists() and not (tmp_path / "out").exists()
