"""The ``train`` stage: from a validated config to a trained FL run, its results and the views later stages attack.

`run_training` is what ``auditkit train`` does; the audit's train stage (``train_stage``) runs it once per
mechanism setting and keeps the server view of the inversion round and the probe round's global model.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from auditkit import results
from auditkit.config import AuditConfig
from auditkit.fl.memory import check_memory
from auditkit.fl.simulation import FederatedSimulation, Observation, RoundRecord, SimulationResult
from auditkit.models import build_model
from auditkit.stages.account import account_run
from auditkit.stages.base import StageOutput
from auditkit.stages.inversion import RecordedView
from auditkit.stages.setting import (build_mechanism, build_protocol, client_spec, flower_client_setup, prepare_data,
                                    resolve_device)
from auditkit.flower.backend import FlowerSimulation


@dataclass
class TrainingRun:
    """A finished FL run and the objects that produced it (``protocol``: the round protocol's name)."""

    config: AuditConfig
    result: SimulationResult
    mechanism: Any
    device: torch.device
    seconds: float
    data_summary: dict[str, Any]
    protocol: str
    client_chunk: int | None = None  # clients trained as one batched program (None: Flower's clients, one each)
    batchnorm: bool = False  # the model has running statistics (``training.bn_stats`` applies)


class Experiment:
    """A config turned into ready-to-run objects: device, mechanism, data, model, simulation.

    Building it does every check that can fail on user input (device, mechanism parameters,
    dataset files, the run's estimated memory: ``auditkit.fl.memory``), so nothing starts, and nothing is written,
    before the input is known good.
    """

    def __init__(self, config: AuditConfig, kept_rows: int | None = None) -> None:
        """``kept_rows``: the clients of each checkpoint round whose rows the caller keeps past the round (None:
        every client's; the memory check counts that many, ``auditkit.fl.memory.estimate_memory``)."""
        self.config = config
        self.device = resolve_device(config.device)
        self.mechanism = build_mechanism(config)
        data, input_shape, num_classes, self.data_summary = prepare_data(config)
        self.num_classes = num_classes  # the attacks' models are built for it (auditkit.stages.inversion)
        model = build_model(config.training, input_shape, num_classes, dp_sgd=config.dp_sgd.enabled)
        self.model = model  # the configured model, whose layers the audit's attacks are checked against
        self.memory = check_memory(config, model, data, self.device, kept_rows)  # above the memory limit: refused before any allocation
        protocol = build_protocol(self.mechanism, config)
        if config.training.backend == "flower":
            self.simulation = FlowerSimulation(model, data, protocol, config.training, seed=config.seed,
                                               device=self.device, dp_sgd=config.dp_sgd, flower=config.flower,
                                               spec=client_spec(config), client_setup=flower_client_setup)
        else:
            self.simulation = FederatedSimulation(model, data, protocol, config.training, seed=config.seed,
                                                  device=self.device, dp_sgd=config.dp_sgd)

    def train(self, on_round: Callable[[RoundRecord], None] | None = None,
              on_checkpoint: Callable[[Observation], None] | None = None) -> TrainingRun:
        """Run FedAvg with the configured mechanism between clients and server (``on_checkpoint``:
        ``FederatedSimulation.run``'s)."""
        start = time.perf_counter()
        result = self.simulation.run(on_round, on_checkpoint)
        return TrainingRun(self.config, result, self.mechanism, self.device, time.perf_counter() - start,
                           self.data_summary, self.simulation.protocol.name,
                           client_chunk=(None if self.config.training.backend == "flower" else
                                         min(self.simulation.chunk, self.config.training.clients)),
                           batchnorm=bool(self.simulation.buffers))


def run_training(
    config: AuditConfig, *, on_round: Callable[[RoundRecord], None] | None = None
) -> TrainingRun:
    """What ``auditkit train`` does: build the experiment and train it."""
    return Experiment(config).train(on_round)


def backend_label(backend: str) -> str:
    """The training backend as the provenance states it, with Flower's and Ray's versions on ``flower``."""
    if backend != "flower":
        return "builtin (auditkit's batched simulator)"
    from importlib import metadata

    return f"flower (Flower {metadata.version('flwr')} Simulation Engine, Ray {metadata.version('ray')})"


def training_provenance(
    config: AuditConfig, data: dict[str, Any], num_params: int, *, rounds: int | None = None,
    sampling: str | None = None, backend: str | None = None, local: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The provenance's data, model and training blocks from ``config``'s training table; what a run knows
    better -- the rounds it ran, how its batches were drawn, where it trained, how its clients trained
    (``local_training``) -- is given, else the config's."""
    t = config.training
    if sampling is None and config.dp_sgd.enabled:
        sampling = (f"DP-SGD: each of the tau = {t.tau} local steps takes each of the client's n_k examples with "
                    f"probability {t.batch_size} / n_k (Poisson, expected batch {t.batch_size}), clips each "
                    f"example's gradient to {config.dp_sgd.max_grad_norm:g} and adds Gaussian noise of multiplier "
                    f"{config.dp_sgd.noise_multiplier:g}; participation: {t.participation}")
    elif sampling is None and t.local_epochs is not None:
        epochs = "the local epoch" if t.local_epochs == 1 else f"each of the {t.local_epochs} local epochs"
        sampling = (f"{epochs} shuffles the client's n_k examples into "
                    f"ceil(n_k / {t.batch_size}) batches of {t.batch_size} (the last filled up from the same "
                    f"shuffle); participation: {t.participation}")
    elif sampling is None:
        sampling = (f"each of the tau = {t.tau} local steps draws {t.batch_size} sample(s) uniformly with "
                    f"replacement from the client's data; participation: {t.participation}")
    return {
        "data": data,
        "model": {"name": t.model, "num_params": num_params},
        "training": {"clients": t.clients, "rounds": t.rounds if rounds is None else rounds, "tau": t.tau,
                     "batch_size": t.batch_size, "lr": t.lr, "participation": t.participation,
                     "sampling": sampling, "backend": backend_label(t.backend) if backend is None else backend,
                     **(local or {})},
    }


def local_training(config: AuditConfig, *, client_chunk: int | None, batchnorm: bool) -> dict[str, Any]:
    """How the clients of a run of ``config`` trained, as the provenance's training block records it."""
    t = config.training
    described = {"local_epochs": t.local_epochs, "optimizer": t.optimizer.value,
                 "momentum": t.momentum if t.optimizer == "sgd" else None, "weight_decay": t.weight_decay,
                 "optimizer_state": t.optimizer_state.value, "server_lr": t.server_lr,
                 "client_mode": t.client_mode.value, "bn_stats": t.bn_stats.value if batchnorm else None,
                 "precision": t.precision.value, "client_chunk": client_chunk,
                 "recompute_activations": True if t.recompute_activations else None}
    return {key: value for key, value in described.items() if value is not None}


def data_provenance(run: TrainingRun) -> dict[str, Any]:
    """The provenance's data, model and training blocks of a finished run (``training_provenance``)."""
    return training_provenance(run.config, run.data_summary, run.result.num_params,
                               local=local_training(run.config, client_chunk=run.client_chunk,
                                                    batchnorm=run.batchnorm))


def results_document(run: TrainingRun, title: str) -> dict[str, Any]:
    """What ``auditkit train`` writes: one setting with its training and accounting sections (``auditkit.results.model``)."""
    entry = results.setting("s00", run.config.mechanism.display, run.mechanism,
                            training=results.training_entry(run.result, run.protocol), accounting=account_run(run))
    provenance = results.provenance(seed=run.config.seed, device=str(run.device), settings=[entry],
                                    **data_provenance(run))
    return results.document("train", title, run.config.to_dict(), provenance, [entry])


def training_inputs(config: AuditConfig) -> dict[str, Any]:
    """The config as the train stage's key sees it: all but the tables that only later stages read."""
    return {k: v for k, v in config.to_dict().items() if k not in ("accounting", "inversion", "distinguish", "title")}


def audit_experiment(config: AuditConfig) -> Experiment:
    """The experiment of the audit's train stage, its memory checked for the rows it keeps of a checkpoint: the
    inversion's targets (``train_stage``)."""
    return Experiment(config, kept_rows=config.inversion.targets if config.inversion.enabled else 0)


def train_stage(config: AuditConfig, *, on_round: Callable[[RoundRecord], None] | None = None) -> StageOutput:
    """The audit's train stage for one setting: the results' training section, the run's device and provenance, and
    the tensors later stages read: the ``server`` view of the inversion round (``RecordedView``) and the global
    model and learning rate of the probe round, each taken as its round ends (the rest of the round's views is
    not held while training goes on)."""
    experiment = audit_experiment(config)
    tensors: dict[str, Any] = {}

    def keep(observation: Observation) -> None:
        if observation.round == config.checkpoint_round and config.inversion.enabled:
            tensors["view"] = RecordedView.from_observation(observation, experiment.simulation.data.train.x.cpu(),
                                                            config.inversion.targets, experiment.simulation.protocol.name,
                                                            config.training.client_mode).to_tensors()
        if observation.round == config.probe_round:
            tensors["probe"] = {"round": observation.round, "lr": observation.lr,
                                "weights": observation.global_before.detach().float().cpu().clone(),
                                "buffers": observation.global_buffers}

    run = experiment.train(on_round, keep)
    observed = config.checkpoint_round in run.result.checkpoints
    result = {"training": results.training_entry(run.result, run.protocol), "device": str(run.device),
              "provenance": data_provenance(run), "inversion_round": config.checkpoint_round if observed else None}
    return StageOutput(result, tensors=tensors or None)
