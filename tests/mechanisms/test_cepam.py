"""CEPAM-Gaussian and CEPAM-Laplace: the error is exactly the target whatever x is, the decode replays the
encoder, and the bits compare with the papers' bound.

Tolerances (fixed seeds): KS p-values > 0.01 on 240,000 errors (two-sample KS on 200,000 per input); variance
within 2% (relative sd <= 0.5%); |mean| < 5 sd / sqrt(N); |corr(error, x)| < 0.01 (sd 0.002); acceptance
rate N / sum(H) within 1% relative of pi/4 or pi/6 (>= 4 sd at 80,000 rows). Bits:
fixed-length size within 5% of the papers' bound, the sent message never above either. The decoded update is
float32, so errors carry its rounding (relative 6e-8 of |x_hat|), far below every tolerance here.
"""

import math
import struct

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.mechanisms.guarantee import REPLACE_ONE
from auditkit.mechanisms.additive import analytic_gaussian_epsilon, clip_l1, clip_l2
from auditkit.mechanisms.base import as_update
from auditkit.mechanisms.bitstream import encode_categorical
from auditkit.mechanisms.lattice import from_blocks, to_blocks
from auditkit.mechanisms.rsuq import GaussianTarget, shared_stream
from auditkit.mechanisms.rsuq_coding import (
    LATENT_PURPOSE,
    RSUQMessage,
    _bucket_slices,
    _decode_fixed,
    _encode_buckets,
    _encode_fixed,
    _section_streams,
    bits_bound,
    decode_indices,
    encode_indices,
    encode_message,
    index_halfwidth,
)

M = 240_000


def _direction(m, seed=0):
    x = torch.randn(m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)
    return x / x.norm()


def _error(mechanism, x, seed, reference):
    return (mechanism(x, seed).double() - reference).numpy()


CONFIGS = [
    ("cepam-gaussian", {"sigma": 0.05, "n": 1}, stats.norm(scale=0.05), clip_l2),
    ("cepam-gaussian", {"sigma": 0.05, "n": 2}, stats.norm(scale=0.05), clip_l2),
    ("cepam-gaussian", {"sigma": 0.05, "n": 3}, stats.norm(scale=0.05), clip_l2),
    ("cepam-laplace", {"scale": 0.05}, stats.laplace(scale=0.05), clip_l1),
]
IDS = [f"{name}-{params}" for name, params, _, _ in CONFIGS]


@pytest.mark.parametrize(("name", "params", "law", "clip"), CONFIGS, ids=IDS)
def test_error_is_exactly_the_target(name, params, law, clip):
    m = mechanisms.create(name, clip=30.0, **params)
    x = 60.0 * _direction(M, seed=1)  # clipped to norm 30: coordinates ~ 0.06 (l2) or ~ 1e-4 (l1)
    reference = clip(x, 30.0)
    e = _error(m, x, 2, reference)
    enc = m.encode(x, 2)
    if enc.iterations is not None:  # acceptance pi/4 (n = 2), pi/6 (n = 3): within 1% relative (>= 4 sd)
        p = math.pi / 4 if params["n"] == 2 else math.pi / 6
        assert abs(enc.rows / enc.iterations.sum() / p - 1) < 0.01
    assert stats.kstest(e, law.cdf).pvalue > 0.01
    assert e.var() == pytest.approx(law.var(), rel=0.02)
    assert abs(e.mean()) < 5 * law.std() / math.sqrt(M)
    assert abs(np.corrcoef(e, reference.numpy())[0, 1]) < 0.01


@pytest.mark.parametrize(("name", "params", "law", "clip"), [CONFIGS[2], CONFIGS[3]], ids=[IDS[2], IDS[3]])
def test_error_law_is_the_same_at_very_different_inputs(name, params, law, clip):
    bound = 1e4
    m = mechanisms.create(name, clip=bound, **params)
    count = 200_001  # not a multiple of 3: the padded sub-vector is dropped
    huge = _direction(count, seed=3) * 1e9
    inputs = {
        "zero": torch.zeros(count, dtype=torch.float64),
        "tiny norm": _direction(count, seed=4) * 1e-9,
        "norm at the clip": _direction(count, seed=5) * bound,  # coordinates ~ 22 = hundreds of cells (l2)
        "huge norm, clipped": huge,
        "one coordinate at the clip": torch.zeros(count, dtype=torch.float64).index_fill_(0, torch.tensor([7]), 1e12),
    }
    errors = {}
    for i, (label, x) in enumerate(inputs.items()):
        errors[label] = _error(m, x, 20 + i, clip(x, bound))
        assert stats.kstest(errors[label], law.cdf).pvalue > 0.01, label
    labels = list(errors)
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert stats.ks_2samp(errors[a], errors[b]).pvalue > 0.01, (a, b)


