"""The adversaries' views: what each one observes of a federated round (one vocabulary for mechanisms, the FL
engine, attacks, results and reports)."""
from __future__ import annotations

import enum

__all__ = ["THREAT_MODELS", "View"]


class View(enum.StrEnum):
    """What an adversary observes; a mechanism's ``view`` is the one its claim covers."""

    SERVER = "server"
    EAVESDROPPER = "eavesdropper"
    PEER = "peer"
    PUBLIC = "public"
    AGGREGATE = "aggregate"


THREAT_MODELS = {
    View.SERVER: "the aggregator: each client's decoded update and the side information sent in clear",
    View.EAVESDROPPER: "someone on the uplink without the shared seed: the encoded messages only",
    View.PEER: "an honest-but-curious client: the aggregate / next global model",
    View.PUBLIC: "anyone after training: the final model",
}
"""Each view a training run records, and who holds it (a results document's ``provenance.threat_models``)."""
