"""torchvision's classification models by name (``torchvision:resnet18``), built untrained (``weights=None``: nothing is
ever downloaded) with the run's class count, and the layer surgery small images and DP-SGD ask for:

* a small-image stem for the ResNet family (``small_stem``): conv1 becomes a 3x3 stride-1 convolution with 64 output
  channels and no bias, and the 3x3 max-pool goes, as in He et al. (2016), Sec. 4.2, for CIFAR-10: a 32x32 input
  then keeps its resolution into the first residual stage instead of shrinking to 8x8;
* input channels other than 3 (MNIST's 1x28x28): the first convolution takes C channels, all else alike;
* GroupNorm for BatchNorm (:func:`group_norm`), as Opacus's ``ModuleValidator.fix`` replaces it:
  GroupNorm(min(32, C), C, affine as the BatchNorm's).
"""
from __future__ import annotations

import functools
import math

from torch import nn

__all__ = ["TORCHVISION", "RESNET_FAMILY", "torchvision_names", "is_resnet", "torchvision_model", "group_norm",
           "batch_norm_layers"]

TORCHVISION = "torchvision:"
RESNET_FAMILY = ("resnet", "resnext", "wide_resnet")  # name prefixes of torchvision's ResNet class
# aux classifiers return a tuple in train mode; the audit's loss is the cross-entropy of one logits tensor
_AUX_LOGITS = ("googlenet", "inception_v3")


@functools.cache
def torchvision_names() -> tuple[str, ...]:
    """Every torchvision classification model (``torchvision.models.list_models(module=torchvision.models)``)."""
    import torchvision  # on demand: importing torchvision adds seconds to every command's start-up

    return tuple(torchvision.models.list_models(module=torchvision.models))


def is_resnet(name: str) -> bool:
    """Whether torchvision model ``name`` is of the ResNet family (resnet*, resnext*, wide_resnet*)."""
    return name.startswith(RESNET_FAMILY)


def torchvision_model(name: str, input_shape: tuple[int, int, int], num_classes: int, *,
                      small_stem: bool = False) -> nn.Module:
    """Untrained torchvision model ``name`` for ``input_shape`` (C, H, W) and ``num_classes``; ``small_stem`` (ResNet
    family only, the caller checks) swaps in the small-image stem."""
    import torchvision  # on demand, as in torchvision_names

    options = {"aux_logits": False, "init_weights": True} if name in _AUX_LOGITS else {}
    model = torchvision.models.get_model(name, weights=None, num_classes=num_classes, **options)
    channels = input_shape[0]
    if small_stem:
        model.conv1 = nn.Conv2d(channels, 64, kernel_size=3, stride=1, padding=1, bias=False)
        model.maxpool = nn.Identity()
    elif channels != 3:
        _replace_first_conv(model, channels, name)
    return model


def _replace_first_conv(model: nn.Module, channels: int, name: str) -> None:
    """The first Conv2d rebuilt with ``channels`` input channels, its other settings kept."""
    for qualified, layer in model.named_modules():
        if isinstance(layer, nn.Conv2d):
            parent, _, attribute = qualified.rpartition(".")
            conv = nn.Conv2d(channels, layer.out_channels, layer.kernel_size, stride=layer.stride,
                             padding=layer.padding, dilation=layer.dilation, groups=1 if layer.groups == 1 else
                             math.gcd(layer.groups, channels), bias=layer.bias is not None,
                             padding_mode=layer.padding_mode)
            setattr(model.get_submodule(parent) if parent else model, attribute, conv)
            return
    raise ValueError(f"torchvision:{name} has no Conv2d layer to take {channels} input channels")


def batch_norm_layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(qualified name, layer) of every BatchNorm layer (1d, 2d, 3d, SyncBatchNorm), in module order."""
    return [(n, m) for n, m in model.named_modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)]


def group_norm(model: nn.Module) -> nn.Module:
    """``model`` with every BatchNorm layer replaced by GroupNorm(min(32, C), C, affine=bn.affine), in place, as
    Opacus's ``ModuleValidator.fix`` does (GroupNorm's statistics are per example, so per-example gradients are
    defined). Where C is no multiple of min(32, C), gcd(32, C) groups: GroupNorm needs C divisible by the groups.
    A frozen BatchNorm weight or bias (``requires_grad=False``) gives a frozen GroupNorm one."""
    for qualified, bn in batch_norm_layers(model):
        channels = bn.num_features
        groups = min(32, channels) if channels % min(32, channels) == 0 else math.gcd(32, channels)
        gn = nn.GroupNorm(groups, channels, affine=bn.affine)
        for name, p in gn.named_parameters():
            p.requires_grad_(getattr(bn, name).requires_grad)
        parent, _, attribute = qualified.rpartition(".")
        if not attribute:  # the model itself is a BatchNorm layer
            return gn
        setattr(model.get_submodule(parent) if parent else model, attribute, gn)
    return model
