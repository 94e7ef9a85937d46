"""DP-SQ's FL system (seed 001): device groups, the cluster-size program, SNR fusion weights, the round protocol.

Tolerances. Link noise: 4 clients x 20_000 coordinates per group; the sample variance of n Gaussian values has
relative sd sqrt(2/n) = 0.5% at n = 80_000, so the 3% band is 6 sd. Cluster sampling: 2_000 rounds, each device
of a group heard with probability c_m / g_m = 1/2: the frequency has sd 0.011, the band 0.06 is 5 sd. Uniform
draw of the 5 feasible cluster sizes: 5_000 draws, each count ~ Binomial(5_000, 1/5), sd 28, band 150 = 5 sd.
All seeds are fixed, so the tests are deterministic.
"""

import itertools
import random

import numpy as np
import pytest
import torch

from auditkit.config import TrainingConfig
from auditkit.data import Split
from auditkit.mechanisms.randomness import shared_seed
from auditkit.mechanisms.dpsq_groups import (
    DeviceGroupProtocol,
    DeviceGroups,
    cluster_sizes,
    fusion_weights,
    random_cluster_sizes,
)
from auditkit.fl.simulation import FederatedData, FederatedSimulation
from auditkit.models import create_model

PAPER = DeviceGroups(sizes=(50, 50), bits=(2, 4), link_sigma=(6.25e-4, 0.125))
PAPER_D = 159_010  # the paper's 784-200-10 model


def _brute_force(groups, total, bandwidth, bound):
    kappa = [8 * bound**2 / (2**b - 1) ** 2 + s**2 for b, s in zip(groups.bits, groups.link_sigma)]
    feasible = [
        c for c in itertools.product(*(range(1, g + 1) for g in groups.sizes))
        if sum(c) == total and sum(b * n for b, n in zip(groups.bits, c)) <= bandwidth
    ]  # fmt: skip
    return min(feasible, key=lambda c: sum(k * n for k, n in zip(kappa, c)))


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"sizes": (), "bits": (), "link_sigma": ()}, "sizes must be a non-empty sequence of integers >= 1"),
        ({"sizes": (3, 0), "bits": (2, 4), "link_sigma": (0, 0)}, "sizes must be a non-empty sequence"),
        ({"sizes": (3, 2.0), "bits": (2, 4), "link_sigma": (0, 0)}, "sizes must be a non-empty sequence"),
        ({"sizes": (3, 3), "bits": (2,), "link_sigma": (0, 0)}, r"bits must be 2 integers in 1..16 \(one per group\)"),
        ({"sizes": (3, 3), "bits": (2, 17), "link_sigma": (0, 0)}, "bits must be 2 integers in 1..16"),
        ({"sizes": (3, 3), "bits": (4, 2), "link_sigma": (0, 0)}, r"bits must be non-decreasing \(b_1 <= ... <= b_M\)"),
        ({"sizes": (3, 3), "bits": (2, 4), "link_sigma": (0.1, -1)}, "link_sigma must be 2 finite numbers >= 0"),
        ({"sizes": (3, 3), "bits": (2, 4), "link_sigma": (0.1, float("nan"))}, "link_sigma must be 2 finite"),
    ],
)
def test_device_groups_validation_names_the_field(kwargs, message):
    with pytest.raises(ValueError, match=message):
        DeviceGroups(**kwargs)


def test_clients_are_numbered_group_by_group():
    groups = DeviceGroups(sizes=[2, 3, 1], bits=[1, 1, 8], link_sigma=[0, 0.5, 1])
    assert groups.sizes == (2, 3, 1) and groups.link_sigma == (0.0, 0.5, 1.0)  # stored as tuples
    assert groups.total == 6 and groups.offsets == (0, 2, 5)
    assert [groups.group_of(k) for k in range(6)] == [0, 0, 1, 1, 1, 2]
    with pytest.raises(ValueError, match="client must be in 0..5"):
        groups.group_of(6)


def test_cluster_program_gives_the_papers_five_and_five():
    assert cluster_sizes(PAPER, total=10, bandwidth=30, bound=10.0) == (5, 5)


