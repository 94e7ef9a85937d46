"""Building a results document's sections (auditkit.results.build)."""
import pytest

from auditkit import mechanisms, results


def _distinguish(verdict="consistent", bound=2.0, adaptive=(), p=0.4):
    return {"worst_pair": "axis", "verdict": verdict, "p_value": p, "tests": 6, "epsilon_lower_bound": bound,
            "max_certifiable": 9.46, "confidence": 0.95, "adaptive": list(adaptive)}


def test_a_setting_records_the_epsilon_its_mechanism_really_adds():
    jopeq = mechanisms.create("jopeq-laplace", eps=10.0, bits=2)
    entry = results.setting("s00", "jopeq", jopeq, distinguish=_distinguish("inconclusive", 6.0, p=1.0))
    assert entry["mechanism"]["true_epsilon"] == pytest.approx(jopeq.true_epsilon()) and jopeq.true_epsilon() > 10
    assert entry["verdict"]["evidence"] == "analytic"
    gaussian = results.setting("s01", "gaussian", mechanisms.create("gaussian"), distinguish=_distinguish())
    assert gaussian["mechanism"]["true_epsilon"] is None and gaussian["verdict"]["verdict"] == "consistent"
