"""Benchmark suite for issue 41's speed targets: every figure printed beside its baseline from the same run.

Per device (CUDA when present, then the CPU; ``--devices`` to choose), each as a ratio to a baseline timed in the
same process:

1. big batch: plain PyTorch training steps of ResNet-18 with the CIFAR stem (3x3 conv1, no max-pool; 11,173,962
   parameters), one batch of ``big`` images, fp32 and bf16 autocast: images/s. The hardware's plain throughput.
2. FL clients: ``auditkit.fl.local_training.train_clients_batched`` on the same model, K clients x B images a
   step (K = 32 x 32 and 128 x 8 on a GPU), fp32 and bf16: images/s, and the fraction of (1) at the same
   precision (target on one H100: >= 0.8 at 32 x 32); the one-client-after-another reference path beside it.
3. CEPAM's round: the ``cnn``, K = 30 clients, tau = 15 single-sample momentum-SGD steps: ms per round, batched
   vs the sequential reference path.
4. iDLG: the DLG LeNet on 32x32 patches, 64 images x 4 starts, 30 L-BFGS steps (early stopping off): seconds,
   and the seconds the same number of objective evaluations take as one plain ``torch.func`` computation (the
   arithmetic the attack needs), so the ratio is the attack's overhead.

On the CPU the workloads are smaller (stated on each line) so the suite ends in minutes on two cores; the GPU part
is sized to end within 8 minutes on one H100. Timings are medians of ``--repeats`` after a warm-up.

    python benchmarks/gpu_suite.py [--devices cuda cpu] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Callable

import torch
import torchvision
from torch import nn
from torch.func import functional_call, grad, vmap

from auditkit import attacks
from auditkit.data import load_image_patches
from auditkit.fl.local_training import LocalSteps, LocalTraining, train_clients_batched, train_clients_sequential
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.params import flat_parameters, trained_parameters
from auditkit.fl.spec import Optimizer, Precision
from auditkit.models import create_model

# (device type) -> workload sizes: the big batch, the client grids (K, B), local steps, iDLG images, starts, steps
SIZES = {
    "cuda": {"big": 1024, "grids": [(32, 32), (128, 8)], "steps": 4, "idlg": (64, 4, 30)},
    "cpu": {"big": 64, "grids": [(8, 8)], "steps": 2, "idlg": (8, 2, 5)},
}


def resnet18_cifar() -> nn.Module:
    """torchvision's ResNet-18 with the CIFAR stem: conv1 3x3 stride 1, no max-pool."""
    model = torchvision.models.resnet18(num_classes=10)
    model.conv1 = nn.Conv2d(3, 64, 3, stride=1, padding=1, bias=False)
    model.maxpool = nn.Identity()
    return model


def timed(fn: Callable[[], object], device: torch.device, repeats: int) -> float:
    """Median seconds of ``fn`` over ``repeats`` runs after one warm-up (CUDA synchronised around each)."""
    fn()
    times = []
    for _ in range(repeats):
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        start = time.perf_counter()
        fn()
        if device.type == "cuda":
            torch.cuda.synchronize(device)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def autocast(precision: Precision, device: torch.device):
    return torch.autocast(device.type, dtype=torch.bfloat16, enabled=precision == Precision.BF16)


def big_batch(device: torch.device, size: int, precision: Precision, repeats: int) -> float:
    """Images/s of plain SGD training steps of ResNet-18 (CIFAR stem) on one batch of ``size``."""
    torch.manual_seed(0)
    model = resnet18_cifar().to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.rand(size, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (size,), device=device)

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with autocast(precision, device):
            loss = nn.functional.cross_entropy(model(x).float(), y)
        loss.backward()
        optimizer.step()

    return size / timed(step, device, repeats)


def fl_clients(device: torch.device, clients: int, batch: int, steps: int, precision: Precision, repeats: int,
               *, sequential: bool = False) -> float:
    """Images/s of ``clients`` x ``batch`` images a step, ``steps`` local steps, auditkit's local training."""
    torch.manual_seed(0)
    model = resnet18_cifar().to(device)
    x = torch.rand(clients * steps * batch, 3, 32, 32, device=device)
    y = torch.randint(0, 10, (len(x),), device=device)
    indices = torch.arange(len(x), device=device).reshape(clients, steps, batch)
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.01, 0.9), precision=precision)
    start = flat_parameters(model).to(device)
    train = train_clients_sequential if sequential else train_clients_batched
    seconds = timed(lambda: train(model, start, LocalSteps(x, y, indices), training), device, repeats)
    return clients * steps * batch / seconds


