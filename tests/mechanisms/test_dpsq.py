"""DP-SQ (Q_{b,eps1}) and LaplaceSQ of paper 001: distortion table, randomized-response law, messages, claims.

Tolerances. Distortion: n = 200_000 coordinates a ~ U[-10, 10]; the squared error of one coordinate lies in
[0, Delta^2] with standard deviation below 0.3 Delta^2 while its mean is >= 0.27 Delta^2, so the Monte-Carlo
mean has relative standard deviation < 0.3 / (0.27 sqrt(n)) = 0.25%: the 2% band is 8 standard deviations,
and formulas that differ by more than 3% (e.g. Delta^2/4 or Delta^2/6 for DP-SQ) fail. LaplaceSQ's error is
dominated by the Laplace variance, relative sd sqrt(5/n) = 0.5% (kurtosis 6): 2% is 4 sd. Probabilities:
n = 200_000 coins per input, |frequency - p| < 5 sqrt(p (1 - p) / n) (5 binomial sd, about 0.56 percentage
points). All seeds are fixed, so the tests are deterministic.
"""

import math

import numpy as np
import pytest
import torch

from auditkit import mechanisms
from auditkit.mechanisms.additive import clip_l1
from auditkit.mechanisms.dpsq import (
    DPSQMessage,
    dpsq_cell_mean_distortion,
    dpsq_distortion,
    dpsq_expected_distortion,
    dpsq_max_distortion,
    laplace_sq_expected_distortion,
)
from auditkit.mechanisms.guarantee import REPLACE_ONE

N = 200_000
C = 10.0
EPSILONS = (0.1, 0.5, 1.0, 1.5)
# dpsq.md / paper Fig. 2a: expected average distortion per coordinate for a ~ U[-10, 10].
PAPER_TABLE = {
    4: (0.570, 0.484, 0.387, 0.310),
    5: (0.134, 0.113, 0.091, 0.073),
    6: (0.0323, 0.0274, 0.0220, 0.0176),
}
TABLE = [(b, eps, value) for b, row in PAPER_TABLE.items() for eps, value in zip(EPSILONS, row)]


def _uniform(n=N, seed=0):
    return torch.rand(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64) * 2 * C - C


def _round_trip(m, x, seed):
    message = m.encode(x, seed)
    return m.decode(type(message).from_bytes(message.to_bytes()), seed).double()


def _binomial_ok(frequency, p, n=N):
    return abs(frequency - p) < 5 * math.sqrt(p * (1 - p) / n)


@pytest.mark.parametrize(("bits", "eps", "value"), TABLE)
def test_closed_form_reproduces_the_paper_table(bits, eps, value):
    assert dpsq_expected_distortion(bits, eps, -C, C) == pytest.approx(value, rel=0.02)


@pytest.mark.parametrize(("bits", "eps", "value"), TABLE)
def test_monte_carlo_of_the_mechanism_reproduces_the_paper_table(bits, eps, value):
    x = _uniform()
    m = mechanisms.create("dpsq", bits=bits, eps=eps, support=C, clip_norm="none", private_seed=1)
    mse = ((_round_trip(m, x, seed=bits) - x) ** 2).mean().item()
    assert mse == pytest.approx(value, rel=0.02)
    assert mse == pytest.approx(dpsq_expected_distortion(bits, eps, -C, C), rel=0.02)


@pytest.mark.parametrize("rho_kind", ["range", "cell"])
@pytest.mark.parametrize(("bits", "eps"), [(4, 0.1), (6, 0.1), (5, 1.5)])
def test_dpsq_distortion_is_strictly_below_laplace_sq(bits, eps, rho_kind):
    step = 2 * C / (2**bits - 1)
    rho = 2 * C if rho_kind == "range" else step
    dpsq = dpsq_expected_distortion(bits, eps, -C, C)
    laplace = laplace_sq_expected_distortion(bits, eps, rho, -C, C)
    assert dpsq < laplace
    # ... also measured on the real LaplaceSQ (rho = 0 is the default 2C).
    m = mechanisms.create("laplace-sq", bits=bits, eps=eps, support=C, clip_norm="none", private_seed=2,
                          rho=0.0 if rho_kind == "range" else step)  # fmt: skip
    x = _uniform(seed=3)
    mse = ((_round_trip(m, x, seed=5) - x) ** 2).mean().item()
    assert mse == pytest.approx(laplace, rel=0.02)
    assert dpsq < mse


