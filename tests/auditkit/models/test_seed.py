import pytest
import torch

from auditkit.models import MODEL_NAMES, count_parameters, create_model

PAPER_COUNTS = {
    "linear": 7_850, "mlp": 25_818, "cnn": 6_422, "cifar_cnn": 169_578, "lenet": 15_826, "mlp200": 159_010,
}


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_parameter_counts_match_the_papers(name):
    assert count_parameters(create_model(name)) == PAPER_COUNTS[name]


@pytest.mark.parametrize(("name", "shape"), [
    ("linear", (1, 28, 28)), ("mlp", (1, 28, 28)), ("cnn", (1, 28, 28)), ("cifar_cnn", (3, 32, 32)),
    ("lenet", (3, 32, 32)), ("lenet", (1, 28, 28)), ("mlp200", (1, 28, 28)),
])
def test_models_return_logits_for_their_input(name, shape):
    model = create_model(name, input_shape=shape)
    assert model(torch.rand(4, *shape)).shape == (4, 10)


def test_lenet_for_mnist_has_588_features():
    model = create_model("lenet", input_shape=(1, 28, 28))
    assert model[-1].in_features == 588


def test_lenet_weights_are_uniform_in_half_interval():
    torch.manual_seed(0)
    weights = torch.cat([p.detach().flatten() for p in create_model("lenet").parameters()])
    assert weights.min() >= -0.5 and weights.max() <= 0.5
    assert weights.std().item() == pytest.approx((1 / 12) ** 0.5, rel=0.03)  # std of U(-0.5, 0.5)


def test_unknown_model_names_the_forms():
    with pytest.raises(ValueError, match=r"^training.model must be a seed model \(linear, mlp, cnn, .*'torchvision:NAME'"
                                         r".* or a factory .*, got 'resnet'$"):
        create_model("resnet")
