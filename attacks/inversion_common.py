"""What gradient inversion (``gradient_inversion``) and the analytic attack (``analytic_inversion``) share: the
result type, the observation on the attack's device, input-shape and label handling, the settings' checks, the
starts' seeds. Split out so that ``gradient_inversion`` can dispatch to ``analytic_inversion`` without a cycle.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor, nn
from torch.func import functional_call

from auditkit.attacks.gradient_matching import ClientSimulator
from auditkit.attacks.label_extraction import extract_labels
from auditkit.attacks.observations import Observation, observation_matrix, split_observation, trained_parameters
from auditkit.mechanisms.randomness import derive_seed
from auditkit.validation import Constraint, Flag, Integer, Number, ValidationError

INITS = ("randn", "rand")
LR_DECAY_AT = (3 / 8, 5 / 8, 7 / 8)  # fractions of the iterations (Geiping et al.'s MultiStepLR milestones)
LR_DECAY_GAMMA = 0.1


@dataclass(frozen=True, repr=False)
class InversionResult:
    """What a gradient inversion attack recovered, for N attacked images.

    ``images``: N x C x H x W float32 in [0, 1] (the optimised dummies, clamped; NaN from a diverged run
    becomes 0); ``labels``: LongTensor N; ``loss``: the final matching loss per image (the distance only,
    without the TV prior, at the kept start's final iterate; inf for a diverged run); ``steps``: optimiser steps
    taken per image (fewer than ``iterations`` when it stopped early); ``settings``: every setting used
    (JSON-friendly); ``wall_time``: seconds; ``label_source``: "given", "extracted" or "optimised".
    ``start_loss``: N x restarts, every start's final matching loss (``loss`` is its row minimum); ``start``: the
    kept start per image (the first of equal losses); ``start_seeds``: the seed each start drew its dummies from
    (:func:`start_seeds`). The analytic attack leaves the three empty. ``halfway``: the images after half the
    iterations (each image's start with the lowest matching loss then), what half the budget bought; None for the
    analytic attack and a run that stopped earlier.
    """

    images: Tensor
    labels: Tensor
    loss: Tensor
    steps: Tensor
    settings: dict[str, Any]
    wall_time: float
    label_source: str
    start_loss: Tensor | None = None
    start_seeds: tuple[int, ...] = ()
    start: Tensor | None = None
    halfway: Tensor | None = None

    def __repr__(self) -> str:
        return (
            f"InversionResult({self.settings['attack']}, images={tuple(self.images.shape)}, "
            f"labels={self.labels.tolist()} ({self.label_source}), mean loss={self.loss.mean().item():.3g}, "
            f"wall_time={self.wall_time:.2f}s)"
        )


def start_seeds(seed: int, restarts: int) -> tuple[int, ...]:
    """The seed of each start: start r draws its dummies from ``torch.Generator().manual_seed(s_r)`` with
    s_r = ``derive_seed(seed, "inversion-start", r)`` (SHA-256 keyed, :func:`auditkit.mechanisms.randomness.derive_seed`),
    so start r is the same whatever the number of restarts, the device or the mode."""
    return tuple(derive_seed(seed, "inversion-start", r) for r in range(restarts))


def observed_on_device(model: nn.Module, observed: Observation,
                       device: Any) -> tuple[torch.device, torch.dtype, list[torch.Size], Tensor]:
    """Where an attack runs (``device``, default: the model's parameters' device) and in which dtype, the trained
    parameters' shapes (``trained_parameters``: what an update covers), and the observation as an N x P matrix
    there."""
    parameters = [p for _, p in trained_parameters(model)]
    if not parameters:
        raise ValueError("model must have trained parameters (requires_grad=True) to invert gradients of")
    where = torch.device(device) if device is not None else parameters[0].device
    dtype = parameters[0].dtype
    shapes = [p.shape for p in parameters]
    return where, dtype, shapes, observation_matrix(observed, shapes).to(device=where, dtype=dtype)


POSITIVE = Number(low=0, low_open=True)
NON_NEGATIVE = Number(low=0)
COUNT = Integer(low=1)  # iterations, restarts, steps
SEED = Integer(low=0)
FLAG = Flag()


@dataclass(frozen=True)
class TorchDevice(Constraint):
    """None (the model's device) or a torch device this machine has, handed on as its name ("cuda:0")."""

    def _words(self, plural: bool) -> str:
        return "None or a torch device such as 'cpu' or 'cuda'"

    def check(self, value: Any, where: str) -> str | None:
        if value is None:
            return None
        try:
            device = torch.device(value)
        except (RuntimeError, TypeError):
            self.refuse(value, where)
        if device.type == "cuda" and not torch.cuda.is_available():
            raise ValidationError(f"{where} {value!r} is not available here (no CUDA device); use 'cpu' or None")
        return str(device)


def _check_input_shape(input_shape: Any) -> tuple[int, int, int]:
    ok = isinstance(input_shape, (tuple, list, torch.Size)) and len(input_shape) == 3
    if ok:
        ok = all(not isinstance(v, bool) and isinstance(v, int) and v >= 1 for v in input_shape)
    if not ok:
        raise ValueError(f"input_shape must be (C, H, W), three positive integers, got {input_shape!r}")
    return tuple(input_shape)


def _num_classes(simulator: ClientSimulator, input_shape: tuple[int, int, int]) -> int:
    probe = torch.zeros(1, *input_shape, device=next(iter(simulator.params.values())).device,
                        dtype=next(iter(simulator.params.values())).dtype)
    try:
        with torch.no_grad():
            logits = functional_call(simulator.model, (simulator.params, simulator.fixed), (probe,))
    except RuntimeError as error:
        raise ValueError(f"input_shape {input_shape} does not fit the model: {error}") from error
    if logits.dim() != 2 or logits.shape[0] != 1:
        raise ValueError(f"the model must map 1 x {input_shape} to 1 x K logits, got {tuple(logits.shape)}")
    return int(logits.shape[1])


def _labels(
    label: Any, config: dict, observed: Tensor, shapes: list[torch.Size], num_classes: int
) -> tuple[Tensor | None, str]:
    """(labels on the observation's device or None when optimised, label source)."""
    count = observed.shape[0]
    if label is not None:
        try:
            given = torch.as_tensor(label).reshape(-1)
        except (TypeError, ValueError, RuntimeError) as error:
            raise ValueError(f"label must be an int or a sequence of {count} ints, got {label!r}") from error
        if given.is_floating_point() or given.is_complex() or given.dtype == torch.bool or given.numel() != count:
            raise ValueError(f"label must be an int or a sequence of {count} ints (one per image), got {label!r}")
        if bool(((given < 0) | (given >= num_classes)).any()):
            raise ValueError(f"label must lie in [0, {num_classes}) (the model's classes), got {given.tolist()}")
        return given.long().to(observed.device), "given"
    if config["label_strategy"] == "optimise":
        return None, "optimised"
    matrices = [i for i, s in enumerate(shapes) if len(s) == 2]
    if not matrices or shapes[matrices[-1]][0] != num_classes:
        raise ValueError(
            "label_strategy='extract' needs the model's last 2-D trained parameter to be the output layer's weight "
            f"({num_classes} x features); pass label= or label_strategy='optimise'"
        )
    last_weight = split_observation(observed, shapes)[matrices[-1]]
    if config["observation"] == "update":
        last_weight = -last_weight  # an update points against the gradient
    return extract_labels(last_weight), "extracted"
