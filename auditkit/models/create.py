"""``create_model``: the one entry that builds ``training.model`` in any of its forms, and :func:`build_model`, the
configured model (the ``[training]`` table's options and the data's shape) every stage trains or attacks.

Forms of ``training.model``:

* a seed architecture (``MODEL_NAMES``: ``cnn``, ``lenet``, ...), ``auditkit.models.seed``;
* ``torchvision:NAME``, any torchvision classification model, untrained (``auditkit.models.torchvision_models``);
* a factory ``path/to/my_models.py:make_net``, ``package.module:make_net`` or an installed entry point
  ``entry:NAME`` of group ``auditkit.models`` (``auditkit.factories``), called as
  ``fn(input_shape=(C, H, W), num_classes=N)`` and returning an ``nn.Module``.

Every model built passes one trial forward of ``zeros(2, *input_shape)`` giving (2, num_classes) logits, so a model
that does not fit the data (``torchvision:inception_v3`` on 32x32) is refused in one line before any training; so is
a model with no trainable parameter (every one ``requires_grad=False``): the clients train and send the trainable
parameters only (``auditkit.fl.params``), its frozen ones stay as built.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from auditkit.config_bounds import ConfigError
from auditkit.factories import FACTORY_FORMS, FactoryError, call_factory, load_factory, one_line, parse_factory
from auditkit.fl.params import trained_parameters, trained_size
from auditkit.models.seed import MODEL_NAMES, SEED_SHAPES, seed_model
from auditkit.models.torchvision_models import (
    TORCHVISION, batch_norm_layers, group_norm, is_resnet, torchvision_model, torchvision_names)
from auditkit.validation import Choice, Constraint

__all__ = ["MODEL_FORMS", "NORMS", "ModelName", "model_kind", "create_model", "build_model", "check_dp_sgd",
           "count_parameters"]

MODEL_FORMS = (f"a seed model ({', '.join(MODEL_NAMES)}), 'torchvision:NAME' (a classification model of "
               f"torchvision.models.list_models()) or a factory {FACTORY_FORMS}")
NORMS = ("batch", "group")
BUILD_SEED = 0  # build_model draws a model's initial values from this seed: every build of a config is the same
MODEL_GROUP = "auditkit.models"  # the entry-point group of ``entry:NAME``


def model_kind(name: Any) -> str | None:
    """"seed", "torchvision" or "factory": the form of a ``training.model`` value; None when it has none. Parsing
    only: nothing is imported."""
    if not isinstance(name, str):
        return None
    if name in MODEL_NAMES:
        return "seed"
    if name.startswith(TORCHVISION):
        return "torchvision" if name[len(TORCHVISION):] in torchvision_names() else None
    return "factory" if parse_factory(name) is not None else None


@dataclass(frozen=True)
class ModelName(Constraint):
    """A ``training.model`` value of one of its forms (:data:`MODEL_FORMS`), parsed, not built."""

    type = str

    def _words(self, plural: bool) -> str:
        return MODEL_FORMS

    def _admits(self, value: Any) -> bool:
        return model_kind(value) is not None


def _key(where: str, key: str) -> str:
    """The sibling key of ``where``: "training.norm" beside "training.model", plain "norm" elsewhere."""
    return f"{where.rpartition('.')[0]}.{key}" if "." in where else key


def create_model(name: str, *, input_shape: tuple[int, int, int] | None = None, num_classes: int = 10,
                 small_stem: bool = False, norm: str = "batch", where: str = "training.model") -> nn.Module:
    """Build model ``name`` (a seed name, ``torchvision:NAME`` or a factory) for ``input_shape`` (C, H, W; a seed
    model's default is its own, the other forms need it) and ``num_classes``.

    ``small_stem``: the ResNet family's small-image stem (``torchvision_models``); ``norm = "group"``: every BatchNorm
    replaced by GroupNorm. ``ValueError`` (one line naming ``where``) for an unknown form, options the model cannot
    take, a factory that fails or returns no ``nn.Module``, and a trial forward that gives no (2, num_classes)
    logits."""
    kind = model_kind(name)
    if kind is None:
        ModelName().refuse(name, where)
    Choice(NORMS).check(norm, _key(where, "norm"))
    if small_stem and not (kind == "torchvision" and is_resnet(name[len(TORCHVISION):])):
        raise ValueError(f"{_key(where, 'small_stem')} applies to the ResNet family (torchvision:resnet*, "
                         f"torchvision:resnext*, torchvision:wide_resnet*), not {where} {name!r}")
    if input_shape is None:
        if kind != "seed":
            raise ValueError(f"{where} {name!r} needs the data's input_shape (C, H, W)")
        input_shape = SEED_SHAPES[name]
    input_shape = tuple(int(s) for s in input_shape)
    if kind == "seed":
        model = seed_model(name, input_shape, num_classes)
    elif kind == "torchvision":
        model = torchvision_model(name[len(TORCHVISION):], input_shape, num_classes, small_stem=small_stem)
    else:
        fn = load_factory(name, where, MODEL_GROUP)
        model = call_factory(fn, name, where, input_shape=input_shape, num_classes=num_classes)
        if not isinstance(model, nn.Module):
            raise FactoryError(f"{where}: factory {name!r} must return a torch.nn.Module, got {type(model).__name__}")
    if norm == "group":
        model = group_norm(model)
    _trial_forward(model, name, input_shape, num_classes, where)
    if not trained_parameters(model):
        raise ValueError(f"{where} {name!r} has no trainable parameter (every parameter has requires_grad=False): "
                         "its clients would have nothing to train or send; leave requires_grad=True on the layers "
                         "to train")
    return model


def _trial_forward(model: nn.Module, name: str, input_shape: tuple[int, ...], num_classes: int, where: str) -> None:
    """One forward of zeros(2, *input_shape) in the model's own mode must give (2, num_classes) logits; the buffers
    it touches (BatchNorm's running statistics) are restored and the random stream is forked, so the model and the
    run's draws leave as they came."""
    shown = "x".join(map(str, input_shape))
    buffers = {n: b.clone() for n, b in model.named_buffers()}
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=[]):  # dropout's draws leave the caller's stream alone
            out = model(torch.zeros(2, *input_shape))
    except Exception as err:  # noqa: BLE001 -- a model that cannot take the input fails in any way torch has
        raise ValueError(f"{where} {name!r} does not take inputs of shape {shown}: its trial forward of "
                         f"zeros(2, {', '.join(map(str, input_shape))}) raised {one_line(err)}") from None
    finally:
        with torch.no_grad():
            for n, b in model.named_buffers():
                if n in buffers:
                    b.copy_(buffers[n])
    got = tuple(out.shape) if isinstance(out, torch.Tensor) else type(out).__name__
    if got != (2, num_classes):
        raise ValueError(f"{where} {name!r} on inputs of shape {shown} must give logits of shape (2, {num_classes}) "
                         f"for a batch of 2 and {num_classes} classes, got {got}")


def check_dp_sgd(model: nn.Module, name: str, where: str = "training.model") -> None:
    """``ConfigError`` naming the first layer that mixes the examples of a batch (BatchNorm), which DP-SGD cannot
    train: its per-example gradients are undefined (Opacus's ``ModuleValidator`` refuses it too)."""
    layers = batch_norm_layers(model)
    if layers:
        qualified, layer = layers[0]
        raise ConfigError(
            f"dp_sgd cannot train {where} {name!r}: layer {qualified!r} ({type(layer).__name__}) mixes the examples "
            f"of a batch, so per-example gradients are undefined; set {_key(where, 'norm')} = 'group' (GroupNorm, "
            "as Opacus's ModuleValidator.fix does)")


def build_model(training: Any, input_shape: tuple[int, ...], num_classes: int, *, dp_sgd: bool = False) -> nn.Module:
    """The configured model: ``training.model`` with the table's ``small_stem`` and ``norm`` (a ``[training]``
    table, ``auditkit.config.TrainingConfig``) for the data's ``input_shape`` and ``num_classes``; ``dp_sgd``: it
    is built for DP-SGD training, which refuses BatchNorm (:func:`check_dp_sgd`). Every failure is a one-line
    ``ConfigError``.

    The model's initial values are drawn from ``BUILD_SEED`` (the caller's random stream left as it was), so every
    build of one config, in every process (a stage's attack model, a Flower client), holds the same frozen
    parameters as the model trained (the simulation re-draws the trained ones from the run's seed)."""
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(BUILD_SEED)
            model = create_model(training.model, input_shape=tuple(input_shape), num_classes=num_classes,
                                 small_stem=training.small_stem, norm=training.norm)
    except ValueError as err:
        raise err if isinstance(err, ConfigError) else ConfigError(str(err)) from None
    if dp_sgd:
        check_dp_sgd(model, training.model)
    return model


def count_parameters(model: nn.Module) -> int:
    """Number of trainable scalars: the length of a client's update (``auditkit.fl.params.trained_size``)."""
    return trained_size(model)
