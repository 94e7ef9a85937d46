"""DP-SGD's step (auditkit.fl.dp_sgd) against Opacus itself: the clipped per-example gradient sum, and the noise."""
import copy

import pytest
import torch
from opacus import GradSampleModule
from opacus.optimizers import DPOptimizer
from scipy import stats
from torch import nn

from auditkit.fl.dp_sgd import DPSGD, clipped_gradient_sum, clipped_gradient_sums
from auditkit.fl.local_training import LocalSteps, LocalTraining, train_clients_batched
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.spec import Optimizer
from auditkit.fl.params import ParamLayout, flat_parameters
from auditkit.mechanisms.randomness import generator
from auditkit.models import create_model

# Opacus's GradSampleModule hooks warn that the inputs do not require gradients (they need not)
pytestmark = pytest.mark.filterwarnings("ignore:Full backward hook is firing:UserWarning")

SHAPE = (1, 28, 28)
EXAMPLES, PADDING, EXPECTED = 8, 3, 6  # real examples per batch, masked padding rows, Opacus's expected_batch_size


def _model(name: str) -> nn.Module:
    torch.manual_seed(0)
    return create_model(name, input_shape=SHAPE).double()


def _batches(count: int, seed: int = 1) -> list[tuple[torch.Tensor, torch.Tensor]]:
    g = torch.Generator().manual_seed(seed)
    return [(torch.rand(EXAMPLES, *SHAPE, generator=g, dtype=torch.float64),
             torch.randint(10, (EXAMPLES,), generator=g)) for _ in range(count)]


