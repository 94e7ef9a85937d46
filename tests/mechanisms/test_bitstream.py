"""Elias-gamma codes, fixed-width packing and the categorical stream."""

import numpy as np
import pytest

from auditkit.mechanisms.bitstream import (
    categorical_count_range,
    decode_categorical,
    elias_gamma_decode,
    elias_gamma_encode,
    encode_categorical,
    pack_fixed,
    unpack_fixed,
)


def test_elias_gamma_round_trip_and_length():
    rng = np.random.default_rng(0)
    values = np.concatenate([[1, 2, 3, 4, 2**40, 2**63 - 1], rng.integers(1, 10_000, 1000)]).astype(np.uint64)
    bits = elias_gamma_encode(values)
    n = np.floor(np.log2(values.astype(np.float64))).astype(int)
    n[5] = 62  # 2**63 - 1 rounds up in float64; its exponent is 62
    assert bits.size == int((2 * n + 1).sum())
    decoded, used = elias_gamma_decode(np.concatenate([bits, [1, 0, 1]]).astype(np.uint8), values.size)
    assert used == bits.size and np.array_equal(decoded, values)


def test_elias_gamma_known_codes():
    # Unary parts first ("1", "01", "001"), then remainders ("", "0", "01") of 1, 2, 5.
    assert elias_gamma_encode(np.array([1, 2, 5])).tolist() == [1, 0, 1, 0, 0, 1, 0, 0, 1]


def test_elias_gamma_rejects_bad_input():
    with pytest.raises(ValueError):
        elias_gamma_encode(np.array([0]))
    with pytest.raises(ValueError):
        elias_gamma_decode(np.array([0, 0, 1], dtype=np.uint8), 2)


def test_fixed_width_round_trip():
    values = np.array([0, 5, 31, 17])
    data = pack_fixed(values, 5)
    assert len(data) == 3
    assert np.array_equal(unpack_fixed(data, 4, 5), values)
    with pytest.raises(ValueError):
        unpack_fixed(data[:-1], 4, 5)


@pytest.mark.parametrize(
    ("symbols", "alphabet", "mode"),
    [
        (np.full(1000, 7), 256, 0),  # one symbol: table only, no rANS words
        (np.random.default_rng(1).binomial(20, 0.5, 10_000), 256, 0),  # peaked: entropy coded
        (np.random.default_rng(2).integers(0, 256, 10_000), 256, 8),  # uniform: fixed width wins
        (np.random.default_rng(3).integers(0, 9, 50), 9, 4),  # short message: table too costly
        (np.zeros(0, dtype=np.int64), 4, 2),
    ],
)
def test_categorical_round_trip_and_mode(symbols, alphabet, mode):
    data = encode_categorical(symbols, alphabet)
    assert data[0] == mode
    assert np.array_equal(decode_categorical(data, symbols.size), symbols)
    width = max(1, (alphabet - 1).bit_length())
    assert len(data) <= 1 + (symbols.size * width + 7) // 8


def test_categorical_rejects_bad_input():
    with pytest.raises(ValueError):
        encode_categorical(np.array([4]), 4)
    with pytest.raises(ValueError):
        decode_categorical(b"", 3)
    with pytest.raises(ValueError):
        decode_categorical(bytes([200]), 3)


@pytest.mark.parametrize(
    ("symbols", "alphabet"),
    [
        (np.random.default_rng(1).binomial(20, 0.5, 10_000), 256),  # entropy coded: the table gives the count
        (np.random.default_rng(2).integers(0, 256, 1001), 256),  # fixed width 8: exact
        (np.random.default_rng(3).integers(0, 9, 50), 9),  # fixed width 4: 50 or 51 symbols fill 26 bytes
        (np.zeros(0, dtype=np.int64), 4),
    ],
)
def test_categorical_count_range_brackets_the_count_from_the_framing(symbols, alphabet):
    data = encode_categorical(symbols, alphabet)
    fewest, most = categorical_count_range(data)
    assert fewest <= symbols.size <= most
    if data[0] == 0:
        assert fewest == most == symbols.size
    else:  # exactly the counts that fill the payload: one fewer or one more changes its byte count
        width = data[0]
        assert (fewest * width + 7) // 8 == (most * width + 7) // 8 == len(data) - 1
        assert fewest == 0 or ((fewest - 1) * width + 7) // 8 < len(data) - 1 < ((most + 1) * width + 7) // 8
    with pytest.raises(ValueError):
        categorical_count_range(b"")
    with pytest.raises(ValueError):
        categorical_count_range(bytes([40]) + data[1:])


def test_non_zero_padding_is_rejected():
    data = bytearray(pack_fixed(np.array([1, 2, 3]), 5))  # 15 bits: one padding bit
    assert np.array_equal(unpack_fixed(bytes(data), 3, 5), [1, 2, 3])
    data[-1] |= 1
    with pytest.raises(ValueError, match="padding"):
        unpack_fixed(bytes(data), 3, 5)
    coded = bytearray(encode_categorical(np.random.default_rng(1).binomial(20, 0.5, 10_000), 256))
    assert coded[0] == 0
    table_bits = elias_gamma_encode(np.bincount(np.random.default_rng(1).binomial(20, 0.5, 10_000))[1:] + 1).size
    assert table_bits % 8  # the table ends inside a byte: set its first padding bit
    coded[13 + table_bits // 8] |= 0x80 >> (table_bits % 8)
    with pytest.raises(ValueError, match="padding"):
        decode_categorical(bytes(coded), 10_000)
