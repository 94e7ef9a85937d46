"""Local client training: every selected client's local steps from the global model.

Two implementations of the same computation:

* `train_clients_batched` — one tensor program for a chunk of clients: their parameters are stacked (S, P) and
  each step is ``vmap(grad(loss))`` over clients (``torch.func``); the optimiser updates the flat (S, P) tensor in
  a few fused kernels (``auditkit.fl.optimizers``). Chunks of ``LocalTraining.chunk`` clients bound the memory.
* `train_clients_sequential` — the plain reference: one ``torch.optim`` optimiser per client, one client after
  another. Tests check both give the same parameters, optimiser state and BatchNorm buffers to float tolerance.

Both train the model's trained parameters only (``auditkit.fl.params``: P of them, ``requires_grad=True``); its
frozen parameters take part in the forward pass as the model holds them and never change.

Both read the same pre-drawn batch indices (`LocalSteps`), so they consume identical data. A client with fewer
local steps than the round's longest (``local_epochs`` on unequal clients) idles through the rest (``active``).

BatchNorm: in ``train`` mode a client normalises by its batch's statistics and updates its own running
statistics (buffers stacked (S, ...) and mutated inside the vmap, as ``nn.BatchNorm`` does in place); in ``eval``
mode it normalises by the running statistics it received and leaves them unchanged (dropout off as well).

With ``dp_sgd`` (``auditkit.fl.dp_sgd.DPSGD``) the step's gradient g is DP-SGD's (Abadi et al. 2016):
g = (sum_i m_i clip_C(g_i) + N(0, (z C)^2 I)) / B over the step's Poisson batch (mask m), the per-example
gradients g_i batched with ``torch.func`` inside the vmap over clients (``auditkit.fl.dp_sgd.clipped_gradient_sums``),
or one example at a time with autograd in the sequential reference. Each client's noise comes from its own
generator in step order, so both paths, and every chunking, draw the same noise.
"""
from __future__ import annotations

import contextlib
import dataclasses
from dataclasses import dataclass

import torch
from torch import nn
from torch.func import functional_call, grad_and_value, vmap
from torch.utils.checkpoint import checkpoint

from auditkit.fl.dp_sgd import DPSGD, clipped_gradient_sums, noisy_step_gradient, step_noise
from auditkit.fl.optimizers import LocalOptimizer
from auditkit.fl.params import ParamLayout, flat_parameters, trained_tensors
from auditkit.fl.sampling import draw_batches, draw_epoch_batches, draw_poisson_batches
from auditkit.fl.spec import ClientMode, DPSGDSpec, Optimizer, Precision
from auditkit.mechanisms.randomness import generator

__all__ = ["LocalResult", "LocalSteps", "LocalTraining", "blocks", "local_batches", "recomputed_blocks",
           "train_clients_batched", "train_clients_sequential"]


@dataclass(frozen=True)
class LocalSteps:
    """The data of every local step of S clients: ``indices`` (S, T, B) into the examples ``x`` and labels ``y``,
    and ``active`` (S, T), the steps each client takes (None: all T)."""

    x: torch.Tensor
    y: torch.Tensor
    indices: torch.Tensor
    active: torch.Tensor | None = None

    @classmethod
    def gathered(cls, inputs: torch.Tensor, labels: torch.Tensor) -> "LocalSteps":
        """Steps from batches already gathered: ``inputs`` (S, T, B, ...) and ``labels`` (S, T, B)."""
        shape = labels.shape
        return cls(inputs.reshape(-1, *inputs.shape[3:]), labels.reshape(-1),
                   torch.arange(labels.numel(), device=labels.device).reshape(shape))

    @property
    def clients(self) -> int:
        return int(self.indices.shape[0])

    @property
    def steps(self) -> int:
        return int(self.indices.shape[1])

    def batch(self, rows: slice, step: int) -> tuple[torch.Tensor, torch.Tensor]:
        """The examples (s, B, ...) and labels (s, B) of step ``step`` of clients ``rows``."""
        index = self.indices[rows, step]
        return self.x[index], self.y[index]

    def rows(self, rows: torch.Tensor) -> "LocalSteps":
        """The steps of clients ``rows`` (a chunk), up to the last step one of them takes."""
        active = None if self.active is None else self.active[rows.to(self.active.device)]
        last = self.steps if active is None else int(active.any(0).nonzero().max()) + 1
        return dataclasses.replace(self, indices=self.indices[rows.to(self.indices.device), :last],
                                   active=None if active is None else active[:, :last])


