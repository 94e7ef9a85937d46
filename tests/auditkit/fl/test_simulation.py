import dataclasses

import pytest
import torch

from auditkit import mechanisms
from auditkit.config import TrainingConfig
from auditkit.data import Split
from auditkit.fl.aggregation import FedAvg, UplinkProtocol
from auditkit.mechanisms.randomness import shared_seed
from auditkit.fl.simulation import FederatedData, FederatedSimulation
from auditkit.models import count_parameters, create_model


def _data(seed=0, n=120, clients=4):
    g = torch.Generator().manual_seed(seed)
    x = torch.rand(n, 1, 28, 28, generator=g)
    y = torch.randint(0, 10, (n,), generator=g)
    sizes = torch.linspace(10, 40, clients).long()
    sizes[-1] = n - 20 - sizes[:-1].sum()
    bounds = torch.cumsum(torch.cat([torch.tensor([0]), sizes]), 0)
    indices = [torch.arange(bounds[k], bounds[k + 1]) for k in range(clients)]
    held = Split(x[-20:], y[-20:])
    return FederatedData(Split(x[:-20], y[:-20]), held, held, indices)


def _simulation(mechanism="none", seed=0, **training):
    config = TrainingConfig(**{"model": "cnn", "clients": 4, "rounds": 3, "tau": 5, "lr": 0.05,
                               "checkpoints": (2,), **training})
    m = mechanisms.create(mechanism, private_seed=11) if mechanism == "none" else mechanisms.create(
        mechanism, sigma=0.01, clip=1.0, private_seed=11)
    return FederatedSimulation(create_model("cnn"), _data(), UplinkProtocol(m, seed), config, seed=seed)


def test_same_seed_same_numbers_and_batched_equals_sequential():
    a = _simulation().run()
    b = _simulation().run()
    c = _simulation(batched=False).run()
    assert [dataclasses.asdict(r) for r in a.rounds] == [dataclasses.asdict(r) for r in b.rounds]
    assert torch.equal(a.final_params, b.final_params)
    assert torch.allclose(a.final_params, c.final_params, atol=1e-5)
    assert [r.test_accuracy for r in a.rounds] == pytest.approx([r.test_accuracy for r in c.rounds], abs=0.06)
    d = _simulation(seed=1).run()
    assert not torch.allclose(a.final_params, d.final_params)


def test_a_run_hands_each_checkpoint_to_on_checkpoint_as_its_round_ends_and_keeps_none():
    """With ``on_checkpoint`` the observations reach the caller before the next round is trained (so the round's
    S x P views need not outlive it), equal to those a run without it keeps; the result lists their rounds only."""
    kept = _simulation(checkpoints=(1, 2)).run()
    handed, seen_at = [], []
    simulation = _simulation(checkpoints=(1, 2))
    result = simulation.run(on_round=lambda record: seen_at.append((record.round, len(handed))),
                            on_checkpoint=handed.append)
    assert result.observations == [] and result.checkpoints == kept.checkpoints == [1, 2]
    assert seen_at == [(1, 1), (2, 2), (3, 2)]  # handed before the round's record, never after a later round
    for ours, theirs in zip(handed, kept.observations):
        assert ours.round == theirs.round and ours.clients == theirs.clients
        assert torch.equal(ours.views["server"], theirs.views["server"])
        assert torch.equal(ours.ground_truth["updates"], theirs.ground_truth["updates"])
    assert torch.equal(result.final_params, kept.final_params)


def test_identity_mechanism_gives_exact_fedavg_and_records_the_views():
    sim = _simulation()
    result = sim.run()
    (obs,) = result.observations
    assert obs.round == 2 and obs.clients == [0, 1, 2, 3]
    truth = obs.ground_truth["updates"]
    assert torch.equal(obs.views["server"], truth)  # `none` decodes float32 exactly
    weights = torch.tensor([len(ix) for ix in sim.data.client_indices], dtype=torch.float64)
    expected = obs.global_before + (weights / weights.sum()).float() @ truth
    assert torch.allclose(obs.views["peer"], expected, atol=1e-6)
    assert len(obs.views["eavesdropper"]) == 4 and isinstance(obs.views["eavesdropper"][0], bytes)
    assert obs.ground_truth["batch_indices"].shape == (4, 5, 1)
    # bits are the real message sizes: 32 bits per float32 coordinate plus a small header
    bits = result.rounds[0].bits
    assert all(6422 * 32 <= b <= 6422 * 32 + 256 for b in bits)


