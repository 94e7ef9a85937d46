"""How one config value is checked: its type, its range, and the bounds on every size-like key (issue 39).

Split out of ``auditkit.config`` (which re-exports ``ConfigError`` and ``RENAMED_KEYS``): the primitive checks a
table's values go through, and ``SIZES``, the one definition of the sizes a run may ask for, which the command
line's flags take their ranges from (``auditkit.cli.options``). A size past its bound is refused at validation in
one line naming the key and the range, before anything is loaded or trained: ``rounds = 10**9`` used to train
until killed. Every message is one line naming the key and what is allowed.
"""
from __future__ import annotations

import enum
import types
import typing
from typing import Any

from auditkit.validation import Choice, Constraint, Flag, Integer, ListOf, Number, Text, ValidationError


class ConfigError(ValidationError):
    """A config value or key is not allowed; the message names it and the allowed values (``auditkit.validation``'s
    one format for a value: "{key} must be {allowed}, got {value!r}")."""


# The sizes a run may ask for: key -> its integer range, inclusive. Generous for real use (every bound is far above
# the presets' and the papers' values) while refusing the absurd, which otherwise runs for hours or dies on an
# allocation (issue 39). What a run of allowed sizes needs in memory is checked as well (``auditkit.fl.memory``).
SIZES: dict[str, Integer] = {
    # torch's and numpy's generators take int64 seeds (2**64 overflowed torch.Generator.manual_seed); the derived
    # seeds (auditkit.mechanisms.randomness.derive_seed) are in the same range
    "seed": Integer(0, 2**63 - 1),
    # every client holds at least one example: above MNIST's 60,000 training images, the largest dataset loaded
    "training.clients": Integer(1, 100_000),
    "training.clients_per_round": Integer(1, 100_000),
    # one validation and test pass and one results record per round; the papers run 20 to 80 (1,000x that)
    "training.rounds": Integer(1, 100_000),
    # local steps and samples per step: a round draws clients x tau x batch_size indices and their images at once
    # (the memory check bounds the product); the papers use tau <= 15 and batches <= 10
    "training.tau": Integer(1, 10_000),
    "training.batch_size": Integer(1, 10_000),
    # passes over a client's data per round: a client of n_k examples takes local_epochs x ceil(n_k / B) steps
    "training.local_epochs": Integer(1, 1_000),
    # clients trained as one batched tensor program: their parameters, state and gradients held at once
    "training.client_chunk": Integer(1, 100_000),
    # (training.checkpoints: each must be a round of the run, so within these rounds)
    # imagefolder's images are resized to image_size squared: 8 is below any model's use, 512 above ImageNet's 224
    # (the loader refuses a folder whose float32 tensors would take too much memory)
    "data.image_size": Integer(8, 512),
    # McMahan et al. use 2; the partition needs clients x shards_per_client <= the training samples
    "data.shards_per_client": Integer(1, 10_000),
    # gradient inversion: one reconstruction per target, each start an L-BFGS run of `iterations` model passes
    # (the presets: 2-4 targets, 100-300 iterations, 2-4 restarts)
    "inversion.targets": Integer(1, 10_000),
    "inversion.iterations": Integer(1, 100_000),
    "inversion.restarts": Integer(1, 1_000),
    # the probe: `targets` clients with `batch_size` examples each, `local_steps` steps, an attack of `iterations`
    "probe.targets": Integer(1, 10_000),
    "probe.batch_size": Integer(1, 10_000),
    "probe.local_steps": Integer(1, 10_000),
    "probe.iterations": Integer(1, 100_000),
    # identification: trials x candidates likelihoods of a whole update (default 500 x up to 100)
    "identification.candidates": Integer(2, 10_000),
    "identification.trials": Integer(1, 100_000),
    # the pool's updates, held where they fit, else recomputed block by block (auditkit.stages.probe.TrainedPool)
    "identification.pool": Integer(2, 100_000),
    # every output of a test is held in memory at once (trials x the audit dimension, float64); the default is
    # 100,000 and an interval's width shrinks only as 1/sqrt(trials)
    "distinguish.trials": Integer(100, 10_000_000),
    # canary clients: one coin and one score each per round (Andrew et al. use 1,000)
    "canary.canaries": Integer(2, 100_000),
    # membership: every run trains the whole federation (references + 1 runs, stacked) and scores every candidate
    "membership.references": Integer(2, 1_000),
    "membership.records": Integer(2, 100_000),
    "membership.population": Integer(1, 100_000),
}

# A mechanism's noise parameter (its ``noise_param``: sigma, scale, noise_multiplier) and its ``eps``, and DP-SGD's
# noise multiplier, lie in the range ``auditkit.mechanisms.calibrate`` searches the noise over. Below it the claim's
# epsilon overflows (sigma = 1e-300: the Gaussian's epsilon solver fails on NaN; Laplace scale 5e-324: epsilon inf;
# JoPEQ eps = 1e-300: an OverflowError), and the accountants fail long before that.
NOISE_RANGE = (1e-9, 1e9)
NOISE = Number(*NOISE_RANGE)

MAX_NAME_CHARS = 1000
"""The longest ``title``, ``label``, ``name`` or ``id``: headings and figure legends draw them (a label of 10^6
characters took minutes and gigabytes to render); results files are held to it too (``auditkit.reports``)."""


def name_length(value: str, where: str) -> str:
    """``value`` unless it is longer than :data:`MAX_NAME_CHARS`."""
    if len(value) > MAX_NAME_CHARS:
        raise ConfigError(f"{where} must be at most {MAX_NAME_CHARS:,} characters, got {len(value):,}")
    return value