@dataclass(frozen=True)
class LocalTraining:
    """How the clients train: the optimiser, the model's mode, the arithmetic, how many clients one batched
    program holds (None: all of the round's), and whether the sequential path recomputes each block's activations
    in the backward pass (``recompute``: ``recomputed_blocks``)."""

    optimizer: LocalOptimizer
    mode: ClientMode = ClientMode.TRAIN
    precision: Precision = Precision.FP32
    chunk: int | None = None
    recompute: bool = False


@dataclass
class LocalResult:
    """What local training returns for S clients."""

    params: torch.Tensor  # (S, P) flat trained parameters after the local steps (``auditkit.fl.params``)
    state: dict[str, torch.Tensor]  # the optimiser's state, (S, P) slots (Adam's step count (S,))
    buffers: dict[str, torch.Tensor]  # the model's buffers (BatchNorm running statistics), (S, ...) by name
    loss: torch.Tensor  # (S,) mean training loss over the steps taken (DP-SGD: over the sampled examples)

    @property
    def momentum(self) -> torch.Tensor:
        """SGD's (S, P) momentum buffers."""
        return self.state["momentum"]


def local_batches(
    client_indices: list[torch.Tensor],
    clients: list[int],
    round_: int,
    *,
    seed: int,
    tau: int,
    batch_size: int,
    local_epochs: int | None = None,
    dp_sgd: DPSGDSpec | None = None,
) -> tuple[torch.Tensor, torch.Tensor | None, DPSGD | None]:
    """The dataset indices (S, T, B) every local step of ``clients`` trains on in round ``round_``, the steps each
    client takes (S, T) (None: all), and DP-SGD's settings for them: ``tau`` steps of ``batch_size`` samples drawn
    with replacement (``draw_batches``); ``local_epochs`` passes over the client's data in shuffled batches
    (``draw_epoch_batches``); or, with ``dp_sgd`` enabled, Poisson batches of expected size ``batch_size`` padded to
    the round's largest (``draw_poisson_batches``) with their mask and each client's noise generator, keyed by
    ``dp-sgd-noise/{round_}/{k}`` (the same for the built-in simulator and Flower's clients)."""
    if dp_sgd is not None and dp_sgd.enabled:
        indices, mask = draw_poisson_batches(client_indices, clients, round_, seed=seed, tau=tau,
                                             batch_size=batch_size)
        noise = tuple(generator(seed, f"dp-sgd-noise/{round_}/{k}") for k in clients)
        return indices, None, DPSGD(dp_sgd.noise_multiplier, dp_sgd.max_grad_norm, batch_size, mask, noise)
    if local_epochs is not None:
        indices, active = draw_epoch_batches(client_indices, clients, round_, seed=seed, epochs=local_epochs,
                                             batch_size=batch_size)
        return indices, (None if bool(active.all()) else active), None
    return draw_batches(client_indices, clients, round_, seed=seed, tau=tau, batch_size=batch_size), None, None


def _buffers_for(model: nn.Module, buffers: dict[str, torch.Tensor] | None, clients: int) -> dict[str, torch.Tensor]:
    """The model's buffers stacked (S, ...): ``buffers`` given per client or shared, else the model's own."""
    own = dict(model.named_buffers())
    given = own if buffers is None else buffers
    out = {}
    for name, value in given.items():
        shared = value.dim() == own[name].dim()
        out[name] = (value.expand(clients, *value.shape) if shared else value).clone()
    return out


