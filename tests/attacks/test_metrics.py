"""SSIM / MSE / PSNR / label accuracy / Hungarian alignment, and JoPEQ's uint8 scoring (scoring="jopeq-code")."""
import math

import numpy as np
import pytest
import torch
from skimage.metrics import structural_similarity

from auditkit.attacks import metrics


@pytest.fixture(scope="module")
def images():
    return torch.rand(4, 3, 16, 16, generator=torch.Generator().manual_seed(0))


def test_identical_images_score_perfectly(images):
    torch.testing.assert_close(metrics.ssim(images, images), torch.ones(4, dtype=torch.float64))
    grey = images[:, :1]
    torch.testing.assert_close(metrics.ssim(grey, grey), torch.ones(4, dtype=torch.float64))
    assert metrics.mse(images, images).abs().max() == 0
    assert metrics.psnr(images, images).tolist() == [math.inf] * 4


def test_ssim_is_scikit_image_with_data_range_one(images):
    other = images.flip(0)
    expected = structural_similarity(other[1].numpy(), images[1].numpy(), data_range=1.0, channel_axis=0)
    assert metrics.ssim(other, images)[1].item() == pytest.approx(expected, abs=1e-6)
    assert "data_range=1" in metrics.SSIM_VARIANT


def test_known_mse_and_psnr_and_clamping():
    truth = torch.zeros(2, 1, 8, 8)
    reconstructed = torch.full((2, 1, 8, 8), 0.5)
    reconstructed[1] = -3.0  # clamped to 0 before scoring
    torch.testing.assert_close(metrics.mse(reconstructed, truth), torch.tensor([0.25, 0.0], dtype=torch.float64))
    assert metrics.psnr(reconstructed, truth)[0].item() == pytest.approx(10 * math.log10(4))
    assert metrics.mse(torch.full((1, 1, 8, 8), float("nan")), truth[:1]).item() == 0.0


def test_truth_outside_unit_interval_and_shape_mismatch_raise(images):
    with pytest.raises(ValueError, match=r"images must lie in \[0, 1\]"):
        metrics.ssim(images, images + 0.5)
    with pytest.raises(ValueError, match=r"images must lie in \[0, 1\]"):
        metrics.score(images, -images)
    with pytest.raises(ValueError, match="same shape"):
        metrics.mse(images[:3], images)
    with pytest.raises(ValueError, match="reconstructed must be a float tensor"):
        metrics.psnr(images[0, 0], images[0, 0])
    with pytest.raises(ValueError, match="scoring must be one of standard, jopeq-code"):
        metrics.score(images, images, scoring="dlg")


def test_hungarian_alignment_recovers_a_shuffle(images):
    permutation = torch.tensor([2, 0, 3, 1])
    shuffled = (images + 0.01 * torch.randn(images.shape, generator=torch.Generator().manual_seed(1)))[permutation]
    match = metrics.match_batch(shuffled, images)
    assert torch.equal(permutation[match], torch.arange(4))
    labels = torch.tensor([5, 6, 7, 8])[permutation]
    result = metrics.score(shuffled, images, labels=labels, true_labels=[5, 6, 7, 8], align=True)
    assert result["permutation"] == match.tolist()
    assert result["label_accuracy"] == 1.0
    assert result["ssim_mean"] > 0.9
    unaligned = metrics.score(shuffled, images, labels=labels, true_labels=[5, 6, 7, 8])
    assert unaligned["ssim_mean"] < 0.2 and unaligned["label_accuracy"] == 0.0 and unaligned["permutation"] is None


def test_label_accuracy():
    assert metrics.label_accuracy([1, 2, 3, 4], torch.tensor([1, 0, 3, 0])) == 0.5
    with pytest.raises(ValueError, match="labels must hold one label per image"):
        metrics.label_accuracy([1, 2], [1])


def test_score_names_its_variant_and_is_json_friendly(images):
    result = metrics.score(images, images)
    assert result["ssim_variant"] == metrics.SSIM_VARIANT and result["scoring"] == "standard"
    assert result["ssim"] == [1.0] * 4 and result["mse_mean"] == 0.0
    assert all(isinstance(v, float) for v in result["mse"])


def test_jopeq_code_scoring_wraps_an_unclamped_uint8_cast():
    truth = torch.full((1, 3, 8, 8), 0.2)
    reconstructed = truth.clone()
    reconstructed[0, :, 0, 0] = -0.1  # (-0.1 * 255).byte() -> trunc(-25.5) = -25 -> 231 (mod 256)
    reconstructed[0, :, 0, 1] = 1.5  # 382.5 -> 382 -> 126
    result = metrics.score(reconstructed, truth, scoring="jopeq-code")
    truth_u8, expected_rec = 51, np.full((8, 8, 3), 51, dtype=np.uint8)  # round(0.2 * 255) = 51
    expected_rec[0, 0], expected_rec[0, 1] = 231, 126
    squared = ((expected_rec.astype(float) - truth_u8) ** 2).sum()
    assert result["mse"][0] == pytest.approx(squared / 64)  # summed over channels, per pixel
    truth_image = np.full((8, 8, 3), truth_u8, dtype=np.uint8)
    ssim_u8 = structural_similarity(expected_rec, truth_image, channel_axis=2)  # data_range 255 from uint8
    assert result["ssim"][0] == pytest.approx(ssim_u8)
    assert result["psnr"][0] == pytest.approx(10 * math.log10(255**2 / (squared / 192)))
    assert "uint8" in result["ssim_variant"]
    # The standard mode clamps instead: -0.1 -> 0 and 1.5 -> 1, a far smaller error.
    standard = metrics.score(reconstructed, truth)
    assert standard["mse"][0] == pytest.approx(3 * (0.2**2 + 0.8**2) / 192)
