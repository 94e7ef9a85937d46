"""PrivacyGuarantee: validation and the one-line summary that never drops a warning flag."""
import pytest

from mechanisms.guarantee import PrivacyGuarantee
from mechanisms.guarantee import REPLACE_ONE


def test_summary_carries_the_flags():
    plain = PrivacyGuarantee(epsilon=1.0, delta=1e-5, relation=REPLACE_ONE, sensitivity="l2 clip 1")
    assert plain.summary() == "(eps=1, delta=1e-05)-DP for one round, REPLACE_ONE, l2 clip 1"
    flagged = PrivacyGuarantee(epsilon=1.0, delta=0.0, relation=REPLACE_ONE, flags={"vacuous", "paper-compat"})
    assert flagged.summary().endswith("[flags: paper-compat, vacuous]")
    assert PrivacyGuarantee.no_privacy().summary() == "no privacy guarantee"


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(epsilon=-1.0, delta=0.0, relation=REPLACE_ONE), "epsilon must be None or a finite number >= 0"),
    (dict(epsilon=1.0, delta=1.5, relation=REPLACE_ONE), r"delta must be in \[0, 1\]"),
    (dict(epsilon=1.0, delta=0.0, relation="neighbour"), "relation must be a dp_accounting.NeighboringRelation or None"),
])
def test_invalid_claims_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PrivacyGuarantee(**kwargs)