def _autocast(precision: Precision, device: torch.device):
    if precision == Precision.BF16:
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _batchnorm_in_fp32(model: nn.Module, precision: Precision):
    """Under bf16 autocast, BatchNorm normalises in float32 (its input cast up, as mixed-precision training keeps
    it): its statistics and running buffers stay float32, and vmap's batch_norm takes no mixed dtypes."""
    hooks = [m.register_forward_pre_hook(lambda _m, args: (args[0].float(), *args[1:]))
             for m in model.modules() if isinstance(m, nn.modules.batchnorm._BatchNorm)] \
        if precision == Precision.BF16 else []
    try:
        yield
    finally:
        for hook in hooks:
            hook.remove()


def train_clients_batched(
    model: nn.Module,
    start: torch.Tensor,
    steps: LocalSteps,
    training: LocalTraining,
    *,
    state: dict[str, torch.Tensor] | None = None,
    buffers: dict[str, torch.Tensor] | None = None,
    dp_sgd: DPSGD | None = None,
) -> LocalResult:
    """Run every local step of S clients, ``training.chunk`` clients at a time.

    Args:
        model: the architecture (its trained parameters' values are ignored, its frozen ones used as they are; its
            buffers are the default ``buffers``).
        start: (P,) global trained parameters every client starts from, or (S, P) per-client starts.
        steps: each client's batches (``LocalSteps``).
        training: optimiser, mode, precision, chunk.
        state: the optimiser's state per client ((S, P) slots; None: a fresh optimiser).
        buffers: the model's buffers, shared (as the model's) or per client (S, ...); None: the model's own.
        dp_sgd: DP-SGD's settings (``steps``' batches are then the padded Poisson batches), or None for plain steps.
    """
    with _batchnorm_in_fp32(model, training.precision):
        return _train_chunks(model, start, steps, training, state=state, buffers=buffers, dp_sgd=dp_sgd)


def _train_chunks(model: nn.Module, start: torch.Tensor, steps: LocalSteps, training: LocalTraining, *,
                  state: dict[str, torch.Tensor] | None, buffers: dict[str, torch.Tensor] | None,
                  dp_sgd: DPSGD | None) -> LocalResult:
    size = steps.clients
    chunk = training.chunk or size
    if chunk >= size:
        return _train_chunk(model, start, steps, training, state=state, buffers=buffers, dp_sgd=dp_sgd)
    # clients of similar step counts share a chunk, which stops at its longest client (unequal local epochs)
    order = (torch.arange(size) if steps.active is None else
             torch.argsort(steps.active.sum(1).cpu(), descending=True, stable=True))
    joined: LocalResult | None = None
    for lo in range(0, size, chunk):
        rows = order[lo:lo + chunk]
        part = _train_chunk(
            model, start if start.dim() == 1 else start[rows.to(start.device)], steps.rows(rows), training,
            state=None if state is None else {k: v[rows.to(v.device)] for k, v in state.items()},
            buffers=_rows_of_buffers(model, buffers, rows),
            dp_sgd=None if dp_sgd is None else _rows_of_dp_sgd(dp_sgd, rows))
        if joined is None:
            joined = _empty_like_rows(part, size)
        _write_rows(joined, part, rows)  # into the round's (S, ...) tensors: one copy of S x P, not a cat of parts
        del part  # freed before the next chunk trains, not after
    assert joined is not None
    return joined


def _empty_like_rows(part: LocalResult, size: int) -> LocalResult:
    """Uninitialised (S, ...) tensors shaped as one chunk's result, for ``_write_rows`` to fill."""
    empty = lambda t: t.new_empty((size, *t.shape[1:]))  # noqa: E731
    return LocalResult(params=empty(part.params), state={k: empty(v) for k, v in part.state.items()},
                       buffers={k: empty(v) for k, v in part.buffers.items()}, loss=empty(part.loss))


def _write_rows(joined: LocalResult, part: LocalResult, rows: torch.Tensor) -> None:
    """A chunk's result into its clients' rows of ``joined`` (the callers' client order)."""
    for whole, piece in ((joined.params, part.params), (joined.loss, part.loss),
                         *((joined.state[k], v) for k, v in part.state.items()),
                         *((joined.buffers[k], v) for k, v in part.buffers.items())):
        whole[rows.to(whole.device)] = piece


