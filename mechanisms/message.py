"""Uplink messages: what a client actually sends, with an explicit little-endian binary layout.

Every message starts with a one-byte tag naming its class, so bytes of one kind are never parsed as
another. ``to_bytes`` is the wire format and ``num_bits`` its exact size; ``from_bytes`` validates the
input completely (tag, lengths, trailing bytes) and raises ``ValueError`` on anything malformed.
"""

from __future__ import annotations

import abc
import struct
from typing import ClassVar, Self

import numpy as np
import torch

__all__ = ["Message", "FloatMessage", "MAX_LENGTH"]

MAX_LENGTH = 2**32 - 1  # coordinates per message: lengths are uint32 fields


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

    def to_bytes(self) -> bytes:
        """The serialised message (computed once, then cached)."""
        if self._wire is None:
            self._wire = self._serialize()
        return self._wire

    @property
    def num_bits(self) -> int:
        """Exact size of the serialised message in bits (always a multiple of 8)."""
        return 8 * len(self.to_bytes())

    @abc.abstractmethod
    def _serialize(self) -> bytes: ...

    @classmethod
    @abc.abstractmethod
    def from_bytes(cls, data: bytes) -> Self:
        """Parse and validate ``data``; ``ValueError`` when it is truncated or malformed."""

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
