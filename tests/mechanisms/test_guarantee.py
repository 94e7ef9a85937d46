"""PrivacyGuarantee: validation, the one-line summary that never drops a warning flag, relations named by strings
and the norm a claim's sensitivity names."""
import pytest

from auditkit.mechanisms.guarantee import (
    REPLACE_ONE,
    NeighboringRelation,
    PrivacyGuarantee,
    parse_relation,
    stated_norm,
)


def test_summary_carries_the_flags():
    plain = PrivacyGuarantee(epsilon=1.0, delta=1e-5, relation=REPLACE_ONE, sensitivity="l2 clip 1")
    assert plain.summary() == "(eps=1, delta=1e-05)-DP for one round, REPLACE_ONE, l2 clip 1"
    flagged = PrivacyGuarantee(epsilon=1.0, delta=0.0, relation=REPLACE_ONE, flags={"vacuous", "paper-compat"})
    assert flagged.summary().endswith("[flags: paper-compat, vacuous]")
    assert PrivacyGuarantee.no_privacy().summary() == "no privacy guarantee"


@pytest.mark.parametrize(("kwargs", "message"), [
    (dict(epsilon=-1.0, delta=0.0, relation=REPLACE_ONE), "epsilon must be None or a finite number >= 0"),
    (dict(epsilon=1.0, delta=1.5, relation=REPLACE_ONE), r"delta must be in \[0, 1\]"),
    (dict(epsilon=1.0, delta=0.0, relation="neighbour"),
     "relation must be a dp_accounting.NeighboringRelation or one of 'replace-one', 'add-or-remove-one'"),
    (dict(epsilon=1.0, delta=0.0, relation=1), "relation must be a dp_accounting.NeighboringRelation, one of its names "
                                               "or None, got 1"),
])
def test_invalid_claims_are_refused(kwargs, message):
    with pytest.raises(ValueError, match=message):
        PrivacyGuarantee(**kwargs)


@pytest.mark.parametrize(("word", "relation"), [
    ("replace-one", NeighboringRelation.REPLACE_ONE), ("REPLACE_ONE", NeighboringRelation.REPLACE_ONE),
    ("Replace_One", NeighboringRelation.REPLACE_ONE), ("add-remove", NeighboringRelation.ADD_OR_REMOVE_ONE),
    ("add-or-remove-one", NeighboringRelation.ADD_OR_REMOVE_ONE),
    ("replace-special", NeighboringRelation.REPLACE_SPECIAL),
])
def test_a_relation_named_by_a_string_is_the_relation_it_names(word, relation):
    """As plugins written before relations were objects name them: the claim holds the dp_accounting member."""
    assert parse_relation(word) is relation
    claim = PrivacyGuarantee(epsilon=1.0, delta=0.0, relation=word)
    assert claim.relation is relation and claim.to_dict()["relation"] == relation.name


def test_an_unknown_relation_word_is_refused_in_one_line_naming_the_words_allowed():
    with pytest.raises(ValueError) as err:
        PrivacyGuarantee(epsilon=1.0, delta=0.0, relation="bogus")
    assert str(err.value) == ("relation must be a dp_accounting.NeighboringRelation or one of 'replace-one', "
                              "'add-or-remove-one', 'add-remove', 'replace-special' (any case), got 'bogus'")


@pytest.mark.parametrize(("sensitivity", "norm"), [
    ("l1 clip 0.5", "l1"), ("l2 clip 1.0", "l2"), ("L1-norm <= 2", "l1"), ("scaled sub-vector shift <= 2 (l2)", "l2"),
    ("l-infinity clip 1: each coordinate clamped to [-1, 1]", "linf"), ("l_inf 3", "linf"), ("ℓ2 ball", "l2"),
    ("rho = 20 per coordinate", None), ("", None), ("cell 2 of level 1", None), ("l1 and l2", None),
])
def test_the_norm_a_sensitivity_names(sensitivity, norm):
    assert stated_norm(sensitivity) == norm