def cepam_round(device: torch.device, repeats: int) -> dict[str, float]:
    """Seconds per CEPAM round (cnn, K = 30, tau = 15, batch 1), batched and sequential."""
    torch.manual_seed(0)
    model = create_model("cnn").to(device)
    x = torch.rand(30 * 15, 1, 28, 28, device=device)
    y = torch.randint(0, 10, (len(x),), device=device)
    steps = LocalSteps(x, y, torch.arange(len(x), device=device).reshape(30, 15, 1))
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.01, 0.9))
    start = flat_parameters(model).to(device)
    return {name: timed(lambda: fn(model, start, steps, training), device, repeats)
            for name, fn in (("batched", train_clients_batched), ("sequential", train_clients_sequential))}


def idlg(device: torch.device, images: int, starts: int, steps: int) -> tuple[float, int]:
    """Seconds of iDLG on ``images`` patches x ``starts`` starts x ``steps`` L-BFGS steps, and its objective
    evaluations (20 inner iterations a step, early stopping off)."""
    torch.manual_seed(0)
    model = create_model("lenet", input_shape=(3, 32, 32)).to(device)
    patches = load_image_patches(images).to(device)
    labels = torch.arange(images, device=device) % 10
    params = dict(trained_parameters(model))

    def loss_of(p, x, label):
        return nn.functional.cross_entropy(functional_call(model, p, (x[None],)), label[None])

    observed = vmap(grad(loss_of), in_dims=(None, 0, 0))(params, patches, labels)
    observed = torch.cat([g.reshape(images, -1) for g in observed.values()], 1)
    settings = dict(iterations=steps, restarts=starts, stop_loss=None, device=str(device))
    timed_run = []
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    start = time.perf_counter()
    attacks.invert("idlg", model, observed, input_shape=(3, 32, 32), **settings)
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    timed_run.append(time.perf_counter() - start)
    return timed_run[0], steps * 20


def objective_arithmetic(device: torch.device, problems: int, evaluations: int, repeats: int) -> float:
    """Seconds of ``evaluations`` gradient-matching objective evaluations of ``problems`` LeNet problems as one
    plain torch.func program: per-problem parameter gradient, squared distance, its gradient in the image."""
    torch.manual_seed(0)
    model = create_model("lenet", input_shape=(3, 32, 32)).to(device)
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = torch.rand(problems, 3, 32, 32, device=device)
    soft = torch.softmax(torch.randn(problems, 10, device=device), 1)
    target = {k: torch.randn(problems, *v.shape, device=device) for k, v in params.items()}

    def distance(image, label, goal):
        def loss(p):
            logits = functional_call(model, p, (image[None],))
            return -(label[None] * torch.log_softmax(logits, 1)).sum()
        g = grad(loss)(params)
        return sum(((g[k] - goal[k]) ** 2).sum() for k in g)

    objective = vmap(grad(distance), in_dims=(0, 0, 0))
    return timed(lambda: objective(x, soft, target), device, repeats) * evaluations


def run(device: torch.device, repeats: int) -> None:
    sizes = SIZES[device.type]
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else f"CPU, {torch.get_num_threads()} threads"
    print(f"\n== {device} ({name}); torch {torch.__version__}")
    base = {}
    for precision in (Precision.FP32, Precision.BF16):
        base[precision] = big_batch(device, sizes["big"], precision, repeats)
        print(f"big batch     ResNet-18 CIFAR stem, batch {sizes['big']:5d}, {precision.value}: "
              f"{base[precision]:9.0f} images/s  (baseline)")
    for clients, batch in sizes["grids"]:
        for precision in (Precision.FP32, Precision.BF16):
            rate = fl_clients(device, clients, batch, sizes["steps"], precision, repeats)
            print(f"FL clients    {clients:3d} clients x {batch:2d} images, {sizes['steps']} steps, {precision.value}: "
                  f"{rate:9.0f} images/s = {rate / base[precision]:.2f} of the big batch")
        sequential = fl_clients(device, clients, batch, sizes["steps"], Precision.FP32, 1, sequential=True)
        print(f"FL clients    {clients:3d} clients x {batch:2d} images, one after another (reference), fp32: "
              f"{sequential:9.0f} images/s = {sequential / base[Precision.FP32]:.2f} of the big batch")
    cepam = cepam_round(device, repeats)
    print(f"CEPAM round   cnn, K = 30, tau = 15, batch 1: batched {cepam['batched'] * 1e3:.1f} ms, sequential "
          f"{cepam['sequential'] * 1e3:.1f} ms: {cepam['sequential'] / cepam['batched']:.2f}x")
    images, starts, steps = sizes["idlg"]
    seconds, evaluations = idlg(device, images, starts, steps)
    arithmetic = objective_arithmetic(device, images * starts, evaluations, repeats)
    print(f"iDLG          LeNet 32x32, {images} images x {starts} starts x {steps} steps: {seconds:.2f} s; the "
          f"{evaluations} objective evaluations as one plain program {arithmetic:.2f} s: overhead "
          f"{seconds / arithmetic:.1f}x")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    default = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    parser.add_argument("--devices", nargs="+", default=default)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    for device in args.devices:
        run(torch.device(device), args.repeats)


if __name__ == "__main__":
    main()
