import copy

import pytest
import torch

from auditkit.fl.spec import DPSGDSpec, Optimizer
from auditkit.fl.local_training import (LocalResult, LocalSteps, LocalTraining, blocks, local_batches,
                                         recomputed_blocks, train_clients_batched, train_clients_sequential)
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.sampling import draw_batches
from auditkit.fl.params import ParamLayout, flat_parameters
from auditkit.models import create_model


def _sgd(train, model, start, momentum, inputs, labels, *, lr, mu, dp_sgd=None):
    """Momentum SGD with carried-over momentum, the papers' local training."""
    return train(model, start, LocalSteps.gathered(inputs, labels), LocalTraining(LocalOptimizer(Optimizer.SGD, lr, mu)),
                 state={"momentum": momentum}, dp_sgd=dp_sgd)


def _problem(name, clients, tau, batch, shape=(1, 28, 28), seed=0):
    torch.manual_seed(seed)
    model = create_model(name, input_shape=shape)
    start = flat_parameters(model)
    inputs = torch.rand(clients, tau, batch, *shape)
    labels = torch.randint(0, 10, (clients, tau, batch))
    momentum = 0.01 * torch.randn(clients, start.numel())  # carried-over state from earlier rounds
    return model, start, momentum, inputs, labels


@pytest.mark.parametrize(("name", "batch"), [("cnn", 1), ("mlp", 4), ("linear", 8)])
def test_batched_equals_sequential(name, batch):
    model, start, momentum, inputs, labels = _problem(name, clients=5, tau=15, batch=batch)
    a = _sgd(train_clients_batched, model, start, momentum, inputs, labels, lr=0.05, mu=0.9)
    b = _sgd(train_clients_sequential, model, start, momentum, inputs, labels, lr=0.05, mu=0.9)
    assert torch.allclose(a.params, b.params, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.momentum, b.momentum, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.loss, b.loss, atol=1e-5)
    # training really moved every client, and differently (different data)
    assert (a.params - start).abs().amax(dim=1).min() > 1e-3
    assert not torch.allclose(a.params[0], a.params[1])


def test_single_step_is_one_sgd_step_with_momentum():
    model, start, momentum, inputs, labels = _problem("linear", clients=1, tau=1, batch=3)
    out = _sgd(train_clients_batched, model, start, momentum, inputs, labels, lr=0.1, mu=0.9)
    torch.nn.utils.vector_to_parameters(start.clone(), model.parameters())
    loss = torch.nn.functional.cross_entropy(model(inputs[0, 0]), labels[0, 0])
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, list(model.parameters()))])
    expected_buffer = 0.9 * momentum[0] + grad
    assert torch.allclose(out.momentum[0], expected_buffer, atol=1e-6)
    assert torch.allclose(out.params[0], start - 0.1 * expected_buffer, atol=1e-6)


def test_layout_round_trips_stacked_parameters():
    model = create_model("cnn")
    layout = ParamLayout.of(model)
    flat = torch.randn(3, layout.size)
    assert layout.size == 6422
    assert torch.equal(layout.flatten(layout.unflatten(flat), batch_dims=1), flat)


@pytest.mark.parametrize("name", ["cnn", "mlp"])
def test_dp_sgd_batched_equals_sequential(name):
    """DP-SGD on real Poisson batches (3 clients of 30 examples, expected batch 4, so rows are padded and masked):
    the batched path (per-example gradients by torch.func inside the client vmap) and the sequential reference (one
    backward pass per example) give the same parameters, momentum and loss to 1e-5 in float32, with the same keyed
    noise; the noise is not zero, so the agreement is not a noiseless coincidence."""
    model, start, momentum, _, _ = _problem(name, clients=3, tau=3, batch=1)
    data = torch.rand(90, 1, 28, 28)
    targets = torch.randint(0, 10, (90,))
    own = list(torch.arange(90).reshape(3, 30))
    dp_sgd = DPSGDSpec(noise_multiplier=1.1, max_grad_norm=0.5)
    batches, _, private = local_batches(own, [0, 1, 2], 3, seed=0, tau=3, batch_size=4, dp_sgd=dp_sgd)
    assert batches.shape[2] > 4 and (private.mask == 0).any()  # padded to the round's largest Poisson batch
    runs = []
    for train in (train_clients_batched, train_clients_sequential):
        _, _, private = local_batches(own, [0, 1, 2], 3, seed=0, tau=3, batch_size=4, dp_sgd=dp_sgd)
        runs.append(_sgd(train, model, start, momentum, data[batches], targets[batches], lr=0.05, mu=0.9,
                         dp_sgd=private))
    a, b = runs
    assert torch.allclose(a.params, b.params, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.momentum, b.momentum, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.loss, b.loss, atol=1e-5)
    _, _, quiet = local_batches(own, [0, 1, 2], 3, seed=0, tau=3, batch_size=4,
                                dp_sgd=DPSGDSpec(noise_multiplier=1e-6, max_grad_norm=0.5))
    noiseless = _sgd(train_clients_batched, model, start, momentum, data[batches], targets[batches], lr=0.05, mu=0.9,
                     dp_sgd=quiet)
    assert (a.params - noiseless.params).abs().max() > 1e-3