def test_paper000_normalises_and_the_error_scales_with_the_norm():
    m = mechanisms.create("cepam-gaussian", sigma=0.05, n=2, compat="paper000")
    for norm, seed in ((3.0, 1), (1e-4, 2)):
        x = norm * _direction(M, seed=seed)
        enc = m.encode(x, seed)
        assert enc.side == float(np.float32(x.norm().item()))
        scaled = _error(m, x, seed, x) / (enc.side / m.params["clip"])
        assert stats.kstest(scaled, stats.norm(scale=0.05).cdf).pvalue > 0.01
    assert m.decode(m.encode(torch.zeros(10, dtype=torch.float64), 0), 0).abs().max() == 0
    g = m.guarantee()
    assert {"paper-compat", "unsupported", "reveals-norm", "trusted-server"} <= g.flags
    assert any("normalised update only" in c for c in g.caveats)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("cepam-gaussian", {"n": 1}),
        ("cepam-gaussian", {"n": 3}),
        ("cepam-laplace", {}),
        ("cepam-gaussian", {"n": 2, "compat": "paper000"}),
    ],
)
def test_decode_is_bit_identical_to_the_encoders_view(name, params):
    m = mechanisms.create(name, **params)
    x = 0.8 * _direction(30_001, seed=6)
    quantized, side = m._preprocess(x)
    enc, code = encode_message(
        to_blocks(quantized, m.target.n),
        x.numel(),
        m.target,
        9,
        bound=m.params["clip"],
        alpha=m.params["alpha"],
        side=side,
    )
    encoder_view = from_blocks(code.output, x.numel())
    if side is not None:
        encoder_view = encoder_view * (enc.side / m.params["clip"])
    assert enc == m.encode(x, 9)
    assert torch.equal(m.decode(enc, 9), encoder_view.to(torch.float32))
    assert torch.equal(m.decode(RSUQMessage.from_bytes(enc.to_bytes()), 9), encoder_view.to(torch.float32))


@pytest.mark.parametrize("name", ["cepam-gaussian", "cepam-laplace"])
def test_a_wrong_seed_does_not_decode_to_x(name):
    m = mechanisms.create(name, clip=1e3, **({"sigma": 0.01, "n": 2} if name == "cepam-gaussian" else {"scale": 0.01}))
    x = 0.1 * torch.randn(5000, generator=torch.Generator().manual_seed(7), dtype=torch.float64)
    enc = m.encode(x, 1)
    assert ((m.decode(enc, 1).double() - x) ** 2).mean() < 3e-4
    for wrong in (2, 3, 4):
        # Another seed gives other radii, hence other buckets: the index section then fails to parse, or
        # decodes at the wrong scales.
        try:
            y = m.decode(enc, wrong)
        except ValueError:
            continue
        assert ((y.double() - x) ** 2).mean() > 0.1 * (x**2).mean()


def test_alpha_only_relabels_m():
    x = 0.9 * _direction(40_000, seed=8)
    outs, messages = [], []
    for alpha in (1.0, 1e-5, 3.7):
        m = mechanisms.create("cepam-gaussian", sigma=0.01, n=3, alpha=alpha)
        messages.append(m.encode(x, 4))
        outs.append(m.decode(messages[-1], 4).numpy())
    for enc, out in zip(messages[1:], outs[1:], strict=True):
        assert np.array_equal(enc.iterations, messages[0].iterations)
        np.testing.assert_allclose(out, outs[0], rtol=1e-6, atol=1e-9)  # float32 output; equal up to rounding


@pytest.mark.parametrize("sigma", [0.1, 0.001])
@pytest.mark.parametrize("n", [1, 2, 3])
def test_bits_fixed_length_matches_the_papers_bound(sigma, n):
    # A "real" update: clipped (norm 1 = clip), spread over many coordinates.
    m = mechanisms.create("cepam-gaussian", sigma=sigma, n=n)
    x = _direction(30_000, seed=9)
    rate = m.rate(x, seed=10)
    per = rate.per_coordinate()
    assert per["bound"] == pytest.approx(3.65 if sigma == 0.1 else 9.85, abs=0.15)  # spec: ~3.7 and ~9.9
    assert rate.fixed_length_bits == pytest.approx(rate.bound_bits, rel=0.05)
    assert rate.message_bits <= rate.bound_bits and rate.message_bits <= rate.fixed_length_bits
    assert rate.message_bits == m.encode(x, 10).num_bits
    assert rate.bound_bits == pytest.approx(m.bits_bound(30_000))


