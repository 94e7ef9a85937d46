"""Benchmark: a large federation on Flower's Simulation Engine (Ray) against the built-in simulator, in one run.

K = 1,000 clients on the embedded MNIST digits (3,500 training digits, 3-4 per client), the `linear` model,
10% uniform participation (100 clients a round), tau = 5 steps of batch 4, SDQ (4 bits) on the uplink. Each
backend trains in its own child process, one after the other, while this process samples the resident memory
of the child's whole process tree (on Flower: the driver, Ray's GCS and raylet, and the client actors) every
0.1 s. Reported per backend: start-up (process start to the end of round 1, less the round), the median time per
round over rounds 2..T, peak tree RSS; then the Flower / built-in ratios.

    python benchmarks/bench_flower_scale.py [--clients 1000] [--fraction 0.1] [--rounds 6] [--num-cpus 1]

Needs ``pip install 'auditkit[flower]'``. Absolute seconds depend on the machine; the ratios are the result.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _config(args: argparse.Namespace, backend: str) -> dict:
    return {
        "seed": 0, "device": "cpu", "data": {"dataset": "mnist-5k", "partition": "iid"},
        "training": {"model": "linear", "clients": args.clients, "rounds": args.rounds, "tau": 5, "batch_size": 4,
                     "lr": 0.05, "participation": "uniform",
                     "clients_per_round": max(1, round(args.fraction * args.clients)), "checkpoints": [],
                     "backend": backend},
        "flower": {"num_cpus": args.num_cpus},
        "mechanism": {"name": "sdq", "bits": 4, "support": 0.25},
        "inversion": {"enabled": False}, "probe": {"enabled": False}, "identification": {"enabled": False},
    }


def child(args: argparse.Namespace) -> None:
    """Train one backend; print one JSON line with the start and every round's end time."""
    start = time.perf_counter()
    from auditkit.config import from_dict
    from auditkit.stages.train import Experiment

    ends: list[float] = []
    run = Experiment(from_dict(_config(args, args.child))).train(lambda record: ends.append(time.perf_counter()))
    print(json.dumps({"start": start, "ends": ends, "accuracy": run.result.rounds[-1].test_accuracy,
                      "bits": run.result.rounds[-1].bits_per_coordinate}))


def _tree_rss_bytes(root: int) -> int:
    """Resident memory of ``root`` and all its descendants (from /proc)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                parents[int(entry.name)] = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
    tree, frontier = {root}, [root]
    while frontier:
        pid = frontier.pop()
        for child_pid, parent in parents.items():
            if parent == pid and child_pid not in tree:
                tree.add(child_pid)
                frontier.append(child_pid)
    total = 0
    for pid in tree:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
        except OSError:
            continue
    return total


def measure(args: argparse.Namespace, backend: str) -> dict:
    command = [sys.executable, __file__, "--child", backend, "--clients", str(args.clients), "--fraction",
               str(args.fraction), "--rounds", str(args.rounds), "--num-cpus", str(args.num_cpus)]
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    peak = 0
    while process.poll() is None:
        peak = max(peak, _tree_rss_bytes(process.pid))
        time.sleep(0.1)
    out = process.stdout.read().strip().splitlines()
    if process.returncode != 0 or not out:
        raise SystemExit(f"{backend} failed (exit {process.returncode})")
    run = json.loads(out[-1])
    ends = run["ends"]
    per_round = [b - a for a, b in zip(ends, ends[1:])]
    median = statistics.median(per_round)
    return {"backend": backend, "startup_s": ends[0] - run["start"] - median, "round_s": median,
            "peak_gb": peak / 1e9, "accuracy": run["accuracy"], "bits": run["bits"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=1000)
    parser.add_argument("--fraction", type=float, default=0.1)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--num-cpus", type=float, default=1.0, help="Ray CPUs per Flower client")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return
    print(f"K = {args.clients} clients, {args.fraction:.0%} a round, {args.rounds} rounds, linear model, sdq 4 bits; "
          f"{os.cpu_count()} CPUs; Flower: {args.num_cpus:g} CPU per client")
    rows = [measure(args, backend) for backend in ("builtin", "flower")]
    print(f"{'backend':<9} {'start-up s':>10} {'s / round':>10} {'peak RSS GB':>12} {'test acc':>9} {'bits/coord':>10}")
    for r in rows:
        print(f"{r['backend']:<9} {r['startup_s']:>10.2f} {r['round_s']:>10.3f} {r['peak_gb']:>12.2f} "
              f"{r['accuracy']:>9.3f} {r['bits']:>10.3f}")
    builtin, flower = rows
    print(f"flower / builtin: {flower['round_s'] / builtin['round_s']:.1f}x time per round, "
          f"{flower['peak_gb'] / builtin['peak_gb']:.1f}x peak memory, "
          f"{flower['startup_s'] / max(builtin['startup_s'], 1e-9):.1f}x start-up")


if __name__ == "__main__":
    main()
