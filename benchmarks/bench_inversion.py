"""Benchmark: gradient inversion batched (one torch.func optimisation) vs one image at a time; attack quality.

Throughput: 16 natural 32x32 patches (``load_image_patches``) and the DLG LeNet (seed 0), one start each; iDLG
(L-BFGS, 3 steps of 20 iterations) and Inverting Gradients (signed Adam, 60 iterations), early stopping off, so
both paths do identical work from identical seeded starts. Both paths run in the same process, alternating; the
ratio of median wall times is reported as images attacked per second. On CPU the sequential path is also timed
with oneDNN (mkldnn) convolutions switched off, which is faster for one tiny image at a time, so the speed-up is
also given against the best one-at-a-time configuration.

Cost of restarts (``--restart-cost``): clean iDLG on each of the first ``--restart-images`` patches alone (one
single-image client per attack, the LeNet of seed 0, labels i mod 10) at the preset's restarts and at restarts=1,
the two alternating in the same process, ``--repeats`` times; per setting the median wall time per attack, the
ratio of the summed medians (preset / 1 start) and the attacks reaching SSIM 0.9.

Quality (``--quality``), all at the presets unless stated:
* clean iDLG on the first ``--quality-images`` patches with the LeNet: mean / min SSIM, label accuracy,
  with the preset's restarts and with 1 start;
* the same with Gaussian noise of std 0.1 added to every gradient coordinate;
* Inverting Gradients vs DLG on the ReLU ``cnn`` and the embedded ``digits`` (first test images), untrained
  and after 3 epochs of SGD (lr 0.05, momentum 0.9, batch 32).

    python benchmarks/bench_inversion.py [--device cpu|cuda] [--images 16] [--repeats 3] [--quality]
        [--restart-cost [--restart-images 8]]
"""
from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch

from auditkit import attacks
from auditkit.attacks import metrics
from auditkit.data import load_dataset, load_image_patches
from auditkit.models import cnn, lenet

PATCH = (3, 32, 32)
DIGIT = (1, 28, 28)


