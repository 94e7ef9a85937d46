"""An example dataset factory: ``[data] dataset = "my_data.py:make_data"`` (a path relative to the config file).

auditkit calls ``make_data()`` with no arguments; it returns a pair (train, test) of torch Datasets whose items are
(image, label): a float C x H x W tensor with values in [0, 1] and an int class label (or an ``auditkit.data.Dataset``).
This one is scikit-learn's bundled handwritten digits (1,797 8x8 images, no download), scaled to [0, 1], split
4 : 1 with a fixed seed.
"""
from __future__ import annotations

import torch
from sklearn.datasets import load_digits
from torch.utils.data import TensorDataset


def make_data() -> tuple[TensorDataset, TensorDataset]:
    """The digits as 1 x 8 x 8 float images (pixel value / 16) and their labels 0..9, 80 % train and 20 % test."""
    digits = load_digits()
    images = torch.tensor(digits.images, dtype=torch.float32).unsqueeze(1) / 16.0
    labels = torch.tensor(digits.target, dtype=torch.int64)
    order = torch.randperm(len(labels), generator=torch.Generator().manual_seed(0))
    cut = len(labels) * 4 // 5
    train, test = order[:cut], order[cut:]
    return TensorDataset(images[train], labels[train]), TensorDataset(images[test], labels[test])
