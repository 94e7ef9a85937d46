"""MSP-FL's round protocol (paper 004): model splitting and K_t consensus rounds instead of one upload.

Per learning round the selected clients' models w_i = global_params + updates[i] (for msp-laplace the update is
l1-clipped first, ``local_models``) go through ``mechanism.run_consensus``: each client splits its model, uploads
the visible part, and runs K_t consensus rounds with the server, uploading K_t + 1 real messages in all. The
server's new model is w[K_t] = mean_i alpha_i[K_t] (eq. 6), so the global update is w[K_t] - global_params.

The mean is plain (1/M, eq. 4 and 6): the paper samples clients with probability p_i and averages uniformly
(Lemma 1), so the data-size ``weights`` the training loop passes are not used here.

Randomness: client ``c`` in round ``t`` is keyed ``derive_seed(seed, "msp", t, c)``; its split, hidden m_c and
rounding come from the mechanism's private streams under that key (see ``auditkit.mechanisms.msp``).
"""
from __future__ import annotations

import torch

from auditkit.mechanisms.protocol import ProtocolContext, RoundOutcome, register_protocol
from auditkit.mechanisms.msp import MSPHidden, consensus_limit
from auditkit.mechanisms.randomness import derive_seed
from auditkit.mechanisms.views import View

__all__ = ["ConsensusProtocol"]


def _relative(error: torch.Tensor, reference: torch.Tensor) -> float:
    """||error|| / ||reference||; a zero reference gives 0 for a zero error and inf otherwise."""
    size, scale = error.norm().item(), reference.norm().item()
    if scale > 0:
        return size / scale
    return 0.0 if size == 0 else float("inf")


@register_protocol
class ConsensusProtocol:
    """The round protocol of the mechanisms with ``protocol = "consensus"`` (msp, msp-laplace, mspdq).

    Args:
        mechanism: the model-splitting mechanism (its ``run_consensus`` and ``local_models``).
        seed: the experiment's base seed.

    ``communicate`` returns the aggregate, per-client bits over all K_t + 1 uploads, the views
    ``{"server": transcript, "eavesdropper": transcript}`` (the public ``MSPTranscript``: the server sees every
    upload and its broadcasts, and without encryption an eavesdropper sees the same) and the stats
    ``uploads`` (K_t + 1), ``consensus_gap`` (||w[K] - limit|| / ||limit - global||, the consensus error on the
    update), ``limit_bias`` (||limit - FedAvg mean|| / ||FedAvg mean - global||, nonzero when the m_i differ),
    ``aggregate_error`` (||w[K] - FedAvg mean|| / ||FedAvg mean - global||), ``overloads`` (mspdq clamps) and
    ``mean_m``. ``hidden`` maps each round to its ``MSPHidden`` (the clients' secrets: ground truth for audits).
    """

    name = "consensus"  # the protocol's name in results
    options = ()  # no config options and no table of its own
    table = None

    @classmethod
    def build(cls, mechanism, context: ProtocolContext) -> "ConsensusProtocol":
        """The consensus rounds of ``mechanism``, keyed by the run's seed."""
        return cls(mechanism, context.seed)

    def __init__(self, mechanism, seed: int) -> None:
        if mechanism.protocol != "consensus":
            raise ValueError(
                f"ConsensusProtocol needs a consensus mechanism (msp, msp-laplace, mspdq), got {mechanism!r}"
            )
        self.mechanism = mechanism
        self.seed = seed
        self.hidden: dict[int, MSPHidden] = {}

    def communicate(
        self, updates: torch.Tensor, clients: list[int], weights: torch.Tensor, round_: int,
        *, global_params: torch.Tensor,
    ) -> RoundOutcome:
        base = global_params.detach().cpu().to(torch.float64)
        models = self.mechanism.local_models(updates, global_params)
        keys = [derive_seed(self.seed, "msp", round_, c) for c in clients]
        transcript = self.mechanism.run_consensus(models, keys, clients=clients)
        self.hidden[round_] = transcript.hidden
        limit = consensus_limit(models, transcript.hidden.m)
        fedavg = models.mean(0)
        public = transcript.public()
        return RoundOutcome(
            aggregate=(transcript.aggregate - base).to(updates.device, updates.dtype),
            bits=transcript.bits,
            views={View.SERVER: public, View.EAVESDROPPER: public},
            stats={
                "uploads": float(transcript.uploads),
                "consensus_gap": _relative(transcript.aggregate - limit, limit - base),
                "limit_bias": _relative(limit - fedavg, fedavg - base),
                "aggregate_error": _relative(transcript.aggregate - fedavg, fedavg - base),
                "overloads": float(transcript.overloads),
                "mean_m": transcript.hidden.m.double().mean().item(),
            },
        )