def test_without_dp_sgd_local_batches_are_the_uniform_draws():
    own = [torch.arange(0, 10), torch.arange(10, 30)]
    batches, active, private = local_batches(own, [1], 2, seed=4, tau=3, batch_size=5)
    assert private is None and active is None and torch.equal(batches, draw_batches(own, [1], 2, seed=4, tau=3, batch_size=5))


def _bn_net(channels: int = 1) -> torch.nn.Module:
    """A small conv net with BatchNorm in both its 2d and 1d forms (running statistics as buffers). No bias before
    a BatchNorm, as in ResNets: its gradient is zero up to rounding, which Adam's g / |g| would amplify."""
    torch.manual_seed(1)
    return torch.nn.Sequential(
        torch.nn.Conv2d(channels, 4, 3, bias=False), torch.nn.BatchNorm2d(4), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(4 * 13 * 13, 16, bias=False), torch.nn.BatchNorm1d(16), torch.nn.ReLU(),
        torch.nn.Linear(16, 10))


def _examples(count: int = 60, seed: int = 2) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(count, 1, 28, 28, generator=g), torch.randint(0, 10, (count,), generator=g)


def _both(model, start, steps, training, **kwargs):
    return (train_clients_batched(model, start, steps, training, **kwargs),
            train_clients_sequential(model, start, steps, training, **kwargs))


GPU_SCALE = 1e-3  # GPU float32 results agree to this fraction of each tensor's largest magnitude (_close_scaled)


def _close_scaled(a, b, scale=GPU_SCALE):
    """Every tensor of ``a`` and ``b`` within ``scale`` times its largest magnitude in ``a``. The BatchNorm net
    (batches of 4-5) amplifies rounding: on the CPU, inputs changed by 1e-7 relative move the parameters by 1.4e-5
    (scale 1.06) and the momentum by 1.1e-4 (scale 2.9) after 4 steps, so two GPU kernels' summation orders
    differ by ~1e-4; a real error (a missed step: lr x gradient ~ 0.05) is far above 1e-3 x scale, and every
    client moved by more than 0.18."""
    pairs = [("params", a.params, b.params), ("loss", a.loss, b.loss)]
    pairs += [(key, a.state[key], b.state[key]) for key in a.state]
    pairs += [(key, a.buffers[key].double(), b.buffers[key].double()) for key in a.buffers]
    assert a.state.keys() == b.state.keys() and a.buffers.keys() == b.buffers.keys()
    for key, x, y in pairs:
        torch.testing.assert_close(x, y, rtol=0, atol=scale * float(x.abs().max()), msg=key)


CPU_SCALE = 3e-4  # CPU float32: the BatchNorm net's rounding, amplified as _close_scaled says (measured up to 1.1e-4)


def _close(a, b):
    """Batched and sequential (or chunked and whole) on the CPU: _close_scaled at ``CPU_SCALE``. vmap's kernels and
    the plain ones round differently, and by how much depends on the CPU and the net's random start: the momentum of
    scale 2.9 differed by 4.5e-5 on torch 2.14 (Intel), by 1.9e-5 of scale 1.5 on an AMD EPYC with AVX2, either
    beyond an elementwise 1e-5 + 1e-4 relative on entries near zero; the 1d BatchNorm's running mean (a mean of 5
    outputs that cancel) by 1.1e-4 of its largest on torch 2.5 (AVX2). A missed step moves any of them by ~0.05."""
    _close_scaled(a, b, scale=CPU_SCALE)


