"""The client side for Flower users' own apps: a mod that sends the trained model only as a mechanism's message.

``mechanism_mod("jopeq-laplace", seed=0, eps=3.0, bits=8)`` wraps a ``ClientApp``'s train handler: the handler
trains as usual and replies with its model (``"arrays"``); the mod computes the update x = trained - global,
encodes it with the mechanism under the seed client k shares with the server in round t
(``auditkit.fl.aggregation.shared_seed``: k = the node's ``partition-id``, t = the ``server-round`` Flower's
strategies put in ``"config"``), and replaces the model by the message's real bytes (``records.PAYLOAD``). The
server's ``AuditStrategy`` decodes them. Nothing but the payload, the client's metrics and config leave.

Ground truth for the audit: when the handler calls :func:`attach_training_images` and the mod has a
``record_dir``, the mod writes the true update and those images for the ``record_rounds`` to the recording
(never into the message).
"""
from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from auditkit.flower.install import require_flower

require_flower()

from flwr.app import Array, ArrayRecord, Context, Message, MessageType, RecordDict  # noqa: E402

from auditkit.fl.aggregation import UplinkProtocol  # noqa: E402
from auditkit.flower.recording import write_truth  # noqa: E402
from auditkit.flower.records import PAYLOAD, TRUTH, flatten_record, payload_record  # noqa: E402
from auditkit.stages.train import client_mechanism  # noqa: E402

__all__ = ["attach_training_images", "mechanism_mod"]


def attach_training_images(content: RecordDict, images: torch.Tensor) -> None:
    """Put the images a train handler trained on this round into its reply ``content`` (ground truth for scoring
    the audit's attacks); ``mechanism_mod`` removes them before the reply leaves the client."""
    content[TRUTH] = ArrayRecord({"images": Array(images.detach().float().cpu().numpy())})


def mechanism_mod(mechanism: str, *, seed: int, record_dir: str | Path | None = None,
                  record_rounds: Iterable[int] = (), **params: Any):
    """A Flower client mod encoding each trained model's update with the registered ``mechanism``.

    Args:
        mechanism: a registered mechanism name (``auditkit mechanisms``; plugins once loaded).
        seed: the run's seed, shared with the server's ``AuditStrategy``.
        record_dir: where to write ground truth for ``auditkit audit --recorded`` (None: nothing is written).
        record_rounds: the rounds whose ground truth is written (the strategy's ``record_rounds``).
        params: the mechanism's parameters.
    """
    protocol = UplinkProtocol(client_mechanism(mechanism, seed, params), seed)
    rounds = {int(r) for r in record_rounds}

    def encode_update(message: Message, context: Context, call_next) -> Message:
        reply = call_next(message, context)
        if message.metadata.message_type != MessageType.TRAIN or reply.has_error():
            return reply
        client = int(context.node_config["partition-id"])
        round_ = int(message.content["config"]["server-round"])
        update = flatten_record(reply.content["arrays"]) - flatten_record(message.content["arrays"])
        payload = protocol.encode(update, client, round_)
        truth = reply.content.array_records.get(TRUTH)
        if record_dir is not None and round_ in rounds:
            images = None if truth is None else torch.from_numpy(truth["images"].numpy())
            write_truth(record_dir, round_, client, update=update, images=images)
        content = RecordDict({key: record for key, record in reply.content.items() if key not in ("arrays", TRUTH)})
        content[PAYLOAD] = payload_record(payload, client, round_)
        reply.content = content
        return reply

    return encode_update
