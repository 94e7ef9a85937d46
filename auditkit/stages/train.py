"""From a validated config to results: data, model, mechanism, FL training, the results document of a run.

`run_training` is what ``auditkit train`` does; the audit pipeline (``auditkit.audit``) runs it
once per mechanism setting and adds the accounting, attack and reporting stages.
"""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from auditkit import mechanisms
from auditkit import results
from auditkit.config import AuditConfig, ConfigError
from auditkit.data import Split, load_dataset, partition, train_validation_split
from auditkit.fl.aggregation import build_protocol as fl_build_protocol
from auditkit.fl.memory import check_memory
from auditkit.mechanisms.protocol import ProtocolContext, RoundProtocol
from auditkit.fl.simulation import FederatedData, FederatedSimulation, RoundRecord, SimulationResult
from auditkit.models import create_model
from auditkit.stages.account import account_run
from auditkit.mechanisms.randomness import derive_seed



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


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when present, else CPU; an unavailable CUDA request is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} is not available on this machine; use auto or cpu")
    return torch.device(name)


def prepare_data(config: AuditConfig) -> tuple[FederatedData, tuple[int, int, int], int, dict[str, Any]]:
    """Load the dataset, take its validation split (fixed by the dataset, or carved off the training split with
    ``data.validation_fraction``), partition the training split across clients. With ``[dp_sgd]`` every client
    must hold at least ``training.batch_size`` examples (its sampling rate B / n_k is a probability): a
    ConfigError says so otherwise, before anything is written."""
    d = config.data
    dataset = load_dataset(d.dataset, data_dir=d.data_dir, download=d.download)
    if dataset.validation is not None:  # fixed by the dataset's definition (mnist-5k): validation_fraction unused
        train, validation = dataset.train, dataset.validation
    else:
        train_ix, val_ix = train_validation_split(
            len(dataset.train.y), d.validation_fraction, seed=derive_seed(config.seed, "validation-split")
        )
        train_ix, val_ix = torch.as_tensor(train_ix), torch.as_tensor(val_ix)
        train = Split(dataset.train.x[train_ix], dataset.train.y[train_ix])
        validation = Split(dataset.train.x[val_ix], dataset.train.y[val_ix])
    clients = config.training.clients
    if clients > len(train.y):
        raise ConfigError(f"training.clients must be at most the {len(train.y)} training samples, got {clients}")
    parts = partition(
        train.y, clients, d.partition, seed=derive_seed(config.seed, "partition") % 2**32,
        alpha=d.dirichlet_alpha,
    )
    indices = [torch.as_tensor(np.asarray(p), dtype=torch.long) for p in parts]
    smallest = min(len(ix) for ix in indices)
    if config.dp_sgd.enabled and config.training.batch_size > smallest:
        raise ConfigError(f"dp_sgd needs training.batch_size <= the smallest client's example count ({smallest}); "
                          f"got {config.training.batch_size}")
    summary = {
        "dataset": d.dataset, "source": dataset.source, "partition": d.partition, "train": len(train.y),
        "validation": len(validation.y), "test": len(dataset.test.y),
        "client_sizes": [len(ix) for ix in indices], "classes": dataset.num_classes,
    }
    return FederatedData(train, validation, dataset.test, indices), dataset.input_shape, dataset.num_classes, summary


def client_mechanism(name: str, seed: int, params: dict[str, Any]) -> mechanisms.Mechanism:
    """The registered mechanism ``name`` with ``params``, its client-private randomness keyed by the run's ``seed``
    (``derive_seed(seed, "client-private")``): the one keying of every run, auditkit's own and a Flower app's, so
    that the same seed sends the same bits."""
    return mechanisms.create(name, private_seed=derive_seed(seed, "client-private"), **params)


def build_mechanism(config: AuditConfig) -> mechanisms.Mechanism:
    """The configured mechanism, keyed by the config's seed (``client_mechanism``)."""
    return client_mechanism(config.mechanism.name, config.seed, config.mechanism.params)


def build_protocol(mechanism: mechanisms.Mechanism, config: AuditConfig) -> RoundProtocol:
    """How the clients' updates reach the server for ``mechanism`` in the run ``config`` describes: its registered
    round protocol (``auditkit.fl.aggregation.build_protocol``) with the setting's options for it and the config
    table it owns, or one encoded upload per client."""
    context = protocol_context(mechanism, config)
    try:
        return fl_build_protocol(mechanism, context)
    except ValueError as err:
        where = protocol_table_name(mechanism)
        raise ConfigError(f"[{where}]: {err}" if where else f"{mechanism.name}: {err}") from None


