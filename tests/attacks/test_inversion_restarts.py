"""Restarts of DLG / iDLG / Inverting Gradients: the lowest-loss start is kept, starts are keyed and reproducible,
and the presets' restarts rescue an image whose first start fails."""
import pytest
import torch

from auditkit import attacks
from auditkit.attacks import metrics
from auditkit.attacks.gradient_inversion import start_seeds
from auditkit.data import load_image_patches
from auditkit.stages.inversion import attacked_model
from auditkit.models import lenet

SMALL = (3, 16, 16)  # 16 x 16 patches keep the L-BFGS runs within the CI budget


@pytest.fixture(scope="module")
def failing_case():
    """A case whose first start fails: patch 1 of ``load_image_patches(6, size=16)`` (label 1) on the LeNet of
    ``attacked_model("lenet", seed=2)`` (what ``auditkit attack idlg --seed 2`` attacks). Start 0 of seed 2 stalls
    at a matching loss ~4 (SSIM ~0.02) while starts 1-3 reach ~5e-8 (SSIM 1.00) within 40 steps. Found by
    running 4 starts on 6 patches x 6 model seeds; if the seeding of models or starts changes, re-pick it."""
    model = attacked_model("lenet", SMALL, seed=2)
    image = load_image_patches(6, size=16)[1:2]
    observed = attacks.per_image_gradients(model, image, torch.tensor([1]))
    return model, image, observed


def test_restarts_rescue_a_first_start_known_to_fail(failing_case):
    model, image, observed = failing_case
    one = attacks.idlg(model, observed, input_shape=SMALL, seed=2, iterations=40, restarts=1)
    assert metrics.ssim(one.images, image)[0] < 0.3, "the case no longer fails from one start: re-pick it"
    assert one.loss[0] > 1.0 and one.steps[0] == 40

    preset = attacks.preset_settings("idlg")["restarts"]
    assert preset >= 4
    result = attacks.idlg(model, observed, input_shape=SMALL, seed=2, iterations=40)
    assert result.settings["restarts"] == preset and result.start_loss.shape == (1, preset)
    assert metrics.ssim(result.images, image)[0] > 0.95 and result.labels.tolist() == [1]
    assert result.loss[0] < 1e-6 and result.steps[0] < 40  # solved: every start of the image stopped
    assert result.start[0] != 0 and result.loss[0] == result.start_loss[0].min()
    # Starts are keyed by (seed, r): start 0 of the preset run is the one-start run's (here it never stops early).
    assert result.start_loss[0, 0] > 1.0


@pytest.mark.parametrize("attack", ["dlg", "idlg"])
def test_the_kept_start_is_the_lowest_loss_of_starts_run_separately(attack):
    # float64 and 2 steps: the batched L-BFGS of all starts and torch.optim.LBFGS on each start alone agree to
    # rounding; the result keeps the start with the lowest final matching loss.
    torch.manual_seed(0)
    model = lenet(SMALL).double()
    patches = load_image_patches(2, size=16).double()
    observed = attacks.per_image_gradients(model, patches, torch.tensor([3, 7]))
    settings = dict(input_shape=SMALL, iterations=2, restarts=3, stop_loss=None, seed=1)
    batched = attacks.invert(attack, model, observed, mode="batched", **settings)
    separate = attacks.invert(attack, model, observed, mode="sequential", **settings)
    torch.testing.assert_close(batched.start_loss, separate.start_loss, rtol=1e-6, atol=1e-9)
    assert batched.start.tolist() == separate.start.tolist() == batched.start_loss.argmin(dim=1).tolist()
    torch.testing.assert_close(batched.loss, batched.start_loss.min(dim=1).values, rtol=0, atol=0)
    assert len(set(batched.start_loss.flatten().tolist())) == 6  # six distinct starts, not one start six times
    torch.testing.assert_close(batched.images, separate.images, rtol=0, atol=1e-6)
    assert batched.labels.tolist() == separate.labels.tolist()
    # Each start alone: a one-start run is start 0; a two-start run adds start 1 and keeps start 0.
    alone = attacks.invert(attack, model, observed, **{**settings, "restarts": 1})
    two = attacks.invert(attack, model, observed, **{**settings, "restarts": 2})
    torch.testing.assert_close(alone.loss, batched.start_loss[:, 0], rtol=1e-9, atol=1e-12)
    torch.testing.assert_close(two.start_loss, batched.start_loss[:, :2], rtol=1e-9, atol=1e-12)


def test_inverting_gradients_keeps_the_start_with_the_lowest_matching_loss():
    torch.manual_seed(0)
    model = lenet(SMALL)
    patches = load_image_patches(2, size=16)
    observed = attacks.per_image_gradients(model, patches, torch.tensor([3, 7]))
    result = attacks.inverting_gradients(model, observed, input_shape=SMALL, iterations=20, restarts=4, tv=0.5)
    assert result.start_loss.shape == (2, 4)
    assert torch.equal(result.loss, result.start_loss.min(dim=1).values)
    assert torch.equal(result.start, result.start_loss.argmin(dim=1))
    separate = attacks.inverting_gradients(model, observed, input_shape=SMALL, iterations=20, restarts=4, tv=0.5,
                                           mode="sequential")
    torch.testing.assert_close(result.start_loss, separate.start_loss, rtol=1e-5, atol=1e-7)
    torch.testing.assert_close(result.images, separate.images, rtol=0, atol=1e-6)


def test_starts_are_keyed_and_the_result_is_deterministic(failing_case):
    model, _, observed = failing_case
    settings = dict(input_shape=SMALL, iterations=4, restarts=3)
    first = attacks.idlg(model, observed, seed=7, **settings)
    again = attacks.idlg(model, observed, seed=7, **settings)
    assert first.start_seeds == again.start_seeds == start_seeds(7, 3)
    assert len(set(first.start_seeds)) == 3 and start_seeds(7, 2) == start_seeds(7, 3)[:2]
    assert torch.equal(first.images, again.images) and torch.equal(first.start_loss, again.start_loss)
    assert torch.equal(first.start, again.start)
    other = attacks.idlg(model, observed, seed=8, **settings)
    assert start_seeds(8, 3) != start_seeds(7, 3) and not torch.equal(first.images, other.images)
