import pytest
import torch

from auditkit.fl.spec import DPSGDSpec
from auditkit.fl.local_training import local_batches, train_clients_batched, train_clients_sequential
from auditkit.fl.sampling import draw_batches
from auditkit.fl.params import ParamLayout, flat_parameters
from auditkit.models import create_model


def _problem(name, clients, tau, batch, shape=(1, 28, 28), seed=0):
    torch.manual_seed(seed)
    model = create_model(name, input_shape=shape)
    start = flat_parameters(model)
    inputs = torch.rand(clients, tau, batch, *shape)
    labels = torch.randint(0, 10, (clients, tau, batch))
    momentum = 0.01 * torch.randn(clients, start.numel())  # carried-over state from earlier rounds
    return model, start, momentum, inputs, labels


@pytest.mark.parametrize(("name", "batch"), [("cnn", 1), ("mlp", 4), ("linear", 8)])
def test_batched_equals_sequential(name, batch):
    model, start, momentum, inputs, labels = _problem(name, clients=5, tau=15, batch=batch)
    a = train_clients_batched(model, start, momentum, inputs, labels, lr=0.05, mu=0.9)
    b = train_clients_sequential(model, start, momentum, inputs, labels, lr=0.05, mu=0.9)
    assert torch.allclose(a.params, b.params, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.momentum, b.momentum, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.loss, b.loss, atol=1e-5)
    # training really moved every client, and differently (different data)
    assert (a.params - start).abs().amax(dim=1).min() > 1e-3
    assert not torch.allclose(a.params[0], a.params[1])


def test_single_step_is_one_sgd_step_with_momentum():
    model, start, momentum, inputs, labels = _problem("linear", clients=1, tau=1, batch=3)
    out = train_clients_batched(model, start, momentum, inputs, labels, lr=0.1, mu=0.9)
    torch.nn.utils.vector_to_parameters(start.clone(), model.parameters())
    loss = torch.nn.functional.cross_entropy(model(inputs[0, 0]), labels[0, 0])
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])
    expected_buffer = 0.9 * momentum[0] + grad
    assert torch.allclose(out.momentum[0], expected_buffer, atol=1e-6)
    assert torch.allclose(out.params[0], start - 0.1 * expected_buffer, atol=1e-6)


def test_layout_round_trips_stacked_parameters():
    model = create_model("cnn")
    layout = ParamLayout.of(model)
    flat = torch.randn(3, layout.size)
    assert layout.size == 6422
    assert torch.equal(layout.flatten(layout.unflatten(flat), batch_dims=1), flat)


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_dp_sgd_batched_equals_sequential(name):
    """DP-SGD on real Poisson batches (3 clients of 30 examples, expected batch 4, so rows are padded and masked):
    the batched path (per-example gradients by torch.func inside the client vmap) and the sequential reference (one
    backward pass per example) give the same parameters, momentum and loss to 1e-5 in float32, with the same keyed
    noise; the noise is not zero, so the agreement is not a noiseless coincidence."""
    model, start, momentum, _, _ = _problem(name, clients=3, tau=3, batch=1)
    data = torch.rand(90, 1, 28, 28)
    targets = torch.randint(0, 10, (90,))
    own = list(torch.arange(90).reshape(3, 30))
    dp_sgd = DPSGDSpec(noise_multiplier=1.1, max_grad_norm=0.5)
    batches, private = local_batches(own, [0, 1, 2], 3, seed=0, tau=3, batch_size=4, dp_sgd=dp_sgd)
    assert batches.shape[2] > 4 and (private.mask == 0).any()  # padded to the round's largest Poisson batch
    runs = []
    for train in (train_clients_batched, train_clients_sequential):
        _, private = local_batches(own, [0, 1, 2], 3, seed=0, tau=3, batch_size=4, dp_sgd=dp_sgd)
        runs.append(train(model, start, momentum, data[batches], targets[batches], lr=0.05, mu=0.9, dp_sgd=private))
    a, b = runs
    assert torch.allclose(a.params, b.params, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.momentum, b.momentum, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.loss, b.loss, atol=1e-5)
    _, quiet = local_batches(own, [0, 1, 2], 3, seed=0, tau=3, batch_size=4,
                             dp_sgd=DPSGDSpec(noise_multiplier=1e-6, max_grad_norm=0.5))
    noiseless = train_clients_batched(model, start, momentum, data[batches], targets[batches], lr=0.05, mu=0.9,
                                      dp_sgd=quiet)
    assert (a.params - noiseless.params).abs().max() > 1e-3


def test_without_dp_sgd_local_batches_are_the_uniform_draws():
    own = [torch.arange(0, 10), torch.arange(10, 30)]
    batches, private = local_batches(own, [1], 2, seed=4, tau=3, batch_size=5)
    assert private is None and torch.equal(batches, draw_batches(own, [1], 2, seed=4, tau=3, batch_size=5))
