"""Version 4's decisive-test names read back into data (auditkit.results.upgrade): for every kind of test the
headline can name, the name the builder writes parses back to the data it was made from."""
import pytest

from auditkit.attacks.headline import TestKind as Kind, canary_test, decided_by, overall_verdict
from auditkit.results.upgrade import _decisive, v4_to_v5


def _canary(kind):
    result = {"verdict": "violated", "bound": "fdp", "epsilon_lower_bound": 1.0, "max_certifiable": 3.0}
    return {"kind": kind, "confidence": 0.95, "views": [{"view": "aggregate", "result": result}]}


DECISIVE = [
    decided_by(Kind.DISTINGUISHING, "distinguishing test (worst pair: 0 vs clip)", pair="0 vs clip"),
    decided_by(Kind.ADAPTIVE, "adaptive test jopeq-scale-side-channel", test="jopeq-scale-side-channel"),
    decided_by(Kind.IDENTIFICATION, "identification among 100 candidates", candidates=100),
    canary_test(_canary("idealized"), _canary("idealized")["views"][0]),
    canary_test(_canary("fl"), _canary("fl")["views"][0]),
    decided_by(Kind.ANALYTIC, "accounting: the noise it really adds is ε = 16.5 per round"),
    decided_by(Kind.ANALYTIC, "accounting: the composed claim is below its recomputation from the run, ε = 91.83",
               whole_run=True),
    decided_by(Kind.NO_CLAIM, "the mechanism (it makes no privacy claim)"),
]


@pytest.mark.parametrize("decisive", DECISIVE, ids=lambda d: d["kind"])
def test_a_version_4_name_parses_back_to_the_decisive_test_it_named(decisive):
    assert _decisive(decisive["name"]) == decisive


def test_every_test_the_headline_names_is_one_of_the_kinds_parsed():
    distinguish = {"worst_pair": "0 vs clip", "verdict": "consistent", "p_value": 0.4, "tests": 3,
                   "epsilon_lower_bound": 1.0, "max_certifiable": 4.0, "confidence": 0.95,
                   "adaptive": [{"test": "side", "verdict": "violated", "p_value": 1e-9, "epsilon_lower_bound": 4.0,
                                 "max_certifiable": 4.0}]}
    headline = overall_verdict(distinguish, None, {"guarantee": {"epsilon": 1.0, "flags": []}, "true_epsilon": None})
    assert _decisive(headline["decided_by"]["name"]) == headline["decided_by"]
    assert _decisive(headline["bound"]["test"]["name"]) == headline["bound"]["test"]


def test_an_adaptive_claim_is_split_from_the_stated_one_and_the_original_kept():
    old = {"schema_version": 4, "settings": [{"verdict": None, "distinguish": {"adaptive": [
        {"claim": "scale side channel; stated claim: eps=1 per round"}, {"claim": "no stated part"}]}}]}
    new = v4_to_v5(old)
    assert new["settings"][0]["distinguish"]["adaptive"] == [
        {"claim": "scale side channel", "stated_claim": "eps=1 per round"},
        {"claim": "no stated part", "stated_claim": ""}]
    assert old["settings"][0]["distinguish"]["adaptive"][0]["claim"].endswith("per round")  # pure
    assert new["schema_version"] == 5
