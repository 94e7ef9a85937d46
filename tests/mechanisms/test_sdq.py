"""Scalar subtractive dithered quantization: error law, overloads, shared dither, rate.

Tolerances: with n = 200_000 errors Unif(-step/2, step/2), the sample variance has relative standard
deviation sqrt(0.8/n) = 0.2% (2% band = 10 sd), the correlation with x has sd 1/sqrt(n) = 0.0022
(|r| < 0.01 = 4.5 sd). KS p-values > 0.01 with fixed seeds.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.mechanisms.randomness import generator

N = 200_000
FLOAT32_SLACK = 1e-6  # the decoded update is float32: allow its rounding in hard bounds


def _uniform(n, low, high, seed=0):
    g = torch.Generator().manual_seed(seed)
    return low + (high - low) * torch.rand(n, generator=g, dtype=torch.float64)


def _error(m, x, seed):
    return (m(x, seed).double() - x).numpy()


def test_error_is_uniform_and_independent_of_x():
    m = mechanisms.create("sdq", bits=6, support=1.0)
    x = _uniform(N, -0.95, 0.95)  # inside the range: no overload possible (|x| + step/2 < 1)
    enc = m.encode(x, seed=1)
    assert enc.overloads == 0
    err = (m.decode(enc, 1).double() - x).numpy()
    half = m.step / 2
    assert np.abs(err).max() <= half + FLOAT32_SLACK
    assert stats.kstest(err, "uniform", args=(-half, 2 * half)).pvalue > 0.01
    assert err.var() == pytest.approx(m.step**2 / 12, rel=0.02)
    assert abs(err.mean()) < 5 * m.step / math.sqrt(12 * N)
    assert abs(np.corrcoef(err, x.numpy())[0, 1]) < 0.01


def test_error_law_is_the_same_at_fixed_inputs():
    m = mechanisms.create("sdq", bits=4, support=1.0)
    n = 50_000
    # 0 and 0.3 sit at different positions inside their cells; -0.9 is near the edge of the range.
    errors = [_error(m, torch.full((n,), v, dtype=torch.float64), seed=i) for i, v in enumerate((0.0, 0.3, -0.9))]
    for e in errors:
        assert stats.kstest(e, "uniform", args=(-m.step / 2, m.step)).pvalue > 0.01
    for a, b in [(0, 1), (0, 2), (1, 2)]:
        assert stats.ks_2samp(errors[a], errors[b]).pvalue > 0.01


def test_overloads_are_counted_exactly():
    m = mechanisms.create("sdq", bits=3, support=1.0)
    inside = _uniform(1000, -1 + m.step, 1 - m.step)  # never overloaded: |x - V| < support
    outside = torch.tensor([1 + m.step, -1 - m.step, 5.0, -40.0, 1.0 + m.step / 2 + 1e-9], dtype=torch.float64)
    x = torch.cat([inside, outside])
    enc = m.encode(x, seed=3)
    assert enc.overloads == len(outside) and m.last_overloads == len(outside)
    x_hat = m.decode(enc, 3).double()
    # Overloaded coordinates land on an end level plus dither, i.e. within support + step/2.
    assert x_hat.abs().max() <= 1 + m.step / 2 + FLOAT32_SLACK
    assert mechanisms.create("sdq", bits=3).encode(inside, seed=3).overloads == 0


def test_wrong_seed_does_not_decode():
    m = mechanisms.create("sdq", bits=6)
    x = _uniform(N, -0.9, 0.9)
    enc = m.encode(x, seed=10)
    right = (m.decode(enc, 10).double() - x).numpy()
    wrong = (m.decode(enc, 11).double() - x).numpy()
    # With an unrelated dither the error is the quantization error plus a triangular difference of
    # dithers: variance step^2/12 + step^2/6 = 3x the correct one, and no longer bounded by step/2.
    assert wrong.var() > 2.5 * right.var()
    assert np.abs(wrong).max() > 0.9 * m.step


def test_encoder_and_decoder_dithers_are_bit_identical():
    m = mechanisms.create("sdq", bits=5, support=2.0)
    x = _uniform(10_000, -2.5, 2.5)
    enc = m.encode(x, seed=77)
    # Recompute the decoder output from the message and an independently drawn dither.
    u = torch.rand(x.numel(), generator=generator(77, "dither"), dtype=torch.float64)
    dither = (u - 0.5) * m.step
    centres = -2.0 + m.step * (torch.from_numpy(enc.indices).double() + 0.5)
    assert torch.equal(m.decode(enc, 77), (centres + dither).float())
    again = type(enc).from_bytes(enc.to_bytes())
    assert torch.equal(m.decode(again, 77), m.decode(enc, 77))
    assert m.encode(x, seed=77).to_bytes() == enc.to_bytes()
    assert not np.array_equal(m.encode(x, seed=78).indices, enc.indices)


@pytest.mark.parametrize(("compat", "levels", "step"), [("none", 8, 0.25), ("jopeq-code", 9, 2 / 9)])
def test_levels_and_step_of_both_compat_modes(compat, levels, step):
    m = mechanisms.create("sdq", bits=3, support=1.0, compat=compat)
    assert m.levels == levels and m.step == pytest.approx(step)
    assert m.encode(torch.zeros(4), 0).levels == levels


def test_jopeq_code_mode_reproduces_the_reference_quantizer():
    """JoPEQ code: delta = 2 gamma/(2^R + 1); q = delta * round(y / delta) clamped to +-(gamma - delta/2)."""
    bits, gamma = 2, 1.5
    m = mechanisms.create("sdq", bits=bits, support=gamma, compat="jopeq-code")
    delta = 2 * gamma / (2**bits + 1)
    edge = gamma - delta / 2
    x = _uniform(20_000, -2.5, 2.5, seed=4)  # includes overloads on both sides
    v = m.dither(x.numel(), seed=8)
    # The reference adds d and subtracts it after quantizing; d = -V in this package's convention.
    y = x - v
    reference = (delta * torch.round(y / delta)).clamp(-edge, edge) + v
    assert torch.allclose(m(x, 8).double(), reference, atol=1e-6)  # float32 output vs float64 reference
    assert 0.0 in (-gamma + delta * (np.arange(m.levels) + 0.5)).round(12)  # mid-tread: 0 is a level


def _entropy_bits(indices):
    p = np.bincount(indices) / indices.size
    p = p[p > 0]
    return -(p * np.log2(p)).sum() * indices.size


def test_rate_is_close_to_the_empirical_entropy():
    m = mechanisms.create("sdq", bits=8, support=1.0)
    g = torch.Generator().manual_seed(5)
    x = 0.1 * torch.randn(100_000, generator=g, dtype=torch.float64)
    enc = m.encode(x, seed=0)
    h = _entropy_bits(enc.indices)
    # Header (13 + 13 bytes) and a frequency table of ~130 Elias-gamma codes: well under 4096 bits.
    assert h <= enc.num_bits <= 1.02 * h + 4096
    assert enc.num_bits / x.numel() < 8  # ~5.75 bits/coordinate for this input


def test_peaked_input_costs_far_less_than_r_bits():
    m = mechanisms.create("sdq", bits=8, support=1.0)
    x = 1e-4 * torch.randn(100_000, generator=torch.Generator().manual_seed(6), dtype=torch.float64)
    assert m.encode(x, seed=0).num_bits / x.numel() < 1.1  # two levels around 0 are used


@pytest.mark.parametrize(("bits", "compat", "width"), [(8, "none", 8), (4, "jopeq-code", 5), (16, "none", 16)])
def test_rate_never_exceeds_fixed_length_plus_header(bits, compat, width):
    m = mechanisms.create("sdq", bits=bits, compat=compat)
    x = _uniform(100_000, -1.0, 1.0, seed=7)  # indices close to uniform: entropy coding cannot win much
    enc = m.encode(x, seed=1)
    assert enc.num_bits <= width * x.numel() + 8 * (13 + 1 + 1)  # fixed layout: header, mode byte, padding


def test_decode_rejects_a_message_of_another_configuration():
    enc = mechanisms.create("sdq", bits=4).encode(torch.zeros(10), 0)
    with pytest.raises(ValueError, match="levels"):
        mechanisms.create("sdq", bits=5).decode(enc, 0)
    with pytest.raises(TypeError):
        mechanisms.create("none").decode(enc, 0)


def test_sdq_claims_no_privacy():
    g = mechanisms.create("sdq").guarantee()
    assert g.epsilon is None and g.flags == {"no-privacy"}
    assert any("compression baseline" in c for c in g.caveats)
