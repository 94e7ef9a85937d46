"""The clients' local optimisers on flat parameter vectors, stacked over clients: PyTorch's SGD and Adam, one
fused update for all of a step's clients instead of one small kernel per parameter tensor.

With w the (S, P) parameters, g the step's gradients, lambda the weight decay, a the active-step mask:

* SGD (``torch.optim.SGD``, dampening 0, no Nesterov): g <- g + lambda w; b <- mu b + g; w <- w - lr b.
* Adam (``torch.optim.Adam``, Kingma & Ba 2015, Alg. 1; amsgrad off): g <- g + lambda w; t <- t + 1;
  m <- b1 m + (1 - b1) g; v <- b2 v + (1 - b2) g^2; w <- w - (lr / (1 - b1^t)) m / (sqrt(v) / sqrt(1 - b2^t) + eps).

A client whose step is inactive (it has fewer local steps than the longest client of the round) keeps its
parameters and state: ``where(a, new, old)``. The sequential reference path uses ``torch.optim`` itself
(``auditkit.fl.local_training.train_clients_sequential``); tests check the two agree.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from auditkit.fl.spec import Optimizer

__all__ = ["LocalOptimizer"]

ADAM_BETAS = (0.9, 0.999)
ADAM_EPS = 1e-8


@dataclass(frozen=True)
class LocalOptimizer:
    """One client optimiser's settings: ``name`` (``Optimizer``), learning rate, SGD's momentum, weight decay."""

    name: Optimizer = Optimizer.SGD
    lr: float = 0.01
    momentum: float = 0.0
    weight_decay: float = 0.0

    @property
    def slots(self) -> tuple[str, ...]:
        """The (S, P) state tensors a client keeps (Adam also keeps its step count, (S,))."""
        if self.name == Optimizer.SGD:
            return ("momentum",) if self.momentum else ()  # plain SGD keeps nothing, as torch.optim.SGD
        return ("exp_avg", "exp_avg_sq")

    def initial_state(self, clients: int, size: int, *, device: torch.device | str = "cpu",
                      dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
        """A fresh optimiser's state for ``clients`` clients of ``size`` parameters: zeros."""
        state = {slot: torch.zeros(clients, size, device=device, dtype=dtype) for slot in self.slots}
        if self.name == Optimizer.ADAM:
            state["step"] = torch.zeros(clients, device=device, dtype=dtype)
        return state

    def step(self, params: torch.Tensor, grads: torch.Tensor, state: dict[str, torch.Tensor],
             active: torch.Tensor | None = None) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        """One update of (S, P) ``params`` along (S, P) ``grads``; ``active`` (S,) bool: the clients that step."""
        if self.weight_decay:
            grads = grads + self.weight_decay * params
        if self.name == Optimizer.SGD:
            if not self.momentum:
                return (params - self.lr * grads if active is None else
                        torch.where(active[:, None], params - self.lr * grads, params)), {}
            momentum = self.momentum * state["momentum"] + grads
            new, new_state = params - self.lr * momentum, {"momentum": momentum}
        else:
            new, new_state = self._adam(params, grads, state)
        if active is None:
            return new, new_state
        keep = active[:, None]
        return torch.where(keep, new, params), {
            k: torch.where(keep if v.dim() == 2 else active, v, state[k]) for k, v in new_state.items()}

    def _adam(self, params: torch.Tensor, grads: torch.Tensor,
              state: dict[str, torch.Tensor]) -> tuple[torch.Tensor, dict[str, torch.Tensor]]:
        b1, b2 = ADAM_BETAS
        step = state["step"] + 1
        exp_avg = b1 * state["exp_avg"] + (1 - b1) * grads
        exp_avg_sq = b2 * state["exp_avg_sq"] + (1 - b2) * grads * grads
        bias1 = (1 - b1 ** step)[:, None]
        bias2 = (1 - b2 ** step)[:, None]
        denom = exp_avg_sq.sqrt() / bias2.sqrt() + ADAM_EPS
        new = params - (self.lr / bias1) * exp_avg / denom
        return new, {"exp_avg": exp_avg, "exp_avg_sq": exp_avg_sq, "step": step}

    def torch_optimizer(self, parameters) -> torch.optim.Optimizer:
        """The same optimiser from ``torch.optim``, for the sequential reference path."""
        if self.name == Optimizer.SGD:
            return torch.optim.SGD(parameters, lr=self.lr, momentum=self.momentum, weight_decay=self.weight_decay)
        return torch.optim.Adam(parameters, lr=self.lr, betas=ADAM_BETAS, eps=ADAM_EPS,
                                weight_decay=self.weight_decay)