@pytest.mark.parametrize(
    ("groups", "total", "bandwidth", "expected"),
    [
        (PAPER, 10, 40, (1, 9)),  # budget slack: as many cheap 4-bit devices as allowed
        (DeviceGroups((50, 50), (2, 4), (6.25e-4, 10.0)), 10, 30, (9, 1)),  # noisy 4-bit links: kappa_2 > kappa_1
        (DeviceGroups((10, 10, 10), (1, 2, 8), (0, 0, 0)), 6, 20, (1, 4, 1)),  # the budget allows one 8-bit device
        (DeviceGroups((3, 4, 2), (2, 3, 5), (0.5, 0.1, 2.0)), 6, 20, None),
        (DeviceGroups((5, 5, 5), (1, 4, 4), (0, 1.0, 0.2)), 7, 22, None),
    ],
)
def test_cluster_program_matches_brute_force(groups, total, bandwidth, expected):
    got = cluster_sizes(groups, total=total, bandwidth=bandwidth, bound=10.0)
    assert got == _brute_force(groups, total, bandwidth, 10.0)
    if expected is not None:
        assert got == expected


def test_infeasible_cluster_program_says_why():
    with pytest.raises(ValueError) as err:
        cluster_sizes(PAPER, total=10, bandwidth=12, bound=10.0)
    assert str(err.value) == (
        "no cluster sizes satisfy sum c_m = 10 with sum b_m c_m <= 12: the smallest bandwidth needed is 22"
    )
    assert cluster_sizes(PAPER, total=10, bandwidth=22, bound=10.0) == (9, 1)  # exactly enough
    with pytest.raises(ValueError, match=r"total must be an integer in 2..100 \(at least one device per group"):
        cluster_sizes(PAPER, total=1, bandwidth=30, bound=10.0)
    with pytest.raises(ValueError, match="total must be an integer in 2..100"):
        cluster_sizes(PAPER, total=101, bandwidth=1000, bound=10.0)
    with pytest.raises(ValueError, match="bandwidth must be a number > 0"):
        cluster_sizes(PAPER, total=10, bandwidth=-1, bound=10.0)
    with pytest.raises(ValueError, match="bound must be a finite number > 0"):
        cluster_sizes(PAPER, total=10, bandwidth=30, bound=0.0)


def test_random_cluster_sizes_are_uniform_over_the_feasible_ones():
    rng = random.Random(0)
    draws = [random_cluster_sizes(PAPER, total=10, bandwidth=30, rng=rng) for _ in range(5_000)]
    counts = {c: draws.count(c) for c in set(draws)}
    assert set(counts) == {(5, 5), (6, 4), (7, 3), (8, 2), (9, 1)}  # every c with c_1 >= 5
    assert all(abs(n - 1_000) < 150 for n in counts.values())
    unconstrained = {random_cluster_sizes(PAPER, total=10, bandwidth=None, rng=rng) for _ in range(500)}
    assert unconstrained == {(c, 10 - c) for c in range(1, 10)}


def test_fusion_weights_sum_to_one_and_order_by_mode():
    ids = [0] * 5 + [1] * 5
    share = {}
    for mode in ("mean", "central-cell", "bound"):
        w = fusion_weights(mode, PAPER, ids, dimension=PAPER_D, bound=10.0)
        assert w.dtype == torch.float64 and w.sum().item() == pytest.approx(1.0, abs=1e-12)
        assert torch.equal(w[:5], w[:1].expand(5)) and torch.equal(w[5:], w[5:6].expand(5))
        share[mode] = w[5:].sum().item()
    # the 4-bit group's share grows as its distortion advantage is counted more fully
    assert share["mean"] == 0.5 < share["central-cell"] < share["bound"] < 1.0
    # theta = 1/(d Delta_m^2/4 + d sigma_m^2), Delta_m = 20/(2^b_m - 1)
    theta = 1 / (PAPER_D * np.array([(20 / 3) ** 2 / 4 + 6.25e-4**2, (20 / 15) ** 2 / 4 + 0.125**2]))
    assert share["central-cell"] == pytest.approx(theta[1] / theta.sum())
    # without link noise central-cell and bound are both proportional to 1/Delta_m^2
    quiet = DeviceGroups((50, 50), (2, 4), (0.0, 0.0))
    assert torch.allclose(
        fusion_weights("central-cell", quiet, ids, dimension=10, bound=1.0),
        fusion_weights("bound", quiet, ids, dimension=10, bound=1.0),
    )


