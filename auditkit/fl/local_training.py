"""Local client training: tau steps of momentum SGD on every selected client.

Two implementations of the same computation:

* `train_clients_batched` — one tensor program for all clients: the clients' parameters are
  stacked along a leading K axis and each step is `vmap(grad(loss))` over clients
  (`torch.func`), so K clients cost about as much as one large batch.
* `train_clients_sequential` — the plain reference: one `torch.optim.SGD` per client, one
  client after another. Tests check both give the same parameters to float tolerance.

Both take the same pre-drawn batch indices, so they consume identical data. The momentum
update is PyTorch's (dampening 0, no Nesterov): ``b <- mu*b + g; w <- w - lr*b``.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from auditkit.fl.params import ParamLayout


@dataclass
class LocalResult:
    """What local training returns: new client parameters, momentum state, mean training loss."""

    params: torch.Tensor  # (K, P) flat parameters after tau steps
    momentum: torch.Tensor  # (K, P) momentum buffers after tau steps
    loss: torch.Tensor  # (K,) mean training loss over the tau steps


def train_clients_batched(
    model: nn.Module,
    start: torch.Tensor,
    momentum: torch.Tensor,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    mu: float,
) -> LocalResult:
    """Run tau local SGD steps on K clients at once.

    Args:
        model: the architecture (its own parameter values are ignored).
        start: (P,) global parameters every client starts from, or (K, P) per-client starts.
        momentum: (K, P) per-client momentum buffers (zeros for a fresh client).
        inputs: (K, tau, B, C, H, W) each client's batch for each step.
        labels: (K, tau, B) the matching labels.
        lr, mu: learning rate and momentum coefficient.
    """
    layout = ParamLayout.of(model)
    clients, steps = inputs.shape[:2]
    params = start.expand(clients, -1) if start.dim() == 1 else start
    params = layout.unflatten(params.clone())
    buffers = layout.unflatten(momentum.clone())

    def loss_fn(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(model, p, (x,)), y)

    step_grad = vmap(grad_and_value(loss_fn), randomness="different")
    losses = torch.zeros(clients, device=start.device)
    for step in range(steps):
        grads, loss = step_grad(params, inputs[:, step], labels[:, step])
        losses += loss.detach()
        for name in layout.names:
            buffers[name] = mu * buffers[name] + grads[name]
            params[name] = params[name] - lr * buffers[name]
    return LocalResult(
        params=layout.flatten(params, batch_dims=1).detach(),
        momentum=layout.flatten(buffers, batch_dims=1).detach(),
        loss=losses / steps,
    )


def train_clients_sequential(
    model: nn.Module,
    start: torch.Tensor,
    momentum: torch.Tensor,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    mu: float,
) -> LocalResult:
    """Reference path: the same computation as `train_clients_batched`, one client at a time
    with `torch.optim.SGD`."""
    clients, steps = inputs.shape[:2]
    layout = ParamLayout.of(model)
    out_params, out_momentum, out_loss = [], [], []
    for k in range(clients):
        start_k = start if start.dim() == 1 else start[k]
        torch.nn.utils.vector_to_parameters(start_k.clone(), model.parameters())
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=mu)
        for param, buf in zip(model.parameters(), layout.unflatten(momentum[k]).values()):
            optimizer.state[param]["momentum_buffer"] = buf.clone()
        total = 0.0
        for step in range(steps):
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(inputs[k, step]), labels[k, step])
            loss.backward()
            optimizer.step()
            total += loss.item()
        out_params.append(torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone())
        out_momentum.append(torch.cat([optimizer.state[p]["momentum_buffer"].reshape(-1) for p in model.parameters()]))
        out_loss.append(total / steps)
    return LocalResult(
        params=torch.stack(out_params),
        momentum=torch.stack(out_momentum),
        loss=torch.tensor(out_loss, device=start.device),
    )
