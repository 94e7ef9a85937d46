"""How close reconstructions are to the true images: SSIM, MSE, PSNR, label accuracy, batch alignment.

Images are N x C x H x W (or one C x H x W) float tensors; the true images must lie in [0, 1] and
reconstructions are clamped to [0, 1] before scoring (NaN counts as 0), so a reconstruction is never
rewarded for leaving the valid range.

* SSIM: :data:`SSIM_VARIANT`, scikit-image's ``structural_similarity`` (Wang et al. 2004) with
  ``data_range=1`` on [0, 1] images, its defaults otherwise (7 x 7 uniform window, K1 = 0.01, K2 = 0.03),
  channels through ``channel_axis`` (SSIM averaged over channels). Not comparable with the complex-wavelet
  SSIM reported by ``breaching``.
* MSE: mean over pixels and channels of (x - x_true)^2 on [0, 1]; PSNR = 10 log10(1 / MSE) dB
  (inf for identical images).
* Batches: :func:`match_batch` pairs reconstructions with true images by the Hungarian algorithm
  (``scipy.optimize.linear_sum_assignment``) on the MSE cost, for attacks whose output order is arbitrary.

``scoring="jopeq-code"`` reproduces the evaluation code of JoPEQ's leakage experiments (the DLG/iDLG script of the
JoPEQ-DLG repository, Lang et al.): the reconstruction goes through ``ToPILImage`` of the raw dummy tensor,
i.e. ``(x * 255).byte()`` -- truncation toward zero and an *unclamped* cast that wraps modulo 256 (-0.1 ->
-25 -> 231); the true image is the dataset's own uint8 image, here ``round(x_true * 255)``. SSIM is
scikit-image's on the H x W x C uint8 arrays, whose data range defaults to 255; "MSE" is the sum of squared
uint8 differences over pixels *and channels* divided by H * W (so three times the per-channel mean for RGB).
PSNR, which JoPEQ does not report, is 10 log10(255^2 / mean squared uint8 difference) there. (JoPEQ also
scores the dummy of the last iteration divisible by 10 rather than the final one; that is the attack loop's
business, not the metric's.)
"""
from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch
from scipy.optimize import linear_sum_assignment
from skimage.metrics import structural_similarity
from torch import Tensor

SSIM_VARIANT = "skimage.structural_similarity(data_range=1, channel_axis=0, win_size=7, gaussian_weights=False)"
JOPEQ_SSIM_VARIANT = (
    "skimage.structural_similarity on uint8 H x W x C (data_range=255, channel_axis=2, win_size=7) after "
    "JoPEQ's unclamped (x * 255).byte() cast"
)
SCORINGS = ("standard", "jopeq-code")  # how reconstructions are scored: as stated above, or as JoPEQ's code


def ssim(reconstructed: Tensor, truth: Tensor) -> Tensor:
    """Per-image SSIM (:data:`SSIM_VARIANT`), a float64 tensor of length N."""
    rec, true = _prepare(reconstructed, truth)
    values = [
        structural_similarity(r[0], t[0], data_range=1.0)  # grey: 2-D, no channel axis
        if r.shape[0] == 1
        else structural_similarity(r, t, data_range=1.0, channel_axis=0)
        for r, t in zip(rec, true)
    ]
    return torch.tensor(values, dtype=torch.float64)


def mse(reconstructed: Tensor, truth: Tensor) -> Tensor:
    """Per-image mean squared error over pixels and channels on [0, 1], float64 length N."""
    rec, true = _prepare(reconstructed, truth)
    return torch.from_numpy(((rec - true) ** 2).reshape(len(rec), -1).mean(axis=1))


def psnr(reconstructed: Tensor, truth: Tensor) -> Tensor:
    """Per-image peak signal-to-noise ratio 10 log10(1 / MSE) in dB (inf where MSE = 0), float64 length N."""
    return _psnr(mse(reconstructed, truth), peak=1.0)


def label_accuracy(predicted: Any, true: Any) -> float:
    """Fraction of predicted labels equal to the true ones (same length, at least one)."""
    predicted_t = torch.as_tensor(predicted).reshape(-1)
    true_t = torch.as_tensor(true).reshape(-1)
    if predicted_t.numel() != true_t.numel() or true_t.numel() == 0:
        raise ValueError(
            f"labels must hold one label per image: got {predicted_t.numel()} predicted and {true_t.numel()} true"
        )
    return float((predicted_t.cpu() == true_t.cpu()).double().mean())


def match_batch(reconstructed: Tensor, truth: Tensor) -> Tensor:
    """The permutation ``perm`` (LongTensor N) minimising the total MSE of ``reconstructed[perm[i]]`` against
    ``truth[i]`` (Hungarian algorithm, ``scipy.optimize.linear_sum_assignment``)."""
    rec, true = _prepare(reconstructed, truth)
    flat_rec, flat_true = rec.reshape(len(rec), -1), true.reshape(len(true), -1)
    cost = ((flat_true[:, None, :] - flat_rec[None, :, :]) ** 2).mean(axis=2)  # cost[i, j]: truth i vs rec j
    rows, cols = linear_sum_assignment(cost)
    perm = np.empty(len(rows), dtype=np.int64)
    perm[rows] = cols
    return torch.from_numpy(perm)