@pytest.mark.parametrize(("sigma", "n"), [(0.1, 1), (0.1, 3), (0.001, 2)])
def test_bits_bound_matches_a_monte_carlo_estimate(sigma, n):
    u = stats.chi2(n + 2).rvs(1_000_000, random_state=np.random.default_rng(0))
    count = 2 * np.ceil(1 / (2 * sigma * np.sqrt(u))) + 1
    widths = np.ceil(n * np.log2(count))
    p = math.pi ** (n / 2) / math.gamma(n / 2 + 1) / 2**n
    geometric = 0.0 if n == 1 else -(p * math.log2(p) + (1 - p) * math.log2(1 - p)) / p
    assert bits_bound(GaussianTarget(n, sigma), 1, 1.0) == pytest.approx(geometric + widths.mean(), abs=0.005)


def test_fixed_length_coding_is_chosen_when_smaller_and_round_trips():
    m = mechanisms.create("cepam-gaussian", sigma=0.001, n=3)
    x = _direction(30, seed=11)  # few coordinates, indices spread over hundreds of levels
    enc = m.encode(x, 5)
    assert enc.fixed
    back = RSUQMessage.from_bytes(enc.to_bytes())
    assert back.fixed and torch.equal(m.decode(back, 5), m.decode(enc, 5))
    assert np.abs(m.decode(enc, 5).double().numpy() - x.numpy()).max() < 0.01


def test_fixed_length_rows_beyond_63_bits_are_coded_per_coordinate():
    radius = torch.tensor([1e-9, 0.3, 2e-8, 1e-2], dtype=torch.float64)
    half = index_halfwidth(radius, 1.0)
    rng = np.random.default_rng(0)
    k = np.stack([rng.integers(-h, h + 1, 3) for h in half])
    data = _encode_fixed(k, half)
    assert np.array_equal(_decode_fixed(data, half, 3), k)
    k[0, 0] = half[0] + 1
    with pytest.raises(ValueError, match="outside"):
        _decode_fixed(_encode_fixed(k, half), half, 3)


def _encoders_view(m, x, seed):
    """The message, the encoder's LRSUQ code and its output as the decoder must rebuild it (float32): the
    reconstruction in float64 arithmetic, with no coder involved."""
    quantized, side = m._preprocess(x)
    enc, code = encode_message(
        to_blocks(quantized, m.target.n), x.numel(), m.target, seed, bound=m.params["clip"], alpha=m.params["alpha"],
        side=side,
    )  # fmt: skip
    assert side is None
    return enc, code, from_blocks(code.output, x.numel()).to(torch.float32)


def test_a_huge_clip_over_the_noise_scale_escapes_and_decodes_exactly():
    # clip / scale = 2e7: rows with a small latent have ceil(a) = clip / (2 r) beyond 2^31 - 2, the bucket coder's
    # 32-bit alphabet (this encode used to be refused); the offsets are capped and the section is escaped.
    m = mechanisms.create("cepam-laplace", scale=0.05, clip=1e6, private_seed=0)
    x = torch.randn(60_000, generator=torch.Generator().manual_seed(0))
    x = x / x.abs().sum() * 1e6
    assert index_halfwidth(m.target.radius(60_000, shared_stream(7, LATENT_PURPOSE)), 1e6).max() > 2**31
    enc, code, expected = _encoders_view(m, as_update(x), 7)
    assert enc == m.encode(x, 7) and not enc.fixed
    assert enc.indices[0] == 0x80 | 29  # escaped section of 60,000 // 2048 buckets
    assert enc.indices[-4:] == bytes(4)  # escape count 0: every index lies within its capped offset
    data = enc.to_bytes()
    assert enc.num_bits == 8 * len(data)
    back = RSUQMessage.from_bytes(data)
    assert back == enc and back.to_bytes() == data
    assert torch.equal(m.decode(back, 7), expected)
    assert np.abs(m.decode(back, 7).double().numpy() - x.double().numpy()).max() < 4.0  # Laplace(0.05) noise


