"""Wire formats: exact round trips, exact sizes, and rejection of malformed bytes."""

import numpy as np
import pytest
import torch

import mechanisms
from mechanisms.message import FloatMessage
from mechanisms.sdq import SDQMessage

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
