"""Benchmark: success table of clean iDLG on single natural-image crops, LeNet (sigmoid, DLG init), several seeds.

How often the attack's preset reaches SSIM 0.9, the measure behind the presets' restarts (see
``attacks/gradient_inversion.py``). With torch 2.15 on a 2-core CPU: restarts 1 gave 21 of 24 (3 starts stalled
at SSIM < 0.02), the preset's 4 gave 24 of 24 (min 0.915). About 15-30 minutes on a 2-core CPU.

Crops: the centre 32x32 crop of eight scikit-image photographs, each downscaled (anti-aliased) to 128 px on its
short side as auditkit's own patches are; grey photos repeated to 3 channels. Label: crop index mod 10.
Per case (crop x seed): the model is ``auditkit.stages.inversion.attacked_model("lenet", seed=seed)`` (what
``auditkit attack idlg --seed SEED`` attacks), the observation ``auditkit.attacks.per_image_gradients`` of that one image,
and the attack ``auditkit.attacks.idlg(..., seed=seed)`` at its preset (plus --settings overrides); SSIM by
``auditkit.attacks.metrics.ssim`` (scikit-image). One attack per image (one single-image client).

    python benchmarks/bench_inversion_success.py --out idlg.json [--seeds 0 1 2] [--settings '{"restarts": 1}']
        [--attack idlg|dlg|inverting_gradients]
"""
from __future__ import annotations

import argparse
import json
import platform
import time

import numpy as np
import skimage
import skimage.data
import torch
from skimage.transform import resize

from auditkit import attacks
from auditkit.attacks import metrics
from auditkit.stages.inversion import attacked_model

PHOTOS = ("astronaut", "camera", "coffee", "chelsea", "rocket", "coins", "immunohistochemistry", "hubble_deep_field")
SIZE = 32
SHAPE = (3, SIZE, SIZE)


def crop(name: str) -> tuple[torch.Tensor, tuple[int, int]]:
    image = getattr(skimage.data, name)()
    if image.ndim == 2:
        image = np.repeat(image[:, :, None], 3, axis=2)
    h, w = image.shape[:2]
    scale = 128 / min(h, w)
    photo = resize(image[:, :, :3], (round(h * scale), round(w * scale), 3), anti_aliasing=True,
                   preserve_range=True) / 255.0
    photo = np.clip(photo, 0.0, 1.0).astype(np.float32)
    top, left = (photo.shape[0] - SIZE) // 2, (photo.shape[1] - SIZE) // 2
    patch = photo[top : top + SIZE, left : left + SIZE].transpose(2, 0, 1).copy()
    if patch.std() < 0.05:  # a flat crop is trivially matched and would flatter the table
        raise ValueError(f"the centre crop of {name!r} is nearly flat (std {patch.std():.3f})")
    return torch.tensor(patch), (top, left)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", required=True)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--photos", nargs="+", default=list(PHOTOS))
    parser.add_argument("--settings", default="{}", help="JSON overrides of the iDLG preset")
    parser.add_argument("--attack", default="idlg")
    args = parser.parse_args()
    overrides = json.loads(args.settings)
    rows = []
    for index, name in enumerate(args.photos):
        image, at = crop(name)
        label = PHOTOS.index(name) % 10 if name in PHOTOS else index % 10
        for seed in args.seeds:
            model = attacked_model("lenet", SHAPE, seed=seed)
            observed = attacks.per_image_gradients(model, image[None], torch.tensor([label]))
            start = time.perf_counter()
            result = attacks.invert(args.attack, model, observed, input_shape=SHAPE, **{"seed": seed, **overrides})
            elapsed = time.perf_counter() - start
            ssim = float(metrics.ssim(result.images, image[None])[0])
            row = {
                "photo": name, "crop_top_left": at, "label": label, "seed": seed, "ssim": ssim,
                "loss": float(result.loss[0]), "steps": int(result.steps[0]),
                "label_ok": int(result.labels[0]) == label, "wall_time": result.wall_time, "call_time": elapsed,
                "restarts": result.settings["restarts"],
            }
            if hasattr(result, "start_loss"):
                row["start_loss"] = result.start_loss[0].tolist()
            rows.append(row)
            with open(args.out + ".partial", "w") as f:
                json.dump(rows, f, indent=1)
            print(f"{name:>22} seed {seed}: SSIM {ssim:6.3f}  loss {row['loss']:.2e}  steps {row['steps']:4d}  "
                  f"{elapsed:6.1f} s", flush=True)
    ssims = np.array([r["ssim"] for r in rows])
    times = np.array([r["call_time"] for r in rows])
    summary = {
        "cases": len(rows), "success_at_0.9": int((ssims >= 0.9).sum()),
        "success_rate_at_0.9": float((ssims >= 0.9).mean()), "mean_ssim": float(ssims.mean()),
        "min_ssim": float(ssims.min()), "mean_time_s": float(times.mean()), "median_time_s": float(np.median(times)),
        "max_time_s": float(times.max()), "total_time_s": float(times.sum()),
    }
    print(json.dumps(summary, indent=1))
    document = {
        "attack": args.attack, "settings_overrides": overrides,
        "preset": {k: v for k, v in attacks.preset_settings(args.attack).items()},
        "torch": torch.__version__, "skimage": skimage.__version__, "threads": torch.get_num_threads(),
        "python": platform.python_version(), "ssim_variant": metrics.SSIM_VARIANT,
        "summary": summary, "rows": rows,
    }
    with open(args.out, "w") as f:
        json.dump(document, f, indent=1)


if __name__ == "__main__":
    main()
