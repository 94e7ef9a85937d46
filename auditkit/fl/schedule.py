"""Learning-rate schedule of the seed papers: halve the rate when validation stops improving."""
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
