"""Analytic label extraction from a single-image gradient (iDLG, Zhao et al. 2020, Sec. 3.2).

For one sample with cross-entropy loss and a last fully connected layer z = W h + b, the weight gradient is
dL/dW = (softmax(z) - onehot(c)) h^T, so row k sums to (p_k - [k = c]) * sum_j h_j. With non-negative
features h (sigmoid or ReLU before the last layer, as in the DLG LeNet and the seed CNNs) only the true
class c has a negative row sum: c = argmin_k sum_j dL/dW[k, j].
"""
from __future__ import annotations

import torch
from torch import Tensor


def extract_labels(observed_last_weight_grad: Tensor) -> Tensor:
    """Labels (LongTensor N) from last-layer weight gradients, K x F for one image or N x K x F for a batch.

    Each image's label is the class whose row of dL/dW has the smallest (the only negative) sum. For an
    observed *update* (w_after - w_before, which points against the gradient) pass its negative.
    """
    grads = observed_last_weight_grad
    if not isinstance(grads, Tensor) or grads.dim() not in (2, 3):
        shape = tuple(grads.shape) if isinstance(grads, Tensor) else type(grads).__name__
        raise ValueError(
            f"observed_last_weight_grad must be a K x F or N x K x F tensor (classes x features), got {shape}"
        )
    if grads.dim() == 2:
        grads = grads.unsqueeze(0)
    return torch.argmin(grads.sum(dim=-1), dim=-1).long()
