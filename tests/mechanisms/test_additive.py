"""Gaussian and Laplace baselines: the error law, clipping, private noise, the analytic claims.

Tolerances: with n = 200_000 errors, the sample variance has relative standard deviation sqrt(2/n) = 0.3%
(Gaussian) and sqrt(5/n) = 0.5% (Laplace, kurtosis 6), so a 2% band is 4-6 standard deviations; the
mean is checked against 5 standard errors. KS p-values > 0.01 with fixed seeds.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.mechanisms.additive import analytic_gaussian_epsilon, clip_l1, clip_l2
from auditkit.mechanisms.guarantee import REPLACE_ONE

N = 200_000
SIGMA = 0.05
SCALE = 0.05


def _inputs():
    g = torch.Generator().manual_seed(0)
    return {
        "zero": torch.zeros(N, dtype=torch.float64),
        "tiny": 1e-7 * torch.randn(N, generator=g, dtype=torch.float64),
        "inside": torch.full((N,), 0.5 / math.sqrt(N), dtype=torch.float64),  # l2 norm 0.5 < clip
        "large": 30 * torch.randn(N, generator=g, dtype=torch.float64),  # far outside: clipped first
    }


@pytest.mark.parametrize("kind", ["zero", "tiny", "inside", "large"])
def test_gaussian_error_is_n0_sigma2_whatever_the_input(kind):
    x = _inputs()[kind]
    m = mechanisms.create("gaussian", sigma=SIGMA, clip=1.0, private_seed=1)
    err = (m(x, seed=3).double() - clip_l2(x, 1.0)).numpy()
    assert abs(err.mean()) < 5 * SIGMA / math.sqrt(N)
    assert err.var() == pytest.approx(SIGMA**2, rel=0.02)
    assert stats.kstest(err, "norm", args=(0, SIGMA)).pvalue > 0.01


@pytest.mark.parametrize("kind", ["zero", "tiny", "large"])
def test_laplace_error_is_laplace_whatever_the_input(kind):
    x = _inputs()[kind]
    m = mechanisms.create("laplace", scale=SCALE, clip=1.0, private_seed=1)
    err = (m(x, seed=3).double() - clip_l1(x, 1.0)).numpy()
    assert abs(err.mean()) < 5 * math.sqrt(2) * SCALE / math.sqrt(N)
    assert err.var() == pytest.approx(2 * SCALE**2, rel=0.02)
    assert stats.kstest(err, "laplace", args=(0, SCALE)).pvalue > 0.01


def test_gaussian_error_law_matches_between_inputs():
    m = mechanisms.create("gaussian", sigma=SIGMA, private_seed=2)
    x = _inputs()
    e0 = (m(x["zero"], 5).double() - clip_l2(x["zero"], 1.0)).numpy()
    e1 = (m(x["large"], 6).double() - clip_l2(x["large"], 1.0)).numpy()
    assert stats.ks_2samp(e0, e1).pvalue > 0.01


def test_clipping():
    x = torch.tensor([3.0, 4.0], dtype=torch.float64)
    assert torch.allclose(clip_l2(x, 1.0), torch.tensor([0.6, 0.8], dtype=torch.float64))
    assert torch.allclose(clip_l1(x, 1.0), torch.tensor([3 / 7, 4 / 7], dtype=torch.float64))
    assert torch.equal(clip_l2(x, 10.0), x)  # inside the ball: unchanged
    assert torch.equal(clip_l1(x, 7.0), x)


@pytest.mark.parametrize("name", ["gaussian", "laplace"])
def test_private_seed_controls_the_noise(name):
    x = torch.zeros(1000)
    same = [mechanisms.create(name, private_seed=9)(x, seed=4) for _ in range(2)]
    assert torch.equal(same[0], same[1])  # reproducible for the same (private_seed, seed)
    assert not torch.equal(same[0], mechanisms.create(name, private_seed=10)(x, seed=4))
    assert not torch.equal(same[0], mechanisms.create(name, private_seed=9)(x, seed=5))  # other client/round
    fresh = mechanisms.create(name)  # private_seed=None: OS entropy on every call
    assert not torch.equal(fresh(x, seed=4), fresh(x, seed=4))


def test_noise_is_drawn_in_float64_then_sent_as_float32():
    m = mechanisms.create("gaussian", sigma=1e-3, private_seed=0)
    x = torch.full((10,), 0.1, dtype=torch.float64)
    enc = m.encode(x, 0)
    assert enc.num_bits == 8 * (5 + 4 * 10)
    assert enc.values.dtype == np.float32


def _delta_of_eps(eps, sensitivity, sigma):
    """Balle & Wang (2018) Theorem 8, evaluated directly (no log space): valid for moderate eps."""
    a, b = sensitivity / (2 * sigma), eps * sigma / sensitivity
    return stats.norm.cdf(a - b) - math.exp(eps) * stats.norm.cdf(-a - b)


@pytest.mark.parametrize(("clip", "sigma", "delta"), [(1.0, 1.0, 1e-5), (1.0, 2.0, 1e-5), (0.5, 0.3, 1e-3)])
def test_gaussian_epsilon_solves_the_analytic_condition(clip, sigma, delta):
    g = mechanisms.create("gaussian", sigma=sigma, clip=clip, delta=delta).guarantee()
    assert g.delta == delta and g.relation is REPLACE_ONE
    assert _delta_of_eps(g.epsilon, 2 * clip, sigma) == pytest.approx(delta, rel=1e-6)
    # The classical bound sigma = D sqrt(2 ln(1.25/delta)) / eps is valid (for eps < 1) and never tighter.
    classical = 2 * clip * math.sqrt(2 * math.log(1.25 / delta)) / sigma
    if classical < 1:
        assert g.epsilon <= classical


def test_gaussian_epsilon_matches_opacus_gdp():
    gdp = pytest.importorskip("opacus.accountants.analysis.gdp")
    for mu, delta in [(1.0, 1e-5), (2.0, 1e-5), (0.5, 1e-3), (5.0, 1e-6)]:
        assert analytic_gaussian_epsilon(mu, 1.0, delta) == pytest.approx(gdp.eps_from_mu(mu=mu, delta=delta), rel=1e-9)


def test_gaussian_epsilon_edge_cases():
    assert analytic_gaussian_epsilon(1.0, 1e3, 0.1) == 0.0  # condition already met at eps = 0
    eps = [analytic_gaussian_epsilon(1.0, s, 1e-5) for s in (1e-4, 1e-2, 1.0, 1e2)]
    assert all(math.isfinite(e) for e in eps) and eps == sorted(eps, reverse=True)
    assert mechanisms.create("gaussian", sigma=1.0, clip=0.5).guarantee().summary() == (
        "(eps=4.377, delta=1e-05)-DP for one round, REPLACE_ONE, l2 clip 0.5"
    )


def test_laplace_epsilon():
    g = mechanisms.create("laplace", scale=0.5, clip=2.0).guarantee()
    assert g.epsilon == pytest.approx(8.0) and g.delta == 0.0
    assert g.sensitivity == "l1 clip 2.0"
