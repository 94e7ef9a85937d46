"""What an attack's budget bought: the halfway iterate, and the trend between it and the end."""
import pytest
import torch

from auditkit import attacks
from auditkit.attacks.budget import RISING_SSIM, BudgetTrend, budget_entry, trend
from auditkit.data import load_image_patches
from auditkit.models import lenet

SMALL = (3, 16, 16)


@pytest.mark.parametrize("mode", ["batched", "sequential"])
def test_the_halfway_images_are_those_a_run_of_half_the_iterations_ends_with(mode):
    """Without the lr schedule and early stopping a run's first half is a run of half the iterations: the halfway
    images of 12 iterations (2 restarts, each image's start with the lower loss then) equal the final images of 6;
    the analytic attack keeps none."""
    torch.manual_seed(0)
    model = lenet(SMALL)
    images = load_image_patches(2, size=16)
    observed = attacks.per_image_gradients(model, images, torch.tensor([3, 7]))
    common = dict(input_shape=SMALL, restarts=2, lr_decay=False, stop_loss=None, mode=mode, seed=1)
    whole = attacks.invert("inverting_gradients", model, observed, iterations=12, **common)
    half = attacks.invert("inverting_gradients", model, observed, iterations=6, **common)
    assert whole.halfway is not None and whole.halfway.shape == whole.images.shape
    halfway_start = half.start_loss.argmin(dim=1)  # the lower final loss of the 6-iteration run's starts
    assert torch.equal(halfway_start, half.start)
    torch.testing.assert_close(whole.halfway, half.images, atol=1e-6, rtol=0)
    assert not torch.equal(whole.halfway, whole.images)


def test_the_trend_is_rising_from_the_stated_rise_and_flat_below_it():
    assert trend(0.30, 0.30 + RISING_SSIM) is BudgetTrend.RISING
    assert trend(0.30, 0.30 + RISING_SSIM / 2) is BudgetTrend.FLAT
    assert trend(0.50, 0.40) is BudgetTrend.FLAT  # a fall buys nothing either
    assert trend(None, 0.9) is BudgetTrend.NOT_MEASURED
    entry = budget_entry({"iterations": 200, "restarts": 4}, targets=4, estimated_seconds=12.5, clean=(0.5, 0.8),
                         defended=(0.1, 0.11))
    assert entry == {"iterations": 200, "restarts": 4, "targets": 4, "estimated_seconds": 12.5, "clean_ssim_at_half": 0.5,
                     "clean_ssim": 0.8, "ssim_at_half": 0.1, "ssim": 0.11, "trend": BudgetTrend.FLAT}
    analytic = budget_entry({"feature_iterations": 300, "refine_iterations": 300}, targets=16, estimated_seconds=1.0,
                            clean=(None, 0.9), defended=(None, 0.2))
    assert (analytic["iterations"], analytic["restarts"], analytic["trend"]) == (300, None, "not measured")
