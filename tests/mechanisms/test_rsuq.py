"""The RSUQ / LRSUQ core: error law, independence of x, acceptance rates, shared-stream replay, latents.

Tolerances (fixed seeds): KS p-values > 0.01 on >= 200,000 errors; per-coordinate variance within 2%
(its relative sd is sqrt((kurtosis - 1) / N) <= 0.6% here, so 2% is >= 3.5 sd); |mean| < 5 sd / sqrt(N);
acceptance rate N / sum(H) within 1% relative of p (relative sd sqrt(1 - p) / sqrt(N) <= 0.16% at
N = 200,000 rows, so 1% is >= 6 sd).
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

import auditkit.mechanisms.rsuq as rsuq
from auditkit.mechanisms.rsuq import (
    GaussianTarget,
    LaplaceTarget,
    StudentTTarget,
    acceptance_probability,
    rsuq_decode,
    rsuq_encode,
    shared_stream,
)

SAMPLES = 240_000  # coordinates per error sample (a multiple of 1, 2, 3)

TARGETS = [
    (GaussianTarget(1, 0.1), stats.norm(scale=0.1)),
    (GaussianTarget(2, 0.1), stats.norm(scale=0.1)),
    (GaussianTarget(3, 0.1), stats.norm(scale=0.1)),
    (LaplaceTarget(1, 0.05), stats.laplace(scale=0.05)),
    (LaplaceTarget(2, 0.05), stats.laplace(scale=0.05)),
    (StudentTTarget(1, 10.0, 0.02), stats.t(10.0, scale=math.sqrt(0.02))),
    (StudentTTarget(2, 10.0, 0.02), stats.t(10.0, scale=math.sqrt(0.02))),
]


def _rows(n, scale, seed=0, count=SAMPLES):
    g = torch.Generator().manual_seed(seed)
    return scale * torch.randn(count // n, n, generator=g, dtype=torch.float64)


def _errors(target, x, seed):
    radius = target.radius(x.shape[0], shared_stream(seed, "latent"))
    code = rsuq_encode(x, radius, seed, norm=target.norm, purpose="dither")
    y = rsuq_decode(code.iterations, code.indices, radius, seed, norm=target.norm, purpose="dither")
    return (y - x).numpy(), code


@pytest.mark.parametrize(
    ("n", "norm", "p"),
    [(1, "l2", 1.0), (2, "l2", math.pi / 4), (3, "l2", math.pi / 6), (1, "l1", 1.0), (2, "l1", 0.5), (3, "l1", 1 / 6)],
)
def test_acceptance_probability_is_the_volume_ratio(n, norm, p):
    assert acceptance_probability(n, norm) == pytest.approx(p, rel=1e-12)


@pytest.mark.parametrize(("n", "norm", "p"), [(2, "l2", math.pi / 4), (3, "l2", math.pi / 6), (2, "l1", 0.5)])
def test_acceptance_rate_matches_the_volume_ratio(n, norm, p):
    # The rate must not depend on x: once for coordinates ~ r, once far from 0 in cell units.
    target = GaussianTarget(n, 0.1) if norm == "l2" else LaplaceTarget(n, 0.1)
    for scale, seed in ((0.1, 1), (50.0, 2)):
        _, code = _errors(target, _rows(n, scale, seed, count=200_000 * n), seed)
        rate = code.iterations.numel() / code.iterations.sum().item()
        assert abs(rate / p - 1) < 0.01, (scale, rate, p)


@pytest.mark.parametrize(("target", "marginal"), TARGETS, ids=[repr(t) for t, _ in TARGETS])
def test_error_is_the_target_and_uncorrelated_with_x(target, marginal):
    x = _rows(target.n, 0.3, seed=3)
    errors, _ = _errors(target, x, seed=4)
    e = errors.ravel()
    assert stats.kstest(e, marginal.cdf).pvalue > 0.01
    assert e.var() == pytest.approx(marginal.var(), rel=0.02)
    assert abs(e.mean()) < 5 * marginal.std() / math.sqrt(e.size)
    assert abs(np.corrcoef(e, x.numpy().ravel())[0, 1]) < 0.01
    if target.n > 1 and isinstance(target, GaussianTarget):  # the joint law, not only the marginals
        squared = (errors**2).sum(axis=1) / target.sigma**2
        assert stats.kstest(squared, stats.chi2(target.n).cdf).pvalue > 0.01


@pytest.mark.parametrize("target", [GaussianTarget(3, 0.1), GaussianTarget(2, 0.01), LaplaceTarget(1, 0.1)], ids=repr)
def test_error_law_is_the_same_at_very_different_inputs(target):
    count = 200_000 * target.n
    inputs = {
        "zero": torch.zeros(count // target.n, target.n, dtype=torch.float64),
        "tiny": _rows(target.n, 1e-9, seed=5, count=count),
        "large": _rows(target.n, 1e3, seed=6, count=count),
        "half-cell": torch.full((count // target.n, target.n), 12345.5, dtype=torch.float64),
    }
    errors = {name: _errors(target, x, seed=10 + i)[0].ravel() for i, (name, x) in enumerate(inputs.items())}
    names = list(errors)
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            assert stats.ks_2samp(errors[a], errors[b]).pvalue > 0.01, (a, b)


@pytest.mark.parametrize("target", [GaussianTarget(1, 0.1), GaussianTarget(3, 0.1), LaplaceTarget(2, 0.1)], ids=repr)
def test_decoder_replays_the_encoder_bit_for_bit(target):
    x = _rows(target.n, 0.5, seed=7, count=30_000)
    _, code = _errors(target, x, seed=8)
    radius = target.radius(x.shape[0], shared_stream(8, "latent"))
    y = rsuq_decode(code.iterations, code.indices, radius, 8, norm=target.norm, purpose="dither")
    assert torch.equal(y, code.output)


def test_a_wrong_seed_does_not_decode_to_x():
    target = GaussianTarget(2, 0.01)
    x = _rows(2, 1.0, seed=9, count=20_000)
    radius = target.radius(x.shape[0], shared_stream(1, "latent"))
    code = rsuq_encode(x, radius, 1, norm="l2", purpose="dither")
    wrong_radius = target.radius(x.shape[0], shared_stream(2, "latent"))
    wrong = rsuq_decode(code.iterations, code.indices, wrong_radius, 2, norm="l2", purpose="dither")
    assert ((wrong - x) ** 2).mean().item() > 100 * target.sigma**2


def test_alpha_only_relabels_m():
    target = GaussianTarget(3, 0.05)
    x = _rows(3, 0.7, seed=11, count=60_000)
    radius = target.radius(x.shape[0], shared_stream(3, "latent"))
    codes = [rsuq_encode(x, radius, 3, norm="l2", purpose="dither", alpha=a) for a in (1.0, 1e-5, 3.7)]
    for code in codes[1:]:
        assert torch.equal(code.iterations, codes[0].iterations)
        assert torch.equal(code.indices, codes[0].indices)
        np.testing.assert_allclose(code.output.numpy(), codes[0].output.numpy(), rtol=1e-13, atol=1e-15)


def test_iteration_counts_are_validated_and_the_cap_fails_loudly(monkeypatch):
    target = GaussianTarget(3, 0.1)
    x = _rows(3, 0.1, seed=12, count=3000)
    radius = target.radius(x.shape[0], shared_stream(1, "latent"))
    code = rsuq_encode(x, radius, 1, norm="l2", purpose="dither")
    for bad in (0, rsuq.iteration_cap(3, "l2") + 1):
        h = code.iterations.clone()
        h[0] = bad
        with pytest.raises(ValueError, match="iteration count"):
            rsuq_decode(h, code.indices, radius, 1, norm="l2", purpose="dither")
    monkeypatch.setattr(rsuq, "iteration_cap", lambda n, norm: 1)
    with pytest.raises(RuntimeError, match="not accepted"):
        rsuq_encode(x, radius, 1, norm="l2", purpose="dither")


def test_iteration_cap_bounds_the_failure_probability():
    assert rsuq.iteration_cap(1, "l2") == rsuq.iteration_cap(3, "l2") == 64
    cap = rsuq.iteration_cap(8, "l2")
    assert (1 - acceptance_probability(8, "l2")) ** cap <= 2.0**-64 < (1 - acceptance_probability(8, "l2")) ** (cap - 1)


def test_bad_rows_and_radii_are_rejected():
    x = torch.zeros(4, 2, dtype=torch.float64)
    with pytest.raises(ValueError, match="radii"):
        rsuq_encode(x, torch.tensor([1.0, 1.0, 0.0, 1.0], dtype=torch.float64), 0, norm="l2", purpose="d")
    with pytest.raises(ValueError, match="float64 radii"):
        rsuq_encode(x, torch.ones(3, dtype=torch.float64), 0, norm="l2", purpose="d")
    with pytest.raises(ValueError, match="norm"):
        rsuq_encode(x, torch.ones(4, dtype=torch.float64), 0, norm="linf", purpose="d")
    with pytest.raises(ValueError, match="float64 rows"):
        rsuq_encode(x.float(), torch.ones(4, dtype=torch.float64), 0, norm="l2", purpose="d")


def test_shared_streams_are_keyed_by_seed_and_purpose():
    draw = lambda seed, purpose: shared_stream(seed, purpose).random(4)  # noqa: E731
    assert np.array_equal(draw(5, "dither"), draw(5, "dither"))
    assert not np.array_equal(draw(5, "dither"), draw(5, "latent"))
    assert not np.array_equal(draw(5, "dither"), draw(6, "dither"))


@pytest.mark.parametrize(
    "target", [GaussianTarget(2, 0.3), LaplaceTarget(1, 0.2), StudentTTarget(2, 5.0, 0.5)], ids=repr
)
def test_radius_cdf_is_the_law_of_the_drawn_radii(target):
    radius = target.radius(200_000, shared_stream(14, "latent")).numpy()
    assert stats.kstest(radius, target.radius_cdf).pvalue > 0.01
