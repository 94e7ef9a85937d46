"""JoPEQ's SNR against hand-computed values and against the variance of a real mechanism's noise."""
import math

import pytest
import torch

import mechanisms
from auditkit.config import from_dict
from auditkit.fl.snr import snr, snr_db
from auditkit.pipeline import Experiment


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


def test_every_round_of_a_run_records_its_snr():
    config = from_dict({"training": {"clients": 3, "rounds": 2, "tau": 2},
                        "mechanism": {"name": "jopeq-laplace", "eps": 4.0, "bits": 2}})
    rounds = Experiment(config).train().result.rounds
    assert all(0 < r.stats["snr"] < math.inf for r in rounds)
    none = from_dict({"training": {"clients": 3, "rounds": 1, "tau": 2}, "mechanism": {"name": "none"}})
    assert Experiment(none).train().result.rounds[0].stats["snr"] == math.inf
