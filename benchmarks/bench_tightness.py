"""Benchmark: how close the certified bound gets to the true epsilon at a fixed budget.

Three cases (95% confidence, ``--seeds`` seeds each; mean, min and max of the certified bound):

1. ``gaussian`` sigma = 1, clip 0.5, the pair -+0.5 (shift 1): analytic eps 4.38 at delta = 1e-5;
   ``distinguish`` with 10^6 outputs per side;
2. ``laplace`` scale 1, clip 0.5, the pair -+0.5: eps = 1 exactly; ``distinguish`` with 10^6 outputs (5 x 10^5
   per side);
3. the half-noise example plugin (``examples/half_noise_plugin``, ``half-noise-gaussian`` at its reference
   sigma = 2, clip 0.5: claims 1.99, true eps 4.38), audited as ``auditkit audit`` does at the default 10^5
   outputs per pair over its 6 pairs: ``audit_mechanism`` with the worst-pair search where this version has it.

Run it on two checkouts to compare versions: the figures before and after a change come from one run each.
An oracle -- a threshold test told the best threshold, every output held out, the rates at their expected
values -- would certify 3.39 (case 1) and 3.05 (case 3 with its 2.4 x 10^5 held-out outputs per side).

    python benchmarks/bench_tightness.py [--seeds 4] [--threads 0]
"""

from __future__ import annotations

import argparse
import inspect
import statistics
import time
from pathlib import Path

import torch

from auditkit import mechanisms
from auditkit.attacks import audit_mechanism, distinguish

_PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "half_noise_plugin" / "half_noise.py"


def _row(label: str, bounds: list[float], seconds: float) -> None:
    print(f"{label:<58} {statistics.fmean(bounds):6.3f} {min(bounds):6.3f} {max(bounds):6.3f} {seconds:6.0f}",
          flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=4, help="seeds per case")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mechanisms.load_plugins([str(_PLUGIN)])
    search = "search" in inspect.signature(audit_mechanism).parameters
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} device=cpu; {args.seeds} seeds; worst-pair "
          f"search {'available' if search else 'not in this version'}")
    print(f"{'case':<58} {'mean':>6} {'min':>6} {'max':>6} {'s':>6}")
    cases = [
        ("gaussian sigma=1 (true 4.38), 10^6 per side", "gaussian", {"sigma": 1.0, "clip": 0.5}, 2_000_000, 1e-5),
        ("laplace eps=1 (true 1), 10^6 trials", "laplace", {"scale": 1.0, "clip": 0.5}, 1_000_000, 0.0),
    ]
    for label, name, params, trials, delta in cases:
        start, bounds = time.perf_counter(), []
        for seed in range(args.seeds):
            m = mechanisms.create(name, private_seed=seed, **params)
            bounds.append(distinguish(m, [-0.5], [0.5], trials=trials, delta=delta, seed=seed).epsilon_lower_bound)
        _row(label, bounds, time.perf_counter() - start)
    start, bounds = time.perf_counter(), []
    for seed in range(args.seeds):
        m = mechanisms.create("half-noise-gaussian", private_seed=seed, sigma=2.0, clip=0.5)
        options = {"search": True} if search else {}
        bounds.append(audit_mechanism(m, trials=100_000, seed=seed, **options).worst.epsilon_lower_bound)
    _row("half-noise-gaussian plugin (true 4.38), 10^5 per pair, 6 pairs", bounds, time.perf_counter() - start)


if __name__ == "__main__":
    main()
