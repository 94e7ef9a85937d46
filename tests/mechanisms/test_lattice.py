"""Lattice primitives: exact nearest points, coordinates, the Voronoi-cell dither, vector SDQ, finite ranges.

Tolerances: with n = 200_000 samples uniform over a cell, a per-coordinate sample variance has relative
standard deviation sqrt(0.8/n) = 0.2% or less (2% band = 10 sd); means are checked against 5 standard
errors; KS p-values > 0.01 with fixed seeds. The reference for "uniform over the hexagon" is an independent
rejection sampler (numpy RNG, half-plane test), not the package's dither.
"""

import itertools
import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit.mechanisms.lattice import HexagonalLattice, IntegerLattice, from_blocks, sdq_decode, sdq_encode, to_blocks
from auditkit.mechanisms.randomness import generator

N = 200_000
R3 = math.sqrt(3)
# Unit vectors of the three minimal-vector directions of A2 (30, 90, 150 degrees): the hexagon is
# |<p, m>| <= 1/sqrt3 for all three.
HEX_NORMALS = np.array([[math.cos(a), math.sin(a)] for a in np.radians([30, 90, 150])])


def _inside_hexagon(p, step=1.0, slack=1e-12):
    return (np.abs(p @ HEX_NORMALS.T) <= step / R3 + slack).all(axis=1)


def _uniform_hexagon(n, step=1.0, seed=0):
    """Independent reference: uniform points of the Voronoi hexagon by rejection from its bounding box."""
    rng = np.random.default_rng(seed)
    out = []
    while sum(len(o) for o in out) < n:
        p = rng.uniform([-2 / 3, -1 / R3], [2 / 3, 1 / R3], size=(n, 2))
        out.append(p[_inside_hexagon(p)])
    return step * np.concatenate(out)[:n]


LATTICES = [IntegerLattice(1), IntegerLattice(2), IntegerLattice(3), HexagonalLattice()]


@pytest.mark.parametrize("lattice", LATTICES, ids=["Z1", "Z2", "Z3", "A2"])
def test_nearest_point_is_the_nearest_of_all_neighbours(lattice):
    n = lattice.dimension
    y = 50 * torch.randn(20_000, n, generator=torch.Generator().manual_seed(1), dtype=torch.float64)
    coords = lattice.nearest_coordinates(y)
    assert torch.equal(coords, torch.round(coords))  # integers
    q = lattice.points(coords)
    # Brute force: every point whose coordinates are within 2 of the rounded basis coordinates.
    base = torch.round(torch.linalg.solve(lattice.generator, y.T).T)
    offsets = torch.tensor(list(itertools.product(range(-2, 3), repeat=n)), dtype=torch.float64)
    candidates = lattice.points((base[:, None, :] + offsets[None]).reshape(-1, n)).view(len(y), -1, n)
    brute = ((candidates - y[:, None, :]) ** 2).sum(-1).min(dim=1).values
    assert torch.allclose(((q - y) ** 2).sum(-1), brute, rtol=1e-12, atol=1e-12)
    assert torch.equal(lattice.nearest(y), q)


@pytest.mark.parametrize("lattice", LATTICES, ids=["Z1", "Z2", "Z3", "A2"])
def test_coordinates_and_points_are_inverse(lattice):
    coords = torch.randint(-1000, 1000, (5000, lattice.dimension), generator=torch.Generator().manual_seed(2))
    points = lattice.points(coords)
    assert torch.equal(lattice.coordinates(points), coords)
    assert torch.equal(lattice.nearest_coordinates(points + 1e-9).to(torch.int64), coords)


