"""JoPEQ, moment-matched (jopeq-laplace, jopeq-t): the realised error law, its independence of x, the true
epsilon beside the claimed one, the refusals, the shared/private streams and the wire format.

The error is checked in the scaled domain, zeta * (x_hat - x) = n + e, whose law does not depend on x.
Tolerances: n = 200_000 (L = 1) or 300_000 pairs (L = 2); a 2% band on a sample variance is >= 4 standard
deviations (Laplace + uniform: kurtosis < 6; t with nu = 5.35: kurtosis ~ 7.4, sd 0.46% at 300_000 pairs);
means against 5 standard errors; KS p-values > 0.01 with fixed seeds. The law of n + e for L = 1 is the
exact CDF of Laplace(b') + Unif(-Delta/2, Delta/2); for L = 2 an independent Monte Carlo sample of
t_nu(0, s2' I) + Unif(hexagon) (numpy RNG, rejection-sampled hexagon) is the reference.
"""

import math

import numpy as np
import pytest
import torch
from scipy import integrate, stats

from auditkit import mechanisms
from auditkit.mechanisms.jopeq import JoPEQMessage, t_hexagon_epsilon
from auditkit.mechanisms.laplace_uniform import laplace_uniform_logpdf
from auditkit.mechanisms.lattice import HexagonalLattice, IntegerLattice
from auditkit.mechanisms.randomness import generator
from auditkit.mechanisms.tdist import minimum_variance_t, t_epsilon

N = 200_000
R3 = math.sqrt(3)
HEX_NORMALS = np.array([[math.cos(a), math.sin(a)] for a in np.radians([30, 90, 150])])
LAPLACE = {"eps": 2.0, "bits": 3, "support": 14.0}  # Delta = 3.5, b' = 0.70: no overload at these seeds
T_CONFIG = {"bits": 4, "support": 20.0}  # eps 4: Delta = 2.5, dither variance 0.58 of the 0.914 target


def _laplace_uniform_cdf(z, b, w):
    """CDF of Laplace(0, b) + Unif(-w/2, w/2): (H(z + w/2) - H(z - w/2)) / w with H' = the Laplace CDF."""

    def h(t):
        return np.where(t >= 0, t + b / 2 * np.exp(-np.abs(t) / b), b / 2 * np.exp(-np.abs(t) / b))

    return (h(z + w / 2) - h(z - w / 2)) / w


def _uniform_hexagon(n, step, rng):
    out = []
    while sum(len(o) for o in out) < n:
        p = rng.uniform([-2 / 3, -1 / R3], [2 / 3, 1 / R3], size=(n, 2))
        out.append(p[(np.abs(p @ HEX_NORMALS.T) <= 1 / R3).all(axis=1)])
    return step * np.concatenate(out)[:n]


def _scaled_error(m, x, seed):
    enc = m.encode(x, seed)
    assert enc.overloads == 0
    return ((m.decode(enc, seed).double() - x) * enc.zeta).numpy(), enc


def _inputs(n, seed=0):
    g = torch.Generator().manual_seed(seed)
    return {
        "constant": torch.full((n,), 1e-6, dtype=torch.float64),
        "alternating": 1e3 * (-1.0) ** torch.arange(n, dtype=torch.float64),
        "gaussian": torch.randn(n, generator=g, dtype=torch.float64),
        "uniform": 0.01 * torch.rand(n, generator=g, dtype=torch.float64),
    }


# ---- jopeq-laplace -------------------------------------------------------------------------------------------


def test_laplace_error_is_laplace_conv_uniform_with_the_target_variance():
    m = mechanisms.create("jopeq-laplace", private_seed=1, **LAPLACE)
    x = _inputs(N)["gaussian"]
    e, enc = _scaled_error(m, x, seed=2)
    b, b_ppn, step = m.target_scale, m.ppn_scale, m.step
    assert (step, b_ppn) == (pytest.approx(3.5), pytest.approx(math.sqrt((2 * b**2 - step**2 / 12) / 2)))
    assert e.var() == pytest.approx(2 * b**2, rel=0.02)  # moment matched
    assert abs(e.mean()) < 5 * math.sqrt(2) * b / math.sqrt(N)
    assert stats.kstest(e, lambda z: _laplace_uniform_cdf(z, b_ppn, step)).pvalue > 0.01
    assert stats.kstest(e, "laplace", args=(0, b)).pvalue < 1e-6  # ... but it is not the claimed Laplace(b)
    # In the original domain the error is (n + e) / zeta.
    err = (m.decode(enc, 2).double() - x).numpy()
    assert err.var() == pytest.approx(2 * b**2 / enc.zeta**2, rel=0.02)