def protocol_context(mechanism: mechanisms.Mechanism, config: AuditConfig) -> ProtocolContext:
    """The seed, client count, options and config table the run's protocol is built with."""
    table, t = protocol_table_name(mechanism), config.training
    return ProtocolContext(seed=config.seed, clients=t.clients, options=dict(config.mechanism.protocol_options),
                           table=config.tables.get(table), participation=t.participation,
                           sample_rate=t.sample_rate, clients_per_round=t.clients_per_round)


def protocol_table_name(mechanism: mechanisms.Mechanism) -> str | None:
    """The config table the mechanism's round protocol owns (None: none)."""
    if mechanism.protocol is None:
        return None
    return mechanisms.protocol_class(mechanism.protocol).table


def client_spec(config: AuditConfig) -> dict[str, Any]:
    """The config as plain data a client process rebuilds its side from (``auditkit.flower``): paths made absolute,
    since Ray's workers may run elsewhere."""
    spec = config.to_dict()
    spec["plugins"] = [str(Path(p).resolve()) if p.endswith(".py") else p for p in config.plugins]
    if config.data.data_dir is not None:
        spec["data"]["data_dir"] = str(Path(config.data.data_dir).resolve())
    return spec


class Experiment:
    """A config turned into ready-to-run objects: device, mechanism, data, model, simulation.

    Building it does every check that can fail on user input (device, mechanism parameters,
    dataset files, the run's estimated memory: ``auditkit.fl.memory``), so nothing starts, and nothing is written,
    before the input is known good.
    """

    def __init__(self, config: AuditConfig) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        self.mechanism = build_mechanism(config)
        data, input_shape, num_classes, self.data_summary = prepare_data(config)
        model = create_model(config.training.model, input_shape=input_shape, num_classes=num_classes)
        self.memory = check_memory(config, model, data)  # above the memory limit: refused before any allocation
        protocol = build_protocol(self.mechanism, config)
        if config.training.backend == "flower":
            from auditkit.flower.backend import FlowerSimulation

            self.simulation = FlowerSimulation(model, data, protocol, config.training, seed=config.seed,
                                               device=self.device, dp_sgd=config.dp_sgd, flower=config.flower,
                                               spec=client_spec(config))
        else:
            self.simulation = FederatedSimulation(model, data, protocol, config.training, seed=config.seed,
                                                  device=self.device, dp_sgd=config.dp_sgd)

    def train(self, on_round: Callable[[RoundRecord], None] | None = None) -> TrainingRun:
        """Run FedAvg with the configured mechanism between clients and server."""
        start = time.perf_counter()
        result = self.simulation.run(on_round)
        return TrainingRun(self.config, result, self.mechanism, self.device, time.perf_counter() - start,
                           self.data_summary, self.simulation.protocol.name)


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
    sampling: str | None = None, backend: str | None = None,
) -> dict[str, Any]:
    """The provenance's data, model and training blocks from ``config``'s training table; what a run knows
    better -- the rounds it ran, how its batches were drawn, where it trained -- is given, else the config's."""
    t = config.training
    if sampling is None and config.dp_sgd.enabled:
        sampling = (f"DP-SGD: each of the tau = {t.tau} local steps takes each of the client's n_k examples with "
                    f"probability {t.batch_size} / n_k (Poisson, expected batch {t.batch_size}), clips each "
                    f"example's gradient to {config.dp_sgd.max_grad_norm:g} and adds Gaussian noise of multiplier "
                    f"{config.dp_sgd.noise_multiplier:g}; participation: {t.participation}")
    elif sampling is None:
        sampling = (f"each of the tau = {t.tau} local steps draws {t.batch_size} sample(s) uniformly with "
                    f"replacement from the client's data; participation: {t.participation}")
    return {
        "data": data,
        "model": {"name": t.model, "num_params": num_params},
        "training": {"clients": t.clients, "rounds": t.rounds if rounds is None else rounds, "tau": t.tau,
                     "batch_size": t.batch_size, "lr": t.lr, "participation": t.participation,
                     "sampling": sampling, "backend": backend_label(t.backend) if backend is None else backend},
    }


def data_provenance(run: TrainingRun) -> dict[str, Any]:
    """The provenance's data, model and training blocks of a finished run (``training_provenance``)."""
    return training_provenance(run.config, run.data_summary, run.result.num_params)


def results_document(run: TrainingRun, title: str) -> dict[str, Any]:
    """What ``auditkit train`` writes: one setting with its training and accounting sections (schema v3)."""
    entry = results.setting("s00", run.config.mechanism.display, run.mechanism,
                            training=results.training_entry(run.result, run.protocol), accounting=account_run(run))
    provenance = results.provenance(seed=run.config.seed, device=str(run.device), settings=[entry],
                                    **data_provenance(run))
    return results.document("train", title, run.config.to_dict(), provenance, [entry])
