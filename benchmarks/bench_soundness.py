"""Benchmark: soundness of the audit -- the full table of ``auditkit.attacks.soundness``: every registered mechanism and the
example plugin over many seeds, how often a correct claim is called "violated", whether known-exceeded claims are
caught, and the time.

Each audit is ``audit_mechanism`` at 95% family-wise confidence with the worst-pair search, as ``auditkit audit``
runs it (``--no-search``: every pair tested and Bonferroni over the pairs, the previous default). Rows
(``auditkit.attacks.soundness``): correct claims count; known-exceeded ones -- a declared ``true_epsilon()`` at least 1.25
times the claim: ``jopeq-laplace``, ``half-noise-laplace``, ``half-noise-gaussian`` -- must be caught; vacuous ones
are reported. Columns: the claimed eps, the min / mean / max
over seeds of the certified bound, the cap (a perfect test's bound), the verdict counts, the seconds, and the
row's criterion (``SoundnessRow.passes``).

Reading the count. Each audit may call a correct claim "violated" with probability up to 5%, so over 17 x 20
audits a few false alarms are allowed (at most ``allowed_false_alarms``, the 99.9% quantile of
Binomial(340, 0.05): 31); they can only come from claims that are tight at the audited pair. ``jopeq-exact``
is one (exactly Laplace(1/2) noise for the shift 2: true eps = claim = 4): without the search, at 2 x 10^5
trials it was "violated" in 5 of 400 seeds, an ideal x + Laplace(1/2) callable on the same pair in 3 of 400.

    python benchmarks/bench_soundness.py [--trials 100000] [--seeds 20] [--threads 2] [--no-search]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from auditkit import mechanisms
from auditkit.attacks.soundness import HEADER, allowed_false_alarms, soundness_sweep

_PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "half_noise_plugin" / "half_noise.py"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=100_000, help="trials per pair")
    parser.add_argument("--seeds", type=int, default=20, help="seeds 0..N-1")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (0: torch's default)")
    parser.add_argument("--no-search", dest="search", action="store_false",
                        help="test every pair (Bonferroni over the pairs) instead of the worst-pair search")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mechanisms.load_plugins([str(_PLUGIN)])
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} device=cpu")
    print(f"soundness: {args.seeds} seeds per mechanism, {args.trials} trials per pair, 95% family-wise per audit, "
          f"{'worst-pair search' if args.search else 'every pair tested (Bonferroni over the pairs)'}")
    print(HEADER)
    start = time.perf_counter()
    rows = soundness_sweep(trials=args.trials, seeds=args.seeds, search=args.search, on_row=lambda r: print(r.line(),
                                                                                                           flush=True))
    correct = [r for r in rows if r.kind == "correct"]
    audits, violated = sum(r.seeds for r in correct), sum(r.violated for r in correct)
    allowed = allowed_false_alarms(audits, 0.95)
    exceeded = [r for r in rows if r.kind == "known-exceeded"]
    print(f"correct claims: {violated} violated of {audits} audits ({len(correct)} mechanisms x {args.seeds} seeds; "
          f"a sound audit shows at most {allowed}); known-exceeded caught: "
          + ", ".join(f"{r.name} {r.violated}/{r.seeds}" for r in exceeded)
          + f" -- {'PASS' if violated <= allowed and all(r.passes for r in rows) else 'FAIL'}; "
          f"{time.perf_counter() - start:.0f} s")


if __name__ == "__main__":
    main()
