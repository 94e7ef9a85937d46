"""Bit-level coding for messages: Elias-gamma codes, fixed-width packing, entropy-coded symbol streams.

``encode_categorical`` writes a sequence of symbols from ``{0, ..., alphabet_size - 1}`` in whichever
of two formats is smaller, so a stream is never longer than fixed-width coding plus one byte:

* fixed width: byte ``w`` (1..32), then every symbol in ``w = ceil(log2 alphabet_size)`` bits, MSB first,
  zero-padded to a whole byte;
* entropy coded: byte 0 | ``lo`` (uint32) | ``span`` (uint32) | ``words`` (uint32) | frequency table |
  ``words`` rANS words (uint32, little-endian). Only the used symbol range ``lo .. lo + span - 1`` is
  described: the table holds ``count + 1`` for each symbol of that range as Elias-gamma codes (see
  ``elias_gamma_encode``), zero-padded to a whole byte. The symbols are coded with ``constriction``'s
  rANS coder (Duda 2009; stack ``AnsCoder``, 32-bit words, 24-bit probabilities) under the empirical
  distribution ``count / n``, which both sides rebuild from the table, so the payload is within a few
  words of ``n * H_empirical`` bits.

Neither format stores the number of symbols: the caller knows it (``categorical_count_range`` bounds it from
a stream's framing alone, for containers that check their framing before they can decode). Symbols outside
``[0, alphabet_size)`` are refused; a container whose values may exceed an alphabet of 2^32 reserves an
escape symbol and sends those values beside the stream (``auditkit.mechanisms.rsuq_coding``).
"""

from __future__ import annotations

import struct

import constriction
import numpy as np

__all__ = [
    "elias_gamma_encode",
    "elias_gamma_decode",
    "pack_fixed",
    "unpack_fixed",
    "encode_categorical",
    "decode_categorical",
    "categorical_count_range",
]

_POWERS_OF_TWO = np.uint64(1) << np.arange(64, dtype=np.uint64)
_MAX_GAMMA_EXPONENT = 62  # values below 2**63 keep every intermediate inside int64/uint64
_ANS_HEADER = struct.Struct("<BIII")  # mode 0, lo, span, number of rANS words
_MAX_FIXED_WIDTH = 32


