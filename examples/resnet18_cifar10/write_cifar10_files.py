"""Write a small CIFAR-10 in its genuine on-disk format (``cifar-10-batches-py``: five training batches, a test batch
and ``batches.meta``, Python 2 pickles of uint8 rows), from real photographs: 32x32 patches of scikit-image's bundled
images (nothing downloads). Labels are the patches' photographs, so the classes are learnable: the six bundled colour
photographs are classes 0-5 (about 417 patches each); classes 6-9 keep their CIFAR-10 names and hold no example, so a
model that predicts only those (e.g. one drowned by DP noise) can score 0 % test accuracy, not the 1/6 of one class.

    python write_cifar10_files.py DATA_DIR [--train 2000] [--test 500]
"""
from __future__ import annotations

import argparse
import pickle
import struct
from pathlib import Path

import numpy as np

from auditkit.data import image_patch_sources, load_image_patches

NAMES = ["airplane", "automobile", "bird", "cat", "deer", "dog", "frog", "horse", "ship", "truck"]


class Py2Pickler(pickle._Pickler):
    """Writes bytes as Python 2 ``str`` opcodes, as the real batches (pickled under Python 2) hold them; protocol 2
    would otherwise write them through ``_codecs.encode``, a call auditkit's safe unpickler refuses."""

    dispatch = pickle._Pickler.dispatch.copy()

    def save_py2_str(self, obj: bytes) -> None:
        if len(obj) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(obj)]) + obj)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(obj)) + obj)
        self.memoize(obj)

    dispatch[bytes] = save_py2_str


def dump(obj: object, path: Path) -> None:
    with open(path, "wb") as f:
        Py2Pickler(f, protocol=2).dump(obj)


def write_batch(path: Path, images: np.ndarray, labels: np.ndarray) -> None:
    """One batch file as CIFAR-10 ships it: b"data" N x 3072 uint8 (the red, green, then blue 32x32 planes)."""
    dump({b"batch_label": path.name.encode(), b"data": images.reshape(len(images), 3072),
          b"labels": labels.tolist(), b"filenames": [f"{i}.png".encode() for i in range(len(images))]}, path)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", type=Path)
    parser.add_argument("--train", type=int, default=2000)
    parser.add_argument("--test", type=int, default=500)
    args = parser.parse_args()
    count = args.train + args.test
    patches = load_image_patches(count, seed=0)  # count x 3 x 32 x 32 in [0, 1]
    sources = image_patch_sources(count, seed=0)
    photos = sorted({source.photo for source in sources})
    labels = np.array([photos.index(source.photo) for source in sources])
    images = (patches.numpy() * 255).round().astype(np.uint8)
    folder = args.data_dir / "cifar-10-batches-py"
    folder.mkdir(parents=True, exist_ok=True)
    for i, part in enumerate(np.array_split(np.arange(args.train), 5), start=1):
        write_batch(folder / f"data_batch_{i}", images[part], labels[part])
    write_batch(folder / "test_batch", images[args.train:], labels[args.train:])
    dump({b"num_cases_per_batch": 10000, b"num_vis": 3072, b"label_names": [n.encode() for n in NAMES]},
         folder / "batches.meta")
    print(f"wrote {args.train} training and {args.test} test images of {len(photos)} photographs to {folder}")


if __name__ == "__main__":
    main()