def _rows_of_buffers(model: nn.Module, buffers: dict[str, torch.Tensor] | None,
                     rows: torch.Tensor) -> dict[str, torch.Tensor] | None:
    if buffers is None:
        return None
    own = dict(model.named_buffers())
    return {k: v if v.dim() == own[k].dim() else v[rows.to(v.device)] for k, v in buffers.items()}


def _rows_of_dp_sgd(dp_sgd: DPSGD, rows: torch.Tensor) -> DPSGD:
    return dataclasses.replace(dp_sgd, mask=dp_sgd.mask[rows], noise=tuple(dp_sgd.noise[int(r)] for r in rows))


def _train_chunk(model: nn.Module, start: torch.Tensor, steps: LocalSteps, training: LocalTraining, *,
                 state: dict[str, torch.Tensor] | None, buffers: dict[str, torch.Tensor] | None,
                 dp_sgd: DPSGD | None) -> LocalResult:
    layout = ParamLayout.of(model)
    clients, count = steps.clients, steps.steps
    device, dtype = start.device, start.dtype
    optimizer = training.optimizer
    flat = (start.expand(clients, -1) if start.dim() == 1 else start).clone()
    state = ({k: v.clone() for k, v in state.items()} if state is not None
             else optimizer.initial_state(clients, layout.size, device=device, dtype=dtype))
    stacked = _buffers_for(model, buffers, clients)
    model.train(training.mode == ClientMode.TRAIN)
    track = training.mode == ClientMode.TRAIN and bool(stacked)
    precision = _autocast(training.precision, device)

    def loss_fn(p: dict[str, torch.Tensor], b: dict[str, torch.Tensor], x: torch.Tensor, y: torch.Tensor):
        b = {k: v.clone() for k, v in b.items()} if track else b  # BatchNorm updates its running stats in place
        with precision:
            logits = functional_call(model, (p, b), (x,))
        return nn.functional.cross_entropy(logits.float(), y), b

    step_grad = vmap(grad_and_value(loss_fn, has_aux=True), randomness="different")
    active = None if steps.active is None else steps.active.to(device)
    losses = torch.zeros(clients, device=device)
    counted = (torch.full((clients,), float(count), device=device) if active is None
               else active.sum(1).to(dtype).clamp(min=1))
    if dp_sgd is not None:
        mask = dp_sgd.mask.to(device, dtype)
        counted = mask.sum((1, 2)).clamp(min=1)
    for step in range(count):
        params = layout.unflatten(flat)
        x, y = steps.batch(slice(None), step)
        on = None if active is None else active[:, step]
        if dp_sgd is None:
            grads, (loss, new_buffers) = step_grad(params, stacked, x, y)
            losses += loss.detach() if on is None else loss.detach() * on
            if track:
                stacked = new_buffers if on is None else {
                    k: torch.where(on.view(-1, *[1] * (v.dim() - 1)), v, stacked[k]) for k, v in new_buffers.items()}
        else:
            sums, per_example = clipped_gradient_sums(model, params, x, y, mask[:, step], dp_sgd.max_grad_norm)
            losses += (per_example.detach() * mask[:, step]).sum(1)
            noise = layout.unflatten(step_noise(dp_sgd.noise, layout.size, dtype=dtype, device=device))
            grads = {name: noisy_step_gradient(sums[name], noise[name], dp_sgd) for name in layout.names}
        flat, state = optimizer.step(flat, layout.flatten(grads, batch_dims=1).to(dtype), state, on)
    return LocalResult(params=flat.detach(), state={k: v.detach() for k, v in state.items()},
                       buffers={k: v.detach() for k, v in stacked.items()}, loss=losses / counted)


