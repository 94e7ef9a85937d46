"""Analytic gradient inversion: read the input of the first fully-connected layer off its gradients.

For one example, z = W a + b has dL/dW = delta a^T and dL/db = delta, so a = (dL/dW)_i / (dL/db)_i for any row with
delta_i != 0 (Phong et al. 2017; Geiping et al. 2020, Prop. D.1). Under noise the whole layer is read:
[dL/dW | dL/db] = delta [a^T | 1] is rank 1, u its top singular direction, and

    a_hat = W^T u / (b . u)        (b = bias gradient, W = the weight gradient; ``linear_input``),

exact for one example's gradient or its multi-step update on a first layer, a blend otherwise. When a feature
extractor phi precedes the layer, a_hat = phi(x) and x is recovered by feature inversion,

    min_{x in [0, 1]} ||phi(x) - a_hat||^2 / ||a_hat||^2 + feature_tv * TV(x),

then refined by gradient matching (optionally by continuation, ``smooth``) where the matching loss exceeds
``refine_above``. The layer is the first ``nn.Linear`` with a bias in ``model.modules()`` order whose weight and bias
are trained (observed: a frozen layer sends no gradient), its input read by a forward pre-hook that stops the
forward pass. ``chunk`` bounds the problems matched at once (``GradientMatching``, "Memory"). When the estimate is exact, the refinement, and the measured SSIM:
docs/methodology/inversion.md (#analytic).
"""
from __future__ import annotations

import copy
import math
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call
from torch.nn.modules.utils import _pair

from auditkit.attacks import inversion_common as gi
from auditkit.attacks.gradient_matching import (DISTANCES, OBSERVATIONS, ClientSimulator, GradientMatching, default_chunk,
                                                total_variation)
from auditkit.attacks.observations import Observation, split_observation, trained_parameters
from auditkit.validation import Choice, Constraint, Integer, Optional

ANALYTIC_SETTINGS: dict[str, Any] = {
    "seed": 0,  # seeds the dummy initialisation of the feature inversion (drawn on the CPU)
    "init": "rand",  # "rand": U[0, 1), "randn": N(0, 1) (clamped to the box after the first step)
    "device": None,  # None: the device of the model's parameters
    "observation": "gradient",
    "local_steps": 1,  # with observation="update": the client's SGD steps (refinement and loss only)
    "local_lr": None,  # with observation="update": the client's learning rate (refinement and loss only)
    "label_strategy": "extract",
    "restarts": 2,
    # feature inversion (only when a feature extractor precedes the first FC layer)
    "feature_iterations": 500,
    "feature_lr": 0.05,
    "feature_tv": 1e-3,
    # gradient-matching refinement (only with a feature extractor); 0 iterations: none
    "refine_iterations": 1000,
    "refine_above": 1e-3,  # refine only the problems whose matching loss after feature inversion exceeds this
    "refine_lr": 0.1,
    "distance": "cosine",  # also the distance of the reported loss
    "tv": 1e-2,
    "signed": True,
    "feature_weight": 0.0,
    "smooth": 0.03,
    "chunk": None,  # the problems matched at once (None: ``default_chunk``); memory, not the result
}


def preset() -> dict[str, Any]:
    """A copy of the analytic attack's default settings."""
    return dict(ANALYTIC_SETTINGS)


