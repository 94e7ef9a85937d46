"""The gradient-matching objective: how far the dummy data's simulated observation is from the observed one.

For one dummy image x with (soft) label y (a probability vector over the K classes) the attacker simulates
what the client would have sent, with the client's training loss, the cross-entropy
CE(x, y; theta) = -sum_k y_k log softmax(f_theta(x))_k:

* ``observation="gradient"`` (DLG, iDLG, Inverting Gradients): g(x, y) = grad_theta CE(x, y; theta);
* ``observation="update"`` (Inverting Gradients' FedAvg variant, Geiping et al. 2020, Sec. 6): the update
  u(x, y) = theta_tau - theta_0 after tau = ``local_steps`` unrolled SGD steps
  theta_{k+1} = theta_k - eta * grad_theta CE(x, y; theta_k), eta = ``local_lr``, differentiable in x;

and compares it with the observation o (a flat vector over the trained parameters theta, in their order,
``auditkit.attacks.observations.trained_parameters``; the frozen ones are held fixed, as the clients hold them):

* ``distance="l2"`` (DLG, Zhu et al. 2019): sum over layers of ||g_l - o_l||^2 = ||g - o||^2;
* ``distance="cosine"`` (Inverting Gradients, Geiping et al. 2020, Eq. 4): 1 - <g, o> / (||g|| ||o||) over
  the whole concatenated vector (inversefed's ``cost_fn='sim'`` with equal layer weights);

plus an optional total-variation prior (Geiping et al. 2020), weighted by ``tv``:
TV(x) = mean |x[..., :, 1:] - x[..., :, :-1]| + mean |x[..., 1:, :] - x[..., :-1, :]|.

The same objective is evaluated two ways: :meth:`GradientMatching.batched` for m independent images at once,
with per-image parameter gradients from ``torch.func`` (``vmap`` over ``grad`` of ``functional_call``), and
:meth:`GradientMatching.single` by plain autograd for one image (``torch.autograd.grad`` with
``create_graph=True``, as the reference implementations do); the sequential attack path uses the latter, so
comparing the two paths checks the ``torch.func`` machinery.

Memory: each problem of :meth:`GradientMatching.batched` holds a few parameter-sized tensors in its graph (its
simulated observation, its observed row, their products: about ``PROBLEM_BYTES_PER_PARAMETER`` bytes per trained
parameter, measured on ResNet-18 and ResNet-50), so m problems of a 23.5M-parameter model need m x 0.35 GiB at
once. With ``chunk`` set, the m problems are evaluated ``chunk`` at a time and each chunk's gradient with respect to
its own dummies is taken as it is evaluated (``_ChunkedMatching``): the problems are independent, so the gradient of
the summed objective is the same (to rounding), with one chunk's graphs alive at a time.
"""
from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.func import functional_call, grad, vmap

from auditkit.attacks.observations import frozen_parameters, trained_parameters

DISTANCES = ("l2", "cosine")
PROBLEM_BYTES_PER_PARAMETER = 16  # one problem's graph in ``batched``: 15.4 (ResNet-50) and 13.6 (ResNet-18) measured
ATTACK_BYTES_PER_PARAMETER = 28  # an attack's fixed copies beside them (simulators' parameters and leaves, a model copy)
CHUNK_BYTES_CPU = 2 * 2**30  # what the problems evaluated at once may hold on a CPU
CHUNK_SHARE_GPU = 0.5  # ... on a GPU: this share of its free memory
OBSERVATIONS = ("gradient", "update")