def test_gaussian_mechanism_perturbs_the_server_view_by_sigma():
    result = _simulation("gaussian").run()
    (obs,) = result.observations
    truth = obs.ground_truth["updates"]
    clipped = truth / torch.clamp(truth.norm(dim=1, keepdim=True) / 1.0, min=1.0)
    noise = obs.views["server"] - clipped
    assert noise.std().item() == pytest.approx(0.01, rel=0.03)  # 25k samples: sd of std ~0.5%


def test_partial_participation_only_moves_selected_clients_momentum():
    sim = _simulation(participation="uniform", clients_per_round=2, rounds=1, checkpoints=(1,))
    record, obs = sim.step(1)
    assert len(record.clients) == 2 and obs.clients == record.clients
    moved = (sim.client_state["momentum"].abs().sum(dim=1) > 0).nonzero().flatten().tolist()
    assert moved == record.clients


def test_fedavg_weights_are_normalised():
    updates = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    assert torch.allclose(FedAvg().aggregate(updates, torch.tensor([1.0, 3.0])), torch.tensor([0.25, 0.75]))


def test_shared_seeds_differ_across_clients_and_rounds():
    seeds = {shared_seed(0, k, t) for k in range(30) for t in range(100)}
    assert len(seeds) == 3000


def test_a_central_noise_round_that_samples_nobody_still_releases_its_noise():
    """dp-fedavg at q = 0.25 over 4 clients: the rounds that sample nobody move the model by the server's noise
    alone, N(0, (z C / (q K))^2) per coordinate (here z C / (q K) = 0.5; the std checked to 5 % over the cnn's
    ~6,400 coordinates), and the rounds are the same on a second run (the noise is keyed by the round)."""
    from auditkit.fl.aggregation import build_protocol
    from auditkit.mechanisms import ProtocolContext

    def run():
        m = mechanisms.create("dp-fedavg", noise_multiplier=0.5, clip=1.0)
        context = ProtocolContext(seed=0, clients=4, participation="poisson", sample_rate=0.25)
        config = TrainingConfig(model="cnn", clients=4, rounds=8, tau=2, lr=0.05, checkpoints=(),
                                participation="poisson", sample_rate=0.25)
        sim = FederatedSimulation(create_model("cnn"), _data(), build_protocol(m, context), config, seed=0)
        before, moves = sim.params.clone(), []
        for round_ in range(1, 9):
            record, _ = sim.step(round_)
            moves.append((record.clients, sim.params - before))
            before = sim.params.clone()
        return moves

    moves = run()
    empty = [move for clients, move in moves if not clients]
    assert empty, "the seed gives at least one round without clients"
    for move in empty:
        assert move.double().std().item() == pytest.approx(0.5, rel=0.05)
    assert all(torch.equal(a, b) for (_, a), (_, b) in zip(moves, run()))


def _bn_simulation(**training):
    torch.manual_seed(0)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(1, 4, 3, bias=False), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(4 * 13 * 13, 10))
    config = TrainingConfig(**{"model": "cnn", "clients": 4, "rounds": 2, "tau": 3, "batch_size": 4, "lr": 0.05,
                               "checkpoints": (2,), **training})
    return FederatedSimulation(model, _data(), UplinkProtocol(mechanisms.create("none", private_seed=11), 0), config,
                               seed=0)