def test_hexagonal_geometry():
    a2 = HexagonalLattice()
    b1, b2 = a2.generator[:, 0], a2.generator[:, 1]
    assert b1.norm().item() == pytest.approx(2 / R3) and b2.norm().item() == pytest.approx(2 / R3)
    assert torch.dot(b1, b2).item() == pytest.approx(0.5 * (2 / R3) ** 2)  # 60 degrees
    assert a2.volume == pytest.approx(2 / R3)
    assert a2.normalized_second_moment == pytest.approx(5 / (36 * R3))
    assert IntegerLattice(3).normalized_second_moment == pytest.approx(1 / 12)
    # Each Voronoi vertex is equidistant (2/3) from 0 and from the two lattice points next to it.
    vertices = a2.voronoi_vertices()
    for v in vertices:
        neighbours = a2.points(torch.tensor([[1, 0], [0, 1], [-1, 1], [-1, 0], [0, -1], [1, -1]]))
        distances = (neighbours - v).norm(dim=1)
        assert v.norm().item() == pytest.approx(2 / 3)
        assert torch.isclose(distances, torch.tensor(2 / 3, dtype=torch.float64)).sum().item() == 2


def test_voronoi_cell_area_by_monte_carlo():
    # The fraction of a box whose nearest lattice point is 0 estimates the cell's area 2/sqrt3.
    box = torch.rand(N, 2, generator=torch.Generator().manual_seed(3), dtype=torch.float64) * 2 - 1  # [-1, 1]^2
    at_zero = (HexagonalLattice().nearest_coordinates(box) == 0).all(dim=1).double()
    area, sd = 4 * at_zero.mean().item(), 4 * at_zero.std().item() / math.sqrt(N)
    assert abs(area - 2 / R3) < 4 * sd


def test_hexagonal_dither_is_uniform_over_the_hexagon():
    a2 = HexagonalLattice()
    d = a2.dither(N, generator(4, "dither")).numpy()
    assert _inside_hexagon(d).all()
    cov = np.cov(d.T)
    assert np.allclose(np.diag(cov), 5 / 54, rtol=0.02) and abs(cov[0, 1]) < 0.02 * 5 / 54
    assert np.all(np.abs(d.mean(axis=0)) < 5 * math.sqrt(5 / 54 / N))
    ref = _uniform_hexagon(N, seed=5)
    for f in (
        lambda p: p[:, 0],
        lambda p: p[:, 1],
        lambda p: np.hypot(p[:, 0], p[:, 1]),
        lambda p: np.arctan2(p[:, 1], p[:, 0]),
    ):
        assert stats.ks_2samp(f(d), f(ref)).pvalue > 0.01
    # Equal-area sectors (the six triangles between consecutive vertices) get equal counts.
    sector = np.floor(np.mod(np.arctan2(d[:, 1], d[:, 0]), 2 * np.pi) / (np.pi / 3)).astype(int)
    assert stats.chisquare(np.bincount(sector, minlength=6)).pvalue > 0.01


def test_integer_dither_is_uniform_over_the_cube():
    d = IntegerLattice(3).dither(N, generator(6, "dither")).numpy()
    assert np.abs(d).max() <= 0.5
    for k in range(3):
        assert stats.kstest(d[:, k], "uniform", args=(-0.5, 1.0)).pvalue > 0.01
    assert np.allclose(np.cov(d.T), np.eye(3) / 12, atol=0.02 / 12)


@pytest.mark.parametrize("levels", [None, 64])
def test_hexagonal_sdq_error_is_uniform_and_independent_of_x(levels):
    a2, step = HexagonalLattice(), 0.25
    inputs = {  # very different fixed inputs; all well inside the range of 64 levels (radius ~ 8)
        "zero": torch.zeros(N, 2, dtype=torch.float64),
        "point": torch.tensor([[0.3, -0.2]], dtype=torch.float64).expand(N, 2),
        "far": torch.tensor([[-5.1, 3.7]], dtype=torch.float64).expand(N, 2),
        "random": torch.randn(N, 2, generator=torch.Generator().manual_seed(7), dtype=torch.float64),
    }
    if levels is None:
        inputs["huge"] = torch.tensor([[1e5, -3e4]], dtype=torch.float64).expand(N, 2)
    errors = {}
    for i, (name, x) in enumerate(inputs.items()):
        v = step * a2.dither(N, generator(10 + i, "dither"))
        idx, overloads = sdq_encode(a2, x, v, step, levels)
        assert overloads == 0
        x_hat = sdq_decode(a2, idx, v, step, levels)
        errors[name] = (x_hat - x).numpy()
    for name, e in errors.items():
        assert _inside_hexagon(e, step, slack=1e-9).all(), name
        assert np.allclose(e.var(axis=0), 5 / 54 * step**2, rtol=0.02), name
        assert np.all(np.abs(e.mean(axis=0)) < 5 * step * math.sqrt(5 / 54 / N)), name
        for k in range(2):
            assert stats.ks_2samp(e[:, k], errors["zero"][:, k]).pvalue > 0.01 or name == "zero"
    x = inputs["random"].numpy()
    assert abs(np.corrcoef(errors["random"][:, 0], x[:, 0])[0, 1]) < 0.01


