"""Adaptive tests: JoPEQ's zeta side channel, JoPEQ overload, CEPAM 000's normalisation, DP-SQ's cell-local
claim, MSP-FL's transcript, the registry.

Figures at 3,000 trials per view (2 x 750 held-out outputs at the Bonferroni confidence 0.975: a perfect test
certifies 5.14): the zeta read from the message is a perfect test for all three JoPEQ mechanisms (5.14 > the
claimed 4), CEPAM 000's decoded update alone certifies ~5.1 against claims of 4.38 (Gaussian) and 1
(Laplace), and with ``compat=none`` the same pair gives ~0 (consistent). Overload: inside the claimed domain
it is post-processing, so ``jopeq-laplace``'s edge pair stays below its true epsilon 6.05 (about 3.1 here),
while the spike pair (a sparse update, outside the domain) overloads in every message and is told apart.
DP-SQ at eps1 = 1: the in-cell pair stays below 1 (consistent) while the range ends, with disjoint output
supports, reach the cap (5.1 > 1): "claim holds only cell-locally"; b = 1 has one cell and stays consistent.
MSP+Lap at eps_dp = 1: alpha_0 alone stays below 1, the transcript's reconstruction reaches the cap.
"""

import json

import pytest

import mechanisms
from attacks.adaptive_tests import (
    ADAPTIVE_TESTS,
    adaptive_tests_for,
    cepam_normalisation,
    dpsq_cross_cell,
    jopeq_overload,
    jopeq_scale_side_channel,
    msp_transcript,
)
from attacks.verdicts import CELL_LOCAL_ONLY, CONSISTENT, VACUOUS, VIOLATED, verdict

TRIALS = 3_000
CEPAM_REFERENCE = {
    "cepam-gaussian": {"sigma": 1.0, "clip": 0.5, "n": 3},  # claims 4.38 at delta 1e-5
    "cepam-laplace": {"scale": 1.0, "clip": 0.5},  # claims 1
}


@pytest.mark.parametrize("name", ["jopeq-laplace", "jopeq-t", "jopeq-exact"])
def test_zeta_alone_tells_h_from_4h_perfectly(name):
    result = jopeq_scale_side_channel(mechanisms.create(name, private_seed=3), trials=TRIALS, seed=1)
    message, decoded = result.estimates
    assert message.fp == message.fn == 0 and message.epsilon_lower_bound == message.max_certifiable > 5.0
    assert result.findings == {"zeta_x0": 1.0, "zeta_x1": 0.25}
    assert result.verdict == VIOLATED and result.claimed_epsilon == 4.0 and result.per_test_confidence == 0.975
    assert decoded.epsilon_lower_bound > 4.0  # the decoded update alone: noise 4 times wider for 4h
    assert json.loads(json.dumps(result.to_dict()))["verdict"] == VIOLATED


def test_overload_inside_the_domain_adds_no_privacy_loss_and_a_spike_leaves_the_domain():
    m = mechanisms.create("jopeq-laplace", private_seed=3)
    result = jopeq_overload(m, trials=TRIALS, seed=1)
    edge, spike = result.estimates
    assert result.judged == (True, False) and result.worst is edge
    assert result.verdict == verdict(edge, m.guarantee())
    assert 0.05 < result.findings["edge_overloads_per_message"] < 1  # noise pushes the edge block past the support
    assert result.findings["spike_overloads_per_message"] >= 1  # the spike block overloads in every message
    assert edge.epsilon_lower_bound <= m.true_epsilon()  # post-processing of zeta h + n
    assert spike.epsilon_lower_bound > 0.95 * spike.max_certifiable > 4.0
    assert result.findings["spike_epsilon_lower_bound"] == spike.epsilon_lower_bound


