import pytest
import torch
from torch import nn

from auditkit.models import count_parameters, create_model
from auditkit.models.torchvision_models import group_norm, torchvision_names


def test_resnet18_with_the_small_stem_has_its_cifar_parameter_count():
    model = create_model("torchvision:resnet18", input_shape=(3, 32, 32), num_classes=10, small_stem=True)
    assert count_parameters(model) == 11_173_962
    assert model.conv1.kernel_size == (3, 3) and model.conv1.stride == (1, 1) and model.conv1.bias is None
    assert isinstance(model.maxpool, nn.Identity)


def test_every_listed_model_is_a_torchvision_classification_model():
    assert {"resnet18", "mobilenet_v3_small", "vit_b_16"} <= set(torchvision_names())


def test_one_input_channel_replaces_the_first_convolution_only():
    model = create_model("torchvision:mobilenet_v3_small", input_shape=(1, 28, 28), num_classes=10)
    first = model.features[0][0]
    assert first.in_channels == 1 and first.out_channels == 16 and first.stride == (2, 2)
    assert model(torch.rand(3, 1, 28, 28)).shape == (3, 10)


def test_small_stem_takes_the_input_channels():
    model = create_model("torchvision:resnet18", input_shape=(1, 28, 28), num_classes=7, small_stem=True)
    assert model.conv1.in_channels == 1 and model(torch.rand(2, 1, 28, 28)).shape == (2, 7)


def test_group_norm_replaces_every_batch_norm_as_opacus_does():
    model = create_model("torchvision:resnet18", input_shape=(3, 32, 32), small_stem=True, norm="group")
    assert not any(isinstance(m, nn.modules.batchnorm._BatchNorm) for m in model.modules())
    assert model.bn1.num_groups == 32 and model.bn1.num_channels == 64 and model.bn1.affine
    odd = group_norm(nn.Sequential(nn.Conv2d(3, 24, 3), nn.BatchNorm2d(24, affine=False)))
    assert odd[1].num_groups == 24 and not odd[1].affine


def test_small_stem_on_another_model_is_one_line():
    with pytest.raises(ValueError, match=r"^training.small_stem applies to the ResNet family .*, not training.model "
                                         r"'torchvision:vgg11'$"):
        create_model("torchvision:vgg11", input_shape=(3, 32, 32), small_stem=True)
    with pytest.raises(ValueError, match="small_stem applies to the ResNet family"):
        create_model("cnn", small_stem=True)


def test_a_model_that_does_not_take_the_input_says_so_in_one_line():
    with pytest.raises(ValueError) as err:
        create_model("torchvision:inception_v3", input_shape=(3, 32, 32), num_classes=10)
    message = str(err.value)
    assert "\n" not in message
    assert message.startswith("training.model 'torchvision:inception_v3' does not take inputs of shape 3x32x32")


def test_unknown_torchvision_name_and_unknown_norm_are_refused():
    with pytest.raises(ValueError, match=r"training.model must be .*got 'torchvision:resnet99'$"):
        create_model("torchvision:resnet99", input_shape=(3, 32, 32))
    with pytest.raises(ValueError, match=r"^training.norm must be one of batch, group, got 'layer'$"):
        create_model("cnn", norm="layer")


def test_the_trial_forward_leaves_buffers_and_the_random_stream_alone():
    torch.manual_seed(0)
    model = create_model("torchvision:resnet18", input_shape=(3, 32, 32), small_stem=True)
    after = torch.rand(1)
    assert torch.equal(model.bn1.running_mean, torch.zeros(64)) and int(model.bn1.num_batches_tracked) == 0
    torch.manual_seed(0)
    torchvision_seeded = create_model("torchvision:resnet18", input_shape=(3, 32, 32), small_stem=True)
    assert torch.equal(torch.rand(1), after)
    assert torch.equal(torchvision_seeded.conv1.weight, model.conv1.weight)