def analytic(
    model: nn.Module, observed: Observation, *, input_shape: Sequence[int], label: Any = None, **settings: Any
) -> gi.InversionResult:
    """Analytic inversion of the first FC layer (module docstring), then feature inversion when needed.

    Arguments as :func:`auditkit.attacks.gradient_inversion.invert`: ``model`` holds the weights the observation was
    computed with (before the update for ``observation="update"``); ``observed`` one image's or N images'
    gradients/updates; ``input_shape`` (C, H, W); ``label`` None or the true label(s). Raises ``ValueError``
    when the model has no ``nn.Linear`` with a bias.
    """
    config = _resolve_settings(settings)
    input_shape = gi._check_input_shape(input_shape)
    device, dtype, shapes, observed_matrix = gi.observed_on_device(model, observed, config["device"])
    count = observed_matrix.shape[0]
    if config["chunk"] is None:
        config["chunk"] = default_chunk(observed_matrix.shape[1], device)
    layer, weight_index, bias_index = first_linear(model)
    simulator = ClientSimulator(
        model, device=device, dtype=dtype, observation=config["observation"],
        local_steps=config["local_steps"], local_lr=config["local_lr"],
    )
    num_classes = gi._num_classes(simulator, input_shape)
    labels, label_source = gi._labels(label, config, observed_matrix, shapes, num_classes)
    features = _FeatureReader(model, layer, simulator)
    direct = features.reads_pixels(input_shape)

    start = time.perf_counter()
    parts = split_observation(observed_matrix, shapes)
    estimate, defined = linear_input(parts[weight_index], parts[bias_index])
    targets = F.one_hot(labels, num_classes).to(dtype)
    exact = GradientMatching(simulator, observed_matrix, distance=config["distance"], tv=0.0, chunk=config["chunk"])
    every = torch.arange(count, device=device)
    if direct:
        images = estimate.reshape(count, *input_shape).clamp(0.0, 1.0)
        steps = torch.zeros(count, dtype=torch.long)
    else:
        images, steps = _invert_features(features, estimate, observed_matrix, targets, simulator, input_shape, config)
    with torch.no_grad():
        loss = exact.batched(images, targets, every)[1]
    loss = torch.where(defined, torch.nan_to_num(loss, nan=math.inf), torch.full_like(loss, math.inf))
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    wall_time = time.perf_counter() - start

    recorded = {
        "attack": "analytic", **config, "device": str(device), "dtype": str(dtype).removeprefix("torch."),
        "recovered": "image" if direct else "features",
    }
    return gi.InversionResult(
        images=torch.nan_to_num(images.detach(), nan=0.0).clamp(0.0, 1.0).to(device="cpu", dtype=torch.float32),
        labels=labels.detach().cpu().long(),
        loss=loss.detach().cpu().float(),
        steps=steps,
        settings=recorded,
        wall_time=wall_time,
        label_source=label_source,
    )


def linear_input(weight_grad: Tensor, bias_grad: Tensor) -> tuple[Tensor, Tensor]:
    """The input of an FC layer from its gradients, by the rank-1 structure of the whole layer.

    For one example [dL/dW | dL/db] = delta [a^T | 1] is rank 1. The top left singular vector u of the noisy
    out x (in + 1) matrix [W | b] estimates the direction of delta from every row and every column at once (the
    noise averaged over the hidden units and the inputs), and the input is the least-squares fit along it,

        a_hat = W^T u / (b . u),

    exact without noise (u = delta / ||delta||). It replaces the one-direction estimate sum_i b_i W_i /
    sum_i b_i^2, whose weights b_i are themselves noisy: under a DP mechanism's noise that estimate is dominated
    by the noise-times-noise term sum_i n_i N_i, while u is found from the whole layer (the probe's
    reconstruction sweep measures the difference: ``auditkit.stages.probe.reconstruction_sweep``).

    ``weight_grad``: N x out x in (or out x in), ``bias_grad``: N x out (or out). Returns (N x in estimates,
    N booleans: False where b . u = 0 (e.g. an all-zero bias gradient) and the input cannot be read; its
    estimate is 0).
    """
    if weight_grad.dim() == 2:
        weight_grad, bias_grad = weight_grad.unsqueeze(0), bias_grad.unsqueeze(0)
    stacked = torch.cat([weight_grad, bias_grad.unsqueeze(2)], dim=2).to(torch.float64)
    u = torch.linalg.svd(stacked, full_matrices=False)[0][:, :, 0]  # N x out: the rank-1 direction of delta
    scale = (bias_grad.to(torch.float64) * u).sum(dim=1)
    defined = scale.abs() > torch.finfo(torch.float64).tiny
    numerator = torch.einsum("no,noi->ni", u, weight_grad.to(torch.float64))
    safe = torch.where(defined, scale, torch.ones_like(scale))
    estimate = torch.where(defined.unsqueeze(1), numerator / safe.unsqueeze(1), torch.zeros_like(numerator))
    return estimate.to(weight_grad.dtype), defined