def elias_gamma_encode(values: np.ndarray) -> np.ndarray:
    """Elias-gamma codes (Elias 1975) of positive integers as a 0/1 ``uint8`` bit array.

    A value v with N = floor(log2 v) costs 2N + 1 bits: N zeros and a one (N in unary), then the N bits
    of v below its leading one. The unary parts of all values come first and the remainders after
    them: the same bits as the interleaved textbook layout, reordered so both directions vectorise.
    """
    v = np.asarray(values)
    if v.ndim != 1 or (v.size and (v.min() < 1 or v.max() >= 2**63)):
        raise ValueError("Elias-gamma coding needs a 1-D array of integers in [1, 2**63)")
    v = v.astype(np.uint64)
    n = np.searchsorted(_POWERS_OF_TWO, v, side="right") - 1  # floor(log2 v), exactly
    unary = np.zeros(int((n + 1).sum()), dtype=np.uint8)
    unary[np.cumsum(n + 1) - 1] = 1
    width = int(n.max()) if v.size else 0
    j = np.arange(width)
    shifts = np.clip(n[:, None] - 1 - j, 0, None).astype(np.uint64)
    bits = ((v[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)
    return np.concatenate([unary, bits[j < n[:, None]]])


def elias_gamma_decode(bits: np.ndarray, count: int) -> tuple[np.ndarray, int]:
    """Decode ``count`` values written by ``elias_gamma_encode`` from the start of ``bits``.

    Returns the values (uint64) and the number of bits they occupied; trailing bits are ignored.
    """
    ends = np.flatnonzero(bits)[:count]  # the one closing each unary part
    if ends.size < count:
        raise ValueError("Elias-gamma stream truncated")
    if count == 0:
        return np.zeros(0, dtype=np.uint64), 0
    n = np.diff(ends, prepend=-1) - 1
    if n.max() > _MAX_GAMMA_EXPONENT:
        raise ValueError("Elias-gamma value out of range (corrupt stream)")
    start = int(ends[-1]) + 1
    total = start + int(n.sum())
    if total > bits.size:
        raise ValueError("Elias-gamma stream truncated")
    j = np.arange(int(n.max()))
    inside = j < n[:, None]
    # Row-major order of the True cells of ``inside`` is exactly the order the remainders were written in.
    digits = np.zeros(inside.shape, dtype=np.uint64)
    digits[inside] = bits[start:total]
    shifts = np.clip(n[:, None] - 1 - j, 0, None).astype(np.uint64)
    values = (np.uint64(1) << n.astype(np.uint64)) + (digits << shifts).sum(axis=1, dtype=np.uint64)
    return values, total


def pack_fixed(values: np.ndarray, width: int) -> bytes:
    """Non-negative integers below ``2**width`` in ``width`` bits each, MSB first, zero-padded."""
    v = np.asarray(values).astype(np.uint64)
    shifts = np.arange(width - 1, -1, -1, dtype=np.uint64)
    return np.packbits(((v[:, None] >> shifts) & np.uint64(1)).astype(np.uint8)).tobytes()


def unpack_fixed(data: bytes, count: int, width: int) -> np.ndarray:
    """Inverse of ``pack_fixed``: ``count`` values of ``width`` bits (int64). ``data`` must fit exactly,
    its padding zero."""
    expected = (count * width + 7) // 8
    if len(data) != expected:
        raise ValueError(f"fixed-width stream: expected {expected} bytes for {count} x {width} bits, got {len(data)}")
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    if bits[count * width :].any():
        raise ValueError("fixed-width stream: non-zero padding after the last value")
    bits = bits[: count * width].reshape(count, width)
    weights = np.uint64(1) << np.arange(width - 1, -1, -1, dtype=np.uint64)
    return (bits.astype(np.uint64) * weights).sum(axis=1, dtype=np.uint64).astype(np.int64)


def _model(counts: np.ndarray) -> constriction.stream.model.Categorical:
    # Both sides build the model from the same integer counts, hence from bit-identical floats.
    return constriction.stream.model.Categorical(counts / counts.sum(), perfect=False)


def _encode_ans(symbols: np.ndarray) -> bytes:
    lo = int(symbols.min())
    relative = symbols - lo
    counts = np.bincount(relative)
    table = np.packbits(elias_gamma_encode(counts + 1)).tobytes()
    if counts.size == 1:
        # A one-symbol alphabet carries no information (and constriction rejects it): no words.
        words = np.zeros(0, dtype=np.uint32)
    else:
        coder = constriction.stream.stack.AnsCoder()
        coder.encode_reverse(relative.astype(np.int32), _model(counts))
        words = coder.get_compressed()
    return _ANS_HEADER.pack(0, lo, counts.size, words.size) + table + words.astype("<u4").tobytes()


def _ans_table(data: bytes) -> tuple[int, np.ndarray, int, int]:
    """The header and frequency table of an entropy-coded stream: lo, the counts, where the words start
    and how many there are; ``ValueError`` if they do not parse or do not fill ``data`` exactly."""
    if len(data) < _ANS_HEADER.size:
        raise ValueError("entropy-coded stream: truncated header")
    _, lo, span, n_words = _ANS_HEADER.unpack_from(data)
    if span == 0 or lo + span > 2**32:
        raise ValueError(f"entropy-coded stream: invalid symbol range lo={lo}, span={span}")
    # Each table entry takes at most 2 * 62 + 1 bits; never unpack more than that.
    table = np.unpackbits(np.frombuffer(data, dtype=np.uint8, offset=_ANS_HEADER.size)[: (span * 125 + 7) // 8])
    counts, table_bits = elias_gamma_decode(table, span)
    if table[table_bits : -(-table_bits // 8) * 8].any():
        raise ValueError("entropy-coded stream: non-zero padding after the frequency table")
    words_at = _ANS_HEADER.size + (table_bits + 7) // 8
    if len(data) != words_at + 4 * n_words:
        raise ValueError(f"entropy-coded stream: expected {words_at + 4 * n_words} bytes, got {len(data)}")
    return lo, counts.astype(np.int64) - 1, words_at, n_words


def _decode_ans(data: bytes, count: int) -> np.ndarray:
    lo, counts, words_at, n_words = _ans_table(data)
    span = counts.size
    if counts.sum() != count:
        raise ValueError(f"entropy-coded stream: frequency table counts {counts.sum()} symbols, expected {count}")
    if span == 1:
        return np.full(count, lo, dtype=np.int64)
    words = np.frombuffer(data, dtype="<u4", offset=words_at).astype(np.uint32)
    try:
        coder = constriction.stream.stack.AnsCoder(words)
        relative = coder.decode(_model(counts), count)
    except ValueError as err:  # constriction reports invalid word sequences as ValueError
        raise ValueError(f"entropy-coded stream: {err}") from err
    if not coder.is_empty():
        raise ValueError("entropy-coded stream: words left over after decoding (corrupt stream)")
    return relative.astype(np.int64) + lo


def encode_categorical(symbols: np.ndarray, alphabet_size: int) -> bytes:
    """Code integer ``symbols`` in ``[0, alphabet_size)``: entropy-coded or fixed-width, whichever is smaller.

    The length is not stored: the caller transmits it and passes it to ``decode_categorical``.
    """
    if not 1 <= alphabet_size <= 2**32:
        raise ValueError(f"alphabet_size must be in 1..2**32, got {alphabet_size}")
    symbols = np.asarray(symbols)
    if symbols.ndim != 1 or (symbols.size and not np.issubdtype(symbols.dtype, np.integer)):
        raise ValueError("symbols must be a 1-D integer array")
    symbols = symbols.astype(np.int64)
    if symbols.size and (symbols.min() < 0 or symbols.max() >= alphabet_size):
        raise ValueError(f"symbols must lie in [0, {alphabet_size})")
    width = max(1, (alphabet_size - 1).bit_length())
    fixed = bytes([width]) + pack_fixed(symbols, width)
    span = int(symbols.max() - symbols.min()) + 1 if symbols.size else 0
    # The table alone costs at least one bit per symbol of the range: skip hopeless entropy coding.
    if 0 < span < symbols.size * width:
        coded = _encode_ans(symbols)
        if len(coded) < len(fixed):
            return coded
    return fixed


def decode_categorical(data: bytes, count: int) -> np.ndarray:
    """Inverse of ``encode_categorical`` for a stream of ``count`` symbols; ``ValueError`` if malformed."""
    if not data:
        raise ValueError("categorical stream: empty")
    mode = data[0]
    if mode == 0:
        return _decode_ans(data, count)
    if mode <= _MAX_FIXED_WIDTH:
        return unpack_fixed(data[1:], count, mode)
    raise ValueError(f"categorical stream: unknown mode byte {mode}")


def categorical_count_range(data: bytes) -> tuple[int, int]:
    """The fewest and the most symbols a stream of ``encode_categorical`` can hold, from its framing alone
    (the entropy-coded table gives the count exactly; a fixed-width payload of P > 0 bytes at width w
    holds floor(8 (P - 1) / w) + 1 .. floor(8 P / w) symbols); ``ValueError`` if the framing is malformed."""
    if not data:
        raise ValueError("categorical stream: empty")
    mode = data[0]
    if mode == 0:
        count = int(_ans_table(data)[1].sum())
        return count, count
    if mode > _MAX_FIXED_WIDTH:
        raise ValueError(f"categorical stream: unknown mode byte {mode}")
    payload = len(data) - 1
    return (0, 0) if payload == 0 else ((8 * payload - 8) // mode + 1, 8 * payload // mode)
