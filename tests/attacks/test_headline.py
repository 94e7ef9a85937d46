"""A setting's headline verdict (auditkit.attacks.headline): the worst of its tests, the claim refuted by computation,
"no claim", and the strongest certified bound."""
import pytest

from auditkit.attacks.headline import TestKind as Kind, decided_by, overall_verdict, strongest_bound


def _distinguish(verdict="consistent", bound=2.0, adaptive=(), p=0.4):
    return {"worst_pair": "axis", "verdict": verdict, "p_value": p, "tests": 6, "epsilon_lower_bound": bound,
            "max_certifiable": 9.46, "confidence": 0.95, "adaptive": list(adaptive)}


def _mechanism(epsilon, flags=(), true_epsilon=None):
    return {"guarantee": {"epsilon": epsilon, "flags": list(flags)}, "true_epsilon": true_epsilon}


def test_a_claim_whose_noise_is_computed_to_exceed_it_is_refuted_analytically():
    """JoPEQ at eps 10: no test can reach 10 with these trials (inconclusive), but the noise it really adds is
    eps 16.5 per round: the headline is violated, graded "analytic", with no p-value."""
    headline = overall_verdict(_distinguish("inconclusive", 6.78, p=1.0), None,
                               _mechanism(10.0, ["claim-exceeded"], 16.5))
    assert (headline["verdict"], headline["evidence"], headline["decided_by"]["name"]) == (
        "violated", "analytic", "accounting: the noise it really adds is ε = 16.5 per round")
    assert (headline["decided_by"]["kind"], headline["decided_by"]["whole_run"]) == ("analytic", False)
    assert headline["p_value"] is None and headline["adjusted_p_value"] is None
    assert headline["tests"] == 1  # the computation is evidence, not one of the audit's statistical tests
    assert headline["bound"] == {"epsilon_lower_bound": 6.78, "test": decided_by(
        Kind.DISTINGUISHING, "distinguishing test (worst pair: axis)", pair="axis"),
                                 "max_certifiable": 9.46, "confidence": 0.95}


def test_a_statistical_refutation_still_decides_beside_the_analytic_one():
    side_channel = {"test": "jopeq-scale-side-channel", "verdict": "violated", "p_value": 1e-20,
                    "epsilon_lower_bound": 9.46, "max_certifiable": 9.46}
    headline = overall_verdict(_distinguish(adaptive=[side_channel]), None, _mechanism(1.0, ["claim-exceeded"], 1.65))
    assert (headline["decided_by"]["name"], headline["evidence"]) == ("adaptive test jopeq-scale-side-channel", "decisive")
    assert (headline["decided_by"]["kind"], headline["decided_by"]["test"]) == ("adaptive", "jopeq-scale-side-channel")
    assert headline["bound"]["test"]["name"] == "adaptive test jopeq-scale-side-channel"


def test_the_flag_alone_or_a_true_epsilon_alone_refutes_nothing():
    assert overall_verdict(_distinguish(), None, _mechanism(1.0, ["claim-exceeded"]))["verdict"] == "consistent"
    assert overall_verdict(_distinguish(), None, _mechanism(1.0, [], 0.5))["verdict"] == "consistent"


def test_a_mechanism_without_a_claim_is_no_claim_whatever_its_tests_measured():
    headline = overall_verdict(_distinguish("no claim", 8.69, p=None), None, _mechanism(None, ["no-privacy"]))
    assert (headline["verdict"], headline["evidence"]) == ("no claim", None)
    assert headline["decided_by"]["name"] == "the mechanism (it makes no privacy claim)"
    assert headline["decided_by"]["kind"] == "no claim"
    assert headline["bound"]["epsilon_lower_bound"] == 8.69  # what it leaked is still reported


def test_the_strongest_bound_names_its_test_and_the_black_box_test_wins_ties():
    adaptive = [{"test": "overload", "epsilon_lower_bound": 2.0, "max_certifiable": 9.0},
                {"test": "side", "epsilon_lower_bound": 3.5, "max_certifiable": 9.1}]
    assert strongest_bound(_distinguish(bound=2.0, adaptive=adaptive))["test"]["test"] == "side"
    tied = strongest_bound(_distinguish(bound=3.5, adaptive=adaptive))
    assert tied["test"]["kind"] == "distinguishing" and tied["max_certifiable"] == 9.46
    assert strongest_bound(None) is None


