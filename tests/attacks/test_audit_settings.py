"""Audit settings: every registered mechanism declares one, its pairs fit its claim's ball, JoPEQ's pairs test its
claim, and a mechanism that declares none gets the generic setting, marked as such."""

import dataclasses

import pytest
import torch

from auditkit import mechanisms
from auditkit.attacks.audit_settings import audit_setting, is_generic, setting_pairs
from auditkit.mechanisms.additive import Laplace
from auditkit.mechanisms.jopeq import jopeq_scaling
from auditkit.mechanisms.lattice import to_blocks


@pytest.mark.parametrize("name", mechanisms.names())
def test_pairs_fit_the_ball_and_reach_the_sensitivity(name):
    setting = audit_setting(mechanisms.create(name))
    p = 1 if setting.norm == "l1" else 2
    assert not is_generic(setting)
    pairs = setting_pairs(setting)
    assert pairs and pairs[0].label == "axis"
    for pair in pairs:
        assert pair.x0.numel() == setting.dimension
        if pair.label != "beyond-clip":
            for x in (pair.x0, pair.x1):
                assert torch.linalg.vector_norm(x, p).item() <= setting.radius * (1 + 1e-12)
    assert torch.linalg.vector_norm(pairs[0].x1 - pairs[0].x0, p).item() == pytest.approx(setting.sensitivity)


@pytest.mark.parametrize(("name", "block"), [("jopeq-laplace", 1), ("jopeq-t", 2), ("jopeq-exact", 1)])
def test_jopeq_pairs_move_one_scaled_block_by_two_at_the_same_zeta(name, block):
    setting = audit_setting(mechanisms.create(name))
    for pair in setting_pairs(setting):
        zetas = [jopeq_scaling(x, to_blocks(x, block).shape[0]) for x in (pair.x0, pair.x1)]
        assert zetas == [1.0, 1.0]
        scaled0, scaled1 = to_blocks(pair.x0, block), to_blocks(pair.x1, block)
        assert torch.linalg.vector_norm(scaled1[0] - scaled0[0]).item() == pytest.approx(2.0)
        assert torch.equal(scaled0[1:], scaled1[1:])
        assert torch.linalg.vector_norm(scaled0[0]).item() <= 1 + 1e-12


def test_clipping_mechanisms_get_beyond_clip_pairs_and_paper000_same_norm_pairs():
    assert audit_setting(mechanisms.create("laplace", clip=0.5)).beyond_clip
    paper = audit_setting(mechanisms.create("cepam-gaussian", compat="paper000"))
    assert paper.same_norm and not paper.beyond_clip
    assert all(p.x0.norm().item() == pytest.approx(p.x1.norm().item()) for p in setting_pairs(paper))


def test_a_mechanism_declaring_no_setting_gets_the_generic_one_and_it_says_so():
    class Subclass(Laplace):  # inherits nothing from a registered mechanism: it must declare its own setting
        pass

    setting = audit_setting(Subclass(scale=1.0, clip=0.25))
    assert is_generic(setting) and setting.note.startswith("generic default")
    assert (setting.dimension, setting.norm, setting.radius, setting.sensitivity) == (2, "l1", 0.25, 0.5)
    assert any(p.label == "beyond-clip" for p in setting_pairs(setting))


def _claiming(sensitivity, clip_norm=None):
    """A Laplace subclass that declares no setting, whose claim's sensitivity reads ``sensitivity``."""

    class Claiming(Laplace):
        def guarantee(self):
            return dataclasses.replace(super().guarantee(), sensitivity=sensitivity)

    Claiming.clip_norm = clip_norm
    return Claiming(scale=1.0, clip=0.5)


@pytest.mark.parametrize(("sensitivity", "clip_norm", "norm", "why"), [
    ("l1 clip 0.5", None, "l1", "l1: the norm of the claim's sensitivity 'l1 clip 0.5'"),
    # the claim's norm, not the mechanism's clip norm: every pair tried is one the claim covers
    ("l1 clip 0.5", "l2", "l1", "l1: the norm of the claim's sensitivity 'l1 clip 0.5'; the mechanism clips in l2"),
    ("l2 clip 0.5", "l1", "l2", "l2: the norm of the claim's sensitivity 'l2 clip 0.5'; the mechanism clips in l1"),
    ("l-infinity clip 0.5", None, "linf", "linf: the norm of the claim's sensitivity 'l-infinity clip 0.5'"),
    ("clip 0.5", "l1", "l1", "l1: the mechanism's clip norm"),
    ("clip 0.5", None, "l2", "l2: the claim's sensitivity 'clip 0.5' names no norm: l2 assumed"),
])
def test_the_generic_setting_takes_the_norm_of_the_claims_sensitivity(sensitivity, clip_norm, norm, why):
    setting = audit_setting(_claiming(sensitivity, clip_norm))
    assert is_generic(setting) and (setting.norm, setting.radius, setting.sensitivity) == (norm, 0.5, 1.0)
    assert setting.note == ("generic default: the mechanism declares no audit setting: d = 2, the "
                            f"{norm} ball of radius 0.5, pairs up to 1 apart (its diameter); {why}")
    p = {"l1": 1, "l2": 2, "linf": float("inf")}[norm]
    axis = setting_pairs(setting)[0]
    assert torch.linalg.vector_norm(axis.x1 - axis.x0, p).item() == pytest.approx(1.0)
