"""One validation layer for every value a user gives (issue 40): config keys, command-line flags, mechanism and
round-protocol parameters (``auditkit.mechanisms.Param``), attack settings and the canary stage's arguments.

A constraint is a frozen dataclass: ``allowed`` says in words what it admits, ``check(value, where)`` returns the
value converted (an int given for a float is a float) or raises :class:`ValidationError` with the one message format
``"{where} must be {allowed}, got {value!r}"``; ``parse(word, where)`` reads a command-line word first. A bool is
never a number, NaN and the infinities never a finite one. Base layer: imports nothing of auditkit, so the
mechanisms and attacks check their parameters with it too.
"""
from __future__ import annotations

import abc
import enum
import math
import numbers
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

__all__ = ["ValidationError", "Constraint", "Number", "Integer", "Choice", "Flag", "Text", "ListOf", "Optional"]


class ValidationError(ValueError):
    """A value is not allowed; the one-line message names where it was given and what is allowed."""


_REFUSED = object()  # what ``_convert`` returns for a value of the wrong kind


@dataclass(frozen=True)
class Constraint(abc.ABC):
    """What a value must be. Subclasses give ``_words`` (the allowed values in words, singular or plural),
    ``_convert`` (the value in its type, or ``_REFUSED``) and ``_admits`` (the converted value within bounds)."""

    type: ClassVar[type] = object  # the type of a checked value (float, int, str, bool; a list: tuple)

    @property
    def allowed(self) -> str:
        """The allowed values in words: "a finite number > 0", "an integer in 1..100000", "one of a, b"."""
        return self._words(plural=False)

    def check(self, value: Any, where: str) -> Any:
        """``value`` converted; ``ValidationError`` "{where} must be {allowed}, got {value!r}" when not allowed."""
        converted = self._convert(value)
        if converted is _REFUSED or not self._admits(converted):
            self.refuse(value, where)
        return converted

    def refuse(self, value: Any, where: str) -> NoReturn:
        """Raise the one message: "{where} must be {allowed}, got {value!r}"."""
        raise ValidationError(f"{where} must be {self.allowed}, got {value!r}")

    def parse(self, word: str, where: str) -> Any:
        """The value of a command-line word ("1e-5", "3", "true"), checked; a word that is no such value is refused
        with the same message."""
        return self.check(self._read(word), where)

    def _read(self, word: str) -> Any:
        return word

    @abc.abstractmethod
    def _words(self, plural: bool) -> str:
        """The allowed values in words (``plural``: as a list's elements are)."""

    def _convert(self, value: Any) -> Any:
        return value

    def _admits(self, value: Any) -> bool:
        return True


def _number_word(word: str, kind: type) -> Any:
    try:
        return kind(word)
    except ValueError:
        return word  # refused by the check, quoted as given


def _shown(bound: float) -> str:
    """A bound as written: 1048576 for 2**20 or 1048576.0, 1e-09 for 1e-9 (``g`` where that is exact)."""
    if isinstance(bound, int) or (float(bound).is_integer() and abs(bound) < 1e7):
        return str(int(bound))
    return f"{bound:g}" if float(f"{bound:g}") == bound else repr(bound)


def _bounds(low: float | None, high: float | None, low_open: bool, high_open: bool, interval: str) -> str:
    """" in [0, 1)", " > 0", " <= 5" or ""."""
    if low is not None and high is not None:
        return interval
    if low is not None:
        return f" {'>' if low_open else '>='} {_shown(low)}"
    if high is not None:
        return f" {'<' if high_open else '<='} {_shown(high)}"
    return ""


