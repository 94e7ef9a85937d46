"""Benchmark: canary audits inside FL on the embedded default run, and the adaptive tests' table.

1. Canary clients in the run (``auditkit.stages.canary.canary_run``) on the ``quickstart`` preset (embedded
   digits, its MLP, 10 clients, its rounds unless ``--rounds``) with ``--canaries`` m, for ``none`` and the
   Gaussian mechanism at clip 0.1 with sigma 0.2 and sigma 0.4. Each row: a view's mean score over the included
   and the excluded canaries and the excluded ones' sd, then the final test accuracy and seconds.
2. Repeated training (``repeated_training_audit``) with ``--repeat-trials`` trials: linear model, 2 rounds,
   tau 5, the canary client in the last round, ``public`` and ``server`` views, ``none`` and Gaussian
   (clip 0.1, sigma 0.2).
3. Every adaptive test of ``auditkit.attacks.adaptive_tests`` with ``--adaptive-trials`` per view or pair: the JoPEQ
   mechanisms at their defaults, CEPAM at clip 0.5 with sigma 1 / scale 1, ``compat=paper000`` and ``none``.

    python benchmarks/bench_canary_audit.py [--canaries 1000] [--rounds 60] [--threads 1]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import torch

from auditkit import mechanisms
from auditkit.attacks.adaptive_tests import adaptive_tests_for
from auditkit.stages.canary import canary_run, repeated_training_audit
from auditkit.config import AuditConfig, from_dict, merge, preset_dict

GAUSSIAN_CLIP = 0.1


def _quickstart(mechanism: dict[str, Any], **training: Any) -> AuditConfig:
    overrides = {"device": "cpu", "mechanism": mechanism, "training": {"checkpoints": [1], **training}}
    return from_dict(merge(preset_dict("quickstart", mechanisms=False), overrides))


def one_run(canaries: int, rounds: int | None) -> None:
    print(f"\n1. canary clients in the run, quickstart preset, m = {canaries}: mean score per view")
    print(f"{'mechanism':<28} {'relation':<18} {'view':<10} {'in':>8} {'out':>8} {'sd out':>7} {'acc':>5} {'s':>5}")
    cases = [
        ("none", {"name": "none"}),
        ("gaussian clip 0.1 sigma 0.2", {"name": "gaussian", "sigma": 0.2, "clip": GAUSSIAN_CLIP}),
        ("gaussian clip 0.1 sigma 0.4", {"name": "gaussian", "sigma": 0.4, "clip": GAUSSIAN_CLIP}),
    ]
    for label, mechanism in cases:
        run = canary_run(_quickstart(mechanism, **({} if rounds is None else {"rounds": rounds})), canaries)
        inside = run.inserted
        for view, scores in run.scores.items():
            print(
                f"{label:<28} {run.relation:<18} {view:<10} {scores[inside].mean():8.3f} {scores[~inside].mean():8.3f} "
                f"{scores[~inside].std():7.3f} {run.test_accuracy:5.3f} {run.seconds:5.0f}"
            )
            label = ""


def repeated(trials: int) -> None:
    print(f"\n2. repeated training, {trials} trials (linear model, 2 rounds, tau 5; canary client in round 2)")
    print(
        f"{'mechanism':<28} {'view':<7} {'bound':>6} {'cap':>6} {'fp/n0':>7} {'fn/n1':>7} {'statistic':<10} {'verdict':<14} {'s':>5}"
    )
    for label, mechanism in (
        ("none", {"name": "none"}),
        ("gaussian clip 0.1 sigma 0.2", {"name": "gaussian", "sigma": 0.2, "clip": GAUSSIAN_CLIP}),
    ):
        for view in ("public", "server"):
            start = time.perf_counter()
            r = repeated_training_audit(
                _quickstart(mechanism, model="linear", rounds=2, tau=5), trials=trials, view=view
            )
            e = r.estimate
            print(
                f"{label:<28} {view:<7} {e.epsilon_lower_bound:6.3f} {e.max_certifiable:6.3f} {e.fp:>3}/{e.n0:<3} "
                f"{e.fn:>3}/{e.n1:<3} {e.statistic:<10} {r.verdict:<14} {time.perf_counter() - start:5.0f}"
            )


def adaptive(trials: int) -> None:
    print(f"\n3. adaptive tests, {trials} trials per view or pair (95% per test, Bonferroni over its views/pairs)")
    print(
        f"{'mechanism':<40} {'test':<26} {'claim':>6} {'bound':>6} {'cap':>6} {'statistic':<10} {'verdict':<12} {'s':>4}"
    )
    cepam = {"cepam-gaussian": {"sigma": 1.0, "clip": 0.5, "n": 3}, "cepam-laplace": {"scale": 1.0, "clip": 0.5}}
    cases = [(name, {}) for name in ("jopeq-laplace", "jopeq-t", "jopeq-exact")]
    cases += [(name, {**params, "compat": compat}) for name, params in cepam.items() for compat in ("paper000", "none")]
    for name, params in cases:
        m = mechanisms.create(name, private_seed=2024, **params)
        for test in adaptive_tests_for(name):
            start = time.perf_counter()
            r = test(m, trials=trials, seed=7)
            label = f"{name} {', '.join(f'{k}={v}' for k, v in params.items())}"
            print(
                f"{label:<40} {r.test:<26} {r.claimed_epsilon:6.2f} {r.epsilon_lower_bound:6.3f} "
                f"{r.worst.max_certifiable:6.3f} {r.statistic:<10} {r.verdict:<12} {time.perf_counter() - start:4.0f}"
            )
            for e, judged in zip(r.estimates, r.judged, strict=True):
                print(f"{'':<42}{'' if judged else '(reported) '}{e.pair.label}: {e.epsilon_lower_bound:.3f}")
            if r.findings:
                print(f"{'':<42}" + ", ".join(f"{k} = {v:.4g}" for k, v in r.findings.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--canaries", type=int, default=1000, help="m, the canary clients of the run")
    parser.add_argument("--rounds", type=int, default=None, help="FL rounds (default: the preset's 40)")
    parser.add_argument("--repeat-trials", type=int, default=200, help="trials of the repeated-training test")
    parser.add_argument("--adaptive-trials", type=int, default=10_000, help="trials per view of an adaptive test")
    parser.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} device=cpu")
    one_run(args.canaries, args.rounds)
    repeated(args.repeat_trials)
    adaptive(args.adaptive_trials)


if __name__ == "__main__":
    main()
