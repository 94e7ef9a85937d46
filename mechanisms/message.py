"""Uplink messages: what a client actually sends, with an explicit little-endian binary layout.

Every message starts with a one-byte tag naming its class, so bytes of one kind are never parsed as
another. ``to_bytes`` is the wire format and ``num_bits`` its exact size; ``from_bytes`` validates the
input completely (tag, lengths, trailing bytes) and raises ``MessageDecodeError`` on anything malformed;
``Message.from_bytes`` parses any message, dispatching on the tag.

``MessageDecodeError`` (a ``ValueError``) is the one error of a message that cannot be read: bytes that do
not parse, or a message that does not decode under the decoder's seed and configuration (the decoder of a
seeded mechanism cannot tell a wrong seed from corruption). Its text is one line, ``DECODE_ERROR`` and the
specific reason in parentheses. Every ``from_bytes`` of a ``Message`` subclass, and every ``decode`` of a
``auditkit.mechanisms.base.Mechanism`` subclass, is wrapped by ``reports_decode_errors`` when the class is created,
so the ValueError, IndexError, OverflowError or struct.error raised inside (by the parser, NumPy or the
entropy coder) reaches the caller as a ``MessageDecodeError``.
"""

from __future__ import annotations

import abc
import functools
import struct
from collections.abc import Callable
from typing import ClassVar, ParamSpec, Self, TypeVar

import numpy as np
import torch

__all__ = ["Message", "FloatMessage", "MAX_LENGTH", "DECODE_ERROR", "MessageDecodeError", "reports_decode_errors"]

MAX_LENGTH = 2**32 - 1  # coordinates per message: lengths are uint32 fields
DECODE_ERROR = "message does not decode under this seed, or is corrupted"
# What parsing or decoding malformed data raises (constriction reports bad rANS words as ValueError).
_DECODE_FAILURES = (ValueError, IndexError, OverflowError, struct.error)

_P = ParamSpec("_P")
_R = TypeVar("_R")


class MessageDecodeError(ValueError):
    """A message that does not parse, or does not decode under this seed and configuration.

    ``str(err)`` is one line: ``DECODE_ERROR`` followed by ``reason`` (whitespace collapsed) in parentheses.
    """

    def __init__(self, reason: object) -> None:
        self.reason = " ".join(str(reason).split()) or "no details"
        super().__init__(f"{DECODE_ERROR} ({self.reason})")

    def __reduce__(self) -> tuple:
        return type(self), (self.reason,)


def reports_decode_errors(function: Callable[_P, _R]) -> Callable[_P, _R]:
    """``function`` with the ValueError, IndexError, OverflowError and struct.error it raises turned into
    ``MessageDecodeError`` (whose reason is the original text); a ``MessageDecodeError`` passes unchanged."""
    if getattr(function, "_reports_decode_errors", False):
        return function

    @functools.wraps(function)
    def wrapper(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        try:
            return function(*args, **kwargs)
        except MessageDecodeError:
            raise
        except _DECODE_FAILURES as err:
            raise MessageDecodeError(str(err) or type(err).__name__) from err

    wrapper._reports_decode_errors = True  # type: ignore[attr-defined]
    return wrapper


class Message(abc.ABC):
    """Base of all messages. Subclasses set a unique ``TAG`` and implement the (de)serialisation."""

    TAG: ClassVar[int]
    _classes_by_tag: ClassVar[dict[int, type[Message]]] = {}
    _wire: bytes | None = None  # cached serialisation: messages are immutable once built

    def __init_subclass__(cls, **kwargs: object) -> None:
        super().__init_subclass__(**kwargs)
        taken = Message._classes_by_tag.get(cls.TAG)
        if taken is not None:
            raise TypeError(f"message tag {cls.TAG} of {cls.__name__} is already used by {taken.__name__}")
        Message._classes_by_tag[cls.TAG] = cls
        parse = cls.__dict__.get("from_bytes")
        if isinstance(parse, classmethod):  # every parse error surfaces as a MessageDecodeError
            cls.from_bytes = classmethod(reports_decode_errors(parse.__func__))

    def to_bytes(self) -> bytes:
        """The serialised message (computed once, then cached)."""
        if self._wire is None:
            self._wire = self._serialize()
        return self._wire

    @property
    def num_bits(self) -> int:
        """Exact size of the serialised message in bits (always a multiple of 8)."""
        return 8 * len(self.to_bytes())

    @property
    def side_value(self) -> float | None:
        """A scalar the message carries in clear beside its payload (JoPEQ's zeta, CEPAM 000's ||x||), which the
        adaptive side-channel tests read; None when it carries none."""
        return None

    @abc.abstractmethod
    def _serialize(self) -> bytes: ...

    @classmethod
    @abc.abstractmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Parse and validate ``data``; ``MessageDecodeError`` when it is truncated or malformed.

        Subclasses implement it for their own tag; ``Message.from_bytes`` parses a message of any class,
        chosen by its tag byte.
        """
        if cls is not Message:
            raise TypeError(f"{cls.__name__} does not implement from_bytes (each message class parses its own tag)")
        if not data:
            raise MessageDecodeError("empty message")
        parser = Message._classes_by_tag.get(data[0])
        if parser is None:
            raise MessageDecodeError(f"unknown message tag {data[0]}")
        return parser.from_bytes(data)

    @classmethod
    def _check_tag(cls, data: bytes, header: struct.Struct) -> tuple:
        """Unpack the fixed header after checking the length and the tag."""
        if len(data) < header.size:
            raise ValueError(f"{cls.__name__}: truncated header ({len(data)} of {header.size} bytes)")
        fields = header.unpack_from(data)
        if fields[0] != cls.TAG:
            raise ValueError(f"{cls.__name__}: wrong message tag {fields[0]} (expected {cls.TAG})")
        return fields

    def __eq__(self, other: object) -> bool:
        return type(self) is type(other) and self.to_bytes() == other.to_bytes()

    def __hash__(self) -> int:
        return hash((type(self), self.to_bytes()))


class FloatMessage(Message):
    """Raw float32 values.

    Layout: tag (uint8 = 1) | length n (uint32) | n values (float32), little-endian; 5 + 4n bytes.
    """

    TAG = 1
    _HEADER = struct.Struct("<BI")

    def __init__(self, values: np.ndarray) -> None:
        values = np.asarray(values)
        if values.ndim != 1 or values.dtype != np.float32:
            raise ValueError(f"FloatMessage needs a 1-D float32 array, got {values.dtype} with shape {values.shape}")
        if values.size > MAX_LENGTH:
            raise ValueError(f"FloatMessage holds at most {MAX_LENGTH} values, got {values.size}")
        self.values = values

    def __len__(self) -> int:
        return self.values.size

    def to_tensor(self) -> torch.Tensor:
        """The values as a CPU float32 tensor (a copy: the message stays immutable)."""
        return torch.from_numpy(self.values.copy())

    def _serialize(self) -> bytes:
        return self._HEADER.pack(self.TAG, self.values.size) + self.values.astype("<f4").tobytes()

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, n = cls._check_tag(data, cls._HEADER)
        expected = cls._HEADER.size + 4 * n
        if len(data) != expected:
            raise ValueError(f"FloatMessage: expected {expected} bytes for {n} values, got {len(data)}")
        values = np.frombuffer(data, dtype="<f4", offset=cls._HEADER.size).astype(np.float32)
        message = cls(values)
        message._wire = bytes(data)
        return message
