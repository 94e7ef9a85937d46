"""Benchmark: FL test accuracy of a preset's mechanism settings under varied system parameters (issue 8's tables).

``--preset dpsq``: DP-SQ's comparison (paper 001) on the embedded digits: FedAvg, Alg. 1, +FWO, +FWO+CSO and
LaplaceSQ-FL with the literal range [-C, C] and the adaptive range, for each group-2 link noise sigma_2 of
``--link-sigma`` (the paper's 0.125, its "improved" 1.25e-2, and none). ``--preset msp``: FedAvg, MSP-FL,
MSPDQ-FL (B = 4, 8), MSP+Lap and JoPEQ (B = 8) with the uploads per round. Every run is real FL training with
the preset's data, model and schedule (``auditkit.stages.train.run_training``); only the training stage runs.

    python benchmarks/bench_fl_accuracy.py --preset dpsq [--link-sigma 0.125 0.0125 0] [--rounds 20]
    python benchmarks/bench_fl_accuracy.py --preset msp [--rounds 30]
"""

from __future__ import annotations

import argparse
import time

from auditkit.config import from_dict, merge, preset_dict
from auditkit.stages.train import run_training


def _runs(preset: str, overrides: dict) -> list[tuple[str, dict]]:
    """(label, raw config of one setting) for every setting of the preset, sweeps expanded."""
    raw = merge(preset_dict(preset), overrides)
    config = from_dict(raw)
    base = {k: v for k, v in raw.items() if k not in ("mechanism", "mechanisms")}
    out = []
    for setting in config.settings():
        table = {"name": setting.name, **setting.params}
        for key in ("fusion", "clusters"):
            if getattr(setting, key) is not None:
                table[key] = getattr(setting, key)
        out.append((setting.display, {**base, "mechanism": table}))
    return out


def _train(raw: dict) -> tuple[float, float, float, float]:
    """Final and best test accuracy, bits per coordinate per round and uploads per round."""
    run = run_training(from_dict(raw))
    records = run.result.rounds
    sent = [r for r in records if r.bits]
    uploads = sum(r.stats.get("uploads", 1.0) for r in sent) / max(1, len(sent))
    bits = sum(r.bits_per_coordinate for r in sent) / max(1, len(sent))
    return records[-1].test_accuracy, max(r.test_accuracy for r in records), bits, uploads


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--preset", choices=("dpsq", "msp"), default="dpsq")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--link-sigma", type=float, nargs="+", default=[0.125, 0.0125, 0.0])
    args = parser.parse_args()
    training = {} if args.rounds is None else {"training": {"rounds": args.rounds, "checkpoints": [1]}}
    variants = ([({"groups": {"link_sigma": [6.25e-4 if s else 0.0, s]}}, f"sigma_2 = {s:g}") for s in args.link_sigma]
                if args.preset == "dpsq" else [({}, "")])
    print(f"{'setting':<44} {'variant':<18} {'final acc':>9} {'best acc':>9} {'bits/coord':>10} {'uploads':>8} {'s':>6}")
    for overrides, variant in variants:
        for label, raw in _runs(args.preset, merge(overrides, training)):
            start = time.perf_counter()
            final, best, bits, uploads = _train(raw)
            print(f"{label:<44} {variant:<18} {100 * final:8.2f}% {100 * best:8.2f}% {bits:10.3f} {uploads:8.1f} "
                  f"{time.perf_counter() - start:6.1f}", flush=True)


if __name__ == "__main__":
    main()
