"""The one validation layer (``auditkit.validation``, issue 40): each constraint converts what it allows, refuses the
rest in the one message "{where} must be {allowed}, got {value!r}", and the config, the mechanisms' parameters, the
attack settings and the command line all refuse a bad value with it."""
from __future__ import annotations

import enum
import math

import numpy as np
import pytest

from auditkit import mechanisms
from auditkit.config import ConfigError, from_dict
from auditkit.mechanisms.base import choice, int_range, open_unit_interval, positive_float, zero_or_above
from auditkit.validation import (
    Choice, Constraint, Flag, Integer, ListOf, Number, Optional, Text, ValidationError)


class Colour(enum.StrEnum):
    RED = "red"
    BLUE = "blue"


def refused(constraint: Constraint, value, where: str = "key") -> str:
    with pytest.raises(ValidationError) as err:
        constraint.check(value, where)
    assert isinstance(err.value, ValueError)
    return str(err.value)


@pytest.mark.parametrize(("constraint", "value", "message"), [
    (Number(), True, "key must be a finite number, got True"),
    (Number(), "1.0", "key must be a finite number, got '1.0'"),
    (Number(), math.nan, "key must be a finite number, got nan"),
    (Number(low=0), math.inf, "key must be a finite number >= 0, got inf"),
    (Number(0, 1, low_open=True, high_open=True), 0, "key must be a number in (0, 1), got 0"),
    (Number(0, 1, low_open=True, high_open=True), 1.0, "key must be a number in (0, 1), got 1.0"),
    (Number(0, 1, high_open=True), -1e-12, "key must be a number in [0, 1), got -1e-12"),
    (Number(low=1, low_open=True, zero=True), 0.5, "key must be 0 or a finite number > 1, got 0.5"),
    (Number(low=0, finite=False), math.nan, "key must be a number >= 0 (inf allowed), got nan"),
    (Number(low=0, finite=False), -math.inf, "key must be a number >= 0 (inf allowed), got -inf"),
    (Number(1e-9, 1e9), 5e-324, "key must be a number in [1e-09, 1e+09], got 5e-324"),
    (Number(0, 2**20, low_open=True), 2.0**21, "key must be a number in (0, 1048576], got 2097152.0"),
    (Integer(), False, "key must be an integer, got False"),
    (Integer(1, 10), 3.0, "key must be an integer in 1..10, got 3.0"),
    (Integer(1, 10, whole_floats=True), 3.5, "key must be an integer in 1..10, got 3.5"),
    (Integer(1, 10), 11, "key must be an integer in 1..10, got 11"),
    (Integer(low=1), 0, "key must be an integer >= 1, got 0"),
    (Choice(("a", "b")), "c", "key must be one of a, b, got 'c'"),
    (Choice(("a", "b")), 1, "key must be one of a, b, got 1"),
    (Choice(Colour), "green", "key must be one of red, blue, got 'green'"),
    (Flag(), 1, "key must be true or false, got 1"),
    (Flag(), "true", "key must be true or false, got 'true'"),
    (Text(), 3, "key must be a string, got 3"),
    (ListOf(Integer(1, 5)), [1, 9], "key must be a list of integers in 1..5, got [1, 9]"),
    (ListOf(Integer(1, 5)), 3, "key must be a list of integers in 1..5, got 3"),
    (ListOf(Number(), nonempty=True), [], "key must be a non-empty list of finite numbers, got []"),
    (Optional(Number(low=0, low_open=True)), -1.0, "key must be a finite number > 0 or None, got -1.0"),
])
def test_a_refused_value_is_named_with_what_is_allowed_in_one_line(constraint, value, message):
    assert refused(constraint, value) == message


@pytest.mark.parametrize(("constraint", "value", "expected"), [
    (Number(), 3, 3.0),  # an int is accepted for a float, and handed on as one
    (Number(), np.float32(0.5), 0.5),
    (Number(0, 1), 0, 0.0),  # closed ends are inside
    (Number(0, 1), 1, 1.0),
    (Number(0, 1, low_open=True), 1.0, 1.0),
    (Number(low=1, low_open=True, zero=True), 0, 0.0),
    (Number(1e-9, 1e9), 1e-9, 1e-9),
    (Number(low=0, finite=False), math.inf, math.inf),  # where the infinities are asked for
    (Integer(1, 10), 1, 1),
    (Integer(1, 10), 10, 10),
    (Integer(1, 10), np.int64(4), 4),
    (Integer(1, 10, whole_floats=True), 3.0, 3),  # TOML's 3.0 where the config took it for 3
    (Choice(("a", "b")), "b", "b"),
    (Choice(Colour), "red", Colour.RED),  # a str enum's member, given as its word
    (Choice(Colour), Colour.BLUE, Colour.BLUE),
    (Flag(), False, False),
    (ListOf(Integer(1, 5)), [1, 5], (1, 5)),
    (ListOf(Integer(1, 5, whole_floats=True)), (2.0,), (2,)),
    (Optional(Integer()), None, None),
])
def test_an_allowed_value_is_handed_on_converted(constraint, value, expected):
    converted = constraint.check(value, "key")
    assert converted == expected and type(converted) is type(expected)


