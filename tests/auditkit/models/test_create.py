"""``auditkit.models.create``: a user's model factory, the trial forward, and DP-SGD's refusal of BatchNorm."""
import sys
from types import SimpleNamespace

import pytest
import torch
from torch import nn

from auditkit.config_bounds import ConfigError
from auditkit.factories import FactoryError
from auditkit.models import build_model, count_parameters, create_model, model_kind

NETS = '''
from torch import nn


def make_net(input_shape, num_classes):
    c, h, w = input_shape
    return nn.Sequential(nn.Conv2d(c, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Flatten(),
                         nn.Linear(8 * h * w, num_classes))


def not_a_module(input_shape, num_classes):
    return "net"


def wrong_logits(input_shape, num_classes):
    return nn.Sequential(nn.Flatten(), nn.LazyLinear(num_classes + 1))


def all_frozen(input_shape, num_classes):
    return make_net(input_shape, num_classes).requires_grad_(False)


def frozen_backbone(input_shape, num_classes):
    net = make_net(input_shape, num_classes)
    net[:3].requires_grad_(False)  # the convolution and its BatchNorm: only the head is fine-tuned
    return net
'''


@pytest.fixture
def nets(tmp_path):
    path = tmp_path / "user_nets.py"
    path.write_text(NETS)
    yield path
    sys.modules.pop("user_nets", None)


def test_a_factory_is_called_with_the_data_shape_and_class_count(nets):
    model = create_model(f"{nets}:make_net", input_shape=(1, 8, 8), num_classes=3)
    assert model[0].in_channels == 1 and model[-1].out_features == 3
    assert count_parameters(model) == (1 * 9 * 8 + 8) + 16 + (8 * 64 * 3 + 3)
    assert model_kind(f"{nets}:make_net") == "factory" and model_kind("cnn") == "seed"
    assert model_kind("torchvision:resnet18") == "torchvision" and model_kind("resnet") is None


def test_a_factory_that_returns_no_module_or_wrong_logits_is_one_line(nets):
    with pytest.raises(FactoryError, match=r"^training.model: factory '.*:not_a_module' must return a torch.nn.Module, "
                                           r"got str$"):
        create_model(f"{nets}:not_a_module", input_shape=(1, 8, 8))
    with pytest.raises(ValueError, match=r"^training.model '.*:wrong_logits' on inputs of shape 1x8x8 must give logits "
                                         r"of shape \(2, 10\) for a batch of 2 and 10 classes, got \(2, 11\)$"):
        create_model(f"{nets}:wrong_logits", input_shape=(1, 8, 8))
    with pytest.raises(ValueError, match=r"needs the data's input_shape"):
        create_model(f"{nets}:make_net")


def test_dp_sgd_refuses_batch_norm_naming_the_layer_and_the_fix():
    training = SimpleNamespace(model="torchvision:resnet18", small_stem=True, norm="batch")
    with pytest.raises(ConfigError) as err:
        build_model(training, (3, 32, 32), 10, dp_sgd=True)
    assert str(err.value) == (
        "dp_sgd cannot train training.model 'torchvision:resnet18': layer 'bn1' (BatchNorm2d) mixes the examples of a "
        "batch, so per-example gradients are undefined; set training.norm = 'group' (GroupNorm, as Opacus's "
        "ModuleValidator.fix does)")
    grouped = build_model(SimpleNamespace(**{**vars(training), "norm": "group"}), (3, 32, 32), 10, dp_sgd=True)
    assert isinstance(grouped.bn1, nn.GroupNorm)
    assert build_model(training, (3, 32, 32), 10).bn1.__class__ is nn.BatchNorm2d  # without DP-SGD: kept


def test_the_dp_sgd_check_names_a_nested_layer_of_a_users_model(nets):
    training = SimpleNamespace(model=f"{nets}:make_net", small_stem=False, norm="batch")
    with pytest.raises(ConfigError, match=r"layer '1' \(BatchNorm2d\) mixes the examples"):
        build_model(training, (1, 8, 8), 10, dp_sgd=True)


def test_build_model_turns_every_failure_into_a_config_error():
    training = SimpleNamespace(model="torchvision:inception_v3", small_stem=False, norm="batch")
    with pytest.raises(ConfigError, match=r"^training.model 'torchvision:inception_v3' does not take inputs of shape "
                                          r"3x32x32"):
        build_model(training, (3, 32, 32), 10)


def test_seed_models_are_unchanged_by_the_trial_forward():
    torch.manual_seed(0)
    first = torch.cat([p.detach().flatten() for p in create_model("cifar_cnn").parameters()])
    draw = torch.rand(1)
    torch.manual_seed(0)
    again = torch.cat([p.detach().flatten() for p in create_model("cifar_cnn").parameters()])
    assert torch.equal(first, again) and torch.equal(torch.rand(1), draw)  # dropout's trial draws are forked off


def test_a_model_with_no_trainable_parameter_is_refused_in_one_line(nets):
    training = SimpleNamespace(model=f"{nets}:all_frozen", small_stem=False, norm="batch")
    with pytest.raises(ConfigError, match=r"^training.model '.*:all_frozen' has no trainable parameter \(every "
                                          r"parameter has requires_grad=False\): its clients would have nothing to "
                                          r"train or send; leave requires_grad=True on the layers to train$"):
        build_model(training, (1, 8, 8), 10)


def test_every_build_holds_the_same_frozen_parameters_and_group_norm_keeps_them_frozen(nets):
    """A frozen layer is never re-drawn by the simulation, so each build of a config (the trained model, a stage's
    attack model, a Flower client's) must hold the same one: build_model draws from a fixed seed, and leaves the
    caller's random stream as it was. The parameter count is the trained one, the update's length."""
    training = SimpleNamespace(model=f"{nets}:frozen_backbone", small_stem=False, norm="batch")
    state = torch.random.get_rng_state()
    first = build_model(training, (1, 8, 8), 3)
    assert torch.equal(torch.random.get_rng_state(), state)
    torch.rand(5)  # another stream position: the next build is the same all the same
    second = build_model(training, (1, 8, 8), 3)
    assert torch.equal(first[0].weight, second[0].weight) and torch.equal(first[1].weight, second[1].weight)
    assert count_parameters(first) == 8 * 64 * 3 + 3
    grouped = build_model(SimpleNamespace(**{**vars(training), "norm": "group"}), (1, 8, 8), 3, dp_sgd=True)
    assert isinstance(grouped[1], nn.GroupNorm) and not grouped[1].weight.requires_grad
    assert count_parameters(grouped) == 8 * 64 * 3 + 3
