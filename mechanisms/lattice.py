"""Lattices for subtractive dithered quantization (SDQ): nearest points, Voronoi-cell dithers, finite ranges.

A lattice is Lambda = {G l : l in Z^n} for a generator matrix G whose columns are the basis vectors; l are
the integer coordinates of a point in that basis (what a message codes). Q(y) is the nearest point of
Lambda to y (JoPEQ eq. (4)); the basic cell P0 = {y : Q(y) = 0} is the Voronoi cell, of volume |det G|.

SDQ at step Delta (lattice Delta * Lambda) with dither V ~ Unif(Delta * P0) shared by both sides: the
encoder sends the coordinates of Q(x - V), the decoder outputs Q(x - V) + V. The error Q(x - V) - (x - V)
is Unif(Delta * P0) and independent of x (Zamir & Feder, IEEE Trans. IT 1992; JoPEQ Theorem II.5). JoPEQ
writes the same map as Q(x + d) - d (eq. (7)) with d = -V.

Finite range (``levels`` = K): the points are restricted to the coset Delta * G (j - o), with j in
{0, ..., K-1}^n and o = (K - 1)/2 in every coordinate, so the range is symmetric about 0 and holds K^n
points. For n = 1 these are the K levels -support + Delta (j + 1/2) of ``sdq`` with Delta = 2 support / K.
An input whose nearest coset point has a coordinate outside 0..K-1 is an overload: its coordinates are
clamped into the range (the error is then no longer uniform) and the block is counted.
"""

from __future__ import annotations

import abc
import math

import torch

__all__ = ["Lattice", "IntegerLattice", "HexagonalLattice", "to_blocks", "from_blocks", "sdq_encode", "sdq_decode"]

_EXACT_COORDINATE = 2.0**52  # float64 holds every integer up to here exactly


class Lattice(abc.ABC):
    """A lattice {G l : l in Z^n}: nearest point, coordinate <-> point maps, the uniform Voronoi-cell dither.

    ``generator`` is G (n x n, float64, columns = basis vectors); ``covariance`` is Cov(P0), the covariance
    of a point uniform over the Voronoi cell (the error covariance of SDQ at step 1).
    """

    dimension: int
    generator: torch.Tensor

    @abc.abstractmethod
    def nearest_coordinates(self, y: torch.Tensor) -> torch.Tensor:
        """Coordinates l (float64 holding integers) of the lattice point G l nearest to each row of ``y``."""

    @property
    @abc.abstractmethod
    def covariance(self) -> torch.Tensor:
        """Cov(P0) (n x n float64) of the uniform distribution on the Voronoi cell."""

    @property
    def volume(self) -> float:
        """|det G|: the volume of the Voronoi cell (one point per cell)."""
        return abs(torch.linalg.det(self.generator).item())

    @property
    def normalized_second_moment(self) -> float:
        """G(Lambda) = tr Cov(P0) / (n vol^(2/n)) (Conway & Sloane ch. 2): 1/12 for Z^n, 5/(36 sqrt 3) for A2."""
        return torch.trace(self.covariance).item() / (self.dimension * self.volume ** (2 / self.dimension))

    def points(self, coordinates: torch.Tensor) -> torch.Tensor:
        """G l for each row l of ``coordinates`` (integer or float), as float64."""
        return coordinates.to(torch.float64) @ self.generator.T

    def coordinates(self, points: torch.Tensor) -> torch.Tensor:
        """The integer coordinates (int64) of lattice points: round(G^-1 p), exact for points of the lattice."""
        return torch.round(torch.linalg.solve(self.generator, points.to(torch.float64).T).T).to(torch.int64)

    def nearest(self, y: torch.Tensor) -> torch.Tensor:
        """Q(y): the nearest lattice point to each row of ``y`` (N x n float64)."""
        return self.points(self.nearest_coordinates(y))

    def dither(self, count: int, gen: torch.Generator) -> torch.Tensor:
        """``count`` iid points uniform over the Voronoi cell P0 (count x n float64), drawn from ``gen``.

        u = G (U - 1/2) with U ~ Unif[0, 1)^n is uniform over a fundamental parallelogram; u - Q(u) maps it
        one-to-one (up to cell boundaries) onto P0 by lattice translations, which preserve volume.
        """
        u = (torch.rand(count, self.dimension, generator=gen, dtype=torch.float64) - 0.5) @ self.generator.T
        return u - self.nearest(u)


class IntegerLattice(Lattice):
    """Z^n (G = I): Q(y) rounds every coordinate, P0 = [-1/2, 1/2)^n, Cov(P0) = I/12, volume 1."""

    def __init__(self, dimension: int = 1) -> None:
        if dimension < 1:
            raise ValueError(f"lattice dimension must be >= 1, got {dimension}")
        self.dimension = dimension
        self.generator = torch.eye(dimension, dtype=torch.float64)

    def nearest_coordinates(self, y: torch.Tensor) -> torch.Tensor:
        return torch.round(y.to(torch.float64))

    @property
    def covariance(self) -> torch.Tensor:
        return torch.eye(self.dimension, dtype=torch.float64) / 12


