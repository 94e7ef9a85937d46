"""Containers shared by every dataset loader: :class:`Split`, :class:`Dataset`, :class:`DataNotFoundError`."""
from __future__ import annotations

from dataclasses import dataclass

import torch


class DataNotFoundError(FileNotFoundError):
    """A dataset's files are not where they should be; the message says where to put which files."""


@dataclass(frozen=True)
class Split:
    """One part (train or test) of a dataset.

    ``x`` is float32, N x C x H x W, pixel values in [0, 1]; ``y`` is int64, N class labels.
    """

    x: torch.Tensor
    y: torch.Tensor

    def __post_init__(self) -> None:
        if self.x.dtype != torch.float32 or self.x.dim() != 4:
            raise ValueError(f"x must be a float32 N x C x H x W tensor, got {self.x.dtype} {tuple(self.x.shape)}")
        if self.y.dtype != torch.int64 or self.y.dim() != 1:
            raise ValueError(f"y must be an int64 tensor of N labels, got {self.y.dtype} {tuple(self.y.shape)}")
        if len(self.x) != len(self.y):
            raise ValueError(f"x and y must hold the same number of samples, got {len(self.x)} and {len(self.y)}")

    def __len__(self) -> int:
        return len(self.y)


@dataclass(frozen=True)
class Dataset:
    """A classification dataset: its train and test splits, class count and per-sample shape (C, H, W).

    ``validation``: a validation split fixed by the dataset's definition (``mnist-5k``), or None when the
    experiment carves one off the training split. ``source``: where the images come from, for provenance.
    ``classes``: the class names in label order, where the dataset names them (``imagefolder``: its class folders).
    """

    name: str
    train: Split
    test: Split
    num_classes: int
    input_shape: tuple[int, int, int]
    validation: Split | None = None
    source: str = ""
    classes: tuple[str, ...] = ()
