"""JSON in and out of auditkit's files: ``dumps_strict`` writes strict JSON (RFC 8259 has no NaN or Infinity), and
``read_bounded`` reads a file that is not ours to trust (a results.json handed to ``auditkit report``, a Flower app's
recording.json) within a size and a nesting limit, so that a hostile file is one error line rather than a traceback
(Python's parser raises RecursionError on deep nesting), minutes of parsing or a MemoryError.
"""
from __future__ import annotations

import errno
import io
import json
import math
import os
import stat
import sys
from pathlib import Path
from typing import Any

__all__ = ["MAX_BYTES", "MAX_DEPTH", "NON_FINITE", "decode_non_finite", "dumps_strict", "loads_bounded", "read_bounded"]

MAX_BYTES = 64 * 2**20
"""The largest JSON file read (64 MiB): an audit's results.json of 100 settings of 1,000 rounds is about 15 MiB."""
MAX_DEPTH = 100
"""The deepest nesting of objects and arrays read: auditkit's files nest about 10 deep."""

# How a non-finite number is written: the proto3 JSON mapping's strings for float infinities and NaN.
NON_FINITE = {"Infinity": math.inf, "-Infinity": -math.inf, "NaN": math.nan}


def _non_finite_name(value: Any) -> str | None:
    """The string a non-finite float (Python or NumPy) is written as; None for any other value."""
    numpy = sys.modules.get("numpy")  # without NumPy loaded there is no NumPy float to meet
    if not (isinstance(value, float) or (numpy is not None and isinstance(value, numpy.floating))):
        return None
    if math.isnan(value):
        return "NaN"
    return None if math.isfinite(value) else ("Infinity" if value > 0 else "-Infinity")


def _encode(value: Any) -> Any:
    name = _non_finite_name(value)
    if name is not None:
        return name
    if isinstance(value, dict):
        return {(_non_finite_name(key) or key): _encode(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_encode(item) for item in value]
    return value


def dumps_strict(obj: Any, **kwargs: Any) -> str:
    """``obj`` as strict JSON (RFC 8259: no NaN or Infinity): every non-finite float (Python or NumPy) in its
    dicts, lists and tuples is written as the string "NaN", "Infinity" or "-Infinity" (the proto3 JSON mapping of
    float NaN and infinities); ``kwargs`` go to ``json.dumps``, which runs with ``allow_nan=False`` so a non-finite
    number missed here raises instead of writing invalid JSON. ``decode_non_finite`` reads them back."""
    return json.dumps(_encode(obj), allow_nan=False, **kwargs)


def _deeper_than(value: Any, limit: int) -> bool:
    """Whether objects and arrays nest deeper than ``limit`` in ``value`` (a walk without recursion)."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        children = item.values() if isinstance(item, dict) else item if isinstance(item, list) else None
        if children is None:
            continue
        if depth > limit:
            return True
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    return False


def read_bounded(path: str | Path, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``path``, or ValueError with one line that does not name the file (the caller does):
    "no such file", "a symbolic link (...)", "not a plain file", "not readable (...)", "larger than the 64 MiB limit
    (N bytes)", "not valid JSON (...)", "nested deeper than the 100-level limit". The file itself is opened without
    following a link (``O_NOFOLLOW``) or waiting on a FIFO (``O_NONBLOCK``); the size is checked before a byte is
    parsed, and at most ``max_bytes + 1`` bytes are read (a device or a growing file)."""
    limit = f"the {max_bytes / 2**20:g} MiB limit"
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except FileNotFoundError:
        raise ValueError("no such file") from None
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise ValueError("a symbolic link (auditkit never follows a link to a file it reads)") from None
        raise ValueError(f"not readable ({type(err).__name__})") from None
    with io.FileIO(fd, "r") as file:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise ValueError("not a plain file")
        if info.st_size > max_bytes:
            raise ValueError(f"larger than {limit} ({info.st_size:,} bytes)")
        try:
            data = file.read(max_bytes + 1)
        except OSError as err:
            raise ValueError(f"not readable ({type(err).__name__})") from None
    return loads_bounded(data, max_bytes=max_bytes, max_depth=max_depth)


def loads_bounded(data: bytes, *, max_bytes: int = MAX_BYTES, max_depth: int = MAX_DEPTH) -> Any:
    """The JSON value in ``data`` (bytes read from a file that is not ours to trust), or ValueError with one line
    as ``read_bounded``'s."""
    if len(data) > max_bytes:
        raise ValueError(f"larger than the {max_bytes / 2**20:g} MiB limit (more than {max_bytes:,} bytes)")
    try:
        value = json.loads(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise ValueError("not valid JSON (not UTF-8 text)") from None
    except json.JSONDecodeError as err:
        raise ValueError(f"not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})") from None
    except RecursionError:
        raise ValueError(f"nested deeper than the {max_depth}-level limit") from None
    except ValueError as err:  # e.g. an integer of more digits than Python converts
        raise ValueError(f"not valid JSON ({str(err).splitlines()[0] if str(err) else type(err).__name__})") from None
    if _deeper_than(value, max_depth):
        raise ValueError(f"nested deeper than the {max_depth}-level limit")
    return value


def decode_non_finite(value: Any) -> Any:
    """Parsed JSON with every string of ``NON_FINITE`` turned back into its float (a new object), for auditkit's
    internal files, which carry no schema; a results document decodes them only where its schema has a number
    (``auditkit.results.types.Number``)."""
    if isinstance(value, str):
        return NON_FINITE.get(value, value)
    if isinstance(value, dict):
        return {key: decode_non_finite(item) for key, item in value.items()}
    if isinstance(value, list):
        return [decode_non_finite(item) for item in value]
    return value
