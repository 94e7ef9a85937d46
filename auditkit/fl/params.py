"""Flat-vector views of a model's parameters.

Mechanisms see a client's update as one 1-D tensor; `torch.func` wants a dict of named tensors.
`ParamLayout` converts between the two, for one model or a stack of K clients.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import nn


@dataclass(frozen=True)
class ParamLayout:
    """Names, shapes and offsets of a model's parameters inside the flat vector."""

    names: tuple[str, ...]
    shapes: tuple[torch.Size, ...]

    @classmethod
    def of(cls, model: nn.Module) -> "ParamLayout":
        named = list(model.named_parameters())
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


def flat_parameters(model: nn.Module) -> torch.Tensor:
    """A detached copy of the model's parameters as one 1-D tensor."""
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()]).clone()


def load_flat_parameters(model: nn.Module, flat: torch.Tensor) -> None:
    """Copy a flat vector into the model's parameters in place."""
    torch.nn.utils.vector_to_parameters(flat.to(next(model.parameters()).dtype), model.parameters())
