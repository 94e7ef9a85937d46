"""dp-fedavg on Flower's own central-DP wrappers (``auditkit.flower.central_dp``): the noise law of Flower's
``DifferentialPrivacy{Server,Client}SideFixedClipping`` against the builtin protocol's, checked statistically
(fixed seeds; KS tests at p > 1e-3 over 3e5 coordinates, the std to 1 % where its standard error is 0.13 %), the
same clipping, the refusal of a fractional q K, and (Ray, marked ``flower``) a run of ``backend = "flower"`` and a
Flower app recorded through ``AuditStrategy`` and audited with ``audit --recorded``."""
import json
import subprocess
import sys

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.config import ConfigError, TrainingConfig, from_dict
from auditkit.fl.aggregation import build_protocol
from auditkit.mechanisms import ProtocolContext
from auditkit.mechanisms.additive import clip_l2

pytestmark = pytest.mark.usefixtures("flower_installed")

ROUNDS, SIZE = 100, 3000  # 3e5 residual coordinates per law, from 100 per-round seeds


@pytest.fixture
def server_process():
    """This process as a Flower ServerApp's (``TaskIdentity``: the run, node and task Flower's runtime sets), so
    that Flower's strategies build their messages without a SuperLink; restored afterwards."""
    from flwr.common.constant import SUPERLINK_NODE_ID
    from flwr.supercore.task_identity import TaskIdentity

    saved = (TaskIdentity._run_id, TaskIdentity._node_id, TaskIdentity._task_id)
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = 1, SUPERLINK_NODE_ID, 1
    yield
    TaskIdentity.run_id, TaskIdentity.node_id, TaskIdentity.task_id = saved


def _mechanism(clipping: str, z: float = 1.3, clip: float = 0.5):
    return mechanisms.create("dp-fedavg", noise_multiplier=z, clip=clip, clipping=clipping)


def _training(clients: int = 20, rate: float = 0.5) -> TrainingConfig:
    return TrainingConfig(clients=clients, participation="poisson", sample_rate=rate)


def _updates(round_: int, rows: int, clip: float) -> torch.Tensor:
    """Round ``round_``'s updates: half of norm 3 C (clipped), half of norm C / 2 (kept)."""
    x = torch.randn(rows, SIZE, generator=torch.Generator().manual_seed(round_), dtype=torch.float64)
    norms = torch.tensor([3 * clip if k % 2 else clip / 2 for k in range(rows)], dtype=torch.float64)
    return (norms[:, None] * x / x.norm(dim=1, keepdim=True)).float()


def _flower_round(protocol, round_: int, updates: torch.Tensor, before: torch.Tensor):
    """One round on the Flower counterpart: the wrapper's messages to ``len(updates)`` nodes, each client's reply
    (its model before + update, FedAvg weight 1) through Flower's own client mods (composed by Flower's
    ``make_ffn``, as ``ClientApp`` does), the wrapper's aggregation."""
    from flwr.app import ConfigRecord, Context, Message, MetricRecord, RecordDict
    from flwr.client.mod.utils import make_ffn

    from auditkit.flower.records import flat_record

    nodes = list(range(100, 100 + len(updates)))
    messages = protocol.configure(round_, flat_record(before), ConfigRecord({"lr": 0.1}), nodes)
    replies = []
    for message, update in zip(messages, updates, strict=True):
        def train(msg, context, update=update):
            return Message(RecordDict({"arrays": flat_record(before + update),
                                       "metrics": MetricRecord({"num-examples": 1})}), reply_to=msg)

        context = Context(run_id=1, node_id=message.metadata.dst_node_id, node_config={}, state=RecordDict(),
                          run_config={})
        replies.append(make_ffn(train, protocol.client_mods)(message, context))
    return protocol.aggregate(round_, replies, before)


