"""What mechanisms declare (``auditkit.mechanisms.capabilities``): which built-ins declare what, the rule for inherited
capabilities, the generic events, the clip rescaling of tiling, and every declared output density.

Output log-densities: each model must match the real mechanism's outputs. The densities factorise over coordinates (or pairs), so the law of the first output coordinate is the
density in y_0 with the other coordinates held fixed, normalised numerically on a fine grid. 20,000 outputs
of the real mechanism are compared with that CDF by a Kolmogorov-Smirnov test at p > 1e-3 (fixed seeds).
Quantized mechanisms are configured without overload, the condition of their model.
"""

import numpy as np
import pytest
import torch
from scipy import stats
from scipy.integrate import trapezoid

from auditkit import mechanisms
from auditkit.attacks.bulk_sampling import bulk_sampler
from auditkit.mechanisms import capability, declared
from auditkit.mechanisms.additive import Laplace
from auditkit.mechanisms.noisy_sdq import gaussian_uniform_logpdf


def output_log_density(m):
    return capability(m, "output_log_density")

FACTORISED = {
    "gaussian": {"sigma": 0.5, "clip": 0.5},
    "laplace": {"scale": 0.5, "clip": 0.5},
    "cepam-gaussian": {"sigma": 0.5, "clip": 0.5, "n": 3},
    "cepam-laplace": {"scale": 0.5, "clip": 0.5},
    "gaussian+sdq": {"sigma": 0.5, "clip": 0.5, "bits": 4, "support": 4.0},
    "laplace+sdq": {"scale": 0.5, "clip": 0.5, "bits": 4, "support": 8.0},
    "jopeq-laplace": {"eps": 4.0, "bits": 8, "support": 6.0},
    "jopeq-exact": {"eps": 4.0},
    "msp-laplace": {"eps": 1.0, "clip": 0.5},
    "dp-fedavg": {"noise_multiplier": 1.0, "clip": 0.5},
}


def _input(name: str) -> np.ndarray:
    if name.startswith("jopeq"):
        x = np.zeros(9)
        x[0], x[1] = 0.8, 0.6  # ||x|| = 1 with 9 blocks: zeta = 1
        return x
    return np.array([0.5, 0.0, 0.0]) if name != "laplace" else np.array([0.3, 0.2, 0.0])


def test_every_declared_density_is_checked_here():
    declaring = {n for n in mechanisms.names()
                 if mechanisms.origin(n) == "built-in" and declared(mechanisms.create(n), "output_log_density")}
    assert declaring - {"t-dist"} == set(FACTORISED)  # t-dist has its exact check below


@pytest.mark.parametrize("name", sorted(FACTORISED))
def test_first_coordinate_follows_the_density_model(name):
    m = mechanisms.create(name, private_seed=5, **FACTORISED[name])
    x = _input(name)
    y = bulk_sampler(m, seed=5)(torch.from_numpy(x), 20_000, 0).numpy()
    log_density = output_log_density(m)
    grid = np.linspace(y[:, 0].min() - 1, y[:, 0].max() + 1, 40_001)
    rows = np.tile(np.median(y, axis=0), (grid.size, 1))
    rows[:, 0] = grid
    pdf = np.exp(log_density(rows, x) - log_density(rows, x).max())
    cdf = np.concatenate([[0.0], np.cumsum((pdf[1:] + pdf[:-1]) / 2)])
    cdf /= cdf[-1]
    assert stats.kstest(y[:, 0], lambda v: np.interp(v, grid, cdf)).pvalue > 1e-3


def test_t_dist_density_is_the_bivariate_t_up_to_a_constant():
    m = mechanisms.create("t-dist", eps=4.0, clip=1.0)
    x = np.array([3.0, 4.0])  # clipped to (0.6, 0.8)
    y = np.random.default_rng(0).normal(size=(50, 2)) * 3
    ours = output_log_density(m)(y, x)
    exact = stats.multivariate_t(loc=[0.6, 0.8], shape=m.s2 * np.eye(2), df=m.nu).logpdf(y)
    np.testing.assert_allclose(ours - exact, (ours - exact)[0], atol=1e-9)


