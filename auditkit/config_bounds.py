"""How one config value is checked: its type, its range, and the bounds on every size-like key (issue 39).

Split out of ``auditkit.config`` (which re-exports ``ConfigError`` and ``RENAMED_KEYS``): the primitive checks a
table's values go through, and ``SIZES``, the one definition of the sizes a run may ask for, which the command
line's flags take their ranges from (``auditkit.cli.options``). A size past its bound is refused at validation in
one line naming the key and the range, before anything is loaded or trained: ``rounds = 10**9`` used to train
until killed. Every message is one line naming the key and what is allowed.
"""
from __future__ import annotations

import math
import types
import typing
from collections.abc import Iterable
from typing import Any


class ConfigError(ValueError):
    """A config value or key is not allowed; the message names it and the allowed values."""


# The sizes a run may ask for: key -> (lowest, highest), inclusive. Generous for real use (every bound is far above
# the presets' and the papers' values) while refusing the absurd, which otherwise runs for hours or dies on an
# allocation (issue 39). What a run of allowed sizes needs in memory is checked as well (``auditkit.fl.memory``).
SIZES: dict[str, tuple[int, int]] = {
    # torch's and numpy's generators take int64 seeds (2**64 overflowed torch.Generator.manual_seed); the derived
    # seeds (auditkit.mechanisms.randomness.derive_seed) are in the same range
    "seed": (0, 2**63 - 1),
    # every client holds at least one example: above MNIST's 60,000 training images, the largest dataset loaded
    "training.clients": (1, 100_000),
    "training.clients_per_round": (1, 100_000),
    # one validation and test pass and one results record per round; the papers run 20 to 80 (1,000x that)
    "training.rounds": (1, 100_000),
    # local steps and samples per step: a round draws clients x tau x batch_size indices and their images at once
    # (the memory check bounds the product); the papers use tau <= 15 and batches <= 10
    "training.tau": (1, 10_000),
    "training.batch_size": (1, 10_000),
    # (training.checkpoints: each must be a round of the run, so within these rounds)
    # gradient inversion: one reconstruction per target, each start an L-BFGS run of `iterations` model passes
    # (the presets: 2-4 targets, 100-300 iterations, 2-4 restarts)
    "inversion.targets": (1, 10_000),
    "inversion.iterations": (1, 100_000),
    "inversion.restarts": (1, 1_000),
    # the probe: `targets` clients with `batch_size` examples each, `local_steps` steps, an attack of `iterations`
    "probe.targets": (1, 10_000),
    "probe.batch_size": (1, 10_000),
    "probe.local_steps": (1, 10_000),
    "probe.iterations": (1, 100_000),
    # identification: trials x candidates likelihoods of a whole update (default 500 x up to 100)
    "identification.candidates": (2, 10_000),
    "identification.trials": (1, 100_000),
    # every output of a test is held in memory at once (trials x the audit dimension, float64); the default is
    # 100,000 and an interval's width shrinks only as 1/sqrt(trials)
    "distinguish.trials": (100, 10_000_000),
    # canary clients: one coin and one score each per round (Andrew et al. use 1,000)
    "canary.canaries": (2, 100_000),
}

# A mechanism's noise parameter (its ``noise_param``: sigma, scale, noise_multiplier) and its ``eps``, and DP-SGD's
# noise multiplier, lie in the range ``auditkit.mechanisms.calibrate`` searches the noise over. Below it the claim's
# epsilon overflows (sigma = 1e-300: the Gaussian's epsilon solver fails on NaN; Laplace scale 5e-324: epsilon inf;
# JoPEQ eps = 1e-300: an OverflowError), and the accountants fail long before that.
NOISE_RANGE = (1e-9, 1e9)

MAX_NAME_CHARS = 1000
"""The longest ``title``, ``label``, ``name`` or ``id``: headings and figure legends draw them (a label of 10^6
characters took minutes and gigabytes to render); results files are held to it too (``auditkit.reports``)."""


def name_length(value: str, where: str) -> str:
    """``value`` unless it is longer than :data:`MAX_NAME_CHARS`."""
    if len(value) > MAX_NAME_CHARS:
        raise ConfigError(f"{where} must be at most {MAX_NAME_CHARS:,} characters, got {len(value):,}")
    return value


MAX_MEMORY_GIB = 2.0**20  # [limits] max_memory_gib: at most 1 PiB, the limit a machine could have

RENAMED_KEYS = {"inversion.clients": "inversion.targets", "probe.clients": "probe.targets",
                "groups.per_round": "groups.clients_per_round", "accounting.backend": "accounting.accountant"}
"""Config keys renamed (issues 28 and 40: one word per meaning, ``docs/names.md``): old -> new, refused with the new
name.
Renamed mechanism parameters: ``auditkit.mechanisms.registry.RENAMED_PARAMS``."""


