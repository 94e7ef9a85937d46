"""``none``: plain federated learning, the update sent as it is."""

from __future__ import annotations

import numpy as np
import torch

from auditkit.mechanisms.base import Mechanism, as_update
from auditkit.mechanisms.capabilities import AuditSetting, Tiling
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.message import FloatMessage
from auditkit.mechanisms.registry import register


@register
class Identity(Mechanism):
    """Identity: the server receives float32(x), 32 bits per coordinate plus a 5-byte header."""

    name = "none"
    summary = "no mechanism: the update is sent as float32 (no privacy, no compression)"
    message_type = FloatMessage

    def encode(self, x: torch.Tensor, seed: int) -> FloatMessage:
        return FloatMessage(as_update(x).numpy().astype(np.float32))

    def decode(self, enc: FloatMessage, seed: int) -> torch.Tensor:
        self._check_message(enc)
        return enc.to_tensor()

    def guarantee(self) -> PrivacyGuarantee:
        return PrivacyGuarantee.no_privacy("the server sees the exact update")

    def tiling(self) -> Tiling:
        return Tiling(block=1, why="deterministic per coordinate")

    def audit_setting(self) -> AuditSetting:
        return AuditSetting(2, 2.0, "l2", 1.0, 2, note="no claim: any pair is told apart")
