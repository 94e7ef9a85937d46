"""What the FL engine needs to run: its own small run specification, not the user config.

``auditkit.fl`` (and ``auditkit.flower``'s engine parts) sit below the audit's stages and ``auditkit.config``
(docs/guide/layout.md, "Layers"), and the engine reads nothing but these specs. They are defined once, here: the
user config's ``[training]`` table (``auditkit.config.TrainingConfig``) is a :class:`TrainingSpec` plus the model
and the engine that runs it, and its ``[dp_sgd]`` table is a :class:`DPSGDSpec`.
"""
from __future__ import annotations

from dataclasses import dataclass, field

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


@dataclass(frozen=True)
class DPSGDSpec:
    """Example-level DP-SGD inside every client's local training (Abadi et al. 2016, Alg. 1;
    ``auditkit.fl.dp_sgd``), the ``[dp_sgd]`` config table: each local step samples a Poisson batch of rate
    q_k = B / n_k (B = ``training.batch_size``, n_k the client's examples), clips each example's gradient to l2 norm
    C = ``max_grad_norm``, and steps along (sum_i clip_C(g_i) + N(0, (z C)^2 I)) / B with z = ``noise_multiplier``.
    Its claim (``accounting["example_level"]``) is about one example, composed over rounds x tau steps at the
    worst client's q_k; it is reported beside the uplink mechanism's client-level claim, never combined with it.
    ``noise_multiplier`` unset (or no ``[dp_sgd]`` table): DP-SGD is off. ``help``: the CLI flags' help."""

    noise_multiplier: float | None = field(default=None, metadata={
        "help": "DP-SGD in the clients: noise multiplier z, the Gaussian noise's std over max_grad_norm (unset: off)"})
    max_grad_norm: float = field(default=1.0, metadata={
        "help": "DP-SGD in the clients: the l2 norm C each example's gradient is clipped to"})

    @property
    def enabled(self) -> bool:
        """Whether the clients train with DP-SGD."""
        return self.noise_multiplier is not None
