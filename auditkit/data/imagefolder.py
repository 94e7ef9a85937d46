"""A user's images in torchvision's ``ImageFolder`` layout (``root/<class>/<image files>``), read through
``torchvision.datasets.ImageFolder``.

``root/train/`` and ``root/test/`` in that layout, when both exist, are the split; otherwise the images of ``root``
are split per class at random (``test_fraction`` of each class, seeded: ``numpy.random.default_rng(seed)``).
Every image becomes RGB, resized to ``image_size`` x ``image_size`` (bilinear, antialiased), float32 in [0, 1] as
the other datasets, decoded at its true depth (Pillow's mode, :func:`decode_image`): 8-bit images as pixel / 255
(no normalisation), 16-bit greyscale as sample / 65535, 32-bit float greyscale as it is when in [0, 1]. 65535 is
the full range of the samples stored, whatever depth the data had: an encoder scales 12-bit data up to the 16 bits
PNG stores (RFC 2083, section 9.1, "Sample depth scaling"; sBIT only records the original depth), and
``torchvision.transforms.v2.functional.to_dtype(..., scale=True)`` divides the uint16 that
``torchvision.io.decode_png`` returns by 65535 too. What is wrong with the folder or an image is one line naming
``data.data_dir`` and the folder or file.
"""
from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from torchvision import transforms
from torchvision.datasets import ImageFolder
from torchvision.datasets.folder import IMG_EXTENSIONS, find_classes

from auditkit.data.dataset import DataNotFoundError, Dataset, Split

MAX_IMAGES = 1_000_000
"""The most images a folder may hold (train and test together)."""
MAX_GIB = 16
"""The most memory its float32 tensors may take (N x 3 x S x S x 4 bytes): 60,000 images at 32x32 take 0.7 GiB, at
224x224 34 GiB, which is refused rather than allocated."""
_WHERE = "data.data_dir"
_LAYOUT = "one subfolder of images per class (root/<class>/<image files>)"


def load_imagefolder(data_dir: str | Path | None, *, seed: int, test_fraction: float = 0.2,
                     image_size: int = 32) -> Dataset:
    """The images under ``data_dir``, 3 x ``image_size`` x ``image_size``, labels in the sorted order of the class
    folders (``Dataset.classes`` names them). ``seed`` and ``test_fraction`` make the split when ``data_dir`` has
    no ``train/`` and ``test/`` subfolders; a class keeps at least one training image."""
    if data_dir is None:
        raise DataNotFoundError(f"imagefolder needs {_WHERE} (--data-dir): a folder with {_LAYOUT}")
    root = Path(data_dir)
    if not root.is_dir():
        raise DataNotFoundError(f"{_WHERE} {str(root)!r} is not a folder; imagefolder needs a folder with {_LAYOUT}")
    if (root / "train").is_dir() and (root / "test").is_dir():
        train, test = _folder(root / "train"), _folder(root / "test")
        if test.classes != train.classes:
            raise DataNotFoundError(f"{_WHERE} {str(root)!r}: test/ has the classes {', '.join(test.classes)}; it "
                                    f"must have those of train/: {', '.join(train.classes)}")
        _check_size(root, len(train) + len(test), image_size)
        train_split, test_split = _read(train, image_size), _read(test, image_size)
        classes, how = train.classes, "its train/ and test/ folders"
    else:
        folder = _folder(root)
        _check_size(root, len(folder), image_size)
        images = _read(folder, image_size)
        train_ix, test_ix = stratified_split(images.y.numpy(), test_fraction, seed=seed)
        if len(test_ix) == 0:
            raise DataNotFoundError(f"{_WHERE} {str(root)!r}: data.test_fraction {test_fraction!r} of its "
                                    f"{len(images)} images leaves no test image; raise it or add images")
        train_split = Split(images.x[train_ix], images.y[train_ix])
        test_split = Split(images.x[test_ix], images.y[test_ix])
        classes, how = folder.classes, f"split {1 - test_fraction:g} / {test_fraction:g} per class, seeded"
    return Dataset(
        name="imagefolder",
        train=train_split,
        test=test_split,
        num_classes=len(classes),
        input_shape=(3, image_size, image_size),
        source=(f"image folder {str(root)!r} read through torchvision's ImageFolder ({how}), RGB "
                f"{image_size}x{image_size}"),
        classes=tuple(classes),
    )