def _close_on(device, a, b):
    """_close on the CPU, _close_scaled at ``GPU_SCALE`` on a GPU."""
    _close_scaled(a, b, scale=GPU_SCALE if device.type == "cuda" else CPU_SCALE)


@pytest.mark.parametrize("mode", ["train", "eval"])
def test_batchnorm_batched_equals_sequential(mode):
    """Train mode: each client normalises by its batch's statistics and its running statistics move (differently
    per client); eval mode: the received statistics normalise and stay. Batched and sequential agree either way."""
    model = _bn_net()
    x, y = _examples()
    own = list(torch.arange(60).reshape(3, 20))
    indices, _, _ = local_batches(own, [0, 1, 2], 1, seed=0, tau=4, batch_size=5)
    steps = LocalSteps(x, y, indices)
    start = flat_parameters(model)
    shared = {k: v.clone() for k, v in model.named_buffers()}
    shared["1.running_var"] = torch.full((4,), 2.0)  # received statistics that are not the initial ones
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9), mode=mode)
    a, b = _both(model, start, steps, training, buffers=shared)
    _close(a, b)
    means = a.buffers["1.running_mean"]
    if mode == "train":
        assert not torch.allclose(means[0], means[1]) and (means.abs() > 0).all()
        assert a.buffers["1.num_batches_tracked"].tolist() == [4, 4, 4]
    else:
        assert torch.equal(means, torch.zeros(3, 4)) and torch.equal(a.buffers["1.running_var"][1], shared["1.running_var"])
    assert (a.params - start).abs().amax(1).min() > 1e-3


@pytest.mark.parametrize("weight_decay", [0.0, 0.01])
def test_adam_batched_equals_torch_adam(weight_decay):
    """Adam's fused flat update equals torch.optim.Adam, state included, from a fresh and from a carried state."""
    model = _bn_net()
    x, y = _examples()
    own = list(torch.arange(60).reshape(3, 20))
    indices, _, _ = local_batches(own, [0, 1, 2], 1, seed=1, tau=3, batch_size=4)
    steps = LocalSteps(x, y, indices)
    training = LocalTraining(LocalOptimizer(Optimizer.ADAM, 1e-3, weight_decay=weight_decay))
    a, b = _both(model, flat_parameters(model), steps, training)
    _close(a, b)
    assert a.state["step"].tolist() == [3.0, 3.0, 3.0]
    again_a, again_b = _both(model, a.params, steps, training, state=a.state, buffers=a.buffers)
    _close(again_a, again_b)
    assert again_a.state["step"].tolist() == [6.0, 6.0, 6.0]


def test_local_epochs_pass_over_every_example_and_idle_unequal_clients():
    """Two epochs over clients of 7, 12 and 3 examples in batches of 4: 4, 6 and 2 steps; each epoch holds every
    example of the client (the last batch filled from the same permutation); the shorter clients idle through the
    rest, and the batched path, which runs those steps masked, equals the sequential one that skips them."""
    own = [torch.arange(0, 7), torch.arange(7, 19), torch.arange(19, 22)]
    indices, active, private = local_batches(own, [0, 1, 2], 5, seed=3, tau=99, batch_size=4, local_epochs=2)
    assert private is None and indices.shape == (3, 6, 4)
    assert active.sum(1).tolist() == [4, 6, 2]
    for row, ex, per_epoch in zip(indices, own, (2, 3, 1)):
        for epoch in range(2):
            taken = row[epoch * per_epoch:(epoch + 1) * per_epoch].flatten()
            assert set(taken.tolist()) == set(ex.tolist())
    again, _, _ = local_batches(own, [0, 1, 2], 5, seed=3, tau=99, batch_size=4, local_epochs=2)
    assert torch.equal(indices, again)
    other, _, _ = local_batches(own, [0, 1, 2], 6, seed=3, tau=99, batch_size=4, local_epochs=2)
    assert not torch.equal(indices, other)
    model = _bn_net()
    x, y = _examples(22)
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9))
    a, b = _both(model, flat_parameters(model), LocalSteps(x, y, indices, active), training)
    _close(a, b)
    assert a.buffers["1.num_batches_tracked"].tolist() == [4, 6, 2]


