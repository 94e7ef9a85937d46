"""MNIST, Fashion-MNIST, SVHN, CIFAR-10 and CIFAR-100 read from a local folder in torchvision's layouts.

MNIST and Fashion-MNIST go through torchvision's own loaders; CIFAR's batches through ``auditkit.data.safe_pickle``
(they are pickles, which torchvision loads with plain ``pickle.load``) and SVHN's .mat files through scipy as
torchvision does. Checksums are not verified, so subsets and re-packed files are accepted.

Nothing is downloaded unless ``download=True``. When files are missing we raise :class:`DataNotFoundError`
ourselves, before torchvision is asked, so the message says exactly which files go where.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch
from torchvision.datasets import CIFAR10, CIFAR100, MNIST, SVHN, FashionMNIST

from auditkit.data.dataset import DataNotFoundError, Dataset, Split
from auditkit.data.safe_pickle import load_cifar_batch

# torchvision reads uncompressed IDX files from ROOT/MNIST/raw/ and pickled batches from ROOT/cifar-10-batches-py/.
MNIST_FILES = tuple(Path(name).stem for name, _ in MNIST.resources)
FASHION_MNIST_FILES = tuple(Path(name).stem for name, _ in FashionMNIST.resources)
SVHN_FILES = tuple(SVHN.split_list[split][1] for split in ("train", "test"))  # .mat files read with scipy.io.loadmat
CIFAR10_FILES = tuple(name for name, _ in CIFAR10.train_list + CIFAR10.test_list) + (CIFAR10.meta["filename"],)
CIFAR100_FILES = tuple(name for name, _ in CIFAR100.train_list + CIFAR100.test_list) + (CIFAR100.meta["filename"],)
_HINT = "(or pass --download on a machine with network access)"


def _data_root(label: str, data_dir: str | Path | None, folder: str, files: tuple[str, ...]) -> Path:
    """``data_dir`` as a Path; without one, a one-line DataNotFoundError that says what the folder must hold."""
    if data_dir is None:
        raise DataNotFoundError(
            f"{label} needs a data folder: pass --data-dir DIR with {', '.join(files)} in DIR/{folder}/ {_HINT}"
        )
    return Path(data_dir)


def _require_files(label: str, root: Path, folder: str, files: tuple[str, ...]) -> None:
    """Raise a one-line DataNotFoundError unless all ``files`` are in ``root/folder``."""
    target = root / folder
    if not all((target / name).is_file() for name in files):
        raise DataNotFoundError(f"{label} not found in '{root}': put {', '.join(files)} in {target}/ {_HINT}")


def _split(images: torch.Tensor, labels: torch.Tensor | list[int]) -> Split:
    """uint8 N x C x H x W images and integer labels -> a float32 [0, 1] :class:`Split`."""
    return Split(images.float().div_(255.0), torch.as_tensor(labels, dtype=torch.int64))


def _load_idx(cls: type[MNIST], name: str, label: str, data_dir: str | Path | None, download: bool,
              source: str) -> Dataset:
    """An MNIST-format dataset (``cls`` is MNIST or a subclass) from ``data_dir/<cls name>/raw/``."""
    folder, files = f"{cls.__name__}/raw", tuple(Path(f).stem for f, _ in cls.resources)
    root = _data_root(label, data_dir, folder, files)
    if download:
        cls(root, train=True, download=True)
    _require_files(label, root, folder, files)
    train, test = (cls(root, train=flag) for flag in (True, False))
    return Dataset(
        name=name,
        train=_split(train.data.unsqueeze(1), train.targets),
        test=_split(test.data.unsqueeze(1), test.targets),
        num_classes=10,
        input_shape=(1, 28, 28),
        source=source,
    )


def load_mnist(data_dir: str | Path | None, *, download: bool = False) -> Dataset:
    """MNIST from ``data_dir/MNIST/raw/`` (the four uncompressed IDX files), 1x28x28 in [0, 1], 10 classes."""
    return _load_idx(MNIST, "mnist", "MNIST", data_dir, download,
                     "MNIST (LeCun, Cortes & Burges) read through torchvision from --data-dir")


def load_fashion_mnist(data_dir: str | Path | None, *, download: bool = False) -> Dataset:
    """Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) from ``data_dir/FashionMNIST/raw/``, MNIST's format and shape."""
    return _load_idx(FashionMNIST, "fashion-mnist", "Fashion-MNIST", data_dir, download,
                     "Fashion-MNIST (Xiao, Rasul & Vollgraf 2017) read through torchvision from --data-dir")