def stratified_split(labels: np.ndarray, test_fraction: float, *, seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Sorted (train, test) indices: ``round(test_fraction * n_c)`` random images of each class c go to test, at
    most ``n_c - 1``. A deterministic function of (labels, test_fraction, seed)."""
    if not 0 < test_fraction < 1:
        raise ValueError(f"data.test_fraction must be a number in (0, 1), got {test_fraction!r}")
    rng = np.random.default_rng(seed)
    test = []
    for label in np.unique(labels):
        members = rng.permutation(np.flatnonzero(labels == label))
        test.append(members[:min(round(test_fraction * len(members)), len(members) - 1)])
    is_test = np.zeros(len(labels), dtype=bool)
    is_test[np.concatenate(test)] = True
    return torch.from_numpy(np.flatnonzero(~is_test)), torch.from_numpy(np.flatnonzero(is_test))


def _folder(root: Path) -> ImageFolder:
    """torchvision's ImageFolder over ``root``, after checking its classes ourselves so each problem is one line
    naming the folder (torchvision's own messages do not name data.data_dir)."""
    classes = find_classes(root)[0] if any(p.is_dir() for p in root.iterdir()) else []
    if not classes:
        raise DataNotFoundError(f"{_WHERE} {str(root)!r} has no class subfolders; imagefolder needs {_LAYOUT}")
    if len(classes) < 2:
        raise DataNotFoundError(f"{_WHERE} {str(root)!r} has one class subfolder ({classes[0]}); imagefolder needs "
                                "at least 2")
    for name in classes:
        if not any(p.is_file() and p.suffix.lower() in IMG_EXTENSIONS for p in (root / name).rglob("*")):
            raise DataNotFoundError(f"{_WHERE} {str(root)!r}: class folder {name!r} holds no image "
                                    f"({', '.join(IMG_EXTENSIONS)})")
    return ImageFolder(str(root))


def _check_size(root: Path, count: int, image_size: int) -> None:
    """Refuse, before decoding, a folder whose float32 tensors would pass :data:`MAX_IMAGES` or :data:`MAX_GIB`."""
    gib = count * 3 * image_size**2 * 4 / 2**30
    if count > MAX_IMAGES or gib > MAX_GIB:
        raise DataNotFoundError(f"{_WHERE} {str(root)!r} holds {count:,} images, {gib:.1f} GiB as float32 at "
                                f"data.image_size {image_size}; at most {MAX_IMAGES:,} images and {MAX_GIB} GiB: lower "
                                f"data.image_size or use a subset")


def _read(folder: ImageFolder, image_size: int) -> Split:
    """Every image of ``folder`` decoded at its depth and resized (:func:`decode_image`), as a [0, 1] float32
    Split."""
    images = torch.empty((len(folder), 3, image_size, image_size), dtype=torch.float32)
    for i, (path, _) in enumerate(folder.samples):
        images[i] = decode_image(path, image_size)
    return Split(images, torch.as_tensor(folder.targets, dtype=torch.int64))


def decode_image(path: str | Path, image_size: int) -> torch.Tensor:
    """The image at ``path`` as 3 x ``image_size`` x ``image_size`` float32 in [0, 1], by its Pillow mode:

    - 16-bit unsigned greyscale (``I;16``, ``I;16B``, ``I;16L``, ``I;16N``, and ``I`` that Pillow unpacked from
      16-bit unsigned samples): sample / 65535;
    - 32-bit float greyscale (``F``): the values as they are, if all lie in [0, 1]; otherwise refused, since a
      rescale by the image's own range would make each image's scale its own;
    - any other integer ``I`` (32-bit or signed samples): refused, its range being undeclared;
    - colour or alpha with 16-bit samples (``RGB;16B`` PNG, ``RGB;16L`` TIFF, 16-bit grey + alpha): refused,
      since Pillow, having no 16-bit colour mode, keeps only their high 8 bits;
    - every other mode (1, L, LA, P, RGB, RGBA, CMYK, ...): converted to RGB as Pillow does (torchvision's loader),
      pixel / 255.

    Resized bilinear with antialiasing (Pillow's resize, as ``torchvision.transforms.Resize``), greyscale repeated on
    the three channels as Pillow's RGB conversion does. A refused or unreadable image is a one-line
    ``DataNotFoundError`` naming the file."""
    try:
        with Image.open(path) as image:
            return _decoded(image, str(path), image_size)
    except DataNotFoundError:  # an OSError itself: the refusal above, already one line
        raise
    except UnidentifiedImageError:  # its message repeats the path inside a file object's repr
        raise DataNotFoundError(f"{_WHERE}: cannot read image {str(path)!r} (not an image format PIL knows)") from None
    except (OSError, ValueError, SyntaxError) as err:  # PIL's errors on truncated or corrupt files
        raise DataNotFoundError(" ".join(f"{_WHERE}: cannot read image {str(path)!r} ({type(err).__name__}: {err})"
                                         .split())) from None


_UNSIGNED_16 = ("I;16", "I;16B", "I;16L", "I;16N")
_SAMPLES_16 = (";16B", ";16L", ";16N")  # a raw mode of 16-bit samples ends so ("RGB;16B"); BMP's "BGR;16" is 5-6-5


def _raw_mode(image: Image.Image) -> str:
    """How the file's samples are packed (Pillow's raw mode of its first tile, e.g. ``RGB;16B``), read before the
    image is loaded; empty if Pillow gives none."""
    args = image.tile[0].args if image.tile else None
    raw = args[0] if isinstance(args, tuple) and args else args
    return raw if isinstance(raw, str) else ""


def _decoded(image: Image.Image, path: str, image_size: int) -> torch.Tensor:
    raw = _raw_mode(image)
    if image.mode in _UNSIGNED_16 or (image.mode == "I" and raw in _UNSIGNED_16):
        return _grey(np.asarray(image).astype(np.float32) / 65535.0, image_size)
    if image.mode == "F":
        values = np.asarray(image, dtype=np.float32)
        if not np.isfinite(values).all():
            raise DataNotFoundError(f"{_WHERE}: image {path!r} is 32-bit float and holds NaN or infinite values; "
                                    "float images must hold values in [0, 1]")
        if values.min() < 0.0 or values.max() > 1.0:
            raise DataNotFoundError(f"{_WHERE}: image {path!r} is 32-bit float with values in [{values.min():g}, "
                                    f"{values.max():g}]; float images must hold values in [0, 1]")
        return _grey(values, image_size)
    if image.mode == "I":
        raise DataNotFoundError(f"{_WHERE}: image {path!r} holds {raw or '32-bit'} integer samples, whose range the "
                                "file does not declare; save it as 8- or 16-bit unsigned, or as float in [0, 1]")
    if raw.endswith(_SAMPLES_16):
        raise DataNotFoundError(f"{_WHERE}: image {path!r} has 16-bit {image.mode} samples ({raw}), which Pillow "
                                "decodes to their high 8 bits only; save it as 8-bit colour or 16-bit greyscale")
    return _rgb_resize(image_size)(image.convert("RGB")).float().div_(255.0)


@functools.cache
def _rgb_resize(image_size: int) -> transforms.Compose:
    """torchvision's resize of an 8-bit RGB image to ``image_size`` squared, as a uint8 tensor."""
    return transforms.Compose([transforms.Resize((image_size, image_size)), transforms.PILToTensor()])


def _grey(values: np.ndarray, image_size: int) -> torch.Tensor:
    """A greyscale float32 image in [0, 1], resized as the 8-bit path is (Pillow's bilinear resize, here in its
    float32 mode ``F``) and repeated on the three channels; the clamp only undoes the filter's rounding past 0 or 1
    (its weights are >= 0)."""
    resized = Image.fromarray(np.ascontiguousarray(values, dtype=np.float32)).resize(
        (image_size, image_size), Image.Resampling.BILINEAR)
    return torch.from_numpy(np.array(resized, dtype=np.float32)).clamp_(0.0, 1.0).expand(3, -1, -1)
