"""Benchmark: the membership stage (issue 42) -- soundness over seeds, and reference runs trained together against one
after another.

Soundness rows, each over ``--seeds`` seeds (the audit's seed: its data split, memberships, training and noise):

* ``dp-fedavg`` (z = 1, C = 1, full participation), client level and record level with mislabelled candidates:
  a correct claim; each attack's one-run bound is judged at 95 % / 4 (the stage's Bonferroni share over its four
  attacks), so over 20 seeds a "violated" is a false alarm (the count must be 0 to within chance: at most the 99.9 %
  quantile of Binomial(20, 0.05) per row, 4, and in practice none);
* ``none`` with mislabelled candidates: no claim, so no verdict; the row counts the seeds whose certified bound is
  above 0 (leakage found with 95 % confidence), the catch a correct audit must make.

Timing: the same target + R reference runs trained together (``auditkit.fl.stacked``) and one after another, in
the same process, alternating; the ratio of medians. Two trainings: mini-batches of 16 over 2 local epochs (the
arithmetic dominates on a CPU), and the quickstart's 15 single-example steps (the per-step overhead dominates).

    python benchmarks/bench_membership.py [--seeds 20] [--references 4] [--repeats 3]
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np
from scipy import stats

from auditkit.config import from_dict
from auditkit.stages.membership import membership_stage
from auditkit.stages.membership_runs import membership_runs
from auditkit.stages.setting import build_mechanism

_TRAINING = {"model": "mlp", "clients": 20, "rounds": 5, "local_epochs": 2, "batch_size": 16, "lr": 0.05,
             "checkpoints": [1]}
ROWS = {
    "dp-fedavg, client level": ({"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0}, {"level": "client"}),
    "dp-fedavg, record level, mislabelled": ({"name": "dp-fedavg", "noise_multiplier": 1.0, "clip": 1.0},
                                             {"level": "record", "mislabelled": True}),
    "none, record level, mislabelled": ({"name": "none"}, {"level": "record", "mislabelled": True}),
}


_QUICKSTART_TRAINING = {"model": "mlp", "clients": 10, "rounds": 5, "tau": 15, "batch_size": 1, "lr": 0.01,
                        "momentum": 0.9, "checkpoints": [1]}


def _config(seed: int, mechanism: dict, membership: dict, references: int, training: dict | None = None):
    return from_dict({"seed": seed, "data": {"dataset": "mnist-5k"}, "training": dict(training or _TRAINING),
                      "mechanism": mechanism,
                      "membership": {"enabled": True, "references": references, "records": 500,
                                     "population": 500, **membership}})


def soundness(seeds: int, references: int) -> None:
    allowed = int(stats.binom.ppf(0.999, seeds, 0.05))
    print(f"{'row':40s} {'claim eps':>9s} {'bound min/mean/max (best attack)':>34s} {'violated':>9s} "
          f"{'bound > 0':>9s} {'seconds':>8s}")
    for name, (mechanism, membership) in ROWS.items():
        start = time.perf_counter()
        bounds, violated, found, claim = [], 0, 0, None
        for seed in range(seeds):
            config = _config(seed, mechanism, membership, references)
            section = membership_stage(config, build_mechanism(config), per_test_confidence=1 - 0.05 / 4)
            best = max(a["result"]["epsilon_lower_bound"] for a in section["attacks"])
            bounds.append(best)
            violated += any(a["result"]["verdict"] == "violated" for a in section["attacks"])
            found += best > 0
            claim = section["claim"]["epsilon"]
        claimed = "-" if claim is None else f"{claim:.3f}"
        spread = f"{min(bounds):.3f} / {np.mean(bounds):.3f} / {max(bounds):.3f}"
        print(f"{name:40s} {claimed:>9s} {spread:>34s} {violated:>5d}/{seeds:<3d} {found:>5d}/{seeds:<3d} "
              f"{time.perf_counter() - start:8.1f}")
    print(f"(a correct claim may be called violated in at most {allowed} of {seeds} seeds by chance, the 99.9 % "
          "quantile of Binomial(seeds, 0.05))")


def timing(references: int, repeats: int) -> None:
    for name, training in (("20 clients, 5 rounds, 2 local epochs of batches of 16", _TRAINING),
                           ("10 clients, 5 rounds, 15 single-example steps (the quickstart's)", _QUICKSTART_TRAINING)):
        config = _config(0, {"name": "none"}, {"level": "record"}, references, training)
        seconds: dict[bool, list[float]] = {True: [], False: []}
        for _ in range(repeats):
            for stacked in (True, False):
                seconds[stacked].append(membership_runs(config, stacked=stacked).seconds)
        together, alone = statistics.median(seconds[True]), statistics.median(seconds[False])
        print(f"{references + 1} runs, mlp, {name}: together median {together:.2f} s, one after another "
              f"{alone:.2f} s: {alone / together:.2f}x", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--references", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--skip-soundness", action="store_true")
    args = parser.parse_args()
    timing(args.references, args.repeats)
    if not args.skip_soundness:
        soundness(args.seeds, args.references)


if __name__ == "__main__":
    main()