def test_resolution_fusion_of_reference_28_is_inversely_proportional_to_the_step():
    """Bits (2, 4), C = 10: Delta = 20/3 and 20/15, so 1/Delta = 0.15 and 0.75; devices of groups [0, 0, 1] get
    0.15, 0.15, 0.75 over 1.05 = 1/7, 1/7, 5/7, whatever the link noise."""
    w = fusion_weights("resolution", PAPER, [0, 0, 1], dimension=PAPER_D, bound=10.0)
    assert w.tolist() == pytest.approx([1 / 7, 1 / 7, 5 / 7], abs=1e-12)
    quiet = DeviceGroups((50, 50), (2, 4), (0.0, 0.0))
    assert torch.equal(w, fusion_weights("resolution", quiet, [0, 0, 1], dimension=3, bound=10.0))


def test_oracle_fusion_uses_the_measured_distortions():
    w = fusion_weights("oracle", PAPER, [0, 1, 1], dimension=4, bound=10.0, oracle_distortions=[1.0, 2.0, 6.0])
    theta = 1 / (np.array([1.0, 2.0, 6.0]) + 4 * np.array([6.25e-4, 0.125, 0.125]) ** 2)
    assert np.allclose(w.numpy(), theta / theta.sum())
    with pytest.raises(ValueError, match="oracle_distortions must hold one measured"):
        fusion_weights("oracle", PAPER, [0, 1], dimension=4, bound=10.0)
    with pytest.raises(ValueError, match="mode must be one of central-cell, oracle, bound, resolution, mean"):
        fusion_weights("snr", PAPER, [0, 1], dimension=4, bound=10.0)
    with pytest.raises(ValueError, match="group_ids must be a non-empty sequence of group indices in 0..1"):
        fusion_weights("mean", PAPER, [2], dimension=4, bound=10.0)


GROUPS = DeviceGroups(sizes=(4, 4), bits=(2, 4), link_sigma=(0.01, 0.05))
DIM = 20_000


def _protocol(**kwargs):
    options = {"params": {"eps": 0.5, "support": 1.0}, "cluster_sizes": (2, 2), "fusion": "central-cell", **kwargs}
    return DeviceGroupProtocol("dpsq", GROUPS, seed=3, **options)


def _updates(n, seed=0):
    return 1e-3 * torch.randn(n, DIM, generator=torch.Generator().manual_seed(seed))


def test_protocol_is_deterministic_for_a_seed():
    a, b = _protocol(), _protocol()
    clients = a.select_clients(1)
    assert clients == b.select_clients(1)
    x = _updates(len(clients))
    oa, ob = (p.communicate(x, clients, torch.ones(4), 1, global_params=torch.zeros(DIM)) for p in (a, b))
    assert torch.equal(oa.aggregate, ob.aggregate) and oa.views["eavesdropper"] == ob.views["eavesdropper"]
    other = DeviceGroupProtocol("dpsq", GROUPS, seed=4, params={"eps": 0.5, "support": 1.0}, cluster_sizes=(2, 2))
    assert not torch.equal(other.communicate(x, clients, torch.ones(4), 1, global_params=torch.zeros(DIM)).aggregate,
                           oa.aggregate)  # fmt: skip


def test_clusters_have_the_requested_sizes_and_are_uniform():
    p = _protocol()
    heard = np.zeros(GROUPS.total)
    for round_ in range(1, 2_001):
        clients = p.select_clients(round_)
        assert clients == sorted(set(clients))
        assert [sum(GROUPS.group_of(c) == m for c in clients) for m in (0, 1)] == [2, 2]
        heard[clients] += 1
    assert np.all(np.abs(heard / 2_000 - 0.5) < 0.06)
    assert len({tuple(p.select_clients(r)) for r in range(1, 30)}) > 10  # clusters change between rounds


