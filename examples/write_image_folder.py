"""Write an image folder in torchvision's ``ImageFolder`` layout (``ROOT/<class>/<image>.png``) from real
photographs: 32x32 patches of scikit-image's bundled images, one class per photograph (nothing downloads).

    python examples/write_image_folder.py photos [--per-class 200]
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from PIL import Image

from auditkit.data import image_patch_sources, load_image_patches


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("root", type=Path)
    parser.add_argument("--count", type=int, default=1200, help="patches in all")
    args = parser.parse_args()
    patches = (load_image_patches(args.count, seed=1).numpy() * 255).round().astype(np.uint8)
    for i, (patch, source) in enumerate(zip(patches, image_patch_sources(args.count, seed=1))):
        folder = args.root / source.photo
        folder.mkdir(parents=True, exist_ok=True)
        Image.fromarray(patch.transpose(1, 2, 0)).save(folder / f"{i:05d}.png")
    classes = sorted(p.name for p in args.root.iterdir() if p.is_dir())
    print(f"wrote {args.count} images in {len(classes)} classes ({', '.join(classes)}) to {args.root}")


if __name__ == "__main__":
    main()
