"""The memory a training run needs, estimated before it starts and checked against a limit that can be raised.

A run whose sizes are each allowed (``auditkit.config_bounds.SIZES``) can still need more memory than the machine
has: K clients' momentum, or one round's clients x tau x batch images drawn at once. Without this check such a run
dies on an allocation, or swaps, well after it started (issue 39). What the built-in simulator
(``auditkit.fl.simulation``) holds at a round's peak, for K clients, S of them in a round, P float32 model
parameters (the trained ones, ``auditkit.fl.params``: frozen parameters are held once, with the model), tau local
steps of B samples of D values and A activation values per example:

* the data: the dataset's tensors (train, validation, test) as split;
* the clients' state: K x P per optimiser slot (SGD's momentum, Adam's two moments) under
  ``optimizer_state = kept`` (``FederatedSimulation.client_state``), none under ``reset``;
* a round's batches: S x T x B sample indices (T: tau, or the largest client's local_epochs x ceil(n_k / B)),
  drawn at once (int64, three copies); their images are gathered one step of one chunk at a time;
* a round's clients: ``PER_CLIENT_PARAMETER`` bytes for each of their parameters, about ten float32-sized copies:
  local training's parameters, momentum, gradients and their next values (``train_clients_batched``), then the
  updates, the float64 copies a mechanism encodes and decodes, the bytes sent, the server view and the SNR's
  clipped copies (``UplinkProtocol``); with DP-SGD also the per-example gradients, S x B x P twice; with canary
  clients (``[canary]``) their rows go through the protocol as well;
* a step's activations: S x B x A values, kept for the backward pass beside their gradients (three copies), for
  the ``client_chunk`` clients trained at once (``client_chunk``);
* the checkpoint rounds' observations: the server view, the messages and the true updates (three S x P float32)
  and the round's sample indices, kept for the attacks;
* the interpreter, torch and the other libraries (``RUNTIME``).

The sum times ``SAFETY`` (what is not modelled: allocator slack, a protocol with a longer transcript) is compared
with the limit, ``[limits] max_memory_gib`` (``--max-memory``) or else this machine's physical memory (its
cgroup's limit where lower). The sum without the data and the runtime is within a factor of 2 of the peak
resident memory measured for small real runs (``tests/auditkit/fl/test_memory.py``). Flower's backend is not
checked: its clients run in Ray's workers, whose resources Ray manages.
"""
from __future__ import annotations

import itertools
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch
from torch import nn

from auditkit.config_bounds import ConfigError
from auditkit.fl.params import trained_size

__all__ = ["GIB", "MemoryEstimate", "activation_values", "check_memory", "estimate_memory", "machine_memory",
           "model_device", "round_clients"]

GIB = 2**30
MIB = 2**20
SAFETY = 1.5
PER_CLIENT_PARAMETER = 40  # bytes per parameter of a client taking part in a round (module docstring)
TRAINING_PER_PARAMETER = 16  # ... of them held in training, by the chunk of clients trained at once
RUNTIME = 512 * MIB  # the interpreter, torch, numpy, scipy and the mechanisms' libraries once imported
_FLOAT, _INDEX = 4, 8  # float32 values, int64 indices and labels


@dataclass(frozen=True)
class MemoryEstimate:
    """The bytes a run needs, part by part (``parts``: name -> bytes; ``what``: name -> the sizes behind it)."""

    parts: dict[str, int]
    what: dict[str, str] = field(default_factory=dict)

    @property
    def total(self) -> int:
        """The modelled bytes, summed."""
        return sum(self.parts.values())

    @property
    def needed(self) -> int:
        """The bytes checked against the limit: the total times ``SAFETY``."""
        return math.ceil(self.total * SAFETY)

    def describe(self) -> str:
        """The parts that make up a tenth of the total or more, largest first, with their sizes."""
        large = sorted((p for p in self.parts if self.parts[p] >= self.total / 10), key=self.parts.get, reverse=True)
        return "; ".join(f"{self.what.get(p, p)}: {size(self.parts[p])}" for p in large)


