"""Benchmark: the catalogue of broken and correct DP mechanisms (``examples/dp_catalogue``) under the soundness sweep.

Every ``cat-*`` mechanism is audited by ``auditkit.attacks.soundness.soundness_sweep`` (``audit_mechanism`` with the
worst-pair search, 95% family-wise, seeds 0..N-1, ``trials`` outputs per pair). One row per mechanism: its truth
(what it declares: "correct", or "known-exceeded", i.e. broken, with its claimed and true epsilon), the verdict
counts over the seeds, the min / mean / max certified lower bound, the seconds, and the row's criterion of the
catalogue (correct: at most ``allowed_false_alarms`` "violated"; broken: "violated" in every seed).

    python benchmarks/bench_catalogue.py [--seeds 20] [--trials 10000] [--threads 1] [--names cat-svt3-roth ...]
"""

from __future__ import annotations

import argparse
import statistics
import time
from pathlib import Path

import torch

from auditkit import mechanisms
from auditkit.attacks.soundness import SoundnessRow, allowed_false_alarms, soundness_sweep
from auditkit.attacks.verdicts import Verdict

CATALOGUE = Path(__file__).resolve().parents[1] / "examples" / "dp_catalogue"
MODULES = ("catalogue_svt.py", "catalogue_noise.py", "catalogue_float.py")
HEADER = (f"{'mechanism':<27} {'truth':<8} {'claim':>6} {'true':>6} {'violated':>8} {'consist.':>8} {'inconcl.':>8} "
          f"{'min':>6} {'mean':>6} {'max':>6} {'s':>6} {'':>4}")


def load_catalogue() -> list[str]:
    """Load the catalogue's modules; their registered names in module order."""
    return [name for module in MODULES for name in mechanisms.load_plugins([str(CATALOGUE / module)])]


def meets_catalogue_criterion(row: SoundnessRow) -> bool:
    """Correct: at most ``allowed_false_alarms`` "violated"; broken (known-exceeded): "violated" in every seed."""
    if row.kind == "known-exceeded":
        return row.violated == row.seeds
    return row.kind == "correct" and row.violated <= allowed_false_alarms(row.seeds, row.confidence)


def line(row: SoundnessRow) -> str:
    m = mechanisms.create(row.name)
    m = m.with_params(**m.reference_params)
    true = mechanisms.capability(m, "true_epsilon")
    truth = "broken" if row.kind == "known-exceeded" else row.kind
    counts = " ".join(f"{row.verdicts[v]:>8}" for v in (Verdict.VIOLATED, Verdict.CONSISTENT, Verdict.INCONCLUSIVE))
    return (f"{row.name:<27} {truth:<8} {row.claimed_epsilon:6.3f} {'-' if true is None else f'{true:.3f}':>6} "
            f"{counts} {min(row.bounds):6.3f} {statistics.fmean(row.bounds):6.3f} {max(row.bounds):6.3f} "
            f"{row.seconds:6.1f} {'ok' if meets_catalogue_criterion(row) else 'MISS':>4}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=10_000, help="outputs per pair")
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1")
    parser.add_argument("--threads", type=int, default=1, help="torch threads (0: torch's default)")
    parser.add_argument("--names", nargs="*", default=None, help="only these mechanisms (default: the whole catalogue)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    names = load_catalogue()
    unknown = sorted(set(args.names or ()) - set(names))
    if unknown:
        raise ValueError(f"--names must be among the catalogue's mechanisms ({', '.join(names)}), got {unknown}")
    names = [n for n in names if args.names is None or n in args.names]
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} device=cpu")
    print(f"catalogue: {len(names)} mechanisms, {args.seeds} seeds, {args.trials} trials per pair, worst-pair search, "
          f"95% family-wise per audit")
    print(HEADER)
    start = time.perf_counter()
    rows = soundness_sweep(trials=args.trials, seeds=args.seeds, names=names, on_row=lambda r: print(line(r),
                                                                                                   flush=True))
    missed = [r.name for r in rows if not meets_catalogue_criterion(r)]
    print(f"total {time.perf_counter() - start:.1f} s; criterion missed by {len(missed)}: {', '.join(missed) or '-'}")


if __name__ == "__main__":
    main()
