"""One line for the first problem pydantic found in a document: where it sits (``results.settings[1].id``) and
what is wrong, in the words a reader of the file needs."""
from __future__ import annotations

from typing import Any

from pydantic import ValidationError

from auditkit.results.types import short

__all__ = ["message"]

_TYPES = {"string_type": "a string", "int_type": "an integer", "bool_type": "a boolean"}
_CONTAINERS = {"list_type": "a list", "dict_type": "an object", "model_type": "an object",
               "model_attributes_type": "an object"}


def _where(root: str, loc: tuple[Any, ...]) -> str:
    """A location as a path: fields and identifier keys after dots, list indices and other keys in brackets."""
    where = root
    for part in loc:
        if part == "[key]":  # pydantic's marker of a key (rather than its value) in a mapping
            continue
        if isinstance(part, int):
            where += f"[{part}]"
        elif part.isidentifier():
            where += f".{part}"
        else:
            where += f"[{short(part)}]"
    return where


def message(error: ValidationError, root: str) -> str:
    """The first error of ``error``, located under ``root`` ("results" or "reproduction")."""
    first = error.errors(include_url=False)[0]
    kind, value, loc = first["type"], first.get("input"), tuple(first["loc"])
    if kind == "value_error" and not loc:  # a document-wide check: its message names where
        return str(first["ctx"]["error"])
    where = _where(root, tuple("schema" if part == "schema_" else part for part in loc))
    if kind == "missing":
        return f"{where} is missing"
    if kind in _TYPES:
        return f"{where} must be {_TYPES[kind]}, got {short(value)}"
    if kind in _CONTAINERS:
        return f"{where} must be {_CONTAINERS[kind]}, got {type(value).__name__}"
    if kind == "string_too_long":
        return f"{where} must be at most {first['ctx']['max_length']:,} characters, got {len(value):,}"
    if kind == "auditkit_within":  # a string deep in a free-form value
        within = f"{where}{first['ctx']['where']}"
        return f"{'a key of ' if first['ctx']['key'] else ''}{within} {first['msg']}"
    if kind == "extra_forbidden":
        return f"{where} is not a key of this schema"
    if kind == "value_error":
        return f"{where}: {first['ctx']['error']}"
    return f"{where} {first['msg']}"
