"""``auditkit.fl.params``: the flat vector a client trains and sends covers the trained parameters only
(``requires_grad=True``, in ``named_parameters()`` order); a frozen parameter is never in it."""
import pytest
import torch
from torch import nn

from auditkit.fl.params import (ParamLayout, flat_parameters, frozen_parameters, load_flat_parameters,
                                trained_parameters, trained_size)


def _net() -> nn.Module:
    """8x8 inputs: a frozen first layer (64 x 16 + 16), a trained head (16 x 10 + 10 = 170) with a frozen bias
    between trained weights, so the rule is by parameter, not by layer."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Flatten(), nn.Linear(64, 16), nn.ReLU(), nn.Linear(16, 12), nn.ReLU(), nn.Linear(12, 10))
    model[1].requires_grad_(False)
    model[3].bias.requires_grad_(False)
    return model


def test_the_layout_and_the_vector_cover_the_trained_parameters_in_order():
    model = _net()
    layout = ParamLayout.of(model)
    assert layout.names == ("3.weight", "5.weight", "5.bias")
    assert [n for n, _ in trained_parameters(model)] == list(layout.names)
    assert [n for n, _ in frozen_parameters(model)] == ["1.weight", "1.bias", "3.bias"]
    assert layout.size == trained_size(model) == 16 * 12 + 12 * 10 + 10 == 322
    flat = flat_parameters(model)
    assert flat.shape == (322,)
    assert torch.equal(flat, torch.cat([model[3].weight.flatten(), model[5].weight.flatten(), model[5].bias]))


def test_loading_a_vector_sets_the_trained_parameters_and_leaves_the_frozen_ones():
    model = _net()
    frozen = {n: p.detach().clone() for n, p in frozen_parameters(model)}
    new = torch.arange(322, dtype=torch.float32)
    load_flat_parameters(model, new)
    assert torch.equal(flat_parameters(model), new)
    assert torch.equal(model[5].bias, new[-10:])
    for name, value in frozen_parameters(model):
        assert torch.equal(value, frozen[name]), name


def test_a_model_with_nothing_to_train_is_refused_in_one_line():
    model = _net().requires_grad_(False)
    assert trained_size(model) == 0
    with pytest.raises(ValueError, match=r"^model Sequential has no trainable parameter \(every parameter has "
                                         r"requires_grad=False\): its clients have nothing to train or send$"):
        ParamLayout.of(model)
