"""DLG / iDLG / Inverting Gradients: reconstruction quality, batched = sequential, labels, settings, bad input."""
import json

import pytest
import torch

from auditkit import attacks
from auditkit.attacks import metrics
from auditkit.data import load_image_patches
from auditkit.models import cnn, lenet

SMALL = (3, 16, 16)  # 16 x 16 natural patches keep the L-BFGS tests within the CI budget


@pytest.fixture(scope="module")
def lenet16():
    torch.manual_seed(0)
    return lenet(SMALL)


@pytest.fixture(scope="module")
def patches():
    return load_image_patches(3, size=16)


@pytest.fixture(scope="module")
def clean(lenet16, patches):
    labels = torch.tensor([3, 7, 1])
    return attacks.per_image_gradients(lenet16, patches, labels), labels


def test_idlg_reconstructs_clean_patches_and_noise_defeats_it(lenet16, patches, clean):
    observed, labels = clean
    result = attacks.idlg(lenet16, observed, input_shape=SMALL, iterations=40)
    assert result.label_source == "extracted"
    assert result.labels.tolist() == labels.tolist()
    assert metrics.ssim(result.images, patches).min() > 0.9
    assert (result.loss < 1e-6).all()
    assert (result.steps < 40).all()  # stopped early on the matching loss

    noise = 0.1 * torch.randn(observed.shape, generator=torch.Generator().manual_seed(1))
    noisy = attacks.idlg(lenet16, observed + noise, input_shape=SMALL, iterations=40)
    assert metrics.ssim(noisy.images, patches).mean() < 0.1
    assert (noisy.steps == 40).all()


def test_inverting_gradients_batched_equals_sequential(lenet16, patches, clean):
    observed, _ = clean
    settings = dict(iterations=16, restarts=2, tv=1e-2, input_shape=SMALL)
    batched = attacks.inverting_gradients(lenet16, observed[:2], mode="batched", **settings)
    sequential = attacks.inverting_gradients(lenet16, observed[:2], mode="sequential", **settings)
    torch.testing.assert_close(batched.images, sequential.images, rtol=0, atol=1e-6)
    torch.testing.assert_close(batched.loss, sequential.loss, rtol=1e-5, atol=1e-7)
    assert batched.labels.tolist() == sequential.labels.tolist()
    assert batched.settings["mode"] == "batched" and sequential.settings["mode"] == "sequential"


@pytest.mark.parametrize("attack", ["dlg", "idlg"])
def test_batched_lbfgs_follows_torch_lbfgs_per_image(patches, attack):
    # float64 and a few steps: the batched L-BFGS and torch.optim.LBFGS agree to rounding.
    torch.manual_seed(0)
    model = lenet(SMALL).double()
    observed = attacks.per_image_gradients(model, patches[:2].double(), torch.tensor([3, 7]))
    runs = [
        attacks.invert(attack, model, observed, input_shape=SMALL, iterations=2, mode=mode)
        for mode in ("batched", "sequential")
    ]
    torch.testing.assert_close(runs[0].images, runs[1].images, rtol=0, atol=1e-6)
    torch.testing.assert_close(runs[0].loss, runs[1].loss, rtol=1e-6, atol=1e-9)
    assert runs[0].labels.tolist() == runs[1].labels.tolist() == [3, 7]
    assert runs[0].label_source == ("optimised" if attack == "dlg" else "extracted")


def test_given_label_is_used_as_is(lenet16, clean):
    observed, _ = clean
    result = attacks.idlg(lenet16, observed, input_shape=SMALL, label=[0, 0, 9], iterations=1)
    assert result.label_source == "given"
    assert result.labels.tolist() == [0, 0, 9]
    single = attacks.dlg(lenet16, observed[0], input_shape=SMALL, label=4, iterations=1)
    assert single.label_source == "given" and single.labels.tolist() == [4]


def test_observation_forms_give_the_same_attack(lenet16, clean):
    observed, _ = clean
    shapes = [p.shape for p in lenet16.parameters()]
    sizes = [s.numel() for s in shapes]
    as_list = [part.reshape(len(observed), *s) for part, s in zip(observed.split(sizes, dim=1), shapes)]
    settings = dict(input_shape=SMALL, iterations=2, lr=0.05)
    from_matrix = attacks.inverting_gradients(lenet16, observed, **settings)
    from_list = attacks.inverting_gradients(lenet16, as_list, **settings)
    torch.testing.assert_close(from_matrix.images, from_list.images)
    one = attacks.inverting_gradients(lenet16, [t[0] for t in as_list], **settings)
    assert one.images.shape == (1, *SMALL)