def train_clients_sequential(
    model: nn.Module,
    start: torch.Tensor,
    steps: LocalSteps,
    training: LocalTraining,
    *,
    state: dict[str, torch.Tensor] | None = None,
    buffers: dict[str, torch.Tensor] | None = None,
    dp_sgd: DPSGD | None = None,
) -> LocalResult:
    """Reference path: the same computation as `train_clients_batched`, one client at a time with ``torch.optim``
    (with ``dp_sgd``: one example at a time, `_private_gradient`)."""
    layout = ParamLayout.of(model)
    state = state if state is not None else training.optimizer.initial_state(
        steps.clients, layout.size, device=start.device, dtype=start.dtype)
    stacked = _buffers_for(model, buffers, steps.clients)
    model.train(training.mode == ClientMode.TRAIN)
    with _batchnorm_in_fp32(model, training.precision):
        runs = [_train_one(model, start if start.dim() == 1 else start[k], steps, training, k,
                           {slot: v[k] for slot, v in state.items()}, {name: v[k] for name, v in stacked.items()},
                           dp_sgd) for k in range(steps.clients)]
    return LocalResult(
        params=torch.stack([run.params for run in runs]),
        state={slot: torch.stack([run.state[slot] for run in runs]) for slot in state},
        buffers={name: torch.stack([run.buffers[name] for run in runs]) for name in stacked},
        loss=torch.tensor([float(run.loss) for run in runs], device=start.device),
    )


def _train_one(model: nn.Module, start: torch.Tensor, steps: LocalSteps, training: LocalTraining, k: int,
               state: dict[str, torch.Tensor], buffers: dict[str, torch.Tensor], dp_sgd: DPSGD | None) -> LocalResult:
    """Client ``k`` of the sequential reference path, from its (P,) ``start``, optimiser ``state`` and ``buffers``."""
    layout = ParamLayout.of(model)
    optimizer = training.optimizer
    own_buffers = dict(model.named_buffers())
    torch.nn.utils.vector_to_parameters(start.clone(), trained_tensors(model))
    for name, value in buffers.items():
        own_buffers[name].copy_(value)
    torch_optimizer = optimizer.torch_optimizer(trained_tensors(model))
    _load_state(torch_optimizer, optimizer, layout, state)
    total, counted = 0.0, 0
    for step in range(steps.steps):
        if steps.active is not None and not bool(steps.active[k, step]):
            continue
        x, y = steps.batch(slice(k, k + 1), step)
        torch_optimizer.zero_grad()
        if dp_sgd is None:
            with _autocast(training.precision, start.device), recomputed_blocks(model, training.recompute):
                logits = model(x[0])
            loss = nn.functional.cross_entropy(logits.float(), y[0])
            loss.backward()
            total, counted = total + loss.item(), counted + 1
        else:
            used = dp_sgd.mask[k, step].bool()
            step_total = _private_gradient(model, x[0][used], y[0][used], dp_sgd, k)
            total, counted = total + step_total, counted + int(used.sum())
        torch_optimizer.step()
    return LocalResult(
        params=flat_parameters(model),
        state=_read_state(torch_optimizer, optimizer, state),
        buffers={name: own_buffers[name].detach().clone() for name in buffers},
        loss=torch.tensor(total / max(counted, 1)),
    )


def blocks(module: nn.Module, total: int | None = None) -> list[nn.Module]:
    """The blocks activation checkpointing recomputes: the children of ``module``, opened into theirs where a child
    is an ``nn.Sequential`` or holds over half of the model's ``total`` parameters (ResNet's layer1..4 into their
    residual blocks, a ViT's encoder into its layers), leaves left out (a leaf recomputed saves nothing)."""
    total = sum(p.numel() for p in module.parameters()) if total is None else total
    found = []
    for child in module.children():
        if isinstance(child, nn.Sequential) or 2 * sum(p.numel() for p in child.parameters()) > total:
            found.extend(blocks(child, total))
        elif any(True for _ in child.children()):
            found.append(child)
    return found


@contextlib.contextmanager
def _buffers_kept(block: nn.Module):
    """The recomputation's context: ``block``'s buffers as the forward pass left them (a train-mode BatchNorm would
    otherwise move its running statistics twice per step)."""
    kept = {name: b.detach().clone() for name, b in block.named_buffers()}
    try:
        yield
    finally:
        for name, b in block.named_buffers():
            b.copy_(kept[name])


