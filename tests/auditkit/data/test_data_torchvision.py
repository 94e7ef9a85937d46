"""MNIST, Fashion-MNIST, SVHN, CIFAR-10 and CIFAR-100 through torchvision's real loaders and layouts, on tiny genuine-format files."""
import pickle
import socket
import struct

import numpy as np
import pytest
import scipy.io
import torch

from auditkit.data import DataNotFoundError, load_dataset

MNIST_FILES = ["train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"]
CIFAR_FILES = ["data_batch_1", "data_batch_2", "data_batch_3", "data_batch_4", "data_batch_5", "test_batch",
               "batches.meta"]


@pytest.fixture(autouse=True)
def no_network(monkeypatch):
    """Any attempt to open a connection fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("network access attempted")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)


def test_mnist_round_trips_through_torchvision(mnist_dir):
    root, data = mnist_dir
    dataset = load_dataset("mnist", data_dir=root)
    assert dataset.name == "mnist" and dataset.num_classes == 10 and dataset.input_shape == (1, 28, 28)
    for split, prefix in ((dataset.train, "train"), (dataset.test, "t10k")):
        images, labels = data[prefix]
        assert split.x.shape == (len(labels), 1, 28, 28) and split.x.dtype == torch.float32
        assert split.y.dtype == torch.int64
        torch.testing.assert_close(split.x, torch.from_numpy(images).float().unsqueeze(1) / 255, rtol=0, atol=0)
        assert split.y.tolist() == labels.tolist()
        assert split.x[0, 0, 0, 0] == 0.0 and split.x[0, 0, 0, 1] == 1.0


class Py2Pickler(pickle._Pickler):
    """Writes bytes as Python 2 ``str`` opcodes, as in the real CIFAR-10 batches (pickled under Python 2)."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj: bytes) -> None:
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def write_py2_pickle(path, obj) -> None:
    with open(path, "wb") as f:
        Py2Pickler(f, protocol=2).dump(obj)


def write_cifar_batch(path, images: np.ndarray, labels: np.ndarray) -> None:
    """A batch as in the real files: b"data" uint8 N x 3072 (each row the red, green, then blue 32x32 plane)."""
    write_py2_pickle(path, {b"batch_label": b"test", b"data": images.reshape(len(images), 3072),
                            b"labels": labels.tolist(), b"filenames": [b"x.png"] * len(images)})


@pytest.fixture
def cifar_dir(tmp_path):
    rng = np.random.default_rng(1)
    folder = tmp_path / "cifar-10-batches-py"
    folder.mkdir()
    batches = {}
    for name, n in [(f"data_batch_{i}", 3 + i) for i in range(1, 6)] + [("test_batch", 5)]:
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)  # N x C x H x W, as in the files
        labels = rng.integers(0, 10, size=n)
        write_cifar_batch(folder / name, images, labels)
        batches[name] = (images, labels)
    names = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]
    write_py2_pickle(folder / "batches.meta", {b"num_cases_per_batch": 10000, b"num_vis": 3072,
                                               b"label_names": [name.encode() for name in names]})
    return tmp_path, batches


def test_cifar10_round_trips_through_torchvision(cifar_dir):
    root, batches = cifar_dir
    dataset = load_dataset("cifar10", data_dir=root)
    assert dataset.name == "cifar10" and dataset.num_classes == 10 and dataset.input_shape == (3, 32, 32)
    train_images = np.concatenate([batches[f"data_batch_{i}"][0] for i in range(1, 6)])
    train_labels = np.concatenate([batches[f"data_batch_{i}"][1] for i in range(1, 6)])
    for split, images, labels in ((dataset.train, train_images, train_labels), (dataset.test, *batches["test_batch"])):
        assert split.x.shape == (len(labels), 3, 32, 32) and split.x.dtype == torch.float32
        assert split.y.dtype == torch.int64
        torch.testing.assert_close(split.x, torch.from_numpy(images).float() / 255, rtol=0, atol=0)
        assert split.y.tolist() == labels.tolist()
    # channel order: the first 1024 bytes of a row are the red plane, row-major
    first_row = batches["data_batch_1"][0][0].reshape(3072)
    assert dataset.train.x[0, 0, 0, 1] * 255 == first_row[1]
    assert dataset.train.x[0, 1, 0, 0] * 255 == first_row[1024]
    assert dataset.train.x[0, 2, 1, 0] * 255 == first_row[2048 + 32]


SVHN_FILES = ["train_32x32.mat", "test_32x32.mat"]
CIFAR100_FILES = ["train", "test", "meta"]