@pytest.mark.parametrize("clipping, seed", [("server", 4), ("client", 5)])
def test_flowers_wrapper_has_the_builtins_noise_law_on_the_aggregate(server_process, clipping, seed):
    """100 rounds of m = q K = 10 replies (half clipped): Flower's release minus the mean of the clipped updates
    is N(0, (z C / m)^2) coordinate-wise, and has the law of the builtin protocol's residual aggregate - sum(clip)/m
    (two-sample KS)."""
    from auditkit.flower.central_dp import CentralNoiseOnFlower

    z, clip, m = 1.3, 0.5, 10
    mechanism = _mechanism(clipping, z, clip)
    flower = CentralNoiseOnFlower.for_run(mechanism, _training(), seed=seed)
    assert type(flower.strategy).__name__ == ("DifferentialPrivacyServerSideFixedClipping" if clipping == "server"
                                              else "DifferentialPrivacyClientSideFixedClipping")
    builtin = build_protocol(mechanism, ProtocolContext(seed=seed, clients=20, participation="poisson",
                                                        sample_rate=0.5))
    before = torch.randn(SIZE, generator=torch.Generator().manual_seed(0))
    ours, theirs = [], []
    for round_ in range(1, ROUNDS + 1):
        updates = _updates(round_, m, clip)
        clipped_mean = torch.stack([clip_l2(u.double(), clip) for u in updates]).mean(0)
        outcome = _flower_round(flower, round_, updates, before)
        theirs.append(outcome.aggregate.double() - clipped_mean)
        reference = builtin.communicate(updates, list(range(m)), torch.ones(m), round_, global_params=before)
        ours.append(reference.aggregate.double() - clipped_mean)
    flower_residual, builtin_residual = torch.cat(theirs).numpy(), torch.cat(ours).numpy()
    std = z * clip / m
    ks = stats.kstest(flower_residual / std, "norm")
    two_sample = stats.ks_2samp(flower_residual, builtin_residual)
    print(f"{clipping}: std ratio {flower_residual.std() / std:.5f}, KS p {ks.pvalue:.3g}, "
          f"two-sample KS p {two_sample.pvalue:.3g}")
    assert ks.pvalue > 1e-3 and two_sample.pvalue > 1e-3
    assert flower_residual.std() == pytest.approx(std, rel=0.01)
    assert outcome.stats == pytest.approx({"sampled": m, "noise_std_aggregate": std, "effective_noise_multiplier": z})
    # the views: what the server received (clipped by the clients' fixedclipping_mod, or raw), n_t x the release
    expected = torch.stack([clip_l2(u.double(), clip) for u in updates]) if clipping == "client" else updates.double()
    torch.testing.assert_close(outcome.views["server"].double(), expected, rtol=0, atol=1e-5)
    torch.testing.assert_close(outcome.views["aggregate"].double(), m * outcome.aggregate.double(), rtol=0, atol=1e-5)
    clipped = torch.stack([clip_l2(u.double(), clip) for u in updates])  # each client's update as the sum carries it
    noise = outcome.views["aggregate"].double() - clipped.sum(0)
    torch.testing.assert_close(outcome.views["aggregate-informed"].double(), clipped + noise, rtol=0, atol=1e-4)
    assert outcome.bits == [8 * len(p) for p in outcome.views["eavesdropper"]]
    assert all(b >= 32 * SIZE for b in outcome.bits)  # float32 arrays (and Flower's serialisation header)


@pytest.mark.parametrize("clipping", ["server", "client"])
def test_flowers_clipped_aggregate_equals_the_builtins_when_the_count_is_m(server_process, clipping):
    """z = 1e-9: no visible noise; with n_t = m the wrapper's mean of clipped updates is the builtin's sum / m."""
    from auditkit.flower.central_dp import CentralNoiseOnFlower

    mechanism = _mechanism(clipping, z=1e-9, clip=1.0)
    flower = CentralNoiseOnFlower.for_run(mechanism, _training(clients=8, rate=0.5), seed=0)
    builtin = build_protocol(mechanism, ProtocolContext(seed=0, clients=8, participation="poisson", sample_rate=0.5))
    updates, before = _updates(7, 4, clip=1.0), torch.zeros(SIZE)
    theirs = _flower_round(flower, 1, updates, before).aggregate
    ours = builtin.communicate(updates, [0, 1, 2, 3], torch.ones(4), 1, global_params=before).aggregate
    torch.testing.assert_close(theirs, ours, rtol=0, atol=1e-6)
    assert (updates.norm(dim=1) > 1.0).any() and (updates.norm(dim=1) < 1.0).any()  # both sides of the clip


