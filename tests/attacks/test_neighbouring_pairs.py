"""Neighbouring pairs: distance, ball, block and norm constraints; quantizer pairs; bad input."""

import math

import numpy as np
import pytest
import torch

from auditkit.attacks.neighbouring_pairs import NeighbouringPair, nearby_pairs, neighbouring_pairs


def _norm(v: torch.Tensor, norm: str) -> float:
    return torch.linalg.vector_norm(v, 1 if norm == "l1" else 2).item()


@pytest.mark.parametrize("norm", ["l1", "l2"])
def test_centred_pairs_sit_on_the_ball_at_the_sensitivity(norm):
    pairs = neighbouring_pairs(4, sensitivity=2.0, norm=norm, radius=1.0, random_directions=3)
    labels = [p.label for p in pairs]
    assert labels == ["axis", "spread", "random-1", "random-2", "random-3", "zero-vs-axis"]
    for p in pairs[:-1]:
        assert _norm(p.x1 - p.x0, norm) == pytest.approx(2.0)
        assert _norm(p.x0, norm) == pytest.approx(1.0) and _norm(p.x1, norm) == pytest.approx(1.0)
    zero = pairs[-1]
    assert _norm(zero.x0, norm) == 0 and _norm(zero.x1, norm) == pytest.approx(1.0)


def test_pairs_differ_only_inside_the_block_and_same_norm_fills_after_it():
    pairs = neighbouring_pairs(6, sensitivity=1.0, radius=1.0, block=2, same_norm=True)
    assert [p.label for p in pairs] == ["axis", "spread", "random-1", "random-2"]  # no zero-vs-axis
    for p in pairs:
        assert torch.equal(p.x0[2:], p.x1[2:])
        assert p.x0.norm().item() == pytest.approx(1.0) and p.x1.norm().item() == pytest.approx(1.0)
        assert p.x0[2].item() == pytest.approx(math.sqrt(1 - 0.25))


def test_beyond_clip_and_quantizer_pairs():
    pairs = neighbouring_pairs(
        1, sensitivity=1.0, radius=1.0, beyond_clip=True, quantizer_step=0.25, quantizer_offset=0.0
    )
    by_label = {p.label: p for p in pairs}
    assert set(by_label) == {"axis", "zero-vs-axis", "beyond-clip", "in-cell", "straddle"}
    assert by_label["beyond-clip"].x1.item() == 4.0 and by_label["beyond-clip"].x0.item() == -4.0
    inside, across = by_label["in-cell"], by_label["straddle"]
    assert 0 < inside.x0.item() < inside.x1.item() < 0.25  # one cell [0, 0.25)
    assert across.x0.item() < 0 < across.x1.item()  # both sides of the boundary 0
    assert across.x1.item() - across.x0.item() == pytest.approx(0.125)


