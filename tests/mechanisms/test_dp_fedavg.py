"""DP-FedAvg (``auditkit.mechanisms.dp_fedavg``): its parameters, claim and accounting, and the central-noise round
protocol's law, checked statistically (fixed seeds; KS tests at p > 1e-3, the std to 1 % where its standard error
is 0.11 %)."""
import math

import dp_accounting
import pytest
import torch
from scipy import stats

from auditkit import accounting, mechanisms
from auditkit.fl.aggregation import build_protocol
from auditkit.mechanisms import ProtocolContext
from auditkit.mechanisms.additive import analytic_gaussian_epsilon


def _protocol(z=1.0, clip=1.0, clipping="client", clients=100, participation="poisson", rate=0.1, seed=0):
    m = mechanisms.create("dp-fedavg", noise_multiplier=z, clip=clip, clipping=clipping)
    context = ProtocolContext(seed=seed, clients=clients, participation=participation, sample_rate=rate)
    return m, build_protocol(m, context)


def _updates(rows: int, size: int, norm: float, seed: int = 0) -> torch.Tensor:
    x = torch.randn(rows, size, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return norm * x / x.norm(dim=1, keepdim=True)


@pytest.mark.parametrize(("params", "message"), [
    ({"noise_multiplier": 0.0}, "noise_multiplier must be a finite number > 0, got 0.0"),
    ({"noise_multiplier": -1.0}, "noise_multiplier must be a finite number > 0"),
    ({"clip": 0.0}, "clip must be a finite number > 0"),
    ({"clipping": "both"}, "clipping must be one of client, server"),
])
def test_bad_parameters_are_refused_in_one_line(params, message):
    with pytest.raises(ValueError, match=message) as err:
        mechanisms.create("dp-fedavg", **params)
    assert "\n" not in str(err.value)


def test_the_claim_is_the_gaussian_mechanism_on_a_sum_of_sensitivity_clip():
    m = mechanisms.create("dp-fedavg", noise_multiplier=1.3, clip=0.7, delta=1e-6)
    claim = m.guarantee()
    assert claim.epsilon == pytest.approx(analytic_gaussian_epsilon(0.7, 1.3 * 0.7, 1e-6), rel=1e-12)
    assert claim.relation is dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    assert claim.threat_model.startswith("aggregate")
    assert mechanisms.create("dp-fedavg").guarantee().epsilon == pytest.approx(4.377, abs=1e-3)  # z = 1
    assert m.dp_event() == dp_accounting.GaussianDpEvent(1.3)
    assert mechanisms.capability(m, "client_sampling") == ("full", "poisson")
    assert mechanisms.capability(mechanisms.create("gaussian"), "client_sampling") == ()


def test_the_composed_claim_is_dp_accountings_sampled_gaussian():
    m = mechanisms.create("dp-fedavg", noise_multiplier=1.0, clip=1.0)
    for accountant in ("dp_accounting-rdp", "dp_accounting-pld"):
        report = accounting.account(m, rounds=100, composition_delta=1e-5, accountant=accountant, participation="poisson",
                                    sample_rate=0.1)
        direct = (dp_accounting.rdp.RdpAccountant() if accountant.endswith("rdp")
                  else dp_accounting.pld.PLDAccountant())
        direct.compose(dp_accounting.SelfComposedDpEvent(
            dp_accounting.PoissonSampledDpEvent(0.1, dp_accounting.GaussianDpEvent(1.0)), 100))
        assert report.sampling.amplified
        assert report.composed.epsilon == pytest.approx(direct.get_epsilon(1e-5), rel=1e-9)
    assert report.composed.epsilon == pytest.approx(7.0466, rel=1e-3)
    full = accounting.account(m, rounds=100, accountant="dp_accounting-pld")
    assert not full.sampling.amplified and full.composed.epsilon > 5 * report.composed.epsilon


def test_a_local_mechanism_is_not_amplified_and_a_sampling_claim_refuses_other_participations():
    gaussian = mechanisms.create("gaussian", sigma=1.0, clip=0.5)
    full = accounting.account(gaussian, rounds=10).composed.epsilon
    sampled = accounting.account(gaussian, rounds=10, participation="poisson", sample_rate=0.1)
    assert sampled.composed.epsilon == full and not sampled.sampling.amplified
    assert "server sees who sent what" in sampled.sampling.note
    with pytest.raises(ValueError, match="'uniform' has no sampling claim"):
        accounting.account(mechanisms.create("dp-fedavg"), rounds=10, participation="uniform")
    with pytest.raises(ValueError, match="needs sample_rate"):
        accounting.account(mechanisms.create("dp-fedavg"), rounds=10, participation="poisson")


def test_the_protocol_refuses_a_participation_without_a_sampling_claim():
    for participation in ("uniform", "replacement"):
        with pytest.raises(ValueError, match=f"{participation!r} has no sampling claim"):
            _protocol(participation=participation)


def test_the_server_noise_on_the_sum_is_gaussian_with_std_z_clip():
    """200 rounds of 10 clients whose updates (norm 3 C) are all clipped: the residual m * aggregate - sum(clip)
    over 200 x 2,000 coordinates is N(0, (z C)^2)."""
    z, clip = 1.3, 0.5
    m, protocol = _protocol(z=z, clip=clip, clients=100, rate=0.1)
    updates = _updates(10, 2000, 3 * clip).float()
    clipped = updates.double() * (clip / (3 * clip))
    residuals = []
    for round_ in range(1, 201):
        outcome = protocol.communicate(updates, list(range(10)), torch.ones(10), round_, global_params=None)
        residuals.append(outcome.aggregate.double() * 10.0 - clipped.sum(0))  # m = q K = 10
    residual = torch.cat(residuals).numpy()
    sigma = z * clip
    assert stats.kstest(residual / sigma, "norm").pvalue > 1e-3
    assert residual.std() == pytest.approx(sigma, rel=0.01)
    assert abs(residual.mean()) < 4 * sigma / math.sqrt(residual.size)
    assert outcome.stats["noise_std_aggregate"] == pytest.approx(sigma / 10)


def test_the_denominator_is_the_expected_count_and_an_empty_round_releases_noise():
    _, poisson = _protocol(z=2.0, clip=1.0, clients=50, rate=0.2)
    empty = poisson.communicate(torch.zeros(0, 10_000), [], torch.ones(0), 3, global_params=None)
    assert empty.bits == [] and empty.views["server"].shape == (0, 10_000)
    assert empty.aggregate.double().std().item() == pytest.approx(2.0 / 10, rel=0.01)  # z C / (q K)
    assert poisson.releases_empty_rounds
    _, full = _protocol(participation="full", rate=None, clients=40)
    assert full.denominator == 40


@pytest.mark.parametrize("clipping", ["client", "server"])
def test_clipping_comes_before_the_noise_and_the_views_say_what_each_adversary_saw(clipping):
    m, protocol = _protocol(z=1e-12, clip=1.0, clipping=clipping, clients=8, rate=0.5)
    updates = torch.cat([_updates(2, 30, 4.0, seed=1), _updates(2, 30, 0.5, seed=2)]).float()
    outcome = protocol.communicate(updates, [0, 1, 2, 3], torch.ones(4), 1, global_params=None)
    clipped = torch.stack([m.clip_update(u) for u in updates])
    assert torch.allclose(outcome.aggregate.double(), clipped.sum(0) / 4, atol=1e-6)  # m = 0.5 x 8
    assert torch.allclose(outcome.views["aggregate"].double(), clipped.sum(0), atol=1e-6)
    server = outcome.views["server"]
    expected = clipped if clipping == "client" else updates.double()
    assert torch.allclose(server.double(), expected, atol=1e-6)  # client clipping: clipped in clear; server: raw
    assert outcome.bits == [8 * len(p) for p in outcome.views["eavesdropper"]]
    assert torch.allclose(outcome.views["aggregate-informed"].double(), clipped, atol=1e-6)


def test_the_informed_view_of_each_client_is_its_clipped_update_plus_the_rounds_noise():
    m, protocol = _protocol(z=2.0, clip=1.0, clients=10, rate=0.3)
    updates = _updates(3, 50, 5.0, seed=4).float()
    outcome = protocol.communicate(updates, [1, 4, 7], torch.ones(3), 2, global_params=None)
    clipped = torch.stack([m.clip_update(u) for u in updates])
    noise = outcome.views["aggregate"].double() - clipped.sum(0)
    assert noise.std().item() == pytest.approx(2.0, rel=0.25)  # 50 coordinates of N(0, 4)
    assert torch.allclose(outcome.views["aggregate-informed"].double(), clipped + noise, atol=1e-5)


def test_the_informed_adversary_view_is_the_mechanism_itself():
    """The mechanism's own samples (what distinguishing and identification audit) have the law of the aggregate
    minus the other clients' clipped updates: clip(x) + N(0, (z C)^2 I)."""
    m = mechanisms.create("dp-fedavg", noise_multiplier=0.8, clip=0.5, private_seed=3)
    x = torch.zeros(4000, dtype=torch.float64)
    x[0] = 2.0  # clipped to 0.5
    y = torch.stack([m(x, seed) for seed in range(50)]).double()
    sigma = 0.4
    assert stats.kstest((y[:, 1:].flatten() / sigma).numpy(), "norm").pvalue > 1e-3
    assert y[:, 0].mean().item() == pytest.approx(0.5, abs=4 * sigma / math.sqrt(50))
