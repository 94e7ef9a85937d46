"""Closed-form claims of the additive mechanisms: analytic Gaussian, Laplace, multivariate t."""
import math

import pytest

from auditkit import accounting
from auditkit.mechanisms.tdist import t_epsilon


def test_analytic_gaussian_at_sensitivity_one():
    # auditing.md: sigma = 1, sensitivity 1 (clip 0.5, replace-one) is (4.38, 1e-5)-DP.
    g = accounting.gaussian(sigma=1.0, clip=0.5, delta=1e-5)
    assert g.epsilon == pytest.approx(4.38, abs=0.005) and g.delta == 1e-5
    assert accounting.gaussian(sigma=2.0, clip=0.5, delta=1e-5).epsilon == pytest.approx(1.99, abs=0.01)


def test_laplace_is_two_clip_over_scale():
    g = accounting.laplace(scale=0.25, clip=1.0)
    assert g.epsilon == pytest.approx(8.0) and g.delta == 0.0 and "l1" in g.sensitivity


def test_t_mechanism_eq_11_and_the_claim_check():
    own = accounting.t_mechanism(nu=5, s2=1e-4, sensitivity=2)
    assert own.epsilon == pytest.approx(31.456, abs=1e-3) and not own.flags
    claimed = accounting.t_mechanism(nu=5, s2=1e-4, sensitivity=2, eps=4)
    assert claimed.epsilon == 4 and "claim-exceeded" in claimed.flags
    assert "[flags: claim-exceeded]" in claimed.summary()
    assert not accounting.t_mechanism(nu=5, s2=1.0, sensitivity=2, eps=10).flags


def test_eq_11_exponent_is_nu_plus_d_over_two():
    # The supremum of the log density ratio, checked by brute force on the line of the shift.
    nu, s2, shift, d = 3.0, 0.5, 2.0, 2
    z = [i / 1000 for i in range(-20000, 20000)]
    delta = shift / math.sqrt(s2)
    brute = max((nu + d) / 2 * (math.log1p((v - delta) ** 2 / nu) - math.log1p(v * v / nu)) for v in z)
    assert t_epsilon(nu, s2, shift, d) == pytest.approx(brute, rel=1e-6)
    assert accounting.t_mechanism(nu=nu, s2=s2, sensitivity=shift, dimension=d).epsilon == pytest.approx(brute, rel=1e-6)


def test_solve_t_meets_the_target_with_least_variance():
    nu, s2 = accounting.solve_t(eps=4.0)
    assert t_epsilon(nu, s2, 2.0) == pytest.approx(4.0, rel=1e-9)
    best = nu * s2 / (nu - 2)
    for other_nu in (2.5, 4.0, 8.0, 20.0):
        _, other_s2 = accounting.solve_t(eps=4.0, nu=other_nu)
        assert t_epsilon(other_nu, other_s2, 2.0) == pytest.approx(4.0, rel=1e-9)
        assert other_nu * other_s2 / (other_nu - 2) > best


def test_jopeq_claims_and_their_realised_epsilon():
    g = accounting.jopeq_laplace(eps=4, bits=1, compat="jopeq-code")
    assert g.epsilon == 4 and "claim-exceeded" in g.flags
    assert accounting.true_epsilon("jopeq-laplace", eps=4, bits=1, compat="jopeq-code") == pytest.approx(4.619, abs=1e-3)
    assert "claim-exceeded" in accounting.jopeq_t(eps=4).flags
    exact = accounting.true_epsilon("jopeq-exact", eps=4)
    assert exact == pytest.approx(4.0, rel=1e-6)


@pytest.mark.parametrize(("call", "message"), [
    (lambda: accounting.gaussian(sigma=0.0), "sigma"),
    (lambda: accounting.gaussian(sigma=1.0, delta=1.0), "delta"),
    (lambda: accounting.laplace(scale=-1.0), "scale"),
    (lambda: accounting.t_mechanism(nu=0, s2=1.0), "nu must be a finite number > 0"),
    (lambda: accounting.t_mechanism(nu=3, s2=1.0, eps=0.0), "eps must be a finite number > 0"),
    (lambda: accounting.t_mechanism(nu=3, s2=1.0, dimension=0), "dimension must be an integer >= 1"),
    (lambda: accounting.solve_t(eps=-1.0), "eps must be a finite number > 0"),
    (lambda: accounting.jopeq_laplace(eps=0.0), "eps"),
    (lambda: accounting.true_epsilon("gaussian"), "realised-noise epsilon"),
])
def test_bad_input_names_the_parameter(call, message):
    with pytest.raises(ValueError, match=message):
        call()