def score(
    reconstructed: Tensor,
    truth: Tensor,
    *,
    labels: Any = None,
    true_labels: Any = None,
    align: bool = False,
    scoring: str = "standard",
) -> dict[str, Any]:
    """Per-image and mean SSIM, MSE and PSNR (and label accuracy when both label sets are given), JSON-friendly.

    ``align=True`` first reorders the reconstructions (and ``labels``) by :func:`match_batch`; the permutation
    is returned. ``scoring="jopeq-code"`` scores as JoPEQ's code does (see the module docstring); the output names
    the SSIM variant and the MSE scale either way.
    """
    if scoring not in SCORINGS:
        raise ValueError(f"scoring must be one of {', '.join(SCORINGS)}, got {scoring!r}")
    if not isinstance(align, bool):
        raise ValueError(f"align must be True or False, got {align!r}")
    rec, true = _as_batch(reconstructed, "reconstructed"), _as_batch(truth, "truth")
    _check(rec, true)
    permutation = None
    if align:
        permutation = match_batch(rec, true)
        rec = rec[permutation]
        if labels is not None:
            labels = torch.as_tensor(labels).reshape(-1)[permutation]
    if scoring == "jopeq-code":
        ssim_values, mse_values, psnr_values = _jopeq_scores(rec, true)
        variant, mse_unit = JOPEQ_SSIM_VARIANT, "sum over channels of squared uint8 differences, per pixel"
    else:
        ssim_values, mse_values = ssim(rec, true), mse(rec, true)
        psnr_values = _psnr(mse_values, peak=1.0)
        variant, mse_unit = SSIM_VARIANT, "mean squared difference per pixel and channel, images in [0, 1]"
    result: dict[str, Any] = {
        "ssim": ssim_values.tolist(),
        "mse": mse_values.tolist(),
        "psnr": psnr_values.tolist(),
        "ssim_mean": float(ssim_values.mean()),
        "mse_mean": float(mse_values.mean()),
        "psnr_mean": float(psnr_values.mean()),
        "ssim_variant": variant,
        "mse_unit": mse_unit,
        "psnr_unit": "dB",
        "scoring": scoring,
        "aligned": align,
        "permutation": None if permutation is None else permutation.tolist(),
        "label_accuracy": None,
    }
    if labels is not None and true_labels is not None:
        result["label_accuracy"] = label_accuracy(labels, true_labels)
    return result


def _jopeq_scores(rec: Tensor, true: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """JoPEQ's uint8 SSIM and "MSE" (see the module docstring), plus PSNR on the same uint8 arrays."""
    scaled = torch.nan_to_num(rec.detach().double().cpu() * 255.0, nan=0.0)
    wrapped = torch.remainder(torch.trunc(scaled), 256).to(torch.uint8).numpy()  # (x * 255).byte() on CPU
    exact = torch.round(true.detach().double().cpu() * 255.0).to(torch.uint8).numpy()
    ssim_values, mse_values, mean_squared = [], [], []
    for r, t in zip(wrapped, exact):
        r_hwc, t_hwc = np.moveaxis(r, 0, -1), np.moveaxis(t, 0, -1)
        if r_hwc.shape[-1] == 1:  # a grey PIL image is 2-D
            ssim_values.append(structural_similarity(r_hwc[..., 0], t_hwc[..., 0]))
        else:
            ssim_values.append(structural_similarity(r_hwc, t_hwc, channel_axis=2))
        squared = (r_hwc.astype(np.float64) - t_hwc.astype(np.float64)) ** 2
        mse_values.append(squared.sum() / (r_hwc.shape[0] * r_hwc.shape[1]))
        mean_squared.append(squared.mean())
    ssim_t, mse_t = torch.tensor(ssim_values, dtype=torch.float64), torch.tensor(mse_values, dtype=torch.float64)
    return ssim_t, mse_t, _psnr(torch.tensor(mean_squared, dtype=torch.float64), peak=255.0)


def _psnr(mse_values: Tensor, *, peak: float) -> Tensor:
    values = [math.inf if m == 0 else 10.0 * math.log10(peak**2 / m) for m in mse_values.tolist()]
    return torch.tensor(values, dtype=torch.float64)


def _prepare(reconstructed: Tensor, truth: Tensor) -> tuple[np.ndarray, np.ndarray]:
    """Validated float64 numpy arrays N x C x H x W: truth in [0, 1], reconstructions clamped (NaN -> 0)."""
    rec, true = _as_batch(reconstructed, "reconstructed"), _as_batch(truth, "truth")
    _check(rec, true)
    rec = torch.nan_to_num(rec.detach().double().cpu(), nan=0.0).clamp(0.0, 1.0)
    return rec.numpy(), true.detach().double().cpu().numpy()


def _check(rec: Tensor, true: Tensor) -> None:
    if rec.shape != true.shape:
        raise ValueError(
            f"reconstructed and truth must have the same shape, got {tuple(rec.shape)} and {tuple(true.shape)}"
        )
    if not bool(((true >= 0) & (true <= 1)).all()):
        raise ValueError("images must lie in [0, 1] (truth has values outside it or NaN)")


def _as_batch(images: Any, name: str) -> Tensor:
    if not isinstance(images, Tensor) or images.dim() not in (3, 4) or not images.is_floating_point():
        shape = tuple(images.shape) if isinstance(images, Tensor) else type(images).__name__
        raise ValueError(f"{name} must be a float tensor N x C x H x W or C x H x W, got {shape}")
    return images.unsqueeze(0) if images.dim() == 3 else images
