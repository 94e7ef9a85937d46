"""The Flower backend's settings and vocabulary, without Flower: the ``[flower]`` table (``FlowerConfig``), the round
protocols that run as Flower's own strategies (``FLOWER_COUNTERPARTS``) and the check of a run's ``[training]``
against them. ``auditkit.config`` validates with these (it sits above the FL engine: docs/guide/layout.md, "Layers");
``auditkit.flower.backend`` runs with them.
"""
from __future__ import annotations

import importlib
from dataclasses import dataclass

from auditkit.fl.spec import TrainingSpec

__all__ = ["FLOWER_COUNTERPARTS", "FlowerConfig", "check_training", "flower_counterpart"]

# auditkit round protocols that run on Flower as Flower's own strategies: protocol name -> "module:class" of the
# counterpart (imported when used: it imports Flower). The class has check_training(training) (the config's check)
# and for_run(mechanism, training, seed) (the backend's protocol: configure, aggregate, communicate for an empty
# round, client_mods), and mechanism_params(strategy, given) and release(strategy, round, replies, before) for
# AuditStrategy around a user's strategy.
FLOWER_COUNTERPARTS = {"central-noise": "auditkit.flower.central_dp:CentralNoiseOnFlower"}


@dataclass(frozen=True)
class FlowerConfig:
    """Flower's Simulation Engine, for ``training.backend = "flower"`` (``auditkit.flower.backend``): the Ray
    resources each client's ``ClientApp`` gets (Flower's ``client_resources``), and the address of an existing Ray
    cluster to run on (``host:port`` of its head node, or ``ray://host:port``; unset: start Ray on this machine)."""

    num_cpus: float = 1.0
    num_gpus: float = 0.0
    ray_address: str | None = None


def flower_counterpart(protocol: str | None) -> type | None:
    """The class that runs the auditkit round protocol named ``protocol`` as Flower's own strategies
    (:data:`FLOWER_COUNTERPARTS`); None when it has none."""
    path = FLOWER_COUNTERPARTS.get(protocol) if protocol is not None else None
    if path is None:
        return None
    module, _, name = path.partition(":")
    return getattr(importlib.import_module(module), name)


def check_training(protocol: str | None, training: TrainingSpec) -> None:
    """The ``[training]`` table fits the Flower counterpart of the round protocol named ``protocol``, if it has one
    (dp-fedavg: q K a whole number of clients, ``central_dp.sampled_clients``); ``ValueError`` naming the keys."""
    counterpart = flower_counterpart(protocol)
    if counterpart is not None:
        counterpart.check_training(training)
