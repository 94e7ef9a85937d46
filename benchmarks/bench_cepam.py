"""Benchmark: CEPAM encode + decode on a 1,000,000-coordinate update, as a ratio to plain ``sdq``; and its bits.

The update: iid N(0, 1) coordinates scaled to l2 norm 1 (so clip = 1 leaves it unchanged), drawn from a fixed
seed. Every mechanism encodes and decodes the same vector with the same seed; the repeats alternate between
mechanisms and the median wall time of each is reported with its ratio to ``sdq`` (bits = 8, support 1),
since machines are noisy and only ratios taken in the same run compare; the message size is printed beside
it. CPU only.

Bits: for cepam-gaussian (clip 1) at sigma = 0.1 and 0.001 and n = 1, 2, 3 (and cepam-laplace), the measured
message size, the same message with M in fixed-length coding over its range, the papers' bound
N (H(Geom(p)) + E[ceil(log2 |M(U)|)]), the unary H section and the empirical entropy of M given U, all in bits
per coordinate, on the same update and on the 10,000-coordinate ``auditkit.mechanisms.reference_update()``.

    python benchmarks/bench_cepam.py [--coordinates 1000000] [--repeats 7] [--sigma 0.1]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from auditkit import mechanisms


def _update(m: int) -> torch.Tensor:
    x = torch.randn(m, generator=torch.Generator().manual_seed(2024), dtype=torch.float64)
    return x / x.norm()


def _timed(mechanism: mechanisms.Mechanism, x: torch.Tensor, seed: int) -> float:
    start = time.perf_counter()
    mechanism.decode(mechanism.encode(x, seed), seed)
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinates", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--sigma", type=float, default=0.1, help="cepam-gaussian sigma for the timings")
    parser.add_argument("--scale", type=float, default=0.1, help="cepam-laplace b for the timings")
    args = parser.parse_args()
    x = _update(args.coordinates)
    timed = {
        "sdq (bits=8)": mechanisms.create("sdq", bits=8),
        **{f"cepam-gaussian n={n}": mechanisms.create("cepam-gaussian", sigma=args.sigma, n=n) for n in (1, 2, 3)},
        "cepam-laplace": mechanisms.create("cepam-laplace", scale=args.scale),
    }
    bits = {name: mechanism.encode(x, 0).num_bits / x.numel() for name, mechanism in timed.items()}  # + warm-up
    times: dict[str, list[float]] = {name: [] for name in timed}
    for repeat in range(args.repeats):
        for name, mechanism in timed.items():
            times[name].append(_timed(mechanism, x, repeat + 1))
    median = {name: statistics.median(values) for name, values in times.items()}
    base = median["sdq (bits=8)"]
    print(
        f"torch={torch.__version__} threads={torch.get_num_threads()} m={args.coordinates} "
        f"repeats={args.repeats} sigma={args.sigma:g} scale={args.scale:g}; update: N(0,1) scaled to l2 norm 1"
    )
    print(f"{'mechanism':<22} {'encode+decode ms':>17} {'min ms':>8} {'ratio to sdq':>13} {'bits/coord':>11}")
    for name, value in median.items():
        print(f"{name:<22} {value * 1e3:17.1f} {min(times[name]) * 1e3:8.1f} {value / base:13.2f} {bits[name]:11.3f}")

    print("\nbits per coordinate (clip = 1): measured message | fixed-length M | papers' bound | H section | H(M|U)")
    for label, update in (("m=" + str(args.coordinates), x), ("reference m=10000", mechanisms.reference_update())):
        print(label)
        configs = [
            (f"gaussian sigma={s:g} n={n}", "cepam-gaussian", {"sigma": s, "n": n})
            for s in (0.1, 0.001)
            for n in (1, 2, 3)
        ]
        configs += [(f"laplace b={b:g}", "cepam-laplace", {"scale": b}) for b in (0.1, 0.001)]
        for name, mechanism, params in configs:
            rate = mechanisms.create(mechanism, **params).rate(update, seed=7).per_coordinate()
            print(
                f"  {name:<26} {rate['message']:8.3f} {rate['fixed_length']:8.3f} {rate['bound']:8.3f} "
                f"{rate['iterations']:8.3f} {rate['index_entropy']:8.3f}"
            )


if __name__ == "__main__":
    main()
