"""JoPEQ's adaptive tests (``auditkit.attacks.targeted.jopeq``), at 3,000 trials per view (2 x 750 held-out outputs at the
Bonferroni confidence 0.975: a perfect test certifies 5.14): the zeta read from the message is a perfect test for
all three JoPEQ mechanisms (5.14 > the claimed 4). Overload: inside the claimed domain it is post-processing, so
``jopeq-laplace``'s edge pair stays below its true epsilon 6.05 (about 3.1 here), while the spike pair (a sparse
update, outside the domain) overloads in every message and is told apart.
"""

import json

import pytest

from auditkit import mechanisms
from auditkit.attacks.targeted.jopeq import jopeq_overload, jopeq_scale_side_channel
from auditkit.attacks.verdicts import VIOLATED, verdict

TRIALS = 3_000


@pytest.mark.parametrize("name", ["jopeq-laplace", "jopeq-t", "jopeq-exact"])
def test_zeta_alone_tells_h_from_4h_perfectly(name):
    result = jopeq_scale_side_channel(mechanisms.create(name, private_seed=3), trials=TRIALS, seed=1)
    message, decoded = result.estimates
    assert message.fp == message.fn == 0 and message.epsilon_lower_bound == message.max_certifiable > 5.0
    assert result.findings == {"zeta_x0": 1.0, "zeta_x1": 0.25}
    assert result.verdict == VIOLATED and result.claimed_epsilon == 4.0 and result.per_test_confidence == 0.975
    assert decoded.epsilon_lower_bound > 4.0  # the decoded update alone: noise 4 times wider for 4h
    assert json.loads(json.dumps(result.to_dict()))["verdict"] == VIOLATED
    # a perfect test on 3,000 trials: the claim's p-value is tiny, from the worst judged estimate
    assert result.p_value == result.worst.p_value and result.p_value < 1e-5
    assert result.to_dict()["p_value"] == result.p_value


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
