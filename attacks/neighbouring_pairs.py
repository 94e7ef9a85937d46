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

``nearby_pairs(pair, ...)`` proposes pairs around one found promising, for the pair search's black-box
optimisation (``auditkit.attacks.pair_search``): the shift x1 - x0 is turned (a Gaussian step in the block, or in
``linf`` sign flips) and kept at its length, the centre (x0 + x1)/2 moved, then pulled back until both inputs lie in
the ball again: every proposal is a pair of neighbours the same relation covers.

``same_norm`` (for mechanisms that reveal ||x||, e.g. JoPEQ's scale zeta, whose claim is about the scaled
update at a fixed zeta) fills the coordinate after the block so that ||x0||_2 = ||x1||_2 = radius; pairs with
different norms are the side-channel tests of the adaptive attacks, not of the claim.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from auditkit.validation import Choice, Integer, Number, Optional

__all__ = ["NORMS", "NeighbouringPair", "nearby_pairs", "neighbouring_pairs"]

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


def _norm(v: torch.Tensor, norm: str) -> float:
    return float(torch.linalg.vector_norm(v, {"l1": 1, "l2": 2, "linf": math.inf}[norm]))


def nearby_pairs(
    pair: NeighbouringPair, count: int, *, norm: str, radius: float, block: int, step: float,
    rng: np.random.Generator,
) -> list[NeighbouringPair]:
    """``count`` pairs near ``pair`` in the same relation (module docstring), labelled "<label>~<i>": the shift
    turned by a Gaussian step of relative size ``step`` in the first ``block`` coordinates (``linf``: each
    coordinate set to -length, 0 or +length with probability ``step`` / 2) at its own length, the centre moved by
    ``step`` x ``radius`` and shrunk until both inputs lie in the ``norm`` ball of ``radius``. No proposals for a
    pair outside the ball (beyond the clip: its relation is not the ball's) or whose inputs are equal."""
    x0, x1 = pair.x0, pair.x1
    shift, centre = x1 - x0, (x0 + x1) / 2
    length = _norm(shift, norm)
    if length == 0 or max(_norm(x0, norm), _norm(x1, norm)) > radius * (1 + 1e-9):
        return []
    proposals = []
    for i in range(count):
        turn = torch.zeros_like(shift)
        if norm == "linf":  # from corner to corner: a coordinate changed with probability step / 2
            changed = torch.as_tensor(rng.random(block) < step / 2)
            new = torch.as_tensor(rng.choice([-length, 0.0, length], size=block))
            turn[:block] = torch.where(changed, new, shift[:block])
        else:
            turn[:block] = shift[:block] + step * length * torch.as_tensor(rng.normal(size=block)) / math.sqrt(block)
        if _norm(turn, norm) == 0:
            continue
        turn = turn * (length / _norm(turn, norm))
        moved = centre.clone()
        moved[:block] += step * radius * torch.as_tensor(rng.normal(size=block)) / math.sqrt(block)
        for _ in range(60):  # halve the centre's distance from 0 until both inputs fit the ball
            if max(_norm(moved - turn / 2, norm), _norm(moved + turn / 2, norm)) <= radius * (1 + 1e-12):
                break
            moved = moved / 2
        else:
            moved = torch.zeros_like(moved)
        proposals.append(NeighbouringPair(f"{pair.label}~{i + 1}", moved - turn / 2, moved + turn / 2))
    return proposals
