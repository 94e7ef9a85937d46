"""Where a mechanism's claim is tested: its declared ``AuditSetting``, or the generic one, and the pairs it gives.

A mechanism declares the setting of its claim (``Mechanism.audit_setting()``, a ``mechanisms.AuditSetting``:
input dimension, ball, shift, block, pair options; e.g. the JoPEQ family tests one scaled block at zeta = 1, DP-SQ
the central quantizer cell). ``audit_setting(m)`` returns it, or, when the mechanism declares none, the generic
setting, marked ``GENERIC_NOTE`` so that reports say a generic default stood in: d = 2, the l2 ball of radius
``clip`` (1 without a clip parameter), pairs 2 radius apart, and inputs beyond the ball.

``setting_pairs(setting)`` builds the candidate pairs (``attacks.neighbouring_pairs``) that
``attacks.audit_mechanism`` tries.
"""

from __future__ import annotations

from attacks.neighbouring_pairs import NeighbouringPair, neighbouring_pairs
from mechanisms import AuditSetting, Mechanism, capability

__all__ = ["GENERIC_NOTE", "AuditSetting", "audit_setting", "is_generic", "setting_pairs"]

GENERIC_NOTE = "generic default: the mechanism declares no audit setting"


def audit_setting(mechanism: Mechanism) -> AuditSetting:
    """The setting ``mechanism`` declares, or the generic one (module docstring)."""
    declared = capability(mechanism, "audit_setting")
    if declared is not None:
        return declared
    radius = float(mechanism.params.get("clip", 1.0) or 1.0)
    # pairs in the l2 ball of radius clip also lie in the l-infinity ball of a per-coordinate clip
    norm = mechanism.clip_norm if mechanism.clip_norm in ("l1", "l2") else "l2"
    return AuditSetting(2, 2 * radius, norm, radius, 2, beyond_clip=True,
                        note=f"{GENERIC_NOTE}: d = 2, the {norm} ball of radius {radius:g}, pairs 2 radius apart")


def is_generic(setting: AuditSetting) -> bool:
    """Whether ``setting`` is the generic default (the mechanism declared none)."""
    return setting.note.startswith(GENERIC_NOTE)


def setting_pairs(setting: AuditSetting, *, random_directions: int = 2, seed: int = 0) -> list[NeighbouringPair]:
    """The candidate neighbouring pairs of ``setting`` (``attacks.neighbouring_pairs``)."""
    return neighbouring_pairs(
        setting.dimension,
        sensitivity=setting.sensitivity,
        norm=setting.norm,
        radius=setting.radius,
        block=setting.block,
        random_directions=random_directions,
        same_norm=setting.same_norm,
        beyond_clip=setting.beyond_clip,
        quantizer_step=setting.quantizer_step,
        quantizer_offset=setting.quantizer_offset,
        seed=seed,
    )
