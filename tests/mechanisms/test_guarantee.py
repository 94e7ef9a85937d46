"""PrivacyGuarantee: validation and the one-line summary that never drops a warning flag."""
import pytest

from mechanisms.guarantee import PrivacyGuarantee


def test_summary_carries_the_flags():
    plain = PrivacyGuarantee(epsilon=1.0, delta=1e-5, relation="replace-one", sensitivity="l2 clip 1")
    assert plain.summary() == "(eps=1, delta=1e-05)-DP for one round, replace-one, l2 clip 1"
    flagged = PrivacyGuarantee(epsilon=1.0, delta=0.0, relation="replace-one", flags={"vacuous", "paper-compat"})
    assert flagged.summary().endswith("[flags: paper-compat, vacuous]")
    assert PrivacyGuarantee.no_privacy().summary() == "no privacy guarantee"


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(epsilon=-1.0, delta=0.0, relation="replace-one"), "epsilon must be None or a finite number >= 0"),
    (dict(epsilon=1.0, delta=1.5, relation="replace-one"), r"delta must be in \[0, 1\]"),
    (dict(epsilon=1.0, delta=0.0, relation="neighbour"), "relation must be one of"),
])
def test_invalid_claims_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PrivacyGuarantee(**kwargs)
