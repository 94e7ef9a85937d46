"""One line per problem, naming where it sits (auditkit.results.errors, through auditkit.results.types)."""
import math

import pytest
from pydantic import ValidationError

from auditkit.results.errors import message
from auditkit.results.types import Finite, Int, JsonObject, Number, Section, one_of
from auditkit.attacks.verdicts import Verdict


class _Part(Section):
    count: Int
    value: Number
    finite: Finite = None
    verdict: one_of(Verdict) = None
    free: JsonObject = None
    values: dict[str, Number] = None


def _error(**fields):
    with pytest.raises(ValidationError) as error:
        _Part.model_validate({"count": 1, "value": 0.5, **fields})
    return message(error.value, "part")


@pytest.mark.parametrize("fields, expected", [
    ({"count": True}, "part.count must be an integer, got True"),
    ({"count": 1.0}, "part.count must be an integer, got 1.0"),
    ({"value": "1"}, "part.value must be a number, got '1'"),
    ({"value": None}, "part.value must be a number, got None"),
    ({"finite": math.inf}, "part.finite must be a finite number, got inf"),
    ({"finite": "NaN"}, "part.finite must be a finite number, got 'NaN'"),
    ({"verdict": "maybe"}, "part.verdict must be one of 'consistent', 'violated', 'vacuous claim', 'no claim', "
                           "'inconclusive', 'claim holds only cell-locally', got 'maybe'"),
    ({"free": {"a": {"b": ["x" * 100_001]}}}, "part.free.a.b[0] must be at most 100,000 characters, got 100,001"),
    ({"free": {"k" * 100_001: 1}}, "a key of part.free must be at most 100,000 characters, got 100,001"),
    ({"values": {"not an identifier": "x"}}, "part.values['not an identifier'] must be a number, got 'x'"),
    ({"extra": 1}, "part.extra is not a key of this schema"),
])
def test_each_problem_is_one_line_naming_where(fields, expected):
    assert _error(**fields) == expected


def test_non_finite_numbers_are_read_from_their_strings_and_ints_stay_ints():
    part = _Part.model_validate({"count": 3, "value": "-Infinity", "values": {"a": "NaN", "b": 2}})
    assert part.value == -math.inf and math.isnan(part.values["a"]) and type(part.values["b"]) is int
    assert _Part.model_validate({"count": 1, "value": 0.5, "free": {"x": "NaN"}}).free == {"x": "NaN"}
