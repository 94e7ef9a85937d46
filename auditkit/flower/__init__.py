"""auditkit and Flower (``pip install 'auditkit[flower]'``).

Three ways in:

* **auditkit on Flower**: ``[training] backend = "flower"`` (``--backend flower``) runs auditkit's FL training on
  Flower's Simulation Engine with Ray (``auditkit.flower.backend``); ``[flower]`` sets the client resources and
  the Ray cluster.
* **a Flower app audited by auditkit**: ``mechanism_mod`` on the ``ClientApp`` encodes each update with a
  registered mechanism; ``AuditStrategy`` around the ``ServerApp``'s strategy decodes, aggregates and records the
  server's view; ``auditkit audit --recorded DIR`` audits the recording (``examples/flower_app``);
* **auditkit's dp-fedavg as Flower's own central DP**: with ``backend = "flower"`` its rounds run Flower's
  ``DifferentialPrivacy{Client,Server}SideFixedClipping`` (``auditkit.flower.central_dp``); a user's app on those
  wrappers is recorded by ``AuditStrategy`` around the wrapper with ``ground_truth_mod`` on the clients.

Importing ``mechanism_mod``, ``ground_truth_mod``, ``attach_training_images`` or ``AuditStrategy`` without Flower
installed raises ``FlowerNotInstalled`` with the install command; the recording format
(``auditkit.flower.recording``) needs no Flower.
"""
from __future__ import annotations

from typing import Any

from auditkit.flower.install import FlowerNotInstalled, flower_missing, require_flower

__all__ = ["AuditStrategy", "FlowerNotInstalled", "attach_training_images", "flower_missing", "ground_truth_mod",
           "mechanism_mod", "require_flower"]

_LAZY = {"mechanism_mod": "auditkit.flower.mod", "attach_training_images": "auditkit.flower.mod",
         "ground_truth_mod": "auditkit.flower.mod", "AuditStrategy": "auditkit.flower.strategy"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'auditkit.flower' has no attribute {name!r}")
