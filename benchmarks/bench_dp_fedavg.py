"""Benchmark: DP-FedAvg at scale, the built-in simulator against Flower's own DP wrappers, in one run.

``dp-fedavg`` (z = 1, C = 1, client-side clipping) on the embedded MNIST digits (mnist-5k), the ``linear`` model,
tau = 5 local steps of batch 8, Poisson participation at q = 0.1:

* K = 100 clients, 50 rounds, on the built-in simulator and on Flower's Simulation Engine (Flower's
  ``DifferentialPrivacyClientSideFixedClipping`` with ``fixedclipping_mod``; needs ``pip install
  'auditkit[flower]'``);
* K = 1,000 clients, 50 rounds, on the built-in simulator.

Each run trains in its own child process. Reported per run: final test accuracy, the claim composed over the
rounds (Opacus PRV, delta 1e-5, amplified by the Poisson sampling), the noise std on the averaged model z C / (q K),
the start-up (process start to the end of round 1, less one round) and the median time per round over rounds
2..T; then Flower / built-in as a ratio of time per round, timed in the same run.

    python benchmarks/bench_dp_fedavg.py [--rounds 50] [--skip-flower]

Absolute seconds depend on the machine; the ratio is the result.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def _config(clients: int, rounds: int, backend: str) -> dict:
    return {
        "seed": 0, "device": "cpu", "data": {"dataset": "mnist-5k", "partition": "iid"},
        "training": {"model": "linear", "clients": clients, "rounds": rounds, "tau": 5, "batch_size": 8, "lr": 0.05,
                     "participation": "poisson", "sample_rate": 0.1, "checkpoints": [], "backend": backend},
        "flower": {"num_cpus": 1.0},
        "mechanism": {"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0, "clipping": "client"},
        "inversion": {"enabled": False}, "probe": {"enabled": False}, "identification": {"enabled": False},
    }


def child(clients: int, rounds: int, backend: str) -> None:
    """Train one run; print one JSON line with the start, every round's end time, accuracy and composed eps."""
    start = time.perf_counter()
    from auditkit.config import from_dict
    from auditkit.stages.account import account_run
    from auditkit.stages.train import Experiment

    ends: list[float] = []
    run = Experiment(from_dict(_config(clients, rounds, backend))).train(lambda record: ends.append(time.perf_counter()))
    accounting = account_run(run)
    last = run.result.rounds[-1]
    print(json.dumps({"start": start, "ends": ends, "accuracy": last.test_accuracy,
                      "epsilon": accounting["composed"]["epsilon"], "accountant": accounting["composed"]["accountant"],
                      "noise_std": last.stats.get("noise_std_aggregate"),
                      "sampled": [r.stats.get("sampled") for r in run.result.rounds]}))


def measure(clients: int, rounds: int, backend: str) -> dict:
    command = [sys.executable, __file__, "--child", backend, "--clients", str(clients), "--rounds", str(rounds)]
    done = subprocess.run(command, capture_output=True, text=True)
    lines = done.stdout.strip().splitlines()
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{backend}, K = {clients} failed (exit {done.returncode}): {done.stderr.strip()[-500:]}")
    run = json.loads(lines[-1])
    ends = run["ends"]
    median = statistics.median(b - a for a, b in zip(ends, ends[1:]))
    sampled = [s for s in run["sampled"] if s is not None]
    return {"label": f"{backend}, K = {clients}", "startup_s": ends[0] - run["start"] - median, "round_s": median,
            "accuracy": run["accuracy"], "epsilon": run["epsilon"], "noise_std": run["noise_std"],
            "mean_sampled": statistics.mean(sampled) if sampled else float("nan")}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--skip-flower", action="store_true", help="leave out the Flower run")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--clients", type=int, default=100, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.clients, args.rounds, args.child)
        return
    print(f"dp-fedavg z = 1, C = 1, client clipping, Poisson q = 0.1, {args.rounds} rounds, linear model, mnist-5k; "
          f"{os.cpu_count()} CPUs")
    runs = [("builtin", 100), *([] if args.skip_flower else [("flower", 100)]), ("builtin", 1000)]
    rows = [measure(clients, args.rounds, backend) for backend, clients in runs]
    print(f"{'run':<18} {'test acc':>9} {'eps (PRV)':>10} {'noise std':>10} {'clients/rd':>10} {'start-up s':>10} "
          f"{'s / round':>10}")
    for r in rows:
        print(f"{r['label']:<18} {r['accuracy']:>9.3f} {r['epsilon']:>10.3f} {r['noise_std']:>10.4f} "
              f"{r['mean_sampled']:>10.1f} {r['startup_s']:>10.2f} {r['round_s']:>10.3f}")
    if not args.skip_flower:
        print(f"flower / builtin at K = 100: {rows[1]['round_s'] / rows[0]['round_s']:.1f}x time per round")


if __name__ == "__main__":
    main()
