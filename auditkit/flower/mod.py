"""The client side for Flower users' own apps: a mod that sends the trained model only as a mechanism's message,
and one that only records the ground truth of an app whose model leaves as it is (Flower's central-DP wrappers).

``mechanism_mod("jopeq-laplace", seed=0, eps=3.0, bits=8)`` wraps a ``ClientApp``'s train handler: the handler
trains as usual and replies with its model (``"arrays"``); the mod computes the update x = trained - global,
encodes it with the mechanism under the seed client k shares with the server in round t
(``auditkit.fl.aggregation.shared_seed``: k = the node's ``partition-id``, t = the ``server-round`` Flower's
strategies put in ``"config"``), and replaces the model by the message's real bytes (``records.PAYLOAD``). The
server's ``AuditStrategy`` decodes them. Nothing but the payload, the client's metrics and config leave.

Ground truth for the audit: when the handler calls :func:`attach_training_images` and the mod has a
``record_dir``, the mod writes the true update and those images for the ``record_rounds`` to the recording
(never into the message).

An app on Flower's ``DifferentialPrivacyClientSideFixedClipping`` / ``ServerSideFixedClipping`` sends its model
itself (dp-fedavg's message, clipped by ``fixedclipping_mod`` for client-side clipping): ``ground_truth_mod``
writes the same ground truth and takes the images out of the reply, and goes inside Flower's mod,
``@app.train(mods=[fixedclipping_mod, ground_truth_mod(...)])``, so that it sees the unclipped model and
``fixedclipping_mod`` the single ``ArrayRecord`` it requires (a train-handler mod: ``fixedclipping_mod`` refuses
evaluation messages, which carry no ``clipping_norm``). Its client ids are Flower node ids, which is how
``AuditStrategy`` knows the senders of such replies.
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
from auditkit.fl.aggregation import client_mechanism  # noqa: E402

__all__ = ["attach_training_images", "ground_truth_mod", "mechanism_mod"]


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
        update = _keep_ground_truth(message, reply, client, round_, record_dir, rounds)
        payload = protocol.encode(update, client, round_)
        content = RecordDict({key: record for key, record in reply.content.items() if key != "arrays"})
        content[PAYLOAD] = payload_record(payload, client, round_)
        reply.content = content
        return reply

    return encode_update


def ground_truth_mod(*, record_dir: str | Path, record_rounds: Iterable[int] = (1,)):
    """A Flower client mod writing each trained model's true update, and the images :func:`attach_training_images`
    attached, to ``record_dir`` for the ``record_rounds``, for an app whose model leaves as it is (Flower's
    central-DP wrappers, audited through ``AuditStrategy``). The client is its node id (``context.node_id``, the
    ``src_node_id`` the server sees). Put it inside Flower's clipping mod: ``@app.train(mods=[fixedclipping_mod,
    ground_truth_mod(...)])``."""
    rounds = {int(r) for r in record_rounds}

    def record_truth(message: Message, context: Context, call_next) -> Message:
        reply = call_next(message, context)
        if message.metadata.message_type == MessageType.TRAIN and not reply.has_error():
            round_ = int(message.content["config"]["server-round"])
            _keep_ground_truth(message, reply, int(context.node_id), round_, record_dir, rounds)
        return reply

    return record_truth


def _keep_ground_truth(message: Message, reply: Message, client: int, round_: int, record_dir: str | Path | None,
                       rounds: set[int]) -> torch.Tensor:
    """The reply's true update (the trained model minus the one received), written to ``record_dir`` with the
    attached images when ``round_`` is one of ``rounds``; the images are taken out of the reply."""
    update = flatten_record(reply.content["arrays"]) - flatten_record(message.content["arrays"])
    truth = reply.content.array_records.get(TRUTH)
    if record_dir is not None and round_ in rounds:
        images = None if truth is None else torch.from_numpy(truth["images"].numpy())
        write_truth(record_dir, round_, client, update=update, images=images)
    if truth is not None:
        del reply.content[TRUTH]
    return update