def _time(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def throughput(device: torch.device, count: int, repeats: int) -> None:
    torch.manual_seed(0)
    model = lenet().to(device)
    images = load_image_patches(count).to(device)
    labels = torch.arange(count, device=device) % 10
    observed = attacks.per_image_gradients(model, images, labels)
    cases = {
        "idlg": dict(iterations=3, stop_loss=None, restarts=1),  # 3 L-BFGS steps x 20 inner iterations
        "inverting_gradients": dict(iterations=60, restarts=1),
    }
    print(f"throughput: {count} patches {PATCH}, LeNet, identical settings and iterations, early stopping off")
    for attack, settings in cases.items():
        runs = {
            "batched": functools.partial(_attack, attack, model, observed, mode="batched", **settings),
            "sequential": functools.partial(_attack, attack, model, observed, mode="sequential", **settings),
        }
        if device.type == "cpu":
            runs["sequential (mkldnn off)"] = functools.partial(
                _attack, attack, model, observed, mode="sequential", mkldnn=False, **settings
            )
        for run in runs.values():  # warm-up: vmap tracing, allocator
            run()
        times: dict[str, list[float]] = {name: [] for name in runs}
        for _ in range(repeats):
            for name, run in runs.items():
                times[name].append(_time(run, device))
        medians = {name: statistics.median(values) for name, values in times.items()}
        print(f"  {attack} ({', '.join(f'{k}={v}' for k, v in settings.items())}):")
        for name, value in medians.items():
            fastest = min(times[name])
            print(f"    {name:>24}: {count / value:7.2f} images/s  (median {value:.2f} s, min {fastest:.2f} s)")
        for name, value in medians.items():
            if name != "batched":
                print(f"    speed-up batched vs {name}: {value / medians['batched']:.2f}x")


def _attack(attack: str, model: torch.nn.Module, observed: torch.Tensor, *, mkldnn: bool = True, **settings) -> None:
    with torch.backends.mkldnn.flags(enabled=mkldnn):
        attacks.invert(attack, model, observed, input_shape=PATCH, **settings)


def restart_cost(device: torch.device, count: int, repeats: int) -> None:
    torch.manual_seed(0)
    model = lenet().to(device)
    images = load_image_patches(count).to(device)
    labels = torch.arange(count, device=device) % 10
    observed = attacks.per_image_gradients(model, images, labels)
    preset = attacks.preset_settings("idlg")["restarts"]
    settings = {f"restarts={preset} (preset)": {}, "restarts=1": {"restarts": 1}}
    print(f"restart cost: clean iDLG, {count} patches {PATCH} attacked one at a time, LeNet (seed 0), "
          f"{repeats} repeat(s), the settings alternating")
    attacks.idlg(model, observed[:1], input_shape=PATCH, iterations=1)  # warm-up: vmap tracing, allocator
    times: dict[str, list[list[float]]] = {name: [[] for _ in range(count)] for name in settings}
    ssim: dict[str, list[float]] = {name: [0.0] * count for name in settings}
    for _ in range(repeats):
        for i in range(count):
            for name, overrides in settings.items():
                result = attacks.idlg(model, observed[i : i + 1], input_shape=PATCH, **overrides)
                times[name][i].append(result.wall_time)
                ssim[name][i] = float(metrics.ssim(result.images, images[i : i + 1].cpu())[0])
    medians = {name: [statistics.median(t) for t in per_image] for name, per_image in times.items()}
    for name in settings:
        per_image = " ".join(f"{t:.1f}" for t in medians[name])
        reached = sum(value >= 0.9 for value in ssim[name])
        print(f"  {name:>20}: {statistics.mean(medians[name]):6.2f} s per attack (median over repeats; per image "
              f"{per_image}), SSIM >= 0.9 in {reached}/{count}, min SSIM {min(ssim[name]):.3f}")
    first, single = (sum(medians[name]) for name in settings)
    print(f"  time ratio restarts={preset} / restarts=1: {first / single:.2f}x")


def quality(device: torch.device, count: int) -> None:
    torch.manual_seed(0)
    model = lenet().to(device)
    images = load_image_patches(count).to(device)
    labels = torch.arange(count, device=device) % 10
    observed = attacks.per_image_gradients(model, images, labels)
    noise = 0.1 * torch.randn(observed.shape, generator=torch.Generator().manual_seed(1)).to(device)
    preset = attacks.preset_settings("idlg")["restarts"]
    print(f"quality: iDLG on {count} patches {PATCH}, LeNet (seed 0), labels i mod 10")
    for name, obs, settings in (
        (f"clean, restarts={preset} (preset)", observed, {}),
        ("clean, restarts=1", observed, {"restarts": 1}),
        (f"noise std 0.1, restarts={preset}", observed + noise, {}),
    ):
        result = attacks.idlg(model, obs, input_shape=PATCH, **settings)
        _report(f"  iDLG {name}", result, images, labels)

    digits = load_dataset("digits")
    targets, target_labels = digits.test.x[:count].to(device), digits.test.y[:count].to(device)
    torch.manual_seed(0)
    relu = cnn().to(device)
    print(f"quality: ReLU cnn, first {count} digits test images {DIGIT}")
    for stage in ("untrained", "after 3 epochs"):
        if stage != "untrained":
            _train(relu, digits, epochs=3, device=device)
            with torch.no_grad():
                accuracy = (relu(digits.test.x.to(device)).argmax(1) == digits.test.y.to(device)).float().mean()
            stage = f"{stage} (test accuracy {accuracy.item():.3f})"
        observed = attacks.per_image_gradients(relu, targets, target_labels)
        for attack in ("inverting_gradients", "dlg"):
            result = attacks.invert(attack, relu, observed, input_shape=DIGIT)
            _report(f"  {attack} on the cnn {stage}", result, targets, target_labels)


def _train(model: torch.nn.Module, digits, *, epochs: int, device: torch.device) -> None:
    optimizer = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    generator = torch.Generator().manual_seed(0)
    x, y = digits.train.x.to(device), digits.train.y.to(device)
    for _ in range(epochs):
        order = torch.randperm(len(y), generator=generator).to(device)
        for start in range(0, len(order), 32):
            batch = order[start : start + 32]
            loss = torch.nn.functional.cross_entropy(model(x[batch]), y[batch])
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def _report(name: str, result: attacks.InversionResult, images: torch.Tensor, labels: torch.Tensor) -> None:
    scores = metrics.score(result.images, images.cpu(), labels=result.labels, true_labels=labels.cpu())
    print(
        f"{name}: mean SSIM {scores['ssim_mean']:.3f} (min {min(scores['ssim']):.3f}), "
        f"mean MSE {scores['mse_mean']:.4f}, label accuracy {scores['label_accuracy']:.3f} "
        f"({result.label_source}), {result.wall_time:.1f} s"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--images", type=int, default=16, help="patches attacked in the throughput comparison")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quality", action="store_true", help="also report reconstruction quality (minutes)")
    parser.add_argument("--quality-images", type=int, default=8)
    parser.add_argument("--restart-cost", action="store_true",
                        help="also time iDLG at the preset's restarts against restarts=1 (minutes)")
    parser.add_argument("--restart-images", type=int, default=8, help="patches attacked in the restart cost")
    args = parser.parse_args()
    device = torch.device(args.device)
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} SSIM={metrics.SSIM_VARIANT}")
    throughput(device, args.images, args.repeats)
    if args.restart_cost:
        restart_cost(device, args.restart_images, args.repeats)
    if args.quality:
        quality(device, args.quality_images)


if __name__ == "__main__":
    main()