@pytest.mark.parametrize("epochs", [None, 2])
def test_chunks_give_the_same_clients(epochs):
    """Training 5 clients in chunks of 2 gives what one batched program of 5 gives, with tau steps and with local
    epochs on unequal clients (chunks grouped by step count, each stopping at its longest client)."""
    model = _bn_net()
    x, y = _examples()
    own = [torch.arange(0, 4), torch.arange(4, 30), torch.arange(30, 38), torch.arange(38, 50), torch.arange(50, 60)]
    indices, active, _ = local_batches(own, list(range(5)), 1, seed=0, tau=3, batch_size=4, local_epochs=epochs)
    assert (active is None) == (epochs is None)
    steps = LocalSteps(x, y, indices, active)
    whole = train_clients_batched(model, flat_parameters(model), steps,
                                  LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9)))
    parts = train_clients_batched(model, flat_parameters(model), steps,
                                  LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9), chunk=2))
    _close(whole, parts)


def test_bf16_autocast_trains_close_to_fp32():
    """bf16 autocast (8 mantissa bits) moves the parameters as fp32 does: the updates point the same way (cosine >
    0.98) and differ by a fifth of their length at most; the parameters stay float32."""
    model = create_model("cnn")
    x, y = _examples()
    own = list(torch.arange(60).reshape(3, 20))
    indices, _, _ = local_batches(own, [0, 1, 2], 1, seed=0, tau=3, batch_size=8)
    start = flat_parameters(model)
    fp32 = train_clients_batched(model, start, LocalSteps(x, y, indices), LocalTraining(LocalOptimizer(lr=0.05)))
    bf16 = train_clients_batched(model, start, LocalSteps(x, y, indices),
                                 LocalTraining(LocalOptimizer(lr=0.05), precision="bf16"))
    assert bf16.params.dtype == torch.float32
    moved, moved_bf16 = (fp32.params - start).flatten(), (bf16.params - start).flatten()
    assert 0 < (moved_bf16 - moved).norm() < 0.2 * moved.norm()
    assert torch.nn.functional.cosine_similarity(moved, moved_bf16, dim=0) > 0.98


def test_bf16_autocast_trains_batchnorm_models_in_both_paths():
    """Under bf16 autocast BatchNorm normalises in float32 (vmap's batch_norm takes no mixed dtypes): a BatchNorm
    model trains batched and sequentially, to the same parameters within bf16's precision, buffers float32."""
    model = _bn_net()
    x, y = _examples()
    own = list(torch.arange(60).reshape(3, 20))
    indices, _, _ = local_batches(own, [0, 1, 2], 1, seed=0, tau=2, batch_size=8)
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9), precision="bf16")
    start = flat_parameters(model)
    a, b = _both(model, start, LocalSteps(x, y, indices), training)
    assert a.buffers["1.running_mean"].dtype == torch.float32 and a.params.dtype == torch.float32
    moved = (a.params - start).norm()
    assert moved > 0 and (a.params - b.params).norm() < 0.1 * moved
    assert not model[1]._forward_pre_hooks  # the float32 casts are removed after training


# ------------------------------------------------------------------ on a device (cpu, and cuda where there is one)


def _device_problem(device, *, epochs=None, tau=4, seed=0):
    """The BatchNorm net trained in train mode by 5 clients of unequal sizes, everything on ``device``."""
    model = _bn_net().to(device)
    x, y = _examples()
    own = [torch.arange(0, 4), torch.arange(4, 30), torch.arange(30, 38), torch.arange(38, 50), torch.arange(50, 60)]
    indices, active, _ = local_batches(own, list(range(5)), 1, seed=seed, tau=tau, batch_size=5, local_epochs=epochs)
    steps = LocalSteps(x.to(device), y.to(device), indices.to(device), None if active is None else active.to(device))
    start = flat_parameters(model)
    momentum = 0.01 * torch.randn(5, start.numel(), generator=torch.Generator().manual_seed(seed)).to(device)
    return model, start, steps, {"momentum": momentum}


