"""Separate baselines gaussian+sdq, laplace+sdq, t-dist+sdq: total error = noise + independent SDQ error.

Tolerances: n = 200_000 coordinates (300_000 pairs for t); the variance band of 2% is > 4 sd for every law
here (kurtosis <= 6 for Laplace + uniform, ~ 5 for t + hexagon with nu = 5.35 at 300_000 pairs); means
within 5 standard errors; KS p > 0.01 at fixed seeds against the exact CDF (Gaussian or Laplace convolved
with a uniform) or, for t + hexagon, an independent Monte Carlo sample (numpy RNG).
"""

import json
import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.mechanisms.additive import clip_l1, clip_l2
from auditkit.mechanisms.sdq import LatticeSDQMessage, SDQMessage

N = 200_000
R3 = math.sqrt(3)
HEX_NORMALS = np.array([[math.cos(a), math.sin(a)] for a in np.radians([30, 90, 150])])
CONFIGS = {
    "gaussian+sdq": {"sigma": 0.05, "bits": 4},  # Delta = 0.125: dither variance 0.0013 vs noise 0.0025
    "laplace+sdq": {"scale": 0.05, "bits": 4},
    "t-dist+sdq": {"bits": 5, "support": 30.0},  # Delta = 1.875: dither variance 0.33 vs noise 0.91
}
CLIPS = {"gaussian+sdq": clip_l2, "laplace+sdq": clip_l1, "t-dist+sdq": clip_l2}


def _gaussian_uniform_cdf(z, sigma, w):
    """CDF of N(0, sigma^2) + Unif(-w/2, w/2): (H(z + w/2) - H(z - w/2)) / w, H(t) = t Phi(t/s) + s phi(t/s)."""

    def h(t):
        return t * stats.norm.cdf(t / sigma) + sigma * stats.norm.pdf(t / sigma)

    return (h(z + w / 2) - h(z - w / 2)) / w


def _laplace_uniform_cdf(z, b, w):
    def h(t):
        return np.where(t >= 0, t + b / 2 * np.exp(-np.abs(t) / b), b / 2 * np.exp(-np.abs(t) / b))

    return (h(z + w / 2) - h(z - w / 2)) / w


def _t_plus_hexagon(pairs, nu, s2, step, seed):
    rng = np.random.default_rng(seed)
    t = rng.standard_normal((pairs, 2)) * np.sqrt(s2 / (rng.chisquare(nu, pairs) / nu))[:, None]
    cells = []
    while sum(len(c) for c in cells) < pairs:
        p = rng.uniform([-2 / 3, -1 / R3], [2 / 3, 1 / R3], size=(pairs, 2))
        cells.append(p[(np.abs(p @ HEX_NORMALS.T) <= 1 / R3).all(axis=1)])
    return t + step * np.concatenate(cells)[:pairs]


def _inputs(n):
    g = torch.Generator().manual_seed(0)
    return {
        "zero": torch.zeros(n, dtype=torch.float64),
        "inside": torch.full((n,), 0.5 / n, dtype=torch.float64),  # l1 norm 0.5: inside both clips
        "large": 30 * torch.randn(n, generator=g, dtype=torch.float64),  # clipped first
    }


def _error(m, x, seed):
    enc = m.encode(x, seed)
    assert enc.overloads == 0
    return (m.decode(enc, seed).double() - CLIPS[m.name](x, 1.0)).numpy()


@pytest.mark.parametrize("kind", ["zero", "inside", "large"])
def test_gaussian_sdq_error_is_gaussian_plus_uniform(kind):
    m = mechanisms.create("gaussian+sdq", private_seed=1, **CONFIGS["gaussian+sdq"])
    e = _error(m, _inputs(N)[kind], seed=2)
    sigma, step = 0.05, m.quantizer.step
    assert step == 0.125
    assert e.var() == pytest.approx(sigma**2 + step**2 / 12, rel=0.02)
    assert abs(e.mean()) < 5 * math.sqrt(sigma**2 + step**2 / 12) / math.sqrt(N)
    assert stats.kstest(e, lambda z: _gaussian_uniform_cdf(z, sigma, step)).pvalue > 0.01
    assert stats.kstest(e, "norm", args=(0, sigma)).pvalue < 1e-6  # the quantization error is really there


@pytest.mark.parametrize("kind", ["zero", "inside", "large"])
def test_laplace_sdq_error_is_laplace_plus_uniform(kind):
    m = mechanisms.create("laplace+sdq", private_seed=1, **CONFIGS["laplace+sdq"])
    e = _error(m, _inputs(N)[kind], seed=3)
    b, step = 0.05, m.quantizer.step
    assert e.var() == pytest.approx(2 * b**2 + step**2 / 12, rel=0.02)
    assert abs(e.mean()) < 5 * math.sqrt(2 * b**2 + step**2 / 12) / math.sqrt(N)
    assert stats.kstest(e, lambda z: _laplace_uniform_cdf(z, b, step)).pvalue > 0.01