def _read_svhn_mat(path: Path) -> tuple[torch.Tensor, np.ndarray]:
    """One SVHN .mat file as torchvision's SVHN reads it (X: 32x32x3xN -> Nx3x32x32; label 10, the digit 0, -> 0).

    Read here rather than by torchvision.datasets.SVHN, which refuses files whose md5 differs from the full
    release's, so subsets would be rejected (as for CIFAR-10 above).
    """
    import scipy.io  # on demand: only SVHN needs it

    mat = scipy.io.loadmat(str(path))
    labels = mat["y"].astype(np.int64).squeeze(axis=1)
    np.place(labels, labels == 10, 0)
    return torch.from_numpy(np.ascontiguousarray(np.transpose(mat["X"], (3, 2, 0, 1)))), labels


def load_svhn(data_dir: str | Path | None, *, download: bool = False) -> Dataset:
    """SVHN (Netzer et al. 2011, cropped digits) from ``data_dir/svhn/`` (train_32x32.mat, test_32x32.mat), 3x32x32.

    ``download`` fetches through torchvision's SVHN; labels are 0..9 as torchvision gives them.
    """
    root = _data_root("SVHN", data_dir, "svhn", SVHN_FILES)
    if download:
        for split in ("train", "test"):
            SVHN(root / "svhn", split=split, download=True)
    _require_files("SVHN", root, "svhn", SVHN_FILES)
    train, test = (_read_svhn_mat(root / "svhn" / name) for name in SVHN_FILES)
    return Dataset(
        name="svhn",
        train=_split(*train),
        test=_split(*test),
        num_classes=10,
        input_shape=(3, 32, 32),
        source="SVHN (Netzer et al. 2011) read in torchvision's layout from --data-dir",
    )


def _stacked(batches: list[tuple[np.ndarray, list[int]]]) -> tuple[torch.Tensor, list[int]]:
    """The batches' images (N x 3 x 32 x 32 uint8) and labels, concatenated in file order."""
    return torch.from_numpy(np.concatenate([images for images, _ in batches])), [y for _, ys in batches for y in ys]


def load_cifar10(data_dir: str | Path | None, *, download: bool = False) -> Dataset:
    """CIFAR-10 from ``data_dir/cifar-10-batches-py/`` (python pickled batches), 3x32x32 in [0, 1], 10 classes."""
    root = _data_root("CIFAR-10", data_dir, CIFAR10.base_folder, CIFAR10_FILES)
    if download:
        CIFAR10(root, train=True, download=True)  # torchvision's download verifies the archive's checksum
    _require_files("CIFAR-10", root, CIFAR10.base_folder, CIFAR10_FILES)
    folder = root / CIFAR10.base_folder
    train, test = ([load_cifar_batch(folder / name) for name, _ in files]
                   for files in (CIFAR10.train_list, CIFAR10.test_list))
    return Dataset(
        name="cifar10",
        train=_split(*_stacked(train)),
        test=_split(*_stacked(test)),
        num_classes=10,
        input_shape=(3, 32, 32),
        source="CIFAR-10 (Krizhevsky 2009) read in torchvision's layout from --data-dir",
    )


def load_cifar100(data_dir: str | Path | None, *, download: bool = False) -> Dataset:
    """CIFAR-100 (Krizhevsky 2009) from ``data_dir/cifar-100-python/`` (train, test, meta), 3x32x32, the 100 fine
    labels (``fine_labels``, as torchvision's CIFAR100 reads them)."""
    root = _data_root("CIFAR-100", data_dir, CIFAR100.base_folder, CIFAR100_FILES)
    if download:
        CIFAR100(root, train=True, download=True)  # torchvision's download verifies the archive's checksum
    _require_files("CIFAR-100", root, CIFAR100.base_folder, CIFAR100_FILES)
    folder = root / CIFAR100.base_folder
    train, test = ([load_cifar_batch(folder / name, label_key="fine_labels", num_classes=100) for name, _ in files]
                   for files in (CIFAR100.train_list, CIFAR100.test_list))
    return Dataset(
        name="cifar100",
        train=_split(*_stacked(train)),
        test=_split(*_stacked(test)),
        num_classes=100,
        input_shape=(3, 32, 32),
        source="CIFAR-100 (Krizhevsky 2009) read in torchvision's layout from --data-dir",
    )
