"""Benchmark: the audit's canary stage (canary clients in one run, the whole run's composed claim): how often a
correct claim is called "violated" and how often a wrong composed claim is flagged, over ``--seeds`` seeds.

Each case is one ``[canary]`` stage (``auditkit.stages.canary.canary_stage``) on the ``quickstart`` data with a
linear model and 5 local steps per round, each view judged at 97.5 % (two views: the audit's 95 % family-wise):

* correct ``dp-fedavg`` (z = 2, C = 1, Poisson q = 0.5, 5 rounds, 200 canaries) and correct ``gaussian``
  (sigma 0.4, clip 0.1, full participation, 5 rounds, 200 canaries): the soundness counts;
* the example plugin's ``dp-fedavg-ignores-sampling`` (z = 1, q = 0.5, 5 rounds, 200 canaries) and
  ``dp-fedavg-ignores-rounds`` (z = 1, 10 rounds claimed at one round's price, 500 canaries), beside the honest
  ``dp-fedavg`` at the same noise: the power.

Each row: the composed claim (eps at delta 1e-5 on its curve), per view the number of seeds called "violated", the
median certified (eps, delta) bound and the median eps of the refuted curve of the claim's family (the verdict
refutes the claim's curve itself), and seconds.

    python benchmarks/bench_whole_run.py [--seeds 20] [--threads 1]
"""
from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path
from typing import Any

import torch

from auditkit import mechanisms
from auditkit.config import AuditConfig, from_dict, merge, preset_dict
from auditkit.stages.canary import canary_stage

PLUGIN = str(Path(__file__).resolve().parents[1] / "examples" / "buggy_dp_plugin" / "buggy_dp.py")
POISSON = {"participation": "poisson", "sample_rate": 0.5}
CASES = [  # label, mechanism, training, canaries
    ("dp-fedavg z 2, q 0.5 (correct)", {"name": "dp-fedavg", "noise_multiplier": 2.0, "clip": 1.0}, POISSON, 200),
    ("gaussian sigma 0.4, clip 0.1 (correct)", {"name": "gaussian", "sigma": 0.4, "clip": 0.1}, {}, 200),
    ("dp-fedavg-ignores-sampling z 1, q 0.5", {"name": "dp-fedavg-ignores-sampling", "noise_multiplier": 1.0,
                                              "clip": 1.0}, POISSON, 200),
    ("dp-fedavg-ignores-rounds z 1, 10 rounds", {"name": "dp-fedavg-ignores-rounds", "noise_multiplier": 1.0,
                                                "clip": 1.0, "run_rounds": 10}, {"rounds": 10}, 500),
    ("dp-fedavg z 1, 10 rounds (correct)", {"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0},
     {"rounds": 10}, 500),
]


def _config(mechanism: dict[str, Any], training: dict[str, Any], canaries: int, seed: int) -> AuditConfig:
    return from_dict(merge(preset_dict("quickstart", mechanisms=False), {
        "seed": seed, "device": "cpu", "mechanism": mechanism,
        "training": {"model": "linear", "rounds": 5, "tau": 5, "checkpoints": [1], **training},
        "canary": {"enabled": True, "canaries": canaries}}))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20, help="seeds per case")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mechanisms.load_plugins([PLUGIN])
    print(f"whole-run canary audit, {args.seeds} seeds per case (each view at 97.5 %)")
    print(f"{'case':<42} {'claim eps':>9}  {'view':<10} {'violated':>9} {'median bound':>12} {'median curve':>12} "
          f"{'s':>6}")
    for label, mechanism, training, canaries in CASES:
        start = time.perf_counter()
        found: dict[str, list[tuple[str, float, float]]] = {}
        for seed in range(args.seeds):
            entry = canary_stage(_config(mechanism, training, canaries, seed), per_test_confidence=0.975)
            for view in entry["views"]:
                result = view["result"]
                found.setdefault(view["view"], []).append((result["verdict"], result["epsilon_lower_bound"],
                                                           result.get("curve_epsilon") or 0.0))
        seconds = time.perf_counter() - start
        claim = entry["claim"]["epsilon"]
        for i, (view, rows) in enumerate(found.items()):
            violated = sum(v == "violated" for v, _, _ in rows)
            median = statistics.median(b for _, b, _ in rows)
            curve = statistics.median(c for _, _, c in rows)
            head = f"{label:<42} {claim:>9.4g}" if i == 0 else " " * 52
            shown = f"{seconds:.0f}" if i == 0 else ""
            print(f"{head}  {view:<10} {violated:>4}/{len(rows):<4} {median:>12.3f} {curve:>12.3f} {shown:>6}")


if __name__ == "__main__":
    main()
