"""Privacy and compression mechanisms for federated-learning updates, behind one registry.

    from auditkit import mechanisms
    m = mechanisms.create("gaussian", sigma=0.1, clip=1.0)
    enc = m.encode(x, seed)              # client: a real message, enc.num_bits == 8 * len(enc.to_bytes())
    x_hat = m.decode(enc, seed)          # server: float32 CPU tensor, same length as x
    m.guarantee().summary()              # the analytic claim

This package imports nothing from the rest of the toolkit. Every module in it is imported here, so a mechanism
is added by writing one module with a ``@register``-ed ``Mechanism`` subclass (and its tests): nothing else
changes. Mechanisms outside the package are plugins (``auditkit.mechanisms.registry``: ``load_plugins`` and the
``auditkit.mechanisms`` entry points).
"""

import importlib
import pkgutil

from auditkit.mechanisms.base import Mechanism, Param
from auditkit.mechanisms.capabilities import (
    AuditSetting,
    BatchSampling,
    SideValues,
    LogDensity,
    Tiling,
    claim_event,
    pure_epsilon_event,
    refused,
)
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.views import View
from auditkit.mechanisms.tradeoff import EpsDeltaTradeOff, GaussianTradeOff, LaplaceTradeOff, ProfileTradeOff, TradeOff
from auditkit.mechanisms.message import FloatMessage, Message
from auditkit.mechanisms.protocol import (
    ProtocolContext,
    informed_aggregate,
    RoundOutcome,
    protocol_class,
    protocol_names,
    protocol_tables,
    register_protocol,
)
from auditkit.mechanisms.randomness import derive_seed, generator, private_generator, reproducible
from auditkit.mechanisms.registry import (
    capability,
    declared,
    MechanismInfo,
    PluginCodeError,
    PluginError,
    at_epsilon,
    calibrate,
    create,
    describe,
    load_plugins,
    mechanism_class,
    names,
    origin,
    preflight,
    reference_update,
    register,
)

for _module in pkgutil.iter_modules(__path__):  # importing a module registers its mechanisms
    importlib.import_module(f"{__name__}.{_module.name}")

__all__ = [
    "View",
    "EpsDeltaTradeOff",
    "GaussianTradeOff",
    "LaplaceTradeOff",
    "ProfileTradeOff",
    "TradeOff",
    "informed_aggregate",
    "AuditSetting",
    "BatchSampling",
    "SideValues",
    "LogDensity",
    "Mechanism",
    "Param",
    "PrivacyGuarantee",
    "ProtocolContext",
    "RoundOutcome",
    "Message",
    "FloatMessage",
    "MechanismInfo",
    "PluginCodeError",
    "PluginError",
    "Tiling",
    "capability",
    "claim_event",
    "at_epsilon",
    "calibrate",
    "create",
    "declared",
    "describe",
    "load_plugins",
    "protocol_class",
    "protocol_names",
    "protocol_tables",
    "register_protocol",
    "mechanism_class",
    "reference_update",
    "names",
    "origin",
    "preflight",
    "pure_epsilon_event",
    "refused",
    "register",
    "derive_seed",
    "generator",
    "private_generator",
    "reproducible",
]
