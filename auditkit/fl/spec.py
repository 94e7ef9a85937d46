"""What the FL engine needs to run: its own small run specification, not the user config.

``auditkit.fl`` (and ``auditkit.flower``'s engine parts) sit below the audit's stages and ``auditkit.config``
(docs/guide/layout.md, "Layers"), and the engine reads nothing but these specs. They are defined once, here: the
user config's ``[training]`` table (``auditkit.config.TrainingConfig``) is a :class:`TrainingSpec` plus the model
and the engine that runs it, and its ``[dp_sgd]`` table is a :class:`DPSGDSpec`.
"""
from __future__ import annotations

import enum
from dataclasses import dataclass, field

__all__ = ["BNStats", "ClientMode", "DPSGDSpec", "Optimizer", "OptimizerState", "Precision", "TrainingSpec"]


class Optimizer(enum.StrEnum):
    """The clients' local optimiser, with PyTorch's semantics (``auditkit.fl.optimizers``)."""

    SGD = "sgd"  # torch.optim.SGD: momentum (dampening 0, no Nesterov), L2 weight decay
    ADAM = "adam"  # torch.optim.Adam: betas (0.9, 0.999), eps 1e-8, L2 weight decay (not AdamW)


class OptimizerState(enum.StrEnum):
    """What a client's optimiser state (momentum, Adam's moments) does between the rounds it takes part in."""

    KEPT = "kept"  # carried over to the client's next round (K x P per slot, the papers' CEPAM runs)
    RESET = "reset"  # a fresh optimiser every round, as Flower's and most FL clients build one in fit()


class ClientMode(enum.StrEnum):
    """The mode the clients' model trains in: BatchNorm on the batch's statistics and dropout on (``train``), or
    BatchNorm on the global running statistics and dropout off (``eval``)."""

    TRAIN = "train"
    EVAL = "eval"


class Normalisation(enum.StrEnum):
    """How an attacked model's BatchNorm normalises the attacker's dummy images (and the probe clients' batches):
    by their own batch statistics, as clients in ``train`` mode do; by the global running statistics, as clients in
    ``eval`` mode do; or by the running statistics although the clients ran in ``train`` mode, where one image has
    a single value per channel at some BatchNorm (a 1x1 feature map), whose batch statistics are undefined."""

    BATCH = "batch statistics"
    RUNNING = "running statistics"
    RUNNING_ONE_VALUE = "running statistics (one image has a single value per channel at a 1x1 BatchNorm)"


class BNStats(enum.StrEnum):
    """What happens to the clients' BatchNorm running statistics after a round (buffers, never through the
    mechanism)."""

    AVERAGED = "averaged"  # the server averages them with the FedAvg weights, in the clear, and broadcasts them
    LOCAL = "local"  # each client keeps its own (FedBN, Li et al. 2021); the server never receives them


class Precision(enum.StrEnum):
    """The arithmetic of the clients' forward and backward passes."""

    FP32 = "fp32"
    BF16 = "bf16"  # torch.autocast to bfloat16; parameters, optimiser state and updates stay float32


@dataclass(frozen=True)
class TrainingSpec:
    """FedAvg's run: clients, rounds, local steps (``tau`` steps, or ``local_epochs`` passes over each client's
    data), optimiser, learning-rate schedules (client and server), participation, the rounds whose views are
    recorded, and how clients train (``auditkit.fl.local_training``): batched over ``client_chunk`` clients at a
    time (None: sized to memory), in train or eval mode, at fp32 or bf16; ``recompute_activations`` (with
    ``batched = false``): activation checkpointing, each block's activations recomputed in the backward pass."""

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
    local_epochs: int | None = None  # set: E passes over the client's data in shuffled batches instead of tau steps
    optimizer: Optimizer = Optimizer.SGD
    weight_decay: float = 0.0
    optimizer_state: OptimizerState = OptimizerState.KEPT
    server_lr: float = 1.0  # w <- w + server_lr * aggregate
    client_mode: ClientMode = ClientMode.TRAIN
    bn_stats: BNStats = BNStats.AVERAGED
    precision: Precision = Precision.FP32
    client_chunk: int | None = None
    recompute_activations: bool = False


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