def test_batched_equals_sequential_with_batchnorm_on_device(device, exact_fp32):
    """On the device, the vmap'ed clients (BatchNorm in train mode, carried momentum) equal the sequential
    torch.optim reference, to 1e-5 on the CPU and to 1e-3 of each tensor's scale on a GPU (float32, TF32 off:
    vmap's grouped convolutions and the plain ones are different kernels, ``_close_scaled``); the results stay on
    the device, and BatchNorm's running statistics moved per client."""
    model, start, steps, state = _device_problem(device)
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9))
    a, b = _both(model, start, steps, training, state=state)
    _close_on(device, a, b)
    assert a.params.device.type == device.type and a.buffers["1.running_mean"].device.type == device.type
    assert a.buffers["1.num_batches_tracked"].tolist() == [4] * 5
    means = a.buffers["1.running_mean"]
    assert not torch.allclose(means[0], means[1]) and (means.abs() > 0).all()
    assert (a.params - start).abs().amax(1).min() > 1e-3


def test_cuda_training_equals_cpu_training(cuda, exact_fp32):
    """The same clients trained batched on the GPU and on the CPU agree to 1e-3 of each tensor's scale (float32,
    TF32 off; the GPU's different summation order only, amplified by BatchNorm: ``_close_scaled``), parameters,
    momentum, BatchNorm buffers and losses alike."""
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9))
    model, start, steps, state = _device_problem(torch.device("cpu"))
    on_cpu = train_clients_batched(model, start, steps, training, state=state)
    model, start, steps, state = _device_problem(cuda)
    on_gpu = train_clients_batched(model, start, steps, training, state=state)
    assert on_gpu.params.is_cuda
    moved = (on_cpu.params - start.cpu()).abs().amax(1).min()
    assert moved > 1e-3  # the agreement is not that of two unmoved models
    _close_scaled(on_cpu, LocalResult(on_gpu.params.cpu(), {k: v.cpu() for k, v in on_gpu.state.items()},
                                      {k: v.cpu() for k, v in on_gpu.buffers.items()}, on_gpu.loss.cpu()))


def test_bf16_autocast_on_device_stays_close_to_fp32(device):
    """bf16 autocast on the device (the GPU's own bf16 kernels on cuda): the parameters stay float32 on the device,
    and the update is within a fifth of its length of the fp32 one, pointing the same way (cosine > 0.98)."""
    model = create_model("cnn").to(device)
    x, y = _examples()
    own = list(torch.arange(60).reshape(3, 20))
    indices, _, _ = local_batches(own, [0, 1, 2], 1, seed=0, tau=3, batch_size=8)
    steps = LocalSteps(x.to(device), y.to(device), indices.to(device))
    start = flat_parameters(model)
    fp32 = train_clients_batched(model, start, steps, LocalTraining(LocalOptimizer(lr=0.05)))
    bf16 = train_clients_batched(model, start, steps, LocalTraining(LocalOptimizer(lr=0.05), precision="bf16"))
    assert bf16.params.dtype == torch.float32 and bf16.params.device.type == device.type
    moved, moved_bf16 = (fp32.params - start).flatten(), (bf16.params - start).flatten()
    assert 0 < (moved_bf16 - moved).norm() < 0.2 * moved.norm()
    assert torch.nn.functional.cosine_similarity(moved, moved_bf16, dim=0) > 0.98


def test_bf16_autocast_trains_batchnorm_on_device(device):
    """bf16 with BatchNorm in train mode on the device: batched and sequential within bf16's precision, the
    running statistics float32 and moved."""
    model, start, steps, state = _device_problem(device, tau=2)
    training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9), precision="bf16")
    a, b = _both(model, start, steps, training, state=state)
    assert a.buffers["1.running_mean"].dtype == torch.float32 and a.params.dtype == torch.float32
    assert (a.buffers["1.running_mean"].abs() > 0).all()
    moved = (a.params - start).norm()
    assert moved > 0 and (a.params - b.params).norm() < 0.1 * moved