class HexagonalLattice(Lattice):
    """The hexagonal lattice A2 with the JoPEQ reference code's generator G = [[1, 0], [1/sqrt3, 2/sqrt3]].

    Basis b1 = (1, 1/sqrt3), b2 = (0, 2/sqrt3): both of length 2/sqrt3 (the minimum distance), 60 degrees
    apart; volume det G = 2/sqrt3. The Voronoi cell is the regular hexagon with vertices
    (2/3)(cos k pi/3, sin k pi/3) and inradius 1/sqrt3; Cov(P0) = (5/54) I, i.e. G(A2) = 5/(36 sqrt3).

    Nearest point (Conway & Sloane, IEEE Trans. IT 1982): A2 is the union of the rectangular lattice
    R = 2Z x (2/sqrt3)Z and its coset R + (1, 1/sqrt3); round to the nearest point of each (coordinate-wise)
    and keep the closer one. In the basis, (2a, 2b/sqrt3) = G (2a, b - a) and
    (2a + 1, (2b + 1)/sqrt3) = G (2a + 1, b - a).
    """

    dimension = 2

    def __init__(self) -> None:
        r3 = math.sqrt(3.0)
        self.generator = torch.tensor([[1.0, 0.0], [1 / r3, 2 / r3]], dtype=torch.float64)

    def nearest_coordinates(self, y: torch.Tensor) -> torch.Tensor:
        y = y.to(torch.float64)
        r3 = math.sqrt(3.0)
        a0, b0 = torch.round(y[:, 0] / 2), torch.round(y[:, 1] * r3 / 2)
        a1, b1 = torch.round((y[:, 0] - 1) / 2), torch.round((y[:, 1] * r3 - 1) / 2)
        d0 = (y[:, 0] - 2 * a0) ** 2 + (y[:, 1] - 2 * b0 / r3) ** 2
        d1 = (y[:, 0] - 2 * a1 - 1) ** 2 + (y[:, 1] - (2 * b1 + 1) / r3) ** 2
        first = d0 <= d1
        return torch.stack([torch.where(first, 2 * a0, 2 * a1 + 1), torch.where(first, b0 - a0, b1 - a1)], dim=1)

    @property
    def covariance(self) -> torch.Tensor:
        return torch.eye(2, dtype=torch.float64) * 5 / 54

    def voronoi_vertices(self) -> torch.Tensor:
        """The six vertices (6 x 2 float64) of the Voronoi hexagon, counter-clockwise from (2/3, 0)."""
        angles = torch.arange(6, dtype=torch.float64) * math.pi / 3
        return torch.stack([torch.cos(angles), torch.sin(angles)], dim=1) * 2 / 3


def to_blocks(x: torch.Tensor, dimension: int) -> torch.Tensor:
    """The 1-D ``x`` as ceil(len / dimension) contiguous blocks (rows), the last one zero-padded."""
    blocks = -(-x.numel() // dimension)
    padded = torch.zeros(blocks * dimension, dtype=x.dtype)
    padded[: x.numel()] = x
    return padded.view(blocks, dimension)


def from_blocks(blocks: torch.Tensor, length: int) -> torch.Tensor:
    """Inverse of ``to_blocks``: the first ``length`` entries of the rows laid end to end."""
    return blocks.reshape(-1)[:length]


def _coset_offset(lattice: Lattice, levels: int) -> torch.Tensor:
    """G o with o = (K - 1)/2 in every coordinate: the coset shift that centres a K-level range on 0."""
    return lattice.points(torch.full((1, lattice.dimension), (levels - 1) / 2, dtype=torch.float64))


def sdq_encode(
    lattice: Lattice, x: torch.Tensor, dither: torch.Tensor, step: float, levels: int | None = None
) -> tuple[torch.Tensor, int]:
    """Coordinates of Q(x - V) on step * lattice for each row of ``x`` (blocks x n), and the overload count.

    ``dither`` is V (same shape, uniform over step * P0). ``levels=None``: the whole lattice; returns the
    lattice coordinates l (int64), never an overload. ``levels=K``: the finite coset range of the module
    docstring; returns indices j in {0..K-1}^n and the number of blocks that had to be clamped.
    """
    w = (x.to(torch.float64) - dither) / step
    if levels is None:
        if w.numel() and w.abs().max() >= _EXACT_COORDINATE:
            raise ValueError("input too large for exact lattice coordinates at this step")
        return lattice.nearest_coordinates(w).to(torch.int64), 0
    # Any coordinate this far out overloads anyway; the cap keeps the arithmetic finite and exact.
    w = w.clamp(-_EXACT_COORDINATE / 4, _EXACT_COORDINATE / 4)
    j = lattice.nearest_coordinates(w + _coset_offset(lattice, levels))
    overloaded = ((j < 0) | (j > levels - 1)).any(dim=1)
    return j.clamp(0, levels - 1).to(torch.int64), int(overloaded.sum())


def sdq_decode(
    lattice: Lattice, indices: torch.Tensor, dither: torch.Tensor, step: float, levels: int | None = None
) -> torch.Tensor:
    """Q(x - V) + V from the output of ``sdq_encode``: step * G (j - o) + V (o = 0 when ``levels`` is None)."""
    coordinates = indices.to(torch.float64)
    points = lattice.points(coordinates)
    if levels is not None:
        points = points - _coset_offset(lattice, levels)
    return step * points + dither
