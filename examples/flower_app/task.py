"""The app's model, data and training: what a Flower user already has (here: MNIST digits and a small MLP).

The settings below are the app's; ``AUDITKIT_RECORD_DIR`` says where the audit's recording goes.
"""
from __future__ import annotations

import os

import torch
from torch import nn

from auditkit.data import load_dataset, partition
from auditkit.models import create_model

SEED = 0
NUM_CLIENTS = 10
ROUNDS = 5
LOCAL_STEPS = 10  # tau: SGD steps per round, one image each (the setting gradient inversion attacks)
LR = 0.05
MECHANISM = "jopeq-laplace"  # any registered mechanism: `auditkit mechanisms`
MECHANISM_PARAMS = {"eps": 10.0, "bits": 8}
RECORD_DIR = os.environ.get("AUDITKIT_RECORD_DIR", "recording")
RECORD_ROUNDS = (1,)
# the central-DP variant (run.py --dp): Flower's DifferentialPrivacyClientSideFixedClipping with fixedclipping_mod,
# every client every round, so Flower's num_sampled_clients is the realised count (its exact case)
DP_NOISE_MULTIPLIER = 1.0
DP_CLIP = 0.5

# what the audit needs to know about this app (auditkit config tables)
AUDIT_CONFIG = {
    "data": {"dataset": "mnist-5k", "partition": "iid"},
    "training": {"model": "mlp", "clients": NUM_CLIENTS, "rounds": ROUNDS, "tau": LOCAL_STEPS, "batch_size": 1,
                 "lr": LR, "momentum": 0.0, "participation": "uniform", "clients_per_round": NUM_CLIENTS // 2},
}

DP_AUDIT_CONFIG = {
    "data": AUDIT_CONFIG["data"],
    "training": {**{k: v for k, v in AUDIT_CONFIG["training"].items() if k != "clients_per_round"},
                 "participation": "full"},
}

_DATA = load_dataset("mnist-5k")


def make_model() -> nn.Module:
    return create_model("mlp", input_shape=_DATA.input_shape, num_classes=_DATA.num_classes)


def client_data(partition_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Client ``partition_id``'s share of the training digits (an iid split, the same on every node)."""
    parts = partition(_DATA.train.y, NUM_CLIENTS, "iid", seed=SEED)
    own = torch.as_tensor(parts[partition_id], dtype=torch.long)
    return _DATA.train.x[own], _DATA.train.y[own]


def train(model: nn.Module, x: torch.Tensor, y: torch.Tensor, generator: torch.Generator) -> tuple[float, torch.Tensor]:
    """LOCAL_STEPS steps of plain SGD, one random image each; the mean loss and the images used."""
    optimizer = torch.optim.SGD(model.parameters(), lr=LR)
    picks = torch.randint(len(y), (LOCAL_STEPS,), generator=generator)
    total = 0.0
    for i in picks:
        optimizer.zero_grad()
        loss = nn.functional.cross_entropy(model(x[i:i + 1]), y[i:i + 1])
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total / LOCAL_STEPS, x[picks]


@torch.no_grad()
def test(model: nn.Module) -> tuple[float, float]:
    """Loss and accuracy on the test digits."""
    logits = model(_DATA.test.x)
    return float(nn.functional.cross_entropy(logits, _DATA.test.y)), float((logits.argmax(1) == _DATA.test.y).float().mean())
