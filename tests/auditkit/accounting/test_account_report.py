import warnings

import pytest

from auditkit import mechanisms
from auditkit.accounting import account


@pytest.fixture(autouse=True)
def quiet():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        yield


def test_gaussian_rounds_compose_through_the_named_backend():
    report = account(mechanisms.create("gaussian", sigma=2.0, clip=1.0), rounds=80, composition_delta=1e-5)
    assert report.composed.accountant == "opacus-prv"
    assert report.composed.event == ("GaussianDpEvent(noise_multiplier=2.0) under REPLACE_ONE, composed as "
                                     "GaussianDpEvent(noise_multiplier=1.0) under ADD_OR_REMOVE_ONE x 80")
    one = account(mechanisms.create("gaussian", sigma=2.0, clip=1.0), rounds=1, composition_delta=1e-5).composed.epsilon
    assert one == pytest.approx(report.per_round.epsilon, rel=0.01)  # one round = the analytic Gaussian claim
    assert report.composed.epsilon < 80 * one  # better than basic composition


def test_cepam_paper_claim_needs_the_fl_settings_and_is_flagged_vacuous():
    m = mechanisms.create("cepam-gaussian", sigma=0.1, clip=1.0)
    assert account(m).paper_claim is None
    assert account(m, fl=dict(clients=30)).paper_claim is None  # tau and dataset_size missing
    report = account(m, fl=dict(tau=15, dataset_size=1666, clients=30, eps_tilde=5.9))
    assert report.paper_claim.epsilon == pytest.approx(1.450187, abs=1e-6)
    assert "vacuous" in report.paper_claim.flags
    with pytest.raises(ValueError, match="needs eps_tilde"):
        account(m, fl=dict(tau=15, dataset_size=1666, clients=30))


def test_refusals_instead_of_numbers():
    assert "claims no privacy" in account(mechanisms.create("sdq"), rounds=5).refusal
    normalised = account(mechanisms.create("cepam-gaussian", compat="paper000"), rounds=2)
    assert "scales the noise" in normalised.refusal


def test_pure_dp_rounds_compose_as_randomized_response_and_laplace_through_pld():
    jopeq = account(mechanisms.create("jopeq-laplace", eps=4, bits=8), rounds=10)
    assert jopeq.composed.accountant == "dp_accounting-pld" and "RandomizedResponseDpEvent" in jopeq.composed.event
    assert 39.99 < jopeq.composed.epsilon <= 40.0  # optimal composition of 10 eps = 4 rounds at delta 1e-5
    exact = account(mechanisms.create("jopeq-laplace", eps=4, bits=8), rounds=10, composition_delta=0.0).composed
    assert (exact.epsilon, exact.accountant) == (40.0, "basic composition")  # at delta = 0: exactly T eps
    laplace = account(mechanisms.create("laplace", scale=0.5, clip=1.0), rounds=10, composition_delta=1e-5)
    assert laplace.composed.accountant == "dp_accounting-pld" and laplace.composed.epsilon <= 40.0


def test_a_claim_its_noise_exceeds_is_composed_both_ways():
    report = account(mechanisms.create("t-dist", nu=5, s2=1e-4), rounds=10)
    assert report.composed.epsilon == pytest.approx(40.0, abs=0.01)  # the claim, as stated
    assert report.composed_actual.epsilon == pytest.approx(314.56, abs=0.01)  # the noise really added
    assert report.to_dict()["composed_actual"]["accountant"] == "basic composition"
    assert account(mechanisms.create("laplace"), rounds=10).composed_actual is None


def test_noise_too_small_for_prv_falls_back_to_rdp_and_says_so():
    report = account(mechanisms.create("gaussian", sigma=0.05, clip=1.0), rounds=2)
    assert report.composed.accountant == "opacus-rdp"
    assert "opacus-prv could not evaluate it" in report.composed.event
    assert report.composed.epsilon > 1000  # almost no noise: a huge but finite epsilon


def test_the_composed_claim_is_checked_against_its_recomputation_from_the_runs_sampling():
    """dp-fedavg's event samples nothing of its own: the recomputation is its composition ("consistent"). An
    event sampled at its own q' = 1e-3 is stripped of it and the run's participation applied instead."""
    import dp_accounting

    from auditkit.accounting import check_sampling, client_sampling, compose

    fedavg = mechanisms.create("dp-fedavg", noise_multiplier=1.0, clip=1.0)
    for participation, rate in (("full", None), ("poisson", 0.1)):
        report = account(fedavg, rounds=100, participation=participation, sample_rate=rate)
        assert report.check.verdict == "consistent"
        assert report.check.independent_epsilon == report.composed.epsilon
        assert report.to_dict()["check"] == vars(report.check)
    relation = dp_accounting.NeighboringRelation.ADD_OR_REMOVE_ONE
    gaussian = dp_accounting.GaussianDpEvent(1.0)
    own = dp_accounting.PoissonSampledDpEvent(1e-3, gaussian)
    full = client_sampling(fedavg, "full", None)
    understated = compose(own, 100, delta=1e-5, relation=relation)
    check = check_sampling(own, understated, full, relation=relation, accountant="opacus-prv")
    assert check.verdict == "violated" and understated.epsilon == pytest.approx(0.06526, abs=1e-4)
    assert check.independent_epsilon == compose(gaussian, 100, delta=1e-5, relation=relation).epsilon  # 91.83
    assert check.reason == ("the accountant ignores the run's client sampling: its one-round event is Poisson-sampled "
                            "at q' = 0.001 of its own; recomputed from the run (participation 'full', not amplified) "
                            "over 100 rounds: eps = 91.83, not 0.06526")
    poisson = client_sampling(fedavg, "poisson", 0.1)
    run = dp_accounting.PoissonSampledDpEvent(0.1, own)  # what account composes: the run's sampling on top
    check = check_sampling(own, compose(run, 100, delta=1e-5, relation=relation), poisson, relation=relation,
                           accountant="opacus-prv")
    assert check.verdict == "violated"
    assert check.independent_epsilon == pytest.approx(7.057, abs=1e-3)  # PoissonSampled(0.1, Gaussian(1)) x 100
    certain = dp_accounting.PoissonSampledDpEvent(1.0, gaussian)  # sampled "at rate 1": all of the run's rounds
    check = check_sampling(certain, compose(certain, 100, delta=1e-5, relation=relation), full, relation=relation,
                           accountant="opacus-prv")
    assert check.verdict == "consistent" and check.independent_epsilon == pytest.approx(91.83, abs=0.01)


def test_no_composed_number_no_check():
    assert account(mechanisms.create("sdq"), rounds=5).check is None
