"""The value types of a results document: JSON numbers that may be non-finite, strict integers and strings within
their length limits, closed vocabularies, free-form objects. Each refuses a wrong value with a one-line message
(``auditkit.results.validation`` prefixes it with where the value sits)."""
from __future__ import annotations

import enum
import math
from pathlib import PurePosixPath
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, ConfigDict, PlainValidator, StrictBool, StrictInt, StringConstraints
from pydantic import WithJsonSchema
from pydantic_core import PydanticCustomError

from auditkit.config_bounds import MAX_NAME_CHARS
from auditkit.strict_json import NON_FINITE

__all__ = ["MAX_STRING_CHARS", "Bool", "Finite", "Int", "JsonObject", "Name", "Number", "Section", "Text",
           "figure_path", "one_of", "short"]

MAX_STRING_CHARS = 100_000
"""The longest string or key other than a name (``MAX_NAME_CHARS``: a title, label, name or id)."""


def short(value: Any) -> str:
    """``repr(value)``, cut to 40 characters."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _refuse(what: str, value: Any) -> PydanticCustomError:
    return PydanticCustomError("auditkit", "{message}", {"message": f"must be {what}, got {short(value)}"})


class Section(BaseModel):
    """A part of a results document: JSON types as written (an integer is not a number, a boolean not an integer),
    no keys beyond the schema's. A field typed ``X = None`` may be absent but not null."""

    model_config = ConfigDict(strict=True, extra="forbid")


def _number(value: Any) -> int | float:
    """A JSON number, NaN and +-Infinity included: written as the strings "NaN", "Infinity", "-Infinity" (strict
    JSON, ``dumps_strict``) or, by older files, bare."""
    if isinstance(value, str) and value in NON_FINITE:
        return NON_FINITE[value]
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise _refuse("a number", value)
    return value


def _finite(value: Any) -> int | float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _refuse("a finite number", value)
    return value


Number = Annotated[int | float, PlainValidator(_number),
                   WithJsonSchema({"anyOf": [{"type": "number"}, {"enum": list(NON_FINITE)}]})]
"""A number; NaN and +-Infinity as the strings of ``NON_FINITE``."""
Finite = Annotated[int | float, PlainValidator(_finite), WithJsonSchema({"type": "number"})]
"""A finite number: a number read from a paper's text, a confidence, a time."""
Int = StrictInt
Bool = StrictBool
Text = Annotated[str, StringConstraints(strict=True, max_length=MAX_STRING_CHARS)]
Name = Annotated[str, StringConstraints(strict=True, max_length=MAX_NAME_CHARS)]
"""A title, label, name or id: as long as a config may give one."""


def _too_long(text: str, where: str, key: bool) -> PydanticCustomError | None:
    if len(text) <= MAX_STRING_CHARS:
        return None
    return PydanticCustomError("auditkit_within", "{message}", {
        "where": where, "key": key,
        "message": f"must be at most {MAX_STRING_CHARS:,} characters, got {len(text):,}"})


def _check_strings(value: Any) -> None:
    """Every string and key of a free-form value at most ``MAX_STRING_CHARS`` long; the error names where, below
    the value (iterative: the nesting of a file read is bounded on reading, a document built in memory may share
    containers)."""
    stack, seen = [(value, "")], set()
    while stack:
        item, at = stack.pop()
        if isinstance(item, str):
            if (error := _too_long(item, at, key=False)) is not None:
                raise error
        elif id(item) in seen:
            continue
        elif isinstance(item, dict):
            seen.add(id(item))
            for key, child in item.items():
                if (error := _too_long(str(key), at, key=True)) is not None:
                    raise error
                stack.append((child, f"{at}.{key}" if str(key).isidentifier() else f"{at}[{short(key)}]"))
        elif isinstance(item, list | tuple):
            seen.add(id(item))
            stack.extend((child, f"{at}[{i}]") for i, child in enumerate(item))


def _json_object(value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise PydanticCustomError("auditkit", "{message}", {"message": f"must be an object, got {type(value).__name__}"})
    _check_strings(value)
    return value


JsonObject = Annotated[dict[str, Any], PlainValidator(_json_object), WithJsonSchema({"type": "object"})]
"""Free-form data (a config, a mechanism's parameters): kept as written, "NaN" stays a string."""


def one_of(vocabulary: type[enum.StrEnum]) -> Any:
    """A value of a closed vocabulary, read from its string."""
    allowed = ", ".join(repr(member.value) for member in vocabulary)

    def member(value: Any) -> enum.StrEnum:
        if not isinstance(value, str):
            raise _refuse("a string", value)
        try:
            return vocabulary(value)
        except ValueError:
            raise _refuse(f"one of {allowed}", value) from None

    return Annotated[vocabulary, PlainValidator(member),
                     WithJsonSchema({"type": "string", "enum": [m.value for m in vocabulary]})]


def _inside(figure: str | None) -> str | None:
    if figure is not None:
        path = PurePosixPath(figure)
        if path.is_absolute() or ".." in path.parts or "\\" in figure:
            raise _refuse("a relative path inside the results folder", figure)
    return figure


figure_path = Annotated[Text | None, AfterValidator(_inside)]
"""A reconstruction grid's path, relative to the results folder and inside it (or null)."""