def test_a_round_with_fewer_replies_than_m_has_the_effective_multiplier_z_n_over_m(server_process):
    """Flower averages over the n_t replies: the noise std on the aggregate stays z C / m, the multiplier on the
    sum n_t x release is z n_t / m (here 3 of m = 10)."""
    from auditkit.flower.central_dp import CentralNoiseOnFlower

    z, clip = 1.3, 0.5
    flower = CentralNoiseOnFlower.for_run(_mechanism("server", z, clip), _training(), seed=1)
    residuals = []
    for round_ in range(1, 31):
        updates = _updates(round_, 3, clip)
        outcome = _flower_round(flower, round_, updates, torch.zeros(SIZE))
        clipped_sum = torch.stack([clip_l2(u.double(), clip) for u in updates]).sum(0)
        residuals.append(outcome.views["aggregate"].double() - clipped_sum)
    residual = torch.cat(residuals)
    assert outcome.stats["effective_noise_multiplier"] == pytest.approx(z * 3 / 10)
    assert outcome.stats["noise_std_aggregate"] == pytest.approx(z * clip / 10)
    assert residual.std().item() == pytest.approx(z * 3 / 10 * clip, rel=0.02)  # SE 0.24 % at 9e4 coordinates


def test_the_same_seed_gives_the_same_release_on_flowers_wrapper(server_process):
    """NumPy is seeded per round from the run's seed: two runs with one seed release the same bits, another seed
    other ones."""
    from auditkit.flower.central_dp import CentralNoiseOnFlower

    updates, before = _updates(3, 10, clip=0.5), torch.zeros(SIZE)

    def released(seed: int, round_: int) -> torch.Tensor:
        flower = CentralNoiseOnFlower.for_run(_mechanism("server"), _training(), seed=seed)
        return _flower_round(flower, round_, updates, before).aggregate

    assert torch.equal(released(8, 2), released(8, 2))
    assert not torch.equal(released(8, 2), released(9, 2)) and not torch.equal(released(8, 2), released(8, 3))


def test_an_empty_round_releases_flowers_noise_reproducibly_and_leaves_numpy_as_it_was():
    from auditkit.flower.central_dp import CentralNoiseOnFlower

    z, clip = 2.0, 1.0
    flower = CentralNoiseOnFlower.for_run(_mechanism("client", z, clip), _training(clients=50, rate=0.2), seed=3)
    np.random.seed(11)
    expected_next = np.random.random()
    np.random.seed(11)
    empty = flower.communicate(torch.zeros(0, 100_000), [], torch.ones(0), 5)
    assert np.random.random() == expected_next  # the global generator's state is restored
    assert empty.aggregate.double().std().item() == pytest.approx(z * clip / 10, rel=0.01)  # z C / (q K)
    assert empty.stats == {"sampled": 0.0, "noise_std_aggregate": z * clip / 10, "effective_noise_multiplier": z}
    again = flower.communicate(torch.zeros(0, 100_000), [], torch.ones(0), 5).aggregate
    assert torch.equal(again, empty.aggregate)
    assert not torch.equal(flower.communicate(torch.zeros(0, 100_000), [], torch.ones(0), 6).aggregate, again)
    with pytest.raises(ValueError, match="releases the rounds nobody was sampled in"):
        flower.communicate(torch.zeros(1, 10), [0], torch.ones(1), 5)


def test_the_wrappers_parameters_are_dp_fedavgs_and_the_client_mods_follow_the_clipping():
    from flwr.clientapp.mod import fixedclipping_mod
    from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg

    from auditkit.flower.central_dp import client_mods, mechanism_params, server_wrapper

    wrapper = server_wrapper(_mechanism("client", z=0.7, clip=2.0), 5)
    assert isinstance(wrapper, DifferentialPrivacyClientSideFixedClipping) and isinstance(wrapper.strategy, FedAvg)
    assert (wrapper.noise_multiplier, wrapper.clipping_norm, wrapper.num_sampled_clients) == (0.7, 2.0, 5)
    assert client_mods(_mechanism("client")) == [fixedclipping_mod] and client_mods(_mechanism("server")) == []
    assert mechanism_params(wrapper, {"delta": 1e-6}) == {"noise_multiplier": 0.7, "clip": 2.0, "clipping": "client",
                                                          "delta": 1e-6}
    with pytest.raises(ValueError, match=r"^dp-fedavg clip = 1\.0, but the "
                                         r"DifferentialPrivacyClientSideFixedClipping runs 2\.0") as err:
        mechanism_params(wrapper, {"clip": 1.0})
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match="dp-fedavg runs as Flower's DifferentialPrivacyServerSideFixedClipping or "
                                         "DifferentialPrivacyClientSideFixedClipping; got FedAvg"):
        mechanism_params(FedAvg(), {})


