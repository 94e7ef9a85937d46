"""Privacy and compression mechanisms for federated-learning updates, behind one registry.

    import mechanisms
    m = mechanisms.create("gaussian", sigma=0.1, clip=1.0)
    enc = m.encode(x, seed)              # client: a real message, enc.num_bits == 8 * len(enc.to_bytes())
    x_hat = m.decode(enc, seed)          # server: float32 CPU tensor, same length as x
    m.guarantee().summary()              # the analytic claim

This package imports nothing from the rest of the toolkit. To add a mechanism, write its module with a
``@register``-ed ``Mechanism`` subclass and add the module to the first import line below.
"""

# Registered mechanisms: importing a module registers its classes.
from mechanisms import additive, cepam, dpsq, identity, jopeq, jopeq_exact, msp, noisy_sdq, sdq, tdist  # noqa: F401
from mechanisms.base import Mechanism, Param
from mechanisms.guarantee import PrivacyGuarantee
from mechanisms.message import FloatMessage, Message
from mechanisms.randomness import derive_seed, generator
from mechanisms.registry import MechanismInfo, create, describe, names, reference_update, register

__all__ = [
    "Mechanism",
    "Param",
    "PrivacyGuarantee",
    "Message",
    "FloatMessage",
    "MechanismInfo",
    "create",
    "describe",
    "reference_update",
    "names",
    "register",
    "derive_seed",
    "generator",
]
