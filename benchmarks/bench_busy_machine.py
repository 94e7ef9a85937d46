"""Benchmark: an audit on a busy machine, its thread pools sized to the CPUs left free (``auditkit.fl.threads``)
against one thread per CPU (``--threads <CPUs>``: the pools as they were before they were sized), each alone and
beside one CPU-bound job: a pure-Python loop (one thread) or a small torch training loop (torch's own pool, one
thread per CPU). Every cell is timed in this run; the ratio is each time over the fair-share run alone.

A fair share on C CPUs beside one busy job is about C / (C - 1) times the time alone (2x on 2 CPUs). Torch and BLAS
now compute with one thread whatever ``--threads`` says (``auditkit.fl.threads``), so the two columns differ in
numba's pool only; ``bench_thread_partition.py`` times torch and BLAS at one thread per CPU.

    python benchmarks/bench_busy_machine.py [--config audit.toml] [--jobs python,torch]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from auditkit.fl.threads import usable_cpus

# the quick start's settings, cut to two mechanisms and 5 rounds: about 25 s alone on 2 CPUs
SMALL_AUDIT = """
title = "busy machine"
seed = 0
[data]
dataset = "mnist-5k"
[training]
model = "mlp"
clients = 10
rounds = 5
tau = 15
batch_size = 1
lr = 0.01
momentum = 0.9
checkpoints = [1, 5]
[[mechanisms]]
name = "gaussian"
clip = 0.1
target_eps = 4.0
[[mechanisms]]
name = "jopeq-laplace"
bits = 2
eps = 3.0
[inversion]
attack = "inverting_gradients"
round = 1
targets = 2
iterations = 100
[probe]
attack = "analytic"
targets = 16
[identification]
candidates = [10, 100]
trials = 500
[distinguish]
trials = 20000
"""
JOBS = {
    "python": "while True: pass",
    "torch": ("import torch\nx = torch.randn(64, 64)\nw = torch.randn(64, 64, requires_grad=True)\n"
              "while True:\n    (x @ w).relu().sum().backward()"),
}


def timed_audit(config: Path, out: Path, threads: int | None, job: str | None) -> float:
    """Seconds of wall time of ``auditkit audit config``, beside ``job`` (a name of ``JOBS``) when given."""
    busy = None if job is None else subprocess.Popen([sys.executable, "-c", JOBS[job]])
    command = [sys.executable, "-m", "auditkit.cli", "audit", str(config), "--out", str(out), "--overwrite"]
    if threads is not None:
        command += ["--threads", str(threads)]
    try:
        time.sleep(0.5 if busy else 0.0)  # the job up and spinning before the audit starts
        start = time.perf_counter()
        # no OMP_NUM_THREADS: the pools as a user's shell leaves them
        environment = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
        subprocess.run(command, check=True, capture_output=True, env=environment)
        return time.perf_counter() - start
    finally:
        if busy is not None:
            busy.kill()
            busy.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", type=Path, help="the audit to time (default: a 2-setting, 5-round quick start)")
    parser.add_argument("--jobs", default="python,torch", help="busy jobs beside it, comma-separated: python, torch")
    args = parser.parse_args()
    cpus = usable_cpus()
    with tempfile.TemporaryDirectory() as folder:
        config = args.config or Path(folder) / "audit.toml"
        if args.config is None:
            config.write_text(SMALL_AUDIT)
        cells = {}
        for job in [None, *args.jobs.split(",")]:
            for label, threads in (("fair share", None), (f"{cpus} threads", cpus)):
                cells[job, label] = timed_audit(config, Path(folder) / "out", threads, job)
                print(f"{job or 'alone':<8} {label:<12} {cells[job, label]:8.1f} s", flush=True)
        base = cells[None, "fair share"]
        print(f"\n{cpus} CPUs; ratio: time over the fair-share run alone ({base:.1f} s)")
        print(f"{'beside':<8} {'pools':<12} {'s':>8} {'ratio':>7}")
        for (job, label), seconds in cells.items():
            print(f"{job or 'nothing':<8} {label:<12} {seconds:8.1f} {seconds / base:7.2f}")


if __name__ == "__main__":
    main()
