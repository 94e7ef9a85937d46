"""Typed audit configuration, loaded from TOML (or a preset) and validated in one place.

A config file has a top-level ``seed``/``device`` and three tables::

    seed = 0
    device = "auto"          # auto | cpu | cuda | cuda:N

    [data]
    dataset = "digits"       # digits (embedded) | mnist | cifar10
    partition = "iid"        # iid | dirichlet | shards

    [training]
    model = "cnn"
    clients = 10
    rounds = 60
    tau = 15

    [mechanism]
    name = "none"            # any registered mechanism; its parameters sit beside the name
    # sigma = 0.1

Every error names the offending key and what is allowed, in one line.
"""
from __future__ import annotations

import dataclasses
import math
import tomllib
import types
import typing
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

from auditkit.data import DATASETS, PARTITION_SCHEMES
from auditkit.fl.sampling import PARTICIPATION
from auditkit.models import MODEL_NAMES

PRESETS = ("quickstart", "cepam-mnist")
CLIENT_WEIGHTS = ("data", "uniform")


class ConfigError(ValueError):
    """A config value or key is not allowed; the message names it and the allowed values."""


@dataclass(frozen=True)
class DataConfig:
    """Which dataset and how it is split across clients."""

    dataset: str = "digits"
    data_dir: str | None = None
    download: bool = False
    partition: str = "iid"
    dirichlet_alpha: float = 0.5
    validation_fraction: float = 0.1


@dataclass(frozen=True)
class TrainingConfig:
    """FedAvg: model, clients, local steps, optimiser, learning-rate schedule, participation."""

    model: str = "cnn"
    clients: int = 10
    rounds: int = 60
    tau: int = 15
    batch_size: int = 1
    lr: float = 0.01
    momentum: float = 0.9
    lr_patience: int = 10
    lr_factor: float = 0.5
    participation: str = "full"
    clients_per_round: int | None = None
    sample_rate: float | None = None
    client_weights: str = "data"
    checkpoints: tuple[int, ...] = (1,)
    batched: bool = True


@dataclass(frozen=True)
class MechanismConfig:
    """A registered mechanism's name and its parameters (validated by ``mechanisms.create``)."""

    name: str = "none"
    params: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class AuditConfig:
    """Everything an audit run needs; the same config and seed give the same numbers."""

    seed: int = 0
    device: str = "auto"
    data: DataConfig = field(default_factory=DataConfig)
    training: TrainingConfig = field(default_factory=TrainingConfig)
    mechanism: MechanismConfig = field(default_factory=MechanismConfig)

    def to_dict(self) -> dict[str, Any]:
        """The config as plain TOML/JSON-friendly data (round-trips through `from_dict`)."""
        out = dataclasses.asdict(self)
        mech = out.pop("mechanism")
        out["mechanism"] = {"name": mech["name"], **mech["params"]}
        out["training"]["checkpoints"] = list(out["training"]["checkpoints"])
        return out


# ---------------------------------------------------------------- loading


