"""Output densities that mechanisms declare (``Mechanism.output_log_density``), scoring many outputs against many
candidate inputs at once.

A declared density is ln p(y | x) up to a constant in x, as a callable ``density(y, x)``: outputs y (B, d) and one
input x (d,) give B values. The identification adversary (``auditkit.attacks.identify``) needs it for hundreds of
outputs against hundreds of candidates: :func:`pair_log_densities` scores every (output, candidate) pair it is
given, through the density's own ``pairs`` method where it has one (an :class:`OutputDensity`), else one call per
distinct candidate, so a plugin's plain function works unchanged.

* :class:`ClippedGaussian` (y = clip(x) + N(0, sigma^2 I)): ln p = -||y - c||^2 / (2 sigma^2) + const, c = clip(x);
  all pairs from one matrix product, -(||y||^2 - 2 y.c + ||c||^2) / (2 sigma^2) (float64: the candidates'
  differences 2 y.(c - c') are far above its rounding);
* :class:`ClippedLaplace` (y = clip(x) + iid Laplace(b)): ln p = -||y - c||_1 / b + const; all pairs from one
  l1 distance table (``torch.cdist``, p = 1).

JoPEQ's moment-matched noise has its own (``auditkit.mechanisms.jopeq_density``).
"""
from __future__ import annotations

import math

from typing import Any

import numpy as np
import torch

__all__ = ["ClippedGaussian", "ClippedLaplace", "OutputDensity", "clipped_rows", "nearest_density", "pair_log_densities"]


def clipped_rows(xs: np.ndarray, clip: float, norm: str) -> np.ndarray:
    """Each row of ``xs`` (m, d) rescaled into the ball of radius ``clip`` in ``norm`` ("l1" or "l2"), as the
    mechanisms clip an update: x / max(1, ||x|| / clip)."""
    lengths = np.linalg.norm(xs, ord=1 if norm == "l1" else 2, axis=1, keepdims=True)
    return xs / np.maximum(1.0, lengths / clip)


class OutputDensity:
    """A declared output density: ``density(y, x)`` (ln p of each row of y given one input x, up to a constant in
    x) and ``pairs(ys, xs, rows, columns)`` (ln p(ys[rows[k]] | xs[columns[k]]) for every k). Subclasses implement
    ``table`` (every output against every candidate) or override ``pairs``; ``__call__`` is one column of it."""

    def table(self, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
        """ln p(ys[i] | xs[j]) up to a constant in x, shape (len(ys), len(xs))."""
        raise NotImplementedError

    def __call__(self, y: np.ndarray, x: np.ndarray) -> np.ndarray:
        return self.table(np.asarray(y, dtype=np.float64), np.asarray(x, dtype=np.float64)[None])[:, 0]

    def pairs(self, ys: np.ndarray, xs: np.ndarray, rows: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """ln p(ys[rows[k]] | xs[columns[k]]) for every k, from the table of every output against the candidates
        used: the outputs are not copied (a group of outputs of a large model is most of the memory the
        identification is given; a candidate block is small beside it)."""
        used_columns, column_of = np.unique(columns, return_inverse=True)
        used = xs if len(used_columns) == len(xs) else xs[used_columns]
        return self.table(ys, used)[rows, column_of]


def _squared_norms(values: np.ndarray) -> np.ndarray:
    """||v||^2 of each row, float64, without a temporary the size of ``values``."""
    return np.einsum("ij,ij->i", values, values, dtype=np.float64)


class ClippedGaussian(OutputDensity):
    """y = clip(x) + N(0, sigma^2 I), the clip in ``norm``: ln p(y | x) = -||y - clip(x)||^2 / (2 sigma^2) + const."""

    def __init__(self, sigma: float, clip: float, norm: str = "l2") -> None:
        self.sigma, self.clip, self.norm = sigma, clip, norm

    def table(self, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
        ys = np.asarray(ys, dtype=np.float64)
        centres = clipped_rows(np.asarray(xs, dtype=np.float64), self.clip, self.norm)
        cross = (torch.from_numpy(ys) @ torch.from_numpy(centres).T).numpy()
        return ((2 * cross - _squared_norms(centres)[None]) / (2 * self.sigma**2)
                - _squared_norms(ys)[:, None] / (2 * self.sigma**2))


class ClippedLaplace(OutputDensity):
    """y = clip(x) + iid Laplace(``scale``), the clip in ``norm``: ln p(y | x) = -||y - clip(x)||_1 / b + const."""

    def __init__(self, scale: float, clip: float, norm: str = "l1") -> None:
        self.scale, self.clip, self.norm = scale, clip, norm

    def table(self, ys: np.ndarray, xs: np.ndarray) -> np.ndarray:
        centres = clipped_rows(np.asarray(xs, dtype=np.float64), self.clip, self.norm)
        distances = torch.cdist(torch.from_numpy(np.asarray(ys, dtype=np.float64)), torch.from_numpy(centres), p=1)
        return -distances.numpy() / self.scale


def nearest_density(mechanism: Any) -> ClippedGaussian:
    """The score of a mechanism that declares no output density: ln p = -||y - clip(x)||^2 (a unit-variance
    Gaussian about the input after the mechanism's own clipping: its ``clip`` in its ``clip_norm``, l1 or l2; no
    clip, or another norm: the input itself), so the most likely candidate is the nearest one."""
    clip, norm = mechanism.params.get("clip"), mechanism.clip_norm
    clipped = clip if clip and norm in ("l1", "l2") else np.inf
    return ClippedGaussian(math.sqrt(0.5), clipped, norm or "l2")


def pair_log_densities(density: Any, ys: np.ndarray, xs: np.ndarray, rows: np.ndarray,
                       columns: np.ndarray) -> np.ndarray:
    """ln p(ys[rows[k]] | xs[columns[k]]) for every k: the density's own ``pairs`` where it has one, else one call
    ``density(outputs, candidate)`` per distinct candidate with the outputs it is paired with."""
    rows, columns = np.asarray(rows).ravel(), np.asarray(columns).ravel()
    if isinstance(density, OutputDensity):
        return np.asarray(density.pairs(ys, xs, rows, columns), dtype=np.float64)
    scores = np.empty(len(rows), dtype=np.float64)
    for column in np.unique(columns):
        chosen = np.flatnonzero(columns == column)
        scores[chosen] = np.asarray(density(ys[rows[chosen]], xs[column]), dtype=np.float64)
    return scores