def test_result_contract_settings_recorded_and_reproducible(lenet16, clean):
    observed, _ = clean
    result = attacks.inverting_gradients(lenet16, observed[:1], input_shape=SMALL, iterations=3, tv=0.5, seed=4)
    assert result.images.dtype == torch.float32 and result.images.shape == (1, *SMALL)
    assert result.images.min() >= 0 and result.images.max() <= 1
    assert result.labels.dtype == torch.long and result.loss.shape == (1,) and result.wall_time > 0
    assert set(attacks.preset_settings("inverting_gradients")) <= set(result.settings)
    assert result.settings["tv"] == 0.5 and result.settings["seed"] == 4 and result.settings["device"] == "cpu"
    assert result.settings["attack"] == "inverting_gradients" and result.settings["observation"] == "gradient"
    json.dumps(result.settings)
    again = attacks.inverting_gradients(lenet16, observed[:1], input_shape=SMALL, iterations=3, tv=0.5, seed=4)
    assert torch.equal(result.images, again.images)
    other = attacks.inverting_gradients(lenet16, observed[:1], input_shape=SMALL, iterations=3, tv=0.5, seed=5)
    assert not torch.equal(result.images, other.images)


def test_inverting_gradients_decreases_the_cosine_loss_on_a_relu_cnn():
    torch.manual_seed(0)
    model = cnn()
    images = torch.rand(2, 1, 28, 28, generator=torch.Generator().manual_seed(0))
    observed = attacks.per_image_gradients(model, images, torch.tensor([2, 5]))
    # At the preset's restarts (start 0 of image 0 alone only goes 0.139 -> 0.081; the kept loss falls ~5x).
    start = attacks.inverting_gradients(model, observed, input_shape=(1, 28, 28), iterations=1)
    later = attacks.inverting_gradients(model, observed, input_shape=(1, 28, 28), iterations=60)
    assert start.labels.tolist() == [2, 5]
    assert (later.loss < 0.5 * start.loss).all()


def test_unrolled_update_attack_matches_its_own_simulation(lenet16, patches):
    # A client taking 2 SGD steps with lr 0.1 on one image; the attacker unrolls the same 2 steps.
    images, labels = patches[:2], torch.tensor([3, 7])
    params = dict(lenet16.named_parameters())
    updates = []
    for image, label in zip(images, labels):
        current = {k: v.detach() for k, v in params.items()}
        for _ in range(2):
            leaves = {k: v.clone().requires_grad_(True) for k, v in current.items()}
            logits = torch.func.functional_call(lenet16, leaves, (image[None],))
            grads = torch.autograd.grad(torch.nn.functional.cross_entropy(logits, label[None]), list(leaves.values()))
            current = {k: v - 0.1 * g for (k, v), g in zip(current.items(), grads)}
        updates.append(torch.cat([(current[k] - params[k]).reshape(-1) for k in params]).detach())
    update = torch.stack(updates)
    settings = dict(input_shape=SMALL, observation="update", local_steps=2, local_lr=0.1, iterations=40)
    result = attacks.idlg(lenet16, update, **settings)
    assert result.labels.tolist() == [3, 7] and result.label_source == "extracted"
    assert metrics.ssim(result.images, images).min() > 0.9
    assert result.settings["observation"] == "update" and result.settings["local_steps"] == 2


def test_one_gradient_reading_of_a_single_step_update_is_exact(lenet16, clean):
    observed, _ = clean
    update = -0.05 * observed  # one SGD step with lr 0.05
    torch.testing.assert_close(attacks.update_to_gradient(update, lr=0.05, local_steps=1), observed)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"learning_rate": 0.1}, "unknown setting.*'learning_rate'.*valid:.*iterations"),
        ({"optimizer": "sgd"}, "optimizer must be one of lbfgs, adam"),
        ({"iterations": 0}, "iterations must be an integer >= 1"),
        ({"lr": -1.0}, "lr must be a finite number > 0"),
        ({"signed": True}, "signed=True needs optimizer='adam'"),
        ({"observation": "update"}, "local_lr is required"),
        ({"box": 1}, "box must be true or false"),
        ({"mode": "parallel"}, "mode must be one of batched, sequential"),
        ({"device": "tpu9"}, "device must be None or a torch device"),
    ],
)
def test_bad_settings_raise(lenet16, clean, settings, message):
    observed, _ = clean
    with pytest.raises(ValueError, match=message):
        attacks.idlg(lenet16, observed, input_shape=SMALL, **settings)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message for a machine without CUDA")
def test_unavailable_device_raises(lenet16, clean):
    with pytest.raises(ValueError, match="device 'cuda' is not available here"):
        attacks.idlg(lenet16, clean[0], input_shape=SMALL, device="cuda")


def test_bad_inputs_raise(lenet16, clean):
    observed, _ = clean
    wrong = [torch.zeros(12, 3, 3, 3)] + [torch.zeros(1)] * 7
    with pytest.raises(ValueError, match=r"observed must hold one tensor per model parameter with shapes \[\(12, 3, 5"):
        attacks.idlg(lenet16, wrong, input_shape=SMALL)
    with pytest.raises(ValueError, match="observed must be a flat vector of length"):
        attacks.idlg(lenet16, observed[:, :-1], input_shape=SMALL)
    with pytest.raises(ValueError, match="observed contains NaN"):
        attacks.idlg(lenet16, observed * float("nan"), input_shape=SMALL)
    with pytest.raises(ValueError, match="input_shape must be"):
        attacks.idlg(lenet16, observed, input_shape=(16, 16))
    with pytest.raises(ValueError, match="does not fit the model"):
        attacks.idlg(lenet16, observed, input_shape=(1, 16, 16))
    with pytest.raises(ValueError, match="label must hold|label must be an int or a sequence of 3"):
        attacks.idlg(lenet16, observed, input_shape=SMALL, label=[1, 2])
    with pytest.raises(ValueError, match=r"label must lie in \[0, 10\)"):
        attacks.idlg(lenet16, observed, input_shape=SMALL, label=[1, 2, 10])
    with pytest.raises(ValueError, match="attack must be one of dlg, idlg, inverting_gradients"):
        attacks.invert("deepleak", lenet16, observed, input_shape=SMALL)


