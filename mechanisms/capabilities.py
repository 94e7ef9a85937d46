"""What a mechanism may declare so that it is audited like any other, built in or plugin.

``Mechanism`` (``auditkit.mechanisms.base``) has one optional method per capability. Each has a sound generic default,
and ``declared(mechanism, name)`` says whether the mechanism overrides it, so a report can say where a
generic default stood in:

| method | returns | generic default |
|---|---|---|
| ``tiling()`` | ``Tiling``: B independent outputs from one call on B copies laid end to end | None: one call per output |
| ``batch_sampling()`` | ``BatchSampling``: the mechanism's own vectorised sampler, where copies cannot be tiled | None: one call per output |
| ``side_values()`` | ``SideValues``: the side value its messages carry in clear, for B inputs at once | None: one encode per input |
| ``audit_setting()`` | ``AuditSetting``: the input dimension, ball and shift at which the claim is tested | None: the generic 2-D setting |
| ``output_log_density()`` | ``LogDensity``: ln p(y given x), up to a constant in x | None: no likelihood-ratio statistic |
| ``dp_event()`` | a ``dp_accounting`` event for one round of the claim | ``claim_event(guarantee())`` |
| ``true_epsilon()`` | the epsilon of the noise the code really adds | None: not computed |
| ``client_sampling()`` | the client participations whose amplification the claim covers ("poisson") | (): none |
| ``tradeoff()`` | the claim's one-round trade-off curve (f-DP, ``auditkit.mechanisms.tradeoff``) | None: its (eps, delta) curve |

A capability counts as declared by the class that defines it, or by a private base class it inherits from; one
inherited from *another registered mechanism* does not count (a subclass that changes how the mechanism behaves
would otherwise inherit, e.g., a tiling that is no longer faithful): ``capability(mechanism, name)`` then gives the
generic default, and a subclass that keeps its parent's behaviour re-declares it (``tiling = Parent.tiling``).

Class attributes complete the picture: ``protocol`` (the registered round protocol an FL round runs,
``auditkit.mechanisms.protocol``; None: one message per client and round), ``view`` (the adversary's view the
claim covers and ``encode`` samples: "server", or "aggregate" for noise the server adds), ``clip_norm`` (the norm ``clip`` is
measured in) and ``reference_params`` (parameters at which the claim is within reach of a distinguishing audit).

This module holds the plain data of those answers; it imports nothing of the toolkit but ``dp_accounting``.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import attr
import dp_accounting
import numpy as np

if TYPE_CHECKING:
    import torch

    from auditkit.mechanisms.guarantee import PrivacyGuarantee


class Rescalable(Protocol):
    """What ``rescaled_clip`` needs of a mechanism (``auditkit.mechanisms.base.Mechanism`` has it; this module sits
    below ``base``, which builds on its capability types): its parameters and a copy with some of them changed."""

    params: dict[str, Any]

    def with_params(self, **params: Any) -> Any: ...


M = TypeVar("M", bound=Rescalable)

__all__ = [
    "CAPABILITIES",
    "Capability",
    "CapabilityState",
    "AuditSetting",
    "BatchSampling",
    "SideValues",
    "LogDensity",
    "RefusedDpEvent",
    "Tiling",
    "claim_event",
    "pure_epsilon_event",
    "refused",
    "rescaled_clip",
]



class Capability(enum.StrEnum):
    """What a mechanism may declare to make an audit sharper; each has a generic default (``capability``)."""

    TILING = "tiling"
    BATCH_SAMPLING = "batch_sampling"
    SIDE_VALUES = "side_values"
    AUDIT_SETTING = "audit_setting"
    OUTPUT_LOG_DENSITY = "output_log_density"
    DP_EVENT = "dp_event"
    TRUE_EPSILON = "true_epsilon"
    CLIENT_SAMPLING = "client_sampling"
    TRADEOFF = "tradeoff"


class CapabilityState(enum.StrEnum):
    """Whether a mechanism declared a capability or its generic default stood in (``unknown``: not recorded)."""

    DECLARED = "declared"
    GENERIC_DEFAULT = "generic default"
    UNKNOWN = "unknown"


CAPABILITIES = tuple(Capability)

LogDensity = Callable[[np.ndarray, np.ndarray], np.ndarray]
"""f(y, x): outputs y (B, d_out) and input x (d,), NumPy float64 -> ln p(y | x) of shape (B,), up to a constant
in x. A model of the mechanism taken from its claim: a wrong model only weakens a test, never a bound."""

@dataclass(frozen=True)
class Tiling:
    """How B outputs of the mechanism for one input x come from ONE call on B copies of x laid end to end.

    Faithful when the B outputs have exactly the joint law of B separate calls with independent seeds: the
    mechanism acts block by block with randomness iid across blocks, and no per-call quantity couples the copies.

    block:      each copy is zero-padded to a multiple of this many coordinates (the mechanism's block length).
    why:        one line saying why tiling is faithful for this mechanism (shown in reports).
    max_copies: the most copies per call (e.g. where the clip is also a coding range); None: no limit.
    for_copies: the mechanism to call on B copies (e.g. a copy whose clip is rescaled so that clipping the tiled
                vector scales every copy as one call would; see ``rescaled_clip``); None: the mechanism itself.
    """

    block: int
    why: str
    max_copies: int | None = None
    for_copies: Callable[[int], Any] | None = None  # -> the Mechanism to call on that many copies


@dataclass(frozen=True)
class BatchSampling:
    """B outputs of the mechanism from its own vectorised sampler, for a configuration that cannot be tiled (a
    per-call quantity, e.g. MSP-FL's hidden m_i, is shared by every coordinate of one call).

    sample: f(x, count, seed): x (d,) float64 -> (count, d_out) float64, ``count`` independent outputs, each
            distributed exactly as one call ``m(x, seed_i)`` with its own seed. It should run the same code as
            ``encode``/``decode`` on a batch, so that count = 1 gives the call ``m(x, seed)`` itself; its tests
            compare it with the per-call path.
    why:    one line saying why the batch is faithful (shown in reports).
    """

    sample: Callable[[torch.Tensor, int, int], torch.Tensor]
    why: str


@dataclass(frozen=True)
class SideValues:
    """The side value a mechanism's messages carry in clear (``Message.side_value``, e.g. JoPEQ's scale zeta), for
    B inputs in one call: what an adaptive test reads from the bytes of B messages (``message_side_channel``),
    without encoding each.

    sample: f(x, seed): x (B, d) float64 -> (B,) float64, row i the side value of ``encode(x_i, seed_i)``'s message
            as parsed from its bytes. It should run the same code as ``encode`` (its tests compare the two).
    why:    one line saying why the batch is faithful (shown in reports).
    """

    sample: Callable[[torch.Tensor, int], torch.Tensor]
    why: str


@dataclass(frozen=True)
class AuditSetting:
    """Where a claim is tested: the neighbouring pairs a distinguishing audit tries are built in ``dimension``
    coordinates, ``sensitivity`` apart in ``norm``, inside the ball of ``radius`` (``auditkit.attacks.neighbouring_pairs``).

    block:            the leading coordinates a pair may differ in (the unit a per-block claim covers).
    same_norm:        both inputs of a pair have the same l2 norm (for mechanisms that reveal ||x||).
    beyond_clip:      also try inputs outside the ball, which the clip must pull back.
    add_remove:       the claim is add/remove-one: the beyond-clip pair is (0, an input beyond the clip), a client
                      absent against one present, not two clipped inputs 2 clip apart.
    quantizer_step, quantizer_offset: also try pairs inside one quantizer cell and across its boundary.
    note:             one line saying why this setting tests the claim (shown in reports).
    """

    dimension: int
    sensitivity: float
    norm: str
    radius: float
    block: int
    same_norm: bool = False
    beyond_clip: bool = False
    add_remove: bool = False
    quantizer_step: float | None = None
    quantizer_offset: float = 0.0
    note: str = ""

    @classmethod
    def clipped(cls, clip: float, norm: str, dimension: int = 2, block: int | None = None) -> AuditSetting:
        """Replace-one inside the ``norm`` ball of radius ``clip``: pairs 2 clip apart, and inputs beyond the clip."""
        return cls(dimension, 2 * clip, norm, clip, dimension if block is None else block, beyond_clip=True,
                   note=f"replace-one within the {norm} ball of radius clip {clip:g}: shift 2 clip")


@attr.define(frozen=True)
class RefusedDpEvent(dp_accounting.UnsupportedDpEvent):
    """An ``UnsupportedDpEvent`` that says why no accountant can compose it (every accountant refuses it)."""

    reason: str


def refused(reason: str) -> RefusedDpEvent:
    """The event of a round no accountant composes, with the reason shown instead of a number."""
    return RefusedDpEvent(reason)


def pure_epsilon_event(epsilon: float) -> dp_accounting.DpEvent:
    """The dp_accounting event of one eps-DP round whatever the mechanism: binary randomized response with
    P(truth) = e^eps / (1 + e^eps), i.e. ``RandomizedResponseDpEvent(noise_parameter=2 / (1 + e^eps),
    num_buckets=2)``. Its privacy region contains that of every eps-DP mechanism (Kairouz, Oh & Viswanath, ICML
    2015, Thm 2.4), so composing it composes any eps-DP round, and optimally (their Thm 3.3). eps = 0 is a no-op.
    """
    if not (math.isfinite(epsilon) and epsilon >= 0):
        raise ValueError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
    if epsilon == 0:
        return dp_accounting.NoOpDpEvent()
    return dp_accounting.RandomizedResponseDpEvent(noise_parameter=2 / (1 + math.exp(epsilon)), num_buckets=2)


def claim_event(claim: PrivacyGuarantee) -> dp_accounting.DpEvent:
    """The generic one-round event of a claim (``Mechanism.dp_event``'s default): ``NonPrivateDpEvent`` for no
    claim, ``pure_epsilon_event(eps)`` for an eps-DP claim, and a refusal for an (eps, delta) claim with
    delta > 0, which needs the mechanism's own noise model to compose."""
    if claim.epsilon is None:
        return dp_accounting.NonPrivateDpEvent()
    if claim.delta == 0:
        return pure_epsilon_event(claim.epsilon)
    return refused(
        f"an (eps, delta) claim with delta > 0 composes only through its noise model, which this mechanism does "
        f"not declare (dp_event); eps = {claim.epsilon:.4g}, delta = {claim.delta:.3g} per round"
    )


def rescaled_clip(
    mechanism: M, p: int, *, clip: float | None = None, **pinned: Any
) -> Callable[[int], M]:
    """``Tiling.for_copies`` for a mechanism that clips the whole update in the lp norm: B copies laid end to end
    have ||tile_B(x)||_p = B^(1/p) ||x||_p, so a copy of the mechanism with clip' = B^(1/p) clip scales every
    copy exactly as one call would scale it (to rounding in the last bit). ``clip``: the clipping norm in force
    (default ``params["clip"]``); ``pinned``: derived parameters that depend on clip and must keep the original's
    values (e.g. the t noise's nu and s2). Copies are cached."""
    cache: dict[int, M] = {}
    base = mechanism.params["clip"] if clip is None else clip

    def for_copies(copies: int) -> M:
        if copies == 1:
            return mechanism
        if copies not in cache:
            cache[copies] = mechanism.with_params(**pinned, clip=base * copies ** (1 / p))
        return cache[copies]

    return for_copies
