"""Verdicts against claims, and the family-wise procedures."""

import pytest
import torch

from auditkit.attacks.distinguish import EpsilonEstimate
from auditkit.attacks.neighbouring_pairs import NeighbouringPair
from auditkit.attacks.verdicts import (
    CELL_LOCAL_ONLY, CONSISTENT, INCONCLUSIVE, NO_CLAIM, VACUOUS, VIOLATED, adjusted_p_value, bonferroni_confidence, evidence,
    holm, verdict,
)
from auditkit.mechanisms.guarantee import PrivacyGuarantee
from auditkit.mechanisms.guarantee import REPLACE_ONE


def _estimate(bound: float, cap: float, *, delta: float = 0.0, claimed: float | None = None) -> EpsilonEstimate:
    zero = torch.zeros(1)
    return EpsilonEstimate(
        epsilon_lower_bound=bound, confidence=0.95, delta=delta, max_certifiable=cap, statistic="projection",
        pair=NeighbouringPair("axis", zero, zero), trials=100, fp=0, n0=25, fn=0, n1=25, threshold=0.0,
        threshold_tiebreak=0.0, fp_share=0.5, claimed_epsilon=claimed, p_value=None, sampling="test", samples_per_second=1.0,
        seconds=1.0, sampling_seconds=1.0,
    )  # fmt: skip


def _claim(eps: float | None, delta: float = 0.0, flags: frozenset = frozenset()) -> PrivacyGuarantee:
    if eps is None:
        return PrivacyGuarantee.no_privacy()
    return PrivacyGuarantee(epsilon=eps, delta=delta, relation=REPLACE_ONE, flags=flags)


def test_verdicts_in_order():
    assert verdict(_estimate(9.0, 10.0), _claim(None)) == NO_CLAIM  # a mechanism that claims nothing
    assert verdict(_estimate(9.0, 10.0), _claim(1.0, flags=frozenset({"vacuous"}))) == VACUOUS
    assert verdict(_estimate(2.0, 10.0), _claim(1.0)) == VIOLATED
    assert verdict(_estimate(0.9, 10.0), _claim(1.0)) == CONSISTENT
    assert verdict(_estimate(0.9, 1.0), _claim(1.0)) == INCONCLUSIVE  # the sample cannot exceed 1
    assert verdict(_estimate(2.0, 3.0), 1.5) == VIOLATED
    assert verdict(_estimate(1.0, 3.0, claimed=1.5)) == CONSISTENT
    assert verdict(_estimate(1.0, 3.0)) == NO_CLAIM  # no claim at all


def test_a_bound_at_a_smaller_delta_than_the_claim_is_not_compared():
    assert verdict(_estimate(2.0, 10.0, delta=1e-5), _claim(1.0, delta=1e-6)) == VIOLATED
    with pytest.raises(ValueError, match="delta"):
        verdict(_estimate(2.0, 10.0, delta=0.0), _claim(1.0, delta=1e-5))


def test_bonferroni_and_holm():
    assert bonferroni_confidence(0.95, 10) == pytest.approx(0.995)
    assert holm([0.01, 0.04, 0.03, 0.005], 0.05) == [True, False, False, True]  # 0.005<=.0125, .01<=.0167, .03>.025
    assert holm([0.001, 0.2, 0.3], 0.05) == [True, False, False]
    assert holm([], 0.05) == []
    with pytest.raises(ValueError, match="tests"):
        bonferroni_confidence(0.95, 0)
    with pytest.raises(ValueError, match="alpha"):
        holm([0.1], 1.0)
    with pytest.raises(ValueError, match="p_values"):
        holm([1.5], 0.05)


def test_evidence_grades_a_refutation_by_its_adjusted_p_value():
    assert adjusted_p_value(0.002, 14) == pytest.approx(0.028)
    assert adjusted_p_value(0.2, 14) == 1.0  # capped
    assert evidence(VIOLATED, 1e-6, 14) == "decisive"  # 1.4e-5 < 1e-4
    assert evidence(VIOLATED, 1e-5, 14) == "marginal"  # 1.4e-4: refuted at 95%, not at 99.99%
    assert evidence(CELL_LOCAL_ONLY, 1e-20, 3) == "decisive"
    assert evidence(CONSISTENT, 1e-20, 3) is None  # only a refutation has a strength
    assert evidence(VIOLATED, None, 3) is None
    with pytest.raises(ValueError, match=r"p_value must be in \[0, 1\]"):
        adjusted_p_value(1.5, 2)
    with pytest.raises(ValueError, match="tests must be an integer >= 1"):
        adjusted_p_value(0.1, 0)