def test_batchnorm_statistics_are_averaged_or_kept_local():
    """``averaged``: after a round the server's running statistics are the FedAvg-weighted mean of the clients';
    ``local``: each client keeps its own (they differ), the server's stay the initial ones, and the evaluation uses
    their weighted mean. Batched equals sequential with BatchNorm across whole rounds."""
    averaged = _bn_simulation()
    averaged.step(1)
    assert not torch.allclose(averaged.buffers["1.running_mean"], torch.zeros(4))
    kept = _bn_simulation(bn_stats="local")
    kept.step(1)
    stats = kept.client_buffers["1.running_mean"]
    assert not torch.allclose(stats[0], stats[1])
    weights = kept.client_weights / kept.client_weights.sum()
    assert torch.allclose(kept.evaluation_buffers()["1.running_mean"], (weights[:, None].float() * stats).sum(0))
    assert torch.allclose(averaged.buffers["1.running_mean"], kept.evaluation_buffers()["1.running_mean"], atol=1e-6)
    assert torch.equal(kept.buffers["1.running_mean"], torch.zeros(4))
    a, b = _bn_simulation().run(), _bn_simulation(batched=False).run()
    assert torch.allclose(a.final_params, b.final_params, atol=1e-5)
    assert [r.test_loss for r in a.rounds] == pytest.approx([r.test_loss for r in b.rounds], abs=1e-5)


def test_server_lr_scales_the_aggregate():
    """w <- w + server_lr * aggregate: with no mechanism noise, half the server step moves half as far."""
    full, half = _simulation(rounds=1), _simulation(rounds=1, server_lr=0.5)
    start = full.params.clone()
    full.step(1)
    half.step(1)
    assert torch.allclose(half.params - start, 0.5 * (full.params - start), atol=1e-6)


def test_local_epochs_and_adam_run_the_whole_simulation():
    """Two local epochs of Adam with the optimiser reset each round: every client's step count covers its data twice,
    and batched equals sequential over the run."""
    a = _simulation(local_epochs=2, batch_size=8, optimizer="adam", lr=1e-3, optimizer_state="reset").run()
    b = _simulation(local_epochs=2, batch_size=8, optimizer="adam", lr=1e-3, optimizer_state="reset",
                    batched=False).run()
    # Adam moves a coordinate by about lr = 1e-3 a step, ten times the tolerance; the two paths' rounding over the run
    # measured 1.0e-5 on an AMD EPYC (AVX2), at the edge of 1e-5
    torch.testing.assert_close(b.final_params, a.final_params, rtol=0, atol=1e-4)
    (obs,) = a.observations
    assert obs.tau == 2 * -(-int(_data().client_indices[-1].numel()) // 8)  # the largest client's steps


def _device_simulation(device, **training):
    config = TrainingConfig(**{"model": "cnn", "clients": 4, "rounds": 3, "tau": 3, "lr": 0.05,
                               "checkpoints": (2,), **training})
    return FederatedSimulation(create_model("cnn"), _data(), UplinkProtocol(mechanisms.create("none"), 0), config,
                               seed=0, device=device)


def test_simulation_on_device_is_reproducible_and_batched_equals_sequential(device, exact_fp32):
    """Three FedAvg rounds on the device: the same seed gives identical rounds on the CPU, and on a GPU the same
    parameters to 1e-3 of their scale (cuDNN's backward kernels sum in no fixed order; float32, TF32 off) and
    the same test accuracy up to one example in 20; the batched clients equal the sequential reference (1e-5
    on the CPU, 1e-3 of the scale on a GPU); the results and observations come back on the CPU."""
    a = _device_simulation(device).run()
    b = _device_simulation(device).run()
    c = _device_simulation(device, batched=False).run()
    if device.type == "cuda":
        tolerance = 1e-3 * float(a.final_params.abs().max())
        torch.testing.assert_close(b.final_params, a.final_params, rtol=0, atol=tolerance)
        assert [r.test_accuracy for r in b.rounds] == pytest.approx([r.test_accuracy for r in a.rounds], abs=0.051)
    else:
        tolerance = 1e-5
        assert [dataclasses.asdict(r) for r in a.rounds] == [dataclasses.asdict(r) for r in b.rounds]
        assert torch.equal(a.final_params, b.final_params)
    torch.testing.assert_close(c.final_params, a.final_params, rtol=0, atol=tolerance)
    assert a.final_params.device.type == "cpu" and a.observations[0].ground_truth["updates"].device.type == "cpu"
    start = _device_simulation("cpu").params.cpu()
    assert (a.final_params - start).abs().max() > 1e-3


def test_cuda_simulation_equals_cpu_simulation(cuda, exact_fp32):
    """The same three rounds on the GPU and on the CPU (float32, TF32 off): final parameters within 1e-4, the
    same test accuracy each round up to one test example in 20, the same true updates at the checkpoint to 1e-4."""
    on_cpu = _device_simulation("cpu").run()
    on_gpu = _device_simulation(cuda).run()
    torch.testing.assert_close(on_gpu.final_params, on_cpu.final_params, rtol=0, atol=1e-4)
    assert [r.test_accuracy for r in on_gpu.rounds] == pytest.approx([r.test_accuracy for r in on_cpu.rounds],
                                                                     abs=0.051)
    torch.testing.assert_close(on_gpu.observations[0].ground_truth["updates"],
                               on_cpu.observations[0].ground_truth["updates"], rtol=0, atol=1e-4)


def _frozen_first_layer(freeze: bool = True) -> torch.nn.Module:
    """A tiny MLP on 28x28 images whose first layer (784 x 8 + 8) is frozen: 8 x 10 + 10 = 90 trained parameters."""
    torch.manual_seed(5)
    model = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(784, 8), torch.nn.ReLU(), torch.nn.Linear(8, 10))
    model[1].requires_grad_(not freeze)
    return model