def test_types_and_words():
    assert (Number().type, Integer().type, Choice(("a",)).type, Flag().type, ListOf().type) == (
        float, int, str, bool, tuple)
    assert Optional(Integer()).type is int
    assert Choice(Colour).words == ("red", "blue")
    assert Integer(2, 100_000).allowed == "an integer in 2..100000"
    assert Number(low=0, low_open=True).allowed == "a finite number > 0"


@pytest.mark.parametrize(("constraint", "word", "expected"), [
    (Number(low=0, low_open=True), "1e-5", 1e-5),
    (Integer(1, 10), "3", 3),
    (Flag(), "false", False),
    (Choice(("x", "y")), "y", "y"),
    (ListOf(Integer(1, 9)), "1, 2", (1, 2)),
    (Optional(Number()), "None", None),
])
def test_a_command_line_word_is_parsed_then_checked(constraint, word, expected):
    assert constraint.parse(word, "--key") == expected


@pytest.mark.parametrize(("constraint", "word", "message"), [
    (Integer(1, 10), "abc", "--key must be an integer in 1..10, got 'abc'"),
    (Integer(1, 10), "3.0", "--key must be an integer in 1..10, got '3.0'"),
    (Number(low=0, low_open=True), "nan", "--key must be a finite number > 0, got nan"),
    (Number(low=0, low_open=True), "-1", "--key must be a finite number > 0, got -1.0"),
    (Flag(), "maybe", "--key must be true or false, got 'maybe'"),
])
def test_a_bad_command_line_word_gets_the_same_message(constraint, word, message):
    with pytest.raises(ValidationError, match=rf"^{message.replace('(', '[(]').replace(')', '[)]')}$"):
        constraint.parse(word, "--key")


def test_a_constraint_is_a_frozen_value():
    assert Number(0, 1) == Number(0, 1) and hash(Choice(("a", "b"))) == hash(Choice(["a", "b"]))
    with pytest.raises(AttributeError):
        Number().low = 1  # type: ignore[misc]


def test_the_param_factories_plugins_use_keep_their_shape_and_hold_a_constraint():
    assert positive_float("s", 1.0, "h").allowed == "a finite number > 0"
    assert open_unit_interval("d", 1e-5, "h").constraint == Number(0, 1, low_open=True, high_open=True)
    assert int_range("n", 1, 8, 2, "h").type is int and int_range("n", 1, 8, 2, "h").allowed == "an integer in 1..8"
    assert choice("c", ("a", "b"), "a", "h").choices == ("a", "b")
    assert zero_or_above("z", 1.0, "h").default == 0.0
    spec = positive_float("sigma", 1.0, "noise")
    assert spec.validate(2) == 2.0 and spec.parse("0.5") == 0.5
    with pytest.raises(ValueError, match=r"^sigma must be a finite number > 0, got True$"):
        spec.validate(True)


def test_every_place_refuses_with_the_one_format():
    """A mechanism parameter, a config key and an attack setting alike."""
    with pytest.raises(ValueError, match=r"^sigma must be a finite number > 0, got nan$"):
        mechanisms.create("gaussian", sigma=math.nan)
    with pytest.raises(ConfigError, match=r"^training\.lr must be a finite number > 0, got 0\.0$"):
        from_dict({"training": {"lr": 0}})
    with pytest.raises(ConfigError, match=r"^training\.momentum must be a number in \[0, 1\), got 1\.0$"):
        from_dict({"training": {"momentum": 1}})
    with pytest.raises(ConfigError, match=r"^training\.rounds must be an integer, got True$"):
        from_dict({"training": {"rounds": True}})
    assert from_dict({"training": {"rounds": 3.0, "checkpoints": [1]}}).training.rounds == 3
    with pytest.raises(ConfigError, match=r"^data\.download must be true or false, got 'yes'$"):
        from_dict({"data": {"download": "yes"}})
    from auditkit.attacks.gradient_inversion import SETTINGS, preset_settings

    with pytest.raises(ValueError, match=r"^attack must be one of dlg, idlg, inverting_gradients, analytic, got 'x'$"):
        preset_settings("x")
    assert refused(SETTINGS["restarts"], 2.0, "restarts") == "restarts must be an integer >= 1, got 2.0"
