"""The mechanism interface and its declarative parameters.

A mechanism class declares its parameters as ``Param`` specs; ``Mechanism.__init__`` validates keyword
arguments against them in one place, so ``create``, ``describe``, configs and the CLI (whose flags are generated
from the specs) can list, check and document any mechanism without knowing it.

Beyond encode / decode / guarantee, a mechanism declares what an audit needs to know about it through optional
methods and class attributes with sound generic defaults (``auditkit.mechanisms.capabilities``), so that a mechanism
written outside this package (a plugin) is audited exactly like a built-in one.
"""

from __future__ import annotations

import abc
from dataclasses import dataclass
from typing import Any, ClassVar, Self

import dp_accounting
import torch

from auditkit.mechanisms.capabilities import AuditSetting, BatchSampling, LogDensity, SideValues, Tiling, claim_event
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.message import MAX_LENGTH, Message, reports_decode_errors
from auditkit.mechanisms.tradeoff import TradeOff
from auditkit.mechanisms.views import View
from auditkit.validation import Choice, Constraint, Integer, Number, Optional

__all__ = [
    "Param",
    "Mechanism",
    "positive_float",
    "open_unit_interval",
    "int_range",
    "choice",
    "zero_or_above",
    "as_update",
]


@dataclass(frozen=True)
class Param:
    """One constructor parameter of a mechanism (or option of a round protocol or paper claim).

    name:       keyword (also the CLI flag with dashes and the config key).
    default:    value used when the keyword is omitted.
    help:       one line for the CLI table.
    constraint: what a value must be (``auditkit.validation``: ``Number``, ``Integer``, ``Choice``, ...); it converts
                the value (an int given for a float is a float; a bool is never a number) and its ``allowed`` says
                in words what is allowed ("a finite number > 0"), in the one message of every refused value.
    """

    name: str
    default: Any
    help: str
    constraint: Constraint

    @property
    def type(self) -> type:
        """``float``, ``int``, ``str`` or ``bool``: the type of a validated value."""
        return self.constraint.type

    @property
    def allowed(self) -> str:
        return self.constraint.allowed

    @property
    def choices(self) -> tuple[str, ...] | None:
        """The admissible words of a ``Choice`` parameter, else None."""
        return self.constraint.words if isinstance(self.constraint, Choice) else None

    def validate(self, value: Any) -> Any:
        """The value converted; ``ValidationError`` (a ValueError) naming the parameter and what is allowed."""
        return self.constraint.check(value, self.name)

    def parse(self, text: str) -> Any:
        """The value of a command-line word ("1e-5" for a float, "3" for an int), validated."""
        return self.constraint.parse(text, self.name)


def positive_float(name: str, default: float, help: str) -> Param:
    return Param(name, default, help, Number(low=0, low_open=True))


def open_unit_interval(name: str, default: float, help: str) -> Param:
    return Param(name, default, help, Number(0, 1, low_open=True, high_open=True))


def zero_or_above(name: str, low: float, help: str) -> Param:
    """A float defaulting to 0, which the mechanism reads as "derive it" (``help`` says how), else > ``low``."""
    return Param(name, 0.0, help, Number(low=low, low_open=True, zero=True))


def int_range(name: str, low: int, high: int, default: int, help: str) -> Param:
    return Param(name, default, help, Integer(low, high))


def choice(name: str, choices: tuple[str, ...], default: str, help: str) -> Param:
    return Param(name, default, help, Choice(choices))


def as_update(x: torch.Tensor) -> torch.Tensor:
    """Validate a flattened update and return it as a CPU float64 tensor.

    Float64 because clipping norms and quantizer cells are computed from it; CPU because the
    randomness combined with it is drawn on the CPU (see ``auditkit.mechanisms.randomness.generator``).
    """
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"the update must be a torch.Tensor, got {type(x).__name__}")
    if x.ndim != 1 or not x.is_floating_point():
        raise ValueError(f"the update must be a 1-D float tensor, got dtype {x.dtype} and shape {tuple(x.shape)}")
    if x.numel() > MAX_LENGTH:
        raise ValueError(f"the update has {x.numel()} coordinates; at most {MAX_LENGTH} fit in a message")
    x = x.detach().to(device="cpu", dtype=torch.float64)
    if not torch.isfinite(x).all():
        raise ValueError("the update contains NaN or infinite values")
    return x


