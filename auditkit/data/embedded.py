"""Real data that ships with the installed libraries and needs no download.

* ``digits``: scikit-learn's bundled handwritten digits (1,797 real 8x8 scans, 10 classes), resized to
  1x28x28 so MNIST-shaped models run unchanged, with one fixed stratified train/test split.
* natural-image patches: 32x32 RGB patches (CIFAR-shaped) cut from scikit-image's bundled photographs,
  the default targets for gradient-inversion attacks.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

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
    )


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
