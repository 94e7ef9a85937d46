"""CIFAR's python batches read without running their pickles: an unpickler that builds only dicts, lists, strings,
bytes, numbers and numpy arrays (``pickle.Unpickler.find_class`` refuses every other global), and the batch's shape
checked before use.

A pickle can name any importable callable and call it while loading; torchvision's CIFAR loader uses plain
``pickle.load``, so a data folder someone else prepared could run code. Here a batch that names anything else is a
one-line ``DataNotFoundError``, as is one without uint8 ``data`` rows of 3,072 bytes and one label per row.
"""
from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from auditkit.data.dataset import DataNotFoundError

__all__ = ["CIFAR_ROW_BYTES", "RestrictedUnpickler", "load_cifar_batch", "load_pickle"]

CIFAR_ROW_BYTES = 3 * 32 * 32  # one image: the red, green, then blue 32x32 plane, row-major

_ALLOWED = {  # what a numpy array's pickle names (numpy 1.x and 2.x spell the module differently; Python 3 writes
    # protocol-2 bytes through _codecs.encode)
    ("numpy.core.multiarray", "_reconstruct"), ("numpy._core.multiarray", "_reconstruct"),
    ("numpy", "ndarray"), ("numpy", "dtype"), ("_codecs", "encode"),
}


class RestrictedUnpickler(pickle.Unpickler):
    """An unpickler that resolves only the globals a numpy array needs."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) not in _ALLOWED:
            raise pickle.UnpicklingError(f"it names {module}.{name}, which a data file has no need of")
        return super().find_class(module, name)


def load_pickle(path: Path) -> Any:
    """The object pickled in ``path`` (Python 2 strings read as latin-1, as torchvision reads them);
    ``DataNotFoundError`` naming the file if it is not a data pickle."""
    try:
        with open(path, "rb") as f:
            return RestrictedUnpickler(f, encoding="latin1").load()
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError, IndexError) as err:
        raise DataNotFoundError(f"{path} is not a CIFAR python batch: {err}") from None


def load_cifar_batch(path: Path, *, label_key: str = "labels",
                     num_classes: int = 10) -> tuple[np.ndarray, list[int]]:
    """(uint8 N x 3 x 32 x 32 images, N labels in 0..num_classes-1) of one CIFAR python batch.

    CIFAR-10's batches hold ``labels``; CIFAR-100's hold ``fine_labels`` (100 classes) beside ``coarse_labels``.
    """
    entry = load_pickle(path)
    data = entry.get("data") if isinstance(entry, dict) else None
    labels = entry.get(label_key) if isinstance(entry, dict) else None
    if not isinstance(data, np.ndarray) or data.dtype != np.uint8 or data.ndim != 2 or data.shape[1] != CIFAR_ROW_BYTES:
        raise DataNotFoundError(f"{path} is not a CIFAR python batch: it needs 'data', uint8 rows of "
                                f"{CIFAR_ROW_BYTES} bytes")
    if (not isinstance(labels, list) or len(labels) != len(data)
            or not all(isinstance(y, int) and 0 <= y < num_classes for y in labels)):
        raise DataNotFoundError(f"{path} is not a CIFAR python batch: it needs '{label_key}', one integer in "
                                f"0..{num_classes - 1} per row of 'data'")
    return data.reshape(-1, 3, 32, 32), labels
