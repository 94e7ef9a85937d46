"""Observation forms (list / flat, single / batch) and the one-gradient reading of FedAvg updates."""
import pytest
import torch

from auditkit import attacks
from auditkit.attacks.observations import observation_matrix, split_observation

SHAPES = [torch.Size([2, 3]), torch.Size([2]), torch.Size([4, 1, 1])]


def test_all_forms_give_the_same_matrix():
    generator = torch.Generator().manual_seed(0)
    batch = [torch.randn(5, *s, generator=generator) for s in SHAPES]
    matrix = observation_matrix(batch, SHAPES)
    assert matrix.shape == (5, 12)
    assert torch.equal(observation_matrix(matrix, SHAPES), matrix)
    assert torch.equal(observation_matrix(tuple(t[2] for t in batch), SHAPES), matrix[2:3])
    assert torch.equal(observation_matrix(matrix[2], SHAPES), matrix[2:3])
    assert all(torch.equal(a, b) for a, b in zip(split_observation(matrix, SHAPES), batch))


@pytest.mark.parametrize(
    ("observed", "message"),
    [
        ([torch.zeros(2, 3), torch.zeros(2)], r"observed must hold one tensor per model parameter with shapes"),
        ([torch.zeros(2, 3), torch.zeros(3), torch.zeros(4, 1, 1)], r"\[\(2, 3\), \(2,\), \(4, 1, 1\)\]"),
        ([torch.zeros(5, 2, 3), torch.zeros(4, 2), torch.zeros(5, 4, 1, 1)], "same leading batch dimension"),
        (torch.zeros(11), "observed must be a flat vector of length 12 or an N x 12 matrix"),
        (torch.zeros(3, 13), "got a tensor of shape"),
        ("gradients", "observed must be a tensor or a list of tensors"),
        (torch.zeros(12, dtype=torch.long), "floating-point"),
        (torch.full((12,), float("inf")), "NaN or infinite"),
    ],
)
def test_mismatched_observations_raise(observed, message):
    with pytest.raises(ValueError, match=message):
        observation_matrix(observed, SHAPES)


def test_update_to_gradient_is_minus_update_over_lr_times_steps():
    update = torch.tensor([0.3, -0.6])
    torch.testing.assert_close(attacks.update_to_gradient(update, lr=0.1, local_steps=3), torch.tensor([-1.0, 2.0]))
    as_list = attacks.update_to_gradient([update, 2 * update], lr=0.5, local_steps=1)
    assert isinstance(as_list, list)
    torch.testing.assert_close(as_list[1], torch.tensor([-1.2, 2.4]))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [({"lr": 0.0, "local_steps": 1}, "lr must be a finite number > 0"), ({"lr": 0.1, "local_steps": 0}, "local_steps")],
)
def test_update_to_gradient_rejects_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        attacks.update_to_gradient(torch.zeros(2), **kwargs)
