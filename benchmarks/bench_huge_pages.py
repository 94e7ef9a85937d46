"""Benchmark: CPU work on large tensors with and without transparent huge pages (``auditkit.HUGE_PAGES``), each in
its own process, timed in the same run: one round of ResNet-18 client training (``train_clients_batched``: 4 clients
x 4 steps of 8 CIFAR-sized images, one chunk) and 40 elementwise updates of a ResNet-50-sized vector (23.5M
float32, as the protocols and the optimiser step do). Printed: wall, user and kernel seconds and page faults, and
the ratio of the walls (the baseline: ``THP_MEM_ALLOC_ENABLE=0``, torch's default).

    python benchmarks/bench_huge_pages.py [--repeats 3]
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
from pathlib import Path

WORK = r"""
import json, resource, sys, time
import auditkit  # sets THP_MEM_ALLOC_ENABLE unless it is set
import torch
from auditkit.fl.local_training import LocalSteps, LocalTraining, train_clients_batched
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.params import flat_parameters
from auditkit.fl.spec import Optimizer
from auditkit.models import create_model
torch.set_num_threads(1)
torch.manual_seed(0)
def timed(work):
    work()  # warm: the first call builds what later calls reuse
    r0, t0 = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
    work()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    return {"wall": time.perf_counter() - t0, "user": r1.ru_utime - r0.ru_utime, "kernel": r1.ru_stime - r0.ru_stime,
            "faults": r1.ru_minflt - r0.ru_minflt}
model = create_model("torchvision:resnet18", input_shape=(3, 32, 32), small_stem=True)
start = flat_parameters(model).detach()
images, labels = torch.rand(4, 4, 8, 3, 32, 32), torch.randint(0, 10, (4, 4, 8))
steps = LocalSteps.gathered(images, labels)
training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9))
vector = torch.randn(23_500_000)
def elementwise():
    for _ in range(40):
        out = vector * 0.9 + vector
        del out
print(json.dumps({"training": timed(lambda: train_clients_batched(model, start, steps, training)),
                  "elementwise": timed(elementwise)}))
"""


def run(huge_pages: str) -> dict:
    env = {**os.environ, "THP_MEM_ALLOC_ENABLE": huge_pages, "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", WORK], capture_output=True, text=True, env=env, check=False)
    if done.returncode:
        raise SystemExit("a run failed: " + (done.stderr.strip().splitlines() or ["?"])[-1])
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3, help="processes per setting, alternated; medians printed")
    args = parser.parse_args()
    mode = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    print("kernel THP:", mode.read_text().strip() if mode.exists() else "unknown")
    found = {"0": [], "1": []}
    for _ in range(args.repeats):
        for setting in found:
            found[setting].append(run(setting))
    for work in ("training", "elementwise"):
        medians = {s: {k: statistics.median(r[work][k] for r in runs) for k in ("wall", "user", "kernel", "faults")}
                   for s, runs in found.items()}
        for s, m in medians.items():
            print(f"{work:>11} THP_MEM_ALLOC_ENABLE={s}: wall {m['wall']:.2f} s, user {m['user']:.2f} s, "
                  f"kernel {m['kernel']:.2f} s, {m['faults']:,.0f} page faults")
        print(f"{work:>11} huge pages / baseline wall: {medians['1']['wall'] / medians['0']['wall']:.2f}")


if __name__ == "__main__":
    main()
