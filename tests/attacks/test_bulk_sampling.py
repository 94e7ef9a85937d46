"""Bulk sampling: the path chosen per mechanism, and that the fast paths have the law of separate calls.

Faithfulness: for every registered mechanism, and the configurations with another bulk path (DP-SQ's adaptive
range, MSP-FL's paper004 split), 20,000 outputs from the fast path and 300 from one call per output (the
reference, always faithful) are compared by two-sample Kolmogorov-Smirnov tests on the first coordinate and on
the output norm, for an input on the clip boundary (so a wrong clip rescaling would show). 46 tests at
p > 1e-4 each: a false alarm somewhere has probability < 0.5%, and the seeds are fixed.
"""

import numpy as np
import pytest
import torch
from scipy import stats

from auditkit import mechanisms
from auditkit.attacks.bulk_sampling import BulkSampler, bulk_sampler
from auditkit.mechanisms.additive import Laplace

CHEAP = {  # settings where the noise is not negligible next to the input, so the law shows the input
    "gaussian": {"sigma": 0.5, "clip": 0.5},
    "laplace": {"scale": 0.5, "clip": 0.5},
    "gaussian+sdq": {"sigma": 0.5, "clip": 0.5, "support": 4.0},
    "laplace+sdq": {"scale": 0.5, "clip": 0.5, "support": 8.0},
    "cepam-gaussian": {"sigma": 0.5, "clip": 0.5, "n": 3},
    "cepam-laplace": {"scale": 0.5, "clip": 0.5},
    # a coarse grid with strong coins and rounding shows the input; an l1 clip of 0.5 on a range of 1 is active
    "dpsq": {"clip": 0.5, "support": 1.0, "bits": 2, "eps": 1.0},
    "laplace-sq": {"clip": 0.5, "support": 1.0, "bits": 2, "eps": 5.0},
    "msp-laplace": {"clip": 0.5, "eps": 1.0},
}


def _input(name: str) -> torch.Tensor:
    d = 9 if name.startswith("jopeq") else 3
    x = torch.zeros(d, dtype=torch.float64)
    x[0], x[1] = (0.8, 0.6) if name.startswith("jopeq") else (0.4, 0.3)  # l2 norm 1 (jopeq: zeta = 1) / 0.5
    return x


def test_every_registered_mechanism_gets_a_fast_path_at_its_defaults():
    for name in mechanisms.names():
        sampler = bulk_sampler(name)
        assert sampler.path == "tiled" and not sampler.generic_default, name


# configurations whose bulk path differs from the defaults': DP-SQ's adaptive range tiles (B copies have one
# copy's [min v, max v]); MSP-FL's paper004 split shares the client's hidden m across coordinates, so it cannot
# be tiled and samples through its own batch (one m per row)
OTHER_PATHS = {
    "dpsq adaptive": ("dpsq", {**CHEAP["dpsq"], "range": "adaptive"}, "tiled"),
    "msp paper004": ("msp", {"compat": "paper004", "m_max": 3}, "mechanism batch"),
    "mspdq paper004": ("mspdq", {"compat": "paper004", "m_max": 3, "start": "split", "bits": 3}, "mechanism batch"),
}


def test_configurations_that_cannot_be_tiled_use_the_mechanisms_own_batch_and_say_why():
    for name, params, path in OTHER_PATHS.values():
        sampler = bulk_sampler(mechanisms.create(name, **params))
        assert sampler.path == path and not sampler.generic_default, name
    paper_split = bulk_sampler(mechanisms.create("msp", compat="paper004", m_max=3))
    assert "each row draws its own hidden m" in paper_split.description


def test_a_mechanism_declaring_no_bulk_path_in_its_configuration_takes_one_call_per_output():
    class Untileable(Laplace):  # re-declares: a per-call quantity couples the coordinates here
        def tiling(self):
            return None

    sampler = bulk_sampler(Untileable(scale=1.0, private_seed=0))
    assert sampler.path == "per call" and not sampler.generic_default
    assert "declares it cannot be sampled in bulk in this configuration" in sampler.description


