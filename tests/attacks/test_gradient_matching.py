"""The matching objective: torch.func (batched) and plain autograd (single) agree; formulas and helpers."""
import pytest
import torch
import torch.nn.functional as F

from auditkit import attacks
from auditkit.attacks.gradient_matching import ClientSimulator, GradientMatching, total_variation
from auditkit.models import cnn


@pytest.fixture(scope="module")
def model():
    torch.manual_seed(0)
    return cnn().double()


@pytest.mark.parametrize("observation", ["gradient", "update"])
@pytest.mark.parametrize(("distance", "tv"), [("l2", 0.0), ("cosine", 0.3)])
def test_batched_and_single_evaluations_agree(model, observation, distance, tv):
    generator = torch.Generator().manual_seed(1)
    x = torch.rand(3, 1, 28, 28, generator=generator, dtype=torch.float64)
    target = F.softmax(torch.randn(3, 10, generator=generator, dtype=torch.float64), dim=1)
    observed = torch.randn(3, sum(p.numel() for p in model.parameters()), generator=generator, dtype=torch.float64)
    simulator = ClientSimulator(
        model, device=torch.device("cpu"), dtype=torch.float64, observation=observation, local_steps=3, local_lr=0.2
    )
    matching = GradientMatching(simulator, observed, distance=distance, tv=tv)
    rows = torch.tensor([2, 0, 1])
    x_batched = x.clone().requires_grad_(True)
    objective, loss = matching.batched(x_batched, target, rows)
    (grad_batched,) = torch.autograd.grad(objective.sum(), x_batched)
    for k, row in enumerate(rows.tolist()):
        x_single = x[k : k + 1].clone().requires_grad_(True)
        objective_k, loss_k = matching.single(x_single, target[k : k + 1], row)
        (grad_k,) = torch.autograd.grad(objective_k.sum(), x_single)
        torch.testing.assert_close(objective_k, objective[k : k + 1])
        torch.testing.assert_close(loss_k, loss[k : k + 1])
        torch.testing.assert_close(grad_k, grad_batched[k : k + 1])
    if tv:
        torch.testing.assert_close(objective - loss, tv * total_variation(x))


def test_matching_loss_is_zero_at_the_true_image_and_update_is_unrolled_sgd(model):
    generator = torch.Generator().manual_seed(2)
    x = torch.rand(2, 1, 28, 28, generator=generator, dtype=torch.float64)
    labels = torch.tensor([4, 6])
    gradients = attacks.per_image_gradients(model, x, labels)
    reference = torch.autograd.grad(F.cross_entropy(model(x[1:]), labels[1:]), list(model.parameters()))
    torch.testing.assert_close(gradients[1], torch.cat([g.reshape(-1) for g in reference]))
    targets = F.one_hot(labels, 10).double()
    for distance in ("l2", "cosine"):
        simulator = ClientSimulator(model, device=torch.device("cpu"), dtype=torch.float64)
        _, loss = GradientMatching(simulator, gradients, distance=distance, tv=0.0).batched(x, targets, torch.arange(2))
        assert loss.abs().max() < 1e-12
    one_step = ClientSimulator(
        model, device=torch.device("cpu"), dtype=torch.float64, observation="update", local_steps=1, local_lr=0.3
    )
    torch.testing.assert_close(one_step.batched(x, targets), -0.3 * gradients)


def test_total_variation_of_a_known_image():
    image = torch.zeros(1, 1, 3, 3)
    image[0, 0, :, 2] = 1.0  # one vertical edge: horizontal differences 0, 1 per row; no vertical ones
    torch.testing.assert_close(total_variation(image), torch.tensor([0.5]))


def test_bad_arguments_raise(model):
    with pytest.raises(ValueError, match="distance must be one of l2, cosine"):
        GradientMatching(None, torch.zeros(1, 1), distance="l1", tv=0.0)
    with pytest.raises(ValueError, match="local_lr is required"):
        ClientSimulator(model, device=torch.device("cpu"), dtype=torch.float64, observation="update")
    with pytest.raises(ValueError, match="labels must hold one class per image"):
        attacks.per_image_gradients(model, torch.zeros(2, 1, 28, 28, dtype=torch.float64), [1])
