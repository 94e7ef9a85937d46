"""Sums of the Laplace + uniform log-density over many (output, candidate) pairs (the compiled loops) against the
elementwise closed form."""
import numpy as np
import pytest

from auditkit.mechanisms.laplace_uniform import (
    CHEBYSHEV_TOLERANCE,
    _interpolant,
    centre_correction,
    laplace_uniform_logpdf,
    pair_log_density_sums,
)

RNG = np.random.default_rng(11)
YS = RNG.normal(size=(30, 2000)) * 0.05
XS = RNG.normal(size=(6, 2000)) * 0.02
ROWS = RNG.integers(0, 30, 60)
COLUMNS = RNG.integers(0, 6, 60)
SCALES = RNG.uniform(10, 60, 6)


def _reference(scale, width):
    """The elementwise closed form in float64, summed per pair."""
    return np.array([laplace_uniform_logpdf(SCALES[j] * (YS[t] - XS[j]), scale, width).sum()
                     for t, j in zip(ROWS, COLUMNS)])


@pytest.mark.parametrize("scale, width", [(1.95, 2.25), (0.633, 1.03), (0.12, 0.78)])
def test_the_interpolated_loop_equals_the_closed_form(scale, width):
    """r = w / 2b of JoPEQ-Laplace at 2 bits and eps 1, 3 and 10 (r = 0.58, 0.81, 3.25): the interpolant is used."""
    assert _interpolant(width / (2 * scale))[1] <= CHEBYSHEV_TOLERANCE
    sums = pair_log_density_sums(YS, XS, ROWS, COLUMNS, SCALES, scale, width)
    assert sums == pytest.approx(_reference(scale, width), rel=1e-11, abs=1e-7)


@pytest.mark.parametrize("r", [0.577945169161142, 0.9908673886137245])
def test_an_interpolant_whose_top_coefficient_is_zero_keeps_every_coefficient(r):
    """At these r (an audit's JoPEQ settings) NumPy's cheb2poly trims a trailing zero coefficient; the compiled
    Horner loop reads all 25, and numba refused the shorter tuple (a TypingError mid-audit)."""
    coefficients, error = _interpolant(r)
    assert len(coefficients) == 25 and error <= CHEBYSHEV_TOLERANCE
    scale = 1.0
    sums = pair_log_density_sums(YS, XS, ROWS, COLUMNS, SCALES, scale, 2 * r * scale)
    assert sums == pytest.approx(_reference(scale, 2 * r * scale), rel=1e-11, abs=1e-7)


def test_a_range_the_interpolant_cannot_cover_takes_the_closed_form_loop():
    scale, width = 0.02, 0.78  # r = 19.5
    assert _interpolant(width / (2 * scale))[1] > CHEBYSHEV_TOLERANCE
    sums = pair_log_density_sums(YS, XS, ROWS, COLUMNS, SCALES, scale, width)
    assert sums == pytest.approx(_reference(scale, width), rel=1e-11, abs=1e-7)


def test_the_centre_correction_vanishes_with_its_slope_where_the_tail_begins():
    r = 0.8
    assert centre_correction(np.array([r]), r)[0] == pytest.approx(0.0, abs=1e-14)
    slope = (centre_correction(np.array([r]), r) - centre_correction(np.array([r - 1e-6]), r))[0] / 1e-6
    assert slope == pytest.approx(0.0, abs=1e-5)
    # it is ln f minus the tail's line, written separately: ln f(z) = -u + ln sinh r - ln w + h(u), u = |z| / b
    b, w = 0.5, 0.8
    z = np.linspace(0, w / 2, 7)
    tail = -z / b + np.log(np.sinh(w / (2 * b))) - np.log(w)
    assert laplace_uniform_logpdf(z, b, w) - tail == pytest.approx(centre_correction(z / b, w / (2 * b)))
