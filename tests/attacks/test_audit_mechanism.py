"""audit_mechanism: the worst pair, Bonferroni over the pairs, verdicts for JoPEQ, jopeq-exact, none, a vague claim.

jopeq-laplace (eps = 4 claimed, bits = 1) has a moment-matched noise whose true eps is 2/b' = 6.05
(``true_epsilon``): 10^5 trials certify about 5 on its one pair, so it must be "violated"; ``jopeq-exact``
with the same claim has exactly Laplace(b = 1/2) noise for the shift 2 (eps exactly 4) and must not be.
"""

import json

import pytest
import torch

import mechanisms
from attacks.audit_mechanism import audit_mechanism
from attacks.audit_settings import REFERENCE_PARAMS
from attacks.neighbouring_pairs import neighbouring_pairs
from attacks.verdicts import CONSISTENT, INCONCLUSIVE, VACUOUS, VIOLATED


def test_moment_matched_jopeq_exceeds_its_claim_and_jopeq_exact_does_not():
    moment_matched = audit_mechanism("jopeq-laplace", trials=100_000, seed=0)
    assert moment_matched.verdict == VIOLATED
    assert 4.0 < moment_matched.worst.epsilon_lower_bound <= mechanisms.create("jopeq-laplace").true_epsilon()
    exact = audit_mechanism("jopeq-exact", trials=100_000, seed=0)
    assert exact.verdict == CONSISTENT and 3.0 < exact.worst.epsilon_lower_bound <= 4.0


def test_worst_pair_is_kept_with_bonferroni_over_the_pairs():
    audit = audit_mechanism(mechanisms.create("laplace", scale=1.0, clip=0.5, private_seed=0), trials=20_000)
    assert audit.tests == len(audit.estimates) == 6
    assert audit.per_test_confidence == pytest.approx(1 - 0.05 / 6)
    assert all(e.confidence == audit.per_test_confidence for e in audit.estimates)
    assert audit.worst.epsilon_lower_bound == max(e.epsilon_lower_bound for e in audit.estimates)
    assert audit.verdict == CONSISTENT and audit.claimed_epsilon == 1.0
    record = json.loads(json.dumps(audit.to_dict()))
    assert record["worst_pair"] == audit.worst.pair.label and len(record["estimates"]) == 6


def test_no_claim_is_vacuous_and_a_claim_out_of_reach_is_inconclusive():
    none = audit_mechanism("none", trials=2_000)
    assert none.verdict == VACUOUS and none.worst.epsilon_lower_bound == none.worst.max_certifiable
    vague = audit_mechanism("gaussian", trials=2_000)  # sigma 0.1, clip 1: eps 284
    assert vague.verdict == INCONCLUSIVE and vague.worst.delta == 1e-5


def test_a_callable_is_audited_on_given_pairs_against_a_given_claim():
    def weakened(x, seed):  # Gaussian noise 0.5 where a claim of eps 1 at delta 1e-5 needs ~4.9 for shift 1
        return x + 0.5 * torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

    pairs = neighbouring_pairs(2, sensitivity=1.0, random_directions=0)
    audit = audit_mechanism(weakened, trials=20_000, claimed_eps=1.0, delta=1e-5, pairs=pairs, tests=10)
    assert audit.verdict == VIOLATED and audit.mechanism == "weakened" and audit.tests == 10


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"mechanism": lambda x, seed: x}, "pairs"),
        ({"mechanism": "laplace", "tests": 2}, "tests"),
        ({"mechanism": "laplace", "pairs": []}, "pairs"),
        ({"mechanism": "laplace", "confidence": 0.0}, "confidence"),
    ],
)
def test_bad_input_is_a_value_error_naming_the_parameter(kwargs, match):
    with pytest.raises(ValueError, match=match):
        audit_mechanism(kwargs.pop("mechanism"), trials=100, **kwargs)


def test_no_correct_mechanism_is_violated():
    claims = {n: mechanisms.create(n, **REFERENCE_PARAMS.get(n, {})).guarantee() for n in mechanisms.names()}
    correct = [n for n, g in claims.items() if g.epsilon is not None and "claim-exceeded" not in g.flags]
    assert len(correct) == 9
    family = 6 * len(correct)  # at most 6 pairs per mechanism: one family-wise level
    for name in correct:
        m = mechanisms.create(name, private_seed=0, **REFERENCE_PARAMS.get(name, {}))
        audit = audit_mechanism(m, trials=10_000, tests=family)
        assert audit.verdict == CONSISTENT, name  # reachable (cap 6.5 > every claim) and not exceeded
