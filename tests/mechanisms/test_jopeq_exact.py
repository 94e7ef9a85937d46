"""jopeq-exact: the scaled error zeta (h~ - h) is exactly the Laplace or t target whatever h is.

Tolerances (fixed seeds): KS p-values > 0.01 on 240,000 errors (two-sample KS on 200,000 per input); variance
within 2% (nu = 10 for the t checks: its sample variance has relative sd sqrt((kurtosis - 1)/N) = 0.6%);
|mean| < 5 sd / sqrt(N). The decoded update is float32; its rounding (relative 6e-8) is negligible here.
"""

import math

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.mechanisms.jopeq import jopeq_scaling
from auditkit.mechanisms.lattice import from_blocks, to_blocks
from auditkit.mechanisms.rsuq_coding import RSUQMessage, encode_message
from auditkit.mechanisms.tdist import t_epsilon

M = 240_000

CONFIGS = [
    ({"noise": "laplace", "eps": 4.0}, stats.laplace(scale=0.5)),
    ({"noise": "t", "n": 1, "nu": 10.0, "s2": 0.3}, stats.t(10.0, scale=math.sqrt(0.3))),
    ({"noise": "t", "n": 2, "nu": 10.0, "s2": 0.3}, stats.t(10.0, scale=math.sqrt(0.3))),
]
IDS = [str(params) for params, _ in CONFIGS]