def first_linear(model: nn.Module) -> tuple[nn.Linear, int, int]:
    """The first ``nn.Linear`` with a trained weight and bias in ``model.modules()`` order and their positions
    among the trained parameters (``trained_parameters``, the observation's order); ``ValueError`` when there is
    none."""
    positions = {id(p): i for i, (_, p) in enumerate(trained_parameters(model))}
    for module in model.modules():
        biased = isinstance(module, nn.Linear) and module.bias is not None
        if biased and id(module.weight) in positions and id(module.bias) in positions:
            return module, positions[id(module.weight)], positions[id(module.bias)]
    raise ValueError(
        "the analytic attack needs a fully-connected layer with a bias (an nn.Linear(..., bias=True) whose "
        f"weight and bias are trained model parameters); {type(model).__name__} has none"
    )


# --- feature extractor: the input of the first FC layer -----------------------------------------------------


class _Stop(Exception):
    def __init__(self, value: Tensor) -> None:
        super().__init__()
        self.value = value


class _FeatureReader:
    """phi(x): the input of ``layer`` when the model runs on x (with the simulator's parameter copies)."""

    def __init__(self, model: nn.Module, layer: nn.Linear, simulator: ClientSimulator) -> None:
        self.model, self.layer, self.simulator = model, layer, simulator

    def __call__(self, x: Tensor) -> Tensor:
        def stop(_module: nn.Module, args: tuple) -> None:
            raise _Stop(args[0])

        handle = self.layer.register_forward_pre_hook(stop)
        try:
            functional_call(self.model, (self.simulator.params, self.simulator.fixed), (x,))
        except _Stop as caught:
            value = caught.value
        else:
            raise ValueError("the model's first nn.Linear with a bias is not called in its forward pass")
        finally:
            handle.remove()
        if value.dim() != 2 or value.shape != (x.shape[0], self.layer.in_features):
            raise ValueError(
                "the analytic attack needs the first nn.Linear with a bias to act on flat feature vectors "
                f"(batch x {self.layer.in_features}); it received shape {tuple(value.shape)}"
            )
        return value

    def reads_pixels(self, input_shape: tuple[int, int, int]) -> bool:
        params = self.simulator.params
        first = next(iter(params.values()))
        probe = torch.rand((2, *input_shape), generator=torch.Generator().manual_seed(0)).to(first.device, first.dtype)
        with torch.no_grad():
            return torch.equal(self(probe), probe.flatten(1))


def _invert_features(
    features: _FeatureReader, estimate: Tensor, observed: Tensor, targets: Tensor, simulator: ClientSimulator,
    input_shape: tuple[int, int, int], config: dict,
) -> tuple[Tensor, Tensor]:
    """Feature inversion, then refinement where needed, for every image and restart; returns the kept images
    (N x C x H x W) and the optimiser steps each took (N)."""
    count, restarts = estimate.shape[0], config["restarts"]
    device, dtype = estimate.device, estimate.dtype
    generator = torch.Generator().manual_seed(config["seed"])
    draw = torch.randn if config["init"] == "randn" else torch.rand
    x = draw((restarts * count, *input_shape), generator=generator).to(device=device, dtype=dtype)
    image_of = torch.arange(restarts * count, device=device) % count  # problem r * count + i: restart r of i
    target_features = estimate[image_of]
    scale = (target_features**2).sum(dim=1).clamp_min(torch.finfo(dtype).tiny)

    def feature_loss(images: Tensor, rows: Tensor) -> Tensor:
        return ((features(images) - target_features[rows]) ** 2).sum(dim=1) / scale[rows]

    every = torch.arange(restarts * count, device=device)
    x = _adam(
        x, lambda images: feature_loss(images, every) + config["feature_tv"] * total_variation(images),
        config["feature_iterations"], config["feature_lr"], signed=False,
    )
    steps = torch.full((restarts * count,), config["feature_iterations"], dtype=torch.long)
    exact = GradientMatching(simulator, observed, distance=config["distance"], tv=0.0, chunk=config["chunk"])
    with torch.no_grad():
        final = torch.nan_to_num(exact.batched(x, targets[image_of], image_of)[1], nan=math.inf)
    rows = (final > config["refine_above"]).nonzero().squeeze(1)
    if config["refine_iterations"] > 0 and len(rows) > 0:
        x[rows] = _refine(x[rows], rows, image_of, targets, observed, simulator, feature_loss, config)
        steps[rows.cpu()] += config["refine_iterations"]
        with torch.no_grad():
            refined = exact.batched(x[rows], targets[image_of[rows]], image_of[rows])[1]
            final[rows] = torch.nan_to_num(refined, nan=math.inf)
    best = final.view(restarts, count).argmin(dim=0) * count + torch.arange(count, device=device)
    return x[best], steps[best.cpu()]


