"""sdq-hex: SDQ on the hexagonal lattice A2 over coordinate pairs, and its message (one symbol per pair).

Tolerances as in test_sdq.py: n = 200_000 pairs, variance band 2% (>= 10 sd for a uniform cell), means
within 5 standard errors, KS p > 0.01 at fixed seeds; the reference law is an independent rejection
sampler of the hexagon (numpy RNG).
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.mechanisms.lattice import HexagonalLattice
from auditkit.mechanisms.randomness import generator
from auditkit.mechanisms.sdq import LatticeSDQMessage

N = 200_000
R3 = math.sqrt(3)
HEX_NORMALS = np.array([[math.cos(a), math.sin(a)] for a in np.radians([30, 90, 150])])


def _uniform_hexagon(n, step, seed):
    rng = np.random.default_rng(seed)
    out = []
    while sum(len(o) for o in out) < n:
        p = rng.uniform([-2 / 3, -1 / R3], [2 / 3, 1 / R3], size=(n, 2))
        out.append(p[(np.abs(p @ HEX_NORMALS.T) <= 1 / R3).all(axis=1)])
    return step * np.concatenate(out)[:n]


def _pairs_in_disc(pairs, radius, seed):
    g = torch.Generator().manual_seed(seed)
    angle = 2 * math.pi * torch.rand(pairs, generator=g, dtype=torch.float64)
    r = radius * torch.rand(pairs, generator=g, dtype=torch.float64).sqrt()
    return torch.stack([r * torch.cos(angle), r * torch.sin(angle)], dim=1).reshape(-1)


def test_error_is_uniform_over_the_hexagon_and_independent_of_x():
    m = mechanisms.create("sdq-hex", bits=6, support=1.0)  # Delta = 1/32
    step = m.step
    x = _pairs_in_disc(N, 1 - 11 * step / 6, seed=0)  # the largest disc that never overloads
    enc = m.encode(x, seed=1)
    assert enc.overloads == 0 and m.last_overloads == 0
    e = (m.decode(enc, 1).double() - x).numpy().reshape(-1, 2)
    assert (np.abs(e @ HEX_NORMALS.T) <= step / R3 + 1e-6).all()  # + float32 rounding of the output
    assert np.allclose(e.var(axis=0), 5 / 54 * step**2, rtol=0.02)
    assert np.all(np.abs(e.mean(axis=0)) < 5 * step * math.sqrt(5 / 54 / N))
    ref = _uniform_hexagon(N, step, seed=2)
    for f in (lambda p: p[:, 0], lambda p: p[:, 1], lambda p: np.hypot(p[:, 0], p[:, 1])):
        assert stats.ks_2samp(f(e), f(ref)).pvalue > 0.01
    assert abs(np.corrcoef(e[:, 0], x.numpy().reshape(-1, 2)[:, 0])[0, 1]) < 0.01


def test_error_law_is_the_same_at_fixed_inputs():
    m = mechanisms.create("sdq-hex", bits=4, support=1.0)
    errors = []
    for i, pair in enumerate([(0.0, 0.0), (0.3, -0.1), (-0.5, 0.4)]):
        x = torch.tensor(pair, dtype=torch.float64).repeat(N // 2)
        errors.append((m(x, seed=i).double() - x).numpy().reshape(-1, 2))
    for e in errors[1:]:
        for k in range(2):
            assert stats.ks_2samp(e[:, k], errors[0][:, k]).pvalue > 0.01


def test_overloads_are_counted_per_pair():
    m = mechanisms.create("sdq-hex", bits=3, support=1.0)
    x = torch.cat([torch.zeros(10, dtype=torch.float64), torch.tensor([5.0, 0.0, 0.0, -5.0, 1e30, 1e30])])
    enc = m.encode(x, seed=0)
    assert enc.overloads == 3 and enc.indices.shape == (8, 2) and enc.indices.max() <= 7
    assert m.decode(enc, 0).abs().max() <= 2.0  # clamped into the range


def test_wrong_seed_does_not_decode():
    m = mechanisms.create("sdq-hex", bits=6)
    x = _pairs_in_disc(N // 2, 0.9, seed=3)
    enc = m.encode(x, seed=10)
    right = (m.decode(enc, 10).double() - x).numpy()
    wrong = (m.decode(enc, 11).double() - x).numpy()
    assert wrong.var() > 2.5 * right.var()


def test_decode_is_bit_identical_to_the_encoders_reconstruction():
    m = mechanisms.create("sdq-hex", bits=5, support=2.0)
    x = _pairs_in_disc(5000, 2.5, seed=4)[:9999]  # odd length, some overloads
    enc = m.encode(x, seed=77)
    a2 = HexagonalLattice()
    v = m.step * a2.dither(5000, generator(77, "dither"))
    points = m.step * a2.points(torch.from_numpy(enc.indices).double() - (m.levels - 1) / 2) + v
    assert torch.equal(m.decode(enc, 77), points.reshape(-1)[:9999].float())
    back = LatticeSDQMessage.from_bytes(enc.to_bytes())
    assert back == enc and torch.equal(m.decode(back, 77), m.decode(enc, 77))


@pytest.mark.parametrize(("compat", "levels"), [("none", 8), ("jopeq-code", 9)])
def test_levels_of_both_compat_modes(compat, levels):
    m = mechanisms.create("sdq-hex", bits=3, support=1.5, compat=compat)
    assert m.levels == levels and m.step == pytest.approx(3 / levels)
    assert torch.allclose(m.error_covariance, torch.eye(2, dtype=torch.float64) * 5 / 54 * m.step**2)


@pytest.mark.parametrize("n", [0, 1, 2, 301])
@pytest.mark.parametrize("bits", [1, 8, 12])
def test_message_round_trip_and_rejections(n, bits):
    m = mechanisms.create("sdq-hex", bits=bits)
    enc = m.encode(0.1 * torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=torch.float64), 5)
    data = enc.to_bytes()
    assert enc.num_bits == 8 * len(data) and LatticeSDQMessage.from_bytes(data) == enc
    assert m.decode(LatticeSDQMessage.from_bytes(data), 5).shape == (n,)
    for cut in range(0, len(data), max(1, len(data) // 40)):
        with pytest.raises(ValueError):
            LatticeSDQMessage.from_bytes(data[:cut])
    with pytest.raises(ValueError):
        LatticeSDQMessage.from_bytes(data + b"\x00")


def test_malformed_headers_are_rejected():
    enc = mechanisms.create("sdq-hex", bits=2).encode(torch.zeros(4), 0)
    data = bytearray(enc.to_bytes())
    for offset, value in [(5, 0), (5, 1), (6, 0), (6, 70000)]:  # dimension 0 / 1 (4 symbols), levels 0 / too many
        bad = bytearray(data)
        bad[offset : offset + (1 if offset == 5 else 4)] = value.to_bytes(1 if offset == 5 else 4, "little")
        with pytest.raises(ValueError):
            LatticeSDQMessage.from_bytes(bytes(bad))
    with pytest.raises(ValueError, match="tag"):
        LatticeSDQMessage.from_bytes(bytes([2]) + bytes(data[1:]))
    # A symbol outside K^2 in a fixed-width stream: 3 levels (9 symbols) need 4 bits, 0xF = 15 >= 9.
    three = mechanisms.create("sdq-hex", bits=1, compat="jopeq-code").encode(torch.zeros(2), 0).to_bytes()
    assert three[14] == 4  # fixed width 4
    with pytest.raises(ValueError, match="alphabet"):
        LatticeSDQMessage.from_bytes(three[:15] + bytes([0xF0]))


def test_rate_is_at_most_log2_levels_per_coordinate_and_entropy_coding_helps():
    x = 0.01 * torch.randn(100_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    for bits in (1, 4, 8):
        enc = mechanisms.create("sdq-hex", bits=bits).encode(x, 0)
        assert enc.num_bits <= bits * 100_000 + 8 * (14 + 2)
    peaked = mechanisms.create("sdq-hex", bits=8).encode(x, 0)
    assert peaked.num_bits / 100_000 < 3  # ~2.6 bits: only the points near 0 are used


def test_sdq_hex_claims_no_privacy():
    g = mechanisms.create("sdq-hex").guarantee()
    assert g.epsilon is None and g.flags == {"no-privacy"}