@pytest.mark.parametrize(("eps", "bits"), [(4.0, 1), (3.0, 8), (0.5, 2)])
def test_laplace_support_rules(eps, bits):
    # paper002 (Sec. IV-A): gamma = 2R + 1/eps; jopeq-code: 1.5 sqrt(1 + 2 (2/eps)^2); an explicit support wins over both
    paper = mechanisms.create("jopeq-laplace", eps=eps, bits=bits, support_rule="paper002")
    code = mechanisms.create("jopeq-laplace", eps=eps, bits=bits)
    assert paper.step == pytest.approx(2 * (2 * bits + 1 / eps) / 2**bits, rel=1e-12)
    assert code.step == pytest.approx(2 * 1.5 * math.sqrt(1 + 2 * (2 / eps) ** 2) / 2**bits, rel=1e-12)
    given = mechanisms.create("jopeq-laplace", eps=eps, bits=bits, support=0.5, support_rule="paper002")
    assert given.step == pytest.approx(1.0 / 2**bits)


def test_laplace_separate_form_adds_the_full_laplace_noise_and_the_dither():
    # FL+Lap+SDQ: error Laplace(b) + Unif(+-Delta/2): variance 2 b^2 + Delta^2/12, epsilon <= 2/b = eps
    m = mechanisms.create("jopeq-laplace", private_seed=5, eps=4.0, bits=4, support=8.0, form="separate")
    e, _ = _scaled_error(m, _inputs(N)["gaussian"], seed=6)
    b, step = 0.5, 1.0
    assert m.ppn_scale == b
    assert e.var() == pytest.approx(2 * b**2 + step**2 / 12, rel=0.02)
    assert stats.kstest(e, lambda z: _laplace_uniform_cdf(z, b, step)).pvalue > 0.01
    assert m.true_epsilon() <= 4.0 + 1e-9 and "claim-exceeded" not in m.guarantee().flags
    joint = mechanisms.create("jopeq-laplace", eps=4.0, bits=4, support=8.0)
    assert joint.ppn_scale < b  # the joint form draws less privacy noise, as the moment matching says


def test_laplace_support_rule_refuses_unknown_words():
    with pytest.raises(ValueError, match="support_rule must be one of jopeq-code, paper002"):
        mechanisms.create("jopeq-laplace", support_rule="reference")