def test_eq7_distortion_formulas():
    step, eps = 1.3, 0.7
    e = math.exp(eps)
    assert dpsq_distortion(0.0, step, eps) == pytest.approx(step**2 / (e + 1))
    assert dpsq_distortion(step / 2, step, eps) == pytest.approx(step**2 / 4)
    x = np.linspace(0, step / 2, 200_001)
    curve = dpsq_distortion(x, step, eps)
    assert curve == pytest.approx((e * x**2 + (step - x) ** 2) / (e + 1))
    assert dpsq_cell_mean_distortion(step, eps) == pytest.approx(curve.mean(), rel=1e-4)
    assert dpsq_cell_mean_distortion(step, eps) == pytest.approx(step**2 * (e + 7) / (12 * (e + 1)))
    assert dpsq_max_distortion(step, eps) == pytest.approx(curve.max())
    assert dpsq_max_distortion(step, 0.5) == pytest.approx(step**2 / (math.exp(0.5) + 1))  # eps1 < ln 3
    assert dpsq_max_distortion(step, 2.0) == pytest.approx(step**2 / 4)  # eps1 > ln 3
    assert dpsq_distortion(0.0, step, 1e4) == 0.0  # no overflow of e^eps1
    assert laplace_sq_expected_distortion(4, 0.5, 20.0, -C, C) == pytest.approx((20 / 15) ** 2 / 6 + 2 * 40**2)


@pytest.mark.parametrize(
    ("a", "cell", "lower_is_nearer"),
    [
        (0.1, 7, False),  # b = 4, C = 10: Delta = 4/3, the central cell [-2/3, 2/3]
        (-0.5, 7, True),
        (2 / 3 + 0.2, 8, True),
        (-10.0, 0, True),  # a = lo: the first cell, the lower level is a itself
        (10.0, 14, False),  # a = hi belongs to the last cell [q_14, q_15], its upper end is a itself
        (13.0, 14, False),  # clamped to hi first
    ],
)
def test_randomized_response_inside_the_cell(a, cell, lower_is_nearer):
    eps = 0.8
    m = mechanisms.create("dpsq", bits=4, eps=eps, support=C, clip_norm="none", private_seed=4)
    levels = -C + 4 / 3 * np.arange(16)
    out = _round_trip(m, torch.full((N,), a, dtype=torch.float64), seed=9).numpy()
    lower, upper = levels[cell], levels[cell + 1]
    is_lower = np.isclose(out, lower, atol=1e-5)
    assert (is_lower | np.isclose(out, upper, atol=1e-5)).all()  # only the two ends of the cell
    p = math.exp(eps) / (math.exp(eps) + 1)
    assert _binomial_ok(is_lower.mean(), p if lower_is_nearer else 1 - p)


def test_a_tie_counts_the_lower_level_as_nearer():
    # b = 2, C = 1.5: levels -1.5, -0.5, 0.5, 1.5 (Delta = 1, exact in binary); 0 is the exact cell midpoint.
    eps = 1.2
    m = mechanisms.create("dpsq", bits=2, eps=eps, support=1.5, clip_norm="none", private_seed=8)
    out = _round_trip(m, torch.zeros(N, dtype=torch.float64), seed=4).numpy()
    assert set(np.unique(out)) == {-0.5, 0.5}
    assert _binomial_ok((out == -0.5).mean(), math.exp(eps) / (math.exp(eps) + 1))