def size(count: float) -> str:
    """Bytes in GiB (MiB below 1 GiB), three significant digits (whole GiB with separators from 1,000 GiB)."""
    if count >= 1000 * GIB:
        return f"{count / GIB:,.0f} GiB"
    return f"{count / GIB:.3g} GiB" if count >= GIB else f"{count / MIB:.3g} MiB"


def round_clients(training) -> int:
    """S, the clients taking part in a round of ``training`` (a ``TrainingConfig``): K under full participation,
    ``clients_per_round`` under uniform or replacement, the expected count plus six standard deviations under
    Poisson (a round with more is rare beyond concern)."""
    if training.participation == "full":
        return training.clients
    if training.participation in ("uniform", "replacement"):
        return training.clients_per_round
    mean = training.sample_rate * training.clients
    return min(training.clients, math.ceil(mean + 6 * math.sqrt(mean) + 1))


CHUNK_BUDGET_CPU = 2 * GIB  # what one batched chunk of clients may hold on the CPU
CHUNK_BUDGET_GPU = 0.5  # ... on a GPU: this fraction of its free memory


def client_chunk(model: nn.Module, input_shape: tuple[int, ...], batch_size: int, device: torch.device) -> int:
    """How many clients one batched program trains (``training.client_chunk`` unset): those whose parameters in
    training (``TRAINING_PER_PARAMETER`` bytes each: parameters, optimiser state, gradients, their next values) and one step's activations (three float32 copies of B x A) fit
    ``CHUNK_BUDGET_CPU``, or ``CHUNK_BUDGET_GPU`` of the GPU's free memory; at least 1."""
    per_client = (trained_size(model) * TRAINING_PER_PARAMETER
                  + 3 * batch_size * activation_values(model, tuple(input_shape)) * _FLOAT)
    if device.type == "cuda":
        budget = torch.cuda.mem_get_info(device)[0] * CHUNK_BUDGET_GPU
    else:
        budget = CHUNK_BUDGET_CPU
    return max(1, int(budget // per_client))


def _steps(training, client_sizes: list[int] | None) -> int:
    """T, the local steps of a round's longest client."""
    if training.local_epochs is None or not client_sizes:
        return training.tau
    return training.local_epochs * math.ceil(max(client_sizes) / training.batch_size)


def estimate_memory(training, *, num_params: int, input_numel: int, activations: int, dataset_bytes: int,
                    dp_sgd: bool = False, canaries: int = 0, client_sizes: list[int] | None = None,
                    chunk: int | None = None) -> MemoryEstimate:
    """The memory of a run of ``training`` (a ``TrainingConfig``) on a model of ``num_params`` parameters whose
    examples hold ``input_numel`` values and ``activations`` activation values, on ``dataset_bytes`` of data; with
    ``dp_sgd``, per-example gradients; with ``canaries`` canary clients, their rows in each round's protocol;
    ``client_sizes``: the clients' example counts (local epochs' steps); ``chunk``: clients trained at once."""
    t, p = training, num_params
    s = round_clients(t)
    at_once = min(s, chunk or s)
    steps = _steps(t, client_sizes)
    slots = 0 if t.optimizer_state == "reset" else (2 if t.optimizer == "adam" else 1)
    batch = t.batch_size + (math.ceil(6 * math.sqrt(t.batch_size)) + 1 if dp_sgd else 0)  # Poisson, padded
    samples = s * steps * batch
    rows = s + (math.ceil(canaries * min(1.0, s / t.clients)) if canaries else 0)
    parts = {
        "data": dataset_bytes,
        "client state": slots * t.clients * p * _FLOAT,
        "round": (rows * p * (PER_CLIENT_PARAMETER - TRAINING_PER_PARAMETER) + at_once * p * TRAINING_PER_PARAMETER
                  + (2 * at_once * batch * p * _FLOAT if dp_sgd else 0)),
        "batches": samples * 3 * _INDEX + at_once * batch * (input_numel * _FLOAT + _INDEX),
        "activations": 3 * at_once * batch * activations * _FLOAT,
        "checkpoints": len(t.checkpoints) * (3 * s * p * _FLOAT + samples * _INDEX),
        "runtime": RUNTIME,
    }
    what = {
        "data": "the dataset",
        "client state": f"clients {t.clients:,} x {p:,} parameters x {slots} optimiser slot(s)",
        "round": f"a round's {rows:,} clients x {p:,} parameters in training and the protocol",
        "batches": f"a round's {s:,} x {steps:,} x {batch:,} sample indices",
        "activations": f"a step's {at_once:,} x {batch:,} examples x {activations:,} activations",
        "checkpoints": f"{len(t.checkpoints)} checkpoint rounds' observations",
        "runtime": "the libraries",
    }
    return MemoryEstimate(parts, what)


def activation_values(model: nn.Module, input_shape: tuple[int, ...]) -> int:
    """A, the values one example's forward pass produces: its input and every leaf module's output (the example
    made on the model's device: ``model_device``)."""
    counts = [math.prod(input_shape)]
    hooks = [m.register_forward_hook(lambda _m, _i, out: counts.append(out.numel()))
             for m in model.modules() if not list(m.children())]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(torch.zeros(1, *input_shape, device=model_device(model)))
    finally:
        model.train(was_training)
        for hook in hooks:
            hook.remove()
    return sum(counts)


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (or buffer); the CPU for a model with neither."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return torch.device("cpu") if first is None else first.device


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (``os.sysconf``), or its cgroup's memory limit where lower; None
    where neither can be read."""
    found = []
    try:
        found.append(os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE"))
    except (AttributeError, ValueError, OSError):
        pass
    for limit in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):  # cgroup v2, v1
        try:
            text = Path(limit).read_text().strip()
        except OSError:
            continue
        if text.isdigit():
            found.append(int(text))
    return min(found) if found else None


def check_memory(config, model: nn.Module, data, device: torch.device | None = None) -> MemoryEstimate | None:
    """Refuse, as one ConfigError line, a run of ``config`` (an ``AuditConfig``) on ``model`` and ``data`` (the
    split ``FederatedData``) trained on ``device`` (its chunk of clients: ``client_chunk``) whose estimate exceeds the
    memory limit; the estimate otherwise (None: not checked,
    Flower's backend or a machine whose memory cannot be read)."""
    if config.training.backend != "builtin":
        return None
    tensors = [t for split in (data.train, data.validation, data.test) for t in (split.x, split.y)]
    estimate = estimate_memory(
        config.training, num_params=trained_size(model),
        input_numel=math.prod(data.train.x.shape[1:]), activations=activation_values(model, data.train.x.shape[1:]),
        dataset_bytes=sum(t.numel() * t.element_size() for t in tensors), dp_sgd=config.dp_sgd.enabled,
        canaries=config.canary.canaries if config.canary.enabled else 0,
        client_sizes=[len(ix) for ix in data.client_indices],
        chunk=config.training.client_chunk or client_chunk(model, tuple(data.train.x.shape[1:]),
                                                           config.training.batch_size, device or torch.device("cpu")))
    given = config.limits.max_memory_gib
    limit = machine_memory() if given is None else given * GIB
    if limit is None or estimate.needed <= limit:
        return estimate
    source = "[limits] max_memory_gib" if given is not None else "this machine's memory"
    raise ConfigError(f"the run needs about {size(estimate.needed)} ({estimate.describe()}; x{SAFETY:g} for what is "
                      f"not modelled) but the memory limit is {size(limit)} ({source}); lower training.clients (or "
                      "clients_per_round), tau, batch_size or checkpoints, or raise [limits] max_memory_gib / "
                      "--max-memory")
