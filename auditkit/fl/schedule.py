"""Learning-rate schedules of the seed papers: halve the rate when validation stops improving (CEPAM), or
decay it as lr / t (MSP-FL)."""
from __future__ import annotations

import math


class PlateauSchedule:
    """Multiply the learning rate by `factor` after `patience` rounds without a new best
    validation loss (CEPAM: lr 0.01, halved after 10 rounds without improvement).

    `patience = 0` disables the schedule.
    """

    def __init__(self, lr: float, *, patience: int = 10, factor: float = 0.5) -> None:
        self.lr = lr
        self.patience = patience
        self.factor = factor
        self.best = math.inf
        self.stale = 0

    def step(self, validation_loss: float) -> float:
        """Record this round's validation loss; return the learning rate for the next round."""
        if validation_loss < self.best:
            self.best, self.stale = validation_loss, 0
        else:
            self.stale += 1
        if self.patience and self.stale >= self.patience:
            self.lr *= self.factor
            self.stale = 0
        return self.lr


class InverseSchedule:
    """lr / t in round t = 1, 2, ... (MSP-FL, paper 004: eta_t = 1/(5(t+1)) with t from 0, i.e. lr = 0.2).
    ``step`` ignores the validation loss."""

    def __init__(self, lr: float) -> None:
        self.base = lr
        self.round = 1
        self.lr = lr

    def step(self, validation_loss: float) -> float:
        """Advance one round; return the learning rate for the next round."""
        del validation_loss
        self.round += 1
        self.lr = self.base / self.round
        return self.lr


LR_SCHEDULES = ("plateau", "inverse")


def make_schedule(name: str, lr: float, *, patience: int, factor: float) -> PlateauSchedule | InverseSchedule:
    """The schedule ``name`` (one of :data:`LR_SCHEDULES`) starting at ``lr``."""
    if name == "inverse":
        return InverseSchedule(lr)
    return PlateauSchedule(lr, patience=patience, factor=factor)