@pytest.mark.parametrize("batched", [True, False], ids=["batched", "sequential"])
def test_a_frozen_layer_stays_as_built_and_is_never_sent(batched):
    """Two rounds of FedAvg with the gaussian mechanism on a model with a frozen first layer: the update, what the
    mechanism encodes and decodes and every view hold the 90 trained parameters; the frozen layer is bit for bit
    the one the model was built with after training (not re-drawn from the seed, never trained), while the
    trained ones start where the same model unfrozen starts (the seed's draws unchanged) and move."""
    config = TrainingConfig(model="cnn", clients=4, rounds=2, tau=3, batch_size=2, lr=0.1, checkpoints=(2,),
                            batched=batched)
    model = _frozen_first_layer()
    built = model[1].weight.detach().clone(), model[1].bias.detach().clone()
    gaussian = mechanisms.create("gaussian", sigma=0.01, clip=1.0, private_seed=11)
    sim = FederatedSimulation(model, _data(), UplinkProtocol(gaussian, 0), config, seed=0)
    unfrozen = FederatedSimulation(_frozen_first_layer(freeze=False), _data(), UplinkProtocol(gaussian, 0), config,
                                   seed=0)
    assert sim.layout.names == ("3.weight", "3.bias") and sim.layout.size == count_parameters(model) == 90
    assert torch.equal(sim.params, unfrozen.params[-90:])  # the trained parameters' initial draws
    start = sim.params.clone()
    result = sim.run()
    assert torch.equal(model[1].weight, built[0]) and torch.equal(model[1].bias, built[1])
    assert result.num_params == 90 and result.final_params.shape == (90,)
    assert (result.final_params - start).abs().max() > 1e-3
    (obs,) = result.observations
    assert obs.global_before.shape == (90,) and obs.ground_truth["updates"].shape == (4, 90)
    assert obs.views["server"].shape == (4, 90) and obs.views["peer"].shape == (90,)
    # the mechanism encoded 90 coordinates: float32 bits of 90 values and a header, no frozen value in them
    assert all(90 * 32 <= bits <= 90 * 32 + 256 for record in result.rounds for bits in record.bits)
    noise = obs.views["server"] - obs.ground_truth["updates"] / torch.clamp(
        obs.ground_truth["updates"].norm(dim=1, keepdim=True), min=1.0)
    assert noise.std().item() == pytest.approx(0.01, rel=0.15)  # 360 draws: the std's sd is ~4 %


def test_a_frozen_layer_gives_the_same_run_batched_and_sequential():
    config = dict(model="cnn", clients=4, rounds=2, tau=3, batch_size=2, lr=0.1, checkpoints=(2,))
    runs = [FederatedSimulation(_frozen_first_layer(), _data(), UplinkProtocol(mechanisms.create("none"), 0),
                                TrainingConfig(**config, batched=batched), seed=0).run() for batched in (True, False)]
    assert torch.allclose(runs[0].final_params, runs[1].final_params, atol=1e-5)
    assert [r.test_loss for r in runs[0].rounds] == pytest.approx([r.test_loss for r in runs[1].rounds], abs=1e-5)