def test_cluster_modes_optimal_random_proportional():
    big = DeviceGroups(sizes=(50, 50), bits=(2, 4), link_sigma=(6.25e-4, 0.125))
    params = {"eps": 1e-6, "support": 10.0}
    optimal = DeviceGroupProtocol("dpsq", big, seed=0, params=params, cluster_sizes="optimal", total=10, bandwidth=30)
    assert optimal.fixed_sizes == (5, 5)
    assert sum(c < 50 for c in optimal.select_clients(7)) == 5
    rand = DeviceGroupProtocol("dpsq", big, seed=0, params=params, cluster_sizes="random", total=10, bandwidth=30)
    sizes = set()
    for round_ in range(1, 40):
        clients = rand.select_clients(round_)
        c1 = sum(c < 50 for c in clients)
        assert len(clients) == 10 and 2 * c1 + 4 * (10 - c1) <= 30
        sizes.add(c1)
    assert sizes == {5, 6, 7, 8, 9}
    prop = DeviceGroupProtocol("dpsq", big, seed=0, params=params, cluster_sizes="proportional", total=10)
    counts = [sum(c < 50 for c in prop.select_clients(r)) for r in range(1, 400)]
    assert all(len(prop.select_clients(r)) == 10 for r in range(1, 20))
    assert np.mean(counts) == pytest.approx(5, abs=0.3) and min(counts) < 5 < max(counts)


def test_communicate_adds_link_noise_and_fuses_with_weights_summing_to_one():
    p = _protocol(cluster_sizes=(4, 4))
    clients = p.select_clients(2)
    x = _updates(8, seed=1)
    out = p.communicate(x, clients, torch.rand(8), 2, global_params=torch.zeros(DIM))
    server = out.views["server"].double()
    assert server.shape == (8, DIM) and len(out.views["eavesdropper"]) == 8
    decoded = torch.stack([
        p.mechanisms[GROUPS.group_of(c)].decode(
            p.mechanisms[GROUPS.group_of(c)].encode(x[u], shared_seed(3, c, 2)), shared_seed(3, c, 2)).double()
        for u, c in enumerate(clients)
    ])  # fmt: skip
    noise = server - decoded
    for m, sigma in enumerate(GROUPS.link_sigma):
        rows = [u for u, c in enumerate(clients) if GROUPS.group_of(c) == m]
        assert noise[rows].var().item() == pytest.approx(sigma**2, rel=0.03)
        assert abs(noise[rows].mean().item()) < 5 * sigma / np.sqrt(noise[rows].numel())
    omega = fusion_weights("central-cell", GROUPS, [GROUPS.group_of(c) for c in clients], dimension=DIM, bound=1.0)
    assert omega.sum().item() == pytest.approx(1.0)
    assert torch.allclose(out.aggregate.double(), omega @ server, atol=1e-7)  # the FedAvg weights are ignored
    assert out.stats["fusion_weight_group_0"] + out.stats["fusion_weight_group_1"] == pytest.approx(1.0)
    assert (out.stats["cluster_size_0"], out.stats["cluster_size_1"]) == (4.0, 4.0)
    # tiny updates in the literal range sit in the central cell: measured distortion ~ Delta_m^2 / 4 per coordinate
    expected = np.mean([(2 / (2**b - 1)) ** 2 / 4 for b in (2, 2, 2, 2, 4, 4, 4, 4)])
    assert out.stats["distortion_per_coordinate"] == pytest.approx(expected, rel=0.02)
    assert out.bits == [8 * len(b) for b in out.views["eavesdropper"]]


def test_oracle_fusion_matches_central_cell_for_small_updates_and_mean_is_equal_weights():
    clients = [0, 1, 4, 5]
    x = _updates(4, seed=2)
    oracle = _protocol(fusion="oracle").communicate(x, clients, torch.ones(4), 1, global_params=torch.zeros(DIM))
    central = _protocol().communicate(x, clients, torch.ones(4), 1, global_params=torch.zeros(DIM))
    assert oracle.stats["fusion_weight_group_1"] == pytest.approx(central.stats["fusion_weight_group_1"], rel=0.02)
    mean = _protocol(fusion="mean").communicate(x, clients, torch.ones(4), 1, global_params=torch.zeros(DIM))
    assert torch.allclose(mean.aggregate, mean.views["server"].mean(dim=0), atol=1e-7)