def test_random_directions_are_reproducible():
    a = neighbouring_pairs(5, sensitivity=1.0, seed=3)
    b = neighbouring_pairs(5, sensitivity=1.0, seed=3)
    assert all(torch.equal(p.x1, q.x1) for p, q in zip(a, b))
    assert a[0].to_dict()["x1"] == [0.5, 0.0, 0.0, 0.0, 0.0]


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"dimension": 0, "sensitivity": 1.0}, "dimension"),
        ({"dimension": 2, "sensitivity": 0.0}, "sensitivity"),
        ({"dimension": 2, "sensitivity": 1.0, "norm": "l3"}, "norm"),
        ({"dimension": 2, "sensitivity": 2.0, "radius": 0.5}, "radius"),
        ({"dimension": 2, "sensitivity": 1.0, "block": 3}, "block"),
        ({"dimension": 2, "sensitivity": 1.0, "same_norm": True}, "same_norm"),
        ({"dimension": 2, "sensitivity": 1.0, "random_directions": -1}, "random_directions"),
        ({"dimension": 2, "sensitivity": 1.0, "quantizer_step": -0.1}, "quantizer_step"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(kwargs, match):
    dimension = kwargs.pop("dimension")
    with pytest.raises(ValueError, match=match):
        neighbouring_pairs(dimension, **kwargs)


def test_an_add_remove_claim_tests_the_absent_client_against_one_beyond_the_clip():
    pairs = {p.label: p for p in neighbouring_pairs(2, sensitivity=1.0, radius=1.0, beyond_clip=True, add_remove=True)}
    assert pairs["beyond-clip"].x0.tolist() == [0.0, 0.0] and pairs["beyond-clip"].x1.tolist() == [4.0, 0.0]
    assert (pairs["axis"].x1 - pairs["axis"].x0).norm().item() == 1.0  # the other pairs keep the shift


def test_linf_pairs_sit_at_the_corners_of_the_cube():
    """Under an l-infinity relation every coordinate of the block may move by the full shift: spread, half-half and
    the random pairs are sign patterns, each exactly ``sensitivity`` apart in l-infinity and inside the ball."""
    pairs = {p.label: p for p in neighbouring_pairs(6, sensitivity=1.0, norm="linf", block=4, seed=1)}
    assert list(pairs) == ["axis", "spread", "half-half", "random-1", "random-2", "zero-vs-axis"]
    for pair in (pairs[label] for label in ("axis", "spread", "half-half", "random-1", "random-2")):
        shift = pair.x1 - pair.x0
        assert torch.linalg.vector_norm(shift, float("inf")).item() == pytest.approx(1.0)
        assert max(pair.x0.abs().max().item(), pair.x1.abs().max().item()) <= 0.5 + 1e-12
        assert torch.all(shift[4:] == 0)
    assert pairs["half-half"].x1.tolist() == [0.5, 0.5, -0.5, -0.5, 0.0, 0.0]
    for label in ("spread", "random-1", "random-2"):
        assert torch.all(pairs[label].x1[:4].abs() == 0.5), label


@pytest.mark.parametrize("norm", ["l1", "l2", "linf"])
def test_nearby_pairs_stay_in_the_relation_and_are_keyed(norm):
    """Every proposal keeps its parent's distance in the norm, lies in the ball, moves only the block, and the same
    generator seed gives the same proposals."""
    parent = next(p for p in neighbouring_pairs(5, sensitivity=1.0, norm=norm, radius=0.8, block=3, seed=0)
                  if p.label == "spread")
    kw = {"norm": norm, "radius": 0.8, "block": 3, "step": 0.5}
    proposals = nearby_pairs(parent, 12, rng=np.random.default_rng(7), **kw)
    p = {"l1": 1, "l2": 2, "linf": float("inf")}[norm]
    assert len(proposals) >= 10 and [q.label for q in proposals[:2]] == ["spread~1", "spread~2"]
    for q in proposals:
        assert torch.linalg.vector_norm(q.x1 - q.x0, p).item() == pytest.approx(1.0)
        assert max(torch.linalg.vector_norm(x, p).item() for x in (q.x0, q.x1)) <= 0.8 + 1e-9
        assert torch.all(q.x0[3:] == 0) and torch.all(q.x1[3:] == 0)
    assert any(not torch.allclose(q.x1 - q.x0, parent.x1 - parent.x0) for q in proposals)
    again = nearby_pairs(parent, 12, rng=np.random.default_rng(7), **kw)
    assert all(torch.equal(a.x0, b.x0) and torch.equal(a.x1, b.x1) for a, b in zip(proposals, again))


def test_no_proposals_near_a_pair_beyond_the_clip():
    far = NeighbouringPair("beyond-clip", torch.tensor([-2.0, 0.0]), torch.tensor([2.0, 0.0]))
    assert nearby_pairs(far, 4, norm="l2", radius=0.5, block=2, step=0.5, rng=np.random.default_rng(0)) == []
