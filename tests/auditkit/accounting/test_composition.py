import pytest

from auditkit import accounting


@pytest.mark.parametrize(("rounds", "rate"), [(10, 1.0), (100, 0.1)])
def test_gaussian_backends_agree(rounds, rate):
    eps = {b: accounting.gaussian_over_rounds(1.0, rounds, delta=1e-5, sample_rate=rate, backend=b).epsilon
           for b in accounting.BACKENDS}
    # PRV and PLD are both numerically tight: within 1% of each other
    assert eps["opacus-prv"] == pytest.approx(eps["dp_accounting-pld"], rel=0.01)
    # RDP is an upper bound on the tight value, and not far above it (within 15%)
    for rdp in ("opacus-rdp", "dp_accounting-rdp"):
        assert eps["dp_accounting-pld"] <= eps[rdp] <= 1.15 * eps["dp_accounting-pld"]
    assert eps["opacus-rdp"] == pytest.approx(eps["dp_accounting-rdp"], rel=0.01)


def test_one_gaussian_round_matches_the_analytic_gaussian_mechanism():
    from auditkit.mechanisms.additive import analytic_gaussian_epsilon

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


def test_a_replace_one_gaussian_round_composes_as_dp_accountings_own_pld_says():
    import dp_accounting

    relation = dp_accounting.NeighboringRelation.REPLACE_ONE
    direct = dp_accounting.pld.PLDAccountant(neighboring_relation=relation)  # dp_accounting's own REPLACE_ONE PLD
    direct.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 10))
    ours = accounting.compose(dp_accounting.GaussianDpEvent(2.0), 10, delta=1e-5, backend="dp_accounting-pld")
    assert ours.epsilon == pytest.approx(direct.get_epsilon(1e-5), rel=1e-9)
    # dp_accounting's RDP accountant does not double the shift under REPLACE_ONE (google/differential-privacy#378):
    # composed as the add/remove round of half the multiplier, RDP stays above the (tighter) PLD value
    rdp = accounting.compose(dp_accounting.GaussianDpEvent(2.0), 10, delta=1e-5, backend="dp_accounting-rdp")
    buggy = dp_accounting.rdp.RdpAccountant(neighboring_relation=relation)
    buggy.compose(dp_accounting.SelfComposedDpEvent(dp_accounting.GaussianDpEvent(2.0), 10))
    assert rdp.epsilon >= ours.epsilon > 2 * buggy.get_epsilon(1e-5)


def test_pure_epsilon_rounds_compose_as_randomized_response_counted_every_round():
    from auditkit import mechanisms

    event = mechanisms.pure_epsilon_event(1.0)
    at_zero = accounting.compose(event, 10, delta=0.0)
    assert (at_zero.epsilon, at_zero.backend) == (10.0, "basic composition")  # exactly T eps at delta = 0
    pld = accounting.compose(event, 100, delta=1e-5, backend="dp_accounting-pld")
    rdp = accounting.compose(event, 100, delta=1e-5, backend="dp_accounting-rdp")
    # optimal composition of 100 eps = 1 rounds (Kairouz et al. 2015) is far below 100 and above one round:
    # the count is honoured (a SelfComposedDpEvent of it alone would give about 1 in dp_accounting 0.6's PLD)
    assert 60 < pld.epsilon < 100 and pld.epsilon <= rdp.epsilon <= 100


def test_refused_and_non_private_events_are_refusals_with_their_reason():
    import dp_accounting

    from auditkit import mechanisms

    with pytest.raises(accounting.UnsupportedEvent, match="scales the noise with"):
        accounting.compose(mechanisms.refused("compat=paper000 scales the noise with ||x||"), 3, delta=1e-5)
    with pytest.raises(accounting.UnsupportedEvent, match="claims no privacy"):
        accounting.compose(dp_accounting.NonPrivateDpEvent(), 3, delta=1e-5)
    with pytest.raises(ValueError, match="backend must be one of"):
        accounting.compose(dp_accounting.GaussianDpEvent(1.0), 3, delta=1e-5, backend="moments")
