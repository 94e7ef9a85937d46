"""Local client training: tau steps of momentum SGD on every selected client.

Two implementations of the same computation:

* `train_clients_batched` — one tensor program for all clients: the clients' parameters are
  stacked along a leading K axis and each step is `vmap(grad(loss))` over clients
  (`torch.func`), so K clients cost about as much as one large batch.
* `train_clients_sequential` — the plain reference: one `torch.optim.SGD` per client, one
  client after another. Tests check both give the same parameters to float tolerance.

Both take the same pre-drawn batch indices, so they consume identical data. The momentum
update is PyTorch's (dampening 0, no Nesterov): ``b <- mu*b + g; w <- w - lr*b``.

With ``dp_sgd`` (``auditkit.fl.dp_sgd.DPSGD``) the step's gradient g is DP-SGD's (Abadi et al. 2016):
g = (sum_i m_i clip_C(g_i) + N(0, (z C)^2 I)) / B over the step's Poisson batch (mask m), the per-example
gradients g_i batched with ``torch.func`` inside the vmap over clients (``auditkit.fl.dp_sgd.clipped_gradient_sums``),
or one example at a time with autograd in the sequential reference. Each client's noise comes from its own
generator in step order, so both paths draw the same noise.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

from auditkit.fl.dp_sgd import DPSGD, clipped_gradient_sums, noisy_step_gradient, step_noise
from auditkit.fl.params import ParamLayout
from auditkit.fl.sampling import draw_batches, draw_poisson_batches
from auditkit.fl.spec import DPSGDSpec
from auditkit.mechanisms.randomness import generator


@dataclass
class LocalResult:
    """What local training returns: new client parameters, momentum state, mean training loss."""

    params: torch.Tensor  # (K, P) flat parameters after tau steps
    momentum: torch.Tensor  # (K, P) momentum buffers after tau steps
    loss: torch.Tensor  # (K,) mean training loss over the tau steps (DP-SGD: over the sampled examples; 0 for none)


def local_batches(
    client_indices: list[torch.Tensor],
    clients: list[int],
    round_: int,
    *,
    seed: int,
    tau: int,
    batch_size: int,
    dp_sgd: DPSGDSpec | None = None,
) -> tuple[torch.Tensor, DPSGD | None]:
    """The dataset indices (S, tau, B) every local step of ``clients`` trains on in round ``round_``, and DP-SGD's
    settings for them: ``batch_size`` samples drawn with replacement (``draw_batches``) and None, or, with
    ``dp_sgd`` enabled, Poisson batches of expected size ``batch_size`` padded to the round's largest
    (``draw_poisson_batches``) with their mask and each client's noise generator, keyed by
    ``dp-sgd-noise/{round_}/{k}`` (the same for the built-in simulator and Flower's clients)."""
    if dp_sgd is None or not dp_sgd.enabled:
        return draw_batches(client_indices, clients, round_, seed=seed, tau=tau, batch_size=batch_size), None
    indices, mask = draw_poisson_batches(client_indices, clients, round_, seed=seed, tau=tau, batch_size=batch_size)
    noise = tuple(generator(seed, f"dp-sgd-noise/{round_}/{k}") for k in clients)
    return indices, DPSGD(dp_sgd.noise_multiplier, dp_sgd.max_grad_norm, batch_size, mask, noise)


def train_clients_batched(
    model: nn.Module,
    start: torch.Tensor,
    momentum: torch.Tensor,
    inputs: torch.Tensor,
    labels: torch.Tensor,
    *,
    lr: float,
    mu: float,
    dp_sgd: DPSGD | None = None,
) -> LocalResult:
    """Run tau local SGD steps on K clients at once.

    Args:
        model: the architecture (its own parameter values are ignored).
        start: (P,) global parameters every client starts from, or (K, P) per-client starts.
        momentum: (K, P) per-client momentum buffers (zeros for a fresh client).
        inputs: (K, tau, B, C, H, W) each client's batch for each step.
        labels: (K, tau, B) the matching labels.
        lr, mu: learning rate and momentum coefficient.
        dp_sgd: DP-SGD's settings (``inputs``' third axis is then the padded Poisson batch), or None for plain SGD.
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
    counted = torch.full((clients,), float(steps), device=start.device)  # DP-SGD: the examples sampled
    if dp_sgd is not None:
        mask = dp_sgd.mask.to(start.device, start.dtype)
        counted = mask.sum((1, 2)).clamp(min=1)
    for step in range(steps):
        if dp_sgd is None:
            grads, loss = step_grad(params, inputs[:, step], labels[:, step])
            losses += loss.detach()
        else:
            sums, per_example = clipped_gradient_sums(model, params, inputs[:, step], labels[:, step],
                                                      mask[:, step], dp_sgd.max_grad_norm)
            losses += (per_example.detach() * mask[:, step]).sum(1)
            noise = layout.unflatten(step_noise(dp_sgd.noise, layout.size, dtype=start.dtype, device=start.device))
            grads = {name: noisy_step_gradient(sums[name], noise[name], dp_sgd) for name in layout.names}
        for name in layout.names:
            buffers[name] = mu * buffers[name] + grads[name]
            params[name] = params[name] - lr * buffers[name]
    return LocalResult(
        params=layout.flatten(params, batch_dims=1).detach(),
        momentum=layout.flatten(buffers, batch_dims=1).detach(),
        loss=losses / counted,
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
    dp_sgd: DPSGD | None = None,
) -> LocalResult:
    """Reference path: the same computation as `train_clients_batched`, one client at a time
    with `torch.optim.SGD` (with ``dp_sgd``: one example at a time, `_private_gradient`)."""
    clients, steps = inputs.shape[:2]
    layout = ParamLayout.of(model)
    out_params, out_momentum, out_loss = [], [], []
    for k in range(clients):
        start_k = start if start.dim() == 1 else start[k]
        torch.nn.utils.vector_to_parameters(start_k.clone(), model.parameters())
        optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=mu)
        for param, buf in zip(model.parameters(), layout.unflatten(momentum[k]).values()):
            optimizer.state[param]["momentum_buffer"] = buf.clone()
        total, counted = 0.0, 0
        for step in range(steps):
            optimizer.zero_grad()
            if dp_sgd is None:
                loss = nn.functional.cross_entropy(model(inputs[k, step]), labels[k, step])
                loss.backward()
                total, counted = total + loss.item(), counted + 1
            else:
                used = dp_sgd.mask[k, step].bool()
                step_total = _private_gradient(model, inputs[k, step][used], labels[k, step][used], dp_sgd, k)
                total, counted = total + step_total, counted + int(used.sum())
            optimizer.step()
        out_params.append(torch.nn.utils.parameters_to_vector(model.parameters()).detach().clone())
        out_momentum.append(torch.cat([optimizer.state[p]["momentum_buffer"].reshape(-1) for p in model.parameters()]))
        out_loss.append(total / max(counted, 1))
    return LocalResult(
        params=torch.stack(out_params),
        momentum=torch.stack(out_momentum),
        loss=torch.tensor(out_loss, device=start.device),
    )


def _private_gradient(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, dp_sgd: DPSGD, client: int) -> float:
    """Set the parameters' ``.grad`` to DP-SGD's step gradient (sum_i clip_C(g_i) + z C xi) / B over the sampled
    examples ``inputs``, each example's gradient from its own backward pass, xi from client ``client``'s generator;
    returns the sum of their losses."""
    parameters = list(model.parameters())
    total = torch.zeros(sum(p.numel() for p in parameters), dtype=parameters[0].dtype, device=parameters[0].device)
    loss_sum = 0.0
    for x, y in zip(inputs, labels):
        loss = nn.functional.cross_entropy(model(x[None]), y[None])
        flat = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, parameters)])
        norm = float(flat.norm())
        total += flat * (min(1.0, dp_sgd.max_grad_norm / norm) if norm > 0 else 1.0)
        loss_sum += loss.item()
    noise = torch.randn(total.numel(), generator=dp_sgd.noise[client], dtype=total.dtype).to(total.device)
    step = (total + dp_sgd.noise_multiplier * dp_sgd.max_grad_norm * noise) / dp_sgd.expected_batch_size
    for p, piece in zip(parameters, torch.split(step, [p.numel() for p in parameters])):
        p.grad = piece.reshape(p.shape)
    return loss_sum
