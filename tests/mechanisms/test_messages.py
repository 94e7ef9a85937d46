"""Wire formats: exact round trips, exact sizes, and rejection of malformed bytes."""

import pickle
import re

import numpy as np
import pytest
import torch

from auditkit import mechanisms
from auditkit.mechanisms.message import DECODE_ERROR, FloatMessage, Message, MessageDecodeError
from auditkit.mechanisms.sdq import SDQMessage

CONFIGS = [
    ("none", {}),
    ("gaussian", {"sigma": 0.01}),
    ("laplace", {"scale": 0.01}),
    ("sdq", {"bits": 8}),
    ("sdq", {"bits": 1}),
    ("sdq", {"bits": 16}),
    ("sdq", {"bits": 3, "compat": "jopeq-code"}),
]


def _update(n, seed=0):
    return 0.05 * torch.randn(n, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)


@pytest.mark.parametrize(("name", "params"), CONFIGS)
@pytest.mark.parametrize("n", [0, 1, 37, 5000])
def test_round_trip_is_exact(name, params, n):
    m = mechanisms.create(name, private_seed=0, **params)
    enc = m.encode(_update(n), seed=3)
    data = enc.to_bytes()
    assert isinstance(data, bytes) and enc.num_bits == 8 * len(data)
    back = type(enc).from_bytes(data)
    assert back == enc and back.to_bytes() == data
    assert torch.equal(m.decode(back, 3), m.decode(enc, 3))
    assert m.decode(back, 3).shape == (n,)


def test_float_message_layout():
    values = np.array([1.5, -2.0], dtype=np.float32)
    data = FloatMessage(values).to_bytes()
    assert data == bytes([1, 2, 0, 0, 0]) + values.astype("<f4").tobytes()


@pytest.mark.parametrize(("name", "params"), CONFIGS)
def test_truncated_or_extended_bytes_are_rejected(name, params):
    enc = mechanisms.create(name, private_seed=0, **params).encode(_update(300), seed=1)
    data = enc.to_bytes()
    for cut in range(len(data)):
        with pytest.raises(ValueError):
            type(enc).from_bytes(data[:cut])
    with pytest.raises(ValueError):
        type(enc).from_bytes(data + b"\x00")


def test_wrong_message_type_is_rejected():
    sdq = mechanisms.create("sdq").encode(_update(10), 0).to_bytes()
    flt = mechanisms.create("none").encode(_update(10), 0).to_bytes()
    with pytest.raises(ValueError, match="tag"):
        FloatMessage.from_bytes(sdq)
    with pytest.raises(ValueError, match="tag"):
        SDQMessage.from_bytes(flt)


@pytest.mark.parametrize("cls", [FloatMessage, SDQMessage])
def test_garbage_is_rejected_with_value_error(cls):
    rng = np.random.default_rng(0)
    for _ in range(300):
        garbage = bytes([cls.TAG]) + rng.integers(0, 256, rng.integers(0, 64)).astype(np.uint8).tobytes()
        with pytest.raises(ValueError):
            cls.from_bytes(garbage)


def test_corrupted_sdq_payload_is_rejected():
    enc = mechanisms.create("sdq", bits=8).encode(_update(5000), 0)
    data = bytearray(enc.to_bytes())
    assert data[13] == 0  # entropy-coded stream (mode byte 0) for this peaked input
    # Corrupt the frequency table: the counts no longer add up to the message length.
    data[13 + 13] ^= 0xFF
    with pytest.raises(ValueError):
        SDQMessage.from_bytes(bytes(data))
    # Indices outside the declared number of levels.
    bad_levels = bytearray(enc.to_bytes())
    bad_levels[5:9] = (3).to_bytes(4, "little")
    with pytest.raises(ValueError):
        SDQMessage.from_bytes(bytes(bad_levels))


# --- messages that do not decode: a wrong seed, corrupted bytes, garbage ---------------------------------------------

ONE_LINE = re.compile(r"message does not decode under this seed, or is corrupted \(.+\)")


def _assert_decode_error(err):
    assert type(err) is MessageDecodeError and isinstance(err, ValueError)
    assert ONE_LINE.fullmatch(str(err)), str(err)  # one line: "." matches no newline
    assert str(err) == f"{DECODE_ERROR} ({err.reason})"


# How each decoder reacts to a seed other than the encoder's (200 coordinates, seeds 8..15 against 7).
SEED_UNUSED = {"none", "gaussian", "laplace", "laplace-sq", "t-dist", "msp", "msp-laplace", "mspdq", "dpsq"}
DITHER_SHIFT = {"sdq", "sdq-hex", "gaussian+sdq", "laplace+sdq", "t-dist+sdq", "jopeq-laplace", "jopeq-t"}
LRSUQ = {"cepam-gaussian", "cepam-laplace", "jopeq-exact"}