def _refine(
    x: Tensor, rows: Tensor, image_of: Tensor, targets: Tensor, observed: Tensor, simulator: ClientSimulator,
    feature_loss: Callable[[Tensor, Tensor], Tensor], config: dict,
) -> Tensor:
    """Gradient matching (signed Adam, box, TV) on the problems ``rows``, by continuation when ``smooth`` > 0."""
    smoothing = _Smoothing(simulator.model, config["smooth"])
    smooth_simulator = ClientSimulator(
        smoothing.model, device=x.device, dtype=x.dtype, observation=config["observation"],
        local_steps=config["local_steps"], local_lr=config["local_lr"],
    )
    matching = GradientMatching(smooth_simulator, observed, distance=config["distance"], tv=config["tv"],
                                chunk=config["chunk"])
    iterations = config["refine_iterations"]
    anneal = max(1, round(0.6 * iterations))  # the temperature reaches 0 at 60 % of the iterations
    problem_targets, problem_rows = targets[image_of[rows]], image_of[rows]
    iteration = 0

    def objective(images: Tensor) -> Tensor:
        nonlocal iteration
        smoothing.set(config["smooth"] * max(0.0, 1.0 - iteration / anneal))
        iteration += 1
        value = matching.batched(images, problem_targets, problem_rows)[0]
        if config["feature_weight"] > 0:
            value = value + config["feature_weight"] * feature_loss(images, rows)
        return value

    return _adam(x, objective, iterations, config["refine_lr"], signed=config["signed"])


def _adam(x: Tensor, objective: Callable[[Tensor], Tensor], iterations: int, lr: float, *, signed: bool) -> Tensor:
    """Adam on the stacked dummies (elementwise, so independent per image), Inverting Gradients' lr decay,
    the box [0, 1] after every step."""
    x = x.clone().requires_grad_(True)
    optimizer = torch.optim.Adam([x], lr=lr)
    milestones = [round(iterations * f) for f in gi.LR_DECAY_AT]
    for iteration in range(iterations):
        for group in optimizer.param_groups:
            group["lr"] = lr * gi.LR_DECAY_GAMMA ** sum(iteration >= m for m in milestones)
        (gradient,) = torch.autograd.grad(objective(x).sum(), x)
        x.grad = gradient.sign() if signed else gradient
        optimizer.step()
        with torch.no_grad():
            x.clamp_(0.0, 1.0)
    return x.detach()


# --- continuation: a smoothed copy of the model ----------------------------------------------------------


class _SmoothReLU(nn.Module):
    def __init__(self, temperature: list[float]) -> None:
        super().__init__()
        self.temperature = temperature

    def forward(self, z: Tensor) -> Tensor:
        t = self.temperature[0]
        return F.relu(z) if t <= 0 else t * F.softplus(z / t)


