"""An example model factory: ``[training] model = "my_models.py:make_net"`` (a path relative to the config file).

auditkit calls ``make_net(input_shape=(C, H, W), num_classes=N)`` and trains the ``nn.Module`` it returns; the model
must map a batch N x C x H x W to N x num_classes logits (the softmax lives in the loss). This one is a small
convolutional net with BatchNorm: under ``[dp_sgd]`` set ``[training] norm = "group"``, since BatchNorm mixes the
examples of a batch and DP-SGD needs per-example gradients (docs/guide/models.md).
"""
from __future__ import annotations

from torch import nn


def make_net(input_shape: tuple[int, int, int], num_classes: int) -> nn.Module:
    """Two [Conv3x3 BatchNorm ReLU MaxPool2] blocks (16 and 32 channels), then global average pooling and one
    fully-connected layer: any H, W >= 4 works."""
    channels = input_shape[0]
    return nn.Sequential(
        nn.Conv2d(channels, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1, bias=False), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),
        nn.Linear(32, num_classes),
    )
