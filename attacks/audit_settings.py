"""Where a mechanism's claim is tested: its declared ``AuditSetting``, or the generic one, and the pairs it gives.

A mechanism declares the setting of its claim (``Mechanism.audit_setting()``, a ``auditkit.mechanisms.AuditSetting``:
input dimension, ball, shift, block, pair options; e.g. the JoPEQ family tests one scaled block at zeta = 1, DP-SQ
the central quantizer cell). ``audit_setting(m)`` returns it, or, when the mechanism declares none, the generic
setting, marked ``GENERIC_NOTE`` so that reports say a generic default stood in: d = 2, the ball of radius
``clip`` (1 without a clip parameter), pairs up to its diameter apart, inputs beyond the ball. Its norm is the claim's:
the one its sensitivity text names (``auditkit.mechanisms.guarantee.stated_norm``: "l1 clip 0.5" is tested in the l1 ball,
so that every pair tried is a pair of neighbours the claim covers; an l-infinity claim in the l-infinity ball, its
pairs at the cube's corners); else the mechanism's ``clip_norm``; else l2, assumed
(``NORM_ASSUMED``). The setting's note says
which.

``setting_pairs(setting)`` builds the candidate pairs (``auditkit.attacks.neighbouring_pairs``) that
``auditkit.attacks.audit_mechanism`` tries.
"""

from __future__ import annotations

from auditkit.attacks.neighbouring_pairs import NeighbouringPair, neighbouring_pairs
from auditkit.mechanisms import AuditSetting, Mechanism, capability
from auditkit.mechanisms.guarantee import stated_norm

__all__ = ["GENERIC_NOTE", "NORM_ASSUMED", "AuditSetting", "audit_setting", "is_generic", "setting_pairs"]

GENERIC_NOTE = "generic default: the mechanism declares no audit setting"
NORM_ASSUMED = "names no norm: l2 assumed"  # in a generic note: the pairs are neighbours only if the claim's are l2


def audit_setting(mechanism: Mechanism) -> AuditSetting:
    """The setting ``mechanism`` declares, or the generic one (module docstring)."""
    declared = capability(mechanism, "audit_setting")
    if declared is not None:
        return declared
    radius = float(mechanism.params.get("clip", 1.0) or 1.0)
    norm, why = _generic_norm(mechanism)
    return AuditSetting(2, 2 * radius, norm, radius, 2, beyond_clip=True,
                        note=f"{GENERIC_NOTE}: d = 2, the {norm} ball of radius {radius:g}, pairs up to "
                             f"{2 * radius:g} apart (its diameter); {norm}: {why}")


def _generic_norm(mechanism: Mechanism) -> tuple[str, str]:
    """The generic setting's norm ("l1" or "l2") and where it comes from, in words (module docstring)."""
    sensitivity = mechanism.guarantee().sensitivity
    stated, clip_norm = stated_norm(sensitivity), mechanism.clip_norm
    clips = f"; the mechanism clips in {clip_norm}" if clip_norm not in (None, stated) else ""
    if stated in ("l1", "l2", "linf"):
        return stated, f"the norm of the claim's sensitivity {sensitivity!r}{clips}"
    if clip_norm in ("l1", "l2", "linf"):
        return clip_norm, "the mechanism's clip norm"
    return "l2", f"the claim's sensitivity {sensitivity!r} {NORM_ASSUMED}"


def is_generic(setting: AuditSetting) -> bool:
    """Whether ``setting`` is the generic default (the mechanism declared none)."""
    return setting.note.startswith(GENERIC_NOTE)


def setting_pairs(setting: AuditSetting, *, random_directions: int = 2, seed: int = 0) -> list[NeighbouringPair]:
    """The candidate neighbouring pairs of ``setting`` (``auditkit.attacks.neighbouring_pairs``)."""
    return neighbouring_pairs(
        setting.dimension,
        sensitivity=setting.sensitivity,
        norm=setting.norm,
        radius=setting.radius,
        block=setting.block,
        random_directions=random_directions,
        same_norm=setting.same_norm,
        beyond_clip=setting.beyond_clip,
        add_remove=setting.add_remove,
        quantizer_step=setting.quantizer_step,
        quantizer_offset=setting.quantizer_offset,
        seed=seed,
    )
