"""A setting's inputs, built from the user config: device, data, mechanism, round protocol, and the config as plain
data for a client process (``auditkit.flower``). Not a stage: what the stages and the training backends build on.
"""
from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import torch

from auditkit import mechanisms
from auditkit.config import AuditConfig, ConfigError
from auditkit.factories import parse_factory
from auditkit.data import Split, load_dataset, partition, train_validation_split
from auditkit.fl.aggregation import build_protocol as fl_build_protocol
from auditkit.fl.aggregation import client_mechanism
from auditkit.fl.simulation import FederatedData

from auditkit.mechanisms.protocol import ProtocolContext, RoundProtocol
from auditkit.mechanisms.randomness import derive_seed
from auditkit.config import from_dict
from auditkit.flower.backend import ClientSetup
from auditkit.models import build_model

__all__ = ["build_mechanism", "build_protocol", "client_mechanism", "client_spec", "flower_client_setup",
           "load_configured_dataset", "partition_parameters", "prepare_data", "protocol_context", "protocol_table_name",
           "resolve_device"]


def resolve_device(name: str) -> torch.device:
    """``auto`` -> CUDA when present, else CPU; an unavailable CUDA request is an error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise ConfigError(f"device {name!r} is not available on this machine; use auto or cpu")
    return torch.device(name)


def load_configured_dataset(config: AuditConfig, *, download: bool | None = None):
    """The dataset ``config.data`` names, with its folder, image size and (imagefolder) test split keyed by the
    config's seed; ``download``: the config's ``data.download`` unless given."""
    d = config.data
    return load_dataset(d.dataset, data_dir=d.data_dir, download=d.download if download is None else download,
                        seed=derive_seed(config.seed, "test-split"), test_fraction=d.test_fraction,
                        image_size=d.image_size)


def partition_parameters(config: AuditConfig) -> dict[str, Any]:
    """The parameters of the configured partition scheme, as the results record them: ``dirichlet_alpha`` for
    ``dirichlet``, ``shards_per_client`` for ``shards``, none for ``iid``."""
    d = config.data
    return {"dirichlet": {"dirichlet_alpha": d.dirichlet_alpha},
            "shards": {"shards_per_client": d.shards_per_client}}.get(d.partition, {})


def prepare_data(config: AuditConfig) -> tuple[FederatedData, tuple[int, int, int], int, dict[str, Any]]:
    """Load the dataset, take its validation split (fixed by the dataset, or carved off the training split with
    ``data.validation_fraction``), partition the training split across clients. With ``[dp_sgd]`` every client
    must hold at least ``training.batch_size`` examples (its sampling rate B / n_k is a probability): a
    ConfigError says so otherwise, before anything is written."""
    d = config.data
    dataset = load_configured_dataset(config)
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
    if d.partition == "shards" and clients * d.shards_per_client > len(train.y):
        raise ConfigError(f"data.shards_per_client must be at most the {len(train.y)} training samples / "
                          f"training.clients ({clients}), got {d.shards_per_client}")
    parts = partition(
        train.y, clients, d.partition, seed=derive_seed(config.seed, "partition") % 2**32,
        alpha=d.dirichlet_alpha, shards_per_client=d.shards_per_client,
    )
    indices = [torch.as_tensor(np.asarray(p), dtype=torch.long) for p in parts]
    smallest = min(len(ix) for ix in indices)
    if config.dp_sgd.enabled and config.training.batch_size > smallest:
        raise ConfigError(f"dp_sgd needs training.batch_size <= the smallest client's example count ({smallest}); "
                          f"got {config.training.batch_size}")
    summary = {
        "dataset": d.dataset, "source": dataset.source, "partition": d.partition, **partition_parameters(config),
        "train": len(train.y),
        "validation": len(validation.y), "test": len(dataset.test.y),
        "client_sizes": [len(ix) for ix in indices], "classes": dataset.num_classes,
    }
    return FederatedData(train, validation, dataset.test, indices), dataset.input_shape, dataset.num_classes, summary


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
    for table, key in (("training", "model"), ("data", "dataset")):  # a factory file, as a plugin's
        factory = parse_factory(spec[table][key])
        if factory is not None and factory.kind == "file":
            spec[table][key] = f"{Path(factory.target).resolve()}:{factory.function}"
    return spec


def flower_client_setup(spec: dict[str, Any]) -> Any:
    """What a Flower client process rebuilds from the run's ``spec`` (``client_spec``): the
    ``auditkit.flower.backend.ClientSetup`` the backend's ``ClientApp`` trains with."""
    config = from_dict(spec)
    data, input_shape, num_classes, _ = prepare_data(config)
    model = build_model(config.training, input_shape, num_classes, dp_sgd=config.dp_sgd.enabled)
    return ClientSetup(training=config.training, dp_sgd=config.dp_sgd, seed=config.seed, data=data,
                       model=model, mechanism=build_mechanism(config))
