"""Audit settings: every registered mechanism declares one, its pairs fit its claim's ball, JoPEQ's pairs test its
claim, and a mechanism that declares none gets the generic setting, marked as such."""

import pytest
import torch

import mechanisms
from attacks.audit_settings import audit_setting, is_generic, setting_pairs
from mechanisms.additive import Laplace
from mechanisms.jopeq import jopeq_scaling
from mechanisms.lattice import to_blocks


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