def test_idlg_on_device_recovers_the_labels_and_returns_cpu_results(lenet16, patches, clean, device):
    """iDLG with ``device=`` on two patches (the model and observation stay on the CPU): the labels are extracted,
    the patches reconstructed (SSIM > 0.9), the results are CPU tensors of the CPU run's dtypes with a float wall
    time, the settings name the device, and a second run with the same seed gives the same numbers: bit for bit on the CPU;
    on a GPU (cuDNN's backward kernels sum in no fixed order, which L-BFGS amplifies: the first GPU run differed by
    ~3e-3 per pixel) the same labels, pixels within 1e-2 on average, SSIM between the runs > 0.98 and between the
    second run and the patches > 0.9, both at a matching loss below 1e-6."""
    observed, labels = clean[0][:2], clean[1][:2]
    run = lambda: attacks.idlg(lenet16, observed, input_shape=SMALL, iterations=40, restarts=2,  # noqa: E731
                               device=str(device))
    result = run()
    assert result.label_source == "extracted" and result.labels.tolist() == labels.tolist()
    assert metrics.ssim(result.images, patches[:2]).min() > 0.9 and (result.loss < 1e-6).all()
    for tensor, dtype in ((result.images, torch.float32), (result.labels, torch.long), (result.loss, torch.float32),
                          (result.start_loss, torch.float32)):
        assert tensor.device.type == "cpu" and tensor.dtype == dtype
    assert result.steps.device.type == "cpu" and result.start.device.type == "cpu"
    assert isinstance(result.wall_time, float) and result.settings["device"].startswith(device.type)
    assert next(lenet16.parameters()).device.type == "cpu"  # the attack did not move the model
    again = run()
    if device.type == "cuda":
        assert again.labels.tolist() == labels.tolist() and (again.loss < 1e-6).all()
        assert (again.images - result.images).abs().flatten(1).mean(1).max() < 1e-2
        assert metrics.ssim(again.images, result.images).min() > 0.98
        assert metrics.ssim(again.images, patches[:2]).min() > 0.9
    else:
        assert torch.equal(result.images, again.images) and torch.equal(result.loss, again.loss)
        assert torch.equal(result.steps, again.steps) and torch.equal(result.start_loss, again.start_loss)


def test_a_partly_frozen_model_is_attacked_through_its_trained_parameters_only(lenet16, patches):
    """LeNet with its first convolution frozen (12 x 3 x 5 x 5 + 12 parameters): the observation is the gradient
    with respect to the trained parameters only (the whole model's loss, the frozen layer in its forward pass),
    both simulation paths agree on it, an observation over every parameter is refused, and iDLG matches it (the
    first layer's gradient, most of what identifies the image, is not observed: the reconstruction is not
    asserted)."""
    import copy

    from auditkit.attacks.gradient_matching import ClientSimulator

    model = copy.deepcopy(lenet16)
    model[0][0].requires_grad_(False)
    trained = [p for p in model.parameters() if p.requires_grad]
    size = sum(p.numel() for p in trained)
    assert size == sum(p.numel() for p in lenet16.parameters()) - (12 * 3 * 5 * 5 + 12)
    labels = torch.tensor([3, 7, 1])
    observed = attacks.per_image_gradients(model, patches, labels)
    assert observed.shape == (3, size)
    loss = torch.nn.functional.cross_entropy(model(patches[:1]), labels[:1])
    expected = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, trained)])
    torch.testing.assert_close(observed[0], expected, rtol=1e-5, atol=1e-7)
    simulator = ClientSimulator(model, device=torch.device("cpu"), dtype=torch.float32)
    target = torch.nn.functional.one_hot(labels[:1], 10).float()
    torch.testing.assert_close(simulator.plain(patches[:1], target), expected, rtol=1e-5, atol=1e-7)
    with pytest.raises(ValueError, match=rf"observed must be a flat vector of length {size} or an N x {size} matrix"):
        attacks.idlg(model, attacks.per_image_gradients(lenet16, patches, labels), input_shape=SMALL)
    first, later = (attacks.idlg(model, observed, input_shape=SMALL, iterations=n) for n in (1, 8))
    assert later.labels.tolist() == labels.tolist() and later.images.shape == (3, *SMALL)
    assert (later.loss < 0.05 * first.loss).all()  # 1.3-2.0 after one step, about 0.01 after eight