@contextlib.contextmanager
def recomputed_blocks(model: nn.Module, enabled: bool = True):
    """Activation checkpointing (Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost"): inside, each of
    ``blocks(model)`` keeps only its input for the backward pass and recomputes its activations there
    (``torch.utils.checkpoint``, non-reentrant, the random state replayed), so a step holds the blocks' inputs and
    one block's activations. The sequential path only: ``torch.func``'s vmap and grad refuse saved-tensor hooks."""
    if not enabled:
        yield
        return
    chosen = blocks(model)
    for block in chosen:
        block.forward = _checkpointed(block)
    try:
        yield
    finally:
        for block in chosen:
            del block.forward  # the class's forward again


def _checkpointed(block: nn.Module):
    """``block``'s forward through ``torch.utils.checkpoint``, its buffers kept across the recomputation."""
    plain = block.forward

    def forward(*args, **kwargs):
        return checkpoint(plain, *args, use_reentrant=False,
                          context_fn=lambda: (contextlib.nullcontext(), _buffers_kept(block)), **kwargs)
    return forward


_TORCH_SLOTS = {"momentum": "momentum_buffer", "exp_avg": "exp_avg", "exp_avg_sq": "exp_avg_sq"}


def _load_state(torch_optimizer: torch.optim.Optimizer, optimizer: LocalOptimizer, layout: ParamLayout,
                state: dict[str, torch.Tensor]) -> None:
    """One client's flat state into ``torch_optimizer``'s per-parameter state (a fresh Adam has no state yet)."""
    if optimizer.name == Optimizer.ADAM and float(state["step"]) == 0:
        return
    pieces = {slot: layout.unflatten(state[slot]) for slot in optimizer.slots}
    for i, param in enumerate(torch_optimizer.param_groups[0]["params"]):
        name = layout.names[i]
        entry = {_TORCH_SLOTS[slot]: pieces[slot][name].clone() for slot in optimizer.slots}
        if optimizer.name == Optimizer.ADAM:
            entry["step"] = state["step"].detach().clone().cpu()
        torch_optimizer.state[param] = entry


def _read_state(torch_optimizer: torch.optim.Optimizer, optimizer: LocalOptimizer,
                before: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """One client's flat state out of ``torch_optimizer`` (``before`` where it never stepped)."""
    params = torch_optimizer.param_groups[0]["params"]
    if not torch_optimizer.state.get(params[0]):
        return {k: v.clone() for k, v in before.items()}
    out = {slot: torch.cat([torch_optimizer.state[p][_TORCH_SLOTS[slot]].reshape(-1) for p in params])
           for slot in optimizer.slots}
    if optimizer.name == Optimizer.ADAM:
        out["step"] = torch.as_tensor(float(torch_optimizer.state[params[0]]["step"]), dtype=before["step"].dtype,
                                      device=before["step"].device)
    return out


def _private_gradient(model: nn.Module, inputs: torch.Tensor, labels: torch.Tensor, dp_sgd: DPSGD, client: int) -> float:
    """Set the parameters' ``.grad`` to DP-SGD's step gradient (sum_i clip_C(g_i) + z C xi) / B over the sampled
    examples ``inputs``, each example's gradient from its own backward pass, xi from client ``client``'s generator;
    returns the sum of their losses."""
    parameters = trained_tensors(model)
    total = torch.zeros(sum(p.numel() for p in parameters), dtype=parameters[0].dtype, device=parameters[0].device)
    loss_sum = 0.0
    for x, y in zip(inputs, labels):
        loss = nn.functional.cross_entropy(model(x[None]), y[None])
        flat = torch.cat([g.reshape(-1) for g in torch.autograd.grad(loss, parameters)])
        norm = float(flat.norm())
        total += flat * (min(1.0, dp_sgd.max_grad_norm / norm) if norm > 0 else 1.0)
        loss_sum += loss.item()
    noise = torch.randn(total.numel(), generator=dp_sgd.noise[client], dtype=total.dtype).to(total.device)
    step = (total + dp_sgd.noise_multiplier * dp_sgd.max_grad_norm * noise) / dp_sgd.expected_batch_size
    for p, piece in zip(parameters, torch.split(step, [p.numel() for p in parameters])):
        p.grad = piece.reshape(p.shape)
    return loss_sum
