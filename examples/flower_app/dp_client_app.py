"""The ClientApp of the central-DP variant: the same training, the model sent as it is, clipped by Flower's
`fixedclipping_mod` (the norm comes from the server's DP wrapper); auditkit's `ground_truth_mod` inside it keeps the
unclipped update and the images for the audit (written to the recording, never sent). Both are the train handler's
mods: `fixedclipping_mod` refuses any message without the wrapper's `clipping_norm`, evaluation ones included."""
from __future__ import annotations

import torch
from flwr.app import ArrayRecord, Context, Message, MetricRecord, RecordDict
from flwr.clientapp import ClientApp
from flwr.clientapp.mod import fixedclipping_mod

from auditkit.flower import attach_training_images, ground_truth_mod
from task import RECORD_DIR, RECORD_ROUNDS, SEED, client_data, make_model, test, train

app = ClientApp()


@app.train(mods=[fixedclipping_mod, ground_truth_mod(record_dir=RECORD_DIR, record_rounds=RECORD_ROUNDS)])
def train_handler(message: Message, context: Context) -> Message:
    partition_id = int(context.node_config["partition-id"])
    round_ = int(message.content["config"]["server-round"])
    model = make_model()
    model.load_state_dict(message.content["arrays"].to_torch_state_dict())
    x, y = client_data(partition_id)
    generator = torch.Generator().manual_seed(SEED * 1_000_003 + round_ * 1_009 + partition_id)
    loss, images = train(model, x, y, generator)
    # FedAvg weight 1 for every client: the mean's sensitivity is C / n, as the DP wrapper's noise assumes
    content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                          "metrics": MetricRecord({"train-loss": loss, "num-examples": 1})})
    attach_training_images(content, images)  # ground truth for the audit; ground_truth_mod keeps it on the client
    return Message(content, reply_to=message)


@app.evaluate()
def evaluate_handler(message: Message, context: Context) -> Message:
    model = make_model()
    model.load_state_dict(message.content["arrays"].to_torch_state_dict())
    loss, accuracy = test(model)
    return Message(RecordDict({"metrics": MetricRecord({"loss": loss, "accuracy": accuracy, "num-examples": 1})}),
                   reply_to=message)