MAX_MEMORY_GIB = 2**20  # [limits] max_memory_gib: at most 1 PiB, the limit a machine could have
MAX_THREADS = 4096  # [limits] threads: more CPUs than a machine has

_POSITIVE = Number(low=0, low_open=True)
_FRACTION = Number(0, 1, high_open=True)  # [0, 1)

RANGES: dict[str, Constraint] = {
    "data.dirichlet_alpha": _POSITIVE,
    "data.validation_fraction": _FRACTION,
    "data.test_fraction": Number(0, 1, low_open=True, high_open=True),
    "training.lr": _POSITIVE,
    "training.momentum": _FRACTION,
    "training.lr_factor": Number(0, 1, low_open=True),
    "training.lr_patience": Integer(low=0),
    "training.weight_decay": Number(0, 1),
    "training.server_lr": Number(0, 100, low_open=True),
    "accounting.composition_delta": _FRACTION,
    "distinguish.confidence": Number(0, 1, low_open=True, high_open=True),
    "dp_sgd.noise_multiplier": NOISE,  # > 0 as well: a clipping-only run has no example-level claim
    "dp_sgd.max_grad_norm": _POSITIVE,
    # unset: the machine's memory
    "limits.max_memory_gib": Number(0, MAX_MEMORY_GIB, low_open=True),
    "limits.threads": Integer(1, MAX_THREADS),
}
"""The numbers a run's config may hold beyond its sizes: key -> constraint (checked with ``SIZES``, ``check_keys``)."""

RENAMED_KEYS = {"inversion.clients": "inversion.targets", "probe.clients": "probe.targets",
                "groups.per_round": "groups.clients_per_round", "accounting.backend": "accounting.accountant"}
"""Config keys renamed (issues 28 and 40: one word per meaning, ``docs/names.md``): old -> new, refused with the new
name.
Renamed mechanism parameters: ``auditkit.mechanisms.registry.RENAMED_PARAMS``."""


def check_keys(config: Any, constraints: dict[str, Constraint]) -> None:
    """Every dotted key of ``config`` (an ``AuditConfig``) in ``constraints`` allowed by its constraint; unset ones
    (None) pass, a list's every element is checked."""
    for key, constraint in constraints.items():
        value = config
        for part in key.split("."):
            value = getattr(value, part)
        if isinstance(value, tuple):
            ListOf(constraint).check(list(value), key)
        elif value is not None:
            constraint.check(value, key)


def check_mechanism_noise(setting: Any, point_params: dict[str, Any], noise_param: str | None, where: str) -> None:
    """A grid point's noise parameter and ``eps`` within ``NOISE_RANGE``, named as the setting gives them:
    ``mechanisms[0].sigma`` or ``mechanisms[0].sweep.sigma``. What is not a positive finite number is left to the
    parameter's own check, whose message says so."""
    for key in dict.fromkeys(k for k in (noise_param, "eps") if k is not None and k in point_params):
        try:
            _POSITIVE.check(point_params[key], key)
        except ValidationError:
            continue
        NOISE.check(point_params[key], f"{where}.sweep.{key}" if key in setting.sweep else f"{where}.{key}")


# ---------------------------------------------------------------- the primitive checks of a table's values


def reject_unknown(table: Any, allowed: set[str], prefix: str) -> None:
    """Refuse a key of ``table`` that is not in ``allowed``, naming the allowed ones (a renamed key: its new name)."""
    where = f"[{prefix}]" if prefix else "the top level"
    if not isinstance(table, dict):
        raise ConfigError(f"config key {prefix!r} must be a table")
    for key in table:
        if key not in allowed:
            name = f"{prefix}.{key}" if prefix else key
            if name in RENAMED_KEYS:
                raise ConfigError(f"config key {name!r} was renamed to {RENAMED_KEYS[name]!r}")
            raise ConfigError(
                f"config key {name!r} is not allowed; allowed keys in {where}: {', '.join(sorted(allowed))}"
            )


def section(table: dict[str, Any], cls: type, prefix: str):
    """The dataclass ``cls`` from ``table``, its keys checked (``reject_unknown``) and each value checked by the
    constraint of its field's type (``constraint_of``); None passes where the type allows it."""
    hints = typing.get_type_hints(cls)
    reject_unknown(table, set(hints), prefix)
    return cls(**{key: None if value is None and _optional(hints[key]) else
                  constraint_of(hints[key]).check(value, f"{prefix}.{key}") for key, value in table.items()})


def _optional(annotation: Any) -> bool:
    return isinstance(annotation, types.UnionType) and type(None) in typing.get_args(annotation)


_OF_TYPE: dict[Any, Constraint] = {
    bool: Flag(), int: Integer(whole_floats=True), float: Number(), str: Text(),
    tuple[int, ...]: ListOf(Integer(low=1, whole_floats=True)), tuple[float, ...]: ListOf(Number()),
}


def constraint_of(annotation: Any) -> Constraint:
    """The constraint of a field's type (``int``, ``float``, ``str``, ``bool``, ``tuple[int, ...]`` (at least 1),
    ``tuple[float, ...]``, a ``StrEnum``, or one of them ``| None``): an int accepts a float of integer value, a float any finite
    number."""
    kinds = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if isinstance(kinds[0], type) and issubclass(kinds[0], enum.StrEnum):  # a closed vocabulary: its members
        return Choice(kinds[0])
    return _OF_TYPE[kinds[0]]


def device(value: Any) -> str:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    if not isinstance(value, str) or not (
        value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    ):
        raise ConfigError(f"device must be one of auto, cpu, cuda, cuda:N, got {value!r}")
    return value