class _SmoothMaxPool2d(nn.Module):
    """Log-sum-exp pooling t * log(mean exp(z / t)) over the windows of an ``nn.MaxPool2d`` without padding."""

    def __init__(self, pool: nn.MaxPool2d, temperature: list[float]) -> None:
        super().__init__()
        self.pool = pool
        self.temperature = temperature

    def forward(self, z: Tensor) -> Tensor:
        t = self.temperature[0]
        if t <= 0:
            return self.pool(z)
        pool = self.pool
        stride = pool.stride if pool.stride is not None else pool.kernel_size
        batched = z.dim() == 4
        z4 = z if batched else z.unsqueeze(0)
        n, c, h, w = z4.shape
        kernel, dilation, stride = _pair(pool.kernel_size), _pair(pool.dilation), _pair(stride)
        rows, columns = ((size - d * (k - 1) - 1) // s + 1 for size, k, d, s in zip((h, w), kernel, dilation, stride))
        cols = F.unfold(z4.reshape(n * c, 1, h, w) / t, kernel, dilation=dilation, stride=stride)
        out = t * (torch.logsumexp(cols, dim=1) - math.log(cols.shape[1]))
        out = out.reshape(n, c, rows, columns)
        return out if batched else out.squeeze(0)


class _Smoothing:
    """A deep copy of ``model`` whose ``nn.ReLU`` and unpadded ``nn.MaxPool2d`` are smoothed with a shared,
    settable temperature (0: the exact model). Parameter names are unchanged."""

    def __init__(self, model: nn.Module, temperature: float) -> None:
        self.temperature = [float(temperature)]
        self.model = copy.deepcopy(model)
        if temperature > 0:
            self._replace(self.model)

    def set(self, temperature: float) -> None:
        self.temperature[0] = float(temperature)

    def _replace(self, module: nn.Module) -> None:
        for name, child in module.named_children():
            if isinstance(child, nn.ReLU):
                setattr(module, name, _SmoothReLU(self.temperature))
            elif isinstance(child, nn.MaxPool2d) and _smoothable(child):
                setattr(module, name, _SmoothMaxPool2d(child, self.temperature))
            else:
                self._replace(child)


def _smoothable(pool: nn.MaxPool2d) -> bool:
    zero = pool.padding in (0, (0, 0))
    return zero and not pool.ceil_mode and not pool.return_indices


# --- settings ----------------------------------------------------------------------------------------------


SETTINGS: dict[str, Constraint] = {
    "seed": gi.SEED,
    "init": Choice(gi.INITS),
    "device": gi.TorchDevice(),
    "observation": Choice(OBSERVATIONS),
    "local_steps": gi.COUNT,
    "local_lr": Optional(gi.POSITIVE),
    "label_strategy": Choice(("extract",)),
    "restarts": gi.COUNT,
    "feature_iterations": Integer(low=0),
    "feature_lr": gi.POSITIVE,
    "feature_tv": gi.NON_NEGATIVE,
    "refine_iterations": Integer(low=0),
    "refine_above": gi.NON_NEGATIVE,
    "refine_lr": gi.POSITIVE,
    "distance": Choice(DISTANCES),
    "tv": gi.NON_NEGATIVE,
    "signed": gi.FLAG,
    "feature_weight": gi.NON_NEGATIVE,
    "smooth": gi.NON_NEGATIVE,
    "chunk": Optional(gi.COUNT),
}
"""What each setting must be (``auditkit.validation``)."""


def _resolve_settings(overrides: dict[str, Any]) -> dict[str, Any]:
    config = preset()
    unknown = sorted(set(overrides) - set(config))
    if unknown:
        raise ValueError(
            f"unknown setting(s) {', '.join(map(repr, unknown))} for analytic; valid: {', '.join(sorted(config))}"
        )
    config.update(overrides)
    for name, constraint in SETTINGS.items():
        config[name] = constraint.check(config[name], name)
    if config["observation"] == "update" and config["local_lr"] is None:
        raise ValueError("local_lr is required when observation='update' (the client's learning rate)")
    return config