@pytest.mark.parametrize("name", ["cepam-gaussian", "cepam-laplace"])
def test_paper000_normalisation_reveals_the_norm_and_compat_none_does_not(name):
    normalised = mechanisms.create(name, compat="paper000", private_seed=3, **CEPAM_REFERENCE[name])
    result = cepam_normalisation(normalised, trials=TRIALS, seed=1)
    decoded, message = result.estimates
    assert result.verdict == VIOLATED
    assert decoded.epsilon_lower_bound > result.claimed_epsilon + 0.5  # within the claim's threat model
    assert message.epsilon_lower_bound == message.max_certifiable  # ||x|| in clear
    clipped = cepam_normalisation(mechanisms.create(name, private_seed=3, **CEPAM_REFERENCE[name]), trials=TRIALS)
    assert len(clipped.estimates) == 1 and clipped.verdict == CONSISTENT


@pytest.mark.parametrize(("name", "params"), [("dpsq", {"eps": 1.0}), ("laplace-sq", {"eps": 1.0, "rho": 20 / 15})])
def test_dpsq_claim_holds_in_one_cell_only(name, params):
    m = mechanisms.create(name, private_seed=0, **params)
    result = dpsq_cross_cell(m, trials=TRIALS, seed=0)
    in_cell, _, ends = result.estimates
    assert in_cell.epsilon_lower_bound < 1.0 < ends.epsilon_lower_bound  # the claim's pair vs the range ends
    assert ends.epsilon_lower_bound > 4.0  # far above eps1: disjoint supports (dpsq), eps1 2C/rho = 15 (LSQ)
    assert result.verdict == CELL_LOCAL_ONLY


@pytest.mark.parametrize(("name", "params"), [("dpsq", {"eps": 1.0, "bits": 1}), ("laplace-sq", {"eps": 1.0})])
def test_dpsq_claim_over_the_whole_range_is_consistent(name, params):
    result = dpsq_cross_cell(mechanisms.create(name, private_seed=0, **params), trials=TRIALS, seed=0)
    assert result.verdict == CONSISTENT and result.epsilon_lower_bound < 1.0  # b = 1 / rho = 2C: no cross-cell gap


def test_msp_transcript_cancels_the_laplace_noise_of_alpha_0():
    result = msp_transcript(mechanisms.create("msp-laplace", eps=1.0, private_seed=0), trials=TRIALS, seed=0)
    alpha0, transcript = result.estimates
    assert alpha0.epsilon_lower_bound < 1.0  # Proposition 1 holds for the first upload alone
    assert transcript.epsilon_lower_bound > 0.95 * transcript.max_certifiable > 1.0  # perfect test on the transcript
    assert result.verdict == VIOLATED
    assert msp_transcript("msp", trials=200, seed=0).verdict == VACUOUS  # MSP-FL states no epsilon
    with pytest.raises(ValueError, match="consensus_rounds >= 2"):
        msp_transcript(mechanisms.create("msp", consensus_rounds=1), trials=200)


def test_registry_lists_tests_per_mechanism_and_refuses_bad_input():
    assert adaptive_tests_for("jopeq-t") == [jopeq_scale_side_channel, jopeq_overload]
    assert adaptive_tests_for("cepam-laplace") == [cepam_normalisation]
    assert adaptive_tests_for("gaussian") == []
    assert set(ADAPTIVE_TESTS) <= set(mechanisms.names())
    with pytest.raises(ValueError, match="mechanism_name must be a registered mechanism"):
        adaptive_tests_for("jopeq")
    with pytest.raises(ValueError, match="mechanism must be one of jopeq-laplace, jopeq-t for jopeq_overload"):
        jopeq_overload("jopeq-exact", trials=100)
    with pytest.raises(ValueError, match="trials must be an integer >= 20"):
        cepam_normalisation("cepam-gaussian", trials=10)
    with pytest.raises(ValueError, match=r"confidence must be in \(0, 1\)"):
        jopeq_scale_side_channel("jopeq-laplace", trials=100, confidence=1.0)
