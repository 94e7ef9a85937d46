import pytest
import torch

from auditkit.fl.local_training import train_clients_batched, train_clients_sequential
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
