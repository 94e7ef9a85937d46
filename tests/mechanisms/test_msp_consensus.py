"""MSP-FL's consensus protocol inside the training loop: K_t + 1 real uploads, the transcript as the server's view.

The tiny simulation (4 clients, a CNN of 6422 parameters, 2 rounds) takes ~2 s. The server's transcript
reconstructs the clients' models to 1e-6 relative (float32 uploads; see tests/attacks/test_msp_reconstruction.py).
"""

import math

import pytest
import torch

from auditkit import mechanisms
import auditkit.mechanisms.msp  # noqa: F401  (registers msp, msp-laplace, mspdq)
from auditkit.attacks import reconstruct_msp
from auditkit.config import TrainingConfig
from auditkit.data import Split
from auditkit.mechanisms.msp_consensus import ConsensusProtocol
from auditkit.fl.simulation import FederatedData, FederatedSimulation
from auditkit.models import create_model
from auditkit.mechanisms.msp import MSPTranscript


def _data(seed=0, n=100, clients=4):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    held = Split(x[-20:], y[-20:])
    return FederatedData(Split(x[:-20], y[:-20]), held, held, list(torch.arange(80).chunk(clients)))


def _simulation(name, rounds=2, **params):
    config = TrainingConfig(model="cnn", clients=4, rounds=rounds, tau=3, lr=0.05, checkpoints=(rounds,))
    protocol = ConsensusProtocol(mechanisms.create(name, private_seed=11, **params), seed=0)
    return FederatedSimulation(create_model("cnn"), _data(), protocol, config, seed=0), protocol


def test_msp_runs_in_the_training_loop_and_the_server_view_is_the_transcript():
    sim, protocol = _simulation("msp", consensus_rounds=3)
    result = sim.run()
    size = result.num_params
    for record in result.rounds:
        assert record.stats["uploads"] == 4.0 and record.stats["limit_bias"] == 0.0  # m_i = 1: FedAvg's mean
        assert 0 < record.stats["consensus_gap"] == record.stats["aggregate_error"]
        assert record.bits == [4 * 8 * (5 + 4 * size)] * 4  # K_t + 1 float32 messages per client
        assert record.bits_per_coordinate == pytest.approx(4 * 32, rel=1e-3)
    (obs,) = result.observations
    view = obs.views["server"]
    assert isinstance(view, MSPTranscript) and view.hidden is None and obs.views["eavesdropper"] is view
    assert view.alpha.shape == (4, 4, size) and view.clients == obs.clients == [0, 1, 2, 3]
    assert torch.allclose(obs.views["peer"].double(), view.aggregate, atol=1e-6)  # w_t = w_t[K_t] (eq. 6)
    assert set(protocol.hidden) == {1, 2} and protocol.hidden[2].m.tolist() == [1, 1, 1, 1]
    # The server's view alone gives back every client's model w_i = global + update_i.
    models = obs.global_before.double() + obs.ground_truth["updates"].double()
    error = (reconstruct_msp(view).w_hat - models).norm(dim=1) / models.norm(dim=1)
    assert error.max() < 1e-6


def test_mspdq_counts_the_bits_of_its_knot_indices():
    sim, _ = _simulation("mspdq", rounds=1, bits=6, consensus_rounds=2)
    (record,) = sim.run().rounds
    size = sim.layout.size
    assert record.bits == [3 * 8 * (10 + math.ceil(6 * size / 8))] * 4
    assert record.stats["uploads"] == 3.0 and record.stats["overloads"] >= 0


def test_communicate_is_keyed_by_seed_round_and_client_and_ignores_the_data_weights():
    g = torch.Generator().manual_seed(0)
    base, updates = torch.randn(500, generator=g), 0.01 * torch.randn(3, 500, generator=g)
    mechanism = mechanisms.create("msp", private_seed=1, m_max=2, consensus_rounds=5)

    def outcome(seed, round_, clients=(0, 1, 2), weights=(1.0, 1.0, 1.0)):
        return ConsensusProtocol(mechanism, seed).communicate(
            updates, list(clients), torch.tensor(weights), round_, global_params=base)

    first = outcome(0, 1)
    assert first.aggregate.dtype == updates.dtype and first.aggregate.shape == (500,)
    assert torch.equal(first.aggregate, outcome(0, 1, weights=(5.0, 1.0, 2.0)).aggregate)  # plain 1/M mean
    assert not torch.equal(first.aggregate, outcome(1, 1).aggregate)
    assert not torch.equal(first.aggregate, outcome(0, 2).aggregate)
    assert not torch.equal(first.aggregate, outcome(0, 1, clients=(3, 4, 5)).aggregate)
    assert torch.allclose(first.views["server"].aggregate.float() - base, first.aggregate, atol=1e-6)
    assert first.stats["mean_m"] == pytest.approx(4 / 3)  # m = (1, 1, 2) in some order: hidden and heterogeneous
    assert first.stats["limit_bias"] > 0.1  # the (1 + m_i)-weighted limit misses FedAvg's update by > 10%
    # The split error is proportional to the model, not the update: after K_t = 5 it still dwarfs the update.
    assert first.stats["aggregate_error"] > 1


def test_only_consensus_mechanisms_are_accepted():
    with pytest.raises(ValueError, match="needs a consensus mechanism"):
        ConsensusProtocol(mechanisms.create("gaussian"), 0)