def test_an_accounting_check_found_understated_refutes_the_claim_analytically():
    check = {"verdict": "violated", "independent_epsilon": 91.83, "reason": "its own sampling"}
    headline = overall_verdict(_distinguish(), None, _mechanism(4.38), {"check": check})
    assert (headline["verdict"], headline["evidence"], headline["p_value"], headline["tests"]) == (
        "violated", "analytic", None, 1)
    assert headline["decided_by"]["kind"] == "analytic" and headline["decided_by"]["whole_run"]
    assert headline["decided_by"]["name"] == ("accounting: the composed claim is below its recomputation from the run, "
                                      "ε = 91.83")
    consistent = {"check": {**check, "verdict": "consistent"}}
    assert overall_verdict(_distinguish(), None, _mechanism(4.38), consistent)["verdict"] == "consistent"
    assert overall_verdict(_distinguish(), None, _mechanism(4.38), {"check": None})["verdict"] == "consistent"


def _composed(epsilon=25.5, rounds=20, check=None):
    return {"composed": {"epsilon": epsilon, "delta": 1e-5, "rounds": rounds}, "check": check}


def _fl_canary(verdict):
    view = {"view": "server", "result": {"verdict": verdict, "bound": "fdp"}}
    return {"kind": "fl", "views": [view]}


def test_each_claim_is_judged_by_its_own_tests_and_an_untested_whole_run_claim_says_so():
    """The distinguishing test judges the one-round claim only: the whole run's composed claim is "not tested"
    (verdict null) until canary clients judge it, and then it takes their verdict, not the one-round one."""
    one_round, whole_run = overall_verdict(_distinguish(), None, _mechanism(4.0), _composed())["claims"]
    assert (one_round["scope"], one_round["epsilon"], one_round["verdict"], one_round["tests"]) == (
        "one round", 4.0, "consistent", 1)
    assert (whole_run["scope"], whole_run["epsilon"], whole_run["rounds"]) == ("whole run", 25.5, 20)
    assert (whole_run["verdict"], whole_run["decided_by"], whole_run["tests"]) == (None, None, 0)
    headline = overall_verdict(_distinguish(), None, _mechanism(4.0), _composed(), _fl_canary("violated"))
    one_round, whole_run = headline["claims"]
    assert headline["verdict"] == "violated" and one_round["verdict"] == "consistent"  # the worst; each its own
    assert (whole_run["verdict"], whole_run["decided_by"]["kind"], whole_run["tests"]) == ("violated", "canary", 1)
    refuted_round = overall_verdict(_distinguish("violated", p=1e-9), None, _mechanism(4.0), _composed(),
                                    _fl_canary("inconclusive"))["claims"]
    assert [c["verdict"] for c in refuted_round] == ["violated", "inconclusive"]


def test_a_computed_refutation_judges_the_claim_it_is_about():
    """The accounting check recomputes the composed claim: it refutes the whole run's claim, which no statistical
    test judged; the declared true epsilon refutes the one-round claim."""
    check = {"verdict": "violated", "independent_epsilon": 91.83, "reason": "its own sampling"}
    one_round, whole_run = overall_verdict(_distinguish(), None, _mechanism(4.0), _composed(check=check))["claims"]
    assert one_round["verdict"] == "consistent"
    assert (whole_run["verdict"], whole_run["evidence"], whole_run["tests"]) == ("violated", "analytic", 0)
    one_round, whole_run = overall_verdict(_distinguish("inconclusive", p=1.0), None,
                                           _mechanism(10.0, ["claim-exceeded"], 16.5), _composed())["claims"]
    assert (one_round["verdict"], one_round["evidence"]) == ("violated", "analytic")
    assert whole_run["verdict"] is None


def test_a_mechanism_without_a_claim_states_no_claim_to_judge():
    assert overall_verdict(_distinguish("no claim", p=None), None, _mechanism(None, ["no-privacy"]))["claims"] == []
    # no composed claim (the accountant refused, or nothing was accounted): the one-round claim alone
    assert [c["scope"] for c in overall_verdict(_distinguish(), None, _mechanism(1.0))["claims"]] == ["one round"]