@pytest.mark.parametrize("clients, rate, expected", [(10, 0.5, 5), (10, 0.3, 3), (7, 1.0, 7)])
def test_m_is_q_k_as_an_int(clients, rate, expected):
    from auditkit.flower.central_dp import sampled_clients

    assert sampled_clients(_training(clients, rate)) == expected
    assert sampled_clients(TrainingConfig(clients=clients)) == clients  # full participation: K


@pytest.mark.parametrize("clients, rate", [(10, 0.25), (10, 0.05)])
def test_a_fractional_q_k_is_refused_on_flower_when_the_config_is_checked(clients, rate):
    raw = {"data": {"dataset": "digits"}, "mechanism": {"name": "dp-fedavg"},
           "training": {"model": "linear", "clients": clients, "participation": "poisson", "sample_rate": rate}}
    from_dict(raw)  # the builtin protocol divides by the float q K
    with pytest.raises(ConfigError, match=rf"^mechanisms\[0\] \(dp-fedavg\): training\.sample_rate x "
                                          rf"training\.clients = {rate:g} x {clients} = {rate * clients:g} is not a "
                                          r"whole number of clients") as err:
        from_dict({**raw, "training": {**raw["training"], "backend": "flower"}})
    assert "\n" not in str(err.value) and "num_sampled_clients" in str(err.value)


def test_cli_refuses_a_fractional_q_k_on_flower_in_one_line_and_writes_nothing(tmp_path):
    config = tmp_path / "dp.toml"
    config.write_text('[data]\ndataset = "digits"\n[training]\nmodel = "linear"\nclients = 10\nrounds = 1\n'
                      'participation = "poisson"\nsample_rate = 0.25\nbackend = "flower"\n'
                      '[mechanism]\nname = "dp-fedavg"\n')
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "train", str(config), "--out", str(out)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: mechanisms[0] (dp-fedavg): training.sample_rate x "
                                                   "training.clients = 0.25 x 10 = 2.5 is not a whole number")
    assert "Traceback" not in result.stderr + result.stdout
    assert not out.exists()


def test_audit_strategy_reads_dp_fedavg_from_the_wrapper_and_refuses_what_contradicts_it():
    from flwr.serverapp.strategy import DifferentialPrivacyServerSideFixedClipping, FedAvg

    from auditkit.flower import AuditStrategy

    wrapper = DifferentialPrivacyServerSideFixedClipping(FedAvg(), noise_multiplier=0.9, clipping_norm=0.3,
                                                         num_sampled_clients=4)
    strategy = AuditStrategy(wrapper, "dp-fedavg", seed=2, delta=1e-6)
    assert strategy.config["mechanism"] == {"name": "dp-fedavg", "noise_multiplier": 0.9, "clip": 0.3,
                                            "clipping": "server", "delta": 1e-6}
    with pytest.raises(ValueError, match=r"dp-fedavg clipping = 'client', but the "
                                         r"DifferentialPrivacyServerSideFixedClipping runs 'server'"):
        AuditStrategy(wrapper, "dp-fedavg", seed=2, clipping="client")
    with pytest.raises(ValueError, match="got FedAvg"):
        AuditStrategy(FedAvg(), "dp-fedavg", seed=2)


# ------------------------------------------------------------------ Flower's Simulation Engine (Ray)

Z, CLIP, SEED = 0.02, 1.0, 5


def _backend_config(backend: str) -> dict:
    return {"seed": SEED, "device": "cpu", "data": {"dataset": "digits"},
            "training": {"model": "linear", "clients": 10, "rounds": 3, "tau": 5, "batch_size": 8, "lr": 0.1,
                         "momentum": 0.0, "participation": "poisson", "sample_rate": 0.5, "checkpoints": [1, 2, 3],
                         "backend": backend},
            "mechanism": {"name": "dp-fedavg", "noise_multiplier": Z, "clip": CLIP, "clipping": "client"}}