def load_config(path: str | Path) -> AuditConfig:
    """Read and validate a TOML config file."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"config file {str(path)!r} does not exist")
    try:
        raw = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as err:
        raise ConfigError(f"config file {str(path)!r} is not valid TOML: {err}") from None
    return from_dict(raw)


def preset_dict(name: str) -> dict[str, Any]:
    """The raw TOML tables of a bundled preset."""
    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; valid: {', '.join(PRESETS)}")
    text = resources.files("auditkit.presets").joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return tomllib.loads(text)


def load_preset(name: str) -> AuditConfig:
    """A bundled preset: ``quickstart`` (the default) or ``cepam-mnist`` (the paper's settings)."""
    return from_dict(preset_dict(name))


def from_dict(raw: dict[str, Any]) -> AuditConfig:
    """Validate raw config tables (as read from TOML) into an `AuditConfig`."""
    top_allowed = {"seed", "device", "data", "training", "mechanism"}
    _reject_unknown(raw, top_allowed, "")
    seed = _integer(raw.get("seed", 0), "seed", minimum=0)
    device = _device(raw.get("device", "auto"))
    data = _section(raw.get("data", {}), DataConfig, "data")
    training = _section(raw.get("training", {}), TrainingConfig, "training")
    mechanism = _mechanism(raw.get("mechanism", {}))
    config = AuditConfig(seed=seed, device=device, data=data, training=training, mechanism=mechanism)
    _check_values(config)
    return config


def merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    """Recursively overlay `overrides` (None values ignored) on raw config tables."""
    out = {k: (dict(v) if isinstance(v, dict) else v) for k, v in base.items()}
    for key, value in overrides.items():
        if value is None:
            continue
        if isinstance(value, dict):
            out[key] = merge(out.get(key, {}), value)
        else:
            out[key] = value
    return out


# ---------------------------------------------------------------- validation helpers


def _reject_unknown(table: Any, allowed: set[str], prefix: str) -> None:
    where = f"[{prefix}]" if prefix else "the top level"
    if not isinstance(table, dict):
        raise ConfigError(f"config key {prefix!r} must be a table")
    for key in table:
        if key not in allowed:
            name = f"{prefix}.{key}" if prefix else key
            raise ConfigError(
                f"config key {name!r} is not allowed; allowed keys in {where}: {', '.join(sorted(allowed))}"
            )


def _section(table: dict[str, Any], cls: type, prefix: str):
    hints = typing.get_type_hints(cls)
    _reject_unknown(table, set(hints), prefix)
    return cls(**{key: _coerce(value, hints[key], f"{prefix}.{key}") for key, value in table.items()})


def _coerce(value: Any, annotation: Any, name: str) -> Any:
    """Check one value against its field's type (``int``, ``float``, ``str``, ``bool``,
    ``tuple[int, ...]``, or one of them ``| None``)."""
    kinds = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value is None and type(None) in kinds:
        return None
    kind = kinds[0]
    if typing.get_origin(kind) is tuple:
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of integers, got {value!r}")
        return tuple(_integer(v, name, minimum=1) for v in value)
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
        return value
    if kind is int:
        return _integer(value, name)
    if kind is float:
        return _number(value, name)
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def _integer(value: Any, name: str, minimum: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def _number(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def _device(value: Any) -> str:
    if not isinstance(value, str) or not (
        value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    ):
        raise ConfigError(f"device must be one of auto, cpu, cuda, cuda:N; got {value!r}")
    return value


def _mechanism(table: Any) -> MechanismConfig:
    import mechanisms

    if not isinstance(table, dict):
        raise ConfigError("config key 'mechanism' must be a table")
    table = dict(table)
    name = table.pop("name", "none")
    try:
        mechanisms.create(name, **table)
    except ValueError as err:
        raise ConfigError(f"mechanism: {err}") from None
    return MechanismConfig(name=name, params=table)


def _choice(value: str, allowed: tuple[str, ...], name: str) -> None:
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def _at_least(value: float, minimum: float, name: str, kind: str = "an integer") -> None:
    if value < minimum:
        raise ConfigError(f"{name} must be {kind} >= {minimum}, got {value}")


def _check_values(config: AuditConfig) -> None:
    d, t = config.data, config.training
    _choice(d.dataset, DATASETS, "data.dataset")
    _choice(d.partition, PARTITION_SCHEMES, "data.partition")
    if not d.dirichlet_alpha > 0:
        raise ConfigError(f"data.dirichlet_alpha must be > 0, got {d.dirichlet_alpha}")
    if not 0 <= d.validation_fraction < 1:
        raise ConfigError(f"data.validation_fraction must be in [0, 1), got {d.validation_fraction}")
    _choice(t.model, MODEL_NAMES, "training.model")
    _choice(t.participation, PARTICIPATION, "training.participation")
    _choice(t.client_weights, CLIENT_WEIGHTS, "training.client_weights")
    for name in ("clients", "rounds", "tau", "batch_size"):
        _at_least(getattr(t, name), 1, f"training.{name}")
    _at_least(t.lr_patience, 0, "training.lr_patience")
    if not t.lr > 0:
        raise ConfigError(f"training.lr must be > 0, got {t.lr}")
    if not 0 <= t.momentum < 1:
        raise ConfigError(f"training.momentum must be in [0, 1), got {t.momentum}")
    if not 0 < t.lr_factor <= 1:
        raise ConfigError(f"training.lr_factor must be in (0, 1], got {t.lr_factor}")
    if t.participation == "uniform":
        if t.clients_per_round is None or not 1 <= t.clients_per_round <= t.clients:
            raise ConfigError(
                f"training.clients_per_round must be an integer in [1, {t.clients}] with "
                f"participation 'uniform', got {t.clients_per_round}"
            )
    if t.participation == "poisson" and (t.sample_rate is None or not 0 < t.sample_rate <= 1):
        raise ConfigError(
            f"training.sample_rate must be in (0, 1] with participation 'poisson', got {t.sample_rate}"
        )
    late = [c for c in t.checkpoints if c > t.rounds]
    if late:
        raise ConfigError(f"training.checkpoints must be rounds in [1, {t.rounds}], got {late[0]}")
