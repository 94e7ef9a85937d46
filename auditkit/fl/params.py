"""Flat-vector views of a model's trained parameters.

Mechanisms see a client's update as one 1-D tensor; `torch.func` wants a dict of named tensors.
`ParamLayout` converts between the two, for one model or a stack of K clients. The vector covers the trained
parameters only (``auditkit.attacks.observations.trained_parameters``: ``requires_grad=True``, in
``named_parameters()`` order); a frozen parameter stays the model's own, never in the vector.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn

from auditkit.attacks.observations import frozen_parameters, trained_parameters

__all__ = ["ParamLayout", "flat_parameters", "frozen_parameters", "load_flat_parameters", "trained_parameters",
           "trained_size", "trained_tensors"]


@dataclass(frozen=True)
class ParamLayout:
    """Names, shapes and offsets of a model's trained parameters inside the flat vector."""

    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]

    @classmethod
    def of(cls, model: nn.Module) -> "ParamLayout":
        """The layout of ``model``'s trained parameters; ``ValueError`` when it has none (nothing to train)."""
        named = trained_parameters(model)
        if not named:
            raise ValueError(f"model {type(model).__name__} has no trainable parameter (every parameter has "
                             "requires_grad=False): its clients have nothing to train or send")
        return cls(tuple(n for n, _ in named), tuple(p.shape for _, p in named))

    @property
    def size(self) -> int:
        return sum(s.numel() for s in self.shapes)

    def flatten(self, params: dict[str, torch.Tensor], batch_dims: int = 0) -> torch.Tensor:
        """Concatenate named tensors (each with `batch_dims` leading dims) into (..., size)."""
        lead = params[self.names[0]].shape[:batch_dims]
        return torch.cat([params[n].reshape(*lead, -1) for n in self.names], dim=-1)

    def unflatten(self, flat: torch.Tensor) -> dict[str, torch.Tensor]:
        """Split (..., size) into named views shaped like the parameters (leading dims kept)."""
        lead = flat.shape[:-1]
        pieces = torch.split(flat, [s.numel() for s in self.shapes], dim=-1)
        return {n: piece.reshape(*lead, *s) for n, s, piece in zip(self.names, self.shapes, pieces)}


def trained_tensors(model: nn.Module) -> list[nn.Parameter]:
    """The trained parameters themselves, in the vector's order (what an optimiser or autograd is given)."""
    return [p for _, p in trained_parameters(model)]


def trained_size(model: nn.Module) -> int:
    """P, the model's trained parameter count: the length of a client's update (0 for a model with none)."""
    return sum(p.numel() for p in trained_tensors(model))


def flat_parameters(model: nn.Module) -> torch.Tensor:
    """A detached copy of the model's trained parameters as one 1-D tensor."""
    return torch.cat([p.detach().reshape(-1) for p in trained_tensors(model)]).clone()


def load_flat_parameters(model: nn.Module, flat: torch.Tensor) -> None:
    """Copy a flat vector into the model's trained parameters in place (its frozen ones stay as they are)."""
    parameters = trained_tensors(model)
    torch.nn.utils.vector_to_parameters(flat.to(parameters[0].dtype), parameters)