def size_range(key: str, *, listed: bool = False) -> str:
    """The allowed range of size ``key`` in words: "an integer in 1..100000" ("a list of integers in ...")."""
    low, high = SIZES[key]
    return f"{'a list of integers' if listed else 'an integer'} in {low}..{high}"


def check_sizes(config: Any) -> None:
    """Every ``SIZES`` key of ``config`` (an ``AuditConfig``) within its bounds; unset ones (None) pass, a list's
    every element is checked."""
    for key, (low, high) in SIZES.items():
        value = config
        for part in key.split("."):
            value = getattr(value, part)
        values: Iterable[Any] = value if isinstance(value, tuple) else () if value is None else (value,)
        if any(not low <= v <= high for v in values):
            listed = isinstance(value, tuple)
            raise ConfigError(f"{key} must be {size_range(key, listed=listed)}, got {list(value) if listed else value}")


def check_noise(value: Any, name: str) -> None:
    """A positive finite ``value`` within ``NOISE_RANGE``, else a ConfigError naming ``name`` and the range (what
    is not a positive finite number is left to the parameter's own check, whose message says so)."""
    low, high = NOISE_RANGE
    positive = isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < math.inf
    if positive and not low <= value <= high:
        raise ConfigError(f"{name} must be a number in [{low:g}, {high:g}] (the noise range auditkit.mechanisms."
                          f"calibrate searches; beyond it the claim's epsilon or the noise overflows), got {value!r}")


def check_mechanism_noise(setting: Any, point_params: dict[str, Any], noise_param: str | None, where: str) -> None:
    """A grid point's noise parameter and ``eps`` within ``NOISE_RANGE`` (``check_noise``), named as the setting
    gives them: ``mechanisms[0].sigma`` or ``mechanisms[0].sweep.sigma``."""
    for key in dict.fromkeys(k for k in (noise_param, "eps") if k is not None and k in point_params):
        check_noise(point_params[key], f"{where}.sweep.{key}" if key in setting.sweep else f"{where}.{key}")


def check_max_memory(value: float | None) -> None:
    """``limits.max_memory_gib``: unset (the machine's memory) or a number of GiB in (0, MAX_MEMORY_GIB]."""
    if value is not None and not 0 < value <= MAX_MEMORY_GIB:
        raise ConfigError(f"limits.max_memory_gib must be a number of GiB in (0, {MAX_MEMORY_GIB:.0f}], or left out "
                          f"for this machine's memory, got {value}")


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
    """The dataclass ``cls`` from ``table``, its keys checked (``reject_unknown``) and each value coerced."""
    hints = typing.get_type_hints(cls)
    reject_unknown(table, set(hints), prefix)
    return cls(**{key: coerce(value, hints[key], f"{prefix}.{key}") for key, value in table.items()})


def coerce(value: Any, annotation: Any, name: str) -> Any:
    """Check one value against its field's type (``int``, ``float``, ``str``, ``bool``,
    ``tuple[int, ...]``, or one of them ``| None``)."""
    kinds = typing.get_args(annotation) if isinstance(annotation, types.UnionType) else (annotation,)
    if value is None and type(None) in kinds:
        return None
    kind = kinds[0]
    if typing.get_origin(kind) is tuple:
        element = typing.get_args(kind)[0]
        what = "integers" if element is int else "numbers"
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name} must be a list of {what}, got {value!r}")
        if element is float:
            return tuple(number(v, name) for v in value)
        return tuple(integer(v, name, minimum=1) for v in value)
    if kind is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name} must be true or false, got {value!r}")
        return value
    if kind is int:
        return integer(value, name)
    if kind is float:
        return number(value, name)
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def integer(value: Any, name: str, minimum: int | None = None) -> int:
    """``value`` as an int (a float with an integer value is accepted), at least ``minimum``."""
    if isinstance(value, bool) or not isinstance(value, int):
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        else:
            raise ConfigError(f"{name} must be an integer, got {value!r}")
    if minimum is not None and value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum}, got {value}")
    return value


def number(value: Any, name: str) -> float:
    """``value`` as a finite float."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ConfigError(f"{name} must be a finite number, got {value!r}")
    return float(value)


def device(value: Any) -> str:
    """``auto``, ``cpu``, ``cuda`` or ``cuda:N``."""
    if not isinstance(value, str) or not (
        value in ("auto", "cpu", "cuda") or (value.startswith("cuda:") and value[5:].isdigit())
    ):
        raise ConfigError(f"device must be one of auto, cpu, cuda, cuda:N; got {value!r}")
    return value


def choice(value: str, allowed: tuple[str, ...], name: str) -> None:
    """``value`` one of ``allowed``."""
    if value not in allowed:
        raise ConfigError(f"{name} must be one of {', '.join(allowed)}; got {value!r}")


def at_least(value: float, minimum: float, name: str, kind: str = "an integer") -> None:
    """``value`` >= ``minimum``."""
    if value < minimum:
        raise ConfigError(f"{name} must be {kind} >= {minimum}, got {value}")
