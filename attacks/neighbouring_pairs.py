"""Neighbouring input pairs (x0, x1) at a claimed sensitivity: the candidates a distinguishing audit tries.

Under replace-one neighbouring any two inputs of the clipping ball are neighbours, so the strongest pairs sit
on its boundary at distance ``sensitivity`` (= 2 clip for a clip-norm ball). ``neighbouring_pairs`` builds,
in dimension d, pairs that differ only in the first ``block`` coordinates (the unit a per-block claim covers):

* ``axis``: x0 = -(s/2) e1, x1 = +(s/2) e1 (centred, so ||x0|| = ||x1||);
* ``spread``: the same along (1, ..., 1) over the block, normalised in the claim's norm (block > 1);
* ``random-k``: along k random Gaussian directions in the block, normalised in the norm (block > 1); in
  ``linf`` random sign patterns instead (every coordinate of the block moves by the full shift);
* ``half-half`` (``linf``, block > 1): the first half of the block moves up, the rest down (StatDP's
  "half half" database pair for counting queries, Ding et al., CCS 2018);
* ``zero-vs-axis``: x0 = 0, x1 = min(s, radius) e1, the add-remove shape (skipped with ``same_norm``);
* ``beyond-clip``: x0 = -4 radius e1, x1 = +4 radius e1, inputs the clip must pull back (with
  ``beyond_clip``: a mechanism that skips its clip is caught here); under an add/remove-one claim
  (``add_remove``) x0 = 0, the client absent, so the pair stays a neighbouring one after clipping;
* quantizer pairs (with ``quantizer_step`` Delta and a cell boundary at ``quantizer_offset`` o), shift
  h = min(s, Delta/2) along e1: ``in-cell`` x = o + Delta/2 -+ h/2 (both inside one cell) and ``straddle``
  x = o -+ h/2 (on both sides of the boundary); kept only where they fit the ball (and ``same_norm``).

``same_norm`` (for mechanisms that reveal ||x||, e.g. JoPEQ's scale zeta, whose claim is about the scaled
update at a fixed zeta) fills the coordinate after the block so that ||x0||_2 = ||x1||_2 = radius; pairs with
different norms are the side-channel tests of the adaptive attacks, not of the claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from auditkit.validation import Choice, Integer, Number, Optional

__all__ = ["NORMS", "NeighbouringPair", "neighbouring_pairs"]

NORMS = ("l1", "l2", "linf")
_BEYOND_CLIP = 4.0


@dataclass(frozen=True, eq=False)
class NeighbouringPair:
    """Two neighbouring inputs (1-D float64 tensors of one shape) and the name of how they were built."""

    label: str
    x0: torch.Tensor
    x1: torch.Tensor

    def to_dict(self) -> dict[str, Any]:
        return {"label": self.label, "x0": self.x0.tolist(), "x1": self.x1.tolist()}


def neighbouring_pairs(
    dimension: int,
    *,
    sensitivity: float,
    norm: str = "l2",
    radius: float | None = None,
    block: int | None = None,
    random_directions: int = 2,
    same_norm: bool = False,
    beyond_clip: bool = False,
    add_remove: bool = False,
    quantizer_step: float | None = None,
    quantizer_offset: float = 0.0,
    seed: int = 0,
) -> list[NeighbouringPair]:
    """The candidate pairs of the module docstring in ``dimension`` coordinates.

    sensitivity: distance ||x1 - x0|| (in ``norm``) of the boundary pairs; radius: the ball the inputs must
    lie in (default sensitivity / 2); block: leading coordinates a pair may differ in (default all).
    """
    Integer(low=1).check(dimension, "dimension")
    positive = Number(low=0, low_open=True)
    positive.check(sensitivity, "sensitivity")
    Optional(positive).check(radius, "radius")
    Optional(positive).check(quantizer_step, "quantizer_step")
    Choice(NORMS).check(norm, "norm")
    radius = sensitivity / 2 if radius is None else radius
    if radius < sensitivity / 2 * (1 - 1e-12):
        raise ValueError(f"radius must be >= sensitivity / 2 = {sensitivity / 2:g} (the pair must fit the ball)")
    block = dimension if block is None else block
    Integer(1, dimension).check(block, "block")
    if same_norm and block >= dimension:
        raise ValueError(
            f"same_norm needs dimension > block (a coordinate after the block fills the norm), got {block}"
        )
    Integer(low=0).check(random_directions, "random_directions")

    p = {"l1": 1, "l2": 2, "linf": math.inf}[norm]
    e1 = torch.zeros(dimension, dtype=torch.float64)
    e1[0] = 1.0

    def centred(label: str, direction: torch.Tensor, half: float) -> NeighbouringPair:
        v = half * direction / torch.linalg.vector_norm(direction, p)
        filler = torch.zeros(dimension, dtype=torch.float64)
        if same_norm:
            rest = radius**2 - float(v @ v)
            if rest > 0:
                filler[block] = math.sqrt(rest)
        return NeighbouringPair(label, filler - v, filler + v)

    pairs = [centred("axis", e1, sensitivity / 2)]
    if block > 1:
        spread = torch.zeros(dimension, dtype=torch.float64)
        spread[:block] = 1.0
        pairs.append(centred("spread", spread, sensitivity / 2))
        if norm == "linf":
            half = torch.zeros(dimension, dtype=torch.float64)
            half[:block] = torch.where(torch.arange(block) < (block + 1) // 2, 1.0, -1.0)
            pairs.append(centred("half-half", half, sensitivity / 2))
        g = torch.Generator().manual_seed(seed)
        for k in range(1, random_directions + 1):
            direction = torch.zeros(dimension, dtype=torch.float64)
            direction[:block] = torch.randn(block, generator=g, dtype=torch.float64)
            if norm == "linf":  # a corner of the cube: the extreme points of the l-infinity relation
                direction[:block] = torch.where(direction[:block] >= 0, 1.0, -1.0)
            pairs.append(centred(f"random-{k}", direction, sensitivity / 2))
    if not same_norm:
        zero = torch.zeros(dimension, dtype=torch.float64)
        pairs.append(NeighbouringPair("zero-vs-axis", zero, min(sensitivity, radius) * e1))
    if beyond_clip:
        far = _BEYOND_CLIP * radius * e1
        pairs.append(NeighbouringPair("beyond-clip", torch.zeros_like(far) if add_remove else -far, far))
    if quantizer_step is not None:
        h = min(sensitivity, quantizer_step / 2)
        for label, centre in (("in-cell", quantizer_offset + quantizer_step / 2), ("straddle", quantizer_offset)):
            if abs(centre) + h / 2 <= radius and (not same_norm or centre == 0):
                pairs.append(NeighbouringPair(label, (centre - h / 2) * e1, (centre + h / 2) * e1))
    return pairs