class ClientSimulator:
    """The observation a single-image client would send: its gradient, or its update after unrolled SGD.

    Uses the model's current parameters and buffers, copied to ``device`` / ``dtype``; the model itself is not
    moved or changed. ``params`` are the trained parameters, the ones differentiated and observed; ``fixed`` the
    frozen parameters and the buffers, which enter the forward pass only. Stochastic layers (dropout in training
    mode) draw independently per image in the batched evaluation; put the model in eval mode for a deterministic
    simulation (and for BatchNorm, whose training-mode statistics of a single image are not what the client
    computed on its batch).
    """

    def __init__(
        self,
        model: nn.Module,
        *,
        device: torch.device,
        dtype: torch.dtype,
        observation: str = "gradient",
        local_steps: int = 1,
        local_lr: float | None = None,
    ) -> None:
        if observation not in OBSERVATIONS:
            raise ValueError(f"observation must be one of {', '.join(OBSERVATIONS)}, got {observation!r}")
        if observation == "update" and local_lr is None:
            raise ValueError("local_lr is required when observation='update'")
        self.model = model
        self.observation = observation
        self.local_steps = local_steps
        self.local_lr = local_lr
        self.params = {name: p.detach().to(device=device, dtype=dtype) for name, p in trained_parameters(model)}
        self.fixed = {**{name: p.detach().to(device=device, dtype=dtype) for name, p in frozen_parameters(model)},
                      **{name: b.detach().to(device) for name, b in model.named_buffers()}}
        # Leaves for the plain-autograd path; gradients are taken with autograd.grad, so .grad stays empty.
        self._leaves = {name: p.clone().requires_grad_(True) for name, p in self.params.items()}

    def batched(self, x: Tensor, target: Tensor) -> Tensor:
        """Simulated observations, m x P, for images ``x`` (m x C x H x W) and labels ``target`` (m x K)."""
        return vmap(self.one, randomness="different")(x, target)

    def one(self, x: Tensor, target: Tensor) -> Tensor:
        """The simulated observation (P) for one image (C x H x W) and label (K), by ``torch.func.grad``."""
        x, target = x.unsqueeze(0), target.unsqueeze(0)
        if self.observation == "gradient":
            return _flatten(grad(self._train_loss)(self.params, x, target).values())
        delta = {name: torch.zeros_like(p) for name, p in self.params.items()}
        for _ in range(self.local_steps):
            current = {name: p + delta[name] for name, p in self.params.items()}
            grads = grad(self._train_loss)(current, x, target)
            delta = {name: delta[name] - self.local_lr * grads[name] for name in delta}
        return _flatten(delta.values())

    def plain(self, x: Tensor, target: Tensor) -> Tensor:
        """:meth:`one` for a 1 x C x H x W image and 1 x K label by plain autograd (``create_graph=True``)."""
        if self.observation == "gradient":
            loss = self._train_loss(self._leaves, x, target)
            return _flatten(torch.autograd.grad(loss, list(self._leaves.values()), create_graph=True))
        delta = [torch.zeros_like(p) for p in self._leaves.values()]
        for _ in range(self.local_steps):
            current = {name: p + dp for (name, p), dp in zip(self._leaves.items(), delta)}
            loss = self._train_loss(current, x, target)
            grads = torch.autograd.grad(loss, list(current.values()), create_graph=True)
            delta = [dp - self.local_lr * g for dp, g in zip(delta, grads)]
        return _flatten(delta)

    def _train_loss(self, params: dict[str, Tensor], x: Tensor, target: Tensor) -> Tensor:
        logits = functional_call(self.model, (params, self.fixed), (x,))
        return -(target * F.log_softmax(logits, dim=-1)).sum()


class GradientMatching:
    """Distance (plus ``tv`` times the TV prior) between simulated and observed observations.

    ``observed`` is the N x P matrix of observations, one row per attacked image; the methods pick rows by
    index, so restarts of the same image share its row. ``chunk``: the problems :meth:`batched` evaluates at once
    (None: all of them; module docstring, "Memory").
    """

    def __init__(self, simulator: ClientSimulator, observed: Tensor, *, distance: str, tv: float,
                 chunk: int | None = None) -> None:
        if distance not in DISTANCES:
            raise ValueError(f"distance must be one of {', '.join(DISTANCES)}, got {distance!r}")
        if chunk is not None and (isinstance(chunk, bool) or not isinstance(chunk, int) or chunk < 1):
            raise ValueError(f"chunk must be None or a positive integer, got {chunk!r}")
        self.simulator = simulator
        self.observed = observed
        self.distance = distance
        self.tv = tv
        self.chunk = chunk

    def batched(self, x: Tensor, target: Tensor, rows: Tensor) -> tuple[Tensor, Tensor]:
        """(objective, matching loss), two m-vectors, for dummy images ``x`` (m x C x H x W), labels ``target``
        (m x K probabilities) and observation rows ``rows`` (m indices). The objective adds ``tv * TV(x)``
        to the matching loss; both are differentiable in ``x`` and ``target`` (once: the gradient of a chunked
        evaluation is taken as it runs and is not itself differentiable)."""
        if self.chunk is None or len(rows) <= self.chunk:
            matching = self._matching_rows(x, target, rows)
        else:
            matching = _ChunkedMatching.apply(self, rows, x, target)
        return self._with_prior(x, matching), matching

    def _matching_rows(self, x: Tensor, target: Tensor, rows: Tensor) -> Tensor:
        return vmap(self._matching_one, randomness="different")(x, target, self.observed[rows])

    def single(self, x: Tensor, target: Tensor, row: int) -> tuple[Tensor, Tensor]:
        """:meth:`batched` for one image (1 x C x H x W, 1 x K) by plain autograd, without ``torch.func``."""
        matching = self._distance(self.simulator.plain(x, target), self.observed[row]).reshape(1)
        return self._with_prior(x, matching), matching

    def _matching_one(self, x: Tensor, target: Tensor, observed: Tensor) -> Tensor:
        return self._distance(self.simulator.one(x, target), observed)

    def _distance(self, simulated: Tensor, observed: Tensor) -> Tensor:
        if self.distance == "l2":
            return ((simulated - observed) ** 2).sum()
        norms = simulated.norm() * observed.norm()
        return 1.0 - (simulated * observed).sum() / norms.clamp_min(torch.finfo(norms.dtype).tiny)

    def _with_prior(self, x: Tensor, matching: Tensor) -> Tensor:
        if self.tv == 0:
            return matching
        return matching + self.tv * total_variation(x)


