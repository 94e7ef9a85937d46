"""Whether Flower's simulation engine is installed: ``auditkit[flower]`` is an optional extra.

The core install never imports ``flwr``; everything in ``auditkit.flower`` that needs it calls
:func:`require_flower` first, so a missing extra is one line naming the fix rather than a traceback.
"""
from __future__ import annotations

import importlib.util

__all__ = ["FLOWER_EXTRA", "FlowerNotInstalled", "flower_missing", "require_flower"]

FLOWER_EXTRA = "pip install 'auditkit[flower]'"


class FlowerNotInstalled(ImportError):
    """``flwr`` (or Ray, its simulation extra) is not installed."""


def flower_missing() -> str | None:
    """What is missing for Flower's Simulation Engine: ``None`` when ``flwr`` and Ray are both importable."""
    if importlib.util.find_spec("flwr") is None:
        return "Flower (flwr)"
    if importlib.util.find_spec("ray") is None:
        return "Ray (Flower's simulation extra, flwr[simulation])"
    return None


def require_flower() -> None:
    """Raise `FlowerNotInstalled` (one line: what is missing, how to install it) unless Flower can run."""
    missing = flower_missing()
    if missing:
        raise FlowerNotInstalled(f"auditkit.flower needs {missing}: {FLOWER_EXTRA}")
