"""JoPEQ's SNR against hand-computed values and against the variance of a real mechanism's noise."""
import math

import pytest
import torch

from auditkit import mechanisms
from auditkit.config import from_dict
from auditkit.fl.snr import snr, snr_db
from auditkit.stages.train import Experiment
from auditkit.results import training_entry


def test_snr_of_a_synthetic_round_is_the_mean_of_the_clients_variance_ratios():
    true = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.0, 0.0, 2.0, 2.0]])
    error = torch.tensor([[0.5, -0.5, 0.5, -0.5], [1.0, -1.0, 1.0, -1.0]])
    # client 1: Var(h) = 1.25, Var(e) = 0.25 -> 5; client 2: 1 / 1 -> 1; mean 3
    assert snr(true, true + error) == pytest.approx(3.0)
    assert snr_db(3.0) == pytest.approx(10 * math.log10(3.0))
    assert snr(true, true + 7.0) == math.inf  # a constant error has no variance
    with pytest.raises(ValueError, match="one shape"):
        snr(true, true[:1])


def test_snr_through_the_gaussian_mechanism_is_signal_variance_over_sigma_squared():
    g = mechanisms.create("gaussian", sigma=0.5, clip=1e9)
    true = torch.randn(8, 20_000, generator=torch.Generator().manual_seed(0)) * 2.0  # Var 4: SNR 16
    decoded = torch.stack([g(row, seed) for seed, row in enumerate(true)])
    assert snr(true, decoded) == pytest.approx(16.0, rel=0.03)  # 8 x 2e4 coordinates: ~0.5% standard error


def test_every_round_of_a_run_records_its_snr_and_results_carry_it_in_db():
    config = from_dict({"training": {"clients": 3, "rounds": 2, "tau": 2},
                        "mechanism": {"name": "jopeq-laplace", "eps": 4.0, "bits": 2}})
    run = Experiment(config).train()
    rounds = run.result.rounds
    assert all(0 < r.stats["snr"] < math.inf for r in rounds)
    entry = training_entry(run.result, run.protocol)
    per_round = [10 * math.log10(r.stats["snr"]) for r in rounds]
    assert [r["snr_db"] for r in entry["rounds"]] == pytest.approx(per_round)
    assert entry["final"]["snr_db"] == pytest.approx(sum(per_round) / 2)
    none = from_dict({"training": {"clients": 3, "rounds": 1, "tau": 2}, "mechanism": {"name": "none"}})
    lossless = Experiment(none).train()
    assert lossless.result.rounds[0].stats["snr"] == math.inf
    assert training_entry(lossless.result, lossless.protocol)["final"]["snr_db"] == math.inf


def test_a_consensus_protocol_has_no_snr():
    config = from_dict({"training": {"clients": 4, "rounds": 1, "tau": 2},
                        "mechanism": {"name": "msp", "consensus_rounds": 2}})
    run = Experiment(config).train()
    entry = training_entry(run.result, run.protocol)
    assert entry["rounds"][0]["snr_db"] is None and entry["final"]["snr_db"] is None


def test_the_snr_signal_is_the_update_as_the_mechanism_receives_it_after_its_clip():
    """An update 100 times the clip: measured against the true update the error is mostly the clip's shrinkage
    (SNR ~ 1); against the clipped update it is the mechanism's noise alone, Var(clip(h)) / sigma^2 = 100."""
    from auditkit.fl.aggregation import UplinkProtocol

    gaussian = mechanisms.create("gaussian", sigma=1e-4, clip=0.1, private_seed=1)
    protocol = UplinkProtocol(gaussian, seed=0)
    updates = torch.randn(4, 10_000, generator=torch.Generator().manual_seed(1), dtype=torch.float64) * 0.1  # norm ~10
    clipped = protocol.received(updates, [0, 1, 2, 3])
    assert torch.linalg.vector_norm(clipped, dim=1) == pytest.approx([0.1] * 4)
    outcome = protocol.communicate(updates.float(), [0, 1, 2, 3], torch.ones(4), 1)
    expected = float((clipped.var(dim=1, unbiased=False) / 1e-8).mean())  # Var(clip(h)) ~ 1e-6 per coordinate
    assert expected == pytest.approx(100, rel=0.05)
    assert snr(clipped, outcome.views["server"]) == pytest.approx(expected, rel=0.03)
    assert snr(updates, outcome.views["server"]) < 1.1  # the unclipped reading measures the clip's shrinkage


@pytest.mark.parametrize("name", ["gaussian", "cepam-gaussian"])
def test_the_uplink_snr_rises_with_the_claimed_epsilon_on_a_fixed_model(name):
    """One round from the same initial model with the noise calibrated to eps 1, 4, 16 and 64: the clients'
    updates are identical, so the SNR can only follow the noise, and must rise with eps."""
    values = []
    for eps in (1.0, 4.0, 16.0, 64.0):
        config = from_dict({"training": {"clients": 3, "rounds": 1, "tau": 2, "model": "mlp"},
                            "mechanism": {"name": name, "clip": 0.1, "target_eps": eps}})
        values.append(Experiment(config).train().result.rounds[0].stats["snr"])
    assert values == sorted(values) and values[-1] > 10 * values[0]
