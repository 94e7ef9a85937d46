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
from auditkit.fl.aggregation import RoundProtocol, UplinkProtocol
from auditkit.fl.simulation import FederatedData, FederatedSimulation, RoundRecord, SimulationResult
from auditkit.models import create_model
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
    ``data.validation_fraction``), partition the training split across clients."""
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
    """How the clients' updates reach the server for ``mechanism``, as it declares:

    * ``round_protocol == "consensus"`` (MSP-FL's family): the splitting and consensus rounds
      (``auditkit.fl.consensus.ConsensusProtocol``), K_t + 1 uploads per round;
    * ``device_groups`` (``dpsq``, ``laplace-sq``) with a ``[groups]`` table: DP-SQ's device groups, clusters
      and fusion (``auditkit.fl.device_groups.DeviceGroupProtocol``);
    * anything else: one encoded upload per client, FedAvg at the server (``UplinkProtocol``); with a
      ``[groups]`` table, a mechanism without ``device_groups`` trains this way (``protocol_name`` says so).
    """
    if mechanism.round_protocol == "consensus":
        from auditkit.fl.consensus import ConsensusProtocol

        return ConsensusProtocol(mechanism, config.seed)
    from auditkit.fl.device_groups import DeviceGroupProtocol, DeviceGroups

    groups = config.groups
    if groups.enabled and mechanism.device_groups:

        setting = config.mechanism
        devices = DeviceGroups(sizes=groups.sizes, bits=groups.bits,
                               link_sigma=groups.link_sigma or tuple(0.0 for _ in groups.sizes))
        params = {k: v for k, v in mechanism.params.items() if k != "bits"}
        try:
            return DeviceGroupProtocol(
                mechanism.name, devices, seed=config.seed, params=params,
                cluster_sizes=setting.clusters or "random", total=groups.per_round, bandwidth=groups.bandwidth,
                fusion=setting.fusion or "central-cell",
            )
        except ValueError as err:
            raise ConfigError(f"[groups]: {err}") from None
    return UplinkProtocol(mechanism, config.seed)


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
    dataset files), so nothing starts, and nothing is written, before the input is known good.
    """

    def __init__(self, config: AuditConfig) -> None:
        self.config = config
        self.device = resolve_device(config.device)
        self.mechanism = build_mechanism(config)
        data, input_shape, num_classes, self.data_summary = prepare_data(config)
        model = create_model(config.training.model, input_shape=input_shape, num_classes=num_classes)
        protocol = build_protocol(self.mechanism, config)
        if config.training.backend == "flower":
            from auditkit.flower.backend import FlowerSimulation

            self.simulation = FlowerSimulation(model, data, protocol, config.training, seed=config.seed,
                                               device=self.device, flower=config.flower, spec=client_spec(config))
        else:
            self.simulation = FederatedSimulation(model, data, protocol, config.training, seed=config.seed,
                                                  device=self.device)

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
    if sampling is None:
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


def account_run(run: TrainingRun) -> dict[str, Any]:
    """The accounting section of a finished run: the client-level claim composed over the rounds run (every
    round counted, no amplification by client sampling) at the config's composition delta and backend."""
    a = run.config.accounting
    rounds = run.result.rounds[-1].round
    return results.accounting_entry(run.mechanism, rounds, composition_delta=a.composition_delta, backend=a.backend)


def results_document(run: TrainingRun, title: str) -> dict[str, Any]:
    """What ``auditkit train`` writes: one setting with its training and accounting sections (schema v3)."""
    entry = results.setting("s00", run.config.mechanism.display, run.mechanism,
                            training=results.training_entry(run.result, run.protocol), accounting=account_run(run))
    provenance = results.provenance(seed=run.config.seed, device=str(run.device), settings=[entry],
                                    **data_provenance(run))
    return results.document("train", title, run.config.to_dict(), provenance, [entry])


def prepare_output(out: str | Path) -> Path:
    """Check the output folder can be used, before any work starts."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {str(out)!r} is a file, not a folder")
    return out