def test_decode_error_wording():
    err = MessageDecodeError("two\n  lines")
    assert str(err) == "message does not decode under this seed, or is corrupted (two lines)"
    _assert_decode_error(err)
    assert str(pickle.loads(pickle.dumps(err))) == str(err)


@pytest.mark.parametrize("name", mechanisms.names())
def test_a_wrong_seed_decodes_to_a_wrong_value_or_raises_the_decode_error(name):
    m = mechanisms.create(name, private_seed=0)
    x = _update(200)
    enc = m.encode(x, 7)
    right = m.decode(type(enc).from_bytes(enc.to_bytes()), 7)
    outcomes = []
    for wrong in range(8, 16):
        try:
            outcomes.append(m.decode(type(enc).from_bytes(enc.to_bytes()), wrong))
        except MessageDecodeError as err:
            _assert_decode_error(err)
            outcomes.append(None)
    decoded = [y for y in outcomes if y is not None]
    assert all(y.shape == (200,) and y.dtype == torch.float32 and torch.isfinite(y).all() for y in decoded)
    if name in SEED_UNUSED:  # the decoder never reads the seed (no shared randomness)
        assert len(decoded) == 8 and all(torch.equal(y, right) for y in decoded)
    elif name in DITHER_SHIFT:  # another shared dither: every value moves, by less than ~one cell
        quantizer = getattr(m, "quantizer", m)
        cell = quantizer.step / getattr(enc, "zeta", 1.0)
        assert len(decoded) == 8
        for y in decoded:
            shift = (y.double() - right.double()).abs()
            assert shift.min() > 0 and shift.max() < 1.5 * cell
    elif name in LRSUQ:  # other latents: the index section does not fit them, or decodes at the wrong scales
        assert 0 < len(decoded) < 8
        right_mse = ((right.double() - x) ** 2).mean()
        assert all(((y.double() - x) ** 2).mean() > 10 * right_mse for y in decoded)


@pytest.mark.parametrize("name", mechanisms.names())
def test_corrupted_bytes_raise_the_decode_error_or_decode_to_the_right_shape(name):
    m = mechanisms.create(name, private_seed=0)
    enc = m.encode(_update(200), 7)
    data = enc.to_bytes()
    right = m.decode(enc, 7)
    assert Message.from_bytes(data) == enc  # dispatch on the tag
    middle = len(data) // 2
    # Every format fixes its length: truncated or extended bytes never parse.
    for corrupt in [data[:cut] for cut in (0, 1, middle, len(data) - 1)] + [data + b"\x00", data + b"garbage!"]:
        for parse in (type(enc).from_bytes, Message.from_bytes):
            with pytest.raises(MessageDecodeError) as err:
                m.decode(parse(corrupt), 7)
            _assert_decode_error(err.value)
    # Bytes flipped in the middle (payload): detected, or the decoded update changes, never an internal error.
    for i in range(middle - 2, middle + 3):
        corrupt = data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :]
        try:
            y = m.decode(Message.from_bytes(corrupt), 7)
        except MessageDecodeError as err:
            _assert_decode_error(err)
        else:
            assert y.shape == (200,) and y.dtype == torch.float32 and not torch.equal(y, right)


@pytest.mark.parametrize("cls", sorted(Message._classes_by_tag.values(), key=lambda c: c.TAG), ids=lambda c: c.__name__)
def test_garbage_raises_the_decode_error(cls):
    rng = np.random.default_rng(cls.TAG)
    garbage = [b"", bytes([cls.TAG])]
    garbage += [bytes([cls.TAG]) + rng.integers(0, 256, rng.integers(0, 64)).astype(np.uint8).tobytes() for _ in range(200)]
    for data in garbage:
        for parse in (cls.from_bytes, Message.from_bytes):
            with pytest.raises(MessageDecodeError) as err:
                parse(data)
            _assert_decode_error(err.value)
    with pytest.raises(MessageDecodeError, match=r"\(unknown message tag 255\)$"):
        Message.from_bytes(bytes([255, 0, 0]))


def test_a_configuration_mismatch_is_a_decode_error_and_a_wrong_type_a_type_error():
    enc = mechanisms.create("sdq", bits=4).encode(_update(10), 0)
    with pytest.raises(MessageDecodeError, match="message has 16 levels, this sdq configuration uses 256") as err:
        mechanisms.create("sdq", bits=8).decode(enc, 0)
    _assert_decode_error(err.value)
    with pytest.raises(TypeError):
        mechanisms.create("sdq").decode(FloatMessage(np.zeros(3, np.float32)), 0)