class Mechanism(abc.ABC):
    """A privacy and/or compression mechanism for one client's flattened update.

    Subclasses set ``name``, ``summary``, ``params_spec`` (tuple of ``Param``) and ``message_type``,
    and implement ``encode``, ``decode`` and ``guarantee``; ``auditkit.mechanisms.registry.register`` makes
    them available by name. Constructor keywords are the declared parameters plus ``private_seed``.

    ``seed`` (per client and round, from ``derive_seed``) keys the randomness shared with the server;
    ``private_seed`` keys the client-only randomness (None: fresh OS entropy on every call).

    Optional, with generic defaults (``auditkit.mechanisms.capabilities`` says what each default means):

    * class attributes ``protocol`` (a registered round protocol), ``view``, ``clip_norm``, ``reference_params``;
    * methods ``tiling``, ``batch_sampling``, ``side_values``, ``audit_setting``, ``output_log_density``,
      ``dp_event``, ``true_epsilon``, ``client_sampling``.
    """

    name: ClassVar[str]
    summary: ClassVar[str]
    params_spec: ClassVar[tuple[Param, ...]] = ()
    message_type: ClassVar[type[Message]]

    protocol: ClassVar[str | None] = None
    """The registered round protocol an FL round with this mechanism runs (``auditkit.mechanisms.protocol``);
    None: each client sends one encoded message per round and the server averages the decoded updates."""
    view: ClassVar[str] = View.SERVER
    """The adversary's view whose law ``encode``/``decode`` sample, i.e. what the claim covers and the
    mechanism-level audits test: "server" (the server's decoded message of one client) or "aggregate" (one
    client's update as the round's noisy sum reveals it to an adversary who knows the other summands, for a
    mechanism whose noise the server adds: ``auditkit.mechanisms.dp_fedavg``)."""
    clip_norm: ClassVar[str | None] = None
    """The norm ``clip`` is measured in ("l2" or "l1"), None without a clip; reports show it beside ``clip``."""
    reference_params: ClassVar[dict[str, Any]] = {}
    """Parameters at which the claim is within reach of a distinguishing audit (benchmarks and soundness tests
    audit the mechanism there; empty: its defaults)."""
    noise_param: ClassVar[str | None] = None
    """The parameter that sets the privacy noise (its claimed epsilon falls as it grows), which
    ``auditkit.mechanisms.calibrate`` solves for a target epsilon; None: the mechanism cannot be calibrated that way."""

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        decode = cls.__dict__.get("decode")
        if callable(decode):  # a message that does not decode raises MessageDecodeError (mechanisms.message)
            cls.decode = reports_decode_errors(decode)

    def __init__(self, *, private_seed: int | None = None, **params: Any) -> None:
        specs = {p.name: p for p in self.params_spec}
        unknown = sorted(set(params) - set(specs))
        if unknown:
            valid = ", ".join(sorted([*specs, "private_seed"]))
            raise ValueError(f"unknown parameter {unknown[0]!r} for mechanism {self.name!r}; valid: {valid}")
        private_seed = Optional(Integer()).check(private_seed, "private_seed")
        self.params: dict[str, Any] = {
            p.name: p.validate(params[p.name]) if p.name in params else p.default for p in self.params_spec
        }
        self.private_seed = private_seed

    @abc.abstractmethod
    def encode(self, x: torch.Tensor, seed: int) -> Message:
        """Client side: the message for the 1-D float update ``x`` (any device)."""

    @abc.abstractmethod
    def decode(self, enc: Message, seed: int) -> torch.Tensor:
        """Server side: the estimate of the update, a 1-D float32 CPU tensor.

        ``MessageDecodeError`` (a ValueError, ``auditkit.mechanisms.message``) when ``enc`` does not decode under this
        seed and configuration: the ``decode`` of every subclass is wrapped in ``reports_decode_errors`` when
        the class is created, so whatever ValueError it raises arrives as one. A wrong seed is not always
        detectable: where the decoder only subtracts a dither, it gives a wrong estimate instead."""

    @abc.abstractmethod
    def guarantee(self) -> PrivacyGuarantee:
        """The analytic privacy claim of this configuration."""

    def __call__(self, x: torch.Tensor, seed: int) -> torch.Tensor:
        return self.decode(self.encode(x, seed), seed)

    def clip_update(self, x: torch.Tensor) -> torch.Tensor:
        """The update as the mechanism receives it, before its noise or quantizer (float64): by default rescaled
        into the ball of radius ``clip`` in ``clip_norm`` (l2, l1) or clamped to [-clip, clip] (linf), and
        unchanged without a clip. Mechanisms that clip otherwise override it (DP-SQ, MSP-FL)."""
        x = as_update(x)
        clip, norm = self.params.get("clip"), self.clip_norm
        if not clip or norm is None:
            return x
        if norm == "linf":
            return x.clamp(-clip, clip)
        length = torch.linalg.vector_norm(x, 1 if norm == "l1" else 2).item()
        return x / max(1.0, length / clip)

    def with_params(self, **changes: Any) -> Self:
        """A mechanism of the same class and ``private_seed`` with ``changes`` applied to its parameters."""
        return type(self)(private_seed=self.private_seed, **{**self.params, **changes})

    # --- optional capabilities: generic defaults (mechanisms.capabilities) ---------------------------------------

    def tiling(self) -> Tiling | None:
        """How to draw many outputs for one input in one call on tiled copies; None: one call per output."""
        return None

    def batch_sampling(self) -> BatchSampling | None:
        """The mechanism's own vectorised sampler of B outputs, where it cannot be tiled; None: one call per output."""
        return None

    def side_values(self) -> SideValues | None:
        """The side values of B inputs' messages in one call, where they carry one; None: one encode per input."""
        return None

    def audit_setting(self) -> AuditSetting | None:
        """Where a distinguishing audit tests the claim; None: the generic setting (``auditkit.attacks.audit_settings``)."""
        return None

    def output_log_density(self) -> LogDensity | None:
        """ln p(y | x) of the output, where known (the likelihood-ratio statistic); None: unknown."""
        return None

    def dp_event(self) -> dp_accounting.DpEvent:
        """One round of the claim as a ``dp_accounting`` event, under ``guarantee().relation`` in dp_accounting's
        convention (a noise multiplier is relative to the per-input norm bound ``clip``; under REPLACE_ONE two
        inputs may then differ by twice that). Default: ``claim_event(guarantee())``."""
        return claim_event(self.guarantee())

    def true_epsilon(self) -> float | None:
        """The epsilon of the noise the code really adds, where computed (claims flagged "claim-exceeded")."""
        return None

    def client_sampling(self) -> tuple[str, ...]:
        """The client participations (``auditkit.fl.sampling.PARTICIPATION``) whose amplification the claim
        covers; empty: none. A local mechanism's server sees who sent what, so sampling hides nobody."""
        return ()

    def tradeoff(self) -> TradeOff | None:
        """The claim's one-round trade-off curve under ``guarantee().relation`` (``auditkit.mechanisms.tradeoff``),
        sharper than its (eps, delta) pair; None: the one-run audit refutes the (eps, delta) curve instead."""
        return None

    def _check_message(self, enc: Message) -> None:
        if not isinstance(enc, self.message_type):
            raise TypeError(f"{self.name} decodes {self.message_type.__name__}, got {type(enc).__name__}")

    def __repr__(self) -> str:
        args = ", ".join(f"{k}={v!r}" for k, v in self.params.items())
        return f"{type(self).__name__}({args})"
