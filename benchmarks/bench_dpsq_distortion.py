"""Benchmark: the distortion table of DP-SQ (paper 001, Fig. 2a / dpsq.md) and the cluster-size program.

For b in {4, 5, 6} and eps1 in {0.1, 0.5, 1.0, 1.5}: the expected squared error per coordinate for a ~ U[-10, 10]
of ``dpsq`` (closed form Delta^2 (e^eps1 + 7) / (12 (e^eps1 + 1)), the Monte-Carlo mean of the real mechanism
on ``--coordinates`` uniform coordinates with support = 10 and clip_norm = "none", the paper's table and the
relative error of each against it), and of ``laplace-sq`` with rho = 2C = 20 (the paper's choice, DP on the whole
range) and rho = Delta (the cell-local notion): closed form Delta^2 / 6 + 2 rho^2 / eps1^2 and Monte-Carlo. Each
Monte-Carlo value sends the real bytes (encode, serialise, parse, decode). Then the cluster-size program (27)
for the paper's setting g = (50, 50), b = (2, 4), N = 10, B = 30, C = 10, sigma = (6.25e-4, 0.125), with its
costs kappa_m and the fusion weights of each mode for d = 159,010.

    python benchmarks/bench_dpsq_distortion.py [--coordinates 200000] [--seed 0]
"""

from __future__ import annotations

import argparse

import torch

from auditkit import mechanisms
from auditkit.mechanisms.dpsq_groups import DeviceGroups, cluster_sizes, fusion_weights
from auditkit.mechanisms.dpsq import dpsq_expected_distortion, laplace_sq_expected_distortion

C = 10.0
EPSILONS = (0.1, 0.5, 1.0, 1.5)
PAPER_TABLE = {
    4: (0.570, 0.484, 0.387, 0.310),
    5: (0.134, 0.113, 0.091, 0.073),
    6: (0.0323, 0.0274, 0.0220, 0.0176),
}
PAPER_GROUPS = DeviceGroups(sizes=(50, 50), bits=(2, 4), link_sigma=(6.25e-4, 0.125))
PAPER_DIMENSION = 159_010


def _measured(name: str, x: torch.Tensor, seed: int, **params: object) -> float:
    m = mechanisms.create(name, support=C, clip_norm="none", private_seed=seed, **params)
    message = m.encode(x, seed)
    decoded = m.decode(type(message).from_bytes(message.to_bytes()), seed).double()
    return ((decoded - x) ** 2).mean().item()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--coordinates", type=int, default=200_000)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    x = torch.rand(args.coordinates, generator=torch.Generator().manual_seed(args.seed), dtype=torch.float64)
    x = 2 * C * x - C
    print(f"expected squared error per coordinate, a ~ U[-10, 10], {args.coordinates} coordinates, seed {args.seed}")
    print(f"{'b':>2} {'eps1':>5} | {'dpsq form':>9} {'dpsq MC':>9} {'paper':>7} {'form err':>8} {'MC err':>7} | "
          f"{'LSQ rho=2C':>10} {'MC':>10} | {'LSQ rho=D':>9} {'MC':>9} | {'LSQ/dpsq':>8}")  # fmt: skip
    for bits, row in PAPER_TABLE.items():
        step = 2 * C / (2**bits - 1)
        for eps, paper in zip(EPSILONS, row):
            form = dpsq_expected_distortion(bits, eps, -C, C)
            measured = _measured("dpsq", x, args.seed + bits, bits=bits, eps=eps)
            wide = laplace_sq_expected_distortion(bits, eps, 2 * C, -C, C)
            wide_mc = _measured("laplace-sq", x, args.seed + bits, bits=bits, eps=eps)
            cell = laplace_sq_expected_distortion(bits, eps, step, -C, C)
            cell_mc = _measured("laplace-sq", x, args.seed + bits, bits=bits, eps=eps, rho=step)
            print(
                f"{bits:>2} {eps:>5} | {form:>9.5f} {measured:>9.5f} {paper:>7} {form / paper - 1:>+8.2%} "
                f"{measured / paper - 1:>+7.2%} | {wide:>10.4g} {wide_mc:>10.4g} | {cell:>9.4g} {cell_mc:>9.4g} | "
                f"{wide / form:>8.3g}"
            )
    groups, total, bandwidth = PAPER_GROUPS, 10, 30
    kappa = [8 * C**2 / (2**b - 1) ** 2 + s**2 for b, s in zip(groups.bits, groups.link_sigma)]
    sizes = cluster_sizes(groups, total=total, bandwidth=bandwidth, bound=C)
    print(
        f"\ncluster sizes (program 27): g={groups.sizes} b={groups.bits} sigma={groups.link_sigma} N={total} "
        f"B={bandwidth} C={C:g}: kappa={tuple(round(k, 4) for k in kappa)} -> c={sizes} "
        f"(bits used {sum(b * c for b, c in zip(groups.bits, sizes))})"
    )
    ids = [m for m, c in enumerate(sizes) for _ in range(c)]
    for mode in ("mean", "central-cell", "bound"):
        w = fusion_weights(mode, groups, ids, dimension=PAPER_DIMENSION, bound=C)
        per_group = [round(w[[u for u, m in enumerate(ids) if m == g]].sum().item(), 4) for g in range(len(sizes))]
        print(f"fusion weights ({mode:>12}): per device {[round(v, 4) for v in w.tolist()]}, per group {per_group}")


if __name__ == "__main__":
    main()