@pytest.mark.parametrize("epochs", [None, 2])
def test_chunks_sized_by_the_memory_budget_give_the_same_clients_on_device(device, monkeypatch, epochs, exact_fp32):
    """A memory budget of about 2.5 clients (``auditkit.fl.memory``'s CPU budget, or its fraction of the GPU's
    free memory) makes ``client_chunk`` pick chunks of 2 or 3 of the 5 clients; training in those chunks on the
    device gives what one program of all 5 gives (tau steps, and local epochs on unequal clients; on a GPU to
    ``_close_scaled``: other batch sizes may pick other kernels)."""
    from auditkit.fl import memory

    model, start, steps, state = _device_problem(device, epochs=epochs)
    sized = lambda: memory.client_chunk(model, (1, 28, 28), 5, device)  # noqa: E731
    default = sized()
    assert default >= 5  # the default budget holds the 5 clients at once
    name = "CHUNK_BUDGET_GPU" if device.type == "cuda" else "CHUNK_BUDGET_CPU"
    monkeypatch.setattr(memory, name, getattr(memory, name) * 2.5 / default)
    chunk = sized()
    assert 2 <= chunk <= 3
    optimizer = LocalOptimizer(Optimizer.SGD, 0.05, 0.9)
    whole = train_clients_batched(model, start, steps, LocalTraining(optimizer), state=state)
    parts = train_clients_batched(model, start, steps, LocalTraining(optimizer, chunk=chunk), state=state)
    _close_on(device, whole, parts)
    assert parts.params.device.type == device.type


def _partly_frozen() -> torch.nn.Module:
    """The ``mlp`` with its first layer (784 x 32 + 32) frozen: 698 trained parameters of 25,818."""
    torch.manual_seed(0)
    model = create_model("mlp")
    model[1].requires_grad_(False)
    return model


@pytest.mark.parametrize("private", [False, True], ids=["sgd", "dp-sgd"])
def test_frozen_parameters_are_neither_trained_nor_in_the_update_on_both_paths(private):
    """Both paths train the 698 trained parameters only and agree on them to 1e-5 (float32), with and without
    DP-SGD (whose per-example clipping then spans the trained parameters only); the frozen layer is bit for bit
    what it was, although its gradient is not zero."""
    model = _partly_frozen()
    frozen = model[1].weight.detach().clone(), model[1].bias.detach().clone()
    start = flat_parameters(model)
    assert start.shape == (698,) == (ParamLayout.of(model).size,)
    data, targets = torch.rand(90, 1, 28, 28), torch.randint(0, 10, (90,))
    own = list(torch.arange(90).reshape(3, 30))
    spec = DPSGDSpec(noise_multiplier=1.1, max_grad_norm=0.5) if private else None
    momentum = 0.01 * torch.randn(3, 698, generator=torch.Generator().manual_seed(1))
    runs = []
    for train in (train_clients_batched, train_clients_sequential):
        batches, _, dp_sgd = local_batches(own, [0, 1, 2], 1, seed=0, tau=3, batch_size=4, dp_sgd=spec)
        runs.append(_sgd(train, model, start, momentum, data[batches], targets[batches], lr=0.05, mu=0.9,
                         dp_sgd=dp_sgd))
        assert torch.equal(model[1].weight, frozen[0]) and torch.equal(model[1].bias, frozen[1])
    a, b = runs
    assert a.params.shape == b.params.shape == a.momentum.shape == (3, 698)
    assert torch.allclose(a.params, b.params, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.momentum, b.momentum, atol=1e-5, rtol=1e-5)
    assert torch.allclose(a.loss, b.loss, atol=1e-5)
    assert (a.params - start).abs().amax(dim=1).min() > 1e-3
    unfrozen = copy.deepcopy(model).requires_grad_(True)  # the frozen layer would have moved had it been trained
    loss = torch.nn.functional.cross_entropy(unfrozen(data[:4]), targets[:4])
    assert torch.autograd.grad(loss, unfrozen[1].weight)[0].abs().max() > 1e-4


