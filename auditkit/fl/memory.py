"""The memory a training run needs, estimated before it starts and checked against a limit that can be raised.

A run whose sizes are each allowed (``auditkit.config_bounds.SIZES``) can still need more memory than the machine
has: K clients' momentum, or one round's clients x tau x batch images drawn at once. Without this check such a run
dies on an allocation, or swaps, well after it started (issue 39). What the built-in simulator
(``auditkit.fl.simulation``) holds at a round's peak, for K clients, S of them in a round, P float32 model
parameters (the trained ones, ``auditkit.fl.params``: frozen parameters are held once, with the model), tau local
steps of B samples of D values and A activation values per example (S, and the rows a round sends with its canary
clients, are the largest of the run's own rounds, redrawn from its keyed streams: ``round_sizes``):

* the data: the dataset's tensors (train, validation, test) as split;
* the clients' state: K x P per optimiser slot (SGD's momentum, Adam's two moments) under
  ``optimizer_state = kept`` (``FederatedSimulation.client_state``), none under ``reset``;
* a round's batches: S x T x B sample indices (T: tau, or the largest client's local_epochs x ceil(n_k / B)),
  drawn at once (int64, three copies); their images are gathered one step of one chunk at a time;
* a round's clients: ``PER_CLIENT_PARAMETER`` bytes for each of their parameters: for the chunk in training its
  parameters, momentum, gradients and their next values (``train_clients_batched``), for every client of the
  round its trained parameters (each chunk written into the round's S x P as it ends), then the updates (in place), the bytes sent,
  the server view and a second view (DP-FedAvg's informed aggregate), four float32 copies at most: the protocols encode, decode, clip and
  measure the SNR one client at a time, so their float64 copies are one update's (``UplinkProtocol``,
  ``CentralNoiseProtocol``, ``mean_snr``); with DP-SGD also the per-example gradients, S x B x P twice; with canary
  clients (``[canary]``) their rows go through the protocol as well;
* a step's activations: S x B x A values, kept for the backward pass beside their gradients (three copies), for
  the ``client_chunk`` clients trained at once (``client_chunk``);
* the checkpoint rounds' observations: the server view, the messages and the true updates (three S x P float32)
  and the round's sample indices, kept for the attacks (the audit keeps only its inversion targets' rows:
  three targets x P);
* the interpreter, torch and the other libraries (``RUNTIME``).

The sum times ``SAFETY`` (what is not modelled: allocator slack, a protocol with a longer transcript) is compared
with the limit, ``[limits] max_memory_gib`` (``--max-memory``) or else the memory free to this run: what the
kernel reports available (``MemAvailable``; a cgroup's limit minus its usage where lower) plus what this process
already holds, measured when the check runs (each stage that can need much measures again: ``free_memory``). The sum without the data and the runtime is within a factor of 2 of the peak
resident memory measured for small real runs (``tests/auditkit/fl/test_memory.py``). Flower's backend is not
checked: its clients run in Ray's workers, whose resources Ray manages.
"""
from __future__ import annotations

import itertools
import math
import os
import shutil
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from auditkit.config_bounds import ConfigError
from auditkit.fl.local_training import blocks
from auditkit.fl.params import trained_size
from auditkit.fl.sampling import canary_coins, canary_rate, select_clients

__all__ = ["GIB", "MemoryEstimate", "STAGE_MEMORY", "activation_values", "available_memory", "check_memory",
           "client_chunk", "client_memory", "disk_room", "estimate_memory", "free_memory", "model_device", "one_example_pass",
           "PeakWatch", "peak_memory", "resident_memory", "round_clients", "round_rows", "round_sizes"]

GIB = 2**30
MIB = 2**20
SAFETY = 1.5
PER_CLIENT_PARAMETER = 32  # bytes per parameter of a client taking part in a round (module docstring)
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


def round_rows(training, canaries: int) -> int:
    """The clients, real and canary (``[canary]``: each with its own coin at the run's rate,
    ``auditkit.fl.sampling.canary_rate``), whose updates a round of ``training`` sends through its protocol: all
    of them under full participation; under Poisson the Binomial(K + m, q) count of both together, its mean plus six
    standard deviations; else S and the canaries' Binomial(m, S / K) bound."""
    if training.participation == "full":
        return training.clients + canaries
    if training.participation == "poisson":
        return _binomial_bound(training.clients + canaries, training.sample_rate)
    rate = min(1.0, training.clients_per_round / training.clients)
    return round_clients(training) + (_binomial_bound(canaries, rate) if canaries else 0)