@pytest.mark.parametrize(
    ("name", "params", "fixed"),
    [
        ("cepam-laplace", {"scale": 1e-6, "clip": 1e6}, False),  # escaped entropy-coded section
        ("cepam-gaussian", {"sigma": 1e-9, "clip": 1e3, "n": 3}, True),  # fixed-length: fields up to 63 bits
    ],
)
def test_indices_beyond_32_bits_round_trip_exactly(name, params, fixed):
    m = mechanisms.create(name, **params)
    x = params["clip"] * _direction(3000, seed=16)
    enc, code, expected = _encoders_view(m, x, 5)
    k = code.indices.numpy()
    assert np.abs(k).max() > 2**32 and enc.fixed == fixed
    if not fixed:
        streams, escaped = _section_streams(enc.indices, enc.rows, m.target.n)
        assert enc.indices[0] & 0x80 and len(streams) == 1
        # One bucket, its offset capped at 2^31 - 1: exactly the larger indices are escaped, in row order.
        assert np.array_equal(escaped, k.ravel()[np.abs(k.ravel()) > 2**31 - 1])
    data = enc.to_bytes()
    back = RSUQMessage.from_bytes(data)
    assert enc.num_bits == 8 * len(data) and back == enc
    assert torch.equal(m.decode(back, 5), expected)


def test_indices_outside_their_range_are_escaped():
    # Inputs beyond the bound: indices 5 and -2^62 outside a range of [-2, 2]; their values follow the streams.
    radius = torch.tensor([0.3, 0.2, 0.25, 0.4], dtype=torch.float64)
    assert index_halfwidth(radius, 1.0).max() <= 3
    k = torch.tensor([[0], [5], [-1], [-(2**62)]])
    fixed, data = encode_indices(k, radius, 1.0)
    assert not fixed and data[0] == 0x80 | 1
    assert data[-20:] == struct.pack("<Iqq", 2, 5, -(2**62))
    assert torch.equal(decode_indices(data, False, radius, 1, 1.0), k)
    inside = data[:-16] + struct.pack("<qq", 1, -(2**62))  # an escaped value inside the range: not canonical
    with pytest.raises(ValueError, match="escaped indices do not match"):
        decode_indices(inside, False, radius, 1, 1.0)
    for bad in (data[:-8], data + bytes(8)):  # an escaped value missing, or one too many
        with pytest.raises(ValueError):
            decode_indices(bad, False, radius, 1, 1.0)
    # A radius below bound * 2^-63: ceil(a) is clamped to 2^62 - 1, the offset to 2^31 - 1; nothing to escape.
    tiny = torch.tensor([1e-300, 0.3], dtype=torch.float64)
    assert index_halfwidth(tiny, 1.0).tolist() == [2**62 - 1, 2]
    k = torch.tensor([[2**31 - 1], [-2]])
    fixed, data = encode_indices(k, tiny, 1.0)
    assert fixed and len(data) == 8 + 9  # 63 + 3 bits
    assert torch.equal(decode_indices(data, True, tiny, 1, 1.0), k)
    section = _encode_buckets(k.numpy(), index_halfwidth(tiny, 1.0), tiny.numpy())
    assert section[0] == 0x80 | 1 and section[-4:] == bytes(4)
    assert torch.equal(decode_indices(section, False, tiny, 1, 1.0), k)


@pytest.mark.parametrize(
    ("name", "params"),
    [
        ("cepam-gaussian", {"n": 1}),
        ("cepam-gaussian", {"n": 2, "sigma": 0.01}),
        ("cepam-laplace", {}),
        ("cepam-gaussian", {"n": 3, "sigma": 0.001}),  # fixed-length M for 30 coordinates
    ],
)
@pytest.mark.parametrize("m_", [30, 5000])
def test_without_escapes_the_m_section_is_exactly_the_plain_one(name, params, m_):
    # The layout from before escapes existed, rebuilt here: fixed-length, or bucket count | lengths | streams.
    m = mechanisms.create(name, **params)
    quantized, _ = m._preprocess(_direction(m_, seed=17))
    enc, code = encode_message(
        to_blocks(quantized, m.target.n), m_, m.target, 3, bound=m.params["clip"], alpha=1.0, side=None
    )
    radius = m.target.radius(enc.rows, shared_stream(3, LATENT_PURPOSE))
    half = index_halfwidth(radius, m.params["clip"])
    k = code.indices.numpy()
    if enc.fixed:
        assert enc.indices == _encode_fixed(k, half)
        return
    order, slices = _bucket_slices(radius.numpy(), half)
    grouped = k[order]
    streams = [encode_categorical(grouped[a:b].ravel() + o, 2 * o + 1) if b > a else b"" for a, b, o in slices]
    lengths = b"".join(struct.pack("<I", len(s)) for s in streams)
    assert enc.indices == bytes([len(streams)]) + lengths + b"".join(streams)


