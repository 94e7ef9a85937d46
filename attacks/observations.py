"""What the attacker is handed: one image's (or a batch of images') observed gradient or update.

An update, and so every observation of one, covers the model's *trained* parameters only
(:func:`trained_parameters`: ``requires_grad=True``, in ``named_parameters()`` order). A frozen parameter
(``requires_grad=False``, a frozen pretrained backbone) keeps the value the model was built with on every client and
the server: it is never trained, sent or noised, and the attacks take no gradient with respect to it. This is the
one place that rule is decided; the FL engine (``auditkit.fl.params``) and the attacks both read it from here.

An observation is accepted in any of the shapes FL code produces, for P = the model's trained parameter count:

* one image: a list/tuple of tensors with exactly the shapes of the trained parameters, or a flat vector of
  length P (the trained parameters flattened and concatenated in their order);
* a batch of N independent images: a list/tuple of tensors each with a leading batch dimension N
  (N x parameter shape), or an N x P matrix.

:func:`observation_matrix` turns all of them into the N x P matrix the attacks work on.

A protocol whose server view is not the clients' decoded updates (MSP-FL's consensus transcript) has an *update
estimator*, registered for its round protocol with ``@update_estimator("consensus")`` by the module that attacks
it (``auditkit.attacks.targeted.msp_reconstruction``): it turns the view into the server's estimates of each client's
update, strongest first, and gradient inversion attacks those.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import Tensor, nn

from auditkit.validation import Integer, Number

Observation = Tensor | Sequence[Tensor]

UpdateEstimator = Callable[[Any, Tensor], dict[str, tuple[Tensor, str]]]
"""estimate(view, global_before) -> {name: (the clients' estimated updates (S, P), what the estimate observes)},
strongest first."""

_ESTIMATORS: dict[str, UpdateEstimator] = {}


def trained_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The parameters a client trains and sends, by name: those with ``requires_grad``, in ``named_parameters()``
    order (the order of the update's coordinates)."""
    return [(name, p) for name, p in model.named_parameters() if p.requires_grad]


def frozen_parameters(model: nn.Module) -> list[tuple[str, nn.Parameter]]:
    """The parameters no client trains or sends (``requires_grad=False``), by name: fixed at the model's values."""
    return [(name, p) for name, p in model.named_parameters() if not p.requires_grad]


def update_estimator(protocol: str) -> Callable[[UpdateEstimator], UpdateEstimator]:
    """Decorator registering the update estimator of a round protocol's server view (module docstring)."""

    def register(estimator: UpdateEstimator) -> UpdateEstimator:
        _ESTIMATORS[protocol] = estimator
        return estimator

    return register


def update_estimator_for(protocol: str) -> UpdateEstimator | None:
    """The update estimator registered for ``protocol`` (None: its server view holds decoded updates)."""
    return _ESTIMATORS.get(protocol)


def observation_matrix(observed: Observation, shapes: Sequence[torch.Size]) -> Tensor:
    """``observed`` as an N x P matrix (rows: images; columns: trained parameters in order), validated against
    the model's trained parameter ``shapes``; raises ``ValueError`` naming ``observed`` and the expected shapes."""
    sizes = [int(torch.Size(s).numel()) for s in shapes]
    total = sum(sizes)
    if isinstance(observed, Tensor):
        if observed.dim() == 1 and observed.numel() == total:
            matrix = observed.reshape(1, total)
        elif observed.dim() == 2 and observed.shape[1] == total and observed.shape[0] >= 1:
            matrix = observed
        else:
            raise ValueError(
                f"observed must be a flat vector of length {total} or an N x {total} matrix "
                f"(the model's trained parameter count), got a tensor of shape {tuple(observed.shape)}"
            )
    elif isinstance(observed, (list, tuple)) and all(isinstance(t, Tensor) for t in observed):
        matrix = _matrix_from_tensors(list(observed), [torch.Size(s) for s in shapes])
    else:
        raise ValueError(f"observed must be a tensor or a list of tensors, got {type(observed).__name__}")
    if not matrix.is_floating_point():
        raise ValueError(f"observed must hold floating-point values, got dtype {matrix.dtype}")
    if not bool(torch.isfinite(matrix).all()):
        raise ValueError("observed contains NaN or infinite values")
    return matrix


def _matrix_from_tensors(tensors: list[Tensor], shapes: list[torch.Size]) -> Tensor:
    got = [tuple(t.shape) for t in tensors]
    expected = [tuple(s) for s in shapes]
    if len(tensors) == len(shapes):
        if got == expected:
            return torch.cat([t.reshape(1, -1) for t in tensors], dim=1)
        batch = {t.shape[0] for t in tensors if t.dim() >= 1}
        if len(batch) == 1 and all(t.shape[1:] == s and t.dim() == len(s) + 1 for t, s in zip(tensors, shapes)):
            n = batch.pop()
            if n >= 1:
                return torch.cat([t.reshape(n, -1) for t in tensors], dim=1)
    raise ValueError(
        f"observed must hold one tensor per model parameter with shapes {expected} (one image), or each with "
        f"the same leading batch dimension N (a batch); got {len(tensors)} tensors with shapes {got}"
    )


def split_observation(matrix: Tensor, shapes: Sequence[torch.Size]) -> list[Tensor]:
    """The inverse of :func:`observation_matrix` for a batch: one N x (parameter shape) tensor per parameter."""
    sizes = [int(torch.Size(s).numel()) for s in shapes]
    return [part.reshape(matrix.shape[0], *s) for part, s in zip(matrix.split(sizes, dim=1), shapes)]


def update_to_gradient(update: Observation, *, lr: float, local_steps: int) -> Observation:
    """The "one gradient" reading of a multi-step FedAvg update: g = -x / (lr * local_steps).

    A client that takes ``local_steps`` SGD steps with learning rate ``lr`` sends x = w_after - w_before =
    -lr * sum_k g_k; if the gradient barely changes over those steps (small lr, few steps), x / (-lr * tau)
    is approximately the gradient at w_before, which the gradient attacks then invert as if it were one.
    This is an approximation; ``observation="update"`` in the attacks unrolls the steps instead.
    Accepts and returns any form :func:`observation_matrix` accepts (a tensor or a list of tensors).
    """
    lr = Number(low=0, low_open=True).check(lr, "lr")
    Integer(low=1).check(local_steps, "local_steps")
    scale = -1.0 / (lr * local_steps)
    if isinstance(update, Tensor):
        return update * scale
    if isinstance(update, (list, tuple)) and all(isinstance(t, Tensor) for t in update):
        return type(update)(t * scale for t in update)
    raise ValueError(f"update must be a tensor or a list of tensors, got {type(update).__name__}")
