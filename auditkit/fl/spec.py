"""What the FL engine needs to run: its own small run specification, not the user config.

``auditkit.fl`` (and ``auditkit.flower``'s engine parts) sit below the audit's stages and ``auditkit.config``
(docs/guide/layout.md, "Layers"): the stages build a :class:`TrainingSpec` and a :class:`DPSGDSpec` from the user
config (``auditkit.stages.train.training_spec``), and the engine reads nothing else. Both specs read their fields
by name from any object that has them (``of``), so a config section converts without this module knowing it.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

__all__ = ["DPSGDSpec", "TrainingSpec"]


@dataclass(frozen=True)
class TrainingSpec:
    """FedAvg's run: clients, rounds, local steps, optimiser, learning-rate schedule, participation, the rounds
    whose views are recorded, and whether clients train batched (``auditkit.fl.local_training``)."""

    clients: int = 10
    rounds: int = 60
    tau: int = 15
    batch_size: int = 1
    lr: float = 0.01
    momentum: float = 0.9
    lr_patience: int = 10
    lr_factor: float = 0.5
    lr_schedule: str = "plateau"
    participation: str = "full"
    clients_per_round: int | None = None
    sample_rate: float | None = None
    client_weights: str = "data"
    checkpoints: tuple[int, ...] = (1,)
    batched: bool = True

    @classmethod
    def of(cls, source: Any) -> TrainingSpec:
        """The spec with every field read by name from ``source`` (e.g. the user config's ``training`` section)."""
        if isinstance(source, cls):
            return source
        return cls(**{f.name: getattr(source, f.name) for f in fields(cls)})


@dataclass(frozen=True)
class DPSGDSpec:
    """Example-level DP-SGD in every client's local training (``auditkit.fl.dp_sgd``): noise multiplier z (None:
    off) and the l2 norm C each example's gradient is clipped to."""

    noise_multiplier: float | None = None
    max_grad_norm: float = 1.0

    @property
    def enabled(self) -> bool:
        """Whether the clients train with DP-SGD."""
        return self.noise_multiplier is not None

    @classmethod
    def of(cls, source: Any) -> DPSGDSpec | None:
        """The spec read by name from ``source`` (the user config's ``dp_sgd`` section), None for None."""
        if source is None or isinstance(source, cls):
            return source
        return cls(noise_multiplier=source.noise_multiplier, max_grad_norm=source.max_grad_norm)
