"""auditkit.flower for Flower users' own apps: the client mod, the strategy wrapper, the recording and
`auditkit audit --recorded`, on a small real Flower app run by Flower's Simulation Engine."""
import json
import subprocess
import sys

import pytest
import torch

pytestmark = [pytest.mark.flower, pytest.mark.usefixtures("flower_installed")]

CLIENTS, ROUNDS, STEPS, LR, SEED = 4, 2, 3, 0.1, 7
MECHANISM = {"name": "sdq", "bits": 6, "support": 0.5}


def _tiny_app(record_dir):
    """A usual Flower app (ClientApp + ServerApp with FedAvg) on the embedded 8x8 digits, with auditkit's mod and
    strategy wrapper; returns the apps and what the server ended with."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import FedAvg

    from auditkit.data import load_dataset
    from auditkit.flower import AuditStrategy, attach_training_images, mechanism_mod
    from auditkit.models import create_model

    data = load_dataset("digits")
    params = {k: v for k, v in MECHANISM.items() if k != "name"}
    make = lambda: create_model("linear", input_shape=data.input_shape, num_classes=10)  # noqa: E731
    client = ClientApp(mods=[mechanism_mod(MECHANISM["name"], seed=SEED, record_dir=record_dir,
                                           record_rounds=(1, 2), **params)])

    @client.train()
    def train(message, context):
        k = int(context.node_config["partition-id"])
        model = make()
        model.load_state_dict(message.content["arrays"].to_torch_state_dict())
        x, y = data.train.x[k::CLIENTS][:20], data.train.y[k::CLIENTS][:20]
        optimizer = torch.optim.SGD(model.parameters(), lr=LR)
        for step in range(STEPS):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[step:step + 1]), y[step:step + 1]).backward()
            optimizer.step()
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"num-examples": 10 + k})})  # unequal FedAvg weights
        attach_training_images(content, x[:STEPS])
        return Message(content, reply_to=message)

    server = ServerApp()
    ended = {"reply_keys": []}

    class Watched(AuditStrategy):  # what reaches the server, before the wrapper decodes it
        def aggregate_train(self, server_round, replies):
            replies = list(replies)
            ended["reply_keys"] += [set(m.content.keys()) for m in replies]
            return super().aggregate_train(server_round, replies)

    @server.main()
    def main(grid, context):
        strategy = Watched(
            # min_train_nodes: FedAvg sizes its sample from the nodes connected BEFORE it waits for them (flwr
            # 1.41), so a slow start would sample its minimum (2) in round 1 instead of every client
            FedAvg(fraction_train=1.0, fraction_evaluate=0.0, min_available_nodes=CLIENTS, min_train_nodes=CLIENTS),
            MECHANISM["name"],
            seed=SEED, record_dir=record_dir, record_rounds=(1, 2),
            config={"data": {"dataset": "digits"}, "training": {"model": "linear", "clients": CLIENTS, "tau": STEPS,
                                                                 "batch_size": 1, "lr": LR, "momentum": 0.0}},
            **params)
        initial = ArrayRecord(make().state_dict())
        ended["initial"] = initial
        ended["result"] = strategy.start(grid=grid, initial_arrays=initial, num_rounds=ROUNDS,
                                         train_config=ConfigRecord({"lr": LR}))

    return client, server, ended


@pytest.fixture(scope="module")
def recorded_app(tmp_path_factory):
    from flwr.simulation import run_simulation

    record_dir = tmp_path_factory.mktemp("app") / "recording"
    client, server, ended = _tiny_app(record_dir)
    run_simulation(server_app=server, client_app=client, num_supernodes=CLIENTS,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    return record_dir, ended


def test_strategy_decodes_aggregates_and_records_the_server_view(recorded_app):
    from auditkit.flower.records import flatten_record
    from auditkit.flower.recording import load_recording
    from auditkit.mechanisms import create

    from auditkit.flower.records import PAYLOAD

    record_dir, ended = recorded_app
    # the mod let only the payload and the metrics leave each client: no model, no ground truth images
    assert ended["reply_keys"] == [{"metrics", PAYLOAD}] * (CLIENTS * ROUNDS)
    recording = load_recording(record_dir)
    assert [r["round"] for r in recording.rounds] == [1, 2] and recording.recorded_rounds == [1, 2]
    first, second = recording.server_round(1), recording.server_round(2)
    assert sorted(first["clients"]) == list(range(CLIENTS))
    torch.testing.assert_close(first["global_before"], flatten_record(ended["initial"]))
    # the server's view is the decoded update: within half an SDQ step of the client's true update, not equal to it
    step = 2 * MECHANISM["support"] / (2 ** MECHANISM["bits"] - 1)
    truths = torch.stack([recording.truth(1, c)["update"] for c in first["clients"]])
    error = (first["server"] - truths).abs()
    assert error.max() <= step / 2 + 1e-6 and error.max() > 0
    # FedAvg (num-examples 10 + k) of the decoded updates moved the model from round 1's to round 2's start
    weights = torch.tensor([10.0 + c for c in first["clients"]])
    expected = first["global_before"] + (weights / weights.sum()) @ first["server"]
    torch.testing.assert_close(second["global_before"], expected, rtol=0, atol=1e-5)
    bits = recording.rounds[0]["bits"]
    assert len(bits) == CLIENTS and all(b < 32 * first["server"].shape[1] for b in bits)  # compressed
    assert create("sdq", **{k: v for k, v in MECHANISM.items() if k != "name"}).guarantee().epsilon is None


def test_audit_recorded_runs_every_stage_on_the_recording(recorded_app, tmp_path):
    record_dir, _ = recorded_app
    config = tmp_path / "audit.toml"
    config.write_text('title = "tiny recorded app"\n[inversion]\ntargets = 2\niterations = 20\n'
                      '[probe]\ntargets = 2\niterations = 20\n[identification]\ncandidates = [4]\ntrials = 20\n'
                      '[distinguish]\ntrials = 1000\n')
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", str(config), "--recorded",
                             str(record_dir), "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    document = json.loads((out / "results.json").read_text())
    setting = document["settings"][0]
    assert setting["mechanism"]["name"] == "sdq"
    assert setting["inversion"]["round"] == 1 and len(setting["inversion"]["targets"]) == 2
    assert [r["round"] for r in setting["training"]["rounds"]] == [1, 2]
    assert setting["training"]["final"]["bits_per_coordinate"] < 32
    assert setting["distinguish"] is not None and setting["probe"] is not None
    assert "recorded by a Flower app" in document["provenance"]["data"]["source"]
    assert (out / "report.html").is_file()


@pytest.mark.parametrize("extra, message", [
    (["--mechanism", "gaussian"], "--recorded takes the data, training, mechanism and seed from the recording; "
                                  "leave out --mechanism"),
    (["--rounds", "3"], "leave out --rounds"),
    (["--dp-sgd-noise-multiplier", "1"], "leave out --dp-sgd-noise-multiplier"),  # how the app trained is the app's
])
def test_audit_recorded_refuses_app_settings_from_the_command_line(recorded_app, tmp_path, extra, message):
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", "--recorded", str(recorded_app[0]),
                             "--out", str(out), *extra], capture_output=True, text=True, timeout=300)
    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: ") and message in lines[0]
    assert not out.exists()
