"""Accuracy and uplink rate of every mechanism in FL on the embedded default (quickstart).

Each setting trains the quickstart (digits, `cnn`, K = 10, tau = 15 single-sample steps, 60
rounds, seed 0) with one mechanism between clients and server, and the table reports the
final and best test accuracy, the measured bits per coordinate and the claimed guarantee.

    python benchmarks/train_table.py                       # every default setting below
    python benchmarks/train_table.py "gaussian sigma=0.01" "sdq bits=4 support=0.25"
    python benchmarks/train_table.py --rounds 20
"""
from __future__ import annotations

import argparse
import time

from auditkit.config import from_dict, merge, preset_dict
from auditkit.stages.train import Experiment, results_document

# Moderate settings: the quickstart's updates have l2 norm ~0.3-1.8 and per-coordinate spread
# ~0.004-0.02, so clip 1 and a per-coordinate noise std near 0.01 perturb without drowning them.
DEFAULT_SETTINGS = (
    "none",
    "sdq bits=8 support=0.5",
    "sdq bits=4 support=0.25",
    "gaussian sigma=0.01 clip=1",
    "laplace scale=0.007 clip=50",
    "gaussian+sdq sigma=0.01 clip=1 bits=4 support=0.25",
    "laplace+sdq scale=0.007 clip=50 bits=4 support=0.25",
    "t-dist",
    "t-dist+sdq",
    "cepam-gaussian sigma=0.01 n=1 clip=1",
    "cepam-gaussian sigma=0.01 n=2 clip=1",
    "cepam-gaussian sigma=0.01 n=3 clip=1",
    "cepam-laplace scale=0.007 clip=1",
    "jopeq-laplace eps=4 bits=1",
    "jopeq-t eps=4 bits=1",
    "jopeq-exact eps=4",
)


def parse_setting(text: str) -> dict:
    """'name key=value ...' -> the [mechanism] table of a config."""
    name, *pairs = text.split()
    table: dict = {"name": name}
    for pair in pairs:
        key, _, value = pair.partition("=")
        for cast in (int, float):
            try:
                table[key] = cast(value)
                break
            except ValueError:
                continue
        else:
            table[key] = value
    return table


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("settings", nargs="*", default=list(DEFAULT_SETTINGS))
    parser.add_argument("--rounds", type=int, default=None)
    args = parser.parse_args()
    base = preset_dict("quickstart", mechanisms=False)
    if args.rounds:
        base = merge(base, {"training": {"rounds": args.rounds, "checkpoints": [args.rounds]}})
    print("| mechanism | final acc | best acc | bits/coord | overloads | claimed guarantee | seconds |")
    print("|---|---|---|---|---|---|---|")
    for text in args.settings:
        try:
            config = from_dict({**base, "mechanism": parse_setting(text)})
        except ValueError as err:
            print(f"| `{text}` | skipped: {err} | | | | | |", flush=True)
            continue
        start = time.perf_counter()
        document = results_document(Experiment(config).train(), "train")
        final = document["final"]
        overloads = sum(r["stats"].get("overloads", 0) for r in document["rounds"])
        print(
            f"| `{text}` | {100 * final['test_accuracy']:.2f}% | {100 * final['best_test_accuracy']:.2f}% "
            f"| {final['bits_per_coordinate']:.3f} | {overloads:.0f} | {document['mechanism']['guarantee_summary']} "
            f"| {time.perf_counter() - start:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
