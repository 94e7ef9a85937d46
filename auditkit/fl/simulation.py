"""The FedAvg training loop with a mechanism between clients and server.

Per round t:
  1. select clients (full / uniform / Poisson participation),
  2. local training from the global model: tau steps or local_epochs passes, SGD or Adam, in train or eval
     mode (batched over clients with `torch.func`, or the sequential reference path),
  3. the round protocol: x_k = w_k - w_global (the trained parameters, ``auditkit.fl.params``; frozen ones
     are never sent) is encoded with the shared seed keyed by (k, t),
     the real bytes are decoded at the server and aggregated (FedAvg by default),
  4. w_global <- w_global + server_lr * aggregate; BatchNorm running statistics averaged (FedAvg weights, in
     the clear, beside the mechanism) or kept by each client (FedBN); evaluate on validation and test data,
  5. halve the learning rate on a validation plateau,
  6. at checkpoint rounds, record what each threat-model view saw.

Everything random is drawn from streams keyed by (seed, purpose, round, client), so one config
and seed give the same numbers, whichever path (batched or sequential) trains the clients.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn
from torch.func import functional_call

from auditkit.data import Split
from auditkit.mechanisms.protocol import RoundOutcome, RoundProtocol, selects_clients
from auditkit.fl.dp_sgd import DPSGD
from auditkit.fl.local_training import (LocalResult, LocalSteps, LocalTraining, local_batches, train_clients_batched,
                                        train_clients_sequential)
from auditkit.fl.memory import client_chunk
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.params import ParamLayout, flat_parameters, frozen_parameters
from auditkit.fl.sampling import select_clients
from auditkit.fl.schedule import make_schedule
from auditkit.fl.snr import mean_snr
from auditkit.fl.spec import BNStats, DPSGDSpec, OptimizerState, TrainingSpec
from auditkit.mechanisms.randomness import derive_seed
from auditkit.mechanisms import View

VIEWS = (View.SERVER, View.EAVESDROPPER, View.PEER, View.PUBLIC)


class TrainingDiverged(ValueError):
    """The global model left the finite numbers: the run cannot go on (the message says what to change)."""


def check_finite(updates: torch.Tensor, round_: int) -> None:
    """Stop the run with `TrainingDiverged` when local training gave non-finite updates."""
    if not torch.isfinite(updates).all():
        raise TrainingDiverged(
            f"training diverged in round {round_}: local training from the global model gave non-finite "
            "updates (the mechanism's noise is too large for this model and learning rate; lower the noise, "
            "the clip or training.lr)")


@dataclass
class FederatedData:
    """Training data split across clients, plus validation and test data (on one device)."""

    train: Split
    validation: Split
    test: Split
    client_indices: list[torch.Tensor]  # indices into `train`, one tensor per client

    def to(self, device: torch.device) -> "FederatedData":
        move = lambda s: Split(s.x.to(device), s.y.to(device))  # noqa: E731
        return FederatedData(move(self.train), move(self.validation), move(self.test), self.client_indices)


@dataclass
class RoundRecord:
    """Metrics of one round (what `auditkit train` prints and results.json stores)."""

    round: int
    lr: float
    clients: list[int]
    train_loss: float
    validation_loss: float
    validation_accuracy: float
    test_loss: float
    test_accuracy: float
    bits: list[int]
    bits_per_coordinate: float
    stats: dict[str, float] = field(default_factory=dict)


@dataclass
class Observation:
    """What each adversary saw in one checkpoint round, with the ground truth for scoring attacks.

    ``views['server']`` holds the decoded updates (S, P), ``views['eavesdropper']`` the raw
    messages, ``views['peer']`` the next global model. ``ground_truth`` holds what no adversary
    sees: the true updates and the training-sample indices of every local step.
    """

    round: int
    clients: list[int]
    global_before: torch.Tensor
    lr: float
    tau: int
    batch_size: int
    views: dict[str, object]
    ground_truth: dict[str, torch.Tensor]
    global_buffers: dict[str, torch.Tensor] = field(default_factory=dict)  # the model's buffers the clients received


@dataclass
class RoundStart:
    """A round before local training (``FederatedSimulation.begin_round``): its learning rate, the clients taking
    part, the global parameters and buffers they start from, their batches (S, T, B), and the statistics of a
    central-noise release when nobody took part."""

    round: int
    lr: float
    clients: list[int]
    before: torch.Tensor
    buffers: dict[str, torch.Tensor]
    batches: torch.Tensor | None = None
    stats: dict[str, float] = field(default_factory=dict)


@dataclass
class SimulationResult:
    rounds: list[RoundRecord]
    final_params: torch.Tensor  # the `public` view
    observations: list[Observation]  # none where the run handed them to ``on_checkpoint``
    num_params: int
    checkpoints: list[int] = field(default_factory=list)  # the rounds observed


class FederatedSimulation:
    """FedAvg with a pluggable round protocol.

    Args:
        model: the architecture; its initial trained weights are re-drawn from the seed, its frozen parameters
            (``requires_grad=False``) keep the values it holds for the whole run, on the server and every client:
            they are never trained or sent (the update is the trained parameters, ``auditkit.fl.params``).
        data: the federated data (see `FederatedData`).
        protocol: client -> server communication (e.g. `UplinkProtocol(mechanism, seed)`).
        training: the run's specification (``auditkit.fl.spec.TrainingSpec``).
        seed: the experiment seed.
        device: where the tensors live.
        dp_sgd: the clients train with example-level DP-SGD (``auditkit.fl.dp_sgd``) on Poisson batches of
            expected size ``training.batch_size`` when it is enabled; None or disabled: plain SGD.
    """

    def __init__(
        self,
        model: nn.Module,
        data: FederatedData,
        protocol: RoundProtocol,
        training: TrainingSpec,
        *,
        seed: int,
        device: torch.device | str = "cpu",
        dp_sgd: DPSGDSpec | None = None,
    ) -> None:
        self.device = torch.device(device)
        self.dp_sgd = dp_sgd
        self._private: DPSGD | None = None  # the DP-SGD settings of the round's batches (``_draw_batches``)
        self.training = training
        self.seed = seed
        self.protocol = protocol
        self.data = data.to(self.device)
        layout = ParamLayout.of(model)  # before anything is drawn: a model with nothing to train is refused
        frozen = [(p, p.detach().clone()) for _, p in frozen_parameters(model)]
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(derive_seed(seed, "model-init"))
            for module in model.modules():
                if hasattr(module, "reset_parameters") and module is not model:
                    module.reset_parameters()
        with torch.no_grad():
            for p, value in frozen:  # a frozen parameter is the user's (a pretrained backbone): not re-drawn
                p.copy_(value)
        self.model = model.to(self.device)
        self.layout = layout
        self.params = flat_parameters(self.model).to(self.device)
        self.buffers = {name: b.detach().clone() for name, b in self.model.named_buffers()}
        self.client_state = (self._optimizer(training.lr).initial_state(training.clients, self.layout.size,
                                                                        device=self.device)
                             if training.optimizer_state == OptimizerState.KEPT else None)
        self.client_buffers = ({name: b.expand(training.clients, *b.shape).clone() for name, b in self.buffers.items()}
                               if training.bn_stats == BNStats.LOCAL and self.buffers else None)
        self._active: torch.Tensor | None = None  # the steps each client of the round takes (``_draw_batches``)
        self.chunk = training.client_chunk or client_chunk(self.model, data.train.x.shape[1:], training.batch_size,
                                                           self.device)
        sizes = torch.tensor([len(ix) for ix in data.client_indices], dtype=torch.float64)
        self.client_weights = sizes if training.client_weights == "data" else torch.ones_like(sizes)
        self.schedule = make_schedule(training.lr_schedule, training.lr, patience=training.lr_patience,
                                      factor=training.lr_factor)

    def run(self, on_round: Callable[[RoundRecord], None] | None = None,
            on_checkpoint: Callable[[Observation], None] | None = None) -> SimulationResult:
        """Train for `training.rounds` rounds; `on_round` is called after each (progress, tables). `on_checkpoint`,
        where given, is handed each checkpoint round's observation as the round ends and the run keeps none: a
        caller that needs a few clients' rows holds those, not the round's S x P views for the rest of the run."""
        records, observations, checkpoints = [], [], []
        for round_ in range(1, self.training.rounds + 1):
            record, observation = self.step(round_)
            records.append(record)
            if observation is not None:
                checkpoints.append(observation.round)
                if on_checkpoint is None:
                    observations.append(observation)
                else:
                    on_checkpoint(observation)
                del observation  # its views go before the next round's are built
            if on_round is not None:
                on_round(record)
        return SimulationResult(records, self.params.detach().cpu(), observations, self.layout.size, checkpoints)

    def step(self, round_: int) -> tuple[RoundRecord, Observation | None]:
        """One FL round; returns its metrics and, at a checkpoint, the observation."""
        start = self.begin_round(round_)
        exchanged = (self._exchange(start.clients, start.batches, start.lr, round_, start.before)
                     if start.clients else None)
        return self.end_round(start, exchanged)

    def begin_round(self, round_: int) -> RoundStart:
        """A round up to local training: who takes part and on which batches; a central-noise round with nobody
        sampled is released here."""
        t = self.training
        if selects_clients(self.protocol):  # a protocol that chooses who takes part
            clients = self.protocol.select_clients(round_)
        else:
            clients = select_clients(
                t.clients, round_, seed=self.seed, participation=t.participation,
                clients_per_round=t.clients_per_round, sample_rate=t.sample_rate,
            )
        start = RoundStart(round_, self.schedule.lr, clients, self.params.clone(), dict(self.buffers))
        if not clients and getattr(self.protocol, "releases_empty_rounds", False):
            # a central-noise round releases its noise even when nobody was sampled: skipping it would reveal n = 0
            empty = torch.zeros(0, self.layout.size, device=self.device)
            outcome = self.protocol.communicate(empty, [], self.client_weights[[]], round_, global_params=start.before)
            self.params = start.before + t.server_lr * outcome.aggregate.to(self.device, start.before.dtype)
            start.stats.update(outcome.stats)
        if clients:
            start.batches = self._draw_batches(clients, round_).to(self.device)
        return start

    def end_round(self, start: RoundStart, exchanged: tuple[torch.Tensor, torch.Tensor, RoundOutcome] | None
                  ) -> tuple[RoundRecord, Observation | None]:
        """The round after the exchange (true updates, losses, the protocol's outcome; None: nobody took part):
        the global step, the evaluation, the schedule, the checkpoint's observation."""
        t = self.training
        round_, clients, before = start.round, start.clients, start.before
        bits: list[int] = []
        stats = dict(start.stats)
        train_loss = float("nan")
        observation = None
        if exchanged is not None:
            updates, losses, outcome = exchanged
            self.params = before + t.server_lr * outcome.aggregate.to(self.device, before.dtype)
            bits, stats = outcome.bits, dict(outcome.stats)
            server = outcome.views.get(View.SERVER)
            if isinstance(server, torch.Tensor) and server.shape == updates.shape:  # one decoded update per client
                # the signal is what the mechanism receives (after its clipping): its noise, not the clip, is measured
                received = getattr(self.protocol, "received", None)
                signal = ((lambda k: updates[k]) if received is None else  # one client at a time: O(P) memory
                          (lambda k: received(updates[k:k + 1], clients[k:k + 1])[0]))
                stats["snr"] = mean_snr((signal(k).to(updates.device), server[k]) for k in range(len(clients)))
            train_loss = float(losses.mean())
            if round_ in t.checkpoints:
                views = dict(outcome.views)
                views[View.PEER] = self.params.detach().cpu().clone()
                observation = Observation(
                    round=round_, clients=clients, global_before=before.cpu(), lr=start.lr,
                    tau=start.batches.shape[1], batch_size=t.batch_size, views=views,
                    ground_truth={"updates": updates.detach().cpu(), "batch_indices": start.batches.cpu()},
                    global_buffers={k: v.detach().cpu().clone() for k, v in start.buffers.items()},
                )
        val_loss, val_acc = self.evaluate(self.data.validation)
        test_loss, test_acc = self.evaluate(self.data.test)
        self.schedule.step(val_loss if self.data.validation.y.numel() else test_loss)
        record = RoundRecord(
            round=round_, lr=start.lr, clients=clients, train_loss=train_loss,
            validation_loss=val_loss, validation_accuracy=val_acc,
            test_loss=test_loss, test_accuracy=test_acc, bits=bits,
            bits_per_coordinate=(sum(bits) / (len(bits) * self.layout.size)) if bits else 0.0,
            stats=stats,
        )
        return record, observation

    def _exchange(self, clients: list[int], batches: torch.Tensor, lr: float, round_: int,
                  before: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, RoundOutcome]:
        """Local training of ``clients`` from ``before`` and the round protocol: returns the true updates (S, P),
        the clients' mean training losses (S,) and the protocol's outcome. A backend whose clients run elsewhere
        (``auditkit.flower``) replaces this method and nothing else."""
        return self.deliver(clients, self._train_locally(clients, batches, lr, round_), round_, before)

    def deliver(self, clients: list[int], local: LocalResult, round_: int,
                before: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, RoundOutcome]:
        """The clients' local training results through the round protocol (the second half of ``_exchange``)."""
        self._keep_state(clients, local.state)
        self._keep_buffers(clients, local.buffers)
        updates = local.params.sub_(before)  # in place: a round's S x P once, not twice
        check_finite(updates, round_)
        outcome = self.protocol.communicate(updates, clients, self.client_weights[clients], round_,
                                            global_params=before)
        return updates, local.loss, outcome

    def _draw_batches(self, clients: list[int], round_: int) -> torch.Tensor:
        """Dataset indices (S, tau, B) of every local step of ``clients`` in round ``round_`` (``local_batches``);
        with DP-SGD the Poisson batches' mask and noise generators are kept for ``_train_locally``."""
        t = self.training
        batches, self._active, self._private = local_batches(
            self.data.client_indices, clients, round_, seed=self.seed, tau=t.tau, batch_size=t.batch_size,
            local_epochs=t.local_epochs, dp_sgd=self.dp_sgd)
        return batches

    def _optimizer(self, lr: float) -> LocalOptimizer:
        t = self.training
        return LocalOptimizer(t.optimizer, lr, t.momentum, t.weight_decay)

    def local_training(self, lr: float) -> LocalTraining:
        """How the clients train in a round of learning rate ``lr``."""
        t = self.training
        return LocalTraining(self._optimizer(lr), t.client_mode, t.precision, self.chunk, t.recompute_activations)

    def client_inputs(self, clients: list[int], batches: torch.Tensor
                      ) -> tuple[LocalSteps, dict[str, torch.Tensor] | None, dict[str, torch.Tensor]]:
        """What local training of ``clients`` on ``batches`` (``begin_round``'s) reads: their steps, their optimiser
        state (None: a fresh optimiser) and the buffers (the server's, or each client's (S, ...) under FedBN)."""
        steps = LocalSteps(self.data.train.x, self.data.train.y, batches, self._active)
        state = None if self.client_state is None else {k: v[clients] for k, v in self.client_state.items()}
        buffers = (self.buffers if self.client_buffers is None else
                   {k: v[clients] for k, v in self.client_buffers.items()})
        return steps, state, buffers

    def _train_locally(self, clients: list[int], batches: torch.Tensor, lr: float, round_: int) -> LocalResult:
        steps, state, buffers = self.client_inputs(clients, batches)
        train = train_clients_batched if self.training.batched else train_clients_sequential
        with torch.random.fork_rng(devices=[self.device] if self.device.type == "cuda" else []):
            torch.manual_seed(derive_seed(self.seed, "dropout", round_))  # only dropout draws from it
            return train(self.model, self.params, steps, self.local_training(lr), state=state, buffers=buffers,
                         dp_sgd=self._private)

    def _keep_state(self, clients: list[int], state: dict[str, torch.Tensor]) -> None:
        """The optimiser state the clients keep (``optimizer_state = kept``)."""
        if self.client_state is not None:
            for slot, value in state.items():
                self.client_state[slot][clients] = value

    def _keep_buffers(self, clients: list[int], buffers: dict[str, torch.Tensor]) -> None:
        """The clients' BatchNorm running statistics (S, ...) after the round: each client's own (``bn_stats =
        local``), or their FedAvg-weighted mean (``averaged``; a count such as ``num_batches_tracked``: the largest)."""
        if self.client_buffers is not None:
            for name, value in buffers.items():
                self.client_buffers[name][clients] = value.to(self.device)
            return
        weights = self.client_weights[clients].to(self.device, torch.float32)
        weights = weights / weights.sum()
        for name, value in buffers.items():
            value = value.to(self.device)
            if value.is_floating_point():
                self.buffers[name] = torch.einsum("s,s...->...", weights.to(value.dtype), value)
            else:
                self.buffers[name] = value.max(0).values

    def evaluation_buffers(self) -> dict[str, torch.Tensor]:
        """The buffers the global model is evaluated with: the server's, or under ``bn_stats = local`` the clients'
        running statistics averaged with the FedAvg weights (for the evaluation only; the server never holds them)."""
        if self.client_buffers is None:
            return self.buffers
        weights = (self.client_weights / self.client_weights.sum()).to(self.device, torch.float32)
        return {name: torch.einsum("k,k...->...", weights.to(v.dtype), v) if v.is_floating_point() else v.max(0).values
                for name, v in self.client_buffers.items()}

    @torch.no_grad()
    def evaluate(self, split: Split, batch_size: int = 4096) -> tuple[float, float]:
        """Mean cross-entropy and accuracy of the current global model on `split`."""
        if split.y.numel() == 0:
            return float("nan"), float("nan")
        self.model.eval()
        params = self.layout.unflatten(self.params)
        buffers = self.evaluation_buffers()
        loss_sum, correct = 0.0, 0
        for start in range(0, len(split.y), batch_size):
            x, y = split.x[start:start + batch_size], split.y[start:start + batch_size]
            logits = functional_call(self.model, (params, buffers), (x,))
            loss_sum += float(nn.functional.cross_entropy(logits, y, reduction="sum"))
            correct += int((logits.argmax(1) == y).sum())
        return loss_sum / len(split.y), correct / len(split.y)