def test_t_dist_sdq_error_is_t_plus_hexagon():
    pairs = 300_000
    m = mechanisms.create("t-dist+sdq", private_seed=0, **CONFIGS["t-dist+sdq"])
    e = _error(m, _inputs(2 * pairs)["large"], seed=4).reshape(-1, 2)
    step = m.quantizer.step
    total = m.noise.variance + 5 / 54 * step**2
    assert np.allclose(e.var(axis=0), total, rtol=0.02)
    assert np.all(np.abs(e.mean(axis=0)) < 5 * math.sqrt(total / pairs))
    ref = _t_plus_hexagon(pairs, m.noise.nu, m.noise.s2, step, seed=5)
    for f in (lambda p: p[:, 0], lambda p: p[:, 1], lambda p: np.hypot(p[:, 0], p[:, 1])):
        assert stats.ks_2samp(f(e), f(ref)).pvalue > 0.01


@pytest.mark.parametrize("name", list(CONFIGS))
def test_error_law_is_the_same_at_very_different_inputs(name):
    m = mechanisms.create(name, private_seed=2, **CONFIGS[name])
    errors = {kind: _error(m, x, seed=10 + i) for i, (kind, x) in enumerate(_inputs(N).items())}
    for kind in ("inside", "large"):
        assert stats.ks_2samp(errors[kind], errors["zero"]).pvalue > 0.01


@pytest.mark.parametrize("name", list(CONFIGS))
def test_decode_is_bit_identical_and_a_wrong_seed_fails(name):
    m = mechanisms.create(name, private_seed=3, **CONFIGS[name])
    x = _inputs(N)["large"]
    enc = m.encode(x, 7)
    # The client's own view of what it sent: its noisy update through the same quantizer.
    assert torch.equal(m.decode(enc, 7), m.quantizer(m.noise.perturb(x, 7), 7))
    assert torch.equal(m.decode(type(enc).from_bytes(enc.to_bytes()), 7), m.decode(enc, 7))
    right = _error(m, x, 7)
    wrong = (m.decode(enc, 8).double() - CLIPS[name](x, 1.0)).numpy()
    assert wrong.var() > right.var() * 1.05 and stats.ks_2samp(right, wrong).pvalue < 1e-6


@pytest.mark.parametrize(
    ("name", "noise"), [("gaussian+sdq", "gaussian"), ("laplace+sdq", "laplace"), ("t-dist+sdq", "t-dist")]
)
def test_guarantee_is_the_noise_mechanisms(name, noise):
    g = mechanisms.create(name).guarantee()
    base = mechanisms.create(noise).guarantee()
    assert (g.epsilon, g.delta, g.relation, g.unit, g.sensitivity, g.flags) == (
        base.epsilon,
        base.delta,
        base.relation,
        base.unit,
        base.sensitivity,
        base.flags,
    )
    assert g.caveats[: len(base.caveats)] == base.caveats and "post-processing" in g.caveats[-1]


def test_parameters_are_the_union_and_reach_both_parts():
    m = mechanisms.create("gaussian+sdq", sigma=0.2, clip=2, bits=3, support=4.0, compat="jopeq-code")
    assert m.noise.params == {"sigma": 0.2, "clip": 2.0, "delta": 1e-5}
    assert (m.quantizer.levels, m.quantizer.step) == (9, pytest.approx(8 / 9))
    assert [p.name for p in m.params_spec] == ["sigma", "clip", "delta", "bits", "support", "compat"]
    with pytest.raises(ValueError, match="unknown parameter 'scale' for mechanism 'gaussian\\+sdq'"):
        mechanisms.create("gaussian+sdq", scale=0.1)
    t = mechanisms.create("t-dist+sdq")
    assert t.quantizer.params["support"] == pytest.approx(1.5 * math.sqrt(1 + t.noise.variance))
    assert type(mechanisms.create("laplace+sdq").encode(torch.zeros(3), 0)) is SDQMessage
    assert type(t.encode(torch.zeros(3), 0)) is LatticeSDQMessage


@pytest.mark.parametrize("name", list(CONFIGS))
def test_overloads_are_reported(name):
    m = mechanisms.create(name, private_seed=0, support=0.01)
    enc = m.encode(_inputs(1000)["large"], 0)
    assert enc.overloads > 0 and m.last_overloads == enc.overloads


NEW = ["gaussian+sdq", "laplace+sdq", "t-dist", "t-dist+sdq", "sdq-hex"]


@pytest.mark.parametrize("name", NEW)
@pytest.mark.parametrize("n", [0, 1, 7, 1000])
def test_mechanism_contract(name, n):
    m = mechanisms.create(name, private_seed=5)
    x = 0.05 * torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    enc = m.encode(x, 11)
    out = m(x, 11)
    assert out.dtype == torch.float32 and out.shape == (n,) and torch.equal(out, m.decode(enc, 11))
    back = type(enc).from_bytes(enc.to_bytes())
    assert back == enc and enc.num_bits == 8 * len(enc.to_bytes()) and torch.equal(m.decode(back, 11), out)
    d = m.guarantee().to_dict()
    assert d == json.loads(json.dumps(d))
    for bad, error in [(torch.zeros(3, 3), ValueError), (torch.tensor([math.inf]), ValueError), ([0.0], TypeError)]:
        with pytest.raises(error):
            m.encode(bad, 0)
