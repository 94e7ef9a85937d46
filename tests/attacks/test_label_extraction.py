"""iDLG label extraction: the true class has the only negative row sum of the last-layer weight gradient."""
import pytest
import torch

from auditkit import attacks
from auditkit.data import load_dataset, load_image_patches
from auditkit.models import cnn, lenet


def _last_weight(model, observed):
    shapes = [p.shape for p in model.parameters()]
    last = shapes[-2]  # the output layer's weight (K x F), then its bias
    start = sum(s.numel() for s in shapes[:-2])
    return observed[:, start : start + last.numel()].reshape(len(observed), *last)


def test_extracts_every_label_from_sigmoid_lenet_gradients():
    torch.manual_seed(0)
    model = lenet()
    images = load_image_patches(10)
    labels = torch.tensor([3, 0, 9, 1, 1, 7, 4, 2, 8, 5])
    observed = attacks.per_image_gradients(model, images, labels)
    assert attacks.extract_labels(_last_weight(model, observed)).tolist() == labels.tolist()


def test_extracts_every_label_from_relu_cnn_gradients():
    torch.manual_seed(1)
    model = cnn()
    digits = load_dataset("digits").train
    observed = attacks.per_image_gradients(model, digits.x[:20], digits.y[:20])
    assert attacks.extract_labels(_last_weight(model, observed)).tolist() == digits.y[:20].tolist()


def test_single_matrix_and_update_sign():
    gradient = torch.tensor([[0.2, 0.1], [-0.5, -0.1], [0.3, 0.0]])
    assert attacks.extract_labels(gradient).tolist() == [1]
    update = -0.01 * gradient  # one SGD step
    assert attacks.extract_labels(-update).tolist() == [1]


@pytest.mark.parametrize("bad", [torch.zeros(4), torch.zeros(2, 3, 4, 5), [[0.0, 1.0]]])
def test_bad_shapes_raise(bad):
    with pytest.raises(ValueError, match="observed_last_weight_grad must be a K x F or N x K x F tensor"):
        attacks.extract_labels(bad)
