"""The seed papers' model architectures, with their exact parameter counts.

| name        | input     | parameters (10 classes) | used by                         |
|-------------|-----------|-------------------------|---------------------------------|
| `linear`    | 1x28x28   | 7,850                   | JoPEQ MNIST                     |
| `mlp`       | 1x28x28   | 25,818                  | CEPAM, JoPEQ MNIST              |
| `cnn`       | 1x28x28   | 6,422                   | CEPAM, JoPEQ MNIST              |
| `cifar_cnn` | 3x32x32   | 169,578                 | JoPEQ CIFAR-10                  |
| `lenet`     | Cx32x32   | 15,826 (C=3)            | DLG / iDLG, JoPEQ leakage, DP-SQ |
| `mlp200`    | 1x28x28   | 159,010                 | DP-SQ                           |

Every model returns logits; the softmax lives in the cross-entropy loss.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
from torch import nn

MODEL_NAMES = ("linear", "mlp", "cnn", "cifar_cnn", "lenet", "mlp200")


def linear(input_shape: tuple[int, int, int] = (1, 28, 28), num_classes: int = 10) -> nn.Module:
    """Multinomial logistic regression: flatten -> FC."""
    return nn.Sequential(nn.Flatten(), nn.Linear(_numel(input_shape), num_classes))


def mlp(input_shape: tuple[int, int, int] = (1, 28, 28), num_classes: int = 10) -> nn.Module:
    """CEPAM's MLP: 784 -> 32 -> ReLU -> 16 -> ReLU -> 10."""
    return nn.Sequential(
        nn.Flatten(),
        nn.Linear(_numel(input_shape), 32), nn.ReLU(),
        nn.Linear(32, 16), nn.ReLU(),
        nn.Linear(16, num_classes),
    )


def mlp200(input_shape: tuple[int, int, int] = (1, 28, 28), num_classes: int = 10) -> nn.Module:
    """DP-SQ's MLP (paper 001): 784 -> 200 -> ReLU -> 10."""
    return nn.Sequential(
        nn.Flatten(), nn.Linear(_numel(input_shape), 200), nn.ReLU(), nn.Linear(200, num_classes)
    )


def cnn(input_shape: tuple[int, int, int] = (1, 28, 28), num_classes: int = 10) -> nn.Module:
    """CEPAM's CNN: two 5x5 convolutions with 6 channels, FC 96 -> 50 -> 10."""
    channels, height, width = input_shape
    features = nn.Sequential(
        nn.Conv2d(channels, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 6, 5), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(),
    )
    flat = _flat_size(features, input_shape)
    return nn.Sequential(features, nn.Linear(flat, 50), nn.ReLU(), nn.Linear(50, num_classes))


def cifar_cnn(input_shape: tuple[int, int, int] = (3, 32, 32), num_classes: int = 10) -> nn.Module:
    """JoPEQ's CIFAR-10 CNN: three [Conv3x3 ReLU MaxPool Dropout(0.2)] blocks, FC 512-128-64-32-10."""
    layers: list[nn.Module] = []
    width_in = input_shape[0]
    for width_out in (32, 64, 128):
        layers += [nn.Conv2d(width_in, width_out, 3), nn.ReLU(), nn.MaxPool2d(2), nn.Dropout(0.2)]
        width_in = width_out
    features = nn.Sequential(*layers, nn.Flatten())
    flat = _flat_size(features, input_shape)
    return nn.Sequential(
        features,
        nn.Linear(flat, 128), nn.ReLU(),
        nn.Linear(128, 64), nn.ReLU(),
        nn.Linear(64, 32), nn.ReLU(),
        nn.Linear(32, num_classes),
    )


def lenet(input_shape: tuple[int, int, int] = (3, 32, 32), num_classes: int = 10) -> nn.Module:
    """The DLG / iDLG LeNet: three sigmoid 5x5 convolutions (strides 2, 2, 1) and one FC layer.

    All weights and biases are drawn from U(-0.5, 0.5), as in the DLG reference code: the
    attacks' published success depends on this initialisation.
    """
    features = nn.Sequential(
        nn.Conv2d(input_shape[0], 12, 5, stride=2, padding=2), nn.Sigmoid(),
        nn.Conv2d(12, 12, 5, stride=2, padding=2), nn.Sigmoid(),
        nn.Conv2d(12, 12, 5, stride=1, padding=2), nn.Sigmoid(),
        nn.Flatten(),
    )
    model = nn.Sequential(features, nn.Linear(_flat_size(features, input_shape), num_classes))
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.uniform_(-0.5, 0.5)
    return model


SEED_BUILDERS: dict[str, Callable[..., nn.Module]] = {
    "linear": linear, "mlp": mlp, "cnn": cnn, "cifar_cnn": cifar_cnn, "lenet": lenet, "mlp200": mlp200,
}
SEED_SHAPES: dict[str, tuple[int, int, int]] = {  # each builder's default input
    "linear": (1, 28, 28), "mlp": (1, 28, 28), "cnn": (1, 28, 28), "cifar_cnn": (3, 32, 32), "lenet": (3, 32, 32),
    "mlp200": (1, 28, 28),
}


def seed_model(name: str, input_shape: tuple[int, int, int] | None = None, num_classes: int = 10) -> nn.Module:
    """Build seed architecture ``name`` (one of ``MODEL_NAMES``); ``input_shape`` defaults to its own."""
    builder = SEED_BUILDERS[name]
    if input_shape is None:
        return builder(num_classes=num_classes)
    return builder(tuple(input_shape), num_classes)


def _numel(shape: tuple[int, ...]) -> int:
    return int(torch.Size(shape).numel())


def _flat_size(features: nn.Module, input_shape: tuple[int, int, int]) -> int:
    with torch.no_grad():
        return int(features(torch.zeros(1, *input_shape)).shape[1])
