"""The bits of an LRSUQ message: H with a prefix code, M coded given U, the wire format, the papers' bound.

Only the integer index k_j = M_j / alpha of row j is coded, after H_j; the decoder regenerates U_j (hence r_j,
beta_j) before reading M, so M is coded given U (CEPAM 003 Sec. V-B). H: unary, optimal for Geom(p), p >= 1/2
(Golomb 1966; Gallager & van Voorhis 1975); nothing for n = 1. Given U, k_i lies in [-ceil(a), ceil(a)],
a = bound / (2 r), so |M(U)| = (2 ceil(a) + 1)^n; ceil(a) is clamped to 2^62 - 1 and ``encode_message`` refuses
|t_i| >= 2^62, keeping every index in int64. M goes fixed-length (mixed radix, ceil(log2 |M(U_j)|) bits per row)
or entropy-coded per bucket of log2(r_j) (rANS, ``bitstream.encode_categorical``), with escapes past 2^31 - 1 or
outside [-o, o]; the smaller section is sent. Both sides derive the buckets from the same r, so encoder and
decoder must run the same numeric libraries. Papers' bound (003 Sec. V-B, 000 eq. before Sec. VI):

    N (H(Geom(p)) + E[ceil(log2 |M(U)|)]) bits,   N = ceil(m / n)   (``bits_bound``, exact from the radius CDF).

Code lengths, bucketing, the escape format and the edge cases: docs/guide/mechanism-internals.md (#rsuq-coding).
"""

from __future__ import annotations

import itertools
import math
import struct
from dataclasses import dataclass
from typing import Self

import numpy as np
import torch

from auditkit.mechanisms.bitstream import categorical_count_range, decode_categorical, encode_categorical
from auditkit.mechanisms.message import MAX_LENGTH, Message
from auditkit.mechanisms.rsuq import RSUQCode, Target, acceptance_probability, rsuq_decode, rsuq_encode, shared_stream

__all__ = [
    "RSUQMessage",
    "index_halfwidth",
    "encode_iterations",
    "decode_iterations",
    "encode_indices",
    "decode_indices",
    "fixed_length_bits",
    "index_entropy_bits",
    "geometric_entropy_bits",
    "bits_bound",
    "LATENT_PURPOSE",
    "DITHER_PURPOSE",
    "encode_message",
    "decode_message",
    "RateReport",
    "message_rate",
]

_MAX_BUCKETS = 32
_ROWS_PER_BUCKET = 2048  # a bucket's frequency table and stream header cost a few hundred bits
_MAX_HALFWIDTH = 2**62 - 1  # ceil(a) is clamped here, so 2 ceil(a) + 1 and the fixed-length fields fit int64
_MAX_REACH = 2.0**62  # every |t| = |x| / (alpha beta) stays below, so the int64 indices k have |k| <= 2^62
_MAX_OFFSET = 2**31 - 1  # bucket offsets o up to here have 2 o + 2 <= 2^32 symbols; larger ones escape
_NARROW_LOG2 = 62.5  # rows with |M(U)| below 2^62.5 are coded as one mixed-radix integer (exact in int64)
_SECTION = struct.Struct("<B")  # bucket count of an entropy-coded M section, + _ESCAPES if escaped
_ESCAPES = 0x80
_LENGTH = struct.Struct("<I")
_FIXED = struct.Struct("<Q")  # payload bits of a fixed-length M section
LATENT_PURPOSE = "lrsuq-latent"  # shared-stream purposes of ``encode_message`` / ``decode_message``
DITHER_PURPOSE = "lrsuq-dither"


def index_halfwidth(radius: torch.Tensor, bound: float, alpha: float = 1.0) -> np.ndarray:
    """min(ceil(a_j), 2^62 - 1) per row (int64), a_j = (bound / beta_j) / alpha = bound / (2 r_j): every
    index of row j lies in [-ceil(a_j), ceil(a_j)] when every input coordinate is at most ``bound`` in
    absolute value (the clamp, for radii below bound * 2^-63, keeps 2 ceil(a) + 1 in int64).

    Computed with the encoder's own rounding (t = (x / beta) / alpha), so |t| <= a holds in floating point.
    """
    beta = 2 * radius.numpy() / alpha
    a = np.ceil(bound / beta / alpha)
    clamped = ~(a < _MAX_HALFWIDTH)  # compared as float (2^62), infinities included
    half = np.where(clamped, 0.0, a).astype(np.int64)
    half[clamped] = _MAX_HALFWIDTH
    return half