@pytest.mark.flower
def test_backend_flower_runs_dp_fedavg_on_flowers_wrapper():
    """K = 10, q = 0.5 (m = 5), 3 rounds: it trains, every round's stats are z C / m and z n_t / m, the aggregate
    view is n_t times the released update, and round 1's server view and ground truth are the builtin's (the same
    clipped and true updates).
    (That the same seed gives the same release is checked without Ray, in
    test_the_same_seed_gives_the_same_release_on_flowers_wrapper: a second Ray run costs 40 s here.)"""
    import time

    from auditkit.stages.train import Experiment

    start = time.perf_counter()
    run = Experiment(from_dict(_backend_config("flower"))).train().result
    seconds = time.perf_counter() - start
    builtin = Experiment(from_dict(_backend_config("builtin"))).train().result
    print(f"flower dp-fedavg: {seconds:.1f} s; test accuracy by round {[round(r.test_accuracy, 4) for r in run.rounds]}"
          f", sampled {[len(r.clients) for r in run.rounds]}, stats {[r.stats for r in run.rounds]}")
    assert run.rounds[-1].test_accuracy > 0.5  # chance is 0.1
    for record in run.rounds:
        n = len(record.clients)
        assert record.stats["noise_std_aggregate"] == pytest.approx(Z * CLIP / 5)
        assert record.stats["effective_noise_multiplier"] == pytest.approx(Z * n / 5)
        assert record.stats["sampled"] == n
    for observation in run.observations:
        released = observation.views["peer"] - observation.global_before
        torch.testing.assert_close(observation.views["aggregate"], len(observation.clients) * released,
                                   rtol=0, atol=1e-5)
        assert observation.views["server"].norm(dim=1).max() <= CLIP + 1e-5  # clipped by fixedclipping_mod
    assert run.observations[0].clients == builtin.observations[0].clients
    # the clients' true updates (their ground truth, sent beside the model) are the builtin's
    torch.testing.assert_close(run.observations[0].ground_truth["updates"],
                               builtin.observations[0].ground_truth["updates"], rtol=0, atol=1e-5)
    torch.testing.assert_close(run.observations[0].views["server"], builtin.observations[0].views["server"],
                               rtol=0, atol=1e-5)


def _dp_app(record_dir, clients: int, rounds: int):
    """A usual Flower app on Flower's central DP: the ClientApp's train handler with fixedclipping_mod (and
    auditkit's ground_truth_mod inside it), the ServerApp's FedAvg in DifferentialPrivacyClientSideFixedClipping, in
    AuditStrategy."""
    from flwr.app import ArrayRecord, ConfigRecord, Message, MetricRecord, RecordDict
    from flwr.clientapp import ClientApp
    from flwr.clientapp.mod import fixedclipping_mod
    from flwr.serverapp import ServerApp
    from flwr.serverapp.strategy import DifferentialPrivacyClientSideFixedClipping, FedAvg

    from auditkit.data import load_dataset
    from auditkit.flower import AuditStrategy, attach_training_images, ground_truth_mod
    from auditkit.models import create_model

    data = load_dataset("digits")
    make = lambda: create_model("linear", input_shape=data.input_shape, num_classes=10)  # noqa: E731
    client = ClientApp()

    @client.train(mods=[fixedclipping_mod, ground_truth_mod(record_dir=record_dir, record_rounds=(1, 2))])
    def train(message, context):
        k = int(context.node_config["partition-id"])
        model = make()
        model.load_state_dict(message.content["arrays"].to_torch_state_dict())
        x, y = data.train.x[k::clients][:20], data.train.y[k::clients][:20]
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
        for step in range(3):
            optimizer.zero_grad()
            torch.nn.functional.cross_entropy(model(x[step:step + 1]), y[step:step + 1]).backward()
            optimizer.step()
        content = RecordDict({"arrays": ArrayRecord(model.state_dict()),
                              "metrics": MetricRecord({"num-examples": 1})})
        attach_training_images(content, x[:3])
        return Message(content, reply_to=message)

    @client.evaluate()  # without fixedclipping_mod, which refuses messages that carry no clipping_norm
    def evaluate(message, context):
        model = make()
        model.load_state_dict(message.content["arrays"].to_torch_state_dict())
        accuracy = float((model(data.test.x).argmax(1) == data.test.y).float().mean())
        return Message(RecordDict({"metrics": MetricRecord({"accuracy": accuracy, "num-examples": 1})}),
                       reply_to=message)

    server = ServerApp()
    ended = {}

    @server.main()
    def main(grid, context):
        dp = DifferentialPrivacyClientSideFixedClipping(
            FedAvg(fraction_train=1.0, fraction_evaluate=0.5, min_available_nodes=clients, min_train_nodes=clients),
            noise_multiplier=Z, clipping_norm=0.05, num_sampled_clients=clients)
        strategy = AuditStrategy(dp, "dp-fedavg", seed=SEED, record_dir=record_dir, record_rounds=(1, 2),
                                 config={"data": {"dataset": "digits"},
                                         "training": {"model": "linear", "clients": clients, "tau": 3, "batch_size": 1,
                                                      "lr": 0.5, "momentum": 0.0}})
        ended["result"] = strategy.start(grid=grid, initial_arrays=ArrayRecord(make().state_dict()),
                                         num_rounds=rounds, train_config=ConfigRecord({"lr": 0.5}))

    return client, server, ended


