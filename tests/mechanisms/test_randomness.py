"""Keyed seed derivation and generator streams."""

import pytest
import torch

from mechanisms.randomness import derive_seed, generator, private_generator


def test_derive_seed_is_deterministic_and_63_bit():
    assert derive_seed(1, 2, "dither") == derive_seed(1, 2, "dither")
    seeds = [derive_seed(base, client, rnd) for base in range(3) for client in range(30) for rnd in range(100)]
    assert all(0 <= s < 2**63 for s in seeds)
    assert len(set(seeds)) == len(seeds)  # 9000 distinct key tuples, no collision


@pytest.mark.parametrize(
    ("a", "b"),
    [
        ((1, 23), (12, 3)),  # concatenation ambiguity
        ((1,), ("1",)),  # type is part of the key
        ((1, 2), (2, 1)),  # order matters
        ((0,), (0, 0)),  # arity matters
        ((-1,), (255,)),  # signed encoding
        ((2**70,), (2**70 + 1,)),  # big ints
    ],
)
def test_distinct_keys_give_distinct_seeds(a, b):
    assert derive_seed(*a) != derive_seed(*b)


def test_derive_seed_rejects_ambiguous_keys():
    with pytest.raises(TypeError):
        derive_seed(True)
    with pytest.raises(TypeError):
        derive_seed(1.0)
    with pytest.raises(ValueError):
        derive_seed()


def test_generator_streams_depend_only_on_the_key():
    a = torch.rand(1000, generator=generator(42, "dither"), dtype=torch.float64)
    b = torch.rand(1000, generator=generator(42, "dither"), dtype=torch.float64)
    assert torch.equal(a, b)
    assert not torch.equal(a, torch.rand(1000, generator=generator(43, "dither"), dtype=torch.float64))
    assert not torch.equal(a, torch.rand(1000, generator=generator(42, "noise"), dtype=torch.float64))


def test_private_generator_is_keyed_by_the_private_seed():
    def draw(g):
        return torch.randn(100, generator=g)

    assert torch.equal(draw(private_generator(7, 1, "noise")), draw(private_generator(7, 1, "noise")))
    assert not torch.equal(draw(private_generator(7, 1, "noise")), draw(private_generator(8, 1, "noise")))
    assert not torch.equal(draw(private_generator(7, 1, "noise")), draw(private_generator(7, 2, "noise")))
    # The server, knowing only the shared seed, cannot reproduce the private stream.
    assert not torch.equal(draw(private_generator(7, 1, "noise")), draw(generator(1, "noise")))
    # None: fresh OS entropy on every call.
    assert not torch.equal(draw(private_generator(None, 1, "noise")), draw(private_generator(None, 1, "noise")))