def test_an_index_beyond_int64_is_refused():
    m = mechanisms.create("cepam-laplace", scale=1e-300, clip=1.0)
    with pytest.raises(ValueError, match="beyond the int64 indices"):
        m.encode(torch.tensor([1.0, 0.0]), 0)


MESSAGE_CONFIGS = [
    ("cepam-gaussian", {"n": 1}),
    ("cepam-gaussian", {"n": 2, "sigma": 0.01}),
    ("cepam-gaussian", {"n": 3, "compat": "paper000"}),
    ("cepam-laplace", {}),
    ("cepam-gaussian", {"n": 3, "sigma": 0.001}),  # fixed-length M for 30 coordinates
]


@pytest.mark.parametrize(("name", "params"), MESSAGE_CONFIGS)
@pytest.mark.parametrize("m_", [0, 1, 30, 5000])
def test_round_trip_is_exact(name, params, m_):
    m = mechanisms.create(name, **params)
    x = _direction(m_, seed=12) if m_ else torch.zeros(0, dtype=torch.float64)
    enc = m.encode(x, 3)
    data = enc.to_bytes()
    assert enc.num_bits == 8 * len(data)
    back = RSUQMessage.from_bytes(data)
    assert back == enc and back.to_bytes() == data
    assert torch.equal(m.decode(back, 3), m.decode(enc, 3)) and m.decode(enc, 3).shape == (m_,)


@pytest.mark.parametrize(("name", "params"), MESSAGE_CONFIGS)
def test_truncated_or_extended_bytes_are_rejected(name, params):
    enc = mechanisms.create(name, **params).encode(_direction(30, seed=13), seed=1)
    data = enc.to_bytes()
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            RSUQMessage.from_bytes(data[:cut])
    with pytest.raises(ValueError):
        RSUQMessage.from_bytes(data + b"\x00")


def test_message_layout_and_header():
    enc = mechanisms.create("cepam-gaussian", n=3, compat="paper000").encode(_direction(10, seed=14), 0)
    data = enc.to_bytes()
    assert data[0] == 10 and int.from_bytes(data[1:5], "little") == 10 and data[5] == 3
    assert data[6] == 1 | 2 | (4 if enc.fixed else 0)
    assert np.frombuffer(data[7:11], "<f4")[0] == np.float32(1.0)


def test_corrupted_index_section_or_wrong_configuration_is_rejected():
    m = mechanisms.create("cepam-gaussian", n=2, sigma=0.01)
    enc = m.encode(_direction(5000, seed=15), 0)
    assert not enc.fixed
    corrupt = bytearray(enc.to_bytes())
    corrupt[-1] ^= 0xFF  # last rANS word of the last bucket
    with pytest.raises(ValueError):
        m.decode(RSUQMessage.from_bytes(bytes(corrupt)), 0)
    with pytest.raises(ValueError, match="sub-vectors of length 2"):
        mechanisms.create("cepam-gaussian", n=3, sigma=0.01).decode(enc, 0)
    with pytest.raises(ValueError, match="side information"):
        mechanisms.create("cepam-gaussian", n=2, sigma=0.01, compat="paper000").decode(enc, 0)
    with pytest.raises(TypeError):
        m.decode(mechanisms.create("sdq").encode(_direction(10), 0), 0)


def test_guarantees():
    g = mechanisms.create("cepam-gaussian", sigma=0.5, clip=2.0, delta=1e-6).guarantee()
    assert g.epsilon == pytest.approx(analytic_gaussian_epsilon(4.0, 0.5, 1e-6)) and g.delta == 1e-6
    assert g.relation is REPLACE_ONE and g.scope == "one round" and "l2 clip 2" in g.sensitivity
    assert "trusted-server" in g.flags and any("against the server" in c for c in g.caveats)
    assert "without the shared seed" in g.threat_model
    lap = mechanisms.create("cepam-laplace", scale=0.1, clip=1.5).guarantee()
    assert lap.epsilon == pytest.approx(30.0) and lap.delta == 0.0 and "l1 clip 1.5" in lap.sensitivity
    assert mechanisms.describe("cepam-gaussian").guarantee.startswith("(eps=")
    with pytest.raises(ValueError, match="n must be an integer in 1..8"):
        mechanisms.create("cepam-gaussian", n=9)