@pytest.mark.flower
def test_a_recorded_app_on_flowers_central_dp_is_audited_with_audit_recorded(tmp_path):
    """AuditStrategy around Flower's DP wrapper records the clients' clipped models (the server view), n_t x the
    release (the aggregate view) and each round's noise std; ``audit --recorded`` audits it as dp-fedavg."""
    from flwr.simulation import run_simulation

    from auditkit.flower.recording import load_recording

    clients, rounds = 4, 2
    record_dir = tmp_path / "recording"
    client, server, _ = _dp_app(record_dir, clients, rounds)
    run_simulation(server_app=server, client_app=client, num_supernodes=clients,
                   backend_config={"client_resources": {"num_cpus": 1, "num_gpus": 0.0}})
    recording = load_recording(record_dir)
    assert recording.config["mechanism"] == {"name": "dp-fedavg", "noise_multiplier": Z, "clip": 0.05,
                                             "clipping": "client"}
    first, second = recording.server_round(1), recording.server_round(2)
    truths = torch.stack([recording.truth(1, c)["update"] for c in first["clients"]])
    assert len(first["clients"]) == clients and (truths.norm(dim=1) > 0.05).all()  # every true update is clipped
    clipped = torch.stack([clip_l2(t.double(), 0.05).float() for t in truths])
    torch.testing.assert_close(first["server"], clipped, rtol=0, atol=1e-5)
    torch.testing.assert_close(first["aggregate"], clients * (second["global_before"] - first["global_before"]),
                               rtol=0, atol=1e-5)
    noise = first["aggregate"] - first["server"].sum(0)
    assert noise.std().item() == pytest.approx(Z * 0.05, rel=0.2)  # n_t = m: z C on the sum (650 coordinates)
    assert recording.rounds[0]["stats"]["noise_std_aggregate"] == pytest.approx(Z * 0.05 / clients)
    assert recording.rounds[0]["stats"]["effective_noise_multiplier"] == pytest.approx(Z)
    assert all(0 <= r["test_accuracy"] <= 1 for r in recording.rounds)  # the clients evaluated

    config = tmp_path / "audit.toml"
    config.write_text('[inversion]\ntargets = 2\niterations = 20\n[probe]\ntargets = 2\niterations = 20\n'
                      '[identification]\ncandidates = [4]\ntrials = 20\n[distinguish]\ntrials = 1000\n')
    out = tmp_path / "out"
    result = subprocess.run([sys.executable, "-m", "auditkit.cli", "audit", str(config), "--recorded",
                             str(record_dir), "--out", str(out)], capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    setting = json.loads((out / "results.json").read_text())["settings"][0]
    assert setting["mechanism"]["name"] == "dp-fedavg" and setting["training"]["protocol"] == "central-noise"
    # the claim's view, the informed adversary of the noisy sum, inverted; the messages in clear beside it
    assert setting["inversion"]["view"] == "aggregate" and setting["inversion"]["round"] == 1
    assert [v["name"] for v in setting["inversion"]["views"]] == ["server"]
    assert [r["round"] for r in setting["training"]["rounds"]] == [1, 2]
    assert setting["distinguish"] is not None and setting["probe"] is not None
