"""Benchmark: the empirical DP distinguisher -- throughput, tightness at 10^6 trials, and every mechanism's audit.

1. Throughput for ``laplace`` (scale 1, clip 0.5; pair -+0.5 in d = 1), ``cepam-gaussian`` n = 3 (sigma 1,
   clip 0.5; axis pair in d = 3) and ``jopeq-laplace`` (defaults; its axis pair in d = 9): outputs per second
   of the bulk sampling path alone and of ``distinguish`` end to end (sampling, the three statistics,
   threshold search, held-out counts), each beside one call of the real mechanism per output (the naive
   loop, timed on 2,000 calls in the same run) and its ratio. Wall times vary with the machine; the ratios
   taken in one run compare.
2. Tightness: ``laplace`` with eps = 1 (shift 1) from 10^6 trials; the Gaussian mechanism with shift 1 at
   sigma = 1 (analytic eps 4.38 at delta = 1e-5) and sigma = 2 (1.99) from 10^6 trials per side (auditing.md
   quotes ~3.35 and ~1.6 for an optimal threshold test on all 10^6; 80% of them are held out here, the
   threshold chosen on the other 20%).
3. ``audit_mechanism`` on every registered mechanism at its ``reference_params`` (else its
   defaults) with ``--trials`` per pair, Bonferroni over every test in the table at 95% family-wise, with the
   claimed eps, the true eps where the mechanism computes it, the certified lower bound, the cap, the worst
   pair, the winning statistic and the verdict.

    python benchmarks/bench_distinguish.py [--trials 1000000] [--threads 0]
"""

from __future__ import annotations

import argparse
import time

import torch

from auditkit import mechanisms
from auditkit.attacks import audit_mechanism, audit_setting, bulk_sampler, distinguish
from auditkit.attacks.audit_settings import setting_pairs
from auditkit.attacks.bulk_sampling import BulkSampler


def _create(name: str, **overrides: float) -> mechanisms.Mechanism:
    return mechanisms.create(name, private_seed=2024, **{**mechanisms.mechanism_class(name).reference_params, **overrides})


def throughput(trials: int) -> None:
    print(f"\n1. throughput: {trials} trials (outputs) per distinguish; naive loop timed on 2,000 calls")
    print(f"{'mechanism':<22} {'d':>2} {'path':<21} {'sampling /s':>12} {'distinguish /s':>15} {'loop /s':>9} ratios")
    cases = [("laplace", _create("laplace"), torch.tensor([-0.5]), torch.tensor([0.5]))]
    for label, name in (("cepam-gaussian n=3", "cepam-gaussian"), ("jopeq-laplace", "jopeq-laplace")):
        axis = setting_pairs(audit_setting(_create(name)))[0]
        cases.append((label, _create(name), axis.x0, axis.x1))
    for label, m, x0, x1 in cases:
        start = time.perf_counter()
        bulk_sampler(m, seed=1)(x0, trials, 0)
        sampling = trials / (time.perf_counter() - start)
        estimate = distinguish(m, x0, x1, trials=trials, seed=1)
        start = time.perf_counter()
        BulkSampler(m, seed=2, per_call=True)(x0, 2_000, 0)
        loop = 2_000 / (time.perf_counter() - start)
        print(
            f"{label:<22} {x0.numel():>2} {bulk_sampler(m).path:<21} {sampling:12.3g} "
            f"{estimate.samples_per_second:15.3g} {loop:9.3g} x{sampling / loop:.0f} / x{estimate.samples_per_second / loop:.0f}"
        )


def tightness() -> None:
    print("\n2. tightness (95%, 80% held out; cap = a perfect test's bound on the same counts)")
    laplace = distinguish(_create("laplace"), [-0.5], [0.5], trials=1_000_000)
    print(
        f"laplace eps=1 (scale 1, shift 1), 10^6 trials: {laplace.epsilon_lower_bound:.3f} "
        f"(statistic {laplace.statistic}, cap {laplace.max_certifiable:.2f})"
    )
    for sigma in (1.0, 2.0):
        m = _create("gaussian", sigma=sigma)
        g = distinguish(m, [-0.5], [0.5], trials=2_000_000, delta=1e-5)
        print(
            f"gaussian sigma={sigma:g} (shift 1, analytic eps {m.guarantee().epsilon:.2f} at delta 1e-5), 10^6 per "
            f"side: {g.epsilon_lower_bound:.3f} (statistic {g.statistic}, cap {g.max_certifiable:.2f})"
        )


def _true_epsilon(m: mechanisms.Mechanism) -> str:
    for owner in (m, getattr(m, "noise", None)):
        actual = None if owner is None else mechanisms.capability(owner, "true_epsilon")
        if actual is not None:
            return f"{actual:.3f}"
    return "-"


def table(trials: int) -> None:
    names = mechanisms.names()
    settings = {name: audit_setting(_create(name)) for name in names}
    tests = sum(len(setting_pairs(s)) for s in settings.values())
    print(f"\n3. every registered mechanism: {trials} trials per pair, Bonferroni over {tests} tests (95% family-wise)")
    print(
        f"{'mechanism':<15} {'setting':<36} {'claim eps':>9} {'delta':>7} {'true eps':>8} {'certified':>9} "
        f"{'cap':>6} {'worst pair':<12} {'statistic':<10} {'verdict':<14} {'s':>5}"
    )
    for name in names:
        m = _create(name)
        start = time.perf_counter()
        audit = audit_mechanism(m, trials=trials, tests=tests, seed=7)
        params = ", ".join(f"{k}={v:g}" for k, v in mechanisms.mechanism_class(name).reference_params.items()) or "defaults"
        claim = "-" if audit.claimed_epsilon is None else f"{audit.claimed_epsilon:.3f}"
        w = audit.worst
        print(
            f"{name:<15} {params:<36} {claim:>9} {w.delta:>7.0e} {_true_epsilon(m):>8} {w.epsilon_lower_bound:9.3f} "
            f"{w.max_certifiable:6.2f} {w.pair.label:<12} {w.statistic:<10} {audit.verdict:<14} "
            f"{time.perf_counter() - start:5.0f}"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=1_000_000, help="trials per pair in the table and throughput")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} device=cpu")
    throughput(args.trials)
    tightness()
    table(args.trials)


if __name__ == "__main__":
    main()