def test_laplace_sq_protocol_counts_its_noise_in_the_weights():
    p = DeviceGroupProtocol("laplace-sq", GROUPS, seed=0, params={"eps": 1.0, "support": 1.0}, cluster_sizes=(1, 1))
    assert p.noise_variance == pytest.approx(2 * 2.0**2)  # rho = 2C = 2, scale rho/eps1 = 2
    out = p.communicate(_updates(2), [0, 4], torch.ones(2), 1, global_params=torch.zeros(DIM))
    # the Laplace variance 8 per coordinate swamps Delta^2/4 and sigma^2: the weights are nearly equal
    assert out.stats["fusion_weight_group_0"] == pytest.approx(0.5, abs=0.02)
    assert out.views["server"].var().item() == pytest.approx(8.0, rel=0.05)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"mechanism": "gaussian"}, "mechanism must run the device-groups protocol \\(dpsq, laplace-sq\\)"),
        ({"fusion": "snr"}, "fusion must be one of central-cell, oracle, bound, resolution, mean"),
        ({"params": {"bits": 3}}, "params must not set bits"),
        ({"params": {"eps": -1}}, "eps must be a finite number > 0"),
        ({"cluster_sizes": "optimal", "total": 4}, r'cluster_sizes="optimal" needs bandwidth \(B\)'),
        ({"cluster_sizes": "random"}, r'cluster_sizes="random" needs total \(N\)'),
        ({"cluster_sizes": "all", "total": 4}, "cluster_sizes must be one of random, optimal, proportional"),
        ({"cluster_sizes": (0, 2)}, r"cluster_sizes must be one integer 1 <= c_m <= g_m per group \(4, 4\)"),
        ({"cluster_sizes": (2, 2), "bandwidth": 10}, "cluster_sizes \\(2, 2\\) use 12 bits per coordinate"),
        ({"cluster_sizes": "random", "total": 9}, "total must be an integer in 2..8"),
    ],
)
def test_bad_protocol_arguments(kwargs, message):
    options = {"mechanism": "dpsq", "params": {"support": 1.0}, "cluster_sizes": (2, 2), **kwargs}
    with pytest.raises(ValueError, match=message):
        DeviceGroupProtocol(options.pop("mechanism"), GROUPS, seed=0, **options)


def _data(clients=4, per_client=10):
    g = torch.Generator().manual_seed(0)
    n = clients * per_client + 10
    x, y = torch.rand(n, 1, 28, 28, generator=g), torch.randint(0, 10, (n,), generator=g)
    held = Split(x[-10:], y[-10:])
    indices = [torch.arange(k * per_client, (k + 1) * per_client) for k in range(clients)]
    return FederatedData(Split(x[:-10], y[:-10]), held, held, indices)


def test_training_loop_uses_the_protocols_clusters():
    groups = DeviceGroups(sizes=(2, 2), bits=(2, 4), link_sigma=(1e-3, 1e-2))
    protocol = DeviceGroupProtocol("dpsq", groups, seed=0, params={"eps": 1.0, "support": 1.0, "range": "adaptive"},
                                   cluster_sizes=(1, 1), fusion="oracle")  # fmt: skip
    config = TrainingConfig(model="cnn", clients=4, rounds=2, tau=2, lr=0.05, checkpoints=(2,))
    result = FederatedSimulation(create_model("cnn"), _data(), protocol, config, seed=0).run()
    for record in result.rounds:
        assert record.clients == protocol.select_clients(record.round)
        assert [groups.group_of(c) for c in record.clients] == [0, 1]
        assert record.stats["fusion_weight_group_0"] + record.stats["fusion_weight_group_1"] == pytest.approx(1.0)
    (obs,) = result.observations
    assert obs.views["server"].shape == (2, result.num_params)
