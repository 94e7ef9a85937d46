"""Benchmark: one FL round of local training, batched (torch.func vmap) vs sequential.

CEPAM's setting: K = 30 clients, the `cnn` model, tau = 15 single-sample momentum-SGD steps.
Both paths run in the same process on the same data, alternating, and the ratio of their
median wall times is reported (machines are noisy; absolute seconds are not comparable).

    python benchmarks/bench_local_training.py [--device cpu|cuda] [--repeats 7]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

from auditkit.fl.local_training import LocalSteps, LocalTraining, train_clients_batched, train_clients_sequential
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.params import flat_parameters
from auditkit.fl.spec import Optimizer
from auditkit.models import create_model


def _time(fn, device: torch.device) -> float:
    if device.type == "cuda":
        torch.cuda.synchronize()
    start = time.perf_counter()
    fn()
    if device.type == "cuda":
        torch.cuda.synchronize()
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--clients", type=int, default=30)
    parser.add_argument("--tau", type=int, default=15)
    parser.add_argument("--batch-size", type=int, default=1)
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    device = torch.device(args.device)
    torch.manual_seed(0)
    model = create_model(args.model).to(device)
    start = flat_parameters(model).to(device)
    inputs = torch.rand(args.clients, args.tau, args.batch_size, 1, 28, 28, device=device)
    labels = torch.randint(0, 10, (args.clients, args.tau, args.batch_size), device=device)
    steps = LocalSteps.gathered(inputs, labels)
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.01, 0.9))
    batched = lambda: train_clients_batched(model, start, steps, training)  # noqa: E731
    sequential = lambda: train_clients_sequential(model, start, steps, training)  # noqa: E731
    batched(), sequential()  # warm-up: vmap tracing, allocator, cuDNN autotuning
    times = {"batched": [], "sequential": []}
    for _ in range(args.repeats):
        times["batched"].append(_time(batched, device))
        times["sequential"].append(_time(sequential, device))
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"device={device} torch={torch.__version__} threads={torch.get_num_threads()} "
          f"model={args.model} K={args.clients} tau={args.tau} batch={args.batch_size} repeats={args.repeats}")
    for name, value in med.items():
        print(f"{name:>10}: median {value * 1e3:8.1f} ms per round  (min {min(times[name]) * 1e3:.1f} ms)")
    print(f"speed-up batched vs sequential: {med['sequential'] / med['batched']:.2f}x")


if __name__ == "__main__":
    main()