def default_chunk(parameters: int, device: torch.device) -> int:
    """The problems evaluated at once when an attack's ``chunk`` is None: as many as ``PROBLEM_BYTES_PER_PARAMETER``
    x ``parameters`` each fit ``CHUNK_BYTES_CPU`` on a CPU (a fixed budget, not the free memory: the chunk changes
    the last bits, and the same run must give the same numbers on a busy machine), ``CHUNK_SHARE_GPU`` of the GPU's
    free memory on a GPU; at least 1."""
    if device.type == "cuda":
        budget = torch.cuda.mem_get_info(device)[0] * CHUNK_SHARE_GPU
    else:
        budget = CHUNK_BYTES_CPU
    return max(1, int(budget // (PROBLEM_BYTES_PER_PARAMETER * parameters)))


def attack_memory(parameters: int, problems: int, chunk: int) -> int:
    """The bytes an attack of ``problems`` problems, ``chunk`` at a time, holds beyond its observations: the chunk's
    graphs and its fixed copies (the constants above; activations of small images are not counted)."""
    return (min(problems, chunk) * PROBLEM_BYTES_PER_PARAMETER + ATTACK_BYTES_PER_PARAMETER) * parameters


class _ChunkedMatching(torch.autograd.Function):
    """:meth:`GradientMatching.batched`'s matching losses ``matching.chunk`` problems at a time. Where the dummies
    (or labels) need a gradient, each chunk's gradient of its summed losses is taken as the chunk is evaluated and
    its graph freed; the backward pass scales the stored gradients by the incoming per-problem weights (problem i's
    loss depends on its own dummy and label alone)."""

    @staticmethod
    def forward(ctx: Any, matching: GradientMatching, rows: Tensor, x: Tensor, target: Tensor) -> Tensor:
        wants = (ctx.needs_input_grad[2], ctx.needs_input_grad[3])
        values, grads = [], ([], [])
        for start in range(0, len(rows), matching.chunk):
            part = slice(start, start + matching.chunk)
            leaves = (x[part].detach().requires_grad_(wants[0]), target[part].detach().requires_grad_(wants[1]))
            with torch.enable_grad():
                value = matching._matching_rows(*leaves, rows[part])
                needed = [leaf for leaf, want in zip(leaves, wants) if want]
                found = iter(torch.autograd.grad(value.sum(), needed) if needed else ())
            for want, kept in zip(wants, grads):
                if want:
                    kept.append(next(found))
            values.append(value.detach())
        ctx.save_for_backward(*(torch.cat(kept) for kept in grads if kept))
        ctx.wants = wants
        return torch.cat(values)

    @staticmethod
    def backward(ctx: Any, weight: Tensor) -> tuple[Tensor | None, ...]:
        saved = iter(ctx.saved_tensors)
        out: list[Tensor | None] = [None, None]
        for want in ctx.wants:
            gradient = next(saved) if want else None
            out.append(None if gradient is None else gradient * weight.view(-1, *[1] * (gradient.dim() - 1)))
        return tuple(out)


def per_image_gradients(model: nn.Module, images: Tensor, labels: Tensor) -> Tensor:
    """The N x P matrix whose row i is grad_theta CE(f_theta(images[i]), labels[i]) over the trained parameters
    theta, flattened in their order (``trained_parameters``), computed batched with ``torch.func`` on the model's
    device.

    This is the clean observation of N single-image clients taking one local step: what the attacks take
    as ``observed`` before any mechanism is applied.
    """
    if images.dim() != 4:
        raise ValueError(f"images must be N x C x H x W, got shape {tuple(images.shape)}")
    first = trained_parameters(model)[0][1]
    labels = torch.as_tensor(labels).reshape(-1).to(first.device).long()
    if labels.numel() != images.shape[0]:
        raise ValueError(f"labels must hold one class per image ({images.shape[0]}), got {labels.numel()}")
    images = images.to(device=first.device, dtype=first.dtype)
    with torch.no_grad():
        num_classes = model(images[:1]).shape[-1]
    targets = F.one_hot(labels, num_classes).to(first.dtype)
    simulator = ClientSimulator(model, device=first.device, dtype=first.dtype)
    return simulator.batched(images, targets).detach()


def total_variation(x: Tensor) -> Tensor:
    """Per-image anisotropic total variation of N x C x H x W images (Geiping et al.'s mean absolute form)."""
    dx = (x[..., :, 1:] - x[..., :, :-1]).abs().flatten(1).mean(dim=1)
    dy = (x[..., 1:, :] - x[..., :-1, :]).abs().flatten(1).mean(dim=1)
    return dx + dy


def _flatten(tensors: Iterable[Tensor]) -> Tensor:
    return torch.cat([t.reshape(-1) for t in tensors])
