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


@pytest.mark.parametrize("observation", ["gradient", "update"])
def test_a_chunked_evaluation_gives_the_unchunked_losses_and_gradients(model, observation):
    # 7 problems, chunks of 3 (3 + 3 + 1): the losses and the gradients of a weighted objective with respect to the
    # dummies and the soft labels are those of the one-batch evaluation (the problems are independent).
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(7, 1, 28, 28, generator=generator, dtype=torch.float64, requires_grad=True)
    logits = torch.randn(7, 10, generator=generator, dtype=torch.float64, requires_grad=True)
    observed = torch.randn(3, sum(p.numel() for p in model.parameters()), generator=generator, dtype=torch.float64)
    simulator = ClientSimulator(
        model, device=torch.device("cpu"), dtype=torch.float64, observation=observation, local_steps=2, local_lr=0.2
    )
    rows, weights = torch.tensor([0, 1, 2, 0, 1, 2, 0]), torch.arange(1.0, 8.0, dtype=torch.float64)
    found = []
    for chunk in (None, 3):
        matching = GradientMatching(simulator, observed, distance="cosine", tv=0.1, chunk=chunk)
        objective, loss = matching.batched(x, F.softmax(logits, dim=1), rows)
        found.append((objective.detach(), loss.detach(), *torch.autograd.grad((weights * objective).sum(), [x, logits])))
    for whole, chunked in zip(*found):
        torch.testing.assert_close(chunked, whole, rtol=1e-10, atol=1e-12)
    with torch.no_grad():  # evaluation only: no gradient is taken
        _, loss = GradientMatching(simulator, observed, distance="cosine", tv=0.0, chunk=2).batched(x, F.softmax(logits, 1), rows)
    torch.testing.assert_close(loss, found[0][1], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="chunk must be None or a positive integer, got 0"):
        GradientMatching(simulator, observed, distance="cosine", tv=0.0, chunk=0)


_PEAK = """
import resource, sys, torch
from torch import nn
from auditkit.attacks.gradient_matching import ClientSimulator, GradientMatching
torch.manual_seed(0)
model = nn.Sequential(nn.Flatten(), nn.Linear(784, 2048), nn.ReLU(), nn.Linear(2048, 1000), nn.ReLU(), nn.Linear(1000, 10))
p = sum(q.numel() for q in model.parameters())
simulator = ClientSimulator(model, device=torch.device("cpu"), dtype=torch.float32)
matching = GradientMatching(simulator, torch.randn(16, p), distance="cosine", tv=0.0, chunk=int(sys.argv[1]))
x = torch.rand(16, 1, 28, 28, requires_grad=True)
before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
torch.autograd.grad(matching.batched(x, torch.eye(10)[torch.arange(16) % 10], torch.arange(16))[0].sum(), x)
print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before) * 1024 / p)
"""


def test_chunks_bound_the_memory_of_an_evaluation():
    # 16 problems of a 3.7M-parameter MLP at once hold 15 more problems' graphs than one at a time, each about
    # PROBLEM_BYTES_PER_PARAMETER bytes a parameter (measured 15.7; peak resident memory in fresh interpreters).
    import subprocess
    import sys

    from auditkit.attacks.gradient_matching import PROBLEM_BYTES_PER_PARAMETER

    def grown(chunk):
        out = subprocess.run([sys.executable, "-c", _PEAK, str(chunk)], capture_output=True, text=True, check=True)
        return float(out.stdout.split()[-1])  # bytes a parameter that the evaluation added to the peak

    whole, one = grown(16), grown(1)
    assert 0.75 * 15 * PROBLEM_BYTES_PER_PARAMETER < whole - one < 1.5 * 15 * PROBLEM_BYTES_PER_PARAMETER
    assert one < whole / 3


def test_the_default_chunk_fits_the_cpu_budget_whatever_the_machine_holds():
    from auditkit.attacks.gradient_matching import (ATTACK_BYTES_PER_PARAMETER, CHUNK_BYTES_CPU, attack_memory,
                                                    default_chunk)

    cpu = torch.device("cpu")
    assert default_chunk(23_528_522, cpu) == 5  # ResNet-50: 5 x 16 x 23.5M bytes = 1.9 GB of the 2 GiB
    assert default_chunk(11_181_642, cpu) == 12
    assert default_chunk(10**12, cpu) == 1  # at least one problem
    assert default_chunk(62_006, cpu) == CHUNK_BYTES_CPU // (16 * 62_006)  # LeNet: every realistic run in one chunk
    assert attack_memory(1000, problems=32, chunk=5) == (5 * 16 + ATTACK_BYTES_PER_PARAMETER) * 1000
    assert attack_memory(1000, problems=3, chunk=5) == (3 * 16 + ATTACK_BYTES_PER_PARAMETER) * 1000