def test_a_broken_batch_sampler_is_named_in_the_error():
    class Broken(Laplace):
        def tiling(self):
            return None

        def batch_sampling(self):
            return mechanisms.BatchSampling(lambda x, count, seed: torch.zeros(count + 1, x.numel()), "broken")

    with pytest.raises(ValueError, match=r"laplace.batch_sampling\(\) must return one output row per input row"):
        bulk_sampler(Broken(scale=1.0, private_seed=0))(torch.zeros(2), 10, 0)


def test_a_subclass_of_a_registered_mechanism_does_not_inherit_its_tiling():
    class NoClip(Laplace):
        def _clip(self, x):
            return x

    sampler = bulk_sampler(NoClip(scale=1.0, private_seed=0))
    assert sampler.path == "per call" and sampler.generic_default
    assert "generic default: the mechanism declares neither tiling nor batch_sampling" in sampler.description
    out = sampler(torch.tensor([5.0]), 200, 0)
    assert out.shape == (200, 1) and abs(out.mean().item() - 5.0) < 0.5  # the clip is really skipped


@pytest.mark.parametrize("case", [*mechanisms.names(), *OTHER_PATHS])
def test_fast_path_has_the_law_of_separate_calls(case):
    name, params, path = OTHER_PATHS.get(case, (case, CHEAP.get(case, {}), "tiled"))
    m = mechanisms.create(name, private_seed=3, **params)
    assert bulk_sampler(m).path == path
    x = _input(name)
    fast = bulk_sampler(m, seed=1)(x, 20_000, 0).numpy()
    slow = BulkSampler(m, seed=2, per_call=True)(x, 300, 0).numpy()
    assert fast.shape == (20_000, x.numel()) and slow.shape == (300, x.numel())
    assert stats.ks_2samp(fast[:, 0], slow[:, 0]).pvalue > 1e-4
    assert stats.ks_2samp(np.linalg.norm(fast, axis=1), np.linalg.norm(slow, axis=1)).pvalue > 1e-4


def test_clip_rescaling_clips_each_copy_like_one_call():
    m = mechanisms.create("laplace", scale=0.01, clip=0.5, private_seed=0)
    out = bulk_sampler(m)(torch.tensor([5.0, 0.0]), 100_000, 0)
    np.testing.assert_allclose(out.mean(dim=0).numpy(), [0.5, 0.0], atol=1e-3)


def test_outputs_are_reproducible_and_streams_independent():
    a = bulk_sampler("gaussian", seed=4)(torch.zeros(2), 1000, 0)
    b = bulk_sampler("gaussian", seed=4)(torch.zeros(2), 1000, 0)
    c = bulk_sampler("gaussian", seed=4)(torch.zeros(2), 1000, 1)
    assert torch.equal(a, b) and not torch.equal(a, c)


def test_batched_callable_is_called_on_chunks_and_checked():
    def noisy(x, seed):
        return x + torch.randn(x.shape, generator=torch.Generator().manual_seed(seed), dtype=torch.float64)

    sampler = bulk_sampler(noisy)
    assert sampler.path == "batched callable"
    assert sampler(torch.zeros(4), 500, 0).shape == (500, 4)
    with pytest.raises(ValueError, match="one output row per input row"):
        bulk_sampler(lambda x, seed: x[:1])(torch.zeros(4), 10, 0)


def test_bad_mechanism_is_a_value_error():
    with pytest.raises(ValueError, match="unknown mechanism 'nope'"):
        bulk_sampler("nope")
    with pytest.raises(ValueError, match="mechanism must be"):
        bulk_sampler(42)


def test_weak_cepam_noise_on_a_large_clip_stays_in_the_coders_range():
    # scale 0.007 on an l1 clip of 50: 4,096 tiled copies would put clip' / radius past 2^32 (a ValueError)
    m = mechanisms.create("cepam-laplace", scale=0.007, clip=50.0, private_seed=0)
    sampler = bulk_sampler(m, seed=0)
    out = sampler(torch.tensor([0.5, -0.25]), 20_000, 0)
    assert out.shape == (20_000, 2) and torch.isfinite(out).all()
    assert (out - torch.tensor([0.5, -0.25], dtype=torch.float64)).std(0).mean() == pytest.approx(
        0.007 * 2 ** 0.5, rel=0.05)  # Laplace(b) has std b sqrt(2)
