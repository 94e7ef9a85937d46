"""Version 4's decisive-test names read back into data (auditkit.results.upgrade): for every kind of test the
headline can name, the name the builder writes parses back to the data it was made from; version 5's names renamed
(issue 40), in the sections the sample documents of tests/reports lack."""
import pytest

from auditkit.attacks.headline import TestKind as Kind, canary_test, decided_by, overall_verdict
from auditkit.results.upgrade import _decisive, v4_to_v5, v5_to_v6


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


def _v5(command, config, **setting):
    sections = dict.fromkeys(("accounting", "inversion", "probe", "identification", "distinguish"))
    return {"schema_version": 5, "command": command, "config": config,
            "provenance": {"accountant_backends": ["opacus-prv"]}, "settings": [{**sections, **setting}]}


def test_version_5_canary_statistics_become_statistic_and_the_rest_stays():
    idealized = {"kind": "idealized", "views": [{"view": "output", "scoring": "log-likelihood ratio", "roc": {}}],
                 "details": {"pair": "zero-vs-axis", "scoring": "log-likelihood ratio", "sampling": "per call"}}
    fl = {"kind": "fl", "views": [{"view": "aggregate", "scoring": "projection"}, {"view": "public", "scoring": "p"}],
          "details": {"participation": "full"}}
    old = _v5("canary", {"mechanism": "gaussian"}, canary=idealized)
    new = v5_to_v6(old)
    assert new["settings"][0]["canary"] == {
        "kind": "idealized", "views": [{"view": "output", "statistic": "log-likelihood ratio", "roc": {}}],
        "details": {"pair": "zero-vs-axis", "statistic": "log-likelihood ratio", "sampling": "per call"}}
    assert old["settings"][0]["canary"] == idealized and new["schema_version"] == 6  # pure
    assert new["provenance"] == {"accountants": ["opacus-prv"]}
    assert v5_to_v6(_v5("audit", {}, canary=fl))["settings"][0]["canary"] == {
        "kind": "fl", "views": [{"view": "aggregate", "statistic": "projection"}, {"view": "public", "statistic": "p"}],
        "details": {"participation": "full"}}


def test_version_5_configs_name_the_accountant_as_the_config_key_and_flag_now_do():
    audit = v5_to_v6(_v5("audit", {"accounting": {"composition_delta": 1e-5, "backend": "opacus-rdp"},
                                   "training": {"backend": "flower"}}))
    assert audit["config"] == {"accounting": {"composition_delta": 1e-5, "accountant": "opacus-rdp"},
                               "training": {"backend": "flower"}}  # the training engine keeps the word
    account = v5_to_v6(_v5("account", {"rounds": 3, "backend": "dp_accounting-pld"}))
    assert account["config"] == {"rounds": 3, "accountant": "dp_accounting-pld"}
    train = v5_to_v6(_v5("train", {"backend": "flower"}))  # only account's flag was the accountant
    assert train["config"] == {"backend": "flower"}


def test_a_version_5_reproduction_only_changes_its_version():
    old = {"schema_version": 5, "command": "reproduce", "config": {"backend": "x"}, "runs": {}}
    assert v5_to_v6(old) == {**old, "schema_version": 6}