DRAWN_SCHEDULE = 10**8  # the most coins (rounds x (K + m)) redrawn to know each round's size; beyond: the bounds


def round_sizes(training, canaries: int, seed: int | None) -> tuple[int, int]:
    """(S, R): the most real clients of any round of ``training`` and the most rows, real and canary, any round
    sends through its protocol, from the run's own keyed draws (``select_clients``, ``canary_coins``: the same
    calls the simulation and ``CanaryClients`` make, so the schedule is the run's, not a bound); every canary whose
    coin comes up is counted (under ADD_OR_REMOVE_ONE only the included ones send). Where drawing them would take
    more than ``DRAWN_SCHEDULE`` coins, or without a ``seed``: ``round_clients`` and ``round_rows``'s bounds."""
    t = training
    if seed is None or t.participation == "full" or t.rounds * (t.clients + canaries) > DRAWN_SCHEDULE:
        return round_clients(t), max(round_clients(t), round_rows(t, canaries))
    rate = canary_rate(t.participation, t.clients, t.sample_rate, t.clients_per_round)
    real, rows = 0, 0
    for round_ in range(1, t.rounds + 1):
        sent = len(select_clients(t.clients, round_, seed=seed, participation=t.participation,
                                  clients_per_round=t.clients_per_round, sample_rate=t.sample_rate))
        coins = int(canary_coins(seed, canaries, rate, round_).sum()) if canaries else 0
        real, rows = max(real, sent), max(rows, sent + coins)
    return max(real, 1), max(rows, 1)


def _binomial_bound(count: int, rate: float) -> int:
    """The mean of Binomial(count, rate) plus six standard deviations (and one), at most ``count``."""
    mean = count * rate
    return min(count, math.ceil(mean + 6 * math.sqrt(mean * (1 - rate)) + 1))


CHUNK_BUDGET_CPU = 2 * GIB  # what one batched chunk of clients may hold on the CPU
CHUNK_BUDGET_GPU = 0.5  # ... on a GPU: this fraction of its free memory
STAGE_MEMORY = 4 * GIB  # what a stage assumes it may use where the free memory cannot be read


def client_memory(model: nn.Module, input_shape: tuple[int, ...], batch_size: int) -> int:
    """The bytes one client in batched training holds: its parameters in training (``TRAINING_PER_PARAMETER``
    bytes each: parameters, optimiser state, gradients, their next values) and one step's activations (three
    float32 copies of B x A)."""
    return (trained_size(model) * TRAINING_PER_PARAMETER
            + 3 * batch_size * activation_values(model, tuple(input_shape)) * _FLOAT)


