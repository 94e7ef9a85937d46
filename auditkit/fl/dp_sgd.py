"""Example-level DP-SGD inside the clients' local training (Abadi et al. 2016, Alg. 1), as Opacus computes it.

One local step of client k on its Poisson batch (``auditkit.fl.sampling.draw_poisson_batches``, rate
q_k = B / n_k, mask m_i = 1 for a sampled example, 0 for padding):

    g_i   = grad_w loss(w; x_i, y_i)                          (per-example gradient, every trained parameter)
    s     = sum_i m_i * g_i * min(1, C / ||g_i||_2)           (``clipped_gradient_sum``; the norm over all of them)
    g     = (s + N(0, (z C)^2 I)) / B                         (``noisy_step_gradient``)

then momentum and the SGD step as without DP-SGD. w is the trained parameters (``auditkit.fl.params``): a frozen
parameter has no gradient, is not clipped and gets no noise, as in Opacus, which clips the ``requires_grad`` ones.
Dividing by the expected batch size B, not the realised one, is Opacus's ``DPOptimizer(expected_batch_size=B)`` and
keeps the released g a Gaussian mechanism of sensitivity C / B under adding or removing one example. Opacus clips
with min(1, C / (||g_i|| + 1e-6)), a clip factor smaller by a relative 1e-6 / ||g_i|| at most; the tests check the
two against ``opacus.GradSampleModule`` + ``DPOptimizer`` to 1e-6.

The per-example gradients are ``vmap(grad(loss of one example))`` (``torch.func``), itself inside the vmap over
clients in the batched path (``clipped_gradient_sums``). The noise of client k comes from its own generator, keyed
by ``dp-sgd-noise/{round}/{k}`` (``auditkit.fl.local_training.local_batches``) and drawn outside the vmap, one (P,)
vector per step in step order, so the batched and sequential paths (and Flower's clients) draw the same numbers.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap

__all__ = ["DPSGD", "clipped_gradient_sum", "clipped_gradient_sums", "noisy_step_gradient", "step_noise"]


@dataclass(frozen=True)
class DPSGD:
    """DP-SGD's settings for one round of local training of S clients.

    Args:
        noise_multiplier: z, the noise's std over ``max_grad_norm``.
        max_grad_norm: C, the l2 norm each example's gradient is clipped to.
        expected_batch_size: B, what the noisy sum is divided by (q_k n_k for every client k).
        mask: (S, tau, Bmax) 1 for a sampled example, 0 for padding.
        noise: one generator per client, the source of its steps' noise.
    """

    noise_multiplier: float
    max_grad_norm: float
    expected_batch_size: int
    mask: torch.Tensor
    noise: tuple[torch.Generator, ...]


def clipped_gradient_sum(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    max_grad_norm: float,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """sum_i m_i g_i min(1, C / ||g_i||_2) over one client's batch, and the per-example losses.

    Args:
        model: the architecture (``params`` are its trained parameters' values, by name; its frozen ones are its own).
        inputs, labels: (B, ...) and (B,) the batch, padding included.
        mask: (B,) 1 for a sampled example, 0 for padding.
        max_grad_norm: C.

    Returns:
        The clipped sum by parameter name, and the (B,) cross-entropy of each example.
    """

    def loss_one(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return nn.functional.cross_entropy(functional_call(model, p, (x[None],)), y[None])

    grads, losses = vmap(grad_and_value(loss_one), in_dims=(None, 0, 0), randomness="different")(
        params, inputs, labels)
    norms = torch.sqrt(sum(g.flatten(1).pow(2).sum(1) for g in grads.values()))
    scale = torch.clamp(max_grad_norm / norms, max=1.0) * mask  # C / 0 = inf -> 1: a zero gradient stays zero
    return {name: torch.einsum("b,b...->...", scale, g) for name, g in grads.items()}, losses


def clipped_gradient_sums(
    model: nn.Module,
    params: dict[str, torch.Tensor],
    inputs: torch.Tensor,
    labels: torch.Tensor,
    mask: torch.Tensor,
    max_grad_norm: float,
) -> tuple[dict[str, torch.Tensor], torch.Tensor]:
    """``clipped_gradient_sum`` of S clients at once (the vmap over clients around the vmap over examples):
    ``params`` (S, ...) by name, ``inputs`` (S, B, ...), ``labels`` and ``mask`` (S, B); returns the (S, ...)
    sums by name and the (S, B) per-example losses."""

    def one(p: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor, m: torch.Tensor):
        return clipped_gradient_sum(model, p, x, y, m, max_grad_norm)

    return vmap(one, randomness="different")(params, inputs, labels, mask)


def step_noise(generators: Sequence[torch.Generator], size: int, *, dtype: torch.dtype,
               device: torch.device | str) -> torch.Tensor:
    """(S, size) standard normal draws, row k from ``generators[k]`` (on the CPU, then moved to ``device``)."""
    return torch.stack([torch.randn(size, generator=g, dtype=dtype) for g in generators]).to(device)


def noisy_step_gradient(clipped_sum: torch.Tensor, noise: torch.Tensor, dp_sgd: DPSGD) -> torch.Tensor:
    """(s + z C xi) / B: the step's gradient from the clipped sum s and standard normal draws xi of its shape."""
    scale = dp_sgd.noise_multiplier * dp_sgd.max_grad_norm
    return (clipped_sum + scale * noise) / dp_sgd.expected_batch_size