def encode_iterations(iterations: np.ndarray) -> bytes:
    """Unary codes of the H_j >= 1 (H_j - 1 zeros, then a one), MSB first, zero-padded to a byte."""
    bits = np.zeros(int(iterations.sum()), dtype=np.uint8)
    bits[np.cumsum(iterations) - 1] = 1
    return np.packbits(bits).tobytes()


def decode_iterations(data: bytes, count: int) -> tuple[np.ndarray, int]:
    """The first ``count`` unary codes of ``data``: the H_j (int64) and the bytes they occupy.

    ``ValueError`` if fewer than ``count`` codes are present or the padding of the last byte is not zero.
    """
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    ends = np.flatnonzero(bits)[:count]
    if ends.size < count:
        raise ValueError(f"iteration counts: found {ends.size} of {count} unary codes (truncated)")
    used = (int(ends[-1]) + 8) // 8 if count else 0
    if bits[int(ends[-1]) + 1 if count else 0 : 8 * used].any():
        raise ValueError("iteration counts: non-zero padding after the last unary code")
    return np.diff(ends, prepend=-1).astype(np.int64), used


def _bucket_count(rows: int) -> int:
    return max(1, min(_MAX_BUCKETS, rows // _ROWS_PER_BUCKET))


def _buckets(radius: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows grouped by bucket (stable order within a bucket) and the number of rows in each bucket."""
    rows = radius.size
    count = _bucket_count(rows)
    if count == 1:
        return np.arange(rows), np.array([rows])
    log_r = np.log2(radius)
    lo, hi = np.quantile(log_r[:: max(1, rows // 4096)], [0.5 / count, 1 - 0.5 / count])
    scale = count / (hi - lo) if hi > lo else 0.0
    bucket = np.clip(np.floor((log_r - lo) * scale), 0, count - 1).astype(np.uint8)
    return np.argsort(bucket, kind="stable"), np.bincount(bucket, minlength=count)


def _bit_length(values: np.ndarray) -> np.ndarray:
    """Exact bit lengths (int64) of non-negative int64 values below 2^63 (0 for 0), by binary search."""
    v = values.astype(np.uint64)
    floor_log2 = np.zeros(v.shape, dtype=np.uint64)
    for step in (32, 16, 8, 4, 2, 1):
        floor_log2 += np.uint64(step) * ((v >> (floor_log2 + np.uint64(step))) != 0)
    return (floor_log2.astype(np.int64) + 1) * (v != 0)


def _fixed_fields(halfwidth: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The fixed-length layout: which rows are narrow, |M(U)| of the narrow rows, and all field widths."""
    size = 2 * halfwidth + 1
    narrow = n * np.log2(size) < _NARROW_LOG2
    volume = size[narrow] ** n
    widths = np.concatenate([_bit_length(volume - 1), np.repeat(_bit_length(size[~narrow] - 1), n)])
    return narrow, volume, widths


def fixed_length_bits(radius: torch.Tensor, n: int, bound: float, alpha: float = 1.0) -> int:
    """Payload bits of the fixed-length M section: sum_j ceil(log2 |M(U_j)|) (see the module docstring)."""
    return int(_fixed_fields(index_halfwidth(radius, bound, alpha), n)[2].sum())


def _pack_fields(values: np.ndarray, widths: np.ndarray) -> bytes:
    """Concatenate ``values[f]`` in ``widths[f]`` bits each, MSB first, zero-padded to a byte."""
    span = int(widths.max(initial=0))
    matrix = np.zeros((values.size, span), dtype=np.uint8)
    v = values.astype(np.uint64)
    for j in range(span):
        matrix[:, j] = (v >> np.maximum(widths - 1 - j, 0).astype(np.uint64)) & np.uint64(1)
    return np.packbits(matrix[np.arange(span) < widths[:, None]]).tobytes()


def _unpack_fields(data: bytes, widths: np.ndarray) -> np.ndarray:
    """Inverse of ``_pack_fields`` (uint64 values); ``data`` holds exactly ceil(sum(widths) / 8) bytes, the
    padding zero (else ``ValueError``)."""
    span = int(widths.max(initial=0))
    inside = np.arange(span) < widths[:, None]
    matrix = np.zeros(inside.shape, dtype=np.uint8)
    bits = np.unpackbits(np.frombuffer(data, dtype=np.uint8))
    if bits[int(widths.sum()) :].any():
        raise ValueError("fixed-length indices: non-zero padding after the payload")
    matrix[inside] = bits[: int(widths.sum())]
    values = np.zeros(widths.size, dtype=np.uint64)
    for j in range(span):
        values += matrix[:, j].astype(np.uint64) << np.maximum(widths - 1 - j, 0).astype(np.uint64)
    return values


def _encode_fixed(k: np.ndarray, halfwidth: np.ndarray) -> bytes:
    n = k.shape[1]
    narrow, _, widths = _fixed_fields(halfwidth, n)
    digits = k + halfwidth[:, None]
    size = 2 * halfwidth[narrow] + 1
    value = digits[narrow, 0].copy()
    for i in range(1, n):
        value = value * size + digits[narrow, i]
    payload = _pack_fields(np.concatenate([value, digits[~narrow].ravel()]), widths)
    return _FIXED.pack(int(widths.sum())) + payload


def _decode_fixed(data: bytes, halfwidth: np.ndarray, n: int) -> np.ndarray:
    if len(data) < _FIXED.size:
        raise ValueError("fixed-length indices: truncated header")
    (nbits,) = _FIXED.unpack_from(data)
    narrow, volume, widths = _fixed_fields(halfwidth, n)
    if nbits != widths.sum() or len(data) != _FIXED.size + (nbits + 7) // 8:
        raise ValueError(f"fixed-length indices: {nbits} bits in {len(data)} bytes, expected {widths.sum()} bits")
    values = _unpack_fields(data[_FIXED.size :], widths).astype(np.int64)
    split = int(narrow.sum())
    value, wide = values[:split], values[split:]
    if (value >= volume).any():
        raise ValueError("fixed-length indices: a row index is outside its range")
    size = 2 * halfwidth[narrow] + 1
    digits = np.empty((halfwidth.size, n), dtype=np.int64)
    for i in range(n - 1, -1, -1):
        digits[narrow, i] = value % size
        value //= size
    digits[~narrow] = wide.reshape(-1, n)
    if (digits[~narrow] > 2 * halfwidth[~narrow, None]).any():
        raise ValueError("fixed-length indices: a coordinate index is outside its range")
    return digits - halfwidth[:, None]


def _bucket_slices(radius: np.ndarray, halfwidth: np.ndarray) -> tuple[np.ndarray, list[tuple[int, int, int]]]:
    """Rows grouped by bucket, and per bucket its (start, stop) in that order and its symbol offset
    (largest ceil(a) in the bucket, + 1 for a float rounding at the edge of the range)."""
    order, counts = _buckets(radius)
    stops = np.cumsum(counts)
    grouped = np.take(halfwidth, order)
    slices = []
    for start, stop in zip(stops - counts, stops, strict=True):
        offset = int(grouped[start:stop].max()) + 1 if stop > start else 0
        slices.append((int(start), int(stop), offset))
    return order, slices


def _encode_buckets(k: np.ndarray, halfwidth: np.ndarray, radius: np.ndarray) -> bytes:
    order, slices = _bucket_slices(radius, halfwidth)
    grouped = np.take(k, order, axis=0)
    # Escape only when needed (docs/guide/mechanism-internals.md#rsuq-coding): an alphabet beyond 2^32, or an
    # input beyond the bound.
    escapes = any(
        offset > _MAX_OFFSET or (stop > start and np.abs(grouped[start:stop]).max() > offset)
        for start, stop, offset in slices
    )
    streams, escaped = [], []
    for start, stop, offset in slices:
        if stop == start:
            streams.append(b"")
            continue
        symbols = grouped[start:stop].ravel()
        if not escapes:
            streams.append(encode_categorical(symbols + offset, 2 * offset + 1))
            continue
        offset = min(offset, _MAX_OFFSET)
        outside = np.abs(symbols) > offset
        escaped.append(symbols[outside])
        streams.append(encode_categorical(np.where(outside, 2 * offset + 1, symbols + offset), 2 * offset + 2))
    lengths = b"".join(_LENGTH.pack(len(s)) for s in streams)
    section = _SECTION.pack(len(streams) | (_ESCAPES if escapes else 0)) + lengths + b"".join(streams)
    if escapes:
        values = np.concatenate(escaped) if escaped else np.zeros(0, dtype=np.int64)
        section += _LENGTH.pack(values.size) + values.astype("<i8").tobytes()
    return section


def _section_streams(data: bytes, rows: int, n: int) -> tuple[list[bytes], np.ndarray | None]:
    """Split an entropy-coded M section into its bucket streams and its escaped indices (int64; None when
    the section has no escapes), checking the framing and that the streams can hold the rows x n indices."""
    if len(data) < _SECTION.size:
        raise ValueError("entropy-coded indices: truncated header")
    (first,) = _SECTION.unpack_from(data)
    count = first & ~_ESCAPES
    if count != _bucket_count(rows):
        raise ValueError(f"entropy-coded indices: {count} buckets, expected {_bucket_count(rows)} for {rows} rows")
    start = _SECTION.size + count * _LENGTH.size
    if len(data) < start:
        raise ValueError("entropy-coded indices: truncated bucket table")
    lengths = [_LENGTH.unpack_from(data, _SECTION.size + i * _LENGTH.size)[0] for i in range(count)]
    end = start + sum(lengths)
    if first & _ESCAPES:
        if len(data) < end + _LENGTH.size:
            raise ValueError("entropy-coded indices: truncated escape count")
        (number,) = _LENGTH.unpack_from(data, end)
        values_at = end + _LENGTH.size
        end = values_at + 8 * number
    if len(data) != end:
        raise ValueError(f"entropy-coded indices: expected {end} bytes, got {len(data)}")
    escaped = None
    if first & _ESCAPES:
        escaped = np.frombuffer(data, dtype="<i8", count=number, offset=values_at).astype(np.int64)
    bounds = np.cumsum([start, *lengths])
    streams = [data[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    # Framing only: a section whose streams cannot hold the rows x n indices is refused before decoding.
    ranges = [categorical_count_range(s) if s else (0, 0) for s in streams]
    fewest, most = sum(r[0] for r in ranges), sum(r[1] for r in ranges)
    if not fewest <= rows * n <= most:
        raise ValueError(f"entropy-coded indices: the bucket streams hold {fewest}..{most} indices, not {rows * n}")
    return streams, escaped


def _decode_buckets(data: bytes, halfwidth: np.ndarray, radius: np.ndarray, n: int) -> np.ndarray:
    order, slices = _bucket_slices(radius, halfwidth)
    streams, escaped = _section_streams(data, radius.size, n)
    grouped = np.empty((radius.size, n), dtype=np.int64)
    used = 0  # escaped indices consumed
    for (start, stop, offset), stream in zip(slices, streams, strict=True):
        if stop == start:
            if stream:
                raise ValueError("entropy-coded indices: data for an empty bucket")
            continue
        symbols = decode_categorical(stream, (stop - start) * n)
        if escaped is not None:
            offset = min(offset, _MAX_OFFSET)
        if symbols.max() > 2 * offset + (escaped is not None):
            raise ValueError("entropy-coded indices: a symbol is outside the bucket's alphabet")
        values = symbols - offset
        if escaped is not None:
            outside = symbols == 2 * offset + 1
            chunk = escaped[used : used + int(outside.sum())]
            if chunk.size < outside.sum() or (np.abs(chunk) <= offset).any():
                raise ValueError("entropy-coded indices: the escaped indices do not match the escape symbols")
            values[outside] = chunk
            used += chunk.size
        grouped[start:stop] = values.reshape(-1, n)
    if escaped is not None and used != escaped.size:
        raise ValueError(f"entropy-coded indices: {escaped.size} escaped indices for {used} escape symbols")
    position = np.empty(order.size, dtype=np.int64)
    position[order] = np.arange(order.size)
    return np.take(grouped, position, axis=0)


def encode_indices(indices: torch.Tensor, radius: torch.Tensor, bound: float, alpha: float = 1.0) -> tuple[bool, bytes]:
    """The M section for the indices k (N x n int64): (True, fixed-length) or (False, entropy-coded),
    whichever is smaller; fixed-length only when every index lies in its row's range."""
    k = indices.numpy()
    halfwidth = index_halfwidth(radius, bound, alpha)
    coded = _encode_buckets(k, halfwidth, radius.numpy())
    # n log2 |M| >= n log2 3 per row is a lower bound on the fixed payload: skip it when it cannot win.
    rows, n = k.shape
    if (
        8 * len(coded) > rows * n * math.log2(3)
        and 8 * len(coded) > n * np.log2(2 * halfwidth + 1).sum()
        and (np.abs(k) <= halfwidth[:, None]).all()
    ):
        fixed = _encode_fixed(k, halfwidth)
        if len(fixed) < len(coded):
            return True, fixed
    return False, coded


def decode_indices(
    data: bytes, fixed: bool, radius: torch.Tensor, n: int, bound: float, alpha: float = 1.0
) -> torch.Tensor:
    """Inverse of ``encode_indices`` given the regenerated radii; ``ValueError`` on a malformed section."""
    halfwidth = index_halfwidth(radius, bound, alpha)
    if fixed:
        return torch.from_numpy(_decode_fixed(data, halfwidth, n))
    return torch.from_numpy(_decode_buckets(data, halfwidth, radius.numpy(), n))


def index_entropy_bits(indices: torch.Tensor, radius: torch.Tensor) -> float:
    """Empirical entropy of the index symbols given their U-bucket, in bits for the whole message:
    sum over buckets of (symbols in it) x H(empirical distribution) -- the entropy coder's target size."""
    order, counts = _buckets(radius.numpy())
    grouped = np.take(indices.numpy(), order, axis=0)
    total = 0.0
    for stop, count in zip(np.cumsum(counts), counts, strict=True):
        _, freq = np.unique(grouped[stop - count : stop], return_counts=True)
        total -= float((freq * np.log2(freq / freq.sum())).sum())
    return total


def geometric_entropy_bits(p: float) -> float:
    """H(Geom(p)) = h(p) / p bits for H in {1, 2, ...} with P(H = i) = (1 - p)^(i - 1) p (0 when p = 1)."""
    if p >= 1.0:
        return 0.0
    return -(p * math.log2(p) + (1 - p) * math.log2(1 - p)) / p


def bits_bound(target: Target, rows: int, bound: float) -> float:
    """The papers' bound N (H(Geom(p)) + E[ceil(log2 |M(U)|)]) in bits, for N = ``rows`` sub-vectors.

    With |M(U)| = (2 ceil(a) + 1)^n and a = bound / (2 r(U)):
    ceil(log2 |M|) > t  iff  ceil(a) >= K_t = floor((2^(t/n) - 1) / 2) + 1  iff  r < bound / (2 (K_t - 1)),
    so E[ceil(log2 |M(U)|)] = sum over t >= 0 of P(r < bound / (2 (K_t - 1))) (1 when K_t <= 1), summed
    until the terms fall below 1e-15.
    """
    n = target.n
    expected = 0.0
    for t in itertools.count():
        least = math.floor((2 ** (t / n) - 1) / 2) + 1
        term = 1.0 if least <= 1 else float(target.radius_cdf(bound / (2 * (least - 1))))
        expected += term
        if term < 1e-15:
            break
    return rows * (geometric_entropy_bits(acceptance_probability(n, target.norm)) + expected)


class RSUQMessage(Message):
    """An LRSUQ message: the sub-vectors' (H, M) and an optional float32 side value.

    Layout (little-endian): tag (uint8 = 10) | length m (uint32) | sub-vector length n (uint8) |
    flags (uint8) | [side value (float32), flag 1] | [H section, flag 2] | M section.

    * flag 1: a float32 side value follows the header (CEPAM ``compat=paper000``: ||x||; jopeq-exact: zeta);
    * flag 2: the H section is present (n >= 2): the unary codes of the N = ceil(m / n) values H_j,
      zero-padded to a whole byte; without it every H_j is 1;
    * flag 4: the M section is fixed-length: payload bits (uint64) | the payload; otherwise it is entropy-coded:
      bucket count B (uint8, + 128 when escaped) | B stream lengths (uint32) | B categorical streams |
      [escape count E (uint32) | E escaped indices (int64), when escaped]. A section without escapes ends after
      its streams; escapes appear only where an index needs them (docs/guide/mechanism-internals.md#rsuq-coding).

    ``from_bytes`` checks the header, decodes the H section and checks the framing of the M section (for an
    entropy-coded one, also that its streams can hold the N n indices); the M section itself depends on the
    radii, so ``decode_indices`` (run by the decoder, which regenerates U) checks its contents.
    ``MessageDecodeError`` (``auditkit.mechanisms.message``) on anything malformed.
    """

    TAG = 10
    _HEADER = struct.Struct("<BIBB")
    _SIDE = struct.Struct("<f")
    _FLAG_SIDE, _FLAG_ITERATIONS, _FLAG_FIXED = 1, 2, 4

    def __init__(
        self,
        length: int,
        block: int,
        side: float | None,
        iterations: np.ndarray | None,
        fixed: bool,
        indices: bytes,
    ) -> None:
        if not 0 <= length <= MAX_LENGTH or not 1 <= block <= 255:
            raise ValueError(f"RSUQMessage: need 0 <= length <= {MAX_LENGTH} and 1 <= block <= 255")
        rows = -(-length // block)
        if iterations is not None:
            iterations = np.asarray(iterations, dtype=np.int64)
            if iterations.shape != (rows,) or (rows and iterations.min() < 1):
                raise ValueError(f"RSUQMessage: need {rows} iteration counts >= 1")
        if side is not None and not math.isfinite(side):
            raise ValueError(f"RSUQMessage: the side value must be finite, got {side!r}")
        self.length = length
        self.block = block
        self.side = None if side is None else float(np.float32(side))
        self.iterations = iterations
        self.fixed = bool(fixed)
        self.indices = bytes(indices)

    @property
    def side_value(self) -> float | None:
        """The float32 side value sent in clear (CEPAM ``compat=paper000``: ||x||; jopeq-exact: zeta)."""
        return self.side

    @property
    def rows(self) -> int:
        """N = ceil(m / n), the number of sub-vectors."""
        return -(-self.length // self.block)

    def _serialize(self) -> bytes:
        flags = (
            (self._FLAG_SIDE if self.side is not None else 0)
            | (self._FLAG_ITERATIONS if self.iterations is not None else 0)
            | (self._FLAG_FIXED if self.fixed else 0)
        )
        parts = [self._HEADER.pack(self.TAG, self.length, self.block, flags)]
        if self.side is not None:
            parts.append(self._SIDE.pack(self.side))
        if self.iterations is not None:
            parts.append(encode_iterations(self.iterations))
        parts.append(self.indices)
        return b"".join(parts)

    @classmethod
    def from_bytes(cls, data: bytes) -> Self:
        _, length, block, flags = cls._check_tag(data, cls._HEADER)
        if flags & ~(cls._FLAG_SIDE | cls._FLAG_ITERATIONS | cls._FLAG_FIXED) or block == 0:
            raise ValueError(f"RSUQMessage: invalid flags {flags} or sub-vector length {block}")
        at = cls._HEADER.size
        side = None
        if flags & cls._FLAG_SIDE:
            if len(data) < at + cls._SIDE.size:
                raise ValueError("RSUQMessage: truncated side value")
            (side,) = cls._SIDE.unpack_from(data, at)
            at += cls._SIDE.size
        rows = -(-length // block)
        iterations = None
        if flags & cls._FLAG_ITERATIONS:
            iterations, used = decode_iterations(data[at:], rows)
            at += used
        indices = data[at:]
        if flags & cls._FLAG_FIXED:
            if len(indices) < _FIXED.size:
                raise ValueError("RSUQMessage: truncated fixed-length index section")
            (nbits,) = _FIXED.unpack_from(indices)
            if len(indices) != _FIXED.size + (nbits + 7) // 8:
                raise ValueError(f"RSUQMessage: fixed-length index section of {nbits} bits has {len(indices)} bytes")
        else:
            _section_streams(indices, rows, block)
        message = cls(length, block, side, iterations, bool(flags & cls._FLAG_FIXED), indices)
        message._wire = bytes(data)
        return message


def encode_message(
    rows: torch.Tensor, length: int, target: Target, seed: int, *, bound: float, alpha: float, side: float | None
) -> tuple[RSUQMessage, RSUQCode]:
    """Run LRSUQ on ``rows`` (N x n float64, every |entry| <= ``bound``) and build the message.

    The latent radii come from ``shared_stream(seed, LATENT_PURPOSE)``, the dithers from (seed, DITHER_PURPOSE).
    Returns the message and the encoder's ``RSUQCode`` (whose ``output`` is what the decoder will rebuild).
    ``ValueError`` if an index would reach 2^62 in magnitude (beyond the int64 indices, module docstring).
    """
    radius = target.radius(rows.shape[0], shared_stream(seed, LATENT_PURPOSE))
    if rows.numel():
        x = rows.numpy()
        # max |t| per row, t = (x / beta) / alpha with beta = 2 r / alpha as in rsuq_encode (same rounding).
        reach = float((np.maximum(x.max(axis=1), -x.min(axis=1)) / (2 * radius.numpy() / alpha) / alpha).max())
        if not reach < _MAX_REACH:
            raise ValueError(
                f"an LRSUQ index would reach {reach:.3g} = |x| / (2 r) for a noise radius r, beyond the int64 "
                "indices (at most 2^62); use a larger noise scale or a smaller clip"
            )
    code = rsuq_encode(rows, radius, seed, norm=target.norm, purpose=DITHER_PURPOSE, alpha=alpha)
    fixed, indices = encode_indices(code.indices, radius, bound, alpha)
    iterations = code.iterations.numpy() if target.n > 1 else None
    return RSUQMessage(length, target.n, side, iterations, fixed, indices), code


def decode_message(enc: RSUQMessage, target: Target, seed: int, *, bound: float, alpha: float) -> torch.Tensor:
    """The rows Y (N x n float64) the server reconstructs from ``enc``; ``ValueError`` if it does not fit."""
    if enc.block != target.n or (enc.iterations is None) != (target.n == 1):
        raise ValueError(f"message for sub-vectors of length {enc.block} does not fit (n={target.n})")
    radius = target.radius(enc.rows, shared_stream(seed, LATENT_PURPOSE))
    indices = decode_indices(enc.indices, enc.fixed, radius, target.n, bound, alpha)
    iterations = torch.ones(enc.rows, dtype=torch.int64) if enc.iterations is None else torch.from_numpy(enc.iterations)
    return rsuq_decode(iterations, indices, radius, seed, norm=target.norm, purpose=DITHER_PURPOSE, alpha=alpha)


@dataclass(frozen=True)
class RateReport:
    """Sizes of one LRSUQ message, in bits; ``per_coordinate`` divides them by the update length.

    message_bits:       the serialised message, as sent.
    fixed_length_bits:  the same message with its M section in fixed-length coding over the range.
    bound_bits:         the papers' bound N (H(Geom(p)) + E[ceil(log2 |M(U)|)]) (no header, expectation).
    iteration_bits:     the unary H section (0 when n = 1).
    index_entropy_bits: empirical entropy of the indices given their U-bucket (the entropy coder's target).
    """

    coordinates: int
    message_bits: int
    fixed_length_bits: int
    bound_bits: float
    iteration_bits: int
    index_entropy_bits: float

    def per_coordinate(self) -> dict[str, float]:
        """The five sizes divided by ``coordinates`` (NaN for an empty update)."""
        m = self.coordinates or math.nan
        return {
            "message": self.message_bits / m,
            "fixed_length": self.fixed_length_bits / m,
            "bound": self.bound_bits / m,
            "iterations": self.iteration_bits / m,
            "index_entropy": self.index_entropy_bits / m,
        }


def message_rate(enc: RSUQMessage, target: Target, seed: int, *, bound: float, alpha: float) -> RateReport:
    """Measured and reference sizes of ``enc`` (needs the seed: the M layout depends on the radii)."""
    radius = target.radius(enc.rows, shared_stream(seed, LATENT_PURPOSE))
    indices = decode_indices(enc.indices, enc.fixed, radius, target.n, bound, alpha)
    message_bits = enc.num_bits
    before_indices = message_bits - 8 * len(enc.indices)  # header, side value and H section
    fixed_section = 8 * _FIXED.size + 8 * ((fixed_length_bits(radius, target.n, bound, alpha) + 7) // 8)
    return RateReport(
        coordinates=enc.length,
        message_bits=message_bits,
        fixed_length_bits=before_indices + fixed_section,
        bound_bits=bits_bound(target, enc.rows, bound),
        iteration_bits=0 if enc.iterations is None else 8 * len(encode_iterations(enc.iterations)),
        index_entropy_bits=index_entropy_bits(indices, radius),
    )