def write_cifar100(root, n_train=7, n_test=5, seed=2):
    """cifar-100-python/{train,test,meta}: py2 pickles with b"data", b"fine_labels" (0..99) and b"coarse_labels"."""
    rng = np.random.default_rng(seed)
    folder = root / "cifar-100-python"
    folder.mkdir()
    data = {}
    for name, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, size=(n, 3, 32, 32), dtype=np.uint8)
        fine = rng.integers(0, 100, size=n)
        fine[0] = 99  # the top of the label range
        write_py2_pickle(folder / name, {b"filenames": [b"x.png"] * n, b"batch_label": b"test",
                                         b"fine_labels": fine.tolist(), b"coarse_labels": (fine // 5).tolist(),
                                         b"data": images.reshape(n, 3072)})
        data[name] = (images, fine)
    write_py2_pickle(folder / "meta", {b"fine_label_names": [b"c%d" % i for i in range(100)],
                                       b"coarse_label_names": [b"s%d" % i for i in range(20)]})
    return data


def test_cifar100_reads_the_fine_labels(tmp_path):
    data = write_cifar100(tmp_path)
    dataset = load_dataset("cifar100", data_dir=tmp_path)
    assert dataset.name == "cifar100" and dataset.num_classes == 100 and dataset.input_shape == (3, 32, 32)
    for split, key in ((dataset.train, "train"), (dataset.test, "test")):
        images, fine = data[key]
        assert split.y.tolist() == fine.tolist()
        torch.testing.assert_close(split.x * 255, torch.from_numpy(images).float(), rtol=0, atol=1e-4)


def test_cifar100_label_out_of_range_is_one_line(tmp_path):
    write_cifar100(tmp_path)
    folder = tmp_path / "cifar-100-python"
    write_py2_pickle(folder / "test", {b"data": np.zeros((1, 3072), np.uint8), b"fine_labels": [100]})
    with pytest.raises(DataNotFoundError) as caught:
        load_dataset("cifar100", data_dir=tmp_path)
    assert str(caught.value) == (f"{folder / 'test'} is not a CIFAR python batch: it needs 'fine_labels', one integer "
                                 "in 0..99 per row of 'data'")


def test_fashion_mnist_reads_torchvision_fashionmnist_folder(tmp_path, make_mnist):
    make_mnist(tmp_path)
    (tmp_path / "MNIST").rename(tmp_path / "FashionMNIST")  # the same IDX files, in torchvision's FashionMNIST folder
    dataset = load_dataset("fashion-mnist", data_dir=tmp_path)
    assert dataset.name == "fashion-mnist" and dataset.input_shape == (1, 28, 28) and dataset.num_classes == 10
    assert dataset.train.x.shape == (20, 1, 28, 28) and dataset.test.x.shape == (10, 1, 28, 28)
    assert dataset.train.x[0, 0, 0, 1] == 1.0


def write_svhn(root, n_train=6, n_test=4, seed=0):
    """SVHN's .mat files: X is 32 x 32 x 3 x N uint8, y is N x 1 with label 10 for the digit 0."""
    rng = np.random.default_rng(seed)
    (root / "svhn").mkdir()
    data = {}
    for split, n in (("train", n_train), ("test", n_test)):
        images = rng.integers(0, 256, size=(32, 32, 3, n), dtype=np.uint8)
        labels = np.arange(n, dtype=np.uint8).reshape(n, 1) % 10 + 1  # 1..10
        scipy.io.savemat(root / "svhn" / f"{split}_32x32.mat", {"X": images, "y": labels})
        data[split] = (images, labels)
    return data


def test_svhn_round_trips_through_torchvision(tmp_path):
    data = write_svhn(tmp_path)
    dataset = load_dataset("svhn", data_dir=tmp_path)
    assert dataset.name == "svhn" and dataset.input_shape == (3, 32, 32) and dataset.num_classes == 10
    for split, key in ((dataset.train, "train"), (dataset.test, "test")):
        images, labels = data[key]
        assert split.x.shape == (images.shape[3], 3, 32, 32) and split.y.dtype == torch.int64
        assert split.y.tolist() == [int(y) % 10 for y in labels[:, 0]]  # torchvision maps 10 to 0
        torch.testing.assert_close(split.x[1, 2, 3, 4] * 255, torch.tensor(float(images[3, 4, 2, 1])))


@pytest.mark.parametrize("name, folder, files", [("mnist", "MNIST/raw", MNIST_FILES),
                                                 ("fashion-mnist", "FashionMNIST/raw", MNIST_FILES),
                                                 ("svhn", "svhn", SVHN_FILES),
                                                 ("cifar100", "cifar-100-python", CIFAR100_FILES),
                                                 ("cifar10", "cifar-10-batches-py", CIFAR_FILES)])
def test_missing_files_say_where_to_put_which(tmp_path, name, folder, files):
    with pytest.raises(DataNotFoundError) as caught:
        load_dataset(name, data_dir=tmp_path, download=False)
    message = str(caught.value)
    assert isinstance(caught.value, FileNotFoundError)
    assert "\n" not in message
    assert f"{tmp_path / folder}/" in message
    assert all(file in message for file in files)
    assert "--download" in message


@pytest.mark.parametrize("name", ["mnist", "fashion-mnist", "svhn", "cifar10", "cifar100"])
def test_no_data_dir_asks_for_one(name):
    with pytest.raises(DataNotFoundError, match="needs a data folder: pass --data-dir DIR"):
        load_dataset(name)


def test_one_missing_file_is_reported(mnist_dir):
    root, _ = mnist_dir
    (root / "MNIST" / "raw" / "t10k-labels-idx1-ubyte").unlink()
    with pytest.raises(DataNotFoundError, match="MNIST not found in"):
        load_dataset("mnist", data_dir=root)


def test_missing_svhn_message_is_exact(tmp_path):
    with pytest.raises(DataNotFoundError) as caught:
        load_dataset("svhn", data_dir=tmp_path)
    assert str(caught.value) == (f"SVHN not found in '{tmp_path}': put train_32x32.mat, test_32x32.mat in "
                                 f"{tmp_path / 'svhn'}/ (or pass --download on a machine with network access)")
