import pytest

from auditkit import accounting


@pytest.mark.parametrize(("rounds", "rate"), [(10, 1.0), (100, 0.1)])
def test_gaussian_backends_agree(rounds, rate):
    eps = {b: accounting.gaussian_over_rounds(1.0, rounds, delta=1e-5, sample_rate=rate, backend=b).epsilon
           for b in accounting.GAUSSIAN_BACKENDS}
    # PRV and PLD are both numerically tight: within 1% of each other
    assert eps["opacus-prv"] == pytest.approx(eps["dp_accounting-pld"], rel=0.01)
    # RDP is an upper bound on the tight value, and not far above it (within 15%)
    for rdp in ("opacus-rdp", "dp_accounting-rdp"):
        assert eps["dp_accounting-pld"] <= eps[rdp] <= 1.15 * eps["dp_accounting-pld"]
    assert eps["opacus-rdp"] == pytest.approx(eps["dp_accounting-rdp"], rel=0.01)


def test_one_gaussian_round_matches_the_analytic_gaussian_mechanism():
    from mechanisms.additive import analytic_gaussian_epsilon

    composed = accounting.gaussian_over_rounds(1.0, 1, delta=1e-5, backend="dp_accounting-pld").epsilon
    assert composed == pytest.approx(analytic_gaussian_epsilon(1.0, 1.0, 1e-5), rel=0.01)


@pytest.mark.parametrize("rounds", [1, 2, 10, 100])
def test_laplace_composition_never_above_basic(rounds):
    result = accounting.laplace_over_rounds(2.0, rounds, delta=1e-6)
    assert result.epsilon <= rounds * 0.5 + 1e-12
    if rounds == 100:
        assert result.backend == "dp_accounting-pld" and result.epsilon < 0.7 * rounds * 0.5  # advanced composition beats T*eps


def test_laplace_at_one_round_is_its_epsilon():
    assert accounting.laplace_over_rounds(2.0, 1).epsilon == 0.5
    assert accounting.laplace_over_rounds(2.0, 1, delta=1e-9).epsilon == pytest.approx(0.5, abs=1e-6)


def test_weak_laplace_noise_composes_basically_without_building_a_huge_pld():
    # scale 0.007 on an l1 clip of 50: eps_1 = 100 / 0.007 = 14286 per round (a PLD grid of 2.9e8 points)
    result = accounting.laplace_over_rounds(0.007 / 100, 3, delta=1e-5)
    assert result.backend == "basic composition" and result.epsilon == pytest.approx(3 * 100 / 0.007)
    at_limit = accounting.laplace_over_rounds(1 / 20, 2, delta=1e-5)
    assert at_limit.backend == "dp_accounting-pld" and at_limit.epsilon <= 40


def test_unsupported_events_are_refused_not_numbered():
    with pytest.raises(accounting.UnsupportedEvent, match="subsampling with replacement"):
        accounting.refuse_sampling_with_replacement(80)
    with pytest.raises(accounting.UnsupportedEvent, match="delta = 0"):
        accounting.gaussian_over_rounds(1.0, 3, delta=0.0)
    with pytest.raises(ValueError, match="backend must be one of"):
        accounting.gaussian_over_rounds(1.0, 3, delta=1e-5, backend="moments")
    with pytest.raises(ValueError, match="rounds must be an integer >= 1"):
        accounting.laplace_over_rounds(1.0, 0)