def test_gaussian_uniform_logpdf_integrates_to_the_interval_width():
    z = np.linspace(-12, 12, 200_001)
    density = np.exp(gaussian_uniform_logpdf(z, 0.7, 1.5))
    assert trapezoid(density, z) == pytest.approx(1.5, rel=1e-6)
    assert np.isfinite(gaussian_uniform_logpdf(np.array([60.0]), 0.7, 1.5)).all()  # deep tail: no log(0)


@pytest.mark.parametrize("name", ["none", "sdq", "sdq-hex", "jopeq-t", "t-dist+sdq"])
def test_laws_without_a_closed_form_have_no_density(name):
    assert output_log_density(mechanisms.create(name)) is None


def test_paper000_normalisation_has_no_density():
    assert output_log_density(mechanisms.create("cepam-gaussian", compat="paper000")) is None


def test_a_capability_inherited_from_another_registered_mechanism_is_not_declared():
    class Quieter(Laplace):  # changes the noise: Laplace's tiling, setting and density need not hold for it
        def _noise(self, n, gen):
            return super()._noise(n, gen) / 2

    q = Quieter(scale=1.0)
    for name in ("tiling", "audit_setting", "output_log_density", "dp_event"):
        assert declared(mechanisms.create("laplace"), name) and not declared(q, name)
    assert capability(q, "tiling") is None and capability(q, "output_log_density") is None
    assert capability(q, "dp_event") == mechanisms.pure_epsilon_event(2.0)  # the generic event of its claim

    class Redeclared(Quieter):
        tiling = Laplace.tiling

    assert declared(Redeclared(scale=1.0), "tiling") and not declared(Redeclared(scale=1.0), "audit_setting")


def test_generic_events_of_claims():
    import dp_accounting

    assert capability(mechanisms.create("sdq"), "dp_event") == dp_accounting.NonPrivateDpEvent()
    rr = capability(mechanisms.create("dpsq", eps=0.5), "dp_event")
    assert isinstance(rr, dp_accounting.RandomizedResponseDpEvent) and rr.num_buckets == 2
    assert np.log((1 - rr.noise_parameter / 2) / (rr.noise_parameter / 2)) == pytest.approx(0.5)  # P(truth) ratio
    refused = capability(mechanisms.create("cepam-gaussian", compat="paper000"), "dp_event")
    assert isinstance(refused, dp_accounting.UnsupportedDpEvent) and "||x||" in refused.reason
    gaussian_delta = mechanisms.claim_event(mechanisms.create("gaussian").guarantee())  # delta > 0, no noise model
    assert isinstance(gaussian_delta, dp_accounting.UnsupportedDpEvent) and "noise model" in gaussian_delta.reason


@pytest.mark.parametrize(("name", "params"), [("gaussian", {"clip": 0.5}), ("laplace", {"clip": 0.5}),
                                              ("dpsq", {"support": 2.0}), ("t-dist", {"clip": 0.5})])
def test_tiled_copies_are_clipped_like_one_call(name, params):
    m = mechanisms.create(name, private_seed=0, **params)
    tiling = capability(m, "tiling")
    x = torch.tensor([3.0, -4.0], dtype=torch.float64)
    copies = 64
    tiled = tiling.for_copies(copies).clip_update(x.repeat(copies)) if name == "dpsq" else \
        tiling.for_copies(copies)._clip(x.repeat(copies))
    single = m.clip_update(x) if name == "dpsq" else m._clip(x)
    torch.testing.assert_close(tiled.view(copies, -1), single.expand(copies, -1), rtol=1e-12, atol=0)
    if name == "t-dist":
        assert (tiling.for_copies(copies).nu, tiling.for_copies(copies).s2) == (m.nu, m.s2)