def client_chunk(model: nn.Module, input_shape: tuple[int, ...], batch_size: int, device: torch.device) -> int:
    """How many clients one batched program trains (``training.client_chunk`` unset): those whose memory
    (``client_memory``) fits ``CHUNK_BUDGET_CPU``, or ``CHUNK_BUDGET_GPU`` of the GPU's free memory; at least 1.
    On the CPU the budget is fixed, not the free memory: the chunk changes a client's last bits, and the same
    config must give the same numbers on a busy machine (the memory check refuses a chunk that does not fit)."""
    per_client = client_memory(model, input_shape, batch_size)
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
                    chunk: int | None = None, seed: int | None = None, kept_rows: int | None = None) -> MemoryEstimate:
    """The memory of a run of ``training`` (a ``TrainingConfig``) on a model of ``num_params`` parameters whose
    examples hold ``input_numel`` values and ``activations`` activation values, on ``dataset_bytes`` of data; with
    ``dp_sgd``, per-example gradients; with ``canaries`` canary clients, their rows in each round's protocol;
    ``client_sizes``: the clients' example counts (local epochs' steps); ``chunk``: clients trained at once;
    ``seed``: the run's, whose draws give each round's size (``round_sizes``; None: the Binomial bounds);
    ``kept_rows``: the clients whose rows a checkpoint's observation keeps past its round (None: all S of them;
    the audit keeps the inversion's targets, ``FederatedSimulation.run``'s ``on_checkpoint``)."""
    t, p = training, num_params
    s, rows = round_sizes(t, canaries, seed)
    at_once = min(s, chunk or s) if t.batched else 1  # the sequential path trains one client at a time
    steps = _steps(t, client_sizes)
    slots = 0 if t.optimizer_state == "reset" else (2 if t.optimizer == "adam" else 1)
    batch = t.batch_size + (math.ceil(6 * math.sqrt(t.batch_size)) + 1 if dp_sgd else 0)  # Poisson, padded
    samples = s * steps * batch
    parts = {
        "data": dataset_bytes,
        "client state": slots * t.clients * p * _FLOAT,
        "round": (rows * p * (PER_CLIENT_PARAMETER - TRAINING_PER_PARAMETER) + at_once * p * TRAINING_PER_PARAMETER
                  + (2 * at_once * batch * p * _FLOAT if dp_sgd else 0)),
        "batches": samples * 3 * _INDEX + at_once * batch * (input_numel * _FLOAT + _INDEX),
        "activations": 3 * at_once * batch * activations * _FLOAT,
        "checkpoints": len(t.checkpoints) * (3 * min(s, s if kept_rows is None else kept_rows) * p * _FLOAT
                                             + samples * _INDEX),
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


def activation_values(model: nn.Module, input_shape: tuple[int, ...], *, recompute: bool = False) -> int:
    """A, the values one example's forward pass keeps for the backward pass: its input and every leaf module's
    output; with ``recompute`` (activation checkpointing, ``auditkit.fl.local_training.recomputed_blocks``) the
    outputs of the leaves outside the recomputed blocks, each block's output, and the largest block's own."""
    leaves = [m for m in model.modules() if not list(m.children())]
    chosen = blocks(model) if recompute else []
    owner = {id(leaf): i for i, block in enumerate(chosen) for leaf in block.modules()}
    outside, inside = [math.prod(input_shape)], [0] * len(chosen)

    def count(module: nn.Module, _inputs: Any, out: Any) -> None:
        if id(module) in owner and module not in chosen:
            inside[owner[id(module)]] += out.numel()
        else:
            outside.append(out.numel())
    one_example_pass(model, input_shape, leaves + [b for b in chosen if b not in leaves], count)
    return sum(outside) + max(inside, default=0)


def one_example_pass(model: nn.Module, input_shape: tuple[int, ...], modules: list[nn.Module],
                     hook: Callable[[nn.Module, tuple, Any], None]) -> None:
    """One zero example of ``input_shape`` through ``model`` in eval mode without gradients (no statistic moves;
    made on the model's device: ``model_device``), ``hook`` seeing each of ``modules``' inputs and output; the
    model's mode restored."""
    hooks = [m.register_forward_hook(hook) for m in modules]
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            model(torch.zeros(1, *input_shape, device=model_device(model)))
    finally:
        model.train(was_training)
        for handle in hooks:
            handle.remove()


def model_device(model: nn.Module) -> torch.device:
    """The device of the model's first parameter (or buffer); the CPU for a model with neither."""
    first = next(itertools.chain(model.parameters(), model.buffers()), None)
    return torch.device("cpu") if first is None else first.device


def _read_number(path: str) -> int | None:
    try:
        text = Path(path).read_text().strip()
    except OSError:
        return None
    return int(text) if text.isdigit() else None


def available_memory() -> int | None:
    """The bytes other processes leave free now: ``MemAvailable`` (``/proc/meminfo``), or the cgroup's limit minus
    its usage where lower (v2 ``memory.max`` - ``memory.current``, v1 ``limit_in_bytes`` - ``usage_in_bytes``);
    None where none can be read."""
    found = []
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                found.append(int(line.split()[1]) * 1024)
    except (OSError, ValueError, IndexError):
        pass
    for limit, usage in (("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory.current"),
                         ("/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory/memory.usage_in_bytes")):
        cap, used = _read_number(limit), _read_number(usage)
        if cap is not None and used is not None:
            found.append(max(0, cap - used))
    return min(found) if found else None


def resident_memory() -> int:
    """The bytes this process holds resident now (``/proc/self/statm``; 0 where it cannot be read)."""
    try:
        return int(Path("/proc/self/statm").read_text().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError, IndexError):
        return 0


def peak_memory() -> int | None:
    """This process's peak resident memory since it started (``VmHWM``), in bytes; None where it cannot be read."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return None


class PeakWatch:
    """The peak resident memory of one stretch of work (a stage), leaving the process's high-water mark as it is.

    Resetting the mark (``/proc/self/clear_refs``) would give each stage's peak exactly but makes ``getrusage`` and
    GNU time's "maximum resident set size" read the last stage's. Instead: where the mark rose during the stretch,
    the stretch set the process's new peak and the mark is it, exactly; else the largest resident size sampled every
    ``INTERVAL`` seconds by a thread (a lower bound, which misses only peaks shorter than the interval)."""

    INTERVAL = 0.01

    def __init__(self) -> None:
        self._mark = peak_memory()
        self._highest = resident_memory()
        self._done = threading.Event()
        self._sampler = threading.Thread(target=self._sample, name="auditkit-peak", daemon=True)

    def __enter__(self) -> PeakWatch:
        self._sampler.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._sampler.join()
        self._highest = max(self._highest, resident_memory())

    def _sample(self) -> None:
        while not self._done.wait(self.INTERVAL):
            self._highest = max(self._highest, resident_memory())

    @property
    def peak(self) -> int | None:
        """Bytes: the stretch's peak resident memory; None where neither the mark nor the resident size is known."""
        mark = peak_memory()
        if mark is not None and self._mark is not None and mark > self._mark:
            return mark
        return self._highest or None


RAM_FILESYSTEMS = frozenset({"tmpfs", "ramfs", "devtmpfs"})  # a file there takes memory, not disk


def disk_room(folder: str) -> int:
    """The bytes a file in ``folder`` may take without taking memory: what its file system has free
    (``shutil.disk_usage``), 0 where that file system lives in memory (tmpfs, ramfs: the longest mount point of
    ``/proc/self/mounts`` above ``folder``) or cannot be read."""
    place = os.path.realpath(folder)
    mounted, kind = "", None
    try:
        for line in Path("/proc/self/mounts").read_text().splitlines():
            fields = line.split()
            point = fields[1].replace("\\040", " ")
            inside = place == point or place.startswith(point.rstrip("/") + "/")
            if inside and len(point) >= len(mounted):
                mounted, kind = point, fields[2]
    except (OSError, IndexError):
        pass
    if kind in RAM_FILESYSTEMS:
        return 0
    try:
        return shutil.disk_usage(place).free
    except OSError:
        return 0


def free_memory(max_memory_gib: float | None) -> tuple[int | None, str]:
    """The bytes this process may still allocate, and where the figure comes from: under ``[limits]
    max_memory_gib`` that limit minus what the process holds, else ``available_memory`` (None: unknown)."""
    if max_memory_gib is not None:
        return max(0, int(max_memory_gib * GIB) - resident_memory()), "[limits] max_memory_gib less what is held"
    return available_memory(), "free on this machine"


def check_memory(config, model: nn.Module, data, device: torch.device | None = None,
                 kept_rows: int | None = None) -> MemoryEstimate | None:
    """Refuse, as one ConfigError line, a run of ``config`` (an ``AuditConfig``) on ``model`` and ``data`` (the
    split ``FederatedData``) trained on ``device`` (its chunk of clients: ``client_chunk``), keeping ``kept_rows``
    clients of each checkpoint (``estimate_memory``), whose estimate exceeds the
    memory limit; the estimate otherwise (None: not checked,
    Flower's backend or a machine whose memory cannot be read)."""
    if config.training.backend != "builtin":
        return None
    tensors = [t for split in (data.train, data.validation, data.test) for t in (split.x, split.y)]
    estimate = estimate_memory(
        config.training, num_params=trained_size(model),
        input_numel=math.prod(data.train.x.shape[1:]),
        activations=activation_values(model, data.train.x.shape[1:], recompute=config.training.recompute_activations),
        dataset_bytes=sum(t.numel() * t.element_size() for t in tensors), dp_sgd=config.dp_sgd.enabled,
        canaries=config.canary.canaries if config.canary.enabled else 0,
        client_sizes=[len(ix) for ix in data.client_indices], seed=config.seed, kept_rows=kept_rows,
        chunk=config.training.client_chunk or client_chunk(model, tuple(data.train.x.shape[1:]),
                                                           config.training.batch_size, device or torch.device("cpu")))
    given = config.limits.max_memory_gib
    available = available_memory()
    limit = given * GIB if given is not None else None if available is None else available + resident_memory()
    if limit is None or estimate.needed <= limit:
        return estimate
    source = ("[limits] max_memory_gib" if given is not None
              else "free on this machine, with what this process holds")
    raise ConfigError(f"the run needs about {size(estimate.needed)} ({estimate.describe()}; x{SAFETY:g} for what is "
                      f"not modelled) but the memory limit is {size(limit)} ({source}); lower training.clients (or "
                      "clients_per_round), tau, batch_size, client_chunk or checkpoints, or raise [limits] max_memory_gib / "
                      "--max-memory")
