"""The dataset catalog: :data:`DATASETS` and :func:`load_dataset`, one entry point for every dataset by name."""
from __future__ import annotations

import os
from pathlib import Path

from auditkit.data.dataset import Dataset
from auditkit.data.embedded import load_digits_dataset, load_mnist_5k_dataset
from auditkit.data.factory import dataset_from_factory, is_dataset_factory

DATASETS = ("mnist-5k", "digits", "mnist", "fashion-mnist", "svhn", "cifar10", "cifar100", "imagefolder")
EMBEDDED = ("mnist-5k", "digits")  # shipped with installed libraries: no data_dir, no download


def load_dataset(name: str, *, data_dir: str | Path | None = None, download: bool = False, seed: int | None = None,
                 test_fraction: float = 0.2, image_size: int = 32) -> Dataset:
    """Load dataset ``name`` (one of :data:`DATASETS`, or a user's factory ``my_data.py:make_data``,
    ``auditkit.data.factory``).

    ``mnist-5k`` and ``digits`` are embedded and ignore ``data_dir``; ``mnist``, ``fashion-mnist``, ``svhn``, ``cifar10`` and ``cifar100`` are read from ``data_dir``
    through torchvision and are downloaded there only when ``download`` is true. Missing files raise
    :class:`~auditkit.data.DataNotFoundError` saying where to put which files. ``imagefolder``: the images of
    ``data_dir`` in torchvision's ImageFolder layout at ``image_size`` (``auditkit.data.imagefolder``); without
    ``train/`` and ``test/`` subfolders split with ``test_fraction`` and ``seed``, which it then needs.
    """
    if is_dataset_factory(name):
        return dataset_from_factory(name)
    if name == "mnist-5k":
        return load_mnist_5k_dataset()
    if name == "digits":
        return load_digits_dataset()
    if name == "imagefolder":
        # Imported on demand: torchvision.datasets adds seconds to the import of auditkit.data.
        from auditkit.data.imagefolder import load_imagefolder

        if seed is None:
            raise ValueError("imagefolder needs a seed for its train/test split, got None")
        return load_imagefolder(data_dir, seed=seed, test_fraction=test_fraction, image_size=image_size)
    if name in DATASETS:
        # Imported on demand: torchvision.datasets adds seconds to the import of auditkit.data.
        from auditkit.data import torchvision_sets

        loader = {"mnist": torchvision_sets.load_mnist, "fashion-mnist": torchvision_sets.load_fashion_mnist,
                  "svhn": torchvision_sets.load_svhn, "cifar10": torchvision_sets.load_cifar10,
                  "cifar100": torchvision_sets.load_cifar100}[name]
        return loader(data_dir, download=download)
    raise ValueError(f"dataset must be one of {', '.join(DATASETS)}, got {name!r}")


def dataset_available(name: str, data_dir: str | Path | None) -> bool:
    """Whether ``load_dataset(name, data_dir=data_dir)`` finds its files without downloading."""
    if name in EMBEDDED or is_dataset_factory(name):  # a factory makes its data itself
        return True
    if data_dir is None:
        return False
    if name == "imagefolder":  # a folder with subfolders; what they hold is checked on loading
        return Path(data_dir).is_dir() and any(p.is_dir() for p in Path(data_dir).iterdir())
    folder, files = _torchvision_files(name, Path(data_dir))
    return all((folder / f).is_file() for f in files)


def dataset_files(name: str, data_dir: str | Path | None) -> list[Path]:
    """The files ``load_dataset(name, data_dir=data_dir)`` reads from ``data_dir`` (those present): a torchvision
    layout's files, or every image file under an image folder (links followed, as torchvision's ImageFolder follows
    them, each folder once); none for the embedded datasets and factories, which read no ``data_dir``."""
    if name in EMBEDDED or is_dataset_factory(name) or name not in DATASETS or data_dir is None:
        return []
    if name == "imagefolder":
        from torchvision.datasets.folder import IMG_EXTENSIONS  # on demand, as in load_dataset

        return _files_under(Path(data_dir), IMG_EXTENSIONS)
    folder, files = _torchvision_files(name, Path(data_dir))
    return [folder / f for f in files if (folder / f).is_file()]


def _torchvision_files(name: str, data_dir: Path) -> tuple[Path, tuple[str, ...]]:
    """The folder under ``data_dir`` a torchvision-layout dataset is read from, and its files' names."""
    from auditkit.data import torchvision_sets  # on demand, as in load_dataset

    if name == "mnist":
        return data_dir / "MNIST" / "raw", torchvision_sets.MNIST_FILES
    if name == "fashion-mnist":
        return data_dir / "FashionMNIST" / "raw", torchvision_sets.FASHION_MNIST_FILES
    if name == "svhn":
        return data_dir / "svhn", torchvision_sets.SVHN_FILES
    if name == "cifar100":
        return data_dir / "cifar-100-python", torchvision_sets.CIFAR100_FILES
    return data_dir / "cifar-10-batches-py", torchvision_sets.CIFAR10_FILES


def _files_under(root: Path, extensions: tuple[str, ...]) -> list[Path]:
    """The files under ``root`` whose names end in one of ``extensions`` (any case), folders reached through links
    included, each real folder walked once (a link loop ends)."""
    found, seen = [], set()
    for folder, subfolders, names in os.walk(root, followlinks=True):
        real = os.path.realpath(folder)
        if real in seen:
            subfolders.clear()
            continue
        seen.add(real)
        subfolders.sort()
        found += [Path(folder) / n for n in sorted(names) if n.lower().endswith(extensions)
                  and os.path.isfile(os.path.join(folder, n))]
    return found