@dataclass(frozen=True)
class Number(Constraint):
    """A finite real number (an int is accepted and given as a float) within ``low`` .. ``high``, each end closed
    unless ``*_open``; ``zero``: 0 is allowed as well (a "derive it" default); ``finite=False``: the infinities
    within the bounds too (NaN never)."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    zero: bool = False
    finite: bool = True
    type: ClassVar[type] = float

    def _words(self, plural: bool) -> str:
        interval = (f" in {'(' if self.low_open else '['}{_shown(self.low)}, {_shown(self.high)}"
                    f"{')' if self.high_open else ']'}"
                    if self.low is not None and self.high is not None else "")
        bounds = _bounds(self.low, self.high, self.low_open, self.high_open, interval)
        noun = "number" if interval or not self.finite else "finite number"
        noun = f"{noun}s" if plural else f"a {noun}"
        inf = " (inf allowed)" if not self.finite and self.high is None else ""
        return f"0 or {noun}{bounds}{inf}" if self.zero else f"{noun}{bounds}{inf}"

    def _read(self, word: str) -> Any:
        return _number_word(word, float)

    def _convert(self, value: Any) -> Any:
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            return _REFUSED
        return float(value)

    def _admits(self, value: float) -> bool:
        if self.zero and value == 0:
            return True
        low_ok = self.low is None or (value > self.low if self.low_open else value >= self.low)
        high_ok = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return (math.isfinite(value) or not (self.finite or math.isnan(value))) and low_ok and high_ok


@dataclass(frozen=True)
class Integer(Constraint):
    """An integer in ``low`` .. ``high`` (inclusive; None: unbounded). ``whole_floats``: a float with an integer
    value (3.0, as TOML and JSON may give it) is accepted as that integer."""

    low: int | None = None
    high: int | None = None
    whole_floats: bool = False
    type: ClassVar[type] = int

    def _words(self, plural: bool) -> str:
        bounds = _bounds(self.low, self.high, False, False, f" in {self.low}..{self.high}")
        return f"{'integers' if plural else 'an integer'}{bounds}"

    def _read(self, word: str) -> Any:
        return _number_word(word, int)

    def _convert(self, value: Any) -> Any:
        if isinstance(value, bool):
            return _REFUSED
        if isinstance(value, numbers.Integral):
            return int(value)
        if self.whole_floats and isinstance(value, float) and value.is_integer():
            return int(value)
        return _REFUSED

    def _admits(self, value: int) -> bool:
        return (self.low is None or value >= self.low) and (self.high is None or value <= self.high)


@dataclass(frozen=True)
class Choice(Constraint):
    """One of ``choices``: words, or the members of a ``str`` enum (given as the class or as members); the value
    is handed on as the choice it equals (an enum member where the choices are members)."""

    choices: tuple[Any, ...] = ()
    type: ClassVar[type] = str

    def __post_init__(self) -> None:
        object.__setattr__(self, "choices", tuple(self.choices))

    @property
    def words(self) -> tuple[str, ...]:
        """The choices as words (an enum member's value)."""
        return tuple(c.value if isinstance(c, enum.Enum) else str(c) for c in self.choices)

    def _words(self, plural: bool) -> str:
        return f"{'values among' if plural else 'one of'} {', '.join(self.words)}"

    def _convert(self, value: Any) -> Any:
        if not isinstance(value, str):
            return _REFUSED
        return next((c for c in self.choices if c == value), _REFUSED)


@dataclass(frozen=True)
class Flag(Constraint):
    """True or false (a bool; from a command-line word: true, false, yes, no, 1, 0)."""

    type: ClassVar[type] = bool

    def _words(self, plural: bool) -> str:
        return "true or false"

    def _read(self, word: str) -> Any:
        return {"true": True, "yes": True, "1": True, "false": False, "no": False, "0": False}.get(word.lower(), word)

    def _convert(self, value: Any) -> Any:
        return value if isinstance(value, bool) else _REFUSED


@dataclass(frozen=True)
class Text(Constraint):
    """A string."""

    type: ClassVar[type] = str

    def _words(self, plural: bool) -> str:
        return "strings" if plural else "a string"

    def _convert(self, value: Any) -> Any:
        return value if isinstance(value, str) else _REFUSED


@dataclass(frozen=True)
class ListOf(Constraint):
    """A list (or tuple) of values each allowed by ``element``, handed on as a tuple; ``nonempty``: at least one."""

    element: Constraint = Text()
    nonempty: bool = False
    type: ClassVar[type] = tuple

    def _words(self, plural: bool) -> str:
        kind = "non-empty list" if self.nonempty else "list"
        return f"{kind}s of {self.element._words(True)}" if plural else f"a {kind} of {self.element._words(True)}"

    def _read(self, word: str) -> Any:
        return [self.element._read(w.strip()) for w in word.split(",")] if word.strip() else []

    def _convert(self, value: Any) -> Any:
        if not isinstance(value, (list, tuple)) or (self.nonempty and not value):
            return _REFUSED
        converted = tuple(self.element._convert(v) for v in value)
        ok = all(c is not _REFUSED and self.element._admits(c) for c in converted)
        return converted if ok else _REFUSED


@dataclass(frozen=True)
class Optional(Constraint):
    """None, or a value ``inner`` allows."""

    inner: Constraint = Text()

    @property
    def type(self) -> type:  # type: ignore[override]
        return self.inner.type

    def _words(self, plural: bool) -> str:
        return f"{self.inner._words(plural)} or None"

    def _read(self, word: str) -> Any:
        return None if word == "None" else self.inner._read(word)

    def _convert(self, value: Any) -> Any:
        return None if value is None else self.inner._convert(value)

    def _admits(self, value: Any) -> bool:
        return value is None or self.inner._admits(value)