def _update(m, seed, scale=1.0):
    return scale * torch.randn(m, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


def _scaled_error(mechanism, h, seed):
    enc = mechanism.encode(h, seed)
    return ((mechanism.decode(enc, seed).double() - h) * enc.side).numpy(), enc


@pytest.mark.parametrize(("params", "law"), CONFIGS, ids=IDS)
def test_scaled_error_is_exactly_the_target(params, law):
    m = mechanisms.create("jopeq-exact", **params)
    h = _update(M, seed=1, scale=0.01)
    e, enc = _scaled_error(m, h, 2)
    assert enc.side == pytest.approx(math.sqrt(M // m.target.n) / (3 * h.norm().item()), rel=1e-7)
    assert stats.kstest(e, law.cdf).pvalue > 0.01
    assert e.var() == pytest.approx(law.var(), rel=0.02)
    assert abs(e.mean()) < 5 * law.std() / math.sqrt(M)
    assert abs(np.corrcoef(e, h.numpy())[0, 1]) < 0.01
    if m.target.n == 2:  # the joint law: ||e||^2 / (2 s2) ~ F(2, nu)
        squared = (e.reshape(-1, 2) ** 2).sum(axis=1) / (2 * 0.3)
        assert stats.kstest(squared, stats.f(2, 10.0).cdf).pvalue > 0.01


@pytest.mark.parametrize(("params", "law"), [CONFIGS[0], CONFIGS[2]], ids=[IDS[0], IDS[2]])
def test_scaled_error_law_is_the_same_at_very_different_inputs(params, law):
    m = mechanisms.create("jopeq-exact", **params)
    count = 200_000
    inputs = {
        "spread, tiny norm": _update(count, seed=3, scale=1e-12),
        "spread, large norm": _update(count, seed=4, scale=1e6),
        # one large coordinate: its scaled value is sqrt(M)/3 ~ 100 (far outside the unit ball)
        "1-sparse": torch.zeros(count, dtype=torch.float64).index_fill_(0, torch.tensor([5]), 3.0),
        "constant": torch.full((count,), 0.25, dtype=torch.float64),
    }
    errors = {label: _scaled_error(m, h, 10 + i)[0] for i, (label, h) in enumerate(inputs.items())}
    for label, e in errors.items():
        assert stats.kstest(e, law.cdf).pvalue > 0.01, label
    labels = list(errors)
    for i, a in enumerate(labels):
        for b in labels[i + 1 :]:
            assert stats.ks_2samp(errors[a], errors[b]).pvalue > 0.01, (a, b)


@pytest.mark.parametrize("params", [{"noise": "laplace"}, {"noise": "t", "n": 2}], ids=str)
def test_decode_is_bit_identical_to_the_encoders_view_and_needs_the_seed(params):
    m = mechanisms.create("jopeq-exact", **params)
    h = _update(20_001, seed=5, scale=0.1)
    blocks = to_blocks(h, m.target.n)
    zeta = jopeq_scaling(h, blocks.shape[0])
    enc, code = encode_message(
        zeta * blocks, h.numel(), m.target, 6, bound=m._bound(blocks.shape[0]), alpha=1.0, side=zeta
    )
    assert enc == m.encode(h, 6)
    view = (from_blocks(code.output, h.numel()) / zeta).to(torch.float32)
    assert torch.equal(m.decode(enc, 6), view)
    assert torch.equal(m.decode(RSUQMessage.from_bytes(enc.to_bytes()), 6), view)
    for wrong in (7, 8):
        try:
            y = m.decode(enc, wrong)
        except ValueError:  # other radii, other buckets: the index section does not parse
            continue
        assert ((y.double() - h) ** 2).mean() > 4 * ((m.decode(enc, 6).double() - h) ** 2).mean()


def test_guarantees_and_parameters():
    lap = mechanisms.create("jopeq-exact", eps=3.0)
    g = lap.guarantee()
    assert g.epsilon == 3.0 and g.delta == 0.0 and lap.true_epsilon() == pytest.approx(3.0)
    assert lap.target.scale == pytest.approx(2 / 3)
    assert {"trusted-server", "reveals-norm"} <= g.flags and "claim-exceeded" not in g.flags
    assert any("zeta" in c for c in g.caveats) and any("against the server" in c for c in g.caveats)
    # mechanisms.md: d = 2, Delta_raw = 2: eps 2 -> (5.84, 2.574), 3 -> (5.64, 1.092), 4 -> (5.36, 0.573)
    for eps, nu, s2 in ((2, 5.84, 2.574), (3, 5.64, 1.092), (4, 5.36, 0.573)):
        assert t_epsilon(nu, s2, 2.0, 2) == pytest.approx(eps, abs=0.002)
        t = mechanisms.create("jopeq-exact", noise="t", n=2, eps=eps)
        assert (t.target.nu, t.target.s2) == pytest.approx((nu, s2), abs=0.02)
        assert t.true_epsilon() == pytest.approx(eps) and "claim-exceeded" not in t.guarantee().flags
    loose = mechanisms.create("jopeq-exact", noise="t", n=2, eps=4.0, nu=5.0, s2=0.3)
    assert "claim-exceeded" in loose.guarantee().flags
    with pytest.raises(ValueError, match="laplace needs n=1"):
        mechanisms.create("jopeq-exact", noise="laplace", n=2)


def test_outside_unit_ball_is_counted_and_zero_update_decodes():
    m = mechanisms.create("jopeq-exact")
    h = torch.zeros(900, dtype=torch.float64)
    h[0] = 1.0  # scaled to sqrt(900) / 3 = 10
    m.encode(h, 0)
    assert m.last_outside == 1
    zero = torch.zeros(50, dtype=torch.float64)
    out = m.decode(m.encode(zero, 1), 1)
    assert out.shape == (50,) and out.abs().max() < 1e-30  # noise / zeta with zeta the largest float32


@pytest.mark.parametrize("params", [{"noise": "laplace"}, {"noise": "t", "n": 2}, {"noise": "t", "n": 1}], ids=str)
def test_message_round_trip_and_truncation(params):
    m = mechanisms.create("jopeq-exact", **params)
    for length in (0, 1, 41):
        enc = m.encode(_update(length, seed=9), 2)
        data = enc.to_bytes()
        back = RSUQMessage.from_bytes(data)
        assert back == enc and torch.equal(m.decode(back, 2), m.decode(enc, 2))
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            RSUQMessage.from_bytes(data[:cut])
    with pytest.raises(ValueError):
        RSUQMessage.from_bytes(data + b"\x00")
