"""The ClientApp: a usual Flower client, plus auditkit's mod so that the trained model leaves only as the
mechanism's message."""
from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp

from auditkit.flower import attach_training_images, mechanism_mod
from task import (MECHANISM, MECHANISM_PARAMS, RECORD_DIR, RECORD_ROUNDS, SEED, client_data, make_model, test,
                  train)

app = ClientApp(mods=[mechanism_mod(MECHANISM, seed=SEED, record_dir=RECORD_DIR, record_rounds=RECORD_ROUNDS,
                                    **MECHANISM_PARAMS)])


@app.train()
def train_handler(message: Message, context: Context) -> Message:
    partition_id = int(context.node_config["partition-id"])
    round_ = int(message.content["config"]["server-round"])
    model = make_model()
    model.load_state_dict(message.content["arrays"].to_torch_state_dict())
    x, y = client_data(partition_id)
    generator = torch.Generator().manual_seed(SEED * 1_000_003 + round_ * 1_009 + partition_id)
    loss, images = train(model, x, y, generator)
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                          "metrics": MetricRecord({"train-loss": loss, "num-examples": len(y)})})
    attach_training_images(content, images)  # ground truth for the audit; the mod keeps it on the client
    return Message(content, reply_to=message)


@app.evaluate()
def evaluate_handler(message: Message, context: Context) -> Message:
    model = make_model()
    model.load_state_dict(message.content["arrays"].to_torch_state_dict())
    loss, accuracy = test(model)
    return Message(RecordDict({"metrics": MetricRecord({"loss": loss, "accuracy": accuracy, "num-examples": 1})}),
                   reply_to=message)