def test_one_bit_randomizes_over_the_whole_range_and_coordinates_are_independent():
    eps = 0.3
    m = mechanisms.create("dpsq", bits=1, eps=eps, support=C, clip_norm="none", private_seed=5)
    x = torch.tensor([-9.0, 4.0] * (N // 2), dtype=torch.float64)
    out = _round_trip(m, x, seed=2).numpy().reshape(-1, 2)
    assert set(np.unique(out)) == {-C, C}
    p = math.exp(eps) / (math.exp(eps) + 1)
    near = out == np.array([-C, C])
    assert _binomial_ok(near[:, 0].mean(), p, N // 2) and _binomial_ok(near[:, 1].mean(), p, N // 2)
    both = (near[:, 0] & near[:, 1]).mean()
    assert _binomial_ok(both, p * p, N // 2)  # independent coins per coordinate


def test_inputs_in_different_cells_have_different_output_supports():
    m = mechanisms.create("dpsq", bits=2, eps=0.1, support=C, clip_norm="none", private_seed=6)
    inside = _round_trip(m, torch.zeros(N, dtype=torch.float64), seed=1).numpy()
    outside = _round_trip(m, torch.full((N,), 5.0, dtype=torch.float64), seed=1).numpy()
    assert set(np.round(inside, 4)) == {-3.3333, 3.3333}
    assert set(np.round(outside, 4)) == {3.3333, 10.0}  # 10 is never output for 0: the eps ratio is infinite


def test_laplace_sq_rounding_is_unbiased_stochastic_rounding():
    # eps huge: the Laplace noise (scale 20/1e7) is far below Delta, so each output is its rounded level.
    m = mechanisms.create("laplace-sq", bits=4, eps=1e7, support=C, clip_norm="none", private_seed=7)
    a = -10 + 4 / 3 * 5.3  # 30% of the way into cell 5
    out = _round_trip(m, torch.full((N,), a, dtype=torch.float64), seed=3).numpy()
    upper = np.isclose(out, -10 + 4 / 3 * 6, atol=1e-4)
    assert (upper | np.isclose(out, -10 + 4 / 3 * 5, atol=1e-4)).all()
    assert _binomial_ok(upper.mean(), 0.3)
    assert out.mean() == pytest.approx(a, abs=5 * (4 / 3) * math.sqrt(0.21 / N))


def test_laplace_sq_noise_scale_and_sensitivity():
    m = mechanisms.create("laplace-sq", bits=4, eps=0.5, support=C)
    assert m.rho == 2 * C and m.noise_scale == pytest.approx(40.0)
    cell = mechanisms.create("laplace-sq", bits=4, eps=0.5, support=C, rho=4 / 3)
    assert cell.rho == pytest.approx(4 / 3) and cell.whole_range_epsilon() == pytest.approx(0.5 * 15)
    assert m.whole_range_epsilon() == pytest.approx(0.5)


def test_create_quantizes_on_minus_support_to_support():
    m = mechanisms.create("dpsq", bits=4, eps=0.1, support=10.0, private_seed=0)
    assert m.cell_step == pytest.approx(4 / 3)
    message = m.encode(torch.tensor([0.0, 3.0, -2.0, 1.0]), 0)
    assert (message.lo, message.hi, message.bits) == (-10.0, 10.0, 4)
    out = m.decode(message, 0).double().numpy()
    assert np.isclose(out[:, None], -10 + 4 / 3 * np.arange(16)[None, :], atol=1e-5).any(axis=1).all()


def test_message_round_trip_costs_about_b_bits_per_coordinate():
    x = _uniform(20_000, seed=8)
    for bits in (1, 4, 6, 12):
        m = mechanisms.create("dpsq", bits=bits, eps=0.5, support=C, clip_norm="none", private_seed=0)
        message = m.encode(x.float(), 3)  # float32 accepted
        parsed = DPSQMessage.from_bytes(message.to_bytes())
        assert parsed == message and np.array_equal(parsed.indices, message.indices)
        assert torch.equal(m.decode(parsed, 3), m.decode(message, 3))
        assert m.decode(parsed, 3).dtype == torch.float32
        assert bits - 0.1 <= message.num_bits / x.numel() <= bits + 0.01
    # a small update in the literal range: nearly all coordinates in the central cell, entropy-coded
    small = mechanisms.create("dpsq", bits=6, eps=0.1, support=C, private_seed=0).encode(1e-3 * x, 1)
    assert small.num_bits / x.numel() < 1.1


def test_same_keys_same_message_and_private_randomness():
    x = _uniform(5_000, seed=9)
    m = mechanisms.create("dpsq", private_seed=3)
    assert m.encode(x, 1) == m.encode(x, 1)
    assert m.encode(x, 1) != m.encode(x, 2)
    assert m.encode(x, 1) != mechanisms.create("dpsq", private_seed=4).encode(x, 1)


def test_l1_clipping_before_quantization():
    x = _uniform(1_000, seed=10)
    m = mechanisms.create("dpsq", bits=4, eps=0.5, support=C, private_seed=0)
    assert torch.allclose(m.clip_update(x), clip_l1(x, C))
    assert torch.linalg.vector_norm(m.clip_update(x), 1).item() == pytest.approx(C)
    none = mechanisms.create("dpsq", bits=4, eps=0.5, support=1.0, clip_norm="none")
    clamped = none.clip_update(torch.tensor([-3.0, 0.5, 2.0]))
    assert torch.equal(clamped, torch.tensor([-1.0, 0.5, 1.0], dtype=torch.float64))


def test_adaptive_range_sends_the_ends_of_the_clipped_update():
    x = 0.01 * _uniform(10_000, seed=11) + 0.003
    m = mechanisms.create("dpsq", bits=4, eps=1.0, support=C, range="adaptive", private_seed=0)
    v = m.clip_update(x)
    message = DPSQMessage.from_bytes(m.encode(x, 5).to_bytes())
    assert message.lo <= v.min().item() and message.hi >= v.max().item()
    assert message.lo == pytest.approx(v.min().item(), rel=1e-6)
    assert message.hi == pytest.approx(v.max().item(), rel=1e-6)
    assert float(np.float32(message.lo)) == message.lo and float(np.float32(message.hi)) == message.hi
    out = m.decode(message, 5).double()
    levels = message.lo + (message.hi - message.lo) / 15 * torch.arange(16, dtype=torch.float64)
    assert torch.isclose(out[:, None], levels[None, :], atol=1e-9).any(dim=1).all()
    # the adaptive range tracks the update; the literal one puts it all in the central cell
    literal = mechanisms.create("dpsq", bits=4, eps=1.0, support=C, private_seed=0)
    assert ((out - v) ** 2).mean() < 1e-3 * ((literal(x, 5).double() - v) ** 2).mean()
    constant = m.decode(m.encode(torch.full((7,), 0.25), 1), 1)  # lo = hi: every level is 0.25
    assert torch.equal(constant, torch.full((7,), 0.25))


def test_decode_refuses_a_message_of_another_configuration():
    x = _uniform(100, seed=12)
    message = mechanisms.create("dpsq", bits=4).encode(x, 0)
    with pytest.raises(ValueError, match="message has 4 bits, this dpsq configuration uses 5"):
        mechanisms.create("dpsq", bits=5).decode(message, 0)
    with pytest.raises(ValueError, match=r"message range \[-10, 10\] is not this configuration's \[-1, 1\]"):
        mechanisms.create("dpsq", bits=4, support=1.0).decode(message, 0)
    with pytest.raises(TypeError, match="dpsq decodes DPSQMessage"):
        mechanisms.create("dpsq").decode(mechanisms.FloatMessage(np.zeros(3, np.float32)), 0)


def test_malformed_messages_are_rejected():
    wire = mechanisms.create("dpsq", bits=4).encode(_uniform(50, seed=13), 0).to_bytes()
    with pytest.raises(ValueError, match="truncated header"):
        DPSQMessage.from_bytes(wire[:8])
    with pytest.raises(ValueError, match="wrong message tag"):
        DPSQMessage.from_bytes(b"\x02" + wire[1:])
    with pytest.raises(ValueError, match="bits must be in 1..16"):
        DPSQMessage.from_bytes(wire[:5] + b"\x00" + wire[6:])
    with pytest.raises(ValueError, match="indices must lie in"):
        DPSQMessage(np.array([0, 16]), 4, -1.0, 1.0)
    with pytest.raises(ValueError, match="lo <= hi must be finite float32"):
        DPSQMessage(np.array([0]), 4, 0.1, 1.0)  # 0.1 is not a float32 value


@pytest.mark.parametrize(
    ("name", "param", "value", "allowed"),
    [
        ("dpsq", "bits", 0, "an integer in 1..16"),
        ("dpsq", "bits", 17, "an integer in 1..16"),
        ("dpsq", "eps", 0.0, "a finite number > 0"),
        ("dpsq", "eps", math.inf, "a finite number > 0"),
        ("dpsq", "support", -1.0, "a finite number > 0"),
        ("dpsq", "clip", -1.0, "0 or a finite number > 0"),
        ("dpsq", "clip_norm", "l2", "one of l1, none"),
        ("dpsq", "range", "bogus", "one of literal, adaptive"),
        ("laplace-sq", "rho", -1.0, "0 or a finite number > 0"),
        ("laplace-sq", "eps", -0.5, "a finite number > 0"),
    ],
)
def test_bad_parameters_name_the_parameter(name, param, value, allowed):
    with pytest.raises(ValueError) as err:
        mechanisms.create(name, **{param: value})
    assert str(err.value) == f"{param} must be {allowed}, got {value!r}"


@pytest.mark.parametrize("name", ["dpsq", "laplace-sq"])
def test_bad_updates_are_rejected(name):
    with pytest.raises(ValueError, match="1-D float tensor"):
        mechanisms.create(name).encode(torch.zeros(2, 2), 0)
    with pytest.raises(ValueError, match="NaN or infinite"):
        mechanisms.create(name).encode(torch.tensor([0.0, math.nan]), 0)


def test_dpsq_guarantee_flags_by_bits_and_range():
    one = mechanisms.create("dpsq", bits=1, eps=0.2).guarantee()
    assert (one.epsilon, one.delta, one.relation, one.scope) == (0.2, 0.0, REPLACE_ONE, "one round")
    assert one.flags == frozenset() and "any two values" in one.unit
    assert any("d*eps1" in c for c in one.caveats) and any("across rounds" in c for c in one.caveats)
    four = mechanisms.create("dpsq", bits=4, eps=0.2).guarantee()
    assert four.flags == {"cell-local", "cross-cell-infinite"} and "same quantizer cell" in four.unit
    assert any("worst-case eps over the whole range is infinite" in c for c in four.caveats)
    assert "1.333" in four.sensitivity
    adaptive = mechanisms.create("dpsq", bits=4, range="adaptive").guarantee()
    assert adaptive.flags == {"cell-local", "cross-cell-infinite", "side-information"}
    assert any("sent in clear" in c and "not covered" in c for c in adaptive.caveats)
    assert mechanisms.create("dpsq", bits=1, range="adaptive").guarantee().flags == {"side-information"}


def test_laplace_sq_guarantee_by_rho():
    whole = mechanisms.create("laplace-sq", bits=4, eps=0.5, support=C).guarantee()
    assert (whole.epsilon, whole.delta, whole.flags) == (0.5, 0.0, frozenset())
    assert "rho = 20" in whole.sensitivity and "any two values" in whole.unit
    cell = mechanisms.create("laplace-sq", bits=4, eps=0.5, support=C, rho=4 / 3).guarantee()
    assert cell.flags == {"cell-local"} and cell.epsilon == 0.5
    assert any("eps1 * 2C / rho = 7.5" in c for c in cell.caveats)
