"""A user's dataset factory: ``data.dataset = "my_data.py:make_data"`` (or ``package.module:fn``, or an installed entry
point ``entry:NAME`` of group ``auditkit.datasets``), loaded by ``auditkit.factories`` as model factories are.

The function is called with no arguments and returns an :class:`~auditkit.data.Dataset`, or a pair (train, test) of
torch Datasets whose items are (image, label): a float C x H x W tensor and an int class label. The pair is
materialised here into a :class:`~auditkit.data.Dataset` (every image read once; the class count is the largest label
plus one). Anything else is one line naming ``data.dataset``.
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass
from typing import Any

import torch

from auditkit.data.dataset import Dataset, Split
from auditkit.factories import FACTORY_FORMS, FactoryError, call_factory, load_factory, one_line, parse_factory
from auditkit.validation import Constraint

__all__ = ["DATASET_GROUP", "DatasetName", "dataset_forms", "is_dataset_factory", "dataset_from_factory"]

DATASET_GROUP = "auditkit.datasets"


def is_dataset_factory(name: Any) -> bool:
    """Whether ``name`` has a factory's form (``file.py:fn``, ``module:fn``, ``entry:NAME``); parsing only."""
    return parse_factory(name) is not None


def dataset_forms(names: tuple[str, ...]) -> str:
    """The allowed values of ``data.dataset`` in words: the closed names, or a factory."""
    return f"one of {', '.join(names)} or a factory {FACTORY_FORMS}"


@dataclass(frozen=True)
class DatasetName(Constraint):
    """A ``data.dataset`` value: one of ``names`` or a factory's form (parsed, not imported)."""

    names: tuple[str, ...] = ()
    type = str

    def _words(self, plural: bool) -> str:
        return dataset_forms(self.names)

    def _admits(self, value: Any) -> bool:
        return (isinstance(value, str) and value in self.names) or is_dataset_factory(value)


def dataset_from_factory(spec: str, where: str = "data.dataset") -> Dataset:
    """The dataset factory ``spec`` returns, as a :class:`Dataset`; ``FactoryError`` (a ``ConfigError``) in one line
    naming ``where`` otherwise."""
    made = call_factory(load_factory(spec, where, DATASET_GROUP), spec, where)
    if isinstance(made, Dataset):
        return made
    if not (isinstance(made, tuple | list) and len(made) == 2):
        raise FactoryError(f"{where}: factory {spec!r} must return an auditkit.data.Dataset or a pair (train, test) of "
                         f"torch Datasets, got {type(made).__name__}")
    train, test = (_split(part, spec, where, which) for part, which in zip(made, ("train", "test")))
    if train.x.shape[1:] != test.x.shape[1:]:
        raise FactoryError(f"{where}: factory {spec!r} gives train images of shape {tuple(train.x.shape[1:])} and test "
                         f"images of shape {tuple(test.x.shape[1:])}; they must be alike")
    labels = torch.cat([train.y, test.y])
    return Dataset(name=spec, train=train, test=test, num_classes=int(labels.max()) + 1,
                   input_shape=tuple(int(s) for s in train.x.shape[1:]), source=f"the user's factory {spec}")


def _split(part: Any, spec: str, where: str, which: str) -> Split:
    """One torch Dataset of (image C x H x W float tensor, int label) items read into a :class:`Split`."""
    fail = f"{where}: factory {spec!r}'s {which} set"
    try:
        count = len(part)
    except TypeError:
        raise FactoryError(f"{fail} must be a torch Dataset with a length, got {type(part).__name__}") from None
    if count == 0:
        raise FactoryError(f"{fail} is empty")
    images, labels = [], []
    for i in range(count):
        try:
            image, label = part[i]
        except Exception as err:  # noqa: BLE001 -- a user's __getitem__ may raise anything
            raise FactoryError(f"{fail}: item {i} must be a pair (image, label), reading it raised {one_line(err)}") \
                from None
        if not (isinstance(image, torch.Tensor) and image.dim() == 3 and image.is_floating_point()):
            shown = f"{image.dtype} {tuple(image.shape)}" if isinstance(image, torch.Tensor) else type(image).__name__
            raise FactoryError(f"{fail}: item {i}'s image must be a float C x H x W tensor, got {shown}")
        if isinstance(label, torch.Tensor) and label.numel() == 1 and not label.is_floating_point():
            label = int(label)
        if isinstance(label, bool) or not isinstance(label, numbers.Integral) or label < 0:
            raise FactoryError(f"{fail}: item {i}'s label must be an int class label >= 0, got {label!r}")
        if images and image.shape != images[0].shape:
            raise FactoryError(f"{fail}: item {i}'s image has shape {tuple(image.shape)}, item 0's "
                             f"{tuple(images[0].shape)}; every image must have one shape")
        images.append(image.detach().to(torch.float32))
        labels.append(int(label))
    return Split(torch.stack(images), torch.tensor(labels, dtype=torch.int64))