def test_integer_sdq_in_three_dimensions():
    z3, step = IntegerLattice(3), 0.1
    x = torch.randn(N // 2, 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    v = step * z3.dither(N // 2, generator(9, "dither"))
    idx, _ = sdq_encode(z3, x, v, step)
    e = (sdq_decode(z3, idx, v, step) - x).numpy()
    for k in range(3):
        assert stats.kstest(e[:, k], "uniform", args=(-step / 2, step)).pvalue > 0.01
    assert torch.equal(idx, torch.round((x - v) / step).to(torch.int64))


def test_finite_range_points_overloads_and_indices():
    a2, step, levels = HexagonalLattice(), 0.5, 9  # support = levels * step / 2 = 2.25
    support = levels * step / 2
    g = torch.Generator().manual_seed(11)
    angle = 2 * math.pi * torch.rand(N, generator=g, dtype=torch.float64)
    radius = (support - 11 * step / 6) * torch.rand(N, generator=g, dtype=torch.float64).sqrt()
    inside = torch.stack([radius * torch.cos(angle), radius * torch.sin(angle)], dim=1)
    v = step * a2.dither(N, generator(12, "dither"))
    idx, overloads = sdq_encode(a2, inside, v, step, levels)
    assert overloads == 0 and idx.min() >= 0 and idx.max() <= levels - 1
    # The range is symmetric: index (4, 4) of 9 levels is the origin.
    assert torch.equal(
        sdq_decode(a2, torch.tensor([[4, 4]]), torch.zeros(1, 2, dtype=torch.float64), step, 9),
        torch.zeros(1, 2, dtype=torch.float64),
    )
    far = torch.tensor([[10.0, 0.0], [0.0, -10.0], [1e300, 1e300], [2.6, -1.5]], dtype=torch.float64)
    idx, overloads = sdq_encode(a2, far, torch.zeros_like(far), step, levels)
    assert overloads == 4 and idx.min() >= 0 and idx.max() <= levels - 1
    # For Z the finite range is the level set -support + step (j + 1/2) of scalar SDQ, with 2^R levels.
    z1 = IntegerLattice(1)
    j = torch.arange(8).view(-1, 1)
    levels_z = sdq_decode(z1, j, torch.zeros(8, 1, dtype=torch.float64), 0.25, 8).view(-1)
    assert torch.allclose(levels_z, -1 + 0.25 * (torch.arange(8, dtype=torch.float64) + 0.5))


def test_unbounded_sdq_refuses_inexact_coordinates():
    with pytest.raises(ValueError, match="too large"):
        sdq_encode(IntegerLattice(1), torch.tensor([[1e300]]), torch.zeros(1, 1, dtype=torch.float64), 1.0)


def test_blocks_are_contiguous_and_zero_padded():
    x = torch.arange(1.0, 6.0, dtype=torch.float64)
    b = to_blocks(x, 2)
    assert torch.equal(b, torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 0.0]], dtype=torch.float64))
    assert torch.equal(from_blocks(b, 5), x)
    assert to_blocks(torch.zeros(0, dtype=torch.float64), 2).shape == (0, 2)