def test_laplace_error_law_is_the_same_at_very_different_inputs():
    m = mechanisms.create("jopeq-laplace", private_seed=3, **LAPLACE)
    errors = {name: _scaled_error(m, x, seed=10 + i)[0] for i, (name, x) in enumerate(_inputs(N // 2).items())}
    for name, e in errors.items():
        assert stats.ks_2samp(e, errors["gaussian"]).pvalue > 0.01 or name == "gaussian"
    x = _inputs(N // 2)["gaussian"].numpy()
    assert abs(np.corrcoef(errors["gaussian"], x)[0, 1]) < 0.015


def test_laplace_logpdf_is_the_convolution():
    b, w = 0.433, 1.2247

    def f(z):
        return math.exp(laplace_uniform_logpdf(np.array([z]), b, w)[0])

    assert integrate.quad(f, -40, 40, points=[-w / 2, w / 2])[0] == pytest.approx(1.0, abs=1e-10)
    z = np.array([0.0, 0.3, w / 2, 0.7, 3.0, -8.0])
    direct = (stats.laplace.cdf(z + w / 2, scale=b) - stats.laplace.cdf(z - w / 2, scale=b)) / w
    assert np.allclose(np.exp(laplace_uniform_logpdf(z, b, w)), direct, rtol=1e-12)
    # Far tails and a dither much wider than the noise stay finite.
    assert np.isfinite(laplace_uniform_logpdf(np.array([0.0, 1e3]), 1e-3, 10.0)).all()


def test_true_epsilon_of_the_reference_code_setting_is_4_619():
    m = mechanisms.create("jopeq-laplace", eps=4, bits=1, compat="jopeq-code")
    assert m.quantizer.params["support"] == pytest.approx(1.8371, abs=1e-4)  # 1.5 sqrt(1 + 2 (2/4)^2)
    assert m.levels == 3 and m.step == pytest.approx(1.2247, abs=1e-4)
    assert m.ppn_scale == pytest.approx(0.4330, abs=1e-4)
    assert round(m.true_epsilon(), 3) == 4.619
    g = m.guarantee()
    assert g.epsilon == 4 and "claim-exceeded" in g.flags
    assert any("4.619" in c for c in g.caveats)


@pytest.mark.parametrize(
    ("eps", "bits", "compat"),
    # Every combination of eps 1, 2, 4, 8, R 1, 8 and both level counts but (8, 1, "none"), which is refused.
    [(e, r, c) for e in (1, 2, 4, 8) for r in (1, 8) for c in ("none", "jopeq-code") if (e, r, c) != (8, 1, "none")],
)
def test_true_epsilon_on_the_grid_equals_the_analytic_2_over_b_prime(eps, bits, compat):
    m = mechanisms.create("jopeq-laplace", eps=eps, bits=bits, compat=compat)
    assert m.true_epsilon() == pytest.approx(2 / m.ppn_scale, rel=1e-12)
    assert m.true_epsilon() > eps  # the moment-matched noise always has thinner tails than Laplace(2/eps)
    assert ("claim-exceeded" in m.guarantee().flags) == (m.true_epsilon() > eps * (1 + 1e-9))


def test_laplace_refuses_a_target_below_the_dither_variance():
    with pytest.raises(ValueError) as err:
        mechanisms.create("jopeq-laplace", eps=8, bits=1)
    msg = str(err.value)
    assert "target noise variance 2b^2 = 0.125" in msg and "dither variance Delta^2/12 = 0.210938" in msg
    assert "lower eps, raise bits or lower support" in msg


def test_laplace_decode_is_bit_identical_to_the_encoders_reconstruction():
    m = mechanisms.create("jopeq-laplace", private_seed=4, **LAPLACE)
    x = _inputs(10_001)["gaussian"]
    enc = m.encode(x, seed=5)
    # The encoder's view: its own quantizer output Q + V, rescaled; V regenerated independently.
    v = m.step * IntegerLattice(1).dither(x.numel(), generator(5, "dither"))
    points = m.step * (torch.from_numpy(enc.indices).double() - (m.levels - 1) / 2) + v
    assert torch.equal(m.decode(enc, 5), (points / enc.zeta).view(-1).float())
    back = JoPEQMessage.from_bytes(enc.to_bytes())
    assert back == enc and torch.equal(m.decode(back, 5), m.decode(enc, 5))
    assert m.encode(x, seed=5).to_bytes() == enc.to_bytes()  # same private_seed and seed: same message


def test_laplace_wrong_seed_does_not_decode():
    m = mechanisms.create("jopeq-laplace", private_seed=6, **LAPLACE)
    x = _inputs(N)["gaussian"]
    enc = m.encode(x, seed=7)
    wrong = ((m.decode(enc, 8).double() - x) * enc.zeta).numpy()
    # The server adds an unrelated dither instead of the one the client subtracted.
    assert wrong.var() > 1.5 * 2 * m.target_scale**2
    assert stats.kstest(wrong, lambda z: _laplace_uniform_cdf(z, m.ppn_scale, m.step)).pvalue < 1e-6


def test_ppn_comes_from_the_private_stream():
    x = _inputs(1000)["gaussian"]
    same = [mechanisms.create("jopeq-laplace", private_seed=9)(x, 4) for _ in range(2)]
    assert torch.equal(same[0], same[1])
    assert not torch.equal(same[0], mechanisms.create("jopeq-laplace", private_seed=10)(x, 4))
    fresh = mechanisms.create("jopeq-t")  # private_seed=None: new noise on every call
    assert not torch.equal(fresh(x, 4), fresh(x, 4))


# ---- jopeq-t -------------------------------------------------------------------------------------------------


def test_t_error_has_the_target_covariance_and_the_law_of_t_plus_hexagon():
    pairs = 300_000
    m = mechanisms.create("jopeq-t", private_seed=0, **T_CONFIG)
    target = m.nu * m.s2 / (m.nu - 2)
    assert m.ppn_s2 == pytest.approx((m.nu - 2) / m.nu * (target - 5 / 54 * m.step**2))
    x = _inputs(2 * pairs)["gaussian"]
    e, _ = _scaled_error(m, x, seed=3)
    e = e.reshape(-1, 2)
    assert np.allclose(e.var(axis=0), target, rtol=0.02)
    assert abs(np.corrcoef(e.T)[0, 1]) < 0.01
    assert np.all(np.abs(e.mean(axis=0)) < 5 * math.sqrt(target / pairs))
    rng = np.random.default_rng(100)
    w = rng.chisquare(m.nu, pairs)
    ref = rng.standard_normal((pairs, 2)) * np.sqrt(m.ppn_s2 / (w / m.nu))[:, None]
    ref += _uniform_hexagon(pairs, m.step, rng)
    for f in (lambda p: p[:, 0], lambda p: p[:, 1], lambda p: np.hypot(p[:, 0], p[:, 1])):
        assert stats.ks_2samp(f(e), f(ref)).pvalue > 0.01
    # ... which is not the claimed t_nu(0, s2 I): its marginal is a t with scale sqrt(s2).
    assert stats.kstest(e[:, 0], "t", args=(m.nu, 0, math.sqrt(m.s2))).pvalue < 1e-6


def test_t_error_law_is_the_same_at_very_different_inputs():
    m = mechanisms.create("jopeq-t", private_seed=1, **T_CONFIG)
    errors = {}
    for i, (name, x) in enumerate(_inputs(N + 1).items()):  # odd length: the last pair is zero-padded
        errors[name] = _scaled_error(m, x, seed=20 + i)[0][:N].reshape(-1, 2)
    for name, e in errors.items():
        for k in range(2):
            assert stats.ks_2samp(e[:, k], errors["gaussian"][:, k]).pvalue > 0.01 or name == "gaussian"


def test_t_defaults_use_the_minimum_variance_pair_and_the_code_support():
    m = mechanisms.create("jopeq-t", eps=3)
    assert (m.nu, m.s2) == minimum_variance_t(3.0, 2.0)
    assert m.target_epsilon() == pytest.approx(3.0, rel=1e-9)
    assert m.quantizer.params["support"] == pytest.approx(1.5 * math.sqrt(1 + m.nu * m.s2 / (m.nu - 2)))
    assert m.levels == 2 and m.quantizer.lattice.dimension == 2
    given = mechanisms.create("jopeq-t", eps=4, nu=4, s2=0.2)  # a reference-code tuple (eps, s2, nu)
    assert (given.nu, given.s2) == (4, 0.2) and given.target_epsilon() == pytest.approx(5.7745, abs=1e-4)
    with pytest.raises(ValueError, match="s2 = 0.5 needs nu"):
        mechanisms.create("jopeq-t", s2=0.5)


@pytest.mark.parametrize(("eps", "expected"), [(2, 2.208), (3, 3.414), (4, 4.778)])
def test_t_true_epsilon_exceeds_the_claim(eps, expected):
    m = mechanisms.create("jopeq-t", eps=eps)
    # Regression values of this package's search (a lower bound on the sup, see t_hexagon_epsilon).
    assert round(m.true_epsilon(), 3) == expected
    assert m.true_epsilon() > m.target_epsilon() == pytest.approx(eps)
    g = m.guarantee()
    assert g.epsilon == eps and "claim-exceeded" in g.flags and "lower bound" in g.caveats[0]


def test_t_true_epsilon_search_recovers_eq_11_when_the_cell_vanishes():
    nu, s2 = minimum_variance_t(4.0, 2.0)
    assert t_hexagon_epsilon(nu, s2, 1e-4, 2.0) == pytest.approx(t_epsilon(nu, s2, 2.0), abs=1e-6)
    # With a finer quantizer the PPN approaches the target and so does the epsilon.
    fine = mechanisms.create("jopeq-t", eps=4, bits=8)
    assert fine.true_epsilon() == pytest.approx(4.0, abs=0.01)


def test_t_refuses_a_target_below_the_dither_variance():
    with pytest.raises(ValueError) as err:
        mechanisms.create("jopeq-t", eps=4, bits=1, support=6)
    msg = str(err.value)
    assert "jopeq-t: the target noise variance nu s2/(nu - 2) = 0.914008" in msg
    assert "dither variance (5/54) Delta^2 = 3.33333 of the hexagonal cell" in msg


def test_t_decode_is_bit_identical_to_the_encoders_reconstruction():
    m = mechanisms.create("jopeq-t", private_seed=2, bits=3)
    x = _inputs(9_999)["gaussian"]
    enc = m.encode(x, seed=6)
    a2 = HexagonalLattice()
    v = m.step * a2.dither(5_000, generator(6, "dither"))
    points = m.step * a2.points(torch.from_numpy(enc.indices).double() - (m.levels - 1) / 2) + v
    assert torch.equal(m.decode(enc, 6), (points / enc.zeta).reshape(-1)[:9_999].float())
    assert torch.equal(m.decode(JoPEQMessage.from_bytes(enc.to_bytes()), 6), m.decode(enc, 6))


def test_t_wrong_seed_does_not_decode():
    m = mechanisms.create("jopeq-t", private_seed=3, **T_CONFIG)
    x = _inputs(N)["gaussian"]
    enc = m.encode(x, seed=1)
    wrong = ((m.decode(enc, 2).double() - x) * enc.zeta).numpy()
    target = m.nu * m.s2 / (m.nu - 2)
    assert wrong.var() > target + 5 / 54 * m.step**2  # plus a difference of two hexagon dithers


# ---- both: guarantee, contract, wire format, rate --------------------------------------------------------------

NAMES = ["jopeq-laplace", "jopeq-t"]


@pytest.mark.parametrize("name", NAMES)
def test_guarantee_states_the_claim_and_its_caveats(name):
    g = mechanisms.create(name).guarantee()
    d = g.to_dict()
    assert d["epsilon"] == 4.0 and d["delta"] == 0.0 and d["relation"] == "REPLACE_ONE" and d["scope"] == "one round"
    assert "scaled" in d["unit"] and "claim-exceeded" in d["flags"]
    text = " ".join(d["caveats"])
    for needle in ("learns ||h||", "overloaded", "unit ball", "M times", "one round only"):
        assert needle in text


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("n", [0, 1, 2, 7, 5000])
def test_call_round_trip_and_shapes(name, n):
    m = mechanisms.create(name, private_seed=5)
    x = 0.05 * torch.randn(n, generator=torch.Generator().manual_seed(n), dtype=torch.float64)
    enc = m.encode(x, 11)
    out = m(x, 11)
    assert out.dtype == torch.float32 and out.shape == (n,) and torch.equal(out, m.decode(enc, 11))
    back = JoPEQMessage.from_bytes(enc.to_bytes())
    assert back == enc and enc.num_bits == 8 * len(enc.to_bytes())
    assert torch.equal(m.decode(back, 11), out)


@pytest.mark.parametrize("name", NAMES)
def test_zero_update_and_bad_input(name):
    m = mechanisms.create(name, private_seed=0)
    enc = m.encode(torch.zeros(100), 0)
    assert enc.zeta == float(np.finfo(np.float32).max) and torch.all(m.decode(enc, 0).abs() < 1e-30)
    for bad, error in [(torch.zeros(3, 3), ValueError), (torch.tensor([math.nan]), ValueError), ([0.0], TypeError)]:
        with pytest.raises(error):
            m.encode(bad, 0)


def test_decode_rejects_another_configuration():
    enc = mechanisms.create("jopeq-laplace", bits=2).encode(torch.ones(10), 0)
    with pytest.raises(ValueError, match="levels"):
        mechanisms.create("jopeq-laplace", bits=3).decode(enc, 0)
    with pytest.raises(ValueError, match="dimension"):
        mechanisms.create("jopeq-t", bits=2).decode(enc, 0)
    with pytest.raises(TypeError):
        mechanisms.create("sdq").decode(enc, 0)


@pytest.mark.parametrize("name", NAMES)
def test_malformed_messages_are_rejected(name):
    data = mechanisms.create(name, private_seed=0).encode(torch.randn(301), 1).to_bytes()
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            JoPEQMessage.from_bytes(data[:cut])
    with pytest.raises(ValueError):
        JoPEQMessage.from_bytes(data + b"\x00")
    for zeta in (0.0, -1.0, math.inf, math.nan):
        bad = bytes([21]) + np.float32(zeta).tobytes() + data[5:]
        with pytest.raises(ValueError, match="zeta"):
            JoPEQMessage.from_bytes(bad)
    with pytest.raises(ValueError, match="tag"):
        JoPEQMessage.from_bytes(bytes([20]) + data[1:])


@pytest.mark.parametrize("name", NAMES)
def test_rate_at_the_defaults(name):
    """R = 1 by default: at most 1 bit per coordinate (fixed width) plus the headers (5 + 14 bytes + mode)."""
    x = 0.01 * torch.randn(100_000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    enc = mechanisms.create(name, private_seed=0).encode(x, 0)
    assert enc.num_bits <= 100_000 + 8 * (5 + 14 + 1 + 1)
    assert enc.num_bits / 100_000 > 0.9  # R = 1 with noise: nearly incompressible
