"""Benchmark: bulk sampling throughput of every registered mechanism at its audit setting, against one call per output.

For every registered mechanism at its ``reference_params`` (else its defaults), the configurations whose sampling
path differs (DP-SQ's adaptive range, MSP-FL's paper004 split with hidden m_i > 1) and the example plugin
``examples/half_noise_plugin``, the input is the first pair of the mechanism's audit setting
(``auditkit.attacks.audit_settings``). Each row gives:

* ``path``: the sampling path ``auditkit.attacks.bulk_sampling`` takes (tiled, mechanism batch, per call);
* ``bulk /s``: outputs per second of that path, drawing ``--outputs`` outputs (the best of ``--repeats`` runs);
* ``per call /s``: one call of the real mechanism per output (``BulkSampler(per_call=True)``), timed on
  ``--calls`` calls in the same run; ``ratio``: bulk / per call;
* ``coords /s``: bulk outputs per second times the output's coordinates;
* ``>= 1e6``: whether the bulk path reaches 10^6 outputs per second; below it, the reason is printed under the
  table (``REASONS``: what the real implementation does per output that a faster path would have to skip).

Both paths are timed in the same process one after the other, so the ratio compares even on a noisy machine.

    python benchmarks/bench_sampling.py [--outputs 2000000] [--calls 1000] [--threads 2]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import torch

from auditkit import mechanisms
from auditkit.attacks import audit_setting
from auditkit.attacks.audit_settings import setting_pairs
from auditkit.attacks.bulk_sampling import BulkSampler

_PLUGIN = Path(__file__).resolve().parents[1] / "examples" / "half_noise_plugin" / "half_noise.py"
REASONS = {  # why a mechanism's faithful bulk path stays below 10^6 outputs/s on this CPU
    "cepam-gaussian": "its real encoder: LRSUQ rejection sampling whose clip is also the coding range, so at most "
                      "4,096 copies per call, each call entropy-coding (Elias-gamma) and decoding its message",
    "cepam-laplace": "as cepam-gaussian: LRSUQ, at most 4,096 copies per call, each message coded and decoded",
    "jopeq-exact": "LRSUQ per coordinate of a 9-coordinate input: at most 4,096 copies per call (the coding range "
                   "grows with the copies), each message coded and decoded",
    "jopeq-t": "an 18-coordinate input: 9 hexagonal-lattice blocks with bivariate t noise per output",
}
_EXTRA = {  # configurations whose sampling path differs from the reference one
    "dpsq": [{"eps": 1.0, "range": "adaptive"}],
    "msp": [{"compat": "paper004", "m_max": 4}],
    "mspdq": [{"compat": "paper004", "m_max": 4, "start": "split"}],
}


def _cases() -> list[tuple[str, mechanisms.Mechanism]]:
    cases = []
    for name in mechanisms.names():
        reference = dict(mechanisms.mechanism_class(name).reference_params)
        for params in [reference, *_EXTRA.get(name, [])]:
            label = name + ("" if params == reference else " " + ",".join(f"{k}={v}" for k, v in params.items()))
            cases.append((label, mechanisms.create(name, private_seed=11, **params)))
    return cases


def _rate(sampler: BulkSampler, x: torch.Tensor, count: int, repeats: int) -> float:
    best = float("inf")
    for repeat in range(repeats):
        start = time.perf_counter()
        out = sampler(x, count, repeat)
        best = min(best, time.perf_counter() - start)
        assert out.shape[0] == count and torch.isfinite(out).all()
    return count / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--outputs", type=int, default=2_000_000, help="outputs drawn by the bulk path per run")
    parser.add_argument("--calls", type=int, default=1_000, help="calls timed on the per-call path")
    parser.add_argument("--repeats", type=int, default=3, help="bulk runs; the fastest is reported")
    parser.add_argument("--threads", type=int, default=2, help="torch threads (0: torch's default)")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    mechanisms.load_plugins([str(_PLUGIN)])
    print(f"torch={torch.__version__} threads={torch.get_num_threads()} device=cpu; {args.outputs} outputs per "
          f"bulk run (best of {args.repeats}), {args.calls} per-call outputs")
    print(f"{'mechanism':<44} {'d':>2} {'path':<16} {'bulk /s':>9} {'coords /s':>9} {'per call /s':>11} "
          f"{'ratio':>7} {'>= 1e6':>6}")
    slow = []
    for label, m in _cases():
        x = setting_pairs(audit_setting(m))[0].x0
        bulk = BulkSampler(m, seed=1)
        bulk_rate = _rate(bulk, x, args.outputs, args.repeats)
        call_rate = _rate(BulkSampler(m, seed=2, per_call=True), x, args.calls, 1)
        fast = bulk_rate >= 1e6
        if not fast:
            slow.append(label)
        print(f"{label:<44} {x.numel():>2} {bulk.path:<16} {bulk_rate:9.3g} {bulk_rate * x.numel():9.3g} "
              f"{call_rate:11.3g} {bulk_rate / call_rate:7.0f} {'yes' if fast else 'NO':>6}", flush=True)
    print(f"below 10^6 outputs/s: {', '.join(slow) if slow else 'none'}")
    for label in slow:
        print(f"  {label}: {REASONS.get(label.split()[0], 'no reason recorded: a regression to look into')}")


if __name__ == "__main__":
    main()