def _per_example(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each example's gradient norm and the unclipped gradient sum, from Opacus's per-sample gradients
    (independent of the code under test)."""
    gsm = GradSampleModule(copy.deepcopy(model), loss_reduction="mean")
    nn.functional.cross_entropy(gsm(x), y).backward()
    samples = torch.cat([p.grad_sample.flatten(1) for p in gsm.parameters()], dim=1)
    return samples.norm(dim=1), samples.sum(0)


def _opacus(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float, noise_multiplier: float = 0.0,
            steps: int = 1) -> list[torch.Tensor]:
    """Opacus's DP-SGD gradient (p.grad after ``pre_step``, flat): GradSampleModule + DPOptimizer with the expected
    batch size, as Opacus is used (mean loss), ``steps`` times on the same batch."""
    gsm = GradSampleModule(copy.deepcopy(model), loss_reduction="mean")
    optimizer = DPOptimizer(torch.optim.SGD(gsm.parameters(), lr=0.1), noise_multiplier=noise_multiplier,
                            max_grad_norm=clip, expected_batch_size=EXPECTED, loss_reduction="mean")
    grads = []
    for _ in range(steps):
        optimizer.zero_grad()
        nn.functional.cross_entropy(gsm(x), y).backward()
        optimizer.pre_step()
        grads.append(torch.cat([p.grad.flatten() for p in gsm.parameters()]).detach().clone())
    return grads


def _ours(model: nn.Module, x: torch.Tensor, y: torch.Tensor, clip: float) -> torch.Tensor:
    """auditkit's clipped sum / B on the batch with PADDING masked rows appended (they must not count)."""
    layout = ParamLayout.of(model)
    params = layout.unflatten(flat_parameters(model))
    padded_x = torch.cat([x, torch.rand(PADDING, *SHAPE, dtype=x.dtype)])
    padded_y = torch.cat([y, torch.zeros(PADDING, dtype=y.dtype)])
    mask = torch.cat([torch.ones(EXAMPLES), torch.zeros(PADDING)]).double()
    sums, losses = clipped_gradient_sum(model, params, padded_x, padded_y, mask, clip)
    assert losses.shape == (EXAMPLES + PADDING,)
    return layout.flatten(sums) / EXPECTED


@pytest.mark.parametrize("name", ["mlp", "cnn"])
def test_clipped_sum_equals_opacus_with_zero_noise(name):
    """Three fixed batches of 8 examples, C the median example norm (so 4 of 8 are clipped): auditkit's
    sum_i clip_C(g_i) / B equals Opacus's p.grad to 1e-6 (Opacus clips by C / (norm + 1e-6): a 1e-6 relative
    difference at most; measured about 1e-9)."""
    model = _model(name)
    for x, y in _batches(3):
        norms, unclipped = _per_example(model, x, y)
        clip = float(norms.median())
        assert int((norms > clip).sum()) == 4
        expected = _opacus(model, x, y, clip)[0]
        torch.testing.assert_close(_ours(model, x, y, clip), expected, rtol=0, atol=1e-6)
        assert (unclipped / EXPECTED - expected).abs().max() > 1e-3  # clipping changed the gradient


def test_client_vmap_equals_one_opacus_run_per_client():
    """Four clients at once (each its own parameters and batch, client k with k of its 8 rows masked out) through
    the vmap over clients equal four single-client Opacus runs on each client's unmasked rows."""
    model = _model("mlp")
    layout = ParamLayout.of(model)
    g = torch.Generator().manual_seed(2)
    starts = flat_parameters(model) + 0.05 * torch.randn(4, layout.size, generator=g, dtype=torch.float64)
    x = torch.rand(4, EXAMPLES, *SHAPE, generator=g, dtype=torch.float64)
    y = torch.randint(10, (4, EXAMPLES), generator=g)
    mask = torch.ones(4, EXAMPLES, dtype=torch.float64)
    for k in range(4):
        mask[k, EXAMPLES - k:] = 0
    clip = 0.5
    sums, losses = clipped_gradient_sums(model, layout.unflatten(starts), x, y, mask, clip)
    assert losses.shape == (4, EXAMPLES)
    ours = layout.flatten(sums, batch_dims=1) / EXPECTED
    for k in range(4):
        single = copy.deepcopy(model)
        torch.nn.utils.vector_to_parameters(starts[k].clone(), single.parameters())
        kept = mask[k].bool()
        torch.testing.assert_close(ours[k], _opacus(single, x[k][kept], y[k][kept], clip)[0], rtol=0, atol=1e-6)
    assert (ours[0] - ours[1]).abs().max() > 1e-3  # the clients differ


def test_noise_std_per_coordinate_is_z_times_c_and_matches_opacus():
    """z = 1.1, C = 0.5. One local step (lr 1, no momentum) of 16 clients of the linear model (P = 7,850): the same
    step with and without noise differ by z C xi / B, so (difference x B) over 125,600 coordinates is N(0, (zC)^2):
    KS p > 1e-3, std within 1% (the std's standard error at n = 1.26e5 is 0.2%) and |mean| < 4 zC / sqrt(n).
    Opacus's own noise (DPOptimizer, the mlp, 4 steps: 103,272 coordinates) passes the same std check, and the two
    samples agree (two-sample KS p > 1e-3)."""
    z, clip, clients, batch = 1.1, 0.5, 16, 4
    model = _model("linear")
    layout = ParamLayout.of(model)
    g = torch.Generator().manual_seed(3)
    x = torch.rand(clients, 1, batch, *SHAPE, generator=g, dtype=torch.float64)
    y = torch.randint(10, (clients, 1, batch), generator=g)
    start, momentum = flat_parameters(model), torch.zeros(clients, layout.size, dtype=torch.float64)
    mask = torch.ones(clients, 1, batch)

    def step(noise_multiplier: float) -> torch.Tensor:
        noise = tuple(generator(7, f"dp-sgd-noise/1/{k}") for k in range(clients))
        dp_sgd = DPSGD(noise_multiplier, clip, batch, mask, noise)
        training = LocalTraining(LocalOptimizer(Optimizer.SGD, 1.0, 0.0))
        return train_clients_batched(model, start, LocalSteps.gathered(x, y), training, dp_sgd=dp_sgd).params

    ours = ((step(0.0) - step(z)) * batch).flatten()
    assert ours.numel() == 125_600
    _check_normal(ours, z * clip)
    mlp = _model("mlp")
    (xo, yo), = _batches(1, seed=4)
    torch.manual_seed(5)  # Opacus draws its noise from torch's global generator
    clean = _opacus(mlp, xo, yo, clip)[0]
    theirs = torch.cat([(noisy - clean) * EXPECTED for noisy in _opacus(mlp, xo, yo, clip, z, steps=4)])
    assert theirs.numel() == 103_272
    _check_normal(theirs, z * clip)
    assert stats.ks_2samp(ours.numpy(), theirs.numpy()).pvalue > 1e-3


def _check_normal(sample: torch.Tensor, std: float) -> None:
    n = sample.numel()
    assert stats.kstest(sample.numpy(), "norm", args=(0.0, std)).pvalue > 1e-3
    assert float(sample.std()) == pytest.approx(std, rel=0.01)
    assert abs(float(sample.mean())) < 4 * std / n ** 0.5
