"""JoPEQ's signal-to-noise ratio of a round's uplink (Lang et al., paper 002, Sec. V):

    SNR = (1/K) sum_k Var(h_k) / Var(h_k - h~_k),

h_k client k's update as the mechanism receives it and h~_k what the server decodes, each variance over the
update's coordinates (the empirical variance, about the coordinates' mean). JoPEQ clips nothing, so h_k is its
true update; for a mechanism that clips (``Mechanism.clip_update``) h_k is the clipped update, so the SNR
measures the mechanism's noise and quantization, not how far the clip shrinks a growing update (the training
loop passes the protocol's ``received`` updates). The paper plots and tabulates it in decibels without saying
which convention; a ratio of variances is a power ratio, so :func:`snr_db` is 10 log10(SNR).
"""
from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import torch

__all__ = ["mean_snr", "snr", "snr_db"]


def snr(true: torch.Tensor, decoded: torch.Tensor) -> float:
    """The mean over clients (rows) of Var(h_k) / Var(h_k - h~_k); inf when every client's error is constant."""
    if true.shape != decoded.shape or true.dim() != 2:
        raise ValueError(f"true and decoded must be (clients, coordinates) of one shape, got {tuple(true.shape)} "
                         f"and {tuple(decoded.shape)}")
    return mean_snr(zip(true, decoded))


def mean_snr(rows: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """``snr`` over (h_k, h~_k) pairs given one client at a time, so a round's clients are never copied at once
    (float64, one row's worth)."""
    ratios = []
    for true, decoded in rows:
        h = true.detach().to(torch.float64)
        signal = h.var(unbiased=False)
        noise = (h - decoded.detach().to(device=h.device, dtype=torch.float64)).var(unbiased=False)
        ratios.append(float(signal / noise) if noise > 0 else math.inf)
    return float(np.mean(ratios))


def snr_db(value: float) -> float:
    """10 log10 of an SNR (a ratio of variances)."""
    return 10 * math.log10(value) if value > 0 else -math.inf