def test_one_step_with_a_frozen_layer_is_sgd_on_the_trained_parameters():
    """One batched step: w <- w - lr (mu m + g) with g the gradient with respect to the trained parameters of the
    loss of the whole model (the frozen layer in its forward pass)."""
    model = _partly_frozen()
    start = flat_parameters(model)
    inputs, labels = torch.rand(1, 1, 3, 1, 28, 28), torch.randint(0, 10, (1, 1, 3))
    momentum = 0.01 * torch.randn(1, 698, generator=torch.Generator().manual_seed(1))
    out = _sgd(train_clients_batched, model, start, momentum, inputs, labels, lr=0.1, mu=0.9)
    trained = [p for p in model.parameters() if p.requires_grad]
    loss = torch.nn.functional.cross_entropy(model(inputs[0, 0]), labels[0, 0])
    grad = torch.cat([g.flatten() for g in torch.autograd.grad(loss, trained)])
    assert torch.allclose(out.params[0], start - 0.1 * (0.9 * momentum[0] + grad), atol=1e-6)


class _Block(torch.nn.Module):
    """A residual block with BatchNorm and dropout: what activation checkpointing recomputes."""

    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(channels, channels, 3, padding=1, bias=False)
        self.bn = torch.nn.BatchNorm2d(channels)
        self.drop = torch.nn.Dropout(0.2)

    def forward(self, x):
        return x + self.drop(torch.relu(self.bn(self.conv(x))))


def _blocked_net() -> torch.nn.Module:
    torch.manual_seed(3)
    return torch.nn.Sequential(torch.nn.Conv2d(1, 6, 3, stride=2, bias=False),
                               torch.nn.Sequential(_Block(6), _Block(6)), _Block(6),
                               torch.nn.Flatten(), torch.nn.Linear(6 * 13 * 13, 10))


def _saved_bytes(model, x, recompute: bool) -> int:
    """The bytes the forward pass keeps for the backward pass (what checkpointing saves), counted by an outer
    saved-tensor hook (the recomputed blocks' own hooks take theirs)."""
    saved = []

    def pack(t):
        saved.append(t.numel() * t.element_size())
        return t
    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t), recomputed_blocks(model, recompute):
        torch.nn.functional.cross_entropy(model(x), torch.zeros(len(x), dtype=torch.long)).backward()
    return sum(saved)


def test_recomputed_activations_train_the_same_clients_and_keep_a_fraction():
    """Activation checkpointing of the sequential path (``recomputed_blocks``): the three residual blocks (two
    inside an nn.Sequential, opened) are recomputed; 3 clients x 4 train-mode steps with dropout give the plain
    path's parameters, momentum and BatchNorm statistics (moved once per step: num_batches_tracked 4, not 8) and
    loss, while the forward keeps under half the bytes (measured: 0.40); the estimate (``activation_values``, which
    counts the leaves' outputs only) shrinks to under 0.8 (0.75). The
    batched path refuses it in one line."""
    from auditkit.config import ConfigError, from_dict
    from auditkit.fl.memory import activation_values

    model = _blocked_net()
    assert [type(b) for b in blocks(model)] == [_Block] * 3
    x, y = _examples()
    indices, _, _ = local_batches(list(torch.arange(60).reshape(3, 20)), [0, 1, 2], 1, seed=0, tau=4, batch_size=5)
    steps, start = LocalSteps(x, y, indices), flat_parameters(model)
    shared = {k: v.clone() for k, v in model.named_buffers()}
    runs = []
    for recompute in (False, True):
        torch.manual_seed(0)  # the same dropout draws for both runs: checkpointing replays them in its recomputation
        training = LocalTraining(LocalOptimizer(Optimizer.SGD, 0.05, 0.9), recompute=recompute)
        runs.append(train_clients_sequential(model, start, steps, training, buffers=shared))
    _close_scaled(*runs, scale=1e-6)  # the same kernels: recomputation changes no rounding
    assert runs[1].buffers["2.bn.num_batches_tracked"].tolist() == [4, 4, 4]
    assert (runs[1].params - start).abs().amax(1).min() > 1e-3
    model.train()
    plain, kept = _saved_bytes(model, x[:8], False), _saved_bytes(model, x[:8], True)
    assert kept < 0.5 * plain, (kept, plain)
    assert activation_values(model, (1, 28, 28), recompute=True) < 0.8 * activation_values(model, (1, 28, 28))
    with pytest.raises(ConfigError, match=r"^training\.recompute_activations needs training\.batched = false: "):
        from_dict({"training": {"recompute_activations": True}})
    assert from_dict({"training": {"recompute_activations": True, "batched": False}}).training.recompute_activations
